//===- comm_driver.cpp - checks runtime/comm on a mesh given on the CLI ---===//
//
// comm_driver [--abort-rank R | --bad-mask | --mpi-error] AXIS=SIZE...
//
// Every rank runs every check of the communicator against values computed
// here from the mesh alone (row-major rank numbering, groups of axes), on
// integer-valued floats so that sums are exact: rank r contributes
// (2^r) * 128 + k at element k, so a sum also says which ranks took part.
// A rank prints each mismatch on stderr; the failures of every rank are
// summed, and rank 0 prints "OK <check>" or "FAIL <check>". Exits 1 on any
// failure, on every rank.
//
// --abort-rank R: rank R calls abort(3) while the others wait in a barrier
// (which never completes): every rank must end. --bad-mask: every rank
// passes an axis mask beyond the mesh, which must end the world.
// --mpi-error: rank 0 broadcasts 64 bytes, the others expect 8: MPI fails
// (MPI_ERR_TRUNCATE), which must end the world with one line.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Comm.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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

float value(int64_t rank, int64_t k) { return float((1 << rank) * 128 + k); }

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
  void expectEq(double got, double want, const char *what, int64_t a, int64_t b,
                int64_t c) {
    if (got != want)
      mismatch("%s [%lld %lld %lld]: got %.17g, expected %.17g", what,
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
  void checkBytes();

  double allFailures = 0;

private:
  Communicator &comm;
  const Mesh &mesh;
  int64_t failures = 0;
  /// Independent expectations of the byte counters.
  double expectedBytes[kNumCollectiveKinds] = {0, 0, 0};
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
    std::vector<float> data;
    CommRequest request;
  };
  std::vector<Case> cases;
  for (int mask = 0; mask < numMasks(); ++mask)
    for (int64_t n : kSizes) {
      Case c{AxisMask(mask), n, std::vector<float>(n + 1), {}};
      for (int64_t k = 0; k < n; ++k)
        c.data[k] = value(r, k);
      c.data[n] = -5; // must stay
      cases.push_back(std::move(c));
    }
  // All in flight at once, progress between issues, waited in reverse.
  for (Case &c : cases) {
    c.request = comm.allReduceSum(c.data.data(), c.n, c.mask);
    comm.progress();
    int64_t g = comm.groupSize(c.mask);
    if (g > 1)
      expectedBytes[int(CollectiveKind::AllReduce)] +=
          2.0 * (g - 1) * c.n * 4 / g;
  }
  for (size_t i = cases.size(); i-- > 0;)
    comm.wait(cases[i].request);
  comm.wait(cases[0].request); // already complete: a no-op
  comm.wait(CommRequest{});
  for (Case &c : cases) {
    std::vector<int64_t> members = mesh.members(r, c.mask);
    for (int64_t k = 0; k < c.n; ++k) {
      double want = 0;
      for (int64_t m : members)
        want += value(m, k);
      expectEq(c.data[k], want, "allReduceSum", c.mask, c.n, k);
    }
    expectEq(c.data[c.n], -5, "allReduceSum past the end", c.mask, c.n, 0);
  }
}

void Checker::checkReduceScatter() {
  int r = comm.rank();
  struct Case {
    AxisMask mask;
    int64_t n, chunk;
    std::vector<float> full, piece;
  };
  std::vector<Case> cases;
  for (int mask = 0; mask < numMasks(); ++mask)
    for (int64_t n : kSizes) {
      int64_t g = comm.groupSize(mask);
      int64_t chunk = flatChunk(n, g);
      Case c{AxisMask(mask), n, chunk, std::vector<float>(n),
             std::vector<float>(chunk + 1, -7)};
      for (int64_t k = 0; k < n; ++k)
        c.full[k] = value(r, k);
      cases.push_back(std::move(c));
      if (g > 1)
        expectedBytes[int(CollectiveKind::ReduceScatter)] +=
            (g - 1) / double(g) * double(g * chunk * 4);
    }
  for (Case &c : cases) {
    comm.reduceScatterFlat(c.full.data(), c.n, c.piece.data(), c.mask);
    comm.progress();
  }
  // `piece` overlapping `full` (here: the same pointer) reads full first.
  std::vector<std::vector<float>> aliased(numMasks());
  for (int mask = 0; mask < numMasks(); ++mask) {
    for (int64_t k = 0; k < 13; ++k)
      aliased[mask].push_back(value(r, k));
    comm.reduceScatterFlat(aliased[mask].data(), 13, aliased[mask].data(),
                           mask);
    int64_t g = comm.groupSize(mask);
    if (g > 1)
      expectedBytes[int(CollectiveKind::ReduceScatter)] +=
          (g - 1) / double(g) * double(g * flatChunk(13, g) * 4);
  }
  comm.waitAll();
  for (int mask = 0; mask < numMasks(); ++mask) {
    std::vector<int64_t> members = mesh.members(r, mask);
    int64_t chunk = flatChunk(13, comm.groupSize(mask));
    int64_t i = comm.groupIndex(mask);
    for (int64_t k = 0; k < 13; ++k) {
      double want = value(r, k);
      if (k < chunk) {
        want = 0;
        if (i * chunk + k < 13)
          for (int64_t m : members)
            want += value(m, i * chunk + k);
      }
      expectEq(aliased[mask][k], want, "reduceScatterFlat aliased", mask, 13,
               k);
    }
  }
  for (Case &c : cases) {
    std::vector<int64_t> members = mesh.members(r, c.mask);
    int64_t i = comm.groupIndex(c.mask);
    for (int64_t t = 0; t < c.chunk; ++t) {
      int64_t k = i * c.chunk + t;
      double want = 0;
      if (k < c.n)
        for (int64_t m : members)
          want += value(m, k);
      expectEq(c.piece[t], want, "reduceScatterFlat", c.mask, c.n, t);
    }
    expectEq(c.piece[c.chunk], -7, "reduceScatterFlat past the chunk", c.mask,
             c.n, 0);
    for (int64_t k = 0; k < c.n; ++k)
      expectEq(c.full[k], value(r, k), "reduceScatterFlat changed full", c.mask,
               c.n, k);
  }
}

