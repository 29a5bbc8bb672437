//===- Spmdize.cpp - the program of one rank ------------------------------===//
//
// Global view (logical shapes, shardings as attributes) -> local view
// (per-rank shapes, explicit dist collectives). See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "passes/parallel/ContextParallelAttention.h"
#include "passes/parallel/LocalBuilders.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "autopar-dist-spmdize"

namespace autopar::dist {
#define GEN_PASS_DEF_SPMDIZEPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

/// Multiplies `v` by the scalar 1/n (a float tensor).
FailureOr<Value> scaleBy(OpBuilder &b, Location loc, Value v, int64_t n) {
  auto type = cast<RankedTensorType>(v.getType());
  auto elem = dyn_cast<FloatType>(type.getElementType());
  if (!elem)
    return failure();
  auto scalarType = RankedTensorType::get({}, elem);
  auto value = DenseElementsAttr::get(
      scalarType, FloatAttr::get(elem, 1.0 / static_cast<double>(n)));
  Value c = nn::ConstantOp::create(b, loc, scalarType, value);
  return nn::MulOp::create(b, loc, type, v, c).getResult();
}

/// Lookup indices into a table whose rows are split: this rank holds rows
/// [start, start + rows) of `total`.
struct BlockIndices {
  /// The index into the local block, 0 for rows held elsewhere.
  Value local;
  /// Whether the row is held here (i1, the indices' shape).
  Value held;
};

class Spmdizer {
public:
  Spmdizer(MeshOp mesh)
      : mesh(mesh), sizes(meshSizes(mesh)), cpAttention(mesh) {}
  LogicalResult run(func::FuncOp func);

private:
  /// Reshards `v` (laid out as `from`, of per-rank type) to `to`, inserting
  /// ops at `b`'s insertion point.
  FailureOr<Value> reshard(OpBuilder &b, Operation *user, Value v,
                           const Layout &from, const Layout &to);

  /// The first index of this rank's block of a dim split over `axes` into
  /// blocks of `block` (an i64 0-d tensor).
  Value blockStart(OpBuilder &b, Location loc, ArrayRef<StringRef> axes,
                   int64_t block);
  BlockIndices blockIndices(OpBuilder &b, Location loc, Value indices,
                            Value start, int64_t rows, int64_t total);

