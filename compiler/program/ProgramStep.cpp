//===- ProgramStep.cpp - what the program writer and report share ---------===//

#include "compiler/program/ProgramStep.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
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

bool ProgramStep::readShape(func::FuncOp step, ProgramShape &shape) {
  std::string why;
  return readProgramShape(step, o.training, shape, why) ||
         fail(o.model + ": internal error: " + why);
}

bool autopar::writeProgramFile(const std::string &dir, StringRef name,
                               StringRef contents, std::string &error) {
  llvm::SmallString<256> p(dir);
  llvm::sys::path::append(p, name);
  return writeFileAtomically(std::string(p), contents, error);
}

