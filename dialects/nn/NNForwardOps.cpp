//===- NNForwardOps.cpp - verifiers and builders of forward ops -----------===//
//
// The members NNOps.td declares for the forward nn ops: their verifiers
// (operands, attributes and the inferred result type), the builders that
// infer the result type, and the folds of nn.cast and nn.reshape;
// elementwise ops, reductions and normalizations, linear algebra, indexing
// and data movement. The types cross-entropy, gather and slice check are
// shared with their backward ops (NNOpsImpl.h).
//
//===----------------------------------------------------------------------===//

#include "dialects/nn/NNOps.h"
#include "dialects/nn/NNOpsImpl.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace autopar::nn;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static LogicalResult verifyBroadcastOperands(Operation *op, Value lhs,
                                             Value rhs, Type elementType) {
  if (failed(verifySameElementType(op, lhs, "lhs", rhs, "rhs")))
    return failure();
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(tensorType(lhs).getShape(), tensorType(rhs).getShape());
  if (failed(shape))
    return op->emitOpError()
           << "operands 'lhs' (" << lhs.getType() << ") and 'rhs' ("
           << rhs.getType() << ") do not broadcast";
  return verifyResultType(op, op->getResult(0).getType(),
                          RankedTensorType::get(*shape, elementType));
}

#define NN_BINARY_VERIFIER(OP)                                                 \
  LogicalResult OP::verify() {                                                 \
    return verifyBroadcastOperands(*this, getLhs(), getRhs(),                  \
                                   tensorType(getLhs()).getElementType());     \
  }
NN_BINARY_VERIFIER(AddOp)
NN_BINARY_VERIFIER(SubOp)
NN_BINARY_VERIFIER(MulOp)
NN_BINARY_VERIFIER(DivOp)
NN_BINARY_VERIFIER(PowOp)
#undef NN_BINARY_VERIFIER

LogicalResult CompareOp::verify() {
  return verifyBroadcastOperands(*this, getLhs(), getRhs(),
                                 IntegerType::get(getContext(), 1));
}

static FailureOr<SmallVector<int64_t>> whereShape(Value c, Value l, Value r) {
  FailureOr<SmallVector<int64_t>> lr =
      broadcastShapes(tensorType(l).getShape(), tensorType(r).getShape());
  if (failed(lr))
    return failure();
  return broadcastShapes(tensorType(c).getShape(), *lr);
}

void WhereOp::build(OpBuilder &builder, OperationState &state, Value condition,
                    Value lhs, Value rhs) {
  FailureOr<SmallVector<int64_t>> shape = whereShape(condition, lhs, rhs);
  assert(succeeded(shape) && "operands do not broadcast");
  build(builder, state,
        RankedTensorType::get(*shape, tensorType(lhs).getElementType()),
        condition, lhs, rhs);
}

LogicalResult WhereOp::verify() {
  if (failed(verifySameElementType(*this, getLhs(), "lhs", getRhs(), "rhs")))
    return failure();
  FailureOr<SmallVector<int64_t>> shape =
      whereShape(getCondition(), getLhs(), getRhs());
  if (failed(shape))
    return emitOpError() << "operands 'condition' (" << getCondition().getType()
                         << "), 'lhs' (" << getLhs().getType() << ") and 'rhs' ("
                         << getRhs().getType() << ") do not broadcast";
  return verifyResultType(
      *this, getType(),
      RankedTensorType::get(*shape, tensorType(getLhs()).getElementType()));
}

LogicalResult CastOp::verify() {
  if (tensorType(getInput()).getShape() != getType().getShape())
    return emitOpError() << "result shape "
                         << shapeString(getType().getShape())
                         << " differs from operand 'input' shape "
                         << shapeString(tensorType(getInput()).getShape());
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

template <typename ReduceOpTy>
static LogicalResult verifyReduce(ReduceOpTy op) {
  RankedTensorType input = tensorType(op.getInput());
  if (failed(verifyAxes(op, op.getAxes(), input.getRank(), "operand 'input'")))
    return failure();
  return verifyResultType(op, op.getType(),
                          inferReduceType(input, op.getAxes(), op.getKeepdims()));
}

LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }

