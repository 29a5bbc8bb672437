//===- CudaTest.h - what the CUDA kernel test programs share ----*- C++ -*-===//
//
// The bookkeeping of test/cuda/KernelsTest.cu and AttentionTest.cu: one
// "PASS name" / "FAIL name: detail" line per case, device buffers, and the
// program's main (a skip line without a usable CUDA device, else the cases
// and a summary line). Header only, inline by design: two small test
// programs include it.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TEST_CUDA_CUDATEST_H
#define AUTOPAR_TEST_CUDA_CUDATEST_H

#include "runtime/Device.h"
#include "runtime/cpu/Kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace autopar::rt::test {

class CudaTester {
public:
  /// `program` names the test in its out-of-memory line.
  CudaTester(Device &device, uint64_t seed, const char *program)
      : dev(device), ctx(*device.context()), rng(seed), program(program) {}

  Device &dev;
  DeviceContext &ctx;
  std::mt19937_64 rng;
  int passed = 0, failed = 0;

  /// Counts case `name`: passed when `error` is empty.
  void check(const std::string &name, const std::string &error) {
    if (error.empty()) {
      ++passed;
      std::printf("PASS %s\n", name.c_str());
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), error.c_str());
    }
    std::fflush(stdout);
  }

  /// `bytes` bytes of device memory (at least 1); out of memory ends the
  /// program.
  DeviceBuffer alloc(int64_t bytes) {
    DeviceBuffer b = dev.allocate(std::max<int64_t>(bytes, 1));
    if (!b) {
      std::fprintf(stderr, "%s: out of device memory\n", program);
      std::exit(1);
    }
    return b;
  }
  template <typename T> DeviceBuffer upload(const std::vector<T> &host) {
    const int64_t bytes = static_cast<int64_t>(host.size() * sizeof(T));
    DeviceBuffer b = alloc(bytes);
    dev.upload(b.get(), host.data(), bytes);
    return b;
  }
  template <typename T>
  std::vector<T> download(const void *device, size_t count) {
    std::vector<T> host(count);
    dev.download(host.data(), device, static_cast<int64_t>(count * sizeof(T)));
    return host;
  }

private:
  const char *program;
};

/// The first non-empty result.
/// printf into a string (up to 511 characters).
template <typename... Args>
std::string format(const char *fmt, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

/// Empty when every got[i] is within rtol * |want[i]| + atol * max |want|
/// of want[i] (both 0: equal), NaN matching NaN and infinities equal;
/// otherwise how many differ and the first that does, after `what: ` when
/// `what` is not empty.
inline std::string compareFloats(const std::vector<float> &got,
                                 const std::vector<float> &want, double rtol,
                                 double atol, const char *what = "") {
  const std::string prefix = *what ? std::string(what) + ": " : "";
  if (got.size() != want.size())
    return prefix + format("%zu values, want %zu", got.size(), want.size());
  double scale = 0;
  for (float w : want)
    if (std::isfinite(w))
      scale = std::max(scale, std::fabs(static_cast<double>(w)));
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    bool ok;
    if (std::isnan(g) || std::isnan(w))
      ok = std::isnan(g) && std::isnan(w);
    else if (std::isinf(g) || std::isinf(w))
      ok = g == w;
    else
      ok = std::fabs(g - w) <= rtol * std::fabs(w) + atol * scale;
    if (!ok && bad++ == 0)
      first = i;
  }
  if (bad == 0)
    return "";
  return prefix +
         format("%zu of %zu values differ; first at %zu: got %.9g, want %.9g",
                bad, got.size(), first, static_cast<double>(got[first]),
                static_cast<double>(want[first]));
}

inline std::string firstError(std::initializer_list<std::string> errors) {
  for (const std::string &e : errors)
    if (!e.empty())
      return e;
  return "";
}

/// main() of a test program: without a usable CUDA device prints "WHAT:
/// skipped (no CUDA device: REASON)" and returns 0; else runs `tests` on a
/// Tester over device 0 and prints "WHAT: N passed, M failed", returning 1
/// when any failed.
template <typename Tester>
int runCudaTests(const char *what, void (*tests)(Tester &)) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count <= 0) {
    std::printf("%s: skipped (no CUDA device: %s)\n", what,
                err != cudaSuccess ? cudaGetErrorString(err)
                                   : "cudaGetDeviceCount found 0 devices");
    return 0;
  }
  std::unique_ptr<Device> device;
  Status status = Device::create(0, 0, device);
  if (!status) {
    std::printf("FAIL Device::create: %s\n", status.message().c_str());
    std::printf("%s: 0 passed, 1 failed\n", what);
    return 1;
  }
  std::printf("device: %s\n", device->name().c_str());
  Tester t(*device);
  tests(t);
  device->synchronize();
  std::printf("%s: %d passed, %d failed\n", what, t.passed, t.failed);
  return t.failed ? 1 : 0;
}

} // namespace autopar::rt::test

#endif // AUTOPAR_TEST_CUDA_CUDATEST_H
