//===- Comm.cpp - the communicator of an emitted program ------------------===//
//
// The front end of every build: the mesh and its groups, argument checks,
// the byte counters, one-rank groups; the transport of the float
// collectives is the build's CommBackend (runtime/comm/Backend.h).
//
// How the world forms (create):
//  - MPI build without NCCL (the CPU target): MPI_Init; MpiBackend splits
//    one sub-communicator per group.
//  - NCCL build (the CUDA target's programs over several ranks): the
//    launcher's variables say who this rank is (runtime/comm/Launch.h).
//    Under an MPI launcher, in a program linked with MPI, world rank 0's
//    ncclUniqueId reaches the others by MPI_Bcast; otherwise by the
//    rendezvous at MASTER_ADDR:MASTER_PORT (runtime/comm/Rendezvous.h),
//    with no MPI at all. NcclBackend makes the world's communicator and
//    splits the groups from it, and runs the control plane too.
//  - neither: one rank, every group of size 1, every collective a local
//    copy (host, or device in a one-rank CUDA program: no NCCL call).
// Every build makes its groups eagerly, in one order (the CommGroups of
// `groups`), so that no collective waits on a rank that never makes its
// group; the watchdog runs from before the world forms.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Comm.h"
#include "runtime/comm/Backend.h"
#include "runtime/comm/Launch.h"
#include "runtime/comm/Rendezvous.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace autopar::rt {

static constexpr int kMaxAxes = 32;
/// Groups are created eagerly, one per subset of the axes of size > 1.
static constexpr int kMaxSplitAxes = 8;

namespace {

/// One rank without a device: a one-rank group's collective is a host copy.
class HostBackend : public OneRankBackend {
public:
  void move(void *dst, const void *src, size_t bytes) override {
    if (dst != src && bytes > 0)
      std::memmove(dst, src, bytes);
  }
};

/// Whether `bytes` bytes at `a` and at `b` share any.
bool overlap(const void *a, const void *b, int64_t bytes) {
  const char *x = static_cast<const char *>(a);
  const char *y = static_cast<const char *>(b);
  return bytes > 0 && x < y + bytes && y < x + bytes;
}

} // namespace

std::unique_ptr<CommBackend> makeHostBackend() {
  return std::make_unique<HostBackend>();
}

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
#endif
  /// The transport of the collectives (made last, destroyed first).
  std::unique_ptr<CommBackend> backend;
  /// `backend` for the watchdog's thread, once made (asyncError).
  std::atomic<CommBackend *> polled{nullptr};

  // The watchdog (setTimeout).
  double timeoutSeconds = 0;
  std::string program;
  std::thread watchdog;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  /// When the blocking call began (steady clock, ns; 0: not blocked), and
  /// what it is: written by the calling thread only while not blocked.
  std::atomic<int64_t> blockedSince{0};
  char blockedCall[256] = {0};
  /// What each request in flight is, for the watchdog's line.
  std::map<int64_t, std::string> issued;

  static int64_t nowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  bool watching() const { return timeoutSeconds > 0; }
  void note(CommRequest r, const std::string &what) {
    if (watching() && r.id >= 0)
      issued[r.id] = what;
  }
  std::string axesText(AxisMask mask) const {
    std::string text;
    for (size_t a = 0; a < names.size(); ++a)
      if ((mask >> a) & 1)
        text += (text.empty() ? "" : ",") + names[a];
    return text.empty() ? "the world" : text;
  }
  /// Marks the calling thread blocked in `what` for the watchdog while
  /// alive; nested in another (an MPI call inside a step's NCCL work), the
  /// outer one counts again when it ends.
  class Blocked {
  public:
    Blocked(Impl &impl, const std::string &what) : impl(impl) {
      if (!impl.watching())
        return;
      outerSince = impl.blockedSince.load(std::memory_order_acquire);
      if (outerSince != 0) {
        std::memcpy(outerCall, impl.blockedCall, sizeof(outerCall));
        impl.blockedSince.store(0, std::memory_order_release);
      }
      std::snprintf(impl.blockedCall, sizeof(impl.blockedCall), "%s",
                    what.c_str());
      impl.blockedSince.store(nowNs(), std::memory_order_release);
    }
    ~Blocked() {
      impl.blockedSince.store(0, std::memory_order_release);
      if (outerSince == 0)
        return;
      std::memcpy(impl.blockedCall, outerCall, sizeof(outerCall));
      impl.blockedSince.store(outerSince, std::memory_order_release);
    }

  private:
    Impl &impl;
    int64_t outerSince = 0;
    char outerCall[256] = {0};
  };
  void stopWatchdog() {
    if (!watchdog.joinable())
      return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    watchdog.join();
  }
};