LogicalResult LayerNormOp::verify() {
  RankedTensorType input = tensorType(getInput());
  int64_t axis = getAxis();
  if (failed(verifyAxis(*this, axis, input.getRank(), "operand 'input'")))
    return failure();
  ArrayRef<int64_t> normalized = input.getShape().drop_front(axis);
  auto checkParam = [&](Value v, StringRef name) -> LogicalResult {
    if (!v)
      return success();
    if (failed(verifySameElementType(*this, getInput(), "input", v, name)))
      return failure();
    if (tensorType(v).getShape() != normalized)
      return emitOpError() << "operand '" << name << "' shape "
                           << shapeString(tensorType(v).getShape())
                           << " differs from the normalized shape "
                           << shapeString(normalized) << " of operand 'input'";
    return success();
  };
  if (failed(checkParam(getScale(), "scale")) ||
      failed(checkParam(getBias(), "bias")))
    return failure();
  double epsilon = getEpsilon().convertToDouble();
  if (!(epsilon >= 0))
    return emitOpError() << "epsilon must be a non-negative number, got "
                         << epsilon;
  return verifyResultType(*this, getType(), input);
}

LogicalResult SoftmaxOp::verify() {
  if (failed(verifyAxis(*this, getAxis(), tensorType(getInput()).getRank(),
                        "operand 'input'")))
    return failure();
  return verifyResultType(*this, getType(), getInput().getType());
}

LogicalResult DequantizeOp::verify() {
  RankedTensorType result = tensorType(getResult());
  const int64_t n = result.getNumElements();
  const int64_t codes = tensorType(getCodes()).getNumElements();
  const int64_t scales = tensorType(getAbsmax()).getNumElements();
  if (result.getRank() != 2)
    return emitOpError() << "dequantizes a matrix, got rank "
                         << result.getRank();
  if (getKind() == "nf4") {
    const int64_t block = static_cast<int64_t>(getBlockSize());
    if (block < 1)
      return emitOpError() << "block_size must be >= 1, got " << block;
    if (codes != (n + 1) / 2)
      return emitOpError() << "nf4 needs " << (n + 1) / 2 << " code bytes for "
                           << n << " elements, got " << codes;
    const int64_t blocks = (n + block - 1) / block;
    if (scales != blocks)
      return emitOpError() << "nf4 needs one absmax per block of " << block
                           << " (" << blocks << "), got " << scales;
    const bool codedScales =
        tensorType(getAbsmax()).getElementType().isInteger(8);
    if (!getState2())
      return codedScales ? emitOpError() << "i8 absmax (double quantization) "
                                            "needs the state2 operand"
                         : success();
    if (!codedScales)
      return emitOpError() << "with state2 (double quantization) the absmax "
                              "must be i8 codes";
    const int64_t groups = (blocks + 255) / 256;
    const int64_t state2 = tensorType(getState2()).getNumElements();
    if (state2 != 1 + groups)
      return emitOpError() << "state2 needs the offset and one scale per 256 "
                              "absmax ("
                           << 1 + groups << "), got " << state2;
    return success();
  }
  if (getKind() != "int8")
    return emitOpError() << "kind must be \"nf4\" or \"int8\", got \""
                         << getKind() << "\"";
  if (getState2() || !tensorType(getAbsmax()).getElementType().isF32())
    return emitOpError() << "int8 takes f32 absmax and no state2 (double "
                            "quantization is for nf4)";
  const int64_t axis = static_cast<int64_t>(getAxis());
  if (axis != 0 && axis != 1)
    return emitOpError() << "axis must be 0 or 1, got " << axis;
  if (tensorType(getCodes()).getShape() != result.getShape())
    return emitOpError() << "int8 codes must have the result's shape";
  if (scales != result.getDimSize(axis))
    return emitOpError() << "int8 needs one absmax per output feature ("
                         << result.getDimSize(axis) << "), got " << scales;
  return success();
}

