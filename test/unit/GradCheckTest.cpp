//===- GradCheckTest.cpp - gradient rules against finite differences ------===//
//
// Each case is a tiny f64 model
//
//   func.func @forward(params {nn.param}, inputs {nn.input})
//       -> (tensor<f64> {nn.output = "loss"})
//
// whose loss is reduce_sum(op(...) * W) with fixed random weights W, so every
// output element matters. autopar::differentiate adds @train_step; the
// interpreter runs it, and each returned gradient (result i + 1 for the i-th
// trainable parameter, in argument order) must match central finite
// differences of @forward: |analytic - numeric| <= 1e-6 + 1e-5 |numeric|
// with eps = 1e-6. Inputs are kept away from kinks (relu at 0, max ties)
// except in the case that tests the tie rule of reduce_max directly.
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/Passes.h"
#include "test/lib/Interpreter.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <random>
#include <string>

using autopar::HostValue;

namespace {

constexpr double kEps = 1e-6;
constexpr double kAbsTol = 1e-6;
constexpr double kRelTol = 1e-5;

std::string tensorType(const std::vector<int64_t> &shape,
                       const std::string &elementType = "f64") {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + elementType + ">";
}

/// A dense literal of `data` nested by `shape`, every double printed so that
/// it parses back exactly.
std::string denseLiteral(const std::vector<int64_t> &shape,
                         const std::vector<double> &data) {
  size_t next = 0;
  std::function<std::string(size_t)> nest = [&](size_t dim) -> std::string {
    if (dim == shape.size()) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.17e", data[next++]);
      return buf;
    }
    std::string s = "[";
    for (int64_t i = 0; i < shape[dim]; ++i)
      s += (i ? ", " : "") + nest(dim + 1);
    return s + "]";
  };
  return "dense<" + nest(0) + ">";
}

class GradCheck : public ::testing::Test {
protected:
  /// How an argument is declared: a trainable parameter, a parameter
  /// marked nn.frozen or nn.buffer (never trained), or a graph input.
  enum class Kind { Param, Frozen, Buffer, Input };

  struct Arg {
    std::string name;
    Kind kind;
    std::string elementType;
    HostValue value;
  };

  GradCheck() {
    ctx.loadDialect<autopar::nn::NNDialect, mlir::func::FuncDialect>();
  }

  /// A trainable f64 parameter %name with uniform random values in [lo, hi].
  void param(const std::string &name, std::vector<int64_t> shape,
             double lo = -1, double hi = 1) {
    std::uniform_real_distribution<double> dist(lo, hi);
    HostValue v = HostValue::filled(shape, 0);
    for (double &x : v.data)
      x = dist(rng);
    args.push_back({name, Kind::Param, "f64", std::move(v)});
  }

  /// A parameter whose elements have magnitudes in [0.2, 1] and random signs
  /// (away from the kinks and poles at 0).
  void paramAwayFromZero(const std::string &name, std::vector<int64_t> shape) {
    param(name, shape, 0.2, 1);
    std::bernoulli_distribution sign(0.5);
    for (double &x : args.back().value.data)
      x = sign(rng) ? x : -x;
  }

  /// A trainable f64 parameter with the given values.
  void paramData(const std::string &name, std::vector<int64_t> shape,
                 std::vector<double> data) {
    args.push_back(
        {name, Kind::Param, "f64", HostValue(shape, std::move(data))});
  }

  /// A graph input %name (never trained) of the given element type.
  void input(const std::string &name, std::vector<int64_t> shape,
             const std::string &elementType, std::vector<double> data) {
    args.push_back(
        {name, Kind::Input, elementType, HostValue(shape, std::move(data))});
  }

  /// An untrained f64 argument of random values in [-1, 1]: a graph input,
  /// or a frozen or buffer parameter per `kind`.
  void randomInput(const std::string &name, std::vector<int64_t> shape,
                   Kind kind = Kind::Input) {
    param(name, shape);
    args.back().kind = kind;
  }

  /// The text of @forward: the arguments declared so far, `body`, and the
  /// loss reduce_sum(%out * W) for random weights W of `outShape`.
  std::string forwardText(const std::string &body,
                          const std::vector<int64_t> &outShape) {
    std::string text = "func.func @forward(";
    for (size_t i = 0; i < args.size(); ++i) {
      const Arg &a = args[i];
      std::vector<int64_t> shape(a.value.shape.begin(), a.value.shape.end());
      static const char *const attrs[] = {"", ", nn.frozen", ", nn.buffer"};
      text += (i ? ",\n    %" : "%") + a.name + ": " +
              tensorType(shape, a.elementType);
      if (a.kind == Kind::Input)
        text += " {nn.input = \"" + a.name + "\"}";
      else
        text += " {nn.param = \"" + a.name + "\"" +
                attrs[static_cast<int>(a.kind)] + "}";
    }
    text += ") -> (tensor<f64> {nn.output = \"loss\"}) {\n" + body + "\n";
    std::uniform_real_distribution<double> dist(-1, 1);
    std::vector<double> weights(HostValue::filled(outShape, 0).data.size());
    for (double &w : weights)
      w = dist(rng);
    std::string t = tensorType(outShape);
    std::string axes;
    for (size_t d = 0; d < outShape.size(); ++d)
      axes += (d ? ", " : ": ") + std::to_string(d);
    text += "  %__w = nn.constant " + denseLiteral(outShape, weights) + " : " +
            t + "\n";
    text +=
        "  %__p = nn.mul %out, %__w : (" + t + ", " + t + ") -> " + t + "\n";
    text += "  %__loss = nn.reduce_sum %__p {axes = array<i64" + axes +
            ">, keepdims = false} : " + t + " -> tensor<f64>\n";
    text += "  return %__loss : tensor<f64>\n}\n";
    return text;
  }

