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
             nn::GeluOp, nn::DropoutOp, nn::AddOp, nn::SubOp, nn::MulOp,
             nn::DivOp, nn::PowOp, nn::CompareOp, nn::WhereOp, nn::CastOp,
             nn::LayerNormOp, nn::SoftmaxOp, nn::ReduceSumOp, nn::ReduceMeanOp,
             nn::ReduceMaxOp>(op);
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
        mode == "full" ? chooseFull(func, forwardOps, activations)
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

  /// Megatron-LM's full recompute: each layer keeps its input only and is
  /// recomputed whole when the backward pass reaches it. The cuts are the
  /// points of the forward pass where a single value of the residual stream
  /// is live: an activation computed from the data, or a float argument that
  /// is not a parameter (a pipeline stage's input, live from the start). A
  /// layer begins at a cut followed by an attention (nn.attention, or the
  /// softmax of an unfused one) before the next cut, and the last layer ends at
  /// the last join after its start (a cut where the point before had several
  /// live: the residual add ending a block). What precedes the first layer
  /// (embeddings) and follows the last (final norm, head, loss) is kept, as
  /// Megatron-LM keeps it. A model without attention: the first cut and
  /// every join are checkpoints, each block between them recomputed.
  static llvm::DenseSet<Operation *>
  chooseFull(func::FuncOp func, ArrayRef<Operation *> forwardOps,
             const llvm::DenseSet<Value> &activations) {
    // The stream: activations that depend on the data (not a parameter's
    // transpose or cast, which a layer reads but does not pass on) and the
    // float data arguments.
    llvm::DenseSet<Value> data, stream;
    for (BlockArgument arg : func.getArguments())
      if (!func.getArgAttr(arg.getArgNumber(), nn::NNDialect::kParamAttr)) {
        data.insert(arg);
        if (isa<FloatType>(getElementTypeOrSelf(arg.getType())))
          stream.insert(arg);
      }
    for (Operation *op : forwardOps)
      if (llvm::any_of(op->getOperands(),
                       [&](Value v) { return data.contains(v); }))
        for (Value r : op->getResults()) {
          data.insert(r);
          if (activations.contains(r))
            stream.insert(r);
        }
    // The last forward position reading each value of the stream (the
    // function's results: after the last).
    const int64_t n = forwardOps.size();
    llvm::DenseMap<Value, int64_t> lastUse;
    for (auto [i, op] : llvm::enumerate(forwardOps))
      for (Value v : op->getOperands())
        if (stream.contains(v))
          lastUse[v] = i;
    for (Value v : func.getBody().front().getTerminator()->getOperands())
      if (stream.contains(v))
        lastUse[v] = n;
    // Sweep: the values live after op i (read by a later forward op);
    // position -1 is the function's entry.
    struct Cut {
      int64_t position;
      Value value;
      bool join;
    };
    SmallVector<Cut> cuts;
    llvm::DenseSet<Value> live;
    for (BlockArgument arg : func.getArguments())
      if (lastUse.count(arg))
        live.insert(arg);
    if (live.size() == 1)
      cuts.push_back({-1, *live.begin(), true});
    size_t before = live.size();
    for (auto [i, op] : llvm::enumerate(forwardOps)) {
      for (Value v : op->getOperands())
        if (lastUse.count(v) && lastUse[v] == int64_t(i))
          live.erase(v);
      for (Value r : op->getResults())
        if (lastUse.count(r))
          live.insert(r);
      if (live.size() == 1)
        cuts.push_back({int64_t(i), *live.begin(), before != 1});
      before = live.size();
    }
    auto isAttention = [](Operation *op) {
      return isa<nn::AttentionOp, nn::SoftmaxOp>(op);
    };
    llvm::DenseSet<Value> checkpoints;
    int64_t first = n, last = -1;
    for (auto [k, cut] : llvm::enumerate(cuts)) {
      int64_t end = k + 1 < cuts.size() ? cuts[k + 1].position : n - 1;
      if (llvm::any_of(forwardOps.slice(cut.position + 1, end - cut.position),
                       isAttention)) {
        checkpoints.insert(cut.value);
        first = std::min(first, cut.position);
        last = cut.position;
      }
    }
    if (checkpoints.empty() && !cuts.empty()) {
      // No attention: the first cut and every join.
      for (const Cut &cut : cuts)
        if (cut.join || checkpoints.empty())
          checkpoints.insert(cut.value);
      first = last = cuts.front().position;
    }
    // The last layer ends at the last join after its start.
    const Cut *end = nullptr;
    for (const Cut &cut : cuts)
      if (cut.join && cut.position > last)
        end = &cut;
    if (end) {
      last = end->position;
      checkpoints.insert(end->value);
    }
    if (first >= last)
      return {};
    llvm::DenseSet<Operation *> chosen;
    for (Operation *op : forwardOps.slice(first + 1, last - first))
      if (op->getNumResults() > 0 && activations.contains(op->getResult(0)) &&
          llvm::none_of(op->getResults(),
                        [&](Value r) { return checkpoints.contains(r); }))
        chosen.insert(op);
    return chosen;
  }
};

} // namespace
