//===- Kernels.h - CPU kernels of the emitted programs ----------*- C++ -*-===//
//
// The ops the C++ emitter does not generate as loops: GEMMs through
// oneDNN (Blas.h), normalizations, softmax, cross-entropy, embedding, data
// movement and reductions, each with its backward. Shapes are passed collapsed
// to the few extents each kernel needs; sizes are element counts. Parallel
// loops use OpenMP. These are also the CPU references of the CUDA kernels.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_KERNELS_H
#define AUTOPAR_RUNTIME_CPU_KERNELS_H

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

namespace autopar::rt {
struct bf16;
struct DropoutBlock;
struct RandomKey;
} // namespace autopar::rt

namespace autopar::rt::cpu {

/// What multiplies: "oneDNN 2.6.3, avx512_core_bf16 kernels, 2 OpenMP
/// threads".
std::string blasDescription();
/// One line when the environment (ONEDNN_MAX_CPU_ISA) makes oneDNN use
/// weaker kernels than the CPU runs (AVX2 kernels on an AVX-512 CPU),
/// naming the setting, what the CPU runs and the cost; "" otherwise.
std::string blasKernelWarning();
/// Several ranks of a node (mpirun's OMPI_COMM_WORLD_LOCAL_SIZE or
/// MPICH's MPI_LOCALNRANKS above 1) share its cores: without an
/// OMP_NUM_THREADS of the user's, each gets max(1, cores / ranks) threads
/// (cores: those the process may run on), as torchrun sets it; where they
/// are more threads than cores all the same, OpenMP waits passively
/// (OMP_WAIT_POLICY, unless set) instead of spinning on a core another
/// rank needs. A single process binds its threads to the cores
/// (OMP_PROC_BIND=true) unless OMP_PROC_BIND, OMP_PLACES or
/// GOMP_CPU_AFFINITY place them already. Runs the program again (execv of
/// /proc/self/exe) when it sets any; call first thing in main().
void setRankThreads(char **argv);

/// Maximum rank of a tensor the kernels accept.
constexpr int kMaxRank = 8;

/// C[b] = alpha * op(A[b]) op(B[b]) for every index b
/// of a batch of shape batchShape[0..batchRank), row-major matrices. The
/// batch strides (in elements, 0 for a broadcast dim) locate A[b], B[b];
/// C is dense [batch..., m, n].
struct GemmDesc {
  int batchRank = 0;
  int64_t batchShape[kMaxRank] = {};
  int64_t aBatchStrides[kMaxRank] = {};
  int64_t bBatchStrides[kMaxRank] = {};
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0;
  float alpha = 1.0f;
};
void gemm(const GemmDesc &desc, const float *a, const float *b, float *c);

/// A quantized [rows, cols] weight (plan `quantize`) as cpu::dequantize
/// reads it: codes, absmax (f32, or double quantization's codes), state2
/// (double quantization's offset and scales, or null), kind 0 NF4 in
/// blocks of `block`, 1 INT8 along `axis`.
struct QuantizedMatrix {
  const int8_t *codes = nullptr;
  const void *absmax = nullptr;
  const float *state2 = nullptr;
  int kind = 0;
  int64_t block = 64;
  int64_t rows = 0, cols = 0;
  int axis = 0;
};

/// gemm() with B the quantized weight `w` (row-major [rows, cols], read
/// as desc says: ldb == cols; not batched), dequantized a panel of
/// kGemmPanel columns of op(B) at a time into a scratch of the calling
/// thread's, never whole: each thread multiplies A by its panels.
void gemmQuantizedB(const GemmDesc &desc, const float *a,
                    const QuantizedMatrix &w, float *c);
/// Columns of op(B) per dequantized panel of gemmQuantizedB.
constexpr int64_t kGemmPanel = 64;

/// Rewrites `d` as one product of batch * m rows when every batch dim
/// broadcasts B and A's matrices follow each other as rows of one taller
/// matrix ([batch..., m, k] activations times a [k, n] weight): C is dense,
/// so it is that matrix times B; otherwise leaves `d` as it is. Inline: the
/// CPU and CUDA gemm() both start with it.
inline void foldBatchIntoRows(GemmDesc &d) {
  if (d.transA || d.batchRank == 0)
    return;
  int64_t next = d.m * d.lda, batch = 1;
  for (int i = d.batchRank - 1; i >= 0; --i) {
    batch *= d.batchShape[i];
    if (d.batchShape[i] == 1)
      continue;
    if (d.bBatchStrides[i] != 0 || d.aBatchStrides[i] != next)
      return;
    next *= d.batchShape[i];
  }
  d.m *= batch;
  d.batchRank = 0;
}

/// The maximum of x[0, n) (-inf when n is 0), in 16 lanes so that it
/// vectorizes with or without OpenMP (a float max reduction is not
/// reassociated otherwise). Inline: softmax, cross-entropy and attention
/// take it per row.
inline float rowMax(const float *x, int64_t n) {
  constexpr int kLanes = 16;
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<float>::infinity());
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l)
      lanes[l] = std::max(lanes[l], x[c + l]);
  for (; c < n; ++c)
    lanes[0] = std::max(lanes[0], x[c]);
  return *std::max_element(lanes, lanes + kLanes);
}