LogicalResult DropoutOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio >= 0 && ratio < 1))
    return emitOpError() << "ratio must be in [0, 1), got " << ratio;
  if (getSite() > 0xFFFFFFFFull)
    return emitOpError() << "site must be in [0, 2^32), got " << getSite();
  RankedTensorType input = tensorType(getInput());
  if (input.getRank() > 8)
    return emitOpError() << "supports rank 8 at most, got " << input.getRank();
  size_t rank = input.getRank();
  if (!getOffsets().empty() && getOffsets().size() != rank)
    return emitOpError() << "has " << getOffsets().size()
                         << " offsets; expected none or one per dim (" << rank
                         << ")";
  if (std::optional<ArrayRef<int64_t>> logical = getLogicalShape()) {
    if (logical->size() != rank)
      return emitOpError() << "logical_shape " << shapeString(*logical)
                           << " has not the rank of the operand's shape "
                           << shapeString(input.getShape());
    for (size_t d = 0; d < rank; ++d)
      if ((*logical)[d] < input.getDimSize(d))
        return emitOpError()
               << "logical_shape " << shapeString(*logical)
               << " is smaller than the operand's shape "
               << shapeString(input.getShape()) << " in dim " << d;
  }
  return success();
}

/// Checks the scores and labels of a cross-entropy op and returns the type
/// of its loss: a scalar, or the labels' shape for reduction `none`.
FailureOr<RankedTensorType> autopar::nn::lossType(Operation *op,
                                                  Value scoresValue,
                                                  Value labelsValue,
                                                  LossReduction reduction) {
  RankedTensorType scores = tensorType(scoresValue);
  RankedTensorType labels = tensorType(labelsValue);
  if (scores.getRank() < 2)
    return op->emitOpError()
           << "operand 'scores' must have rank >= 2 ([N, C, ...]), got "
           << scores;
  SmallVector<int64_t> expected(scores.getShape());
  expected.erase(expected.begin() + 1);
  if (labels.getShape() != ArrayRef(expected))
    return op->emitOpError() << "operand 'labels' shape "
                             << shapeString(labels.getShape())
                             << " must be the shape of operand 'scores' "
                                "without its class dim: "
                             << shapeString(expected);
  SmallVector<int64_t> shape;
  if (reduction == LossReduction::none)
    shape = expected;
  return RankedTensorType::get(shape, scores.getElementType());
}

/// Whether `type` is the loss type `loss`, or its f32 version where the
/// scores are 16-bit floats (mixed precision: the loss of bf16 logits is
/// computed and kept in f32).
bool autopar::nn::isLossType(Type type, RankedTensorType loss) {
  if (type == loss)
    return true;
  Type scores = loss.getElementType();
  return scores.getIntOrFloatBitWidth() == 16 &&
         type == loss.clone(Float32Type::get(type.getContext()));
}

LogicalResult autopar::nn::verifyClassCount(Operation *op, Value scores,
                                            std::optional<int64_t> classes) {
  if (!classes)
    return success();
  int64_t c = cast<RankedTensorType>(scores.getType()).getDimSize(1);
  if (*classes < 1 || *classes > c)
    return op->emitOpError() << "classes " << *classes << " must be within 1.."
                             << c << " (the scores' class dim)";
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  FailureOr<RankedTensorType> loss =
      lossType(*this, getScores(), getLabels(), getReduction());
  if (failed(loss) ||
      failed(verifyClassCount(*this, getScores(), getClasses())))
    return failure();
  if (isLossType(getType(), *loss))
    return success();
  return verifyResultType(*this, getType(), *loss);
}

/// The per-element statistics of a vocab-parallel cross-entropy: f32 of
/// the labels' shape. Checks `scores` and `labels` on the way.
FailureOr<RankedTensorType>
autopar::nn::shardStatsType(Operation *op, Value scores, Value labels) {
  FailureOr<RankedTensorType> perElement =
      lossType(op, scores, labels, LossReduction::none);
  if (failed(perElement))
    return failure();
  return perElement->clone(Float32Type::get(op->getContext()));
}

