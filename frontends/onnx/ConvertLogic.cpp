//===- ConvertLogic.cpp - logic, masks, one-hot, constant-only math -------===//
//
// TopK (K rounds of a max), Not, Trilu (a select by a constant mask), Sin
// and Cos of constants only, and OneHot.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ConvertersImpl.h"

#include "dialects/nn/NNOps.h"

#include <limits>

using namespace mlir;
using namespace autopar;

namespace autopar::onnx_import {

/// TopK(x, K) along `axis`: the K largest (or smallest) values and their
/// indices, sorted, equal values in index order (the lower index first).
/// K rounds of: the extreme m of what is left, the first index i where it
/// is (the least index among the extremes), the value read at i (so the
/// gradient reaches that element only, as torch.topk's), and i struck out.
/// K x the input's work: meant for the small K of routers and samplers.
LogicalResult convertTopK(NodeContext &ctx) {
  RankedTensorType xt = ctx.inputType(0);
  Type et = xt.getElementType();
  FailureOr<int64_t> axis = axisAttr(ctx, -1, xt.getRank());
  FailureOr<const HostTensor *> kT = ctx.requireConst(1, "K");
  FailureOr<Value> in = ctx.input(0);
  if (failed(axis) || failed(kT) || failed(in))
    return failure();
  if ((*kT)->size() != 1 || (*kT)->isFloat())
    return ctx.fail("K must be one integer");
  const int64_t k = (*kT)->intAt(0), n = xt.getDimSize(*axis);
  if (k < 0 || k > n)
    return ctx.fail("K " + llvm::Twine(k) + " is not in [0, " + llvm::Twine(n) +
                    "] (the axis' size)");
  if (k == 0)
    return ctx.fail("K 0 (empty outputs) is not supported");
  const bool largest = ctx.intAttr("largest", 1) != 0;
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  // The positions along the axis, in f32 whatever the input's type (exact
  // below 2^24; bf16 would be exact only to 256).
  if (n > (int64_t(1) << 24))
    return ctx.fail("axis of " + llvm::Twine(n) + " elements is too long");
  SmallVector<int64_t> iotaShape(xt.getRank(), 1);
  iotaShape[*axis] = n;
  HostTensor iotaT = HostTensor::zeros(DType::Float, iotaShape);
  for (int64_t c = 0; c < n; ++c)
    iotaT.set(c, -double(c));
  Value negIota = nn::ConstantOp::create(b, loc, iotaT.toAttr(b.getContext()));
  Type f32 = b.getF32Type();
  Value x = *in;
  Value cur = largest ? x : nn::NegOp::create(b, loc, x);
  SmallVector<Value> values, indices;
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t r = 0; r < k; ++r) {
    Value m = nn::ReduceMaxOp::create(b, loc, cur, {*axis}, true);
    Value at = nn::CompareOp::create(b, loc, nn::ComparePredicate::eq, cur, m);
    // -(the least index among the extremes) = max over them of -index.
    Value first = nn::ReduceMaxOp::create(
        b, loc,
        nn::WhereOp::create(b, loc, at, negIota,
                            scalarConstant(b, loc, f32, -double(n))),
        {*axis}, true);
    Value pick =
        nn::CompareOp::create(b, loc, nn::ComparePredicate::eq, negIota, first);
    values.push_back(nn::ReduceSumOp::create(
        b, loc,
        nn::WhereOp::create(b, loc, pick, x, scalarConstant(b, loc, et, 0)),
        {*axis}, true));
    Value index = nn::NegOp::create(b, loc, first);
    indices.push_back(nn::CastOp::create(
        b, loc, cast<RankedTensorType>(index.getType()).clone(b.getI64Type()),
        index));
    if (r + 1 < k)
      cur = nn::WhereOp::create(b, loc, pick, scalarConstant(b, loc, et, -inf),
                                cur);
  }
  auto join = [&](SmallVector<Value> &parts) -> Value {
    return parts.size() == 1 ? parts[0]
                             : nn::ConcatOp::create(b, loc, parts, *axis);
  };
  ctx.setOutput(0, join(values));
  ctx.setOutput(1, join(indices));
  return success();
}

/// Not(x) = x ? false : true.
LogicalResult convertNot(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Type i1 = b.getI1Type();
  if (!ctx.inputType(0).getElementType().isInteger(1))
    return ctx.fail("element type " +
                    typeString(ctx.inputType(0).getElementType()) +
                    " is not supported (Not takes bool)");
  if (ctx.allInputsConstant()) {
    HostTensor f = HostTensor::zeros(DType::Bool, {}),
               t = HostTensor::zeros(DType::Bool, {});
    t.setInt(0, 1);
    return setHost(ctx, hostWhere(*ctx.constInput(0), f, t));
  }
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  ctx.setOutput(0, nn::WhereOp::create(b, ctx.loc(), *x,
                                       scalarConstant(b, ctx.loc(), i1, 0),
                                       scalarConstant(b, ctx.loc(), i1, 1)));
  return success();
}

