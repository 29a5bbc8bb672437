//===- Comm.h - the communicator of an emitted program ----------*- C++ -*-===//
//
// The ranks of a training program form the device mesh of its plan (a
// `dist.mesh`, docs/dist-dialect.md): an n-dimensional array of ranks with
// named axes, numbered row-major over the axes in their declared order (the
// last axis varies fastest); a rank's number is its world rank (MPI's, or
// the launcher's: runtime/comm/Launch.h). A collective runs over a group of
// axes: the ranks that share this rank's coordinates on every other axis. A
// rank's position in a group is its coordinates on the group's axes, major
// to minor in mesh axis order.
//
// Three builds of the same source:
//  - with AUTOPAR_WITH_MPI alone (linked with MPI; the CPU target): one MPI
//    sub-communicator per group, non-blocking collectives of float32 or
//    bfloat16 buffers in HOST memory that the generated code overlaps with
//    its kernels;
//  - with AUTOPAR_WITH_NCCL (linked with NCCL and the CUDA runtime, and with
//    MPI where the machine has it; the CUDA target over several ranks): the
//    world forms by MPI under mpirun (or MPICH's launcher) in a program
//    linked with MPI, and otherwise with no MPI at all, through the
//    rendezvous at MASTER_ADDR:MASTER_PORT (runtime/comm/Rendezvous.h; srun,
//    torchrun, a script). One NCCL communicator per group runs everything:
//    the float32 and bfloat16 collectives take DEVICE pointers and run on
//    the communicator's own stream, ordered after the compute stream's work
//    by CUDA events (setComputeStream); the host collectives
//    (allReduceSumDouble, broadcastBytes, barrier) go through a device
//    staging buffer;
//  - with neither (no MPI or NCCL headers at all): a one-rank program where
//    every group has one rank and every collective is a local copy or
//    nothing; with AUTOPAR_COMM_DEVICE (a one-rank CUDA program) the copies
//    are device-to-device copies on the compute stream.
//
// Errors of the launch (a world that is not the plan's mesh, no endpoint, a
// rank that never arrives) come back as a Status from create(), computed
// alike on every rank so that every rank reports and stops: no hang. A
// failing MPI, CUDA or NCCL call is a bug or a broken machine: it prints
// "FILE:LINE: rank R: CALL failed: REASON" and ends every rank
// (ncclCommAbort, MPI_Abort while MPI is up, exit status 1). Only the
// thread that called create() may call the communicator
// (MPI_THREAD_FUNNELED).
//
// The bytes each collective sends and the ZeRO shard sizes are closed forms
// in runtime/comm/CommBytes.h, which the compiler (cost analysis, report,
// ZeRO partition) includes without this class. The header never includes
// CUDA headers (streams are passed as void *).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_COMM_COMM_H
#define AUTOPAR_RUNTIME_COMM_COMM_H

