//===- KernelsTest.cu - the CUDA kernels against their CPU references -----===//
//
// autopar-cuda-kernels-test: runs every function of runtime/cuda/Kernels.h
// and the optimizer methods of the CUDA Device (runtime/cuda/Device.cu) on
// random inputs of several shapes and compares them with the CPU
// references (runtime/cpu/Kernels.h, runtime/optim/Optimizer.h): float
// reductions within a relative tolerance of 1e-5 (of each value plus the
// largest value, so that values that cancel to near 0 are judged on the
// output's scale), data movement and optimizer updates exactly.
//
// Prints "PASS name" or "FAIL name: detail" per case, then
// "cuda kernels: N passed, M failed", and exits 1 when any failed. Without
// a usable CUDA device it prints "cuda kernels: skipped (no CUDA device:
// REASON)" and exits 0.
//
//===----------------------------------------------------------------------===//

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

using namespace autopar::rt;
namespace gpu = autopar::rt::cuda;

namespace {

/// Relative tolerance of float reductions.
constexpr double kTol = 1e-5;

using test::format;

/// test::compareFloats within rtol * (|want[i]| + max |want|) (rtol 0:
/// equal).
std::string compareFloats(const std::vector<float> &got,
                          const std::vector<float> &want, double rtol) {
  return test::compareFloats(got, want, rtol, rtol);
}

/// Empty when the bytes are equal; otherwise the first that differs.
std::string compareBytes(const void *got, const void *want, size_t bytes) {
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

//===----------------------------------------------------------------------===//
// gemm
//===----------------------------------------------------------------------===//

struct GemmCase {
  std::string name;
  int64_t m, n, k;
  bool transA = false, transB = false;
  std::vector<int64_t> batchShape = {};
  /// Batch strides in whole matrices (0: broadcast); empty: dense.
  std::vector<int64_t> aUnits = {}, bUnits = {};
  /// Extra elements per row beyond the matrix (lda, ldb larger).
  int64_t padA = 0, padB = 0;
  float alpha = 1.0f;
  gpu::Epilogue epilogue = gpu::Epilogue::None;
  /// Floats by which every pointer is offset (misaligned buffers).
  int64_t misalign = 0;
};

double geluTanh(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

void testGemm(Tester &t, const GemmCase &gc) {
  cpu::GemmDesc d;
  d.batchRank = static_cast<int>(gc.batchShape.size());
  d.transA = gc.transA;
  d.transB = gc.transB;
  d.m = gc.m;
  d.n = gc.n;
  d.k = gc.k;
  d.alpha = gc.alpha;
  const int64_t aRows = gc.transA ? gc.k : gc.m,
                aCols = gc.transA ? gc.m : gc.k;
  const int64_t bRows = gc.transB ? gc.n : gc.k,
                bCols = gc.transB ? gc.k : gc.n;
  d.lda = std::max<int64_t>(aCols + gc.padA, 1);
  d.ldb = std::max<int64_t>(bCols + gc.padB, 1);
  const int64_t aMat = aRows * d.lda, bMat = bRows * d.ldb;
  int64_t batch = 1, aSpan = 1, bSpan = 1, aDense = 1, bDense = 1;
  for (int i = d.batchRank - 1; i >= 0; --i) {
    const int64_t e = gc.batchShape[i];
    const int64_t au = gc.aUnits.empty() ? aDense : gc.aUnits[i];
    const int64_t bu = gc.bUnits.empty() ? bDense : gc.bUnits[i];
    d.batchShape[i] = e;
    d.aBatchStrides[i] = au * aMat;
    d.bBatchStrides[i] = bu * bMat;
    aSpan += (e - 1) * au;
    bSpan += (e - 1) * bu;
    aDense *= e;
    bDense *= e;
    batch *= e;
  }
  const int64_t off = gc.misalign;
  std::vector<float> a = t.uniform(static_cast<size_t>(off + aSpan * aMat + 1));
  std::vector<float> b = t.uniform(static_cast<size_t>(off + bSpan * bMat + 1));
  std::vector<float> bias = t.uniform(static_cast<size_t>(off + gc.n));
  const int64_t cCount = batch * gc.m * gc.n;
  std::vector<float> want(static_cast<size_t>(cCount), 0.0f);
  if (gc.k > 0)
    cpu::gemm(d, a.data() + off, b.data() + off, want.data());
  const bool hasBias = gc.epilogue == gpu::Epilogue::Bias ||
                       gc.epilogue == gpu::Epilogue::BiasGelu;
  const bool gelu = gc.epilogue == gpu::Epilogue::Gelu ||
                    gc.epilogue == gpu::Epilogue::BiasGelu;
  for (int64_t i = 0; i < cCount; ++i) {
    double v = want[i];
    if (hasBias)
      v += bias[off + i % gc.n];
    if (gelu)
      v = geluTanh(v);
    want[i] = static_cast<float>(v);
  }
  DeviceBuffer aDev = t.upload(a), bDev = t.upload(b), biasDev = t.upload(bias);
  DeviceBuffer cDev = t.upload(t.uniform(static_cast<size_t>(off + cCount)));
  const float *aPtr = reinterpret_cast<const float *>(aDev.get()) + off;
  const float *bPtr = reinterpret_cast<const float *>(bDev.get()) + off;
  const float *biasPtr =
      hasBias ? reinterpret_cast<const float *>(biasDev.get()) + off : nullptr;
  float *cPtr = reinterpret_cast<float *>(cDev.get()) + off;
  gpu::gemm(t.ctx, d, aPtr, bPtr, cPtr, gc.epilogue, biasPtr);
  std::vector<float> got = t.download<float>(cPtr, static_cast<size_t>(cCount));
  // The same call again takes cuBLASLt's algorithm from the cache: the
  // same algorithm, so the same bits.
  gpu::gemm(t.ctx, d, aPtr, bPtr, cPtr, gc.epilogue, biasPtr);
  std::vector<float> again =
      t.download<float>(cPtr, static_cast<size_t>(cCount));
  // cuBLASLt's GELU may use a fast tanh: a looser bound for it.
  t.check("gemm " + gc.name,
          firstError({compareFloats(got, want, gelu ? 2e-3 : kTol),
                      got == again ? "" : "a second call (cached algorithm) "
                                          "gives other values"}));
}

/// A 16-bit GEMM (bf16 or IEEE half A, B, C; f32 accumulation) against
/// cpu::gemm on the same 16-bit values in float, its result rounded to the
/// 16-bit type: equal within two roundings of that type (the products are
/// exact in float, the sums' order differs).
void testGemm16(Tester &t, Float16Kind kind, int64_t m, int64_t n, int64_t k,
                bool transA, bool transB, int64_t batch) {
  cpu::GemmDesc d;
  d.batchRank = 1;
  d.batchShape[0] = batch;
  d.transA = transA;
  d.transB = transB;
  d.m = m;
  d.n = n;
  d.k = k;
  d.lda = transA ? m : k;
  d.ldb = transB ? k : n;
  d.aBatchStrides[0] = m * k;
  d.bBatchStrides[0] = k * n;
  auto rounded = [&](size_t count, std::vector<uint16_t> &bits) {
    std::vector<float> v = t.uniform(count);
    bits.resize(count);
    for (size_t i = 0; i < count; ++i) {
      bits[i] = float16Bits(kind, v[i]);
      v[i] = float16Value(kind, bits[i]);
    }
    return v;
  };
  std::vector<uint16_t> aBits, bBits;
  std::vector<float> a = rounded(static_cast<size_t>(batch * m * k), aBits);
  std::vector<float> b = rounded(static_cast<size_t>(batch * k * n), bBits);
  const size_t cCount = static_cast<size_t>(batch * m * n);
  std::vector<float> want(cCount, 0.0f);
  if (k > 0)
    cpu::gemm(d, a.data(), b.data(), want.data());
  for (float &w : want)
    w = float16Value(kind, float16Bits(kind, w));
  DeviceBuffer aDev = t.upload(aBits), bDev = t.upload(bBits);
  DeviceBuffer cDev = t.alloc(static_cast<int64_t>(cCount * 2));
  if (kind == Float16Kind::BF16)
    gpu::gemm(t.ctx, d, reinterpret_cast<const __nv_bfloat16 *>(aDev.get()),
              reinterpret_cast<const __nv_bfloat16 *>(bDev.get()),
              reinterpret_cast<__nv_bfloat16 *>(cDev.get()));
  else
    gpu::gemm(t.ctx, d, reinterpret_cast<const __half *>(aDev.get()),
              reinterpret_cast<const __half *>(bDev.get()),
              reinterpret_cast<__half *>(cDev.get()));
  std::vector<uint16_t> gotBits = t.download<uint16_t>(cDev.get(), cCount);
  std::vector<float> got(cCount);
  for (size_t i = 0; i < cCount; ++i)
    got[i] = float16Value(kind, gotBits[i]);
  const double ulp = kind == Float16Kind::BF16 ? 0x1p-8 : 0x1p-11;
  t.check(format("gemm %s %lldx%lldx%lld%s%s batch %lld",
                 kind == Float16Kind::BF16 ? "bf16" : "f16",
                 static_cast<long long>(m), static_cast<long long>(n),
                 static_cast<long long>(k), transA ? " transA" : "",
                 transB ? " transB" : "", static_cast<long long>(batch)),
          compareFloats(got, want, 2 * ulp));
}

void testGemms16(Tester &t) {
  for (Float16Kind kind : {Float16Kind::BF16, Float16Kind::Half}) {
    testGemm16(t, kind, 64, 96, 32, false, false, 1);
    testGemm16(t, kind, 37, 53, 29, false, true, 1);
    testGemm16(t, kind, 16, 16, 64, true, false, 12);
    // A weight gradient X^T dY: transposed A, deep contraction (tokens).
    testGemm16(t, kind, 96, 64, 1024, true, false, 1);
    testGemm16(t, kind, 128, 768, 256, false, true, 2);
    testGemm16(t, kind, 5, 7, 0, false, false, 1);
  }
}

void testGemms(Tester &t) {
  using E = gpu::Epilogue;
  const std::vector<GemmCase> cases = {
      {"37x53x29", 37, 53, 29},
      {"transA 37x53x29", 37, 53, 29, true, false},
      {"transB 37x53x29", 37, 53, 29, false, true},
      {"transA transB 37x53x29", 37, 53, 29, true, true},
      {"1x1x1", 1, 1, 1},
      {"row vector 1x300x257", 1, 300, 257},
      {"column 300x1x257", 300, 1, 257},
      {"128x768x768", 128, 768, 768},
      {"padded lda ldb", 33, 17, 45, false, false, {}, {}, {}, 3, 5},
      {"padded transposed", 33, 17, 45, true, true, {}, {}, {}, 7, 1},
      {"alpha 0.125", 20, 30, 40, false, false, {}, {}, {}, 0, 0, 0.125f},
      {"batch 3 dense", 19, 23, 31, false, false, {3}},
      {"batch 2x3 collapsible", 19, 23, 31, false, true, {2, 3}},
      {"batch 2x3 B broadcast outer",
       19,
       23,
       31,
       false,
       false,
       {2, 3},
       {3, 1},
       {0, 1}},
      {"batch 2x3 A broadcast inner",
       19,
       23,
       31,
       true,
       false,
       {2, 3},
       {1, 0},
       {3, 1}},
      {"batch 5x2 B broadcast, outer dim longest",
       7,
       6,
       5,
       false,
       false,
       {5, 2},
       {},
       {0, 1}},
      {"batch 4x5 permuted strides",
       11,
       13,
       9,
       false,
       true,
       {4, 5},
       {1, 4},
       {5, 1}},
      {"batch 2x1x3 unit dim", 8, 9, 10, false, false, {2, 1, 3}},
      {"batch 70000 of 1x2x3", 1, 2, 3, false, false, {70000}},
      {"k 0", 5, 6, 0},
      {"misaligned pointers",
       35,
       29,
       31,
       false,
       false,
       {2},
       {},
       {},
       0,
       0,
       1.0f,
       E::None,
       1},
      {"bias", 37, 53, 29, false, false, {}, {}, {}, 0, 0, 1.0f, E::Bias},
      {"gelu", 37, 53, 29, false, true, {}, {}, {}, 0, 0, 1.0f, E::Gelu},
      {"bias gelu",
       64,
       96,
       48,
       false,
       false,
       {},
       {},
       {},
       0,
       0,
       1.0f,
       E::BiasGelu},
      {"bias gelu batch 3",
       16,
       24,
       8,
       true,
       false,
       {3},
       {},
       {},
       0,
       0,
       0.5f,
       E::BiasGelu},
      {"bias batch B broadcast",
       16,
       24,
       8,
       false,
       false,
       {3},
       {},
       {0},
       0,
       0,
       1.0f,
       E::Bias},
      {"bias misaligned",
       17,
       21,
       19,
       false,
       false,
       {},
       {},
       {},
       0,
       0,
       1.0f,
       E::Bias,
       1},
      {"bias k 0", 5, 6, 0, false, false, {}, {}, {}, 0, 0, 1.0f, E::BiasGelu},
  };
  for (const GemmCase &gc : cases)
    testGemm(t, gc);
  testGemms16(t);
}

//===----------------------------------------------------------------------===//
// Layer norm, softmax, cross-entropy
//===----------------------------------------------------------------------===//

void testLayerNorm(Tester &t, int64_t rows, int64_t cols, bool withBias) {
  const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
  const double eps = 1e-5;
  const size_t n = static_cast<size_t>(rows * cols);
  std::vector<float> x = t.uniform(n, -2.0f, 3.0f);
  std::vector<float> scale = t.uniform(static_cast<size_t>(cols), 0.5f, 1.5f);
  std::vector<float> bias = t.uniform(static_cast<size_t>(cols));
  std::vector<float> dy = t.uniform(n);
  DeviceBuffer xD = t.upload(x), scaleD = t.upload(scale),
               biasD = t.upload(bias), dyD = t.upload(dy);
  DeviceBuffer yD = t.alloc(n * 4), dxD = t.alloc(n * 4),
               dsD = t.upload(t.uniform(static_cast<size_t>(cols))),
               dbD = t.upload(t.uniform(static_cast<size_t>(cols)));
  const float *xP = reinterpret_cast<const float *>(xD.get());
  const float *scaleP = reinterpret_cast<const float *>(scaleD.get());

  std::vector<float> y(n);
  cpu::layerNormForward(x.data(), scale.data(),
                        withBias ? bias.data() : nullptr, y.data(), rows, cols,
                        eps);
  gpu::layerNormForward(t.ctx, xP, scaleP,
                        withBias ? reinterpret_cast<const float *>(biasD.get())
                                 : nullptr,
                        reinterpret_cast<float *>(yD.get()), rows, cols, eps);
  t.check("layerNormForward " + shape + (withBias ? " bias" : " no bias"),
          compareFloats(t.download<float>(yD.get(), n), y, kTol));

  std::vector<float> dx(n), ds(static_cast<size_t>(cols)),
      db(static_cast<size_t>(cols));
  cpu::layerNormBackward(x.data(), scale.data(), dy.data(), dx.data(),
                         ds.data(), db.data(), rows, cols, eps);
  gpu::layerNormBackward(t.ctx, xP, scaleP,
                         reinterpret_cast<const float *>(dyD.get()),
                         reinterpret_cast<float *>(dxD.get()),
                         reinterpret_cast<float *>(dsD.get()),
                         reinterpret_cast<float *>(dbD.get()), rows, cols, eps);
  t.check(
      "layerNormBackward " + shape,
      firstError(
          {compareFloats(t.download<float>(dxD.get(), n), dx, kTol),
           compareFloats(t.download<float>(dsD.get(), ds.size()), ds, kTol),
           compareFloats(t.download<float>(dbD.get(), db.size()), db, kTol)}));
}

/// `count` uniform values in [lo, hi) rounded to `kind`: their bits and
/// their values.
std::vector<float> rounded16(Tester &t, Float16Kind kind, size_t count,
                             float lo, float hi, std::vector<uint16_t> &bits) {
  std::vector<float> v = t.uniform(count, lo, hi);
  bits.resize(count);
  for (size_t i = 0; i < count; ++i) {
    bits[i] = float16Bits(kind, v[i]);
    v[i] = float16Value(kind, bits[i]);
  }
  return v;
}

std::vector<float> download16(Tester &t, Float16Kind kind,
                              const DeviceBuffer &b, size_t count) {
  std::vector<uint16_t> bits = t.download<uint16_t>(b.get(), count);
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i)
    values[i] = float16Value(kind, bits[i]);
  return values;
}

/// A device buffer of 16-bit values as T (__nv_bfloat16 or __half).
template <typename T> const T *in16(const DeviceBuffer &b) {
  return reinterpret_cast<const T *>(b.get());
}
template <typename T> T *out16(const DeviceBuffer &b) {
  return reinterpret_cast<T *>(b.get());
}

/// A 16-bit result against its f32 reference: within one rounding of the
/// type (and the f32 tolerance).
std::string compare16(Tester &t, Float16Kind kind, const DeviceBuffer &b,
                      const std::vector<float> &want, const char *what) {
  const double ulp = kind == Float16Kind::BF16 ? 0x1p-8 : 0x1p-11;
  return test::compareFloats(download16(t, kind, b, want.size()), want,
                             ulp + kTol, kTol, what);
}

/// The 16-bit layernorm (every tensor bf16 or IEEE half) against the CPU
/// kernels on the same 16-bit values in float: the statistics and sums are
/// computed alike, so each result is within one rounding of the type (and
/// the f32 tolerance) of the reference.
template <typename T>
void testLayerNorm16(Tester &t, Float16Kind kind, int64_t rows, int64_t cols) {
  const double eps = 1e-5;
  const size_t n = static_cast<size_t>(rows * cols);
  const size_t c = static_cast<size_t>(cols);
  std::vector<uint16_t> xBits, scaleBits, biasBits, dyBits;
  std::vector<float> x = rounded16(t, kind, n, -2.0f, 3.0f, xBits);
  std::vector<float> scale = rounded16(t, kind, c, 0.5f, 1.5f, scaleBits);
  std::vector<float> bias = rounded16(t, kind, c, -1.0f, 1.0f, biasBits);
  std::vector<float> dy = rounded16(t, kind, n, -1.0f, 1.0f, dyBits);
  DeviceBuffer xD = t.upload(xBits), scaleD = t.upload(scaleBits),
               biasD = t.upload(biasBits), dyD = t.upload(dyBits);
  DeviceBuffer yD = t.alloc(n * 2), dxD = t.alloc(n * 2), dsD = t.alloc(c * 2),
               dbD = t.alloc(c * 2);
  auto in = in16<T>;
  auto out = out16<T>;
  std::vector<float> y(n), dx(n), ds(c), db(c);
  cpu::layerNormForward(x.data(), scale.data(), bias.data(), y.data(), rows,
                        cols, eps);
  cpu::layerNormBackward(x.data(), scale.data(), dy.data(), dx.data(),
                         ds.data(), db.data(), rows, cols, eps);
  gpu::layerNormForward(t.ctx, in(xD), in(scaleD), in(biasD), out(yD), rows,
                        cols, eps);
  gpu::layerNormBackward(t.ctx, in(xD), in(scaleD), in(dyD), out(dxD), out(dsD),
                         out(dbD), rows, cols, eps);
  auto compare = [&](const DeviceBuffer &b, const std::vector<float> &want,
                     const char *what) {
    return compare16(t, kind, b, want, what);
  };
  t.check(format("layerNorm %s %lldx%lld",
                 kind == Float16Kind::BF16 ? "bf16" : "f16",
                 static_cast<long long>(rows), static_cast<long long>(cols)),
          firstError({compare(yD, y, "y"), compare(dxD, dx, "dx"),
                      compare(dsD, ds, "dscale"), compare(dbD, db, "dbias")}));
}

/// Softmax over contiguous rows in double (the CPU reference's float sum
/// over tens of thousands of classes is itself off by up to ~5e-5).
std::vector<float> softmaxRowsDouble(const std::vector<float> &x, int64_t rows,
                                     int64_t n) {
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x.data() + r * n;
    const float max = *std::max_element(xr, xr + n);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += std::exp(static_cast<double>(xr[j]) - max);
    for (int64_t j = 0; j < n; ++j)
      y[r * n + j] =
          static_cast<float>(std::exp(static_cast<double>(xr[j]) - max) / sum);
  }
  return y;
}

void testSoftmax(Tester &t, int64_t outer, int64_t n, int64_t inner) {
  const std::string shape = std::to_string(outer) + "x" + std::to_string(n) +
                            "x" + std::to_string(inner);
  const size_t count = static_cast<size_t>(outer * n * inner);
  std::vector<float> x = t.uniform(count, -5.0f, 5.0f);
  std::vector<float> y(count);
  if (inner == 1 && n >= 4096)
    y = softmaxRowsDouble(x, outer, n);
  else
    cpu::softmaxForward(x.data(), y.data(), outer, n, inner);
  DeviceBuffer xD = t.upload(x), yD = t.alloc(count * 4);
  gpu::softmaxForward(t.ctx, reinterpret_cast<const float *>(xD.get()),
                      reinterpret_cast<float *>(yD.get()), outer, n, inner);
  t.check("softmaxForward " + shape,
          compareFloats(t.download<float>(yD.get(), count), y, kTol));

  std::vector<float> dy = t.uniform(count), dx(count);
  cpu::softmaxBackward(y.data(), dy.data(), dx.data(), outer, n, inner);
  DeviceBuffer y2D = t.upload(y), dyD = t.upload(dy), dxD = t.alloc(count * 4);
  gpu::softmaxBackward(t.ctx, reinterpret_cast<const float *>(y2D.get()),
                       reinterpret_cast<const float *>(dyD.get()),
                       reinterpret_cast<float *>(dxD.get()), outer, n, inner);
  t.check("softmaxBackward " + shape,
          compareFloats(t.download<float>(dxD.get(), count), dx, kTol));
}

/// The 16-bit softmax and its gradient (every tensor bf16 or IEEE half: an
/// unfused attention's scores under mixed precision) against the CPU
/// kernels on the same 16-bit values in float: each result within one
/// rounding of the type (and the f32 tolerance) of the reference.
template <typename T>
void testSoftmax16(Tester &t, Float16Kind kind, int64_t outer, int64_t n,
                   int64_t inner) {
  const size_t count = static_cast<size_t>(outer * n * inner);
  std::vector<uint16_t> xBits, yBits, dyBits;
  std::vector<float> x = rounded16(t, kind, count, -5.0f, 5.0f, xBits);
  std::vector<float> y(count), dx(count);
  cpu::softmaxForward(x.data(), y.data(), outer, n, inner);
  // The backward reads the probabilities as the forward rounded them.
  std::vector<float> y16(count);
  yBits.resize(count);
  for (size_t i = 0; i < count; ++i) {
    yBits[i] = float16Bits(kind, y[i]);
    y16[i] = float16Value(kind, yBits[i]);
  }
  std::vector<float> dy = rounded16(t, kind, count, -1.0f, 1.0f, dyBits);
  cpu::softmaxBackward(y16.data(), dy.data(), dx.data(), outer, n, inner);
  DeviceBuffer xD = t.upload(xBits), y16D = t.upload(yBits),
               dyD = t.upload(dyBits), yD = t.alloc(count * 2),
               dxD = t.alloc(count * 2);
  gpu::softmaxForward(t.ctx, in16<T>(xD), out16<T>(yD), outer, n, inner);
  gpu::softmaxBackward(t.ctx, in16<T>(y16D), in16<T>(dyD), out16<T>(dxD), outer,
                       n, inner);
  auto compare = [&](const DeviceBuffer &b, const std::vector<float> &want,
                     const char *what) {
    return compare16(t, kind, b, want, what);
  };
  t.check(format("softmax %s %lldx%lldx%lld",
                 kind == Float16Kind::BF16 ? "bf16" : "f16",
                 static_cast<long long>(outer), static_cast<long long>(n),
                 static_cast<long long>(inner)),
          firstError({compare(yD, y, "y"), compare(dxD, dx, "dx")}));
}

/// In place: y = softmax(y), dx = backward into dy's buffer.
void testSoftmaxInPlace(Tester &t) {
  const int64_t outer = 9, n = 300;
  const size_t count = static_cast<size_t>(outer * n);
  std::vector<float> x = t.uniform(count, -3.0f, 3.0f), y(count);
  cpu::softmaxForward(x.data(), y.data(), outer, n, 1);
  DeviceBuffer xD = t.upload(x);
  float *p = reinterpret_cast<float *>(xD.get());
  gpu::softmaxForward(t.ctx, p, p, outer, n, 1);
  t.check("softmaxForward in place",
          compareFloats(t.download<float>(p, count), y, kTol));
}

const char *reductionName(cpu::Reduction r) {
  switch (r) {
  case cpu::Reduction::None:
    return "none";
  case cpu::Reduction::Sum:
    return "sum";
  case cpu::Reduction::Mean:
    return "mean";
  }
  return "?";
}

void testCrossEntropy(Tester &t, int64_t outer, int64_t classes, int64_t inner,
                      bool labels64, cpu::Reduction reduction,
                      bool hasIgnoreIndex, int64_t ignoreIndex,
                      double ignoredFraction) {
  const std::string name =
      std::to_string(outer) + "x" + std::to_string(classes) + "x" +
      std::to_string(inner) + (labels64 ? " int64 " : " int32 ") +
      reductionName(reduction) +
      (hasIgnoreIndex ? " ignore " + std::to_string(ignoreIndex) : "") +
      (ignoredFraction >= 1.0 ? " all ignored" : "");
  const int64_t count = outer * inner;
  const size_t numScores = static_cast<size_t>(outer * classes * inner);
  std::vector<float> scores = t.uniform(numScores, -4.0f, 4.0f);
  std::vector<int64_t> labels(static_cast<size_t>(count));
  std::bernoulli_distribution ignored(ignoredFraction);
  for (int64_t &l : labels)
    l = hasIgnoreIndex && ignored(t.rng) ? ignoreIndex
                                         : t.randomInt(0, classes - 1);
  std::vector<unsigned char> labelBytes = t.indexBytes(labels, labels64);
  const size_t numLoss =
      reduction == cpu::Reduction::None ? static_cast<size_t>(count) : 1;
  std::vector<float> loss(numLoss);
  cpu::softmaxCrossEntropyForward(scores.data(), labelBytes.data(), labels64,
                                  loss.data(), outer, classes, inner, reduction,
                                  hasIgnoreIndex, ignoreIndex);
  DeviceBuffer sD = t.upload(scores), lD = t.upload(labelBytes),
               lossD = t.alloc(numLoss * 4);
  gpu::softmaxCrossEntropyForward(
      t.ctx, reinterpret_cast<const float *>(sD.get()), lD.get(), labels64,
      reinterpret_cast<float *>(lossD.get()), outer, classes, inner, reduction,
      hasIgnoreIndex, ignoreIndex);
  t.check("softmaxCrossEntropyForward " + name,
          compareFloats(t.download<float>(lossD.get(), numLoss), loss, kTol));

  std::vector<float> dloss = t.uniform(numLoss, 0.5f, 2.0f);
  std::vector<float> dscores(numScores);
  cpu::softmaxCrossEntropyBackward(
      scores.data(), labelBytes.data(), labels64, dloss.data(), dscores.data(),
      outer, classes, inner, reduction, hasIgnoreIndex, ignoreIndex);
  DeviceBuffer dlD = t.upload(dloss);
  DeviceBuffer dsD = t.upload(t.uniform(numScores)); // overwritten
  gpu::softmaxCrossEntropyBackward(
      t.ctx, reinterpret_cast<const float *>(sD.get()), lD.get(), labels64,
      reinterpret_cast<const float *>(dlD.get()),
      reinterpret_cast<float *>(dsD.get()), outer, classes, inner, reduction,
      hasIgnoreIndex, ignoreIndex);
  t.check(
      "softmaxCrossEntropyBackward " + name,
      compareFloats(t.download<float>(dsD.get(), numScores), dscores, kTol));
}

/// One block of a vocab-parallel cross-entropy (classes [offset, offset +
/// classes) of more): statistics and dscores against the CPU kernels, some
/// labels in the block, some outside it, some ignored.
void testCrossEntropyShard(Tester &t, int64_t outer, int64_t classes,
                           int64_t inner, int64_t offset, bool labels64,
                           cpu::Reduction reduction) {
  const std::string name =
      std::to_string(outer) + "x" + std::to_string(classes) + "x" +
      std::to_string(inner) + " offset " + std::to_string(offset) + " " +
      reductionName(reduction);
  const int64_t count = outer * inner;
  const size_t numScores = static_cast<size_t>(outer * classes * inner);
  std::vector<float> scores = t.uniform(numScores, -4.0f, 4.0f);
  std::vector<int64_t> labels(static_cast<size_t>(count));
  for (int64_t &l : labels)
    l = t.randomInt(0, 5) == 0 ? -100 : t.randomInt(0, offset + 2 * classes);
  std::vector<unsigned char> labelBytes = t.indexBytes(labels, labels64);
  std::vector<float> max = t.uniform(static_cast<size_t>(count), 3.0f, 4.0f);
  std::vector<float> sumExp(count), target(count);
  cpu::crossEntropyShardStats(scores.data(), labelBytes.data(), labels64,
                              max.data(), &offset, sumExp.data(), target.data(),
                              outer, classes, inner);
  std::vector<int64_t> offsetHost = {offset};
  DeviceBuffer sD = t.upload(scores), lD = t.upload(labelBytes),
               mD = t.upload(max), oD = t.upload(offsetHost),
               seD = t.alloc(count * 4), tD = t.alloc(count * 4);
  gpu::crossEntropyShardStats(
      t.ctx, reinterpret_cast<const float *>(sD.get()), lD.get(), labels64,
      reinterpret_cast<const float *>(mD.get()),
      reinterpret_cast<const int64_t *>(oD.get()),
      reinterpret_cast<float *>(seD.get()), reinterpret_cast<float *>(tD.get()),
      outer, classes, inner);
  t.check("crossEntropyShardStats sum_exp " + name,
          compareFloats(t.download<float>(seD.get(), count), sumExp, kTol));
  t.check("crossEntropyShardStats target " + name,
          compareFloats(t.download<float>(tD.get(), count), target, kTol));

  std::vector<float> lse = t.uniform(static_cast<size_t>(count), 4.0f, 6.0f);
  const size_t numLoss =
      reduction == cpu::Reduction::None ? static_cast<size_t>(count) : 1;
  std::vector<float> dloss = t.uniform(numLoss, 0.5f, 2.0f);
  std::vector<float> dscores(numScores);
  cpu::crossEntropyShardBackward(
      scores.data(), labelBytes.data(), labels64, dloss.data(), lse.data(),
      &offset, dscores.data(), outer, classes, inner, reduction, true, -100);
  DeviceBuffer dlD = t.upload(dloss), lseD = t.upload(lse);
  DeviceBuffer dsD = t.upload(t.uniform(numScores)); // overwritten
  gpu::crossEntropyShardBackward(
      t.ctx, reinterpret_cast<const float *>(sD.get()), lD.get(), labels64,
      reinterpret_cast<const float *>(dlD.get()),
      reinterpret_cast<const float *>(lseD.get()),
      reinterpret_cast<const int64_t *>(oD.get()),
      reinterpret_cast<float *>(dsD.get()), outer, classes, inner, reduction,
      true, -100);
  t.check(
      "crossEntropyShardBackward " + name,
      compareFloats(t.download<float>(dsD.get(), numScores), dscores, kTol));
}

/// Cross-entropy on 16-bit scores (f32 loss and dloss) against the CPU
/// kernels on the same 16-bit values in float: the loss within the f32
/// tolerance, dscores within one rounding of the type.
template <typename T>
void testCrossEntropy16(Tester &t, Float16Kind kind, int64_t outer,
                        int64_t classes, int64_t inner,
                        cpu::Reduction reduction) {
  const int64_t count = outer * inner;
  const size_t numScores = static_cast<size_t>(outer * classes * inner);
  std::vector<uint16_t> bits;
  std::vector<float> scores =
      rounded16(t, kind, numScores, -4.0f, 4.0f, bits);
  std::vector<int64_t> labels(static_cast<size_t>(count));
  for (int64_t &l : labels)
    l = t.randomInt(0, 5) == 0 ? -100 : t.randomInt(0, classes - 1);
  std::vector<unsigned char> labelBytes = t.indexBytes(labels, true);
  const size_t numLoss =
      reduction == cpu::Reduction::None ? static_cast<size_t>(count) : 1;
  std::vector<float> loss(numLoss), dscores(numScores);
  std::vector<float> dloss = t.uniform(numLoss, 0.5f, 2.0f);
  cpu::softmaxCrossEntropyForward(scores.data(), labelBytes.data(), true,
                                  loss.data(), outer, classes, inner, reduction,
                                  true, -100);
  cpu::softmaxCrossEntropyBackward(scores.data(), labelBytes.data(), true,
                                   dloss.data(), dscores.data(), outer, classes,
                                   inner, reduction, true, -100);
  DeviceBuffer sD = t.upload(bits), lD = t.upload(labelBytes),
               dlD = t.upload(dloss), lossD = t.alloc(numLoss * 4),
               dsD = t.alloc(numScores * 2);
  gpu::softmaxCrossEntropyForward(
      t.ctx, reinterpret_cast<const T *>(sD.get()), lD.get(), true,
      reinterpret_cast<float *>(lossD.get()), outer, classes, inner, reduction,
      true, -100);
  gpu::softmaxCrossEntropyBackward(
      t.ctx, reinterpret_cast<const T *>(sD.get()), lD.get(), true,
      reinterpret_cast<const float *>(dlD.get()),
      reinterpret_cast<T *>(dsD.get()), outer, classes, inner, reduction, true,
      -100);
  const double ulp = kind == Float16Kind::BF16 ? 0x1p-8 : 0x1p-11;
  t.check(format("softmaxCrossEntropy %s %lldx%lldx%lld %s",
                 kind == Float16Kind::BF16 ? "bf16" : "f16",
                 static_cast<long long>(outer), static_cast<long long>(classes),
                 static_cast<long long>(inner), reductionName(reduction)),
          firstError({compareFloats(t.download<float>(lossD.get(), numLoss),
                                    loss, kTol),
                      test::compareFloats(download16(t, kind, dsD, numScores),
                                          dscores, ulp + kTol, kTol,
                                          "dscores")}));
}

void testNormalizations(Tester &t) {
  const int64_t lnShapes[][2] = {{1, 1},     {3, 7},     {64, 768}, {5, 1000},
                                 {300, 257}, {1030, 33}, {2, 5000},
                                 {2500, 45}};
  for (const auto &s : lnShapes) {
    testLayerNorm(t, s[0], s[1], true);
    if (s[1] == 768 || s[1] == 33)
      testLayerNorm(t, s[0], s[1], false);
    testLayerNorm16<__nv_bfloat16>(t, Float16Kind::BF16, s[0], s[1]);
    testLayerNorm16<__half>(t, Float16Kind::Half, s[0], s[1]);
  }
  const int64_t smShapes[][3] = {{1, 1, 1},    {7, 50257, 1}, {64, 129, 1},
                                 {3, 1000, 1}, {4, 37, 5},    {3, 300, 17},
                                 {2, 1, 9},    {1, 2, 70000}};
  for (const auto &s : smShapes) {
    testSoftmax(t, s[0], s[1], s[2]);
    if (s[1] < 4096) {
      testSoftmax16<__nv_bfloat16>(t, Float16Kind::BF16, s[0], s[1], s[2]);
      testSoftmax16<__half>(t, Float16Kind::Half, s[0], s[1], s[2]);
    }
  }
  testSoftmaxInPlace(t);

  using R = cpu::Reduction;
  for (R r : {R::None, R::Sum, R::Mean}) {
    testCrossEntropy(t, 64, 50257, 1, true, r, true, -100, 0.2);
    testCrossEntropy(t, 6, 11, 7, false, r, true, 3, 0.3);
    testCrossEntropy(t, 37, 257, 1, false, r, false, 0, 0.0);
  }
  testCrossEntropy(t, 5, 1, 1, true, R::Mean, false, 0, 0.0);
  testCrossEntropy(t, 4, 9, 1, true, R::Mean, true, -100, 1.0);
  testCrossEntropy(t, 3, 5, 2, false, R::Sum, true, -1, 1.0);
  for (R r : {R::None, R::Sum, R::Mean}) {
    testCrossEntropyShard(t, 64, 25129, 1, 25128, true, r);
    testCrossEntropyShard(t, 6, 11, 7, 0, false, r);
  }
  for (R r : {R::None, R::Mean}) {
    testCrossEntropy16<__nv_bfloat16>(t, Float16Kind::BF16, 64, 50257, 1, r);
    testCrossEntropy16<__half>(t, Float16Kind::Half, 6, 11, 7, r);
  }
}

//===----------------------------------------------------------------------===//
// Gather, strided copies, axis blocks
//===----------------------------------------------------------------------===//

void testGather(Tester &t, const std::string &name, int64_t outer,
                int64_t axisSize, int64_t innerBytes, int64_t numIndices,
                bool indices64, int64_t misalignBytes = 0) {
  std::vector<int64_t> idx(static_cast<size_t>(numIndices));
  for (int64_t &i : idx)
    i = t.randomInt(-axisSize, axisSize - 1);
  std::vector<unsigned char> idxBytes = t.indexBytes(idx, indices64);
  const size_t dataBytes = static_cast<size_t>(outer * axisSize * innerBytes);
  const size_t outBytes = static_cast<size_t>(outer * numIndices * innerBytes);
  std::vector<unsigned char> data = t.randomBytes(dataBytes + misalignBytes);
  std::vector<unsigned char> want(outBytes);
  cpu::gather(data.data() + misalignBytes, idxBytes.data(), indices64,
              want.data(), outer, axisSize, innerBytes, numIndices);
  DeviceBuffer dataD = t.upload(data), idxD = t.upload(idxBytes),
               outD = t.alloc(static_cast<int64_t>(outBytes + misalignBytes));
  gpu::gather(t.ctx, dataD.get() + misalignBytes, idxD.get(), indices64,
              outD.get() + misalignBytes, outer, axisSize, innerBytes,
              numIndices);
  std::vector<unsigned char> got =
      t.download<unsigned char>(outD.get() + misalignBytes, outBytes);
  t.check("gather " + name, compareBytes(got.data(), want.data(), outBytes));
}

void testGatherBackward(Tester &t, const std::string &name, int64_t outer,
                        int64_t axisSize, int64_t inner, int64_t numIndices,
                        bool indices64) {
  // Many duplicates: half the indices among three rows (one negative).
  std::vector<int64_t> idx(static_cast<size_t>(numIndices));
  std::bernoulli_distribution hot(0.5);
  for (int64_t &i : idx) {
    if (hot(t.rng)) {
      const int64_t pick = t.randomInt(0, 2);
      i = pick == 0 ? 0 : pick == 1 ? std::min<int64_t>(1, axisSize - 1) : -1;
    } else {
      i = t.randomInt(-axisSize, axisSize - 1);
    }
  }
  std::vector<unsigned char> idxBytes = t.indexBytes(idx, indices64);
  const size_t doutCount = static_cast<size_t>(outer * numIndices * inner);
  const size_t ddataCount = static_cast<size_t>(outer * axisSize * inner);
  std::vector<float> dout = t.uniform(doutCount);
  std::vector<float> want(ddataCount);
  cpu::gatherBackward(idxBytes.data(), indices64, dout.data(), want.data(),
                      outer, axisSize, inner, numIndices);
  DeviceBuffer idxD = t.upload(idxBytes), doutD = t.upload(dout);
  DeviceBuffer ddataD = t.upload(t.uniform(ddataCount)); // zeroed by the call
  gpu::gatherBackward(t.ctx, idxD.get(), indices64,
                      reinterpret_cast<const float *>(doutD.get()),
                      reinterpret_cast<float *>(ddataD.get()), outer, axisSize,
                      inner, numIndices);
  // The same additions in the same order: bit-identical.
  t.check("gatherBackward " + name,
          compareFloats(t.download<float>(ddataD.get(), ddataCount), want, 0));
}

/// Offsets [lo, hi] an index space `shape` with `strides` from `offset`
/// reaches.
void offsetRange(const std::vector<int64_t> &shape,
                 const std::vector<int64_t> &strides, int64_t offset,
                 int64_t &lo, int64_t &hi) {
  lo = hi = offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t span = (shape[d] - 1) * strides[d];
    (span < 0 ? lo : hi) += span;
  }
}

