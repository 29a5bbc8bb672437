//===- CudnnAttention.h - attention through cuDNN's fused SDPA --*- C++ -*-===//
//
// runtime/cuda/Attention.h's 16-bit attention run by cuDNN's fused
// scaled-dot-product attention (flash attention), through cudnn_frontend's
// graph API, where the program was built with it (AUTOPAR_WITH_CUDNN) and
// ctx.attentionBackend is not Own. The same AttentionDesc and layouts: q,
// k, v, out, dout, dq, dk, dv are strided [B, H, rows, D] views (no copies),
// lse is the dense f32 [B, H, T] natural-log log-sum-exp cuDNN calls its
// stats, so a forward of either kind pairs with a backward of either kind.
//
// A graph is built once per shape, strides, scale, causality and direction
// (on the step's first, eager call) and cached in ctx.cudnn; its workspace
// is cuda::scratch, so the calls are recorded into the step's CUDA graph
// like any kernel. The backward asks for cuDNN's deterministic algorithm:
// its results do not change from run to run on one GPU and library
// version. cuDNN does not take: an attention mask, a causal attention with
// fewer keys than queries (rows with nothing to attend), pointers not
// 16-byte aligned, and whatever its support check refuses; there the
// functions return false and the own kernels run (ctx.attentionBackend
// Auto: rank 0 says so once per shape) or the program ends in one line
// (Cudnn).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CUDNNATTENTION_H
#define AUTOPAR_RUNTIME_CUDA_CUDNNATTENTION_H

#include "runtime/Status.h"
#include "runtime/cpu/Attention.h"
#include "runtime/cuda/Context.h"

#include <string>

namespace autopar::rt::cuda {

/// The 16-bit element type of an attention's tensors.
enum class Attention16Type { Bf16, Half };

/// Whether the runtime was built with cuDNN (AUTOPAR_WITH_CUDNN).
bool builtWithCudnn();

/// Runs the forward (out, lse) through cuDNN and returns true, or returns
/// false when the own kernels must run it (nothing issued).
bool cudnnAttentionForward(DeviceContext &ctx, const AttentionDesc &desc,
                           Attention16Type type, const void *q, const void *k,
                           const void *v, void *out, float *lse);
/// The same for the backward (dq, dk, dv overwritten).
bool cudnnAttentionBackward(DeviceContext &ctx, const AttentionDesc &desc,
                            Attention16Type type, const void *q, const void *k,
                            const void *v, const void *out, const float *lse,
                            const void *dout, void *dq, void *dk, void *dv);

/// Sets ctx.attentionBackend; for Auto and Cudnn creates cuDNN's handle and
/// checks the library's version against the one the program was built
/// with. Cudnn without a usable cuDNN is an error naming what is missing;
/// Auto without one runs the own kernels.
Status setCudnnAttentionBackend(DeviceContext &ctx, AttentionBackend backend);

/// What computes the 16-bit attention, for the program's start-up line:
/// "cuDNN 9.19.0 (frontend 1.19.1) where it takes the shape, else own
/// kernels", "own kernels (attention_backend \"own\")", ...
std::string describeAttention(const DeviceContext &ctx);

} // namespace autopar::rt::cuda

#endif // AUTOPAR_RUNTIME_CUDA_CUDNNATTENTION_H
