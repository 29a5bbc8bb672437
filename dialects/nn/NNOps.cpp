//===- NNOps.cpp - nn dialect ops, verifiers and shape inference ----------===//

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace autopar::nn;

#include "dialects/nn/NNDialect.cpp.inc"
#include "dialects/nn/NNEnums.cpp.inc"

void NNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/nn/NNOps.cpp.inc"
      >();
}

Operation *NNDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}

//===----------------------------------------------------------------------===//
// Argument and result attributes
//===----------------------------------------------------------------------===//

/// Verifies an nn.* attribute on argument or result `index` of function-like
/// `op`: its kind, its value and the type of the value it is attached to.
static LogicalResult verifyValueAttr(Operation *op, unsigned index,
                                     NamedAttribute attr, bool isResult) {
  StringRef name = attr.getName().getValue();
  StringRef what = isResult ? "result" : "argument";
  static constexpr StringLiteral argStringAttrs[] = {
      NNDialect::kParamAttr, NNDialect::kInitFromAttr, NNDialect::kInputAttr,
      NNDialect::kSavedAttr};
  static constexpr StringLiteral argUnitAttrs[] = {
      NNDialect::kBufferAttr,    NNDialect::kFrozenAttr,
      NNDialect::kNoDecayAttr,   NNDialect::kTrilAttr,
      NNDialect::kTriuAttr,      NNDialect::kCausalBiasAttr,
      NNDialect::kLossScaleAttr, NNDialect::kStageInputAttr,
      NNDialect::kOutputGradAttr};
  bool unit = isResult ? name == NNDialect::kInputGradAttr
                       : llvm::is_contained(argUnitAttrs, name);
  bool logicalType = !isResult && name == NNDialect::kLogicalTypeAttr;
  bool frozenRows = !isResult && name == NNDialect::kFrozenRowsAttr;
  bool known = isResult ? (name == NNDialect::kOutputAttr ||
                           name == NNDialect::kGradAttr ||
                           name == NNDialect::kSavedAttr || unit)
                        : (llvm::is_contained(argStringAttrs, name) || unit ||
                           logicalType || frozenRows);
  if (!known)
    return op->emitError() << "unknown " << what << " attribute '" << name
                           << "'";
  if (logicalType) {
    auto typeAttr = dyn_cast<TypeAttr>(attr.getValue());
    auto logical = typeAttr ? dyn_cast<RankedTensorType>(typeAttr.getValue())
                            : RankedTensorType();
    if (!logical || !logical.hasStaticShape())
      return op->emitError() << "argument attribute '" << name
                             << "' must be a statically shaped tensor type";
  } else if (frozenRows) {
    auto rows = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    ArrayRef<int64_t> r = rows ? rows.asArrayRef() : ArrayRef<int64_t>();
    bool ordered = rows && !r.empty() && r.size() % 2 == 0 && r[0] >= 0;
    for (size_t k = 1; ordered && k < r.size(); ++k)
      ordered = r[k] > r[k - 1];
    if (!ordered)
      return op->emitError()
             << "argument attribute '" << name
             << "' must be a non-empty array of sorted, disjoint [begin, end) "
                "row ranges";
  } else if (unit) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError()
             << what << " attribute '" << name << "' must be a unit attribute";
  } else if (!isa<StringAttr>(attr.getValue())) {
    return op->emitError() << what << " attribute '" << name
                           << "' must be a string";
  }
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func)
    return success();
  Type type = isResult ? func.getResultTypes()[index]
                       : func.getArgumentTypes()[index];
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return op->emitError() << what << " #" << index << " with '" << name
                           << "' must be a statically shaped tensor, got "
                           << type;
  if (isResult)
    return success();
  DictionaryAttr attrs = func.getArgAttrDict(index);
  bool param = attrs.contains(NNDialect::kParamAttr);
  if (name == NNDialect::kLossScaleAttr) {
    if (tensor.getRank() != 0 || !isa<FloatType>(tensor.getElementType()))
      return op->emitError() << "argument #" << index << " with '" << name
                             << "' must be a float scalar, got " << type;
    if (param || attrs.contains(NNDialect::kInputAttr))
      return op->emitError() << "argument #" << index << " with '" << name
                             << "' cannot be a parameter or a graph input";
    return success();
  }
  if (name == NNDialect::kStageInputAttr ||
      name == NNDialect::kOutputGradAttr) {
    if (!isa<FloatType>(tensor.getElementType()))
      return op->emitError() << "argument #" << index << " with '" << name
                             << "' must be a float tensor, got " << type;
    if (param || attrs.contains(NNDialect::kInputAttr))
      return op->emitError() << "argument #" << index << " with '" << name
                             << "' cannot be a parameter or a graph input";
    return success();
  }
  if (frozenRows) {
    // Rows of the logical tensor (the model's), whatever block or flat
    // shard of it the argument is.
    auto logical = attrs.getAs<TypeAttr>(NNDialect::kLogicalTypeAttr);
    auto whole =
        logical ? dyn_cast<RankedTensorType>(logical.getValue()) : tensor;
    if (!whole)
      whole = tensor;
    if (whole.getRank() == 0 ||
        cast<DenseI64ArrayAttr>(attr.getValue()).asArrayRef().back() >
            whole.getDimSize(0))
      return op->emitError() << "argument #" << index << " with '" << name
                             << "' names rows outside dim 0 of " << whole;
  }
  if (!param &&
      (name == NNDialect::kInitFromAttr || unit || logicalType || frozenRows))
    return op->emitError() << "argument #" << index << " has '" << name
                           << "' but no 'nn.param'";
  if (param && name == NNDialect::kInputAttr)
    return op->emitError() << "argument #" << index
                           << " is both a parameter and a graph input";
  return success();
}

