//===- Math.h - vectorizable float math for generated loops ------*- C++
//-*-===//
//
// Generated loops call erff, expf, logf, tanhf and powf. With
// AUTOPAR_HAVE_LIBMVEC (glibc 2.35 or later, linked with -lmvec; the
// emitted CMakeLists.txt checks) they are declared as SIMD functions, so the
// compiler vectorizes `#pragma omp simd` loops with glibc's libmvec variants
// (at most 4 ulp from the scalar results); otherwise the scalar libm
// functions are called.
//
// expNonPositive() below is the CPU kernels' own exp for arguments <= 0.
//
// Also the 16-bit float types of generated code: IEEE half is the
// compiler's _Float16; bfloat16 is autopar::rt::bf16 below. Generated code
// computes on both in float and rounds each result back.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_MATH_H
#define AUTOPAR_RUNTIME_CPU_MATH_H

#include "runtime/Float16.h"

#include <cmath>
#include <cstdint>

namespace autopar::rt {

/// bfloat16: the upper 16 bits of a float (runtime/Float16.h). Converting a
/// float rounds to nearest even (NaN stays NaN); converting back is exact.
struct bf16 {
  uint16_t bits;
  bf16() = default;
  bf16(float f) : bits(bf16Bits(f)) {}
  operator float() const { return bf16Value(bits); }
};

/// exp(x) for x <= 0, within 1.5 ulp (measured over [-87, 0]: 0.92 where
/// the compiler contracts to FMA, 1.17 without); -inf gives 0, NaN stays NaN,
/// and below -87 (exp < 2^-125) the result is 0. A call-free body that
/// vectorizes in `omp simd` loops: libmvec's expf takes a scalar path for every
/// vector with an out-of-range lane (the -inf of masked attention scores),
/// which cost more than the products of an attention tile. x = n ln2 + r with
/// |r| <= ln2 / 2 (Cody-Waite), exp(r) by its Taylor polynomial of degree 7
/// (truncation error below 1e-8), 2^n through the exponent bits.
inline float expNonPositive(float x) {
  constexpr float kLo = -87.0f;
  const float xc = x < kLo ? kLo : x;
  // Rounding by the 1.5 * 2^23 shifter leaves n in the low mantissa bits.
  constexpr float kShifter = 12582912.0f;
  const float t = xc * 1.44269504088896341f + kShifter;
  const float n = t - kShifter;
  float r = n * -0.693359375f + xc; // ln2's leading bits: n * hi is exact
  r = n * 2.12194440e-4f + r;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t bits = (__builtin_bit_cast(uint32_t, t) << 23) + (127u << 23);
  const float result = p * __builtin_bit_cast(float, bits);
  return x < kLo ? 0.0f : result;
}

} // namespace autopar::rt

#ifdef AUTOPAR_HAVE_LIBMVEC
extern "C" {
#pragma omp declare simd notinbranch
float erff(float);
#pragma omp declare simd notinbranch
float expf(float);
#pragma omp declare simd notinbranch
float logf(float);
#pragma omp declare simd notinbranch
float tanhf(float);
#pragma omp declare simd notinbranch
float powf(float, float);
}
#endif

#endif // AUTOPAR_RUNTIME_CPU_MATH_H
