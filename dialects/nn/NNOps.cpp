//===- NNOps.cpp - nn dialect, attributes, folds, nn.fused ----------------===//
//
// The nn dialect: its registration and constant materialization, the
// verifiers of the nn.* argument and result attributes, the shape helpers it
// exports (NNOps.h) and those its op verifiers share (NNOpsImpl.h), the folds
// and canonicalization patterns, nn.fused, and the op classes TableGen
// generates (NNOps.cpp.inc, included here only). The verifiers and builders
// of the forward ops are in NNForwardOps.cpp, the backward ops' in
// NNBackwardOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialects/nn/NNOps.h"
#include "dialects/nn/NNOpsImpl.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

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
      NNDialect::kParamAttr,     NNDialect::kInitFromAttr,
      NNDialect::kInputAttr,     NNDialect::kSavedAttr,
      NNDialect::kLoraAAttr,     NNDialect::kLoraBAttr,
      NNDialect::kQuantizedAttr, NNDialect::kQuantRoleAttr,
      NNDialect::kLoraSaveAttr};
  static constexpr StringLiteral argUnitAttrs[] = {
      NNDialect::kBufferAttr,     NNDialect::kFrozenAttr,
      NNDialect::kNoDecayAttr,    NNDialect::kTrilAttr,
      NNDialect::kTriuAttr,       NNDialect::kCausalBiasAttr,
      NNDialect::kLossScaleAttr,  NNDialect::kStageInputAttr,
      NNDialect::kOutputGradAttr, NNDialect::kLoraInOutAttr,
      NNDialect::kQuantAxis1Attr};
  bool unit = isResult ? name == NNDialect::kInputGradAttr
                       : llvm::is_contained(argUnitAttrs, name);
  bool logicalType = !isResult && name == NNDialect::kLogicalTypeAttr;
  bool frozenRows = !isResult && name == NNDialect::kFrozenRowsAttr;
  bool arange = !isResult && name == NNDialect::kArangeAttr;
  bool known = isResult ? (name == NNDialect::kOutputAttr ||
                           name == NNDialect::kGradAttr ||
                           name == NNDialect::kSavedAttr || unit)
                        : (llvm::is_contained(argStringAttrs, name) || unit ||
                           logicalType || frozenRows || arange);
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
  } else if (arange) {
    auto start = dyn_cast<IntegerAttr>(attr.getValue());
    if (!start || !start.getType().isInteger(64))
      return op->emitError()
             << "argument attribute '" << name << "' must be an i64 integer";
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
  if (arange) {
    auto element = dyn_cast<IntegerType>(tensor.getElementType());
    if (!element || element.getWidth() == 1 ||
        !attrs.contains(NNDialect::kBufferAttr) ||
        llvm::count_if(tensor.getShape(), [](int64_t d) { return d != 1; }) > 1)
      return op->emitError()
             << "argument #" << index << " with '" << name
             << "' must be an integer buffer with at most one dim over 1, got "
             << type;
  }
  if (!param && (name == NNDialect::kInitFromAttr || unit || logicalType ||
                 frozenRows || arange))
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

RankedTensorType autopar::nn::tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Checks that the op's result type equals `inferred`.
LogicalResult autopar::nn::verifyResultType(Operation *op, Type result,
                                            Type inferred) {
  if (result != inferred)
    return op->emitOpError() << "result type " << result
                             << " differs from the inferred type " << inferred;
  return success();
}

/// Checks that `axis` indexes a dimension of `name` (operand 'x' or the
/// result), of rank `rank`.
LogicalResult autopar::nn::verifyAxis(Operation *op, int64_t axis, int64_t rank,
                                      const Twine &name) {
  if (axis < 0 || axis >= rank)
    return op->emitOpError() << "axis " << axis << " is out of range for "
                             << name << " of rank " << rank;
  return success();
}

/// Checks that `axes` are sorted, unique and index a rank-`rank` tensor.
LogicalResult autopar::nn::verifyAxes(Operation *op, ArrayRef<int64_t> axes,
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
LogicalResult autopar::nn::verifyResultElementType(Operation *op, Value input) {
  Type in = tensorType(input).getElementType();
  Type out = tensorType(op->getResult(0)).getElementType();
  if (in != out)
    return op->emitOpError() << "result element type " << out
                             << " differs from operand 'input' element type "
                             << in;
  return success();
}

LogicalResult autopar::nn::verifySameElementType(Operation *op, Value a,
                                                 StringRef aName, Value b,
                                                 StringRef bName) {
  Type ea = tensorType(a).getElementType(), eb = tensorType(b).getElementType();
  if (ea != eb)
    return op->emitOpError() << "operand '" << bName << "' element type " << eb
                             << " differs from operand '" << aName
                             << "' element type " << ea;
  return success();
}

std::string autopar::nn::shapeString(ArrayRef<int64_t> shape) {
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

BlockArgument autopar::nn::paramArgument(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || !arg.getOwner()->isEntryBlock())
    return nullptr;
  auto func = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
  if (!func || !func.getArgAttr(arg.getArgNumber(), NNDialect::kParamAttr))
    return nullptr;
  return arg;
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