void Communicator::setTimeout(double seconds, const char *program) {
  impl->stopWatchdog();
  impl->timeoutSeconds = numRanks > 1 ? seconds : 0;
  if (!impl->watching())
    return;
  impl->program = program;
  impl->stopping = false;
  impl->watchdog = std::thread([this] {
    Impl &w = *impl;
    const auto poll = std::chrono::duration<double>(
        std::min(1.0, std::max(0.01, w.timeoutSeconds / 8)));
    // Not MPI_Abort from this thread (MPI runs FUNNELED): the job ends when
    // the launcher sees this rank exit. NCCL's communicators are aborted
    // first (ncclCommAbort may be called from any thread).
    auto leave = [] {
      if (void (*hook)() = abortHook().exchange(nullptr))
        hook();
      std::_Exit(1);
    };
    // When the blocking call in progress began (0: none) and, copied into
    // `call`, what it is: only a copy the calling thread did not change
    // meanwhile counts.
    auto current = [&w](char(&call)[sizeof(w.blockedCall)]) -> int64_t {
      const int64_t since = w.blockedSince.load(std::memory_order_acquire);
      if (since == 0)
        return 0;
      std::memcpy(call, w.blockedCall, sizeof(call));
      call[sizeof(call) - 1] = 0;
      return w.blockedSince.load(std::memory_order_acquire) == since ? since
                                                                     : 0;
    };
    std::unique_lock<std::mutex> lock(w.mutex);
    while (!w.wake.wait_for(lock, poll, [&] { return w.stopping; })) {
      char call[sizeof(w.blockedCall)];
      if (CommBackend *backend = w.polled.load(std::memory_order_acquire)) {
        std::string error = backend->asyncError();
        if (!error.empty()) {
          const bool blocked = current(call) != 0;
          std::fflush(stdout);
          std::fprintf(stderr,
                       "%s: rank %d: NCCL failed%s%s: %s; ending the "
                       "job\n",
                       w.program.c_str(), worldRank, blocked ? " in " : "",
                       blocked ? call : "", error.c_str());
          std::fflush(stderr);
          leave();
        }
      }
      const int64_t since = current(call);
      if (since == 0 || double(Impl::nowNs() - since) < w.timeoutSeconds * 1e9)
        continue;
      std::fflush(stdout);
      std::fprintf(stderr,
                   "%s: rank %d: %s did not complete in %g s "
                   "(comm.timeout_s): another rank stopped or the network is "
                   "down; ending the job\n",
                   w.program.c_str(), worldRank, call, w.timeoutSeconds);
      std::fflush(stderr);
      leave();
    }
  });
}

struct Communicator::DeviceWork::Guard : Communicator::Impl::Blocked {
  using Blocked::Blocked;
};

Communicator::DeviceWork::DeviceWork(Communicator &comm, const char *what) {
#ifdef AUTOPAR_COMM_NCCL
  blocked = std::make_unique<Guard>(*comm.impl, what);
#else
  (void)comm;
  (void)what;
#endif
}

