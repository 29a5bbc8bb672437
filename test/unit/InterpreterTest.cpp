//===- InterpreterTest.cpp - forward semantics of the nn interpreter ------===//
//
// Each case runs a small nn function through autopar::interpret and checks
// the result against values computed by hand (or by a closed formula where
// hand values would be unreadable).
//
//===----------------------------------------------------------------------===//

#include "test/lib/Interpreter.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using autopar::HostValue;

namespace {

HostValue hv(std::vector<int64_t> shape, std::vector<double> data) {
  return HostValue(shape, std::move(data));
}

/// Parses MLIR text and interprets its function @f.
class Interp : public ::testing::Test {
protected:
  Interp() {
    ctx.loadDialect<autopar::nn::NNDialect, mlir::func::FuncDialect>();
  }

  /// Runs @f of `text` on `args`; the test fails (and the result is empty)
  /// if parsing or interpretation fails.
  std::vector<HostValue> run(const std::string &text,
                             std::vector<HostValue> args = {}) {
    mlir::FailureOr<std::vector<HostValue>> r = tryRun(text, args);
    if (failed(r)) {
      ADD_FAILURE() << "interpretation failed: " << diagnostics;
      return {};
    }
    return *r;
  }

  /// Like run, but returns failure instead of failing the test; the
  /// diagnostics land in `diagnostics`.
  mlir::FailureOr<std::vector<HostValue>>
  tryRun(const std::string &text, const std::vector<HostValue> &args) {
    diagnostics.clear();
    mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
      diagnostics += d.str() + "\n";
      return mlir::success();
    });
    module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    if (!module) {
      ADD_FAILURE() << "parse failed: " << diagnostics;
      return mlir::failure();
    }
    auto func = module->lookupSymbol<mlir::func::FuncOp>("f");
    if (!func) {
      ADD_FAILURE() << "no @f";
      return mlir::failure();
    }
    return autopar::interpret(func, args);
  }

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string diagnostics;
};

void expectValue(const HostValue &actual, std::vector<int64_t> shape,
                 std::vector<double> data, double tol = 1e-12) {
  EXPECT_EQ(std::vector<int64_t>(actual.shape.begin(), actual.shape.end()),
            shape);
  ASSERT_EQ(actual.data.size(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    if (std::isnan(data[i]))
      EXPECT_TRUE(std::isnan(actual.data[i])) << "element " << i;
    else if (std::isinf(data[i]))
      EXPECT_EQ(actual.data[i], data[i]) << "element " << i;
    else
      EXPECT_NEAR(actual.data[i], data[i], tol) << "element " << i;
  }
}

TEST_F(Interp, Constants) {
  auto r = run(R"mlir(
    func.func @f() -> (tensor<2xf32>, tensor<3xi64>, tensor<2x2xi1>,
                       tensor<1x2xf16>, tensor<2x2xf64>, tensor<2xui8>) {
      %0 = nn.constant dense<1.5> : tensor<2xf32>
      %1 = nn.constant dense<[1, -2, 3]> : tensor<3xi64>
      %2 = nn.constant dense<[[true, false], [false, true]]> : tensor<2x2xi1>
      %3 = nn.constant dense<[[1.0, 2.5]]> : tensor<1x2xf16>
      %4 = nn.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf64>
      %5 = nn.constant dense<[255, 1]> : tensor<2xui8>
      return %0, %1, %2, %3, %4, %5 : tensor<2xf32>, tensor<3xi64>, tensor<2x2xi1>,
                                      tensor<1x2xf16>, tensor<2x2xf64>, tensor<2xui8>
    })mlir");
  ASSERT_EQ(r.size(), 6u);
  expectValue(r[0], {2}, {1.5, 1.5});
  expectValue(r[1], {3}, {1, -2, 3});
  expectValue(r[2], {2, 2}, {1, 0, 0, 1});
  expectValue(r[3], {1, 2}, {1.0, 2.5});
  expectValue(r[4], {2, 2}, {1, 2, 3, 4});
  expectValue(r[5], {2}, {255, 1});
}

TEST_F(Interp, UnaryFloat) {
  std::vector<double> x = {-1.0, 0.0, 0.5, 4.0};
  auto r = run(R"mlir(
    func.func @f(%x: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>,
        tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>,
        tensor<4xf64>, tensor<4xf64>) {
      %0 = nn.neg %x : tensor<4xf64>
      %1 = nn.sqrt %x : tensor<4xf64>
      %2 = nn.erf %x : tensor<4xf64>
      %3 = nn.tanh %x : tensor<4xf64>
      %4 = nn.exp %x : tensor<4xf64>
      %5 = nn.log %x : tensor<4xf64>
      %6 = nn.reciprocal %x : tensor<4xf64>
      %7 = nn.relu %x : tensor<4xf64>
      %8 = nn.sigmoid %x : tensor<4xf64>
      %9 = nn.identity %x : tensor<4xf64>
      return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : tensor<4xf64>, tensor<4xf64>,
          tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>,
          tensor<4xf64>, tensor<4xf64>, tensor<4xf64>
    })mlir",
               {hv({4}, x)});
  ASSERT_EQ(r.size(), 10u);
  double nan = std::nan("");
  double inf = INFINITY;
  expectValue(r[0], {4}, {1, 0, -0.5, -4});
  expectValue(r[1], {4}, {nan, 0, std::sqrt(0.5), 2});
  expectValue(r[2], {4},
              {-0.8427007929497149, 0, 0.5204998778130465, 0.9999999845827421});
  expectValue(r[3], {4},
              {-0.7615941559557649, 0, 0.46211715726000974, 0.999329299739067});
  expectValue(r[4], {4}, {1 / M_E, 1, 1.6487212707001282, 54.598150033144236});
  expectValue(r[5], {4}, {nan, -inf, -M_LN2, std::log(4.0)});
  expectValue(r[6], {4}, {-1, inf, 2, 0.25});
  expectValue(r[7], {4}, {0, 0, 0.5, 4});
  expectValue(
      r[8], {4},
      {0.2689414213699951, 0.5, 0.6224593312018546, 0.9820137900379085});
  expectValue(r[9], {4}, x);
}

TEST_F(Interp, UnaryInteger) {
  auto r = run(R"mlir(
    func.func @f(%x: tensor<3xi32>) -> (tensor<3xi32>, tensor<3xi32>) {
      %0 = nn.neg %x : tensor<3xi32>
      %1 = nn.relu %x : tensor<3xi32>
      return %0, %1 : tensor<3xi32>, tensor<3xi32>
    })mlir",
               {hv({3}, {-2, 0, 5})});
  ASSERT_EQ(r.size(), 2u);
  expectValue(r[0], {3}, {2, 0, -5});
  expectValue(r[1], {3}, {0, 0, 5});
}

TEST_F(Interp, Gelu) {
  auto r = run(R"mlir(
    func.func @f(%x: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
      %0 = nn.gelu %x approximate(none) : tensor<3xf64>
      %1 = nn.gelu %x approximate(tanh) : tensor<3xf64>
      return %0, %1 : tensor<3xf64>, tensor<3xf64>
    })mlir",
               {hv({3}, {-1, 0, 1})});
  ASSERT_EQ(r.size(), 2u);
  // x * Phi(x): Phi(1) = 0.8413447460685429.
  expectValue(r[0], {3}, {-0.15865525393145707, 0, 0.8413447460685429});
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) at 1: tanh(0.8335...).
  double t = std::tanh(std::sqrt(2 / M_PI) * 1.044715);
  expectValue(r[1], {3}, {-0.5 * (1 - t), 0, 0.5 * (1 + t)});
}

