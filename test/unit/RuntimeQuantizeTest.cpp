//===- RuntimeQuantizeTest.cpp - NF4, INT8 and double quantization --------===//
//
// runtime/support/Quantize.h against bitsandbytes: the dynamic map's values
// as create_dynamic_map() gives them in torch (float32), its order and
// symmetry, the nearest-code search; NF4 and INT8 round trips; double
// quantization's absmax within half a code step of the f32 ones;
// cpu::dequantize equal to the element functions; and gemmQuantizedB (a
// panel at a time) equal to gemm over the dequantized weight.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/support/Quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

using namespace autopar::rt;

namespace {

TEST(Quantize, DynamicMapIsBitsandbytes) {
  // bitsandbytes.functional.create_dynamic_map() (signed, 7 exponent
  // bits, 8 bits), printed from torch's float32 tensor.
  const std::pair<int, float> known[] = {{0, -0.992968738079071f},
                                         {1, -0.9789062142372131f},
                                         {2, -0.96484375f},
                                         {63, -0.10703125596046448f},
                                         {100, -0.0074687497690320015f},
                                         {126, -5.500000384017767e-07f},
                                         {127, 0.0f},
                                         {128, 5.500000384017767e-07f},
                                         {129, 3.250000190746505e-06f},
                                         {150, 0.0052187503315508366f},
                                         {200, 0.23359376192092896f},
                                         {253, 0.9789062142372131f},
                                         {254, 0.992968738079071f},
                                         {255, 1.0f}};
  for (auto [code, value] : known)
    EXPECT_FLOAT_EQ(dynamicMapValue(code), value) << "code " << code;
  for (int c = 1; c < 256; ++c)
    EXPECT_LT(dynamicMapValue(c - 1), dynamicMapValue(c)) << "code " << c;
  for (int c = 0; c < 127; ++c)
    EXPECT_EQ(dynamicMapValue(c), -dynamicMapValue(254 - c)) << "code " << c;
}

TEST(Quantize, DynamicMapCodeIsNearest) {
  for (int c = 0; c < 256; ++c)
    EXPECT_EQ(dynamicMapCode(dynamicMapValue(c)), c);
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int k = 0; k < 2000; ++k) {
    const float x = u(gen);
    const int got = dynamicMapCode(x);
    float best = INFINITY;
    for (int c = 0; c < 256; ++c)
      best = std::fmin(best, std::fabs(x - dynamicMapValue(c)));
    EXPECT_EQ(std::fabs(x - dynamicMapValue(got)), best) << x;
  }
}

std::vector<float> randomWeight(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> w(n);
  for (float &v : w)
    v = d(gen);
  return w;
}

TEST(Quantize, Nf4RoundTripsItsValues) {
  // Elements that are NF4 values times a block's absmax come back exactly;
  // 7 elements: an odd count, a shorter last block.
  const float values[7] = {1.0f,  -0.5250730514526367f, 0.0f,
                           -1.0f, 0.44070982933044434f, 0.7229568362236023f,
                           1.0f};
  std::vector<float> w(7);
  for (int e = 0; e < 7; ++e)
    w[e] = values[e] * (e < 4 ? 2.0f : 0.5f);
  std::vector<uint8_t> codes(4);
  std::vector<float> absmax(2);
  nf4Quantize(w.data(), 7, 4, codes.data(), absmax.data());
  EXPECT_EQ(absmax[0], 2.0f);
  EXPECT_EQ(absmax[1], 0.5f);
  for (int e = 0; e < 7; ++e)
    EXPECT_EQ(nf4Dequantize(codes.data(), absmax.data(), 4, e), w[e]);
  EXPECT_EQ(codes[3] & 15, 7); // the pad nibble is the code of 0
}

TEST(Quantize, DoubleQuantAbsmax) {
  // 600 blocks: three groups of 256, the last one shorter.
  const int64_t block = 64, n = 600 * block - 5;
  std::vector<float> w = randomWeight(n, 7);
  const int64_t blocks = (n + block - 1) / block;
  std::vector<uint8_t> codes((n + 1) / 2);
  std::vector<float> absmax(blocks);
  nf4Quantize(w.data(), n, block, codes.data(), absmax.data());
  std::vector<uint8_t> q(blocks);
  std::vector<float> state2(1 + 3);
  doubleQuantize(absmax.data(), blocks, q.data(), state2.data());
  double mean = 0;
  for (float m : absmax)
    mean += m;
  EXPECT_FLOAT_EQ(state2[0], static_cast<float>(mean / blocks));
  for (int64_t g = 0; g < 3; ++g) {
    float m = 0;
    for (int64_t b = g * 256; b < std::min<int64_t>(blocks, (g + 1) * 256); ++b)
      m = std::fmax(m, std::fabs(absmax[b] - state2[0]));
    EXPECT_EQ(state2[1 + g], m);
  }
  for (int64_t b = 0; b < blocks; ++b) {
    // Within half the gap to the neighbouring codes (the largest step of
    // the map near 1 is about 0.014).
    const float got = doubleQuantAbsmax(q.data(), state2.data(), b);
    EXPECT_LE(std::fabs(got - absmax[b]), 0.0071f * state2[1 + b / 256])
        << "block " << b;
  }
  // cpu::dequantize reads the codes and state2 as the element function.
  std::vector<float> out(n);
  cpu::dequantize(reinterpret_cast<const int8_t *>(codes.data()), q.data(),
                  state2.data(), out.data(), 1, n, 0, block, 0);
  for (int64_t e = 0; e < n; e += 97)
    EXPECT_EQ(out[e], nf4DequantizeDouble(codes.data(), q.data(), state2.data(),
                                          block, e));
  // And the dequantized weight stays near the NF4 one.
  double err = 0, ref = 0;
  for (int64_t e = 0; e < n; ++e) {
    const float single = nf4Dequantize(codes.data(), absmax.data(), block, e);
    err += (out[e] - single) * (out[e] - single);
    ref += single * single;
  }
  EXPECT_LT(std::sqrt(err / ref), 0.01);
}