Communicator::DeviceWork::~DeviceWork() = default;

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
                            int numAxes, std::unique_ptr<Communicator> &out,
                            double timeoutSeconds, const char *program) {
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
  // Who this process is, as its launcher says: the world of a program that
  // does not start MPI, and how it starts NCCL.
  LaunchInfo launch;
  if (std::string error = readLaunchInfo(launch); !error.empty())
    return Status::error(error);

  std::unique_ptr<Communicator> comm(new Communicator());
  Impl &impl = *comm->impl;
#ifdef AUTOPAR_WITH_MPI
  bool useMpi = true;
#ifdef AUTOPAR_COMM_NCCL
  // NCCL needs MPI only to start, and only under MPI's own launchers.
  useMpi = launch.byMpi;
#endif
#else
  const bool useMpi = false;
  (void)argc;
  (void)argv;
#endif
  if (useMpi) {
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
      // Every rank finds this alone, and must print it before any rank
      // exits: mpirun kills the job when the first rank exits non-zero. So
      // MPI stays up in `out` until the caller has printed the error and
      // destroys it (MPI_Finalize synchronizes the ranks).
      out = std::move(comm);
      return Status::error(mismatch + std::to_string(out->numRanks) +
                           "; run it with mpirun -np " +
                           std::to_string(meshRanks));
    }
#endif
  } else {
#ifdef AUTOPAR_COMM_NCCL
    comm->worldRank = launch.rank;
    comm->numRanks = launch.worldSize;
    if (comm->numRanks != meshRanks)
      return Status::error(
          mismatch + std::to_string(comm->numRanks) +
          (launch.launcher.empty() ? " (no launcher)"
                                   : " (" + launch.launcher + ")") +
          "; start " + std::to_string(meshRanks) +
          " ranks (mpirun -np N, srun -n N, torchrun --nproc-per-node N)");
#else
    if (meshRanks != 1)
      return Status::error(
          "the plan's mesh has " + rankCount(meshRanks) + " (" +
          meshText(axes, numAxes) +
          ") but the program was built without MPI; rebuild it "
          "with MPI and run it with mpirun -np " +
          std::to_string(meshRanks));
    // A launcher's world (mpirun, srun, torchrun), which a one-rank program
    // cannot join.
    if (launch.worldSize != 1)
      return Status::error(mismatch + std::to_string(launch.worldSize) +
                           "; run it with mpirun -np 1");
#endif
  }

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
  // The groups, in the one order every rank makes them in (the world, the
  // group of every axis of size > 1, last).
  std::vector<CommGroup> groups;
  for (AxisMask mask = impl.nontrivial; mask;
       mask = (mask - 1) & impl.nontrivial) {
    int64_t color = 0;
    for (int i = 0; i < numAxes; ++i)
      color = color * impl.sizes[i] + ((mask >> i) & 1 ? 0 : impl.coords[i]);
    groups.push_back({mask, int(color), int(comm->groupIndex(mask)),
                      int(comm->groupSize(mask))});
  }
  std::reverse(groups.begin(), groups.end());
  // Armed before the world forms: a rank that never arrives ends this one.
  comm->setTimeout(timeoutSeconds, program);

