//===- Kernels.cpp - CPU kernels of the emitted programs ------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Blas.h"
#include "runtime/cpu/Math.h"
#include "runtime/support/Philox.h"
#include "runtime/support/Quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <sched.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace autopar::rt::cpu {

namespace {

/// Offset of batch index `b` given per-dim strides.
int64_t batchOffset(const GemmDesc &d, int64_t b, const int64_t *strides) {
  int64_t offset = 0;
  for (int i = d.batchRank - 1; i >= 0; --i) {
    int64_t extent = d.batchShape[i];
    offset += (b % extent) * strides[i];
    b /= extent;
  }
  return offset;
}

int64_t labelAt(const void *labels, bool labels64, int64_t i) {
  return labels64 ? static_cast<const int64_t *>(labels)[i]
                  : static_cast<const int32_t *>(labels)[i];
}

int64_t indexAt(const void *indices, bool indices64, int64_t i,
                int64_t axisSize) {
  int64_t idx = labelAt(indices, indices64, i);
  return idx < 0 ? idx + axisSize : idx;
}

} // namespace

#ifndef AUTOPAR_RT_NO_BLAS
namespace {

/// The x86 vector level of what this CPU runs: 3 AVX-512 (F, BW, VL, DQ:
/// oneDNN's avx512_core), 2 AVX2 + FMA, 0 neither.
int cpuVectorLevel() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return 3;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return 2;
  return 0;
}

const char *levelName(int level) {
  return level == 3 ? "AVX-512" : level == 2 ? "AVX2" : "SSE";
}

/// The instruction set oneDNN generates its kernels for (the CPU's, unless
/// ONEDNN_MAX_CPU_ISA caps it), by name, and its vector level as above.
struct DnnlIsa {
  const char *name;
  int level;
};

DnnlIsa dnnlIsa() {
  const unsigned isa = dnnl_get_effective_cpu_isa();
  // Widest first: each set's bits include those of the sets it extends.
  static const struct {
    unsigned bits;
    DnnlIsa isa;
  } sets[] = {{dnnl_cpu_isa_avx512_core_amx, {"avx512_core_amx", 3}},
              {dnnl_cpu_isa_avx512_core_bf16, {"avx512_core_bf16", 3}},
              {dnnl_cpu_isa_avx512_core_vnni, {"avx512_core_vnni", 3}},
              {dnnl_cpu_isa_avx512_core, {"avx512_core", 3}},
              {dnnl_cpu_isa_avx2_vnni, {"avx2_vnni", 2}},
              {dnnl_cpu_isa_avx2, {"avx2", 2}},
              {dnnl_cpu_isa_avx, {"avx", 0}},
              {dnnl_cpu_isa_sse41, {"sse41", 0}}};
  for (const auto &set : sets)
    if ((isa & set.bits) == set.bits)
      return set.isa;
  return {"generic", 0};
}

} // namespace
#endif

std::string blasDescription() {
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  const std::string tail = ", " + std::to_string(threads) + " OpenMP threads";
#ifdef AUTOPAR_RT_NO_BLAS
  return "reference loops" + tail;
#else
  const dnnl_version_t *v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) +
         "." + std::to_string(v->patch) + ", " + dnnlIsa().name + " kernels" +
         tail;
#endif
}

std::string blasKernelWarning() {
#ifdef AUTOPAR_RT_NO_BLAS
  return "";
#else
  const DnnlIsa used = dnnlIsa();
  const int best = cpuVectorLevel();
  if (used.level >= best)
    return "";
  std::string setting = "the environment";
  for (const char *name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char *v = std::getenv(name); v && *v) {
      setting = std::string(name) + "=" + v;
      break;
    }
  return setting + " makes oneDNN multiply with its " + used.name +
         " kernels, but this CPU runs " + levelName(best) +
         ": matrix products run slower than they can (a GPT step 1.9x "
         "slower with avx2 kernels on an AVX-512 CPU, docs/training.md); "
         "unset it and train picks the CPU's kernels";
#endif
}

void setRankThreads(char **argv) {
  int ranks = 1;
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char *v = std::getenv(name); v && std::atoi(v) > 0) {
      ranks = std::atoi(v);
      break;
    }
  if (ranks <= 1) {
    // One process: its OpenMP threads bound to the cores (OMP_PROC_BIND),
    // unless the user placed them. Unbound, with another process busy on
    // one of 2 cores, the scheduler at times stacked both threads there: a
    // GPT step 2.7-3.6x slower instead of 2.0x (docs/training.md).
    if (!std::getenv("OMP_PROC_BIND") && !std::getenv("OMP_PLACES") &&
        !std::getenv("GOMP_CPU_AFFINITY")) {
      setenv("OMP_PROC_BIND", "true", 1);
      execv("/proc/self/exe", argv); // returns only on failure: run as is
    }
    return;
  }
  int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    cores = CPU_COUNT(&set);
  cores = std::max(cores, 1);
  bool changed = false;
  int threads = 0;
  if (const char *v = std::getenv("OMP_NUM_THREADS"); v && *v) {
    threads = std::atoi(v);
  } else {
    threads = std::max(1, cores / ranks);
    setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
    changed = true;
  }
  // Bound to a core each (mpirun's default for 2 ranks), the ranks share
  // nothing: `cores` is then this rank's own.
  const bool bound = cores < static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  const int sharing = bound ? 1 : ranks;
  if (!std::getenv("OMP_WAIT_POLICY") &&
      static_cast<int64_t>(sharing) * std::max(threads, 1) > cores) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    changed = true;
  }
  if (changed)
    execv("/proc/self/exe", argv); // returns only on failure: run as is
}