/// Trilu: x where the element (i, j) of the last two dims is kept (upper:
/// j - i >= k; lower: j - i <= k), else 0, as a select by a constant mask.
LogicalResult convertTrilu(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  if (type.getRank() < 2)
    return ctx.fail("input must have rank >= 2, got " +
                    shapeToString(type.getShape()));
  int64_t k = 0;
  if (ctx.hasInput(1)) {
    FailureOr<const HostTensor *> t = requireOneValue(ctx, 1, "k");
    if (failed(t))
      return failure();
    k = (*t)->intAt(0);
  }
  bool upper = ctx.intAttr("upper", 1) != 0;
  int64_t rows = type.getDimSize(type.getRank() - 2),
          cols = type.getDimSize(type.getRank() - 1);
  HostTensor mask = HostTensor::zeros(DType::Bool, {rows, cols});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      mask.setInt(i * cols + j, upper ? j - i >= k : j - i <= k);
  HostTensor zero = HostTensor::zeros(mlirToDType(type.getElementType()), {});
  return foldOrBuild(
      ctx, [&](const HostTensor &c) { return hostWhere(mask, c, zero); },
      [&](Value x) {
        OpBuilder &b = ctx.builder();
        auto constant = [&](const HostTensor &t) {
          return nn::ConstantOp::create(b, ctx.loc(), t.toAttr(b.getContext()));
        };
        return nn::WhereOp::create(b, ctx.loc(), constant(mask), x,
                                   constant(zero));
      });
}

/// Sin and Cos of constants only (rotary tables built from arange fold at
/// import); the IR has no trigonometric ops.
ConvertFn constantOnly(HostUnary op, StringRef name) {
  return [=](NodeContext &ctx) -> LogicalResult {
    if (!isa<FloatType>(ctx.inputType(0).getElementType()))
      return ctx.fail("element type " +
                      typeString(ctx.inputType(0).getElementType()) +
                      " is not supported");
    if (!ctx.allInputsConstant())
      return ctx.fail(name + " of a value computed at run time is not "
                             "supported (only of constants, folded at "
                             "import)");
    ctx.setOutput(0, hostUnary(op, *ctx.constInput(0)));
    return success();
  };
}

/// OneHot: indices == c along a new `axis` of size depth, selecting
/// values[1] (on) or values[0] (off); negative indices count from the end,
/// indices out of range give all off.
LogicalResult convertOneHot(NodeContext &ctx) {
  RankedTensorType indices = ctx.inputType(0), values = ctx.inputType(2);
  FailureOr<const HostTensor *> depthT = ctx.requireConst(1, "depth");
  if (failed(depthT))
    return failure();
  if ((*depthT)->size() != 1)
    return ctx.fail("depth must be a scalar");
  int64_t depth = (*depthT)->isFloat()
                      ? static_cast<int64_t>((*depthT)->floatAt(0))
                      : (*depthT)->intAt(0);
  if (depth <= 0)
    return ctx.fail("depth " + llvm::Twine(depth) + " is not positive");
  if (values.getRank() != 1 || values.getDimSize(0) != 2)
    return ctx.fail("values must be [off, on], got shape " +
                    shapeToString(values.getShape()));
  if (values.getElementType().isInteger(1) ||
      indices.getElementType().isInteger(1))
    return ctx.fail("bool indices or values are not supported");
  int64_t rank = indices.getRank() + 1;
  FailureOr<int64_t> axis = axisAttr(ctx, -1, rank);
  FailureOr<Value> in = ctx.input(0), v = ctx.input(2);
  if (failed(axis) || failed(in) || failed(v))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Type i64 = b.getIntegerType(64);
  Value index = *in;
  if (indices.getElementType() != i64)
    index = nn::CastOp::create(b, loc, indices.clone(i64), index);
  index = wrapNegative(b, loc, index, depth);
  SmallVector<int64_t> iotaShape(rank, 1);
  iotaShape[*axis] = depth;
  HostTensor iota = HostTensor::zeros(DType::Int64, iotaShape);
  for (int64_t c = 0; c < depth; ++c)
    iota.setInt(c, c);
  Value hot = nn::CompareOp::create(
      b, loc, nn::ComparePredicate::eq,
      nn::UnsqueezeOp::create(b, loc, index, ArrayRef<int64_t>{*axis}),
      nn::ConstantOp::create(b, loc, iota.toAttr(b.getContext())));
  auto pick = [&](int64_t i) -> Value {
    return nn::SliceOp::create(b, loc, values.clone({1}), *v,
                               b.getDenseI64ArrayAttr({i}),
                               b.getDenseI64ArrayAttr({1}));
  };
  ctx.setOutput(0, nn::WhereOp::create(b, loc, hot, pick(1), pick(0)));
  return success();
}

} // namespace autopar::onnx_import
