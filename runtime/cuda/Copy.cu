//===- Copy.cu - strided copies and axis blocks (CUDA) --------------------===//
//
// cuda::stridedCopy and cuda::stridedScatter (views of any rank up to
// cpu::kMaxRank; unit dims dropped and contiguous ones merged, elements of
// 1, 2, 4 or 8 bytes), cuda::copyAxisBlock (a block of an axis into or out
// of a bigger tensor, in the widest words the alignment allows) and
// cuda::copy (device to device).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/KernelsCommon.cuh"

#include <cstdint>

namespace autopar::rt::cuda {

namespace {

/// out[outOffset + sum_d i_d outStrides[d]] = in[inOffset + sum_d i_d
/// inStrides[d]] over the index space `shape` (passed by value).
struct StridedMove {
  int rank = 0;
  int64_t shape[cpu::kMaxRank] = {};
  int64_t inStrides[cpu::kMaxRank] = {};
  int64_t outStrides[cpu::kMaxRank] = {};
  int64_t inOffset = 0, outOffset = 0;
};

template <typename T>
__global__ void __launch_bounds__(kBlock)
    stridedMoveKernel(const T *in, T *out, StridedMove m, int64_t total) {
  for (int64_t t = threadIndex(); t < total; t += threadCount()) {
    int64_t rem = t, src = m.inOffset, dst = m.outOffset;
    for (int d = m.rank - 1; d >= 0; --d) {
      const int64_t i = rem % m.shape[d];
      rem /= m.shape[d];
      src += i * m.inStrides[d];
      dst += i * m.outStrides[d];
    }
    out[dst] = in[src];
  }
}

/// The same move with unit dims dropped and dims merged into the one
/// before them where both sides advance contiguously (fewer divisions;
/// the row-major order of the elements is unchanged).
StridedMove simplify(const StridedMove &m) {
  StridedMove s;
  s.inOffset = m.inOffset;
  s.outOffset = m.outOffset;
  for (int d = 0; d < m.rank; ++d) {
    const int64_t e = m.shape[d];
    if (e == 1)
      continue;
    const int n = s.rank;
    if (n > 0 && s.inStrides[n - 1] == m.inStrides[d] * e &&
        s.outStrides[n - 1] == m.outStrides[d] * e) {
      s.shape[n - 1] *= e;
      s.inStrides[n - 1] = m.inStrides[d];
      s.outStrides[n - 1] = m.outStrides[d];
    } else {
      s.shape[n] = e;
      s.inStrides[n] = m.inStrides[d];
      s.outStrides[n] = m.outStrides[d];
      s.rank = n + 1;
    }
  }
  return s;
}

void launchStridedMove(DeviceContext &ctx, const void *in, void *out,
                       const StridedMove &move, int64_t elementBytes) {
  int64_t total = 1;
  for (int d = 0; d < move.rank; ++d)
    total *= move.shape[d];
  if (total <= 0)
    return;
  const StridedMove m = simplify(move);
  const unsigned grid = gridFor(ctx, total);
  // Moves the elements as unsigned integers of their size.
  auto launch = [&](auto word) {
    using W = decltype(word);
    stridedMoveKernel<<<grid, kBlock, 0, ctx.stream>>>(
        static_cast<const W *>(in), static_cast<W *>(out), m, total);
  };
  if (elementBytes == 1)
    launch(uint8_t());
  else if (elementBytes == 2)
    launch(uint16_t());
  else if (elementBytes == 4)
    launch(uint32_t());
  else if (elementBytes == 8)
    launch(uint64_t());
  else
    fail(&ctx, __FILE__, __LINE__, "cuda::stridedCopy/stridedScatter",
         "element size is not 1, 2, 4 or 8 bytes");
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

void checkRank(DeviceContext &ctx, int rank) {
  if (rank < 0 || rank > cpu::kMaxRank)
    fail(&ctx, __FILE__, __LINE__, "cuda::stridedCopy/stridedScatter",
         "rank out of range");
}

/// dst[r * dstPitch + w] = src[r * srcPitch + w] for w < rowWords, in
/// words W.
template <typename W>
__global__ void __launch_bounds__(kBlock)
    copyRowsKernel(const W *src, W *dst, int64_t rows, int64_t rowWords,
                   int64_t srcPitch, int64_t dstPitch) {
  const int64_t total = rows * rowWords;
  for (int64_t t = threadIndex(); t < total; t += threadCount()) {
    const int64_t r = t / rowWords, w = t % rowWords;
    dst[r * dstPitch + w] = src[r * srcPitch + w];
  }
}

template <typename W>
void copyRowsWords(DeviceContext &ctx, const char *src, char *dst, int64_t rows,
                   int64_t rowBytes, int64_t srcPitchBytes,
                   int64_t dstPitchBytes) {
  const int64_t w = sizeof(W);
  copyRowsKernel<W>
      <<<gridFor(ctx, rows * (rowBytes / w)), kBlock, 0, ctx.stream>>>(
          reinterpret_cast<const W *>(src), reinterpret_cast<W *>(dst), rows,
          rowBytes / w, srcPitchBytes / w, dstPitchBytes / w);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace

void stridedCopy(DeviceContext &ctx, const void *in, void *out, int rank,
                 const int64_t *shape, const int64_t *inStrides,
                 int64_t inOffset, int64_t elementBytes) {
  checkRank(ctx, rank);
  StridedMove m;
  m.rank = rank;
  m.inOffset = inOffset;
  int64_t dense = 1;
  for (int d = rank - 1; d >= 0; --d) {
    m.shape[d] = shape[d];
    m.inStrides[d] = inStrides[d];
    m.outStrides[d] = dense;
    dense *= shape[d];
  }
  launchStridedMove(ctx, in, out, m, elementBytes);
}

void stridedScatter(DeviceContext &ctx, const void *in, void *out,
                    int64_t outElements, int rank, const int64_t *shape,
                    const int64_t *outStrides, int64_t outOffset,
                    int64_t elementBytes) {
  checkRank(ctx, rank);
  if (outElements > 0)
    AUTOPAR_CUDA_CHECK_CTX(
        &ctx,
        cudaMemsetAsync(out, 0, static_cast<size_t>(outElements * elementBytes),
                        ctx.stream));
  StridedMove m;
  m.rank = rank;
  m.outOffset = outOffset;
  int64_t dense = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (outStrides[d] == 0 && shape[d] > 1) {
      // Every index along d writes the same place; the reference's last
      // write (the last index) wins, so only it is moved (no race).
      m.shape[d] = 1;
      m.inOffset += (shape[d] - 1) * dense;
    } else {
      m.shape[d] = shape[d];
    }
    m.inStrides[d] = dense;
    m.outStrides[d] = outStrides[d];
    dense *= shape[d];
  }
  launchStridedMove(ctx, in, out, m, elementBytes);
}

void copyAxisBlock(DeviceContext &ctx, const void *in, void *out, int64_t outer,
                   int64_t n, int64_t bigN, int64_t offset, int64_t innerBytes,
                   bool intoBig) {
  const int64_t rowBytes = n * innerBytes;
  if (outer <= 0 || rowBytes <= 0)
    return;
  const char *src = static_cast<const char *>(in);
  char *dst = static_cast<char *>(out);
  const int64_t bigPitch = bigN * innerBytes;
  int64_t srcPitch = rowBytes, dstPitch = rowBytes;
  if (intoBig) {
    dst += offset * innerBytes;
    dstPitch = bigPitch;
  } else {
    src += offset * innerBytes;
    srcPitch = bigPitch;
  }
  withWidestWord(
      reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
          static_cast<uint64_t>(rowBytes) | static_cast<uint64_t>(bigPitch),
      [&](auto word) {
        copyRowsWords<decltype(word)>(ctx, src, dst, outer, rowBytes, srcPitch,
                                      dstPitch);
      });
}

void copy(DeviceContext &ctx, void *dst, const void *src, int64_t bytes) {
  if (bytes <= 0)
    return;
  AUTOPAR_CUDA_CHECK_CTX(&ctx,
                         cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes),
                                         cudaMemcpyDeviceToDevice, ctx.stream));
}

} // namespace autopar::rt::cuda
