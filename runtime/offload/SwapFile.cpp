//===- SwapFile.cpp - optimizer state on local storage --------------------===//

#include "runtime/offload/SwapFile.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifdef AUTOPAR_HAVE_URING
#include <liburing.h>
#endif

namespace autopar::rt {

/// The submission ring (io_uring), where the program has liburing and the
/// kernel lets it set one up.
struct SwapFile::Ring {
#ifdef AUTOPAR_HAVE_URING
  static constexpr unsigned kDepth = 64;
  io_uring ring;
#endif
};

SwapFile::SwapFile() = default;

SwapFile::~SwapFile() {
#ifdef AUTOPAR_HAVE_URING
  if (ring)
    io_uring_queue_exit(&ring->ring);
#endif
  if (fd >= 0)
    ::close(fd);
}

bool SwapFile::asyncIo() const { return ring != nullptr; }

Status SwapFile::open(const std::string &dir, int64_t bytes, int rank) {
  const std::string where = "zero.nvme_path " + dir;
  struct statvfs fs;
  if (::statvfs(dir.c_str(), &fs) != 0)
    return Status::error(where + ": " + std::strerror(errno));
  if (::access(dir.c_str(), W_OK) != 0)
    return Status::error(where + ": not writable (" + std::strerror(errno) +
                         ")");
  const int64_t free =
      static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  if (free < bytes)
    return Status::error(where + ": " + std::to_string(bytes) +
                         " bytes of optimizer state do not fit in its " +
                         std::to_string(free) + " free bytes");
  // A name no other file has (O_EXCL), unlinked at once.
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    path_ = dir + "/.autopar-swap-" + std::to_string(::getpid()) + "-r" +
            std::to_string(rank) + "-" + std::to_string(attempt);
    for (bool direct : {true, false}) {
      fd = ::open(path_.c_str(),
                  O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC |
                      (direct ? O_DIRECT : 0),
                  0600);
      if (fd >= 0) {
        direct_ = direct;
        break;
      }
      if (errno == EEXIST)
        break;
      // O_DIRECT refused (tmpfs): the page cache then.
      if (!(direct && errno == EINVAL))
        return Status::error(
            where + ": cannot create a swap file: " + std::strerror(errno));
    }
  }
  if (fd < 0)
    return Status::error(where + ": cannot create a swap file");
  ::unlink(path_.c_str());
  const int err = bytes > 0 ? ::posix_fallocate(fd, 0, bytes) : 0;
  if (err != 0)
    return Status::error(where + ": cannot reserve " + std::to_string(bytes) +
                         " bytes: " + std::strerror(err));
#ifdef AUTOPAR_HAVE_URING
  auto r = std::make_unique<Ring>();
  if (io_uring_queue_init(Ring::kDepth, &r->ring, 0) == 0)
    ring = std::move(r);
#endif
  return Status::ok();
}

Buffer swapBuffer(int64_t bytes) {
  const size_t size =
      static_cast<size_t>(swapAligned(std::max<int64_t>(bytes, 1)));
  void *p = std::aligned_alloc(kSwapAlign, size);
  if (p)
    std::memset(p, 0, size);
  return Buffer(static_cast<char *>(p));
}

int64_t SwapFile::read(int64_t offset, void *buffer, int64_t bytes) {
  pending.push_back({false, offset, bytes, buffer, nextId});
  bytesRead += bytes;
  return nextId++;
}

int64_t SwapFile::write(int64_t offset, const void *buffer, int64_t bytes) {
  pending.push_back({true, offset, bytes, const_cast<void *>(buffer), nextId});
  bytesWritten += bytes;
  return nextId++;
}

void SwapFile::fail(const Request &r, int err) {
  if (failure.empty())
    failure = "the swap file under zero.nvme_path: " +
              std::string(r.write ? "write" : "read") + " of " +
              std::to_string(r.bytes) + " bytes at " +
              std::to_string(r.offset) + " failed: " + std::strerror(err);
}

