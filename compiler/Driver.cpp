//===- Driver.cpp - the commands of the autopar driver --------------------===//

#include "compiler/Driver.h"
#include "frontends/onnx/Validate.h"

#include "passes/analysis/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace autopar;

bool autopar::writeFileAtomically(const std::string &path,
                                  llvm::StringRef contents,
                                  std::string &error) {
  if (path == "-") {
    llvm::outs() << contents;
    llvm::outs().flush();
    return true;
  }
  // Devices and pipes (/dev/null, /dev/stdout, a FIFO) are written in place:
  // renaming over them would replace them.
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status) &&
      llvm::sys::fs::exists(status) &&
      !llvm::sys::fs::is_regular_file(status)) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (!ec) {
      os << contents;
      os.close();
      if (!os.has_error())
        return true;
      ec = os.error();
      os.clear_error();
    }
    error = "cannot write " + path + ": " + ec.message();
    return false;
  }
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  llvm::SmallString<256> model(dir);
  llvm::sys::path::append(model, "." + llvm::sys::path::filename(path) +
                                     ".tmp-%%%%%%");
  int fd;
  llvm::SmallString<256> tmp;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(model, fd, tmp)) {
    error = "cannot write " + path + ": " + ec.message();
    return false;
  }
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << contents;
    os.close();
    if (os.has_error()) {
      error = "cannot write " + path + ": " + os.error().message();
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return false;
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    error = "cannot write " + path + ": " + ec.message();
    llvm::sys::fs::remove(tmp);
    return false;
  }
  return true;
}

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
