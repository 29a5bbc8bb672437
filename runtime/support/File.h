//===- File.h - whole-file reads and writes of the runtime ------*- C++ -*-===//
//
// Reading a whole file into memory (checkpoint manifests, ONNX and tensor
// files) and writing one atomically (token files, ONNX exports, tensor
// files, pipeline traces). Errors name the path and the reason.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_SUPPORT_FILE_H
#define AUTOPAR_RUNTIME_SUPPORT_FILE_H

#include "runtime/Status.h"

#include <cstddef>
#include <string>

namespace autopar::rt {

/// Reads the whole file at `path` into `out`; the error is
/// "PATH: cannot open: <reason>" or "PATH: cannot read: <reason>", with the
/// errno into `error` when given (0 on success).
Status readWholeFile(const std::string &path, std::string &out,
                     int *error = nullptr);

/// Writes `size` bytes to `path` atomically: into PATH.tmp-<pid>, renamed
/// over `path` once complete; on failure the temporary file is removed and
/// the error is "PATH: cannot write: <reason>".
Status writeFileAtomically(const std::string &path, const void *data,
                           size_t size);

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_SUPPORT_FILE_H
