//===- MpiBackend.cpp - float collectives over MPI on host memory ---------===//
//
// One MPI sub-communicator per group, split from MPI_COMM_WORLD in one
// order on every rank when the backend is made (a group created on first
// use could wait forever on a rank that never uses it). Non-blocking MPI
// collectives on them, tracked per request with the staging buffers and count
// arrays that MPI reads until they complete. MPI has no bfloat16 or half type:
// such buffers travel as MPI_UINT16_T and their sums use user-defined MPI_Ops
// that add in float and round, as NCCL's ncclBfloat16 / ncclHalf sums do, so
// the two builds round alike. Messages hold at most maxElements elements (MPI
// counts are int).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Backend.h"

#ifdef AUTOPAR_COMM_MPI_FLOATS

#include "runtime/Float16.h"

#include <algorithm>
#include <climits>
#include <vector>

namespace autopar::rt {
namespace {

MPI_Datatype mpiType(CommType type) {
  return type == CommType::F32 ? MPI_FLOAT : MPI_UINT16_T;
}

/// inout[i] = in[i] + inout[i] for bfloat16, added in float and rounded.
void addBf16(void *in, void *inout, int *len, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = bf16Bits(bf16Value(a[i]) + bf16Value(b[i]));
}

/// The same for IEEE half.
void addHalf(void *in, void *inout, int *len, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = halfBits(halfValue(a[i]) + halfValue(b[i]));
}

class MpiBackend : public CommBackend {
public:
  MpiBackend(const std::vector<CommGroup> &groups, int rank) : rank(rank) {
    for (const CommGroup &g : groups) {
      MPI_Comm sub = MPI_COMM_NULL;
      AUTOPAR_MPI_CALL(rank, MPI_Comm_split, MPI_COMM_WORLD, g.color, g.index,
                       &sub);
      comms[g.mask] = sub;
      AUTOPAR_MPI_CALL(rank, MPI_Comm_set_errhandler, sub, MPI_ERRORS_RETURN);
      int subSize = 0, subRank = 0;
      AUTOPAR_MPI_CALL(rank, MPI_Comm_size, sub, &subSize);
      AUTOPAR_MPI_CALL(rank, MPI_Comm_rank, sub, &subRank);
      if (subSize != g.size || subRank != g.index)
        failedCall("MPI_Comm_split", "it made a group that is not the mesh's",
                   __FILE__, __LINE__, rank);
    }
    AUTOPAR_MPI_CALL(rank, MPI_Op_create, addBf16, 1, &bf16Sum);
    AUTOPAR_MPI_CALL(rank, MPI_Op_create, addHalf, 1, &halfSum);
  }

  ~MpiBackend() override {
    waitAll();
    if (bf16Sum != MPI_OP_NULL)
      AUTOPAR_MPI_CALL(rank, MPI_Op_free, &bf16Sum);
    if (halfSum != MPI_OP_NULL)
      AUTOPAR_MPI_CALL(rank, MPI_Op_free, &halfSum);
    for (auto &[mask, sub] : comms)
      AUTOPAR_MPI_CALL(rank, MPI_Comm_free, &sub);
  }

  CommRequest allReduceSum(void *data, int64_t numElements, CommType type,
                           AxisMask mask) override {
    const int64_t size = commTypeBytes(type);
    char *bytes = static_cast<char *>(data);
    int64_t id = nextId++;
    Pending &p = pending[id];
    for (int64_t off = 0; off < numElements; off += maxElements) {
      int count = int(std::min(maxElements, numElements - off));
      p.requests.push_back(MPI_REQUEST_NULL);
      AUTOPAR_MPI_CALL(rank, MPI_Iallreduce, MPI_IN_PLACE, bytes + off * size,
                       count, mpiType(type), sumOp(type), comms.at(mask),
                       &p.requests.back());
    }
    return {id};
  }

