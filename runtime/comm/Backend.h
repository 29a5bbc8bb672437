//===- Backend.h - the transports of the communicator -----------*- C++ -*-===//
//
// Private to runtime/comm: Communicator (Comm.cpp) checks its arguments,
// sizes the group, counts the bytes and hands every float32 / bfloat16
// collective over a group of more than one rank to one CommBackend, the
// transport of the build:
//
//   build                     backend          buffers
//   AUTOPAR_WITH_MPI          MPI (MpiBackend.cpp)    host memory
//   + AUTOPAR_WITH_NCCL       NCCL (NcclBackend.cpp)  device memory
//   AUTOPAR_WITH_NCCL alone   device copies (one rank; NcclBackend.cpp)
//   neither                   host copies (one rank; Comm.cpp)
//
// A new collective is one virtual function here and one implementation per
// backend; the control plane (MPI start-up, the groups' MPI
// sub-communicators, the double sums, broadcasts and barriers) stays in
// Comm.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_COMM_BACKEND_H
#define AUTOPAR_RUNTIME_COMM_BACKEND_H

#include "runtime/comm/Comm.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

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

// What the float32 and bfloat16 collectives (the "float collectives") run
// on: NCCL on device buffers (NCCL with MPI), local device copies (NCCL
// without MPI), MPI on host buffers (MPI alone), local host copies
// (neither).
#ifdef AUTOPAR_WITH_NCCL
#define AUTOPAR_COMM_DEVICE 1
#include <cuda_runtime.h>
#ifdef AUTOPAR_WITH_MPI
#define AUTOPAR_COMM_NCCL 1
#include <nccl.h>
#endif
#elif defined(AUTOPAR_WITH_MPI)
#define AUTOPAR_COMM_MPI_FLOATS 1
#endif

namespace autopar::rt {

/// Ends every rank: MPI_Abort while MPI is up, then this process.
[[noreturn]] inline void endWorld(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
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

/// The transport of a Communicator's float collectives. The Communicator
/// calls a collective only for a group of more than one rank and a
/// non-empty tensor, after checking the arguments; `mask` is canonical (no
/// size-1 axes), `group` its size, `chunk` = flatChunk(numElements, group),
/// `index` this rank's group position. The contracts are Communicator's
/// (runtime/comm/Comm.h); requests are the backend's own ids.
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
  CommRequest exchange(const PointToPoint *, int, CommRequest *) override {
    noGroup();
  }
  void wait(CommRequest) override {}
  void waitAll() override {}

private:
  [[noreturn]] void noGroup() {
    failedCall("a collective", "a one-rank build has no group of two ranks",
               __FILE__, __LINE__, 0);
  }
};

/// The backend of one-rank builds without a device: host copies.
std::unique_ptr<CommBackend> makeHostBackend();

#ifdef AUTOPAR_COMM_MPI_FLOATS
/// MPI on host buffers over the groups' sub-communicators `comms` (one per
/// mask). Frees what it made (the bfloat16 and half sums) when destroyed,
/// after waiting for the outstanding requests.
std::unique_ptr<CommBackend>
makeMpiBackend(const std::map<AxisMask, MPI_Comm> &comms, int rank);
#endif

#ifdef AUTOPAR_COMM_NCCL
/// NCCL on device buffers: on the current device, a communication stream,
/// a staging memory pool and one NCCL communicator per group of `comms`,
/// bootstrapped over the group's MPI sub-communicator (`comm` gives group
/// positions). Destroyed after the communication stream's work, dropping
/// outstanding requests.
std::unique_ptr<CommBackend>
makeNcclBackend(const std::map<AxisMask, MPI_Comm> &comms,
                const Communicator &comm, int rank);
#endif

#if defined(AUTOPAR_COMM_DEVICE) && !defined(AUTOPAR_COMM_NCCL)
/// One rank with a device: device copies on the compute stream.
std::unique_ptr<CommBackend> makeDeviceBackend();
#endif

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_COMM_BACKEND_H