TEST_F(Interp, BroadcastingBinary) {
  auto r = run(R"mlir(
    func.func @f(%a: tensor<2x3xf64>, %b: tensor<3xf64>, %c: tensor<3x1xf64>,
                 %d: tensor<1x2xf64>, %s: tensor<f64>)
        -> (tensor<2x3xf64>, tensor<2x3xf64>, tensor<3x2xf64>, tensor<2x3xf64>,
            tensor<3xf64>) {
      %0 = nn.add %a, %b : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>
      %1 = nn.sub %b, %a : (tensor<3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
      %2 = nn.mul %c, %d : (tensor<3x1xf64>, tensor<1x2xf64>) -> tensor<3x2xf64>
      %3 = nn.div %a, %s : (tensor<2x3xf64>, tensor<f64>) -> tensor<2x3xf64>
      %4 = nn.pow %s, %b : (tensor<f64>, tensor<3xf64>) -> tensor<3xf64>
      return %0, %1, %2, %3, %4 : tensor<2x3xf64>, tensor<2x3xf64>, tensor<3x2xf64>,
                                  tensor<2x3xf64>, tensor<3xf64>
    })mlir",
               {hv({2, 3}, {1, 2, 3, 4, 5, 6}), hv({3}, {10, 20, 30}),
                hv({3, 1}, {1, 2, 3}), hv({1, 2}, {10, 100}), hv({}, {2})});
  ASSERT_EQ(r.size(), 5u);
  expectValue(r[0], {2, 3}, {11, 22, 33, 14, 25, 36});
  expectValue(r[1], {2, 3}, {9, 18, 27, 6, 15, 24});
  expectValue(r[2], {3, 2}, {10, 100, 20, 200, 30, 300});
  expectValue(r[3], {2, 3}, {0.5, 1, 1.5, 2, 2.5, 3});
  expectValue(r[4], {3}, {1024, 1048576, 1073741824});
}

TEST_F(Interp, IntegerBinaryTruncates) {
  auto r = run(R"mlir(
    func.func @f(%a: tensor<4xi64>, %b: tensor<4xi64>)
        -> (tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>) {
      %0 = nn.div %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
      %1 = nn.add %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
      %2 = nn.sub %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
      %3 = nn.mul %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
      return %0, %1, %2, %3 : tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>
    })mlir",
               {hv({4}, {7, -7, 7, -7}), hv({4}, {2, 2, -2, -2})});
  ASSERT_EQ(r.size(), 4u);
  expectValue(r[0], {4}, {3, -3, -3, 3});
  expectValue(r[1], {4}, {9, -5, 5, -9});
  expectValue(r[2], {4}, {5, -9, 9, -5});
  expectValue(r[3], {4}, {14, -14, -14, 14});
}

TEST_F(Interp, IntegerDivisionByZeroFails) {
  auto r = tryRun(R"mlir(
    func.func @f(%a: tensor<2xi32>, %b: tensor<2xi32>) -> tensor<2xi32> {
      %0 = nn.div %a, %b : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
      return %0 : tensor<2xi32>
    })mlir",
                  {hv({2}, {1, 2}), hv({2}, {1, 0})});
  EXPECT_TRUE(failed(r));
  EXPECT_NE(diagnostics.find("divides an integer by zero"), std::string::npos)
      << diagnostics;
}

TEST_F(Interp, CompareAndWhere) {
  auto r = run(R"mlir(
    func.func @f(%a: tensor<2x2xf64>, %b: tensor<2xf64>, %x: tensor<f64>)
        -> (tensor<2x2xi1>, tensor<2x2xi1>, tensor<2x2xi1>, tensor<2x2xi1>,
            tensor<2x2xi1>, tensor<2x2xi1>, tensor<2x2xf64>) {
      %0 = nn.compare eq, %a, %b : (tensor<2x2xf64>, tensor<2xf64>) -> tensor<2x2xi1>
      %1 = nn.compare ne, %a, %b : (tensor<2x2xf64>, tensor<2xf64>) -> tensor<2x2xi1>
      %2 = nn.compare lt, %a, %b : (tensor<2x2xf64>, tensor<2xf64>) -> tensor<2x2xi1>
      %3 = nn.compare le, %a, %b : (tensor<2x2xf64>, tensor<2xf64>) -> tensor<2x2xi1>
      %4 = nn.compare gt, %a, %b : (tensor<2x2xf64>, tensor<2xf64>) -> tensor<2x2xi1>
      %5 = nn.compare ge, %a, %b : (tensor<2x2xf64>, tensor<2xf64>) -> tensor<2x2xi1>
      %6 = nn.where %2, %a, %x : (tensor<2x2xi1>, tensor<2x2xf64>, tensor<f64>) -> tensor<2x2xf64>
      return %0, %1, %2, %3, %4, %5, %6 : tensor<2x2xi1>, tensor<2x2xi1>, tensor<2x2xi1>,
          tensor<2x2xi1>, tensor<2x2xi1>, tensor<2x2xi1>, tensor<2x2xf64>
    })mlir",
               {hv({2, 2}, {1, 5, 3, 2}), hv({2}, {1, 4}), hv({}, {-9})});
  ASSERT_EQ(r.size(), 7u);
  expectValue(r[0], {2, 2}, {1, 0, 0, 0});
  expectValue(r[1], {2, 2}, {0, 1, 1, 1});
  expectValue(r[2], {2, 2}, {0, 0, 0, 1});
  expectValue(r[3], {2, 2}, {1, 0, 0, 1});
  expectValue(r[4], {2, 2}, {0, 1, 1, 0});
  expectValue(r[5], {2, 2}, {1, 1, 1, 0});
  expectValue(r[6], {2, 2}, {-9, -9, -9, 2});
}

TEST_F(Interp, WhereBroadcastsCondition) {
  auto r = run(R"mlir(
    func.func @f(%c: tensor<2x1xi1>, %a: tensor<3xf64>, %b: tensor<2x3xf64>)
        -> tensor<2x3xf64> {
      %0 = nn.where %c, %a, %b : (tensor<2x1xi1>, tensor<3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
      return %0 : tensor<2x3xf64>
    })mlir",
               {hv({2, 1}, {1, 0}), hv({3}, {1, 2, 3}),
                hv({2, 3}, {10, 20, 30, 40, 50, 60})});
  ASSERT_EQ(r.size(), 1u);
  expectValue(r[0], {2, 3}, {1, 2, 3, 40, 50, 60});
}

