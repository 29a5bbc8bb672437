//===- Backend.h - the transports of the communicator -----------*- C++ -*-===//
//
// Private to runtime/comm: Communicator (Comm.cpp) checks its arguments,
// sizes the group, counts the bytes and hands every collective over a
// group of more than one rank to one CommBackend, the transport of the
// build:
//
//   defined                  backend                    buffers
//   AUTOPAR_WITH_MPI         MPI (MpiBackend.cpp)       host memory
//   AUTOPAR_WITH_NCCL        NCCL (NcclBackend.cpp)     device memory
//   AUTOPAR_COMM_DEVICE      device copies, one rank    device memory
//                            (NcclBackend.cpp)
//   none                     host copies, one rank      host memory
//                            (Comm.cpp)
//
// AUTOPAR_WITH_NCCL implies AUTOPAR_COMM_DEVICE and takes precedence over
// AUTOPAR_WITH_MPI (which then only starts the world). Each backend owns its
// groups (MPI sub-communicators, NCCL communicators), made from the same
// list of CommGroups in the same order on every rank, and runs the control
// plane too (sums of doubles, broadcasts, barriers): MPI on host memory, or
// NCCL through a device staging buffer, so that a program linked with NCCL
// needs MPI at most to start (Comm.cpp). A new collective is one virtual
// function here and one implementation per backend.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_COMM_BACKEND_H
#define AUTOPAR_RUNTIME_COMM_BACKEND_H

#include "runtime/comm/Comm.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#ifdef AUTOPAR_WITH_MPI
// The C API only: the deprecated C++ bindings warn and need libmpi_cxx.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#endif

// What the collectives run on: NCCL on device buffers (AUTOPAR_WITH_NCCL),
// local device copies (AUTOPAR_COMM_DEVICE alone), MPI on host buffers (MPI
// without a device), local host copies (neither).
#if defined(AUTOPAR_WITH_NCCL) && !defined(AUTOPAR_COMM_DEVICE)
#define AUTOPAR_COMM_DEVICE 1
#endif
#ifdef AUTOPAR_COMM_DEVICE
#include <cuda_runtime.h>
#ifdef AUTOPAR_WITH_NCCL
#define AUTOPAR_COMM_NCCL 1
#include <nccl.h>
#endif
#elif defined(AUTOPAR_WITH_MPI)
#define AUTOPAR_COMM_MPI_FLOATS 1
#endif

