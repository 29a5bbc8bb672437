//===- RuntimeDropoutTest.cpp - Philox and the dropout kernel -------------===//
//
// Philox 4x32-10 against Random123's known answers; the CPU dropout kernel
// against the mask's definition (runtime/support/Philox.h) on whole
// tensors, on blocks of a logical tensor (the pieces of every split
// reassemble the whole tensor's output), on strided inputs and across
// micro-batches; the kept fraction of a large mask within 3 sigma of
// 1 - ratio; ratio 0 is the identity.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Math.h"
#include "runtime/support/Philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

using namespace autopar::rt;

namespace {

TEST(Philox, KnownAnswers) {
  struct Case {
    Philox4x32 counter;
    uint32_t k0, k1;
    Philox4x32 want;
  } cases[] = {
      {{{0, 0, 0, 0}},
       0,
       0,
       {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Case &c : cases) {
    Philox4x32 got = philox4x32(c.counter, c.k0, c.k1);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(got.v[i], c.want.v[i]) << "word " << i;
  }
}

DropoutBlock wholeBlock(const std::vector<int64_t> &shape) {
  DropoutBlock b{};
  b.rank = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    b.shape[d] = b.logicalShape[d] = shape[d];
    b.offsets[d] = nullptr;
  }
  int64_t stride = 1;
  for (int d = b.rank - 1; d >= 0; --d) {
    b.strides[d] = stride;
    stride *= shape[d];
  }
  return b;
}

std::vector<float> ramp(int64_t n) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i)
    x[i] = 0.25f + 0.001f * static_cast<float>(i);
  return x;
}

TEST(Dropout, WholeTensorIsTheDefinition) {
  const std::vector<int64_t> shape = {3, 5, 7};
  const int64_t n = 3 * 5 * 7;
  std::vector<float> x = ramp(n), y(n);
  const double ratio = 0.3;
  for (uint64_t micro : {0u, 2u}) {
    const RandomKey key{0x123456789abcull, 41, micro};
    cpu::dropout(x.data(), y.data(), wholeBlock(shape), &key, ratio, 5);
    const DropoutSite site = dropoutSite(ratio, 5, n);
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t c = micro * n + i;
      const bool keep =
          philox4x32(Philox4x32{{static_cast<uint32_t>(c >> 2), 0, 5, 41}},
                     0x56789abcu, 0x1234u)
              .v[c & 3] >= static_cast<uint32_t>(ratio * 4294967296.0);
      ASSERT_EQ(dropoutKeeps(key, site, i), keep) << i;
      ASSERT_EQ(y[i],
                keep ? x[i] * static_cast<float>(1.0 / (1.0 - ratio)) : 0.0f)
          << i;
    }
  }
}

TEST(Dropout, BlocksReassembleTheWholeTensor) {
  // [4, 6, 8] split into 2 x 3 blocks over dims 0 and 1 (a dp x tp mesh)
  // and, separately, over the last dim.
  const std::vector<int64_t> shape = {4, 6, 8};
  const int64_t n = 4 * 6 * 8;
  std::vector<float> x = ramp(n), whole(n);
  const RandomKey key{7, 3, 1};
  cpu::dropout(x.data(), whole.data(), wholeBlock(shape), &key, 0.5, 2);
  struct Split {
    int64_t parts[3];
  } splits[] = {{{2, 3, 1}}, {{1, 1, 4}}, {{4, 2, 2}}};
  for (const Split &split : splits) {
    const int64_t bs[3] = {shape[0] / split.parts[0], shape[1] / split.parts[1],
                           shape[2] / split.parts[2]};
    for (int64_t p0 = 0; p0 < split.parts[0]; ++p0)
      for (int64_t p1 = 0; p1 < split.parts[1]; ++p1)
        for (int64_t p2 = 0; p2 < split.parts[2]; ++p2) {
          int64_t off[3] = {p0 * bs[0], p1 * bs[1], p2 * bs[2]};
          // The block's input read in place from the whole tensor.
          DropoutBlock b{};
          b.rank = 3;
          for (int d = 0; d < 3; ++d) {
            b.shape[d] = bs[d];
            b.logicalShape[d] = shape[d];
            b.offsets[d] = &off[d];
          }
          b.strides[0] = shape[1] * shape[2];
          b.strides[1] = shape[2];
          b.strides[2] = 1;
          std::vector<float> y(bs[0] * bs[1] * bs[2]);
          const float *in =
              x.data() + off[0] * b.strides[0] + off[1] * b.strides[1] + off[2];
          cpu::dropout(in, y.data(), b, &key, 0.5, 2);
          for (int64_t i = 0; i < bs[0]; ++i)
            for (int64_t j = 0; j < bs[1]; ++j)
              for (int64_t k = 0; k < bs[2]; ++k)
                ASSERT_EQ(
                    y[(i * bs[1] + j) * bs[2] + k],
                    whole[((off[0] + i) * shape[1] + off[1] + j) * shape[2] +
                          off[2] + k]);
        }
  }
}

TEST(Dropout, KeptFractionAndSites) {
  const int64_t n = 1 << 20;
  std::vector<float> x(n, 1.0f), y(n), z(n);
  const double ratio = 0.1;
  const RandomKey key{0, 0, 0};
  cpu::dropout(x.data(), y.data(), wholeBlock({n}), &key, ratio, 0);
  cpu::dropout(x.data(), z.data(), wholeBlock({n}), &key, ratio, 1);
  int64_t kept = 0, same = 0;
  const float scale = static_cast<float>(1.0 / (1.0 - ratio));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(y[i] == 0 || y[i] == scale) << i;
    kept += y[i] != 0;
    same += (y[i] != 0) == (z[i] != 0);
  }
  const double p = 1 - ratio, sigma = std::sqrt(n * p * (1 - p));
  EXPECT_LT(std::fabs(kept - n * p), 3 * sigma) << kept;
  // Another site draws another mask: agreement as independent masks.
  const double agree = p * p + (1 - p) * (1 - p);
  EXPECT_LT(std::fabs(same - n * agree), 3 * std::sqrt(n * agree * (1 - agree)))
      << same;
}

TEST(Dropout, RatioZeroIsTheIdentityAndSixteenBitRoundsOnce) {
  const int64_t n = 257;
  std::vector<float> x = ramp(n), y(n);
  const RandomKey key{9, 9, 9};
  cpu::dropout(x.data(), y.data(), wholeBlock({n}), &key, 0.0, 3);
  EXPECT_EQ(x, y);
  std::vector<bf16> xb(n), yb(n);
  for (int64_t i = 0; i < n; ++i)
    xb[i] = bf16(x[i]);
  cpu::dropout(xb.data(), yb.data(), wholeBlock({n}), &key, 0.25, 3);
  cpu::dropout(x.data(), y.data(), wholeBlock({n}), &key, 0.25, 3);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(yb[i].bits,
              bf16(y[i] == 0 ? 0.0f : float(xb[i]) * (1.0f / 0.75f)).bits)
        << i;
}

} // namespace