void gemm(const GemmDesc &desc, const float *a, const float *b, float *c) {
  // [batch..., m, k] x [k, n] as one product: one packing of B, and larger
  // blocks per thread.
  GemmDesc d = desc;
  foldBatchIntoRows(d);
  int64_t batch = 1;
  for (int i = 0; i < d.batchRank; ++i)
    batch *= d.batchShape[i];
  const bool ta = d.transA, tb = d.transB;
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  double flops = 2.0 * batch * d.m * d.n * d.k;
  if (threads == 1 || flops < 2e5) {
    for (int64_t i = 0; i < batch; ++i)
      sgemm(ta, tb, d.m, d.n, d.k, d.alpha,
            a + batchOffset(d, i, d.aBatchStrides), d.lda,
            b + batchOffset(d, i, d.bBatchStrides), d.ldb, 0.0f,
            c + i * d.m * d.n, d.n);
    return;
  }
  if (batch >= threads) {
#pragma omp parallel for schedule(dynamic)
    for (int64_t i = 0; i < batch; ++i)
      sgemm(ta, tb, d.m, d.n, d.k, d.alpha,
            a + batchOffset(d, i, d.aBatchStrides), d.lda,
            b + batchOffset(d, i, d.bBatchStrides), d.ldb, 0.0f,
            c + i * d.m * d.n, d.n);
    return;
  }
  // One product whose inner extent is the shortest (k <= m, n): oneDNN
  // cuts it over the threads itself, which shares the packed panels
  // between them (a block of rows per thread packs all of B). On the
  // bench/cpu_step products of that kind it left k whole (bitwise the same
  // C as a block of rows per thread; it cut k only for one with k > n) and
  // was up to 14% faster (1024 x 1024 x 256: 498 against 436 GFLOP/s).
  if (batch == 1 && d.k <= std::min(d.m, d.n)) {
    sgemm(ta, tb, d.m, d.n, d.k, d.alpha, a, d.lda, b, d.ldb, 0.0f, c, d.n,
          /*threaded=*/true);
    return;
  }
  // Other large products: each thread computes a block of rows of C (or of
  // columns, when C has fewer rows than columns).
  bool byRows = d.m >= d.n;
  for (int64_t i = 0; i < batch; ++i) {
    const float *ai = a + batchOffset(d, i, d.aBatchStrides);
    const float *bi = b + batchOffset(d, i, d.bBatchStrides);
    float *ci = c + i * d.m * d.n;
#pragma omp parallel num_threads(threads)
    {
      int t = 0;
#ifdef _OPENMP
      t = omp_get_thread_num();
#endif
      int64_t extent = byRows ? d.m : d.n;
      // Blocks of 16 keep the kernels' register tiles whole.
      int64_t units = (extent + 15) / 16;
      int64_t lo = std::min(extent, units * t / threads * 16);
      int64_t hi = std::min(extent, units * (t + 1) / threads * 16);
      if (hi > lo) {
        if (byRows)
          sgemm(ta, tb, hi - lo, d.n, d.k, d.alpha,
                ai + (d.transA ? lo : lo * d.lda), d.lda, bi, d.ldb, 0.0f,
                ci + lo * d.n, d.n);
        else
          sgemm(ta, tb, d.m, hi - lo, d.k, d.alpha, ai, d.lda,
                bi + (d.transB ? lo * d.ldb : lo), d.ldb, 0.0f, ci + lo, d.n);
      }
    }
  }
}

