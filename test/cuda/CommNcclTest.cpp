//===- CommNcclTest.cpp - the NCCL build of runtime/comm, end to end ------===//
//
// autopar-comm-nccl-test [--no-device] [A [B]]
//
// The communicator as the CUDA target's programs over several ranks build
// it (runtime/comm/ with AUTOPAR_WITH_NCCL): autopar-comm-nccl-test without
// MPI (the ranks meet at MASTER_ADDR:MASTER_PORT), autopar-comm-nccl-mpi-test
// with it (started by mpirun). The machines that build it have no GPU; on
// one with a GPU, scripts/gpu-check.sh starts several of it on the one GPU
// (scripts/launch-local.sh, each rank its own NCCL_HOSTID).
//
// It takes the device of its local rank (runtime/comm/Launch.h), forms the
// mesh a=A (default 1) or a=A x b=B, and over every group (a, b, both), for
// float32 and then bfloat16 device buffers, issues one allReduceSum,
// allReduceMax, reduceScatterFlat and allGatherFlat (an element count that
// the group size rarely divides, so the padding paths run) and
// allToAllFlat (blocks of 3, the sent buffer overwritten once issued) and
// shift (one position on, the sent buffer overwritten once issued), then the
// host collectives (allReduceSumDouble over each group, broadcastBytes,
// barrier) and a ring of point-to-point transfers over the world; it prints
// what each rank received against the expected values and the bytes counted,
// and exits 1 on any mismatch (summed over the world, so that every rank
// agrees).
//
// --no-device: only forms the world, without selecting a GPU, and prints
// create()'s error: the launch errors (a world that is not the mesh, no
// endpoint, a rank 0 that never listens) come back before any CUDA or NCCL
// call on ranks > 0, so test/cuda/comm-nccl-errors.test checks them on a
// machine without a GPU. (A world that does form needs the GPU.)
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Comm.h"
#include "runtime/comm/Launch.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using autopar::rt::AxisMask;
using autopar::rt::CommRequest;
using autopar::rt::CommType;
using autopar::rt::Communicator;
using autopar::rt::MeshAxisInfo;