int64_t product(const std::vector<int64_t> &shape) {
  int64_t p = 1;
  for (int64_t e : shape)
    p *= e;
  return p;
}

void testStridedCopy(Tester &t, const std::string &name,
                     const std::vector<int64_t> &shape,
                     const std::vector<int64_t> &strides, int64_t offset,
                     int64_t elementBytes) {
  int64_t lo, hi;
  offsetRange(shape, strides, offset, lo, hi);
  if (lo < 0) {
    t.check("stridedCopy " + name, "bad test: negative offset");
    return;
  }
  const int rank = static_cast<int>(shape.size());
  std::vector<unsigned char> in =
      t.randomBytes(static_cast<size_t>((hi + 1) * elementBytes));
  const size_t outBytes = static_cast<size_t>(product(shape) * elementBytes);
  std::vector<unsigned char> want(outBytes);
  cpu::stridedCopy(in.data(), want.data(), rank, shape.data(), strides.data(),
                   offset, elementBytes);
  DeviceBuffer inD = t.upload(in), outD = t.alloc(outBytes);
  gpu::stridedCopy(t.ctx, inD.get(), outD.get(), rank, shape.data(),
                   strides.data(), offset, elementBytes);
  std::vector<unsigned char> got =
      t.download<unsigned char>(outD.get(), outBytes);
  t.check("stridedCopy " + name,
          compareBytes(got.data(), want.data(), outBytes));
}

