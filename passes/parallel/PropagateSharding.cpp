//===- PropagateSharding.cpp - shardings for every value ------------------===//
//
// Sharding propagation in both directions to a fixpoint (after GSPMD and
// Shardy). See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"
#include "passes/parallel/Propagation.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <memory>
#include <set>

#define DEBUG_TYPE "autopar-propagate-sharding"

namespace autopar::dist {
#define GEN_PASS_DEF_PROPAGATESHARDINGPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

bool dist::returnsGradients(func::FuncOp func) {
  for (unsigned r = 0; r < func.getNumResults(); ++r)
    if (func.getResultAttr(r, nn::NNDialect::kGradAttr))
      return true;
  return false;
}

namespace {

/// Whether `v` is an argument holding a parameter (nn.param).
bool isParameter(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return func && func.getArgAttr(arg.getArgNumber(), nn::NNDialect::kParamAttr);
}

int64_t rankOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank();
}

} // namespace

int64_t dist::priorityOf(ShardOp shard) {
  IntegerAttr p = shard.getPriorityAttr();
  return p ? p.getInt() : 0;
}

ShardingPropagator::ShardingPropagator(func::FuncOp func,
                                       const MeshSizes &sizes)
    : func(func), sizes(sizes) {
  for (BlockArgument arg : func.getArguments()) {
    if (auto attr = func.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(),
                                                        DistDialect::kShardingAttr))
      layouts[arg] = Layout::fromAttr(attr);
    else
      openArgs.insert(arg);
  }
  DenseMap<StringRef, BlockArgument> params;
  for (BlockArgument arg : func.getArguments())
    if (auto name = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), nn::NNDialect::kParamAttr))
      params[name.getValue()] = arg;
  for (unsigned r = 0; r < func.getNumResults(); ++r)
    if (auto grad =
            func.getResultAttrOfType<StringAttr>(r, nn::NNDialect::kGradAttr))
      if (BlockArgument arg = params.lookup(grad.getValue()))
        gradients.push_back({r, arg});
}

Layout ShardingPropagator::layoutOf(Value v) const {
  auto it = layouts.find(v);
  return it != layouts.end() ? it->second : Layout::replicated(rankOf(v));
}

Layout ShardingPropagator::hintOf(Value v) const {
  auto it = hints.find(v);
  return it != hints.end() ? it->second : Layout::replicated(rankOf(v));
}

void ShardingPropagator::record(const DenseMap<Value, Layout> &map,
                                DenseMap<Value, std::optional<Layout>> &before,
                                Value v) const {
  if (!inTrial || before.count(v))
    return;
  auto it = map.find(v);
  before[v] =
      it == map.end() ? std::nullopt : std::optional<Layout>(it->second);
}

void ShardingPropagator::beginTrial() {
  inTrial = true;
  dirtyBefore = dirty;
  settledLevelBefore = settledLevel;
}

void ShardingPropagator::commit() {
  inTrial = false;
  layoutsBefore.clear();
  hintsBefore.clear();
  visitedInTrial.clear();
  dirtyBefore.clear();
}

void ShardingPropagator::rollback() {
  for (auto [map, before] :
       {std::pair(&layouts, &layoutsBefore), std::pair(&hints, &hintsBefore)})
    for (auto &[v, old] : *before) {
      if (old)
        (*map)[v] = *old;
      else
        map->erase(v);
    }
  for (Operation *op : visitedInTrial)
    visited.erase(op);
  dirty = std::move(dirtyBefore);
  settledLevel = settledLevelBefore;
  commit();
}

Layout ShardingPropagator::layoutBeforeTrial(Value v) const {
  auto it = layoutsBefore.find(v);
  if (it == layoutsBefore.end())
    return layoutOf(v);
  return it->second ? *it->second : Layout::replicated(rankOf(v));
}

bool ShardingPropagator::setLayout(Value v, const Layout &l) {
  record(layouts, layoutsBefore, v);
  auto [it, inserted] = layouts.try_emplace(v, l);
  if (!inserted) {
    if (it->second == l)
      return false;
    it->second = l;
  }
  layoutChanged(v);
  return true;
}