  /// Parses `text`, differentiates @forward into @train_step and verifies
  /// the result; null (with a test failure) on error.
  mlir::OwningOpRef<mlir::ModuleOp> differentiate(const std::string &text) {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    if (!module) {
      ADD_FAILURE() << "parse failed:\n" << diagnostics << text;
      return nullptr;
    }
    if (failed(
            autopar::differentiate(*module, "forward", "loss", "train_step"))) {
      ADD_FAILURE() << "differentiate failed:\n" << diagnostics << text;
      return nullptr;
    }
    if (failed(mlir::verify(*module))) {
      ADD_FAILURE() << "@train_step does not verify:\n"
                    << diagnostics << print(*module);
      return nullptr;
    }
    return module;
  }

  std::vector<HostValue> argValues() const {
    std::vector<HostValue> values;
    for (const Arg &a : args)
      values.push_back(a.value);
    return values;
  }

  /// Runs `name` of `module` on `values`; empty (with a test failure) on
  /// error.
  std::vector<HostValue> run(mlir::ModuleOp module, llvm::StringRef name,
                             const std::vector<HostValue> &values) {
    auto func = module.lookupSymbol<mlir::func::FuncOp>(name);
    if (!func) {
      ADD_FAILURE() << "no @" << name.str();
      return {};
    }
    mlir::FailureOr<std::vector<HostValue>> r =
        autopar::interpret(func, values);
    if (failed(r)) {
      ADD_FAILURE() << "interpreting @" << name.str() << " failed:\n"
                    << diagnostics << print(module);
      return {};
    }
    return *r;
  }

  /// The loss @forward computes on `values`.
  double loss(mlir::ModuleOp module, const std::vector<HostValue> &values) {
    std::vector<HostValue> r = run(module, "forward", values);
    return r.empty() ? std::nan("") : r[0].data[0];
  }

  static std::string print(mlir::ModuleOp module) {
    std::string s;
    llvm::raw_string_ostream os(s);
    module.print(os);
    return s;
  }

