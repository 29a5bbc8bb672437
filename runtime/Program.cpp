//===- Program.cpp - what every emitted program's main needs --------------===//

#include "runtime/Program.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace autopar::rt {

std::string programDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return ".";
  std::string path(buf, n);
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

Buffer allocate(int64_t bytes) {
  size_t size = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  void *p = std::aligned_alloc(64, size ? size : 64);
  if (p)
    std::memset(p, 0, size ? size : 64);
  return Buffer(static_cast<char *>(p));
}

Status readFileExactly(const std::string &path, char *into, int64_t bytes,
                       const std::string &what) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return Status::error(path + ": cannot open: " + std::strerror(errno));
  size_t got = std::fread(into, 1, bytes, f);
  bool extra = std::fgetc(f) != EOF;
  std::fclose(f);
  if (static_cast<int64_t>(got) != bytes || extra)
    return Status::error(path + ": expected " + std::to_string(bytes) +
                         " bytes of " + what + " (rebuild the program)");
  return Status::ok();
}

} // namespace autopar::rt
