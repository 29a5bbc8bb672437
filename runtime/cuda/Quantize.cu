//===- Quantize.cu - NF4 and INT8 weights dequantized (CUDA) --------------===//
//
// cuda::dequantize: cpu::dequantize's values (runtime/support/Quantize.h),
// one thread per element, before the GEMM that reads the weight.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/KernelsCommon.cuh"
#include "runtime/support/Quantize.h"

#include <cstdint>

namespace autopar::rt::cuda {

namespace {

__global__ void __launch_bounds__(kBlock)
    dequantizeKernel(const int8_t *codes, const void *absmax,
                     const float *state2, float *out, int64_t n, int64_t cols,
                     int kind, int64_t block, int axis) {
  for (int64_t e = threadIndex(); e < n; e += threadCount())
    out[e] = dequantizeElement(codes, absmax, state2, kind, block, cols, axis,
                               e);
}

} // namespace

void dequantize(DeviceContext &ctx, const int8_t *codes, const void *absmax,
                const float *state2, float *out, int64_t rows, int64_t cols,
                int kind, int64_t block, int axis) {
  const int64_t n = rows * cols;
  if (n <= 0)
    return;
  dequantizeKernel<<<gridFor(ctx, n), kBlock, 0, ctx.stream>>>(
      codes, absmax, state2, out, n, cols, kind, block, axis);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace autopar::rt::cuda
