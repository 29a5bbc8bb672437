//===- ConvertElementwise.cpp - elementwise ONNX converters ---------------===//
//
// Binary arithmetic (Add, Sub, Mul, Div, Pow) and comparisons with numpy
// broadcasting, Where, Cast, and Max and Min of any number of inputs. The
// binary and unary templates the table instantiates per nn op are in
// ConvertersImpl.h. Constant inputs fold on the host.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ConvertersImpl.h"

#include "dialects/nn/NNOps.h"

using namespace mlir;
using namespace autopar;

namespace autopar::onnx_import {

namespace {

/// Fails unless the shapes of inputs 0 and 1 broadcast.
LogicalResult checkBroadcast(NodeContext &ctx) {
  if (failed(nn::broadcastShapes(ctx.inputType(0).getShape(),
                                 ctx.inputType(1).getShape())))
    return ctx.fail("operand shapes " +
                    shapeToString(ctx.inputType(0).getShape()) + " and " +
                    shapeToString(ctx.inputType(1).getShape()) +
                    " do not broadcast");
  return success();
}

} // namespace

/// Both operands as values with the same element type; a constant operand
/// of another type is converted on the host (ONNX Pow's exponent).
LogicalResult binaryOperands(NodeContext &ctx, Value &lhs, Value &rhs,
                             bool castRhs) {
  Type le = ctx.inputType(0).getElementType();
  Type re = ctx.inputType(1).getElementType();
  // A float64 constant beside a float32 value at run time (float64 compute
  // runs in float32, see convertCast): the constant rounded to float32.
  for (unsigned i : {0u, 1u}) {
    const HostTensor *c = ctx.constInput(i);
    Type other = i == 0 ? re : le;
    if (!c || !ctx.inputType(i).getElementType().isF64() || !other.isF32())
      continue;
    Value v = nn::ConstantOp::create(
        ctx.builder(), ctx.loc(),
        hostCast(*c, DType::Float).toAttr(ctx.builder().getContext()));
    FailureOr<Value> o = ctx.input(1 - i);
    if (failed(o))
      return failure();
    lhs = i == 0 ? v : *o;
    rhs = i == 0 ? *o : v;
    return checkBroadcast(ctx);
  }
  FailureOr<Value> l = ctx.input(0);
  if (failed(l))
    return failure();
  if (le != re && castRhs) {
    if (const HostTensor *c = ctx.constInput(1)) {
      HostTensor cast = hostCast(*c, mlirToDType(le));
      rhs = nn::ConstantOp::create(ctx.builder(), ctx.loc(),
                                   cast.toAttr(ctx.builder().getContext()));
    } else {
      FailureOr<Value> r = ctx.input(1);
      if (failed(r))
        return failure();
      rhs = nn::CastOp::create(ctx.builder(), ctx.loc(),
                               ctx.inputType(1).clone(le), *r);
    }
  } else {
    if (le != re)
      return ctx.fail("operand element types differ: " + typeString(le) +
                      " and " + typeString(re));
    FailureOr<Value> r = ctx.input(1);
    if (failed(r))
      return failure();
    rhs = *r;
  }
  lhs = *l;
  return checkBroadcast(ctx);
}

/// Whether `t` holds positions: integers a, a + 1, ... along its one dim
/// over 1.
static bool isPositions(const HostTensor &t) {
  if (t.isFloat() || t.size() < 2 ||
      llvm::count_if(t.shape, [](int64_t d) { return d != 1; }) != 1)
    return false;
  for (int64_t i = 1; i < t.size(); ++i)
    if (t.ints[i] != t.ints[0] + i)
      return false;
  return true;
}

ConvertFn compare(nn::ComparePredicate pred, HostBinary hostOp) {
  return [=](NodeContext &ctx) -> LogicalResult {
    // Constants fold, but not into a table too large for the host, nor a
    // [T, S] mask compared from positions (a causal mask that would be a
    // T x S buffer): those compare at run time, and
    // autopar-fuse-attention knows a causal one from its operands.
    if (ctx.allInputsConstant()) {
      const HostTensor &a = *ctx.constInput(0), &b = *ctx.constInput(1);
      auto shape = nn::broadcastShapes(a.shape, b.shape);
      bool positions = isPositions(a) && isPositions(b) && succeeded(shape) &&
                       numElements(*shape) > std::max(a.size(), b.size());
      if (!positions && foldableBroadcast(a.shape, b.shape))
        return setHost(ctx, hostBinary(hostOp, a, b));
    }
    if (ctx.inputType(0).getElementType().isInteger(1))
      return ctx.fail("comparison of bool tensors is not supported");
    Value lhs, rhs;
    if (failed(binaryOperands(ctx, lhs, rhs, /*castRhs=*/false)))
      return failure();
    ctx.setOutput(
        0, nn::CompareOp::create(ctx.builder(), ctx.loc(), pred, lhs, rhs));
    return success();
  };
}

LogicalResult convertWhere(NodeContext &ctx) {
  if (ctx.allInputsConstant())
    return setHost(ctx, hostWhere(*ctx.constInput(0), *ctx.constInput(1),
                                  *ctx.constInput(2)));
  if (ctx.inputType(1).getElementType() != ctx.inputType(2).getElementType())
    return ctx.fail("operands X and Y differ in element type");
  auto shape = nn::broadcastShapes(ctx.inputType(1).getShape(),
                                   ctx.inputType(2).getShape());
  if (failed(shape) ||
      failed(nn::broadcastShapes(ctx.inputType(0).getShape(), *shape)))
    return ctx.fail("operand shapes do not broadcast");
  FailureOr<Value> c = ctx.input(0), x = ctx.input(1), y = ctx.input(2);
  if (failed(c) || failed(x) || failed(y))
    return failure();
  ctx.setOutput(0, nn::WhereOp::create(ctx.builder(), ctx.loc(), *c, *x, *y));
  return success();
}

LogicalResult convertCast(NodeContext &ctx) {
  DType to = static_cast<DType>(ctx.intAttr("to", 0));
  Type toType = dtypeToMlir(to, ctx.builder().getContext());
  if (!toType)
    return ctx.fail("cast to " + dtypeName(to) + " is not supported");
  // ONNX left Cast's rounding to bfloat16 open until opset 19 (onnx 1.12's
  // tests truncate, later ones round to nearest even): refuse, not guess.
  if (to == DType::BFloat16)
    return ctx.fail("cast to BFLOAT16 is not supported (its rounding is "
                    "unspecified before opset 19)");
  // float32 upcast to float64 at run time (a softmax PyTorch exports in
  // double around float32 values): computed in float32, its result cast
  // back to float32 differs by float32 rounding at most (docs/importer.md).
  if (to == DType::Double && ctx.inputType(0).getElementType().isF32())
    toType = ctx.inputType(0).getElementType();
  return foldOrBuild(
      ctx, [&](const HostTensor &c) { return hostCast(c, to); },
      [&](Value x) -> Value {
        if (ctx.inputType(0).getElementType() == toType)
          return x;
        return nn::CastOp::create(ctx.builder(), ctx.loc(),
                                  ctx.inputType(0).clone(toType), x);
      });
}

LogicalResult convertPow(NodeContext &ctx) {
  if (isa<FloatType>(ctx.inputType(0).getElementType()) ||
      ctx.allInputsConstant())
    return binary<nn::PowOp>(HostBinary::Pow, /*floatOnly=*/true)(ctx);
  // An integer base: pow in double, truncated to the base's type, as the
  // import-time folding (hostBinary) computes it.
  if (!isa<IntegerType>(ctx.inputType(0).getElementType()) ||
      ctx.inputType(0).getElementType().isInteger(1))
    return ctx.fail("base of type " +
                    typeString(ctx.inputType(0).getElementType()) +
                    " is not supported");
  FailureOr<Value> x = ctx.input(0), y = ctx.input(1);
  if (failed(x) || failed(y) || failed(checkBroadcast(ctx)))
    return failure();
  OpBuilder &b = ctx.builder();
  auto toF64 = [&](Value v) -> Value {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getElementType().isF64())
      return v;
    return nn::CastOp::create(b, ctx.loc(), type.clone(b.getF64Type()), v);
  };
  Value p = nn::PowOp::create(b, ctx.loc(), toF64(*x), toF64(*y));
  ctx.setOutput(0, nn::CastOp::create(
                       b, ctx.loc(),
                       cast<RankedTensorType>(p.getType())
                           .clone(ctx.inputType(0).getElementType()),
                       p));
  return success();
}