void gemmQuantizedB(const GemmDesc &desc, const float *a,
                    const QuantizedMatrix &w, float *c) {
  GemmDesc d = desc;
  foldBatchIntoRows(d);
  int64_t batch = 1;
  for (int i = 0; i < d.batchRank; ++i)
    batch *= d.batchShape[i];
  const int64_t panels = (d.n + kGemmPanel - 1) / kGemmPanel;
  // op(B)[kk][j] is w's element kk * cols + j, or j * cols + kk through
  // the transpose: a panel of columns of op(B) is a block of w's rows
  // (contiguous) or of its columns.
  auto element = [&](int64_t e) {
    return dequantizeElement(w.codes, w.absmax, w.state2, w.kind, w.block,
                             w.cols, w.axis, e);
  };
  // Product (i, p): batch entry i times panel p, on the calling thread or,
  // with `threaded`, cut by oneDNN over every thread.
  auto product = [&](int64_t i, int64_t p, std::vector<float> &panel,
                     bool threaded) {
    const int64_t j0 = p * kGemmPanel, nb = std::min(kGemmPanel, d.n - j0);
    if (d.transB) {
      // Rows j0 .. j0 + nb of w, [nb, k].
      for (int64_t e = 0; e < nb * d.k; ++e)
        panel[e] = element(j0 * w.cols + e);
    } else {
      // Columns j0 .. j0 + nb of w, [k, nb].
      for (int64_t kk = 0; kk < d.k; ++kk)
        for (int64_t j = 0; j < nb; ++j)
          panel[kk * nb + j] = element(kk * w.cols + j0 + j);
    }
    sgemm(d.transA, d.transB, d.m, nb, d.k, d.alpha,
          a + batchOffset(d, i, d.aBatchStrides), d.lda, panel.data(),
          d.transB ? d.k : nb, 0.0f, c + i * d.m * d.n + j0, d.n, threaded);
  };
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  const double flops = 2.0 * batch * d.m * d.n * d.k;
  // Fewer products than threads (a narrow weight): one at a time, each
  // over every thread; otherwise a product per thread at a time.
  if (threads == 1 || flops < 2e5 || batch * panels < threads) {
    std::vector<float> panel(static_cast<size_t>(kGemmPanel * d.k));
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t p = 0; p < panels; ++p)
        product(i, p, panel, /*threaded=*/threads > 1 && flops >= 2e5);
    return;
  }
#pragma omp parallel
  {
    std::vector<float> panel(static_cast<size_t>(kGemmPanel * d.k));
#pragma omp for schedule(dynamic) collapse(2)
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t p = 0; p < panels; ++p)
        product(i, p, panel, /*threaded=*/false);
  }
}

/// Mean and 1 / sqrt(biased variance + epsilon) of one row, in double.
static inline void rowStatistics(const float *xr, int64_t cols,
                                 double epsilon, double &mean, double &rstd) {
  double sum = 0, sq = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < cols; ++j)
    sum += xr[j];
  const double m = sum / cols;
#pragma omp simd reduction(+ : sq)
  for (int64_t j = 0; j < cols; ++j) {
    double dv = xr[j] - m;
    sq += dv * dv;
  }
  mean = m;
  rstd = 1.0 / std::sqrt(sq / cols + epsilon);
}

void layerNormForward(const float *x, const float *scale, const float *bias,
                      float *y, int64_t rows, int64_t cols, double epsilon) {
#pragma omp parallel for if (rows * cols > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    double mean, rstdD;
    rowStatistics(xr, cols, epsilon, mean, rstdD);
    float m = static_cast<float>(mean);
    float rstd = static_cast<float>(rstdD);
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      float v = (xr[j] - m) * rstd * scale[j];
      yr[j] = bias ? v + bias[j] : v;
    }
  }
}

void layerNormBackward(const float *x, const float *scale, const float *dy,
                       float *dx, float *dscale, float *dbias, int64_t rows,
                       int64_t cols, double epsilon) {
  // Per row in float (twice the vector width of double), from the row
  // statistics in double. dscale and dbias: float partial sums over blocks
  // of kFold rows, added into per-thread double totals, then over the
  // threads in order.
  constexpr int64_t kFold = 32;
  int threads = 1;
#ifdef _OPENMP
  threads = rows * cols > 16384 ? omp_get_max_threads() : 1;
#endif
  std::vector<double> partial(static_cast<size_t>(threads) * 2 * cols, 0.0);
#pragma omp parallel num_threads(threads)
  {
    int t = 0;
#ifdef _OPENMP
    t = omp_get_thread_num();
#endif
    double *ts = partial.data() + static_cast<size_t>(t) * 2 * cols;
    double *tb = ts + cols;
    std::vector<float> block(2 * cols, 0.0f);
    float *ps = block.data(), *pb = ps + cols;
    int64_t pending = 0;
    auto fold = [&] {
      for (int64_t j = 0; j < cols; ++j) {
        ts[j] += ps[j];
        tb[j] += pb[j];
        ps[j] = pb[j] = 0.0f;
      }
      pending = 0;
    };
#pragma omp for
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x + r * cols, *gr = dy + r * cols;
      float *dxr = dx + r * cols;
      double meanD, rstdD;
      rowStatistics(xr, cols, epsilon, meanD, rstdD);
      const float mean = static_cast<float>(meanD);
      const float rstd = static_cast<float>(rstdD);
      float sumGh = 0, sumGhXhat = 0;
#pragma omp simd reduction(+ : sumGh, sumGhXhat)
      for (int64_t j = 0; j < cols; ++j) {
        const float xhat = (xr[j] - mean) * rstd;
        const float gh = gr[j] * scale[j];
        sumGh += gh;
        sumGhXhat += gh * xhat;
        ps[j] += gr[j] * xhat;
        pb[j] += gr[j];
      }
      const float n = static_cast<float>(cols), k = rstd / n;
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) {
        const float xhat = (xr[j] - mean) * rstd;
        const float gh = gr[j] * scale[j];
        dxr[j] = k * (n * gh - sumGh - xhat * sumGhXhat);
      }
      if (++pending == kFold)
        fold();
    }
    fold();
  }
  for (int64_t j = 0; j < cols; ++j) {
    double s = 0, bsum = 0;
    for (int t = 0; t < threads; ++t) {
      s += partial[static_cast<size_t>(t) * 2 * cols + j];
      bsum += partial[static_cast<size_t>(t) * 2 * cols + cols + j];
    }
    dscale[j] = static_cast<float>(s);
    dbias[j] = static_cast<float>(bsum);
  }
}

