//===- Bf16.h - bfloat16 conversions for host and device code ---*- C++ -*-===//
//
// bfloat16 is the upper 16 bits of an IEEE float. Converting a float rounds
// to nearest even (a NaN stays a quiet NaN); converting back is exact. Used
// by the optimizer (fp32 master weights and their bfloat16 copies) on both
// targets and by the CPU target's generated code.
//
// Header only, inline by design: these are innermost loop bodies.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_BF16_H
#define AUTOPAR_RUNTIME_BF16_H

#include <stdint.h>
#include <string.h>

#ifndef AUTOPAR_RT_HOST_DEVICE
#if defined(__CUDACC__)
#define AUTOPAR_RT_HOST_DEVICE __host__ __device__
#else
#define AUTOPAR_RT_HOST_DEVICE
#endif
#endif

namespace autopar::rt {

/// The bfloat16 bits of `f`, rounded to nearest even.
AUTOPAR_RT_HOST_DEVICE inline uint16_t bf16Bits(float f) {
  uint32_t u;
#if defined(__CUDA_ARCH__)
  u = __float_as_uint(f);
#else
  memcpy(&u, &f, sizeof(u));
#endif
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40u); // quiet NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// The float value of bfloat16 bits.
AUTOPAR_RT_HOST_DEVICE inline float bf16Value(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_BF16_H