#if defined(AUTOPAR_COMM_NCCL)
  std::string worldId;
  if (comm->worldRank == 0)
    worldId = newNcclUniqueId(0);
  if (useMpi) {
#ifdef AUTOPAR_WITH_MPI
    worldId.resize(sizeof(ncclUniqueId));
    AUTOPAR_MPI_CALL(comm->worldRank, MPI_Bcast, &worldId[0],
                     int(worldId.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
#endif
  } else if (comm->numRanks > 1) {
    Endpoint endpoint;
    bool found = false;
    if (std::string error = readEndpoint(endpoint, found); !error.empty())
      return Status::error(error);
    if (!found)
      return Status::error(
          "rank " + std::to_string(comm->worldRank) + " of " +
          std::to_string(comm->numRanks) +
          " has no endpoint to meet the others at: set MASTER_ADDR (rank "
          "0's host) and MASTER_PORT (a free TCP port there)" +
#ifdef AUTOPAR_WITH_MPI
          ", or start the program with mpirun"
#else
          ""
#endif
      );
    double wait = timeoutSeconds > 0 ? timeoutSeconds : 600;
    if (Status s = rendezvous(endpoint, comm->worldRank, comm->numRanks, wait,
                              worldId);
        !s)
      return s;
  }
  {
    Impl::Blocked blocked(impl, "the NCCL communicators' set-up (" +
                                    rankCount(comm->numRanks) + ")");
    impl.backend =
        makeNcclBackend(groups, worldId, comm->worldRank, comm->numRanks);
  }
#elif defined(AUTOPAR_COMM_MPI_FLOATS)
  impl.backend = makeMpiBackend(groups, comm->worldRank);
#elif defined(AUTOPAR_COMM_DEVICE)
  impl.backend = makeDeviceBackend();
#else
  impl.backend = makeHostBackend();
#endif
  impl.polled.store(impl.backend.get(), std::memory_order_release);
  out = std::move(comm);
  return Status::ok();
}

Communicator::~Communicator() {
  impl->stopWatchdog();
#ifdef AUTOPAR_WITH_MPI
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
#endif
  impl->backend.reset();
#ifdef AUTOPAR_WITH_MPI
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

void Communicator::resetBytes() { sentBytes.clear(); }

void Communicator::setMaxMessageElements(int64_t elements) {
  impl->maxElements = std::clamp<int64_t>(elements, 1, INT_MAX);
  impl->backend->setMaxMessageElements(impl->maxElements);
}

void Communicator::abort(int code) { endWorld(code); }

void Communicator::setComputeStream(void *stream) {
  if (!impl->backend->setComputeStream(stream))
    fail("setComputeStream", "requests are outstanding on the old stream");
}

CommRequest Communicator::allReduceSum(void *data, int64_t numElements,
                                       CommType type, AxisMask axes) {
  AxisMask mask = canonical(axes, "allReduceSum");
  if (numElements < 0)
    fail("allReduceSum", "negative element count");
  int64_t g = groupSize(mask);
  if (g == 1 || numElements == 0)
    return {};
  sentBytes[mask][int(CollectiveKind::AllReduce)] +=
      allReduceBytes(numElements, g, commTypeBytes(type));
  CommRequest r = impl->backend->allReduceSum(data, numElements, type, mask);
  if (impl->watching())
    impl->note(r, "an all-reduce of " + std::to_string(numElements) +
                      " elements over " + impl->axesText(mask));
  return r;
}

CommRequest Communicator::allReduceMax(float *data, int64_t numElements,
                                       AxisMask axes) {
  AxisMask mask = canonical(axes, "allReduceMax");
  if (numElements < 0)
    fail("allReduceMax", "negative element count");
  int64_t g = groupSize(mask);
  if (g == 1 || numElements == 0)
    return {};
  sentBytes[mask][int(CollectiveKind::AllReduce)] +=
      allReduceBytes(numElements, g, commTypeBytes(CommType::F32));
  CommRequest r = impl->backend->allReduceMax(data, numElements, mask);
  if (impl->watching())
    impl->note(r, "an all-reduce (max) of " + std::to_string(numElements) +
                      " elements over " + impl->axesText(mask));
  return r;
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
    impl->backend->move(piece, full, size_t(numElements * size));
    return {};
  }
  int64_t chunk = flatChunk(numElements, g);
  if (chunk == 0)
    return {};
  sentBytes[mask][int(CollectiveKind::ReduceScatter)] +=
      reduceScatterFlatBytes(numElements, g, size);
  CommRequest r = impl->backend->reduceScatterFlat(full, numElements, piece,
                                                   type, mask, g, chunk);
  if (impl->watching())
    impl->note(r, "a reduce-scatter of " + std::to_string(numElements) +
                      " elements over " + impl->axesText(mask));
  return r;
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
    impl->backend->move(full, piece, size_t(numElements * size));
    return {};
  }
  int64_t chunk = flatChunk(numElements, g);
  if (chunk == 0)
    return {};
  sentBytes[mask][int(CollectiveKind::AllGather)] +=
      allGatherFlatBytes(numElements, g, size);
  CommRequest r = impl->backend->allGatherFlat(
      piece, numElements, full, type, mask, g, chunk, groupIndex(mask));
  if (impl->watching())
    impl->note(r, "an all-gather of " + std::to_string(numElements) +
                      " elements over " + impl->axesText(mask));
  return r;
}

CommRequest Communicator::allToAllFlat(const void *send, int64_t numElements,
                                       void *recv, CommType type,
                                       AxisMask axes) {
  AxisMask mask = canonical(axes, "allToAllFlat");
  if (numElements < 0)
    fail("allToAllFlat", "negative element count");
  int64_t g = groupSize(mask);
  int64_t size = commTypeBytes(type);
  if (numElements % g != 0)
    fail("allToAllFlat", "the group size does not divide the element count");
  if (g > 1 && overlap(send, recv, numElements * size))
    fail("allToAllFlat", "the receive buffer overlaps the send buffer");
  if (g == 1) {
    impl->backend->move(recv, send, size_t(numElements * size));
    return {};
  }
  if (numElements == 0)
    return {};
  sentBytes[mask][int(CollectiveKind::AllToAll)] +=
      allToAllFlatBytes(numElements, g, size);
  CommRequest r =
      impl->backend->allToAllFlat(send, recv, type, mask, g, numElements / g);
  if (impl->watching())
    impl->note(r, "an all-to-all of " + std::to_string(numElements) +
                      " elements over " + impl->axesText(mask));
  return r;
}

