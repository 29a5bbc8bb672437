//===- Comm.cpp - the communicator of an emitted program ------------------===//
//
// With AUTOPAR_WITH_MPI: one MPI sub-communicator per group of mesh axes
// (split from MPI_COMM_WORLD, key = position in the group so that MPI ranks
// are group positions), non-blocking collectives tracked per request with
// the staging buffers and count arrays that MPI reads until they complete;
// MPI has no bfloat16 type, so bfloat16 buffers travel as MPI_UINT16_T and
// their sums use a user-defined MPI_Op (addBf16).
// Without: one rank, every group of size 1, every collective local.
//
// With AUTOPAR_WITH_NCCL as well: the same MPI sub-communicators, plus one
// NCCL communicator per group, made with ncclCommInitRank from an
// ncclUniqueId that the group's first rank broadcasts over the group's MPI
// sub-communicator (rather than ncclCommSplit of a world NCCL communicator:
// no world communicator whose resources nobody uses, and the groups are
// exactly the MPI ones). The float32 and bfloat16 collectives are NCCL
// calls on device buffers on the communicator's stream: an event recorded on
// the compute stream orders them after the kernels, a completion event per
// request orders the compute stream after them (wait). Staging buffers come
// from the communicator's own memory pool: allocated on the compute stream,
// freed on the communication stream right after their last use
// (cudaFreeAsync), so requests own no memory and nothing queries events.
// With AUTOPAR_WITH_NCCL but without AUTOPAR_WITH_MPI: one rank, and the
// local copies are device-to-device copies on the compute stream (no NCCL
// call: the program need not link NCCL).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Comm.h"
#include "runtime/Float16.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
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

static constexpr int kMaxAxes = 32;
/// Groups are created eagerly, one per subset of the axes of size > 1.
static constexpr int kMaxSplitAxes = 8;

#ifdef AUTOPAR_WITH_MPI
/// Ends the world after a failed MPI call: one line, then MPI_Abort.
static void checkMpi(int rc, const char *call, const char *file, int line,
                     int rank) {
  if (rc == MPI_SUCCESS)
    return;
  char reason[MPI_MAX_ERROR_STRING + 1] = {0};
  int length = 0;
  if (MPI_Error_string(rc, reason, &length) != MPI_SUCCESS)
    std::snprintf(reason, sizeof(reason), "error code %d", rc);
  const char *base = std::strrchr(file, '/');
  std::fflush(stdout);
  std::fprintf(stderr, "%s:%d: rank %d: %s failed: %s\n",
               base ? base + 1 : file, line, rank, call, reason);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}
#endif

