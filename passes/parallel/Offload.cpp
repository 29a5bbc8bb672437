//===- Offload.cpp - ZeRO-Offload: gradients to host memory ---------------===//
//
// Marks the reduced gradients that leave the step for the host optimizer;
// the runtime (runtime/train/TensorStore.cpp, ModelInfo::offload) moves
// them.
//

#include "passes/parallel/Passes.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "autopar-dist-offload"

namespace autopar::dist {
#define GEN_PASS_DEF_OFFLOADPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

struct OffloadPass : public dist::impl::OffloadPassBase<OffloadPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto target = module->getAttrOfType<StringAttr>(DistDialect::kOffloadAttr);
    if (!target)
      return;
    if (target.getValue() != "cpu") {
      module.emitError() << "unknown offload target '" << target.getValue()
                         << "' (expected cpu)";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
      OpBuilder b(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        if (!func.getResultAttr(operand.getOperandNumber(),
                                nn::NNDialect::kGradAttr))
          continue;
        Value v = operand.get();
        if (Operation *def = v.getDefiningOp())
          b.setInsertionPointAfter(def);
        else
          b.setInsertionPointToStart(&func.getBody().front());
        operand.set(OffloadOp::create(b, ret.getLoc(), v));
      }
    }
  }
};

} // namespace