namespace {

/// The rest of a transfer synchronously; errno-style error or 0.
int transfer(int fd, bool write, char *at, int64_t bytes, int64_t offset) {
  int64_t done = 0;
  while (done < bytes) {
    ssize_t n = write ? ::pwrite(fd, at + done, bytes - done, offset + done)
                      : ::pread(fd, at + done, bytes - done, offset + done);
    if (n <= 0)
      return n < 0 ? errno : EIO;
    done += n;
  }
  return 0;
}

} // namespace

void SwapFile::complete() {
#ifdef AUTOPAR_HAVE_URING
  io_uring_cqe *cqe = nullptr;
  int e = io_uring_wait_cqe(&ring->ring, &cqe);
  if (e < 0) {
    fail(inflight.back(), -e);
    for (Request &q : inflight)
      q.done = true;
    completed = inflight.size();
    return;
  }
  Request &r = *static_cast<Request *>(io_uring_cqe_get_data(cqe));
  r.done = true;
  const int64_t done = cqe->res;
  io_uring_cqe_seen(&ring->ring, cqe);
  ++completed;
  if (done < 0) {
    fail(r, static_cast<int>(-done));
  } else if (done < r.bytes) {
    // A short transfer: the rest synchronously.
    if (int err = transfer(fd, r.write, static_cast<char *>(r.buffer) + done,
                           r.bytes - done, r.offset + done))
      fail(r, err);
  }
#endif
}

void SwapFile::submit() {
#ifdef AUTOPAR_HAVE_URING
  if (!ring)
    return;
  for (const Request &r : pending) {
    // A full ring: wait for one to finish first.
    while (inflight.size() - completed >= Ring::kDepth)
      complete();
    inflight.push_back(r);
    Request &q = inflight.back();
    io_uring_sqe *sqe = io_uring_get_sqe(&ring->ring);
    if (!sqe) {
      io_uring_submit(&ring->ring);
      sqe = io_uring_get_sqe(&ring->ring);
    }
    if (q.write)
      io_uring_prep_write(sqe, fd, q.buffer, static_cast<unsigned>(q.bytes),
                          static_cast<uint64_t>(q.offset));
    else
      io_uring_prep_read(sqe, fd, q.buffer, static_cast<unsigned>(q.bytes),
                         static_cast<uint64_t>(q.offset));
    io_uring_sqe_set_data(sqe, &q);
  }
  pending.clear();
  io_uring_submit(&ring->ring);
#endif
}

Status SwapFile::takeFailure() {
  Status status = failure.empty() ? Status::ok() : Status::error(failure);
  failure.clear();
  return status;
}

Status SwapFile::waitFor(int64_t id) {
  if (!ring) {
    // Synchronous IO: what was queued up to `id`, in order.
    size_t n = 0;
    for (; n < pending.size() && pending[n].id <= id; ++n)
      if (int err = transfer(fd, pending[n].write,
                             static_cast<char *>(pending[n].buffer),
                             pending[n].bytes, pending[n].offset))
        fail(pending[n], err);
    pending.erase(pending.begin(), pending.begin() + n);
    return takeFailure();
  }
  if (!pending.empty() && id >= pending.front().id)
    submit();
  if (!inflight.empty() && id >= inflight.front().id) {
    Request &r = inflight[static_cast<size_t>(id - inflight.front().id)];
    while (!r.done)
      complete();
  }
  // Done requests leave the front (the deque keeps the others' addresses,
  // which the ring's completions point at).
  while (!inflight.empty() && inflight.front().done) {
    inflight.pop_front();
    --completed;
  }
  return takeFailure();
}

Status SwapFile::drain() {
  if (ring) {
    submit();
    while (completed < inflight.size())
      complete();
    inflight.clear();
    completed = 0;
  } else {
    for (const Request &r : pending)
      if (int err = transfer(fd, r.write, static_cast<char *>(r.buffer),
                             r.bytes, r.offset))
        fail(r, err);
    pending.clear();
  }
  return takeFailure();
}

} // namespace autopar::rt
