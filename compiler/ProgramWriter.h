//===- ProgramWriter.h - the program directory from the IR ------*- C++ -*-===//
//
// Writes what `autopar compile` puts in OUTDIR from the IR the pipeline
// produced: the generated source with its tables (tensors, inputs, mesh,
// optimizer; all read from the IR), the runtime sources, the program's
// CMakeLists.txt (from runtime/program/), weights.bin and weights.json, the
// IR files (input.mlir, pipeline.txt and the final IR), the model, and
// through Report.h plan.json and report.json.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PROGRAMWRITER_H
#define AUTOPAR_COMPILER_PROGRAMWRITER_H

#include "compiler/Plan.h"
#include "compiler/ProgramIR.h"
#include "frontends/onnx/OnnxImporter.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace autopar {

/// What the program writer takes besides the final IR.
struct ProgramOptions {
  /// The ONNX file: copied to OUTDIR/model.onnx, named in the sources.
  std::string model;
  std::string target = "cpu"; // "cpu" | "cuda"
  /// CUDA target: CMAKE_CUDA_ARCHITECTURES of the program.
  std::string cudaArch;
  /// OUTDIR/run (the graph's function) instead of OUTDIR/train.
  bool forwardOnly = false;
  /// The initializers' bytes (weights.bin).
  const onnx_import::WeightStore *weights = nullptr;
  /// Forward-only programs: the graph inputs in order, and those fixed at
  /// compile time.
  std::vector<std::string> graphInputs;
  const llvm::StringMap<onnx_import::HostTensor> *inputValues = nullptr;
  /// The IR the pipeline started from, and the pipeline, as text.
  std::string inputIR, pipelineText;
  /// Training programs: the bound of each graph input's values (by name),
  /// read off the IR the pipeline started from (inputValueBound): the
  /// final IR's tables and classes are the ranks' blocks, maybe padded.
  llvm::StringMap<int64_t> valueBounds;
};

/// The rows of the tables `input` (an argument of `func`) indexes or the
/// class count of the losses it labels, whichever bounds its values
/// (65536, uint16 tokens, when neither does).
int64_t inputValueBound(mlir::func::FuncOp func, mlir::Value input);

/// What the program writer and the report share: the final IR, the
/// options, and the first error (one line).
class ProgramStep {
public:
  ProgramStep(mlir::ModuleOp module, const ProgramOptions &options)
      : module(module), o(options) {}
  std::string error;

protected:
  bool fail(const std::string &message) {
    if (error.empty())
      error = message;
    return false;
  }
  /// The plan as the final IR carries it (autopar.plan).
  bool irPlan(Plan &plan);
  /// The plan and the ProgramShape of train step `step`.
  bool readShape(mlir::func::FuncOp step, Plan &plan, ProgramShape &shape);

  mlir::ModuleOp module;
  const ProgramOptions &o;
};

/// Writes the program directory `dir` (which exists) from `module`, the IR
/// after the pipeline. On failure returns false and sets `error` to one
/// line.
bool writeProgram(mlir::ModuleOp module, const ProgramOptions &options,
                  const std::string &dir, std::string &error);

/// Writes `contents` to `dir`/`name` atomically; false with `error` set.
bool writeProgramFile(const std::string &dir, llvm::StringRef name,
                      llvm::StringRef contents, std::string &error);

} // namespace autopar

#endif // AUTOPAR_COMPILER_PROGRAMWRITER_H
