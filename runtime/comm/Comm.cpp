//===- Comm.cpp - the communicator of an emitted CPU program --------------===//
//
// With AUTOPAR_WITH_MPI: one MPI sub-communicator per group of mesh axes
// (split from MPI_COMM_WORLD, key = position in the group so that MPI ranks
// are group positions), non-blocking collectives tracked per request with
// the staging buffers and count arrays that MPI reads until they complete.
// Without: one rank, every group of size 1, every collective local.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Comm.h"

#include <algorithm>
#include <climits>
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
  /// A collective in flight and what MPI reads until it completes.
  struct Pending {
    std::vector<MPI_Request> requests;
    std::vector<float> staging;
    std::vector<int> counts, displs;
  };
  /// Outstanding requests by id (std::map: nodes, and so the arrays MPI
  /// holds pointers into, never move).
  std::map<int64_t, Pending> pending;
  int64_t nextId = 0;
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
  out = std::move(comm);
  return Status::ok();
}

Communicator::~Communicator() {
#ifdef AUTOPAR_WITH_MPI
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  waitAll();
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

void Communicator::abort(int code) {
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

CommRequest Communicator::allReduceSum(float *data, int64_t numElements,
                                       AxisMask axes) {
  AxisMask mask = canonical(axes, "allReduceSum");
  if (numElements < 0)
    fail("allReduceSum", "negative element count");
  int64_t g = groupSize(mask);
  if (g == 1 || numElements == 0)
    return {};
  sentBytes[int(CollectiveKind::AllReduce)] +=
      allReduceBytes(numElements, g, sizeof(float));
#ifdef AUTOPAR_WITH_MPI
  MPI_Comm sub = impl->comms.at(mask);
  int64_t id = impl->nextId++;
  Impl::Pending &p = impl->pending[id];
  for (int64_t off = 0; off < numElements; off += impl->maxElements) {
    int count = int(std::min(impl->maxElements, numElements - off));
    p.requests.push_back(MPI_REQUEST_NULL);
    AUTOPAR_MPI_CALL(worldRank, MPI_Iallreduce, MPI_IN_PLACE, data + off, count,
                     MPI_FLOAT, MPI_SUM, sub, &p.requests.back());
  }
  return {id};
#else
  (void)data;
  return {};
#endif
}

CommRequest Communicator::reduceScatterFlat(const float *full,
                                            int64_t numElements, float *piece,
                                            AxisMask axes) {
  AxisMask mask = canonical(axes, "reduceScatterFlat");
  if (numElements < 0)
    fail("reduceScatterFlat", "negative element count");
  int64_t g = groupSize(mask);
  if (g == 1) {
    if (piece != full && numElements > 0)
      std::memmove(piece, full, numElements * sizeof(float));
    return {};
  }
  int64_t chunk = flatChunk(numElements, g);
  if (chunk == 0)
    return {};
  sentBytes[int(CollectiveKind::ReduceScatter)] +=
      reduceScatterFlatBytes(numElements, g, sizeof(float));
#ifdef AUTOPAR_WITH_MPI
  MPI_Comm sub = impl->comms.at(mask);
  int64_t id = impl->nextId++;
  Impl::Pending &p = impl->pending[id];
  // The padded tensor, one region per message: region k holds, for every
  // group position j, elements [off, off + c) of block j.
  p.staging.assign(g * chunk, 0.0f);
  for (int64_t off = 0; off < chunk; off += impl->maxElements) {
    int64_t c = std::min(impl->maxElements, chunk - off);
    float *region = p.staging.data() + g * off;
    for (int64_t j = 0; j < g; ++j) {
      int64_t begin = j * chunk + off;
      int64_t valid = std::clamp<int64_t>(numElements - begin, 0, c);
      if (valid > 0)
        std::memcpy(region + j * c, full + begin, valid * sizeof(float));
    }
  }
  for (int64_t off = 0; off < chunk; off += impl->maxElements) {
    int64_t c = std::min(impl->maxElements, chunk - off);
    p.requests.push_back(MPI_REQUEST_NULL);
    AUTOPAR_MPI_CALL(worldRank, MPI_Ireduce_scatter_block,
                     p.staging.data() + g * off, piece + off, int(c), MPI_FLOAT,
                     MPI_SUM, sub, &p.requests.back());
  }
  return {id};
#else
  return {};
#endif
}

CommRequest Communicator::allGatherFlat(const float *piece, int64_t numElements,
                                        float *full, AxisMask axes) {
  AxisMask mask = canonical(axes, "allGatherFlat");
  if (numElements < 0)
    fail("allGatherFlat", "negative element count");
  int64_t g = groupSize(mask);
  if (g == 1) {
    if (piece != full && numElements > 0)
      std::memmove(full, piece, numElements * sizeof(float));
    return {};
  }
  int64_t chunk = flatChunk(numElements, g);
  if (chunk == 0)
    return {};
  sentBytes[int(CollectiveKind::AllGather)] +=
      allGatherFlatBytes(numElements, g, sizeof(float));
#ifdef AUTOPAR_WITH_MPI
  auto countOf = [&](int64_t j) {
    return std::clamp<int64_t>(numElements - j * chunk, 0, chunk);
  };
  int64_t i = groupIndex(mask);
  float *own = full + std::min(i * chunk, numElements);
  if (piece != own && countOf(i) > 0)
    std::memmove(own, piece, countOf(i) * sizeof(float));
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
                     MPI_FLOAT, sub, &p.requests.back());
    return {id};
  }
  // Displacements past INT_MAX: every position broadcasts its block in
  // messages of at most maxElements.
  for (int64_t j = 0; j < g; ++j) {
    int64_t count = countOf(j);
    for (int64_t off = 0; off < count; off += impl->maxElements) {
      int c = int(std::min(impl->maxElements, count - off));
      p.requests.push_back(MPI_REQUEST_NULL);
      AUTOPAR_MPI_CALL(worldRank, MPI_Ibcast, full + j * chunk + off, c,
                       MPI_FLOAT, int(j), sub, &p.requests.back());
    }
  }
  return {id};
#else
  return {};
#endif
}

void Communicator::wait(CommRequest request) {
#ifdef AUTOPAR_WITH_MPI
  auto it = impl->pending.find(request.id);
  if (it == impl->pending.end())
    return;
  std::vector<MPI_Request> &requests = it->second.requests;
  AUTOPAR_MPI_CALL(worldRank, MPI_Waitall, int(requests.size()),
                   requests.data(), MPI_STATUSES_IGNORE);
  impl->pending.erase(it);
#else
  (void)request;
#endif
}

void Communicator::waitAll() {
#ifdef AUTOPAR_WITH_MPI
  for (auto &[id, p] : impl->pending)
    AUTOPAR_MPI_CALL(worldRank, MPI_Waitall, int(p.requests.size()),
                     p.requests.data(), MPI_STATUSES_IGNORE);
  impl->pending.clear();
#endif
}

void Communicator::progress() {
#ifdef AUTOPAR_WITH_MPI
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