TEST_F(Interp, Cast) {
  auto r = run(
      R"mlir(
    func.func @f(%x: tensor<4xf64>, %i: tensor<2xi64>, %b: tensor<2xi1>)
        -> (tensor<4xi32>, tensor<4xi1>, tensor<4xf32>, tensor<2xi8>, tensor<2xf32>,
            tensor<2xi64>) {
      %0 = nn.cast %x : tensor<4xf64> to tensor<4xi32>
      %1 = nn.cast %x : tensor<4xf64> to tensor<4xi1>
      %2 = nn.cast %x : tensor<4xf64> to tensor<4xf32>
      %3 = nn.cast %i : tensor<2xi64> to tensor<2xi8>
      %4 = nn.cast %b : tensor<2xi1> to tensor<2xf32>
      %5 = nn.cast %b : tensor<2xi1> to tensor<2xi64>
      return %0, %1, %2, %3, %4, %5 : tensor<4xi32>, tensor<4xi1>, tensor<4xf32>,
          tensor<2xi8>, tensor<2xf32>, tensor<2xi64>
    })mlir",
      {hv({4}, {1.7, -1.7, 0.0, 2.5}), hv({2}, {300, -129}), hv({2}, {1, 0})});
  ASSERT_EQ(r.size(), 6u);
  expectValue(r[0], {4}, {1, -1, 0, 2});
  expectValue(r[1], {4}, {1, 1, 0, 1});
  // Everything is a double: f32 keeps the double value.
  expectValue(r[2], {4}, {1.7, -1.7, 0.0, 2.5}, 0);
  // Narrowing wraps like C++: 300 -> 44, -129 -> 127.
  expectValue(r[3], {2}, {44, 127});
  expectValue(r[4], {2}, {1, 0});
  expectValue(r[5], {2}, {1, 0});
}

TEST_F(Interp, Reductions) {
  // x[i][j][k] = 12 i + 4 j + k on [2, 3, 4].
  std::vector<double> x(24);
  for (int i = 0; i < 24; ++i)
    x[i] = i;
  auto r = run(R"mlir(
    func.func @f(%x: tensor<2x3x4xf64>)
        -> (tensor<2x1x4xf64>, tensor<3xf64>, tensor<2x3x1xf64>, tensor<4xf64>,
            tensor<f64>, tensor<1x1x1xf64>) {
      %0 = nn.reduce_sum %x {axes = array<i64: 1>, keepdims = true} : tensor<2x3x4xf64> -> tensor<2x1x4xf64>
      %1 = nn.reduce_sum %x {axes = array<i64: 0, 2>, keepdims = false} : tensor<2x3x4xf64> -> tensor<3xf64>
      %2 = nn.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : tensor<2x3x4xf64> -> tensor<2x3x1xf64>
      %3 = nn.reduce_max %x {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3x4xf64> -> tensor<4xf64>
      %4 = nn.reduce_mean %x {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf64> -> tensor<f64>
      %5 = nn.reduce_max %x {axes = array<i64: 0, 1, 2>, keepdims = true} : tensor<2x3x4xf64> -> tensor<1x1x1xf64>
      return %0, %1, %2, %3, %4, %5 : tensor<2x1x4xf64>, tensor<3xf64>, tensor<2x3x1xf64>,
          tensor<4xf64>, tensor<f64>, tensor<1x1x1xf64>
    })mlir",
               {hv({2, 3, 4}, x)});
  ASSERT_EQ(r.size(), 6u);
  expectValue(r[0], {2, 1, 4}, {12, 15, 18, 21, 48, 51, 54, 57});
  // Sum over i, k of 12 i + 4 j + k: 4 * 12 + 8 * 4 j... = 60 + 32 j.
  expectValue(r[1], {3}, {60, 92, 124});
  expectValue(r[2], {2, 3, 1}, {1.5, 5.5, 9.5, 13.5, 17.5, 21.5});
  expectValue(r[3], {4}, {20, 21, 22, 23});
  expectValue(r[4], {}, {11.5});
  expectValue(r[5], {1, 1, 1}, {23});
}

TEST_F(Interp, IntegerReductions) {
  auto r = run(R"mlir(
    func.func @f(%x: tensor<2x2xi64>) -> (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) {
      %0 = nn.reduce_mean %x {axes = array<i64: 1>, keepdims = false} : tensor<2x2xi64> -> tensor<2xi64>
      %1 = nn.reduce_sum %x {axes = array<i64: 1>, keepdims = false} : tensor<2x2xi64> -> tensor<2xi64>
      %2 = nn.reduce_max %x {axes = array<i64: 1>, keepdims = false} : tensor<2x2xi64> -> tensor<2xi64>
      return %0, %1, %2 : tensor<2xi64>, tensor<2xi64>, tensor<2xi64>
    })mlir",
               {hv({2, 2}, {3, 4, -3, -4})});
  ASSERT_EQ(r.size(), 3u);
  expectValue(r[0], {2}, {3, -3}); // 7 / 2 and -7 / 2 truncate toward zero
  expectValue(r[1], {2}, {7, -7});
  expectValue(r[2], {2}, {4, -3});
}

TEST_F(Interp, LayerNorm) {
  // Rows [1, 3] and [0, 4]: mean 2, variance 1 and 4, xhat [-1, 1] in both.
  auto r =
      run(R"mlir(
    func.func @f(%x: tensor<2x2xf64>, %g: tensor<2xf64>, %b: tensor<2xf64>)
        -> (tensor<2x2xf64>, tensor<2x2xf64>) {
      %0 = nn.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 0.0 : f64} : (tensor<2x2xf64>, tensor<2xf64>, tensor<2xf64>) -> tensor<2x2xf64>
      %1 = nn.layer_norm %x, %g {axis = 1 : i64, epsilon = 3.0 : f64} : (tensor<2x2xf64>, tensor<2xf64>) -> tensor<2x2xf64>
      return %0, %1 : tensor<2x2xf64>, tensor<2x2xf64>
    })mlir",
          {hv({2, 2}, {1, 3, 0, 4}), hv({2}, {1, 2}), hv({2}, {0.5, -0.5})});
  ASSERT_EQ(r.size(), 2u);
  expectValue(r[0], {2, 2}, {-0.5, 1.5, -0.5, 1.5});
  // epsilon 3: rstd 1/2 for row 0 (var 1), 1/sqrt(7) for row 1 (var 4).
  double s = 1 / std::sqrt(7.0);
  expectValue(r[1], {2, 2}, {-0.5, 1, -2 * s, 4 * s});
}

TEST_F(Interp, LayerNormOverTrailingDims) {
  // axis 1 of [2, 2, 2]: each batch of 4 values is one group.
  auto r =
      run(R"mlir(
    func.func @f(%x: tensor<2x2x2xf64>, %g: tensor<2x2xf64>) -> tensor<2x2x2xf64> {
      %0 = nn.layer_norm %x, %g {axis = 1 : i64, epsilon = 0.0 : f64} : (tensor<2x2x2xf64>, tensor<2x2xf64>) -> tensor<2x2x2xf64>
      return %0 : tensor<2x2x2xf64>
    })mlir",
          {hv({2, 2, 2}, {0, 0, 2, 2, 1, 1, 1, 5}), hv({2, 2}, {1, 2, 3, 4})});
  ASSERT_EQ(r.size(), 1u);
  // Group 0: mean 1, var 1 -> [-1, -1, 1, 1]. Group 1: mean 2, var 3.
  double s = 1 / std::sqrt(3.0);
  expectValue(r[0], {2, 2, 2},
              {-1, -2, 3, 4, -1 * s, -2 * s, -3 * s, 4 * 3 * s});
}

