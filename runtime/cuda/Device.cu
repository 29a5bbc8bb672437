//===- Device.cu - the CUDA target's Device -------------------------------===//
//
// runtime/Device.h on a GPU: the device of this process (GPU localRank %
// count), one non-blocking stream for all work, the cuBLASLt handle and
// workspace, memory from cudaMalloc, and the optimizer as CUDA kernels.
// Also cuda::fail and cuda::scratch (runtime/cuda/Context.h).
//
// The optimizer kernels call the element updates of
// runtime/optim/OptimizerMath.h with the scalars of adamwScalars /
// sgdScalars, so AdamW and SGD updates are bit-identical to the CPU
// target's given the same inputs. That needs IEEE division and square root
// (nvcc's defaults) and no contraction of a product and a sum into an FMA
// that the CPU code does not fuse: this file is compiled with -fmad=false.
// gradSquaredSum adds squares in double per fixed chunk of each gradient
// (a fixed tree in one block per chunk), then the chunks on the host in
// order: the result depends neither on the GPU nor on the run. Both run
// as one launch over every slice (multi-tensor kernels, as apex's and
// torch's fused optimizers): a table of the slices and their chunks is
// uploaded once per list of slices and reused every step.
//
//===----------------------------------------------------------------------===//

#include "runtime/Device.h"
#include "runtime/Float16.h"
#include "runtime/cuda/Context.h"
#include "runtime/cuda/CudnnAttention.h"
#include "runtime/optim/Optimizer.h"
#include "runtime/optim/OptimizerMath.h"

#include <algorithm>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

namespace autopar::rt {

//===----------------------------------------------------------------------===//
// Context.h: failures and scratch
//===----------------------------------------------------------------------===//

namespace cuda {

void fail(const DeviceContext *ctx, const char *file, int line,
          const char *call, const char *reason) {
  if (ctx)
    std::fprintf(stderr, "%s:%d: rank %d: %s failed: %s\n", file, line,
                 ctx->rank, call, reason);
  else
    std::fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, call, reason);
  std::fflush(stderr);
  std::exit(1);
}

void *scratch(DeviceContext &ctx, int64_t bytes) {
  if (bytes <= ctx.scratchBytes && ctx.scratch)
    return ctx.scratch;
  // Kernels issued before may still use the old buffer.
  AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaStreamSynchronize(ctx.stream));
  // Generously: at least 1 MiB, at least twice the old size, in MiB.
  constexpr int64_t kMiB = int64_t{1} << 20;
  int64_t size = std::max<int64_t>({bytes, 2 * ctx.scratchBytes, kMiB});
  size = (size + kMiB - 1) / kMiB * kMiB;
  if (ctx.scratch)
    AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaFree(ctx.scratch));
  ctx.scratch = nullptr;
  ctx.scratchBytes = 0;
  void *p = nullptr;
  AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaMalloc(&p, static_cast<size_t>(size)));
  ctx.scratch = p;
  ctx.scratchBytes = size;
  return p;
}

} // namespace cuda

//===----------------------------------------------------------------------===//
// Optimizer kernels
//===----------------------------------------------------------------------===//

namespace {

constexpr int kBlock = 256;
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
/// Elements per partial sum of gradSquaredSum (one block each).
constexpr int64_t kNormChunk = int64_t{1} << 16;
/// cuBLASLt workspace.
constexpr int64_t kGemmWorkspaceBytes = int64_t{32} << 20;

/// The sum of `v` over the block in a fixed tree (warp butterflies, then
/// the per-warp sums); every thread gets it.
__device__ double blockSum(double v, double *shared) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullMask, v, offset);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  double w = lane < static_cast<int>(blockDim.x / kWarp) ? shared[lane] : 0.0;
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    w += __shfl_xor_sync(kFullMask, w, offset);
  return __shfl_sync(kFullMask, w, 0);
}

/// Element i of a gradient held as float32 (g) or 16-bit of `kind` (g16,
/// when not null).
__device__ inline float gradAt(const float *g, const uint16_t *g16,
                               Float16Kind kind, int64_t i) {
  return g16 ? float16Value(kind, g16[i]) : g[i];
}

/// A parameter slice as the multi-tensor kernels read it (ParamSlice on
/// the device), with the index of its scalars among the launch's variants.
struct DeviceSlice {
  float *param;
  const float *grad;
  const uint16_t *gradLow;
  uint16_t *paramLow;
  float *state0;
  float *state1;
  int64_t numElements;
  int32_t variant;
  Float16Kind lowKind;
};

