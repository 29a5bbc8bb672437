//===- Comm.h - the communicator of an emitted CPU program ------*- C++ -*-===//
//
// The ranks of a training program form the device mesh of its plan (a
// `dist.mesh`, docs/dist-dialect.md): an n-dimensional array of ranks with
// named axes, numbered row-major over the axes in their declared order (the
// last axis varies fastest); a rank's number is its MPI_COMM_WORLD rank. A
// collective runs over a group of axes: the ranks that share this rank's
// coordinates on every other axis. A rank's position in a group is its
// coordinates on the group's axes, major to minor in mesh axis order.
//
// Two builds of the same source:
//  - with AUTOPAR_WITH_MPI (linked with MPI): one MPI sub-communicator per
//    group, non-blocking float collectives that the generated code overlaps
//    with its kernels;
//  - without (no MPI headers at all): a one-rank program where every group
//    has one rank and every collective is a local copy or nothing.
//
// Errors of the launch (a world that is not the plan's mesh) come back as a
// Status from create(), computed alike on every rank so that every rank
// reports and stops: no hang. A failing MPI call is a bug or a broken
// machine: it prints "FILE:LINE: rank R: MPI_Xxx failed: REASON" and ends
// every rank with MPI_Abort. Only the thread that called create() may call
// the communicator (MPI_THREAD_FUNNELED).
//
// The byte closed forms at the end are pure and inline: the compiler's
// report includes this header (without MPI) to predict what the counters of
// the running program will say.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_COMM_COMM_H
#define AUTOPAR_RUNTIME_COMM_COMM_H

#include "runtime/Status.h"

#include <cstdint>
#include <memory>

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

enum class CollectiveKind { AllReduce = 0, ReduceScatter, AllGather };
constexpr int kNumCollectiveKinds = 3;

/// A non-blocking collective in flight; id -1 is no request (the collective
/// was local and is already complete).
struct CommRequest {
  int64_t id = -1;
};

class Communicator {
public:
  /// Starts MPI (MPI_Init_thread with MPI_THREAD_FUNNELED) when built with
  /// MPI and checks that the world is the mesh of `axes` (1 to 32 axes,
  /// sizes >= 1, at most 8 of them > 1); otherwise returns "the plan's mesh
  /// has N ranks (dp=2, tp=2) but the program was launched with M; run it
  /// with mpirun -np N" on every rank. Then `out` still holds the (unusable)
  /// communicator, whose destructor only finalizes MPI: print the error
  /// first, then destroy it, so that every rank has printed before any rank
  /// exits (mpirun kills the job when the first rank exits non-zero). Other
  /// errors leave `out` empty. Without MPI the world has one rank, unless the
  /// launcher's environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE) says otherwise,
  /// which is the same error. Creates the sub-communicator of every group at
  /// once, so that no collective can wait on a rank that never creates its
  /// group.
  static Status create(int *argc, char ***argv, const MeshAxisInfo *axes,
                       int numAxes, std::unique_ptr<Communicator> &out);
  /// Waits for the outstanding requests, frees the sub-communicators and
  /// calls MPI_Finalize (if create() started MPI).
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

  /// Non-blocking collectives over the group `axes` on float32 buffers. The
  /// buffers must stay alive and untouched until the request completes
  /// (wait / waitAll). Every rank of a group issues the same collectives on
  /// it in the same order, with the same element counts.
  ///
  /// In-place sum over the group.
  CommRequest allReduceSum(float *data, int64_t numElements, AxisMask axes);
  /// ZeRO flat shards: the tensor's numElements elements padded with zeros to
  /// g * chunk, chunk = flatChunk(numElements, g), g = groupSize(axes); the
  /// rank at group position i receives into `piece` (chunk elements) the sum
  /// over the group of elements [i*chunk, (i+1)*chunk) (padding reads as 0).
  /// `full` is not modified and is read before this returns (into a
  /// staging copy that the request owns), so the caller may reuse it at
  /// once: generated code frees a gradient as soon as its reduce-scatter is
  /// issued, and `piece` may overlap `full` (ZeRO-1's in-place shard).
  CommRequest reduceScatterFlat(const float *full, int64_t numElements,
                                float *piece, AxisMask axes);
  /// Inverse: every rank contributes its piece (its first
  /// min(chunk, max(0, numElements - i*chunk)) elements are read); `full`
  /// (numElements elements, no padding) receives the concatenation with the
  /// padding dropped. `piece` may be `full + i*chunk` (in place: the
  /// optimizer updated its own range of the full parameter), or any other
  /// buffer (copied into place before this returns).
  CommRequest allGatherFlat(const float *piece, int64_t numElements,
                            float *full, AxisMask axes);
  /// Completes one request (no-op for an invalid or completed id).
  void wait(CommRequest request);
  /// Completes every outstanding request.
  void waitAll();
  /// Lets outstanding non-blocking collectives progress (MPI_Testall);
  /// called by generated code between kernels so that the reduction of
  /// bucket k overlaps the rest of backward.
  void progress();
  /// Blocking in-place sum of doubles over the group (losses, squared norms).
  void allReduceSumDouble(double *data, int64_t numElements, AxisMask axes);
  /// Blocking broadcast of `bytes` bytes from world rank 0 to every rank.
  void broadcastBytes(void *data, int64_t bytes);
  void barrier();

