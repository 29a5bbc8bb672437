//===- Attention.h - fused scaled dot-product attention (CUDA) --*- C++ -*-===//
//
// runtime/cpu/Attention.h on the GPU: the same AttentionDesc, semantics and
// layouts (strided q, k, v, out, dout, dq, dk, dv with D contiguous; dense
// lse [B, H, T]; the optional bool mask with broadcast strides; NaN out and
// -inf lse for fully masked rows, which add nothing to the backward), with
// a DeviceContext first. Every tensor pointer, desc.mask included, is
// device memory; the kernels are issued on ctx.stream (asynchronous;
// nothing synchronizes except a growing cuda::scratch in the backward).
// D is at most 128.
//
// Numerics: float32 kernels throughout, with fixed summation orders and no
// atomics (results do not change from run to run); within a small relative
// tolerance of the CPU kernels, which sum in other orders. The bfloat16 and
// half kernels accumulate and keep their softmax statistics in f32 (same
// orders, no atomics) and round p and dS to the 16-bit type before their
// products.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_ATTENTION_H
#define AUTOPAR_RUNTIME_CUDA_ATTENTION_H

#include "runtime/cpu/Attention.h"
#include "runtime/cuda/Context.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace autopar::rt::cuda {

/// The largest head dim (desc.d) the kernels take.
constexpr int64_t kMaxAttentionHeadDim = 128;

void attentionForward(DeviceContext &ctx, const AttentionDesc &desc,
                      const float *q, const float *k, const float *v,
                      float *out, float *lse);
/// dq, dk, dv (overwritten) from dout, given the forward's out and lse.
void attentionBackward(DeviceContext &ctx, const AttentionDesc &desc,
                       const float *q, const float *k, const float *v,
                       const float *out, const float *lse, const float *dout,
                       float *dq, float *dk, float *dv);

/// The same on bfloat16 or IEEE half q, k, v, out, dout, dq, dk, dv (lse
/// stays f32): tensor-core products (sm_80 and later) of 16-bit operands
/// with f32 accumulation; the probabilities and dS are rounded to the
/// 16-bit type before their products, as FlashAttention-2 does, and every
/// result is rounded once.
void attentionForward(DeviceContext &ctx, const AttentionDesc &desc,
                      const __nv_bfloat16 *q, const __nv_bfloat16 *k,
                      const __nv_bfloat16 *v, __nv_bfloat16 *out, float *lse);
void attentionForward(DeviceContext &ctx, const AttentionDesc &desc,
                      const __half *q, const __half *k, const __half *v,
                      __half *out, float *lse);
void attentionBackward(DeviceContext &ctx, const AttentionDesc &desc,
                       const __nv_bfloat16 *q, const __nv_bfloat16 *k,
                       const __nv_bfloat16 *v, const __nv_bfloat16 *out,
                       const float *lse, const __nv_bfloat16 *dout,
                       __nv_bfloat16 *dq, __nv_bfloat16 *dk,
                       __nv_bfloat16 *dv);
void attentionBackward(DeviceContext &ctx, const AttentionDesc &desc,
                       const __half *q, const __half *k, const __half *v,
                       const __half *out, const float *lse, const __half *dout,
                       __half *dq, __half *dk, __half *dv);

} // namespace autopar::rt::cuda

#endif // AUTOPAR_RUNTIME_CUDA_ATTENTION_H