/// kNormChunk consecutive elements of one slice: the work of one block.
struct SliceChunk {
  int64_t slice;
  int64_t begin;
};

/// The scalars of every slice of one optimizer launch: AdamW's by decay,
/// SGD's by decay and momentum buffer (DeviceSlice::variant).
struct AdamWVariants {
  AdamWScalars v[2];
};
struct SgdVariants {
  SgdScalars v[4];
};

/// out[c] = the sum of g[i]^2 (in double) over chunk c: a block per chunk,
/// its threads adding the elements begin + t, begin + t + kBlock, ...,
/// then the block tree.
__global__ void __launch_bounds__(kBlock)
    squaredSumChunksKernel(const DeviceSlice *slices, const SliceChunk *chunks,
                           int64_t numChunks, double *out) {
  __shared__ double shared[kWarp];
  for (int64_t c = blockIdx.x; c < numChunks; c += gridDim.x) {
    const SliceChunk chunk = chunks[c];
    const DeviceSlice &s = slices[chunk.slice];
    const int64_t end = min(s.numElements, chunk.begin + kNormChunk);
    double sum = 0.0;
    for (int64_t i = chunk.begin + threadIdx.x; i < end; i += blockDim.x) {
      const double gi = gradAt(s.grad, s.gradLow, s.lowKind, i);
      sum += gi * gi;
    }
    sum = blockSum(sum, shared);
    if (threadIdx.x == 0)
      out[c] = sum;
  }
}

/// Every slice's AdamW (AdamWVariants) or SGD (SgdVariants) update in one
/// launch (a block per chunk).
template <typename Variants>
__global__ void __launch_bounds__(kBlock)
    updateKernel(Variants variants, const DeviceSlice *slices,
                 const SliceChunk *chunks, int64_t numChunks,
                 float gradScale) {
  for (int64_t c = blockIdx.x; c < numChunks; c += gridDim.x) {
    const SliceChunk chunk = chunks[c];
    const DeviceSlice &s = slices[chunk.slice];
    const auto &a = variants.v[s.variant];
    const int64_t end = min(s.numElements, chunk.begin + kNormChunk);
    for (int64_t i = chunk.begin + threadIdx.x; i < end; i += blockDim.x) {
      const float g =
          __fmul_rn(gradAt(s.grad, s.gradLow, s.lowKind, i), gradScale);
      if constexpr (std::is_same_v<Variants, AdamWVariants>)
        adamwElement(a, s.param[i], g, s.state0[i], s.state1[i]);
      else
        sgdElement(a, s.param[i], g, s.state0 ? s.state0 + i : nullptr);
      if (s.paramLow)
        s.paramLow[i] = float16Bits(s.lowKind, s.param[i]);
    }
  }
}

std::string errorLine(int rank, const char *call, cudaError_t err) {
  return "rank " + std::to_string(rank) + ": " + call +
         " failed: " + cudaGetErrorString(err);
}

} // namespace

//===----------------------------------------------------------------------===//
// Device
//===----------------------------------------------------------------------===//

void DeviceFree::operator()(char *p) const {
  // Freed at any time, also while the process ends: errors are ignored.
  if (p)
    static_cast<void>(cudaFree(p));
}

/// A step function recorded into a CUDA graph, with what it was recorded
/// with.
struct RecordedStep {
  int calls = 0;
  cudaGraphExec_t exec = nullptr;
  StepIO io{};
  /// ctx.scratch when recorded (it moves when a later eager call grows it).
  void *scratch = nullptr;
  std::vector<const void *> inputs;
  std::vector<void *> outputs;
};

/// A list of parameter slices on the device, for the multi-tensor kernels.
struct SliceTable {
  DeviceBuffer slices, chunks;
  int64_t numChunks = 0;
};

struct Device::Impl {
  DeviceContext ctx;
  std::string name;
  /// By (step function, accumulate).
  std::map<std::pair<StepFunction, bool>, RecordedStep> steps;
  /// By what the host's ParamSlice lists hold (the norm groups and all
  /// slices: the same few lists every step, uploaded once).
  std::map<std::vector<int64_t>, SliceTable> sliceTables;

  const SliceTable &sliceTable(Device &device,
                               const std::vector<ParamSlice> &slices);
};

