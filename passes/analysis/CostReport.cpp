//===- CostReport.cpp - prints the cost analysis of each function ---------===//

#include "passes/analysis/CostAnalysis.h"
#include "passes/analysis/Passes.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "autopar-cost-report"

namespace autopar {
#define GEN_PASS_DEF_COSTREPORTPASS
#include "passes/analysis/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

namespace {

struct CostReportPass
    : public autopar::impl::CostReportPassBase<CostReportPass> {
  void runOnOperation() override {
    llvm::raw_ostream &os = llvm::outs();
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      FunctionCost cost = analyzeCost(func);
      os << "func @" << func.getSymName() << "\n"
         << "  flops: " << cost.flops << "\n"
         << "  bytes: params " << cost.paramBytes << ", inputs "
         << cost.inputBytes << ", results " << cost.resultBytes << ", arena "
         << cost.arenaBytes << "\n";
      for (const auto &[key, bytes] : cost.commBytes)
        os << "  " << key.first << " [" << key.second
           << "]: " << llvm::format("%.17g", bytes) << " bytes\n";
    }
    markAllAnalysesPreserved();
  }
};

} // namespace
