//===- Autodiff.cpp - reverse-mode differentiation of the loss ------------===//
//
// Clones the model function into the training step and appends, in reverse
// program order, the vector-Jacobian product of every op on a path from a
// trainable parameter to the loss. Gradient rules follow PyTorch's
// derivatives.yaml and NOTES-autodiff.md; broadcast operands get their
// gradient summed back to their shape.
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <numeric>

#define DEBUG_TYPE "autopar-autodiff"

namespace autopar {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/autodiff/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;
using namespace autopar::nn;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

static bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

bool autopar::isTrainableParam(func::FuncOp func, unsigned argIndex) {
  DictionaryAttr attrs = func.getArgAttrDict(argIndex);
  if (!attrs || !attrs.contains(NNDialect::kParamAttr) ||
      attrs.contains(NNDialect::kBufferAttr) ||
      attrs.contains(NNDialect::kFrozenAttr))
    return false;
  return isFloatTensor(func.getArgument(argIndex));
}

namespace {

/// Builds the reverse pass of one function.
class ReverseBuilder {
public:
  ReverseBuilder(OpBuilder &builder) : b(builder) {}

  /// Adds `grad` to the gradient of `value`.
  void accumulate(Value value, Value grad) {
    assert(grad.getType() == value.getType() && "gradient type mismatch");
    auto [it, inserted] = grads.try_emplace(value, grad);
    if (!inserted)
      it->second = AddOp::create(b, grad.getLoc(), it->second, grad);
  }

  Value gradOf(Value v) const { return grads.lookup(v); }

  /// Applies the gradient rule of `op`, whose results' gradients are known
  /// (null where a result has none), to the operands in `active`.
  LogicalResult backprop(Operation *op, const DenseSet<Value> &active);

  /// A zero tensor of `type`.
  Value zeros(Location loc, RankedTensorType type) {
    return ConstantOp::create(
        b, loc, type,
        DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
  }

private:
  Value scalar(Location loc, Type elementType, double value) {
    auto type = RankedTensorType::get({}, elementType);
    return ConstantOp::create(
        b, loc, type,
        DenseElementsAttr::get(type, b.getFloatAttr(elementType, value)));
  }
  Value scalarLike(Value v, double value) {
    return scalar(v.getLoc(), tensorType(v).getElementType(), value);
  }
  Value reshape(Value v, RankedTensorType type) {
    if (v.getType() == type)
      return v;
    return ReshapeOp::create(b, v.getLoc(), type, v);
  }
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    return reshape(v, tensorType(v).clone(shape));
  }
  Value expand(Value v, RankedTensorType type) {
    if (v.getType() == type)
      return v;
    return ExpandOp::create(b, v.getLoc(), type, v);
  }
  /// The last two dims of `v` swapped.
  Value transposeLast2(Value v) {
    int64_t rank = tensorType(v).getRank();
    SmallVector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[rank - 1], perm[rank - 2]);
    return TransposeOp::create(b, v.getLoc(), v, perm);
  }

  /// Sums `g` over the dims `target` was broadcast along (numpy rules).
  Value sumTo(Value g, RankedTensorType target);

  LogicalResult matmul(MatMulOp op, Value g, const DenseSet<Value> &active);
  LogicalResult gemm(GemmOp op, Value g, const DenseSet<Value> &active);

  OpBuilder &b;
  DenseMap<Value, Value> grads;
};

} // namespace

Value ReverseBuilder::sumTo(Value g, RankedTensorType target) {
  RankedTensorType type = tensorType(g);
  if (type == target)
    return g;
  int64_t extra = type.getRank() - target.getRank();
  assert(extra >= 0 && "gradient has a lower rank than its operand");
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d < extra || (target.getDimSize(d - extra) == 1 &&
                      type.getDimSize(d) != 1))
      axes.push_back(d);
  Value sum = g;
  if (!axes.empty())
    sum = ReduceSumOp::create(b, g.getLoc(), g, axes, /*keepdims=*/true);
  return reshape(sum, target);
}

