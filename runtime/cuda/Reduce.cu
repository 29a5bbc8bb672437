//===- Reduce.cu - sum, mean and max reductions (CUDA) --------------------===//
//
// cuda::reduce as cpu::reduce on float, bfloat16 and half tensors: each
// output accumulated in double in the reference's order, NaN winning a
// max, rounded once. [rows, cols] reduced over rows takes a thread per
// column, in row segments whose partials a second kernel combines in
// order when there are few columns; over cols a thread or a block per
// row; any other pattern a thread per output.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/KernelsCommon.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace autopar::rt::cuda {

namespace {

/// The max of cpu::reduce: NaN wins.
struct MaxNaNOp {
  __device__ double operator()(double a, double b) const {
    if (isnan(a))
      return a;
    return isnan(b) || b > a ? b : a;
  }
};

/// One more element `v` into the accumulator, as cpu::reduce.
__device__ inline double combine(bool isMax, double acc, float v) {
  if (!isMax)
    return acc + v;
  return isnan(v) || v > acc ? static_cast<double>(v) : acc;
}
/// Two accumulators (partials in order).
__device__ inline double combinePartial(bool isMax, double acc, double p) {
  return isMax ? MaxNaNOp()(acc, p) : acc + p;
}
__device__ inline double reduceInit(bool isMax) {
  return isMax ? -static_cast<double>(INFINITY) : 0.0;
}
__device__ inline float finish(bool isMean, double acc, int64_t n) {
  return static_cast<float>(isMean ? acc / static_cast<double>(n) : acc);
}

/// [rows, cols] reduced over rows, in segments of `segRows` rows: the
/// thread of (segment s, column j) combines its rows in order. With one
/// segment it writes out[j] (finished); otherwise partial[s * cols + j].
template <typename T>
__global__ void __launch_bounds__(kBlock)
    reduceColumnsKernel(const T *in, int64_t rows, int64_t cols,
                        int64_t numSegs, int64_t segRows, bool isMax,
                        bool isMean, T *out, double *partial) {
  const int64_t total = numSegs * cols;
  for (int64_t t = threadIndex(); t < total; t += threadCount()) {
    const int64_t s = t / cols, j = t % cols;
    const int64_t r0 = s * segRows, r1 = min(rows, r0 + segRows);
    double acc = reduceInit(isMax);
    for (int64_t r = r0; r < r1; ++r)
      acc = combine(isMax, acc, toFloat(in[r * cols + j]));
    if (partial)
      partial[t] = acc;
    else
      out[j] = fromFloat<T>(finish(isMean, acc, rows));
  }
}

/// out[j] = the partials of reduceColumnsKernel combined in segment order.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    reduceColumnPartialsKernel(const double *partial, int64_t numSegs,
                               int64_t rows, int64_t cols, bool isMax,
                               bool isMean, T *out) {
  for (int64_t j = threadIndex(); j < cols; j += threadCount()) {
    double acc = reduceInit(isMax);
    for (int64_t s = 0; s < numSegs; ++s)
      acc = combinePartial(isMax, acc, partial[s * cols + j]);
    out[j] = fromFloat<T>(finish(isMean, acc, rows));
  }
}

/// [rows, cols] reduced over cols, one thread per row (short rows).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    reduceRowsThreadKernel(const T *in, int64_t rows, int64_t cols,
                           bool isMax, bool isMean, T *out) {
  for (int64_t r = threadIndex(); r < rows; r += threadCount()) {
    double acc = reduceInit(isMax);
    for (int64_t j = 0; j < cols; ++j)
      acc = combine(isMax, acc, toFloat(in[r * cols + j]));
    out[r] = fromFloat<T>(finish(isMean, acc, cols));
  }
}

/// [rows, cols] reduced over cols, one block per row.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    reduceRowsBlockKernel(const T *in, int64_t rows, int64_t cols,
                          bool isMax, bool isMean, T *out) {
  __shared__ double shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double acc = reduceInit(isMax);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      acc = combine(isMax, acc, toFloat(in[r * cols + j]));
    acc = isMax ? blockReduce(acc, MaxNaNOp(), reduceInit(true), shared)
                : blockReduce(acc, SumOp(), 0.0, shared);
    if (threadIdx.x == 0)
      out[r] = fromFloat<T>(finish(isMean, acc, cols));
  }
}

/// Any pattern: one thread per output, combining its elements in the
/// row-major order of the reduced dims (the reference's order).
struct ReducePattern {
  int numKept = 0, numReduced = 0;
  int64_t keptShape[cpu::kMaxRank] = {}, keptStrides[cpu::kMaxRank] = {};
  int64_t redShape[cpu::kMaxRank] = {}, redStrides[cpu::kMaxRank] = {};
  int64_t outCount = 1, redCount = 1;
};