#ifdef AUTOPAR_WITH_MPI
#define AUTOPAR_MPI_CALL(rank, fn, ...)                                        \
  checkMpi(fn(__VA_ARGS__), #fn, __FILE__, __LINE__, rank)
#endif

/// Ends every rank: MPI_Abort while MPI is up, then this process.
[[noreturn]] static void endWorld(int code) {
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

#ifdef AUTOPAR_COMM_DEVICE
/// Reports a failed CUDA or NCCL call in one line and ends every rank.
[[noreturn]] static void failedCall(const char *call, const char *reason,
                                    const char *file, int line, int rank) {
  const char *base = std::strrchr(file, '/');
  std::fflush(stdout);
  std::fprintf(stderr, "%s:%d: rank %d: %s failed: %s\n",
               base ? base + 1 : file, line, rank, call, reason);
  std::fflush(stderr);
  endWorld(1);
}

static void checkCuda(cudaError_t rc, const char *call, const char *file,
                      int line, int rank) {
  if (rc != cudaSuccess)
    failedCall(call, cudaGetErrorString(rc), file, line, rank);
}

#define AUTOPAR_COMM_CUDA_CALL(rank, fn, ...)                                  \
  checkCuda(fn(__VA_ARGS__), #fn, __FILE__, __LINE__, rank)

/// Copies `bytes` bytes from `src` to `dst` (device memory) on `stream`;
/// overlapping ranges go through a temporary buffer, as memmove.
static void deviceMove(void *dst, const void *src, size_t bytes,
                       cudaStream_t stream, int rank) {
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
#endif

#ifdef AUTOPAR_COMM_NCCL
static void checkNccl(ncclResult_t rc, const char *call, const char *file,
                      int line, int rank) {
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

static ncclDataType_t ncclType(CommType type) {
  return type == CommType::F32    ? ncclFloat
         : type == CommType::BF16 ? ncclBfloat16
                                  : ncclHalf;
}
#endif

#ifdef AUTOPAR_COMM_MPI_FLOATS
static MPI_Datatype mpiType(CommType type) {
  return type == CommType::F32 ? MPI_FLOAT : MPI_UINT16_T;
}

/// The MPI_Op of bfloat16 sums (MPI has no bfloat16 type): inout[i] =
/// in[i] + inout[i], added in float and rounded, as NCCL's ncclBfloat16 sum
/// does, so that the two builds round alike.
static void addBf16(void *in, void *inout, int *len, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = bf16Bits(bf16Value(a[i]) + bf16Value(b[i]));
}

/// The same for IEEE half (MPI has no half type either), as ncclHalf.
static void addHalf(void *in, void *inout, int *len, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = halfBits(halfValue(a[i]) + halfValue(b[i]));
}
#endif

struct Communicator::Impl {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  std::vector<int64_t> coords;
  /// The axes of size > 1.
  AxisMask nontrivial = 0;
  int64_t maxElements = INT_MAX;
#ifdef AUTOPAR_WITH_MPI
  /// Whether create() called MPI_Init_thread (and the destructor finalizes).
  bool ownsMpi = false;
  /// One communicator per non-empty subset of `nontrivial`.
  std::map<AxisMask, MPI_Comm> comms;
#endif
#ifdef AUTOPAR_COMM_MPI_FLOATS
  /// A collective in flight and what MPI reads until it completes.
  struct Pending {
    std::vector<MPI_Request> requests;
    /// The padded tensor of a reduce-scatter, in bytes.
    std::vector<char> staging;
    std::vector<int> counts, displs;
  };
  /// The bfloat16 sum (addBf16), created by create() and freed before
  /// MPI_Finalize.
  MPI_Op bf16Sum = MPI_OP_NULL, halfSum = MPI_OP_NULL;
  MPI_Op sumOp(CommType type) const {
    return type == CommType::F32    ? MPI_SUM
           : type == CommType::BF16 ? bf16Sum
                                    : halfSum;
  }
  /// Outstanding requests by id (std::map: nodes, and so the arrays MPI
  /// holds pointers into, never move).
  std::map<int64_t, Pending> pending;
  int64_t nextId = 0;
#endif
#ifdef AUTOPAR_COMM_DEVICE
  /// Where the program runs its kernels (setComputeStream).
  cudaStream_t compute = nullptr;
#endif
#ifdef AUTOPAR_COMM_NCCL
  /// The stream of every NCCL call (cudaStreamNonBlocking).
  cudaStream_t commStream = nullptr;
  /// Staging buffers: never released to the system until the destructor.
  cudaMemPool_t pool = nullptr;
  /// Recorded on the compute stream before each collective.
  cudaEvent_t computeReady = nullptr;
  /// Completion events of finished requests, for reuse.
  std::vector<cudaEvent_t> freeEvents;
  /// One NCCL communicator per key of `comms`.
  std::map<AxisMask, ncclComm_t> ncclComms;
  /// Outstanding requests: their completion events by id.
  std::map<int64_t, cudaEvent_t> pending;
  int64_t nextId = 0;

  /// Makes the communication stream wait for the work issued on the
  /// compute stream so far.
  void follow(int rank) {
    AUTOPAR_COMM_CUDA_CALL(rank, cudaEventRecord, computeReady, compute);
    AUTOPAR_COMM_CUDA_CALL(rank, cudaStreamWaitEvent, commStream, computeReady,
                           0);
  }
  /// `bytes` bytes from the pool, usable in order on `stream` (and on
  /// streams that wait for it) until a cudaFreeAsync.
  char *allocate(size_t bytes, cudaStream_t stream, int rank) {
    void *p = nullptr;
    AUTOPAR_COMM_CUDA_CALL(rank, cudaMallocFromPoolAsync, &p, bytes, pool,
                           stream);
    return static_cast<char *>(p);
  }
  /// Records the completion of what was issued on the communication stream
  /// so far as a new request.
  int64_t finish(int rank) {
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
  void complete(std::map<int64_t, cudaEvent_t>::iterator it, int rank) {
    AUTOPAR_COMM_CUDA_CALL(rank, cudaStreamWaitEvent, compute, it->second, 0);
    freeEvents.push_back(it->second);
    pending.erase(it);
  }
  /// Creates the stream, the pool, the event and the NCCL communicators on
  /// the current device (after the MPI sub-communicators).
  void setUpDevice(const Communicator &comm, int rank);
  /// Frees what setUpDevice made, after the communication stream's work.
  void tearDownDevice(int rank);
#endif
};

Communicator::Communicator() : impl(std::make_unique<Impl>()) {}

static std::string meshText(const MeshAxisInfo *axes, int numAxes) {
  std::string text;
  for (int i = 0; i < numAxes; ++i) {
    if (i)
      text += ", ";
    text += axes[i].name;
    text += "=" + std::to_string(axes[i].size);
  }
  return text;
}

static std::string rankCount(int64_t n) {
  return std::to_string(n) + (n == 1 ? " rank" : " ranks");
}

Status Communicator::create(int *argc, char ***argv, const MeshAxisInfo *axes,
                            int numAxes, std::unique_ptr<Communicator> &out) {
  if (numAxes < 1 || numAxes > kMaxAxes)
    return Status::error("communicator: the mesh has " +
                         std::to_string(numAxes) + " axes (expected 1 to " +
                         std::to_string(kMaxAxes) + ")");
  int64_t meshRanks = 1;
  int splitAxes = 0;
  for (int i = 0; i < numAxes; ++i) {
    if (!axes[i].name)
      return Status::error("communicator: mesh axis " + std::to_string(i) +
                           " has no name");
    if (axes[i].size < 1)
      return Status::error("communicator: mesh axis " +
                           std::string(axes[i].name) + " has size " +
                           std::to_string(axes[i].size) + " (expected >= 1)");
    if (axes[i].size > INT_MAX || meshRanks > INT_MAX / axes[i].size)
      return Status::error("the plan's mesh (" + meshText(axes, numAxes) +
                           ") has more than " + std::to_string(INT_MAX) +
                           " ranks");
    meshRanks *= axes[i].size;
    splitAxes += axes[i].size > 1;
  }
  if (splitAxes > kMaxSplitAxes)
    return Status::error("the plan's mesh (" + meshText(axes, numAxes) +
                         ") has " + std::to_string(splitAxes) +
                         " axes of size > 1 (at most " +
                         std::to_string(kMaxSplitAxes) + " supported)");
  std::string mismatch = "the plan's mesh has " + rankCount(meshRanks) + " (" +
                         meshText(axes, numAxes) +
                         ") but the program was launched with ";

  std::unique_ptr<Communicator> comm(new Communicator());
  Impl &impl = *comm->impl;
#ifdef AUTOPAR_WITH_MPI
  int initialized = 0;
  AUTOPAR_MPI_CALL(-1, MPI_Initialized, &initialized);
  if (!initialized) {
    int provided = 0;
    AUTOPAR_MPI_CALL(-1, MPI_Init_thread, argc, argv, MPI_THREAD_FUNNELED,
                     &provided);
    impl.ownsMpi = true;
  }
  AUTOPAR_MPI_CALL(-1, MPI_Comm_set_errhandler, MPI_COMM_WORLD,
                   MPI_ERRORS_RETURN);
  AUTOPAR_MPI_CALL(-1, MPI_Comm_rank, MPI_COMM_WORLD, &comm->worldRank);
  AUTOPAR_MPI_CALL(comm->worldRank, MPI_Comm_size, MPI_COMM_WORLD,
                   &comm->numRanks);
  if (comm->numRanks != meshRanks) {
    // Every rank finds this alone, and must print it before any rank exits:
    // mpirun kills the job when the first rank exits non-zero. So MPI stays
    // up in `out` until the caller has printed the error and destroys it
    // (MPI_Finalize synchronizes the ranks).
    out = std::move(comm);
    return Status::error(mismatch + std::to_string(out->numRanks) +
                         "; run it with mpirun -np " +
                         std::to_string(meshRanks));
  }
#else
  (void)argc;
  (void)argv;
  if (meshRanks != 1)
    return Status::error("the plan's mesh has " + rankCount(meshRanks) + " (" +
                         meshText(axes, numAxes) +
                         ") but the program was built without MPI; rebuild it "
                         "with MPI and run it with mpirun -np " +
                         std::to_string(meshRanks));
  // A launcher's world size, which a program without MPI cannot join.
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char *value = std::getenv(var);
    if (!value || !*value)
      continue;
    char *end = nullptr;
    long long launched = std::strtoll(value, &end, 10);
    if (*end == 0 && launched != 1)
      return Status::error(mismatch + value + "; run it with mpirun -np 1");
  }
#endif

  for (int i = 0; i < numAxes; ++i) {
    impl.names.push_back(axes[i].name);
    impl.sizes.push_back(axes[i].size);
    if (axes[i].size > 1)
      impl.nontrivial |= AxisMask(1) << i;
  }
  impl.coords.assign(numAxes, 0);
  int64_t rest = comm->worldRank;
  for (int i = numAxes - 1; i >= 0; --i) {
    impl.coords[i] = rest % impl.sizes[i];
    rest /= impl.sizes[i];
  }

#ifdef AUTOPAR_WITH_MPI
  // Every rank splits the world once per group, in the same order, now: a
  // group created on first use could wait forever on a rank that never uses
  // it.
  for (AxisMask mask = impl.nontrivial; mask;
       mask = (mask - 1) & impl.nontrivial) {
    int64_t color = 0;
    for (int i = 0; i < numAxes; ++i)
      color = color * impl.sizes[i] + ((mask >> i) & 1 ? 0 : impl.coords[i]);
    int key = int(comm->groupIndex(mask));
    MPI_Comm sub = MPI_COMM_NULL;
    AUTOPAR_MPI_CALL(comm->worldRank, MPI_Comm_split, MPI_COMM_WORLD,
                     int(color), key, &sub);
    impl.comms[mask] = sub;
    AUTOPAR_MPI_CALL(comm->worldRank, MPI_Comm_set_errhandler, sub,
                     MPI_ERRORS_RETURN);
    int subSize = 0, subRank = 0;
    AUTOPAR_MPI_CALL(comm->worldRank, MPI_Comm_size, sub, &subSize);
    AUTOPAR_MPI_CALL(comm->worldRank, MPI_Comm_rank, sub, &subRank);
    if (subSize != comm->groupSize(mask) || subRank != key)
      comm->fail("create", "MPI_Comm_split made a group that is not the "
                           "mesh's");
  }
#endif
#ifdef AUTOPAR_COMM_MPI_FLOATS
  AUTOPAR_MPI_CALL(comm->worldRank, MPI_Op_create, addBf16, 1, &impl.bf16Sum);
  AUTOPAR_MPI_CALL(comm->worldRank, MPI_Op_create, addHalf, 1, &impl.halfSum);
#endif
#ifdef AUTOPAR_COMM_NCCL
  impl.setUpDevice(*comm, comm->worldRank);
#endif
  out = std::move(comm);
  return Status::ok();
}

#ifdef AUTOPAR_COMM_NCCL
void Communicator::Impl::setUpDevice(const Communicator &comm, int rank) {
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
  // stream only once its free is known complete: never by making the compute
  // stream wait for the communication stream, which would undo the overlap.
  int internal = 0;
  AUTOPAR_COMM_CUDA_CALL(rank, cudaMemPoolSetAttribute, pool,
                         cudaMemPoolReuseAllowInternalDependencies, &internal);
  // The same groups in the same order on every rank (create() made `comms`
  // alike): ncclCommInitRank blocks until the whole group has called it, and
  // groups of one mask are disjoint, so no rank waits on one that waits
  // elsewhere.
  for (auto &[mask, sub] : comms) {
    ncclUniqueId id = {};
    if (comm.groupIndex(mask) == 0)
      AUTOPAR_NCCL_CALL(rank, ncclGetUniqueId, &id);
    AUTOPAR_MPI_CALL(rank, MPI_Bcast, &id, int(sizeof(id)), MPI_BYTE, 0, sub);
    ncclComm_t nccl = nullptr;
    AUTOPAR_NCCL_CALL(rank, ncclCommInitRank, &nccl, int(comm.groupSize(mask)),
                      id, int(comm.groupIndex(mask)));
    ncclComms[mask] = nccl;
  }
}

void Communicator::Impl::tearDownDevice(int rank) {
  // Outstanding requests are dropped, not waited on: the compute stream may
  // be gone. Everything issued on the communication stream finishes first.
  for (auto &[id, event] : pending)
    freeEvents.push_back(event);
  pending.clear();
  if (commStream)
    AUTOPAR_COMM_CUDA_CALL(rank, cudaStreamSynchronize, commStream);
  for (auto &[mask, nccl] : ncclComms)
    AUTOPAR_NCCL_CALL(rank, ncclCommDestroy, nccl);
  ncclComms.clear();
  for (cudaEvent_t event : freeEvents)
    AUTOPAR_COMM_CUDA_CALL(rank, cudaEventDestroy, event);
  freeEvents.clear();
  if (computeReady)
    AUTOPAR_COMM_CUDA_CALL(rank, cudaEventDestroy, computeReady);
  computeReady = nullptr;
  if (pool)
    AUTOPAR_COMM_CUDA_CALL(rank, cudaMemPoolDestroy, pool);
  pool = nullptr;
  if (commStream)
    AUTOPAR_COMM_CUDA_CALL(rank, cudaStreamDestroy, commStream);
  commStream = nullptr;
}
#endif

Communicator::~Communicator() {
#ifdef AUTOPAR_WITH_MPI
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
#endif
#ifdef AUTOPAR_COMM_NCCL
  impl->tearDownDevice(worldRank);
#endif
#ifdef AUTOPAR_COMM_MPI_FLOATS
  waitAll();
  if (impl->bf16Sum != MPI_OP_NULL)
    AUTOPAR_MPI_CALL(worldRank, MPI_Op_free, &impl->bf16Sum);
  if (impl->halfSum != MPI_OP_NULL)
    AUTOPAR_MPI_CALL(worldRank, MPI_Op_free, &impl->halfSum);
#endif
#ifdef AUTOPAR_WITH_MPI
  for (auto &[mask, sub] : impl->comms)
    AUTOPAR_MPI_CALL(worldRank, MPI_Comm_free, &sub);
  impl->comms.clear();
  if (impl->ownsMpi)
    MPI_Finalize();
#endif
}

int Communicator::numAxes() const { return int(impl->sizes.size()); }

void Communicator::fail(const char *what, const char *detail) {
  std::fflush(stdout);
  std::fprintf(stderr, "rank %d: Communicator::%s: %s\n", worldRank, what,
               detail);
  abort(1);
}

AxisMask Communicator::canonical(AxisMask axes, const char *what) {
  int n = numAxes();
  if (n < kMaxAxes && (axes >> n) != 0) {
    std::string detail = "axis mask " + std::to_string(axes) +
                         " names an axis beyond the mesh's " +
                         std::to_string(n) + (n == 1 ? " axis" : " axes");
    fail(what, detail.c_str());
  }
  return axes & impl->nontrivial;
}

int64_t Communicator::coord(int axis) const {
  return axis >= 0 && axis < numAxes() ? impl->coords[axis] : 0;
}

int64_t Communicator::groupSize(AxisMask axes) const {
  int64_t size = 1;
  for (int i = 0; i < numAxes(); ++i)
    if ((axes >> i) & 1)
      size *= impl->sizes[i];
  return size;
}

int64_t Communicator::groupIndex(AxisMask axes) const {
  int64_t index = 0;
  for (int i = 0; i < numAxes(); ++i)
    if ((axes >> i) & 1)
      index = index * impl->sizes[i] + impl->coords[i];
  return index;
}

void Communicator::resetBytes() {
  for (double &b : sentBytes)
    b = 0;
}

void Communicator::setMaxMessageElements(int64_t elements) {
  impl->maxElements = std::clamp<int64_t>(elements, 1, INT_MAX);
}

void Communicator::abort(int code) { endWorld(code); }

void Communicator::setComputeStream(void *stream) {
#ifdef AUTOPAR_COMM_DEVICE
  cudaStream_t compute = static_cast<cudaStream_t>(stream);
#ifdef AUTOPAR_COMM_NCCL
  if (compute != impl->compute && !impl->pending.empty())
    fail("setComputeStream", "requests are outstanding on the old stream");
#endif
  impl->compute = compute;
#else
  (void)stream;
#endif
}

CommRequest Communicator::allReduceSum(void *data, int64_t numElements,
                                       CommType type, AxisMask axes) {
  AxisMask mask = canonical(axes, "allReduceSum");
  if (numElements < 0)
    fail("allReduceSum", "negative element count");
  int64_t g = groupSize(mask);
  if (g == 1 || numElements == 0)
    return {};
  int64_t size = commTypeBytes(type);
  sentBytes[int(CollectiveKind::AllReduce)] +=
      allReduceBytes(numElements, g, size);
#if defined(AUTOPAR_COMM_MPI_FLOATS)
  MPI_Comm sub = impl->comms.at(mask);
  char *bytes = static_cast<char *>(data);
  int64_t id = impl->nextId++;
  Impl::Pending &p = impl->pending[id];
  for (int64_t off = 0; off < numElements; off += impl->maxElements) {
    int count = int(std::min(impl->maxElements, numElements - off));
    p.requests.push_back(MPI_REQUEST_NULL);
    AUTOPAR_MPI_CALL(worldRank, MPI_Iallreduce, MPI_IN_PLACE,
                     bytes + off * size, count, mpiType(type),
                     impl->sumOp(type), sub, &p.requests.back());
  }
  return {id};
#elif defined(AUTOPAR_COMM_NCCL)
  ncclComm_t nccl = impl->ncclComms.at(mask);
  impl->follow(worldRank);
  AUTOPAR_NCCL_CALL(worldRank, ncclAllReduce, data, data, size_t(numElements),
                    ncclType(type), ncclSum, nccl, impl->commStream);
  return {impl->finish(worldRank)};
#else
  (void)data;
  return {};
#endif
}

CommRequest Communicator::reduceScatterFlat(const void *full,
                                            int64_t numElements, void *piece,
                                            CommType type, AxisMask axes) {
  AxisMask mask = canonical(axes, "reduceScatterFlat");
  if (numElements < 0)
    fail("reduceScatterFlat", "negative element count");
  int64_t g = groupSize(mask);
  int64_t size = commTypeBytes(type);
  if (g == 1) {
#ifdef AUTOPAR_COMM_DEVICE
    deviceMove(piece, full, size_t(numElements * size), impl->compute,
               worldRank);
#else
    if (piece != full && numElements > 0)
      std::memmove(piece, full, numElements * size);
#endif
    return {};
  }
  int64_t chunk = flatChunk(numElements, g);
  if (chunk == 0)
    return {};
  sentBytes[int(CollectiveKind::ReduceScatter)] +=
      reduceScatterFlatBytes(numElements, g, size);
#if defined(AUTOPAR_COMM_MPI_FLOATS)
  const char *fullBytes = static_cast<const char *>(full);
  char *pieceBytes = static_cast<char *>(piece);
  MPI_Comm sub = impl->comms.at(mask);
  int64_t id = impl->nextId++;
  Impl::Pending &p = impl->pending[id];
  // The padded tensor, one region per message: region k holds, for every
  // group position j, elements [off, off + c) of block j. Zero bytes are
  // 0.0 in both types.
  p.staging.assign(g * chunk * size, 0);
  for (int64_t off = 0; off < chunk; off += impl->maxElements) {
    int64_t c = std::min(impl->maxElements, chunk - off);
    char *region = p.staging.data() + g * off * size;
    for (int64_t j = 0; j < g; ++j) {
      int64_t begin = j * chunk + off;
      int64_t valid = std::clamp<int64_t>(numElements - begin, 0, c);
      if (valid > 0)
        std::memcpy(region + j * c * size, fullBytes + begin * size,
                    valid * size);
    }
  }
  for (int64_t off = 0; off < chunk; off += impl->maxElements) {
    int64_t c = std::min(impl->maxElements, chunk - off);
    p.requests.push_back(MPI_REQUEST_NULL);
    AUTOPAR_MPI_CALL(worldRank, MPI_Ireduce_scatter_block,
                     p.staging.data() + g * off * size, pieceBytes + off * size,
                     int(c), mpiType(type), impl->sumOp(type), sub,
                     &p.requests.back());
  }
  return {id};
#elif defined(AUTOPAR_COMM_NCCL)
  // The padded copy is made on the compute stream, so that kernels issued
  // after this call may overwrite `full`; the communication stream frees it
  // after the reduction.
  ncclComm_t nccl = impl->ncclComms.at(mask);
  int64_t padded = g * chunk;
  char *staging =
      impl->allocate(size_t(padded * size), impl->compute, worldRank);
  AUTOPAR_COMM_CUDA_CALL(worldRank, cudaMemcpyAsync, staging, full,
                         size_t(numElements * size), cudaMemcpyDeviceToDevice,
                         impl->compute);
  if (padded > numElements)
    AUTOPAR_COMM_CUDA_CALL(
        worldRank, cudaMemsetAsync, staging + numElements * size, 0,
        size_t((padded - numElements) * size), impl->compute);
  impl->follow(worldRank);
  AUTOPAR_NCCL_CALL(worldRank, ncclReduceScatter, staging, piece, size_t(chunk),
                    ncclType(type), ncclSum, nccl, impl->commStream);
  AUTOPAR_COMM_CUDA_CALL(worldRank, cudaFreeAsync, staging, impl->commStream);
  return {impl->finish(worldRank)};
#else
  (void)piece;
  return {};
#endif
}

CommRequest Communicator::allGatherFlat(const void *piece, int64_t numElements,
                                        void *full, CommType type,
                                        AxisMask axes) {
  AxisMask mask = canonical(axes, "allGatherFlat");
  if (numElements < 0)
    fail("allGatherFlat", "negative element count");
  int64_t g = groupSize(mask);
  int64_t size = commTypeBytes(type);
  if (g == 1) {
#ifdef AUTOPAR_COMM_DEVICE
    deviceMove(full, piece, size_t(numElements * size), impl->compute,
               worldRank);
#else
    if (piece != full && numElements > 0)
      std::memmove(full, piece, numElements * size);
#endif
    return {};
  }
  int64_t chunk = flatChunk(numElements, g);
  if (chunk == 0)
    return {};
  sentBytes[int(CollectiveKind::AllGather)] +=
      allGatherFlatBytes(numElements, g, size);
#if defined(AUTOPAR_COMM_MPI_FLOATS)
  char *fullBytes = static_cast<char *>(full);
  auto countOf = [&](int64_t j) {
    return std::clamp<int64_t>(numElements - j * chunk, 0, chunk);
  };
  int64_t i = groupIndex(mask);
  char *own = fullBytes + std::min(i * chunk, numElements) * size;
  if (piece != own && countOf(i) > 0)
    std::memmove(own, piece, countOf(i) * size);
  MPI_Comm sub = impl->comms.at(mask);
  int64_t id = impl->nextId++;
  Impl::Pending &p = impl->pending[id];
  if (numElements <= impl->maxElements) {
    for (int64_t j = 0; j < g; ++j) {
      p.counts.push_back(int(countOf(j)));
      p.displs.push_back(int(std::min(j * chunk, numElements)));
    }
    p.requests.push_back(MPI_REQUEST_NULL);
    AUTOPAR_MPI_CALL(worldRank, MPI_Iallgatherv, MPI_IN_PLACE, 0,
                     MPI_DATATYPE_NULL, full, p.counts.data(), p.displs.data(),
                     mpiType(type), sub, &p.requests.back());
    return {id};
  }
  // Displacements past INT_MAX: every position broadcasts its block in
  // messages of at most maxElements.
  for (int64_t j = 0; j < g; ++j) {
    int64_t count = countOf(j);
    for (int64_t off = 0; off < count; off += impl->maxElements) {
      int c = int(std::min(impl->maxElements, count - off));
      p.requests.push_back(MPI_REQUEST_NULL);
      AUTOPAR_MPI_CALL(worldRank, MPI_Ibcast,
                       fullBytes + (j * chunk + off) * size, c, mpiType(type),
                       int(j), sub, &p.requests.back());
    }
  }
  return {id};
#elif defined(AUTOPAR_COMM_NCCL)
  // This rank's piece is read on the compute stream (the caller may reuse
  // it once this returns), into the slot that an in-place ncclAllGather
  // sends from: `full` itself when g divides numElements, else a padded
  // staging buffer whose first numElements elements go to `full` after.
  ncclComm_t nccl = impl->ncclComms.at(mask);
  int64_t i = groupIndex(mask);
  if (numElements == g * chunk) {
    char *own = static_cast<char *>(full) + i * chunk * size;
    deviceMove(own, piece, size_t(chunk * size), impl->compute, worldRank);
    impl->follow(worldRank);
    AUTOPAR_NCCL_CALL(worldRank, ncclAllGather, own, full, size_t(chunk),
                      ncclType(type), nccl, impl->commStream);
    return {impl->finish(worldRank)};
  }
  int64_t count = std::clamp<int64_t>(numElements - i * chunk, 0, chunk);
  char *staging =
      impl->allocate(size_t(g * chunk * size), impl->compute, worldRank);
  char *slot = staging + i * chunk * size;
  if (count > 0)
    AUTOPAR_COMM_CUDA_CALL(worldRank, cudaMemcpyAsync, slot, piece,
                           size_t(count * size), cudaMemcpyDeviceToDevice,
                           impl->compute);
  if (count < chunk)
    AUTOPAR_COMM_CUDA_CALL(worldRank, cudaMemsetAsync, slot + count * size, 0,
                           size_t((chunk - count) * size), impl->compute);
  impl->follow(worldRank);
  AUTOPAR_NCCL_CALL(worldRank, ncclAllGather, slot, staging, size_t(chunk),
                    ncclType(type), nccl, impl->commStream);
  AUTOPAR_COMM_CUDA_CALL(worldRank, cudaMemcpyAsync, full, staging,
                         size_t(numElements * size), cudaMemcpyDeviceToDevice,
                         impl->commStream);
  AUTOPAR_COMM_CUDA_CALL(worldRank, cudaFreeAsync, staging, impl->commStream);
  return {impl->finish(worldRank)};
#else
  (void)piece;
  (void)full;
  return {};
#endif
}

void Communicator::wait(CommRequest request) {
#if defined(AUTOPAR_COMM_MPI_FLOATS)
  auto it = impl->pending.find(request.id);
  if (it == impl->pending.end())
    return;
  std::vector<MPI_Request> &requests = it->second.requests;
  AUTOPAR_MPI_CALL(worldRank, MPI_Waitall, int(requests.size()),
                   requests.data(), MPI_STATUSES_IGNORE);
  impl->pending.erase(it);
#elif defined(AUTOPAR_COMM_NCCL)
  auto it = impl->pending.find(request.id);
  if (it != impl->pending.end())
    impl->complete(it, worldRank);
#else
  (void)request;
#endif
}

void Communicator::waitAll() {
#if defined(AUTOPAR_COMM_MPI_FLOATS)
  for (auto &[id, p] : impl->pending)
    AUTOPAR_MPI_CALL(worldRank, MPI_Waitall, int(p.requests.size()),
                     p.requests.data(), MPI_STATUSES_IGNORE);
  impl->pending.clear();
#elif defined(AUTOPAR_COMM_NCCL)
  while (!impl->pending.empty())
    impl->complete(impl->pending.begin(), worldRank);
#endif
}

void Communicator::progress() {
  // NCCL collectives progress on the GPU: nothing to do.
#if defined(AUTOPAR_COMM_MPI_FLOATS)
  for (auto it = impl->pending.begin(); it != impl->pending.end();) {
    int done = 0;
    std::vector<MPI_Request> &requests = it->second.requests;
    AUTOPAR_MPI_CALL(worldRank, MPI_Testall, int(requests.size()),
                     requests.data(), &done, MPI_STATUSES_IGNORE);
    it = done ? impl->pending.erase(it) : std::next(it);
  }
#endif
}

void Communicator::allReduceSumDouble(double *data, int64_t numElements,
                                      AxisMask axes) {
  AxisMask mask = canonical(axes, "allReduceSumDouble");
  if (numElements < 0)
    fail("allReduceSumDouble", "negative element count");
  if (groupSize(mask) == 1)
    return;
#ifdef AUTOPAR_WITH_MPI
  MPI_Comm sub = impl->comms.at(mask);
  for (int64_t off = 0; off < numElements; off += impl->maxElements) {
    int count = int(std::min(impl->maxElements, numElements - off));
    AUTOPAR_MPI_CALL(worldRank, MPI_Allreduce, MPI_IN_PLACE, data + off, count,
                     MPI_DOUBLE, MPI_SUM, sub);
  }
#else
  (void)data;
#endif
}

void Communicator::broadcastBytes(void *data, int64_t bytes) {
  if (bytes < 0)
    fail("broadcastBytes", "negative byte count");
  if (numRanks == 1)
    return;
#ifdef AUTOPAR_WITH_MPI
  char *base = static_cast<char *>(data);
  for (int64_t off = 0; off < bytes; off += impl->maxElements) {
    int count = int(std::min(impl->maxElements, bytes - off));
    AUTOPAR_MPI_CALL(worldRank, MPI_Bcast, base + off, count, MPI_BYTE, 0,
                     MPI_COMM_WORLD);
  }
#else
  (void)data;
#endif
}

void Communicator::barrier() {
#ifdef AUTOPAR_WITH_MPI
  if (numRanks > 1)
    AUTOPAR_MPI_CALL(worldRank, MPI_Barrier, MPI_COMM_WORLD);
#endif
}

} // namespace autopar::rt