/// sum_j exp(x[j] - max) in float (libmvec's expf, per-lane partial sums);
/// the terms go to `e` unless it is null.
static inline float rowExpSum(const float *x, int64_t n, float max, float *e) {
  float sum = 0;
  if (e) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      const float v = expf(x[j] - max);
      e[j] = v;
      sum += v;
    }
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j)
      sum += expf(x[j] - max);
  }
  return sum;
}

void softmaxForward(const float *x, float *y, int64_t outer, int64_t n,
                    int64_t inner) {
  if (inner == 1) {
    // Rows along the last axis: vectorized max, exp (libmvec) and scale.
#pragma omp parallel for if (outer * n > 16384)
    for (int64_t o = 0; o < outer; ++o) {
      const float *xr = x + o * n;
      float *yr = y + o * n;
      const float sum = rowExpSum(xr, n, rowMax(xr, n), yr);
      float inv = 1.0f / sum;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        yr[j] *= inv;
    }
    return;
  }
#pragma omp parallel for collapse(2) if (outer * n * inner > 16384)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float *xr = x + o * n * inner + i;
      float *yr = y + o * n * inner + i;
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j)
        max = std::max(max, xr[j * inner]);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        float e = std::exp(xr[j * inner] - max);
        yr[j * inner] = e;
        sum += e;
      }
      float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < n; ++j)
        yr[j * inner] *= inv;
    }
}

void softmaxBackward(const float *y, const float *dy, float *dx, int64_t outer,
                     int64_t n, int64_t inner) {
#pragma omp parallel for collapse(2) if (outer * n * inner > 16384)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * n * inner + i;
      double dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j < n; ++j)
        dot += static_cast<double>(y[base + j * inner]) * dy[base + j * inner];
      float d = static_cast<float>(dot);
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        dx[base + j * inner] = y[base + j * inner] * (dy[base + j * inner] - d);
    }
}

/// sum_c exp(s[c * inner] - max) in double, with `max` the largest of the
/// `classes` scores s[c * inner].
static inline double stridedExpSum(const float *s, int64_t classes,
                                   int64_t inner, float &max) {
  max = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < classes; ++c)
    max = std::max(max, s[c * inner]);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c)
    sum += std::exp(static_cast<double>(s[c * inner]) - max);
  return sum;
}

