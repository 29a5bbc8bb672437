//===- NNBackwardOps.cpp - verifiers of the backward ops ------------------===//
//
// The verifiers of the backward nn ops (the gradients of layer norm,
// attention, softmax, cross-entropy, gather and slice), and of nn.attention,
// which shares its operand checks with nn.attention_grad.
//
//===----------------------------------------------------------------------===//

#include "dialects/nn/NNOps.h"
#include "dialects/nn/NNOpsImpl.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace autopar::nn;

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

LogicalResult LayerNormGradOp::verify() {
  RankedTensorType input = tensorType(getInput());
  int64_t axis = getAxis();
  if (failed(verifyAxis(*this, axis, input.getRank(), "operand 'input'")))
    return failure();
  if (getGrad().getType() != input)
    return emitOpError() << "operand 'grad' type " << getGrad().getType()
                         << " differs from operand 'input' type " << input;
  RankedTensorType normalized =
      RankedTensorType::get(input.getShape().drop_front(axis),
                            input.getElementType());
  if (getScale().getType() != normalized)
    return emitOpError() << "operand 'scale' type " << getScale().getType()
                         << " must be the normalized type " << normalized;
  if (failed(verifyResultType(*this, getInputGrad().getType(), input)) ||
      failed(verifyResultType(*this, getScaleGrad().getType(), normalized)) ||
      failed(verifyResultType(*this, getBiasGrad().getType(), normalized)))
    return failure();
  double epsilon = getEpsilon().convertToDouble();
  if (!(epsilon >= 0))
    return emitOpError() << "epsilon must be a non-negative number, got "
                         << epsilon;
  return success();
}

/// The operand and result types of nn.attention / nn.attention_grad: q
/// [..., T, D], k and v [..., S, D] of one float type with the same leading
/// dims, a mask broadcastable to [..., T, S], out like q, lse [..., T].
static LogicalResult verifyAttentionTypes(Operation *op, Value query,
                                          Value key, Value value, Value mask,
                                          Value positions, bool causal,
                                          double scale) {
  RankedTensorType q = tensorType(query), k = tensorType(key),
                   v = tensorType(value);
  if (q.getRank() < 3)
    return op->emitOpError() << "operand 'query' must have rank 3 or more "
                                "([..., T, D]), got "
                             << q;
  if (k.getRank() != q.getRank() || v.getRank() != q.getRank())
    return op->emitOpError()
           << "operands 'key' and 'value' must have the rank of 'query' ("
           << q.getRank() << ")";
  if (k.getElementType() != q.getElementType() ||
      v.getElementType() != q.getElementType())
    return op->emitOpError()
           << "operands 'query', 'key' and 'value' must have one element type";
  ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape(), vs = v.getShape();
  int64_t rank = q.getRank();
  if (qs.drop_back(2) != ks.drop_back(2) || ks != vs)
    return op->emitOpError()
           << "operands 'key' and 'value' must be [..., S, D] with the leading "
              "dims of 'query' "
           << q << ", got " << k << " and " << v;
  if (ks[rank - 1] != qs[rank - 1])
    return op->emitOpError() << "operand 'key' has " << ks[rank - 1]
                             << " features per position, 'query' "
                             << qs[rank - 1];
  if (mask) {
    SmallVector<int64_t> scores(qs.drop_back(1));
    scores.push_back(ks[rank - 2]);
    FailureOr<SmallVector<int64_t>> b =
        broadcastShapes(tensorType(mask).getShape(), scores);
    if (failed(b) || ArrayRef<int64_t>(*b) != ArrayRef<int64_t>(scores))
      return op->emitOpError()
             << "operand 'mask' " << mask.getType()
             << " does not broadcast to the scores' shape ["
             << llvm::make_range(scores.begin(), scores.end()) << "]";
  }
  if (positions) {
    RankedTensorType p = tensorType(positions);
    if (!causal)
      return op->emitOpError() << "operand 'positions' needs causal = true";
    if (p.getRank() != 1 || p.getDimSize(0) != qs[rank - 2] ||
        !p.getElementType().isInteger(64))
      return op->emitOpError()
             << "operand 'positions' must be tensor<" << qs[rank - 2]
             << "xi64> (one per query row), got " << p;
  }
  if (!(scale > 0) || !std::isfinite(scale))
    return op->emitOpError() << "scale must be a positive number, got "
                             << scale;
  return success();
}