LogicalResult NNDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                  unsigned argIndex,
                                                  NamedAttribute attr) {
  return verifyValueAttr(op, argIndex, attr, /*isResult=*/false);
}

LogicalResult NNDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                     unsigned resultIndex,
                                                     NamedAttribute attr) {
  return verifyValueAttr(op, resultIndex, attr, /*isResult=*/true);
}

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>>
autopar::nn::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    result[i] = da == 1 ? db : da;
  }
  return result;
}

bool autopar::nn::isAdditiveCausalMask(ArrayRef<int64_t> shape,
                                       function_ref<double(int64_t)> at) {
  const int64_t rank = shape.size();
  if (rank < 2 || shape[rank - 1] != shape[rank - 2] || shape[rank - 1] < 2)
    return false;
  const int64_t n = shape[rank - 1];
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t row = (k / n) % n, col = k % n;
    const double x = at(k);
    if (col <= row ? x != 0.0 : !(x <= -1e9))
      return false;
  }
  return true;
}

Type autopar::nn::inferBroadcastBinaryType(Type lhs, Type rhs) {
  auto l = cast<RankedTensorType>(lhs);
  auto r = cast<RankedTensorType>(rhs);
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(l.getShape(), r.getShape());
  assert(succeeded(shape) && "operands do not broadcast");
  return RankedTensorType::get(*shape, l.getElementType());
}

Type autopar::nn::inferReduceType(Type input, ArrayRef<int64_t> axes,
                                  bool keepdims) {
  auto type = cast<RankedTensorType>(input);
  SmallVector<int64_t> shape;
  for (auto [i, dim] : llvm::enumerate(type.getShape())) {
    if (!llvm::is_contained(axes, static_cast<int64_t>(i)))
      shape.push_back(dim);
    else if (keepdims)
      shape.push_back(1);
  }
  return RankedTensorType::get(shape, type.getElementType());
}

FailureOr<SmallVector<int64_t>>
autopar::nn::matmulShape(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs) {
  if (lhs.empty() || rhs.empty())
    return failure();
  SmallVector<int64_t> l(lhs), r(rhs);
  if (l.size() == 1)
    l.insert(l.begin(), 1);
  if (r.size() == 1)
    r.push_back(1);
  if (l.back() != r[r.size() - 2])
    return failure();
  FailureOr<SmallVector<int64_t>> batch = broadcastShapes(
      ArrayRef(l).drop_back(2), ArrayRef(r).drop_back(2));
  if (failed(batch))
    return failure();
  SmallVector<int64_t> result = *batch;
  if (lhs.size() > 1)
    result.push_back(l[l.size() - 2]);
  if (rhs.size() > 1)
    result.push_back(r.back());
  return result;
}

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Checks that the op's result type equals `inferred`.
static LogicalResult verifyResultType(Operation *op, Type result,
                                      Type inferred) {
  if (result != inferred)
    return op->emitOpError() << "result type " << result
                             << " differs from the inferred type " << inferred;
  return success();
}