/// y = (x - mean) * rstd * scale + bias over rows of `cols` elements
/// (bias may be null); biased variance, statistics in double.
void layerNormForward(const float *x, const float *scale, const float *bias,
                      float *y, int64_t rows, int64_t cols, double epsilon);
/// Gradients of layerNormForward (recomputing mean and rstd).
void layerNormBackward(const float *x, const float *scale, const float *dy,
                       float *dx, float *dscale, float *dbias, int64_t rows,
                       int64_t cols, double epsilon);

/// Softmax along an axis of extent `n` with `inner` elements between
/// consecutive entries, over `outer` independent blocks.
void softmaxForward(const float *x, float *y, int64_t outer, int64_t n,
                    int64_t inner);
/// dx = y * (dy - sum(dy * y)) along the same axis.
void softmaxBackward(const float *y, const float *dy, float *dx, int64_t outer,
                     int64_t n, int64_t inner);

enum class Reduction { None = 0, Sum = 1, Mean = 2 };

/// Cross-entropy of softmax(scores) over the class dim (extent `classes`)
/// of scores [outer, classes, inner] against labels [outer, inner]. `loss`
/// gets one value (Sum, Mean) or outer*inner values (None). Labels equal to
/// `ignoreIndex` (when hasIgnoreIndex) count as 0 and are not counted by
/// Mean. Labels are int64 or int32 per `labels64`. Only the first
/// `validClasses` classes count (a padded vocabulary: the rest are outside
/// the softmax; a label among them is out of range); -1: all of them.
void softmaxCrossEntropyForward(const float *scores, const void *labels,
                                bool labels64, float *loss, int64_t outer,
                                int64_t classes, int64_t inner,
                                Reduction reduction, bool hasIgnoreIndex,
                                int64_t ignoreIndex, int64_t validClasses = -1);
/// dscores of the above, given dloss (one value or outer*inner values);
/// the classes past `validClasses` get 0.
void softmaxCrossEntropyBackward(const float *scores, const void *labels,
                                 bool labels64, const float *dloss,
                                 float *dscores, int64_t outer, int64_t classes,
                                 int64_t inner, Reduction reduction,
                                 bool hasIgnoreIndex, int64_t ignoreIndex,
                                 int64_t validClasses = -1);

/// Vocab-parallel cross-entropy: scores [outer, classes, inner] are the
/// block of the classes that starts at class *offset, labels [outer, inner]
/// class numbers over all the classes, max [outer, inner] the scores' max
/// over all the classes. sumExp = sum over the block of exp(scores - max);
/// target = the label's score if the block holds it, else 0.
void crossEntropyShardStats(const float *scores, const void *labels,
                            bool labels64, const float *max,
                            const int64_t *offset, float *sumExp, float *target,
                            int64_t outer, int64_t classes, int64_t inner);
/// The block's dscores of softmaxCrossEntropyBackward, given lse [outer,
/// inner], the log of the sum of exp(scores) over all the classes:
/// (exp(scores - lse) - onehot(label - *offset)) * dloss.
void crossEntropyShardBackward(const float *scores, const void *labels,
                               bool labels64, const float *dloss,
                               const float *lse, const int64_t *offset,
                               float *dscores, int64_t outer, int64_t classes,
                               int64_t inner, Reduction reduction,
                               bool hasIgnoreIndex, int64_t ignoreIndex);

/// out[o, i, :] = data[o, idx[i], :] for data [outer, axisSize, inner]
/// (inner counted in bytes of elements: innerBytes); negative indices count
/// from the end.
void gather(const void *data, const void *indices, bool indices64, void *out,
            int64_t outer, int64_t axisSize, int64_t innerBytes,
            int64_t numIndices);
