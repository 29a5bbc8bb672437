//===- RuntimeFloat16Test.cpp - runtime/Float16.h conversions -------------===//
//
// IEEE half against the compiler's _Float16 (GCC's conversions, round to
// nearest even) on every half value and on floats across the whole range
// (subnormals, overflow, ties); bfloat16 against its definition: every
// bfloat16 value comes back, and a float goes to the nearer of its two
// bfloat16 neighbours, ties to the even one.
//
//===----------------------------------------------------------------------===//

#include "runtime/Float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

using namespace autopar::rt;

namespace {

uint16_t bitsOf(_Float16 h) {
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

/// Floats of every exponent, including ties and values near overflow.
std::vector<float> samples() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, 65504.0f, 65519.99f, 65520.0f,
                          1e-8f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 6.1e-5f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min()};
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i)
    v.push_back(
        bitsFloat((rng() & 0xffffe000u) | (rng() % 3 == 0 ? 0x1000u : 0)));
  for (int i = 0; i < 200000; ++i)
    v.push_back(bitsFloat(rng()));
  return v;
}

} // namespace

TEST(Float16, HalfEveryValueRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    _Float16 ref;
    std::memcpy(&ref, &h, 2);
    const float v = halfValue(h);
    if (std::isnan(static_cast<float>(ref))) {
      EXPECT_TRUE(std::isnan(v)) << b;
      continue;
    }
    ASSERT_EQ(floatBits(v), floatBits(static_cast<float>(ref))) << b;
    ASSERT_EQ(halfBits(v), h) << b;
  }
}

TEST(Float16, HalfRoundsAsFloat16) {
  for (float f : samples()) {
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(halfValue(halfBits(f))));
      continue;
    }
    ASSERT_EQ(halfBits(f), bitsOf(static_cast<_Float16>(f)))
        << f << " (bits " << std::hex << floatBits(f) << ")";
  }
}

TEST(Float16, Bf16EveryValueRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float v = bf16Value(h);
    ASSERT_EQ(floatBits(v), b << 16);
    if (!std::isnan(v)) {
      ASSERT_EQ(bf16Bits(v), h) << b;
    }
  }
}

TEST(Float16, Bf16RoundsToNearestEven) {
  for (float f : samples()) {
    const uint16_t b = bf16Bits(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16Value(b)));
      continue;
    }
    // The two bfloat16 values around f (truncation and the next one up in
    // magnitude): the nearer, ties to the even mantissa. Past the largest
    // finite value the next one up is 2^128 for the distance (IEEE
    // rounding with an unbounded exponent), which rounds to infinity.
    const uint16_t down = static_cast<uint16_t>(floatBits(f) >> 16);
    const uint16_t up = static_cast<uint16_t>(down + 1);
    const double upValue = (up & 0x7fffu) == 0x7f80u
                               ? std::copysign(std::ldexp(1.0, 128), f)
                               : bf16Value(up);
    const double x = f, dd = std::fabs(x - bf16Value(down)),
                 du = std::fabs(x - upValue);
    const uint16_t want =
        (floatBits(f) & 0xffffu) == 0 ? down
        : dd < du                  ? down
        : du < dd                  ? up
                                   : ((down & 1) ? up : down);
    ASSERT_EQ(b, want) << f << " (bits " << std::hex << floatBits(f) << ")";
  }
}