  CommRequest allReduceMax(float *data, int64_t numElements,
                           AxisMask mask) override {
    int64_t id = nextId++;
    Pending &p = pending[id];
    for (int64_t off = 0; off < numElements; off += maxElements) {
      int count = int(std::min(maxElements, numElements - off));
      p.requests.push_back(MPI_REQUEST_NULL);
      AUTOPAR_MPI_CALL(rank, MPI_Iallreduce, MPI_IN_PLACE, data + off, count,
                       MPI_FLOAT, MPI_MAX, comms.at(mask), &p.requests.back());
    }
    return {id};
  }

  CommRequest reduceScatterFlat(const void *full, int64_t numElements,
                                void *piece, CommType type, AxisMask mask,
                                int64_t group, int64_t chunk) override {
    const int64_t size = commTypeBytes(type);
    const char *fullBytes = static_cast<const char *>(full);
    char *pieceBytes = static_cast<char *>(piece);
    int64_t id = nextId++;
    Pending &p = pending[id];
    // The padded tensor, one region per message: region k holds, for every
    // group position j, elements [off, off + c) of block j. Zero bytes are
    // 0.0 in both types.
    p.staging.assign(group * chunk * size, 0);
    for (int64_t off = 0; off < chunk; off += maxElements) {
      int64_t c = std::min(maxElements, chunk - off);
      char *region = p.staging.data() + group * off * size;
      for (int64_t j = 0; j < group; ++j) {
        int64_t begin = j * chunk + off;
        int64_t valid = std::clamp<int64_t>(numElements - begin, 0, c);
        if (valid > 0)
          std::memcpy(region + j * c * size, fullBytes + begin * size,
                      valid * size);
      }
    }
    for (int64_t off = 0; off < chunk; off += maxElements) {
      int64_t c = std::min(maxElements, chunk - off);
      p.requests.push_back(MPI_REQUEST_NULL);
      AUTOPAR_MPI_CALL(rank, MPI_Ireduce_scatter_block,
                       p.staging.data() + group * off * size,
                       pieceBytes + off * size, int(c), mpiType(type),
                       sumOp(type), comms.at(mask), &p.requests.back());
    }
    return {id};
  }

  CommRequest allGatherFlat(const void *piece, int64_t numElements, void *full,
                            CommType type, AxisMask mask, int64_t group,
                            int64_t chunk, int64_t index) override {
    const int64_t size = commTypeBytes(type);
    char *fullBytes = static_cast<char *>(full);
    auto countOf = [&](int64_t j) {
      return std::clamp<int64_t>(numElements - j * chunk, 0, chunk);
    };
    char *own = fullBytes + std::min(index * chunk, numElements) * size;
    if (piece != own && countOf(index) > 0)
      std::memmove(own, piece, countOf(index) * size);
    MPI_Comm sub = comms.at(mask);
    int64_t id = nextId++;
    Pending &p = pending[id];
    if (numElements <= maxElements) {
      for (int64_t j = 0; j < group; ++j) {
        p.counts.push_back(int(countOf(j)));
        p.displs.push_back(int(std::min(j * chunk, numElements)));
      }
      p.requests.push_back(MPI_REQUEST_NULL);
      AUTOPAR_MPI_CALL(rank, MPI_Iallgatherv, MPI_IN_PLACE, 0,
                       MPI_DATATYPE_NULL, full, p.counts.data(),
                       p.displs.data(), mpiType(type), sub, &p.requests.back());
      return {id};
    }
    // Displacements past INT_MAX: every position broadcasts its block in
    // messages of at most maxElements.
    for (int64_t j = 0; j < group; ++j) {
      int64_t count = countOf(j);
      for (int64_t off = 0; off < count; off += maxElements) {
        int c = int(std::min(maxElements, count - off));
        p.requests.push_back(MPI_REQUEST_NULL);
        AUTOPAR_MPI_CALL(rank, MPI_Ibcast, fullBytes + (j * chunk + off) * size,
                         c, mpiType(type), int(j), sub, &p.requests.back());
      }
    }
    return {id};
  }