  /// Builds the model around `body` (which defines %out of `outShape`) and
  /// compares every gradient with finite differences.
  void check(const std::string &body, std::vector<int64_t> outShape) {
    // The next check starts from no arguments.
    struct Reset {
      GradCheck &self;
      ~Reset() {
        self.args.clear();
        self.diagnostics.clear();
      }
    } reset{*this};
    mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
      diagnostics += d.str() + "\n";
      return mlir::success();
    });
    std::string text = forwardText(body, outShape);
    mlir::OwningOpRef<mlir::ModuleOp> module = differentiate(text);
    if (!module)
      return;
    auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
    for (size_t i = 0; i < args.size(); ++i)
      EXPECT_EQ(autopar::isTrainableParam(forward, i),
                args[i].kind == Kind::Param)
          << "argument %" << args[i].name;
    std::vector<std::string> mismatches = compareGradients(*module);
    for (const std::string &m : mismatches)
      ADD_FAILURE() << m;
    if (!mismatches.empty())
      ADD_FAILURE() << "module:\n" << print(*module);
  }

  /// Runs @train_step of `module` on the arguments and compares its loss
  /// with @forward's and its gradients with central finite differences of
  /// @forward. Returns one message per disagreement (at most 8 per
  /// parameter).
  std::vector<std::string> compareGradients(mlir::ModuleOp module) {
    std::vector<std::string> messages;
    std::vector<size_t> params;
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].kind == Kind::Param)
        params.push_back(i);
    std::vector<HostValue> values = argValues();
    std::vector<HostValue> step = run(module, "train_step", values);
    if (step.size() != params.size() + 1) {
      messages.push_back("@train_step returned " + std::to_string(step.size()) +
                         " values for " + std::to_string(params.size()) +
                         " parameters");
      return messages;
    }
    double base = loss(module, values);
    if (!(std::fabs(step[0].data[0] - base) <= 1e-12 * (1 + std::fabs(base))))
      messages.push_back("@train_step's loss " +
                         std::to_string(step[0].data[0]) +
                         " differs from @forward's " + std::to_string(base));
    for (size_t k = 0; k < params.size(); ++k) {
      size_t a = params[k];
      const HostValue &grad = step[k + 1];
      if (grad.shape != values[a].shape) {
        messages.push_back("gradient of %" + args[a].name +
                           " has the wrong shape");
        continue;
      }
      int reported = 0;
      bool anyNonzero = false;
      for (size_t e = 0; e < values[a].data.size(); ++e) {
        std::vector<HostValue> plus = values, minus = values;
        plus[a].data[e] += kEps;
        minus[a].data[e] -= kEps;
        double numeric =
            (loss(module, plus) - loss(module, minus)) / (2 * kEps);
        double analytic = grad.data[e];
        anyNonzero |= numeric != 0;
        if (std::fabs(analytic - numeric) <=
            kAbsTol + kRelTol * std::fabs(numeric))
          continue;
        if (reported++ < 8) {
          char buf[160];
          std::snprintf(buf, sizeof(buf),
                        "[%zu]: analytic %.12g, numeric %.12g", e, analytic,
                        numeric);
          messages.push_back("d loss / d %" + args[a].name + buf);
        }
      }
      // A loss that ignores a parameter would make the case vacuous.
      if (!anyNonzero && !values[a].data.empty())
        messages.push_back("the loss does not depend on %" + args[a].name);
    }
    return messages;
  }

  /// `op` on (a, b) in four broadcasting patterns.
  void checkBinary(const std::string &op, double loA, double hiA, double loB,
                   double hiB) {
    struct Shapes {
      std::vector<int64_t> a, b, out;
    };
    for (const Shapes &s :
         {Shapes{{2, 3}, {3}, {2, 3}}, Shapes{{3}, {2, 3}, {2, 3}},
          Shapes{{3, 1}, {2, 1, 4}, {2, 3, 4}}, Shapes{{}, {2, 2}, {2, 2}}}) {
      SCOPED_TRACE(op + " on " + tensorType(s.a) + ", " + tensorType(s.b));
      param("a", s.a, loA, hiA);
      param("b", s.b, loB, hiB);
      check("%out = " + op + " %a, %b : (" + tensorType(s.a) + ", " +
                tensorType(s.b) + ") -> " + tensorType(s.out),
            s.out);
    }
  }

  /// nn.matmul with both operands trainable.
  void checkMatMul(std::vector<int64_t> a, std::vector<int64_t> b,
                   std::vector<int64_t> out) {
    param("a", a);
    param("b", b);
    check("%out = nn.matmul %a, %b : (" + tensorType(a) + ", " + tensorType(b) +
              ") -> " + tensorType(out),
          out);
  }

  /// nn.gemm with op(a) [2, 3], op(b) [3, 4], an optional c of shape `c`
  /// and `attrs` appended to the trans flags.
  void checkGemm(bool ta, bool tb, std::optional<std::vector<int64_t>> c,
                 const std::string &attrs) {
    std::vector<int64_t> a =
        ta ? std::vector<int64_t>{3, 2} : std::vector<int64_t>{2, 3};
    std::vector<int64_t> b =
        tb ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{3, 4};
    param("a", a);
    param("b", b);
    if (c)
      param("c", *c);
    std::string flags = std::string("{trans_a = ") + (ta ? "true" : "false") +
                        ", trans_b = " + (tb ? "true" : "false") + attrs + "}";
    check("%out = nn.gemm %a, %b" + std::string(c ? ", %c " : " ") + flags +
              " : (" + tensorType(a) + ", " + tensorType(b) +
              (c ? ", " + tensorType(*c) : std::string()) +
              ") -> tensor<2x4xf64>",
          {2, 4});
  }

  mlir::MLIRContext ctx;
  std::mt19937_64 rng{20240520};
  std::vector<Arg> args;
  std::string diagnostics;
};

//===----------------------------------------------------------------------===//
// Elementwise unary
//===----------------------------------------------------------------------===//

TEST_F(GradCheck, Neg) {
  param("x", {2, 3});
  check("%out = nn.neg %x : tensor<2x3xf64>", {2, 3});
}

TEST_F(GradCheck, Sqrt) {
  param("x", {2, 3}, 0.5, 2);
  check("%out = nn.sqrt %x : tensor<2x3xf64>", {2, 3});
}

TEST_F(GradCheck, Erf) {
  param("x", {2, 3}, -1.5, 1.5);
  check("%out = nn.erf %x : tensor<2x3xf64>", {2, 3});
}

TEST_F(GradCheck, Tanh) {
  param("x", {2, 3}, -1.5, 1.5);
  check("%out = nn.tanh %x : tensor<2x3xf64>", {2, 3});
}

TEST_F(GradCheck, Exp) {
  param("x", {2, 3});
  check("%out = nn.exp %x : tensor<2x3xf64>", {2, 3});
}

TEST_F(GradCheck, Log) {
  param("x", {2, 3}, 0.5, 2);
  check("%out = nn.log %x : tensor<2x3xf64>", {2, 3});
}

TEST_F(GradCheck, Reciprocal) {
  paramAwayFromZero("x", {2, 3});
  check("%out = nn.reciprocal %x : tensor<2x3xf64>", {2, 3});
}

