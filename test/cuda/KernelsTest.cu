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


#include "test/cuda/KernelsTest.h"

using namespace autopar::rt;
using namespace autopar::rt::kernels_test;

namespace {

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

} // namespace

void kernels_test::testGemms(Tester &t) {
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

namespace {

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

/// With `valid` < classes (a padded vocabulary) only the first `valid`
/// classes count; the padded ones hold large scores, so that a kernel
/// reading them would differ.
void testCrossEntropy(Tester &t, int64_t outer, int64_t classes, int64_t inner,
                      bool labels64, cpu::Reduction reduction,
                      bool hasIgnoreIndex, int64_t ignoreIndex,
                      double ignoredFraction, int64_t valid = -1) {
  if (valid < 0)
    valid = classes;
  const std::string name =
      std::to_string(outer) + "x" + std::to_string(classes) + "x" +
      std::to_string(inner) + (labels64 ? " int64 " : " int32 ") +
      reductionName(reduction) +
      (hasIgnoreIndex ? " ignore " + std::to_string(ignoreIndex) : "") +
      (ignoredFraction >= 1.0 ? " all ignored" : "") +
      (valid < classes ? " first " + std::to_string(valid) : "");
  const int64_t count = outer * inner;
  const size_t numScores = static_cast<size_t>(outer * classes * inner);
  std::vector<float> scores = t.uniform(numScores, -4.0f, 4.0f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = valid; c < classes; ++c)
      for (int64_t i = 0; i < inner; ++i)
        scores[static_cast<size_t>((o * classes + c) * inner + i)] = 40.0f;
  std::vector<int64_t> labels(static_cast<size_t>(count));
  std::bernoulli_distribution ignored(ignoredFraction);
  for (int64_t &l : labels)
    l = hasIgnoreIndex && ignored(t.rng) ? ignoreIndex
                                         : t.randomInt(0, valid - 1);
  std::vector<unsigned char> labelBytes = t.indexBytes(labels, labels64);
  const size_t numLoss =
      reduction == cpu::Reduction::None ? static_cast<size_t>(count) : 1;
  std::vector<float> loss(numLoss);
  cpu::softmaxCrossEntropyForward(scores.data(), labelBytes.data(), labels64,
                                  loss.data(), outer, classes, inner, reduction,
                                  hasIgnoreIndex, ignoreIndex, valid);
  DeviceBuffer sD = t.upload(scores), lD = t.upload(labelBytes),
               lossD = t.alloc(numLoss * 4);
  gpu::softmaxCrossEntropyForward(
      t.ctx, reinterpret_cast<const float *>(sD.get()), lD.get(), labels64,
      reinterpret_cast<float *>(lossD.get()), outer, classes, inner, reduction,
      hasIgnoreIndex, ignoreIndex, valid);
  t.check("softmaxCrossEntropyForward " + name,
          compareFloats(t.download<float>(lossD.get(), numLoss), loss, kTol));

  std::vector<float> dloss = t.uniform(numLoss, 0.5f, 2.0f);
  std::vector<float> dscores(numScores);
  cpu::softmaxCrossEntropyBackward(
      scores.data(), labelBytes.data(), labels64, dloss.data(), dscores.data(),
      outer, classes, inner, reduction, hasIgnoreIndex, ignoreIndex, valid);
  DeviceBuffer dlD = t.upload(dloss);
  DeviceBuffer dsD = t.upload(t.uniform(numScores)); // overwritten
  gpu::softmaxCrossEntropyBackward(
      t.ctx, reinterpret_cast<const float *>(sD.get()), lD.get(), labels64,
      reinterpret_cast<const float *>(dlD.get()),
      reinterpret_cast<float *>(dsD.get()), outer, classes, inner, reduction,
      hasIgnoreIndex, ignoreIndex, valid);
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

} // namespace

void kernels_test::testNormalizations(Tester &t) {
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
  // GPT-2's vocabulary padded to 50304, and a strided one.
  for (R r : {R::None, R::Mean}) {
    testCrossEntropy(t, 64, 50304, 1, true, r, true, -100, 0.2, 50257);
    testCrossEntropy(t, 6, 16, 7, false, r, false, 0, 0.0, 11);
  }
  for (R r : {R::None, R::Sum, R::Mean}) {
    testCrossEntropyShard(t, 64, 25129, 1, 25128, true, r);
    testCrossEntropyShard(t, 6, 11, 7, 0, false, r);
  }
  for (R r : {R::None, R::Mean}) {
    testCrossEntropy16<__nv_bfloat16>(t, Float16Kind::BF16, 64, 50257, 1, r);
    testCrossEntropy16<__half>(t, Float16Kind::Half, 6, 11, 7, r);
  }
}

namespace {

void runAll(Tester &t) {
  testGemms(t);
  testNormalizations(t);
  testDataMovement(t);
  testReductions(t);
  testDevice(t);
}

} // namespace

int main() { return test::runCudaTests("cuda kernels", runAll); }