void softmaxCrossEntropyForward(const float *scores, const void *labels,
                                bool labels64, float *loss, int64_t outer,
                                int64_t classes, int64_t inner,
                                Reduction reduction, bool hasIgnoreIndex,
                                int64_t ignoreIndex, int64_t validClasses) {
  const int64_t valid = validClasses < 0 ? classes : validClasses;
  int64_t count = outer * inner;
  std::vector<double> perElement(count);
  int64_t counted = 0;
#pragma omp parallel for reduction(+ : counted) if (count * classes > 16384)
  for (int64_t e = 0; e < count; ++e) {
    int64_t o = e / inner, i = e % inner;
    int64_t label = labelAt(labels, labels64, e);
    if (hasIgnoreIndex && label == ignoreIndex) {
      perElement[e] = 0;
      continue;
    }
    ++counted;
    if (label < 0 || label >= valid) {
      perElement[e] = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    const float *s = scores + o * classes * inner + i;
    if (inner == 1) {
      // Classes contiguous: vectorized max and exp (libmvec).
      const float max = rowMax(s, valid);
      const float sum = rowExpSum(s, valid, max, nullptr);
      perElement[e] = std::log(static_cast<double>(sum)) + max - s[label];
      continue;
    }
    float max;
    const double sum = stridedExpSum(s, valid, inner, max);
    perElement[e] = std::log(sum) + max - s[label * inner];
  }
  if (reduction == Reduction::None) {
    for (int64_t e = 0; e < count; ++e)
      loss[e] = static_cast<float>(perElement[e]);
    return;
  }
  double total = 0;
  for (double v : perElement)
    total += v;
  if (reduction == Reduction::Mean)
    total /= static_cast<double>(counted); // all ignored: 0/0 = NaN (torch)
  loss[0] = static_cast<float>(total);
}

void softmaxCrossEntropyBackward(const float *scores, const void *labels,
                                 bool labels64, const float *dloss,
                                 float *dscores, int64_t outer, int64_t classes,
                                 int64_t inner, Reduction reduction,
                                 bool hasIgnoreIndex, int64_t ignoreIndex,
                                 int64_t validClasses) {
  const int64_t validC = validClasses < 0 ? classes : validClasses;
  int64_t count = outer * inner;
  int64_t valid = count;
  if (hasIgnoreIndex) {
    valid = 0;
    for (int64_t e = 0; e < count; ++e)
      valid += labelAt(labels, labels64, e) != ignoreIndex;
  }
#pragma omp parallel for if (count * classes > 16384)
  for (int64_t e = 0; e < count; ++e) {
    int64_t o = e / inner, i = e % inner;
    int64_t label = labelAt(labels, labels64, e);
    const float *s = scores + o * classes * inner + i;
    float *ds = dscores + o * classes * inner + i;
    if (hasIgnoreIndex && label == ignoreIndex) {
      for (int64_t c = 0; c < classes; ++c)
        ds[c * inner] = 0.0f;
      continue;
    }
    double g = reduction == Reduction::None ? dloss[e] : dloss[0];
    if (reduction == Reduction::Mean)
      g /= static_cast<double>(valid);
    // The padded classes are outside the softmax.
    for (int64_t c = validC; c < classes; ++c)
      ds[c * inner] = 0.0f;
    if (label < 0 || label >= validC)
      g = std::numeric_limits<double>::quiet_NaN();
    if (inner == 1) {
      // ds = (exp(s - max) / sum - onehot) * g, vectorized.
      const float max = rowMax(s, validC);
      const float sum = rowExpSum(s, validC, max, ds);
      const float pg = static_cast<float>(g / sum), gf = static_cast<float>(g);
#pragma omp simd
      for (int64_t c = 0; c < validC; ++c)
        ds[c] *= pg;
      if (label >= 0 && label < validC)
        ds[label] -= gf;
      continue;
    }
    float max;
    const double sum = stridedExpSum(s, validC, inner, max);
    for (int64_t c = 0; c < validC; ++c) {
      double p = std::exp(static_cast<double>(s[c * inner]) - max) / sum;
      ds[c * inner] = static_cast<float>((p - (c == label ? 1.0 : 0.0)) * g);
    }
  }
}

void crossEntropyShardStats(const float *scores, const void *labels,
                            bool labels64, const float *max,
                            const int64_t *offset, float *sumExp, float *target,
                            int64_t outer, int64_t classes, int64_t inner) {
  int64_t count = outer * inner;
  const int64_t first = *offset;
#pragma omp parallel for if (count * classes > 16384)
  for (int64_t e = 0; e < count; ++e) {
    int64_t o = e / inner, i = e % inner;
    const float *s = scores + o * classes * inner + i;
    int64_t c = labelAt(labels, labels64, e) - first;
    target[e] = c >= 0 && c < classes ? s[c * inner] : 0.0f;
    if (inner == 1) {
      sumExp[e] = rowExpSum(s, classes, max[e], nullptr);
      continue;
    }
    double sum = 0;
    for (int64_t k = 0; k < classes; ++k)
      sum += std::exp(static_cast<double>(s[k * inner]) - max[e]);
    sumExp[e] = static_cast<float>(sum);
  }
}

void crossEntropyShardBackward(const float *scores, const void *labels,
                               bool labels64, const float *dloss,
                               const float *lse, const int64_t *offset,
                               float *dscores, int64_t outer, int64_t classes,
                               int64_t inner, Reduction reduction,
                               bool hasIgnoreIndex, int64_t ignoreIndex) {
  int64_t count = outer * inner;
  int64_t valid = count;
  if (hasIgnoreIndex) {
    valid = 0;
    for (int64_t e = 0; e < count; ++e)
      valid += labelAt(labels, labels64, e) != ignoreIndex;
  }
  const int64_t first = *offset;
#pragma omp parallel for if (count * classes > 16384)
  for (int64_t e = 0; e < count; ++e) {
    int64_t o = e / inner, i = e % inner;
    int64_t label = labelAt(labels, labels64, e);
    const float *s = scores + o * classes * inner + i;
    float *ds = dscores + o * classes * inner + i;
    if (hasIgnoreIndex && label == ignoreIndex) {
      for (int64_t c = 0; c < classes; ++c)
        ds[c * inner] = 0.0f;
      continue;
    }
    double g = reduction == Reduction::None ? dloss[e] : dloss[0];
    if (reduction == Reduction::Mean)
      g /= static_cast<double>(valid);
    const float gf = static_cast<float>(g), l = lse[e];
#pragma omp simd
    for (int64_t c = 0; c < classes; ++c)
      ds[c * inner] = expf(s[c * inner] - l) * gf;
    int64_t c = label - first;
    if (c >= 0 && c < classes)
      ds[c * inner] -= gf;
  }
}

void gather(const void *data, const void *indices, bool indices64, void *out,
            int64_t outer, int64_t axisSize, int64_t innerBytes,
            int64_t numIndices) {
  const char *src = static_cast<const char *>(data);
  char *dst = static_cast<char *>(out);
#pragma omp parallel for collapse(2) if (outer * numIndices * innerBytes >     \
                                         65536)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < numIndices; ++i) {
      int64_t idx = indexAt(indices, indices64, i, axisSize);
      std::memcpy(dst + (o * numIndices + i) * innerBytes,
                  src + (o * axisSize + idx) * innerBytes, innerBytes);
    }
}