/// Checks that `axis` indexes a dimension of `name` (operand 'x' or the
/// result), of rank `rank`.
static LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank,
                                const Twine &name) {
  if (axis < 0 || axis >= rank)
    return op->emitOpError() << "axis " << axis << " is out of range for "
                             << name << " of rank " << rank;
  return success();
}

/// Checks that `axes` are sorted, unique and index a rank-`rank` tensor.
static LogicalResult verifyAxes(Operation *op, ArrayRef<int64_t> axes,
                                int64_t rank, const Twine &name) {
  for (auto [i, axis] : llvm::enumerate(axes)) {
    if (failed(verifyAxis(op, axis, rank, name)))
      return failure();
    if (i > 0 && axes[i - 1] >= axis)
      return op->emitOpError() << "axes must be sorted and unique";
  }
  return success();
}

/// Checks that the result has operand 'input''s element type.
static LogicalResult verifyResultElementType(Operation *op, Value input) {
  Type in = tensorType(input).getElementType();
  Type out = tensorType(op->getResult(0)).getElementType();
  if (in != out)
    return op->emitOpError() << "result element type " << out
                             << " differs from operand 'input' element type "
                             << in;
  return success();
}

static LogicalResult verifySameElementType(Operation *op, Value a,
                                           StringRef aName, Value b,
                                           StringRef bName) {
  Type ea = tensorType(a).getElementType(), eb = tensorType(b).getElementType();
  if (ea != eb)
    return op->emitOpError() << "operand '" << bName << "' element type " << eb
                             << " differs from operand '" << aName
                             << "' element type " << ea;
  return success();
}

static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(shape, os);
  os << "]";
  return s;
}

//===----------------------------------------------------------------------===//
// ConstantOp, IdentityOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult IdentityOp::fold(FoldAdaptor) { return getInput(); }

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> perm = getPerm();
  bool identity = true;
  for (auto [i, p] : llvm::enumerate(perm))
    identity &= p == static_cast<int64_t>(i);
  if (identity)
    return getInput();
  // transpose(transpose(x, inner), perm) = transpose(x, inner o perm).
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    SmallVector<int64_t> composed;
    for (int64_t p : perm)
      composed.push_back(inner.getPerm()[p]);
    getInputMutable().assign(inner.getInput());
    setPerm(composed);
    return getResult();
  }
  return {};
}

namespace {
/// transpose(op(a) op(b)) = op(b)^T op(a)^T: a rank-2 product whose only use
/// is a transpose computes the transposed result directly, with its
/// operands swapped and their transposes flipped (no copy; autodiff's
/// weight gradients of x W^T take this form).
struct TransposeOfProduct : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getPerm() != ArrayRef<int64_t>{1, 0} ||
        !op.getInput().hasOneUse())
      return failure();
    Operation *def = op.getInput().getDefiningOp();
    Value a, b;
    bool transA = false, transB = false;
    FloatAttr alpha = rewriter.getF64FloatAttr(1.0);
    if (auto gemm = dyn_cast_or_null<GemmOp>(def)) {
      if (gemm.getC())
        return failure();
      a = gemm.getA();
      b = gemm.getB();
      transA = gemm.getTransA();
      transB = gemm.getTransB();
      alpha = gemm.getAlphaAttr();
    } else if (auto matmul = dyn_cast_or_null<MatMulOp>(def)) {
      a = matmul.getLhs();
      b = matmul.getRhs();
      if (tensorType(a).getRank() != 2 || tensorType(b).getRank() != 2)
        return failure();
    } else {
      return failure();
    }
    rewriter.replaceOpWithNewOp<GemmOp>(
        op, op.getType(), b, a, Value(), alpha, rewriter.getF64FloatAttr(1.0),
        rewriter.getBoolAttr(!transB), rewriter.getBoolAttr(!transA));
    rewriter.eraseOp(def);
    return success();
  }
};
} // namespace

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<TransposeOfProduct>(context);
}

