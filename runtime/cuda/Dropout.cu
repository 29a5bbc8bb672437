//===- Dropout.cu - dropout with counter-based masks (CUDA) ---------------===//
//
// cuda::dropout: cpu::dropout's masks (runtime/support/Philox.h) on float,
// bfloat16 and half tensors, the kept elements scaled in float (a product,
// rounded once to the 16-bit types).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/KernelsCommon.cuh"
#include "runtime/support/Philox.h"

#include <cstdint>

namespace autopar::rt::cuda {

namespace {

/// One thread per element: its local index is decomposed over the block's
/// shape into its input offset and its logical element.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    dropoutKernel(const T *x, T *y, DropoutBlock block, const RandomKey *key,
                  DropoutSite site, int64_t numElements) {
  const RandomKey k = *key;
  int64_t logicalStrides[DropoutBlock::kMaxRank];
  int64_t stride = 1, first = 0;
  for (int d = block.rank - 1; d >= 0; --d) {
    logicalStrides[d] = stride;
    stride *= block.logicalShape[d];
    if (block.offsets[d])
      first += *block.offsets[d] * logicalStrides[d];
  }
  for (int64_t i = threadIndex(); i < numElements; i += threadCount()) {
    int64_t rest = i, element = first, at = 0;
    for (int d = block.rank - 1; d >= 0; --d) {
      const int64_t index = rest % block.shape[d];
      element += index * logicalStrides[d];
      at += index * block.strides[d];
      rest /= block.shape[d];
    }
    y[i] = fromFloat<T>(dropoutKeeps(k, site, static_cast<uint64_t>(element))
                            ? __fmul_rn(toFloat(x[at]), site.scale)
                            : 0.0f);
  }
}

template <typename T>
void dropoutT(DeviceContext &ctx, const T *x, T *y, const DropoutBlock &block,
              const RandomKey *key, double ratio, int64_t siteNumber) {
  int64_t numElements = 1, logicalElements = 1;
  for (int d = 0; d < block.rank; ++d) {
    numElements *= block.shape[d];
    logicalElements *= block.logicalShape[d];
  }
  if (numElements <= 0)
    return;
  const DropoutSite site =
      dropoutSite(ratio, static_cast<uint32_t>(siteNumber),
                  static_cast<uint64_t>(logicalElements));
  dropoutKernel<<<gridFor(ctx, numElements), kBlock, 0, ctx.stream>>>(
      x, y, block, key, site, numElements);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace

#define AUTOPAR_DROPOUT(T)                                                     \
  void dropout(DeviceContext &ctx, const T *x, T *y,                           \
               const DropoutBlock &block, const RandomKey *key, double ratio,  \
               int64_t site) {                                                 \
    dropoutT(ctx, x, y, block, key, ratio, site);                              \
  }
AUTOPAR_CUDA_FOR_EACH_TYPE(AUTOPAR_DROPOUT)
#undef AUTOPAR_DROPOUT

} // namespace autopar::rt::cuda
