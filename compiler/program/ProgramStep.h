//===- ProgramStep.h - what the program writer and report share -*- C++ -*-===//
//
// The program writer (ProgramWriter.h) and the report (Report.h) both read
// the final IR with the same options; the driver calls one, then the
// other. Their output files are written atomically.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PROGRAM_PROGRAMSTEP_H
#define AUTOPAR_COMPILER_PROGRAM_PROGRAMSTEP_H

#include "compiler/plan/Plan.h"
#include "compiler/program/ProgramIR.h"
#include "frontends/onnx/OnnxImporter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

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
  /// Training programs: the plan beyond its parallel decisions.
  TrainingConfig training;
  /// LoRA's lora.init_adapter: the adapters' initial bytes (float32) by
  /// parameter name; null: PEFT's initialization (A from the run's seed,
  /// B zeros).
  const llvm::StringMap<std::vector<char>> *loraInit = nullptr;
};

/// The rows of the tables `input` (an argument of `func`) indexes or the
/// class count of the losses it labels, whichever bounds its values
/// (65536, uint16 tokens, when neither does).
int64_t inputValueBound(mlir::func::FuncOp func, mlir::Value input);

/// The runtime's buckets of small per-step gradient sums (comm.bucket_mb
/// in bytes; ModelInfo::stepBucketBytes, rt::StepBuckets): the program
/// writer's and the report's one value.
inline int64_t stepBucketBytes(const TrainingConfig &config) {
  return static_cast<int64_t>(config.bucketMb * double(1 << 20));
}

/// What the program writer and the report share: the final IR, the
/// options, and the first error (one line).
class ProgramStep {
public:
  ProgramStep(mlir::ModuleOp module, const ProgramOptions &options)
      : module(module), o(options) {}
  std::string error;

  /// `ok`; if false, with the first error copied into `out` (what the entry
  /// points writeProgram, writeReport and trainReportJson return).
  bool finish(bool ok, std::string &out) const {
    if (!ok)
      out = error;
    return ok;
  }

protected:
  bool fail(const std::string &message) {
    if (error.empty())
      error = message;
    return false;
  }
  /// The ProgramShape of train step `step`.
  bool readShape(mlir::func::FuncOp step, ProgramShape &shape);

  mlir::ModuleOp module;
  const ProgramOptions &o;
};

/// Writes `contents` to `path` atomically (a temporary file in the same
/// directory renamed into place), so a failure never leaves a partial file.
/// "-" writes to stdout. On failure returns false and sets `error`.
bool writeFileAtomically(const std::string &path, llvm::StringRef contents,
                         std::string &error);

/// Collects the first error diagnostic: `message` is "LOCATION: MESSAGE",
/// `text` the message alone.
class FirstError {
public:
  explicit FirstError(mlir::MLIRContext &context)
      : handler(&context, [this](mlir::Diagnostic &diag) {
          if (diag.getSeverity() == mlir::DiagnosticSeverity::Error &&
              message.empty()) {
            text = diag.str();
            llvm::raw_string_ostream os(message);
            os << diag.getLocation() << ": " << text;
          }
          return mlir::success();
        }) {}
  std::string message, text;

private:
  mlir::ScopedDiagnosticHandler handler;
};

/// Writes `contents` to `dir`/`name` atomically; false with `error` set.
bool writeProgramFile(const std::string &dir, llvm::StringRef name,
                      llvm::StringRef contents, std::string &error);

} // namespace autopar

#endif // AUTOPAR_COMPILER_PROGRAM_PROGRAMSTEP_H
