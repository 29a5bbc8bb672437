//===- Converters.cpp - per-op ONNX converters ----------------------------===//
//
// One entry per ONNX op type: the op versions it implements, the attributes
// it reads and a converter. Converters fold nodes whose inputs are all known
// at import (shape subgraphs) on the host and emit nn ops otherwise. Anything
// a converter does not implement is rejected with a message naming it, never
// imported with other semantics.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/Converters.h"

#include "dialects/nn/NNOps.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/STLExtras.h"

#include <cctype>
#include <numeric>

using namespace mlir;
using namespace autopar;
using namespace autopar::onnx_import;

namespace {

/// Fails the node with the message of `err`.
LogicalResult failWith(NodeContext &ctx, llvm::Error err) {
  return ctx.fail(llvm::toString(std::move(err)));
}

/// Sets output 0 from a host computation, or fails with its error.
LogicalResult setHost(NodeContext &ctx, llvm::Expected<HostTensor> t) {
  if (!t)
    return failWith(ctx, t.takeError());
  ctx.setOutput(0, std::move(*t));
  return success();
}

/// Optional input i as a constant holding one value (a scalar or a
/// one-element tensor); fails naming `what` if it is not.
FailureOr<const HostTensor *> requireOneValue(NodeContext &ctx, unsigned i,
                                              StringRef what) {
  FailureOr<const HostTensor *> t = ctx.requireConst(i, what);
  if (failed(t))
    return failure();
  if ((*t)->size() != 1)
    return ctx.fail(what + " must hold one value");
  return t;
}

std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// Normalizes and sorts `axes` for a tensor of rank `rank`.
FailureOr<SmallVector<int64_t>> normalizeAxes(NodeContext &ctx,
                                              ArrayRef<int64_t> axes,
                                              int64_t rank) {
  SmallVector<int64_t> out;
  for (int64_t a : axes) {
    llvm::Expected<int64_t> n = normalizeAxis(a, rank);
    if (!n)
      return failWith(ctx, n.takeError());
    if (llvm::is_contained(out, *n))
      return ctx.fail("axis " + llvm::Twine(a) + " is repeated");
    out.push_back(*n);
  }
  llvm::sort(out);
  return out;
}

FailureOr<int64_t> axisAttr(NodeContext &ctx, int64_t dflt, int64_t rank) {
  llvm::Expected<int64_t> axis =
      normalizeAxis(ctx.intAttr("axis", dflt), rank);
  if (!axis)
    return failWith(ctx, axis.takeError());
  return *axis;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Fails unless the shapes of inputs 0 and 1 broadcast.
/// A rank-0 constant `v` of element type `t` (broadcasts against anything).
Value scalarConstant(OpBuilder &b, Location loc, Type t, double v) {
  auto type = RankedTensorType::get({}, t);
  Attribute a = isa<FloatType>(t) ? Attribute(b.getFloatAttr(t, v))
                                  : Attribute(b.getIntegerAttr(t, int64_t(v)));
  return nn::ConstantOp::create(b, loc, DenseElementsAttr::get(type, a));
}

LogicalResult checkBroadcast(NodeContext &ctx) {
  if (failed(nn::broadcastShapes(ctx.inputType(0).getShape(),
                                 ctx.inputType(1).getShape())))
    return ctx.fail("operand shapes " +
                    shapeToString(ctx.inputType(0).getShape()) + " and " +
                    shapeToString(ctx.inputType(1).getShape()) +
                    " do not broadcast");
  return success();
}

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

template <typename OpTy>
ConvertFn binary(HostBinary hostOp, bool floatOnly = false) {
  return [=](NodeContext &ctx) -> LogicalResult {
    if (ctx.allInputsConstant())
      return setHost(ctx, hostBinary(hostOp, *ctx.constInput(0),
                                     *ctx.constInput(1)));
    if (floatOnly && !isa<FloatType>(ctx.inputType(0).getElementType()))
      return ctx.fail("only floating-point operands are supported, got " +
                      typeString(ctx.inputType(0).getElementType()));
    Value lhs, rhs;
    if (failed(binaryOperands(ctx, lhs, rhs, /*castRhs=*/floatOnly)))
      return failure();
    ctx.setOutput(0, OpTy::create(ctx.builder(), ctx.loc(), lhs, rhs));
    return success();
  };
}

ConvertFn compare(nn::ComparePredicate pred, HostBinary hostOp) {
  return [=](NodeContext &ctx) -> LogicalResult {
    if (ctx.allInputsConstant())
      return setHost(ctx, hostBinary(hostOp, *ctx.constInput(0),
                                     *ctx.constInput(1)));
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

template <typename OpTy>
ConvertFn unary(HostUnary hostOp, bool floatOnly) {
  return [=](NodeContext &ctx) -> LogicalResult {
    if (ctx.allInputsConstant()) {
      ctx.setOutput(0, hostUnary(hostOp, *ctx.constInput(0)));
      return success();
    }
    Type et = ctx.inputType(0).getElementType();
    if ((floatOnly && !isa<FloatType>(et)) || et.isInteger(1) ||
        (isa<IntegerType>(et) && cast<IntegerType>(et).isUnsigned()))
      return ctx.fail("element type " + typeString(et) + " is not supported");
    FailureOr<Value> x = ctx.input(0);
    if (failed(x))
      return failure();
    ctx.setOutput(0, OpTy::create(ctx.builder(), ctx.loc(), *x));
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
  if (const HostTensor *c = ctx.constInput(0)) {
    ctx.setOutput(0, hostCast(*c, to));
    return success();
  }
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  // float32 upcast to float64 at run time (a softmax PyTorch exports in
  // double around float32 values): computed in float32, its result cast
  // back to float32 differs by float32 rounding at most (docs/importer.md).
  if (to == DType::Double && ctx.inputType(0).getElementType().isF32())
    toType = ctx.inputType(0).getElementType();
  if (ctx.inputType(0).getElementType() == toType) {
    ctx.setOutput(0, *x);
    return success();
  }
  ctx.setOutput(0, nn::CastOp::create(ctx.builder(), ctx.loc(),
                                      ctx.inputType(0).clone(toType), *x));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

/// ReduceX: axes from the attribute (older versions) or the second input
/// (ReduceSum-13, ReduceMean/Max-18).
/// Integer `index` with negative values counted from the end of a dim of
/// `size` (index < 0 ? index + size : index).
Value wrapNegative(OpBuilder &b, Location loc, Value index, int64_t size) {
  Type t = cast<RankedTensorType>(index.getType()).getElementType();
  return nn::WhereOp::create(
      b, loc,
      nn::CompareOp::create(b, loc, nn::ComparePredicate::lt, index,
                            scalarConstant(b, loc, t, 0)),
      nn::AddOp::create(b, loc, index, scalarConstant(b, loc, t, size)),
      index);
}

/// Builds a reduction of x over `axes` (normalized, sorted).
using ReduceBuild =
    std::function<Value(OpBuilder &, Location, Value, ArrayRef<int64_t>, bool)>;

/// An ONNX reduction: axes from the attribute, or from a constant input
/// since opset `axesInputSince`; keepdims; noop_with_empty_axes.
ConvertFn reduceWith(int64_t axesInputSince, ReduceBuild build) {
  return [=](NodeContext &ctx) -> LogicalResult {
    int64_t rank = ctx.inputType(0).getRank();
    SmallVector<int64_t> axes;
    if (ctx.version() >= axesInputSince) {
      if (ctx.hasInput(1)) {
        FailureOr<const HostTensor *> t = ctx.requireConst(1, "axes");
        if (failed(t))
          return failure();
        axes = (*t)->toInts();
      }
    } else if (auto a = ctx.intsAttr("axes")) {
      axes = *a;
    }
    bool keepdims = ctx.intAttr("keepdims", 1) != 0;
    FailureOr<Value> x = ctx.input(0);
    if (failed(x))
      return failure();
    if (axes.empty()) {
      if (ctx.intAttr("noop_with_empty_axes", 0)) {
        ctx.setOutput(0, *x);
        return success();
      }
      for (int64_t i = 0; i < rank; ++i)
        axes.push_back(i);
    }
    FailureOr<SmallVector<int64_t>> norm = normalizeAxes(ctx, axes, rank);
    if (failed(norm))
      return failure();
    if (ctx.inputType(0).getElementType().isInteger(1))
      return ctx.fail("reduction of bool tensors is not supported");
    ctx.setOutput(0, build(ctx.builder(), ctx.loc(), *x, *norm, keepdims));
    return success();
  };
}

template <typename OpTy> ConvertFn reduce(int64_t axesInputSince) {
  return reduceWith(axesInputSince,
                    [](OpBuilder &b, Location loc, Value x,
                       ArrayRef<int64_t> axes, bool keepdims) -> Value {
                      return OpTy::create(b, loc, x, axes, keepdims);
                    });
}

/// log(sum(exp(x))) over the axes as max + log(sum(exp(x - max))) (float
/// x; the max terms of the gradient cancel).
Value logSumExp(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> axes,
                bool keepdims) {
  Value shifted =
      nn::SubOp::create(b, loc, x, nn::ReduceMaxOp::create(b, loc, x, axes,
                                                           true));
  Value logSum = nn::LogOp::create(
      b, loc,
      nn::ReduceSumOp::create(b, loc, nn::ExpOp::create(b, loc, shifted),
                              axes, keepdims));
  return nn::AddOp::create(
      b, loc, nn::ReduceMaxOp::create(b, loc, x, axes, keepdims), logSum);
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

LogicalResult convertLayerNorm(NodeContext &ctx) {
  if (ctx.intAttr("stash_type", 1) != 1)
    return ctx.fail("stash_type " + llvm::Twine(ctx.intAttr("stash_type", 1)) +
                    " is not supported (only 1: statistics in float32)");
  RankedTensorType xType = ctx.inputType(0);
  FailureOr<int64_t> axis = axisAttr(ctx, -1, xType.getRank());
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> normalized = xType.getShape().drop_front(*axis);
  for (unsigned i = 1; i < 3; ++i)
    if (ctx.hasInput(i) && ctx.inputType(i).getShape() != normalized)
      return ctx.fail(llvm::Twine(i == 1 ? "Scale" : "B") + " shape " +
                      shapeToString(ctx.inputType(i).getShape()) +
                      " is not the normalized shape " +
                      shapeToString(normalized) +
                      " (broadcast scale/bias are not supported)");
  FailureOr<Value> x = ctx.input(0), scale = ctx.input(1);
  if (failed(x) || failed(scale))
    return failure();
  Value bias;
  if (ctx.hasInput(2)) {
    FailureOr<Value> b = ctx.input(2);
    if (failed(b))
      return failure();
    bias = *b;
  }
  OpBuilder &b = ctx.builder();
  double epsilon = ctx.floatAttr("epsilon", 1e-5);
  ctx.setOutput(0, nn::LayerNormOp::create(b, ctx.loc(), xType, *x, *scale,
                                           bias, b.getI64IntegerAttr(*axis),
                                           b.getF64FloatAttr(epsilon)));
  if (!ctx.outputUsed(1) && !ctx.outputUsed(2))
    return success();
  // The statistics, [d0, ..., d(axis-1), 1, ..., 1] in float32 (stash_type
  // 1), as ONNX defines them: Mean, and 1 / sqrt(biased variance + epsilon).
  Location loc = ctx.loc();
  Value xf = *x;
  if (!xType.getElementType().isF32())
    xf = nn::CastOp::create(b, loc, xType.clone(b.getF32Type()), xf);
  auto axes = llvm::to_vector(llvm::seq<int64_t>(*axis, xType.getRank()));
  Value mean = nn::ReduceMeanOp::create(b, loc, xf, axes, /*keepdims=*/true);
  Value d = nn::SubOp::create(b, loc, xf, mean);
  Value var = nn::ReduceMeanOp::create(b, loc, nn::MulOp::create(b, loc, d, d),
                                       axes, /*keepdims=*/true);
  Value eps = nn::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                             static_cast<float>(epsilon)));
  Value inv = nn::ReciprocalOp::create(
      b, loc, nn::SqrtOp::create(b, loc, nn::AddOp::create(b, loc, var, eps)));
  ctx.setOutput(1, mean);
  ctx.setOutput(2, inv);
  return success();
}

LogicalResult convertSoftmax(NodeContext &ctx) {
  FailureOr<int64_t> axis = axisAttr(ctx, -1, ctx.inputType(0).getRank());
  FailureOr<Value> x = ctx.input(0);
  if (failed(axis) || failed(x))
    return failure();
  ctx.setOutput(0, nn::SoftmaxOp::create(ctx.builder(), ctx.loc(), *x, *axis));
  return success();
}

/// LogSoftmax as x - max - log(sum(exp(x - max))) over the axis (the
/// max only shifts: its gradient terms cancel).
LogicalResult convertLogSoftmax(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  // Its reductions run on float32, bfloat16 and float16.
  if (!isa<FloatType>(type.getElementType()) ||
      type.getElementType().isF64())
    return ctx.fail("element type " + typeString(type.getElementType()) +
                    " is not supported");
  FailureOr<int64_t> axis = axisAttr(ctx, -1, type.getRank());
  FailureOr<Value> x = ctx.input(0);
  if (failed(axis) || failed(x))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value shifted = nn::SubOp::create(
      b, loc, *x, nn::ReduceMaxOp::create(b, loc, *x, {*axis}, true));
  Value logSum = nn::LogOp::create(
      b, loc,
      nn::ReduceSumOp::create(b, loc, nn::ExpOp::create(b, loc, shifted),
                              {*axis}, true));
  ctx.setOutput(0, nn::SubOp::create(b, loc, shifted, logSum));
  return success();
}

/// SoftmaxCrossEntropyLoss with class weights or the log_prob output, from
/// elementwise ops and reductions (the fused nn.softmax_cross_entropy has
/// neither): log_prob = x - max - log(sum(exp(x - max))) over dim 1; the
/// label's log-probability and weight are picked with a one-hot mask, which
/// is all false for an ignored label (even one out of range).
LogicalResult decomposeSoftmaxCrossEntropy(NodeContext &ctx, Value scores,
                                           Value labels, Value weights,
                                           nn::LossReduction reduction,
                                           std::optional<int64_t> ignore) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  auto scoresType = cast<RankedTensorType>(scores.getType());
  auto labelsType = cast<RankedTensorType>(labels.getType());
  Type ft = scoresType.getElementType();
  int64_t rank = scoresType.getRank(), classes = scoresType.getDimSize(1);
  auto scalar = [&](Type t, double v) {
    return scalarConstant(b, loc, t, v);
  };
  Value max = nn::ReduceMaxOp::create(b, loc, scores, {1}, true);
  Value shifted = nn::SubOp::create(b, loc, scores, max);
  Value logSum = nn::LogOp::create(
      b, loc,
      nn::ReduceSumOp::create(b, loc, nn::ExpOp::create(b, loc, shifted), {1},
                              true));
  Value logProb = nn::SubOp::create(b, loc, shifted, logSum);
  if (ctx.numOutputs() > 1)
    ctx.setOutput(1, logProb);
  // onehot[n, c, ...] = labels[n, ...] == c.
  SmallVector<int64_t> labelShape(labelsType.getShape());
  labelShape.insert(labelShape.begin() + 1, 1);
  Value label = nn::ReshapeOp::create(b, loc, labelsType.clone(labelShape),
                                      labels);
  SmallVector<int64_t> classShape(rank, 1);
  classShape[1] = classes;
  Type lt = labelsType.getElementType();
  HostTensor iota = HostTensor::zeros(mlirToDType(lt), classShape);
  for (int64_t c = 0; c < classes; ++c)
    iota.setInt(c, c);
  Value classIds = nn::ConstantOp::create(b, loc, iota.toAttr(b.getContext()));
  Value onehot = nn::CompareOp::create(b, loc, nn::ComparePredicate::eq,
                                       label, classIds);
  Value zero = scalar(ft, 0.0);
  Value picked = nn::ReduceSumOp::create(
      b, loc, nn::WhereOp::create(b, loc, onehot, logProb, zero), {1}, false);
  // The weight of each element: weights[label], 0 where ignored.
  Value weight;
  if (weights) {
    Value w = nn::ReshapeOp::create(
        b, loc,
        RankedTensorType::get(classShape, ft), weights);
    weight = nn::ReduceSumOp::create(
        b, loc, nn::WhereOp::create(b, loc, onehot, w, zero), {1}, false);
  }
  if (ignore) {
    Value kept = nn::CompareOp::create(b, loc, nn::ComparePredicate::ne,
                                       labels, scalar(lt, *ignore));
    weight = nn::WhereOp::create(b, loc, kept, weight ? weight : scalar(ft, 1.0),
                                 zero);
  }
  Value loss = nn::NegOp::create(b, loc, picked);
  if (weight)
    loss = nn::MulOp::create(b, loc, loss, weight);
  if (reduction == nn::LossReduction::none) {
    ctx.setOutput(0, loss);
    return success();
  }
  auto all = llvm::to_vector(llvm::seq<int64_t>(0, labelsType.getRank()));
  Value total = nn::ReduceSumOp::create(b, loc, loss, all, false);
  if (reduction == nn::LossReduction::mean) {
    Value count = weight ? nn::ReduceSumOp::create(b, loc, weight, all, false)
                         : scalar(ft, labelsType.getNumElements());
    total = nn::DivOp::create(b, loc, total, count);
  }
  ctx.setOutput(0, total);
  return success();
}

LogicalResult convertSoftmaxCrossEntropy(NodeContext &ctx) {
  std::string red = ctx.stringAttr("reduction", "mean");
  std::optional<nn::LossReduction> reduction =
      nn::symbolizeLossReduction(red);
  if (!reduction)
    return ctx.fail("reduction '" + red + "' is not one of none, sum, mean");
  RankedTensorType scores = ctx.inputType(0), labels = ctx.inputType(1);
  if (scores.getRank() < 2)
    return ctx.fail("scores must have rank >= 2, got " +
                    shapeToString(scores.getShape()));
  SmallVector<int64_t> expected(scores.getShape());
  expected.erase(expected.begin() + 1);
  if (labels.getShape() != ArrayRef(expected))
    return ctx.fail("labels shape " + shapeToString(labels.getShape()) +
                    " does not match scores shape " +
                    shapeToString(scores.getShape()));
  FailureOr<Value> s = ctx.input(0), l = ctx.input(1);
  if (failed(s) || failed(l))
    return failure();
  if (ctx.hasInput(2) || ctx.outputUsed(1)) {
    Value weights;
    if (ctx.hasInput(2)) {
      if (ctx.inputType(2).getShape() != ArrayRef<int64_t>{scores.getDimSize(1)} ||
          ctx.inputType(2).getElementType() != scores.getElementType())
        return ctx.fail("weights must be [C] = " +
                        shapeToString({scores.getDimSize(1)}) +
                        " of the scores' type, got " +
                        shapeToString(ctx.inputType(2).getShape()));
      FailureOr<Value> w = ctx.input(2);
      if (failed(w))
        return failure();
      weights = *w;
    }
    std::optional<int64_t> ignore;
    if (ctx.attr("ignore_index"))
      ignore = ctx.intAttr("ignore_index", 0);
    return decomposeSoftmaxCrossEntropy(ctx, *s, *l, weights, *reduction,
                                        ignore);
  }
  OpBuilder &b = ctx.builder();
  SmallVector<int64_t> resultShape;
  if (*reduction == nn::LossReduction::none)
    resultShape = expected;
  IntegerAttr ignore;
  if (ctx.attr("ignore_index"))
    ignore = b.getI64IntegerAttr(ctx.intAttr("ignore_index", 0));
  ctx.setOutput(0, nn::SoftmaxCrossEntropyOp::create(
                       b, ctx.loc(),
                       RankedTensorType::get(resultShape,
                                             scores.getElementType()),
                       *s, *l, *reduction, ignore));
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult convertMatMul(NodeContext &ctx) {
  RankedTensorType a = ctx.inputType(0), b = ctx.inputType(1);
  if (a.getElementType() != b.getElementType())
    return ctx.fail("operand element types differ");
  if (a.getElementType().isInteger(1))
    return ctx.fail("bool operands are not supported");
  if (failed(nn::matmulShape(a.getShape(), b.getShape())))
    return ctx.fail("operand shapes " + shapeToString(a.getShape()) + " and " +
                    shapeToString(b.getShape()) + " do not multiply");
  if (ctx.allInputsConstant())
    return setHost(ctx, hostMatMul(*ctx.constInput(0), *ctx.constInput(1)));
  FailureOr<Value> x = ctx.input(0), y = ctx.input(1);
  if (failed(x) || failed(y))
    return failure();
  ctx.setOutput(0, nn::MatMulOp::create(ctx.builder(), ctx.loc(), *x, *y));
  return success();
}

LogicalResult convertGemm(NodeContext &ctx) {
  RankedTensorType a = ctx.inputType(0), b = ctx.inputType(1);
  if (a.getRank() != 2 || b.getRank() != 2)
    return ctx.fail("A and B must have rank 2");
  bool ta = ctx.intAttr("transA", 0), tb = ctx.intAttr("transB", 0);
  int64_t m = a.getDimSize(ta ? 1 : 0), k = a.getDimSize(ta ? 0 : 1);
  int64_t kb = b.getDimSize(tb ? 1 : 0), n = b.getDimSize(tb ? 0 : 1);
  if (k != kb)
    return ctx.fail("contracting dims differ: " + llvm::Twine(k) + " and " +
                    llvm::Twine(kb));
  FailureOr<Value> x = ctx.input(0), y = ctx.input(1);
  if (failed(x) || failed(y))
    return failure();
  Value c;
  if (ctx.hasInput(2)) {
    auto bc = nn::broadcastShapes(ctx.inputType(2).getShape(), {m, n});
    if (ctx.inputType(2).getRank() > 2 || failed(bc) ||
        ArrayRef(*bc) != ArrayRef<int64_t>{m, n})
      return ctx.fail("C shape " + shapeToString(ctx.inputType(2).getShape()) +
                      " does not broadcast to [" + llvm::Twine(m) + "," +
                      llvm::Twine(n) + "]");
    FailureOr<Value> cv = ctx.input(2);
    if (failed(cv))
      return failure();
    c = *cv;
  }
  OpBuilder &bld = ctx.builder();
  ctx.setOutput(0, nn::GemmOp::create(
                       bld, ctx.loc(),
                       RankedTensorType::get({m, n}, a.getElementType()), *x,
                       *y, c, bld.getF64FloatAttr(ctx.floatAttr("alpha", 1.0)),
                       bld.getF64FloatAttr(ctx.floatAttr("beta", 1.0)),
                       bld.getBoolAttr(ta), bld.getBoolAttr(tb)));
  return success();
}

//===----------------------------------------------------------------------===//
// Shapes, indexing and data movement
//===----------------------------------------------------------------------===//

LogicalResult convertGather(NodeContext &ctx) {
  RankedTensorType data = ctx.inputType(0);
  FailureOr<int64_t> axis = axisAttr(ctx, 0, data.getRank());
  if (failed(axis))
    return failure();
  if (ctx.allInputsConstant())
    return setHost(ctx, hostGather(*ctx.constInput(0), *ctx.constInput(1),
                                   *axis));
  FailureOr<Value> d = ctx.input(0);
  if (failed(d))
    return failure();
  Value indices;
  if (const HostTensor *c = ctx.constInput(1)) {
    // Constant indices: check and normalize them here.
    HostTensor norm = *c;
    int64_t dim = data.getDimSize(*axis);
    for (int64_t i = 0; i < norm.size(); ++i) {
      int64_t v = norm.intAt(i);
      if (v < -dim || v >= dim)
        return ctx.fail("index " + llvm::Twine(v) +
                        " is out of range for a dim of size " +
                        llvm::Twine(dim));
      norm.setInt(i, v < 0 ? v + dim : v);
    }
    indices = nn::ConstantOp::create(ctx.builder(), ctx.loc(),
                                     norm.toAttr(ctx.builder().getContext()));
  } else {
    FailureOr<Value> i = ctx.input(1);
    if (failed(i))
      return failure();
    indices = *i;
  }
  ctx.setOutput(0,
                nn::GatherOp::create(ctx.builder(), ctx.loc(), *d, indices,
                                     *axis));
  return success();
}

/// GatherElements as a one-hot select: out[i] = sum over c of
/// (index[i] == c ? data'[i, c] : 0), data' being data with `axis` moved
/// last (so autodiff scatters the gradient back by the same select). Needs
/// indices of data's shape off `axis`; builds an index-shape x C tensor.
LogicalResult convertGatherElements(NodeContext &ctx) {
  RankedTensorType data = ctx.inputType(0), indices = ctx.inputType(1);
  int64_t rank = data.getRank();
  FailureOr<int64_t> axis = axisAttr(ctx, 0, rank);
  if (failed(axis))
    return failure();
  Type et = data.getElementType();
  // Its sum runs on float32, bfloat16 and float16.
  if (!isa<FloatType>(et) || et.isF64())
    return ctx.fail("element type " + typeString(et) + " is not supported");
  if (indices.getRank() != rank)
    return ctx.fail("indices have rank " + llvm::Twine(indices.getRank()) +
                    ", data rank " + llvm::Twine(rank));
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis && indices.getDimSize(d) != data.getDimSize(d))
      return ctx.fail("indices shape " + shapeToString(indices.getShape()) +
                      " differs from data shape " +
                      shapeToString(data.getShape()) +
                      " off the axis (not supported)");
  FailureOr<Value> x = ctx.input(0), i = ctx.input(1);
  if (failed(x) || failed(i))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  int64_t classes = data.getDimSize(*axis);
  Type it = indices.getElementType();
  Value index = wrapNegative(b, loc, *i, classes);
  SmallVector<int64_t> iotaShape(rank + 1, 1);
  iotaShape[rank] = classes;
  HostTensor iota = HostTensor::zeros(mlirToDType(it), iotaShape);
  for (int64_t c = 0; c < classes; ++c)
    iota.setInt(c, c);
  Value onehot = nn::CompareOp::create(
      b, loc, nn::ComparePredicate::eq,
      nn::UnsqueezeOp::create(b, loc, index, ArrayRef<int64_t>{rank}),
      nn::ConstantOp::create(b, loc, iota.toAttr(b.getContext())));
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis)
      perm.push_back(d);
  perm.push_back(*axis);
  Value moved = *axis == rank - 1
                    ? *x
                    : Value(nn::TransposeOp::create(b, loc, *x, perm));
  moved = nn::UnsqueezeOp::create(b, loc, moved, ArrayRef<int64_t>{*axis});
  Value picked = nn::WhereOp::create(b, loc, onehot, moved,
                                     scalarConstant(b, loc, et, 0));
  ctx.setOutput(0, nn::ReduceSumOp::create(b, loc, picked, {rank}, false));
  return success();
}

/// Output 0 is input 0 reshaped to `shape` (folded when it is constant).
LogicalResult setReshaped(NodeContext &ctx, ArrayRef<int64_t> shape) {
  if (const HostTensor *c = ctx.constInput(0)) {
    ctx.setOutput(0, hostReshape(*c, shape));
    return success();
  }
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  ctx.setOutput(0, nn::ReshapeOp::create(ctx.builder(), ctx.loc(),
                                         ctx.inputType(0).clone(shape), *x));
  return success();
}

LogicalResult convertReshape(NodeContext &ctx) {
  FailureOr<const HostTensor *> target = ctx.requireConst(1, "shape");
  if (failed(target))
    return failure();
  RankedTensorType in = ctx.inputType(0);
  llvm::Expected<SmallVector<int64_t>> shape = computeReshape(
      in.getShape(), (*target)->toInts(), ctx.intAttr("allowzero", 0) != 0);
  if (!shape)
    return failWith(ctx, shape.takeError());
  return setReshaped(ctx, *shape);
}

/// Flatten: a reshape to [prod(dims before axis), prod(dims from axis)].
LogicalResult convertFlatten(NodeContext &ctx) {
  RankedTensorType in = ctx.inputType(0);
  const int64_t rank = in.getRank();
  int64_t axis = ctx.intAttr("axis", 1);
  if (axis < -rank || axis > rank)
    return ctx.fail("axis " + llvm::Twine(axis) + " is out of range for rank " +
                    llvm::Twine(rank));
  if (axis < 0)
    axis += rank;
  SmallVector<int64_t> shape = {numElements(in.getShape().take_front(axis)),
                                numElements(in.getShape().drop_front(axis))};
  return setReshaped(ctx, shape);
}

/// Tile: along each repeated axis d, the input seen as [1, n] expanded to
/// [r, n] and read as r * n (reshape, expand, reshape: autodiff sums the
/// copies' gradients).
LogicalResult convertTile(NodeContext &ctx) {
  FailureOr<const HostTensor *> repeatsT = ctx.requireConst(1, "repeats");
  if (failed(repeatsT))
    return failure();
  RankedTensorType in = ctx.inputType(0);
  SmallVector<int64_t> repeats = (*repeatsT)->toInts();
  if (int64_t(repeats.size()) != in.getRank() ||
      llvm::any_of(repeats, [](int64_t r) { return r < 0; }))
    return ctx.fail("repeats " + shapeToString(repeats) +
                    " is not one count >= 0 per dim of " +
                    shapeToString(in.getShape()));
  const HostTensor *c = ctx.constInput(0);
  std::optional<HostTensor> host;
  Value v;
  if (c) {
    host = *c;
  } else {
    FailureOr<Value> x = ctx.input(0);
    if (failed(x))
      return failure();
    v = *x;
  }
  SmallVector<int64_t> shape(in.getShape());
  OpBuilder &b = ctx.builder();
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (repeats[d] == 1)
      continue;
    SmallVector<int64_t> split(shape), wide(shape), out(shape);
    split.insert(split.begin() + d, 1);
    wide.insert(wide.begin() + d, repeats[d]);
    out[d] *= repeats[d];
    if (host) {
      llvm::Expected<HostTensor> e =
          hostExpand(hostReshape(*host, split), wide);
      if (!e)
        return failWith(ctx, e.takeError());
      host = hostReshape(*e, out);
    } else {
      Type et = in.getElementType();
      Value r = nn::ReshapeOp::create(b, ctx.loc(),
                                      RankedTensorType::get(split, et), v);
      r = nn::ExpandOp::create(b, ctx.loc(), RankedTensorType::get(wide, et),
                               r);
      v = nn::ReshapeOp::create(b, ctx.loc(), RankedTensorType::get(out, et),
                                r);
    }
    shape = out;
  }
  if (host)
    ctx.setOutput(0, std::move(*host));
  else
    ctx.setOutput(0, v);
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

LogicalResult convertUnsqueeze(NodeContext &ctx) {
  FailureOr<const HostTensor *> axesT = ctx.requireConst(1, "axes");
  if (failed(axesT))
    return failure();
  RankedTensorType in = ctx.inputType(0);
  SmallVector<int64_t> raw = (*axesT)->toInts();
  FailureOr<SmallVector<int64_t>> axes =
      normalizeAxes(ctx, raw, in.getRank() + raw.size());
  if (failed(axes))
    return failure();
  if (const HostTensor *c = ctx.constInput(0)) {
    auto type = cast<RankedTensorType>(nn::inferUnsqueezeType(in, *axes));
    ctx.setOutput(0, hostReshape(*c, type.getShape()));
    return success();
  }
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  ctx.setOutput(0,
                nn::UnsqueezeOp::create(ctx.builder(), ctx.loc(), *x, *axes));
  return success();
}

LogicalResult convertSqueeze(NodeContext &ctx) {
  RankedTensorType in = ctx.inputType(0);
  SmallVector<int64_t> axes;
  if (ctx.hasInput(1)) {
    FailureOr<const HostTensor *> t = ctx.requireConst(1, "axes");
    if (failed(t))
      return failure();
    FailureOr<SmallVector<int64_t>> norm =
        normalizeAxes(ctx, (*t)->toInts(), in.getRank());
    if (failed(norm))
      return failure();
    axes = *norm;
  } else {
    for (int64_t i = 0; i < in.getRank(); ++i)
      if (in.getDimSize(i) == 1)
        axes.push_back(i);
  }
  for (int64_t a : axes)
    if (in.getDimSize(a) != 1)
      return ctx.fail("dim " + llvm::Twine(a) + " has size " +
                      llvm::Twine(in.getDimSize(a)) + ", not 1");
  if (const HostTensor *c = ctx.constInput(0)) {
    auto type = cast<RankedTensorType>(nn::inferReduceType(in, axes, false));
    ctx.setOutput(0, hostReshape(*c, type.getShape()));
    return success();
  }
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  ctx.setOutput(0, nn::SqueezeOp::create(ctx.builder(), ctx.loc(), *x, axes));
  return success();
}

LogicalResult convertExpand(NodeContext &ctx) {
  FailureOr<const HostTensor *> shapeT = ctx.requireConst(1, "shape");
  if (failed(shapeT))
    return failure();
  RankedTensorType in = ctx.inputType(0);
  auto shape = nn::broadcastShapes(in.getShape(), (*shapeT)->toInts());
  if (failed(shape))
    return ctx.fail("input shape " + shapeToString(in.getShape()) +
                    " does not broadcast with " +
                    shapeToString((*shapeT)->toInts()));
  if (const HostTensor *c = ctx.constInput(0))
    return setHost(ctx, hostExpand(*c, *shape));
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  if (ArrayRef(*shape) == in.getShape()) {
    ctx.setOutput(0, *x);
    return success();
  }
  ctx.setOutput(0, nn::ExpandOp::create(ctx.builder(), ctx.loc(),
                                        in.clone(*shape), *x));
  return success();
}

LogicalResult convertTranspose(NodeContext &ctx) {
  RankedTensorType in = ctx.inputType(0);
  SmallVector<int64_t> perm;
  if (auto p = ctx.intsAttr("perm"))
    perm = *p;
  else
    for (int64_t i = in.getRank() - 1; i >= 0; --i)
      perm.push_back(i);
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  for (auto [i, p] : llvm::enumerate(sorted))
    if (p != static_cast<int64_t>(i) ||
        static_cast<int64_t>(perm.size()) != in.getRank())
      return ctx.fail("perm " + shapeToString(perm) +
                      " is not a permutation of rank " +
                      llvm::Twine(in.getRank()));
  if (const HostTensor *c = ctx.constInput(0)) {
    ctx.setOutput(0, hostTranspose(*c, perm));
    return success();
  }
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  ctx.setOutput(0,
                nn::TransposeOp::create(ctx.builder(), ctx.loc(), *x, perm));
  return success();
}

LogicalResult convertSlice(NodeContext &ctx) {
  SmallVector<int64_t> args[4];
  const char *names[] = {"starts", "ends", "axes", "steps"};
  for (unsigned i = 0; i < 4; ++i) {
    if (!ctx.hasInput(i + 1))
      continue;
    FailureOr<const HostTensor *> t = ctx.requireConst(i + 1, names[i]);
    if (failed(t))
      return failure();
    args[i] = (*t)->toInts();
  }
  RankedTensorType in = ctx.inputType(0);
  llvm::Expected<SliceSpec> spec =
      computeSlice(in.getShape(), args[0], args[1], args[2], args[3]);
  if (!spec)
    return failWith(ctx, spec.takeError());
  if (const HostTensor *c = ctx.constInput(0)) {
    ctx.setOutput(0, hostSlice(*c, *spec));
    return success();
  }
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  if (ArrayRef(spec->counts) == in.getShape() &&
      llvm::all_of(spec->strides, [](int64_t s) { return s == 1; })) {
    ctx.setOutput(0, *x);
    return success();
  }
  OpBuilder &b = ctx.builder();
  ctx.setOutput(0, nn::SliceOp::create(b, ctx.loc(), in.clone(spec->counts),
                                       *x,
                                       b.getDenseI64ArrayAttr(spec->offsets),
                                       b.getDenseI64ArrayAttr(spec->strides)));
  return success();
}

LogicalResult convertConcat(NodeContext &ctx) {
  RankedTensorType first = ctx.inputType(0);
  FailureOr<int64_t> axis = axisAttr(ctx, 0, first.getRank());
  if (failed(axis))
    return failure();
  for (unsigned i = 1; i < ctx.numInputs(); ++i) {
    RankedTensorType t = ctx.inputType(i);
    bool ok = t.getRank() == first.getRank() &&
              t.getElementType() == first.getElementType();
    for (int64_t d = 0; ok && d < t.getRank(); ++d)
      ok = d == *axis || t.getDimSize(d) == first.getDimSize(d);
    if (!ok)
      return ctx.fail("input #" + llvm::Twine(i) + " " +
                      shapeToString(t.getShape()) +
                      " does not concatenate with " +
                      shapeToString(first.getShape()) + " along axis " +
                      llvm::Twine(*axis));
  }
  if (ctx.allInputsConstant()) {
    SmallVector<const HostTensor *> parts;
    for (unsigned i = 0; i < ctx.numInputs(); ++i)
      parts.push_back(ctx.constInput(i));
    ctx.setOutput(0, hostConcat(parts, *axis));
    return success();
  }
  SmallVector<Value> inputs;
  for (unsigned i = 0; i < ctx.numInputs(); ++i) {
    if (ctx.inputType(i).getDimSize(*axis) == 0)
      continue;
    FailureOr<Value> v = ctx.input(i);
    if (failed(v))
      return failure();
    inputs.push_back(*v);
  }
  ctx.setOutput(0,
                nn::ConcatOp::create(ctx.builder(), ctx.loc(), inputs, *axis));
  return success();
}

/// Pad: negative pads crop (a slice); positive ones, axis by axis, add
/// blocks of the constant value on each side (constant mode: a concat) or
/// gather the input's border (edge: the nearest element; reflect: the
/// mirror image without the border, numpy's reflect) along the axis by
/// constant indices. Autodiff and both targets take the slices, concats
/// and gathers as they are.
LogicalResult convertPad(NodeContext &ctx) {
  std::string mode = ctx.stringAttr("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    return ctx.fail("mode '" + mode +
                    "' is not supported (constant, edge or reflect)");
  RankedTensorType in = ctx.inputType(0);
  const int64_t rank = in.getRank();
  FailureOr<const HostTensor *> padsInput = ctx.requireConst(1, "pads");
  if (failed(padsInput))
    return failure();
  SmallVector<int64_t> pads = (*padsInput)->toInts();
  SmallVector<int64_t> axes;
  if (ctx.version() >= 18 && ctx.hasInput(3)) {
    FailureOr<const HostTensor *> a = ctx.requireConst(3, "axes");
    if (failed(a))
      return failure();
    for (int64_t axis : (*a)->toInts()) {
      int64_t norm = axis < 0 ? axis + rank : axis;
      if (norm < 0 || norm >= rank || llvm::is_contained(axes, norm))
        return ctx.fail("axes " + shapeToString((*a)->toInts()) +
                        " are not distinct axes of rank " + llvm::Twine(rank));
      axes.push_back(norm);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size())
    return ctx.fail("pads has " + llvm::Twine(pads.size()) +
                    " values, expected 2 x " + llvm::Twine(axes.size()));
  double value = 0;
  if (ctx.hasInput(2)) {
    FailureOr<const HostTensor *> v = requireOneValue(ctx, 2, "constant_value");
    if (failed(v))
      return failure();
    value = (*v)->floatAt(0);
  }
  SmallVector<int64_t> begin(rank, 0), end(rank, 0), shape(in.getShape());
  for (auto [k, axis] : llvm::enumerate(axes)) {
    begin[axis] = pads[k];
    end[axis] = pads[k + axes.size()];
    if (shape[axis] + begin[axis] + end[axis] < 0)
      return ctx.fail("pads " + shapeToString(pads) + " crop axis " +
                      llvm::Twine(axis) + " of " +
                      shapeToString(in.getShape()) + " below 0");
  }
  const DType dtype = mlirToDType(in.getElementType());
  // A block of the constant value.
  auto filled = [&](ArrayRef<int64_t> blockShape) {
    HostTensor t = HostTensor::zeros(dtype, blockShape);
    for (int64_t i = 0; i < t.size(); ++i)
      t.set(i, value);
    return t;
  };
  // Crop first (negative pads), then add the blocks.
  SliceSpec crop;
  crop.strides.assign(rank, 1);
  for (int64_t d = 0; d < rank; ++d) {
    crop.offsets.push_back(std::max<int64_t>(0, -begin[d]));
    crop.counts.push_back(shape[d] - std::max<int64_t>(0, -begin[d]) -
                          std::max<int64_t>(0, -end[d]));
  }
  // Edge and reflect: the indices along `axis` of the padded result, in
  // the cropped input of `n` elements.
  auto borderIndices = [&](int64_t d, int64_t n) {
    std::vector<int64_t> idx;
    for (int64_t i = -std::max<int64_t>(0, begin[d]);
         i < n + std::max<int64_t>(0, end[d]); ++i) {
      int64_t j = i;
      if (mode == "edge" || n == 1) {
        j = std::clamp<int64_t>(i, 0, n - 1);
      } else {
        const int64_t period = 2 * (n - 1);
        j = ((i % period) + period) % period;
        if (j >= n)
          j = period - j;
      }
      idx.push_back(j);
    }
    return HostTensor::ofInts(DType::Int64, {int64_t(idx.size())}, idx);
  };
  const bool gathers = mode != "constant";
  for (int64_t d = 0; d < rank; ++d)
    if (gathers && (begin[d] > 0 || end[d] > 0) && crop.counts[d] == 0)
      return ctx.fail("mode '" + mode + "' pads axis " + llvm::Twine(d) +
                      ", which has no elements");
  if (const HostTensor *c = ctx.constInput(0)) {
    HostTensor t = hostSlice(*c, crop);
    for (int64_t d = 0; gathers && d < rank; ++d)
      if (begin[d] > 0 || end[d] > 0) {
        llvm::Expected<HostTensor> g =
            hostGather(t, borderIndices(d, t.shape[d]), d);
        if (!g)
          return failWith(ctx, g.takeError());
        t = std::move(*g);
      }
    for (int64_t d = 0; !gathers && d < rank; ++d) {
      SmallVector<int64_t> blockShape(t.shape);
      SmallVector<const HostTensor *> parts;
      HostTensor before, after;
      if (begin[d] > 0) {
        blockShape[d] = begin[d];
        before = filled(blockShape);
        parts.push_back(&before);
      }
      parts.push_back(&t);
      if (end[d] > 0) {
        blockShape[d] = end[d];
        after = filled(blockShape);
        parts.push_back(&after);
      }
      if (parts.size() > 1)
        t = hostConcat(parts, d);
    }
    ctx.setOutput(0, std::move(t));
    return success();
  }
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  OpBuilder &b = ctx.builder();
  Value v = *x;
  if (ArrayRef(crop.counts) != in.getShape())
    v = nn::SliceOp::create(b, ctx.loc(), in.clone(crop.counts), v,
                            b.getDenseI64ArrayAttr(crop.offsets),
                            b.getDenseI64ArrayAttr(crop.strides));
  for (int64_t d = 0; gathers && d < rank; ++d) {
    if (begin[d] <= 0 && end[d] <= 0)
      continue;
    const int64_t n = cast<RankedTensorType>(v.getType()).getDimSize(d);
    Value idx = nn::ConstantOp::create(
        b, ctx.loc(), borderIndices(d, n).toAttr(b.getContext()));
    v = nn::GatherOp::create(b, ctx.loc(), v, idx, d);
  }
  for (int64_t d = 0; !gathers && d < rank; ++d) {
    SmallVector<Value> parts;
    SmallVector<int64_t> blockShape(
        cast<RankedTensorType>(v.getType()).getShape());
    if (begin[d] > 0) {
      blockShape[d] = begin[d];
      parts.push_back(nn::ConstantOp::create(
          b, ctx.loc(), filled(blockShape).toAttr(b.getContext())));
    }
    parts.push_back(v);
    if (end[d] > 0) {
      blockShape[d] = end[d];
      parts.push_back(nn::ConstantOp::create(
          b, ctx.loc(), filled(blockShape).toAttr(b.getContext())));
    }
    if (parts.size() > 1)
      v = nn::ConcatOp::create(b, ctx.loc(), parts, d);
  }
  ctx.setOutput(0, v);
  return success();
}

/// CumSum: on constants, folded; at run time, log2(n) steps of
/// y += y shifted by 1, 2, 4, ... along the axis (a slice concatenated with
/// zeros): exact for integers, differentiable for floats, no n x n matrix.
LogicalResult convertCumSum(NodeContext &ctx) {
  RankedTensorType in = ctx.inputType(0);
  if (in.getElementType().isInteger(1))
    return ctx.fail("bool input is not supported");
  FailureOr<const HostTensor *> axisT = requireOneValue(ctx, 1, "axis");
  if (failed(axisT))
    return failure();
  llvm::Expected<int64_t> axis =
      normalizeAxis((*axisT)->intAt(0), in.getRank());
  if (!axis)
    return failWith(ctx, axis.takeError());
  const bool exclusive = ctx.intAttr("exclusive", 0) != 0;
  const bool reverse = ctx.intAttr("reverse", 0) != 0;
  const int64_t n = in.getDimSize(*axis);
  if (const HostTensor *c = ctx.constInput(0)) {
    HostTensor out = *c;
    int64_t inner = 1;
    for (int64_t d = *axis + 1; d < in.getRank(); ++d)
      inner *= in.getDimSize(d);
    const int64_t outer = n == 0 ? 0 : c->size() / (n * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t e = 0; e < inner; ++e) {
        double fsum = 0;
        int64_t isum = 0;
        for (int64_t k = 0; k < n; ++k) {
          int64_t j = reverse ? n - 1 - k : k;
          int64_t at = (o * n + j) * inner + e;
          if (exclusive)
            c->isFloat() ? out.set(at, fsum) : out.setInt(at, isum);
          fsum += c->floatAt(at);
          isum += c->intAt(at);
          if (!exclusive)
            c->isFloat() ? out.set(at, fsum) : out.setInt(at, isum);
        }
      }
    ctx.setOutput(0, std::move(out));
    return success();
  }
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  OpBuilder &b = ctx.builder();
  DType dtype = mlirToDType(in.getElementType());
  // y shifted by `s` along the axis toward the summing direction, zeros
  // coming in.
  auto shifted = [&](Value y, int64_t s) -> Value {
    SmallVector<int64_t> offsets(in.getRank(), 0), strides(in.getRank(), 1);
    SmallVector<int64_t> kept(in.getShape()), zeros(in.getShape());
    kept[*axis] = n - s;
    zeros[*axis] = s;
    if (reverse)
      offsets[*axis] = s;
    Value part = nn::SliceOp::create(b, ctx.loc(), in.clone(kept), y,
                                     b.getDenseI64ArrayAttr(offsets),
                                     b.getDenseI64ArrayAttr(strides));
    Value pad = nn::ConstantOp::create(
        b, ctx.loc(), HostTensor::zeros(dtype, zeros).toAttr(b.getContext()));
    SmallVector<Value> parts =
        reverse ? SmallVector<Value>{part, pad} : SmallVector<Value>{pad, part};
    return nn::ConcatOp::create(b, ctx.loc(), parts, *axis);
  };
  Value y = *x;
  for (int64_t s = 1; s < n; s *= 2)
    y = nn::AddOp::create(b, ctx.loc(), y, shifted(y, s));
  if (exclusive && n > 0)
    y = shifted(y, 1);
  ctx.setOutput(0, y);
  return success();
}

/// ScatterND (reduction "none") with constant indices: each element of the
/// result comes from `updates` where an index tuple covers it (the last
/// tuple that does), from `data` elsewhere: where(covered, gather(updates
/// flattened, source), data), so both get their gradients.
LogicalResult convertScatterND(NodeContext &ctx) {
  if (ctx.stringAttr("reduction", "none") != "none")
    return ctx.fail("reduction '" + ctx.stringAttr("reduction", "none") +
                    "' is not supported (only \"none\")");
  RankedTensorType dataType = ctx.inputType(0), updType = ctx.inputType(2);
  FailureOr<const HostTensor *> idxT = ctx.requireConst(1, "indices");
  if (failed(idxT))
    return failure();
  const HostTensor &idx = **idxT;
  const int64_t rank = dataType.getRank();
  if (idx.shape.empty() || idx.shape.back() < 1 || idx.shape.back() > rank)
    return ctx.fail("indices " + shapeToString(idx.shape) +
                    " must end in a dim of 1 to the data's rank " +
                    llvm::Twine(rank));
  const int64_t k = idx.shape.back();
  SmallVector<int64_t> expected(idx.shape.begin(), idx.shape.end() - 1);
  expected.append(dataType.getShape().begin() + k, dataType.getShape().end());
  if (ArrayRef(expected) != updType.getShape() ||
      dataType.getElementType() != updType.getElementType())
    return ctx.fail("updates " + shapeToString(updType.getShape()) +
                    " do not match indices " + shapeToString(idx.shape) +
                    " and data " + shapeToString(dataType.getShape()) +
                    " (expected " + shapeToString(expected) + ")");
  int64_t inner = 1;
  for (int64_t d = k; d < rank; ++d)
    inner *= dataType.getDimSize(d);
  const int64_t tuples = k == 0 ? 0 : idx.size() / k;
  // source[p]: the element of the flattened updates that lands at data
  // position p, or -1.
  std::vector<int64_t> source(numElements(dataType.getShape()), -1);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t dim = dataType.getDimSize(d), i = idx.intAt(t * k + d);
      if (i < -dim || i >= dim)
        return ctx.fail("index " + llvm::Twine(i) +
                        " is out of range for dim " + llvm::Twine(d) +
                        " of size " + llvm::Twine(dim));
      offset = offset * dim + (i < 0 ? i + dim : i);
    }
    for (int64_t e = 0; e < inner; ++e)
      source[offset * inner + e] = t * inner + e;
  }
  if (ctx.allInputsConstant()) {
    HostTensor out = *ctx.constInput(0);
    const HostTensor &upd = *ctx.constInput(2);
    for (size_t p = 0; p < source.size(); ++p)
      if (source[p] >= 0)
        upd.isFloat() ? out.set(p, upd.floatAt(source[p]))
                      : out.setInt(p, upd.intAt(source[p]));
    ctx.setOutput(0, std::move(out));
    return success();
  }
  FailureOr<Value> data = ctx.input(0), updates = ctx.input(2);
  if (failed(data) || failed(updates))
    return failure();
  OpBuilder &b = ctx.builder();
  SmallVector<int64_t> dataShape(dataType.getShape());
  HostTensor covered = HostTensor::zeros(DType::Bool, dataShape);
  HostTensor from = HostTensor::zeros(DType::Int64, dataShape);
  for (size_t p = 0; p < source.size(); ++p) {
    covered.setInt(p, source[p] >= 0);
    from.setInt(p, std::max<int64_t>(source[p], 0));
  }
  Value flat =
      nn::ReshapeOp::create(b, ctx.loc(),
                            RankedTensorType::get({updType.getNumElements()},
                                                  updType.getElementType()),
                            *updates);
  Value gathered = nn::GatherOp::create(
      b, ctx.loc(), flat,
      nn::ConstantOp::create(b, ctx.loc(), from.toAttr(b.getContext())), 0);
  ctx.setOutput(
      0, nn::WhereOp::create(b, ctx.loc(),
                             nn::ConstantOp::create(
                                 b, ctx.loc(), covered.toAttr(b.getContext())),
                             gathered, *data));
  return success();
}

//===----------------------------------------------------------------------===//
// NonZero and ScatterElements: mixture-of-experts dispatch
//===----------------------------------------------------------------------===//

namespace {

/// Ops that move or combine indices without reading data by them.
bool isIndexOp(llvm::StringRef op) {
  return llvm::is_contained({"Transpose", "Split", "Squeeze", "Unsqueeze",
                             "Reshape", "Slice", "Expand", "Cast", "Identity",
                             "Mul", "Add", "Sub", "Concat", "Flatten"},
                            op);
}

/// Whether every use of `name` (through the ops that compute shapes) ends
/// as the shape input of a Reshape, Expand or ConstantOfShape.
bool onlyShapes(const GraphIndex &uses, llvm::StringRef name, int depth = 0) {
  if (depth > 16 || uses.outputs.contains(name))
    return false;
  auto it = uses.consumers.find(name);
  if (it == uses.consumers.end())
    return true;
  for (auto [node, i] : it->second) {
    llvm::StringRef op = node->op_type();
    if ((op == "Reshape" || op == "Expand") && i == 1)
      continue;
    if (op == "ConstantOfShape")
      continue;
    if (!llvm::is_contained({"Gather", "Concat", "Unsqueeze", "Squeeze",
                             "Slice", "Cast", "Mul", "Add", "Sub", "Div",
                             "Identity"},
                            op))
      return false;
    for (const std::string &o : node->output())
      if (!onlyShapes(uses, o, depth + 1))
        return false;
  }
  return true;
}

/// The NonZero whose indices `name` carries (through index ops), or null.
const onnx::NodeProto *nonZeroOf(const GraphIndex &uses, llvm::StringRef name) {
  for (int hops = 0; hops < 32; ++hops) {
    auto it = uses.producer.find(name);
    if (it == uses.producer.end())
      return nullptr;
    const onnx::NodeProto *n = it->second;
    if (n->op_type() == "NonZero")
      return n;
    if (!isIndexOp(n->op_type()) || n->input_size() == 0)
      return nullptr;
    name = n->input(0);
  }
  return nullptr;
}

/// Walks the values reachable from `start` through the nodes `visit` passes
/// on: visit(node, input index, work) returns a problem, or "" after
/// pushing onto `work` the outputs to follow. Returns the first problem,
/// `atOutput` when a reached value is a graph output, or "".
std::string
walkUses(const GraphIndex &uses, std::vector<std::string> work,
         const std::string &atOutput,
         llvm::function_ref<std::string(const onnx::NodeProto *, int,
                                        std::vector<std::string> &)>
             visit) {
  llvm::StringSet<> seen;
  while (!work.empty()) {
    std::string v = work.back();
    work.pop_back();
    if (!seen.insert(v).second)
      continue;
    if (uses.outputs.contains(v))
      return atOutput;
    auto it = uses.consumers.find(v);
    if (it == uses.consumers.end())
      continue;
    for (auto [node, i] : it->second) {
      std::string problem = visit(node, i, work);
      if (!problem.empty())
        return problem;
    }
  }
  return "";
}

/// Why NonZero `nz` (of a value known only at run time) cannot take its
/// dense form, or "": its indices (through index ops) may only choose the
/// rows Gathers read and the rows ScatterElements write, and what those
/// Gathers read may only reach the graph's outputs through such a
/// ScatterElements (as its updates), which masks the positions NonZero
/// would not have given. Shapes of the indices may only shape tensors.
std::string denseNonZeroProblem(const GraphIndex &uses,
                                const onnx::NodeProto &nz) {
  std::vector<std::string> gathered;
  std::string problem = walkUses(
      uses, {nz.output(0)}, "its indices are a graph output",
      [&](const onnx::NodeProto *node, int i,
          std::vector<std::string> &work) -> std::string {
        llvm::StringRef op = node->op_type();
        if (op == "Gather" && i == 1) {
          gathered.push_back(node->output(0));
        } else if (op == "ScatterElements" && i == 1) {
        } else if (op == "Shape") {
          if (!onlyShapes(uses, node->output(0)))
            return "the count of its indices is used beyond shapes (node '" +
                   node->name() + "')";
        } else if (isIndexOp(op)) {
          for (const std::string &o : node->output())
            work.push_back(o);
        } else {
          return "its indices reach " + op.str() + " node '" + node->name() +
                 "'";
        }
        return "";
      });
  if (!problem.empty())
    return problem;
  return walkUses(
      uses, gathered,
      "what it selects reaches a graph output without a ScatterElements",
      [&](const onnx::NodeProto *node, int i,
          std::vector<std::string> &work) -> std::string {
        if (node->op_type() == "ScatterElements" && i == 2)
          return nonZeroOf(uses, node->input(1)) == &nz
                     ? ""
                     : "what it selects is scattered by other indices (node '" +
                           node->name() + "')";
        if (node->op_type() != "Shape")
          for (const std::string &o : node->output())
            work.push_back(o);
        return "";
      });
}

} // namespace

/// NonZero(x): of a constant, folded. Of a value known only at run time
/// (which positions a router chose: the count depends on the data), its
/// dense form: every position of x, in row-major order, as NonZero lists
/// them; the ScatterElements that its indices govern then multiply each
/// update by x != 0 at its position, so the positions NonZero would have
/// left out add nothing (denseNonZeroProblem says which graphs qualify:
/// Hugging Face's per-expert dispatch, `torch.where(mask)` then gather,
/// compute and index_add_). Every expert then computes on every token.
LogicalResult convertNonZero(NodeContext &ctx) {
  RankedTensorType xt = ctx.inputType(0);
  // The listed positions (flat, row-major) as NonZero's [rank, count].
  auto setPositions = [&](const std::vector<int64_t> &positions) {
    const int64_t rank = std::max<int64_t>(xt.getRank(), 1);
    const int64_t count = positions.size();
    std::vector<int64_t> out(rank * count, 0);
    for (int64_t j = 0; j < count; ++j) {
      int64_t p = positions[j];
      for (int64_t d = xt.getRank() - 1; d >= 0; --d) {
        out[d * count + j] = p % xt.getDimSize(d);
        p /= xt.getDimSize(d);
      }
    }
    ctx.setOutput(
        0, HostTensor::ofInts(DType::Int64, {rank, count}, std::move(out)));
    return success();
  };
  std::vector<int64_t> positions;
  if (const HostTensor *x = ctx.constInput(0)) {
    for (int64_t p = 0; p < x->size(); ++p)
      if (x->isFloat() ? x->floatAt(p) != 0 : x->intAt(p) != 0)
        positions.push_back(p);
    return setPositions(positions);
  }
  std::string problem = denseNonZeroProblem(ctx.graphIndex(), ctx.node());
  if (!problem.empty())
    return ctx.fail("NonZero of a value known only at run time (its count "
                    "depends on the data) is supported where its indices "
                    "dispatch rows to a ScatterElements; here " +
                    problem);
  positions.resize(xt.getNumElements());
  std::iota(positions.begin(), positions.end(), 0);
  return setPositions(positions);
}

/// ScatterElements(data, indices, updates) along axis 0 with constant
/// indices that pick whole rows (equal along the other dims, which match
/// data's): out[r_j] = data[r_j] (+)= updates[j]. "add", or "none" into a
/// constant of zeros (distinct rows then add as they replace). Indices
/// governed by a dense NonZero (convertNonZero) first mask the updates.
/// The rows' sum is a reshape and a sum where r_j = j mod rows (every row
/// in turn: Mixtral's tokens for each of the top-k choices), else a
/// product with the constant 0/1 matrix of the scatter.
LogicalResult convertScatterElements(NodeContext &ctx) {
  const std::string reduction = ctx.stringAttr("reduction", "none");
  if (reduction != "none" && reduction != "add")
    return ctx.fail("reduction '" + reduction +
                    "' is not supported (\"none\" or \"add\")");
  RankedTensorType dataType = ctx.inputType(0), updType = ctx.inputType(2);
  const int64_t rank = dataType.getRank();
  FailureOr<int64_t> axis = axisAttr(ctx, 0, rank);
  FailureOr<const HostTensor *> idxT = ctx.requireConst(1, "indices");
  if (failed(axis) || failed(idxT))
    return failure();
  const HostTensor &idx = **idxT;
  if (*axis != 0 || rank < 1)
    return ctx.fail("only axis 0 is supported");
  if (ArrayRef<int64_t>(idx.shape) != updType.getShape() ||
      updType.getShape().drop_front() != dataType.getShape().drop_front() ||
      dataType.getElementType() != updType.getElementType() ||
      !isa<FloatType>(dataType.getElementType()))
    return ctx.fail("float updates " + shapeToString(updType.getShape()) +
                    " must match indices " + shapeToString(idx.shape) +
                    " and data " + shapeToString(dataType.getShape()) +
                    " beyond the first dim");
  const int64_t n = updType.getDimSize(0), rows = dataType.getDimSize(0);
  const int64_t inner = n == 0 ? 0 : idx.size() / n;
  std::vector<int64_t> target(n);
  for (int64_t j = 0; j < n; ++j) {
    int64_t r = idx.intAt(j * inner);
    for (int64_t e = 1; e < inner; ++e)
      if (idx.intAt(j * inner + e) != r)
        return ctx.fail("indices must pick whole rows (equal along the "
                        "other dims)");
    if (r < -rows || r >= rows)
      return ctx.fail("index " + llvm::Twine(r) + " is out of range for " +
                      llvm::Twine(rows) + " rows");
    target[j] = r < 0 ? r + rows : r;
  }
  const onnx::NodeProto *nz = nonZeroOf(ctx.graphIndex(), ctx.node().input(1));
  const HostTensor *dataConst = ctx.constInput(0);
  const bool zeros =
      dataConst &&
      llvm::all_of(llvm::seq<int64_t>(0, dataConst->size()),
                   [&](int64_t p) { return dataConst->floatAt(p) == 0; });
  // The NonZero's dense form has a row per position of its input (a folded
  // NonZero fewer, unless every position is nonzero: masking is then a
  // no-op).
  Value mask;
  if (nz) {
    FailureOr<Value> named = ctx.valueNamed(nz->input(0));
    if (failed(named))
      return failure();
    if (cast<RankedTensorType>(named->getType()).getNumElements() == n)
      mask = *named;
  }
  if (reduction == "none" && !zeros)
    return ctx.fail("reduction \"none\" is supported into a constant of "
                    "zeros only");
  if (reduction == "none" && !mask) {
    std::vector<int64_t> sorted = target;
    llvm::sort(sorted);
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return ctx.fail("reduction \"none\" with a row written twice");
  }
  FailureOr<Value> updates = ctx.input(2);
  if (failed(updates))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Type et = updType.getElementType();
  Value upd = *updates;
  if (mask) {
    // Dense NonZero: mask the positions it would not have given.
    Type maskElement = cast<RankedTensorType>(mask.getType()).getElementType();
    Value on = mask;
    if (!maskElement.isInteger(1))
      on = nn::CompareOp::create(b, loc, nn::ComparePredicate::ne, mask,
                                 scalarConstant(b, loc, maskElement, 0));
    // As 0/1 in the updates' type while it changes shape (a sharded mask
    // may be gathered: collectives move floats), then a select (no 0 * inf).
    SmallVector<int64_t> maskShape(rank, 1);
    maskShape[0] = n;
    Value weight = nn::CastOp::create(
        b, loc, cast<RankedTensorType>(on.getType()).clone(et), on);
    weight = nn::ReshapeOp::create(b, loc, RankedTensorType::get(maskShape, et),
                                   weight);
    on = nn::CompareOp::create(b, loc, nn::ComparePredicate::ne, weight,
                               scalarConstant(b, loc, et, 0));
    upd = nn::WhereOp::create(b, loc, on, upd, scalarConstant(b, loc, et, 0));
  }
  SmallVector<int64_t> rest(dataType.getShape().drop_front());
  const int64_t restSize = numElements(rest);
  Value sum;
  if (rows > 0 && n % rows == 0 &&
      llvm::all_of(llvm::seq<int64_t>(0, n),
                   [&](int64_t j) { return target[j] == j % rows; })) {
    SmallVector<int64_t> blocks = {n / rows, rows};
    blocks.append(rest.begin(), rest.end());
    sum = nn::ReduceSumOp::create(
        b, loc,
        nn::ReshapeOp::create(b, loc, RankedTensorType::get(blocks, et), upd),
        {0}, false);
  } else {
    if (rows * n > (int64_t(1) << 24))
      return ctx.fail("a scatter of " + llvm::Twine(n) + " rows into " +
                      llvm::Twine(rows) + " is too large for its matrix");
    HostTensor s = HostTensor::zeros(DType::Float, {rows, n});
    for (int64_t j = 0; j < n; ++j)
      s.set(target[j] * n + j, 1.0);
    Value sm = nn::ConstantOp::create(b, loc, s.toAttr(b.getContext()));
    if (!et.isF32())
      sm = nn::CastOp::create(b, loc, RankedTensorType::get({rows, n}, et), sm);
    Value flat = nn::ReshapeOp::create(
        b, loc, RankedTensorType::get({n, restSize}, et), upd);
    sum = nn::ReshapeOp::create(
        b, loc, dataType,
        nn::MatMulOp::create(
            b, loc, RankedTensorType::get({rows, restSize}, et), sm, flat));
  }
  if (!zeros) {
    FailureOr<Value> data = ctx.input(0);
    if (failed(data))
      return failure();
    sum = nn::AddOp::create(b, loc, *data, sum);
  }
  ctx.setOutput(0, sum);
  return success();
}

LogicalResult convertSplit(NodeContext &ctx) {
  RankedTensorType in = ctx.inputType(0);
  FailureOr<int64_t> axis = axisAttr(ctx, 0, in.getRank());
  if (failed(axis))
    return failure();
  int64_t dim = in.getDimSize(*axis);
  unsigned n = ctx.numOutputs();
  SmallVector<int64_t> sizes;
  if (ctx.hasInput(1)) {
    FailureOr<const HostTensor *> t = ctx.requireConst(1, "split");
    if (failed(t))
      return failure();
    sizes = (*t)->toInts();
  } else if (ctx.version() >= 18 && ctx.attr("num_outputs")) {
    int64_t parts = ctx.intAttr("num_outputs", 0);
    if (parts != n)
      return ctx.fail("num_outputs " + llvm::Twine(parts) + " differs from " +
                      llvm::Twine(n) + " outputs");
    int64_t chunk = (dim + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::min(chunk, dim - i * chunk));
  } else {
    if (dim % n != 0)
      return ctx.fail("dim " + llvm::Twine(dim) + " does not split evenly " +
                      "into " + llvm::Twine(n) + " outputs");
    sizes.assign(n, dim / n);
  }
  int64_t total = 0;
  bool negative = false;
  for (int64_t s : sizes) {
    total += s;
    negative |= s < 0;
  }
  if (sizes.size() != n || total != dim || negative)
    return ctx.fail("split sizes " + shapeToString(sizes) +
                    " do not divide dim " + llvm::Twine(dim) + " into " +
                    llvm::Twine(n) + " outputs");
  if (const HostTensor *c = ctx.constInput(0)) {
    int64_t offset = 0;
    for (unsigned i = 0; i < n; ++i) {
      SliceSpec spec;
      spec.offsets.assign(in.getRank(), 0);
      spec.strides.assign(in.getRank(), 1);
      spec.counts.assign(in.getShape().begin(), in.getShape().end());
      spec.offsets[*axis] = offset;
      spec.counts[*axis] = sizes[i];
      offset += sizes[i];
      ctx.setOutput(i, hostSlice(*c, spec));
    }
    return success();
  }
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  SmallVector<Type> types;
  for (int64_t s : sizes) {
    SmallVector<int64_t> shape(in.getShape());
    shape[*axis] = s;
    types.push_back(in.clone(shape));
  }
  auto split = nn::SplitOp::create(ctx.builder(), ctx.loc(), types, *x,
                                   ctx.builder().getI64IntegerAttr(*axis));
  for (unsigned i = 0; i < n; ++i)
    ctx.setOutput(i, split.getResult(i));
  return success();
}

LogicalResult convertIdentity(NodeContext &ctx) {
  ctx.forwardInput(0, 0, /*aliasParam=*/true);
  return success();
}

LogicalResult convertDropout(NodeContext &ctx) {
  if (ctx.hasInput(2)) {
    FailureOr<const HostTensor *> t = ctx.requireConst(2, "training_mode");
    if (failed(t))
      return failure();
    if ((*t)->size() != 1)
      return ctx.fail("training_mode must be a scalar");
    // Training with ratio 0 drops nothing: the identity, like inference.
    double ratio = 0.5;
    if (ctx.hasInput(1)) {
      FailureOr<const HostTensor *> r = ctx.requireConst(1, "ratio");
      if (failed(r))
        return failure();
      ratio = (*r)->floatAt(0);
    }
    if ((*t)->intAt(0) != 0 && ratio != 0)
      return ctx.fail("training_mode = true with ratio > 0 is not supported "
                      "(export the model in eval mode)");
  }
  ctx.forwardInput(0, 0, /*aliasParam=*/false);
  if (ctx.outputUsed(1)) {
    // Nothing is dropped: the mask is all true.
    RankedTensorType type = ctx.inputType(0);
    ctx.setOutput(1, HostTensor::ofInts(DType::Bool, type.getShape(),
                                        std::vector<int64_t>(
                                            type.getNumElements(), 1)));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Constants and shape queries (always folded)
//===----------------------------------------------------------------------===//

LogicalResult convertConstant(NodeContext &ctx) {
  const onnx::NodeProto &node = ctx.node();
  if (node.attribute_size() != 1)
    return ctx.fail("needs exactly one value attribute");
  const onnx::AttributeProto &a = node.attribute(0);
  if (a.name() == "value") {
    llvm::Expected<HostTensor> t = decodeTensor(a.t(), "");
    return setHost(ctx, std::move(t));
  }
  if (a.name() == "value_float")
    ctx.setOutput(0, HostTensor::ofFloats(DType::Float, {}, {a.f()}));
  else if (a.name() == "value_floats")
    ctx.setOutput(0, HostTensor::ofFloats(
                         DType::Float, {a.floats_size()},
                         std::vector<double>(a.floats().begin(),
                                             a.floats().end())));
  else if (a.name() == "value_int")
    ctx.setOutput(0, HostTensor::ofInts(DType::Int64, {}, {a.i()}));
  else
    ctx.setOutput(0, HostTensor::ofInts(
                         DType::Int64, {a.ints_size()},
                         std::vector<int64_t>(a.ints().begin(),
                                              a.ints().end())));
  return success();
}

LogicalResult convertShape(NodeContext &ctx) {
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  int64_t rank = shape.size();
  int64_t start = ctx.intAttr("start", 0), end = ctx.intAttr("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  std::vector<int64_t> dims(shape.begin() + start, shape.begin() + end);
  int64_t rankOut = dims.size();
  ctx.setOutput(0, HostTensor::ofInts(DType::Int64, {rankOut}, std::move(dims)));
  return success();
}

LogicalResult convertConstantOfShape(NodeContext &ctx) {
  FailureOr<const HostTensor *> shapeT = ctx.requireConst(0, "input");
  if (failed(shapeT))
    return failure();
  SmallVector<int64_t> shape = (*shapeT)->toInts();
  HostTensor value = HostTensor::ofFloats(DType::Float, {}, {0.0});
  if (const onnx::AttributeProto *a = ctx.attr("value")) {
    llvm::Expected<HostTensor> t = decodeTensor(a->t(), "");
    if (!t)
      return failWith(ctx, t.takeError());
    if (t->size() != 1)
      return ctx.fail("value must hold one element");
    value = std::move(*t);
  }
  value.shape.clear();
  return setHost(ctx, hostExpand(value, shape));
}

LogicalResult convertRange(NodeContext &ctx) {
  if (!ctx.allInputsConstant())
    return ctx.fail("start, limit and delta must be constants known at "
                    "import");
  const HostTensor &start = *ctx.constInput(0), &limit = *ctx.constInput(1),
                   &delta = *ctx.constInput(2);
  double s = start.floatAt(0), l = limit.floatAt(0), d = delta.floatAt(0);
  if (d == 0)
    return ctx.fail("delta is 0");
  double count = std::ceil((l - s) / d);
  if (count > double(int64_t(1) << 26))
    return ctx.fail("range of " + std::to_string(count) +
                    " elements is too large to fold at import");
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  HostTensor out = HostTensor::zeros(start.dtype, {n});
  for (int64_t i = 0; i < n; ++i) {
    if (start.isFloat())
      out.set(i, s + i * d);
    else
      out.setInt(i, start.intAt(0) + i * delta.intAt(0));
  }
  ctx.setOutput(0, std::move(out));
  return success();
}

//===----------------------------------------------------------------------===//
// Activations built from elementwise ops
//===----------------------------------------------------------------------===//

/// The ops of a decomposed activation of x (autodiff differentiates the
/// composition). Every branch of a select is computed on values that keep it
/// finite (exp of the clamped input), so no inf * 0 reaches a gradient, and
/// each select takes PyTorch's side at the kink (the gradient there is
/// torch's: x > 0 selects x, everything else the negative branch).
struct Activation {
  OpBuilder &b;
  Location loc;
  Type et;

  Value scalar(double v) { return scalarConstant(b, loc, et, v); }
  Value cmp(nn::ComparePredicate p, Value x, Value y) {
    return nn::CompareOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return nn::WhereOp::create(b, loc, c, x, y);
  }
  Value add(Value x, Value y) { return nn::AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return nn::SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return nn::MulOp::create(b, loc, x, y); }
  Value positive(Value x) {
    return cmp(nn::ComparePredicate::gt, x, scalar(0.0));
  }
  /// alpha (exp(x / scale) - 1) for x <= 0 and x for x > 0 (Elu, Celu).
  Value elu(Value x, double alpha, double scale) {
    Value c = positive(x);
    Value negative = select(c, scalar(0.0), x);
    if (scale != 1.0)
      negative = nn::DivOp::create(b, loc, negative, scalar(scale));
    Value expm1 = sub(nn::ExpOp::create(b, loc, negative), scalar(1.0));
    return select(c, x, mul(scalar(alpha), expm1));
  }
  /// x < 0 ? -x : x.
  Value abs(Value x) {
    return select(cmp(nn::ComparePredicate::lt, x, scalar(0)),
                  nn::NegOp::create(b, loc, x), x);
  }
  /// ln(1 + exp(x)) as max(x, 0) + ln(1 + exp(-|x|)).
  Value softplus(Value x) {
    Value c = positive(x);
    Value negAbs = select(c, nn::NegOp::create(b, loc, x), x);
    Value log1p = nn::LogOp::create(
        b, loc, add(scalar(1.0), nn::ExpOp::create(b, loc, negAbs)));
    return add(select(c, x, scalar(0.0)), log1p);
  }
  /// max(0, min(1, alpha x + beta)), its gradient alpha strictly inside.
  Value hardSigmoid(Value x, double alpha, double beta) {
    Value y = add(mul(scalar(alpha), x), scalar(beta));
    y = select(cmp(nn::ComparePredicate::le, y, scalar(0.0)), scalar(0.0), y);
    return select(cmp(nn::ComparePredicate::ge, y, scalar(1.0)), scalar(1.0),
                  y);
  }
};

/// A converter of a float activation computing output 0 from input 0.
ConvertFn activation(
    std::function<Value(NodeContext &, Activation &, Value)> build) {
  return [=](NodeContext &ctx) -> LogicalResult {
    Type et = ctx.inputType(0).getElementType();
    if (!isa<FloatType>(et))
      return ctx.fail("element type " + typeString(et) + " is not supported");
    FailureOr<Value> x = ctx.input(0);
    if (failed(x))
      return failure();
    Activation a{ctx.builder(), ctx.loc(), et};
    ctx.setOutput(0, build(ctx, a, *x));
    return success();
  };
}

LogicalResult convertPRelu(NodeContext &ctx) {
  RankedTensorType x = ctx.inputType(0), slope = ctx.inputType(1);
  if (!isa<FloatType>(x.getElementType()))
    return ctx.fail("element type " + typeString(x.getElementType()) +
                    " is not supported");
  if (slope.getElementType() != x.getElementType())
    return ctx.fail("slope's element type differs from X's");
  FailureOr<SmallVector<int64_t>> shape =
      nn::broadcastShapes(x.getShape(), slope.getShape());
  if (failed(shape) || ArrayRef<int64_t>(*shape) != x.getShape())
    return ctx.fail("slope shape " + shapeToString(slope.getShape()) +
                    " does not broadcast to X's " +
                    shapeToString(x.getShape()));
  FailureOr<Value> in = ctx.input(0), s = ctx.input(1);
  if (failed(in) || failed(s))
    return failure();
  Activation a{ctx.builder(), ctx.loc(), x.getElementType()};
  ctx.setOutput(0, a.select(a.positive(*in), *in, a.mul(*s, *in)));
  return success();
}

LogicalResult convertAbs(NodeContext &ctx) {
  Type et = ctx.inputType(0).getElementType();
  if (et.isInteger(1) || (isa<IntegerType>(et) && !et.isSignlessInteger()))
    return ctx.fail("element type " + typeString(et) + " is not supported");
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  Activation a{ctx.builder(), ctx.loc(), et};
  ctx.setOutput(0, a.abs(*x));
  return success();
}

/// Clip(x, min, max) = min(max(x, min), max); min and max are optional
/// scalars (so min > max gives max, and NaN stays NaN). The gradient passes
/// where min <= x <= max, as torch.clamp's.
LogicalResult convertClip(NodeContext &ctx) {
  Type et = ctx.inputType(0).getElementType();
  if (et.isInteger(1))
    return ctx.fail("element type " + typeString(et) + " is not supported");
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  Activation a{ctx.builder(), ctx.loc(), et};
  Value y = *x;
  for (unsigned i : {1u, 2u}) {
    if (!ctx.hasInput(i))
      continue;
    if (ctx.inputType(i).getRank() != 0 ||
        ctx.inputType(i).getElementType() != et)
      return ctx.fail(std::string(i == 1 ? "min" : "max") +
                      " must be a scalar of the input's type");
    FailureOr<Value> bound = ctx.input(i);
    if (failed(bound))
      return failure();
    auto p = i == 1 ? nn::ComparePredicate::lt : nn::ComparePredicate::gt;
    y = a.select(a.cmp(p, y, *bound), *bound, y);
  }
  ctx.setOutput(0, y);
  return success();
}

//===----------------------------------------------------------------------===//
// Logic, masks, one-hot and constant-only math
//===----------------------------------------------------------------------===//

/// `convert` for float32, bfloat16 and float16 inputs only.
ConvertFn floatOnly(ConvertFn convert) {
  return [=](NodeContext &ctx) -> LogicalResult {
    Type et = ctx.inputType(0).getElementType();
    if (!isa<FloatType>(et) || et.isF64())
      return ctx.fail("element type " + typeString(et) + " is not supported");
    return convert(ctx);
  };
}

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
  if (const HostTensor *c = ctx.constInput(0))
    return setHost(ctx, hostWhere(mask, *c, zero));
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  OpBuilder &b = ctx.builder();
  ctx.setOutput(0, nn::WhereOp::create(
                       b, ctx.loc(),
                       nn::ConstantOp::create(b, ctx.loc(),
                                              mask.toAttr(b.getContext())),
                       *x,
                       nn::ConstantOp::create(b, ctx.loc(),
                                              zero.toAttr(b.getContext()))));
  return success();
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

/// Einsum of one or more operands without ellipses or repeated indices in
/// a term: each operand transposed and reshaped to (output indices,
/// contracted indices) with size-1 dims for the indices it lacks, the
/// operands multiplied (broadcasting), the contracted indices summed.
LogicalResult convertEinsum(NodeContext &ctx) {
  std::string equation = ctx.stringAttr("equation", "");
  llvm::erase_if(equation, [](char c) {
    return std::isspace(static_cast<unsigned char>(c));
  });
  if (equation.find("...") != std::string::npos)
    return ctx.fail("equation '" + equation +
                    "': ellipses are not supported");
  StringRef eq(equation);
  auto [lhs, rhs] = eq.split("->");
  bool explicitOut = eq.contains("->");
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != ctx.numInputs())
    return ctx.fail("equation '" + equation + "' has " +
                    llvm::Twine(terms.size()) + " terms for " +
                    llvm::Twine(ctx.numInputs()) + " inputs");
  llvm::DenseMap<char, int64_t> sizes, counts;
  std::string letters;
  for (auto [i, term] : llvm::enumerate(terms)) {
    RankedTensorType type = ctx.inputType(i);
    if (type.getElementType().isInteger(1) ||
        type.getElementType() != ctx.inputType(0).getElementType())
      return ctx.fail("operands must share a numeric element type");
    if (static_cast<int64_t>(term.size()) != type.getRank())
      return ctx.fail("term '" + term + "' does not match operand " +
                      llvm::Twine(i) + " of rank " +
                      llvm::Twine(type.getRank()));
    for (auto [d, c] : llvm::enumerate(term)) {
      if (!std::isalpha(static_cast<unsigned char>(c)) || term.count(c) > 1)
        return ctx.fail("equation '" + equation +
                        "': only distinct letters per term are supported");
      int64_t size = type.getDimSize(d);
      auto [it, inserted] = sizes.try_emplace(c, size);
      if (!inserted && it->second != size)
        return ctx.fail("index '" + std::string(1, c) + "' has sizes " +
                        llvm::Twine(it->second) + " and " +
                        llvm::Twine(size));
      if (inserted)
        letters += c;
      ++counts[c];
    }
  }
  std::string out;
  if (explicitOut) {
    out = rhs.str();
    for (char c : out)
      if (!sizes.count(c) || llvm::count(out, c) > 1)
        return ctx.fail("equation '" + equation + "': bad output index '" +
                        std::string(1, c) + "'");
  } else {
    for (char c : letters)
      if (counts[c] == 1)
        out += c;
    llvm::sort(out);
  }
  // Canonical order: the output indices, then the contracted ones.
  std::string order = out;
  for (char c : letters)
    if (!llvm::is_contained(out, c))
      order += c;
  Type et = ctx.inputType(0).getElementType();
  if (order.size() > out.size() && (!isa<FloatType>(et) || et.isF64()))
    return ctx.fail("contracting indices of " + typeString(et) +
                    " tensors is not supported (float32, bfloat16 and "
                    "float16 only)");
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value product;
  for (auto [i, term] : llvm::enumerate(terms)) {
    FailureOr<Value> x = ctx.input(i);
    if (failed(x))
      return failure();
    SmallVector<int64_t> perm, shape;
    for (char c : order) {
      size_t d = term.find(c);
      if (d != StringRef::npos)
        perm.push_back(d);
      shape.push_back(d != StringRef::npos ? sizes[c] : 1);
    }
    Value v = *x;
    if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
      v = nn::TransposeOp::create(b, loc, v, perm);
    v = nn::ReshapeOp::create(b, loc, ctx.inputType(i).clone(shape), v);
    product = product ? Value(nn::MulOp::create(b, loc, product, v)) : v;
  }
  if (order.size() > out.size())
    product = nn::ReduceSumOp::create(
        b, loc, product,
        llvm::to_vector(llvm::seq<int64_t>(out.size(), order.size())), false);
  ctx.setOutput(0, product);
  return success();
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

std::vector<OpConverter> buildTable() {
  using P = nn::ComparePredicate;
  std::vector<OpConverter> t = {
      {"Add", {13, 14}, {}, binary<nn::AddOp>(HostBinary::Add), ""},
      {"Sub", {13, 14}, {}, binary<nn::SubOp>(HostBinary::Sub), ""},
      {"Mul", {13, 14}, {}, binary<nn::MulOp>(HostBinary::Mul), ""},
      {"Div", {13, 14}, {}, binary<nn::DivOp>(HostBinary::Div), ""},
      {"Pow",
       {13, 15},
       {},
       convertPow,
       "a floating-point base takes the exponent converted to its type; an "
       "integer base is raised in double and truncated to its type"},
      {"Neg", {13}, {}, unary<nn::NegOp>(HostUnary::Neg, false), ""},
      {"Sqrt", {13}, {}, unary<nn::SqrtOp>(HostUnary::Sqrt, true), ""},
      {"Reciprocal",
       {13},
       {},
       unary<nn::ReciprocalOp>(HostUnary::Reciprocal, true),
       ""},
      {"Exp", {13}, {}, unary<nn::ExpOp>(HostUnary::Exp, true), ""},
      {"Log", {13}, {}, unary<nn::LogOp>(HostUnary::Log, true), ""},
      {"Erf", {13}, {}, unary<nn::ErfOp>(HostUnary::Erf, true), ""},
      {"Tanh", {13}, {}, unary<nn::TanhOp>(HostUnary::Tanh, true), ""},
      {"Relu", {13, 14}, {}, unary<nn::ReluOp>(HostUnary::Relu, false), ""},
      {"Sigmoid", {13}, {}, unary<nn::SigmoidOp>(HostUnary::Sigmoid, true), ""},
      {"Abs", {13}, {}, convertAbs, "x < 0 ? -x : x"},
      {"Not", {1}, {}, convertNot, ""},
      {"Trilu",
       {14},
       {"upper"},
       convertTrilu,
       "k must be a constant; a select by a constant mask"},
      {"Sin",
       {7},
       {},
       constantOnly(HostUnary::Sin, "Sin"),
       "constant input only (folded at import)"},
      {"Cos",
       {7},
       {},
       constantOnly(HostUnary::Cos, "Cos"),
       "constant input only (folded at import)"},
      {"OneHot", {11}, {"axis"}, convertOneHot, "depth must be a constant"},
      {"TopK",
       {10, 11},
       {"axis", "largest", "sorted"},
       floatOnly(convertTopK),
       "K a constant; K rounds of max (small K); sorted, ties by index"},
      {"Clip",
       {13},
       {},
       convertClip,
       "min and max scalars; min(max(x, min), max)"},
      {"Celu",
       {12},
       {"alpha"},
       activation([](NodeContext &ctx, Activation &a, Value x) {
         double alpha = ctx.floatAttr("alpha", 1.0);
         return a.elu(x, alpha, alpha);
       }),
       "decomposed (Where, Exp)"},
      {"Elu",
       {6},
       {"alpha"},
       activation([](NodeContext &ctx, Activation &a, Value x) {
         return a.elu(x, ctx.floatAttr("alpha", 1.0), 1.0);
       }),
       "decomposed (Where, Exp)"},
      {"Selu",
       {6},
       {"alpha", "gamma"},
       activation([](NodeContext &ctx, Activation &a, Value x) {
         return a.mul(a.scalar(ctx.floatAttr("gamma", 1.05070102214813232)),
                      a.elu(x, ctx.floatAttr("alpha", 1.67326319217681884),
                            1.0));
       }),
       "decomposed (Where, Exp)"},
      {"LeakyRelu",
       {6, 16},
       {"alpha"},
       activation([](NodeContext &ctx, Activation &a, Value x) {
         return a.select(a.positive(x), x,
                         a.mul(a.scalar(ctx.floatAttr("alpha", 0.01)), x));
       }),
       "decomposed (Where)"},
      {"PRelu", {9, 16}, {}, convertPRelu, "decomposed (Where)"},
      {"ThresholdedRelu",
       {10},
       {"alpha"},
       activation([](NodeContext &ctx, Activation &a, Value x) {
         Value alpha = a.scalar(ctx.floatAttr("alpha", 1.0));
         return a.select(a.cmp(nn::ComparePredicate::gt, x, alpha), x,
                         a.scalar(0.0));
       }),
       "decomposed (Where)"},
      {"Softplus",
       {1},
       {},
       activation(
           [](NodeContext &, Activation &a, Value x) { return a.softplus(x); }),
       "max(x, 0) + ln(1 + exp(-|x|))"},
      {"Mish",
       {18},
       {},
       activation([](NodeContext &, Activation &a, Value x) {
         return a.mul(x, nn::TanhOp::create(a.b, a.loc, a.softplus(x)));
       }),
       "x tanh(softplus(x))"},
      {"Softsign",
       {1},
       {},
       activation([](NodeContext &, Activation &a, Value x) {
         return nn::DivOp::create(a.b, a.loc, x,
                                  a.add(a.scalar(1.0), a.abs(x)));
       }),
       "x / (1 + |x|)"},
      {"HardSigmoid",
       {6},
       {"alpha", "beta"},
       activation([](NodeContext &ctx, Activation &a, Value x) {
         return a.hardSigmoid(x, ctx.floatAttr("alpha", 0.2),
                              ctx.floatAttr("beta", 0.5));
       }),
       "decomposed (Where)"},
      {"HardSwish",
       {14},
       {},
       activation([](NodeContext &, Activation &a, Value x) {
         return a.mul(x, a.hardSigmoid(x, 1.0 / 6.0, 0.5));
       }),
       "x HardSigmoid(x) with alpha 1/6, beta 1/2"},
      {"Equal", {13}, {}, compare(P::eq, HostBinary::Equal), ""},
      {"Less", {13}, {}, compare(P::lt, HostBinary::Less), ""},
      {"LessOrEqual",
       {12, 16},
       {},
       compare(P::le, HostBinary::LessOrEqual),
       ""},
      {"Greater", {13}, {}, compare(P::gt, HostBinary::Greater), ""},
      {"GreaterOrEqual",
       {12, 16},
       {},
       compare(P::ge, HostBinary::GreaterOrEqual),
       ""},
      {"Where", {9, 16}, {}, convertWhere, ""},
      {"Cast",
       {13},
       {"to"},
       convertCast,
       "to float, double, float16, bool and (un)signed integers (not to "
       "bfloat16)"},
      {"ReduceSum",
       {13},
       {"keepdims", "noop_with_empty_axes"},
       reduce<nn::ReduceSumOp>(13),
       "axes must be a constant"},
      {"ReduceMean",
       {13, 18},
       {"axes", "keepdims", "noop_with_empty_axes"},
       reduce<nn::ReduceMeanOp>(18),
       "axes must be a constant"},
      {"ReduceLogSumExp",
       {13, 18},
       {"axes", "keepdims", "noop_with_empty_axes"},
       floatOnly(reduceWith(18, logSumExp)),
       "axes must be a constant; max + log(sum(exp(x - max)))"},
      {"ReduceMax",
       {13, 18},
       {"axes", "keepdims", "noop_with_empty_axes"},
       reduce<nn::ReduceMaxOp>(18),
       "axes must be a constant"},
      {"LayerNormalization",
       {17},
       {"axis", "epsilon", "stash_type"},
       convertLayerNorm,
       "Scale and B of the normalized shape; stash_type 1"},
      {"Softmax", {13}, {"axis"}, convertSoftmax, ""},
      {"LogSoftmax",
       {13},
       {"axis"},
       convertLogSoftmax,
       "x - max - log(sum(exp(x - max))) over the axis"},
      {"SoftmaxCrossEntropyLoss",
       {13},
       {"ignore_index", "reduction"},
       convertSoftmaxCrossEntropy,
       "with weights or log_prob: built from elementwise ops and reductions"},
      {"MatMul", {13}, {}, convertMatMul, ""},
      {"Gemm", {13}, {"alpha", "beta", "transA", "transB"}, convertGemm, ""},
      {"Einsum",
       {12},
       {"equation"},
       convertEinsum,
       "no ellipses or repeated indices in a term; a broadcast product "
       "summed over the contracted indices"},
      {"Gather", {13}, {"axis"}, convertGather, ""},
      {"GatherElements",
       {13},
       {"axis"},
       convertGatherElements,
       "indices of data's shape off the axis; a one-hot select over the "
       "axis (index shape x axis size elements)"},
      {"Reshape",
       {13, 14},
       {"allowzero"},
       convertReshape,
       "shape must be a constant (after folding)"},
      {"Unsqueeze", {13}, {}, convertUnsqueeze, "axes must be a constant"},
      {"Squeeze", {13}, {}, convertSqueeze, "axes must be a constant"},
      {"Expand", {13}, {}, convertExpand, "shape must be a constant"},
      {"Transpose", {13}, {"perm"}, convertTranspose, ""},
      {"Slice",
       {13},
       {},
       convertSlice,
       "starts, ends, axes and steps must be constants"},
      {"Concat", {13}, {"axis"}, convertConcat, ""},
      {"Flatten", {13}, {"axis"}, convertFlatten, "a reshape"},
      {"Tile",
       {13},
       {},
       convertTile,
       "repeats known at import; per repeated axis a reshape, an expand and "
       "a reshape"},
      {"Max",
       {13},
       {},
       extremum(true),
       "pairwise selects; for floats a tie gives each side half the "
       "gradient, as torch.maximum"},
      {"Min",
       {13},
       {},
       extremum(false),
       "pairwise selects; for floats a tie gives each side half the "
       "gradient, as torch.minimum"},
      {"Pad",
       {13, 18},
       {"mode"},
       convertPad,
       "modes constant, edge and reflect; pads, constant_value and axes "
       "known at import; a slice, then concats with constant blocks "
       "(constant) or gathers by constant indices (edge, reflect)"},
      {"CumSum",
       {11, 14},
       {"exclusive", "reverse"},
       convertCumSum,
       "axis must be a constant; log2(n) shifted adds"},
      {"NonZero",
       {9, 13},
       {},
       convertNonZero,
       "folded; of a run-time value, dense where its indices dispatch rows "
       "to a ScatterElements (mixture-of-experts routing)"},
      {"ScatterElements",
       {11, 13, 16},
       {"axis", "reduction"},
       convertScatterElements,
       "axis 0, constant indices picking whole rows; \"add\", or \"none\" "
       "into zeros"},
      {"ScatterND",
       {11, 13, 16, 18},
       {"reduction"},
       convertScatterND,
       "indices must be a constant; reduction \"none\" only; a gather and a "
       "where"},
      {"Split",
       {13, 18},
       {"axis", "num_outputs"},
       convertSplit,
       "split must be a constant"},
      {"Identity",
       {13, 14, 16},
       {},
       convertIdentity,
       "an alias of a parameter becomes a parameter of its own, initialized "
       "from the same bytes"},
      {"Dropout",
       {13},
       {"seed"},
       convertDropout,
       "inference (training_mode absent or false), or training with ratio 0: "
       "the identity, mask all true"},
      {"Constant",
       {13},
       {"value", "value_float", "value_floats", "value_int", "value_ints"},
       convertConstant,
       "folded at import"},
      {"Shape", {13, 15}, {"start", "end"}, convertShape, "folded at import"},
      {"ConstantOfShape",
       {9},
       {"value"},
       convertConstantOfShape,
       "folded at import"},
      {"Range", {11}, {}, convertRange, "constant inputs; folded at import"},
  };
  llvm::sort(t, [](const OpConverter &a, const OpConverter &b) {
    return a.opType < b.opType;
  });
  return t;
}

} // namespace

const std::vector<OpConverter> &autopar::onnx_import::converterTable() {
  static const std::vector<OpConverter> table = buildTable();
  return table;
}

const OpConverter *autopar::onnx_import::findConverter(StringRef opType) {
  const auto &table = converterTable();
  auto it = llvm::lower_bound(table, opType, [](const OpConverter &c,
                                                StringRef t) {
    return StringRef(c.opType) < t;
  });
  return it != table.end() && it->opType == opType ? &*it : nullptr;
}

int64_t autopar::onnx_import::opVersionAt(const OpConverter &conv,
                                          int64_t opset) {
  int64_t best = -1;
  for (int64_t v : conv.versions)
    if (v <= opset)
      best = std::max(best, v);
  return best;
}
