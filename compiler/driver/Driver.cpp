//===- Driver.cpp - the commands of the autopar driver --------------------===//

#include "compiler/driver/Driver.h"
#include "frontends/onnx/Validate.h"

#include "passes/analysis/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace autopar;

int autopar::runImportCommand(const ImportCommandOptions &options) {
  mlir::MLIRContext context;
  std::string error;
  // A summary alone reads shapes, not weights: the external data files of
  // a large model need not be there.
  onnx_import::ImportOptions importOptions = options.import;
  importOptions.shapesOnly =
      importOptions.shapesOnly || (options.summary && options.output == "-");
  onnx_import::ImportResult result =
      onnx_import::importOnnxFile(context, options.model, importOptions, error);
  if (!result.module) {
    llvm::errs() << "autopar: " << onnx_import::oneLine(error) << "\n";
    return 1;
  }
  if (options.summary) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "model " << options.model << " (ai.onnx opset "
       << result.module.get()->getAttrOfType<mlir::IntegerAttr>("nn.opset")
              .getInt()
       << ")\n";
    printModelSummary(*result.module, os);
    llvm::outs() << text;
    llvm::outs().flush();
    if (options.output == "-")
      return 0;
  }
  std::string ir;
  llvm::raw_string_ostream os(ir);
  result.module->print(os);
  if (!writeFileAtomically(options.output, ir, error)) {
    llvm::errs() << "autopar: " << onnx_import::oneLine(error) << "\n";
    return 1;
  }
  return 0;
}

int autopar::runOpsCommand() {
  onnx_import::printSupportedOps(llvm::outs());
  return 0;
}
