//===- PipelinePhases.cpp - a stage's training step as F, B (I, W) --------===//
//
// Splits each pipeline stage's training step into the functions a pipeline
// schedule runs at different times: the forward (F), which saves what the
// backward reads, and the backward (B), or, for zero-bubble schedules, the
// input's gradient (I) and the weights' gradients (W). See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"
#include "passes/parallel/Propagation.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "autopar-dist-pipeline-phases"

namespace autopar::dist {
#define GEN_PASS_DEF_PIPELINEPHASESPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

/// The ops of `body` that `roots` depend on (within `within`, if given).
llvm::DenseSet<Operation *>
sliceOf(ArrayRef<Value> roots,
        const llvm::DenseSet<Operation *> *within = nullptr) {
  llvm::DenseSet<Operation *> slice;
  SmallVector<Operation *> work;
  for (Value v : roots)
    if (Operation *def = v.getDefiningOp())
      work.push_back(def);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if ((within && !within->contains(op)) || !slice.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        work.push_back(def);
  }
  return slice;
}

struct PipelinePhasesPass
    : public dist::impl::PipelinePhasesPassBase<PipelinePhasesPass> {
  using PipelinePhasesPassBase::PipelinePhasesPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> steps;
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(DistDialect::kStageAttr) && !func.isExternal() &&
          llvm::any_of(llvm::seq(func.getNumResults()), [&](unsigned r) {
            return func.getResultAttr(r, nn::NNDialect::kGradAttr) ||
                   func.getResultAttr(r, nn::NNDialect::kInputGradAttr);
          }))
        steps.push_back(func);
    for (func::FuncOp step : steps)
      if (failed(split(step)))
        return signalPassFailure();
    if (!eraseSteps)
      return;
    SmallVector<func::FuncOp> unused;
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(DistDialect::kStageAttr) && !func->hasAttr(DistDialect::kPhaseAttr))
        unused.push_back(func);
    for (func::FuncOp func : unused)
      func.erase();
  }

  /// What a value is computed from: trainable parameters, graph inputs,
  /// other values of the stage (its input); constants and buffers count as
  /// none.
  enum Source : unsigned { Params = 1, Inputs = 2, Activations = 4 };

  static unsigned sourcesOf(func::FuncOp func, Operation *op,
                            llvm::DenseMap<Operation *, unsigned> &memo) {
    auto it = memo.find(op);
    if (it != memo.end())
      return it->second;
    unsigned sources = 0;
    for (Value v : op->getOperands()) {
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        unsigned i = arg.getArgNumber();
        if (func.getArgAttr(i, nn::NNDialect::kBufferAttr) ||
            func.getArgAttr(i, nn::NNDialect::kTrilAttr) ||
            func.getArgAttr(i, nn::NNDialect::kTriuAttr))
          continue;
        sources |= func.getArgAttr(i, nn::NNDialect::kInputAttr) ? Inputs
                   : func.getArgAttr(i, nn::NNDialect::kParamAttr)
                       ? Params
                       : Activations;
      } else {
        sources |= sourcesOf(func, v.getDefiningOp(), memo);
      }
    }
    memo[op] = sources;
    return sources;
  }

  /// Values computed from graph inputs, constants and buffers alone (masks)
  /// or from parameters, constants and buffers alone (a weight's transpose,
  /// a cast of it): the phases that read them recompute them rather than
  /// saving a copy per micro-batch in flight.
  static bool isRecomputable(func::FuncOp func, Operation *op,
                             llvm::DenseMap<Operation *, unsigned> &memo) {
    unsigned sources = sourcesOf(func, op, memo);
    return !(sources & Activations) && sources != (Params | Inputs);
  }

  LogicalResult split(func::FuncOp step) {
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    std::string base = step.getSymName().str();
    // F: what the stage's output (or loss) depends on; B the rest.
    llvm::DenseSet<Operation *> forward = sliceOf({ret.getOperand(0)});
    SmallVector<unsigned> forwardResults = {0}, backwardResults, inputResults,
                          weightResults;
    for (unsigned r = 1; r < step.getNumResults(); ++r) {
      backwardResults.push_back(r);
      (step.getResultAttr(r, nn::NNDialect::kInputGradAttr) ? inputResults
                                                            : weightResults)
          .push_back(r);
    }
    llvm::DenseMap<Operation *, unsigned> memo;
    llvm::DenseSet<Operation *> &recompute = recomputable;
    recompute.clear();
    savedNames.clear();
    for (Operation *op : forward)
      if (isRecomputable(step, op, memo))
        recompute.insert(op);
    llvm::DenseSet<Operation *> backward;
    for (Operation &op : body.without_terminator())
      if (!forward.contains(&op))
        backward.insert(&op);
    int64_t savedCount = 0;
    if (failed(extract(step, forward, {}, forwardResults, base + "_f", "f",
                       savedCount, /*phase=*/"forward")))
      return failure();
    if (!splitWeights) {
      return extract(step, backward, recompute, backwardResults, base + "_b",
                     "", savedCount, "backward");
    }
    // I: what the input's gradient depends on among the backward ops; W
    // the rest. A value I computes and W reads is saved by I.
    SmallVector<Value> inputGrads;
    for (unsigned r : inputResults)
      inputGrads.push_back(ret.getOperand(r));
    llvm::DenseSet<Operation *> input = sliceOf(inputGrads, &backward);
    llvm::DenseSet<Operation *> weight;
    for (Operation *op : backward)
      if (!input.contains(op))
        weight.insert(op);
    int64_t inputSaved = 0;
    if (failed(extract(step, input, recompute, inputResults, base + "_i", "i",
                       inputSaved, "input")) ||
        failed(extract(step, weight, recompute, weightResults, base + "_w", "",
                       inputSaved, "weight")))
      return failure();
    return success();
  }

  /// Makes function `name` of `ops` (and the recomputable ops they read)
  /// returning `results` of `step`, then, where `savedPrefix` is set, the
  /// values of `ops` that later phases read (`nn.saved = "<prefix><n>"`).
  /// Its arguments: the step's arguments it reads, and a value an earlier
  /// phase saved (`nn.saved`, the same name) for each it reads.
  LogicalResult extract(func::FuncOp step,
                        const llvm::DenseSet<Operation *> &ops,
                        const llvm::DenseSet<Operation *> &recompute,
                        ArrayRef<unsigned> results, const std::string &name,
                        StringRef savedPrefix, int64_t &savedCount,
                        StringRef phase) {
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    MLIRContext *ctx = step.getContext();
    OpBuilder b(ctx);
    // The ops to clone: `ops` and the recomputable ones they read.
    llvm::DenseSet<Operation *> clone(ops.begin(), ops.end());
    SmallVector<Operation *> work(ops.begin(), ops.end());
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp();
            def && recompute.contains(def) && clone.insert(def).second)
          work.push_back(def);
    }
    // What they read from elsewhere: step arguments, or values of other
    // ops (saved by an earlier phase).
    llvm::SetVector<Value> args;
    llvm::SetVector<Value> received;
    for (Operation &op : body.without_terminator()) {
      if (!clone.contains(&op))
        continue;
      for (Value v : op.getOperands()) {
        if (isa<BlockArgument>(v))
          args.insert(v);
        else if (!clone.contains(v.getDefiningOp()))
          received.insert(v);
      }
    }
    for (unsigned r : results) {
      Value v = ret.getOperand(r);
      if (isa<BlockArgument>(v))
        args.insert(v);
      else if (!clone.contains(v.getDefiningOp()))
        received.insert(v);
    }
    // Values this phase computes that later phases read (and do not
    // recompute) or return: it saves them.
    llvm::SetVector<Value> saved;
    if (!savedPrefix.empty())
      for (Operation &op : body.without_terminator())
        if (ops.contains(&op) && !recomputable.contains(&op))
          for (Value r : op.getResults())
            if (llvm::any_of(r.getUses(), [&](OpOperand &use) {
                  Operation *user = use.getOwner();
                  return user == ret ? !llvm::is_contained(
                                           results, use.getOperandNumber())
                                     : !clone.contains(user);
                }))
              saved.insert(r);
    for (Value v : received)
      if (!savedNames.count(v))
        return step.emitError()
               << "pipeline " << phase << " phase reads a value no earlier "
               << "phase saves";

    SmallVector<Type> argTypes, resultTypes;
    SmallVector<DictionaryAttr> argAttrs, resultAttrs;
    SmallVector<BlockArgument> stepArgs;
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (args.contains(step.getArgument(i))) {
        stepArgs.push_back(step.getArgument(i));
        argTypes.push_back(step.getArgument(i).getType());
        argAttrs.push_back(step.getArgAttrDict(i) ? step.getArgAttrDict(i)
                                                  : b.getDictionaryAttr({}));
      }
    for (Value v : received) {
      argTypes.push_back(v.getType());
      argAttrs.push_back(savedAttrs(v, savedNames[v]));
    }
    for (unsigned r : results) {
      resultTypes.push_back(step.getResultTypes()[r]);
      resultAttrs.push_back(step.getResultAttrDict(r)
                                ? step.getResultAttrDict(r)
                                : b.getDictionaryAttr({}));
    }
    for (Value v : saved) {
      std::string key = (savedPrefix + Twine(savedCount++)).str();
      savedNames[v] = key;
      resultTypes.push_back(v.getType());
      resultAttrs.push_back(savedAttrs(v, key));
    }
    b.setInsertionPointAfter(step);
    auto func = func::FuncOp::create(b, step.getLoc(), name,
                                     b.getFunctionType(argTypes, resultTypes));
    func.setAllArgAttrs(argAttrs);
    func.setAllResultAttrs(resultAttrs);
    func->setAttr(DistDialect::kStageAttr, step->getAttr(DistDialect::kStageAttr));
    func->setAttr(DistDialect::kPhaseAttr, b.getStringAttr(phase));
    Block *entry = func.addEntryBlock();
    IRMapping map;
    for (auto [k, arg] : llvm::enumerate(stepArgs))
      map.map(arg, entry->getArgument(k));
    for (auto [k, v] : llvm::enumerate(received))
      map.map(v, entry->getArgument(stepArgs.size() + k));
    b.setInsertionPointToStart(entry);
    for (Operation &op : body.without_terminator())
      if (clone.contains(&op))
        b.clone(op, map);
    SmallVector<Value> out;
    for (unsigned r : results)
      out.push_back(map.lookup(ret.getOperand(r)));
    for (Value v : saved)
      out.push_back(map.lookup(v));
    func::ReturnOp::create(b, step.getLoc(), out);
    return success();
  }

  /// A saved value's attributes: its key and, when the step is laid out
  /// over a mesh (its ops carry dist.shardings), its layout there, its
  /// pending sums reduced (the phase that saves it reduces them) unless
  /// they include dp.
  static DictionaryAttr savedAttrs(Value v, StringRef key) {
    MLIRContext *ctx = v.getContext();
    Builder b(ctx);
    SmallVector<NamedAttribute> attrs = {
        b.getNamedAttr(nn::NNDialect::kSavedAttr, b.getStringAttr(key))};
    Operation *def = v.getDefiningOp();
    auto shardings =
        def ? def->getAttrOfType<ArrayAttr>(DistDialect::kShardingsAttr) : ArrayAttr();
    // A dist.shard annotation's result is laid out as it says.
    ShardingAttr attr;
    if (auto shard = dyn_cast_or_null<ShardOp>(def))
      attr = shard.getSharding();
    else if (shardings)
      attr = cast<ShardingAttr>(shardings[cast<OpResult>(v).getResultNumber()]);
    if (attr) {
      Layout l = Layout::fromAttr(attr);
      // A sum pending over dp (a part of a weight's gradient: the step
      // reduces it once, not every micro-batch) stays pending, over all
      // its axes; other pending sums are reduced.
      if (l.partialKind != ReductionKind::sum ||
          (!llvm::is_contained(l.partial, kDataAxis) &&
           !llvm::is_contained(l.partial, kReplicaAxis)))
        l.partial.clear();
      attrs.push_back(b.getNamedAttr(
          DistDialect::kShardingAttr,
          l.toAttr(ctx, attr.getMesh().getLeafReference().getValue())));
    }
    return b.getDictionaryAttr(attrs);
  }

  /// The name each saved value has.
  llvm::DenseMap<Value, std::string> savedNames;
  /// Forward ops a later phase recomputes instead of reading them saved.
  llvm::DenseSet<Operation *> recomputable;
};

} // namespace