  CommRequest allToAllFlat(const void *send, void *recv, CommType type,
                           AxisMask mask, int64_t group,
                           int64_t chunk) override {
    const int64_t size = commTypeBytes(type);
    char *recvBytes = static_cast<char *>(recv);
    MPI_Comm sub = comms.at(mask);
    int64_t id = nextId++;
    Pending &p = pending[id];
    // The caller may reuse `send` at once: MPI reads a copy.
    p.staging.assign(static_cast<const char *>(send),
                     static_cast<const char *>(send) + group * chunk * size);
    if (chunk <= maxElements) {
      p.requests.push_back(MPI_REQUEST_NULL);
      AUTOPAR_MPI_CALL(rank, MPI_Ialltoall, p.staging.data(), int(chunk),
                       mpiType(type), recv, int(chunk), mpiType(type), sub,
                       &p.requests.back());
      return {id};
    }
    // Blocks past the message limit: pieces to and from every other
    // position in order (MPI keeps the order of one tag between two ranks);
    // this rank's own block is copied.
    int index = 0;
    AUTOPAR_MPI_CALL(rank, MPI_Comm_rank, sub, &index);
    std::memcpy(recvBytes + index * chunk * size,
                p.staging.data() + index * chunk * size, chunk * size);
    for (int64_t j = 0; j < group; ++j) {
      if (j == index)
        continue;
      for (int64_t off = 0; off < chunk; off += maxElements) {
        int c = int(std::min(maxElements, chunk - off));
        p.requests.push_back(MPI_REQUEST_NULL);
        AUTOPAR_MPI_CALL(rank, MPI_Irecv, recvBytes + (j * chunk + off) * size,
                         c, mpiType(type), int(j), 0, sub, &p.requests.back());
        p.requests.push_back(MPI_REQUEST_NULL);
        AUTOPAR_MPI_CALL(rank, MPI_Isend,
                         p.staging.data() + (j * chunk + off) * size, c,
                         mpiType(type), int(j), 0, sub, &p.requests.back());
      }
    }
    return {id};
  }

  CommRequest shift(const void *send, void *recv, int64_t numElements,
                    CommType type, AxisMask mask, int64_t to,
                    int64_t from) override {
    const int64_t size = commTypeBytes(type);
    MPI_Comm sub = comms.at(mask);
    int64_t id = nextId++;
    Pending &p = pending[id];
    // The caller may reuse `send` at once: MPI reads a copy. Tag 1 (the
    // all-to-all's pieces are tag 0): pieces in order.
    p.staging.assign(static_cast<const char *>(send),
                     static_cast<const char *>(send) + numElements * size);
    char *out = static_cast<char *>(recv);
    for (int64_t off = 0; off < numElements; off += maxElements) {
      int c = int(std::min(maxElements, numElements - off));
      p.requests.push_back(MPI_REQUEST_NULL);
      AUTOPAR_MPI_CALL(rank, MPI_Irecv, out + off * size, c, mpiType(type),
                       int(from), 1, sub, &p.requests.back());
      p.requests.push_back(MPI_REQUEST_NULL);
      AUTOPAR_MPI_CALL(rank, MPI_Isend, p.staging.data() + off * size, c,
                       mpiType(type), int(to), 1, sub, &p.requests.back());
    }
    return {id};
  }

  CommRequest exchange(const PointToPoint *ops, int count,
                       CommRequest *each) override {
    int64_t id = nextId++;
    for (int i = 0; i < count; ++i) {
      // With `each`, a request per transfer.
      if (each && i > 0)
        id = nextId++;
      if (each)
        each[i] = {id};
      Pending &p = pending[id];
      char *data = static_cast<char *>(ops[i].data);
      // Messages of at most maxElements bytes, in order (MPI keeps the
      // order of messages with one tag between two ranks).
      for (int64_t off = 0; off < ops[i].bytes; off += maxElements) {
        int c = int(std::min(maxElements, ops[i].bytes - off));
        p.requests.push_back(MPI_REQUEST_NULL);
        if (ops[i].send)
          AUTOPAR_MPI_CALL(rank, MPI_Isend, data + off, c, MPI_BYTE,
                           ops[i].peer, ops[i].tag, MPI_COMM_WORLD,
                           &p.requests.back());
        else
          AUTOPAR_MPI_CALL(rank, MPI_Irecv, data + off, c, MPI_BYTE,
                           ops[i].peer, ops[i].tag, MPI_COMM_WORLD,
                           &p.requests.back());
      }
    }
    return each ? CommRequest{} : CommRequest{id};
  }