void testStridedScatter(Tester &t, const std::string &name, int64_t outElements,
                        const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &strides, int64_t offset,
                        int64_t elementBytes) {
  int64_t lo, hi;
  offsetRange(shape, strides, offset, lo, hi);
  if (lo < 0 || hi >= outElements) {
    t.check("stridedScatter " + name, "bad test: offsets out of range");
    return;
  }
  const int rank = static_cast<int>(shape.size());
  std::vector<unsigned char> in =
      t.randomBytes(static_cast<size_t>(product(shape) * elementBytes));
  const size_t outBytes = static_cast<size_t>(outElements * elementBytes);
  // Garbage first on both sides: the scatter zeroes the rest.
  std::vector<unsigned char> want = t.randomBytes(outBytes);
  DeviceBuffer inD = t.upload(in), outD = t.upload(want);
  cpu::stridedScatter(in.data(), want.data(), outElements, rank, shape.data(),
                      strides.data(), offset, elementBytes);
  gpu::stridedScatter(t.ctx, inD.get(), outD.get(), outElements, rank,
                      shape.data(), strides.data(), offset, elementBytes);
  std::vector<unsigned char> got =
      t.download<unsigned char>(outD.get(), outBytes);
  t.check("stridedScatter " + name,
          compareBytes(got.data(), want.data(), outBytes));
}