TEST_F(GradCheck, Relu) {
  paramAwayFromZero("x", {2, 3});
  check("%out = nn.relu %x : tensor<2x3xf64>", {2, 3});
}

TEST_F(GradCheck, Sigmoid) {
  param("x", {2, 3}, -2, 2);
  check("%out = nn.sigmoid %x : tensor<2x3xf64>", {2, 3});
}

TEST_F(GradCheck, Identity) {
  param("x", {2, 3});
  check("%out = nn.identity %x : tensor<2x3xf64>", {2, 3});
}

TEST_F(GradCheck, GeluErf) {
  param("x", {2, 4}, -2.5, 2.5);
  check("%out = nn.gelu %x approximate(none) : tensor<2x4xf64>", {2, 4});
}

TEST_F(GradCheck, GeluTanh) {
  param("x", {2, 4}, -2.5, 2.5);
  check("%out = nn.gelu %x approximate(tanh) : tensor<2x4xf64>", {2, 4});
}

//===----------------------------------------------------------------------===//
// Broadcasting binary ops, where, cast
//===----------------------------------------------------------------------===//

// Each binary op in four broadcasts: rhs into lhs, lhs into rhs, both
// (lhs also gains a leading dim), and a scalar lhs.
TEST_F(GradCheck, Add) { checkBinary("nn.add", -1, 1, -1, 1); }
TEST_F(GradCheck, Sub) { checkBinary("nn.sub", -1, 1, -1, 1); }
TEST_F(GradCheck, Mul) { checkBinary("nn.mul", -1, 1, -1, 1); }
TEST_F(GradCheck, Div) { checkBinary("nn.div", -1, 1, 0.5, 2); }
TEST_F(GradCheck, Pow) { checkBinary("nn.pow", 0.5, 2, -1.5, 1.5); }

TEST_F(GradCheck, SameValueUsedTwice) {
  // Both operands of mul and the add are %x: the gradients accumulate.
  param("x", {2, 3});
  check(R"(
  %sq = nn.mul %x, %x : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
  %out = nn.add %sq, %x : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>)",
        {2, 3});
}

TEST_F(GradCheck, Where) {
  input("c", {2, 3}, "i1", {1, 0, 1, 0, 0, 1});
  param("a", {2, 3});
  param("b", {3});
  check("%out = nn.where %c, %a, %b : (tensor<2x3xi1>, tensor<2x3xf64>, "
        "tensor<3xf64>) -> tensor<2x3xf64>",
        {2, 3});
}

TEST_F(GradCheck, WhereBroadcastCondition) {
  // The condition comes from a compare of an input and broadcasts too.
  randomInput("m", {2, 1});
  param("a", {3});
  param("b", {2, 1});
  check(R"(
  %zero = nn.constant dense<0.0> : tensor<f64>
  %c = nn.compare gt, %m, %zero : (tensor<2x1xf64>, tensor<f64>) -> tensor<2x1xi1>
  %out = nn.where %c, %a, %b : (tensor<2x1xi1>, tensor<3xf64>, tensor<2x1xf64>) -> tensor<2x3xf64>)",
        {2, 3});
}

TEST_F(GradCheck, CastRoundTrip) {
  // f64 -> f32 -> f64 (the interpreter computes f32 in double precision).
  param("x", {2, 3});
  check(R"(
  %a = nn.cast %x : tensor<2x3xf64> to tensor<2x3xf32>
  %b = nn.tanh %a : tensor<2x3xf32>
  %out = nn.cast %b : tensor<2x3xf32> to tensor<2x3xf64>)",
        {2, 3});
}

TEST_F(GradCheck, CastFromInteger) {
  // A cast from an integer input carries no gradient; the param's does.
  input("i", {3}, "i64", {1, -2, 3});
  param("x", {3});
  check(R"(
  %f = nn.cast %i : tensor<3xi64> to tensor<3xf64>
  %out = nn.mul %f, %x : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>)",
        {3});
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

TEST_F(GradCheck, ReduceSumKeepdims) {
  param("x", {2, 3, 4});
  check("%out = nn.reduce_sum %x {axes = array<i64: 1>, keepdims = true} : "
        "tensor<2x3x4xf64> -> tensor<2x1x4xf64>",
        {2, 1, 4});
}

TEST_F(GradCheck, ReduceSumDropDims) {
  param("x", {2, 3, 4});
  check("%out = nn.reduce_sum %x {axes = array<i64: 0, 2>, keepdims = false} : "
        "tensor<2x3x4xf64> -> tensor<3xf64>",
        {3});
}

TEST_F(GradCheck, ReduceMeanKeepdims) {
  param("x", {2, 3, 4});
  check("%out = nn.reduce_mean %x {axes = array<i64: 0, 2>, keepdims = true} : "
        "tensor<2x3x4xf64> -> tensor<1x3x1xf64>",
        {1, 3, 1});
}

TEST_F(GradCheck, ReduceMeanDropDims) {
  param("x", {2, 3, 4});
  check("%out = nn.reduce_mean %x {axes = array<i64: 2>, keepdims = false} : "
        "tensor<2x3x4xf64> -> tensor<2x3xf64>",
        {2, 3});
}

