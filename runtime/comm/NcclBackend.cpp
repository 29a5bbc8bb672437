//===- NcclBackend.cpp - float collectives over NCCL on device memory -----===//
//
// One NCCL communicator per group, made with ncclCommInitRank from an
// ncclUniqueId that the group's first rank broadcasts over the group's MPI
// sub-communicator (rather than ncclCommSplit of a world NCCL communicator:
// no world communicator whose resources nobody uses, and the groups are
// exactly the MPI ones). The collectives are NCCL calls on device buffers on
// the backend's communication stream: an event recorded on the compute
// stream orders them after the kernels, a completion event per request
// orders the compute stream after them (wait). Staging buffers come from
// the backend's own memory pool: allocated on the compute stream, freed on
// the communication stream right after their last use (cudaFreeAsync), so
// requests own no memory and nothing queries events.
//
// Without MPI (one rank) the device build has no NCCL call at all (the
// program need not link NCCL): DeviceBackend only copies, on the compute
// stream.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Backend.h"

#ifdef AUTOPAR_COMM_DEVICE

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace autopar::rt {
namespace {

/// Copies `bytes` bytes from `src` to `dst` (device memory) on `stream`;
/// overlapping ranges go through a temporary buffer, as memmove.
void deviceMove(void *dst, const void *src, size_t bytes, cudaStream_t stream,
                int rank) {
  if (dst == src || bytes == 0)
    return;
  uintptr_t d = reinterpret_cast<uintptr_t>(dst);
  uintptr_t s = reinterpret_cast<uintptr_t>(src);
  if (d + bytes <= s || s + bytes <= d) {
    AUTOPAR_COMM_CUDA_CALL(rank, cudaMemcpyAsync, dst, src, bytes,
                           cudaMemcpyDeviceToDevice, stream);
    return;
  }
  void *temp = nullptr;
  AUTOPAR_COMM_CUDA_CALL(rank, cudaMallocAsync, &temp, bytes, stream);
  AUTOPAR_COMM_CUDA_CALL(rank, cudaMemcpyAsync, temp, src, bytes,
                         cudaMemcpyDeviceToDevice, stream);
  AUTOPAR_COMM_CUDA_CALL(rank, cudaMemcpyAsync, dst, temp, bytes,
                         cudaMemcpyDeviceToDevice, stream);
  AUTOPAR_COMM_CUDA_CALL(rank, cudaFreeAsync, temp, stream);
}

#ifdef AUTOPAR_COMM_NCCL
void checkNccl(ncclResult_t rc, const char *call, const char *file, int line,
               int rank) {
  if (rc == ncclSuccess)
    return;
  std::string reason = ncclGetErrorString(rc);
  const char *last = ncclGetLastError(nullptr);
  if (last && *last)
    reason += std::string(" (") + last + ")";
  failedCall(call, reason.c_str(), file, line, rank);
}

#define AUTOPAR_NCCL_CALL(rank, fn, ...)                                       \
  checkNccl(fn(__VA_ARGS__), #fn, __FILE__, __LINE__, rank)

ncclDataType_t ncclType(CommType type) {
  return type == CommType::F32    ? ncclFloat
         : type == CommType::BF16 ? ncclBfloat16
                                  : ncclHalf;
}

class NcclBackend : public CommBackend {
public:
  NcclBackend(const std::map<AxisMask, MPI_Comm> &comms,
              const Communicator &comm, int rank)
      : rank(rank) {
    int device = 0;
    AUTOPAR_COMM_CUDA_CALL(rank, cudaGetDevice, &device);
    AUTOPAR_COMM_CUDA_CALL(rank, cudaStreamCreateWithFlags, &commStream,
                           cudaStreamNonBlocking);
    AUTOPAR_COMM_CUDA_CALL(rank, cudaEventCreateWithFlags, &computeReady,
                           cudaEventDisableTiming);
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    AUTOPAR_COMM_CUDA_CALL(rank, cudaMemPoolCreate, &pool, &props);
    // Keep freed staging memory for the next collectives (the default
    // threshold, 0, returns it to the system at every synchronization).
    unsigned long long threshold = ~0ull;
    AUTOPAR_COMM_CUDA_CALL(rank, cudaMemPoolSetAttribute, pool,
                           cudaMemPoolAttrReleaseThreshold, &threshold);
    // A buffer freed on the communication stream is reused on the compute
    // stream only once its free is known complete: never by making the
    // compute stream wait for the communication stream, which would undo
    // the overlap.
    int internal = 0;
    AUTOPAR_COMM_CUDA_CALL(rank, cudaMemPoolSetAttribute, pool,
                           cudaMemPoolReuseAllowInternalDependencies,
                           &internal);
    // The same groups in the same order on every rank (Communicator::create
    // made `comms` alike): ncclCommInitRank blocks until the whole group has
    // called it, and groups of one mask are disjoint, so no rank waits on
    // one that waits elsewhere.
    for (auto &[mask, sub] : comms) {
      ncclUniqueId id = {};
      if (comm.groupIndex(mask) == 0)
        AUTOPAR_NCCL_CALL(rank, ncclGetUniqueId, &id);
      AUTOPAR_MPI_CALL(rank, MPI_Bcast, &id, int(sizeof(id)), MPI_BYTE, 0, sub);
      ncclComm_t nccl = nullptr;
      AUTOPAR_NCCL_CALL(rank, ncclCommInitRank, &nccl,
                        int(comm.groupSize(mask)), id,
                        int(comm.groupIndex(mask)));
      ncclComms[mask] = nccl;
    }
  }

  ~NcclBackend() override {
    // Outstanding requests are dropped, not waited on: the compute stream
    // may be gone. Everything issued on the communication stream finishes
    // first.
    for (auto &[id, event] : pending)
      freeEvents.push_back(event);
    pending.clear();
    if (commStream)
      AUTOPAR_COMM_CUDA_CALL(rank, cudaStreamSynchronize, commStream);
    for (auto &[mask, nccl] : ncclComms)
      AUTOPAR_NCCL_CALL(rank, ncclCommDestroy, nccl);
    for (cudaEvent_t event : freeEvents)
      AUTOPAR_COMM_CUDA_CALL(rank, cudaEventDestroy, event);
    if (computeReady)
      AUTOPAR_COMM_CUDA_CALL(rank, cudaEventDestroy, computeReady);
    if (pool)
      AUTOPAR_COMM_CUDA_CALL(rank, cudaMemPoolDestroy, pool);
    if (commStream)
      AUTOPAR_COMM_CUDA_CALL(rank, cudaStreamDestroy, commStream);
  }

  CommRequest allReduceSum(void *data, int64_t numElements, CommType type,
                           AxisMask mask) override {
    follow();
    AUTOPAR_NCCL_CALL(rank, ncclAllReduce, data, data, size_t(numElements),
                      ncclType(type), ncclSum, ncclComms.at(mask), commStream);
    return {finish()};
  }

  CommRequest allReduceMax(float *data, int64_t numElements,
                           AxisMask mask) override {
    follow();
    AUTOPAR_NCCL_CALL(rank, ncclAllReduce, data, data, size_t(numElements),
                      ncclFloat32, ncclMax, ncclComms.at(mask), commStream);
    return {finish()};
  }

  CommRequest reduceScatterFlat(const void *full, int64_t numElements,
                                void *piece, CommType type, AxisMask mask,
                                int64_t group, int64_t chunk) override {
    // The padded copy is made on the compute stream, so that kernels issued
    // after this call may overwrite `full`; the communication stream frees
    // it after the reduction.
    const int64_t size = commTypeBytes(type);
    int64_t padded = group * chunk;
    char *staging = allocate(size_t(padded * size), compute);
    AUTOPAR_COMM_CUDA_CALL(rank, cudaMemcpyAsync, staging, full,
                           size_t(numElements * size), cudaMemcpyDeviceToDevice,
                           compute);
    if (padded > numElements)
      AUTOPAR_COMM_CUDA_CALL(rank, cudaMemsetAsync,
                             staging + numElements * size, 0,
                             size_t((padded - numElements) * size), compute);
    follow();
    AUTOPAR_NCCL_CALL(rank, ncclReduceScatter, staging, piece, size_t(chunk),
                      ncclType(type), ncclSum, ncclComms.at(mask), commStream);
    AUTOPAR_COMM_CUDA_CALL(rank, cudaFreeAsync, staging, commStream);
    return {finish()};
  }

  CommRequest allGatherFlat(const void *piece, int64_t numElements, void *full,
                            CommType type, AxisMask mask, int64_t group,
                            int64_t chunk, int64_t index) override {
    // This rank's piece is read on the compute stream (the caller may reuse
    // it once this returns), into the slot that an in-place ncclAllGather
    // sends from: `full` itself when the group divides numElements, else a
    // padded staging buffer whose first numElements elements go to `full`
    // after.
    const int64_t size = commTypeBytes(type);
    ncclComm_t nccl = ncclComms.at(mask);
    if (numElements == group * chunk) {
      char *own = static_cast<char *>(full) + index * chunk * size;
      deviceMove(own, piece, size_t(chunk * size), compute, rank);
      follow();
      AUTOPAR_NCCL_CALL(rank, ncclAllGather, own, full, size_t(chunk),
                        ncclType(type), nccl, commStream);
      return {finish()};
    }
    int64_t count = std::clamp<int64_t>(numElements - index * chunk, 0, chunk);
    char *staging = allocate(size_t(group * chunk * size), compute);
    char *slot = staging + index * chunk * size;
    if (count > 0)
      AUTOPAR_COMM_CUDA_CALL(rank, cudaMemcpyAsync, slot, piece,
                             size_t(count * size), cudaMemcpyDeviceToDevice,
                             compute);
    if (count < chunk)
      AUTOPAR_COMM_CUDA_CALL(rank, cudaMemsetAsync, slot + count * size, 0,
                             size_t((chunk - count) * size), compute);
    follow();
    AUTOPAR_NCCL_CALL(rank, ncclAllGather, slot, staging, size_t(chunk),
                      ncclType(type), nccl, commStream);
    AUTOPAR_COMM_CUDA_CALL(rank, cudaMemcpyAsync, full, staging,
                           size_t(numElements * size), cudaMemcpyDeviceToDevice,
                           commStream);
    AUTOPAR_COMM_CUDA_CALL(rank, cudaFreeAsync, staging, commStream);
    return {finish()};
  }

  CommRequest exchange(const PointToPoint *ops, int count,
                       CommRequest *each) override {
    // The world communicator: the group of every axis, whose positions are
    // the world ranks.
    ncclComm_t world = ncclComms.rbegin()->second;
    follow();
    AUTOPAR_NCCL_CALL(rank, ncclGroupStart);
    for (int i = 0; i < count; ++i) {
      if (ops[i].send)
        AUTOPAR_NCCL_CALL(rank, ncclSend, ops[i].data, size_t(ops[i].bytes),
                          ncclInt8, ops[i].peer, world, commStream);
      else
        AUTOPAR_NCCL_CALL(rank, ncclRecv, ops[i].data, size_t(ops[i].bytes),
                          ncclInt8, ops[i].peer, world, commStream);
    }
    AUTOPAR_NCCL_CALL(rank, ncclGroupEnd);
    // One completion event for the group.
    CommRequest done{finish()};
    if (each)
      std::fill(each, each + count, done);
    return done;
  }

  void move(void *dst, const void *src, size_t bytes) override {
    deviceMove(dst, src, bytes, compute, rank);
  }

  void wait(CommRequest request) override {
    auto it = pending.find(request.id);
    if (it != pending.end())
      complete(it);
  }

  void waitAll() override {
    while (!pending.empty())
      complete(pending.begin());
  }

  bool setComputeStream(void *stream) override {
    cudaStream_t next = static_cast<cudaStream_t>(stream);
    if (next != compute && !pending.empty())
      return false;
    compute = next;
    return true;
  }

private:
  /// Makes the communication stream wait for the work issued on the
  /// compute stream so far.
  void follow() {
    AUTOPAR_COMM_CUDA_CALL(rank, cudaEventRecord, computeReady, compute);
    AUTOPAR_COMM_CUDA_CALL(rank, cudaStreamWaitEvent, commStream, computeReady,
                           0);
  }
  /// `bytes` bytes from the pool, usable in order on `stream` (and on
  /// streams that wait for it) until a cudaFreeAsync.
  char *allocate(size_t bytes, cudaStream_t stream) {
    void *p = nullptr;
    AUTOPAR_COMM_CUDA_CALL(rank, cudaMallocFromPoolAsync, &p, bytes, pool,
                           stream);
    return static_cast<char *>(p);
  }
  /// Records the completion of what was issued on the communication stream
  /// so far as a new request.
  int64_t finish() {
    cudaEvent_t done = nullptr;
    if (freeEvents.empty()) {
      AUTOPAR_COMM_CUDA_CALL(rank, cudaEventCreateWithFlags, &done,
                             cudaEventDisableTiming);
    } else {
      done = freeEvents.back();
      freeEvents.pop_back();
    }
    AUTOPAR_COMM_CUDA_CALL(rank, cudaEventRecord, done, commStream);
    int64_t id = nextId++;
    pending[id] = done;
    return id;
  }
  /// Makes the compute stream wait for a request, which is then complete
  /// (an event may be recorded again once a stream waits on it).
  void complete(std::map<int64_t, cudaEvent_t>::iterator it) {
    AUTOPAR_COMM_CUDA_CALL(rank, cudaStreamWaitEvent, compute, it->second, 0);
    freeEvents.push_back(it->second);
    pending.erase(it);
  }

  const int rank;
  /// Where the program runs its kernels (setComputeStream).
  cudaStream_t compute = nullptr;
  /// The stream of every NCCL call (cudaStreamNonBlocking).
  cudaStream_t commStream = nullptr;
  /// Staging buffers: never released to the system until the destructor.
  cudaMemPool_t pool = nullptr;
  /// Recorded on the compute stream before each collective.
  cudaEvent_t computeReady = nullptr;
  /// Completion events of finished requests, for reuse.
  std::vector<cudaEvent_t> freeEvents;
  /// One NCCL communicator per group mask.
  std::map<AxisMask, ncclComm_t> ncclComms;
  /// Outstanding requests: their completion events by id.
  std::map<int64_t, cudaEvent_t> pending;
  int64_t nextId = 0;
};
#else
/// One rank with a device: a one-rank group's collective is a device copy
/// on the compute stream.
class DeviceBackend : public OneRankBackend {
public:
  void move(void *dst, const void *src, size_t bytes) override {
    deviceMove(dst, src, bytes, compute, 0);
  }
  bool setComputeStream(void *stream) override {
    compute = static_cast<cudaStream_t>(stream);
    return true;
  }

private:
  cudaStream_t compute = nullptr;
};
#endif

} // namespace

#ifdef AUTOPAR_COMM_NCCL
std::unique_ptr<CommBackend>
makeNcclBackend(const std::map<AxisMask, MPI_Comm> &comms,
                const Communicator &comm, int rank) {
  return std::make_unique<NcclBackend>(comms, comm, rank);
}
#else
std::unique_ptr<CommBackend> makeDeviceBackend() {
  return std::make_unique<DeviceBackend>();
}
#endif

} // namespace autopar::rt

#endif // AUTOPAR_COMM_DEVICE