namespace {
/// The repeat of each piece of one split, concatenated in order, is the
/// repeat of the whole: concat_i(reshape(expand(unsqueeze(split(x)#i, a +
/// 1)))) along a, each piece one slice of x along a, is
/// reshape(expand(unsqueeze(x, a + 1))). Grouped-query attention's
/// repeat_kv as exported piece by piece: the kv heads become one dim that
/// sharding can split.
struct RepeatOfSplitPieces : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &rewriter) const override {
    int64_t axis = op.getAxis();
    SplitOp split;
    RankedTensorType expanded;
    for (auto [i, in] : llvm::enumerate(op.getInputs())) {
      auto reshape = in.getDefiningOp<ReshapeOp>();
      auto expand =
          reshape ? reshape.getInput().getDefiningOp<ExpandOp>() : ExpandOp();
      auto unsqueeze = expand ? expand.getInput().getDefiningOp<UnsqueezeOp>()
                              : UnsqueezeOp();
      if (!unsqueeze || unsqueeze.getAxes().size() != 1 ||
          unsqueeze.getAxes()[0] != axis + 1)
        return failure();
      auto piece = dyn_cast<OpResult>(unsqueeze.getInput());
      auto from = piece ? dyn_cast<SplitOp>(piece.getOwner()) : SplitOp();
      if (!from || static_cast<int64_t>(from.getAxis()) != axis ||
          piece.getResultNumber() != i || (split && from != split) ||
          tensorType(piece).getDimSize(axis) != 1)
        return failure();
      if (expanded && expand.getType() != expanded)
        return failure();
      // The reshape merges the piece's dim with its repeats.
      ArrayRef<int64_t> e = expand.getType().getShape();
      SmallVector<int64_t> merged(e.take_front(axis));
      merged.push_back(e[axis] * e[axis + 1]);
      merged.append(e.begin() + axis + 2, e.end());
      if (reshape.getType().getShape() != ArrayRef<int64_t>(merged))
        return failure();
      split = from;
      expanded = expand.getType();
    }
    if (!split || split.getNumResults() != op.getInputs().size())
      return failure();
    Value x = split.getInput();
    RankedTensorType xt = tensorType(x);
    SmallVector<int64_t> shape(xt.getShape());
    shape.insert(shape.begin() + axis + 1, 1);
    Location loc = op.getLoc();
    Value u = UnsqueezeOp::create(
        rewriter, loc, RankedTensorType::get(shape, xt.getElementType()), x,
        rewriter.getDenseI64ArrayAttr({axis + 1}));
    shape[axis + 1] = expanded.getDimSize(axis + 1);
    Value e = ExpandOp::create(
        rewriter, loc, RankedTensorType::get(shape, xt.getElementType()), u);
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), e);
    return success();
  }
};
} // namespace

void ConcatOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *context) {
  patterns.add<RepeatOfSplitPieces>(context);
}

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

/// Checks the scores and labels of a cross-entropy op and returns the type
/// of its loss: a scalar, or the labels' shape for reduction `none`.
static FailureOr<RankedTensorType> lossType(Operation *op, Value scoresValue,
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
static bool isLossType(Type type, RankedTensorType loss) {
  if (type == loss)
    return true;
  Type scores = loss.getElementType();
  return scores.getIntOrFloatBitWidth() == 16 &&
         type == loss.clone(Float32Type::get(type.getContext()));
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  FailureOr<RankedTensorType> loss =
      lossType(*this, getScores(), getLabels(), getReduction());
  if (failed(loss))
    return failure();
  if (isLossType(getType(), *loss))
    return success();
  return verifyResultType(*this, getType(), *loss);
}

/// The per-element statistics of a vocab-parallel cross-entropy: f32 of
/// the labels' shape. Checks `scores` and `labels` on the way.
static FailureOr<RankedTensorType> shardStatsType(Operation *op, Value scores,
                                                  Value labels) {
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

static RankedTensorType gatherType(RankedTensorType data,
                                   RankedTensorType indices, int64_t axis) {
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
static LogicalResult verifySlice(Operation *op, RankedTensorType input,
                                 RankedTensorType result,
                                 ArrayRef<int64_t> offsets,
                                 ArrayRef<int64_t> strides, StringRef name) {
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
                                  getMask(), getScale().convertToDouble())) ||
      failed(verifyResultType(*this, getOutput().getType(),
                              getQuery().getType())) ||
      failed(verifyResultType(*this, getLse().getType(),
                              attentionLseType(getQuery()))))
    return failure();
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionTypes(*this, getQuery(), getKey(), getValue(),
                                  getMask(), getScale().convertToDouble())))
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
  if (failed(loss))
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

