//===- ConvertReductions.cpp - reduction and normalization converters -----===//
//
// ReduceSum, ReduceMean, ReduceMax and ReduceLogSumExp (axes from the
// attribute or a constant input), LayerNormalization with its statistics,
// Softmax, LogSoftmax and SoftmaxCrossEntropyLoss (the fused nn op, or
// built from elementwise ops and reductions with weights or log_prob).
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ConvertersImpl.h"

#include "dialects/nn/NNOps.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace autopar;

namespace autopar::onnx_import {

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

namespace {

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

} // namespace

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
  ctx.setOutput(0,
                nn::SoftmaxCrossEntropyOp::create(
                    b, ctx.loc(),
                    RankedTensorType::get(resultShape, scores.getElementType()),
                    *s, *l, *reduction, ignore, /*classes=*/IntegerAttr()));
  return success();
}

} // namespace autopar::onnx_import