TEST_F(GradCheck, ReduceMaxKeepdims) {
  param("x", {2, 3, 4});
  check("%out = nn.reduce_max %x {axes = array<i64: 1>, keepdims = true} : "
        "tensor<2x3x4xf64> -> tensor<2x1x4xf64>",
        {2, 1, 4});
}

TEST_F(GradCheck, ReduceMaxDropDims) {
  param("x", {2, 3, 4});
  check("%out = nn.reduce_max %x {axes = array<i64: 0, 2>, keepdims = false} : "
        "tensor<2x3x4xf64> -> tensor<3xf64>",
        {3});
}

TEST_F(GradCheck, ReduceMaxTiesSplitEvenly) {
  // Finite differences are meaningless at a tie; the rule is torch.amax's:
  // the gradient is split evenly among the maxima.
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = differentiate(R"mlir(
    func.func @forward(%x: tensor<2x3xf64> {nn.param = "x"})
        -> (tensor<f64> {nn.output = "loss"}) {
      %m = nn.reduce_max %x {axes = array<i64: 1>, keepdims = false} : tensor<2x3xf64> -> tensor<2xf64>
      %w = nn.constant dense<[1.5, -2.0]> : tensor<2xf64>
      %p = nn.mul %m, %w : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
      %l = nn.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : tensor<2xf64> -> tensor<f64>
      return %l : tensor<f64>
    })mlir");
  ASSERT_TRUE(module);
  std::vector<HostValue> r =
      run(*module, "train_step", {HostValue({2, 3}, {1, 3, 3, 2, 2, 2})});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[0].data[0], 1.5 * 3 - 2.0 * 2);
  std::vector<double> expected = {0, 0.75, 0.75, -2.0 / 3, -2.0 / 3, -2.0 / 3};
  ASSERT_EQ(r[1].data.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(r[1].data[i], expected[i], 1e-15) << "element " << i;
}

TEST_F(GradCheck, LayerNormWithBias) {
  param("x", {2, 3, 4});
  param("g", {4}, 0.5, 1.5);
  param("b", {4});
  check("%out = nn.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-5 : "
        "f64} : (tensor<2x3x4xf64>, tensor<4xf64>, tensor<4xf64>) -> "
        "tensor<2x3x4xf64>",
        {2, 3, 4});
}

TEST_F(GradCheck, LayerNormWithoutBias) {
  param("x", {3, 5});
  param("g", {5}, 0.5, 1.5);
  check("%out = nn.layer_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-5 : f64} "
        ": (tensor<3x5xf64>, tensor<5xf64>) -> tensor<3x5xf64>",
        {3, 5});
}

TEST_F(GradCheck, LayerNormLeadingAxis) {
  // axis 1 of a rank-3 tensor: the statistics span the last two dims.
  param("x", {2, 3, 4});
  param("g", {3, 4}, 0.5, 1.5);
  param("b", {3, 4});
  check("%out = nn.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-5 : "
        "f64} : (tensor<2x3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>) -> "
        "tensor<2x3x4xf64>",
        {2, 3, 4});
}

TEST_F(GradCheck, LayerNormParamsOnly) {
  // The normalized tensor is an input: only scale and bias get gradients.
  randomInput("x", {3, 4});
  param("g", {4}, 0.5, 1.5);
  param("b", {4});
  check("%out = nn.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-5 : "
        "f64} : (tensor<3x4xf64>, tensor<4xf64>, tensor<4xf64>) -> "
        "tensor<3x4xf64>",
        {3, 4});
}

TEST_F(GradCheck, SoftmaxLastAxis) {
  param("x", {2, 3, 4}, -2, 2);
  check("%out = nn.softmax %x {axis = 2 : i64} : tensor<2x3x4xf64> -> "
        "tensor<2x3x4xf64>",
        {2, 3, 4});
}

TEST_F(GradCheck, SoftmaxMiddleAxis) {
  param("x", {2, 3, 4}, -2, 2);
  check("%out = nn.softmax %x {axis = 1 : i64} : tensor<2x3x4xf64> -> "
        "tensor<2x3x4xf64>",
        {2, 3, 4});
}

TEST_F(GradCheck, SoftmaxCrossEntropyMeanIgnored) {
  param("s", {4, 5}, -2, 2);
  input("l", {4}, "i64", {1, -100, 4, 0});
  check("%out = nn.softmax_cross_entropy %s, %l reduction(mean) "
        "{ignore_index = -100 : i64} : (tensor<4x5xf64>, tensor<4xi64>) -> "
        "tensor<f64>",
        {});
}

TEST_F(GradCheck, SoftmaxCrossEntropySumIgnored) {
  param("s", {4, 5}, -2, 2);
  input("l", {4}, "i32", {3, 3, 2, 0});
  check("%out = nn.softmax_cross_entropy %s, %l reduction(sum) "
        "{ignore_index = 3 : i64} : (tensor<4x5xf64>, tensor<4xi32>) -> "
        "tensor<f64>",
        {});
}