LogicalResult ReverseBuilder::matmul(MatMulOp op, Value g,
                                     const DenseSet<Value> &active) {
  Location loc = op.getLoc();
  Value lhs = op.getLhs(), rhs = op.getRhs();
  RankedTensorType lt = tensorType(lhs), rt = tensorType(rhs);
  // Promote rank-1 operands as numpy does: [K] lhs -> [1, K], [K] rhs ->
  // [K, 1]; the gradient gets the dropped unit dims back.
  Value a = lt.getRank() == 1 ? reshape(lhs, {1, lt.getDimSize(0)}) : lhs;
  Value c = rt.getRank() == 1 ? reshape(rhs, {rt.getDimSize(0), 1}) : rhs;
  FailureOr<SmallVector<int64_t>> full =
      matmulShape(tensorType(a).getShape(), tensorType(c).getShape());
  assert(succeeded(full) && "verified matmul");
  Value gp = reshape(g, *full);
  RankedTensorType at = tensorType(a), ct = tensorType(c);
  if (active.contains(lhs)) {
    Value prod = MatMulOp::create(b, loc, gp, transposeLast2(c));
    Value da = sumTo(prod, at);
    accumulate(lhs, reshape(da, lt));
  }
  if (active.contains(rhs)) {
    Value dc;
    if (ct.getRank() == 2 && at.getRank() > 2) {
      // [..., M, K] x [K, N] (a Linear layer): dC = A2^T G2 with the batch
      // dims folded into the rows, one GEMM instead of a batch of them.
      int64_t k = at.getShape().back();
      int64_t n = ct.getDimSize(1);
      int64_t rows = at.getNumElements() / k;
      Value a2 = reshape(a, {rows, k});
      Value g2 = reshape(gp, {rows, n});
      dc = GemmOp::create(b, loc, ct, a2, g2, /*c=*/Value(),
                          b.getF64FloatAttr(1.0), b.getF64FloatAttr(1.0),
                          b.getBoolAttr(true), b.getBoolAttr(false));
    } else {
      Value prod = MatMulOp::create(b, loc, transposeLast2(a), gp);
      dc = sumTo(prod, ct);
    }
    accumulate(rhs, reshape(dc, rt));
  }
  return success();
}

LogicalResult ReverseBuilder::gemm(GemmOp op, Value g,
                                   const DenseSet<Value> &active) {
  Location loc = op.getLoc();
  bool ta = op.getTransA(), tb = op.getTransB();
  FloatAttr alpha = b.getF64FloatAttr(op.getAlpha().convertToDouble());
  FloatAttr one = b.getF64FloatAttr(1.0);
  auto make = [&](RankedTensorType type, Value x, Value y, bool tx, bool ty) {
    return GemmOp::create(b, loc, type, x, y, Value(), alpha, one,
                          b.getBoolAttr(tx), b.getBoolAttr(ty));
  };
  Value a = op.getA(), bv = op.getB();
  if (active.contains(a)) {
    // Y = alpha op(A) op(B): d op(A) = alpha G op(B)^T.
    Value da = ta ? make(tensorType(a), bv, g, tb, true)
                  : make(tensorType(a), g, bv, false, !tb);
    accumulate(a, da);
  }
  if (active.contains(bv)) {
    Value db = tb ? make(tensorType(bv), g, a, true, ta)
                  : make(tensorType(bv), a, g, !ta, false);
    accumulate(bv, db);
  }
  if (Value c = op.getC(); c && active.contains(c)) {
    Value gc = g;
    double beta = op.getBeta().convertToDouble();
    if (beta != 1.0)
      gc = MulOp::create(b, loc, g, scalarLike(g, beta));
    accumulate(c, sumTo(gc, tensorType(c)));
  }
  return success();
}

