//===- RestoreUntrainedPrecision.cpp - untrained parameters keep f32 ------===//
//
// Mixed precision lowers every trainable parameter before autodiff knows
// which ones get a gradient; those that get none have no f32 master in
// the optimizer, so they are stored in their logical type and cast down
// where they are used.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "autopar-restore-untrained-precision"

namespace autopar {
#define GEN_PASS_DEF_RESTOREUNTRAINEDPRECISIONPASS
#include "passes/lowering/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

namespace {

struct RestoreUntrainedPrecisionPass
    : public autopar::impl::RestoreUntrainedPrecisionPassBase<
          RestoreUntrainedPrecisionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::StringSet<> trained;
    for (auto f : module.getOps<func::FuncOp>())
      for (unsigned r = 0; r < f.getNumResults(); ++r)
        if (auto p =
                f.getResultAttrOfType<StringAttr>(r, nn::NNDialect::kGradAttr))
          trained.insert(p.getValue());
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      Block &entry = f.getBody().front();
      OpBuilder b(&getContext());
      b.setInsertionPointToStart(&entry);
      for (unsigned i = 0; i < f.getNumArguments(); ++i) {
        auto name =
            f.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
        auto logical =
            f.getArgAttrOfType<TypeAttr>(i, nn::NNDialect::kLogicalTypeAttr);
        BlockArgument arg = f.getArgument(i);
        if (!name || !logical || trained.contains(name.getValue()) ||
            arg.getType() == logical.getValue())
          continue;
        // The logical type's precision; its shape may be another view of
        // the same elements (a fused projection's weight split per part)
        // or lack the zeros of a padded vocabulary.
        auto low = cast<RankedTensorType>(arg.getType());
        auto model = cast<RankedTensorType>(logical.getValue());
        if (model.getNumElements() > low.getNumElements()) {
          f.emitError() << "parameter '" << name.getValue() << "' of type "
                        << low << " cannot hold its logical type " << model;
          return signalPassFailure();
        }
        auto full = low.clone(model.getElementType());
        if (full == low)
          continue;
        arg.setType(full);
        auto down = nn::CastOp::create(b, f.getLoc(), low, arg);
        arg.replaceAllUsesExcept(down, down);
      }
      f.setType(FunctionType::get(&getContext(), entry.getArgumentTypes(),
                                  f.getResultTypes()));
    }
  }
};

} // namespace
