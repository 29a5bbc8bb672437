//===- Kernels.h - CUDA kernels of the emitted programs ---------*- C++ -*-===//
//
// The ops the CUDA emitter does not generate as fused elementwise kernels:
// GEMMs through cuBLASLt, normalizations, softmax, cross-entropy,
// embedding, data movement and reductions, each with its backward. The same
// functions, arguments and semantics as the CPU kernels
// (runtime/cpu/Kernels.h, their references), with a DeviceContext first:
// every pointer is device memory and every kernel is issued on ctx.stream
// (asynchronous; nothing synchronizes). Sizes are element counts.
//
// Numerics: float32 throughout, statistics and loss sums in float with
// fixed reduction trees (no atomics: results do not change from run to
// run); GEMMs use CUBLAS_COMPUTE_32F (no TF32) so fp32 training matches the
// CPU target.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_KERNELS_H
#define AUTOPAR_RUNTIME_CUDA_KERNELS_H

#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/Context.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace autopar::rt::cuda {

using cpu::GemmDesc;
using cpu::ReduceKind;
using cpu::Reduction;

/// What a GEMM adds to its product, per output row of n elements:
/// c = act(alpha * op(a) op(b) + bias), bias [n] (cuBLASLt epilogues).
enum class Epilogue { None = 0, Bias = 1, Gelu = 2, BiasGelu = 3 };

/// cpu::gemm (batched, broadcast batch strides, trans flags, lda/ldb), with
/// an optional epilogue (bias may be null unless the epilogue has one; GELU
/// is the tanh approximation, cuBLASLt's).
void gemm(DeviceContext &ctx, const GemmDesc &desc, const float *a,
          const float *b, float *c, Epilogue epilogue = Epilogue::None,
          const float *bias = nullptr);
/// The same on bfloat16 (IEEE half) A, B and C with float accumulation
/// (CUBLAS_COMPUTE_32F: tensor cores), C rounded once; no epilogue.
void gemm(DeviceContext &ctx, const GemmDesc &desc, const __nv_bfloat16 *a,
          const __nv_bfloat16 *b, __nv_bfloat16 *c);
void gemm(DeviceContext &ctx, const GemmDesc &desc, const __half *a,
          const __half *b, __half *c);

void layerNormForward(DeviceContext &ctx, const float *x, const float *scale,
                      const float *bias, float *y, int64_t rows, int64_t cols,
                      double epsilon);
void layerNormBackward(DeviceContext &ctx, const float *x, const float *scale,
                       const float *dy, float *dx, float *dscale, float *dbias,
                       int64_t rows, int64_t cols, double epsilon);
/// The same on bfloat16 or IEEE half tensors (every operand and result):
/// statistics and sums as in f32 (in double), each result rounded once.
void layerNormForward(DeviceContext &ctx, const __nv_bfloat16 *x,
                      const __nv_bfloat16 *scale, const __nv_bfloat16 *bias,
                      __nv_bfloat16 *y, int64_t rows, int64_t cols,
                      double epsilon);
void layerNormForward(DeviceContext &ctx, const __half *x, const __half *scale,
                      const __half *bias, __half *y, int64_t rows,
                      int64_t cols, double epsilon);
void layerNormBackward(DeviceContext &ctx, const __nv_bfloat16 *x,
                       const __nv_bfloat16 *scale, const __nv_bfloat16 *dy,
                       __nv_bfloat16 *dx, __nv_bfloat16 *dscale,
                       __nv_bfloat16 *dbias, int64_t rows, int64_t cols,
                       double epsilon);
void layerNormBackward(DeviceContext &ctx, const __half *x, const __half *scale,
                       const __half *dy, __half *dx, __half *dscale,
                       __half *dbias, int64_t rows, int64_t cols,
                       double epsilon);

void softmaxForward(DeviceContext &ctx, const float *x, float *y,
                    int64_t outer, int64_t n, int64_t inner);
void softmaxBackward(DeviceContext &ctx, const float *y, const float *dy,
                     float *dx, int64_t outer, int64_t n, int64_t inner);
/// The same on bfloat16 or IEEE half tensors (every operand and result;
/// Megatron's fused softmax): the same f32 (and double) arithmetic on the
/// 16-bit values, each result rounded once.
void softmaxForward(DeviceContext &ctx, const __nv_bfloat16 *x,
                    __nv_bfloat16 *y, int64_t outer, int64_t n, int64_t inner);
