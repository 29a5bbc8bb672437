//===- Gather.cu - gather and its gradient (CUDA) -------------------------===//
//
// cuda::gather (embedding lookups) moves rows in the widest words their
// addresses and size allow, zeros for an index out of range.
// cuda::gatherBackward sorts (index, position) pairs with CUB's stable
// radix sort and adds each index's rows in position order: bit-identical
// to the CPU reference, which adds them in the same order (a loop per
// output column past 2^31 indices or 2^32 - 1 rows).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/KernelsCommon.cuh"

#include <cub/device/device_radix_sort.cuh>

#include <cstdint>
#include <limits>

namespace autopar::rt::cuda {

namespace {

/// Rounds a scratch offset up to 256 bytes.
int64_t alignUp(int64_t bytes) { return (bytes + 255) / 256 * 256; }

/// out[o, i, w] = data[o, idx(i), w] in words W (zeros for an index out
/// of range).
template <typename W, typename I>
__global__ void __launch_bounds__(kBlock)
    gatherKernel(const W *data, const I *indices, W *out, int64_t outer,
                 int64_t axisSize, int64_t innerWords, int64_t numIndices) {
  const int64_t total = outer * numIndices * innerWords;
  for (int64_t t = threadIndex(); t < total; t += threadCount()) {
    const int64_t w = t % innerWords, row = t / innerWords;
    const int64_t i = row % numIndices, o = row / numIndices;
    int64_t idx = loadIndex(indices, i);
    if (idx < 0)
      idx += axisSize;
    out[t] = idx >= 0 && idx < axisSize
                 ? data[(o * axisSize + idx) * innerWords + w]
                 : W();
  }
}

template <typename W>
void gatherWords(DeviceContext &ctx, const void *data, const void *indices,
                 bool indices64, void *out, int64_t outer, int64_t axisSize,
                 int64_t innerBytes, int64_t numIndices) {
  const int64_t innerWords = innerBytes / static_cast<int64_t>(sizeof(W));
  const unsigned grid = gridFor(ctx, outer * numIndices * innerWords);
  if (indices64)
    gatherKernel<W, int64_t><<<grid, kBlock, 0, ctx.stream>>>(
        static_cast<const W *>(data), static_cast<const int64_t *>(indices),
        static_cast<W *>(out), outer, axisSize, innerWords, numIndices);
  else
    gatherKernel<W, int32_t><<<grid, kBlock, 0, ctx.stream>>>(
        static_cast<const W *>(data), static_cast<const int32_t *>(indices),
        static_cast<W *>(out), outer, axisSize, innerWords, numIndices);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

/// keys[i] = the index of position i from the front (axisSize, sorting
/// last, when out of range), positions[i] = i.
template <typename I>
__global__ void __launch_bounds__(kBlock)
    sortKeysKernel(const I *indices, int64_t numIndices, int64_t axisSize,
                   uint32_t *keys, uint32_t *positions) {
  for (int64_t i = threadIndex(); i < numIndices; i += threadCount()) {
    int64_t idx = loadIndex(indices, i);
    if (idx < 0)
      idx += axisSize;
    keys[i] =
        static_cast<uint32_t>(idx >= 0 && idx < axisSize ? idx : axisSize);
    positions[i] = static_cast<uint32_t>(i);
  }
}

/// With (keys, positions) sorted stably by key: the thread of (o, k, j)
/// where k starts a run of equal keys a < axisSize writes
/// ddata[o, a, j] = the sum of dout[o, position, j] over the run, in
/// position order (the CPU reference's order).
__global__ void __launch_bounds__(kBlock)
    gatherBackwardRunsKernel(const uint32_t *keys, const uint32_t *positions,
                             const float *dout, float *ddata, int64_t outer,
                             int64_t axisSize, int64_t inner,
                             int64_t numIndices) {
  const int64_t total = outer * numIndices * inner;
  for (int64_t t = threadIndex(); t < total; t += threadCount()) {
    const int64_t j = t % inner, q = t / inner;
    const int64_t k = q % numIndices, o = q / numIndices;
    const uint32_t key = keys[k];
    if ((k > 0 && keys[k - 1] == key) || key >= axisSize)
      continue;
    float sum = 0.0f;
    for (int64_t r = k; r < numIndices && keys[r] == key; ++r)
      sum += dout[(o * numIndices + positions[r]) * inner + j];
    ddata[(o * axisSize + key) * inner + j] = sum;
  }
}

/// The fallback for more than 2^31 indices or axes of 2^32 - 1 or more:
/// one thread per (o, j) adding every index's row in order.
template <typename I>
__global__ void __launch_bounds__(kBlock)
    gatherBackwardOwnerKernel(const I *indices, const float *dout, float *ddata,
                              int64_t outer, int64_t axisSize, int64_t inner,
                              int64_t numIndices) {
  const int64_t total = outer * inner;
  for (int64_t t = threadIndex(); t < total; t += threadCount()) {
    const int64_t o = t / inner, j = t % inner;
    for (int64_t i = 0; i < numIndices; ++i) {
      int64_t idx = loadIndex(indices, i);
      if (idx < 0)
        idx += axisSize;
      if (idx >= 0 && idx < axisSize)
        ddata[(o * axisSize + idx) * inner + j] +=
            dout[(o * numIndices + i) * inner + j];
    }
  }
}

template <typename I>
void gatherBackwardT(DeviceContext &ctx, const I *indices, const float *dout,
                     float *ddata, int64_t outer, int64_t axisSize,
                     int64_t inner, int64_t numIndices) {
  if (numIndices > std::numeric_limits<int32_t>::max() ||
      axisSize >= static_cast<int64_t>(std::numeric_limits<uint32_t>::max())) {
    gatherBackwardOwnerKernel<I>
        <<<gridFor(ctx, outer * inner), kBlock, 0, ctx.stream>>>(
            indices, dout, ddata, outer, axisSize, inner, numIndices);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
    return;
  }
  // Keys take the bits of 0..axisSize (axisSize marks out-of-range).
  int endBit = 1;
  while (endBit < 32 && (int64_t{1} << endBit) <= axisSize)
    ++endBit;
  const int n = static_cast<int>(numIndices);
  size_t sortBytes = 0;
  AUTOPAR_CUDA_CHECK_CTX(
      &ctx, cub::DeviceRadixSort::SortPairs(
                nullptr, sortBytes, static_cast<const uint32_t *>(nullptr),
                static_cast<uint32_t *>(nullptr),
                static_cast<const uint32_t *>(nullptr),
                static_cast<uint32_t *>(nullptr), n, 0, endBit, ctx.stream));
  const int64_t arrayBytes = alignUp(numIndices * 4);
  char *base = static_cast<char *>(
      scratch(ctx, 4 * arrayBytes + alignUp(static_cast<int64_t>(sortBytes))));
  uint32_t *keysIn = reinterpret_cast<uint32_t *>(base);
  uint32_t *keysOut = reinterpret_cast<uint32_t *>(base + arrayBytes);
  uint32_t *posIn = reinterpret_cast<uint32_t *>(base + 2 * arrayBytes);
  uint32_t *posOut = reinterpret_cast<uint32_t *>(base + 3 * arrayBytes);
  void *sortTemp = base + 4 * arrayBytes;
  sortKeysKernel<I><<<gridFor(ctx, numIndices), kBlock, 0, ctx.stream>>>(
      indices, numIndices, axisSize, keysIn, posIn);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
  AUTOPAR_CUDA_CHECK_CTX(&ctx, cub::DeviceRadixSort::SortPairs(
                                   sortTemp, sortBytes, keysIn, keysOut, posIn,
                                   posOut, n, 0, endBit, ctx.stream));
  gatherBackwardRunsKernel<<<gridFor(ctx, outer * numIndices * inner), kBlock,
                             0, ctx.stream>>>(
      keysOut, posOut, dout, ddata, outer, axisSize, inner, numIndices);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace

void gather(DeviceContext &ctx, const void *data, const void *indices,
            bool indices64, void *out, int64_t outer, int64_t axisSize,
            int64_t innerBytes, int64_t numIndices) {
  if (outer <= 0 || numIndices <= 0 || innerBytes <= 0)
    return;
  withWidestWord(
      reinterpret_cast<uintptr_t>(data) | reinterpret_cast<uintptr_t>(out) |
          static_cast<uint64_t>(innerBytes),
      [&](auto word) {
        gatherWords<decltype(word)>(ctx, data, indices, indices64, out, outer,
                                    axisSize, innerBytes, numIndices);
      });
}

void gatherBackward(DeviceContext &ctx, const void *indices, bool indices64,
                    const float *dout, float *ddata, int64_t outer,
                    int64_t axisSize, int64_t inner, int64_t numIndices) {
  if (outer <= 0 || axisSize <= 0 || inner <= 0)
    return;
  AUTOPAR_CUDA_CHECK_CTX(
      &ctx, cudaMemsetAsync(ddata, 0,
                            static_cast<size_t>(outer * axisSize * inner) *
                                sizeof(float),
                            ctx.stream));
  if (numIndices <= 0)
    return;
  if (indices64)
    gatherBackwardT(ctx, static_cast<const int64_t *>(indices), dout, ddata,
                    outer, axisSize, inner, numIndices);
  else
    gatherBackwardT(ctx, static_cast<const int32_t *>(indices), dout, ddata,
                    outer, axisSize, inner, numIndices);
}

} // namespace autopar::rt::cuda