//===----------------------------------------------------------------------===//
// FusedOp
//===----------------------------------------------------------------------===//

/// Ops that may appear in the body of an nn.fused op.
static bool isFusableElementwise(Operation *op) {
  return isa<NegOp, SqrtOp, ErfOp, TanhOp, ExpOp, LogOp, ReciprocalOp, ReluOp,
             SigmoidOp, IdentityOp, GeluOp, GeluGradOp, AddOp, SubOp, MulOp,
             DivOp, PowOp, CompareOp, WhereOp, CastOp, ExpandOp, ConstantOp>(
      op);
}

Type autopar::nn::attentionLseElementType(Type queryElement) {
  if (queryElement.getIntOrFloatBitWidth() < 32)
    return Float32Type::get(queryElement.getContext());
  return queryElement;
}

bool autopar::nn::isElementwise(Operation *op) {
  return isFusableElementwise(op);
}

std::optional<double> autopar::nn::scalarConstant(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto elements = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!elements || !elements.isSplat() ||
      !isa<FloatType>(elements.getElementType()) ||
      llvm::any_of(tensorType(v).getShape(), [](int64_t d) { return d != 1; }))
    return std::nullopt;
  return elements.getSplatValue<APFloat>().convertToDouble();
}

LogicalResult FusedOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getNumOperands())
    return emitOpError() << "body has " << body.getNumArguments()
                         << " arguments for " << getNumOperands()
                         << " operands";
  for (auto [i, arg] : llvm::enumerate(body.getArguments()))
    if (arg.getType() != getOperand(i).getType())
      return emitOpError() << "body argument #" << i << " type "
                           << arg.getType() << " differs from operand #" << i
                           << " type " << getOperand(i).getType();
  if (getNumResults() == 0)
    return emitOpError() << "needs at least one result";
  ArrayRef<int64_t> shape = tensorType(getResult(0)).getShape();
  for (Type t : getResultTypes())
    if (cast<RankedTensorType>(t).getShape() != shape)
      return emitOpError() << "results must share one shape, got "
                           << getResultTypes();
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().getTypes()
                         << " for results " << getResultTypes();
  for (Operation &op : body.without_terminator()) {
    if (!isFusableElementwise(&op))
      return op.emitOpError() << "is not elementwise and cannot be fused";
    if (isa<ConstantOp>(op)) // broadcast like an operand
      continue;
    for (Value r : op.getResults())
      if (tensorType(r).getShape() != shape)
        return op.emitOpError() << "result shape "
                                << shapeString(tensorType(r).getShape())
                                << " differs from the fused shape "
                                << shapeString(shape);
  }
  return success();
}

ParseResult FusedOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::UnresolvedOperand> operands;
  FunctionType type;
  if (parser.parseOperandList(operands, OpAsmParser::Delimiter::Paren) ||
      parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(type) ||
      parser.resolveOperands(operands, type.getInputs(),
                             parser.getCurrentLocation(), result.operands))
    return failure();
  result.addTypes(type.getResults());
  SmallVector<OpAsmParser::Argument> args;
  Region *body = result.addRegion();
  if (parser.parseRegion(*body, args, /*enableNameShadowing=*/false))
    return failure();
  if (body->empty())
    return parser.emitError(parser.getCurrentLocation(), "empty body");
  return success();
}

void FusedOp::print(OpAsmPrinter &p) {
  p << " (" << getInputs() << ")";
  p.printOptionalAttrDict((*this)->getAttrs());
  p << " : ";
  p.printFunctionalType(getInputs().getTypes(), getResultTypes());
  p << " ";
  p.printRegion(getBody(), /*printEntryBlockArgs=*/true);
}

#define GET_OP_CLASSES
#include "dialects/nn/NNOps.cpp.inc"
