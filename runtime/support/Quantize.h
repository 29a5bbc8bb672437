//===- Quantize.h - NF4 and INT8 weights, as bitsandbytes stores them -*- C++
//-*-===//
//
// A quantized frozen weight (plan `quantize`) is held as codes plus f32
// scales and dequantized at each use; the compiler quantizes it at compile
// time (weights.bin holds the codes), the kernels and the ONNX export
// dequantize it with these functions, on both targets.
//
//   NF4 (QLoRA, bitsandbytes' quant_type "nf4"): blocks of `block`
//   consecutive elements (row-major; the last one may be shorter), an f32
//   absmax per block; each element is the index of the nearest of the 16
//   NormalFloat values (kNf4) to w / absmax, two per byte, the first of a
//   pair in the high nibble. w = kNf4[code] * absmax.
//   INT8: symmetric, one f32 absmax per output feature (`axis`: the dim
//   of the weight that indexes the outputs); code = round(w / absmax *
//   127) in [-127, 127], w = code * (absmax / 127).
//
// Header only, inline: the kernels' loop bodies.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_SUPPORT_QUANTIZE_H
#define AUTOPAR_RUNTIME_SUPPORT_QUANTIZE_H

#include "runtime/HostDevice.h"

#include <stdint.h>

#include <cmath>

namespace autopar::rt {

/// bitsandbytes' NF4 values (functional.py create_normal_map, offset
/// 0.9677083, rounded to float as bitsandbytes' kernels hold them).
AUTOPAR_RT_HOST_DEVICE inline float nf4Value(int code) {
  constexpr float kNf4[16] = {-1.0f,
                              -0.6961928009986877f,
                              -0.5250730514526367f,
                              -0.39491748809814453f,
                              -0.28444138169288635f,
                              -0.18477343022823334f,
                              -0.09105003625154495f,
                              0.0f,
                              0.07958029955625534f,
                              0.16093020141124725f,
                              0.24611230194568634f,
                              0.33791524171829224f,
                              0.44070982933044434f,
                              0.5626170039176941f,
                              0.7229568362236023f,
                              1.0f};
  return kNf4[code & 15];
}

/// The NF4 code of x in [-1, 1]: the nearest value (ties to the lower
/// code).
inline int nf4Code(float x) {
  int best = 0;
  float bestDistance = INFINITY;
  for (int c = 0; c < 16; ++c) {
    const float d = std::fabs(x - nf4Value(c));
    if (d < bestDistance) {
      bestDistance = d;
      best = c;
    }
  }
  return best;
}

/// Element `e` of an NF4 weight.
AUTOPAR_RT_HOST_DEVICE inline float nf4Dequantize(const uint8_t *codes,
                                                  const float *absmax,
                                                  int64_t block, int64_t e) {
  const uint8_t pair = codes[e >> 1];
  return nf4Value((e & 1) ? pair & 15 : pair >> 4) * absmax[e / block];
}

/// Element `e` of an INT8 weight of shape [rows, cols] whose outputs are
/// dim `axis`.
AUTOPAR_RT_HOST_DEVICE inline float int8Dequantize(const int8_t *codes,
                                                   const float *absmax,
                                                   int64_t cols, int axis,
                                                   int64_t e) {
  const int64_t feature = axis == 0 ? e / cols : e % cols;
  return static_cast<float>(codes[e]) * (absmax[feature] / 127.0f);
}

/// Quantizes n row-major elements of `w` into NF4 codes (ceil(n / 2)
/// bytes) and absmax (ceil(n / block) floats).
inline void nf4Quantize(const float *w, int64_t n, int64_t block,
                        uint8_t *codes, float *absmax) {
  for (int64_t b = 0; b * block < n; ++b) {
    float m = 0;
    for (int64_t e = b * block; e < n && e < (b + 1) * block; ++e)
      m = std::fmax(m, std::fabs(w[e]));
    absmax[b] = m;
  }
  for (int64_t e = 0; e < (n + 1) / 2 * 2; ++e) {
    const float m = absmax[e / block];
    const int c = e < n ? nf4Code(m > 0 ? w[e] / m : 0.0f) : 7; // 7: 0
    if (e & 1)
      codes[e >> 1] |= static_cast<uint8_t>(c);
    else
      codes[e >> 1] = static_cast<uint8_t>(c << 4);
  }
}

/// Quantizes a [rows, cols] weight into INT8 codes and one absmax per
/// output feature (dim `axis`).
inline void int8Quantize(const float *w, int64_t rows, int64_t cols, int axis,
                         int8_t *codes, float *absmax) {
  const int64_t features = axis == 0 ? rows : cols;
  for (int64_t f = 0; f < features; ++f)
    absmax[f] = 0;
  for (int64_t e = 0; e < rows * cols; ++e) {
    float &m = absmax[axis == 0 ? e / cols : e % cols];
    m = std::fmax(m, std::fabs(w[e]));
  }
  for (int64_t e = 0; e < rows * cols; ++e) {
    const float m = absmax[axis == 0 ? e / cols : e % cols];
    const float q = m > 0 ? std::nearbyint(w[e] / m * 127.0f) : 0.0f;
    codes[e] = static_cast<int8_t>(std::fmax(-127.0f, std::fmin(127.0f, q)));
  }
}

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_SUPPORT_QUANTIZE_H
