//===- ProgramWriter.h - the program directory from the IR ------*- C++ -*-===//
//
// Writes what `autopar compile` puts in OUTDIR from the IR the pipeline
// produced: the generated source with its tables (tensors, inputs, mesh,
// optimizer; all read from the IR), the runtime sources, the program's
// CMakeLists.txt (from runtime/program/), weights.bin and weights.json, the
// IR files (input.mlir, pipeline.txt and the final IR) and the model;
// compiler/program/Report.h writes plan.json and report.json beside them.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PROGRAM_PROGRAMWRITER_H
#define AUTOPAR_COMPILER_PROGRAM_PROGRAMWRITER_H

#include "compiler/program/ProgramStep.h"

#include <string>

namespace autopar {

/// Writes the program directory `dir` (which exists) from `module`, the IR
/// after the pipeline. On failure returns false and sets `error` to one
/// line.
bool writeProgram(mlir::ModuleOp module, const ProgramOptions &options,
                  const std::string &dir, std::string &error);

} // namespace autopar

#endif // AUTOPAR_COMPILER_PROGRAM_PROGRAMWRITER_H
