//===- LayerNorm.cu - layer normalization (CUDA) --------------------------===//
//
// cuda::layerNormForward and cuda::layerNormBackward on float, bfloat16
// and half tensors: one block per row, the row's mean and variance in
// double as cpu::rowStatistics, each result rounded once. The parameter
// gradients (dscale, dbias) go through per-block column partials in
// cuda::scratch, for a number of blocks that depends on the shape only,
// which a second kernel adds in a fixed order. Rows of up to 2048 columns
// are held in registers (layerNormForwardRowKernel,
// layerNormBackwardRowKernel): the same sums in the same order, each
// element read once.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/KernelsCommon.cuh"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace autopar::rt::cuda {

namespace {

/// cpu::rowStatistics; every thread of the block gets them.
template <typename T>
__device__ void rowStatistics(const T *xr, int64_t cols, double epsilon,
                              double *shared, double &mean, double &rstd) {
  double sum = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    sum += toFloat(xr[j]);
  sum = blockReduce(sum, SumOp(), 0.0, shared);
  const double m = sum / static_cast<double>(cols);
  double sq = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const double dv = toFloat(xr[j]) - m;
    sq += dv * dv;
  }
  sq = blockReduce(sq, SumOp(), 0.0, shared);
  mean = m;
  rstd = 1.0 / sqrt(sq / static_cast<double>(cols) + epsilon);
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    layerNormForwardKernel(const T *x, const T *scale, const T *bias, T *y,
                           int64_t rows, int64_t cols, double epsilon) {
  __shared__ double shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    double meanD, rstdD;
    rowStatistics(xr, cols, epsilon, shared, meanD, rstdD);
    const float m = static_cast<float>(meanD);
    const float rstd = static_cast<float>(rstdD);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float v = (toFloat(xr[j]) - m) * rstd * toFloat(scale[j]);
      yr[j] = fromFloat<T>(bias ? v + toFloat(bias[j]) : v);
    }
  }
}

/// dx of each row; block b handles the contiguous rows
/// [rows*b/G, rows*(b+1)/G) and, when `partial` is set, writes its sums
/// of dy*xhat and dy per column to partial[b][0][:] and partial[b][1][:]
/// (each thread owns its columns: no races).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    layerNormBackwardKernel(const T *x, const T *scale, const T *dy, T *dx,
                            double *partial, int64_t rows, int64_t cols,
                            double epsilon) {
  __shared__ double shared[kWarp];
  const int64_t numBlocks = gridDim.x;
  const int64_t r0 = rows * blockIdx.x / numBlocks;
  const int64_t r1 = rows * (blockIdx.x + 1) / numBlocks;
  double *ps = partial ? partial + 2 * cols * blockIdx.x : nullptr;
  double *pb = partial ? ps + cols : nullptr;
  if (partial) {
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      ps[j] = 0.0;
      pb[j] = 0.0;
    }
  }
  for (int64_t r = r0; r < r1; ++r) {
    const T *xr = x + r * cols, *gr = dy + r * cols;
    T *dxr = dx + r * cols;
    double mean, rstd;
    rowStatistics(xr, cols, epsilon, shared, mean, rstd);
    double sumGh = 0, sumGhXhat = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double xhat = (toFloat(xr[j]) - mean) * rstd;
      const double g = toFloat(gr[j]);
      const double gh = g * toFloat(scale[j]);
      sumGh += gh;
      sumGhXhat += gh * xhat;
      if (partial) {
        ps[j] += g * xhat;
        pb[j] += g;
      }
    }
    sumGh = blockReduce(sumGh, SumOp(), 0.0, shared);
    sumGhXhat = blockReduce(sumGhXhat, SumOp(), 0.0, shared);
    const double n = static_cast<double>(cols);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double xhat = (toFloat(xr[j]) - mean) * rstd;
      const double gh =
          static_cast<double>(toFloat(gr[j])) * toFloat(scale[j]);
      dxr[j] = fromFloat<T>(
          static_cast<float>(rstd / n * (n * gh - sumGh - xhat * sumGhXhat)));
    }
  }
}

/// Rows of at most kBlock * kMaxRowWords columns run the kernels below
/// instead: each thread holds its K = ceil(cols / kBlock) columns of a row
/// in registers (x, dy and the scale read once; the parameter gradients'
/// partials kept in registers across the block's rows, written once).
/// They add in the same order as the kernels above (a thread's columns j,
/// j + kBlock, ..., the same block trees), so their results are bitwise
/// the same, with each element read once instead of three (forward) or six
/// (backward) times and no per-row read-modify-write of the partials.
constexpr int kMaxRowWords = 8;

