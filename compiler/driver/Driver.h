//===- Driver.h - the commands of the autopar driver ------------*- C++ -*-===//
//
// Each `autopar <command>` is a function here taking its parsed options and
// returning the process exit code; tools/autopar only parses the command line.
// Every user-facing error is one line on stderr naming the input at fault.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_DRIVER_DRIVER_H
#define AUTOPAR_COMPILER_DRIVER_DRIVER_H

#include "compiler/program/ProgramStep.h"
#include "frontends/onnx/OnnxImporter.h"

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

/// `autopar data TEXT -o TOKENS.bin`: byte-level tokens of a text file.
int runDataCommand(const std::string &text, const std::string &output);

} // namespace autopar

#endif // AUTOPAR_COMPILER_DRIVER_DRIVER_H
