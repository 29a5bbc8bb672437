//===- comm_driver.cpp - checks runtime/comm on a mesh given on the CLI ---===//
//
// comm_driver [--abort-rank R | --bad-mask | --mpi-error |
//              --stall-rank R --timeout S] AXIS=SIZE...
//
// Every rank runs every check of the communicator against values computed
// here from the mesh alone (row-major rank numbering, groups of axes). Each
// collective is checked on float32 and bfloat16 buffers, both in flight
// together, on integer values whose sums are exact (value()), so that the
// results must be bit-exact; then bfloat16 sums that must round
// (roundingValue()) against the exact sum.
// A rank prints each mismatch on stderr; the failures of every rank are
// summed, and rank 0 prints "OK <check>" or "FAIL <check>". Exits 1 on any
// failure, on every rank.
//
// --abort-rank R: rank R calls abort(3) while the others wait in a barrier
// (which never completes): every rank must end. --bad-mask: every rank
// passes an axis mask beyond the mesh, which must end the world.
// --mpi-error: rank 0 broadcasts 64 bytes, the others expect 8: MPI fails
// (MPI_ERR_TRUNCATE), which must end the world with one line.
// --stall-rank R --timeout S: the watchdog (setTimeout(S)); rank R sleeps
// for 10 x S seconds while the others wait on an all-reduce over every
// axis: the waiting ranks must end the job, each with one line, after S
// seconds.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Comm.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

using namespace autopar::rt;