LogicalResult ReverseBuilder::backprop(Operation *op,
                                       const DenseSet<Value> &active) {
  Location loc = op->getLoc();
  auto isActive = [&](Value v) { return active.contains(v); };
  Value g = op->getNumResults() == 1 ? gradOf(op->getResult(0)) : Value();
  auto unary = [&](Value dx) {
    accumulate(op->getOperand(0), dx);
    return success();
  };
  auto binary = [&](Value lhs, Value rhs, function_ref<Value()> dl,
                    function_ref<Value()> dr) {
    if (isActive(lhs))
      accumulate(lhs, sumTo(dl(), tensorType(lhs)));
    if (isActive(rhs))
      accumulate(rhs, sumTo(dr(), tensorType(rhs)));
    return success();
  };
  auto mul = [&](Value x, Value y) -> Value {
    return MulOp::create(b, loc, x, y);
  };
  auto div = [&](Value x, Value y) -> Value {
    return DivOp::create(b, loc, x, y);
  };
  auto sub = [&](Value x, Value y) -> Value {
    return SubOp::create(b, loc, x, y);
  };
  auto neg = [&](Value x) -> Value { return NegOp::create(b, loc, x); };

  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](NegOp) { return unary(neg(g)); })
      .Case([&](IdentityOp) { return unary(g); })
      .Case([&](SqrtOp o) {
        // d sqrt(x) = g / (2 y).
        return unary(div(mul(g, scalarLike(g, 0.5)), o.getResult()));
      })
      .Case([&](ErfOp o) {
        // erf'(x) = 2 / sqrt(pi) exp(-x^2).
        Value x = o.getInput();
        Value e = ExpOp::create(b, loc, neg(mul(x, x)));
        return unary(mul(g, mul(e, scalarLike(g, 2.0 / std::sqrt(M_PI)))));
      })
      .Case([&](TanhOp o) {
        Value y = o.getResult();
        return unary(mul(g, sub(scalarLike(y, 1.0), mul(y, y))));
      })
      .Case([&](ExpOp o) { return unary(mul(g, o.getResult())); })
      .Case([&](LogOp o) { return unary(div(g, o.getInput())); })
      .Case([&](ReciprocalOp o) {
        Value y = o.getResult();
        return unary(neg(mul(g, mul(y, y))));
      })
      .Case([&](ReluOp o) {
        Value x = o.getInput();
        Value positive =
            CompareOp::create(b, loc, ComparePredicate::gt, x, scalarLike(x, 0));
        return unary(WhereOp::create(b, loc, positive, g, scalarLike(g, 0)));
      })
      .Case([&](SigmoidOp o) {
        Value y = o.getResult();
        return unary(mul(g, mul(y, sub(scalarLike(y, 1.0), y))));
      })
      .Case([&](DropoutOp o) {
        // The same mask (drawn again) scales the gradient.
        return unary(DropoutOp::create(b, loc, g.getType(), g, o.getOffsets(),
                                       o.getRatioAttr(), o.getSiteAttr(),
                                       o.getLogicalShapeAttr()));
      })
      .Case([&](GeluOp o) {
        return unary(GeluGradOp::create(b, loc, o.getType(), o.getInput(), g,
                                        o.getApproximateAttr()));
      })
      .Case([&](AddOp o) {
        return binary(o.getLhs(), o.getRhs(), [&] { return g; },
                      [&] { return g; });
      })
      .Case([&](SubOp o) {
        return binary(o.getLhs(), o.getRhs(), [&] { return g; },
                      [&] { return neg(g); });
      })
      .Case([&](MulOp o) {
        return binary(
            o.getLhs(), o.getRhs(), [&] { return mul(g, o.getRhs()); },
            [&] { return mul(g, o.getLhs()); });
      })
      .Case([&](DivOp o) {
        // d(a/b)/db = -y / b.
        return binary(
            o.getLhs(), o.getRhs(), [&] { return div(g, o.getRhs()); },
            [&] { return neg(div(mul(g, o.getResult()), o.getRhs())); });
      })
      .Case([&](PowOp o) {
        Value a = o.getLhs(), e = o.getRhs();
        return binary(
            a, e,
            [&] {
              Value em1 = sub(e, scalarLike(e, 1.0));
              return mul(g, mul(e, PowOp::create(b, loc, a, em1)));
            },
            [&] {
              return mul(g, mul(o.getResult(), LogOp::create(b, loc, a)));
            });
      })
      .Case([&](WhereOp o) {
        Value zero = scalarLike(g, 0.0);
        Value c = o.getCondition();
        return binary(
            o.getLhs(), o.getRhs(),
            [&] { return WhereOp::create(b, loc, c, g, zero); },
            [&] { return WhereOp::create(b, loc, c, zero, g); });
      })
      .Case([&](CastOp o) {
        return unary(CastOp::create(b, loc, o.getInput().getType(), g));
      })
      .Case([&](ReduceSumOp o) {
        RankedTensorType in = tensorType(o.getInput());
        Value kept = reshape(
            g, cast<RankedTensorType>(inferReduceType(in, o.getAxes(), true)));
        return unary(expand(kept, in));
      })
      .Case([&](ReduceMeanOp o) {
        RankedTensorType in = tensorType(o.getInput());
        int64_t count = 1;
        for (int64_t axis : o.getAxes())
          count *= in.getDimSize(axis);
        Value kept = reshape(
            g, cast<RankedTensorType>(inferReduceType(in, o.getAxes(), true)));
        Value scaled = mul(kept, scalarLike(g, 1.0 / double(count)));
        return unary(expand(scaled, in));
      })
      .Case([&](ReduceMaxOp o) {
        // The gradient is split evenly between the maxima (torch.amax).
        Value x = o.getInput();
        RankedTensorType in = tensorType(x);
        auto keptType =
            cast<RankedTensorType>(inferReduceType(in, o.getAxes(), true));
        Value max = reshape(o.getResult(), keptType);
        Value mask = CompareOp::create(b, loc, ComparePredicate::eq, x, max);
        Value ones = CastOp::create(b, loc, in, mask);
        Value count = ReduceSumOp::create(b, loc, ones, o.getAxes(), true);
        Value share = div(reshape(g, keptType), count);
        return unary(WhereOp::create(b, loc, mask, share, scalarLike(g, 0.0)));
      })
      .Case([&](LayerNormOp o) {
        auto grad = LayerNormGradOp::create(
            b, loc, o.getInput(), o.getScale(), g, o.getAxis(),
            o.getEpsilon().convertToDouble());
        if (isActive(o.getInput()))
          accumulate(o.getInput(), grad.getInputGrad());
        if (isActive(o.getScale()))
          accumulate(o.getScale(), grad.getScaleGrad());
        if (o.getBias() && isActive(o.getBias()))
          accumulate(o.getBias(), grad.getBiasGrad());
        return success();
      })
      .Case([&](AttentionOp o) -> LogicalResult {
        // Only the output is differentiable (lse is for the backward).
        Value go = gradOf(o.getOutput());
        if (!go)
          return success();
        auto grad = AttentionGradOp::create(
            b, loc, o.getQuery().getType(), o.getKey().getType(),
            o.getValue().getType(), o.getQuery(), o.getKey(), o.getValue(),
            o.getMask(), o.getPositions(), o.getOutput(), o.getLse(), go,
            o.getScaleAttr(),
            o.getCausalAttr());
        if (isActive(o.getQuery()))
          accumulate(o.getQuery(), grad.getQueryGrad());
        if (isActive(o.getKey()))
          accumulate(o.getKey(), grad.getKeyGrad());
        if (isActive(o.getValue()))
          accumulate(o.getValue(), grad.getValueGrad());
        return success();
      })
      .Case([&](SoftmaxOp o) {
        return unary(SoftmaxGradOp::create(b, loc, o.getType(), o.getResult(),
                                           g, o.getAxisAttr()));
      })
      .Case([&](SoftmaxCrossEntropyOp o) {
        return unary(SoftmaxCrossEntropyGradOp::create(
            b, loc, o.getScores().getType(), o.getScores(), o.getLabels(), g,
            o.getReductionAttr(), o.getIgnoreIndexAttr(), o.getClassesAttr()));
      })
      .Case([&](MatMulOp o) { return matmul(o, g, active); })
      .Case([&](GemmOp o) { return gemm(o, g, active); })
      .Case([&](GatherOp o) {
        // nn.Embedding(padding_idx=p): lookups of row p add nothing.
        if (auto pad =
                o->getAttrOfType<IntegerAttr>(NNDialect::kPaddingIdxAttr)) {
          Value ids = o.getIndices();
          auto idsType = tensorType(ids);
          auto rowType = RankedTensorType::get({}, idsType.getElementType());
          Value row = ConstantOp::create(
              b, loc, rowType,
              DenseElementsAttr::get(
                  rowType,
                  b.getIntegerAttr(idsType.getElementType(), pad.getInt())));
          Value keep =
              CompareOp::create(b, loc, ComparePredicate::ne, ids, row);
          SmallVector<int64_t> shape(idsType.getShape());
          shape.append(tensorType(g).getRank() - shape.size(), 1);
          keep = ReshapeOp::create(
              b, loc, RankedTensorType::get(shape, b.getI1Type()), keep);
          g = WhereOp::create(b, loc, keep, g,
                              scalar(loc, tensorType(g).getElementType(), 0));
        }
        accumulate(o.getData(),
                   GatherGradOp::create(b, loc, o.getData().getType(),
                                        o.getIndices(), g, o.getAxisAttr()));
        return success();
      })
      .Case<ReshapeOp, SqueezeOp, UnsqueezeOp>([&](Operation *) {
        return unary(reshape(g, tensorType(op->getOperand(0))));
      })
      .Case(
          [&](ExpandOp o) { return unary(sumTo(g, tensorType(o.getInput()))); })
      .Case([&](TransposeOp o) {
        ArrayRef<int64_t> perm = o.getPerm();
        SmallVector<int64_t> inverse(perm.size());
        for (auto [i, p] : llvm::enumerate(perm))
          inverse[p] = i;
        return unary(TransposeOp::create(b, loc, g, inverse));
      })
      .Case([&](SliceOp o) {
        return unary(SliceGradOp::create(b, loc, o.getInput().getType(), g,
                                         o.getOffsetsAttr(),
                                         o.getStridesAttr()));
      })
      .Case([&](ConcatOp o) {
        int64_t axis = o.getAxis(), offset = 0;
        RankedTensorType type = o.getType();
        for (Value in : o.getInputs()) {
          RankedTensorType t = tensorType(in);
          if (isActive(in)) {
            SmallVector<int64_t> offsets(type.getRank(), 0);
            SmallVector<int64_t> strides(type.getRank(), 1);
            offsets[axis] = offset;
            accumulate(in, SliceOp::create(b, loc, t, g,
                                           b.getDenseI64ArrayAttr(offsets),
                                           b.getDenseI64ArrayAttr(strides)));
          }
          offset += t.getDimSize(axis);
        }
        return success();
      })
      .Case([&](SplitOp o) {
        SmallVector<Value> pieces;
        for (Value r : o.getResults()) {
          Value gr = gradOf(r);
          pieces.push_back(gr ? gr : zeros(loc, tensorType(r)));
        }
        return unary(pieces.size() == 1
                         ? pieces.front()
                         : ConcatOp::create(b, loc, pieces, o.getAxis())
                               .getResult());
      })
      .Default([&](Operation *other) {
        return other->emitOpError()
               << "has no gradient rule, but lies between a trainable "
                  "parameter and the loss";
      });
}

