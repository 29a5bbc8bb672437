//===- Recompute.cpp - activation recomputation ---------------------------===//
//
// Backward ops read copies of forward values made in the backward pass, so
// the forward values die early (activation checkpointing). See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>

#define DEBUG_TYPE "autopar-recompute"

namespace autopar {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "passes/autodiff/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

namespace {

/// Chains of cheap ops longer than this keep their value (selective).
constexpr int64_t kMaxChain = 6;

/// Ops that cost little next to a matmul: elementwise, norms, softmax,
/// reductions. Not views (reshapes, transposes, splits): they are free in
/// the forward pass (the lowering folds them into their readers), a copy
/// of one may not be.
bool isCheap(Operation *op) {
  return isa<nn::NegOp, nn::SqrtOp, nn::ErfOp, nn::TanhOp, nn::ExpOp, nn::LogOp,
             nn::ReciprocalOp, nn::ReluOp, nn::SigmoidOp, nn::IdentityOp,
             nn::GeluOp, nn::AddOp, nn::SubOp, nn::MulOp, nn::DivOp, nn::PowOp,
             nn::CompareOp, nn::WhereOp, nn::CastOp, nn::LayerNormOp,
             nn::SoftmaxOp, nn::ReduceSumOp, nn::ReduceMeanOp, nn::ReduceMaxOp>(
      op);
}

struct RecomputePass : public autopar::impl::RecomputePassBase<RecomputePass> {
  using RecomputePassBase::RecomputePassBase;

  void runOnOperation() override {
    if (mode != "none" && mode != "selective" && mode != "full") {
      getOperation().emitError() << "autopar-recompute: unknown mode '" << mode
                                 << "' (expected none, selective or full)";
      return signalPassFailure();
    }
    if (mode == "none")
      return;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && returnsGradients(func))
        recompute(func);
  }

  static bool returnsGradients(func::FuncOp func) {
    for (unsigned r = 0; r < func.getNumResults(); ++r)
      if (func.getResultAttr(r, nn::NNDialect::kGradAttr))
        return true;
    return false;
  }

  void recompute(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    // The forward: what the non-gradient results depend on (a pipeline
    // stage's input gradient is a gradient too).
    llvm::DenseSet<Operation *> forward;
    SmallVector<Operation *> work;
    for (OpOperand &o : ret->getOpOperands())
      if (!func.getResultAttr(o.getOperandNumber(), nn::NNDialect::kGradAttr) &&
          !func.getResultAttr(o.getOperandNumber(),
                              nn::NNDialect::kInputGradAttr))
        if (Operation *def = o.get().getDefiningOp())
          work.push_back(def);
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!forward.insert(op).second)
        continue;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp())
          work.push_back(def);
    }
    // Activations: forward values computed from a parameter.
    llvm::DenseSet<Value> activations;
    auto isActivation = [&](Value v) {
      if (auto arg = dyn_cast<BlockArgument>(v))
        return func.getArgAttr(arg.getArgNumber(), nn::NNDialect::kParamAttr) !=
               nullptr;
      return activations.contains(v);
    };
    SmallVector<Operation *> forwardOps;
    for (Operation &op : body)
      if (forward.contains(&op)) {
        forwardOps.push_back(&op);
        if (llvm::any_of(op.getOperands(), isActivation))
          for (Value r : op.getResults())
            activations.insert(r);
      }

    llvm::DenseSet<Operation *> recomputed =
        mode == "full" ? chooseFull(forwardOps, activations)
                       : chooseSelective(forwardOps, activations);

    // Backward ops read copies, made before the first that needs them.
    llvm::DenseMap<Operation *, Operation *> copies;
    OpBuilder b(func.getContext());
    std::function<Operation *(Operation *)> copyOf = [&](Operation *op) {
      if (Operation *c = copies.lookup(op))
        return c;
      IRMapping map;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp(); def && recomputed.contains(def))
          map.map(v,
                  copyOf(def)->getResult(cast<OpResult>(v).getResultNumber()));
      Operation *c = b.clone(*op, map);
      c->setAttr(nn::NNDialect::kRecomputedAttr, b.getUnitAttr());
      copies[op] = c;
      return c;
    };
    SmallVector<Operation *> backward;
    for (Operation &op : body)
      if (!forward.contains(&op) && !isa<func::ReturnOp>(op))
        backward.push_back(&op);
    for (Operation *op : backward) {
      b.setInsertionPoint(op);
      for (OpOperand &operand : op->getOpOperands()) {
        Operation *def = operand.get().getDefiningOp();
        if (def && recomputed.contains(def))
          operand.set(copyOf(def)->getResult(
              cast<OpResult>(operand.get()).getResultNumber()));
      }
    }
  }

  /// Cheap ops in chains of at most kMaxChain from kept values.
  static llvm::DenseSet<Operation *>
  chooseSelective(ArrayRef<Operation *> forwardOps,
                  const llvm::DenseSet<Value> &activations) {
    llvm::DenseSet<Operation *> chosen;
    llvm::DenseMap<Operation *, int64_t> chain;
    for (Operation *op : forwardOps) {
      if (!isCheap(op) || op->getNumResults() == 0 ||
          !activations.contains(op->getResult(0)))
        continue;
      int64_t depth = 1;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp(); def && chosen.contains(def))
          depth = std::max(depth, chain.lookup(def) + 1);
      if (depth > kMaxChain)
        continue;
      chosen.insert(op);
      chain[op] = depth;
    }
    return chosen;
  }

  /// Everything but the checkpoints: the activations that are the only
  /// one live at some point of the forward pass where the point before
  /// had several (a join: the residual add ending a block), and the first
  /// such activation (a chain of single live values needs only its
  /// first).
  static llvm::DenseSet<Operation *>
  chooseFull(ArrayRef<Operation *> forwardOps,
             const llvm::DenseSet<Value> &activations) {
    llvm::DenseMap<Operation *, size_t> position;
    for (auto [i, op] : llvm::enumerate(forwardOps))
      position[op] = i;
    // The last forward position reading each activation.
    llvm::DenseMap<Value, size_t> lastUse;
    for (auto [i, op] : llvm::enumerate(forwardOps))
      for (Value v : op->getOperands())
        if (activations.contains(v))
          lastUse[v] = i;
    // Sweep: the activations live after op i (read by a later forward op).
    llvm::DenseSet<Value> live, checkpoints;
    size_t before = 0;
    for (auto [i, op] : llvm::enumerate(forwardOps)) {
      for (Value v : op->getOperands())
        if (lastUse.lookup(v) == i)
          live.erase(v);
      for (Value r : op->getResults())
        if (activations.contains(r) && lastUse.count(r))
          live.insert(r);
      if (live.size() == 1 && (before != 1 || checkpoints.empty()))
        checkpoints.insert(*live.begin());
      before = live.size();
    }
    llvm::DenseSet<Operation *> chosen;
    for (Operation *op : forwardOps)
      if (op->getNumResults() > 0 && activations.contains(op->getResult(0)) &&
          llvm::none_of(op->getResults(),
                        [&](Value r) { return checkpoints.contains(r); }))
        chosen.insert(op);
    return chosen;
  }
};

} // namespace