/// The device copy of `slices` (and its chunks of kNormChunk elements),
/// made on first use: a slice's variant is decay + 2 * (state0 != null),
/// as AdamWVariants and SgdVariants index their scalars.
const SliceTable &
Device::Impl::sliceTable(Device &device,
                         const std::vector<ParamSlice> &slices) {
  std::vector<int64_t> key;
  for (const ParamSlice &s : slices)
    key.insert(key.end(),
               {reinterpret_cast<int64_t>(s.param),
                reinterpret_cast<int64_t>(s.grad),
                reinterpret_cast<int64_t>(s.gradLow),
                reinterpret_cast<int64_t>(s.paramLow),
                reinterpret_cast<int64_t>(s.state0),
                reinterpret_cast<int64_t>(s.state1), s.numElements, s.decay,
                static_cast<int64_t>(s.lowKind)});
  auto [it, added] = sliceTables.try_emplace(std::move(key));
  SliceTable &table = it->second;
  if (!added)
    return table;
  std::vector<DeviceSlice> hostSlices;
  std::vector<SliceChunk> hostChunks;
  for (const ParamSlice &s : slices) {
    const int64_t index = static_cast<int64_t>(hostSlices.size());
    hostSlices.push_back({s.param, s.grad, s.gradLow, s.paramLow, s.state0,
                          s.state1, std::max<int64_t>(s.numElements, 0),
                          static_cast<int32_t>(s.decay) +
                              (s.state0 ? 2 : 0),
                          s.lowKind});
    for (int64_t begin = 0; begin < s.numElements; begin += kNormChunk)
      hostChunks.push_back({index, begin});
  }
  table.numChunks = static_cast<int64_t>(hostChunks.size());
  auto upload = [&](DeviceBuffer &buffer, const void *data, int64_t bytes) {
    buffer = device.allocate(bytes);
    if (!buffer)
      cuda::fail(&ctx, __FILE__, __LINE__, "Device::allocate",
                 "out of memory for the optimizer's slice table");
    device.upload(buffer.get(), data, bytes);
  };
  upload(table.slices, hostSlices.data(),
         static_cast<int64_t>(hostSlices.size() * sizeof(DeviceSlice)));
  upload(table.chunks, hostChunks.data(),
         static_cast<int64_t>(hostChunks.size() * sizeof(SliceChunk)));
  return table;
}

Device::Device() : impl(std::make_unique<Impl>()) {}

Device::~Device() {
  DeviceContext &ctx = impl->ctx;
  // Best effort: a destructor does not end the process.
  if (ctx.stream)
    static_cast<void>(cudaStreamSynchronize(ctx.stream));
  for (auto &entry : impl->steps)
    if (entry.second.exec)
      static_cast<void>(cudaGraphExecDestroy(entry.second.exec));
  ctx.cudnn.reset();
  if (ctx.lt)
    static_cast<void>(cublasLtDestroy(ctx.lt));
  if (ctx.gemmWorkspace)
    static_cast<void>(cudaFree(ctx.gemmWorkspace));
  if (ctx.scratch)
    static_cast<void>(cudaFree(ctx.scratch));
  if (ctx.stream)
    static_cast<void>(cudaStreamDestroy(ctx.stream));
}

// Nothing to set up before main's other work: the GPU is opened by create().
void Device::prepareProcess(char **) {}

Status Device::create(int localRank, int rank, std::unique_ptr<Device> &out) {
  int count = 0;
  const cudaError_t countErr = cudaGetDeviceCount(&count);
  if (countErr != cudaSuccess || count <= 0) {
    // Leave no sticky "no device" error for later checks.
    static_cast<void>(cudaGetLastError());
    return Status::error("rank " + std::to_string(rank) + ": no CUDA device: " +
                         (countErr != cudaSuccess
                              ? cudaGetErrorString(countErr)
                              : "cudaGetDeviceCount found 0 devices"));
  }
  std::unique_ptr<Device> device(new Device());
  DeviceContext &ctx = device->impl->ctx;
  ctx.rank = rank;
  ctx.deviceId = (localRank % count + count) % count;
  cudaError_t err = cudaSetDevice(ctx.deviceId);
  if (err != cudaSuccess)
    return Status::error(errorLine(rank, "cudaSetDevice", err));
  err = cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking);
  if (err != cudaSuccess)
    return Status::error(errorLine(rank, "cudaStreamCreateWithFlags", err));
  const cublasStatus_t st = cublasLtCreate(&ctx.lt);
  if (st != CUBLAS_STATUS_SUCCESS)
    return Status::error(
        "rank " + std::to_string(rank) +
        ": cublasLtCreate failed: " + cublasLtGetStatusString(st));
  err = cudaMalloc(&ctx.gemmWorkspace, kGemmWorkspaceBytes);
  if (err != cudaSuccess)
    return Status::error(errorLine(rank, "cudaMalloc", err));
  ctx.gemmWorkspaceBytes = kGemmWorkspaceBytes;
  int numSMs = 0;
  err = cudaDeviceGetAttribute(&numSMs, cudaDevAttrMultiProcessorCount,
                               ctx.deviceId);
  if (err != cudaSuccess)
    return Status::error(errorLine(rank, "cudaDeviceGetAttribute", err));
  ctx.numSMs = std::max(numSMs, 1);
  cudaDeviceProp prop;
  err = cudaGetDeviceProperties(&prop, ctx.deviceId);
  if (err != cudaSuccess)
    return Status::error(errorLine(rank, "cudaGetDeviceProperties", err));
  device->impl->name = prop.name;
  out = std::move(device);
  return Status::ok();
}