template <typename T>
__global__ void __launch_bounds__(kBlock)
    reduceGeneralKernel(const T *in, ReducePattern p, bool isMax,
                        bool isMean, T *out) {
  for (int64_t o = threadIndex(); o < p.outCount; o += threadCount()) {
    int64_t base = 0, rem = o;
    for (int d = p.numKept - 1; d >= 0; --d) {
      base += (rem % p.keptShape[d]) * p.keptStrides[d];
      rem /= p.keptShape[d];
    }
    double acc = reduceInit(isMax);
    for (int64_t r = 0; r < p.redCount; ++r) {
      int64_t offset = base, rr = r;
      for (int d = p.numReduced - 1; d >= 0; --d) {
        offset += (rr % p.redShape[d]) * p.redStrides[d];
        rr /= p.redShape[d];
      }
      acc = combine(isMax, acc, toFloat(in[offset]));
    }
    out[o] = fromFloat<T>(finish(isMean, acc, p.redCount));
  }
}

/// Column reductions with fewer columns than this are split into row
/// segments (partials summed in order) to keep the device busy.
constexpr int64_t kColumnThreads = 65536;
/// Rows per segment at least.
constexpr int64_t kMinSegmentRows = 64;
/// Row reductions of at most this many elements per row use one thread
/// per row.
constexpr int64_t kThreadRowMax = 32;

template <typename T>
void reduceT(DeviceContext &ctx, ReduceKind kind, const T *in, T *out,
             int rank, const int64_t *shape, const bool *reduced) {
  if (rank < 0 || rank > cpu::kMaxRank)
    fail(&ctx, __FILE__, __LINE__, "cuda::reduce", "rank out of range");
  // Alternating kept / reduced groups of dims, as cpu::reduce.
  const cpu::ReduceGroups g = cpu::reduceGroups(rank, shape, reduced);
  if (g.count == 0) {
    AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaMemcpyAsync(out, in, sizeof(T),
                                                 cudaMemcpyDeviceToDevice,
                                                 ctx.stream));
    return;
  }
  const bool isMax = kind == ReduceKind::Max;
  const bool isMean = kind == ReduceKind::Mean;
  if (g.count <= 2 && g.reduced[0] && (g.count == 1 || !g.reduced[1])) {
    // [rows reduced, cols kept]: column reductions.
    const int64_t rows = g.extents[0], cols = g.count == 2 ? g.extents[1] : 1;
    if (cols == 0)
      return;
    int64_t numSegs = 1, segRows = rows;
    if (cols < kColumnThreads && rows > kMinSegmentRows) {
      numSegs = std::min(ceilDiv(kColumnThreads, cols),
                         ceilDiv(rows, kMinSegmentRows));
      segRows = ceilDiv(rows, numSegs);
      numSegs = ceilDiv(rows, segRows);
    }
    double *partial = nullptr;
    if (numSegs > 1)
      partial = static_cast<double *>(
          scratch(ctx, numSegs * cols * static_cast<int64_t>(sizeof(double))));
    reduceColumnsKernel<<<gridFor(ctx, numSegs * cols), kBlock, 0,
                          ctx.stream>>>(in, rows, cols, numSegs, segRows, isMax,
                                        isMean, out, partial);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
    if (partial) {
      reduceColumnPartialsKernel<<<gridFor(ctx, cols), kBlock, 0, ctx.stream>>>(
          partial, numSegs, rows, cols, isMax, isMean, out);
      AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
    }
    return;
  }
  if (g.count == 2 && !g.reduced[0] && g.reduced[1]) {
    // [rows kept, cols reduced]: row reductions.
    const int64_t rows = g.extents[0], cols = g.extents[1];
    if (rows == 0)
      return;
    if (cols <= kThreadRowMax)
      reduceRowsThreadKernel<<<gridFor(ctx, rows), kBlock, 0, ctx.stream>>>(
          in, rows, cols, isMax, isMean, out);
    else
      reduceRowsBlockKernel<<<rowGrid(ctx, rows), kBlock, 0, ctx.stream>>>(
          in, rows, cols, isMax, isMean, out);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
    return;
  }
  // General case.
  int64_t strides[cpu::kMaxRank];
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
  ReducePattern p;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] == 1)
      continue;
    if (reduced[d]) {
      p.redShape[p.numReduced] = shape[d];
      p.redStrides[p.numReduced++] = strides[d];
      p.redCount *= shape[d];
    } else {
      p.keptShape[p.numKept] = shape[d];
      p.keptStrides[p.numKept++] = strides[d];
      p.outCount *= shape[d];
    }
  }
  if (p.outCount == 0)
    return;
  reduceGeneralKernel<<<gridFor(ctx, p.outCount), kBlock, 0, ctx.stream>>>(
      in, p, isMax, isMean, out);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace

#define AUTOPAR_REDUCE(T)                                                      \
  void reduce(DeviceContext &ctx, ReduceKind kind, const T *in, T *out,        \
              int rank, const int64_t *shape, const bool *reduced) {           \
    reduceT(ctx, kind, in, out, rank, shape, reduced);                         \
  }
AUTOPAR_CUDA_FOR_EACH_TYPE(AUTOPAR_REDUCE)
#undef AUTOPAR_REDUCE

} // namespace autopar::rt::cuda
