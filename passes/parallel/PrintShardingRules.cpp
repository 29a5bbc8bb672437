//===- PrintShardingRules.cpp - prints every op's sharding rule -----------===//

#include "passes/parallel/Passes.h"

#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "autopar-print-sharding-rules"

namespace autopar::dist {
#define GEN_PASS_DEF_PRINTSHARDINGRULESPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

struct PrintShardingRulesPass
    : public dist::impl::PrintShardingRulesPassBase<PrintShardingRulesPass> {
  void getDependentDialects(DialectRegistry &registry) const override {
    registerShardingRuleModels(registry);
  }

  void runOnOperation() override {
    llvm::raw_ostream &os = llvm::outs();
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      os << "func @" << func.getSymName() << "\n";
      func.walk([&](Operation *op) {
        if (op == func.getOperation())
          return;
        os << "  " << op->getName() << ": ";
        FailureOr<OpShardingRule> rule = shardingRuleOf(op);
        if (failed(rule))
          os << "none";
        else
          rule->print(os, op);
        os << "\n";
      });
    }
    markAllAnalysesPreserved();
  }
};

} // namespace
