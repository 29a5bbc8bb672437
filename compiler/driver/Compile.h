//===- Compile.h - `autopar compile` ----------------------------*- C++ -*-===//

#ifndef AUTOPAR_COMPILER_DRIVER_COMPILE_H
#define AUTOPAR_COMPILER_DRIVER_COMPILE_H

#include "compiler/plan/Plan.h"
#include "compiler/program/ProgramWriter.h"
#include "frontends/onnx/OnnxImporter.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>

namespace autopar {

struct CompileOptions {
  std::string model;
  std::string plan;            // empty: defaults (one device, fp32, AdamW)
  /// The --plan and --deepspeed files in order, later keys overriding
  /// earlier ones (`plan` then names them all); empty: `plan` alone.
  std::vector<PlanLayer> planLayers;
  /// --world-size: the ranks a DeepSpeed config's batch triple is resolved
  /// over (0: from the file, else the plan's mesh).
  int64_t worldSize = 0;
  /// --print-plan: print the resolved plan and stop.
  bool printPlan = false;
  std::string target = "cpu";  // "cpu" | "cuda"
  /// CUDA target: CMAKE_CUDA_ARCHITECTURES of the program ("80;90a").
  std::string cudaArch = "80;90a";
  std::string outDir;
  bool build = true;           // run cmake + build the program
  /// Write plan.json and report.json only: no sources, weights or program,
  /// and no initializer is read (shape-only models, planning).
  bool reportOnly = false;
  /// Build OUTDIR/run, the graph's forward function alone (no autodiff, no
  /// optimizer), instead of the training program OUTDIR/train.
  bool forwardOnly = false;
  onnx_import::ImportOptions import;
  /// The plan itself instead of a file (the planner's candidates); `plan`
  /// still names it in errors when set.
  const Plan *planValue = nullptr;
};

/// `autopar compile`: writes the self-contained program directory OUTDIR
/// (sources, runtime, CMakeLists.txt, weights, plan.json, report.json) and
/// builds OUTDIR/train (OUTDIR/run with `forwardOnly`). On any error nothing
/// is left at OUTDIR.
int runCompileCommand(const CompileOptions &options);

/// What `autopar compile` does up to the end of its pipeline (the plan
/// checked, the model imported, the IR lowered), writing nothing; then
/// calls `use` with the final IR and what the report takes besides it.
/// False with `error` (one line, as `autopar compile` prints it after
/// "autopar: ") if a step fails or `use` returns false.
bool lowerModel(const CompileOptions &options,
                llvm::function_ref<bool(mlir::ModuleOp, const ProgramOptions &,
                                        std::string &error)>
                    use,
                std::string &error);

} // namespace autopar

#endif // AUTOPAR_COMPILER_DRIVER_COMPILE_H