namespace {

#define CHECK_CUDA(call)                                                       \
  do {                                                                         \
    cudaError_t err_ = (call);                                                 \
    if (err_ != cudaSuccess) {                                                 \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__,       \
                   #call, cudaGetErrorString(err_));                           \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

/// Rank r's element k: small integers, so that sums are exact in float32
/// and in bfloat16 (every integer up to 256) for up to 8 ranks.
float value(int rank, int64_t k) { return float(rank + 1 + 8 * k); }

/// `values` as elements of `type`: a bfloat16 is the upper half of a float
/// (exact for the values here).
std::vector<char> encode(const std::vector<float> &values, CommType type) {
  int size = autopar::rt::commTypeBytes(type);
  std::vector<char> bytes(values.size() * size);
  for (size_t k = 0; k < values.size(); ++k) {
    uint32_t bits;
    std::memcpy(&bits, &values[k], sizeof(bits));
    uint16_t upper = uint16_t(bits >> 16);
    const void *from = &bits;
    if (type == CommType::BF16)
      from = &upper;
    std::memcpy(&bytes[k * size], from, size);
  }
  return bytes;
}

/// The inverse of encode.
std::vector<float> decode(const std::vector<char> &bytes, CommType type) {
  int size = autopar::rt::commTypeBytes(type);
  std::vector<float> values(bytes.size() / size);
  for (size_t k = 0; k < values.size(); ++k) {
    uint32_t bits = 0;
    if (type == CommType::F32) {
      std::memcpy(&bits, &bytes[k * size], size);
    } else {
      uint16_t upper;
      std::memcpy(&upper, &bytes[k * size], size);
      bits = uint32_t(upper) << 16;
    }
    std::memcpy(&values[k], &bits, sizeof(bits));
  }
  return values;
}

/// Prints `name` and its values, and counts the elements unlike `expected`.
int report(int rank, const std::string &what, const std::vector<float> &got,
           const std::vector<float> &expected) {
  int bad = got.size() != expected.size();
  std::printf("rank %d %s:", rank, what.c_str());
  for (size_t k = 0; k < got.size() && k < expected.size(); ++k) {
    std::printf(" %g", got[k]);
    bad += got[k] != expected[k];
  }
  std::printf(bad ? " FAIL\n" : " OK\n");
  return bad;
}

/// The world ranks of this rank's group over `mask` (in group order).
std::vector<int> groupRanks(const Communicator &comm,
                            const std::vector<int64_t> &sizes, AxisMask mask) {
  std::vector<int> ranks;
  for (int r = 0; r < comm.worldSize(); ++r) {
    bool same = true;
    int64_t rest = r;
    for (int a = int(sizes.size()) - 1; a >= 0; --a) {
      if (!((mask >> a) & 1) && rest % sizes[a] != comm.coord(a))
        same = false;
      rest /= sizes[a];
    }
    if (same)
      ranks.push_back(r);
  }
  return ranks;
}

/// The float collectives over `mask` on device buffers of `type`; returns
/// the number of wrong elements.
int checkCollectives(Communicator &comm, const std::vector<int64_t> &sizes,
                     AxisMask mask, CommType type, cudaStream_t stream) {
  const int rank = comm.rank();
  const std::vector<int> members = groupRanks(comm, sizes, mask);
  const int64_t g = comm.groupSize(mask), i = comm.groupIndex(mask);
  const int64_t n = 7, chunk = autopar::rt::flatChunk(n, g);
  const size_t size = autopar::rt::commTypeBytes(type);

  std::vector<float> mine(n);
  for (int64_t k = 0; k < n; ++k)
    mine[k] = value(rank, k);
  std::vector<char> mineBytes = encode(mine, type);
  void *data = nullptr, *full = nullptr, *piece = nullptr, *gathered = nullptr;
  float *max = nullptr;
  CHECK_CUDA(cudaMalloc(&data, n * size));
  CHECK_CUDA(cudaMalloc(&full, n * size));
  CHECK_CUDA(cudaMalloc(&piece, chunk * size));
  CHECK_CUDA(cudaMalloc(&gathered, n * size));
  CHECK_CUDA(cudaMalloc(&max, n * sizeof(float)));
  CHECK_CUDA(cudaMemcpyAsync(data, mineBytes.data(), n * size,
                             cudaMemcpyHostToDevice, stream));
  CHECK_CUDA(cudaMemcpyAsync(full, mineBytes.data(), n * size,
                             cudaMemcpyHostToDevice, stream));
  CHECK_CUDA(cudaMemcpyAsync(max, mine.data(), n * sizeof(float),
                             cudaMemcpyHostToDevice, stream));

  CommRequest sum = comm.allReduceSum(data, n, type, mask);
  CommRequest top = comm.allReduceMax(max, n, mask);
  CommRequest scatter = comm.reduceScatterFlat(full, n, piece, type, mask);
  // `full` may be reused at once: the staging copy was taken before this.
  CHECK_CUDA(cudaMemsetAsync(full, 0xff, n * size, stream));
  // The gather reads the reduced piece: the compute stream waits for it.
  comm.wait(scatter);
  CommRequest gather = comm.allGatherFlat(piece, n, gathered, type, mask);
  // Block j of `sent` to position j; overwritten at once (it is copied).
  const int64_t block = 3;
  std::vector<float> blocks(block * g);
  for (int64_t k = 0; k < block * g; ++k)
    blocks[k] = value(rank, k);
  std::vector<char> blocksBytes = encode(blocks, type);
  void *sent = nullptr, *received = nullptr;
  CHECK_CUDA(cudaMalloc(&sent, block * g * size));
  CHECK_CUDA(cudaMalloc(&received, block * g * size));
  CHECK_CUDA(cudaMemcpyAsync(sent, blocksBytes.data(), block * g * size,
                             cudaMemcpyHostToDevice, stream));
  CommRequest swap = comm.allToAllFlat(sent, block * g, received, type, mask);
  CHECK_CUDA(cudaMemsetAsync(sent, 0xff, block * g * size, stream));
  // A ring step: `mine` to the next position, the previous one's received.
  void *passed = nullptr, *arrived = nullptr;
  CHECK_CUDA(cudaMalloc(&passed, n * size));
  CHECK_CUDA(cudaMalloc(&arrived, n * size));
  CHECK_CUDA(cudaMemcpyAsync(passed, mineBytes.data(), n * size,
                             cudaMemcpyHostToDevice, stream));
  CommRequest step = comm.shift(passed, n, arrived, type, mask, 1);
  CHECK_CUDA(cudaMemsetAsync(passed, 0xff, n * size, stream));
  comm.wait(step);
  comm.wait(swap);
  comm.wait(sum);
  comm.wait(top);
  comm.waitAll();
  comm.wait(gather); // completed already: a no-op

  std::vector<char> gotSum(n * size), gotPiece(chunk * size),
      gotGathered(n * size);
  std::vector<float> gotMax(n);
  CHECK_CUDA(cudaMemcpyAsync(gotSum.data(), data, n * size,
                             cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaMemcpyAsync(gotPiece.data(), piece, chunk * size,
                             cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaMemcpyAsync(gotGathered.data(), gathered, n * size,
                             cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaMemcpyAsync(gotMax.data(), max, n * sizeof(float),
                             cudaMemcpyDeviceToHost, stream));
  std::vector<char> gotBlocks(block * g * size);
  CHECK_CUDA(cudaMemcpyAsync(gotBlocks.data(), received, block * g * size,
                             cudaMemcpyDeviceToHost, stream));
  std::vector<char> gotArrived(n * size);
  CHECK_CUDA(cudaMemcpyAsync(gotArrived.data(), arrived, n * size,
                             cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaFree(passed));
  CHECK_CUDA(cudaFree(arrived));
  CHECK_CUDA(cudaFree(sent));
  CHECK_CUDA(cudaFree(received));
  CHECK_CUDA(cudaFree(data));
  CHECK_CUDA(cudaFree(full));
  CHECK_CUDA(cudaFree(piece));
  CHECK_CUDA(cudaFree(gathered));
  CHECK_CUDA(cudaFree(max));

  std::vector<float> total(n, 0.0f), largest(n, 0.0f);
  for (int r : members)
    for (int64_t k = 0; k < n; ++k) {
      total[k] += value(r, k);
      largest[k] = std::max(largest[k], value(r, k));
    }
  std::vector<float> ownPiece(chunk, 0.0f);
  for (int64_t k = 0; k < chunk; ++k)
    if (i * chunk + k < n)
      ownPiece[k] = total[i * chunk + k];
  std::vector<float> swapped(block * g);
  for (int64_t k = 0; k < block * g; ++k)
    swapped[k] = value(members[k / block], i * block + k % block);
  std::vector<float> previous(n);
  for (int64_t k = 0; k < n; ++k)
    previous[k] = value(members[(i + g - 1) % g], k);
  std::string what = std::string(type == CommType::F32 ? "f32" : "bf16") +
                     " mask " + std::to_string(mask) + " ";
  return report(rank, what + "allReduceSum", decode(gotSum, type), total) +
         report(rank, what + "allReduceMax", gotMax, largest) +
         report(rank, what + "reduceScatterFlat", decode(gotPiece, type),
                ownPiece) +
         report(rank, what + "allGatherFlat", decode(gotGathered, type),
                total) +
         report(rank, what + "allToAllFlat", decode(gotBlocks, type), swapped) +
         report(rank, what + "shift", decode(gotArrived, type), previous);
}

/// The host collectives and a ring of transfers over the world.
int checkControlPlane(Communicator &comm, const std::vector<int64_t> &sizes,
                      cudaStream_t stream) {
  const int rank = comm.rank(), world = comm.worldSize();
  int bad = 0;
  for (AxisMask mask = 1; mask < (AxisMask(1) << sizes.size()); ++mask) {
    double got[2] = {double(rank), 0.5};
    comm.allReduceSumDouble(got, 2, mask);
    double want = 0;
    for (int r : groupRanks(comm, sizes, mask))
      want += r;
    double half = 0.5 * double(comm.groupSize(mask));
    bad += report(rank, "allReduceSumDouble mask " + std::to_string(mask),
                  {float(got[0]), float(got[1])}, {float(want), float(half)});
  }
  std::string text = rank == 0 ? "from rank 0" : "xxxxxxxxxxx";
  comm.broadcastBytes(&text[0], int64_t(text.size()));
  bad += text != "from rank 0";
  std::printf("rank %d broadcastBytes: %s %s\n", rank, text.c_str(),
              text == "from rank 0" ? "OK" : "FAIL");
  comm.barrier();

  if (world > 1) {
    // Each rank sends its value to the next and receives the previous's.
    const int64_t n = 5;
    std::vector<float> mine(n);
    for (int64_t k = 0; k < n; ++k)
      mine[k] = value(rank, k);
    float *send = nullptr, *recv = nullptr;
    CHECK_CUDA(cudaMalloc(&send, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&recv, n * sizeof(float)));
    CHECK_CUDA(cudaMemcpyAsync(send, mine.data(), n * sizeof(float),
                               cudaMemcpyHostToDevice, stream));
    autopar::rt::PointToPoint ops[2] = {};
    ops[0].send = true;
    ops[0].data = send;
    ops[0].bytes = n * int64_t(sizeof(float));
    ops[0].peer = (rank + 1) % world;
    ops[1].send = false;
    ops[1].data = recv;
    ops[1].bytes = n * int64_t(sizeof(float));
    ops[1].peer = (rank + world - 1) % world;
    comm.wait(comm.exchange(ops, 2));
    std::vector<float> got(n), want(n);
    CHECK_CUDA(cudaMemcpyAsync(got.data(), recv, n * sizeof(float),
                               cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (int64_t k = 0; k < n; ++k)
      want[k] = value((rank + world - 1) % world, k);
    bad += report(rank, "exchange", got, want);
    CHECK_CUDA(cudaFree(send));
    CHECK_CUDA(cudaFree(recv));
  }
  return bad;
}

} // namespace

int main(int argc, char **argv) {
  const bool noDevice = argc > 1 && std::string(argv[1]) == "--no-device";
  const int first = noDevice ? 2 : 1;
  std::vector<int64_t> sizes = {argc > first ? std::atoll(argv[first]) : 1};
  if (argc > first + 1)
    sizes.push_back(std::atoll(argv[first + 1]));
  if (noDevice) {
    const char *names[] = {"a", "b"};
    std::vector<MeshAxisInfo> axes;
    for (size_t a = 0; a < sizes.size(); ++a)
      axes.push_back({names[a], sizes[a]});
    std::unique_ptr<Communicator> comm;
    autopar::rt::Status status = Communicator::create(
        &argc, &argv, axes.data(), int(axes.size()), comm, 1,
        "autopar-comm-nccl-test");
    std::fprintf(stderr, "%s\n",
                 status.isOk() ? "the world formed"
                               : ("error: " + status.message()).c_str());
    // (A formed world's communicators live on a device this mode never
    // chose: end without destroying them.)
    std::fflush(stderr);
    std::_Exit(status.isOk() ? 0 : 1);
  }
  // The device first: Communicator::create makes its stream and NCCL
  // communicators on the current device.
  autopar::rt::LaunchInfo launch;
  if (std::string error = autopar::rt::readLaunchInfo(launch); !error.empty()) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return 1;
  }
  int count = 0;
  CHECK_CUDA(cudaGetDeviceCount(&count));
  CHECK_CUDA(cudaSetDevice(launch.localRank % count));
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  const char *names[] = {"a", "b"};
  std::vector<MeshAxisInfo> axes;
  for (size_t a = 0; a < sizes.size(); ++a)
    axes.push_back({names[a], sizes[a]});
  std::unique_ptr<Communicator> comm;
  autopar::rt::Status status =
      Communicator::create(&argc, &argv, axes.data(), int(axes.size()), comm,
                           60, "autopar-comm-nccl-test");
  if (!status.isOk()) {
    std::fprintf(stderr, "error: %s\n", status.message().c_str());
    return 1;
  }
  comm->setComputeStream(stream);
  int bad = 0;
  for (AxisMask mask = 1; mask < (AxisMask(1) << sizes.size()); ++mask)
    bad += checkCollectives(*comm, sizes, mask, CommType::F32, stream) +
           checkCollectives(*comm, sizes, mask, CommType::BF16, stream);
  bad += checkControlPlane(*comm, sizes, stream);
  std::printf("rank %d bytes: all-reduce %g reduce-scatter %g all-gather %g "
              "send %g all-to-all %g\n",
              comm->rank(), comm->bytes(autopar::rt::CollectiveKind::AllReduce),
              comm->bytes(autopar::rt::CollectiveKind::ReduceScatter),
              comm->bytes(autopar::rt::CollectiveKind::AllGather),
              comm->bytes(autopar::rt::CollectiveKind::Send),
              comm->bytes(autopar::rt::CollectiveKind::AllToAll));

  double failures = bad;
  comm->allReduceSumDouble(&failures, 1, (AxisMask(1) << sizes.size()) - 1);
  if (comm->rank() == 0)
    std::printf("autopar-comm-nccl-test: %s over %d ranks\n",
                failures == 0 ? "OK" : "FAILED", comm->worldSize());
  comm.reset();
  CHECK_CUDA(cudaStreamDestroy(stream));
  return failures == 0 ? 0 : 1;
}