namespace {

struct Mesh {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  int numAxes() const { return int(sizes.size()); }
  int64_t ranks() const {
    int64_t n = 1;
    for (int64_t s : sizes)
      n *= s;
    return n;
  }
  /// Row-major decoding of a world rank.
  std::vector<int64_t> coords(int64_t rank) const {
    std::vector<int64_t> c(sizes.size());
    for (int i = numAxes() - 1; i >= 0; --i) {
      c[i] = rank % sizes[i];
      rank /= sizes[i];
    }
    return c;
  }
  /// The world ranks of `rank`'s group over `mask`, in increasing order
  /// (which is the order of group positions).
  std::vector<int64_t> members(int64_t rank, AxisMask mask) const {
    std::vector<int64_t> mine = coords(rank), out;
    for (int64_t r = 0; r < ranks(); ++r) {
      std::vector<int64_t> c = coords(r);
      bool same = true;
      for (int i = 0; i < numAxes(); ++i)
        if (!((mask >> i) & 1) && c[i] != mine[i])
          same = false;
      if (same)
        out.push_back(r);
    }
    return out;
  }
};

/// The element types of the collectives: every check issues the same cases
/// on both, in flight together.
const CommType kTypes[] = {CommType::F32, CommType::BF16};

const char *typeName(CommType type) {
  return type == CommType::F32 ? "f32" : "bf16";
}

/// Bytes per element, for the expected byte counters (not commTypeBytes,
/// which checkBytes checks).
int elementBytes(CommType type) {
  return type == CommType::F32 ? int(sizeof(float)) : int(sizeof(uint16_t));
}

/// Rank `rank`'s element k. float32: (2^rank) * 128 + k, so that a sum says
/// which ranks took part. bfloat16, whose 8 significant bits hold every
/// integer up to 256: +-(rank + 1) + 3 (k mod 7), whose partial sums over
/// at most 8 ranks stay within 36 + 8 * 18 = 180, so that every sum is
/// exact whatever the order of the additions.
double value(CommType type, int64_t rank, int64_t k) {
  if (type == CommType::F32)
    return double((1 << rank) * 128 + k);
  return double((k & 1 ? -1 : 1) * (rank + 1) + 3 * (k % 7));
}

/// A host buffer of float32 or bfloat16 elements (a bfloat16 is the upper
/// 16 bits of a float), read and written as doubles.
class Buffer {
public:
  Buffer(CommType type, int64_t n, double fill)
      : type(type), f32(type == CommType::F32 ? n : 0),
        bf16(type == CommType::BF16 ? n : 0) {
    for (int64_t k = 0; k < n; ++k)
      set(k, fill);
  }
  CommType elementType() const { return type; }
  /// Element k's address.
  void *at(int64_t k) {
    if (type == CommType::F32)
      return f32.data() + k;
    return bf16.data() + k;
  }
  double get(int64_t k) const {
    if (type == CommType::F32)
      return f32[k];
    uint32_t bits = uint32_t(bf16[k]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  /// Stores `v`, which must be a value of the type: the expectations of the
  /// checks assume inputs that no conversion rounded.
  void set(int64_t k, double v) {
    float f = float(v);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    if ((double(f) != v && !std::isnan(v)) ||
        (type == CommType::BF16 && (bits & 0xffff) != 0)) {
      std::fprintf(stderr, "comm_driver: %.17g is not a %s\n", v,
                   typeName(type));
      std::exit(2);
    }
    if (type == CommType::F32)
      f32[k] = f;
    else
      bf16[k] = uint16_t(bits >> 16);
  }

private:
  CommType type;
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
};

/// The spacing of the bfloat16 values around x (finite, nonzero): 8
/// significant bits.
double bf16Ulp(double x) {
  int e = 0;
  std::frexp(x, &e);
  return std::ldexp(1.0, e - 8);
}

/// x rounded to the nearest bfloat16, ties to even (nearbyint in the default
/// rounding mode).
double roundToBf16(double x) {
  double ulp = bf16Ulp(x);
  return std::nearbyint(x / ulp) * ulp;
}

/// Elements of the bfloat16 rounding cases; the last is a NaN on one rank.
constexpr int64_t kRoundingElements = 7;

/// Element k of the bfloat16 rounding cases on world rank `rank` at
/// position `position` of the group: +-2^e (1 + m / 128), m odd only at
/// position 0, so that the exact sum over a group of g = 2, 4 or 8 ranks,
/// +-2^e (g + odd / 128), is not a bfloat16 (those between g and 2g are
/// multiples of g / 128); for g = 2 it lies halfway between two, a tie
/// that only rounding to even resolves as the driver expects. The last
/// element is a NaN at position 0, which the sum must keep.
double roundingValue(int64_t rank, int64_t position, int64_t k) {
  if (k == kRoundingElements - 1 && position == 0)
    return std::nan("");
  int64_t m = 2 * ((3 * rank + 5 * k) % 60) + (position == 0);
  double sign = k % 3 == 2 ? -1 : 1;
  return sign * std::ldexp(1 + m / 128.0, int(k % 4) - 1);
}

class Checker {
public:
  Checker(Communicator &c, const Mesh &m) : comm(c), mesh(m) {}

  /// Prints one mismatch of this rank.
  template <typename... Args> void mismatch(const char *format, Args... args) {
    ++failures;
    if (failures > 20)
      return;
    // One write per line, so that the lines of the ranks do not mix.
    char line[512];
    int used = std::snprintf(line, sizeof(line), "rank %d: ", comm.rank());
    std::snprintf(line + used, sizeof(line) - used, format, args...);
    std::fprintf(stderr, "%s\n", line);
  }
  void expectEq(double got, double want, const std::string &what, int64_t a,
                int64_t b, int64_t c) {
    if (got != want)
      mismatch("%s [%lld %lld %lld]: got %.17g, expected %.17g", what.c_str(),
               (long long)a, (long long)b, (long long)c, got, want);
  }
  /// Sums the failures of every rank; rank 0 prints the verdict.
  bool finish(const std::string &check) {
    double total = failures;
    comm.allReduceSumDouble(&total, 1, allAxes());
    if (comm.rank() == 0)
      std::printf("%s %s\n", total == 0 ? "OK" : "FAIL", check.c_str());
    std::fflush(stdout);
    allFailures += total;
    failures = 0;
    return total == 0;
  }
  AxisMask allAxes() const { return (AxisMask(1) << mesh.numAxes()) - 1; }
  int numMasks() const { return 1 << mesh.numAxes(); }

  void checkLayout();
  void checkDouble();
  void checkBroadcast();
  void checkAllReduce();
  void checkReduceScatter();
  void checkAllGather();
  void checkAllToAll();
  void checkShift();
  void checkRounding();
  void checkExchange();
  void checkBytes();

  double allFailures = 0;

private:
  // The collectives on a buffer of either type: float32 through the float *
  // overloads (which the rest of the runtime calls), bfloat16 through the
  // typed ones. The expected byte counters follow.
  CommRequest allReduce(Buffer &data, int64_t n, AxisMask mask) {
    int64_t g = comm.groupSize(mask);
    CommType type = data.elementType();
    if (g > 1)
      expectedBytes[int(CollectiveKind::AllReduce)] +=
          2.0 * (g - 1) * n * elementBytes(type) / g;
    if (type == CommType::F32)
      return comm.allReduceSum(static_cast<float *>(data.at(0)), n, mask);
    return comm.allReduceSum(data.at(0), n, type, mask);
  }
  CommRequest reduceScatter(CommType type, const void *full, int64_t n,
                            void *piece, AxisMask mask) {
    int64_t g = comm.groupSize(mask);
    if (g > 1)
      expectedBytes[int(CollectiveKind::ReduceScatter)] +=
          (g - 1) / double(g) *
          double(g * flatChunk(n, g) * elementBytes(type));
    if (type == CommType::F32)
      return comm.reduceScatterFlat(static_cast<const float *>(full), n,
                                    static_cast<float *>(piece), mask);
    return comm.reduceScatterFlat(full, n, piece, type, mask);
  }
  CommRequest allGather(CommType type, const void *piece, int64_t n, void *full,
                        AxisMask mask) {
    int64_t g = comm.groupSize(mask);
    if (g > 1)
      expectedBytes[int(CollectiveKind::AllGather)] +=
          (g - 1) / double(g) *
          double(g * flatChunk(n, g) * elementBytes(type));
    if (type == CommType::F32)
      return comm.allGatherFlat(static_cast<const float *>(piece), n,
                                static_cast<float *>(full), mask);
    return comm.allGatherFlat(piece, n, full, type, mask);
  }
  CommRequest allToAll(CommType type, const void *send, int64_t n, void *recv,
                       AxisMask mask) {
    int64_t g = comm.groupSize(mask);
    if (g > 1)
      expectedBytes[int(CollectiveKind::AllToAll)] +=
          double((g - 1) * (n / g) * elementBytes(type));
    return comm.allToAllFlat(send, n, recv, type, mask);
  }
  CommRequest shift(CommType type, const void *send, int64_t n, void *recv,
                    AxisMask mask, int64_t offset) {
    int64_t g = comm.groupSize(mask);
    if (offset % g != 0)
      expectedBytes[int(CollectiveKind::Send)] +=
          double(n * elementBytes(type));
    return comm.shift(send, n, recv, type, mask, offset);
  }
  /// Checks a bfloat16 sum over the group `members` against the exact sum
  /// of the roundingValue()s of element k.
  void expectRoundedSum(double got, const std::vector<int64_t> &members,
                        int64_t k, const char *what, AxisMask mask);

  Communicator &comm;
  const Mesh &mesh;
  int64_t failures = 0;
  /// Independent expectations of the byte counters.
  double expectedBytes[kNumCollectiveKinds] = {0, 0, 0, 0, 0};
};

void Checker::checkLayout() {
  int r = comm.rank();
  expectEq(comm.worldSize(), double(mesh.ranks()), "worldSize", r, 0, 0);
  std::vector<int64_t> c = mesh.coords(r);
  for (int i = 0; i < mesh.numAxes(); ++i)
    expectEq(double(comm.coord(i)), double(c[i]), "coord", r, i, 0);
  for (int mask = 0; mask < numMasks(); ++mask) {
    std::vector<int64_t> m = mesh.members(r, mask);
    int64_t position = 0;
    while (m[position] != r)
      ++position;
    expectEq(double(comm.groupSize(mask)), double(m.size()), "groupSize", r,
             mask, 0);
    expectEq(double(comm.groupIndex(mask)), double(position), "groupIndex", r,
             mask, 0);
  }
}

void Checker::checkDouble() {
  int r = comm.rank();
  for (int mask = 0; mask < numMasks(); ++mask) {
    std::vector<double> data = {r + 0.5, std::ldexp(1.0, -(r + 1)), -1.0 * r};
    comm.allReduceSumDouble(data.data(), int64_t(data.size()), mask);
    std::vector<double> want(3, 0.0);
    for (int64_t m : mesh.members(r, mask)) {
      want[0] += m + 0.5;
      want[1] += std::ldexp(1.0, -int(m + 1));
      want[2] += -1.0 * m;
    }
    for (int k = 0; k < 3; ++k)
      expectEq(data[k], want[k], "allReduceSumDouble", r, mask, k);
  }
}

void Checker::checkBroadcast() {
  char text[16] = {0};
  if (comm.rank() == 0)
    std::strcpy(text, "autopar comm");
  comm.broadcastBytes(text, sizeof(text));
  if (std::strcmp(text, "autopar comm") != 0)
    mismatch("broadcastBytes: got '%s'", text);
  comm.barrier();
}

const int64_t kSizes[] = {0, 1, 2, 5, 7, 13, 16, 100};

void Checker::checkAllReduce() {
  int r = comm.rank();
  struct Case {
    AxisMask mask;
    int64_t n;
    Buffer data;
    CommRequest request;
  };
  std::vector<Case> cases;
  for (int mask = 0; mask < numMasks(); ++mask)
    for (int64_t n : kSizes)
      for (CommType type : kTypes) {
        // Element n must stay.
        Case c{AxisMask(mask), n, Buffer(type, n + 1, -5), {}};
        for (int64_t k = 0; k < n; ++k)
          c.data.set(k, value(type, r, k));
        cases.push_back(std::move(c));
      }
  // All in flight at once, progress between issues, waited in reverse.
  for (Case &c : cases) {
    c.request = allReduce(c.data, c.n, c.mask);
    comm.progress();
  }
  for (size_t i = cases.size(); i-- > 0;)
    comm.wait(cases[i].request);
  comm.wait(cases[0].request); // already complete: a no-op
  comm.wait(CommRequest{});
  for (Case &c : cases) {
    CommType type = c.data.elementType();
    std::string what = std::string("allReduceSum ") + typeName(type);
    std::vector<int64_t> members = mesh.members(r, c.mask);
    for (int64_t k = 0; k < c.n; ++k) {
      double want = 0;
      for (int64_t m : members)
        want += value(type, m, k);
      expectEq(c.data.get(k), want, what, c.mask, c.n, k);
    }
    expectEq(c.data.get(c.n), -5, what + " past the end", c.mask, c.n, 0);
  }
}

void Checker::checkReduceScatter() {
  int r = comm.rank();
  struct Case {
    AxisMask mask;
    int64_t n, chunk;
    Buffer full, piece;
  };
  std::vector<Case> cases;
  for (int mask = 0; mask < numMasks(); ++mask)
    for (int64_t n : kSizes)
      for (CommType type : kTypes) {
        int64_t chunk = flatChunk(n, comm.groupSize(mask));
        Case c{AxisMask(mask), n, chunk, Buffer(type, n, 0),
               Buffer(type, chunk + 1, -7)};
        for (int64_t k = 0; k < n; ++k)
          c.full.set(k, value(type, r, k));
        cases.push_back(std::move(c));
      }
  for (Case &c : cases) {
    reduceScatter(c.full.elementType(), c.full.at(0), c.n, c.piece.at(0),
                  c.mask);
    comm.progress();
  }
  // `piece` overlapping `full` (here: the same pointer) reads full first.
  std::vector<Buffer> aliased;
  for (int mask = 0; mask < numMasks(); ++mask)
    for (CommType type : kTypes) {
      aliased.emplace_back(type, 13, 0);
      for (int64_t k = 0; k < 13; ++k)
        aliased.back().set(k, value(type, r, k));
      reduceScatter(type, aliased.back().at(0), 13, aliased.back().at(0), mask);
    }
  comm.waitAll();
  for (int mask = 0; mask < numMasks(); ++mask)
    for (size_t t = 0; t < std::size(kTypes); ++t) {
      CommType type = kTypes[t];
      const Buffer &got = aliased[mask * std::size(kTypes) + t];
      std::vector<int64_t> members = mesh.members(r, mask);
      int64_t chunk = flatChunk(13, comm.groupSize(mask));
      int64_t i = comm.groupIndex(mask);
      for (int64_t k = 0; k < 13; ++k) {
        double want = value(type, r, k);
        if (k < chunk) {
          want = 0;
          if (i * chunk + k < 13)
            for (int64_t m : members)
              want += value(type, m, i * chunk + k);
        }
        expectEq(got.get(k), want,
                 std::string("reduceScatterFlat aliased ") + typeName(type),
                 mask, 13, k);
      }
    }
  for (Case &c : cases) {
    CommType type = c.full.elementType();
    std::string what = std::string("reduceScatterFlat ") + typeName(type);
    std::vector<int64_t> members = mesh.members(r, c.mask);
    int64_t i = comm.groupIndex(c.mask);
    for (int64_t t = 0; t < c.chunk; ++t) {
      int64_t k = i * c.chunk + t;
      double want = 0;
      if (k < c.n)
        for (int64_t m : members)
          want += value(type, m, k);
      expectEq(c.piece.get(t), want, what, c.mask, c.n, t);
    }
    expectEq(c.piece.get(c.chunk), -7, what + " past the chunk", c.mask, c.n,
             0);
    for (int64_t k = 0; k < c.n; ++k)
      expectEq(c.full.get(k), value(type, r, k), what + " changed full", c.mask,
               c.n, k);
  }
}

void Checker::checkAllGather() {
  int r = comm.rank();
  struct Case {
    AxisMask mask;
    int64_t n, chunk;
    bool inPlace;
    Buffer piece, full;
    CommRequest request;
  };
  std::vector<Case> cases;
  for (int mask = 0; mask < numMasks(); ++mask)
    for (int64_t n : kSizes)
      for (bool inPlace : {false, true})
        for (CommType type : kTypes) {
          int64_t chunk = flatChunk(n, comm.groupSize(mask));
          int64_t i = comm.groupIndex(mask);
          Case c{AxisMask(mask),
                 n,
                 chunk,
                 inPlace,
                 Buffer(type, chunk, 0),
                 Buffer(type, n + 1, -9),
                 {}};
          // Padding elements of the piece are garbage: they must be dropped.
          for (int64_t t = 0; t < chunk; ++t)
            c.piece.set(t,
                        i * chunk + t < n ? value(type, r, i * chunk + t) : -3);
          if (inPlace)
            for (int64_t t = 0; t < chunk && i * chunk + t < n; ++t)
              c.full.set(i * chunk + t, c.piece.get(t));
          cases.push_back(std::move(c));
        }
  for (Case &c : cases) {
    void *piece =
        c.inPlace ? c.full.at(std::min(comm.groupIndex(c.mask) * c.chunk, c.n))
                  : c.piece.at(0);
    c.request =
        allGather(c.full.elementType(), piece, c.n, c.full.at(0), c.mask);
  }
  for (Case &c : cases) {
    comm.progress();
    comm.wait(c.request);
  }
  for (Case &c : cases) {
    CommType type = c.full.elementType();
    std::string what =
        std::string(c.inPlace ? "allGatherFlat in place " : "allGatherFlat ") +
        typeName(type);
    std::vector<int64_t> members = mesh.members(r, c.mask);
    for (int64_t k = 0; k < c.n; ++k)
      expectEq(c.full.get(k), value(type, members[k / c.chunk], k), what,
               c.mask, c.n, k);
    expectEq(c.full.get(c.n), -9, what + " past the end", c.mask, c.n, 0);
  }
}

void Checker::checkAllToAll() {
  // Blocks of 0 to 7 elements over every group, all in flight together;
  // each send buffer is overwritten as soon as its all-to-all is issued (it
  // is read before the call returns).
  int r = comm.rank();
  struct Case {
    AxisMask mask;
    int64_t n, chunk;
    Buffer send, recv;
    CommRequest request;
  };
  std::vector<Case> cases;
  for (int mask = 0; mask < numMasks(); ++mask)
    for (int64_t chunk : {0, 1, 2, 5, 7})
      for (CommType type : kTypes) {
        int64_t n = chunk * comm.groupSize(mask);
        Case c{AxisMask(mask),          n, chunk, Buffer(type, n, 0),
               Buffer(type, n + 1, -9), {}};
        for (int64_t k = 0; k < n; ++k)
          c.send.set(k, value(type, r, k));
        cases.push_back(std::move(c));
      }
  for (Case &c : cases) {
    c.request =
        allToAll(c.send.elementType(), c.send.at(0), c.n, c.recv.at(0), c.mask);
    for (int64_t k = 0; k < c.n; ++k)
      c.send.set(k, -7);
  }
  for (auto it = cases.rbegin(); it != cases.rend(); ++it) {
    comm.progress();
    comm.wait(it->request);
  }
  for (Case &c : cases) {
    CommType type = c.recv.elementType();
    std::string what = std::string("allToAllFlat ") + typeName(type);
    std::vector<int64_t> members = mesh.members(r, c.mask);
    int64_t i = comm.groupIndex(c.mask);
    // Block j: member j's block i.
    for (int64_t k = 0; k < c.n; ++k)
      expectEq(c.recv.get(k),
               value(type, members[k / c.chunk], i * c.chunk + k % c.chunk),
               what, c.mask, c.n, k);
    expectEq(c.recv.get(c.n), -9, what + " past the end", c.mask, c.n, 0);
  }
}

void Checker::checkShift() {
  // 0 to 6 elements over every group, one position on, one back and two
  // on (the rank itself in a group of 2), all in flight together; each send
  // buffer overwritten as soon as its shift is issued.
  int r = comm.rank();
  struct Case {
    AxisMask mask;
    int64_t n, offset;
    Buffer send, recv;
    CommRequest request;
  };
  std::vector<Case> cases;
  for (int mask = 0; mask < numMasks(); ++mask)
    for (int64_t n : {0, 1, 3, 6})
      for (int64_t offset : {1, -1, 2})
        for (CommType type : kTypes) {
          Case c{AxisMask(mask),          n, offset, Buffer(type, n, 0),
                 Buffer(type, n + 1, -9), {}};
          for (int64_t k = 0; k < n; ++k)
            c.send.set(k, value(type, r, k));
          cases.push_back(std::move(c));
        }
  for (Case &c : cases) {
    c.request = shift(c.send.elementType(), c.send.at(0), c.n, c.recv.at(0),
                      c.mask, c.offset);
    for (int64_t k = 0; k < c.n; ++k)
      c.send.set(k, -7);
  }
  for (auto it = cases.rbegin(); it != cases.rend(); ++it) {
    comm.progress();
    comm.wait(it->request);
  }
  for (Case &c : cases) {
    CommType type = c.recv.elementType();
    std::string what = std::string("shift ") + typeName(type);
    std::vector<int64_t> members = mesh.members(r, c.mask);
    const int64_t g = int64_t(members.size());
    const int64_t from = ((comm.groupIndex(c.mask) - c.offset) % g + g) % g;
    for (int64_t k = 0; k < c.n; ++k)
      expectEq(c.recv.get(k), value(type, members[from], k), what, c.mask,
               c.offset, k);
    expectEq(c.recv.get(c.n), -9, what + " past the end", c.mask, c.n, 0);
  }
}

void Checker::expectRoundedSum(double got, const std::vector<int64_t> &members,
                               int64_t k, const char *what, AxisMask mask) {
  int64_t g = int64_t(members.size());
  double exact = 0;
  for (size_t position = 0; position < members.size(); ++position)
    exact += roundingValue(members[position], int64_t(position), k);
  if (std::isnan(exact)) {
    if (!std::isnan(got))
      mismatch("%s [%u %lld]: got %.17g, expected a NaN", what, mask,
               (long long)k, got);
    return;
  }
  if (g == 1) {
    expectEq(got, exact, what, mask, g, k);
    return;
  }
  // Exact in double: at most 8 terms of 8 significant bits, one binade.
  if (roundToBf16(exact) == exact)
    mismatch("%s [%u %lld]: the exact sum %.17g is a bfloat16: the case "
             "checks no rounding",
             what, mask, (long long)k, exact);
  // One rounding per addition, each within half a spacing of the partial
  // sums, which are no larger than the exact sum (one sign per element).
  double bound = double(g - 1) * bf16Ulp(exact);
  if (!(std::fabs(got - exact) <= bound))
    mismatch("%s [%u %lld]: got %.17g, more than %.17g from the exact sum "
             "%.17g",
             what, mask, (long long)k, got, bound, exact);
  // Two ranks: one addition, whose rounding is known.
  if (g == 2)
    expectEq(got, roundToBf16(exact), std::string(what) + " (ties to even)",
             mask, g, k);
}

void Checker::checkRounding() {
  int r = comm.rank();
  const int64_t n = kRoundingElements;
  std::vector<Buffer> sums, fulls, pieces;
  for (int mask = 0; mask < numMasks(); ++mask) {
    int64_t position = comm.groupIndex(mask);
    int64_t chunk = flatChunk(n, comm.groupSize(mask));
    sums.emplace_back(CommType::BF16, n, 0);
    fulls.emplace_back(CommType::BF16, n, 0);
    pieces.emplace_back(CommType::BF16, chunk, 0);
    for (int64_t k = 0; k < n; ++k) {
      sums.back().set(k, roundingValue(r, position, k));
      fulls.back().set(k, roundingValue(r, position, k));
    }
    allReduce(sums.back(), n, mask);
    reduceScatter(CommType::BF16, fulls.back().at(0), n, pieces.back().at(0),
                  mask);
    comm.progress();
  }
  comm.waitAll();
  for (int mask = 0; mask < numMasks(); ++mask) {
    std::vector<int64_t> members = mesh.members(r, mask);
    int64_t i = comm.groupIndex(mask);
    int64_t chunk = flatChunk(n, comm.groupSize(mask));
    for (int64_t k = 0; k < n; ++k)
      expectRoundedSum(sums[mask].get(k), members, k, "allReduceSum bf16",
                       mask);
    for (int64_t t = 0; t < chunk; ++t) {
      if (i * chunk + t < n)
        expectRoundedSum(pieces[mask].get(t), members, i * chunk + t,
                         "reduceScatterFlat bf16", mask);
      else
        expectEq(pieces[mask].get(t), 0, "reduceScatterFlat bf16 padding", mask,
                 n, t);
    }
  }
}

/// Point-to-point transfers in a ring: every rank sends two messages to
/// the next rank and one to the previous, in one exchange with its
/// receives, whose tags are posted out of order (MPI matches them by tag),
/// on byte counts 0, 1, 13 and 100, with one request for all and with one
/// per transfer; on two ranks next and previous are the same rank.
void Checker::checkExchange() {
  const int n = comm.worldSize(), r = comm.rank();
  if (n == 1)
    return;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (int64_t size : {int64_t(0), int64_t(1), int64_t(13), int64_t(100)})
    for (bool perTransfer : {false, true}) {
      auto fill = [&](int from, int to, int tag) {
        std::vector<char> v(size_t(size) + 1);
        for (int64_t k = 0; k < size; ++k)
          v[k] = char((from * 31 + to * 7 + tag * 3 + k) & 0x7f);
        return v;
      };
      std::vector<char> toNext1 = fill(r, next, 1), toNext2 = fill(r, next, 2),
                        toPrev = fill(r, prev, 3);
      std::vector<char> fromPrev1(size + 1), fromPrev2(size + 1),
          fromNext(size + 1);
      PointToPoint ops[] = {{true, toNext1.data(), size, next, 1},
                            {true, toNext2.data(), size, next, 2},
                            {true, toPrev.data(), size, prev, 3},
                            {false, fromPrev2.data(), size, prev, 2},
                            {false, fromPrev1.data(), size, prev, 1},
                            {false, fromNext.data(), size, next, 3}};
      if (perTransfer) {
        // A request per transfer: each receive completes on its own (waited
        // for before the sends).
        CommRequest each[6];
        comm.exchange(ops, 6, each);
        for (int i : {5, 4, 3, 0, 1, 2})
          comm.wait(each[i]);
      } else {
        comm.wait(comm.exchange(ops, 6));
      }
      expectedBytes[int(CollectiveKind::Send)] += 3.0 * double(size);
      struct {
        const std::vector<char> &got;
        int from, tag;
      } received[] = {
          {fromPrev1, prev, 1}, {fromPrev2, prev, 2}, {fromNext, next, 3}};
      for (const auto &c : received) {
        std::vector<char> want = fill(c.from, r, c.tag);
        for (int64_t k = 0; k < size; ++k)
          expectEq(c.got[k], want[k], "exchange", size, c.tag, k);
      }
    }
}

void Checker::checkBytes() {
  const char *names[] = {"all-reduce", "reduce-scatter", "all-gather", "send",
                         "all-to-all"};
  for (int kind = 0; kind < kNumCollectiveKinds; ++kind) {
    double got = comm.bytes(CollectiveKind(kind));
    double want = expectedBytes[kind];
    if (std::fabs(got - want) > 1e-9 * std::fabs(want))
      mismatch("bytes(%s): got %.17g, expected %.17g", names[kind], got, want);
    if (comm.rank() == 0)
      std::printf("bytes %s %.0f\n", names[kind], got);
    expectedBytes[kind] = 0;
  }
  comm.resetBytes();
  for (int kind = 0; kind < kNumCollectiveKinds; ++kind)
    expectEq(comm.bytes(CollectiveKind(kind)), 0, "bytes after reset", kind, 0,
             0);
  // The closed forms themselves, on values worked out by hand.
  expectEq(allReduceBytes(7, 4, 4), 42, "allReduceBytes", 7, 4, 4);
  expectEq(allReduceBytes(100, 1, 4), 0, "allReduceBytes", 100, 1, 4);
  expectEq(double(flatChunk(13, 4)), 4, "flatChunk", 13, 4, 0);
  expectEq(double(flatChunk(13, 1)), 13, "flatChunk", 13, 1, 0);
  expectEq(double(flatChunk(0, 4)), 0, "flatChunk", 0, 4, 0);
  expectEq(reduceScatterFlatBytes(13, 4, 4), 48, "reduceScatterFlatBytes", 13,
           4, 4);
  expectEq(allGatherFlatBytes(7, 2, 2), 8, "allGatherFlatBytes", 7, 2, 2);
  expectEq(allGatherFlatBytes(7, 1, 4), 0, "allGatherFlatBytes", 7, 1, 4);
  expectEq(allToAllFlatBytes(12, 4, 2), 18, "allToAllFlatBytes", 12, 4, 2);
  expectEq(allToAllFlatBytes(12, 1, 4), 0, "allToAllFlatBytes", 12, 1, 4);
  expectEq(commTypeBytes(CommType::F32), 4, "commTypeBytes f32", 0, 0, 0);
  expectEq(commTypeBytes(CommType::BF16), 2, "commTypeBytes bf16", 0, 0, 0);
}

} // namespace

int main(int argc, char **argv) {
  Mesh mesh;
  int abortRank = -1;
  bool badMask = false, mpiError = false;
  int stallRank = -1;
  double timeout = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--abort-rank" && i + 1 < argc) {
      abortRank = std::atoi(argv[++i]);
    } else if (arg == "--bad-mask") {
      badMask = true;
    } else if (arg == "--mpi-error") {
      mpiError = true;
    } else if (arg == "--stall-rank" && i + 1 < argc) {
      stallRank = std::atoi(argv[++i]);
    } else if (arg == "--timeout" && i + 1 < argc) {
      timeout = std::atof(argv[++i]);
    } else if (arg.find('=') != std::string::npos) {
      mesh.names.push_back(arg.substr(0, arg.find('=')));
      mesh.sizes.push_back(std::atoll(arg.c_str() + arg.find('=') + 1));
    } else {
      std::fprintf(stderr, "usage: comm_driver [--abort-rank R | --bad-mask | "
                           "--mpi-error | --stall-rank R --timeout S] "
                           "AXIS=SIZE...\n");
      return 2;
    }
  }
  std::vector<MeshAxisInfo> axes;
  for (int i = 0; i < mesh.numAxes(); ++i)
    axes.push_back({mesh.names[i].c_str(), mesh.sizes[i]});

