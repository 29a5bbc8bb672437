//===- KernelsCommon.cuh - what the CUDA kernels' files share ---*- C++ -*-===//
//
// Internal to runtime/cuda (not part of Kernels.h): the launch shapes,
// block and warp reductions and index loads of the kernel files (Gemm.cu,
// LayerNorm.cu, Softmax.cu, CrossEntropy.cu, Gather.cu, Copy.cu,
// Reduce.cu, Accumulate.cu, Attention*.cu), and AUTOPAR_CUDA_FOR_EACH_TYPE
// to define an entry point's overloads (Kernels.h declares one per element
// type) from one body. Everything is in an anonymous namespace: each file
// has its own copy, as when it was one file.
//
// The conventions of the kernels of runtime/cuda/Kernels.h, each with the
// semantics of its CPU reference (runtime/cpu/Kernels.cpp):
//
//  - Element kernels are grid-stride loops over int64_t indices, so every
//    size fits the grid; row kernels (layer norm, softmax, cross-entropy)
//    use one block per row in a block-stride loop over the rows.
//  - Block reductions use a fixed tree (warp butterflies, then the
//    per-warp values) and blocks of a fixed size, so results do not change
//    from run to run. Sums accumulate in double where the CPU reference
//    does (statistics, softmax denominators of the strided path, losses,
//    reductions).
//  - Sums across blocks (layer-norm parameter gradients, loss sums, column
//    reductions) go through per-block partials in cuda::scratch that a
//    second kernel adds in a fixed order. No float atomics anywhere.
//
// GemmDesc, shapes, strides and the reduced-dim flags are host memory;
// every tensor pointer is device memory. Indices and labels out of range
// (the CPU reference's undefined behavior) never fault here: gather writes
// zeros, gatherBackward skips them, cross-entropy produces NaN.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_KERNELSCOMMON_CUH
#define AUTOPAR_RUNTIME_CUDA_KERNELSCOMMON_CUH

#include "runtime/cuda/Context.h"

#include <algorithm>
#include <cstdint>

/// X(T) for each element type of the kernels (float, __nv_bfloat16,
/// __half), or for the 16-bit ones: defines one overload per type.
#define AUTOPAR_CUDA_FOR_EACH_TYPE(X) X(float) X(__nv_bfloat16) X(__half)
#define AUTOPAR_CUDA_FOR_EACH_16BIT_TYPE(X) X(__nv_bfloat16) X(__half)

namespace autopar::rt::cuda {
namespace {

/// Threads per block of every kernel but the single-block reductions.
constexpr int kBlock = 256;
/// Threads of the single-block final reductions.
constexpr int kFinalBlock = 1024;
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Blocks for a grid-stride loop over `n` items: enough to fill the
/// device, never more than the items need, at least 1.
inline unsigned gridFor(const DeviceContext &ctx, int64_t n,
                        int block = kBlock) {
  const int64_t needed = ceilDiv(std::max<int64_t>(n, 1), block);
  const int64_t cap = std::max<int64_t>(ctx.numSMs, 1) * 32;
  return static_cast<unsigned>(std::min(needed, cap));
}

/// Blocks for a kernel with one block per row (block-stride loop).
inline unsigned rowGrid(const DeviceContext &ctx, int64_t rows) {
  return gridFor(ctx, rows, 1);
}

/// f(W()) for W the widest word (uint4, uint2, uint32_t, uint16_t or
/// uint8_t) whose size divides every address, size and pitch in `bits`
/// (OR-ed together).
template <typename F> void withWidestWord(uint64_t bits, F &&f) {
  if (bits % 16 == 0)
    f(uint4());
  else if (bits % 8 == 0)
    f(uint2());
  else if (bits % 4 == 0)
    f(uint32_t());
  else if (bits % 2 == 0)
    f(uint16_t());
  else
    f(uint8_t());
}

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

__device__ inline int64_t threadIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t threadCount() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
/// fmaxf: a NaN operand is ignored, as std::max(max, x) in the CPU
/// softmax ignores NaN elements (their exp makes the result NaN anyway).
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/// Reduces `v` over the warp in a fixed butterfly; every lane gets lane
/// 0's result.
template <typename T, typename Op> __device__ T warpReduce(T v, Op op) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  return __shfl_sync(kFullMask, v, 0);
}

/// Reduces `v` over the block in a fixed tree; every thread gets the
/// result. Every thread of the block must call it (it synchronizes);
/// blockDim.x is a multiple of 32. `shared` holds kWarp values and may be
/// reused by the next call.
template <typename T, typename Op>
__device__ T blockReduce(T v, Op op, T identity, T *shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int numWarps = blockDim.x / kWarp;
  v = warpReduce(v, op);
  __syncthreads(); // the previous call's readers are done with `shared`
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  // Every warp reduces the same per-warp values the same way.
  return warpReduce(lane < numWarps ? shared[lane] : identity, op);
}

template <typename I>
__device__ inline int64_t loadIndex(const I *p, int64_t i) {
  return static_cast<int64_t>(p[i]);
}

} // namespace
} // namespace autopar::rt::cuda

#endif // AUTOPAR_RUNTIME_CUDA_KERNELSCOMMON_CUH
