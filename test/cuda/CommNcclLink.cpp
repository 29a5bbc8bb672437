//===- CommNcclLink.cpp - the NCCL build of runtime/comm, end to end ------===//
//
// autopar-comm-nccl-link [SIZE]
//
// Proves that runtime/comm/Comm.cpp built with AUTOPAR_WITH_MPI and
// AUTOPAR_WITH_NCCL compiles and links against MPI, NCCL and the CUDA
// runtime (CMake target autopar-comm-nccl-link); no test runs it, since the
// machines that build it have no GPU. Run on GPUs (mpirun -np SIZE
// autopar-comm-nccl-link SIZE) it selects the device of its local rank,
// creates a communicator over a one-axis mesh dp=SIZE (default 1), sets its
// compute stream, and for float32 and then bfloat16 buffers issues one
// allReduceSum, reduceScatterFlat and allGatherFlat on small device buffers
// (an element count that SIZE rarely divides, so the padding paths run),
// waits, and prints what each rank received against the expected values;
// exits 1 on a mismatch.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Comm.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
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
int report(int rank, const char *type, const char *name,
           const std::vector<float> &got, const std::vector<float> &expected) {
  int bad = 0;
  std::printf("rank %d %s %s:", rank, type, name);
  for (size_t k = 0; k < got.size(); ++k) {
    std::printf(" %g", got[k]);
    bad += got[k] != expected[k];
  }
  std::printf(bad ? " FAIL\n" : " OK\n");
  return bad;
}

/// The three collectives on device buffers of `type`; returns the number
/// of wrong elements.
int checkCollectives(Communicator &comm, CommType type, cudaStream_t stream) {
  const AxisMask dp = 1;
  const int rank = comm.rank();
  const int64_t g = comm.groupSize(dp), i = comm.groupIndex(dp);
  const int64_t n = 7, chunk = autopar::rt::flatChunk(n, g);
  const size_t size = autopar::rt::commTypeBytes(type);

  std::vector<float> mine(n);
  for (int64_t k = 0; k < n; ++k)
    mine[k] = value(rank, k);
  std::vector<char> mineBytes = encode(mine, type);
  void *data = nullptr, *full = nullptr, *piece = nullptr, *gathered = nullptr;
  CHECK_CUDA(cudaMalloc(&data, n * size));
  CHECK_CUDA(cudaMalloc(&full, n * size));
  CHECK_CUDA(cudaMalloc(&piece, chunk * size));
  CHECK_CUDA(cudaMalloc(&gathered, n * size));
  CHECK_CUDA(cudaMemcpyAsync(data, mineBytes.data(), n * size,
                             cudaMemcpyHostToDevice, stream));
  CHECK_CUDA(cudaMemcpyAsync(full, mineBytes.data(), n * size,
                             cudaMemcpyHostToDevice, stream));

  CommRequest sum = comm.allReduceSum(data, n, type, dp);
  CommRequest scatter = comm.reduceScatterFlat(full, n, piece, type, dp);
  // `full` may be reused at once: the staging copy was taken before this.
  CHECK_CUDA(cudaMemsetAsync(full, 0xff, n * size, stream));
  // The gather reads the reduced piece: the compute stream waits for it.
  comm.wait(scatter);
  CommRequest gather = comm.allGatherFlat(piece, n, gathered, type, dp);
  comm.wait(sum);
  comm.waitAll();
  comm.wait(gather); // completed already: a no-op

  std::vector<char> gotSum(n * size), gotPiece(chunk * size),
      gotGathered(n * size);
  CHECK_CUDA(cudaMemcpyAsync(gotSum.data(), data, n * size,
                             cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaMemcpyAsync(gotPiece.data(), piece, chunk * size,
                             cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaMemcpyAsync(gotGathered.data(), gathered, n * size,
                             cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaFree(data));
  CHECK_CUDA(cudaFree(full));
  CHECK_CUDA(cudaFree(piece));
  CHECK_CUDA(cudaFree(gathered));

  std::vector<float> total(n, 0.0f);
  for (int r = 0; r < comm.worldSize(); ++r)
    for (int64_t k = 0; k < n; ++k)
      total[k] += value(r, k);
  std::vector<float> ownPiece(chunk, 0.0f);
  for (int64_t k = 0; k < chunk; ++k)
    if (i * chunk + k < n)
      ownPiece[k] = total[i * chunk + k];
  const char *name = type == CommType::F32 ? "f32" : "bf16";
  return report(rank, name, "allReduceSum", decode(gotSum, type), total) +
         report(rank, name, "reduceScatterFlat", decode(gotPiece, type),
                ownPiece) +
         report(rank, name, "allGatherFlat", decode(gotGathered, type), total);
}

} // namespace

int main(int argc, char **argv) {
  int64_t size = argc > 1 ? std::atoll(argv[1]) : 1;
  // The device first: Communicator::create makes its stream and NCCL
  // communicators on the current device.
  int count = 0;
  CHECK_CUDA(cudaGetDeviceCount(&count));
  const char *localRank = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  CHECK_CUDA(cudaSetDevice((localRank ? std::atoi(localRank) : 0) % count));
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  MeshAxisInfo axes[] = {{"dp", size}};
  std::unique_ptr<Communicator> comm;
  autopar::rt::Status status =
      Communicator::create(&argc, &argv, axes, 1, comm);
  if (!status.isOk()) {
    std::fprintf(stderr, "error: %s\n", status.message().c_str());
    return 1;
  }
  comm->setComputeStream(stream);
  int bad = checkCollectives(*comm, CommType::F32, stream) +
            checkCollectives(*comm, CommType::BF16, stream);
  std::printf("rank %d bytes: all-reduce %g reduce-scatter %g all-gather %g\n",
              comm->rank(), comm->bytes(autopar::rt::CollectiveKind::AllReduce),
              comm->bytes(autopar::rt::CollectiveKind::ReduceScatter),
              comm->bytes(autopar::rt::CollectiveKind::AllGather));

  double failures = bad;
  comm->allReduceSumDouble(&failures, 1, 1);
  comm.reset();
  CHECK_CUDA(cudaStreamDestroy(stream));
  return failures == 0 ? 0 : 1;
}