void Checker::checkAllGather() {
  int r = comm.rank();
  struct Case {
    AxisMask mask;
    int64_t n, chunk;
    bool inPlace;
    std::vector<float> piece, full;
    CommRequest request;
  };
  std::vector<Case> cases;
  for (int mask = 0; mask < numMasks(); ++mask)
    for (int64_t n : kSizes)
      for (bool inPlace : {false, true}) {
        int64_t g = comm.groupSize(mask);
        int64_t chunk = flatChunk(n, g);
        int64_t i = comm.groupIndex(mask);
        Case c{AxisMask(mask),
               n,
               chunk,
               inPlace,
               std::vector<float>(chunk),
               std::vector<float>(n + 1, -9),
               {}};
        // Padding elements of the piece are garbage: they must be dropped.
        for (int64_t t = 0; t < chunk; ++t)
          c.piece[t] = i * chunk + t < n ? value(r, i * chunk + t) : -3;
        if (inPlace)
          for (int64_t t = 0; t < chunk && i * chunk + t < n; ++t)
            c.full[i * chunk + t] = c.piece[t];
        cases.push_back(std::move(c));
        if (g > 1)
          expectedBytes[int(CollectiveKind::AllGather)] +=
              (g - 1) / double(g) * double(g * chunk * 4);
      }
  for (Case &c : cases) {
    const float *piece =
        c.inPlace
            ? c.full.data() + std::min(comm.groupIndex(c.mask) * c.chunk, c.n)
            : c.piece.data();
    c.request = comm.allGatherFlat(piece, c.n, c.full.data(), c.mask);
  }
  for (Case &c : cases) {
    comm.progress();
    comm.wait(c.request);
  }
  for (Case &c : cases) {
    std::vector<int64_t> members = mesh.members(r, c.mask);
    for (int64_t k = 0; k < c.n; ++k)
      expectEq(c.full[k], value(members[k / c.chunk], k),
               c.inPlace ? "allGatherFlat in place" : "allGatherFlat", c.mask,
               c.n, k);
    expectEq(c.full[c.n], -9, "allGatherFlat past the end", c.mask, c.n, 0);
  }
}

void Checker::checkBytes() {
  const char *names[] = {"all-reduce", "reduce-scatter", "all-gather"};
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
}

} // namespace

int main(int argc, char **argv) {
  Mesh mesh;
  int abortRank = -1;
  bool badMask = false, mpiError = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--abort-rank" && i + 1 < argc) {
      abortRank = std::atoi(argv[++i]);
    } else if (arg == "--bad-mask") {
      badMask = true;
    } else if (arg == "--mpi-error") {
      mpiError = true;
    } else if (arg.find('=') != std::string::npos) {
      mesh.names.push_back(arg.substr(0, arg.find('=')));
      mesh.sizes.push_back(std::atoll(arg.c_str() + arg.find('=') + 1));
    } else {
      std::fprintf(stderr, "usage: comm_driver [--abort-rank R | --bad-mask | "
                           "--mpi-error] AXIS=SIZE...\n");
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
    checker.checkBytes();
    checker.finish(std::string("bytes") + mode);
    comm->setMaxMessageElements(3);
  }
  return checker.allFailures == 0 ? 0 : 1;
}