/// ddata = 0; ddata[o, idx[i], :] += dout[o, i, :].
void gatherBackward(const void *indices, bool indices64, const float *dout,
                    float *ddata, int64_t outer, int64_t axisSize,
                    int64_t inner, int64_t numIndices);

/// Strided copy: out[i] = in[offset + sum_d i_d * strides[d]] over the
/// out shape (element strides of `in`, may be negative); elementBytes (1, 2,
/// 4 or 8) each.
void stridedCopy(const void *in, void *out, int rank, const int64_t *shape,
                 const int64_t *inStrides, int64_t inOffset,
                 int64_t elementBytes);
/// Zero `out` (outElements elements), then out[offset + sum i_d strides[d]]
/// = in[i] over the in shape.
void stridedScatter(const void *in, void *out, int64_t outElements, int rank,
                    const int64_t *shape, const int64_t *outStrides,
                    int64_t outOffset, int64_t elementBytes);

/// Copies a piece of an axis: with intoBig (concat), out[o, offset + j, :] =
/// in[o, j, :] for out of axis extent bigN; otherwise (split) out[o, j, :] =
/// in[o, offset + j, :] for in of axis extent bigN; j < n, innerBytes bytes
/// per [o, j].
void copyAxisBlock(const void *in, void *out, int64_t outer, int64_t n,
                   int64_t bigN, int64_t offset, int64_t innerBytes,
                   bool intoBig);

enum class ReduceKind { Sum = 0, Mean = 1, Max = 2 };

/// The dims of a reduction, collapsed: dims of extent 1 dropped, adjacent
/// dims that are both reduced or both kept merged, in order (the shapes the
/// CPU and CUDA reduce kernels dispatch on). Inline: both targets use it.
struct ReduceGroups {
  int count = 0;
  int64_t extents[kMaxRank] = {};
  bool reduced[kMaxRank] = {};
};
inline ReduceGroups reduceGroups(int rank, const int64_t *shape,
                                 const bool *reduced) {
  ReduceGroups g;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] == 1)
      continue;
    if (g.count > 0 && g.reduced[g.count - 1] == reduced[d]) {
      g.extents[g.count - 1] *= shape[d];
    } else {
      g.extents[g.count] = shape[d];
      g.reduced[g.count++] = reduced[d];
    }
  }
  return g;
}
/// Reduces the dims with reduced[d] of `in` (shape[0..rank)); out has the
/// kept dims in order.
void reduce(ReduceKind kind, const float *in, float *out, int rank,
            const int64_t *shape, const bool *reduced);

/// dst = (accumulate ? dst : 0) + scale * src over n elements.
void accumulateInto(float *dst, const float *src, int64_t numElements,
                    float scale, bool accumulate);
/// The same on bfloat16 tensors (runtime/cpu/Math.h), computed in float and
/// rounded once per element.
void accumulateInto(bf16 *dst, const bf16 *src, int64_t numElements,
                    float scale, bool accumulate);
/// The same on IEEE half tensors given as their bits (runtime/Float16.h).
void accumulateIntoHalf(uint16_t *dst, const uint16_t *src,
                        int64_t numElements, float scale, bool accumulate);

/// y = dropout(x) of site `site` with ratio `ratio` in [0, 1) under *key
/// (runtime/support/Philox.h): x (strided) and y (contiguous) are the block
/// `block` of the logical tensor whose elements the mask is drawn over. The
/// same on bfloat16 and on IEEE half given as its bits, computed in float and
/// rounded once.
void dropout(const float *x, float *y, const DropoutBlock &block,
             const RandomKey *key, double ratio, int64_t site);
void dropout(const bf16 *x, bf16 *y, const DropoutBlock &block,
             const RandomKey *key, double ratio, int64_t site);
void dropoutHalf(const uint16_t *x, uint16_t *y, const DropoutBlock &block,
                 const RandomKey *key, double ratio, int64_t site);

/// out [rows, cols] (float) = the quantized weight (codes, absmax) of the
/// plan's `quantize` (runtime/support/Quantize.h): kind 0 NF4 in blocks of
/// `block` elements, 1 INT8 with one absmax per output feature along
/// `axis`. absmax is f32, or with double quantization (NF4, state2 not
/// null) one dynamic-map code byte per block.
void dequantize(const int8_t *codes, const void *absmax, const float *state2,
                float *out, int64_t rows, int64_t cols, int kind, int64_t block,
                int axis);

} // namespace autopar::rt::cpu

#endif // AUTOPAR_RUNTIME_CPU_KERNELS_H