void ShardingPropagator::layoutChanged(Value v) {
  for (Operation *user : v.getUsers())
    markDirty(user);
  if (isa<BlockArgument>(v))
    markDirty(func.getBody().front().getTerminator());
}

bool ShardingPropagator::addHint(Value v, const Layout &want) {
  Layout h = hintOf(v);
  bool grew = false;
  for (size_t d = 0; d < h.dims.size() && d < want.dims.size(); ++d) {
    if (!h.dims[d].empty() || want.dims[d].empty())
      continue;
    // A parameter is whole on every rank of a context-parallel group (cp
    // splits the tokens only).
    if (openArgs.contains(v) && isParameter(v) &&
        llvm::is_contained(want.dims[d], StringRef(kContextAxis)))
      continue;
    bool clash = llvm::any_of(want.dims[d], [&](StringRef a) {
      return llvm::any_of(h.dims, [&](const auto &axes) {
        return llvm::is_contained(axes, a);
      });
    });
    if (clash)
      continue;
    h.dims[d] = want.dims[d];
    grew = true;
  }
  if (!grew)
    return false;
  record(hints, hintsBefore, v);
  hints[v] = h;
  if (Operation *def = v.getDefiningOp())
    markDirty(def);
  if (openArgs.contains(v)) {
    record(layouts, layoutsBefore, v);
    layouts[v] = h;
    layoutChanged(v);
  }
  return true;
}