TEST_F(GradCheck, SoftmaxCrossEntropyNoneIgnored) {
  param("s", {4, 5}, -2, 2);
  input("l", {4}, "i64", {2, 0, -1, 4});
  check("%out = nn.softmax_cross_entropy %s, %l reduction(none) "
        "{ignore_index = -1 : i64} : (tensor<4x5xf64>, tensor<4xi64>) -> "
        "tensor<4xf64>",
        {4});
}

TEST_F(GradCheck, SoftmaxCrossEntropyMeanNoIgnoreIndex) {
  param("s", {3, 4}, -2, 2);
  input("l", {3}, "i64", {0, 3, 3});
  check("%out = nn.softmax_cross_entropy %s, %l reduction(mean) : "
        "(tensor<3x4xf64>, tensor<3xi64>) -> tensor<f64>",
        {});
}

TEST_F(GradCheck, SoftmaxCrossEntropySpatialMean) {
  // scores [N, C, d] = [2, 3, 2], labels [N, d] with one ignored element.
  param("s", {2, 3, 2}, -2, 2);
  input("l", {2, 2}, "i64", {2, -100, 0, 1});
  check("%out = nn.softmax_cross_entropy %s, %l reduction(mean) "
        "{ignore_index = -100 : i64} : (tensor<2x3x2xf64>, tensor<2x2xi64>) "
        "-> tensor<f64>",
        {});
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

TEST_F(GradCheck, MatMulVecVec) { checkMatMul({3}, {3}, {}); }
TEST_F(GradCheck, MatMulVecMat) { checkMatMul({3}, {3, 2}, {2}); }
TEST_F(GradCheck, MatMulMatVec) { checkMatMul({2, 3}, {3}, {2}); }
TEST_F(GradCheck, MatMulMatMat) { checkMatMul({2, 3}, {3, 4}, {2, 4}); }
TEST_F(GradCheck, MatMulLinear) { checkMatMul({2, 2, 3}, {3, 4}, {2, 2, 4}); }
TEST_F(GradCheck, MatMulLinearRank4) {
  checkMatMul({2, 1, 2, 3}, {3, 2}, {2, 1, 2, 2});
}
TEST_F(GradCheck, MatMulMatBatched) {
  checkMatMul({2, 3}, {2, 3, 4}, {2, 2, 4});
}
TEST_F(GradCheck, MatMulBatched) {
  checkMatMul({2, 2, 3}, {2, 3, 4}, {2, 2, 4});
}
TEST_F(GradCheck, MatMulBroadcastUnitBatch) {
  checkMatMul({1, 2, 3}, {2, 3, 4}, {2, 2, 4});
}
TEST_F(GradCheck, MatMulBroadcastBatch) {
  checkMatMul({2, 1, 2, 3}, {3, 3, 2}, {2, 3, 2, 2});
}
TEST_F(GradCheck, MatMulVecBatched) { checkMatMul({3}, {2, 3, 4}, {2, 4}); }
TEST_F(GradCheck, MatMulBatchedVec) { checkMatMul({2, 2, 3}, {3}, {2, 2}); }

TEST_F(GradCheck, MatMulOnlyWeightTrainable) {
  // Linear on an input activation: only the weight gets a gradient.
  randomInput("x", {2, 3, 4});
  param("w", {4, 5});
  check("%out = nn.matmul %x, %w : (tensor<2x3x4xf64>, tensor<4x5xf64>) -> "
        "tensor<2x3x5xf64>",
        {2, 3, 5});
}

TEST_F(GradCheck, GemmNN) {
  checkGemm(false, false, {{2, 4}}, ", alpha = 0.7 : f64, beta = 1.3 : f64");
}
TEST_F(GradCheck, GemmTN) {
  checkGemm(true, false, {{4}}, ", alpha = 0.7 : f64, beta = 1.3 : f64");
}
TEST_F(GradCheck, GemmNT) {
  checkGemm(false, true, {{2, 1}}, ", alpha = -1.5 : f64, beta = 0.5 : f64");
}
TEST_F(GradCheck, GemmTT) {
  checkGemm(true, true, std::vector<int64_t>{},
            ", alpha = 2.0 : f64, beta = -0.25 : f64");
}
TEST_F(GradCheck, GemmNoC) { checkGemm(false, true, std::nullopt, ""); }
TEST_F(GradCheck, GemmDefaultAlphaBeta) {
  checkGemm(true, false, {{1, 4}}, "");
}

//===----------------------------------------------------------------------===//
// Indexing and data movement
//===----------------------------------------------------------------------===//

TEST_F(GradCheck, GatherEmbedding) {
  // Duplicate ids (3 twice, 0 twice via -5) and negative ids add up.
  param("e", {5, 3});
  input("ids", {2, 3}, "i64", {0, 3, -1, 3, 2, -5});
  check("%out = nn.gather %e, %ids {axis = 0 : i64} : (tensor<5x3xf64>, "
        "tensor<2x3xi64>) -> tensor<2x3x3xf64>",
        {2, 3, 3});
}

TEST_F(GradCheck, GatherAxis1) {
  param("x", {3, 4});
  input("ids", {3}, "i32", {1, -3, 3});
  check("%out = nn.gather %x, %ids {axis = 1 : i64} : (tensor<3x4xf64>, "
        "tensor<3xi32>) -> tensor<3x3xf64>",
        {3, 3});
}

TEST_F(GradCheck, GatherScalarIndex) {
  param("x", {2, 4, 3});
  input("k", {}, "i64", {-2});
  check("%out = nn.gather %x, %k {axis = 1 : i64} : (tensor<2x4x3xf64>, "
        "tensor<i64>) -> tensor<2x3xf64>",
        {2, 3});
}

TEST_F(GradCheck, Reshape) {
  param("x", {2, 3, 4});
  check("%y = nn.reshape %x : tensor<2x3x4xf64> -> tensor<6x4xf64>\n"
        "%out = nn.tanh %y : tensor<6x4xf64>",
        {6, 4});
}

TEST_F(GradCheck, Squeeze) {
  param("x", {2, 1, 3});
  check("%out = nn.squeeze %x {axes = array<i64: 1>} : tensor<2x1x3xf64> -> "
        "tensor<2x3xf64>",
        {2, 3});
}

TEST_F(GradCheck, Unsqueeze) {
  param("x", {2, 3});
  check("%out = nn.unsqueeze %x {axes = array<i64: 0, 2>} : tensor<2x3xf64> "
        "-> tensor<1x2x1x3xf64>",
        {1, 2, 1, 3});
}

TEST_F(GradCheck, Expand) {
  param("x", {3, 1});
  check("%out = nn.expand %x : tensor<3x1xf64> -> tensor<2x3x4xf64>",
        {2, 3, 4});
}

TEST_F(GradCheck, ExpandScalar) {
  param("x", {});
  check("%out = nn.expand %x : tensor<f64> -> tensor<2x3xf64>", {2, 3});
}

TEST_F(GradCheck, Transpose) {
  param("x", {2, 3, 4});
  check("%out = nn.transpose %x {perm = array<i64: 2, 0, 1>} : "
        "tensor<2x3x4xf64> -> tensor<4x2x3xf64>",
        {4, 2, 3});
}

TEST_F(GradCheck, SliceStrided) {
  param("x", {4, 5});
  check("%out = nn.slice %x {offsets = array<i64: 1, 0>, strides = "
        "array<i64: 2, 2>} : tensor<4x5xf64> -> tensor<2x3xf64>",
        {2, 3});
}

TEST_F(GradCheck, SliceNegativeStride) {
  param("x", {4, 5});
  check("%out = nn.slice %x {offsets = array<i64: 3, 4>, strides = "
        "array<i64: -2, -1>} : tensor<4x5xf64> -> tensor<2x4xf64>",
        {2, 4});
}

TEST_F(GradCheck, Concat) {
  param("a", {2, 1});
  param("b", {2, 3});
  check("%out = nn.concat %a, %b, %a {axis = 1 : i64} : (tensor<2x1xf64>, "
        "tensor<2x3xf64>, tensor<2x1xf64>) -> tensor<2x5xf64>",
        {2, 5});
}

TEST_F(GradCheck, ConcatWithInput) {
  param("a", {1, 3});
  randomInput("x", {2, 3});
  check("%out = nn.concat %x, %a {axis = 0 : i64} : (tensor<2x3xf64>, "
        "tensor<1x3xf64>) -> tensor<3x3xf64>",
        {3, 3});
}

TEST_F(GradCheck, SplitWithUnusedResult) {
  param("x", {2, 6});
  check(R"(
  %s:3 = nn.split %x {axis = 1 : i64} : (tensor<2x6xf64>) -> (tensor<2x2xf64>, tensor<2x1xf64>, tensor<2x3xf64>)
  %out = nn.concat %s#2, %s#0 {axis = 1 : i64} : (tensor<2x3xf64>, tensor<2x2xf64>) -> tensor<2x5xf64>)",
        {2, 5});
}

TEST_F(GradCheck, FrozenAndBufferParamsGetNoGradient) {
  // Only %w is trainable: @train_step returns (loss, dw).
  randomInput("frozen", {2, 3}, Kind::Frozen);
  param("w", {2, 3});
  randomInput("buffer", {3}, Kind::Buffer);
  check(R"(
  %a = nn.mul %frozen, %w : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
  %out = nn.add %a, %buffer : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>)",
        {2, 3});
}

