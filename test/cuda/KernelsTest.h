//===- KernelsTest.h - what the CUDA kernel tests share ---------*- C++ -*-===//
//
// autopar-cuda-kernels-test (KernelsTest.cu, KernelsDataTest.cu): the
// tester with its random inputs, the comparisons, and the groups of cases
// each file defines.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TEST_CUDA_KERNELSTEST_H
#define AUTOPAR_TEST_CUDA_KERNELSTEST_H

#include "runtime/Device.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/Kernels.h"
#include "runtime/optim/Optimizer.h"
#include "test/cuda/CudaTest.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace autopar::rt::kernels_test {

namespace gpu = autopar::rt::cuda;

/// Relative tolerance of float reductions.
constexpr double kTol = 1e-5;

using test::format;

/// test::compareFloats within rtol * (|want[i]| + max |want|) (rtol 0:
/// equal).
inline std::string compareFloats(const std::vector<float> &got,
                          const std::vector<float> &want, double rtol) {
  return test::compareFloats(got, want, rtol, rtol);
}

/// Empty when the bytes are equal; otherwise the first that differs.
inline std::string compareBytes(const void *got, const void *want, size_t bytes) {
  const unsigned char *g = static_cast<const unsigned char *>(got);
  const unsigned char *w = static_cast<const unsigned char *>(want);
  for (size_t i = 0; i < bytes; ++i)
    if (g[i] != w[i])
      return format("byte %zu of %zu differs: got %u, want %u", i, bytes,
                    static_cast<unsigned>(g[i]), static_cast<unsigned>(w[i]));
  return "";
}

using test::firstError;

class Tester : public test::CudaTester {
public:
  explicit Tester(Device &device)
      : CudaTester(device, 20240611, "autopar-cuda-kernels-test") {}

  std::vector<float> uniform(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float &x : v)
      x = dist(rng);
    return v;
  }
  std::vector<unsigned char> randomBytes(size_t n) {
    std::uniform_int_distribution<int> dist(0, 255);
    std::vector<unsigned char> v(n);
    for (unsigned char &x : v)
      x = static_cast<unsigned char>(dist(rng));
    return v;
  }
  int64_t randomInt(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }
  /// `n` indices in [lo, hi] as int64 or int32 bytes.
  std::vector<unsigned char> indexBytes(const std::vector<int64_t> &idx,
                                        bool wide) {
    std::vector<unsigned char> bytes(idx.size() * (wide ? 8 : 4));
    for (size_t i = 0; i < idx.size(); ++i) {
      if (wide) {
        std::memcpy(bytes.data() + 8 * i, &idx[i], 8);
      } else {
        const int32_t v = static_cast<int32_t>(idx[i]);
        std::memcpy(bytes.data() + 4 * i, &v, 4);
      }
    }
    return bytes;
  }
};

/// `count` uniform values in [lo, hi) rounded to `kind`: their bits and
/// their values.
inline std::vector<float> rounded16(Tester &t, Float16Kind kind, size_t count,
                                    float lo, float hi, std::vector<uint16_t> &bits) {
  std::vector<float> v = t.uniform(count, lo, hi);
  bits.resize(count);
  for (size_t i = 0; i < count; ++i) {
    bits[i] = float16Bits(kind, v[i]);
    v[i] = float16Value(kind, bits[i]);
  }
  return v;
}

/// `count` 16-bit values of `kind` downloaded from `b`, as floats.
inline std::vector<float> download16(Tester &t, Float16Kind kind,
                                     const DeviceBuffer &b, size_t count) {
  std::vector<uint16_t> bits = t.download<uint16_t>(b.get(), count);
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i)
    values[i] = float16Value(kind, bits[i]);
  return values;
}

/// The groups of cases: gemm and the normalizations (KernelsTest.cu), data
/// movement, reductions and the Device's own methods (KernelsDataTest.cu).
void testGemms(Tester &t);
void testNormalizations(Tester &t);
void testDataMovement(Tester &t);
void testReductions(Tester &t);
void testDevice(Tester &t);

} // namespace autopar::rt::kernels_test

#endif // AUTOPAR_TEST_CUDA_KERNELSTEST_H