LogicalResult CrossEntropyShardStatsOp::verify() {
  FailureOr<RankedTensorType> stats =
      shardStatsType(*this, getScores(), getLabels());
  if (failed(stats))
    return failure();
  if (getMax().getType() != *stats)
    return emitOpError() << "operand 'max' type " << getMax().getType()
                         << " must be " << *stats;
  if (failed(verifyResultType(*this, getSumExp().getType(), *stats)))
    return failure();
  return verifyResultType(*this, getTarget().getType(), *stats);
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

void MatMulOp::build(OpBuilder &builder, OperationState &state, Value lhs,
                     Value rhs) {
  FailureOr<SmallVector<int64_t>> shape =
      matmulShape(tensorType(lhs).getShape(), tensorType(rhs).getShape());
  assert(succeeded(shape) && "operands do not multiply");
  build(builder, state,
        RankedTensorType::get(*shape, tensorType(lhs).getElementType()), lhs,
        rhs);
}

LogicalResult MatMulOp::verify() {
  if (failed(verifySameElementType(*this, getLhs(), "lhs", getRhs(), "rhs")))
    return failure();
  RankedTensorType lhs = tensorType(getLhs()), rhs = tensorType(getRhs());
  if (lhs.getRank() == 0 || rhs.getRank() == 0)
    return emitOpError() << "operand '" << (lhs.getRank() == 0 ? "lhs" : "rhs")
                         << "' must have rank >= 1";
  int64_t k = lhs.getShape().back();
  int64_t kr = rhs.getRank() == 1 ? rhs.getDimSize(0)
                                  : rhs.getDimSize(rhs.getRank() - 2);
  if (k != kr)
    return emitOpError() << "contracting dim of operand 'rhs' (" << kr
                         << ") differs from that of operand 'lhs' (" << k
                         << ")";
  FailureOr<SmallVector<int64_t>> shape =
      matmulShape(lhs.getShape(), rhs.getShape());
  if (failed(shape))
    return emitOpError() << "batch dims of operands 'lhs' (" << lhs
                         << ") and 'rhs' (" << rhs << ") do not broadcast";
  return verifyResultType(
      *this, getType(), RankedTensorType::get(*shape, lhs.getElementType()));
}

LogicalResult GemmOp::verify() {
  RankedTensorType a = tensorType(getA()), b = tensorType(getB());
  if (a.getRank() != 2 || b.getRank() != 2)
    return emitOpError() << "operand '" << (a.getRank() != 2 ? "a" : "b")
                         << "' must have rank 2";
  if (failed(verifySameElementType(*this, getA(), "a", getB(), "b")))
    return failure();
  int64_t m = a.getDimSize(getTransA() ? 1 : 0);
  int64_t k = a.getDimSize(getTransA() ? 0 : 1);
  int64_t kb = b.getDimSize(getTransB() ? 1 : 0);
  int64_t n = b.getDimSize(getTransB() ? 0 : 1);
  if (k != kb)
    return emitOpError() << "contracting dim of operand 'b' (" << kb
                         << ") differs from that of operand 'a' (" << k << ")";
  SmallVector<int64_t> mn = {m, n};
  if (Value c = getC()) {
    if (failed(verifySameElementType(*this, getA(), "a", c, "c")))
      return failure();
    FailureOr<SmallVector<int64_t>> bc =
        broadcastShapes(tensorType(c).getShape(), mn);
    if (failed(bc) || ArrayRef(*bc) != ArrayRef(mn))
      return emitOpError() << "operand 'c' (" << c.getType()
                           << ") does not broadcast to " << shapeString(mn);
  }
  return verifyResultType(*this, getType(),
                          RankedTensorType::get(mn, a.getElementType()));
}

//===----------------------------------------------------------------------===//
// Indexing and data movement
//===----------------------------------------------------------------------===//

RankedTensorType autopar::nn::gatherType(RankedTensorType data,
                                         RankedTensorType indices,
                                         int64_t axis) {
  SmallVector<int64_t> shape(data.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, data.getShape().drop_front(axis + 1));
  return RankedTensorType::get(shape, data.getElementType());
}

void GatherOp::build(OpBuilder &builder, OperationState &state, Value data,
                     Value indices, int64_t axis) {
  build(builder, state, gatherType(tensorType(data), tensorType(indices), axis),
        data, indices, builder.getI64IntegerAttr(axis));
}

LogicalResult GatherOp::verify() {
  RankedTensorType data = tensorType(getData());
  if (failed(verifyAxis(*this, getAxis(), data.getRank(), "operand 'data'")))
    return failure();
  return verifyResultType(
      *this, getType(), gatherType(data, tensorType(getIndices()), getAxis()));
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = tensorType(getInput());
  if (failed(verifyResultElementType(*this, getInput())))
    return failure();
  if (input.getNumElements() != getType().getNumElements())
    return emitOpError() << "result has " << getType().getNumElements()
                         << " elements but operand 'input' has "
                         << input.getNumElements();
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

Type autopar::nn::inferUnsqueezeType(Type inputType, ArrayRef<int64_t> axes) {
  auto input = cast<RankedTensorType>(inputType);
  SmallVector<int64_t> shape;
  ArrayRef<int64_t> in = input.getShape();
  int64_t rank = input.getRank() + axes.size();
  for (int64_t i = 0; i < rank; ++i) {
    if (llvm::is_contained(axes, i)) {
      shape.push_back(1);
    } else {
      shape.push_back(in.front());
      in = in.drop_front();
    }
  }
  return RankedTensorType::get(shape, input.getElementType());
}

void UnsqueezeOp::build(OpBuilder &builder, OperationState &state, Value input,
                        ArrayRef<int64_t> axes) {
  build(builder, state, inferUnsqueezeType(input.getType(), axes), input,
        builder.getDenseI64ArrayAttr(axes));
}

LogicalResult UnsqueezeOp::verify() {
  RankedTensorType input = tensorType(getInput());
  if (failed(verifyAxes(*this, getAxes(), input.getRank() + getAxes().size(),
                        "the result")))
    return failure();
  return verifyResultType(*this, getType(),
                          inferUnsqueezeType(input, getAxes()));
}

void SqueezeOp::build(OpBuilder &builder, OperationState &state, Value input,
                      ArrayRef<int64_t> axes) {
  build(builder, state, inferReduceType(input.getType(), axes, false), input,
        builder.getDenseI64ArrayAttr(axes));
}

LogicalResult SqueezeOp::verify() {
  RankedTensorType input = tensorType(getInput());
  if (failed(verifyAxes(*this, getAxes(), input.getRank(), "operand 'input'")))
    return failure();
  for (int64_t axis : getAxes())
    if (input.getDimSize(axis) != 1)
      return emitOpError() << "dim " << axis << " of operand 'input' is "
                           << input.getDimSize(axis) << ", not 1";
  return verifyResultType(*this, getType(),
                          inferReduceType(input, getAxes(), false));
}

LogicalResult ExpandOp::verify() {
  RankedTensorType input = tensorType(getInput());
  if (failed(verifyResultElementType(*this, getInput())))
    return failure();
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(input.getShape(), getType().getShape());
  if (failed(shape) || ArrayRef(*shape) != getType().getShape())
    return emitOpError() << "operand 'input' (" << input
                         << ") does not broadcast to the result shape "
                         << shapeString(getType().getShape());
  return success();
}

static RankedTensorType transposeType(RankedTensorType input,
                                      ArrayRef<int64_t> perm) {
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(input.getDimSize(p));
  return RankedTensorType::get(shape, input.getElementType());
}

void TransposeOp::build(OpBuilder &builder, OperationState &state, Value input,
                        ArrayRef<int64_t> perm) {
  build(builder, state, transposeType(tensorType(input), perm), input,
        builder.getDenseI64ArrayAttr(perm));
}

LogicalResult TransposeOp::verify() {
  RankedTensorType input = tensorType(getInput());
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  if (static_cast<int64_t>(perm.size()) != input.getRank() ||
      llvm::any_of(llvm::enumerate(sorted), [](auto it) {
        return it.value() != static_cast<int64_t>(it.index());
      }))
    return emitOpError() << "perm " << shapeString(perm)
                         << " is not a permutation of the dims of operand "
                            "'input' (rank "
                         << input.getRank() << ")";
  return verifyResultType(*this, getType(), transposeType(input, perm));
}

/// Checks a strided slice of `input` (the full tensor) into `result`.
LogicalResult autopar::nn::verifySlice(Operation *op, RankedTensorType input,
                                       RankedTensorType result,
                                       ArrayRef<int64_t> offsets,
                                       ArrayRef<int64_t> strides,
                                       StringRef name) {
  if (input.getElementType() != result.getElementType())
    return op->emitOpError() << "element types of " << name << " ("
                             << input.getElementType() << ") and the slice ("
                             << result.getElementType() << ") differ";
  if (static_cast<int64_t>(offsets.size()) != input.getRank() ||
      static_cast<int64_t>(strides.size()) != input.getRank() ||
      result.getRank() != input.getRank())
    return op->emitOpError() << "offsets, strides and slice must have the rank "
                                "of "
                             << name << " (" << input.getRank() << ")";
  for (int64_t d = 0; d < input.getRank(); ++d) {
    int64_t count = result.getDimSize(d);
    if (strides[d] == 0)
      return op->emitOpError() << "stride of dim " << d << " is 0";
    if (count == 0)
      continue;
    int64_t dim = input.getDimSize(d);
    // Beyond one element, a stride of at least the dim size leaves it (and
    // checking this first keeps the product below from overflowing).
    if (count > 1 && (strides[d] >= dim || strides[d] <= -dim))
      return op->emitOpError() << "dim " << d << " takes " << count
                               << " elements with stride " << strides[d]
                               << ", outside " << name << " dim of size "
                               << dim;
    int64_t last = offsets[d] + (count - 1) * strides[d];
    if (offsets[d] < 0 || offsets[d] >= dim || last < 0 || last >= dim)
      return op->emitOpError() << "dim " << d << " reads indices " << offsets[d]
                               << " to " << last << ", outside " << name
                               << " dim of size " << dim;
  }
  return success();
}

LogicalResult SliceOp::verify() {
  if (failed(verifyResultElementType(*this, getInput())))
    return failure();
  return verifySlice(*this, tensorType(getInput()), getType(), getOffsets(),
                     getStrides(), "operand 'input'");
}

static FailureOr<RankedTensorType>
concatType(Operation *op, ValueRange inputs, int64_t axis, bool emit) {
  if (inputs.empty()) {
    if (emit)
      op->emitOpError() << "needs at least one operand";
    return failure();
  }
  RankedTensorType first = tensorType(inputs.front());
  if (emit && failed(verifyAxis(op, axis, first.getRank(), "operand 'inputs'")))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  for (auto [i, v] : llvm::enumerate(inputs.drop_front())) {
    RankedTensorType t = tensorType(v);
    bool compatible = t.getRank() == first.getRank() &&
                      t.getElementType() == first.getElementType();
    for (int64_t d = 0; compatible && d < t.getRank(); ++d)
      compatible = d == axis || t.getDimSize(d) == first.getDimSize(d);
    if (!compatible) {
      if (emit)
        op->emitOpError() << "operand #" << i + 1 << " (" << t
                          << ") does not concatenate with operand #0 ("
                          << first << ") along axis " << axis;
      return failure();
    }
    shape[axis] += t.getDimSize(axis);
  }
  return RankedTensorType::get(shape, first.getElementType());
}

void ConcatOp::build(OpBuilder &builder, OperationState &state,
                     ValueRange inputs, int64_t axis) {
  FailureOr<RankedTensorType> type =
      concatType(nullptr, inputs, axis, /*emit=*/false);
  assert(succeeded(type) && "operands do not concatenate");
  build(builder, state, *type, inputs, builder.getI64IntegerAttr(axis));
}

LogicalResult ConcatOp::verify() {
  FailureOr<RankedTensorType> type =
      concatType(*this, getInputs(), getAxis(), /*emit=*/true);
  if (failed(type))
    return failure();
  return verifyResultType(*this, getType(), *type);
}

LogicalResult SplitOp::verify() {
  RankedTensorType input = tensorType(getInput());
  int64_t axis = getAxis();
  if (getNumResults() == 0)
    return emitOpError() << "needs at least one result";
  if (failed(verifyAxis(*this, axis, input.getRank(), "operand 'input'")))
    return failure();
  int64_t total = 0;
  for (auto [i, r] : llvm::enumerate(getResults())) {
    RankedTensorType t = tensorType(r);
    bool compatible = t.getRank() == input.getRank() &&
                      t.getElementType() == input.getElementType();
    for (int64_t d = 0; compatible && d < t.getRank(); ++d)
      compatible = d == axis || t.getDimSize(d) == input.getDimSize(d);
    if (!compatible)
      return emitOpError() << "result #" << i << " (" << t
                           << ") is not a piece of operand 'input' (" << input
                           << ") along axis " << axis;
    total += t.getDimSize(axis);
  }
  if (total != input.getDimSize(axis))
    return emitOpError() << "results sum to " << total << " along axis "
                         << axis << ", operand 'input' has "
                         << input.getDimSize(axis);
  return success();
}
