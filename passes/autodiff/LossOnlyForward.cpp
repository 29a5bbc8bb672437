//===- LossOnlyForward.cpp - the forward function returns the loss --------===//
//
// After differentiation the training program keeps the forward function
// for evaluation (`train --eval-steps`), where only the loss is read and
// dropout is the identity.
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/Passes.h"

#include "dialects/nn/NNOps.h"

#define DEBUG_TYPE "autopar-loss-only-forward"

namespace autopar {
#define GEN_PASS_DEF_LOSSONLYFORWARDPASS
#include "passes/autodiff/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

namespace {

struct LossOnlyForwardPass
    : public autopar::impl::LossOnlyForwardPassBase<LossOnlyForwardPass> {
  using LossOnlyForwardPassBase::LossOnlyForwardPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = module.lookupSymbol<func::FuncOp>(forward);
    if (!f || f.isExternal()) {
      module.emitError() << "no function @" << forward << " with a body";
      return signalPassFailure();
    }
    FailureOr<unsigned> lossIndex = findLoss(f, loss);
    if (failed(lossIndex))
      return signalPassFailure();
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    Value lossValue = ret.getOperand(*lossIndex);
    DictionaryAttr lossAttrs = f.getResultAttrDict(*lossIndex);
    ret->setOperands(lossValue);
    f.setType(FunctionType::get(&getContext(), f.getArgumentTypes(),
                                lossValue.getType()));
    f.setAllResultAttrs(ArrayRef<DictionaryAttr>{lossAttrs});
    // Evaluation runs the model in eval mode: dropout is the identity.
    f.walk([](nn::DropoutOp d) {
      d.getResult().replaceAllUsesWith(d.getInput());
      d.erase();
    });
  }
};

} // namespace