/// Max and Min of any number of inputs (broadcast), pairwise: a select by
/// a comparison; for floats, the mean of the selections with and without
/// ties (a tie gives each side half of the gradient, as torch.maximum and
/// torch.minimum do; the value is exact).
ConvertFn extremum(bool isMax) {
  return [=](NodeContext &ctx) -> LogicalResult {
    const auto strict = isMax ? HostBinary::Greater : HostBinary::Less;
    if (ctx.allInputsConstant()) {
      HostTensor acc = *ctx.constInput(0);
      for (unsigned i = 1; i < ctx.numInputs(); ++i) {
        const HostTensor &next = *ctx.constInput(i);
        llvm::Expected<HostTensor> pick = hostBinary(strict, acc, next);
        if (!pick)
          return failWith(ctx, pick.takeError());
        llvm::Expected<HostTensor> w = hostWhere(*pick, acc, next);
        if (!w)
          return failWith(ctx, w.takeError());
        acc = std::move(*w);
      }
      ctx.setOutput(0, std::move(acc));
      return success();
    }
    Type et = ctx.inputType(0).getElementType();
    SmallVector<int64_t> shape(ctx.inputType(0).getShape());
    for (unsigned i = 1; i < ctx.numInputs(); ++i) {
      if (ctx.inputType(i).getElementType() != et)
        return ctx.fail("the inputs differ in element type");
      auto s = nn::broadcastShapes(shape, ctx.inputType(i).getShape());
      if (failed(s))
        return ctx.fail("input shapes do not broadcast");
      shape = *s;
    }
    if (et.isInteger(1))
      return ctx.fail("bool inputs are not supported");
    OpBuilder &b = ctx.builder();
    Location loc = ctx.loc();
    FailureOr<Value> first = ctx.input(0);
    if (failed(first))
      return failure();
    Value acc = *first;
    const auto pred =
        isMax ? nn::ComparePredicate::gt : nn::ComparePredicate::lt;
    const auto orEqual =
        isMax ? nn::ComparePredicate::ge : nn::ComparePredicate::le;
    for (unsigned i = 1; i < ctx.numInputs(); ++i) {
      FailureOr<Value> next = ctx.input(i);
      if (failed(next))
        return failure();
      Value strictPick = nn::WhereOp::create(
          b, loc, nn::CompareOp::create(b, loc, pred, acc, *next), acc, *next);
      if (!isa<FloatType>(et)) {
        acc = strictPick;
        continue;
      }
      Value tiePick = nn::WhereOp::create(
          b, loc, nn::CompareOp::create(b, loc, orEqual, acc, *next), acc,
          *next);
      acc = nn::MulOp::create(b, loc,
                              nn::AddOp::create(b, loc, strictPick, tiePick),
                              scalarConstant(b, loc, et, 0.5));
    }
    ctx.setOutput(0, acc);
    return success();
  };
}

} // namespace autopar::onnx_import