  /// Logical bytes sent per rank by each collective kind since the last
  /// resetBytes(), by the ring formulas of REFERENCE.md (the closed forms
  /// below), counted when a collective is issued. A group of one rank moves
  /// 0 bytes. Only the float collectives above count: allReduceSumDouble,
  /// broadcastBytes and barrier (scalars and metadata) do not.
  double bytes(CollectiveKind kind) const {
    return sentBytes[static_cast<int>(kind)];
  }
  void resetBytes();

  /// Ends every rank of the world (MPI_Abort) after an error on this one.
  [[noreturn]] void abort(int code);

  /// For tests: split every MPI message into pieces of at most `elements`
  /// elements (bytes for broadcastBytes; default and maximum INT_MAX, MPI's
  /// counts being int), which is what counts past INT_MAX get. Every rank
  /// must set the same value.
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
  double sentBytes[kNumCollectiveKinds] = {0, 0, 0};
  std::unique_ptr<Impl> impl;
};

/// Bytes sent per rank by a ring all-reduce of numElements elements over a
/// group of groupSize ranks: 2 (g-1)/g S, S the bytes of the buffer.
inline double allReduceBytes(int64_t numElements, int64_t groupSize,
                             int64_t elementBytes) {
  if (groupSize <= 1)
    return 0;
  return 2.0 * double(groupSize - 1) * double(numElements) *
         double(elementBytes) / double(groupSize);
}

/// Elements of one rank's flat shard: ceil(numElements / groupSize).
inline int64_t flatChunk(int64_t numElements, int64_t groupSize) {
  if (groupSize <= 1)
    return numElements;
  return (numElements + groupSize - 1) / groupSize;
}

/// How ZeRO `stage` over `dp` ranks keeps one trainable tensor of
/// `numElements` elements on each rank: runtime/cpu/TrainMain.cpp allocates
/// this, the compiler's report counts it.
struct ZeroLayout {
  /// The optimizer state: this rank's flat shard (the whole tensor at
  /// stage 0).
  int64_t stateElements;
  /// The gradient: whole (stage 0), whole and padded to dp shards (stage 1:
  /// reduce-scattered in place once per step), the shard (stages 2, 3).
  int64_t gradElements;
};

inline ZeroLayout zeroLayout(int64_t stage, int64_t numElements, int64_t dp) {
  int64_t chunk = stage > 0 ? flatChunk(numElements, dp) : numElements;
  return {chunk, stage == 0   ? numElements
                 : stage == 1 ? chunk * dp
                              : chunk};
}

/// Bytes sent per rank by reduceScatterFlat: (g-1)/g S with S the padded
/// buffer's g * chunk elements, i.e. (g-1) chunk elements.
inline double reduceScatterFlatBytes(int64_t numElements, int64_t groupSize,
                                     int64_t elementBytes) {
  if (groupSize <= 1)
    return 0;
  return double(groupSize - 1) * double(flatChunk(numElements, groupSize)) *
         double(elementBytes);
}

/// Bytes sent per rank by allGatherFlat: the same as reduceScatterFlat.
inline double allGatherFlatBytes(int64_t numElements, int64_t groupSize,
                                 int64_t elementBytes) {
  return reduceScatterFlatBytes(numElements, groupSize, elementBytes);
}

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_COMM_COMM_H
