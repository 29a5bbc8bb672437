//===- ApplyPlan.cpp - the module's plan -> mesh and parameter marks ------===//
//
// Reads `autopar.plan` (compiler/PlanAttr.h) and writes the plan's mesh as
// a dist.mesh and its per-parameter decisions (frozen, no weight decay) as
// argument attributes, with each parameter's logical type, and marks the
// gathers of embedding tables with a padding row (nn.padding_idx).
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "compiler/PlanAttr.h"
#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "autopar-apply-plan"

namespace autopar::dist {
#define GEN_PASS_DEF_APPLYPLANPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

struct ApplyPlanPass : public dist::impl::ApplyPlanPassBase<ApplyPlanPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    Plan plan;
    std::string error;
    if (!readPlanAttr(module, plan, error))
      return fail(error);
    if (findMesh(module))
      return fail("the module already has a dist.mesh");

    OpBuilder b(ctx);
    b.setInsertionPointToStart(module.getBody());
    MeshOp::create(b, module.getLoc(), kMeshName,
                   b.getStrArrayAttr(SmallVector<StringRef>(kMeshAxes.begin(),
                                                            kMeshAxes.end())),
                   b.getDenseI64ArrayAttr(
                       meshAxisSizes(plan.meshDp, plan.meshTp, plan.meshPp)));

    std::vector<bool> frozenUsed(plan.frozen.size());
    bool anyParam = false, anyTrainable = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      for (unsigned i = 0; i < func.getNumArguments(); ++i) {
        auto name =
            func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
        if (!name)
          continue;
        anyParam = true;
        std::string n = name.getValue().str();
        bool frozen = false;
        for (auto [k, pattern] : llvm::enumerate(plan.frozen))
          if (globMatch(pattern, n))
            frozenUsed[k] = frozen = true;
        if (frozen)
          func.setArgAttr(i, nn::NNDialect::kFrozenAttr, b.getUnitAttr());
        if (globMatchAny(plan.optimizer.noDecay, n))
          func.setArgAttr(i, nn::NNDialect::kNoDecayAttr, b.getUnitAttr());
        Type type = func.getArgument(i).getType();
        func.setArgAttr(i, nn::NNDialect::kLogicalTypeAttr,
                        TypeAttr::get(type));
        anyTrainable |= !frozen &&
                        !func.getArgAttr(i, nn::NNDialect::kBufferAttr) &&
                        isa<FloatType>(cast<ShapedType>(type).getElementType());
      }
    }
    for (auto [k, used] : llvm::enumerate(frozenUsed))
      if (!used)
        return fail("frozen[" + std::to_string(k) + "]: \"" + plan.frozen[k] +
                    "\" matches no initializer of the model");
    if (anyParam && !anyTrainable && !plan.frozen.empty())
      return fail("frozen: every parameter of the model is frozen: nothing "
                  "to train");
    for (const auto &[glob, row] : plan.paddingIdx)
      if (!markPaddingIdx(module, glob, row))
        return;
  }

  /// Marks the gathers (along axis 0) of the parameters `glob` matches with
  /// nn.padding_idx = row; fails if it matches no such table or the row is
  /// outside one.
  bool markPaddingIdx(ModuleOp module, const std::string &glob, int64_t row) {
    std::string key = "padding_idx." + glob;
    bool matched = false;
    for (auto func : module.getOps<func::FuncOp>())
      for (unsigned i = 0; i < func.getNumArguments(); ++i) {
        auto name =
            func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
        if (!name || !globMatch(glob, name.getValue().str()))
          continue;
        BlockArgument table = func.getArgument(i);
        auto type = cast<RankedTensorType>(table.getType());
        bool gathered = false;
        for (Operation *user : table.getUsers()) {
          auto gather = dyn_cast<nn::GatherOp>(user);
          if (!gather || gather.getData() != table || gather.getAxis() != 0)
            continue;
          gathered = true;
          gather->setAttr(nn::NNDialect::kPaddingIdxAttr,
                          OpBuilder(user).getI64IntegerAttr(row));
        }
        if (!gathered)
          continue;
        if (row >= type.getDimSize(0)) {
          fail(key + ": row " + std::to_string(row) + " is outside '" +
               name.getValue().str() + "' (" +
               std::to_string(type.getDimSize(0)) + " rows)");
          return false;
        }
        matched = true;
      }
    if (!matched)
      fail(key + ": matches no embedding table (a parameter that a Gather "
                 "reads rows of)");
    return matched;
  }

  void fail(const std::string &message) {
    getOperation().emitError() << message;
    signalPassFailure();
  }
};

} // namespace
