//===- KernelTestUtil.h - what the CPU kernel tests share -------*- C++ -*-===//
//
// Random inputs with fixed seeds, comparisons of float results against
// double references, and a loop over OpenMP thread counts, for
// RuntimeKernelsTest.cpp and RuntimeDataKernelsTest.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TEST_UNIT_KERNELTESTUTIL_H
#define AUTOPAR_TEST_UNIT_KERNELTESTUTIL_H

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace autopar::test {

inline const float kNaN = std::numeric_limits<float>::quiet_NaN();

inline std::vector<float> randomFloats(size_t n, uint32_t seed,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

inline std::vector<uint8_t> randomBytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t &x : v)
    x = static_cast<uint8_t>(gen() & 0xff);
  return v;
}

/// Checks |got - ref| <= rtol * max(|ref|, floor) elementwise (NaN must
/// match NaN); prints the first few mismatches.
inline void expectClose(const float *got, const std::vector<double> &ref,
                        double rtol, double floor, const std::string &what) {
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double g = got[i], r = ref[i];
    bool ok;
    if (std::isnan(r))
      ok = std::isnan(g);
    else
      ok = std::isfinite(g) &&
           std::fabs(g - r) <= rtol * std::max(std::fabs(r), floor);
    if (!ok && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " expected " << r
                    << " found " << g;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << ref.size()
                    << " elements differ";
}

inline void expectClose(const std::vector<float> &got,
                        const std::vector<double> &ref, double rtol,
                        double floor, const std::string &what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  expectClose(got.data(), ref, rtol, floor, what);
}

/// Runs f under each OpenMP thread count (restoring the count afterwards).
inline void forThreadCounts(const std::function<void(int)> &f) {
#ifdef _OPENMP
  int saved = omp_get_max_threads();
  for (int t : {1, 2, 3, 4}) {
    omp_set_num_threads(t);
    SCOPED_TRACE("threads=" + std::to_string(t));
    f(t);
  }
  omp_set_num_threads(saved);
#else
  f(1);
#endif
}

} // namespace autopar::test

#endif // AUTOPAR_TEST_UNIT_KERNELTESTUTIL_H