const std::string &Device::name() const { return impl->name; }
Status Device::setAttentionBackend(AttentionBackend backend) {
  return cuda::setCudnnAttentionBackend(impl->ctx, backend);
}
std::string Device::describe() const {
  return impl->name + ", attention: " + cuda::describeAttention(impl->ctx);
}
std::string Device::performanceWarning() const { return ""; }

bool Device::hostMemory() const { return false; }

DeviceContext *Device::context() { return &impl->ctx; }

void *Device::queue() { return impl->ctx.stream; }

DeviceBuffer Device::allocate(int64_t bytes) {
  DeviceContext &ctx = impl->ctx;
  if (bytes < 0)
    return DeviceBuffer();
  // cudaMalloc aligns to 256 bytes; 0 bytes still get a distinct buffer.
  const size_t size = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  void *p = nullptr;
  const cudaError_t err = cudaMalloc(&p, size);
  if (err == cudaErrorMemoryAllocation) {
    static_cast<void>(cudaGetLastError()); // not sticky: clear it
    return DeviceBuffer();
  }
  AUTOPAR_CUDA_CHECK_CTX(&ctx, err);
  DeviceBuffer buffer(static_cast<char *>(p));
  AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaMemsetAsync(p, 0, size, ctx.stream));
  AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaStreamSynchronize(ctx.stream));
  return buffer;
}

void Device::upload(void *device, const void *host, int64_t bytes) {
  if (bytes <= 0)
    return;
  DeviceContext &ctx = impl->ctx;
  AUTOPAR_CUDA_CHECK_CTX(
      &ctx, cudaMemcpyAsync(device, host, static_cast<size_t>(bytes),
                            cudaMemcpyHostToDevice, ctx.stream));
  // The caller may reuse `host` on return, also when it is pinned.
  AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaStreamSynchronize(ctx.stream));
}

void Device::download(void *host, const void *device, int64_t bytes) {
  if (bytes <= 0)
    return;
  DeviceContext &ctx = impl->ctx;
  AUTOPAR_CUDA_CHECK_CTX(
      &ctx, cudaMemcpyAsync(host, device, static_cast<size_t>(bytes),
                            cudaMemcpyDeviceToHost, ctx.stream));
  AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaStreamSynchronize(ctx.stream));
}

void Device::copy(void *to, const void *from, int64_t bytes) {
  if (to == from || bytes <= 0)
    return;
  DeviceContext &ctx = impl->ctx;
  AUTOPAR_CUDA_CHECK_CTX(
      &ctx, cudaMemcpyAsync(to, from, static_cast<size_t>(bytes),
                            cudaMemcpyDeviceToDevice, ctx.stream));
}

void Device::zero(void *device, int64_t bytes) {
  if (bytes <= 0)
    return;
  DeviceContext &ctx = impl->ctx;
  AUTOPAR_CUDA_CHECK_CTX(
      &ctx, cudaMemsetAsync(device, 0, static_cast<size_t>(bytes), ctx.stream));
}

void Device::synchronize() {
  DeviceContext &ctx = impl->ctx;
  AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaStreamSynchronize(ctx.stream));
}