TEST_F(Interp, Softmax) {
  double l3 = std::log(3.0);
  auto r = run(R"mlir(
    func.func @f(%x: tensor<2x2xf64>) -> (tensor<2x2xf64>, tensor<2x2xf64>) {
      %0 = nn.softmax %x {axis = 1 : i64} : tensor<2x2xf64> -> tensor<2x2xf64>
      %1 = nn.softmax %x {axis = 0 : i64} : tensor<2x2xf64> -> tensor<2x2xf64>
      return %0, %1 : tensor<2x2xf64>, tensor<2x2xf64>
    })mlir",
               {hv({2, 2}, {1000, 1000 + l3, 1000 + l3, 1000})});
  ASSERT_EQ(r.size(), 2u);
  // Large values stay finite: the maximum is subtracted first.
  expectValue(r[0], {2, 2}, {0.25, 0.75, 0.75, 0.25});
  expectValue(r[1], {2, 2}, {0.25, 0.75, 0.75, 0.25});
}

TEST_F(Interp, SoftmaxCrossEntropy) {
  double l3 = std::log(3.0);
  // Row 0: p = [0.25, 0.75], label 1 -> -log 0.75; row 1: p = [0.75, 0.25],
  // label 1 -> -log 0.25; row 2 is ignored.
  auto r = run(R"mlir(
    func.func @f(%s: tensor<3x2xf64>, %l: tensor<3xi64>)
        -> (tensor<3xf64>, tensor<f64>, tensor<f64>) {
      %0 = nn.softmax_cross_entropy %s, %l reduction(none) {ignore_index = -100 : i64} : (tensor<3x2xf64>, tensor<3xi64>) -> tensor<3xf64>
      %1 = nn.softmax_cross_entropy %s, %l reduction(sum) {ignore_index = -100 : i64} : (tensor<3x2xf64>, tensor<3xi64>) -> tensor<f64>
      %2 = nn.softmax_cross_entropy %s, %l reduction(mean) {ignore_index = -100 : i64} : (tensor<3x2xf64>, tensor<3xi64>) -> tensor<f64>
      return %0, %1, %2 : tensor<3xf64>, tensor<f64>, tensor<f64>
    })mlir",
               {hv({3, 2}, {0, l3, l3, 0, 5, 7}), hv({3}, {1, 1, -100})});
  ASSERT_EQ(r.size(), 3u);
  double a = -std::log(0.75), b = -std::log(0.25);
  expectValue(r[0], {3}, {a, b, 0});
  expectValue(r[1], {}, {a + b});
  // mean divides by the 2 non-ignored labels, not by 3.
  expectValue(r[2], {}, {(a + b) / 2});
}

TEST_F(Interp, SoftmaxCrossEntropyAllIgnoredIsNaN) {
  auto r = run(R"mlir(
    func.func @f(%s: tensor<2x2xf64>, %l: tensor<2xi32>) -> (tensor<f64>, tensor<2x2xf64>) {
      %0 = nn.softmax_cross_entropy %s, %l reduction(mean) {ignore_index = 1 : i64} : (tensor<2x2xf64>, tensor<2xi32>) -> tensor<f64>
      %g = nn.constant dense<1.0> : tensor<f64>
      %1 = nn.softmax_cross_entropy_grad %s, %l, %g reduction(mean) {ignore_index = 1 : i64} : (tensor<2x2xf64>, tensor<2xi32>, tensor<f64>) -> tensor<2x2xf64>
      return %0, %1 : tensor<f64>, tensor<2x2xf64>
    })mlir",
               {hv({2, 2}, {1, 2, 3, 4}), hv({2}, {1, 1})});
  ASSERT_EQ(r.size(), 2u);
  expectValue(r[0], {}, {std::nan("")});
  expectValue(r[1], {2, 2}, {0, 0, 0, 0});
}

TEST_F(Interp, SoftmaxCrossEntropyBadLabelFails) {
  auto r = tryRun(R"mlir(
    func.func @f(%s: tensor<2x2xf64>, %l: tensor<2xi64>) -> tensor<f64> {
      %0 = nn.softmax_cross_entropy %s, %l reduction(mean) {ignore_index = 1 : i64} : (tensor<2x2xf64>, tensor<2xi64>) -> tensor<f64>
      return %0 : tensor<f64>
    })mlir",
                  {hv({2, 2}, {1, 2, 3, 4}), hv({2}, {1, -100})});
  EXPECT_TRUE(failed(r));
  EXPECT_NE(diagnostics.find("label -100 is outside [0, 2)"), std::string::npos)
      << diagnostics;
}

TEST_F(Interp, SoftmaxCrossEntropySpatial) {
  // scores [N=1, C=2, d=2]: element 0 has scores [0, ln 3], element 1
  // [ln 3, 0]; labels [1, 0] pick the likelier class both times.
  double l3 = std::log(3.0);
  auto r = run(R"mlir(
    func.func @f(%s: tensor<1x2x2xf64>, %l: tensor<1x2xi32>) -> (tensor<1x2xf64>, tensor<f64>) {
      %0 = nn.softmax_cross_entropy %s, %l reduction(none) : (tensor<1x2x2xf64>, tensor<1x2xi32>) -> tensor<1x2xf64>
      %1 = nn.softmax_cross_entropy %s, %l reduction(mean) : (tensor<1x2x2xf64>, tensor<1x2xi32>) -> tensor<f64>
      return %0, %1 : tensor<1x2xf64>, tensor<f64>
    })mlir",
               {hv({1, 2, 2}, {0, l3, l3, 0}), hv({1, 2}, {1, 0})});
  ASSERT_EQ(r.size(), 2u);
  double a = -std::log(0.75);
  expectValue(r[0], {1, 2}, {a, a});
  expectValue(r[1], {}, {a});
}

TEST_F(Interp, MatMul) {
  auto r = run(R"mlir(
    func.func @f(%a: tensor<2x3xf64>, %b: tensor<3x2xf64>, %v: tensor<3xf64>,
                 %w: tensor<2xf64>)
        -> (tensor<2x2xf64>, tensor<f64>, tensor<2xf64>, tensor<2xf64>, tensor<3xf64>) {
      %0 = nn.matmul %a, %b : (tensor<2x3xf64>, tensor<3x2xf64>) -> tensor<2x2xf64>
      %1 = nn.matmul %v, %v : (tensor<3xf64>, tensor<3xf64>) -> tensor<f64>
      %2 = nn.matmul %v, %b : (tensor<3xf64>, tensor<3x2xf64>) -> tensor<2xf64>
      %3 = nn.matmul %a, %v : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<2xf64>
      %4 = nn.matmul %b, %w : (tensor<3x2xf64>, tensor<2xf64>) -> tensor<3xf64>
      return %0, %1, %2, %3, %4 : tensor<2x2xf64>, tensor<f64>, tensor<2xf64>, tensor<2xf64>,
          tensor<3xf64>
    })mlir",
               {hv({2, 3}, {1, 2, 3, 4, 5, 6}), hv({3, 2}, {1, 0, 0, 1, 1, 1}),
                hv({3}, {1, 2, 3}), hv({2}, {1, -1})});
  ASSERT_EQ(r.size(), 5u);
  expectValue(r[0], {2, 2}, {4, 5, 10, 11});
  expectValue(r[1], {}, {14});
  expectValue(r[2], {2}, {4, 5});
  expectValue(r[3], {2}, {14, 32});
  expectValue(r[4], {3}, {1, -1, 0});
}