bool ShardingPropagator::visit(Operation *op, int64_t level) {
  if (auto shard = dyn_cast<ShardOp>(op)) {
    Layout l = Layout::fromAttr(shard.getSharding());
    bool changed = setLayout(shard.getResult(), l);
    if (priorityOf(shard) <= level) {
      l.partial.clear();
      changed |= addHint(shard.getInput(), l);
    }
    return changed;
  }
  if (isa<func::ReturnOp>(op)) {
    // A gradient is wanted laid out as its parameter: the ops computing it
    // then compute the parameter's block (the rows of a split embedding).
    bool changed = false;
    for (auto [r, arg] : gradients) {
      Layout l = layoutOf(arg);
      l.partial.clear();
      changed |= addHint(op->getOperand(r), l);
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
  for (auto [v, want, have] :
       llvm::zip(op->getOperands(), d.operands, operands))
    if (want.dims != have.dims)
      changed |= addHint(v, want);
  return changed;
}

void ShardingPropagator::markDirty(Operation *op) {
  if (!dirty.insert(op).second || !cursor)
    return;
  // Ahead of the sweep: it joins this one; behind: it waits for the next.
  if (forwardSweep ? cursor->isBeforeInBlock(op)
                   : op->isBeforeInBlock(cursor)) {
    queue.push_back(op);
    std::push_heap(queue.begin(), queue.end(), SweepOrder{forwardSweep});
  }
}

bool ShardingPropagator::SweepOrder::operator()(Operation *a,
                                                Operation *b) const {
  return forward ? b->isBeforeInBlock(a) : a->isBeforeInBlock(b);
}

LogicalResult ShardingPropagator::settle(int64_t level) {
  // Sweeps forward and back over the function until nothing changes,
  // visiting the ops that may decide differently than at their last visit
  // (dirty): those not visited yet and the dist.shard annotations whose
  // priority comes in (they read the level), then those whose operands'
  // layouts or results' hints changed since (markDirty), each in the
  // sweep's order.
  for (Operation &op : func.getBody().front()) {
    if (!visited.contains(&op)) {
      dirty.insert(&op);
      continue;
    }
    // A seed visited before reads the level: again once it comes in.
    if (auto shard = dyn_cast<ShardOp>(op))
      if (int64_t p = priorityOf(shard); p > settledLevel && p <= level)
        dirty.insert(&op);
  }
  settledLevel = std::max(settledLevel, level);
  for (int sweeps = 0;; ++sweeps) {
    if (sweeps == 1000)
      return func.emitError() << "sharding propagation does not settle";
    bool changed = false;
    for (bool forward : {true, false}) {
      forwardSweep = forward;
      queue.assign(dirty.begin(), dirty.end());
      std::make_heap(queue.begin(), queue.end(), SweepOrder{forwardSweep});
      while (!queue.empty()) {
        std::pop_heap(queue.begin(), queue.end(), SweepOrder{forwardSweep});
        Operation *op = queue.back();
        queue.pop_back();
        if (!dirty.erase(op))
          continue;
        cursor = op;
        if (visited.insert(op).second && inTrial)
          visitedInTrial.push_back(op);
        changed |= visit(op, level);
      }
      cursor = nullptr;
    }
    if (!changed)
      return success();
  }
}

void ShardingPropagator::annotate(StringRef meshName) {
  MLIRContext *ctx = func.getContext();
  Block &body = func.getBody().front();
  for (Operation &op : body) {
    if (op.getNumResults() == 0 || isa<ShardOp>(op))
      continue;
    SmallVector<Attribute> attrs;
    for (Value r : op.getResults())
      attrs.push_back(layoutOf(r).toAttr(ctx, meshName));
    op.setAttr(DistDialect::kShardingsAttr, ArrayAttr::get(ctx, attrs));
  }
  DenseMap<StringRef, Layout> params;
  for (BlockArgument arg : func.getArguments()) {
    if (openArgs.contains(arg))
      func.setArgAttr(arg.getArgNumber(), DistDialect::kShardingAttr,
                      layoutOf(arg).toAttr(ctx, meshName));
    if (auto name = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), nn::NNDialect::kParamAttr))
      params[name.getValue()] = layoutOf(arg);
  }
  // A gradient is laid out as its parameter (the update is elementwise),
  // keeping the pending sums its result sharding asks for (a ZeRO one, left
  // to the ZeRO pass, those it has).
  Operation *ret = body.getTerminator();
  for (unsigned r = 0; r < func.getNumResults(); ++r) {
    auto grad =
        func.getResultAttrOfType<StringAttr>(r, nn::NNDialect::kGradAttr);
    auto attr = func.getResultAttrOfType<ShardingAttr>(r, DistDialect::kShardingAttr);
    if (!grad || !params.count(grad.getValue()) ||
        (!attr && !func.getResultAttr(r, DistDialect::kZeroAttr)))
      continue;
    Layout l = params[grad.getValue()];
    Layout has = attr ? Layout::fromAttr(attr) : layoutOf(ret->getOperand(r));
    if (l.dims.size() != has.dims.size())
      continue;
    l.partial = has.partial;
    l.partialKind = has.partialKind;
    func.setResultAttr(r, DistDialect::kShardingAttr, l.toAttr(ctx, meshName));
  }
}

namespace {

/// The pipeline boundary value argument (or result) `i` of a stage's
/// training step is: the input of stage s ("in s", also stage s - 1's
/// output and the gradients of both); empty for any other value.
std::string boundaryKey(func::FuncOp func, unsigned i, bool result) {
  auto stage = func->getAttrOfType<IntegerAttr>(DistDialect::kStageAttr);
  if (!stage)
    return "";
  std::string s = std::to_string(stage.getInt());
  std::string next = std::to_string(stage.getInt() + 1);
  auto has = [&](StringRef attr) {
    return result ? func.getResultAttr(i, attr) != nullptr
                  : func.getArgAttr(i, attr) != nullptr;
  };
  if (has(nn::NNDialect::kStageInputAttr) || has(nn::NNDialect::kInputGradAttr))
    return "in " + s;
  if (has(nn::NNDialect::kOutputGradAttr))
    return "in " + next;
  auto output =
      result
          ? func.getResultAttrOfType<StringAttr>(i, nn::NNDialect::kOutputAttr)
          : nullptr;
  if (output && output.getValue() == kStageOutputName)
    return "in " + next;
  return "";
}

/// An add whose result only feeds another add of the same type, without
/// broadcasting: an inner node of a sum of several terms.
bool isInnerSum(nn::AddOp add) {
  if (!add->hasOneUse())
    return false;
  auto user = dyn_cast<nn::AddOp>(*add->getUsers().begin());
  return user && user.getType() == add.getType() &&
         add.getLhs().getType() == add.getType() &&
         add.getRhs().getType() == add.getType();
}

/// The terms of the sum rooted at `add`, in order, and its inner adds.
void sumTerms(nn::AddOp add, SmallVectorImpl<Value> &terms,
              SmallVectorImpl<Operation *> &inner) {
  for (Value v : {add.getLhs(), add.getRhs()}) {
    auto def = v.getDefiningOp<nn::AddOp>();
    if (def && isInnerSum(def)) {
      inner.push_back(def);
      sumTerms(def, terms, inner);
    } else {
      terms.push_back(v);
    }
  }
}

} // namespace