void softmaxForward(DeviceContext &ctx, const __half *x, __half *y,
                    int64_t outer, int64_t n, int64_t inner);
void softmaxBackward(DeviceContext &ctx, const __nv_bfloat16 *y,
                     const __nv_bfloat16 *dy, __nv_bfloat16 *dx, int64_t outer,
                     int64_t n, int64_t inner);
void softmaxBackward(DeviceContext &ctx, const __half *y, const __half *dy,
                     __half *dx, int64_t outer, int64_t n, int64_t inner);

void softmaxCrossEntropyForward(DeviceContext &ctx, const float *scores,
                                const void *labels, bool labels64, float *loss,
                                int64_t outer, int64_t classes, int64_t inner,
                                Reduction reduction, bool hasIgnoreIndex,
                                int64_t ignoreIndex, int64_t validClasses = -1);
void softmaxCrossEntropyBackward(DeviceContext &ctx, const float *scores,
                                 const void *labels, bool labels64,
                                 const float *dloss, float *dscores,
                                 int64_t outer, int64_t classes, int64_t inner,
                                 Reduction reduction, bool hasIgnoreIndex,
                                 int64_t ignoreIndex,
                                 int64_t validClasses = -1);
/// The same on bfloat16 or IEEE half scores and dscores (f32 loss and
/// dloss; bf16-mixed logits): the same f32/double arithmetic on the 16-bit
/// values, dscores rounded once. `validClasses` is cpu::'s: only the first
/// ones count (-1: all).
void softmaxCrossEntropyForward(DeviceContext &ctx, const __nv_bfloat16 *scores,
                                const void *labels, bool labels64, float *loss,
                                int64_t outer, int64_t classes, int64_t inner,
                                Reduction reduction, bool hasIgnoreIndex,
                                int64_t ignoreIndex, int64_t validClasses = -1);
void softmaxCrossEntropyForward(DeviceContext &ctx, const __half *scores,
                                const void *labels, bool labels64, float *loss,
                                int64_t outer, int64_t classes, int64_t inner,
                                Reduction reduction, bool hasIgnoreIndex,
                                int64_t ignoreIndex, int64_t validClasses = -1);
void softmaxCrossEntropyBackward(
    DeviceContext &ctx, const __nv_bfloat16 *scores, const void *labels,
    bool labels64, const float *dloss, __nv_bfloat16 *dscores, int64_t outer,
    int64_t classes, int64_t inner, Reduction reduction, bool hasIgnoreIndex,
    int64_t ignoreIndex, int64_t validClasses = -1);
void softmaxCrossEntropyBackward(DeviceContext &ctx, const __half *scores,
                                 const void *labels, bool labels64,
                                 const float *dloss, __half *dscores,
                                 int64_t outer, int64_t classes, int64_t inner,
                                 Reduction reduction, bool hasIgnoreIndex,
                                 int64_t ignoreIndex,
                                 int64_t validClasses = -1);

/// Vocab-parallel cross-entropy (cpu::crossEntropyShardStats and
/// cpu::crossEntropyShardBackward; *offset is read on the device).
void crossEntropyShardStats(DeviceContext &ctx, const float *scores,
                            const void *labels, bool labels64, const float *max,
                            const int64_t *offset, float *sumExp, float *target,
                            int64_t outer, int64_t classes, int64_t inner);
void crossEntropyShardBackward(DeviceContext &ctx, const float *scores,
                               const void *labels, bool labels64,
                               const float *dloss, const float *lse,
                               const int64_t *offset, float *dscores,
                               int64_t outer, int64_t classes, int64_t inner,
                               Reduction reduction, bool hasIgnoreIndex,
                               int64_t ignoreIndex);

void gather(DeviceContext &ctx, const void *data, const void *indices,
            bool indices64, void *out, int64_t outer, int64_t axisSize,
            int64_t innerBytes, int64_t numIndices);
void gatherBackward(DeviceContext &ctx, const void *indices, bool indices64,
                    const float *dout, float *ddata, int64_t outer,
                    int64_t axisSize, int64_t inner, int64_t numIndices);

void stridedCopy(DeviceContext &ctx, const void *in, void *out, int rank,
                 const int64_t *shape, const int64_t *inStrides,
                 int64_t inOffset, int64_t elementBytes);