  std::unique_ptr<Communicator> comm;
  Status status =
      Communicator::create(&argc, &argv, axes.data(), int(axes.size()), comm);
  if (!status) {
    std::fprintf(stderr, "error: %s\n", status.message().c_str());
    return 1;
  }
  if (abortRank >= 0) {
    if (comm->rank() == abortRank) {
      std::fprintf(stderr, "rank %d: aborting\n", comm->rank());
      comm->abort(3);
    }
    comm->barrier();
    std::fprintf(stderr, "rank %d: passed the barrier\n", comm->rank());
    return 0;
  }
  if (stallRank >= 0) {
    comm->setTimeout(timeout, "comm_driver");
    if (comm->rank() == stallRank) {
      std::this_thread::sleep_for(std::chrono::duration<double>(10 * timeout));
      std::fprintf(stderr, "rank %d: woke up\n", comm->rank());
      return 0;
    }
    float x = 1;
    AxisMask all = (AxisMask(1) << mesh.numAxes()) - 1;
    comm->wait(comm->allReduceSum(&x, 1, CommType::F32, all));
    std::fprintf(stderr, "rank %d: the all-reduce completed\n", comm->rank());
    return 0;
  }
  if (badMask) {
    float x = 1;
    comm->allReduceSum(&x, 1, AxisMask(1) << mesh.numAxes());
    std::fprintf(stderr, "rank %d: bad mask accepted\n", comm->rank());
    return 0;
  }