TEST_F(GradCheck, HarnessFlagsAWrongGradient) {
  // A hand-written @train_step with d(sum(x^3 w))/dx = 2 x w instead of
  // 3 x^2 w: the comparison must report every element.
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  paramData("x", {3}, {0.5, -1.0, 2.0});
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @forward(%x: tensor<3xf64> {nn.param = "x"}) -> (tensor<f64> {nn.output = "loss"}) {
      %w = nn.constant dense<[1.0, 2.0, -1.0]> : tensor<3xf64>
      %x2 = nn.mul %x, %x : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
      %x3 = nn.mul %x2, %x : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
      %p = nn.mul %x3, %w : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
      %l = nn.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : tensor<3xf64> -> tensor<f64>
      return %l : tensor<f64>
    }
    func.func @train_step(%x: tensor<3xf64> {nn.param = "x"}) -> (tensor<f64>, tensor<3xf64>) {
      %w = nn.constant dense<[1.0, 2.0, -1.0]> : tensor<3xf64>
      %x2 = nn.mul %x, %x : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
      %x3 = nn.mul %x2, %x : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
      %p = nn.mul %x3, %w : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
      %l = nn.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : tensor<3xf64> -> tensor<f64>
      %two = nn.constant dense<2.0> : tensor<f64>
      %xw = nn.mul %x, %w : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
      %g = nn.mul %xw, %two : (tensor<3xf64>, tensor<f64>) -> tensor<3xf64>
      return %l, %g : tensor<f64>, tensor<3xf64>
    })mlir",
                                              &ctx);
  ASSERT_TRUE(module) << diagnostics;
  EXPECT_EQ(compareGradients(*module).size(), 3u);
}