/// rowStatistics of a row held in registers: thread t's v[k] is column
/// t + k * kBlock (the same sums in the same order).
template <int K>
__device__ void heldRowStatistics(const float (&v)[K], int64_t cols,
                                  double epsilon, double *shared,
                                  double &mean, double &rstd) {
  double sum = 0;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (threadIdx.x + int64_t{k} * kBlock < cols)
      sum += v[k];
  sum = blockReduce(sum, SumOp(), 0.0, shared);
  const double m = sum / static_cast<double>(cols);
  double sq = 0;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (threadIdx.x + int64_t{k} * kBlock < cols) {
      const double dv = v[k] - m;
      sq += dv * dv;
    }
  sq = blockReduce(sq, SumOp(), 0.0, shared);
  mean = m;
  rstd = 1.0 / sqrt(sq / static_cast<double>(cols) + epsilon);
}

template <typename T, int K>
__global__ void __launch_bounds__(kBlock)
    layerNormForwardRowKernel(const T *x, const T *scale, const T *bias, T *y,
                              int64_t rows, int64_t cols, double epsilon) {
  __shared__ double shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    float v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t j = threadIdx.x + int64_t{k} * kBlock;
      v[k] = j < cols ? toFloat(xr[j]) : 0.0f;
    }
    double meanD, rstdD;
    heldRowStatistics(v, cols, epsilon, shared, meanD, rstdD);
    const float m = static_cast<float>(meanD);
    const float rstd = static_cast<float>(rstdD);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t j = threadIdx.x + int64_t{k} * kBlock;
      if (j < cols) {
        const float o = (v[k] - m) * rstd * toFloat(scale[j]);
        yr[j] = fromFloat<T>(bias ? o + toFloat(bias[j]) : o);
      }
    }
  }
}

template <typename T, int K>
__global__ void __launch_bounds__(kBlock)
    layerNormBackwardRowKernel(const T *x, const T *scale, const T *dy, T *dx,
                               double *partial, int64_t rows, int64_t cols,
                               double epsilon) {
  __shared__ double shared[kWarp];
  const int64_t numBlocks = gridDim.x;
  const int64_t r0 = rows * blockIdx.x / numBlocks;
  const int64_t r1 = rows * (blockIdx.x + 1) / numBlocks;
  float sc[K];
  double ps[K], pb[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t j = threadIdx.x + int64_t{k} * kBlock;
    sc[k] = j < cols ? toFloat(scale[j]) : 0.0f;
    ps[k] = 0.0;
    pb[k] = 0.0;
  }
  const double n = static_cast<double>(cols);
  for (int64_t r = r0; r < r1; ++r) {
    const T *xr = x + r * cols, *gr = dy + r * cols;
    T *dxr = dx + r * cols;
    float xv[K], gv[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t j = threadIdx.x + int64_t{k} * kBlock;
      xv[k] = j < cols ? toFloat(xr[j]) : 0.0f;
      gv[k] = j < cols ? toFloat(gr[j]) : 0.0f;
    }
    double mean, rstd;
    heldRowStatistics(xv, cols, epsilon, shared, mean, rstd);
    double sumGh = 0, sumGhXhat = 0;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t j = threadIdx.x + int64_t{k} * kBlock;
      if (j < cols) {
        const double xhat = (xv[k] - mean) * rstd;
        const double g = gv[k];
        const double gh = g * sc[k];
        sumGh += gh;
        sumGhXhat += gh * xhat;
        ps[k] += g * xhat;
        pb[k] += g;
      }
    }
    sumGh = blockReduce(sumGh, SumOp(), 0.0, shared);
    sumGhXhat = blockReduce(sumGhXhat, SumOp(), 0.0, shared);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t j = threadIdx.x + int64_t{k} * kBlock;
      if (j < cols) {
        const double xhat = (xv[k] - mean) * rstd;
        const double gh = static_cast<double>(gv[k]) * sc[k];
        dxr[j] = fromFloat<T>(static_cast<float>(
            rstd / n * (n * gh - sumGh - xhat * sumGhXhat)));
      }
    }
  }
  if (!partial)
    return;
  double *pS = partial + 2 * cols * blockIdx.x, *pB = pS + cols;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t j = threadIdx.x + int64_t{k} * kBlock;
    if (j < cols) {
      pS[j] = ps[k];
      pB[j] = pb[k];
    }
  }
}

/// f(std::integral_constant<int, K>()) for K = ceil(cols / kBlock) when
/// the row kernels take `cols` (K <= kMaxRowWords); false otherwise.
template <int K = 1, typename F> bool withRowWords(int64_t cols, F &&f) {
  if constexpr (K > kMaxRowWords) {
    return false;
  } else {
    if (ceilDiv(cols, kBlock) != K)
      return withRowWords<K + 1>(cols, f);
    f(std::integral_constant<int, K>());
    return true;
  }
}

