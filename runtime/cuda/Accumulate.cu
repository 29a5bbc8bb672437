//===- Accumulate.cu - gradient accumulation (CUDA) -----------------------===//
//
// cuda::accumulateInto: dst = (accumulate ? dst : 0) + scale * src on
// float, bfloat16 and half tensors, computed in float as the reference
// rounds it (a product, then a sum: no contraction into an FMA), the
// 16-bit results rounded once to nearest even.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/KernelsCommon.cuh"

#include <cstdint>

namespace autopar::rt::cuda {

namespace {

/// toFloat and fromFloat are the identity on float and the round to
/// nearest even of the 16-bit types.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    accumulateKernel(T *dst, const T *src, int64_t numElements, float scale,
                     bool accumulate) {
  for (int64_t i = threadIndex(); i < numElements; i += threadCount())
    dst[i] = fromFloat<T>(__fadd_rn(accumulate ? toFloat(dst[i]) : 0.0f,
                                    __fmul_rn(scale, toFloat(src[i]))));
}

template <typename T>
void accumulateT(DeviceContext &ctx, T *dst, const T *src, int64_t numElements,
                 float scale, bool accumulate) {
  if (numElements <= 0)
    return;
  accumulateKernel<<<gridFor(ctx, numElements), kBlock, 0, ctx.stream>>>(
      dst, src, numElements, scale, accumulate);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace

#define AUTOPAR_ACCUMULATE(T)                                                  \
  void accumulateInto(DeviceContext &ctx, T *dst, const T *src,                \
                      int64_t numElements, float scale, bool accumulate) {     \
    accumulateT(ctx, dst, src, numElements, scale, accumulate);                \
  }
AUTOPAR_CUDA_FOR_EACH_TYPE(AUTOPAR_ACCUMULATE)
#undef AUTOPAR_ACCUMULATE

} // namespace autopar::rt::cuda