void Device::runStep(StepFunction fn, const StepIO &io, int numInputs,
                     int numOutputs) {
  DeviceContext &ctx = impl->ctx;
#ifdef AUTOPAR_PROFILE
  // Profile builds time each op after a stream synchronization, which a
  // graph capture does not allow: every step runs eagerly.
  static_cast<void>(numInputs);
  static_cast<void>(numOutputs);
  fn(io);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
  return;
#endif
  RecordedStep &step = impl->steps[{fn, io.accumulate}];
  // What the recorded launches captured: io's fields and the pointers in
  // io.inputs / io.outputs (generated code reads them on the host while it
  // issues its kernels).
  auto snapshot = [&](RecordedStep &s) {
    s.io = io;
    s.scratch = ctx.scratch;
    s.inputs.assign(io.inputs, io.inputs + numInputs);
    s.outputs.assign(io.outputs, io.outputs + numOutputs);
  };
  auto same = [&](const RecordedStep &s) {
    return s.scratch == ctx.scratch && s.io.params == io.params &&
           s.io.arena == io.arena &&
           s.io.gradScale == io.gradScale && s.io.comm == io.comm &&
           s.io.device == io.device &&
           s.inputs.size() == static_cast<size_t>(numInputs) &&
           s.outputs.size() == static_cast<size_t>(numOutputs) &&
           std::equal(s.inputs.begin(), s.inputs.end(), io.inputs) &&
           std::equal(s.outputs.begin(), s.outputs.end(), io.outputs);
  };
  if (step.exec && !same(step)) {
    AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaGraphExecDestroy(step.exec));
    step.exec = nullptr;
    step.calls = 0;
  }
  ++step.calls;
  if (step.calls == 1) {
    // Eager: scratch buffers grow (which synchronizes) outside any graph.
    fn(io);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
    snapshot(step);
    return;
  }
  if (!step.exec) {
    // Relaxed: host-side calls of the step (cuBLASLt heuristics, symbol
    // addresses) are allowed while its launches are recorded.
    cudaGraph_t graph = nullptr;
    AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaStreamBeginCapture(
                                     ctx.stream, cudaStreamCaptureModeRelaxed));
    fn(io);
    AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaStreamEndCapture(ctx.stream, &graph));
    AUTOPAR_CUDA_CHECK_CTX(&ctx,
                           cudaGraphInstantiate(&step.exec, graph, 0));
    AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaGraphDestroy(graph));
    snapshot(step);
  }
  AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaGraphLaunch(step.exec, ctx.stream));
}

/// Blocks for a grid-stride loop over `n` elements.
static unsigned elementGrid(const DeviceContext &ctx, int64_t n) {
  const int64_t needed = (n + kBlock - 1) / kBlock;
  const int64_t cap = static_cast<int64_t>(std::max(ctx.numSMs, 1)) * 32;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(needed, cap)));
}

double Device::gradSquaredSum(const std::vector<ParamSlice> &slices) {
  DeviceContext &ctx = impl->ctx;
  const SliceTable &table = impl->sliceTable(*this, slices);
  if (table.numChunks == 0)
    return 0.0;
  double *partial = static_cast<double *>(cuda::scratch(
      ctx, table.numChunks * static_cast<int64_t>(sizeof(double))));
  squaredSumChunksKernel<<<elementGrid(ctx, table.numChunks * kBlock), kBlock,
                           0, ctx.stream>>>(
      reinterpret_cast<const DeviceSlice *>(table.slices.get()),
      reinterpret_cast<const SliceChunk *>(table.chunks.get()),
      table.numChunks, partial);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
  std::vector<double> host(static_cast<size_t>(table.numChunks));
  download(host.data(), partial,
           table.numChunks * static_cast<int64_t>(sizeof(double)));
  // The chunks in slice order, as the CPU target adds its partials.
  double total = 0.0;
  for (double p : host)
    total += p;
  return total;
}

void Device::optimizerStep(const OptimizerConfig &config,
                           const std::vector<ParamSlice> &slices,
                           int64_t stepCount, double lr, float gradScale) {
  DeviceContext &ctx = impl->ctx;
  const SliceTable &table = impl->sliceTable(*this, slices);
  if (table.numChunks == 0)
    return;
  const unsigned grid = elementGrid(ctx, table.numChunks * kBlock);
  const auto *deviceSlices =
      reinterpret_cast<const DeviceSlice *>(table.slices.get());
  const auto *chunks = reinterpret_cast<const SliceChunk *>(table.chunks.get());
  if (config.kind == OptimizerKind::AdamW) {
    AdamWVariants variants;
    for (int v = 0; v < 2; ++v)
      variants.v[v] = adamwScalars(config, stepCount, lr, v == 1);
    updateKernel<<<grid, kBlock, 0, ctx.stream>>>(
        variants, deviceSlices, chunks, table.numChunks, gradScale);
  } else {
    SgdVariants variants;
    for (int v = 0; v < 4; ++v)
      variants.v[v] = sgdScalars(config, stepCount, lr, v % 2 == 1, v >= 2);
    updateKernel<<<grid, kBlock, 0, ctx.stream>>>(
        variants, deviceSlices, chunks, table.numChunks, gradScale);
  }
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace autopar::rt
