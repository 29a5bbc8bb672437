//===- Math.h - vectorizable float math for generated loops ------*- C++ -*-===//
//
// Generated loops call erff, expf, logf, tanhf and powf. With
// AUTOPAR_HAVE_LIBMVEC (glibc 2.35 or later, linked with -lmvec; the
// emitted CMakeLists.txt checks) they are declared as SIMD functions, so the
// compiler vectorizes `#pragma omp simd` loops with glibc's libmvec variants
// (at most 4 ulp from the scalar results); otherwise the scalar libm
// functions are called.
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
