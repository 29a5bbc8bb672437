//===- Compile.h - `autopar compile` ----------------------------*- C++ -*-===//

#ifndef AUTOPAR_COMPILER_COMPILE_H
#define AUTOPAR_COMPILER_COMPILE_H

#include "frontends/onnx/OnnxImporter.h"

#include <string>

namespace autopar {

struct CompileOptions {
  std::string model;
  std::string plan;            // empty: defaults (one device, fp32, AdamW)
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
};

/// `autopar compile`: writes the self-contained program directory OUTDIR
/// (sources, runtime, CMakeLists.txt, weights, plan.json, report.json) and
/// builds OUTDIR/train (OUTDIR/run with `forwardOnly`). On any error nothing
/// is left at OUTDIR.
int runCompileCommand(const CompileOptions &options);

} // namespace autopar

#endif // AUTOPAR_COMPILER_COMPILE_H
