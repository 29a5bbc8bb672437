//===- File.cpp - whole-file reads and writes of the runtime --------------===//
//
// readWholeFile by stdio in 64 KiB pieces; writeFileAtomically through a
// temporary file beside the target, renamed over it.
//
//===----------------------------------------------------------------------===//

#include "runtime/support/File.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace autopar::rt {

Status readWholeFile(const std::string &path, std::string &out, int *error) {
  out.clear();
  int unused = 0;
  int &err = error ? *error : unused;
  err = 0;
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    err = errno;
    return Status::error(path + ": cannot open: " + std::strerror(err));
  }
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0)
    out.append(buf, got);
  bool failed = std::ferror(f) != 0;
  err = failed ? errno : 0;
  std::fclose(f);
  if (failed)
    return Status::error(path + ": cannot read: " + std::strerror(err));
  return Status::ok();
}

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