SmallVector<func::FuncOp> StageLayouts::order(ModuleOp module) {
  SmallVector<func::FuncOp> funcs;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal())
      funcs.push_back(func);
  auto key = [](func::FuncOp f) {
    auto stage = f->getAttrOfType<IntegerAttr>(DistDialect::kStageAttr);
    if (!returnsGradients(f))
      return std::make_pair(2, int64_t(0));
    return stage ? std::make_pair(0, stage.getInt())
                 : std::make_pair(1, int64_t(0));
  };
  std::stable_sort(
      funcs.begin(), funcs.end(),
      [&](func::FuncOp a, func::FuncOp b) { return key(a) < key(b); });
  return funcs;
}

void StageLayouts::take(func::FuncOp func, StringRef meshName,
                        bool paramsOnly) {
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto name = func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    if (name && !func.getArgAttr(i, DistDialect::kShardingAttr) &&
        params.count(name.getValue()))
      func.setArgAttr(i, DistDialect::kShardingAttr, params.lookup(name.getValue()));
    std::string key = boundaryKey(func, i, /*result=*/false);
    bool open = !func.getArgAttr(i, DistDialect::kShardingAttr) ||
                provisional.erase({func.getOperation(), i});
    if (!paramsOnly && !key.empty() && open && boundaries.count(key))
      func.setArgAttr(i, DistDialect::kShardingAttr, boundaries.lookup(key));
  }
}

void StageLayouts::takeWithout(func::FuncOp func, StringRef meshName,
                               StringRef axis) {
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    std::string key = boundaryKey(func, i, /*result=*/false);
    if (key.empty() || func.getArgAttr(i, DistDialect::kShardingAttr) ||
        !boundaries.count(key))
      continue;
    Layout l = Layout::fromAttr(boundaries.lookup(key));
    for (auto &axes : l.dims)
      llvm::erase(axes, axis);
    llvm::erase(l.partial, axis);
    func.setArgAttr(i, DistDialect::kShardingAttr, l.toAttr(func.getContext(), meshName));
    provisional.insert({func.getOperation(), i});
  }
}

void StageLayouts::record(func::FuncOp func, const ShardingPropagator &prop,
                          StringRef meshName) {
  MLIRContext *ctx = func.getContext();
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto name = func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    if (!name)
      continue;
    if (!func.getArgAttr(i, DistDialect::kShardingAttr))
      func.setArgAttr(i, DistDialect::kShardingAttr,
                      prop.layoutOf(arg).toAttr(ctx, meshName));
    params.try_emplace(name.getValue(),
                       func.getArgAttrOfType<ShardingAttr>(i, DistDialect::kShardingAttr));
  }
  // A stage's output is laid out as computed (its pending sums reduced), its
  // input's gradient as its input; a result that has a sharding keeps it.
  Operation *ret = func.getBody().front().getTerminator();
  for (unsigned r = 0; r < func.getNumResults(); ++r) {
    std::string key = boundaryKey(func, r, /*result=*/true);
    if (key.empty())
      continue;
    ShardingAttr attr = boundaries.lookup(key);
    if (!attr)
      attr = func.getResultAttrOfType<ShardingAttr>(r, DistDialect::kShardingAttr);
    if (!attr) {
      Layout l = prop.layoutOf(ret->getOperand(r));
      l.partial.clear();
      attr = l.toAttr(ctx, meshName);
    }
    boundaries[key] = attr;
    func.setResultAttr(r, DistDialect::kShardingAttr, attr);
  }
}