  void move(void *dst, const void *src, size_t bytes) override {
    if (dst != src && bytes > 0)
      std::memmove(dst, src, bytes);
  }

  void wait(CommRequest request) override {
    auto it = pending.find(request.id);
    if (it == pending.end())
      return;
    std::vector<MPI_Request> &requests = it->second.requests;
    AUTOPAR_MPI_CALL(rank, MPI_Waitall, int(requests.size()), requests.data(),
                     MPI_STATUSES_IGNORE);
    pending.erase(it);
  }

  void waitAll() override {
    for (auto &[id, p] : pending)
      AUTOPAR_MPI_CALL(rank, MPI_Waitall, int(p.requests.size()),
                       p.requests.data(), MPI_STATUSES_IGNORE);
    pending.clear();
  }

  void progress() override {
    for (auto it = pending.begin(); it != pending.end();) {
      int done = 0;
      std::vector<MPI_Request> &requests = it->second.requests;
      AUTOPAR_MPI_CALL(rank, MPI_Testall, int(requests.size()), requests.data(),
                       &done, MPI_STATUSES_IGNORE);
      it = done ? pending.erase(it) : std::next(it);
    }
  }

  void setMaxMessageElements(int64_t elements) override {
    maxElements = elements;
  }

  void sumDoubles(double *data, int64_t numElements, AxisMask mask) override {
    MPI_Comm sub = comms.at(mask);
    for (int64_t off = 0; off < numElements; off += maxElements) {
      int count = int(std::min(maxElements, numElements - off));
      AUTOPAR_MPI_CALL(rank, MPI_Allreduce, MPI_IN_PLACE, data + off, count,
                       MPI_DOUBLE, MPI_SUM, sub);
    }
  }

  void broadcastBytes(void *data, int64_t bytes) override {
    char *base = static_cast<char *>(data);
    for (int64_t off = 0; off < bytes; off += maxElements) {
      int count = int(std::min(maxElements, bytes - off));
      AUTOPAR_MPI_CALL(rank, MPI_Bcast, base + off, count, MPI_BYTE, 0,
                       MPI_COMM_WORLD);
    }
  }

  void barrier() override {
    AUTOPAR_MPI_CALL(rank, MPI_Barrier, MPI_COMM_WORLD);
  }

private:
  /// A collective in flight and what MPI reads until it completes.
  struct Pending {
    std::vector<MPI_Request> requests;
    /// The padded tensor of a reduce-scatter, the sent copy of an
    /// all-to-all, in bytes.
    std::vector<char> staging;
    std::vector<int> counts, displs;
  };

  MPI_Op sumOp(CommType type) const {
    return type == CommType::F32    ? MPI_SUM
           : type == CommType::BF16 ? bf16Sum
                                    : halfSum;
  }

  /// One sub-communicator per group mask.
  std::map<AxisMask, MPI_Comm> comms;
  const int rank;
  int64_t maxElements = INT_MAX;
  MPI_Op bf16Sum = MPI_OP_NULL, halfSum = MPI_OP_NULL;
  /// Outstanding requests by id (std::map: nodes, and so the arrays MPI
  /// holds pointers into, never move).
  std::map<int64_t, Pending> pending;
  int64_t nextId = 0;
};

} // namespace

std::unique_ptr<CommBackend>
makeMpiBackend(const std::vector<CommGroup> &groups, int rank) {
  return std::make_unique<MpiBackend>(groups, rank);
}

} // namespace autopar::rt

#endif // AUTOPAR_COMM_MPI_FLOATS