TEST_F(Interp, MatMulBroadcastsBatchDims) {
  // lhs [2, 1, 1, 2] holds the rows [1, 2] and [3, 4]; rhs [3, 2, 1] the
  // columns [1, 0], [0, 1], [1, 1]: result [2, 3, 1, 1] = row . column.
  auto r = run(R"mlir(
    func.func @f(%a: tensor<2x1x1x2xf64>, %b: tensor<3x2x1xf64>, %c: tensor<2x2xf64>,
                 %d: tensor<2x2x3xf64>)
        -> (tensor<2x3x1x1xf64>, tensor<2x2x3xf64>) {
      %0 = nn.matmul %a, %b : (tensor<2x1x1x2xf64>, tensor<3x2x1xf64>) -> tensor<2x3x1x1xf64>
      %1 = nn.matmul %c, %d : (tensor<2x2xf64>, tensor<2x2x3xf64>) -> tensor<2x2x3xf64>
      return %0, %1 : tensor<2x3x1x1xf64>, tensor<2x2x3xf64>
    })mlir",
               {hv({2, 1, 1, 2}, {1, 2, 3, 4}),
                hv({3, 2, 1}, {1, 0, 0, 1, 1, 1}), hv({2, 2}, {0, 1, 1, 0}),
                hv({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})});
  ASSERT_EQ(r.size(), 2u);
  expectValue(r[0], {2, 3, 1, 1}, {1, 2, 3, 3, 4, 7});
  // [[0, 1], [1, 0]] swaps the two rows of each batch.
  expectValue(r[1], {2, 2, 3}, {4, 5, 6, 1, 2, 3, 10, 11, 12, 7, 8, 9});
}

TEST_F(Interp, IntegerMatMul) {
  auto r = run(R"mlir(
    func.func @f(%a: tensor<1x2xi64>, %b: tensor<2x1xi64>) -> tensor<1x1xi64> {
      %0 = nn.matmul %a, %b : (tensor<1x2xi64>, tensor<2x1xi64>) -> tensor<1x1xi64>
      return %0 : tensor<1x1xi64>
    })mlir",
               {hv({1, 2}, {3, -4}), hv({2, 1}, {5, 6})});
  ASSERT_EQ(r.size(), 1u);
  expectValue(r[0], {1, 1}, {-9});
}

TEST_F(Interp, Gemm) {
  // a = [[1, 2], [3, 4]], b = [[5, 6], [7, 8]].
  auto r = run(R"mlir(
    func.func @f(%a: tensor<2x2xf64>, %b: tensor<2x2xf64>, %c: tensor<2xf64>,
                 %cc: tensor<2x1xf64>, %s: tensor<f64>)
        -> (tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>,
            tensor<2x2xf64>, tensor<2x2xf64>) {
      %0 = nn.gemm %a, %b : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
      %1 = nn.gemm %a, %b {trans_a = true} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
      %2 = nn.gemm %a, %b {trans_b = true} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
      %3 = nn.gemm %a, %b {trans_a = true, trans_b = true} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
      %4 = nn.gemm %a, %b, %c {alpha = 2.0 : f64, beta = 0.5 : f64} : (tensor<2x2xf64>, tensor<2x2xf64>, tensor<2xf64>) -> tensor<2x2xf64>
      %5 = nn.gemm %a, %b, %cc {beta = -1.0 : f64} : (tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x1xf64>) -> tensor<2x2xf64>
      return %0, %1, %2, %3, %4, %5 : tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>,
          tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>
    })mlir",
               {hv({2, 2}, {1, 2, 3, 4}), hv({2, 2}, {5, 6, 7, 8}),
                hv({2}, {10, 20}), hv({2, 1}, {1, 2}), hv({}, {0})});
  ASSERT_EQ(r.size(), 6u);
  expectValue(r[0], {2, 2}, {19, 22, 43, 50});
  expectValue(r[1], {2, 2}, {26, 30, 38, 44});
  expectValue(r[2], {2, 2}, {17, 23, 39, 53});
  expectValue(r[3], {2, 2}, {23, 31, 34, 46});
  expectValue(r[4], {2, 2}, {43, 54, 91, 110});
  expectValue(r[5], {2, 2}, {18, 21, 41, 48});
}

TEST_F(Interp, GemmNonSquare) {
  // a^T with a [3, 2] -> op(a) [2, 3]; b^T with b [4, 3] -> op(b) [3, 4].
  auto r = run(R"mlir(
    func.func @f(%a: tensor<3x2xf64>, %b: tensor<4x3xf64>) -> tensor<2x4xf64> {
      %0 = nn.gemm %a, %b {trans_a = true, trans_b = true} : (tensor<3x2xf64>, tensor<4x3xf64>) -> tensor<2x4xf64>
      return %0 : tensor<2x4xf64>
    })mlir",
               {hv({3, 2}, {1, 0, 0, 1, 1, 1}),
                hv({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})});
  ASSERT_EQ(r.size(), 1u);
  // op(a) = [[1, 0, 1], [0, 1, 1]]; op(b) columns are the rows of b.
  expectValue(r[0], {2, 4}, {4, 10, 16, 22, 5, 11, 17, 23});
}

TEST_F(Interp, Gather) {
  auto r = run(R"mlir(
    func.func @f(%e: tensor<3x2xf64>, %ids: tensor<2x2xi64>, %k: tensor<i32>,
                 %v: tensor<3xi32>)
        -> (tensor<2x2x2xf64>, tensor<3xf64>, tensor<3x3xf64>) {
      %0 = nn.gather %e, %ids {axis = 0 : i64} : (tensor<3x2xf64>, tensor<2x2xi64>) -> tensor<2x2x2xf64>
      %1 = nn.gather %e, %k {axis = 1 : i64} : (tensor<3x2xf64>, tensor<i32>) -> tensor<3xf64>
      %2 = nn.gather %e, %v {axis = 1 : i64} : (tensor<3x2xf64>, tensor<3xi32>) -> tensor<3x3xf64>
      return %0, %1, %2 : tensor<2x2x2xf64>, tensor<3xf64>, tensor<3x3xf64>
    })mlir",
               {hv({3, 2}, {0, 1, 10, 11, 20, 21}), hv({2, 2}, {2, 0, -1, 1}),
                hv({}, {-1}), hv({3}, {1, 0, 1})});
  ASSERT_EQ(r.size(), 3u);
  expectValue(r[0], {2, 2, 2}, {20, 21, 0, 1, 20, 21, 10, 11});
  expectValue(r[1], {3}, {1, 11, 21});
  expectValue(r[2], {3, 3}, {1, 0, 1, 11, 10, 11, 21, 20, 21});
}

TEST_F(Interp, GatherOutOfRangeFails) {
  auto r = tryRun(R"mlir(
    func.func @f(%e: tensor<3x2xf64>, %ids: tensor<1xi64>) -> tensor<1x2xf64> {
      %0 = nn.gather %e, %ids {axis = 0 : i64} : (tensor<3x2xf64>, tensor<1xi64>) -> tensor<1x2xf64>
      return %0 : tensor<1x2xf64>
    })mlir",
                  {hv({3, 2}, {0, 1, 2, 3, 4, 5}), hv({1}, {-4})});
  EXPECT_TRUE(failed(r));
  EXPECT_NE(diagnostics.find("index -4 is out of range"), std::string::npos)
      << diagnostics;
}

