//===- ContextParallelAttention.cpp - Ulysses and ring attention ----------===//
//
// The local forms of context-parallel attentions in the ulysses and ring
// modes (spmdization). See ContextParallelAttention.h.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/ContextParallelAttention.h"

#include "passes/parallel/LocalBuilders.h"

#include "dialects/nn/NNOps.h"
#include "dialects/parallel/DistDialect.h"

#include <cmath>

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

/// Queries at positions `p` [T] against the keys at `pk` [S] (increasing):
/// the causal mask [T, S] (key <= query) and, with `sees`, whether a query
/// sees any key of the block [T] (the first key is at most its position).
Value blockMask(OpBuilder &b, Location loc, Value p, Value pk,
                Value *sees = nullptr) {
  auto pt = cast<RankedTensorType>(p.getType());
  auto kt = cast<RankedTensorType>(pk.getType());
  Type i64 = pt.getElementType();
  const int64_t t = pt.getDimSize(0), s = kt.getDimSize(0);
  Value rows =
      nn::ReshapeOp::create(b, loc, RankedTensorType::get({t, 1}, i64), p);
  Value cols =
      nn::ReshapeOp::create(b, loc, RankedTensorType::get({1, s}, i64), pk);
  Value mask =
      nn::CompareOp::create(b, loc, nn::ComparePredicate::le, cols, rows);
  if (sees) {
    Value first = nn::SliceOp::create(b, loc, RankedTensorType::get({1}, i64),
                                      pk, b.getDenseI64ArrayAttr({0}),
                                      b.getDenseI64ArrayAttr({1}));
    *sees = nn::CompareOp::create(b, loc, nn::ComparePredicate::le, first, p);
  }
  return mask;
}

/// `v` [..., T] as [..., T, 1] (a weight per row of [..., T, D]).
Value perRow(OpBuilder &b, Location loc, Value v, Type element) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.push_back(1);
  return castTo(
      b, loc,
      nn::ReshapeOp::create(
          b, loc, RankedTensorType::get(shape, type.getElementType()), v),
      element);
}

} // namespace

FailureOr<SmallVector<Value>>
ContextParallelAttention::lower(OpBuilder &b, Operation *op,
                                ArrayRef<StringRef> axes, int64_t n,
                                bool &replaced) {
  auto mode = op->getAttrOfType<StringAttr>(DistDialect::kContextParallelAttr);
  op->removeAttr(DistDialect::kContextParallelAttr);
  replaced = false;
  if (n == 1)
    return SmallVector<Value>(op->getNumResults());
  if (mode.getValue() == "ulysses")
    return lowerUlysses(b, op, axes, n);
  replaced = true;
  return lowerRing(b, op, axes, n);
}

void ContextParallelAttention::finish() {
  for (Operation *back : exchangesBack)
    if (back->use_empty())
      back->erase();
  exchangesBack.clear();
  headBlocks.clear();
  passedPositions.clear();
}

Value ContextParallelAttention::shift(OpBuilder &b, Location loc, Value v,
                                      ArrayRef<StringRef> axes) {
  return ShiftOp::create(b, loc, v.getType(), v,
                         FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                         axesAttr(b, axes), b.getI64IntegerAttr(1));
}

