//===- NcclBackend.cpp - float collectives over NCCL on device memory -----===//
//
// The world's NCCL communicator made with ncclCommInitRank from the
// ncclUniqueId that world rank 0 made and Comm.cpp handed to every rank (by
// MPI_Bcast under an MPI launcher, by the rendezvous otherwise), and one per
// other group split from it (ncclCommSplit, NCCL >= 2.18), in one order on
// every rank. The collectives are NCCL calls on device buffers on the
// backend's communication stream: an event recorded on the compute
// stream orders them after the kernels, a completion event per request
// orders the compute stream after them (wait). Staging buffers come from
// the backend's own memory pool: allocated on the compute stream, freed on
// the communication stream right after their last use (cudaFreeAsync), so
// requests own no memory and nothing queries events.
//
// The control plane (sums of doubles, broadcasts, barriers on host memory)
// runs over the same communicators through a device staging buffer on the
// communication stream, which the host then waits for: after the
// collectives issued before it, as every rank issues them in one order.
// The watchdog polls ncclCommGetAsyncError; an abort is ncclCommAbort.
//
// Without NCCL (a one-rank program) the device build has no NCCL call at
// all: DeviceBackend only copies, on the compute stream.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Backend.h"

#ifdef AUTOPAR_COMM_DEVICE

#include <algorithm>
#include <cstdint>
#include <mutex>
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

/// The communicators endWorld aborts (abortHook): every live backend's.
std::mutex abortMutex;
std::vector<ncclComm_t> abortComms;

void abortAll() {
  std::lock_guard<std::mutex> lock(abortMutex);
  for (ncclComm_t nccl : abortComms)
    ncclCommAbort(nccl);
  abortComms.clear();
}

class NcclBackend : public CommBackend {
public:
  NcclBackend(const std::vector<CommGroup> &groups, const std::string &worldId,
              int rank, int worldSize)
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
    ncclUniqueId id = {};
    if (worldId.size() != sizeof(id))
      failedCall("ncclCommInitRank",
                 "the world's ncclUniqueId has the wrong size", __FILE__,
                 __LINE__, rank);
    std::memcpy(&id, worldId.data(), sizeof(id));
    AUTOPAR_NCCL_CALL(rank, ncclCommInitRank, &world, worldSize, id, rank);
    registerForAbort(world);
    // The same splits in the same order on every rank (every rank of the
    // world takes part in each); the world's own group is the world.
    for (const CommGroup &g : groups) {
      if (g.size == worldSize) {
        worldMask = g.mask;
        ncclComms[g.mask] = world;
        continue;
      }
      ncclComm_t sub = nullptr;
      AUTOPAR_NCCL_CALL(rank, ncclCommSplit, world, g.color, g.index, &sub,
                        nullptr);
      ncclComms[g.mask] = sub;
      registerForAbort(sub);
    }
    abortHook().store(abortAll);
    AUTOPAR_COMM_CUDA_CALL(rank, cudaMalloc, &control, kControlBytes);
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
    {
      std::lock_guard<std::mutex> lock(abortMutex);
      abortComms.clear();
    }
    for (auto &[mask, nccl] : ncclComms)
      if (nccl != world)
        AUTOPAR_NCCL_CALL(rank, ncclCommDestroy, nccl);
    if (world)
      AUTOPAR_NCCL_CALL(rank, ncclCommDestroy, world);
    if (control)
      AUTOPAR_COMM_CUDA_CALL(rank, cudaFree, control);
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

  CommRequest allToAllFlat(const void *send, void *recv, CommType type,
                           AxisMask mask, int64_t group,
                           int64_t chunk) override {
    // The copy sent is made on the compute stream (the caller may reuse
    // `send` once this returns); a send and a receive per position in one
    // group, freed after it on the communication stream.
    const int64_t size = commTypeBytes(type);
    const size_t bytes = size_t(group * chunk * size);
    char *staging = allocate(bytes, compute);
    AUTOPAR_COMM_CUDA_CALL(rank, cudaMemcpyAsync, staging, send, bytes,
                           cudaMemcpyDeviceToDevice, compute);
    follow();
    ncclComm_t nccl = ncclComms.at(mask);
    char *out = static_cast<char *>(recv);
    AUTOPAR_NCCL_CALL(rank, ncclGroupStart);
    for (int64_t j = 0; j < group; ++j) {
      AUTOPAR_NCCL_CALL(rank, ncclSend, staging + j * chunk * size,
                        size_t(chunk), ncclType(type), int(j), nccl,
                        commStream);
      AUTOPAR_NCCL_CALL(rank, ncclRecv, out + j * chunk * size, size_t(chunk),
                        ncclType(type), int(j), nccl, commStream);
    }
    AUTOPAR_NCCL_CALL(rank, ncclGroupEnd);
    AUTOPAR_COMM_CUDA_CALL(rank, cudaFreeAsync, staging, commStream);
    return {finish()};
  }