TEST_F(Interp, ReshapeSqueezeUnsqueezeExpand) {
  auto r = run(R"mlir(
    func.func @f(%x: tensor<2x3xf64>, %c: tensor<3x1xf64>)
        -> (tensor<3x2xf64>, tensor<1x2x1x3xf64>, tensor<2x3xf64>, tensor<2x3x2xf64>) {
      %0 = nn.reshape %x : tensor<2x3xf64> -> tensor<3x2xf64>
      %1 = nn.unsqueeze %x {axes = array<i64: 0, 2>} : tensor<2x3xf64> -> tensor<1x2x1x3xf64>
      %2 = nn.squeeze %1 {axes = array<i64: 0, 2>} : tensor<1x2x1x3xf64> -> tensor<2x3xf64>
      %3 = nn.expand %c : tensor<3x1xf64> -> tensor<2x3x2xf64>
      return %0, %1, %2, %3 : tensor<3x2xf64>, tensor<1x2x1x3xf64>, tensor<2x3xf64>,
          tensor<2x3x2xf64>
    })mlir",
               {hv({2, 3}, {1, 2, 3, 4, 5, 6}), hv({3, 1}, {7, 8, 9})});
  ASSERT_EQ(r.size(), 4u);
  expectValue(r[0], {3, 2}, {1, 2, 3, 4, 5, 6});
  expectValue(r[1], {1, 2, 1, 3}, {1, 2, 3, 4, 5, 6});
  expectValue(r[2], {2, 3}, {1, 2, 3, 4, 5, 6});
  expectValue(r[3], {2, 3, 2}, {7, 7, 8, 8, 9, 9, 7, 7, 8, 8, 9, 9});
}

TEST_F(Interp, Transpose) {
  std::vector<double> x(24);
  for (int i = 0; i < 24; ++i)
    x[i] = i;
  auto r = run(R"mlir(
    func.func @f(%m: tensor<2x3xf64>, %x: tensor<2x3x4xf64>)
        -> (tensor<3x2xf64>, tensor<3x4x2xf64>) {
      %0 = nn.transpose %m {perm = array<i64: 1, 0>} : tensor<2x3xf64> -> tensor<3x2xf64>
      %1 = nn.transpose %x {perm = array<i64: 1, 2, 0>} : tensor<2x3x4xf64> -> tensor<3x4x2xf64>
      return %0, %1 : tensor<3x2xf64>, tensor<3x4x2xf64>
    })mlir",
               {hv({2, 3}, {1, 2, 3, 4, 5, 6}), hv({2, 3, 4}, x)});
  ASSERT_EQ(r.size(), 2u);
  expectValue(r[0], {3, 2}, {1, 4, 2, 5, 3, 6});
  // result[j][k][i] = x[i][j][k] = 12 i + 4 j + k.
  std::vector<double> expected;
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 2; ++i)
        expected.push_back(12 * i + 4 * j + k);
  expectValue(r[1], {3, 4, 2}, expected);
}

TEST_F(Interp, Slice) {
  // x[i][j] = 5 i + j on [2, 5].
  auto r = run(R"mlir(
    func.func @f(%x: tensor<2x5xf64>) -> (tensor<2x3xf64>, tensor<1x2xf64>, tensor<2x0xf64>) {
      %0 = nn.slice %x {offsets = array<i64: 1, 4>, strides = array<i64: -1, -2>} : tensor<2x5xf64> -> tensor<2x3xf64>
      %1 = nn.slice %x {offsets = array<i64: 1, 1>, strides = array<i64: 1, 3>} : tensor<2x5xf64> -> tensor<1x2xf64>
      %2 = nn.slice %x {offsets = array<i64: 0, 0>, strides = array<i64: 1, 1>} : tensor<2x5xf64> -> tensor<2x0xf64>
      return %0, %1, %2 : tensor<2x3xf64>, tensor<1x2xf64>, tensor<2x0xf64>
    })mlir",
               {hv({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})});
  ASSERT_EQ(r.size(), 3u);
  expectValue(r[0], {2, 3}, {9, 7, 5, 4, 2, 0});
  expectValue(r[1], {1, 2}, {6, 9});
  expectValue(r[2], {2, 0}, {});
}

TEST_F(Interp, ConcatAndSplit) {
  auto r = run(R"mlir(
    func.func @f(%a: tensor<2x1xf64>, %b: tensor<2x2xf64>)
        -> (tensor<2x3xf64>, tensor<4x2xf64>, tensor<2x2xf64>, tensor<2x1xf64>) {
      %0 = nn.concat %a, %b {axis = 1 : i64} : (tensor<2x1xf64>, tensor<2x2xf64>) -> tensor<2x3xf64>
      %1 = nn.concat %b, %b {axis = 0 : i64} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<4x2xf64>
      %2:2 = nn.split %0 {axis = 1 : i64} : (tensor<2x3xf64>) -> (tensor<2x2xf64>, tensor<2x1xf64>)
      return %0, %1, %2#0, %2#1 : tensor<2x3xf64>, tensor<4x2xf64>, tensor<2x2xf64>, tensor<2x1xf64>
    })mlir",
               {hv({2, 1}, {1, 2}), hv({2, 2}, {3, 4, 5, 6})});
  ASSERT_EQ(r.size(), 4u);
  expectValue(r[0], {2, 3}, {1, 3, 4, 2, 5, 6});
  expectValue(r[1], {4, 2}, {3, 4, 5, 6, 3, 4, 5, 6});
  expectValue(r[2], {2, 2}, {1, 3, 2, 5});
  expectValue(r[3], {2, 1}, {4, 6});
}

TEST_F(Interp, GeluGrad) {
  auto r = run(R"mlir(
    func.func @f(%x: tensor<3xf64>, %g: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
      %0 = nn.gelu_grad %x, %g approximate(none) : tensor<3xf64>
      %1 = nn.gelu_grad %x, %g approximate(tanh) : tensor<3xf64>
      return %0, %1 : tensor<3xf64>, tensor<3xf64>
    })mlir",
               {hv({3}, {0, 1, -2}), hv({3}, {2, 1, 1})});
  ASSERT_EQ(r.size(), 2u);
  // Phi(x) + x phi(x): 1/2 at 0; Phi(1) + phi(1) at 1; Phi(-2) - 2 phi(-2).
  double phi1 = std::exp(-0.5) / std::sqrt(2 * M_PI);
  double phi2 = std::exp(-2.0) / std::sqrt(2 * M_PI);
  expectValue(
      r[0], {3},
      {2 * 0.5, 0.8413447460685429 + phi1, 0.022750131948179195 - 2 * phi2});
  auto tanhGrad = [](double x) {
    double k = std::sqrt(2 / M_PI);
    double t = std::tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) +
           0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
  };
  expectValue(r[1], {3}, {2 * 0.5, tanhGrad(1), tanhGrad(-2)});
}