TEST(Quantize, Int8PerOutputFeature) {
  const int64_t rows = 5, cols = 9;
  std::vector<float> w = randomWeight(rows * cols, 11);
  for (int axis : {0, 1}) {
    std::vector<int8_t> codes(rows * cols);
    std::vector<float> absmax(axis ? cols : rows);
    int8Quantize(w.data(), rows, cols, axis, codes.data(), absmax.data());
    std::vector<float> out(rows * cols);
    cpu::dequantize(codes.data(), absmax.data(), nullptr, out.data(), rows,
                    cols, 1, 64, axis);
    for (int64_t e = 0; e < rows * cols; ++e) {
      const float scale = absmax[axis ? e % cols : e / cols];
      EXPECT_LE(std::fabs(out[e] - w[e]), scale / 127.0f * 0.5f + 1e-9f);
      EXPECT_LE(std::abs(static_cast<int>(codes[e])), 127);
    }
  }
}

TEST(Quantize, GemmQuantizedBIsGemmOfTheDequantizedWeight) {
  // W [rows, cols] read as B = W or B = W^T, n not a multiple of the
  // panel, A batched ([2, 3, k], folded into rows) or transposed.
  struct Case {
    bool transA, transB;
    int64_t batch, m, n, k;
    int kind;
    bool doubleQuant;
  };
  const Case cases[] = {{false, true, 1, 5, 150, 70, 0, false},
                        {false, false, 1, 5, 150, 70, 0, true},
                        {false, true, 2, 3, 130, 96, 1, false},
                        {true, false, 1, 4, 64, 33, 1, false},
                        {false, true, 1, 300, 200, 128, 0, true}};
  for (const Case &c : cases) {
    const int64_t rows = c.transB ? c.n : c.k, cols = c.transB ? c.k : c.n;
    const int64_t n = rows * cols, block = 64, blocks = (n + block - 1) / block;
    std::vector<float> w = randomWeight(n, 5);
    std::vector<int8_t> codes(c.kind == 0 ? (n + 1) / 2 : n);
    std::vector<float> absmax(c.kind == 0 ? blocks : (c.transB ? rows : cols));
    const int axis = c.transB ? 0 : 1;
    if (c.kind == 0)
      nf4Quantize(w.data(), n, block, reinterpret_cast<uint8_t *>(codes.data()),
                  absmax.data());
    else
      int8Quantize(w.data(), rows, cols, axis, codes.data(), absmax.data());
    std::vector<uint8_t> q(blocks);
    std::vector<float> state2(1 + (blocks + 255) / 256);
    if (c.doubleQuant)
      doubleQuantize(absmax.data(), blocks, q.data(), state2.data());
    cpu::QuantizedMatrix qm;
    qm.codes = codes.data();
    qm.absmax =
        c.doubleQuant ? static_cast<const void *>(q.data()) : absmax.data();
    qm.state2 = c.doubleQuant ? state2.data() : nullptr;
    qm.kind = c.kind;
    qm.block = block;
    qm.rows = rows;
    qm.cols = cols;
    qm.axis = axis;
    std::vector<float> dequantized(n);
    cpu::dequantize(qm.codes, qm.absmax, qm.state2, dequantized.data(), rows,
                    cols, c.kind, block, axis);
    std::vector<float> a = randomWeight(c.batch * c.m * c.k, 9);
    cpu::GemmDesc d;
    if (c.batch > 1) {
      d.batchRank = 1;
      d.batchShape[0] = c.batch;
      d.aBatchStrides[0] = c.m * c.k;
    }
    d.transA = c.transA;
    d.transB = c.transB;
    d.m = c.m;
    d.n = c.n;
    d.k = c.k;
    d.lda = c.transA ? c.m : c.k;
    d.ldb = cols;
    d.alpha = 0.5f;
    std::vector<float> want(c.batch * c.m * c.n), got(want.size(), -1.0f);
    cpu::gemm(d, a.data(), dequantized.data(), want.data());
    cpu::gemmQuantizedB(d, a.data(), qm, got.data());
    double scale = 0;
    for (float v : want)
      scale = std::max(scale, std::fabs(static_cast<double>(v)));
    for (size_t e = 0; e < want.size(); ++e)
      ASSERT_NEAR(got[e], want[e], 1e-5 * scale)
          << "case n " << c.n << " k " << c.k << " element " << e;
  }
}

} // namespace
