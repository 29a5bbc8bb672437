//===- Blas.h - the SGEMM of the CPU kernels --------------------*- C++ -*-===//
//
// The one matrix product the CPU kernels call, sgemm(), on oneDNN's
// dnnl_sgemm: its kernels are generated at run time for the instruction
// set the CPU reports (AVX-512, AVX2, ...), whatever the CPU's model or
// an OPENBLAS_CORETYPE say (docs/training.md "Performance"). Built with
// AUTOPAR_RT_NO_BLAS (where the CPU kernels serve only as the references
// of the CUDA kernels' tests: a GPU machine may have no oneDNN), plain
// loops instead: float accumulation over k in increasing order.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_BLAS_H
#define AUTOPAR_RUNTIME_CPU_BLAS_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#ifndef AUTOPAR_RT_NO_BLAS
#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace autopar::rt::cpu {

/// The reference loops: C = alpha * op(A) op(B) + beta * C.
inline void referenceSgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                           float alpha, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float beta, float *c,
                           int64_t ldc) {
  auto aAt = [&](int64_t i, int64_t p) {
    return ta ? a[p * lda + i] : a[i * lda + p];
  };
  for (int64_t i = 0; i < m; ++i) {
    float *ci = c + i * ldc;
    if (tb) {
      // Rows of B are contiguous along k: one dot product per element.
      for (int64_t j = 0; j < n; ++j) {
        float sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += aAt(i, p) * b[j * ldb + p];
        ci[j] = alpha * sum + (beta == 0 ? 0 : beta * ci[j]);
      }
      continue;
    }
    // Rows of B are contiguous along n: the same sums, accumulated a row
    // of C at a time (each element still adds p = 0, 1, ... in order).
    float sums[256];
    for (int64_t j0 = 0; j0 < n; j0 += 256) {
      const int64_t cols = n - j0 < 256 ? n - j0 : 256;
      for (int64_t j = 0; j < cols; ++j)
        sums[j] = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float aip = aAt(i, p);
        const float *bp = b + p * ldb + j0;
        for (int64_t j = 0; j < cols; ++j)
          sums[j] += aip * bp[j];
      }
      for (int64_t j = 0; j < cols; ++j)
        ci[j0 + j] = alpha * sums[j] + (beta == 0 ? 0 : beta * ci[j0 + j]);
    }
  }
}

/// C = alpha * op(A) op(B) + beta * C for row-major C [m, n] and inner
/// extent k (C is not read when beta is 0), on the calling thread: the
/// kernels spread products over the OpenMP threads themselves, so that
/// how a product is cut depends on the shapes they choose (outside a
/// parallel region oneDNN would use every OpenMP thread), unless
/// `threaded`: then, outside a parallel region, oneDNN cuts the product
/// over every OpenMP thread. A leading dimension only matters between
/// rows: that of a single-row matrix is set to what the library's
/// argument checks want.
inline void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                  float alpha, const float *a, int64_t lda, const float *b,
                  int64_t ldb, float beta, float *c, int64_t ldc,
                  bool threaded = false) {
  if (m <= 0 || n <= 0)
    return;
  if (k <= 0) {
    // An empty product: c = beta * c.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0 ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  auto fix = [](int64_t ld, int64_t rows, int64_t cols) {
    return rows <= 1 ? (cols > 1 ? cols : 1) : ld;
  };
  lda = transA ? fix(lda, k, m) : fix(lda, m, k);
  ldb = transB ? fix(ldb, n, k) : fix(ldb, k, n);
  ldc = fix(ldc, m, n);
#ifdef AUTOPAR_RT_NO_BLAS
  referenceSgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
  int threads = 1;
#ifdef _OPENMP
  if (!threaded && !omp_in_parallel()) {
    threads = omp_get_max_threads();
    if (threads > 1)
      omp_set_num_threads(1);
  }
#endif
  dnnl_status_t status = dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m,
                                    n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#ifdef _OPENMP
  if (threads > 1)
    omp_set_num_threads(threads);
#endif
  if (status != dnnl_success) {
    // Arguments the kernels should never pass (a leading dim too small).
    std::fprintf(stderr,
                 "internal error: dnnl_sgemm(%c, %c, m=%lld, n=%lld, k=%lld, "
                 "lda=%lld, ldb=%lld, ldc=%lld) failed: status %d\n",
                 transA ? 'T' : 'N', transB ? 'T' : 'N', (long long)m,
                 (long long)n, (long long)k, (long long)lda, (long long)ldb,
                 (long long)ldc, int(status));
    std::abort();
  }
#endif
}

} // namespace autopar::rt::cpu

#endif // AUTOPAR_RUNTIME_CPU_BLAS_H
