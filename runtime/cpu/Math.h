//===- Math.h - vectorizable float math for generated loops ------*- C++ -*-===//
//
// Generated loops call erff, expf, logf, tanhf and powf. With
// AUTOPAR_HAVE_LIBMVEC (glibc 2.35 or later, linked with -lmvec; the
// emitted CMakeLists.txt checks) they are declared as SIMD functions, so the
// compiler vectorizes `#pragma omp simd` loops with glibc's libmvec variants
// (at most 4 ulp from the scalar results); otherwise the scalar libm
// functions are called.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_MATH_H
#define AUTOPAR_RUNTIME_CPU_MATH_H

#include <cmath>

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
