//===- DropoutRatio.cpp - the plan's dropout.ratio ------------------------===//
//
// Sets the ratio of every nn.dropout, or removes them all (ratio 0). See
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/Passes.h"

#include "dialects/nn/NNOps.h"

#define DEBUG_TYPE "autopar-dropout-ratio"

namespace autopar {
#define GEN_PASS_DEF_DROPOUTRATIOPASS
#include "passes/autodiff/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

namespace {

struct DropoutRatioPass
    : public autopar::impl::DropoutRatioPassBase<DropoutRatioPass> {
  using DropoutRatioPassBase::DropoutRatioPassBase;

  void runOnOperation() override {
    if (ratio < 0)
      return;
    if (!(ratio < 1)) {
      getOperation().emitError()
          << "autopar-dropout-ratio: ratio must be in [0, 1), got " << ratio;
      return signalPassFailure();
    }
    Builder b(&getContext());
    getOperation().walk([&](nn::DropoutOp d) {
      if (ratio == 0) {
        d.getResult().replaceAllUsesWith(d.getInput());
        d.erase();
        return;
      }
      d.setRatioAttr(b.getF64FloatAttr(ratio));
    });
  }
};

} // namespace
