//===- Data.cpp - `autopar data` ------------------------------------------===//

#include "compiler/driver/Driver.h"
#include "frontends/onnx/Validate.h"

#include "runtime/data/TokenFile.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <vector>

using namespace autopar;
using llvm::StringRef;

int autopar::runDataCommand(const std::string &text,
                            const std::string &output) {
  auto buffer = llvm::MemoryBuffer::getFile(text, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    llvm::errs() << "autopar: " << text
                 << ": cannot read: " << buffer.getError().message() << "\n";
    return 1;
  }
  StringRef bytes = (*buffer)->getBuffer();
  if (bytes.size() < 2) {
    llvm::errs() << "autopar: " << text
                 << ": needs at least 2 bytes to make one training sample\n";
    return 1;
  }
  std::vector<uint16_t> tokens(bytes.begin(), bytes.end());
  for (size_t i = 0; i < bytes.size(); ++i)
    tokens[i] = static_cast<unsigned char>(bytes[i]);
  rt::Status status = rt::writeTokenFile(output, tokens);
  if (!status.isOk()) {
    llvm::errs() << "autopar: " << onnx_import::oneLine(status.message())
                 << "\n";
    return 1;
  }
  llvm::outs() << "wrote " << tokens.size() << " tokens (vocabulary 256) to "
               << output << "\n";
  return 0;
}
