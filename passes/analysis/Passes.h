//===- Passes.h - analysis passes -------------------------------*- C++ -*-===//

#ifndef AUTOPAR_PASSES_ANALYSIS_PASSES_H
#define AUTOPAR_PASSES_ANALYSIS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/raw_ostream.h"

namespace autopar {

/// Prints the summary that --autopar-model-summary prints for `module`.
void printModelSummary(mlir::ModuleOp module, llvm::raw_ostream &os);

#define GEN_PASS_DECL
#include "passes/analysis/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/analysis/Passes.h.inc"


} // namespace autopar

#endif // AUTOPAR_PASSES_ANALYSIS_PASSES_H