void stridedScatter(DeviceContext &ctx, const void *in, void *out,
                    int64_t outElements, int rank, const int64_t *shape,
                    const int64_t *outStrides, int64_t outOffset,
                    int64_t elementBytes);
void copyAxisBlock(DeviceContext &ctx, const void *in, void *out,
                   int64_t outer, int64_t n, int64_t bigN, int64_t offset,
                   int64_t innerBytes, bool intoBig);

void reduce(DeviceContext &ctx, ReduceKind kind, const float *in, float *out,
            int rank, const int64_t *shape, const bool *reduced);
/// The same on bfloat16 or IEEE half tensors: accumulated in double as in
/// f32, each result rounded once.
void reduce(DeviceContext &ctx, ReduceKind kind, const __nv_bfloat16 *in,
            __nv_bfloat16 *out, int rank, const int64_t *shape,
            const bool *reduced);
void reduce(DeviceContext &ctx, ReduceKind kind, const __half *in, __half *out,
            int rank, const int64_t *shape, const bool *reduced);

void accumulateInto(DeviceContext &ctx, float *dst, const float *src,
                    int64_t numElements, float scale, bool accumulate);
/// The same on bfloat16 tensors (bf16-mixed gradients): computed in float,
/// rounded once per element.
void accumulateInto(DeviceContext &ctx, __nv_bfloat16 *dst,
                    const __nv_bfloat16 *src, int64_t numElements, float scale,
                    bool accumulate);
/// The same on IEEE half tensors (fp16-mixed gradients).
void accumulateInto(DeviceContext &ctx, __half *dst, const __half *src,
                    int64_t numElements, float scale, bool accumulate);

/// cpu::dropout on the device: *key and the block's offsets are device
/// memory, read by the kernel.
void dropout(DeviceContext &ctx, const float *x, float *y,
             const DropoutBlock &block, const RandomKey *key, double ratio,
             int64_t site);
void dropout(DeviceContext &ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y,
             const DropoutBlock &block, const RandomKey *key, double ratio,
             int64_t site);
void dropout(DeviceContext &ctx, const __half *x, __half *y,
             const DropoutBlock &block, const RandomKey *key, double ratio,
             int64_t site);

/// cpu::dequantize on the device.
void dequantize(DeviceContext &ctx, const int8_t *codes, const void *absmax,
                const float *state2, float *out, int64_t rows, int64_t cols,
                int kind, int64_t block, int axis);

/// Copies `bytes` bytes device to device on the stream.
void copy(DeviceContext &ctx, void *dst, const void *src, int64_t bytes);

// For the emitter's fused elementwise kernels: V consecutive elements at p,
// moved in the widest words (at most 16 bytes) that V * sizeof(T) is a
// multiple of; p must be aligned to that word (the emitter checks).
template <int V, typename T> struct VectorWord {
  static constexpr int kBytes = V * static_cast<int>(sizeof(T));
  static constexpr int kWordBytes = kBytes % 16 == 0  ? 16
                                    : kBytes % 8 == 0 ? 8
                                    : kBytes % 4 == 0 ? 4
                                    : kBytes % 2 == 0 ? 2
                                                      : 1;
  using Word = std::conditional_t<
      kWordBytes == 16, uint4,
      std::conditional_t<
          kWordBytes == 8, uint2,
          std::conditional_t<
              kWordBytes == 4, uint32_t,
              std::conditional_t<kWordBytes == 2, uint16_t, uint8_t>>>>;
  static constexpr int kWords = kBytes / kWordBytes;
};

template <int V, typename T>
__device__ __forceinline__ void loadVector(T (&x)[V], const T *p) {
  using W = VectorWord<V, T>;
  typename W::Word words[W::kWords];
#pragma unroll
  for (int i = 0; i < W::kWords; ++i)
    words[i] = reinterpret_cast<const typename W::Word *>(p)[i];
  memcpy(x, words, sizeof(words));
}

template <int V, typename T>
__device__ __forceinline__ void storeVector(T *p, const T (&x)[V]) {
  using W = VectorWord<V, T>;
  typename W::Word words[W::kWords];
  memcpy(words, x, sizeof(words));
#pragma unroll
  for (int i = 0; i < W::kWords; ++i)
    reinterpret_cast<typename W::Word *>(p)[i] = words[i];
}

} // namespace autopar::rt::cuda

#endif // AUTOPAR_RUNTIME_CUDA_KERNELS_H
