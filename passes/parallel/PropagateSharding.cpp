//===- PropagateSharding.cpp - shardings for every value ------------------===//
//
// Sharding propagation in both directions to a fixpoint (after GSPMD and
// Shardy). See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "mlir/IR/Builders.h"

#include <set>

#define DEBUG_TYPE "autopar-dist-propagate"

namespace autopar::dist {
#define GEN_PASS_DEF_PROPAGATESHARDINGPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }

int64_t priorityOf(ShardOp shard) {
  IntegerAttr p = shard.getPriorityAttr();
  return p ? p.getInt() : 0;
}

/// The propagation over one function. Every value has a layout: an op's
/// results the decision of its rule over its operands' layouts and the
/// hints on its results; a `dist.shard` result its sharding; an argument
/// with `dist.sharding` that sharding (fixed); an argument without one
/// (open) its hints. Hints are the splits a value's users want: a
/// dist.shard wants its operand laid out as its sharding, an op wants each
/// operand split as its decision splits it. Hints only ever gain axes (a
/// dim already split, or an axis already used, keeps what it has: the
/// first hint wins), so the iteration ends.
class Propagator {
public:
  Propagator(func::FuncOp func, const MeshSizes &sizes)
      : func(func), sizes(sizes) {}

  LogicalResult run(StringRef meshName);

private:
  Layout layoutOf(Value v) const {
    auto it = layouts.find(v);
    return it != layouts.end() ? it->second : Layout::replicated(rankOf(v));
  }
  Layout hintOf(Value v) const {
    auto it = hints.find(v);
    return it != hints.end() ? it->second : Layout::replicated(rankOf(v));
  }
  bool setLayout(Value v, const Layout &l) {
    auto [it, inserted] = layouts.try_emplace(v, l);
    if (inserted)
      return true;
    if (it->second == l)
      return false;
    it->second = l;
    return true;
  }
  /// Adds the splits of `want` that `v`'s hint can take; true if it grew.
  bool addHint(Value v, const Layout &want);
  /// Applies `op`'s rule (seeds of priority <= `level` only); true if a
  /// layout or a hint changed.
  bool visit(Operation *op, int64_t level);

  func::FuncOp func;
  const MeshSizes &sizes;
  DenseMap<Value, Layout> layouts, hints;
  /// Arguments without a dist.sharding: laid out as their hints say.
  llvm::SmallPtrSet<Value, 8> openArgs;
};

bool Propagator::addHint(Value v, const Layout &want) {
  Layout h = hintOf(v);
  bool grew = false;
  for (size_t d = 0; d < h.dims.size() && d < want.dims.size(); ++d) {
    if (!h.dims[d].empty() || want.dims[d].empty())
      continue;
    bool clash = llvm::any_of(want.dims[d], [&](StringRef a) {
      return llvm::any_of(h.dims,
                          [&](const auto &axes) { return llvm::is_contained(axes, a); });
    });
    if (clash)
      continue;
    h.dims[d] = want.dims[d];
    grew = true;
  }
  if (!grew)
    return false;
  hints[v] = h;
  if (openArgs.contains(v))
    layouts[v] = h;
  return true;
}

bool Propagator::visit(Operation *op, int64_t level) {
  if (auto shard = dyn_cast<ShardOp>(op)) {
    Layout l = Layout::fromAttr(shard.getSharding());
    bool changed = setLayout(shard.getResult(), l);
    if (priorityOf(shard) <= level) {
      l.partial.clear();
      changed |= addHint(shard.getInput(), l);
    }
    return changed;
  }
  if (op->getNumResults() == 0)
    return false;
  SmallVector<Layout> operands, resultHints;
  for (Value v : op->getOperands())
    operands.push_back(layoutOf(v));
  for (Value v : op->getResults())
    resultHints.push_back(hintOf(v));
  Decision d = decide(op, operands, sizes, resultHints);
  bool changed = false;
  for (auto [r, l] : llvm::zip(op->getResults(), d.results))
    changed |= setLayout(r, l);
  for (auto [v, want, have] : llvm::zip(op->getOperands(), d.operands, operands))
    if (want.dims != have.dims)
      changed |= addHint(v, want);
  return changed;
}

LogicalResult Propagator::run(StringRef meshName) {
  MLIRContext *ctx = func.getContext();
  for (BlockArgument arg : func.getArguments()) {
    if (auto attr = func.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(),
                                                        kShardingAttr))
      layouts[arg] = Layout::fromAttr(attr);
    else
      openArgs.insert(arg);
  }
  Block &body = func.getBody().front();
  // Seeds of a higher priority (a lower number) propagate to a fixpoint
  // before those of the next one come in.
  std::set<int64_t> levels = {0};
  for (auto shard : body.getOps<ShardOp>())
    levels.insert(priorityOf(shard));
  for (int64_t level : levels) {
    for (int sweeps = 0;; ++sweeps) {
      if (sweeps == 1000)
        return func.emitError() << "sharding propagation does not settle";
      bool changed = false;
      for (Operation &op : body)
        changed |= visit(&op, level);
      for (Operation &op : llvm::reverse(body))
        changed |= visit(&op, level);
      if (!changed)
        break;
    }
  }

  for (Operation &op : body) {
    if (op.getNumResults() == 0 || isa<ShardOp>(op))
      continue;
    SmallVector<Attribute> attrs;
    for (Value r : op.getResults())
      attrs.push_back(layoutOf(r).toAttr(ctx, meshName));
    op.setAttr(kShardingsAttr, ArrayAttr::get(ctx, attrs));
  }
  DenseMap<StringRef, Layout> params;
  for (BlockArgument arg : func.getArguments()) {
    if (openArgs.contains(arg))
      func.setArgAttr(arg.getArgNumber(), kShardingAttr,
                      layoutOf(arg).toAttr(ctx, meshName));
    if (auto name = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), nn::NNDialect::kParamAttr))
      params[name.getValue()] = layoutOf(arg);
  }
  // A gradient is laid out as its parameter (the update is elementwise),
  // keeping the pending sums its result sharding asks for.
  for (unsigned r = 0; r < func.getNumResults(); ++r) {
    auto grad = func.getResultAttrOfType<StringAttr>(r, nn::NNDialect::kGradAttr);
    auto attr = func.getResultAttrOfType<ShardingAttr>(r, kShardingAttr);
    if (!grad || !attr || !params.count(grad.getValue()))
      continue;
    Layout l = params[grad.getValue()];
    if (l.dims.size() != static_cast<size_t>(attr.getRank()))
      continue;
    l.partial = Layout::fromAttr(attr).partial;
    func.setResultAttr(r, kShardingAttr, l.toAttr(ctx, meshName));
  }
  return success();
}

struct PropagateShardingPass
    : public dist::impl::PropagateShardingPassBase<PropagateShardingPass> {
  void getDependentDialects(DialectRegistry &registry) const override {
    PropagateShardingPassBase::getDependentDialects(registry);
    registerShardingRuleModels(registry);
  }
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshOp mesh = requireMesh(module);
    if (!mesh)
      return signalPassFailure();
    MeshSizes sizes = meshSizes(mesh);
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() &&
          failed(Propagator(func, sizes).run(mesh.getSymName())))
        return signalPassFailure();
  }
};

} // namespace
