//===- Spmdize.cpp - the program of one rank ------------------------------===//
//
// Global view (logical shapes, shardings as attributes) -> local view
// (per-rank shapes, explicit dist collectives). See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

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

ArrayAttr axesAttr(Builder &b, ArrayRef<StringRef> axes) {
  SmallVector<Attribute> names;
  for (StringRef a : axes)
    names.push_back(b.getStringAttr(a));
  return b.getArrayAttr(names);
}

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

class Spmdizer {
public:
  Spmdizer(MeshOp mesh) : mesh(mesh), sizes(meshSizes(mesh)) {}
  LogicalResult run(func::FuncOp func);

private:
  /// Reshards `v` (laid out as `from`, of per-rank type) to `to`, inserting
  /// ops at `b`'s insertion point.
  FailureOr<Value> reshard(OpBuilder &b, Operation *user, Value v,
                           const Layout &from, const Layout &to);

  MeshOp mesh;
  MeshSizes sizes;
};

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
  SmallVector<bool> scattered(from.dims.size(), false);
  for (size_t d = 0; d < from.dims.size(); ++d) {
    ArrayRef<StringRef> axes = to.dims[d];
    if (!from.dims[d].empty() || axes.empty() ||
        !llvm::all_of(
            axes, [&](StringRef a) { return llvm::is_contained(reduce, a); }))
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
  for (size_t d = 0; d < from.dims.size(); ++d) {
    if (scattered[d] || from.dims[d] == to.dims[d])
      continue;
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(type.getShape());
    if (!from.dims[d].empty()) {
      shape[d] *= groupSize(sizes, from.dims[d]);
      v = AllGatherOp::create(
          b, loc, RankedTensorType::get(shape, type.getElementType()), v,
          meshRef, axesAttr(b, from.dims[d]), b.getI64IntegerAttr(d));
    }
    if (!to.dims[d].empty()) {
      shape[d] /= groupSize(sizes, to.dims[d]);
      v = TensorSplitOp::create(
          b, loc, RankedTensorType::get(shape, type.getElementType()), v,
          meshRef, axesAttr(b, to.dims[d]), b.getI64IntegerAttr(d));
    }
  }
  return v;
}

LogicalResult Spmdizer::run(func::FuncOp func) {
  DenseMap<Value, Layout> layouts;
  for (BlockArgument arg : func.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    auto attr =
        func.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(), kShardingAttr);
    Layout l =
        attr ? Layout::fromAttr(attr) : Layout::replicated(type.getRank());
    if (!l.partial.empty())
      return func.emitError() << "argument #" << arg.getArgNumber()
                              << " cannot start as a pending sum";
    arg.setType(localType(type, l, sizes));
    layouts[arg] = l;
  }
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front())
    ops.push_back(&op);
  OpBuilder b(func.getContext());
  for (Operation *op : ops) {
    b.setInsertionPoint(op);
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (OpOperand &operand : ret->getOpOperands()) {
        unsigned r = operand.getOperandNumber();
        if (func.getResultAttr(r, kZeroAttr)) {
          // Laid out as its parameter (propagation's result sharding); the
          // ZeRO pass shards it over dp and needs to know what it holds. A
          // sum pending over other axes too (tp: a replicated parameter
          // reached by split activations) is reduced here.
          Layout from = layouts.lookup(operand.get());
          auto attr = func.getResultAttrOfType<ShardingAttr>(r, kShardingAttr);
          Layout to = attr ? Layout::fromAttr(attr) : from;
          llvm::erase_if(to.partial,
                         [](StringRef a) { return a != kDataAxis; });
          FailureOr<Value> v = reshard(b, op, operand.get(), from, to);
          if (failed(v))
            return failure();
          operand.set(*v);
          func.setResultAttr(r, kShardingAttr,
                             to.toAttr(func.getContext(), mesh.getSymName()));
          continue;
        }
        auto attr = func.getResultAttrOfType<ShardingAttr>(r, kShardingAttr);
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
      // The annotation becomes the resharding it asks for.
      Value input = shard.getInput();
      Layout from = layouts.lookup(input),
             to = Layout::fromAttr(shard.getSharding());
      FailureOr<Value> v = reshard(b, op, input, from, to);
      if (failed(v))
        return failure();
      if (*v == input && from != to)
        v = nn::IdentityOp::create(b, op->getLoc(), input.getType(), input)
                .getResult();
      layouts[*v] = to;
      shard.getResult().replaceAllUsesWith(*v);
      op->erase();
      continue;
    }
    auto annotated = op->getAttrOfType<ArrayAttr>(kShardingsAttr);
    if (op->getNumResults() > 0 && !annotated)
      return op->emitOpError()
             << "has no dist.shardings (run autopar-dist-propagate first)";
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
    for (OpOperand &operand : op->getOpOperands()) {
      unsigned i = operand.getOperandNumber();
      FailureOr<Value> v =
          reshard(b, op, operand.get(), current[i], d.operands[i]);
      if (failed(v))
        return failure();
      operand.set(*v);
    }
    b.setInsertionPointAfter(op);
    for (auto [r, result] : llvm::enumerate(op->getResults())) {
      auto type = cast<RankedTensorType>(result.getType());
      result.setType(localType(type, d.results[r], sizes));
      layouts[result] = d.results[r];
      SmallVector<OpOperand *> uses = llvm::map_to_vector(
          result.getUses(), [](OpOperand &u) { return &u; });
      Value v = result;
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
    op->removeAttr(kShardingsAttr);
  }
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