std::unique_ptr<ShardingPropagator>
dist::propagateSeeds(func::FuncOp func, const MeshSizes &sizes) {
  // Seeds of a higher priority (a lower number) settle before those of the
  // next one come in.
  auto propagate = [&]() -> std::unique_ptr<ShardingPropagator> {
    std::set<int64_t> levels = {0};
    for (auto shard : func.getBody().getOps<ShardOp>())
      levels.insert(priorityOf(shard));
    auto propagator = std::make_unique<ShardingPropagator>(func, sizes);
    for (int64_t level : levels)
      if (failed(propagator->settle(level)))
        return nullptr;
    return propagator;
  };
  std::unique_ptr<ShardingPropagator> propagator = propagate();
  // Sums regrouped so pending terms are reduced once: propagate again.
  if (propagator && groupPendingSums(func, *propagator))
    propagator = propagate();
  return propagator;
}

/// Regroups sums that mix whole terms with terms pending (as sums) over the
/// same axes so that the pending ones are added first: ((w + p1) + p2)
/// becomes w + (p1 + p2), reduced once rather than once per term. This is
/// how Megatron's backward reduces the input gradient of attention once
/// for q, k and v (autodiff accumulates them one by one into the residual
/// gradient). Floating-point reassociation: the terms are the same.
bool dist::groupPendingSums(func::FuncOp func, const ShardingPropagator &prop) {
  SmallVector<nn::AddOp> roots;
  func.walk([&](nn::AddOp add) {
    if (!isInnerSum(add))
      roots.push_back(add);
  });
  bool changed = false;
  for (nn::AddOp root : roots) {
    if (llvm::any_of(ValueRange{root.getLhs(), root.getRhs()},
                     [&](Value v) { return v.getType() != root.getType(); }))
      continue;
    SmallVector<Value> terms;
    SmallVector<Operation *> inner;
    sumTerms(root, terms, inner);
    SmallVector<Value> pending, rest;
    Layout first;
    for (Value v : terms) {
      Layout l = prop.layoutOf(v);
      bool isPending =
          !l.partial.empty() && l.partialKind == ReductionKind::sum;
      if (isPending && pending.empty())
        first = l;
      if (isPending && l.partial == first.partial)
        pending.push_back(v);
      else
        rest.push_back(v);
    }
    if (pending.size() < 2 || rest.empty())
      continue;
    // Already grouped: the pending terms are the first ones summed.
    if (llvm::equal(ArrayRef<Value>(terms).take_front(pending.size()), pending))
      continue;
    OpBuilder b(root);
    Value sum = pending[0];
    for (Value v : llvm::drop_begin(pending))
      sum = nn::AddOp::create(b, root.getLoc(), root.getType(), sum, v);
    for (Value v : rest)
      sum = nn::AddOp::create(b, root.getLoc(), root.getType(), sum, v);
    root.getResult().replaceAllUsesWith(sum);
    root.erase();
    for (Operation *op : inner)
      op->erase();
    changed = true;
  }
  return changed;
}

namespace {

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
    // A parameter has one layout in the whole program (one blob holds it
    // for every function): the training step (the function returning
    // gradients) lays its parameters out first, and the others (the
    // forward of evaluation) take those layouts as fixed. Pipeline stages'
    // training steps come first, in stage order: what a stage receives from
    // another is laid out as that one returns it.
    StageLayouts handed;
    for (func::FuncOp func : StageLayouts::order(module)) {
      handed.take(func, mesh.getSymName());
      std::unique_ptr<ShardingPropagator> propagator =
          propagateSeeds(func, sizes);
      if (!propagator)
        return signalPassFailure();
      propagator->annotate(mesh.getSymName());
      handed.record(func, *propagator, mesh.getSymName());
    }
  }
};

} // namespace