namespace autopar::rt {

/// What ends this rank's share of the world before the process exits (the
/// NCCL backend's ncclCommAbort of its communicators), or null.
inline std::atomic<void (*)()> &abortHook() {
  static std::atomic<void (*)()> hook{nullptr};
  return hook;
}

/// Ends every rank: the abort hook, MPI_Abort while MPI is up, then this
/// process (a launcher without MPI ends the others when it exits).
[[noreturn]] inline void endWorld(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (void (*hook)() = abortHook().exchange(nullptr))
    hook();
#ifdef AUTOPAR_WITH_MPI
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::_Exit(code);
}

/// Reports a failed library call in one line ("FILE:LINE: rank R: CALL
/// failed: REASON") and ends every rank.
[[noreturn]] inline void failedCall(const char *call, const char *reason,
                                    const char *file, int line, int rank) {
  const char *base = std::strrchr(file, '/');
  std::fflush(stdout);
  std::fprintf(stderr, "%s:%d: rank %d: %s failed: %s\n",
               base ? base + 1 : file, line, rank, call, reason);
  std::fflush(stderr);
  endWorld(1);
}

#ifdef AUTOPAR_WITH_MPI
/// Ends the world after a failed MPI call: one line, then MPI_Abort.
inline void checkMpi(int rc, const char *call, const char *file, int line,
                     int rank) {
  if (rc == MPI_SUCCESS)
    return;
  char reason[MPI_MAX_ERROR_STRING + 1] = {0};
  int length = 0;
  if (MPI_Error_string(rc, reason, &length) != MPI_SUCCESS)
    std::snprintf(reason, sizeof(reason), "error code %d", rc);
  failedCall(call, reason, file, line, rank);
}

#define AUTOPAR_MPI_CALL(rank, fn, ...)                                        \
  ::autopar::rt::checkMpi(fn(__VA_ARGS__), #fn, __FILE__, __LINE__, rank)
#endif

#ifdef AUTOPAR_COMM_DEVICE
inline void checkCuda(cudaError_t rc, const char *call, const char *file,
                      int line, int rank) {
  if (rc != cudaSuccess)
    failedCall(call, cudaGetErrorString(rc), file, line, rank);
}

#define AUTOPAR_COMM_CUDA_CALL(rank, fn, ...)                                  \
  ::autopar::rt::checkCuda(fn(__VA_ARGS__), #fn, __FILE__, __LINE__, rank)
#endif

/// One group of the mesh as this rank sees it: the ranks whose coordinates
/// agree off the axes of `mask`. `color` is the same on exactly the
/// group's ranks, `index` this rank's position in it (row-major over the
/// mask's axes), `size` its rank count. The group of every axis of size > 1
/// is the world (color 0, index = world rank).
struct CommGroup {
  AxisMask mask;
  int color, index, size;
};

/// The transport of a Communicator's collectives. The Communicator calls a
/// collective only for a group of more than one rank and a non-empty
/// tensor, after checking the arguments; `mask` is canonical (no size-1
/// axes) and one of the backend's groups, `group` its size, `chunk` =
/// flatChunk(numElements, group), `index` this rank's group position. The
/// contracts are Communicator's (runtime/comm/Comm.h); requests are the
/// backend's own ids.
class CommBackend {
public:
  virtual ~CommBackend() = default;

  virtual CommRequest allReduceSum(void *data, int64_t numElements,
                                   CommType type, AxisMask mask) = 0;
  virtual CommRequest allReduceMax(float *data, int64_t numElements,
                                   AxisMask mask) = 0;
  virtual CommRequest reduceScatterFlat(const void *full, int64_t numElements,
                                        void *piece, CommType type,
                                        AxisMask mask, int64_t group,
                                        int64_t chunk) = 0;
  virtual CommRequest allGatherFlat(const void *piece, int64_t numElements,
                                    void *full, CommType type, AxisMask mask,
                                    int64_t group, int64_t chunk,
                                    int64_t index) = 0;
  /// `chunk` = numElements / group elements per block.
  virtual CommRequest allToAllFlat(const void *send, void *recv, CommType type,
                                   AxisMask mask, int64_t group,
                                   int64_t chunk) = 0;
  /// Communicator::shift: `numElements` elements of `send` to group
  /// position `to`, as many into `recv` from position `from`.
  virtual CommRequest shift(const void *send, void *recv, int64_t numElements,
                            CommType type, AxisMask mask, int64_t to,
                            int64_t from) = 0;
  /// Communicator::exchange, its arguments checked; `peer` is a world rank.
  virtual CommRequest exchange(const PointToPoint *ops, int count,
                               CommRequest *each) = 0;
  /// The collective of a one-rank group: `bytes` bytes from `src` to `dst`
  /// in this rank's memory (the backend's kind of buffer), overlap allowed.
  virtual void move(void *dst, const void *src, size_t bytes) = 0;
  virtual void wait(CommRequest request) = 0;
  virtual void waitAll() = 0;
  /// Lets outstanding collectives progress (MPI_Testall); default: nothing
  /// to do.
  virtual void progress() {}
  /// The compute stream (a cudaStream_t) of the device backends; false if
  /// it cannot change now (requests are outstanding).
  virtual bool setComputeStream(void *) { return true; }
  /// For tests: the largest element count of one message (MPI's int).
  virtual void setMaxMessageElements(int64_t) {}

  // The control plane, on HOST memory, blocking; called for a group (or a
  // world) of more than one rank.
  virtual void sumDoubles(double *data, int64_t numElements, AxisMask mask) = 0;
  /// From world rank 0 to every rank.
  virtual void broadcastBytes(void *data, int64_t bytes) = 0;
  virtual void barrier() = 0;
  /// An error the transport found on its own (NCCL's asynchronous errors: a
  /// peer that died, a network failure), or ""; called from the watchdog's
  /// thread while the backend lives.
  virtual std::string asyncError() { return ""; }
};

/// The base of the one-rank backends: every group has one rank, so the only
/// collectives are the copies of one-rank groups (`move`, the subclass's)
/// and none of the others is ever called.
class OneRankBackend : public CommBackend {
public:
  CommRequest allReduceSum(void *, int64_t, CommType, AxisMask) override {
    noGroup();
  }
  CommRequest allReduceMax(float *, int64_t, AxisMask) override { noGroup(); }
  CommRequest reduceScatterFlat(const void *, int64_t, void *, CommType,
                                AxisMask, int64_t, int64_t) override {
    noGroup();
  }
  CommRequest allGatherFlat(const void *, int64_t, void *, CommType, AxisMask,
                            int64_t, int64_t, int64_t) override {
    noGroup();
  }
  CommRequest allToAllFlat(const void *, void *, CommType, AxisMask, int64_t,
                           int64_t) override {
    noGroup();
  }
  CommRequest shift(const void *, void *, int64_t, CommType, AxisMask, int64_t,
                    int64_t) override {
    noGroup();
  }
  CommRequest exchange(const PointToPoint *, int, CommRequest *) override {
    noGroup();
  }
  void wait(CommRequest) override {}
  void waitAll() override {}
  void sumDoubles(double *, int64_t, AxisMask) override { noGroup(); }
  void broadcastBytes(void *, int64_t) override { noGroup(); }
  void barrier() override { noGroup(); }

private:
  [[noreturn]] void noGroup() {
    failedCall("a collective", "a one-rank build has no group of two ranks",
               __FILE__, __LINE__, 0);
  }
};

/// The backend of one-rank builds without a device: host copies.
std::unique_ptr<CommBackend> makeHostBackend();

#ifdef AUTOPAR_COMM_MPI_FLOATS
/// MPI on host buffers: one sub-communicator per group, split from
/// MPI_COMM_WORLD in the order of `groups` (MPI ranks = group positions).
/// Frees what it made (the sub-communicators, the bfloat16 and half sums)
/// when destroyed, after waiting for the outstanding requests.
std::unique_ptr<CommBackend>
makeMpiBackend(const std::vector<CommGroup> &groups, int rank);
#endif

#ifdef AUTOPAR_COMM_NCCL
/// A new ncclUniqueId's bytes (world rank 0 makes the world's; Comm.cpp
/// hands it to the others).
std::string newNcclUniqueId(int rank);
/// NCCL on device buffers: on the current device, a communication stream,
/// a staging memory pool, the world's NCCL communicator from `worldId`
/// (ncclCommInitRank) and one per other group (ncclCommSplit of the world,
/// in the order of `groups`, which is the world's last). Destroyed after the
/// communication stream's work, dropping outstanding requests.
std::unique_ptr<CommBackend>
makeNcclBackend(const std::vector<CommGroup> &groups,
                const std::string &worldId, int rank, int worldSize);
#endif

#if defined(AUTOPAR_COMM_DEVICE) && !defined(AUTOPAR_COMM_NCCL)
/// One rank with a device: device copies on the compute stream.
std::unique_ptr<CommBackend> makeDeviceBackend();
#endif

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_COMM_BACKEND_H