void testCopyAxisBlock(Tester &t, const std::string &name, int64_t outer,
                       int64_t n, int64_t bigN, int64_t offset,
                       int64_t innerBytes, bool intoBig) {
  const size_t smallBytes = static_cast<size_t>(outer * n * innerBytes);
  const size_t bigBytes = static_cast<size_t>(outer * bigN * innerBytes);
  std::vector<unsigned char> in =
      t.randomBytes(intoBig ? smallBytes : bigBytes);
  const size_t outBytes = intoBig ? bigBytes : smallBytes;
  std::vector<unsigned char> want = t.randomBytes(outBytes);
  DeviceBuffer inD = t.upload(in), outD = t.upload(want);
  cpu::copyAxisBlock(in.data(), want.data(), outer, n, bigN, offset, innerBytes,
                     intoBig);
  gpu::copyAxisBlock(t.ctx, inD.get(), outD.get(), outer, n, bigN, offset,
                     innerBytes, intoBig);
  std::vector<unsigned char> got =
      t.download<unsigned char>(outD.get(), outBytes);
  t.check(std::string("copyAxisBlock ") + (intoBig ? "concat " : "split ") +
              name,
          compareBytes(got.data(), want.data(), outBytes));
}

void testDataMovement(Tester &t) {
  testGather(t, "embedding int64 768 floats", 1, 1000, 768 * 4, 300, true);
  testGather(t, "embedding int32 768 floats", 1, 1000, 768 * 4, 300, false);
  testGather(t, "3-byte rows int32", 3, 17, 3, 11, false);
  testGather(t, "int64 elements x5", 2, 9, 40, 13, true);
  testGather(t, "2-byte rows", 4, 6, 2, 25, true);
  testGather(t, "misaligned 6-byte rows", 2, 8, 6, 9, false, 2);
  testGather(t, "16-byte words", 2, 50, 64, 100, false);

  testGatherBackward(t, "1x1000x64 int64 5000 indices", 1, 1000, 64, 5000,
                     true);
  testGatherBackward(t, "3x7x5 int32 40 indices", 3, 7, 5, 40, false);
  testGatherBackward(t, "1x50257x16 int32 2048 indices", 1, 50257, 16, 2048,
                     false);
  testGatherBackward(t, "2x9x1 int64 100 indices", 2, 9, 1, 100, true);
  testGatherBackward(t, "axis 1 int32", 2, 1, 3, 10, false);
  testGatherBackward(t, "no indices", 2, 5, 3, 0, true);

  testStridedCopy(t, "rank 0", {}, {}, 5, 4);
  testStridedCopy(t, "transpose 3x4x5 -> 5x3x4", {5, 3, 4}, {1, 20, 5}, 0, 4);
  testStridedCopy(t, "reverse 4x6 2-byte", {4, 6}, {-6, -1}, 23, 2);
  testStridedCopy(t, "step slice 8-byte", {3, 5}, {20, 3}, 2, 8);
  testStridedCopy(t, "broadcast 1-byte", {4, 3}, {0, 1}, 1, 1);
  testStridedCopy(t, "rank 8", {2, 1, 3, 2, 1, 2, 3, 2},
                  {1, 144, 2, 6, 144, 12, 24, 72}, 0, 4);
  testStridedCopy(t, "transpose 257x1031", {257, 1031}, {1, 257}, 0, 4);
  testStridedCopy(t, "contiguous rows 8-byte", {7, 33}, {40, 1}, 3, 8);

  testStridedScatter(t, "slice 3x4 into 5x10", 50, {3, 4}, {10, 1}, 12, 4);
  testStridedScatter(t, "negative step 2-byte", 50, {4, 3}, {-10, 3}, 31, 2);
  testStridedScatter(t, "stride 0 last wins 8-byte", 20, {3, 4}, {0, 2}, 1, 8);
  testStridedScatter(t, "rank 0 1-byte", 9, {}, {}, 7, 1);
  testStridedScatter(t, "64x129 step 2", 64 * 300, {64, 129}, {300, 2}, 5, 4);

  for (bool intoBig : {true, false}) {
    testCopyAxisBlock(t, "7x3 of 10 at 4, 20 bytes", 7, 3, 10, 4, 20, intoBig);
    testCopyAxisBlock(t, "5x2 of 5 at 3, 3 bytes", 5, 2, 5, 3, 3, intoBig);
    testCopyAxisBlock(t, "1x100 of 300 at 200, 64 bytes", 1, 100, 300, 200, 64,
                      intoBig);
    testCopyAxisBlock(t, "9x1 of 4 at 0, 8 bytes", 9, 1, 4, 0, 8, intoBig);
  }

  std::vector<unsigned char> bytes = t.randomBytes(1001);
  DeviceBuffer src = t.upload(bytes), dst = t.alloc(1001);
  gpu::copy(t.ctx, dst.get(), src.get(), 1001);
  std::vector<unsigned char> got = t.download<unsigned char>(dst.get(), 1001);
  t.check("copy 1001 bytes", compareBytes(got.data(), bytes.data(), 1001));
}