/// dscale[j] and dbias[j]: the partials of layerNormBackwardKernel added
/// in a fixed order. A block of kFinalBlock threads takes 32 adjacent
/// columns (each warp reads 32 consecutive doubles of a partial row): warp
/// w adds partials w, w + W, w + 2W, ... (W warps), then the block adds
/// the warps' sums in warp order.
template <typename T>
__global__ void __launch_bounds__(kFinalBlock)
    layerNormParamGradKernel(const double *partial, int64_t numPartials,
                             int64_t cols, T *dscale, T *dbias) {
  constexpr int kWarps = kFinalBlock / kWarp;
  __shared__ double sums[2][kWarps][kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int64_t j = blockIdx.x * int64_t{kWarp} + lane;
  double s = 0, b = 0;
  if (j < cols)
    for (int64_t p = warp; p < numPartials; p += kWarps) {
      s += partial[2 * cols * p + j];
      b += partial[2 * cols * p + cols + j];
    }
  sums[0][warp][lane] = s;
  sums[1][warp][lane] = b;
  __syncthreads();
  if (warp != 0 || j >= cols)
    return;
  s = b = 0;
  for (int w = 0; w < kWarps; ++w) {
    s += sums[0][w][lane];
    b += sums[1][w][lane];
  }
  if (dscale)
    dscale[j] = fromFloat<T>(static_cast<float>(s));
  if (dbias)
    dbias[j] = fromFloat<T>(static_cast<float>(b));
}

/// Blocks of layerNormBackwardKernel: a function of the shape only (not
/// of the device's SM count), so the sums do not depend on the GPU; at
/// most 1024 (a full wave of 256-thread blocks on 128 SMs), fewer for wide
/// rows so that the partials stay within 16 MiB.
int64_t layerNormBackwardBlocks(int64_t rows, int64_t cols) {
  const int64_t cap = std::max<int64_t>(
      1,
      (int64_t{16} << 20) / (2 * cols * static_cast<int64_t>(sizeof(double))));
  return std::max<int64_t>(1, std::min({rows, int64_t{1024}, cap}));
}

template <typename T>
void layerNormForwardT(DeviceContext &ctx, const T *x, const T *scale,
                       const T *bias, T *y, int64_t rows, int64_t cols,
                       double epsilon) {
  if (rows <= 0 || cols <= 0)
    return;
  const bool rowKernel = withRowWords(cols, [&](auto words) {
    layerNormForwardRowKernel<T, decltype(words)::value>
        <<<rowGrid(ctx, rows), kBlock, 0, ctx.stream>>>(x, scale, bias, y,
                                                        rows, cols, epsilon);
  });
  if (!rowKernel)
    layerNormForwardKernel<<<rowGrid(ctx, rows), kBlock, 0, ctx.stream>>>(
        x, scale, bias, y, rows, cols, epsilon);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

template <typename T>
void layerNormBackwardT(DeviceContext &ctx, const T *x, const T *scale,
                        const T *dy, T *dx, T *dscale, T *dbias, int64_t rows,
                        int64_t cols, double epsilon) {
  if (cols <= 0)
    return;
  const bool paramGrads = dscale || dbias;
  const int64_t numBlocks = layerNormBackwardBlocks(rows, cols);
  double *partial = nullptr;
  if (paramGrads)
    partial = static_cast<double *>(scratch(
        ctx, numBlocks * 2 * cols * static_cast<int64_t>(sizeof(double))));
  const int64_t numRows = std::max<int64_t>(rows, 0);
  const bool rowKernel = withRowWords(cols, [&](auto words) {
    layerNormBackwardRowKernel<T, decltype(words)::value>
        <<<static_cast<unsigned>(numBlocks), kBlock, 0, ctx.stream>>>(
            x, scale, dy, dx, partial, numRows, cols, epsilon);
  });
  if (!rowKernel)
    layerNormBackwardKernel<<<static_cast<unsigned>(numBlocks), kBlock, 0,
                              ctx.stream>>>(x, scale, dy, dx, partial, numRows,
                                            cols, epsilon);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
  if (!paramGrads)
    return;
  layerNormParamGradKernel<<<static_cast<unsigned>((cols + kWarp - 1) /
                                                    kWarp),
                             kFinalBlock, 0, ctx.stream>>>(
      partial, numBlocks, cols, dscale, dbias);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace

#define AUTOPAR_LAYER_NORM(T)                                                  \
  void layerNormForward(DeviceContext &ctx, const T *x, const T *scale,        \
                        const T *bias, T *y, int64_t rows, int64_t cols,       \
                        double epsilon) {                                      \
    layerNormForwardT(ctx, x, scale, bias, y, rows, cols, epsilon);            \
  }                                                                            \
  void layerNormBackward(DeviceContext &ctx, const T *x, const T *scale,       \
                         const T *dy, T *dx, T *dscale, T *dbias,              \
                         int64_t rows, int64_t cols, double epsilon) {         \
    layerNormBackwardT(ctx, x, scale, dy, dx, dscale, dbias, rows, cols,       \
                       epsilon);                                               \
  }
AUTOPAR_CUDA_FOR_EACH_TYPE(AUTOPAR_LAYER_NORM)
#undef AUTOPAR_LAYER_NORM

} // namespace autopar::rt::cuda
