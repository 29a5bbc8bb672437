//===- Softmax.cu - softmax and its gradient (CUDA) -----------------------===//
//
// cuda::softmaxForward and cuda::softmaxBackward along one axis of
// [outer, n, inner] float, bfloat16 or half tensors, computed in f32 and
// rounded once per result: contiguous rows (inner == 1) take one block per
// row, other axes one thread per (outer, inner) column; the strided
// denominators and the backward's dot products sum in double.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/KernelsCommon.cuh"

#include <cmath>
#include <cstdint>

namespace autopar::rt::cuda {

namespace {

/// Softmax of contiguous rows of n: one block per row. T: float, or a
/// 16-bit type read as float and rounded once on the write (Megatron's
/// fused softmax: 16-bit scores in and probabilities out, f32 inside).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    softmaxRowsKernel(const T *x, T *y, int64_t rows, int64_t n) {
  __shared__ float shared[kWarp];
  const float kNegInf = -INFINITY;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * n;
    T *yr = y + r * n;
    float max = kNegInf;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      max = fmaxf(max, toFloat(xr[j]));
    max = blockReduce(max, MaxOp(), kNegInf, shared);
    float sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      sum += expf(toFloat(xr[j]) - max);
    sum = blockReduce(sum, SumOp(), 0.0f, shared);
    const float inv = 1.0f / sum;
    // Each thread reads xr[j] before writing yr[j]: y may alias x.
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      yr[j] = fromFloat<T>(expf(toFloat(xr[j]) - max) * inv);
  }
}

/// Softmax along an axis with `inner` > 1: one thread per (outer, inner)
/// column, consecutive threads on consecutive addresses.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    softmaxStridedKernel(const T *x, T *y, int64_t outer, int64_t n,
                         int64_t inner) {
  const float kNegInf = -INFINITY;
  const int64_t columns = outer * inner;
  for (int64_t t = threadIndex(); t < columns; t += threadCount()) {
    const int64_t o = t / inner, i = t % inner;
    const T *xr = x + o * n * inner + i;
    T *yr = y + o * n * inner + i;
    float max = kNegInf;
    for (int64_t j = 0; j < n; ++j)
      max = fmaxf(max, toFloat(xr[j * inner]));
    double sum = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += expf(toFloat(xr[j * inner]) - max);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < n; ++j)
      yr[j * inner] = fromFloat<T>(expf(toFloat(xr[j * inner]) - max) * inv);
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    softmaxBackwardRowsKernel(const T *y, const T *dy, T *dx, int64_t rows,
                              int64_t n) {
  __shared__ double shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *yr = y + r * n, *gr = dy + r * n;
    T *dxr = dx + r * n;
    double dot = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      dot += static_cast<double>(toFloat(yr[j])) * toFloat(gr[j]);
    const float d = static_cast<float>(blockReduce(dot, SumOp(), 0.0, shared));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      dxr[j] = fromFloat<T>(toFloat(yr[j]) * (toFloat(gr[j]) - d));
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    softmaxBackwardStridedKernel(const T *y, const T *dy, T *dx, int64_t outer,
                                 int64_t n, int64_t inner) {
  const int64_t columns = outer * inner;
  for (int64_t t = threadIndex(); t < columns; t += threadCount()) {
    const int64_t o = t / inner, i = t % inner;
    const int64_t base = o * n * inner + i;
    double dot = 0;
    for (int64_t j = 0; j < n; ++j)
      dot += static_cast<double>(toFloat(y[base + j * inner])) *
             toFloat(dy[base + j * inner]);
    const float d = static_cast<float>(dot);
    for (int64_t j = 0; j < n; ++j)
      dx[base + j * inner] = fromFloat<T>(toFloat(y[base + j * inner]) *
                                          (toFloat(dy[base + j * inner]) - d));
  }
}

template <typename T>
void softmaxForwardT(DeviceContext &ctx, const T *x, T *y, int64_t outer,
                     int64_t n, int64_t inner) {
  if (outer <= 0 || n <= 0 || inner <= 0)
    return;
  if (inner == 1) {
    softmaxRowsKernel<<<rowGrid(ctx, outer), kBlock, 0, ctx.stream>>>(x, y,
                                                                      outer, n);
  } else {
    softmaxStridedKernel<<<gridFor(ctx, outer * inner), kBlock, 0,
                           ctx.stream>>>(x, y, outer, n, inner);
  }
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

template <typename T>
void softmaxBackwardT(DeviceContext &ctx, const T *y, const T *dy, T *dx,
                      int64_t outer, int64_t n, int64_t inner) {
  if (outer <= 0 || n <= 0 || inner <= 0)
    return;
  if (inner == 1) {
    softmaxBackwardRowsKernel<<<rowGrid(ctx, outer), kBlock, 0, ctx.stream>>>(
        y, dy, dx, outer, n);
  } else {
    softmaxBackwardStridedKernel<<<gridFor(ctx, outer * inner), kBlock, 0,
                                   ctx.stream>>>(y, dy, dx, outer, n, inner);
  }
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace

#define AUTOPAR_SOFTMAX(T)                                                     \
  void softmaxForward(DeviceContext &ctx, const T *x, T *y, int64_t outer,     \
                      int64_t n, int64_t inner) {                              \
    softmaxForwardT(ctx, x, y, outer, n, inner);                               \
  }                                                                            \
  void softmaxBackward(DeviceContext &ctx, const T *y, const T *dy, T *dx,     \
                       int64_t outer, int64_t n, int64_t inner) {              \
    softmaxBackwardT(ctx, y, dy, dx, outer, n, inner);                         \
  }
AUTOPAR_CUDA_FOR_EACH_TYPE(AUTOPAR_SOFTMAX)
#undef AUTOPAR_SOFTMAX

} // namespace autopar::rt::cuda
