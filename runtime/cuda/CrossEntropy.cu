//===- CrossEntropy.cu - softmax cross-entropy (CUDA) ---------------------===//
//
// cuda::softmaxCrossEntropyForward and cuda::softmaxCrossEntropyBackward
// (float, bfloat16 or half scores; int32 or int64 labels; f32 loss) and
// the vocab-parallel cuda::crossEntropyShardStats and
// cuda::crossEntropyShardBackward: one block per (outer, inner) element,
// the row's max and sum of exp in one pass (a running max per thread, its
// sum rescaled as the max grows; the threads' sums added in double), over
// the first `validClasses` classes (a padded vocabulary's real ones; the
// padded classes' dscores are 0, and no pass masks them). Rows of
// contiguous classes are read in 16-byte words: the forward reads the
// logits once, the backward twice and writes dscores once. Sum and Mean losses add
// per-element losses from cuda::scratch in one block in a fixed order;
// ignored labels count nothing, labels out of range give NaN.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/KernelsCommon.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace autopar::rt::cuda {

namespace {

/// Calls f(c, x) for the thread's elements x = p[c] of a contiguous row of
/// n elements, each thread a fixed set: 16-byte loads of consecutive
/// elements from the row's first 16-byte boundary on, single elements
/// before it and after the last whole word.
template <typename S, typename F>
__device__ void forRowElements(const S *p, int64_t n, F f) {
  constexpr int kV = 16 / static_cast<int>(sizeof(S));
  const int64_t misaligned = reinterpret_cast<uintptr_t>(p) % 16;
  const int64_t head =
      min(n, misaligned ? (16 - misaligned) / static_cast<int64_t>(sizeof(S))
                        : int64_t{0});
  for (int64_t c = threadIdx.x; c < head; c += blockDim.x)
    f(c, toFloat(p[c]));
  const int64_t words = (n - head) / kV;
  for (int64_t w = threadIdx.x; w < words; w += blockDim.x) {
    S x[kV];
    loadVector<kV>(x, p + head + w * kV);
#pragma unroll
    for (int k = 0; k < kV; ++k)
      f(head + w * kV + k, toFloat(x[k]));
  }
  for (int64_t c = head + words * kV + threadIdx.x; c < n; c += blockDim.x)
    f(c, toFloat(p[c]));
}

/// max and sum of exp(s - max) over the classes of one row (class c at
/// s[c * inner]); every thread of the block gets them. One pass over the
/// row: each thread keeps a running max and its sum of exp (rescaled when
/// the max grows), then the block takes the max and adds the threads'
/// sums rescaled to it (in double, in a fixed tree).
template <typename S>
__device__ void rowLogSumExp(const S *s, int64_t classes, int64_t inner,
                             float *sharedF, double *sharedD, float &max,
                             double &sum) {
  const float kNegInf = -INFINITY;
  float mx = kNegInf, sm = 0.0f;
  auto add = [&](int64_t, float x) {
    if (x > mx) {
      sm = sm * expf(mx - x) + 1.0f;
      mx = x;
    } else if (x != kNegInf) {
      sm += expf(x - mx);
    }
  };
  if (inner == 1)
    forRowElements(s, classes, add);
  else
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      add(c, toFloat(s[c * inner]));
  max = blockReduce(mx, MaxOp(), kNegInf, sharedF);
  const double mine =
      sm > 0.0f ? static_cast<double>(sm) * exp(static_cast<double>(mx) - max)
                : 0.0;
  sum = blockReduce(mine, SumOp(), 0.0, sharedD);
}

/// Per-element losses: one block per element e = (o, i). Ignored labels
/// give 0, labels out of range NaN. Writes perElement[e] (double, for
/// Sum / Mean) or lossNone[e].
template <typename S, typename L>
__global__ void __launch_bounds__(kBlock)
    crossEntropyForwardKernel(const S *scores, const L *labels,
                              double *perElement, float *lossNone,
                              int64_t count, int64_t classes, int64_t valid,
                              int64_t inner, bool hasIgnoreIndex,
                              int64_t ignoreIndex) {
  __shared__ float sharedF[kWarp];
  __shared__ double sharedD[kWarp];
  for (int64_t e = blockIdx.x; e < count; e += gridDim.x) {
    const int64_t label = loadIndex(labels, e);
    double value = 0.0;
    // The branch depends on e only: the whole block takes it.
    if (!(hasIgnoreIndex && label == ignoreIndex)) {
      const int64_t o = e / inner, i = e % inner;
      const S *s = scores + o * classes * inner + i;
      float max;
      double sum;
      rowLogSumExp(s, valid, inner, sharedF, sharedD, max, sum);
      value = label >= 0 && label < valid
                  ? log(sum) + max - toFloat(s[label * inner])
                  : static_cast<double>(NAN);
    }
    if (threadIdx.x == 0) {
      if (perElement)
        perElement[e] = value;
      else
        lossNone[e] = static_cast<float>(value);
    }
  }
}

/// loss[0] = sum of perElement (or its mean over the labels that are not
/// ignored): one block, each thread adding a fixed strided subset, then
/// the block tree.
template <typename L>
__global__ void __launch_bounds__(kFinalBlock)
    crossEntropyReduceKernel(const double *perElement, const L *labels,
                             int64_t count, bool hasIgnoreIndex,
                             int64_t ignoreIndex, bool mean, float *loss) {
  __shared__ double sharedD[kWarp];
  __shared__ long long sharedI[kWarp];
  double total = 0;
  long long valid = 0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    total += perElement[e];
    valid += !(hasIgnoreIndex && loadIndex(labels, e) == ignoreIndex);
  }
  total = blockReduce(total, SumOp(), 0.0, sharedD);
  valid = blockReduce(valid, SumOp(), 0LL, sharedI);
  if (threadIdx.x == 0) {
    if (mean)
      total /= static_cast<double>(valid); // all ignored: 0/0 = NaN (torch)
    loss[0] = static_cast<float>(total);
  }
}