//===----------------------------------------------------------------------===//
// Reductions and accumulation
//===----------------------------------------------------------------------===//

void testReduce(Tester &t, cpu::ReduceKind kind,
                const std::vector<int64_t> &shape,
                const std::vector<bool> &reducedFlags, bool withNaN = false) {
  const char *kindName = kind == cpu::ReduceKind::Sum    ? "sum"
                         : kind == cpu::ReduceKind::Mean ? "mean"
                                                         : "max";
  std::string name = std::string("reduce ") + kindName + " [";
  for (size_t d = 0; d < shape.size(); ++d)
    name += (d ? "," : "") + std::to_string(shape[d]) +
            (reducedFlags[d] ? "r" : "");
  name += "]";
  if (withNaN)
    name += " with NaN";
  const size_t count = static_cast<size_t>(product(shape));
  std::vector<float> in = t.uniform(count, -2.0f, 2.0f);
  if (withNaN)
    in[count / 3] = std::numeric_limits<float>::quiet_NaN();
  bool reduced[cpu::kMaxRank] = {};
  int64_t outCount = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    reduced[d] = reducedFlags[d];
    if (!reduced[d])
      outCount *= shape[d];
  }
  const int rank = static_cast<int>(shape.size());
  std::vector<float> want(static_cast<size_t>(outCount));
  cpu::reduce(kind, in.data(), want.data(), rank, shape.data(), reduced);
  DeviceBuffer inD = t.upload(in), outD = t.alloc(outCount * 4);
  gpu::reduce(t.ctx, kind, reinterpret_cast<const float *>(inD.get()),
              reinterpret_cast<float *>(outD.get()), rank, shape.data(),
              reduced);
  // The max is exact; sums accumulate in double on both sides.
  t.check(name, compareFloats(t.download<float>(outD.get(), want.size()), want,
                              kind == cpu::ReduceKind::Max ? 0.0 : kTol));
}

