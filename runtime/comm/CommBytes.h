//===- CommBytes.h - what the collectives send, in closed form --*- C++ -*-===//
//
// The bytes one rank sends in each collective of runtime/comm/Comm.h and the
// size of a flat ZeRO shard: pure inline functions with no dependencies, so
// that the compiler (CostAnalysis, the report, ZeroPartition, the program
// writer) predicts exactly what the running program's counters say and
// allocates. One home: the Communicator counts its bytes with these.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_COMM_COMMBYTES_H
#define AUTOPAR_RUNTIME_COMM_COMMBYTES_H

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace autopar::rt {

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

/// How a rank keeps one trainable tensor of `numElements` elements whose
/// update is flat-sharded over a group of `group` ranks (1: not sharded;
/// TensorInfo::updateAxes): runtime/train/TensorStore.cpp allocates this,
/// the compiler's report counts it.
struct ZeroLayout {
  /// The optimizer state: this rank's flat shard (the whole tensor when not
  /// sharded).
  int64_t stateElements;
  /// The gradient: the shard when the step returns it sharded
  /// (`gradSharded`: ZeRO-2/3), whole and padded to `group` shards when it
  /// is reduce-scattered in place after the step (`gradPending` with a
  /// sharded update: ZeRO-1), else whole.
  int64_t gradElements;
};

inline ZeroLayout zeroLayout(int64_t numElements, int64_t group,
                             bool gradSharded, bool gradPending) {
  int64_t chunk = flatChunk(numElements, group);
  return {chunk, gradSharded                ? chunk
                 : gradPending && group > 1 ? chunk * group
                                            : numElements};
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

/// Bytes sent per rank by allToAllFlat: every block but its own, (g-1)/g
/// of the buffer (g divides numElements).
inline double allToAllFlatBytes(int64_t numElements, int64_t groupSize,
                                int64_t elementBytes) {
  if (groupSize <= 1)
    return 0;
  return double(groupSize - 1) * double(numElements / groupSize) *
         double(elementBytes);
}

/// The runtime's all-reduces once per step (a gradient sum still pending
/// after the step: runtime/train/Trainer.cpp), coalesced as Megatron-LM
/// and DDP do for the small ones: a gradient under kCoalesceBytes is
/// packed, in tensor order, into a bucket of at most `bucketBytes`
/// (comm.bucket_mb) with the others of its group and type (`key`), and
/// the bucket is all-reduced as one; a larger gradient is all-reduced
/// alone. Latency, not bytes, is what the small ones cost (a layer norm's
/// weight summed over dp and tp under sequence parallelism). The report
/// counts the collectives this issues (ops()), the runtime runs them.
inline constexpr int64_t kCoalesceBytes = int64_t{1} << 20;

class StepBuckets {
public:
  explicit StepBuckets(int64_t bucketBytes)
      : bucketBytes(bucketBytes > 0 ? bucketBytes : 1) {}
  /// Where a gradient of `bytes` goes: its bucket (-1: alone) and its byte
  /// offset there.
  struct Place {
    int bucket = -1;
    int64_t offset = 0;
  };
  Place add(uint64_t key, int64_t bytes) {
    if (bytes >= kCoalesceBytes || bytes > bucketBytes) {
      ++alone[key];
      return {};
    }
    auto open = current.find(key);
    if (open == current.end() || sizes[open->second] + bytes > bucketBytes) {
      open = current.insert_or_assign(key, int(sizes.size())).first;
      sizes.push_back(0);
      keys.push_back(key);
    }
    Place place{open->second, sizes[open->second]};
    sizes[open->second] += bytes;
    return place;
  }
  /// The buckets' sizes and keys, in creation order.
  const std::vector<int64_t> &bucketSizes() const { return sizes; }
  const std::vector<uint64_t> &bucketKeys() const { return keys; }
  /// The all-reduces of `key`: its buckets and its gradients alone.
  int64_t ops(uint64_t key) const {
    int64_t n = 0;
    for (uint64_t k : keys)
      n += k == key;
    auto it = alone.find(key);
    return n + (it == alone.end() ? 0 : it->second);
  }

private:
  int64_t bucketBytes;
  std::map<uint64_t, int> current;
  std::map<uint64_t, int64_t> alone;
  std::vector<int64_t> sizes;
  std::vector<uint64_t> keys;
};

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_COMM_COMMBYTES_H