//===----------------------------------------------------------------------===//
// A composite: embedding, pre-norm MLP block with residual, tied LM head and
// cross-entropy, the shape of a GPT layer without attention.
//===----------------------------------------------------------------------===//

TEST_F(GradCheck, TinyMlpBlock) {
  param("wte", {6, 4});
  param("ln.g", {4}, 0.5, 1.5);
  param("ln.b", {4});
  param("fc.w", {4, 8}, -0.5, 0.5);
  param("fc.b", {8});
  param("proj.w", {8, 4}, -0.5, 0.5);
  input("ids", {2, 3}, "i64", {1, 5, 2, 0, 5, 3});
  input("targets", {2, 3}, "i64", {5, 2, -100, 5, 3, 1});
  check(R"(
  %h = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<6x4xf64>, tensor<2x3xi64>) -> tensor<2x3x4xf64>
  %n = nn.layer_norm %h, %ln.g, %ln.b {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x3x4xf64>, tensor<4xf64>, tensor<4xf64>) -> tensor<2x3x4xf64>
  %u = nn.matmul %n, %fc.w : (tensor<2x3x4xf64>, tensor<4x8xf64>) -> tensor<2x3x8xf64>
  %ub = nn.add %u, %fc.b : (tensor<2x3x8xf64>, tensor<8xf64>) -> tensor<2x3x8xf64>
  %a = nn.gelu %ub approximate(tanh) : tensor<2x3x8xf64>
  %d = nn.matmul %a, %proj.w : (tensor<2x3x8xf64>, tensor<8x4xf64>) -> tensor<2x3x4xf64>
  %r = nn.add %h, %d : (tensor<2x3x4xf64>, tensor<2x3x4xf64>) -> tensor<2x3x4xf64>
  %flat = nn.reshape %r : tensor<2x3x4xf64> -> tensor<6x4xf64>
  %logits = nn.gemm %flat, %wte {trans_b = true} : (tensor<6x4xf64>, tensor<6x4xf64>) -> tensor<6x6xf64>
  %t = nn.reshape %targets : tensor<2x3xi64> -> tensor<6xi64>
  %out = nn.softmax_cross_entropy %logits, %t reduction(mean) {ignore_index = -100 : i64} : (tensor<6x6xf64>, tensor<6xi64>) -> tensor<f64>)",
        {});
}

} // namespace

// nn.attention's rule (nn.attention_grad) against finite differences of
// the interpreter's forward, which the AttentionForward* tests below tie to
// the unfused MatMul-scale-mask-Softmax-MatMul graph.
TEST_F(GradCheck, AttentionCausal) {
  param("q", {2, 2, 3, 4});
  param("k", {2, 2, 3, 4});
  param("v", {2, 2, 3, 4});
  check("%out, %lse = nn.attention %q, %k, %v {causal = true, scale = 0.5 : "
        "f64} : (tensor<2x2x3x4xf64>, tensor<2x2x3x4xf64>, "
        "tensor<2x2x3x4xf64>) -> (tensor<2x2x3x4xf64>, tensor<2x2x3xf64>)",
        {2, 2, 3, 4});
}

TEST_F(GradCheck, AttentionMaskedNonSquare) {
  // T = 2 queries over S = 4 keys, a broadcast mask, rank 3 (one head).
  input("m", {1, 4}, "i1", {1, 0, 1, 1});
  param("q", {3, 2, 5});
  param("k", {3, 4, 5});
  param("v", {3, 4, 5});
  check("%out, %lse = nn.attention %q, %k, %v mask %m {causal = false, scale "
        "= 0.7 : f64} : (tensor<3x2x5xf64>, tensor<3x4x5xf64>, "
        "tensor<3x4x5xf64>, tensor<1x4xi1>) -> (tensor<3x2x5xf64>, "
        "tensor<3x2xf64>)",
        {3, 2, 5});
}
