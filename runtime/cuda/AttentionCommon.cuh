//===- AttentionCommon.cuh - what the attention kernels share ---*- C++ -*-===//
//
// Internal to runtime/cuda: what the f32 attention kernels (Attention.cu)
// and the 16-bit ones (Attention16.cu) share: which head, query rows or
// keys a block works on, the mask test, the backward's per-row statistics
// (rowStatsKernel: Di and the lse to subtract), the shape check and the
// launch with dynamic shared memory. In an anonymous namespace, as
// KernelsCommon.cuh.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_ATTENTIONCOMMON_CUH
#define AUTOPAR_RUNTIME_CUDA_ATTENTIONCOMMON_CUH

#include "runtime/cuda/Attention.h"
#include "runtime/cuda/KernelsCommon.cuh"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace autopar::rt::cuda {
namespace {

/// Threads of the f32 kernels and of rowStatsKernel.
constexpr int kThreads = 256;

__host__ __device__ constexpr int64_t clampTo(int64_t x, int64_t lo,
                                              int64_t hi) {
  return x < lo ? lo : x > hi ? hi : x;
}

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// The first element of head (b, h) of a tensor with the given strides.
template <typename T>
__device__ T *headOf(T *base, const int64_t strides[3], int64_t b, int64_t h) {
  return base + b * strides[0] + h * strides[1];
}

/// The key position of query i under the causal mask (it sees keys j up
/// to it): the desc's positions (increasing), else i + (S - T).
__device__ inline int64_t queryPosition(const AttentionDesc &d, int64_t i) {
  return d.positions ? d.positions[i] : i + d.s - d.t;
}

/// The first query that sees key `key` under the causal mask (T if none).
__device__ inline int64_t firstQuerySeeing(const AttentionDesc &d,
                                           int64_t key) {
  if (!d.positions)
    return clampTo(key - (d.s - d.t), 0, d.t);
  int64_t lo = 0, hi = d.t;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (d.positions[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// Whether query i may see key j (both in range) of the head whose mask
/// starts at `mask` (null: no mask).
__device__ inline bool attends(const AttentionDesc &d, const bool *mask,
                               int64_t i, int64_t j) {
  if (i >= d.t || j >= d.s)
    return false;
  if (d.causal && j > queryPosition(d, i))
    return false;
  return !mask || mask[i * d.maskStrides[2] + j * d.maskStrides[3]];
}

/// What a block works on: head bh = (b, h) = blockIdx.x; its `count` rows
/// [first, first + count) of at most kRows along one axis; a `bound` on the
/// other; the head's mask (null: none).
///
/// A block of query rows (forward and dq kernels; kKeys false) is [bh, b, h,
/// i0, keyEnd, rows, mask]: rows [i0, i0 + rows), the last row blocks first
/// (under a causal mask they see the most keys), and the keys [0, keyEnd)
/// any of them sees. A block of keys (dk/dv kernels; kKeys true) is [bh, b,
/// h, j0, queryBegin, keys, mask]: keys [j0, j0 + keys), and the first
/// query that sees key j0.
struct TileBlock {
  int64_t bh, b, h, first, bound;
  int count;
  const bool *mask;
};
template <bool kKeys>
__device__ TileBlock tileBlock(const AttentionDesc &d, int kRows) {
  TileBlock block;
  block.bh = blockIdx.x;
  block.b = block.bh / d.heads;
  block.h = block.bh % d.heads;
  if constexpr (kKeys) {
    block.first = static_cast<int64_t>(blockIdx.y) * kRows;
    block.count = static_cast<int>(clampTo(d.s - block.first, 0, kRows));
    block.bound = d.causal ? firstQuerySeeing(d, block.first) : 0;
  } else {
    block.first = static_cast<int64_t>(gridDim.y - 1 - blockIdx.y) * kRows;
    block.count = static_cast<int>(clampTo(d.t - block.first, 0, kRows));
    block.bound = d.s;
    if (d.causal) // the keys the block's last row sees
      block.bound = block.count == 0
                        ? 0
                        : clampTo(queryPosition(d, block.first + block.count -
                                                       1) +
                                      1,
                                  0, d.s);
  }
  block.mask =
      d.mask ? d.mask + block.b * d.maskStrides[0] + block.h * d.maskStrides[1]
             : nullptr;
  return block;
}
__device__ inline TileBlock queryBlock(const AttentionDesc &d, int kRows) {
  return tileBlock<false>(d, kRows);
}
__device__ inline TileBlock keyBlock(const AttentionDesc &d, int kKeys) {
  return tileBlock<true>(d, kKeys);
}

//===----------------------------------------------------------------------===//
// Backward row statistics
//===----------------------------------------------------------------------===//

/// Per query row (dense [B, H, T]): lseOut = lse, or +inf for a fully
/// masked row (lse -inf), and di = dout . out, or 0 for a fully masked row
/// (whose out is NaN). A warp per row.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    rowStatsKernel(AttentionDesc d, const T *out, const float *lse,
                   const T *dout, float *lseOut, float *di) {
  const int lane = threadIdx.x % kWarp;
  const int64_t numRows = d.batch * d.heads * d.t;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kThreads / kWarp);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / kWarp) +
                     threadIdx.x / kWarp;
       row < numRows; row += warps) {
    const int64_t bh = row / d.t, i = row % d.t;
    const int64_t b = bh / d.heads, h = bh % d.heads;
    const T *o = headOf(out, d.outStrides, b, h) + i * d.outStrides[2];
    const T *g = headOf(dout, d.doutStrides, b, h) + i * d.doutStrides[2];
    float sum = 0.0f;
    for (int64_t c = lane; c < d.d; c += kWarp)
      sum = fmaf(toFloat(o[c]), toFloat(g[c]), sum);
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
      sum += __shfl_xor_sync(kFullMask, sum, offset);
    if (lane == 0) {
      const bool masked = lse[row] == -INFINITY;
      lseOut[row] = masked ? INFINITY : lse[row];
      di[row] = masked ? 0.0f : sum;
    }
  }
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

/// Fails (cuda::fail) on shapes the kernels do not take; `call` names the
/// function, `file` and `line` where it was called.
inline void checkShape(DeviceContext &ctx, const AttentionDesc &d,
                       const char *file, int line, const char *call) {
  char reason[160] = "";
  if (d.d < 1 || d.d > kMaxAttentionHeadDim)
    std::snprintf(reason, sizeof(reason), "head dim %lld not in [1, %lld]",
                  static_cast<long long>(d.d),
                  static_cast<long long>(kMaxAttentionHeadDim));
  else if (d.batch < 0 || d.heads < 0 || d.t < 0 || d.s < 0)
    std::snprintf(reason, sizeof(reason), "negative extent");
  else if (d.batch * d.heads > INT_MAX)
    std::snprintf(reason, sizeof(reason), "more than %d heads", INT_MAX);
  else if (ceilDiv(std::max(d.t, d.s), 32) > 65535)
    std::snprintf(reason, sizeof(reason), "more than %d rows or keys",
                  65535 * 32);
  if (reason[0])
    fail(&ctx, file, line, call, reason);
}

/// Launches `kernel` on grid (heads, blocks) of `threads` threads with
/// `bytes` bytes of dynamic shared memory (opting in past the 48 KiB
/// default).
template <typename Kernel, typename... Args>
void launch(DeviceContext &ctx, Kernel kernel, int64_t heads, int64_t blocks,
            int threads, int bytes, Args... args) {
  if (heads == 0 || blocks == 0)
    return;
  AUTOPAR_CUDA_CHECK_CTX(
      &ctx, cudaFuncSetAttribute(
                kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const dim3 grid(static_cast<unsigned>(heads), static_cast<unsigned>(blocks));
  kernel<<<grid, threads, bytes, ctx.stream>>>(args...);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

/// Di and the lse to subtract per query row (rowStatsKernel) in
/// cuda::scratch: [lseRows | diRows], numRows floats each; null for no rows.
template <typename T>
float *rowStats(DeviceContext &ctx, const AttentionDesc &desc, const T *out,
                const float *lse, const T *dout) {
  const int64_t numRows = desc.batch * desc.heads * desc.t;
  if (numRows == 0)
    return nullptr;
  float *lseRows = static_cast<float *>(
      scratch(ctx, 2 * numRows * static_cast<int64_t>(sizeof(float))));
  const int64_t rowsPerBlock = kThreads / kWarp;
  const int64_t blocks = std::min<int64_t>(ceilDiv(numRows, rowsPerBlock),
                                           std::max(ctx.numSMs, 1) * 32);
  rowStatsKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, ctx.stream>>>(
      desc, out, lse, dout, lseRows, lseRows + numRows);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
  return lseRows;
}

} // namespace
} // namespace autopar::rt::cuda

#endif // AUTOPAR_RUNTIME_CUDA_ATTENTIONCOMMON_CUH
