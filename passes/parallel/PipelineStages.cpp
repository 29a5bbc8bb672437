//===- PipelineStages.cpp - one function per pipeline stage ---------------===//
//
// Turns a forward whose ops carry `dist.stage` (autopar-dist-pipeline-split)
// into one function per stage that reads the previous stage's output and
// returns its own. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "autopar-dist-pipeline-stages"

namespace autopar::dist {
#define GEN_PASS_DEF_PIPELINESTAGESPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

std::optional<int64_t> stageOf(Operation *op) {
  if (auto s = op->getAttrOfType<IntegerAttr>(DistDialect::kStageAttr))
    return s.getInt();
  return std::nullopt;
}

struct PipelineStagesPass
    : public dist::impl::PipelineStagesPassBase<PipelineStagesPass> {
  using PipelineStagesPassBase::PipelineStagesPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(function);
    if (!func || func.isExternal()) {
      module.emitError() << "no function @" << function << " to split";
      return signalPassFailure();
    }
    int64_t stages = 0;
    func.walk([&](Operation *op) {
      if (std::optional<int64_t> s = stageOf(op))
        stages = std::max(stages, *s + 1);
    });
    if (stages < 2)
      return;
    Operation *after = func;
    for (int64_t s = 0; s < stages; ++s)
      if (failed(extract(func, s, stages, after)))
        return signalPassFailure();
  }

  LogicalResult extract(func::FuncOp func, int64_t s, int64_t stages,
                        Operation *&after) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    auto isStage = [&](Operation *op, auto pred) {
      std::optional<int64_t> t = stageOf(op);
      return t && pred(*t);
    };
    // The ops of the stage and the unstaged ones they read (masks,
    // position ids: each stage computes its own).
    llvm::SetVector<Operation *> ops;
    SmallVector<Operation *> work;
    for (Operation &op : body.without_terminator())
      if (isStage(&op, [&](int64_t t) { return t == s; }))
        work.push_back(&op);
    // The last stage also computes what the function returns.
    if (s == stages - 1)
      for (Value v : ret.getOperands())
        if (Operation *def = v.getDefiningOp(); def && !stageOf(def))
          work.push_back(def);
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!ops.insert(op))
        continue;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp(); def && !stageOf(def))
          work.push_back(def);
    }
    // The activation it receives: a value of an earlier stage.
    llvm::SetVector<Value> received, sent;
    for (Operation *op : ops)
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp();
            def && isStage(def, [&](int64_t t) { return t < s; }))
          received.insert(v);
    for (Operation *op : ops)
      if (isStage(op, [&](int64_t t) { return t == s; }))
        for (Value r : op->getResults())
          for (OpOperand &use : r.getUses()) {
            Operation *user = use.getOwner();
            if (isStage(user, [&](int64_t t) { return t > s; }) ||
                (user == ret && s < stages - 1))
              sent.insert(r);
          }
    if (received.size() != (s == 0 ? 0u : 1u) ||
        (s < stages - 1 && sent.size() != 1))
      return func.emitError()
             << "pipeline stage " << s << " receives " << received.size()
             << " and sends " << sent.size()
             << " activations; a stage boundary must be crossed by one";
    if (s == stages - 1)
      for (Value v : ret.getOperands())
        if (Operation *def = v.getDefiningOp();
            def && isStage(def, [&](int64_t t) { return t < s; }))
          return func.emitError() << "pipeline stage " << s
                                  << " cannot return a value of an earlier "
                                     "stage";

    // The stage's function: the arguments it reads, in order, then the
    // received activation.
    OpBuilder b(func.getContext());
    b.setInsertionPointAfter(after);
    SmallVector<unsigned> args;
    for (BlockArgument arg : body.getArguments())
      if (llvm::any_of(arg.getUsers(),
                       [&](Operation *user) { return ops.contains(user); }) ||
          (s == stages - 1 && llvm::is_contained(ret.getOperands(), arg)))
        args.push_back(arg.getArgNumber());
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    for (unsigned i : args) {
      argTypes.push_back(func.getArgument(i).getType());
      argAttrs.push_back(func.getArgAttrDict(i) ? func.getArgAttrDict(i)
                                                : b.getDictionaryAttr({}));
    }
    if (s > 0) {
      argTypes.push_back(received[0].getType());
      argAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(nn::NNDialect::kStageInputAttr, b.getUnitAttr())));
    }
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    if (s < stages - 1) {
      results.push_back(sent[0]);
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          nn::NNDialect::kOutputAttr, b.getStringAttr(kStageOutputName))));
    } else {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        results.push_back(v);
        resultAttrs.push_back(func.getResultAttrDict(i)
                                  ? func.getResultAttrDict(i)
                                  : b.getDictionaryAttr({}));
      }
    }
    SmallVector<Type> resultTypes;
    for (Value v : results)
      resultTypes.push_back(v.getType());
    auto stage = func::FuncOp::create(b, func.getLoc(),
                                      function + "_stage" + std::to_string(s),
                                      b.getFunctionType(argTypes, resultTypes));
    stage.setAllArgAttrs(argAttrs);
    stage.setAllResultAttrs(resultAttrs);
    stage->setAttr(DistDialect::kStageAttr, b.getI64IntegerAttr(s));
    after = stage;
    Block *entry = stage.addEntryBlock();
    IRMapping map;
    for (auto [k, i] : llvm::enumerate(args))
      map.map(func.getArgument(i), entry->getArgument(k));
    if (s > 0)
      map.map(received[0], entry->getArguments().back());
    b.setInsertionPointToStart(entry);
    for (Operation &op : body.without_terminator())
      if (ops.contains(&op))
        b.clone(op, map);
    SmallVector<Value> mapped;
    for (Value v : results)
      mapped.push_back(map.lookup(v));
    func::ReturnOp::create(b, func.getLoc(), mapped);
    return success();
  }
};

} // namespace
