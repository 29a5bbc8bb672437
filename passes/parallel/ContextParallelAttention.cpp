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

/// Rows [begin, begin + size) of dim `dim` of `v`.
Value rowsOf(OpBuilder &b, Location loc, Value v, int64_t dim, int64_t begin,
             int64_t size) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape()), offsets(type.getRank(), 0),
      strides(type.getRank(), 1);
  shape[dim] = size;
  offsets[dim] = begin;
  return nn::SliceOp::create(b, loc, type.clone(shape), v,
                             b.getDenseI64ArrayAttr(offsets),
                             b.getDenseI64ArrayAttr(strides));
}

/// A chunk of a block of keys whose positions are consecutive, from
/// `first` on: the queries at `p` [T] see its key j where j <= p - first
/// (`positions`: nn.attention's causal positions, negative where a query
/// sees none of the chunk; null without a causal mask).
struct KeyChunk {
  Value key, value, positions;
};

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
  const int64_t rowDim = cast<RankedTensorType>(q.getType()).getRank() - 2;
  const int64_t rows = cast<RankedTensorType>(kb.getType()).getDimSize(rowDim);
  // A block's keys in chunks of consecutive positions, each attended as a
  // causal attention (the kernels skip what its positions hide): halves
  // (a zig-zag block's two chunks, or a contiguous block's halves), or the
  // whole of an odd block (contiguous: zig-zag chunks pair up).
  const int64_t chunks = p && rows % 2 == 0 ? 2 : 1, chunk = rows / chunks;
  auto chunksOf = [&](Value k, Value v, Value positions) {
    SmallVector<KeyChunk> out;
    if (!positions)
      return SmallVector<KeyChunk>{{k, v, Value()}};
    for (int64_t c = 0; c < chunks; ++c) {
      KeyChunk kc;
      kc.key = chunks == 1 ? k : rowsOf(b, loc, k, rowDim, c * chunk, chunk);
      kc.value = chunks == 1 ? v : rowsOf(b, loc, v, rowDim, c * chunk, chunk);
      Value first = rowsOf(b, loc, positions, 0, c * chunk, 1);
      kc.positions = nn::SubOp::create(b, loc, p, first);
      out.push_back(kc);
    }
    return out;
  };
  BoolAttr causal = b.getBoolAttr(bool(p));
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
    Type i64 = p ? cast<RankedTensorType>(p.getType()).getElementType() : Type();
    Value out, lse;
    for (int64_t i = 0; i < n; ++i) {
      Value k = kb, v = vb, positions = pb;
      if (i + 1 < n)
        next(kb, vb, pb);
      for (const KeyChunk &kc : chunksOf(k, v, positions)) {
        auto part = nn::AttentionOp::create(
            b, loc, forward.getOutput().getType(), forward.getLse().getType(),
            q, kc.key, kc.value, Value(), kc.positions, scale, causal);
        Value o = part.getOutput(), l = part.getLse();
        if (!out) {
          // (Every query sees the first key of its own block.)
          out = o;
          lse = l;
          continue;
        }
        Type lseElement = cast<RankedTensorType>(l.getType()).getElementType();
        if (kc.positions) {
          // A query that sees none of the chunk: NaN there, weight 0.
          Value sees =
              nn::CompareOp::create(b, loc, nn::ComparePredicate::ge,
                                    kc.positions, scalar(b, loc, i64, 0));
          l = nn::WhereOp::create(b, loc, sees, l,
                                  scalar(b, loc, lseElement, -INFINITY));
          o = nn::WhereOp::create(b, loc, perRow(b, loc, sees, b.getI1Type()),
                                  o, scalar(b, loc, element, 0));
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
    }
    return {out, lse};
  }
  // The gradient of each chunk against the whole rows' output and
  // log-sum-exp; a block's key and value gradients are summed on the ranks
  // it visits, passed on with it, and passed home after the last.
  Value dq, dk, dv;
  for (int64_t i = 0; i < n; ++i) {
    Value k = kb, v = vb, positions = pb;
    if (i + 1 < n)
      next(kb, vb, pb);
    SmallVector<Value> dks, dvs;
    for (const KeyChunk &kc : chunksOf(k, v, positions)) {
      auto part = nn::AttentionGradOp::create(
          b, loc, q.getType(), kc.key.getType(), kc.value.getType(), q, kc.key,
          kc.value, Value(), kc.positions, backward.getOutput(),
          backward.getLse(), backward.getGrad(), scale, causal);
      dq = dq ? nn::AddOp::create(b, loc, dq, part.getQueryGrad())
              : part.getQueryGrad();
      dks.push_back(part.getKeyGrad());
      dvs.push_back(part.getValueGrad());
    }
    Value dkBlock =
        dks.size() == 1 ? dks[0] : nn::ConcatOp::create(b, loc, dks, rowDim);
    Value dvBlock =
        dvs.size() == 1 ? dvs[0] : nn::ConcatOp::create(b, loc, dvs, rowDim);
    Value dkSum = i == 0 ? dkBlock : nn::AddOp::create(b, loc, dk, dkBlock);
    Value dvSum = i == 0 ? dvBlock : nn::AddOp::create(b, loc, dv, dvBlock);
    dk = shift(b, loc, dkSum, axes);
    dv = shift(b, loc, dvSum, axes);
  }
  return {dq, dk, dv};
}