/// A 16-bit reduction (bf16 or IEEE half in and out) against cpu::reduce
/// on the same 16-bit values in float, its result rounded to the type:
/// equal, or one rounding apart where the f32 reference rounded first.
template <typename T>
void testReduce16(Tester &t, Float16Kind kind, cpu::ReduceKind reduceKind,
                  const std::vector<int64_t> &shape,
                  const std::vector<bool> &reducedFlags) {
  const size_t count = static_cast<size_t>(product(shape));
  std::vector<uint16_t> bits;
  std::vector<float> in = rounded16(t, kind, count, -2.0f, 2.0f, bits);
  bool reduced[cpu::kMaxRank] = {};
  int64_t outCount = 1;
  std::string name =
      format("reduce %s %d [", kind == Float16Kind::BF16 ? "bf16" : "f16",
             static_cast<int>(reduceKind));
  for (size_t d = 0; d < shape.size(); ++d) {
    reduced[d] = reducedFlags[d];
    if (!reduced[d])
      outCount *= shape[d];
    name +=
        (d ? "," : "") + std::to_string(shape[d]) + (reduced[d] ? "r" : "");
  }
  const int rank = static_cast<int>(shape.size());
  std::vector<float> want(static_cast<size_t>(outCount));
  cpu::reduce(reduceKind, in.data(), want.data(), rank, shape.data(), reduced);
  for (float &w : want)
    w = float16Value(kind, float16Bits(kind, w));
  DeviceBuffer inD = t.upload(bits), outD = t.alloc(outCount * 2);
  gpu::reduce(t.ctx, reduceKind, reinterpret_cast<const T *>(inD.get()),
              reinterpret_cast<T *>(outD.get()), rank, shape.data(), reduced);
  const double ulp = kind == Float16Kind::BF16 ? 0x1p-8 : 0x1p-11;
  t.check(name + "]", compareFloats(download16(t, kind, outD, want.size()),
                                    want, ulp));
}