void gatherBackward(const void *indices, bool indices64, const float *dout,
                    float *ddata, int64_t outer, int64_t axisSize,
                    int64_t inner, int64_t numIndices) {
  std::memset(ddata, 0, sizeof(float) * outer * axisSize * inner);
  // Threads own disjoint column ranges, so duplicate indices never race.
#pragma omp parallel
  {
    int t = 0, nt = 1;
#ifdef _OPENMP
    t = omp_get_thread_num();
    nt = omp_get_num_threads();
#endif
    int64_t lo = inner * t / nt, hi = inner * (t + 1) / nt;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < numIndices; ++i) {
        int64_t idx = indexAt(indices, indices64, i, axisSize);
        const float *g = dout + (o * numIndices + i) * inner;
        float *d = ddata + (o * axisSize + idx) * inner;
        for (int64_t j = lo; j < hi; ++j)
          d[j] += g[j];
      }
  }
}

namespace {
/// Calls f(linear index, strided offset) over `shape` in row-major order.
template <typename F>
void forEachStrided(int rank, const int64_t *shape, const int64_t *strides,
                    int64_t base, F f) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d)
    total *= shape[d];
  if (total == 0)
    return;
  int64_t inner = rank ? shape[rank - 1] : 1;
  int64_t innerStride = rank ? strides[rank - 1] : 0;
  int64_t rows = total / inner;
#pragma omp parallel for if (total > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = base, rem = r;
    for (int d = rank - 2; d >= 0; --d) {
      offset += (rem % shape[d]) * strides[d];
      rem /= shape[d];
    }
    for (int64_t j = 0; j < inner; ++j)
      f(r * inner + j, offset + j * innerStride);
  }
}

/// out[i] = in[offset + strided(i)] (gather) or out[offset + strided(i)] =
/// in[i] (scatter) over `shape`, for elements of T.
template <typename T, bool Scatter>
void stridedMoveT(const void *in, void *out, int rank, const int64_t *shape,
                  const int64_t *strides, int64_t offset) {
  const T *src = static_cast<const T *>(in);
  T *dst = static_cast<T *>(out);
  forEachStrided(rank, shape, strides, offset, [&](int64_t i, int64_t s) {
    if constexpr (Scatter)
      dst[s] = src[i];
    else
      dst[i] = src[s];
  });
}

/// stridedMoveT for elements of 1, 2, 4 or 8 bytes.
template <bool Scatter>
void stridedMove(const void *in, void *out, int rank, const int64_t *shape,
                 const int64_t *strides, int64_t offset,
                 int64_t elementBytes) {
  switch (elementBytes) {
  case 1:
    return stridedMoveT<uint8_t, Scatter>(in, out, rank, shape, strides,
                                          offset);
  case 2:
    return stridedMoveT<uint16_t, Scatter>(in, out, rank, shape, strides,
                                           offset);
  case 4:
    return stridedMoveT<uint32_t, Scatter>(in, out, rank, shape, strides,
                                           offset);
  default:
    return stridedMoveT<uint64_t, Scatter>(in, out, rank, shape, strides,
                                           offset);
  }
}
} // namespace

void stridedCopy(const void *in, void *out, int rank, const int64_t *shape,
                 const int64_t *inStrides, int64_t inOffset,
                 int64_t elementBytes) {
  // Drop unit dims and merge dims that are contiguous in the input.
  int64_t dims[kMaxRank], strides[kMaxRank];
  int n = 0;
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) {
    total *= shape[d];
    if (shape[d] == 1)
      continue;
    if (n > 0 && strides[n - 1] == inStrides[d] * shape[d]) {
      dims[n - 1] *= shape[d];
      strides[n - 1] = inStrides[d];
    } else {
      dims[n] = shape[d];
      strides[n++] = inStrides[d];
    }
  }
  if (total == 0)
    return;
  const char *src = static_cast<const char *>(in) + inOffset * elementBytes;
  char *dst = static_cast<char *>(out);
  if (n == 0) {
    std::memcpy(dst, src, elementBytes);
    return;
  }
  if (strides[n - 1] == 1) {
    // Rows contiguous in the input: one memcpy per row.
    int64_t inner = dims[n - 1], rows = total / inner;
    int64_t rowBytes = inner * elementBytes;
#pragma omp parallel for if (total > 65536)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t offset = 0, rem = r;
      for (int d = n - 2; d >= 0; --d) {
        offset += (rem % dims[d]) * strides[d];
        rem /= dims[d];
      }
      std::memcpy(dst + r * rowBytes, src + offset * elementBytes, rowBytes);
    }
    return;
  }
  if (n >= 2 && strides[n - 2] == 1 && elementBytes == 4) {
    // A transpose of the two innermost dims: copy 32x32 tiles.
    int64_t rowsOut = dims[n - 2], colsOut = dims[n - 1];
    int64_t colStride = strides[n - 1];
    int64_t planes = total / (rowsOut * colsOut);
    const uint32_t *s32 = reinterpret_cast<const uint32_t *>(src);
    uint32_t *d32 = reinterpret_cast<uint32_t *>(dst);
    int64_t tilesR = (rowsOut + 31) / 32, tilesC = (colsOut + 31) / 32;
#pragma omp parallel for collapse(2) if (total > 65536)
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t t = 0; t < tilesR * tilesC; ++t) {
        int64_t base = 0, rem = p;
        for (int d = n - 3; d >= 0; --d) {
          base += (rem % dims[d]) * strides[d];
          rem /= dims[d];
        }
        int64_t r0 = t / tilesC * 32, c0 = t % tilesC * 32;
        int64_t r1 = std::min(rowsOut, r0 + 32), c1 = std::min(colsOut, c0 + 32);
        uint32_t *o = d32 + p * rowsOut * colsOut;
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t r = r0; r < r1; ++r)
            o[r * colsOut + c] = s32[base + r + c * colStride];
      }
    return;
  }
  stridedMove</*Scatter=*/false>(in, out, rank, shape, inStrides, inOffset,
                                 elementBytes);
}