  CommRequest shift(const void *send, void *recv, int64_t numElements,
                    CommType type, AxisMask mask, int64_t to,
                    int64_t from) override {
    // As allToAllFlat: the copy sent made on the compute stream, freed on
    // the communication stream after the group.
    const size_t bytes = size_t(numElements * commTypeBytes(type));
    char *staging = allocate(bytes, compute);
    AUTOPAR_COMM_CUDA_CALL(rank, cudaMemcpyAsync, staging, send, bytes,
                           cudaMemcpyDeviceToDevice, compute);
    follow();
    ncclComm_t nccl = ncclComms.at(mask);
    AUTOPAR_NCCL_CALL(rank, ncclGroupStart);
    AUTOPAR_NCCL_CALL(rank, ncclSend, staging, size_t(numElements),
                      ncclType(type), int(to), nccl, commStream);
    AUTOPAR_NCCL_CALL(rank, ncclRecv, recv, size_t(numElements), ncclType(type),
                      int(from), nccl, commStream);
    AUTOPAR_NCCL_CALL(rank, ncclGroupEnd);
    AUTOPAR_COMM_CUDA_CALL(rank, cudaFreeAsync, staging, commStream);
    return {finish()};
  }

  CommRequest exchange(const PointToPoint *ops, int count,
                       CommRequest *each) override {
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

  void sumDoubles(double *data, int64_t numElements, AxisMask mask) override {
    ncclComm_t nccl = ncclComms.at(mask);
    for (int64_t off = 0; off < numElements; off += kControlBytes / 8) {
      size_t count =
          size_t(std::min<int64_t>(kControlBytes / 8, numElements - off));
      AUTOPAR_COMM_CUDA_CALL(rank, cudaMemcpyAsync, control, data + off,
                             count * 8, cudaMemcpyHostToDevice, commStream);
      AUTOPAR_NCCL_CALL(rank, ncclAllReduce, control, control, count,
                        ncclFloat64, ncclSum, nccl, commStream);
      AUTOPAR_COMM_CUDA_CALL(rank, cudaMemcpyAsync, data + off, control,
                             count * 8, cudaMemcpyDeviceToHost, commStream);
      AUTOPAR_COMM_CUDA_CALL(rank, cudaStreamSynchronize, commStream);
    }
  }

  void broadcastBytes(void *data, int64_t bytes) override {
    char *base = static_cast<char *>(data);
    for (int64_t off = 0; off < bytes; off += kControlBytes) {
      size_t count = size_t(std::min<int64_t>(kControlBytes, bytes - off));
      if (rank == 0)
        AUTOPAR_COMM_CUDA_CALL(rank, cudaMemcpyAsync, control, base + off,
                               count, cudaMemcpyHostToDevice, commStream);
      AUTOPAR_NCCL_CALL(rank, ncclBroadcast, control, control, count, ncclInt8,
                        0, world, commStream);
      AUTOPAR_COMM_CUDA_CALL(rank, cudaMemcpyAsync, base + off, control, count,
                             cudaMemcpyDeviceToHost, commStream);
      AUTOPAR_COMM_CUDA_CALL(rank, cudaStreamSynchronize, commStream);
    }
  }

  void barrier() override {
    double one = 1;
    sumDoubles(&one, 1, worldMask);
  }

  std::string asyncError() override {
    for (auto &[mask, nccl] : ncclComms) {
      ncclResult_t state = ncclSuccess;
      ncclResult_t rc = ncclCommGetAsyncError(nccl, &state);
      if (rc == ncclSuccess &&
          (state == ncclSuccess || state == ncclInProgress))
        continue;
      std::string reason = ncclGetErrorString(rc != ncclSuccess ? rc : state);
      const char *last = ncclGetLastError(nccl);
      if (last && *last)
        reason += std::string(" (") + last + ")";
      return reason;
    }
    return "";
  }

private:
  /// The control plane's device buffer (sums of doubles, broadcasts go
  /// through it in pieces of this size).
  static constexpr int64_t kControlBytes = 1 << 20;

  static void registerForAbort(ncclComm_t nccl) {
    std::lock_guard<std::mutex> lock(abortMutex);
    abortComms.push_back(nccl);
  }

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
  /// The world's communicator (exchange, broadcasts) and one per group
  /// mask (the world's own mask maps to `world`).
  ncclComm_t world = nullptr;
  AxisMask worldMask = 0;
  std::map<AxisMask, ncclComm_t> ncclComms;
  /// kControlBytes of device memory.
  void *control = nullptr;
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
std::string newNcclUniqueId(int rank) {
  ncclUniqueId id = {};
  AUTOPAR_NCCL_CALL(rank, ncclGetUniqueId, &id);
  return std::string(reinterpret_cast<const char *>(&id), sizeof(id));
}

std::unique_ptr<CommBackend>
makeNcclBackend(const std::vector<CommGroup> &groups,
                const std::string &worldId, int rank, int worldSize) {
  return std::make_unique<NcclBackend>(groups, worldId, rank, worldSize);
}
#else
std::unique_ptr<CommBackend> makeDeviceBackend() {
  return std::make_unique<DeviceBackend>();
}
#endif

} // namespace autopar::rt

#endif // AUTOPAR_COMM_DEVICE