void testReductions(Tester &t) {
  using K = cpu::ReduceKind;
  for (K k : {K::Sum, K::Mean, K::Max}) {
    testReduce16<__nv_bfloat16>(t, Float16Kind::BF16, k, {4096, 768},
                                {true, false});
    testReduce16<__half>(t, Float16Kind::Half, k, {37, 53}, {false, true});
    testReduce16<__nv_bfloat16>(t, Float16Kind::BF16, k, {4, 5, 6},
                                {true, false, true});
  }
  testReduce(t, K::Sum, {37, 53}, {true, false});
  testReduce(t, K::Mean, {37, 53}, {false, true});
  testReduce(t, K::Max, {37, 53}, {true, false}, true);
  testReduce(t, K::Max, {37, 53}, {false, true}, true);
  for (K k : {K::Sum, K::Mean, K::Max})
    testReduce(t, k, {100000, 3}, {true, false});
  testReduce(t, K::Max, {100000, 3}, {true, false}, true);
  testReduce(t, K::Sum, {100000, 5}, {false, true});
  testReduce(t, K::Max, {100000, 5}, {false, true}, true);
  testReduce(t, K::Max, {3, 100000}, {false, true});
  testReduce(t, K::Mean, {3, 100000}, {false, true});
  testReduce(t, K::Sum, {4, 5, 6}, {true, false, true});
  testReduce(t, K::Mean, {4, 5, 6}, {false, true, false});
  testReduce(t, K::Max, {4, 5, 6}, {false, true, false});
  testReduce(t, K::Sum, {2, 1, 3, 1, 4}, {true, true, false, false, true});
  testReduce(t, K::Mean, {6, 7}, {true, true});
  testReduce(t, K::Sum, {1000003}, {true});
  testReduce(t, K::Sum, {1, 1}, {true, false});
  testReduce(t, K::Sum, {8, 4096}, {true, false});
  testReduce(t, K::Sum, {2, 3, 4, 5, 6, 7, 2, 3},
             {false, true, false, true, true, false, true, false});

  const int64_t n = 1000003;
  for (bool accumulate : {false, true}) {
    std::vector<float> dst = t.uniform(n), src = t.uniform(n);
    DeviceBuffer dstD = t.upload(dst), srcD = t.upload(src);
    cpu::accumulateInto(dst.data(), src.data(), n, 0.37f, accumulate);
    gpu::accumulateInto(t.ctx, reinterpret_cast<float *>(dstD.get()),
                        reinterpret_cast<const float *>(srcD.get()), n, 0.37f,
                        accumulate);
    t.check(std::string("accumulateInto ") +
                (accumulate ? "accumulate" : "overwrite"),
            compareFloats(t.download<float>(dstD.get(), n), dst, 1e-6));
  }
}

//===----------------------------------------------------------------------===//
// Device: memory and optimizer
//===----------------------------------------------------------------------===//

/// Host and device copies of parameters, gradients and states.
struct OptimizerState {
  std::vector<int64_t> sizes;
  std::vector<std::vector<float>> hostParam, hostGrad, hostS0, hostS1;
  std::vector<DeviceBuffer> devParam, devGrad, devS0, devS1;
  std::vector<ParamSlice> hostSlices, devSlices;
};

OptimizerState makeOptimizerState(Tester &t, int numStates) {
  OptimizerState s;
  s.sizes = {1000, 70001, 5, 0, 131072};
  for (size_t k = 0; k < s.sizes.size(); ++k) {
    const size_t n = static_cast<size_t>(s.sizes[k]);
    s.hostParam.push_back(t.uniform(n));
    s.hostGrad.push_back(t.uniform(n));
    s.hostS0.push_back(t.uniform(n, 0.0f, 0.1f));
    s.hostS1.push_back(t.uniform(n, 0.0f, 0.01f));
  }
  for (size_t k = 0; k < s.sizes.size(); ++k) {
    s.devParam.push_back(t.upload(s.hostParam[k]));
    s.devGrad.push_back(t.upload(s.hostGrad[k]));
    s.devS0.push_back(t.upload(s.hostS0[k]));
    s.devS1.push_back(t.upload(s.hostS1[k]));
  }
  for (size_t k = 0; k < s.sizes.size(); ++k) {
    const bool decay = k % 2 == 0;
    s.hostSlices.push_back({s.hostParam[k].data(), s.hostGrad[k].data(),
                            numStates > 0 ? s.hostS0[k].data() : nullptr,
                            numStates > 1 ? s.hostS1[k].data() : nullptr,
                            s.sizes[k], decay});
    auto f = [](DeviceBuffer &b) { return reinterpret_cast<float *>(b.get()); };
    s.devSlices.push_back({f(s.devParam[k]), f(s.devGrad[k]),
                           numStates > 0 ? f(s.devS0[k]) : nullptr,
                           numStates > 1 ? f(s.devS1[k]) : nullptr, s.sizes[k],
                           decay});
  }
  return s;
}