TEST_F(Interp, LayerNormGrad) {
  // Both rows are [1, 2, 3]: mean 2, var 2/3, rstd r = sqrt(3/2),
  // xhat = (x - 2) r = [-r, 0, r].
  double rs = std::sqrt(1.5);
  auto r = run(R"mlir(
    func.func @f(%x: tensor<2x3xf64>, %s: tensor<3xf64>, %g: tensor<2x3xf64>)
        -> (tensor<2x3xf64>, tensor<3xf64>, tensor<3xf64>) {
      %0:3 = nn.layer_norm_grad %x, %s, %g {axis = 1 : i64, epsilon = 0.0 : f64} : (tensor<2x3xf64>, tensor<3xf64>, tensor<2x3xf64>) -> (tensor<2x3xf64>, tensor<3xf64>, tensor<3xf64>)
      return %0#0, %0#1, %0#2 : tensor<2x3xf64>, tensor<3xf64>, tensor<3xf64>
    })mlir",
               {hv({2, 3}, {1, 2, 3, 1, 2, 3}), hv({3}, {1, 1, 1}),
                hv({2, 3}, {1, 0, 0, 0, 0, 1})});
  ASSERT_EQ(r.size(), 3u);
  // Row 0: gh = [1, 0, 0], sum(gh) = 1, sum(gh xhat) = -r:
  // dx = r/3 (3 gh - 1 + r xhat) = r/3 ([3, 0, 0] - 1 + [-1.5, 0, 1.5]).
  expectValue(r[0], {2, 3}, {rs / 6, -rs / 3, rs / 6, rs / 6, -rs / 3, rs / 6});
  expectValue(r[1], {3}, {-rs, 0, rs});
  expectValue(r[2], {3}, {1, 0, 1});
}

TEST_F(Interp, SoftmaxGrad) {
  auto r =
      run(R"mlir(
    func.func @f(%y: tensor<2x2xf64>, %g: tensor<2x2xf64>) -> (tensor<2x2xf64>, tensor<2x2xf64>) {
      %0 = nn.softmax_grad %y, %g {axis = 1 : i64} : tensor<2x2xf64>
      %1 = nn.softmax_grad %y, %g {axis = 0 : i64} : tensor<2x2xf64>
      return %0, %1 : tensor<2x2xf64>, tensor<2x2xf64>
    })mlir",
          {hv({2, 2}, {0.25, 0.75, 0.75, 0.25}), hv({2, 2}, {1, 0, 0, 1})});
  ASSERT_EQ(r.size(), 2u);
  // Row [0.25, 0.75] with g [1, 0]: dot 0.25 -> [0.1875, -0.1875].
  expectValue(r[0], {2, 2}, {0.1875, -0.1875, -0.1875, 0.1875});
  // Column 0 is [0.25, 0.75] with g [1, 0]; column 1 [0.75, 0.25], g [0, 1].
  expectValue(r[1], {2, 2}, {0.1875, -0.1875, -0.1875, 0.1875});
}

TEST_F(Interp, SoftmaxCrossEntropyGrad) {
  double l3 = std::log(3.0);
  auto r = run(R"mlir(
    func.func @f(%s: tensor<3x2xf64>, %l: tensor<3xi64>, %g: tensor<f64>, %gn: tensor<3xf64>)
        -> (tensor<3x2xf64>, tensor<3x2xf64>, tensor<3x2xf64>) {
      %0 = nn.softmax_cross_entropy_grad %s, %l, %g reduction(mean) {ignore_index = -100 : i64} : (tensor<3x2xf64>, tensor<3xi64>, tensor<f64>) -> tensor<3x2xf64>
      %1 = nn.softmax_cross_entropy_grad %s, %l, %g reduction(sum) {ignore_index = -100 : i64} : (tensor<3x2xf64>, tensor<3xi64>, tensor<f64>) -> tensor<3x2xf64>
      %2 = nn.softmax_cross_entropy_grad %s, %l, %gn reduction(none) {ignore_index = -100 : i64} : (tensor<3x2xf64>, tensor<3xi64>, tensor<3xf64>) -> tensor<3x2xf64>
      return %0, %1, %2 : tensor<3x2xf64>, tensor<3x2xf64>, tensor<3x2xf64>
    })mlir",
               {hv({3, 2}, {0, l3, l3, 0, 5, 7}), hv({3}, {1, 1, -100}),
                hv({}, {2}), hv({3}, {1, 3, 5})});
  ASSERT_EQ(r.size(), 3u);
  // softmax - onehot: row 0 [0.25, -0.25], row 1 [0.75, -0.75], row 2 is
  // ignored (zero).
  expectValue(r[0], {3, 2}, {0.25, -0.25, 0.75, -0.75, 0, 0});
  expectValue(r[1], {3, 2}, {0.5, -0.5, 1.5, -1.5, 0, 0});
  expectValue(r[2], {3, 2}, {0.25, -0.25, 2.25, -2.25, 0, 0});
}

TEST_F(Interp, GatherGradAddsDuplicates) {
  auto r = run(R"mlir(
    func.func @f(%ids: tensor<4xi64>, %g: tensor<4x2xf64>, %ids1: tensor<2xi32>,
                 %g1: tensor<2x2xf64>) -> (tensor<3x2xf64>, tensor<2x3xf64>) {
      %0 = nn.gather_grad %ids, %g {axis = 0 : i64} : (tensor<4xi64>, tensor<4x2xf64>) -> tensor<3x2xf64>
      %1 = nn.gather_grad %ids1, %g1 {axis = 1 : i64} : (tensor<2xi32>, tensor<2x2xf64>) -> tensor<2x3xf64>
      return %0, %1 : tensor<3x2xf64>, tensor<2x3xf64>
    })mlir",
               {hv({4}, {0, 2, 0, -1}), hv({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}),
                hv({2}, {-1, -1}), hv({2, 2}, {1, 2, 3, 4})});
  ASSERT_EQ(r.size(), 2u);
  expectValue(r[0], {3, 2}, {6, 8, 0, 0, 10, 12});
  expectValue(r[1], {2, 3}, {0, 0, 3, 0, 0, 7});
}

