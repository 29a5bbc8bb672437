//===- Attention.h - fused scaled dot-product attention (CPU) ---*- C++ -*-===//
//
// The kernels behind nn.attention: for every batch index b and head h,
//
//   s[i, j]   = scale * q[b, h, i, :] . k[b, h, j, :]
//   masked    : j > pos(i) when causal; mask[b, h, i, j] false, where
//               pos(i) = positions[i] when given, else i + (S - T)
//   p[i, :]   = softmax_j(s[i, :] with masked entries -inf)
//   out[b, h, i, :] = sum_j p[i, j] v[b, h, j, :]
//   lse[b, h, i]    = log sum_j exp(s[i, j]) over unmasked j (what the
//                     backward needs to recompute p without storing it)
//
// for q [B, H, T, D], k and v [B, H, S, D]. No T x S matrix is kept for all
// heads at once (flash-attention style). A row with every entry masked
// gives NaN, as the exported MatMul-Where(-inf)-Softmax-MatMul graph does.
//
// Every tensor is addressed through element strides of its first three
// dims (b, h, row); its last dim (D) is contiguous. So q, k, v read through
// the head permutes of the exported graph, and out can be written straight
// into [B, T, H, D] order, without materialized transposes. lse is dense
// [B, H, T]. The mask (bool, may be null) has strides for all four dims,
// 0 along broadcast dims.
//
// These are also the CPU references of the CUDA kernels
// (runtime/cuda/Attention.h).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_ATTENTION_H
#define AUTOPAR_RUNTIME_CPU_ATTENTION_H

#include <cstdint>

namespace autopar::rt {

/// Which kernels compute attention on 16-bit tensors on the CUDA target
/// (plan key attention_backend): cuDNN's fused SDPA where it takes the
/// shape, else the own kernels (Auto); cuDNN or fail (Cudnn); the own
/// kernels (Own). The f32 kernels and the CPU target have only their own.
enum class AttentionBackend : int32_t { Auto = 0, Cudnn = 1, Own = 2 };

/// The plan's spelling: "auto", "cudnn", "own".
inline const char *attentionBackendName(AttentionBackend backend) {
  switch (backend) {
  case AttentionBackend::Cudnn:
    return "cudnn";
  case AttentionBackend::Own:
    return "own";
  case AttentionBackend::Auto:
    break;
  }
  return "auto";
}

struct AttentionDesc {
  int64_t batch = 1, heads = 1, t = 1, s = 1, d = 1;
  float scale = 1.0f;
  bool causal = false;
  /// Element strides of dims (b, h, row) of each tensor.
  int64_t qStrides[3] = {}, kStrides[3] = {}, vStrides[3] = {},
          outStrides[3] = {};
  /// Backward only: of dout, dq, dk, dv.
  int64_t doutStrides[3] = {}, dqStrides[3] = {}, dkStrides[3] = {},
          dvStrides[3] = {};
  /// Optional mask (true: attend) and its strides over (b, h, i, j).
  const bool *mask = nullptr;
  int64_t maskStrides[4] = {};
  /// Optional (causal only): the key position of each query row, [t],
  /// increasing (a context-parallel rank's rows of the sequence; its keys
  /// are the whole sequence). Null: row i is at i + (s - t).
  const int64_t *positions = nullptr;
};

namespace cpu {

void attentionForward(const AttentionDesc &desc, const float *q,
                      const float *k, const float *v, float *out, float *lse);
/// dq, dk, dv (overwritten) from dout, given the forward's out and lse.
void attentionBackward(const AttentionDesc &desc, const float *q,
                       const float *k, const float *v, const float *out,
                       const float *lse, const float *dout, float *dq,
                       float *dk, float *dv);

} // namespace cpu
} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_CPU_ATTENTION_H