void stridedScatter(const void *in, void *out, int64_t outElements, int rank,
                    const int64_t *shape, const int64_t *outStrides,
                    int64_t outOffset, int64_t elementBytes) {
  std::memset(out, 0, outElements * elementBytes);
  stridedMove</*Scatter=*/true>(in, out, rank, shape, outStrides, outOffset,
                                elementBytes);
}

void copyAxisBlock(const void *in, void *out, int64_t outer, int64_t n,
                   int64_t bigN, int64_t offset, int64_t innerBytes,
                   bool intoBig) {
  const char *src = static_cast<const char *>(in);
  char *dst = static_cast<char *>(out);
  int64_t chunk = n * innerBytes;
#pragma omp parallel for if (outer * chunk > 65536)
  for (int64_t o = 0; o < outer; ++o) {
    if (intoBig)
      std::memcpy(dst + (o * bigN + offset) * innerBytes, src + o * chunk,
                  chunk);
    else
      std::memcpy(dst + o * chunk, src + (o * bigN + offset) * innerBytes,
                  chunk);
  }
}

void reduce(ReduceKind kind, const float *in, float *out, int rank,
            const int64_t *shape, const bool *reduced) {
  // Alternating kept/reduced groups; the common cases are [reduced, kept]
  // (bias gradients) and [kept, reduced] (row statistics).
  const ReduceGroups g = reduceGroups(rank, shape, reduced);
  if (g.count == 0) {
    out[0] = in[0];
    return;
  }
  auto finish = [kind](double acc, int64_t n) {
    return static_cast<float>(kind == ReduceKind::Mean ? acc / n : acc);
  };
  bool isMax = kind == ReduceKind::Max;
  auto combine = [isMax](double acc, float v) {
    if (!isMax)
      return acc + v;
    return std::isnan(v) || v > acc ? static_cast<double>(v) : acc;
  };
  double init = isMax ? -std::numeric_limits<double>::infinity() : 0.0;
  if (g.count <= 2 && g.reduced[0] && (g.count == 1 || !g.reduced[1])) {
    // [rows reduced, cols kept]: column reductions.
    // Blocks of kBlock columns are the tasks (a 256-wide bias gradient
    // still has several); each column is summed over the rows in order.
    constexpr int64_t kBlock = 64;
    int64_t rows = g.extents[0], cols = g.count == 2 ? g.extents[1] : 1;
    int64_t blocks = (cols + kBlock - 1) / kBlock;
#pragma omp parallel for if (rows * cols > 16384)
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t j0 = block * kBlock, width = std::min(cols - j0, kBlock);
      double acc[kBlock];
      std::fill(acc, acc + width, init);
      if (isMax) {
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < width; ++j)
            acc[j] = combine(acc[j], in[r * cols + j0 + j]);
      } else {
        for (int64_t r = 0; r < rows; ++r) {
          const float *row = in + r * cols + j0;
#pragma omp simd
          for (int64_t j = 0; j < width; ++j)
            acc[j] += row[j];
        }
      }
      for (int64_t j = 0; j < width; ++j)
        out[j0 + j] = finish(acc[j], rows);
    }
    return;
  }
  if (g.count == 2 && !g.reduced[0] && g.reduced[1]) {
    // [rows kept, cols reduced]: row reductions.
    int64_t rows = g.extents[0], cols = g.extents[1];
#pragma omp parallel for if (rows * cols > 16384)
    for (int64_t r = 0; r < rows; ++r) {
      double acc = init;
      for (int64_t j = 0; j < cols; ++j)
        acc = combine(acc, in[r * cols + j]);
      out[r] = finish(acc, cols);
    }
    return;
  }
  // General case: one output at a time, strided.
  int64_t strides[kMaxRank];
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
  int64_t keptShape[kMaxRank], keptStrides[kMaxRank];
  int64_t redShape[kMaxRank], redStrides[kMaxRank];
  int nk = 0, nr = 0;
  int64_t outCount = 1, redCount = 1;
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) {
      redShape[nr] = shape[d];
      redStrides[nr++] = strides[d];
      redCount *= shape[d];
    } else {
      keptShape[nk] = shape[d];
      keptStrides[nk++] = strides[d];
      outCount *= shape[d];
    }
  }