  /// The local form of `op` where its decision `d` splits a dim that the
  /// local op must know its block of (Megatron's vocab-parallel embedding
  /// and cross-entropy). Inserts ops after `op` and returns the values
  /// that stand for its results (null: the op's own result); `op` itself
  /// is erased if `replaced`.
  FailureOr<SmallVector<Value>> lowerBlockOp(OpBuilder &b, Operation *op,
                                             const Decision &d,
                                             ArrayRef<Value> original,
                                             bool &replaced);
  /// The log-sum-exp over all classes of a vocab-parallel loss's scores
  /// (class dim 1 split over `axes`) and the block's first class; shared
  /// by a loss and its gradient. With `target`, also the labels' scores.
  std::pair<Value, Value> lossStatistics(OpBuilder &b, Location loc,
                                         Value scores, Value labels,
                                         ArrayRef<StringRef> axes,
                                         Value *target);
  MeshOp mesh;
  MeshSizes sizes;
  /// Per global scores value of a vocab-parallel loss: its log-sum-exp and
  /// block start, for the gradient.
  DenseMap<Value, std::pair<Value, Value>> lossStats;
  /// The attentions marked dist.context_parallel (Ulysses, ring).
  ContextParallelAttention cpAttention;
};

Value Spmdizer::blockStart(OpBuilder &b, Location loc, ArrayRef<StringRef> axes,
                           int64_t block) {
  Type i64 = b.getI64Type();
  FlatSymbolRefAttr meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  Value index = AxisIndexOp::create(b, loc, RankedTensorType::get({}, i64),
                                    meshRef, axesAttr(b, axes));
  return nn::MulOp::create(b, loc, index, scalar(b, loc, i64, block));
}

BlockIndices Spmdizer::blockIndices(OpBuilder &b, Location loc, Value indices,
                                    Value start, int64_t rows, int64_t total) {
  Type i64 = b.getI64Type();
  Value idx = castTo(b, loc, indices, i64);
  Value zero = scalar(b, loc, i64, 0);
  // A negative index counts from the end (ONNX Gather).
  Value negative =
      nn::CompareOp::create(b, loc, nn::ComparePredicate::lt, idx, zero);
  idx = nn::WhereOp::create(
      b, loc, negative,
      nn::AddOp::create(b, loc, idx, scalar(b, loc, i64, total)), idx);
  Value local = nn::SubOp::create(b, loc, idx, start);
  Value above =
      nn::CompareOp::create(b, loc, nn::ComparePredicate::ge, local, zero);
  Value below = nn::CompareOp::create(b, loc, nn::ComparePredicate::lt, local,
                                      scalar(b, loc, i64, rows));
  Value held = nn::WhereOp::create(b, loc, above, below,
                                   scalar(b, loc, b.getI1Type(), 0));
  return {nn::WhereOp::create(b, loc, held, local, zero), held};
}

std::pair<Value, Value> Spmdizer::lossStatistics(OpBuilder &b, Location loc,
                                                 Value scores, Value labels,
                                                 ArrayRef<StringRef> axes,
                                                 Value *target) {
  FlatSymbolRefAttr meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  Type f32 = b.getF32Type();
  auto max = ReductionKindAttr::get(b.getContext(), ReductionKind::max);
  auto sum = ReductionKindAttr::get(b.getContext(), ReductionKind::sum);
  Value m = castTo(
      b, loc,
      nn::ReduceMaxOp::create(b, loc, scores, ArrayRef<int64_t>{1}, false),
      f32);
  m = AllReduceOp::create(b, loc, m, max, meshRef, axesAttr(b, axes));
  int64_t block = cast<RankedTensorType>(scores.getType()).getDimSize(1);
  Value start = blockStart(b, loc, axes, block);
  auto stats = nn::CrossEntropyShardStatsOp::create(
      b, loc, m.getType(), m.getType(), scores, labels, m, start);
  Value sumExp = AllReduceOp::create(b, loc, stats.getSumExp(), sum, meshRef,
                                     axesAttr(b, axes));
  if (target)
    *target = AllReduceOp::create(b, loc, stats.getTarget(), sum, meshRef,
                                  axesAttr(b, axes));
  Value lse = nn::AddOp::create(b, loc, nn::LogOp::create(b, loc, sumExp), m);
  return {lse, start};
}

FailureOr<SmallVector<Value>>
Spmdizer::lowerBlockOp(OpBuilder &b, Operation *op, const Decision &d,
                       ArrayRef<Value> original, bool &replaced) {
  SmallVector<Value> out(op->getNumResults());
  Location loc = op->getLoc();
  replaced = false;
  auto splitOf = [&](const Layout &l, int64_t dim) {
    SmallVector<StringRef> axes;
    for (StringRef a : l.dims[dim])
      if (sizes.lookup(a) != 1)
        axes.push_back(a);
    return axes;
  };
  if (isa<nn::AttentionOp, nn::AttentionGradOp>(op) &&
      op->hasAttr(DistDialect::kContextParallelAttr)) {
    const int64_t rank = d.operands[0].dims.size();
    SmallVector<StringRef> axes = splitOf(d.operands[0], rank - 2);
    return cpAttention.lower(b, op, axes, groupSize(sizes, axes), replaced);
  }
  if (auto gather = dyn_cast<nn::GatherOp>(op)) {
    // Rows held elsewhere read row 0 and are zeroed: the ranks' results sum
    // to the lookup.
    int64_t axis = gather.getAxis();
    SmallVector<StringRef> axes = splitOf(d.operands[0], axis);
    if (axes.empty())
      return out;
    auto table = cast<RankedTensorType>(gather.getData().getType());
    int64_t rows = table.getDimSize(axis);
    b.setInsertionPoint(op);
    BlockIndices idx = blockIndices(b, loc, gather.getIndices(),
                                    blockStart(b, loc, axes, rows), rows,
                                    rows * groupSize(sizes, axes));
    gather.getIndicesMutable().assign(idx.local);
    b.setInsertionPointAfter(op);
    auto result = cast<RankedTensorType>(gather.getType());
    SmallVector<int64_t> shape(result.getRank(), 1);
    auto indicesShape = cast<RankedTensorType>(idx.held.getType()).getShape();
    llvm::copy(indicesShape, shape.begin() + axis);
    Value held = nn::ReshapeOp::create(
        b, loc, RankedTensorType::get(shape, b.getI1Type()), idx.held);
    out[0] = nn::WhereOp::create(b, loc, held, gather.getResult(),
                                 scalar(b, loc, result.getElementType(), 0));
    return out;
  }
  if (auto drop = dyn_cast<nn::DropoutOp>(op)) {
    // The mask is drawn over the logical tensor: the local op is told where
    // its block starts in each split dim.
    auto type = cast<RankedTensorType>(drop.getType());
    SmallVector<int64_t> logical(type.getShape());
    SmallVector<SmallVector<StringRef>> split;
    for (int64_t dim = 0; dim < type.getRank(); ++dim) {
      split.push_back(splitOf(d.results[0], dim));
      logical[dim] *= groupSize(sizes, split.back());
    }
    if (llvm::all_of(split, [](const auto &axes) { return axes.empty(); }))
      return out;
    b.setInsertionPoint(op);
    Value zero;
    SmallVector<Value> offsets;
    for (auto [dim, axes] : llvm::enumerate(split)) {
      if (axes.empty() && !zero)
        zero = scalar(b, loc, b.getI64Type(), 0);
      offsets.push_back(
          axes.empty() ? zero : blockStart(b, loc, axes, type.getDimSize(dim)));
    }
    drop.getOffsetsMutable().assign(offsets);
    drop.setLogicalShape(logical);
    return out;
  }
  if (auto grad = dyn_cast<nn::GatherGradOp>(op)) {
    // Each rank adds the slices of its own rows.
    int64_t axis = grad.getAxis();
    SmallVector<StringRef> axes = splitOf(d.results[0], axis);
    if (axes.empty())
      return out;
    // (The result has its local type already.)
    int64_t rows = cast<RankedTensorType>(grad.getType()).getDimSize(axis);
    b.setInsertionPoint(op);
    BlockIndices idx =
        blockIndices(b, loc, grad.getIndices(), blockStart(b, loc, axes, rows),
                     rows, rows * groupSize(sizes, axes));
    auto dy = cast<RankedTensorType>(grad.getGrad().getType());
    SmallVector<int64_t> shape(dy.getRank(), 1);
    auto indicesShape = cast<RankedTensorType>(idx.held.getType()).getShape();
    llvm::copy(indicesShape, shape.begin() + axis);
    Value held = nn::ReshapeOp::create(
        b, loc, RankedTensorType::get(shape, b.getI1Type()), idx.held);
    grad.getIndicesMutable().assign(idx.local);
    grad.getGradMutable().assign(nn::WhereOp::create(
        b, loc, held, grad.getGrad(), scalar(b, loc, dy.getElementType(), 0)));
    return out;
  }
  if (auto loss = dyn_cast<nn::SoftmaxCrossEntropyOp>(op)) {
    SmallVector<StringRef> axes = splitOf(d.operands[0], 1);
    if (axes.empty())
      return out;
    // (A vocabulary padded for tp is masked instead: PadVocabulary.)
    if (loss.getClasses()) {
      loss.emitOpError() << "with `classes` cannot split its classes over "
                            "ranks";
      return failure();
    }
    b.setInsertionPointAfter(op);
    Value target;
    auto [lse, start] = lossStatistics(b, loc, loss.getScores(),
                                       loss.getLabels(), axes, &target);
    lossStats[original[0]] = {lse, start};
    Type f32 = b.getF32Type();
    Value perElement = nn::SubOp::create(b, loc, lse, target);
    Value valid;
    if (std::optional<int64_t> ignore = loss.getIgnoreIndex()) {
      Value labels = loss.getLabels();
      Type index = cast<RankedTensorType>(labels.getType()).getElementType();
      valid = nn::CompareOp::create(b, loc, nn::ComparePredicate::ne, labels,
                                    scalar(b, loc, index, *ignore));
      perElement = nn::WhereOp::create(b, loc, valid, perElement,
                                       scalar(b, loc, f32, 0));
    }
    auto type = cast<RankedTensorType>(perElement.getType());
    SmallVector<int64_t> all =
        llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
    Value result = perElement;
    if (loss.getReduction() != nn::LossReduction::none)
      result = nn::ReduceSumOp::create(b, loc, perElement, all, false);
    if (loss.getReduction() == nn::LossReduction::mean) {
      Value count = valid ? nn::ReduceSumOp::create(
                                b, loc, castTo(b, loc, valid, f32), all, false)
                                .getResult()
                          : scalar(b, loc, f32, type.getNumElements());
      result = nn::DivOp::create(b, loc, result, count);
    }
    out[0] = castTo(b, loc, result,
                    cast<RankedTensorType>(loss.getType()).getElementType());
    replaced = true;
    return out;
  }
  if (auto grad = dyn_cast<nn::SoftmaxCrossEntropyGradOp>(op)) {
    SmallVector<StringRef> axes = splitOf(d.operands[0], 1);
    if (axes.empty())
      return out;
    if (grad.getClasses()) {
      grad.emitOpError() << "with `classes` cannot split its classes over "
                            "ranks";
      return failure();
    }
    b.setInsertionPointAfter(op);
    // The forward's statistics, or (a gradient without its loss, scores
    // recomputed) the same computed again.
    auto it = lossStats.find(original[0]);
    std::pair<Value, Value> stats =
        it != lossStats.end() ? it->second
                              : lossStatistics(b, loc, grad.getScores(),
                                               grad.getLabels(), axes, nullptr);
    out[0] = nn::CrossEntropyShardGradOp::create(
        b, loc, grad.getScores().getType(), grad.getScores(), grad.getLabels(),
        grad.getGrad(), stats.first, stats.second, grad.getReductionAttr(),
        grad.getIgnoreIndexAttr());
    replaced = true;
    return out;
  }
  return out;
}

FailureOr<Value> Spmdizer::reshard(OpBuilder &b, Operation *user, Value v,
                                   const Layout &fromLayout,
                                   const Layout &toLayout) {
  Location loc = user->getLoc();
  // Axes of size 1 move nothing (a split over one rank, a sum of one term).
  auto nontrivial = [&](Layout l) {
    auto trivial = [&](StringRef a) { return sizes.lookup(a) == 1; };
    for (auto &axes : l.dims)
      llvm::erase_if(axes, trivial);
    llvm::erase_if(l.partial, trivial);
    return l;
  };
  Layout from = nontrivial(fromLayout), to = nontrivial(toLayout);
  FlatSymbolRefAttr meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  // Pending values of another kind (a max wanted as a sum) are combined
  // first and then spread again.
  bool sameKind = from.partial.empty() || to.partial.empty() ||
                  from.partialKind == to.partialKind;
  SmallVector<StringRef> reduce, spread;
  for (StringRef a : from.partial)
    if (!sameKind || !llvm::is_contained(to.partial, a))
      reduce.push_back(a);
  for (StringRef a : to.partial)
    if (!sameKind || !llvm::is_contained(from.partial, a))
      spread.push_back(a);
  auto kind = ReductionKindAttr::get(b.getContext(), from.partialKind);
  // partial -> split: a dim that becomes split over axes whose pending sum
  // is resolved here takes a reduce-scatter (each rank reduces only its
  // block: half an all-reduce's traffic, no slicing after it).
  // A dim split over more axes than it was (the same ones first: [dp] ->
  // [dp, tp]) splits each rank's block further over the extra ones.
  auto extraAxes = [](ArrayRef<StringRef> fewer, ArrayRef<StringRef> more) {
    if (fewer.size() >= more.size() || more.take_front(fewer.size()) != fewer)
      return ArrayRef<StringRef>();
    return more.drop_front(fewer.size());
  };
  SmallVector<bool> scattered(from.dims.size(), false);
  for (size_t d = 0; d < from.dims.size(); ++d) {
    ArrayRef<StringRef> axes = from.dims[d].empty()
                                   ? ArrayRef<StringRef>(to.dims[d])
                                   : extraAxes(from.dims[d], to.dims[d]);
    if (axes.empty() || !llvm::all_of(axes, [&](StringRef a) {
          return llvm::is_contained(reduce, a);
        }))
      continue;
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[d] /= groupSize(sizes, axes);
    v = ReduceScatterOp::create(
        b, loc, RankedTensorType::get(shape, type.getElementType()), v, kind,
        meshRef, axesAttr(b, axes), b.getI64IntegerAttr(d));
    llvm::erase_if(reduce,
                   [&](StringRef a) { return llvm::is_contained(axes, a); });
    scattered[d] = true;
  }
  if (!reduce.empty())
    v = AllReduceOp::create(b, loc, v, kind, meshRef, axesAttr(b, reduce));
  if (!spread.empty() && to.partialKind == ReductionKind::sum) {
    // A whole value as a pending sum: each rank holds 1/n of it.
    FailureOr<Value> scaled = scaleBy(b, loc, v, groupSize(sizes, spread));
    if (failed(scaled))
      return user->emitOpError()
             << "needs a non-float operand as a pending sum over the mesh";
    v = *scaled;
  }
  // Gathers first, then splits: an axis that moves from one dim to another
  // must be gathered off the first before it splits the second (splitting
  // first would gather blocks of different rows).
  auto resize = [&](size_t d, int64_t factor, bool gather) {
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[d] = gather ? shape[d] * factor : shape[d] / factor;
    return RankedTensorType::get(shape, type.getElementType());
  };
  SmallVector<bool> settled(scattered);
  for (size_t d = 0; d < from.dims.size(); ++d) {
    if (settled[d] || from.dims[d] == to.dims[d] || from.dims[d].empty() ||
        !extraAxes(from.dims[d], to.dims[d]).empty())
      continue;
    // Fewer axes than it has ([dp, tp] -> [dp]): gather the extra ones;
    // other axes: gather them all (the split comes below).
    ArrayRef<StringRef> fewer = extraAxes(to.dims[d], from.dims[d]);
    ArrayRef<StringRef> axes =
        !fewer.empty() && !to.dims[d].empty() ? fewer : from.dims[d];
    v = AllGatherOp::create(b, loc, resize(d, groupSize(sizes, axes), true), v,
                            meshRef, axesAttr(b, axes), b.getI64IntegerAttr(d));
    settled[d] = axes == fewer;
  }
  for (size_t d = 0; d < from.dims.size(); ++d) {
    if (settled[d] || from.dims[d] == to.dims[d] || to.dims[d].empty())
      continue;
    // More axes than it has ([dp] -> [dp, tp]): split each block further.
    ArrayRef<StringRef> more = extraAxes(from.dims[d], to.dims[d]);
    ArrayRef<StringRef> axes =
        !more.empty() && !from.dims[d].empty() ? more : to.dims[d];
    v = TensorSplitOp::create(b, loc, resize(d, groupSize(sizes, axes), false),
                              v, meshRef, axesAttr(b, axes),
                              b.getI64IntegerAttr(d));
  }
  return v;
}

LogicalResult Spmdizer::run(func::FuncOp func) {
  DenseMap<Value, Layout> layouts;
  for (BlockArgument arg : func.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    auto attr =
        func.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(), DistDialect::kShardingAttr);
    Layout l =
        attr ? Layout::fromAttr(attr) : Layout::replicated(type.getRank());
    // (A saved value may: a sum over dp pending since the phase that
    // saved it.)
    if (!l.partial.empty() &&
        !func.getArgAttr(arg.getArgNumber(), nn::NNDialect::kSavedAttr))
      return func.emitError() << "argument #" << arg.getArgNumber()
                              << " cannot start as a pending sum";
    arg.setType(localType(type, l, sizes));
    layouts[arg] = l;
  }
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front())
    ops.push_back(&op);
  DenseMap<std::pair<Value, Attribute>, Value> resharded;
  OpBuilder b(func.getContext());
  for (Operation *op : ops) {
    b.setInsertionPoint(op);
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (OpOperand &operand : ret->getOpOperands()) {
        unsigned r = operand.getOperandNumber();
        if (func.getResultAttr(r, DistDialect::kZeroAttr)) {
          // Laid out as its parameter (propagation's result sharding); the
          // ZeRO pass shards it over dp (and sums the shard over hybrid
          // sharding's replicas) and needs to know what it holds. A sum
          // pending over other axes too (tp: a replicated parameter reached
          // by split activations) is reduced here.
          Layout from = layouts.lookup(operand.get());
          auto attr = func.getResultAttrOfType<ShardingAttr>(r, DistDialect::kShardingAttr);
          Layout to = attr ? Layout::fromAttr(attr) : from;
          llvm::erase_if(to.partial, [](StringRef a) {
            return a != kDataAxis && a != kReplicaAxis;
          });
          FailureOr<Value> v = reshard(b, op, operand.get(), from, to);
          if (failed(v))
            return failure();
          operand.set(*v);
          func.setResultAttr(r, DistDialect::kShardingAttr,
                             to.toAttr(func.getContext(), mesh.getSymName()));
          continue;
        }
        auto attr = func.getResultAttrOfType<ShardingAttr>(r, DistDialect::kShardingAttr);
        Layout to = attr ? Layout::fromAttr(attr)
                         : Layout::replicated(
                               cast<RankedTensorType>(operand.get().getType())
                                   .getRank());
        FailureOr<Value> v =
            reshard(b, op, operand.get(), layouts.lookup(operand.get()), to);
        if (failed(v))
          return failure();
        operand.set(*v);
      }
      continue;
    }
    if (auto shard = dyn_cast<ShardOp>(op)) {
      // A shard read only by another: only the last layout is wanted (the
      // summed lookups that sequence parallelism splits over the tokens
      // are one reduce-scatter).
      if (shard->hasOneUse() && isa<ShardOp>(*shard->getUsers().begin())) {
        shard.getResult().replaceAllUsesWith(shard.getInput());
        op->erase();
        continue;
      }
      // The annotation becomes the resharding it asks for (made once per
      // value and layout: a pinned input of several projections).
      Value input = shard.getInput();
      Layout from = layouts.lookup(input),
             to = Layout::fromAttr(shard.getSharding());
      Value &cached = resharded[{input, shard.getSharding()}];
      FailureOr<Value> v =
          cached ? FailureOr<Value>(cached) : reshard(b, op, input, from, to);
      if (failed(v))
        return failure();
      cached = *v;
      if (*v == input && from != to)
        v = nn::IdentityOp::create(b, op->getLoc(), input.getType(), input)
                .getResult();
      layouts[*v] = to;
      shard.getResult().replaceAllUsesWith(*v);
      op->erase();
      continue;
    }
    auto annotated = op->getAttrOfType<ArrayAttr>(DistDialect::kShardingsAttr);
    if (op->getNumResults() > 0 && !annotated)
      return op->emitOpError()
             << "has no dist.shardings (run autopar-propagate-sharding first)";
    SmallVector<Layout> current;
    for (Value v : op->getOperands())
      current.push_back(layouts.lookup(v));
    // Operands are already per-rank; the rule needs the global shapes, so
    // decide on the op as it was (its results still have global types and
    // its operands are re-pointed only below).
    SmallVector<Type> globalOperandTypes;
    for (auto [v, l] : llvm::zip(op->getOperands(), current)) {
      auto t = cast<RankedTensorType>(v.getType());
      SmallVector<int64_t> shape(t.getShape());
      for (auto [d, axes] : llvm::enumerate(l.dims))
        shape[d] *= groupSize(sizes, axes);
      globalOperandTypes.push_back(
          RankedTensorType::get(shape, t.getElementType()));
    }
    // (An operand may appear twice: read every local type first.)
    SmallVector<Type> localOperandTypes(op->getOperandTypes());
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      v.setType(globalOperandTypes[i]);
    // The annotations are the hints propagation decided with, so the
    // decision is the one it made; an annotation that the rule cannot give
    // (written by hand, or a conflict) is a resharding after the op.
    SmallVector<Layout> annotatedLayouts;
    if (annotated)
      for (Attribute a : annotated)
        annotatedLayouts.push_back(Layout::fromAttr(cast<ShardingAttr>(a)));
    Decision d = decide(op, current, sizes, annotatedLayouts);
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      v.setType(localOperandTypes[i]);
    SmallVector<Value> original(op->getOperands());
    for (OpOperand &operand : op->getOpOperands()) {
      unsigned i = operand.getOperandNumber();
      // A value resharded the same way for an earlier op is reused (its
      // collectives ran once; the earlier op dominates this one).
      auto key = std::make_pair(
          operand.get(),
          d.operands[i].toAttr(func.getContext(), mesh.getSymName()));
      Value &cached = resharded[key];
      // A pending sum resolved for a view (a reshape of a gradient) whose
      // input was resolved already: the view of that.
      Operation *def = operand.get().getDefiningOp();
      Layout resolved = current[i];
      resolved.partial.clear();
      if (!cached && def && !current[i].partial.empty() &&
          resolved == d.operands[i] &&
          isa<nn::ReshapeOp, nn::TransposeOp, nn::SqueezeOp, nn::UnsqueezeOp>(
              def)) {
        Value input = def->getOperand(0);
        Layout in = layouts.lookup(input);
        in.partial.clear();
        auto it = resharded.find(
            {input, in.toAttr(func.getContext(), mesh.getSymName())});
        if (it != resharded.end()) {
          Operation *view = b.clone(*def);
          view->setOperand(0, it->second);
          cached = view->getResult(0);
        }
      }
      if (!cached) {
        FailureOr<Value> v =
            reshard(b, op, operand.get(), current[i], d.operands[i]);
        if (failed(v))
          return failure();
        cached = *v;
      }
      operand.set(cached);
    }
    SmallVector<SmallVector<OpOperand *>> resultUses;
    for (auto [r, result] : llvm::enumerate(op->getResults())) {
      auto type = cast<RankedTensorType>(result.getType());
      result.setType(localType(type, d.results[r], sizes));
      layouts[result] = d.results[r];
      resultUses.push_back(llvm::map_to_vector(
          result.getUses(), [](OpOperand &u) { return &u; }));
    }
    bool replaced = false;
    FailureOr<SmallVector<Value>> block =
        lowerBlockOp(b, op, d, original, replaced);
    if (failed(block))
      return failure();
    b.setInsertionPointAfter(op);
    if (!(*block).empty() && (*block).back())
      b.setInsertionPointAfter((*block).back().getDefiningOp());
    for (auto [r, result] : llvm::enumerate(op->getResults())) {
      ArrayRef<OpOperand *> uses = resultUses[r];
      Value v = (*block)[r] ? (*block)[r] : result;
      if (d.resultScale[r] != 1) {
        FailureOr<Value> scaled = scaleBy(b, op->getLoc(), v, d.resultScale[r]);
        if (failed(scaled))
          return op->emitOpError()
                 << "averages a non-float value over a split dim";
        v = *scaled;
      }
      if (annotatedLayouts[r] != d.results[r]) {
        FailureOr<Value> resharded =
            reshard(b, op, v, d.results[r], annotatedLayouts[r]);
        if (failed(resharded))
          return failure();
        v = *resharded;
      }
      layouts[v] = annotatedLayouts[r];
      for (OpOperand *u : uses)
        u->set(v);
    }
    op->removeAttr(DistDialect::kShardingsAttr);
    if (replaced) {
      for (Value result : op->getResults())
        layouts.erase(result);
      op->erase();
    }
  }
  cpAttention.finish();
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  func.setType(FunctionType::get(func.getContext(),
                                 func.getBody().front().getArgumentTypes(),
                                 ret.getOperandTypes()));
  return success();
}

struct SpmdizePass : public dist::impl::SpmdizePassBase<SpmdizePass> {
  void getDependentDialects(DialectRegistry &registry) const override {
    SpmdizePassBase::getDependentDialects(registry);
    registerShardingRuleModels(registry);
  }
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshOp mesh = requireMesh(module);
    if (!mesh)
      return signalPassFailure();
    Spmdizer spmdizer(mesh);
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && failed(spmdizer.run(func)))
        return signalPassFailure();
  }
};

} // namespace