/// *valid = the number of labels that are not ignored (one block).
template <typename L>
__global__ void __launch_bounds__(kFinalBlock)
    countValidLabelsKernel(const L *labels, int64_t count, bool hasIgnoreIndex,
                           int64_t ignoreIndex, long long *valid) {
  __shared__ long long sharedI[kWarp];
  long long n = 0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x)
    n += !(hasIgnoreIndex && loadIndex(labels, e) == ignoreIndex);
  n = blockReduce(n, SumOp(), 0LL, sharedI);
  if (threadIdx.x == 0)
    *valid = n;
}

/// For a Mean reduction, the number of labels that are not ignored, counted
/// on the device into cuda::scratch; null for the other reductions.
template <typename L>
const long long *validLabels(DeviceContext &ctx, const L *labels, int64_t count,
                             Reduction reduction, bool hasIgnoreIndex,
                             int64_t ignoreIndex) {
  if (reduction != Reduction::Mean)
    return nullptr;
  long long *valid = static_cast<long long *>(scratch(ctx, sizeof(long long)));
  countValidLabelsKernel<L><<<1, kFinalBlock, 0, ctx.stream>>>(
      labels, count, hasIgnoreIndex, ignoreIndex, valid);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
  return valid;
}

/// The loop of the backward kernels, one block per element e = (o, i):
/// dscores 0 for an ignored label, else body(e, label, s, ds, g) with the
/// element's classes in scores and dscores (class c at [c * inner]) and g
/// its loss gradient (dloss[e] for Reduction::None, else dloss[0], over the
/// count of valid labels for Mean; NaN for a label out of range, below
/// validClasses, with kNaNOutOfRange).
template <bool kNaNOutOfRange, typename S, typename L, typename Body>
__device__ void
forEachBackwardElement(const S *scores, const L *labels, const float *dloss,
                       S *dscores, int64_t count, int64_t classes,
                       int64_t validClasses, int64_t inner, int reduction,
                       bool hasIgnoreIndex, int64_t ignoreIndex,
                       const long long *valid, Body body) {
  for (int64_t e = blockIdx.x; e < count; e += gridDim.x) {
    const int64_t label = loadIndex(labels, e);
    const int64_t o = e / inner, i = e % inner;
    const S *s = scores + o * classes * inner + i;
    S *ds = dscores + o * classes * inner + i;
    if (hasIgnoreIndex && label == ignoreIndex) {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        ds[c * inner] = fromFloat<S>(0.0f);
      continue;
    }
    double g =
        reduction == static_cast<int>(Reduction::None) ? dloss[e] : dloss[0];
    if (reduction == static_cast<int>(Reduction::Mean))
      g /= static_cast<double>(*valid);
    if (kNaNOutOfRange && (label < 0 || label >= validClasses))
      g = static_cast<double>(NAN);
    body(e, label, s, ds, g);
  }
}