CommRequest Communicator::shift(const void *send, int64_t numElements,
                                void *recv, CommType type, AxisMask axes,
                                int64_t offset) {
  AxisMask mask = canonical(axes, "shift");
  if (numElements < 0)
    fail("shift", "negative element count");
  const int64_t g = groupSize(mask), size = commTypeBytes(type);
  if (g > 1 && overlap(send, recv, numElements * size))
    fail("shift", "the receive buffer overlaps the send buffer");
  const int64_t step = ((offset % g) + g) % g;
  if (step == 0) {
    impl->backend->move(recv, send, size_t(numElements * size));
    return {};
  }
  if (numElements == 0)
    return {};
  sentBytes[mask][int(CollectiveKind::Send)] += double(numElements * size);
  const int64_t index = groupIndex(mask);
  CommRequest r =
      impl->backend->shift(send, recv, numElements, type, mask,
                           (index + step) % g, (index + g - step) % g);
  if (impl->watching())
    impl->note(r, "a ring shift of " + std::to_string(numElements) +
                      " elements over " + impl->axesText(mask));
  return r;
}

CommRequest Communicator::exchange(const PointToPoint *ops, int count,
                                   CommRequest *each) {
  if (count < 0)
    fail("exchange", "negative transfer count");
  for (int i = 0; i < count; ++i) {
    const PointToPoint &op = ops[i];
    if (op.peer < 0 || op.peer >= numRanks || op.peer == worldRank)
      fail("exchange", "the peer is not another rank of the world");
    if (op.bytes < 0 || op.tag < 0)
      fail("exchange", "negative byte count or tag");
    if (!op.send)
      continue;
    // The axes on which the two ranks' coordinates differ (ranks are
    // row-major over the axes).
    AxisMask mask = 0;
    int64_t peer = op.peer;
    for (int a = numAxes() - 1; a >= 0; --a) {
      if (peer % impl->sizes[a] != impl->coords[a])
        mask |= 1u << a;
      peer /= impl->sizes[a];
    }
    sentBytes[mask][int(CollectiveKind::Send)] += double(op.bytes);
  }
  if (count == 0)
    return {};
  CommRequest r = impl->backend->exchange(ops, count, each);
  if (impl->watching()) {
    auto transfer = [](const PointToPoint &op) {
      return std::string(op.send ? "a send of " : "a receive of ") +
             std::to_string(op.bytes) + " bytes " + (op.send ? "to" : "from") +
             " rank " + std::to_string(op.peer) + " (tag " +
             std::to_string(op.tag) + ")";
    };
    if (each)
      for (int i = 0; i < count; ++i)
        impl->note(each[i], transfer(ops[i]));
    else
      impl->note(r, transfer(ops[0]) +
                        (count > 1 ? " and " + std::to_string(count - 1) +
                                         " more transfers"
                                   : std::string()));
  }
  return r;
}

void Communicator::wait(CommRequest request) {
  if (!impl->watching()) {
    impl->backend->wait(request);
    return;
  }
  auto it = impl->issued.find(request.id);
  {
    Impl::Blocked blocked(*impl, it == impl->issued.end()
                                     ? std::string("a collective")
                                     : it->second);
    impl->backend->wait(request);
  }
  if (it != impl->issued.end())
    impl->issued.erase(it);
}

void Communicator::waitAll() {
  if (!impl->watching()) {
    impl->backend->waitAll();
    return;
  }
  {
    Impl::Blocked blocked(
        *impl, impl->issued.empty() ? std::string("the collectives in flight")
                                    : "the collectives in flight (the first: " +
                                          impl->issued.begin()->second + ")");
    impl->backend->waitAll();
  }
  impl->issued.clear();
}

void Communicator::progress() { impl->backend->progress(); }

void Communicator::allReduceSumDouble(double *data, int64_t numElements,
                                      AxisMask axes) {
  AxisMask mask = canonical(axes, "allReduceSumDouble");
  if (numElements < 0)
    fail("allReduceSumDouble", "negative element count");
  if (groupSize(mask) == 1 || numElements == 0)
    return;
  Impl::Blocked blocked(*impl, impl->watching()
                                   ? "an all-reduce of " +
                                         std::to_string(numElements) +
                                         " doubles over " + impl->axesText(mask)
                                   : std::string());
  impl->backend->sumDoubles(data, numElements, mask);
}

void Communicator::broadcastBytes(void *data, int64_t bytes) {
  if (bytes < 0)
    fail("broadcastBytes", "negative byte count");
  if (numRanks == 1 || bytes == 0)
    return;
  Impl::Blocked blocked(*impl, impl->watching()
                                   ? "a broadcast of " + std::to_string(bytes) +
                                         " bytes from rank 0"
                                   : std::string());
  impl->backend->broadcastBytes(data, bytes);
}

void Communicator::barrier() {
  if (numRanks == 1)
    return;
  Impl::Blocked blocked(*impl, "a barrier");
  impl->backend->barrier();
}

} // namespace autopar::rt