#pragma omp parallel for if (outCount * redCount > 16384)
  for (int64_t o = 0; o < outCount; ++o) {
    int64_t base = 0, rem = o;
    for (int d = nk - 1; d >= 0; --d) {
      base += (rem % keptShape[d]) * keptStrides[d];
      rem /= keptShape[d];
    }
    double acc = init;
    for (int64_t r = 0; r < redCount; ++r) {
      int64_t offset = base, rr = r;
      for (int d = nr - 1; d >= 0; --d) {
        offset += (rr % redShape[d]) * redStrides[d];
        rr /= redShape[d];
      }
      acc = combine(acc, in[offset]);
    }
    out[o] = finish(acc, redCount);
  }
}

void accumulateInto(float *dst, const float *src, int64_t numElements,
                    float scale, bool accumulate) {
#pragma omp parallel for if (numElements > 65536)
  for (int64_t i = 0; i < numElements; ++i)
    dst[i] = (accumulate ? dst[i] : 0.0f) + scale * src[i];
}

void accumulateInto(bf16 *dst, const bf16 *src, int64_t numElements,
                    float scale, bool accumulate) {
#pragma omp parallel for if (numElements > 65536)
  for (int64_t i = 0; i < numElements; ++i)
    dst[i] = (accumulate ? float(dst[i]) : 0.0f) + scale * float(src[i]);
}

void accumulateIntoHalf(uint16_t *dst, const uint16_t *src,
                        int64_t numElements, float scale, bool accumulate) {
#pragma omp parallel for if (numElements > 65536)
  for (int64_t i = 0; i < numElements; ++i)
    dst[i] = halfBits((accumulate ? halfValue(dst[i]) : 0.0f) +
                      scale * halfValue(src[i]));
}

namespace {
/// dropout over the rows of the block's last dim: each row is a run of
/// consecutive logical elements, drawn four at a time (one Philox call per
/// group of four).
template <typename T, typename Load, typename Store>
void dropoutRows(const T *x, T *y, const DropoutBlock &block,
                 const RandomKey &key, double ratio, int64_t siteNumber,
                 Load load, Store store) {
  const int rank = block.rank;
  int64_t logicalStrides[DropoutBlock::kMaxRank];
  int64_t logicalElements = 1, numElements = 1, first = 0;
  for (int d = rank - 1; d >= 0; --d) {
    logicalStrides[d] = logicalElements;
    logicalElements *= block.logicalShape[d];
    numElements *= block.shape[d];
    if (block.offsets[d])
      first += *block.offsets[d] * logicalStrides[d];
  }
  const DropoutSite site = dropoutSite(ratio, static_cast<uint32_t>(siteNumber),
                                       static_cast<uint64_t>(logicalElements));
  const int64_t cols = rank ? block.shape[rank - 1] : 1;
  const int64_t rows = cols ? numElements / cols : 0;
#pragma omp parallel for if (numElements > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, element = first, at = 0;
    for (int d = rank - 2; d >= 0; --d) {
      const int64_t i = rest % block.shape[d];
      element += i * logicalStrides[d];
      at += i * block.strides[d];
      rest /= block.shape[d];
    }
    const T *xr = x + at;
    const int64_t step = rank ? block.strides[rank - 1] : 1;
    T *yr = y + r * cols;
    for (int64_t j = 0; j < cols;) {
      const uint64_t counter = dropoutCounter(key, site, element + j);
      const Philox4x32 words = dropoutWords(key, site, counter);
      const int64_t lane = static_cast<int64_t>(counter & 3);
      const int64_t run = std::min<int64_t>(4 - lane, cols - j);
      for (int64_t k = 0; k < run; ++k, ++j)
        yr[j] = store(words.v[lane + k] >= site.threshold
                          ? load(xr[j * step]) * site.scale
                          : 0.0f);
    }
  }
}
} // namespace

void dropout(const float *x, float *y, const DropoutBlock &block,
             const RandomKey *key, double ratio, int64_t site) {
  dropoutRows(
      x, y, block, *key, ratio, site, [](float v) { return v; },
      [](float v) { return v; });
}

void dropout(const bf16 *x, bf16 *y, const DropoutBlock &block,
             const RandomKey *key, double ratio, int64_t site) {
  dropoutRows(
      x, y, block, *key, ratio, site, [](bf16 v) { return float(v); },
      [](float v) { return bf16(v); });
}

void dropoutHalf(const uint16_t *x, uint16_t *y, const DropoutBlock &block,
                 const RandomKey *key, double ratio, int64_t site) {
  dropoutRows(
      x, y, block, *key, ratio, site, [](uint16_t v) { return halfValue(v); },
      [](float v) { return halfBits(v); });
}

void dequantize(const int8_t *codes, const void *absmax, const float *state2,
                float *out, int64_t rows, int64_t cols, int kind, int64_t block,
                int axis) {
  const int64_t n = rows * cols;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t e = 0; e < n; ++e)
    out[e] =
        dequantizeElement(codes, absmax, state2, kind, block, cols, axis, e);
}

} // namespace autopar::rt::cpu