/// dscores, one block per element e = (o, i): 0 for ignored labels,
/// (softmax - onehot) * g otherwise (NaN for labels out of range).
template <typename S, typename L>
__global__ void __launch_bounds__(kBlock)
    crossEntropyBackwardKernel(const S *scores, const L *labels,
                               const float *dloss, S *dscores,
                               int64_t count, int64_t classes,
                               int64_t validClasses, int64_t inner,
                               int reduction, bool hasIgnoreIndex,
                               int64_t ignoreIndex, const long long *valid) {
  __shared__ float sharedF[kWarp];
  __shared__ double sharedD[kWarp];
  forEachBackwardElement</*kNaNOutOfRange=*/true>(
      scores, labels, dloss, dscores, count, classes, validClasses, inner,
      reduction, hasIgnoreIndex, ignoreIndex, valid,
      [&](int64_t, int64_t label, const S *s, S *ds, double g) {
        float max;
        double sum;
        rowLogSumExp(s, validClasses, inner, sharedF, sharedD, max, sum);
        // The padded classes (c >= validClasses) are outside the softmax.
        auto grad = [&](int64_t c, float x) {
          const double p =
              c < validClasses ? static_cast<double>(expf(x - max)) / sum
                               : 0.0;
          return fromFloat<S>(static_cast<float>(
              c < validClasses ? (p - (c == label ? 1.0 : 0.0)) * g : 0.0));
        };
        constexpr int kV = 16 / static_cast<int>(sizeof(S));
        const int64_t words = classes / kV;
        if (inner == 1 && reinterpret_cast<uintptr_t>(s) % 16 == 0 &&
            reinterpret_cast<uintptr_t>(ds) % 16 == 0) {
          // Rows aligned to 16 bytes (a vocabulary padded to a multiple
          // of 8): a word of dscores from a word of scores.
          for (int64_t w = threadIdx.x; w < words; w += blockDim.x) {
            S x[kV];
            loadVector<kV>(x, s + w * kV);
#pragma unroll
            for (int k = 0; k < kV; ++k)
              x[k] = grad(w * kV + k, toFloat(x[k]));
            storeVector<kV>(ds + w * kV, x);
          }
          for (int64_t c = words * kV + threadIdx.x; c < classes;
               c += blockDim.x)
            ds[c] = grad(c, toFloat(s[c]));
        } else {
          for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
            ds[c * inner] = grad(c, toFloat(s[c * inner]));
        }
      });
}

