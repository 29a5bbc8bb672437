//===- PropagateSharding.cpp - shardings for every value ------------------===//

#include "passes/parallel/Passes.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "autopar-dist-propagate"

namespace autopar::dist {
#define GEN_PASS_DEF_PROPAGATESHARDINGPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

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
    MLIRContext *ctx = module.getContext();
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      DenseMap<Value, Layout> layouts;
      for (BlockArgument arg : func.getArguments()) {
        auto attr = func.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(),
                                                        kShardingAttr);
        layouts[arg] =
            attr ? Layout::fromAttr(attr)
                 : Layout::replicated(
                       cast<RankedTensorType>(arg.getType()).getRank());
      }
      for (Operation &op : func.getBody().front()) {
        if (op.getNumResults() == 0)
          continue;
        SmallVector<Layout> operands;
        for (Value v : op.getOperands())
          operands.push_back(layouts.lookup(v));
        Decision d = decide(&op, operands, sizes);
        SmallVector<Attribute> attrs;
        for (auto [r, l] : llvm::zip(op.getResults(), d.results)) {
          layouts[r] = l;
          attrs.push_back(l.toAttr(ctx, mesh.getSymName()));
        }
        op.setAttr(kShardingsAttr, ArrayAttr::get(ctx, attrs));
      }
    }
  }
};

} // namespace