/// Empty when every device tensor equals its host copy bit for bit.
std::string compareOptimizerState(Tester &t, OptimizerState &s, int numStates) {
  for (size_t k = 0; k < s.sizes.size(); ++k) {
    const size_t n = static_cast<size_t>(s.sizes[k]);
    const size_t bytes = n * sizeof(float);
    std::string e =
        compareBytes(t.download<float>(s.devParam[k].get(), n).data(),
                     s.hostParam[k].data(), bytes);
    if (e.empty())
      e = compareBytes(t.download<float>(s.devGrad[k].get(), n).data(),
                       s.hostGrad[k].data(), bytes);
    if (e.empty() && numStates > 0)
      e = compareBytes(t.download<float>(s.devS0[k].get(), n).data(),
                       s.hostS0[k].data(), bytes);
    if (e.empty() && numStates > 1)
      e = compareBytes(t.download<float>(s.devS1[k].get(), n).data(),
                       s.hostS1[k].data(), bytes);
    if (!e.empty())
      return "tensor " + std::to_string(k) + ": " + e;
  }
  return "";
}

void testOptimizer(Tester &t, const std::string &name,
                   const OptimizerConfig &config) {
  const int numStates = numStateBuffers(config);
  OptimizerState s = makeOptimizerState(t, numStates);
  std::string error;
  for (int64_t step = 1; step <= 3 && error.empty(); ++step) {
    if (step > 1) {
      // Fresh gradients on both sides.
      for (size_t k = 0; k < s.sizes.size(); ++k) {
        s.hostGrad[k] = t.uniform(s.hostGrad[k].size());
        s.hostSlices[k].grad = s.hostGrad[k].data();
        t.dev.upload(s.devGrad[k].get(), s.hostGrad[k].data(),
                     static_cast<int64_t>(s.hostGrad[k].size() * 4));
      }
    }
    const double lr = 1e-3 * static_cast<double>(step);
    optimizerStep(config, s.hostSlices, step, lr);
    t.dev.optimizerStep(config, s.devSlices, step, lr);
    error = compareOptimizerState(t, s, numStates);
    if (!error.empty())
      error = "step " + std::to_string(step) + ": " + error;
  }
  t.check("optimizerStep " + name, error);
}

/// Mixed precision on the device: 16-bit gradients (gradLow), an f32
/// master, the rounded 16-bit parameter (paramLow) and a gradient
/// multiplier, against the host optimizer bit for bit; and the squared norm
/// of 16-bit gradients.
void testOptimizer16(Tester &t, Float16Kind kind,
                     const OptimizerConfig &config) {
  const int64_t n = 70001;
  const size_t count = static_cast<size_t>(n);
  std::vector<float> master = t.uniform(count), s0(count, 0.0f),
                     s1(count, 0.0f);
  std::vector<uint16_t> grad(count), param(count, 0);
  for (size_t i = 0; i < count; ++i)
    grad[i] = float16Bits(kind, 0.01f * t.uniform(1)[0]);
  DeviceBuffer dMaster = t.upload(master), dS0 = t.upload(s0),
               dS1 = t.upload(s1), dGrad = t.upload(grad),
               dParam = t.upload(param);
  auto slice = [&](float *m, uint16_t *g, uint16_t *p, float *a, float *b) {
    ParamSlice sl{m, nullptr, a, b, n, true};
    sl.gradLow = g;
    sl.paramLow = p;
    sl.lowKind = kind;
    return sl;
  };
  auto f = [](DeviceBuffer &b) { return reinterpret_cast<float *>(b.get()); };
  auto u = [](DeviceBuffer &b) { return reinterpret_cast<uint16_t *>(b.get()); };
  std::vector<ParamSlice> host = {
      slice(master.data(), grad.data(), param.data(), s0.data(), s1.data())};
  std::vector<ParamSlice> dev = {
      slice(f(dMaster), u(dGrad), u(dParam), f(dS0), f(dS1))};
  const char *name = kind == Float16Kind::BF16 ? "bf16" : "f16";
  std::string e;
  for (int64_t step = 1; step <= 3 && e.empty(); ++step) {
    optimizerStep(config, host, step, 1e-3, 0.375f);
    t.dev.optimizerStep(config, dev, step, 1e-3, 0.375f);
    e = compareBytes(t.download<float>(dMaster.get(), count).data(),
                     master.data(), count * 4);
    if (e.empty())
      e = compareBytes(t.download<uint16_t>(dParam.get(), count).data(),
                       param.data(), count * 2);
    if (e.empty())
      e = compareBytes(t.download<float>(dS0.get(), count).data(), s0.data(),
                       count * 4);
  }
  t.check(format("optimizerStep %s %s", name,
                 config.kind == OptimizerKind::AdamW ? "adamw" : "sgd"),
          e);
  const double want = gradSquaredSum(host), got = t.dev.gradSquaredSum(dev);
  t.check(format("gradSquaredSum %s", name),
          std::fabs(got - want) <= 1e-12 * std::fabs(want)
              ? ""
              : format("got %.17g, want %.17g", got, want));
}

void testDevice(Tester &t) {
  {
    DeviceBuffer b = t.alloc(4099);
    std::vector<unsigned char> got = t.download<unsigned char>(b.get(), 4099);
    std::vector<unsigned char> zeros(4099, 0);
    std::string e = compareBytes(got.data(), zeros.data(), 4099);
    std::vector<unsigned char> junk = t.randomBytes(4099);
    t.dev.upload(b.get(), junk.data(), 4099);
    t.dev.zero(b.get() + 100, 3000);
    std::memset(junk.data() + 100, 0, 3000);
    got = t.download<unsigned char>(b.get(), 4099);
    if (e.empty())
      e = compareBytes(got.data(), junk.data(), 4099);
    t.check("device allocate zeroes, upload, zero, download", e);
  }

  OptimizerConfig adamw;
  adamw.kind = OptimizerKind::AdamW;
  adamw.weightDecay = 0.1;
  testOptimizer(t, "adamw", adamw);
  OptimizerConfig adamwNoDecay = adamw;
  adamwNoDecay.weightDecay = 0.0;
  adamwNoDecay.beta1 = 0.8;
  adamwNoDecay.eps = 1e-6;
  testOptimizer(t, "adamw no weight decay", adamwNoDecay);
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::Sgd;
  sgd.weightDecay = 0.01;
  testOptimizer(t, "sgd", sgd);
  OptimizerConfig momentum = sgd;
  momentum.momentum = 0.9;
  momentum.dampening = 0.1;
  testOptimizer(t, "sgd momentum dampening", momentum);
  OptimizerConfig nesterov = sgd;
  nesterov.momentum = 0.9;
  nesterov.nesterov = true;
  testOptimizer(t, "sgd nesterov", nesterov);
  for (Float16Kind kind : {Float16Kind::BF16, Float16Kind::Half}) {
    testOptimizer16(t, kind, adamw);
    testOptimizer16(t, kind, momentum);
  }

  // Norm and clipping.
  OptimizerState s = makeOptimizerState(t, 0);
  const double hostSum = gradSquaredSum(s.hostSlices);
  const double devSum = t.dev.gradSquaredSum(s.devSlices);
  t.check("gradSquaredSum",
          std::fabs(devSum - hostSum) <= 1e-12 * std::fabs(hostSum)
              ? ""
              : format("got %.17g, want %.17g", devSum, hostSum));
  // A clipped step: the coefficient is the update's gradient multiplier.
  OptimizerConfig clip;
  clip.kind = OptimizerKind::Sgd;
  clip.maxGradNorm = 0.5;
  float coef = 0;
  std::string e;
  if (!clipCoefficient(clip, std::sqrt(hostSum), coef) || !(coef < 1.0f))
    e = "bad test: no clipping";
  optimizerStep(clip, s.hostSlices, 1, 1e-2, coef);
  t.dev.optimizerStep(clip, s.devSlices, 1, 1e-2, coef);
  if (e.empty())
    e = compareOptimizerState(t, s, 0);
  t.check("optimizerStep with the clipping coefficient", e);
}

void runAll(Tester &t) {
  testGemms(t);
  testNormalizations(t);
  testDataMovement(t);
  testReductions(t);
  testDevice(t);
}

} // namespace

int main() { return test::runCudaTests("cuda kernels", runAll); }