template <typename S, typename L>
void crossEntropyForwardT(DeviceContext &ctx, const S *scores,
                          const L *labels, float *loss, int64_t count,
                          int64_t classes, int64_t valid, int64_t inner,
                          Reduction reduction, bool hasIgnoreIndex,
                          int64_t ignoreIndex) {
  if (reduction == Reduction::None) {
    if (count <= 0)
      return;
    crossEntropyForwardKernel<S, L>
        <<<rowGrid(ctx, count), kBlock, 0, ctx.stream>>>(
            scores, labels, nullptr, loss, count, classes, valid, inner,
            hasIgnoreIndex, ignoreIndex);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
    return;
  }
  double *perElement = static_cast<double *>(scratch(
      ctx, std::max<int64_t>(count, 1) * static_cast<int64_t>(sizeof(double))));
  if (count > 0) {
    crossEntropyForwardKernel<S, L>
        <<<rowGrid(ctx, count), kBlock, 0, ctx.stream>>>(
            scores, labels, perElement, nullptr, count, classes, valid, inner,
            hasIgnoreIndex, ignoreIndex);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
  }
  crossEntropyReduceKernel<L><<<1, kFinalBlock, 0, ctx.stream>>>(
      perElement, labels, std::max<int64_t>(count, 0), hasIgnoreIndex,
      ignoreIndex, reduction == Reduction::Mean, loss);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

template <typename S, typename L>
void crossEntropyBackwardT(DeviceContext &ctx, const S *scores,
                           const L *labels, const float *dloss, S *dscores,
                           int64_t count, int64_t classes,
                           int64_t validClasses, int64_t inner,
                           Reduction reduction, bool hasIgnoreIndex,
                           int64_t ignoreIndex) {
  if (count <= 0 || classes <= 0)
    return;
  const long long *valid =
      validLabels(ctx, labels, count, reduction, hasIgnoreIndex, ignoreIndex);
  crossEntropyBackwardKernel<S, L>
      <<<rowGrid(ctx, count), kBlock, 0, ctx.stream>>>(
      scores, labels, dloss, dscores, count, classes, validClasses, inner,
      static_cast<int>(reduction), hasIgnoreIndex, ignoreIndex, valid);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

/// Vocab-parallel statistics, one block per element e = (o, i).
template <typename L>
__global__ void __launch_bounds__(kBlock)
    crossEntropyShardStatsKernel(const float *scores, const L *labels,
                                 const float *max, const int64_t *offset,
                                 float *sumExp, float *target, int64_t count,
                                 int64_t classes, int64_t inner) {
  __shared__ double sharedD[kWarp];
  const int64_t first = *offset;
  for (int64_t e = blockIdx.x; e < count; e += gridDim.x) {
    const int64_t o = e / inner, i = e % inner;
    const float *s = scores + o * classes * inner + i;
    const float m = max[e];
    double sm = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      sm += expf(s[c * inner] - m);
    sm = blockReduce(sm, SumOp(), 0.0, sharedD);
    if (threadIdx.x == 0) {
      const int64_t c = loadIndex(labels, e) - first;
      sumExp[e] = static_cast<float>(sm);
      target[e] = c >= 0 && c < classes ? s[c * inner] : 0.0f;
    }
  }
}

/// The block's dscores of a vocab-parallel cross-entropy, one block per
/// element: (exp(s - lse) - onehot(label - offset)) * g, 0 when ignored.
template <typename L>
__global__ void __launch_bounds__(kBlock)
    crossEntropyShardBackwardKernel(const float *scores, const L *labels,
                                    const float *dloss, const float *lse,
                                    const int64_t *offset, float *dscores,
                                    int64_t count, int64_t classes,
                                    int64_t inner, int reduction,
                                    bool hasIgnoreIndex, int64_t ignoreIndex,
                                    const long long *valid) {
  const int64_t first = *offset;
  forEachBackwardElement</*kNaNOutOfRange=*/false>(
      scores, labels, dloss, dscores, count, classes, classes, inner,
      reduction, hasIgnoreIndex, ignoreIndex, valid,
      [&](int64_t e, int64_t label, const float *s, float *ds, double g) {
        const float gf = static_cast<float>(g), l = lse[e];
        for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
          ds[c * inner] =
              expf(s[c * inner] - l) * gf - (c == label - first ? gf : 0.0f);
      });
}

template <typename L>
void crossEntropyShardBackwardT(DeviceContext &ctx, const float *scores,
                                const L *labels, const float *dloss,
                                const float *lse, const int64_t *offset,
                                float *dscores, int64_t count, int64_t classes,
                                int64_t inner, Reduction reduction,
                                bool hasIgnoreIndex, int64_t ignoreIndex) {
  if (count <= 0 || classes <= 0)
    return;
  const long long *valid =
      validLabels(ctx, labels, count, reduction, hasIgnoreIndex, ignoreIndex);
  crossEntropyShardBackwardKernel<L>
      <<<rowGrid(ctx, count), kBlock, 0, ctx.stream>>>(
          scores, labels, dloss, lse, offset, dscores, count, classes, inner,
          static_cast<int>(reduction), hasIgnoreIndex, ignoreIndex, valid);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

/// The public entry points' label dispatch.
template <typename S>
void crossEntropyForwardS(DeviceContext &ctx, const S *scores,
                          const void *labels, bool labels64, float *loss,
                          int64_t outer, int64_t classes, int64_t inner,
                          Reduction reduction, bool hasIgnoreIndex,
                          int64_t ignoreIndex, int64_t validClasses) {
  const int64_t count = outer * inner;
  const int64_t valid = validClasses < 0 ? classes : validClasses;
  if (labels64)
    crossEntropyForwardT(ctx, scores, static_cast<const int64_t *>(labels),
                         loss, count, classes, valid, inner, reduction,
                         hasIgnoreIndex, ignoreIndex);
  else
    crossEntropyForwardT(ctx, scores, static_cast<const int32_t *>(labels),
                         loss, count, classes, valid, inner, reduction,
                         hasIgnoreIndex, ignoreIndex);
}

template <typename S>
void crossEntropyBackwardS(DeviceContext &ctx, const S *scores,
                           const void *labels, bool labels64,
                           const float *dloss, S *dscores, int64_t outer,
                           int64_t classes, int64_t inner, Reduction reduction,
                           bool hasIgnoreIndex, int64_t ignoreIndex,
                           int64_t validClasses) {
  const int64_t count = outer * inner;
  const int64_t valid = validClasses < 0 ? classes : validClasses;
  if (labels64)
    crossEntropyBackwardT(ctx, scores, static_cast<const int64_t *>(labels),
                          dloss, dscores, count, classes, valid, inner,
                          reduction, hasIgnoreIndex, ignoreIndex);
  else
    crossEntropyBackwardT(ctx, scores, static_cast<const int32_t *>(labels),
                          dloss, dscores, count, classes, valid, inner,
                          reduction, hasIgnoreIndex, ignoreIndex);
}

} // namespace

#define AUTOPAR_CROSS_ENTROPY(S)                                               \
  void softmaxCrossEntropyForward(                                             \
      DeviceContext &ctx, const S *scores, const void *labels, bool labels64,  \
      float *loss, int64_t outer, int64_t classes, int64_t inner,              \
      Reduction reduction, bool hasIgnoreIndex, int64_t ignoreIndex,           \
      int64_t validClasses) {                                                  \
    crossEntropyForwardS(ctx, scores, labels, labels64, loss, outer, classes,  \
                         inner, reduction, hasIgnoreIndex, ignoreIndex,        \
                         validClasses);                                        \
  }                                                                            \
  void softmaxCrossEntropyBackward(                                            \
      DeviceContext &ctx, const S *scores, const void *labels, bool labels64,  \
      const float *dloss, S *dscores, int64_t outer, int64_t classes,          \
      int64_t inner, Reduction reduction, bool hasIgnoreIndex,                 \
      int64_t ignoreIndex, int64_t validClasses) {                             \
    crossEntropyBackwardS(ctx, scores, labels, labels64, dloss, dscores,       \
                          outer, classes, inner, reduction, hasIgnoreIndex,    \
                          ignoreIndex, validClasses);                          \
  }
AUTOPAR_CUDA_FOR_EACH_TYPE(AUTOPAR_CROSS_ENTROPY)
#undef AUTOPAR_CROSS_ENTROPY

void crossEntropyShardStats(DeviceContext &ctx, const float *scores,
                            const void *labels, bool labels64, const float *max,
                            const int64_t *offset, float *sumExp, float *target,
                            int64_t outer, int64_t classes, int64_t inner) {
  const int64_t count = outer * inner;
  if (count <= 0)
    return;
  if (labels64)
    crossEntropyShardStatsKernel<<<rowGrid(ctx, count), kBlock, 0,
                                   ctx.stream>>>(
        scores, static_cast<const int64_t *>(labels), max, offset, sumExp,
        target, count, classes, inner);
  else
    crossEntropyShardStatsKernel<<<rowGrid(ctx, count), kBlock, 0,
                                   ctx.stream>>>(
        scores, static_cast<const int32_t *>(labels), max, offset, sumExp,
        target, count, classes, inner);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

void crossEntropyShardBackward(DeviceContext &ctx, const float *scores,
                               const void *labels, bool labels64,
                               const float *dloss, const float *lse,
                               const int64_t *offset, float *dscores,
                               int64_t outer, int64_t classes, int64_t inner,
                               Reduction reduction, bool hasIgnoreIndex,
                               int64_t ignoreIndex) {
  const int64_t count = outer * inner;
  if (labels64)
    crossEntropyShardBackwardT(
        ctx, scores, static_cast<const int64_t *>(labels), dloss, lse, offset,
        dscores, count, classes, inner, reduction, hasIgnoreIndex, ignoreIndex);
  else
    crossEntropyShardBackwardT(
        ctx, scores, static_cast<const int32_t *>(labels), dloss, lse, offset,
        dscores, count, classes, inner, reduction, hasIgnoreIndex, ignoreIndex);
}

} // namespace autopar::rt::cuda
