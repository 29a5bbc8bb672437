//===- Pipeline.h - the compile pipelines -----------------------*- C++ -*-===//
//
// `autopar compile` is one pass pipeline from the imported IR (with the plan
// on it as `autopar.plan`) to the IR the program writer emits. The pipeline
// is assembled here and nowhere else, from the plan and the target; the
// driver runs it, prints it to OUTDIR/pipeline.txt, and `autopar-opt`
// replays it:
//
//   autopar-opt OUTDIR/input.mlir --pass-pipeline="$(cat OUTDIR/pipeline.txt)"
//
// gives OUTDIR/train_step.mlir byte for byte. The same pipeline is also
// registered as one pass, `autopar-train-pipeline{target=...}`, which reads
// the plan from the module it runs on (and `autopar-forward-pipeline` for
// forward-only programs).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PLAN_PIPELINE_H
#define AUTOPAR_COMPILER_PLAN_PIPELINE_H

#include "compiler/plan/Plan.h"

#include "mlir/Pass/PassManager.h"

namespace autopar {

/// Adds the training pipeline to `pm` (anchored on builtin.module): plan
/// marks and mesh, attention fusion, mixed precision, autodiff, the
/// distribution passes of the plan, then lowering for `target` (cpu or
/// cuda). Only the pass list and its options depend on `plan`; the passes
/// read the rest from the module's `autopar.plan`.
void buildTrainPipeline(mlir::OpPassManager &pm, const Plan &plan,
                        llvm::StringRef target);

/// Adds the forward-only pipeline (attention fusion and lowering; no plan,
/// no autodiff) to `pm`.
void buildForwardPipeline(mlir::OpPassManager &pm, llvm::StringRef target);

/// Registers `autopar-train-pipeline` and `autopar-forward-pipeline`.
void registerPipelines();

} // namespace autopar

#endif // AUTOPAR_COMPILER_PLAN_PIPELINE_H