/// [..., T] of q [..., T, D].
static RankedTensorType attentionLseType(Value query) {
  RankedTensorType q = tensorType(query);
  return RankedTensorType::get(q.getShape().drop_back(1),
                               attentionLseElementType(q.getElementType()));
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionTypes(*this, getQuery(), getKey(), getValue(),
                                  getMask(), getPositions(), getCausal(),
                                  getScale().convertToDouble())) ||
      failed(verifyResultType(*this, getOutput().getType(),
                              getQuery().getType())) ||
      failed(verifyResultType(*this, getLse().getType(),
                              attentionLseType(getQuery()))))
    return failure();
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionTypes(*this, getQuery(), getKey(), getValue(),
                                  getMask(), getPositions(), getCausal(),
                                  getScale().convertToDouble())))
    return failure();
  if (getOutput().getType() != getQuery().getType() ||
      getGrad().getType() != getQuery().getType())
    return emitOpError() << "operands 'output' and 'grad' must have the type "
                            "of 'query' "
                         << getQuery().getType();
  if (getLse().getType() != attentionLseType(getQuery()))
    return emitOpError() << "operand 'lse' must be "
                         << attentionLseType(getQuery()) << ", got "
                         << getLse().getType();
  if (failed(verifyResultType(*this, getQueryGrad().getType(),
                              getQuery().getType())) ||
      failed(verifyResultType(*this, getKeyGrad().getType(),
                              getKey().getType())) ||
      failed(verifyResultType(*this, getValueGrad().getType(),
                              getValue().getType())))
    return failure();
  return success();
}

LogicalResult SoftmaxGradOp::verify() {
  return verifyAxis(*this, getAxis(), tensorType(getOutput()).getRank(),
                    "operand 'output'");
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  FailureOr<RankedTensorType> loss =
      lossType(*this, getScores(), getLabels(), getReduction());
  if (failed(loss) ||
      failed(verifyClassCount(*this, getScores(), getClasses())))
    return failure();
  if (!isLossType(getGrad().getType(), *loss))
    return emitOpError() << "operand 'grad' type " << getGrad().getType()
                         << " must be the loss type " << *loss;
  return verifyResultType(*this, getType(), getScores().getType());
}

LogicalResult CrossEntropyShardGradOp::verify() {
  FailureOr<RankedTensorType> stats =
      shardStatsType(*this, getScores(), getLabels());
  FailureOr<RankedTensorType> loss =
      lossType(*this, getScores(), getLabels(), getReduction());
  if (failed(stats) || failed(loss))
    return failure();
  if (getLse().getType() != *stats)
    return emitOpError() << "operand 'lse' type " << getLse().getType()
                         << " must be " << *stats;
  if (!isLossType(getGrad().getType(), *loss))
    return emitOpError() << "operand 'grad' type " << getGrad().getType()
                         << " must be the loss type " << *loss;
  return verifyResultType(*this, getType(), getScores().getType());
}

LogicalResult GatherGradOp::verify() {
  RankedTensorType data = getType();
  if (failed(verifyAxis(*this, getAxis(), data.getRank(), "the result")))
    return failure();
  if (failed(verifySameElementType(*this, getResult(), "result", getGrad(),
                                   "grad")))
    return failure();
  RankedTensorType expected =
      gatherType(data, tensorType(getIndices()), getAxis());
  if (getGrad().getType() != expected)
    return emitOpError() << "operand 'grad' type " << getGrad().getType()
                         << " differs from the gathered type " << expected;
  return success();
}

LogicalResult SliceGradOp::verify() {
  return verifySlice(*this, getType(), tensorType(getGrad()), getOffsets(),
                     getStrides(), "the result");
}