#include "runtime/Status.h"
#include "runtime/comm/CommBytes.h"

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace autopar::rt {

/// One axis of the mesh: its name (for messages) and size (>= 1).
struct MeshAxisInfo {
  const char *name;
  int64_t size;
};

/// Bitmask over mesh axis indices (bit i = axis i of the mesh): a group of
/// ranks is the ranks that share this rank's coordinates on every axis NOT in
/// the mask. Position in a group: coordinates on the masked axes, major to
/// minor in mesh axis order (row-major). The empty mask is the rank alone.
using AxisMask = uint32_t;

/// Point-to-point sends (pipeline stages' activations and gradients) are
/// counted as `Send`, under the axes on which the two ranks' coordinates
/// differ.
enum class CollectiveKind {
  AllReduce = 0,
  ReduceScatter,
  AllGather,
  Send,
  AllToAll
};
constexpr int kNumCollectiveKinds = 5;

/// One point-to-point transfer of `exchange`: `bytes` bytes of `data` (the
/// backend's kind of memory) sent to or received from world rank `peer`.
/// `tag` tells apart the messages between two ranks in the MPI build; in
/// the NCCL build (no tags) the receiver must post its receives from a
/// peer in the order that peer sends.
struct PointToPoint {
  bool send;
  void *data;
  int64_t bytes;
  int peer;
  int tag;
};

/// Element type of a collective's buffers.
enum class CommType {
  /// IEEE float32.
  F32,
  /// bfloat16: the upper 16 bits of an IEEE float32, stored as uint16_t.
  BF16,
  /// IEEE half (binary16), stored as uint16_t.
  F16
};

/// Bytes per element of `type`.
inline int commTypeBytes(CommType type) {
  return type == CommType::F32 ? 4 : 2;
}

/// A non-blocking collective in flight; id -1 is no request (the collective
/// was local and is already complete).
struct CommRequest {
  int64_t id = -1;
};

class Communicator {
public:
  /// Forms the world and checks that it is the mesh of `axes` (1 to 32
  /// axes, sizes >= 1, at most 8 of them > 1); otherwise returns "the plan's
  /// mesh has N ranks (dp=2, tp=2) but the program was launched with M; ..."
  /// on every rank. MPI builds start MPI (MPI_Init_thread with
  /// MPI_THREAD_FUNNELED) and, on that error, leave the (unusable)
  /// communicator in `out`, whose destructor only finalizes MPI: print the
  /// error first, then destroy it, so that every rank has printed before any
  /// rank exits (mpirun kills the job when the first rank exits non-zero).
  /// Other errors leave `out` empty. A one-rank build refuses a launcher's
  /// world of several (OMPI_COMM_WORLD_SIZE, SLURM_NTASKS, WORLD_SIZE...).
  /// The watchdog (setTimeout(timeoutSeconds, program)) is armed before the
  /// groups form, and the rendezvous of an NCCL build without MPI waits at
  /// most `timeoutSeconds` (600 when <= 0). Every group is made at once, so
  /// that no collective can wait on a rank that never makes its group.
  ///
  /// NCCL build: call it AFTER cudaSetDevice (the rank's GPU is the current
  /// device): it creates, on the current device, the communication stream
  /// (cudaStreamNonBlocking), a memory pool for staging buffers, the world's
  /// NCCL communicator (ncclCommInitRank from world rank 0's ncclUniqueId,
  /// handed over by MPI_Bcast or the rendezvous) and one per other group
  /// (ncclCommSplit). A failing CUDA or NCCL call here ends every rank (it
  /// is not a Status).
  static Status create(int *argc, char ***argv, const MeshAxisInfo *axes,
                       int numAxes, std::unique_ptr<Communicator> &out,
                       double timeoutSeconds = 0,
                       const char *program = "train");
  /// Waits for the outstanding requests, frees the groups and calls
  /// MPI_Finalize (if create() started MPI). NCCL build: does not touch the
  /// compute stream (it may be destroyed already): drops the outstanding
  /// requests, synchronizes the communication stream, destroys the NCCL
  /// communicators, the events, the pool and the stream (a failing call
  /// ends every rank, as anywhere else), then the MPI part as above.
  ~Communicator();
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  int rank() const { return worldRank; }
  int worldSize() const { return numRanks; }
  int numAxes() const;
  /// This rank's coordinate on mesh axis `axis` (0 for an axis not in the
  /// mesh).
  int64_t coord(int axis) const;
  /// Ranks in the group over `axes` (the product of their sizes).
  int64_t groupSize(AxisMask axes) const;
  /// This rank's position in the group over `axes`.
  int64_t groupIndex(AxisMask axes) const;

  /// NCCL build: the cudaStream_t (passed as void *) on which the program
  /// runs its kernels, the "compute stream"; nullptr (the default) is the
  /// legacy default stream. Each float32 or bfloat16 collective first makes the
  /// communication stream wait for the work issued on the compute stream so
  /// far (an event), so it sees what the kernels produced; what a
  /// collective reads from a buffer the caller may reuse at once (the
  /// staging copy of reduceScatterFlat, the piece of allGatherFlat) is read
  /// by a copy on the compute stream, ordered before any later kernel; and
  /// wait() / waitAll() make the compute stream wait for the collective's
  /// completion. Set it before the first collective and change it only when
  /// no request is outstanding. A no-op in the other builds.
  void setComputeStream(void *stream);

  /// Non-blocking collectives over the group `axes` on buffers of
  /// numElements elements of `type`, float32 or bfloat16 (HOST memory in the
  /// MPI build, DEVICE memory in the NCCL build). The buffers must stay
  /// alive and untouched until the request completes (wait / waitAll; in
  /// the NCCL build: untouched by any GPU work but that issued on the
  /// compute stream after wait / waitAll, the first that may use them).
  /// Every rank of a group issues the same collectives on it in the same
  /// order, with the same element counts and types.
  ///
  /// A bfloat16 (IEEE half) sum is computed in float and rounded to
  /// bfloat16 (half) (to nearest, ties to even; a NaN stays a NaN; half
  /// overflows to infinity) after each addition: a user-defined MPI_Op over
  /// MPI_UINT16_T in the MPI build, NCCL's ncclBfloat16 (ncclHalf) sum in
  /// the NCCL build. The library picks the order of the
  /// additions, so a sum over g ranks is within g - 1 roundings of the
  /// exact sum, and exact when every partial sum is a bfloat16 (small
  /// integers).
  ///
  /// NCCL build: a collective over a group of more than one rank is issued
  /// on the communication stream after the compute stream's work so far
  /// and returns a request whose completion is a CUDA event; a group of
  /// one rank is the copy described below, on the compute stream, and no
  /// request. Staging buffers come from the communicator's memory pool,
  /// allocated on the compute stream and freed in stream order on the
  /// communication stream right after their last use (cudaFreeAsync), so
  /// nothing waits on the host. Under CUDA stream capture of the compute
  /// stream the whole collective is captured (events, copies, pool
  /// allocations, NCCL calls): every request issued in a capture must be
  /// waited on in the same capture. All the collectives of a rank run one
  /// after the other on the communication stream, in issue order, so ranks
  /// must issue the collectives of different groups in the same relative
  /// order too (an SPMD program does), or two groups can deadlock on the GPU.
  ///
  /// In-place sum over the group (NCCL build: ncclAllReduce, ncclSum).
  CommRequest allReduceSum(void *data, int64_t numElements, CommType type,
                           AxisMask axes);
  /// In-place maximum over the group, of float32 elements (NCCL build:
  /// ncclAllReduce, ncclMax): the max of a vocab-parallel loss's scores.
  CommRequest allReduceMax(float *data, int64_t numElements, AxisMask axes);
  /// ZeRO flat shards: the tensor's numElements elements padded with zeros to
  /// g * chunk, chunk = flatChunk(numElements, g), g = groupSize(axes); the
  /// rank at group position i receives into `piece` (chunk elements) the sum
  /// over the group of elements [i*chunk, (i+1)*chunk) (padding reads as 0).
  /// `full` is not modified and is read before this returns (into a
  /// staging copy that the request owns), so the caller may reuse it at
  /// once: generated code frees a gradient as soon as its reduce-scatter is
  /// issued, and `piece` may overlap `full` (ZeRO-1's in-place shard).
  /// NCCL build: the staging copy (g * chunk elements, the padding zeroed
  /// with cudaMemsetAsync) is made on the compute stream, so kernels issued
  /// after this call may overwrite `full`; then ncclReduceScatter from the
  /// staging buffer into `piece` on the communication stream. With g = 1,
  /// `full` is copied to `piece` (device to device, overlap allowed).
  CommRequest reduceScatterFlat(const void *full, int64_t numElements,
                                void *piece, CommType type, AxisMask axes);
  /// Inverse: every rank contributes its piece (its first
  /// min(chunk, max(0, numElements - i*chunk)) elements are read); `full`
  /// (numElements elements, no padding) receives the concatenation with the
  /// padding dropped. `piece` may be `full + i*chunk` (in place: the
  /// optimizer updated its own range of the full parameter), or any other
  /// buffer (copied into place before this returns).
  /// NCCL build: "before this returns" is "on the compute stream, before
  /// any work issued after this call". Without padding (g divides
  /// numElements) the piece is copied into `full + i*chunk` (unless it is
  /// there) and an in-place ncclAllGather fills `full`; with padding, the
  /// piece goes into a staging buffer of g * chunk elements, which
  /// ncclAllGather fills in place, and its first numElements elements are
  /// copied to `full` on the communication stream. With g = 1, `piece` is
  /// copied to `full` (device to device, overlap allowed).
  CommRequest allGatherFlat(const void *piece, int64_t numElements, void *full,
                            CommType type, AxisMask axes);
  /// Every rank of the group sends block j of `send` (numElements / g
  /// elements, g = groupSize(axes), which must divide numElements) to the
  /// rank at group position j and receives that rank's block for it into
  /// block j of `recv`: the exchange of context parallelism's Ulysses
  /// attention (sequence-split to head-split and back) and of expert
  /// dispatch. `recv` must not overlap `send`; `send` is read before this
  /// returns (into a staging copy that the request owns), so the caller may
  /// reuse it at once. MPI build: MPI_Ialltoall (blocks past the message
  /// limit as point-to-point pieces); NCCL build: the staging copy on the
  /// compute stream, then ncclSend / ncclRecv to every position in one
  /// group on the communication stream. With g = 1, `send` is copied to
  /// `recv`.
  CommRequest allToAllFlat(const void *send, int64_t numElements, void *recv,
                           CommType type, AxisMask axes);
  /// A ring step over the group of `axes` (g ranks): sends `numElements`
  /// elements of `send` to the rank `offset` positions after this one (mod
  /// g) and receives as many into `recv` from the rank `offset` positions
  /// before it (context parallelism's ring attention passes the keys and
  /// values so). `recv` must not overlap `send`; `send` is read before this
  /// returns (a staging copy, as allToAllFlat's). Counted as a `Send` over
  /// `axes`. MPI build: MPI_Isend / MPI_Irecv on the group's communicator
  /// (in pieces past the message limit); NCCL build: ncclSend / ncclRecv in
  /// one group. With g = 1 or offset a multiple of g, `send` is copied to
  /// `recv`.
  CommRequest shift(const void *send, int64_t numElements, void *recv,
                    CommType type, AxisMask axes, int64_t offset);
  /// The collectives above on float32 buffers.
  CommRequest allReduceSum(float *data, int64_t numElements, AxisMask axes) {
    return allReduceSum(data, numElements, CommType::F32, axes);
  }
  CommRequest reduceScatterFlat(const float *full, int64_t numElements,
                                float *piece, AxisMask axes) {
    return reduceScatterFlat(full, numElements, piece, CommType::F32, axes);
  }
  CommRequest allGatherFlat(const float *piece, int64_t numElements,
                            float *full, AxisMask axes) {
    return allGatherFlat(piece, numElements, full, CommType::F32, axes);
  }
  /// Starts the transfers `ops` together (MPI: MPI_Isend / MPI_Irecv of
  /// bytes; NCCL: ncclSend / ncclRecv in one group on the world
  /// communicator, so that two ranks that send each other something do not
  /// wait on each other), one request for all; with `each`, instead one
  /// request per transfer in each[i], which completes at least that
  /// transfer (MPI: its own; NCCL: the group's), and an invalid request
  /// returned. A send's buffer must stay untouched, and a receive's
  /// unread, until its request completes. Fails (every rank ends) on a peer
  /// outside the world or this rank itself, or a negative size or tag.
  CommRequest exchange(const PointToPoint *ops, int count,
                       CommRequest *each = nullptr);
  /// Completes one request (no-op for an invalid or completed id). NCCL
  /// build: makes the compute stream wait for the request's completion
  /// event (cudaStreamWaitEvent): the host does not block; work issued on
  /// the compute stream afterwards sees the result.
  void wait(CommRequest request);
  /// Completes every outstanding request (NCCL build: the compute stream
  /// waits for each of them, as wait()).
  void waitAll();
  /// Lets outstanding non-blocking collectives progress (MPI_Testall);
  /// called by generated code between kernels so that the reduction of
  /// bucket k overlaps the rest of backward. A no-op in the NCCL build
  /// (the GPU progresses NCCL collectives on its own).
  void progress();
  /// Blocking in-place sum of doubles in HOST memory over the group
  /// (losses, squared norms). NCCL build: an ncclFloat64 sum on the
  /// communication stream, after the collectives issued before it.
  void allReduceSumDouble(double *data, int64_t numElements, AxisMask axes);
  /// Blocking broadcast of `bytes` bytes of HOST memory from world rank 0 to
  /// every rank (NCCL build: ncclBroadcast, as above).
  void broadcastBytes(void *data, int64_t bytes);
  /// Blocks until every rank has called it (NCCL build: a sum over the
  /// world, as above; it orders no compute-stream work).
  void barrier();

  /// Logical bytes sent per rank by each collective kind since the last
  /// resetBytes(), by the ring formulas of REFERENCE.md (the closed forms
  /// below, with the element size of the collective's type:
  /// commTypeBytes), counted when a collective is issued. A group of one
  /// rank moves 0 bytes. Only the float32 and bfloat16 collectives above
  /// count: allReduceSumDouble, broadcastBytes and barrier (scalars and
  /// metadata) do not. The same in every build.
  double bytes(CollectiveKind kind) const {
    double total = 0;
    for (const auto &entry : sentBytes)
      total += entry.second[static_cast<int>(kind)];
    return total;
  }
  /// The same for the collectives over one group (a canonical mask).
  double bytes(CollectiveKind kind, AxisMask group) const {
    auto it = sentBytes.find(group);
    return it == sentBytes.end() ? 0 : it->second[static_cast<int>(kind)];
  }
  /// The groups (canonical masks) that sent bytes since resetBytes().
  std::vector<AxisMask> groupsWithBytes() const {
    std::vector<AxisMask> groups;
    for (const auto &entry : sentBytes)
      groups.push_back(entry.first);
    return groups;
  }
  void resetBytes();

  /// Ends every rank of the world after an error on this one (ncclCommAbort,
  /// MPI_Abort while MPI is up; without MPI the launcher ends the others).
  [[noreturn]] void abort(int code);

  /// The watchdog (plan comm.timeout_s, as PyTorch's NCCL watchdog): while
  /// this rank is blocked in wait, waitAll, allReduceSumDouble,
  /// broadcastBytes or barrier for longer than `seconds`, a thread prints
  /// one line, "PROGRAM: rank R: <the call> did not complete in S s
  /// (comm.timeout_s): another rank stopped or the network is down; ending
  /// the job", and ends this process (mpirun then ends the others).
  /// `seconds` <= 0 turns it off; one rank has none. In the NCCL build the
  /// collectives run on the GPU's streams and the host blocks later, on the
  /// device work that waits for them: a DeviceWork spans that (the step);
  /// the thread also polls NCCL's asynchronous errors (a peer that died, a
  /// network failure) and ends this rank on one: "PROGRAM: rank R: NCCL
  /// failed in <the call>: REASON; ending the job".
  void setTimeout(double seconds, const char *program);

  /// In the NCCL build, marks the calling thread as waiting on device work
  /// that includes this rank's NCCL collectives (a training step, from its
  /// first collective to the step's last host wait) for the watchdog,
  /// described as `what`; the host collectives inside it are watched on
  /// their own. A no-op in MPI builds (their collectives block the host where
  /// they are called).
  class DeviceWork {
  public:
    DeviceWork(Communicator &comm, const char *what);
    ~DeviceWork();
    DeviceWork(const DeviceWork &) = delete;
    DeviceWork &operator=(const DeviceWork &) = delete;

  private:
    struct Guard;
    std::unique_ptr<Guard> blocked;
  };

  /// For tests: split every MPI message into pieces of at most `elements`
  /// elements (bytes for broadcastBytes; default and maximum INT_MAX, MPI's
  /// counts being int), which is what counts past INT_MAX get. Every rank
  /// must set the same value. The NCCL build ignores it: NCCL counts are
  /// size_t and its collectives are never split.
  void setMaxMessageElements(int64_t elements);

private:
  struct Impl;
  Communicator();
  /// Reports a misuse ("rank R: WHAT") and aborts the world.
  [[noreturn]] void fail(const char *what, const char *detail);
  /// The mask without out-of-range bits checked, without size-1 axes.
  AxisMask canonical(AxisMask axes, const char *what);

  int worldRank = 0;
  int numRanks = 1;
  /// Bytes sent by kind, per group.
  std::map<AxisMask, std::array<double, kNumCollectiveKinds>> sentBytes;
  std::unique_ptr<Impl> impl;
};

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_COMM_COMM_H