FailureOr<unsigned> autopar::findLoss(func::FuncOp func, StringRef lossName) {
  std::optional<unsigned> found;
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    auto name = func.getResultAttrOfType<StringAttr>(i, NNDialect::kOutputAttr);
    if (!lossName.empty()) {
      if (name && name.getValue() == lossName)
        found = i;
      continue;
    }
    auto type = dyn_cast<RankedTensorType>(func.getResultTypes()[i]);
    if (!type || type.getRank() != 0 ||
        !isa<FloatType>(type.getElementType()))
      continue;
    if (found)
      return func.emitError()
             << "has several scalar floating-point results; name the loss";
    found = i;
  }
  if (!found) {
    if (!lossName.empty())
      return func.emitError() << "has no result named '" << lossName << "'";
    return func.emitError()
           << "has no scalar floating-point result to use as the loss";
  }
  auto type = dyn_cast<RankedTensorType>(func.getResultTypes()[*found]);
  if (!type || type.getRank() != 0 || !isa<FloatType>(type.getElementType()))
    return func.emitError() << "loss result #" << *found
                            << " must be a floating-point scalar, got "
                            << func.getResultTypes()[*found];
  return *found;
}

LogicalResult autopar::differentiate(ModuleOp module, StringRef forwardName,
                                     StringRef lossName,
                                     StringRef trainStepName,
                                     bool lossScaleArgument) {
  auto forward = module.lookupSymbol<func::FuncOp>(forwardName);
  if (!forward)
    return module.emitError() << "no function @" << forwardName
                              << " to differentiate";
  if (module.lookupSymbol(trainStepName))
    return module.emitError() << "@" << trainStepName << " already exists";
  if (!forward.getBody().hasOneBlock())
    return forward.emitError() << "must have a single block";
  // A pipeline stage's output: a float tensor named by `lossName`, whose
  // gradient (the next stage's) seeds the backward pass.
  std::optional<unsigned> stageOutput;
  if (!lossName.empty())
    for (unsigned i = 0; i < forward.getNumResults(); ++i) {
      auto name =
          forward.getResultAttrOfType<StringAttr>(i, NNDialect::kOutputAttr);
      auto type = dyn_cast<RankedTensorType>(forward.getResultTypes()[i]);
      if (name && name.getValue() == lossName && type && type.getRank() > 0 &&
          isa<FloatType>(type.getElementType()))
        stageOutput = i;
    }
  FailureOr<unsigned> lossIndex = stageOutput
                                      ? FailureOr<unsigned>(*stageOutput)
                                      : findLoss(forward, lossName);
  if (failed(lossIndex))
    return failure();

  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(forward);
  auto step = cast<func::FuncOp>(b.clone(*forward));
  step.setSymName(trainStepName);
  Block &body = step.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(*lossIndex);

  SmallVector<unsigned> trainable, stageInputs;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    if (isTrainableParam(step, i))
      trainable.push_back(i);
    if (step.getArgAttr(i, NNDialect::kStageInputAttr))
      stageInputs.push_back(i);
  }

  // Active values: floating-point values that depend on a trainable
  // parameter (or on the activation a pipeline stage receives). Only they
  // get gradients.
  DenseSet<Value> active;
  for (unsigned i : trainable)
    active.insert(step.getArgument(i));
  for (unsigned i : stageInputs)
    active.insert(step.getArgument(i));
  for (Operation &op : body.without_terminator()) {
    bool depends = llvm::any_of(op.getOperands(),
                                [&](Value v) { return active.contains(v); });
    if (!depends)
      continue;
    for (Value r : op.getResults())
      if (isFloatTensor(r))
        active.insert(r);
  }

  b.setInsertionPoint(ret);
  ReverseBuilder reverse(b);
  Location loc = step.getLoc();
  auto lossType = tensorType(loss);
  // The seed: an argument (the gradient of a pipeline stage's output, from
  // the next stage; fp16's loss scale) or 1.
  Value seed;
  if (stageOutput || lossScaleArgument) {
    unsigned index = step.getNumArguments();
    StringRef attr =
        stageOutput ? NNDialect::kOutputGradAttr : NNDialect::kLossScaleAttr;
    if (failed(step.insertArgument(
            index, lossType,
            b.getDictionaryAttr(b.getNamedAttr(attr, b.getUnitAttr())), loc)))
      return step.emitError() << "cannot add the " << attr << " argument";
    seed = step.getArgument(index);
  } else {
    seed = ConstantOp::create(
        b, loc, lossType,
        DenseElementsAttr::get(lossType,
                               b.getFloatAttr(lossType.getElementType(), 1.0)));
  }
  if (active.contains(loss))
    reverse.accumulate(loss, seed);

  SmallVector<Operation *> forwardOps;
  for (Operation &op : body.without_terminator())
    forwardOps.push_back(&op);
  for (Operation *op : llvm::reverse(forwardOps)) {
    bool hasGrad = llvm::any_of(op->getResults(), [&](Value r) {
      return active.contains(r) && reverse.gradOf(r);
    });
    if (!hasGrad)
      continue;
    if (failed(reverse.backprop(op, active)))
      return failure();
  }

  SmallVector<Value> results = {loss};
  SmallVector<Type> resultTypes = {loss.getType()};
  SmallVector<DictionaryAttr> resultAttrs = {b.getDictionaryAttr(
      b.getNamedAttr(NNDialect::kOutputAttr,
                     b.getStringAttr(stageOutput ? lossName : "loss")))};
  for (unsigned i : trainable) {
    // A parameter the loss does not depend on gets no gradient result (as a
    // torch parameter whose .grad stays None: no update, no decay).
    Value grad = reverse.gradOf(step.getArgument(i));
    if (!grad)
      continue;
    results.push_back(grad);
    resultTypes.push_back(grad.getType());
    resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        NNDialect::kGradAttr,
        step.getArgAttrOfType<StringAttr>(i, NNDialect::kParamAttr))));
  }
  // The gradient each received activation sends back (zeros if the loss
  // does not depend on it).
  for (unsigned i : stageInputs) {
    Value input = step.getArgument(i);
    Value grad = reverse.gradOf(input);
    if (!grad) {
      auto type = tensorType(input);
      grad = ConstantOp::create(
          b, loc, type,
          DenseElementsAttr::get(type,
                                 b.getFloatAttr(type.getElementType(), 0.0)));
    }
    results.push_back(grad);
    resultTypes.push_back(grad.getType());
    resultAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(NNDialect::kInputGradAttr, b.getUnitAttr())));
  }
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  step.setType(b.getFunctionType(step.getArgumentTypes(), resultTypes));
  step.setAllResultAttrs(resultAttrs);
  return success();
}

namespace {
struct AutodiffPass : public autopar::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;
  void runOnOperation() override {
    if (failed(differentiate(getOperation(), forward, loss, trainStep,
                             lossScaleArgument)))
      signalPassFailure();
  }
};
} // namespace
