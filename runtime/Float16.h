//===- Float16.h - 16-bit float conversions for host and device -*- C++ -*-===//
//
// bfloat16 is the upper 16 bits of an IEEE float; IEEE half (binary16) has
// 5 exponent and 10 mantissa bits. Converting a float rounds to nearest
// even (a NaN stays a quiet NaN; half overflows to infinity and keeps
// subnormals); converting back is exact. Used by the optimizer (fp32 master
// weights and their 16-bit copies) on both targets, the communicator's
// 16-bit sums and the CPU target's generated code.
//
// Header only, inline by design: these are innermost loop bodies.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_FLOAT16_H
#define AUTOPAR_RUNTIME_FLOAT16_H

#include "runtime/HostDevice.h"

#include <stdint.h>
#include <string.h>

namespace autopar::rt {

/// The IEEE bits of a float, and the float of IEEE bits.
AUTOPAR_RT_HOST_DEVICE inline uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
#endif
}
AUTOPAR_RT_HOST_DEVICE inline float bitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

/// The bfloat16 bits of `f`, rounded to nearest even (a NaN stays a quiet
/// NaN). Without branches: loops that round stay vectorizable.
AUTOPAR_RT_HOST_DEVICE inline uint16_t bf16Bits(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t nan = (u >> 16) | 0x40u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/// The float value of bfloat16 bits.
AUTOPAR_RT_HOST_DEVICE inline float bf16Value(uint16_t bits) {
  return bitsFloat(static_cast<uint32_t>(bits) << 16);
}

/// `f` rounded to the nearest bfloat16, as a float: the CPU target's
/// generated loops hold bfloat16 values so (a struct local would keep GCC
/// from vectorizing the loop).
AUTOPAR_RT_HOST_DEVICE inline float roundBf16(float f) {
  return bf16Value(bf16Bits(f));
}

/// The IEEE half bits of `f`, rounded to nearest even.
AUTOPAR_RT_HOST_DEVICE inline uint16_t halfBits(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) // NaN: quiet, payload's top bits kept
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) // rounds to beyond 65504: infinity
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): the mantissa with its implicit bit,
    // shifted into place and rounded to nearest even.
    if (abs < 0x33000000u) // below half the smallest subnormal: zero
      return static_cast<uint16_t>(sign);
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23); // 14..24
    const uint32_t rest = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    uint32_t h = mant >> shift;
    if (rest > halfway || (rest == halfway && (h & 1u)))
      ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Normal: rebias the exponent (127 -> 15), round the 13 dropped bits.
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    ++h; // a carry into the exponent is the correct rounding
  return static_cast<uint16_t>(sign | h);
}

/// The float value of IEEE half bits.
AUTOPAR_RT_HOST_DEVICE inline float halfValue(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  uint32_t u;
  if (exp == 0x1fu) {
    u = sign | 0x7f800000u | (mant << 13); // infinity or NaN
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    u = sign;
  } else {
    // Subnormal: normalize.
    uint32_t e = 113;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      --e;
    }
    u = sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  return bitsFloat(u);
}

/// The 16-bit float formats of mixed precision.
enum class Float16Kind : uint8_t { BF16, Half };

/// The float value of `bits` of format `kind`.
AUTOPAR_RT_HOST_DEVICE inline float float16Value(Float16Kind kind,
                                                 uint16_t bits) {
  return kind == Float16Kind::BF16 ? bf16Value(bits) : halfValue(bits);
}

/// `f` rounded to format `kind`, as bits.
AUTOPAR_RT_HOST_DEVICE inline uint16_t float16Bits(Float16Kind kind, float f) {
  return kind == Float16Kind::BF16 ? bf16Bits(f) : halfBits(f);
}

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_FLOAT16_H