  if (mpiError) {
    char text[64] = {0};
    comm->broadcastBytes(text, comm->rank() == 0 ? 64 : 8);
    comm->barrier();
    std::fprintf(stderr, "rank %d: truncation not reported\n", comm->rank());
    return 0;
  }

  Checker checker(*comm, mesh);
  checker.checkLayout();
  checker.finish("layout: " + std::to_string(comm->worldSize()) + " ranks, " +
                 std::to_string(mesh.numAxes()) + " axes");
  checker.checkDouble();
  checker.finish("allReduceSumDouble");
  checker.checkBroadcast();
  checker.finish("broadcastBytes");
  // Once with whole messages, once with every message split in pieces of at
  // most 3 elements (the path of counts past INT_MAX).
  for (const char *mode : {"", " (split messages)"}) {
    checker.checkAllReduce();
    checker.finish(std::string("allReduceSum") + mode);
    checker.checkReduceScatter();
    checker.finish(std::string("reduceScatterFlat") + mode);
    checker.checkAllGather();
    checker.finish(std::string("allGatherFlat") + mode);
    checker.checkAllToAll();
    checker.finish(std::string("allToAllFlat") + mode);
    checker.checkShift();
    checker.finish(std::string("shift") + mode);
    checker.checkRounding();
    checker.finish(std::string("bf16 rounding") + mode);
    checker.checkExchange();
    checker.finish(std::string("exchange") + mode);
    checker.checkBytes();
    checker.finish(std::string("bytes") + mode);
    comm->setMaxMessageElements(3);
  }
  return checker.allFailures == 0 ? 0 : 1;
}