TEST_F(Interp, SliceGrad) {
  auto r = run(R"mlir(
    func.func @f(%g: tensor<2x3xf64>) -> tensor<2x5xf64> {
      %0 = nn.slice_grad %g {offsets = array<i64: 1, 4>, strides = array<i64: -1, -2>} : tensor<2x3xf64> -> tensor<2x5xf64>
      return %0 : tensor<2x5xf64>
    })mlir",
               {hv({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(r.size(), 1u);
  expectValue(r[0], {2, 5}, {6, 0, 5, 0, 4, 3, 0, 2, 0, 1});
}

TEST_F(Interp, Fused) {
  auto r = run(R"mlir(
    func.func @f(%x: tensor<2x3xf64>, %b: tensor<3xf64>) -> (tensor<2x3xf64>, tensor<2x3xi1>) {
      %r:2 = nn.fused (%x, %b) : (tensor<2x3xf64>, tensor<3xf64>) -> (tensor<2x3xf64>, tensor<2x3xi1>) {
      ^bb0(%a: tensor<2x3xf64>, %c: tensor<3xf64>):
        %s = nn.add %a, %c : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>
        %t = nn.relu %s : tensor<2x3xf64>
        %k = nn.constant dense<2.0> : tensor<f64>
        %u = nn.mul %t, %k : (tensor<2x3xf64>, tensor<f64>) -> tensor<2x3xf64>
        %p = nn.compare gt, %s, %k : (tensor<2x3xf64>, tensor<f64>) -> tensor<2x3xi1>
        nn.yield %u, %p : tensor<2x3xf64>, tensor<2x3xi1>
      }
      return %r#0, %r#1 : tensor<2x3xf64>, tensor<2x3xi1>
    })mlir",
               {hv({2, 3}, {1, -2, 3, -4, 5, -6}), hv({3}, {0, 1, 2})});
  ASSERT_EQ(r.size(), 2u);
  expectValue(r[0], {2, 3}, {2, 0, 10, 0, 12, 0});
  expectValue(r[1], {2, 3}, {0, 0, 1, 0, 1, 0});
}

TEST_F(Interp, WrongArgumentsFail) {
  const char *text = R"mlir(
    func.func @f(%x: tensor<2xf64>) -> tensor<2xf64> {
      return %x : tensor<2xf64>
    })mlir";
  EXPECT_TRUE(failed(tryRun(text, {})));
  EXPECT_NE(diagnostics.find("got 0 arguments for 1"), std::string::npos)
      << diagnostics;
  EXPECT_TRUE(failed(tryRun(text, {hv({3}, {1, 2, 3})})));
  EXPECT_NE(diagnostics.find("argument #0"), std::string::npos) << diagnostics;
}

TEST_F(Interp, UnknownOpFails) {
  auto r = tryRun(R"mlir(
    func.func private @g(tensor<2xf64>) -> tensor<2xf64>
    func.func @f(%x: tensor<2xf64>) -> tensor<2xf64> {
      %0 = func.call @g(%x) : (tensor<2xf64>) -> tensor<2xf64>
      return %0 : tensor<2xf64>
    })mlir",
                  {hv({2}, {1, 2})});
  EXPECT_TRUE(failed(r));
  EXPECT_NE(diagnostics.find("'func.call' op cannot be interpreted"),
            std::string::npos)
      << diagnostics;
}

} // namespace

namespace {

/// Values in [-1, 1) from a fixed sequence.
std::vector<double> sequence(int64_t n, int seed) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(std::fmod(0.37 * (i + 1) * (seed + 3) + 0.11 * seed, 2.0) - 1.0);
  return v;
}

} // namespace

// nn.attention equals the graph autopar-fuse-attention replaces with it:
// matmul(q, k^T) * scale, masked to -inf, softmax, matmul with v; and lse
// is the log-sum-exp of the masked, scaled scores.
TEST_F(Interp, AttentionForwardEqualsUnfusedGraph) {
  const char *fused = R"(
func.func @f(%q: tensor<2x3x4xf64>, %k: tensor<2x5x4xf64>, %v: tensor<2x5x4xf64>, %m: tensor<3x5xi1>) -> (tensor<2x3x4xf64>, tensor<2x3xf64>) {
  %o, %l = nn.attention %q, %k, %v mask %m {causal = true, scale = 0.5 : f64} : (tensor<2x3x4xf64>, tensor<2x5x4xf64>, tensor<2x5x4xf64>, tensor<3x5xi1>) -> (tensor<2x3x4xf64>, tensor<2x3xf64>)
  func.return %o, %l : tensor<2x3x4xf64>, tensor<2x3xf64>
})";
  // causal with T = 3, S = 5: row i attends j <= i + 2; the mask drops (0, 1).
  const char *unfused = R"(
func.func @f(%q: tensor<2x3x4xf64>, %k: tensor<2x5x4xf64>, %v: tensor<2x5x4xf64>, %m: tensor<3x5xi1>) -> tensor<2x3x4xf64> {
  %kt = nn.transpose %k {perm = array<i64: 0, 2, 1>} : tensor<2x5x4xf64> -> tensor<2x4x5xf64>
  %s = nn.matmul %q, %kt : (tensor<2x3x4xf64>, tensor<2x4x5xf64>) -> tensor<2x3x5xf64>
  %c = nn.constant dense<0.5> : tensor<f64>
  %y = nn.mul %s, %c : (tensor<2x3x5xf64>, tensor<f64>) -> tensor<2x3x5xf64>
  %causal = nn.constant dense<[[true, true, true, false, false], [true, true, true, true, false], [true, true, true, true, true]]> : tensor<3x5xi1>
  %keep = nn.where %causal, %m, %causal : (tensor<3x5xi1>, tensor<3x5xi1>, tensor<3x5xi1>) -> tensor<3x5xi1>
  %ninf = nn.constant dense<0xFFF0000000000000> : tensor<f64>
  %z = nn.where %keep, %y, %ninf : (tensor<3x5xi1>, tensor<2x3x5xf64>, tensor<f64>) -> tensor<2x3x5xf64>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x3x5xf64> -> tensor<2x3x5xf64>
  %o = nn.matmul %p, %v : (tensor<2x3x5xf64>, tensor<2x5x4xf64>) -> tensor<2x3x4xf64>
  func.return %o : tensor<2x3x4xf64>
})";
  std::vector<HostValue> args = {
      hv({2, 3, 4}, sequence(24, 1)), hv({2, 5, 4}, sequence(40, 2)),
      hv({2, 5, 4}, sequence(40, 3)),
      hv({3, 5}, {1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})};
  std::vector<HostValue> a = run(fused, args);
  std::vector<HostValue> b = run(unfused, args);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(a[0].data.size(), b[0].data.size());
  for (size_t i = 0; i < a[0].data.size(); ++i)
    EXPECT_NEAR(a[0].data[i], b[0].data[i], 1e-12) << "element " << i;
  // lse of row (batch 0, i = 0): scores 0.5 q0.k0 and 0.5 q0.k2 (k1 masked,
  // k3, k4 causal).
  auto dot = [&](int qi, int kj) {
    double s = 0;
    for (int c = 0; c < 4; ++c)
      s += args[0].data[qi * 4 + c] * args[1].data[kj * 4 + c];
    return 0.5 * s;
  };
  EXPECT_NEAR(a[1].data[0], std::log(std::exp(dot(0, 0)) + std::exp(dot(0, 2))),
              1e-12);
}

TEST_F(Interp, AttentionFullyMaskedRowIsNaN) {
  std::vector<HostValue> r = run(R"(
func.func @f(%q: tensor<1x2x2xf64>, %k: tensor<1x2x2xf64>, %v: tensor<1x2x2xf64>, %m: tensor<2x2xi1>) -> tensor<1x2x2xf64> {
  %o, %l = nn.attention %q, %k, %v mask %m {causal = false, scale = 1.0 : f64} : (tensor<1x2x2xf64>, tensor<1x2x2xf64>, tensor<1x2x2xf64>, tensor<2x2xi1>) -> (tensor<1x2x2xf64>, tensor<1x2xf64>)
  func.return %o : tensor<1x2x2xf64>
})",
                                 {hv({1, 2, 2}, {1, 2, 3, 4}),
                                  hv({1, 2, 2}, {1, 0, 0, 1}),
                                  hv({1, 2, 2}, {5, 6, 7, 8}),
                                  hv({2, 2}, {1, 1, 0, 0})});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(std::isnan(r[0].data[0]));
  EXPECT_TRUE(std::isnan(r[0].data[2]));
}
