//===- Program.h - what every emitted program's main needs ------*- C++ -*-===//
//
// The directory of the running executable (weights.bin lies beside it),
// 64-byte aligned zeroed buffers, and reading a file of a known size.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_PROGRAM_H
#define AUTOPAR_RUNTIME_PROGRAM_H

#include "runtime/Status.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

namespace autopar::rt {

/// The directory holding this executable ("." if unknown).
std::string programDir();

struct AlignedFree {
  void operator()(void *p) const { std::free(p); }
};
using Buffer = std::unique_ptr<char, AlignedFree>;

/// `bytes` zeroed bytes, 64-byte aligned (never null for 0 bytes; null when
/// out of memory).
Buffer allocate(int64_t bytes);

/// Reads exactly `bytes` bytes of `path` into `into`; a file of another size
/// is "PATH: expected N bytes of WHAT (rebuild the program)".
Status readFileExactly(const std::string &path, char *into, int64_t bytes,
                       const std::string &what);

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_PROGRAM_H
