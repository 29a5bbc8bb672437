//===- Driver.h - the commands of the autopar driver ------------*- C++ -*-===//
//
// Each `autopar <command>` is a function here taking its parsed options and
// returning the process exit code; tools/autopar only parses the command line.
// Every user-facing error is one line on stderr naming the input at fault.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_DRIVER_H
#define AUTOPAR_COMPILER_DRIVER_H

#include "frontends/onnx/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <string>

namespace autopar {

struct ImportCommandOptions {
  std::string model;
  std::string output = "-"; // "-" is stdout
  bool summary = false;
  onnx_import::ImportOptions import;
};

/// `autopar import`: prints or writes the imported IR (and/or its summary).
int runImportCommand(const ImportCommandOptions &options);

/// `autopar ops`: prints the supported-ops table (docs/ops.md).
int runOpsCommand();

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

/// `autopar data TEXT -o TOKENS.bin`: byte-level tokens of a text file.
int runDataCommand(const std::string &text, const std::string &output);

} // namespace autopar

#endif // AUTOPAR_COMPILER_DRIVER_H