FailureOr<SmallVector<Value>>
ContextParallelAttention::lowerUlysses(OpBuilder &b, Operation *op,
                                       ArrayRef<StringRef> axes, int64_t n) {
  Location loc = op->getLoc();
  const int64_t rank =
      cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
  // Heads at rank - 3 (the verifier asks rank >= 3), rows at rank - 2:
  // also in the [..., H, T] log-sum-exp.
  const int64_t headDim = rank - 3, rowDim = rank - 2;
  const int64_t heads =
      cast<RankedTensorType>(op->getOperand(0).getType()).getDimSize(headDim);
  if (heads % n != 0)
    return op->emitOpError()
           << "holds " << heads << " head(s) per rank, which the " << n
           << " ranks sharing its sequence (context_parallel.mode "
              "\"ulysses\") do not divide";
  FlatSymbolRefAttr meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  auto exchange = [&](Value v, bool toHeads) {
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(type.getShape());
    const int64_t split = toHeads ? headDim : rowDim,
                  concat = toHeads ? rowDim : headDim;
    shape[split] /= n;
    shape[concat] *= n;
    return AllToAllOp::create(b, loc, type.clone(shape), v, meshRef,
                              axesAttr(b, axes), b.getI64IntegerAttr(split),
                              b.getI64IntegerAttr(concat));
  };
  b.setInsertionPoint(op);
  SmallVector<OpOperand *> blocked;
  if (auto a = dyn_cast<nn::AttentionOp>(op)) {
    blocked = {&a.getQueryMutable(), &a.getKeyMutable(), &a.getValueMutable()};
  } else {
    auto g = cast<nn::AttentionGradOp>(op);
    blocked = {&g.getQueryMutable(),  &g.getKeyMutable(), &g.getValueMutable(),
               &g.getOutputMutable(), &g.getLseMutable(), &g.getGradMutable()};
  }
  for (OpOperand *operand : blocked) {
    Value &block = headBlocks[operand->get()];
    if (!block)
      block = exchange(operand->get(), /*toHeads=*/true);
    operand->set(block);
  }
  b.setInsertionPointAfter(op);
  SmallVector<Value> out;
  for (Value result : op->getResults()) {
    auto type = cast<RankedTensorType>(result.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[headDim] /= n;
    shape[rowDim] *= n;
    result.setType(type.clone(shape));
    AllToAllOp back = exchange(result, /*toHeads=*/false);
    headBlocks[back] = result;
    exchangesBack.push_back(back);
    out.push_back(back);
  }
  return out;
}

SmallVector<Value> ContextParallelAttention::lowerRing(OpBuilder &b,
                                                       Operation *op,
                                                       ArrayRef<StringRef> axes,
                                                       int64_t n) {
  Location loc = op->getLoc();
  b.setInsertionPoint(op);
  auto forward = dyn_cast<nn::AttentionOp>(op);
  auto backward = dyn_cast<nn::AttentionGradOp>(op);
  Value q = forward ? forward.getQuery() : backward.getQuery();
  Value kb = forward ? forward.getKey() : backward.getKey();
  Value vb = forward ? forward.getValue() : backward.getValue();
  // This rank's positions are its queries' and its own keys'; each block
  // of keys travels with its positions (none: not causal).
  Value p = forward ? forward.getPositions() : backward.getPositions();
  Value pb = p;
  FloatAttr scale = forward ? forward.getScaleAttr() : backward.getScaleAttr();
  BoolAttr noCausal = b.getBoolAttr(false);
  // Step i holds the block of the rank i positions back; the next block is
  // on its way while this one is computed.
  auto next = [&](Value &k, Value &v, Value &positions) {
    k = shift(b, loc, k, axes);
    v = shift(b, loc, v, axes);
    if (!positions)
      return;
    // (Passed once per function: the gradient's are the forward's.)
    Value &passed = passedPositions[positions];
    if (!passed)
      passed = shift(b, loc, positions, axes);
    positions = passed;
  };
  if (forward) {
    Type element =
        cast<RankedTensorType>(forward.getOutput().getType()).getElementType();
    Value out, lse;
    for (int64_t i = 0; i < n; ++i) {
      Value k = kb, v = vb, positions = pb;
      if (i + 1 < n)
        next(kb, vb, pb);
      // (Every query sees its own key: block 0 needs no `sees`.)
      Value sees;
      Value mask = p ? blockMask(b, loc, p, positions, i > 0 ? &sees : nullptr)
                     : Value();
      auto block = nn::AttentionOp::create(
          b, loc, forward.getOutput().getType(), forward.getLse().getType(), q,
          k, v, mask, Value(), scale, noCausal);
      Value o = block.getOutput(), l = block.getLse();
      if (i == 0) {
        out = o;
        lse = l;
        continue;
      }
      Type lseElement = cast<RankedTensorType>(l.getType()).getElementType();
      if (sees) {
        // A query that sees none of the block: NaN there, weight 0.
        l = nn::WhereOp::create(b, loc, sees, l,
                                scalar(b, loc, lseElement, -INFINITY));
        o = nn::WhereOp::create(b, loc, perRow(b, loc, sees, b.getI1Type()), o,
                                scalar(b, loc, element, 0));
      }
      // lse' = log(e^lse + e^l), out' = out e^(lse - lse') + o e^(l - lse').
      Value m = nn::WhereOp::create(
          b, loc,
          nn::CompareOp::create(b, loc, nn::ComparePredicate::gt, l, lse), l,
          lse);
      Value ea = nn::ExpOp::create(b, loc, nn::SubOp::create(b, loc, lse, m));
      Value eb = nn::ExpOp::create(b, loc, nn::SubOp::create(b, loc, l, m));
      Value sum = nn::AddOp::create(b, loc, ea, eb);
      Value wa = perRow(b, loc, nn::DivOp::create(b, loc, ea, sum), element);
      Value wb = perRow(b, loc, nn::DivOp::create(b, loc, eb, sum), element);
      out = nn::AddOp::create(b, loc, nn::MulOp::create(b, loc, out, wa),
                              nn::MulOp::create(b, loc, o, wb));
      lse = nn::AddOp::create(b, loc, m, nn::LogOp::create(b, loc, sum));
    }
    return {out, lse};
  }
  // The gradient of each block against the whole rows' output and
  // log-sum-exp; a block's key and value gradients are summed on the ranks
  // it visits, passed on with it, and passed home after the last.
  Value dq, dk, dv;
  for (int64_t i = 0; i < n; ++i) {
    Value k = kb, v = vb, positions = pb;
    if (i + 1 < n)
      next(kb, vb, pb);
    Value mask = p ? blockMask(b, loc, p, positions) : Value();
    auto block = nn::AttentionGradOp::create(
        b, loc, q.getType(), k.getType(), v.getType(), q, k, v, mask, Value(),
        backward.getOutput(), backward.getLse(), backward.getGrad(), scale,
        noCausal);
    dq = i == 0 ? block.getQueryGrad()
                : nn::AddOp::create(b, loc, dq, block.getQueryGrad());
    Value dkSum = i == 0 ? block.getKeyGrad()
                         : nn::AddOp::create(b, loc, dk, block.getKeyGrad());
    Value dvSum = i == 0 ? block.getValueGrad()
                         : nn::AddOp::create(b, loc, dv, block.getValueGrad());
    dk = shift(b, loc, dkSum, axes);
    dv = shift(b, loc, dvSum, axes);
  }
  return {dq, dk, dv};
}
