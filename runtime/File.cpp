//===- File.cpp - whole-file writes of the runtime ------------------------===//

#include "runtime/File.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace autopar::rt {

Status writeFileAtomically(const std::string &path, const void *data,
                           size_t size) {
  std::string tmp = path + ".tmp-" + std::to_string(getpid());
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return Status::error(path + ": cannot write: " + std::strerror(errno));
  bool ok = size == 0 || std::fwrite(data, 1, size, f) == size;
  int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    return Status::error(path + ": cannot write: " +
                         std::strerror(err ? err : EIO));
  }
  return Status::ok();
}

} // namespace autopar::rt
