//===- SwapFile.h - optimizer state on local storage ------------*- C++ -*-===//
//
// ZeRO-Infinity's NVMe offload (plan zero.offload "nvme"): a rank's
// optimizer state (f32 masters, moments) lives in one scratch file under
// zero.nvme_path, read and written in chunks with asynchronous IO (io_uring
// through liburing where the program was built with it, else pread /
// pwrite). The file is unlinked as soon as it is created: nothing is left
// behind, whatever ends the run, and nothing of the folder's is touched.
// With O_DIRECT (where the file system takes it) the page cache holds none
// of it: host memory is the chunk buffers.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_OFFLOAD_SWAPFILE_H
#define AUTOPAR_RUNTIME_OFFLOAD_SWAPFILE_H

#include "runtime/Program.h"
#include "runtime/Status.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace autopar::rt {

/// Offsets, sizes and buffers of direct IO are multiples of this.
inline constexpr int64_t kSwapAlign = 4096;

inline int64_t swapAligned(int64_t bytes) {
  return (bytes + kSwapAlign - 1) / kSwapAlign * kSwapAlign;
}

/// Zeroed host memory for direct IO: kSwapAlign-aligned, whole blocks.
Buffer swapBuffer(int64_t bytes);

class SwapFile {
public:
  SwapFile();
  ~SwapFile();
  SwapFile(const SwapFile &) = delete;
  SwapFile &operator=(const SwapFile &) = delete;

  /// Creates the file of `bytes` (reserved: a full disk is found here, not
  /// mid-run) under `dir` for `rank`. One line naming the folder when it
  /// is missing, not writable or has not the space (its free bytes then).
  Status open(const std::string &dir, int64_t bytes, int rank);

  /// Queue a read or write of `bytes` at `offset` (multiples of
  /// kSwapAlign) into / from `buffer` (aligned to kSwapAlign); the buffer
  /// must stay untouched until drain() or waitFor() of the request's id
  /// (returned; ids increase in queueing order).
  int64_t read(int64_t offset, void *buffer, int64_t bytes);
  int64_t write(int64_t offset, const void *buffer, int64_t bytes);
  /// Starts what is queued (io_uring: the kernel runs it while the caller
  /// computes; synchronous IO: nothing yet).
  void submit();
  /// Submits what is queued and waits for all of it; the first failure
  /// (one line naming the file) if any.
  Status drain();
  /// Submits what is queued and waits for request `id` alone (others may
  /// finish meanwhile); the first failure of any request so far, if any.
  Status waitFor(int64_t id);

  /// Whether the file bypasses the page cache, and whether its IO is
  /// io_uring's (else synchronous, at drain()).
  bool direct() const { return direct_; }
  bool asyncIo() const;
  const std::string &path() const { return path_; }
  /// Bytes moved since the start.
  int64_t bytesRead = 0, bytesWritten = 0;

private:
  struct Ring;
  struct Request {
    bool write;
    int64_t offset, bytes;
    void *buffer;
    int64_t id;
    bool done = false;
  };
  int fd = -1;
  bool direct_ = false;
  std::string path_;
  std::unique_ptr<Ring> ring;
  /// Requests not yet submitted, and those submitted (stable addresses:
  /// the ring's completions point at them) not yet complete.
  std::vector<Request> pending;
  std::deque<Request> inflight;
  size_t completed = 0;
  int64_t nextId = 0;
  std::string failure;
  /// The first failure as a status, cleared.
  Status takeFailure();
  void fail(const Request &r, int err);
  /// Waits for one submitted request.
  void complete();
};

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_OFFLOAD_SWAPFILE_H
