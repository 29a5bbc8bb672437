//===- Blas.h - the BLAS calls of the CPU kernels ---------------*- C++ -*-===//
//
// OpenBLAS's cblas.h; or, built with AUTOPAR_RT_NO_BLAS (where the CPU
// kernels serve only as the references of the CUDA kernels' tests: a GPU
// machine may have no OpenBLAS), the few calls the kernels make, as plain
// inline functions in namespace autopar::rt::cpu (where the kernels call
// them unqualified): a row-major SGEMM with float accumulation over k in
// increasing order, and no-op thread control.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_BLAS_H
#define AUTOPAR_RUNTIME_CPU_BLAS_H

#ifndef AUTOPAR_RT_NO_BLAS
#include <cblas.h>
#else

#include <cstdint>

namespace autopar::rt::cpu {

enum CBLAS_ORDER { CblasRowMajor = 101 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };

/// C = alpha * op(A) op(B) + beta * C (C is not read when beta is 0).
inline void cblas_sgemm(CBLAS_ORDER, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb,
                        int64_t m, int64_t n, int64_t k, float alpha,
                        const float *a, int64_t lda, const float *b,
                        int64_t ldb, float beta, float *c, int64_t ldc) {
  auto aAt = [&](int64_t i, int64_t p) {
    return ta == CblasTrans ? a[p * lda + i] : a[i * lda + p];
  };
  for (int64_t i = 0; i < m; ++i) {
    float *ci = c + i * ldc;
    if (tb == CblasTrans) {
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

inline void openblas_set_num_threads(int) {}
inline const char *openblas_get_corename() {
  return "none (AUTOPAR_RT_NO_BLAS)";
}
inline const char *openblas_get_config() { return "reference loops"; }

} // namespace autopar::rt::cpu

#endif // AUTOPAR_RT_NO_BLAS
#endif // AUTOPAR_RUNTIME_CPU_BLAS_H
