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
//   NF4 with double quantization (bitsandbytes' compress_statistics): the
//   absmax values, less their mean (the offset), quantized to 8 bits in
//   blocks of 256 with bitsandbytes' signed dynamic map (create_dynamic_map:
//   one code byte per absmax, an f32 absmax2 per block of 256). The f32
//   "state2" holds the offset, then each absmax2: absmax = dyn[q] *
//   state2[1 + b / 256] + state2[0].
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

#include <algorithm>
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

/// bitsandbytes' signed dynamic 8-bit map (functional.py
/// create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8),
/// sorted), computed rather than tabled: codes 128 + 2^i - 1 + j (i in
/// [0, 7), j in [0, 2^i)) are 10^(i - 6) times the mean of linspace(0.1, 1,
/// 2^i + 1)'s elements j and j + 1 in float as torch computes them; codes
/// below 127 are the negated positives in mirror order, 127 is 0 and 255
/// is 1.
AUTOPAR_RT_HOST_DEVICE inline float dynamicMapValue(int code) {
  code &= 255;
  if (code == 127)
    return 0.0f;
  if (code == 255)
    return 1.0f;
  const bool negative = code < 127;
  const int p = negative ? 126 - code : code - 128;
  int i = 0;
  while ((2 << i) - 1 <= p)
    ++i;
  const int j = p - ((1 << i) - 1);
  const int steps = (1 << i) + 1;
  // torch.linspace(0.1, 1, steps) in float: from the start before the
  // halfway point, from the end after it.
  const float step = (1.0f - 0.1f) / static_cast<float>(steps - 1);
  auto at = [&](int k) {
    return k < steps / 2 ? 0.1f + step * static_cast<float>(k)
                         : 1.0f - step * static_cast<float>(steps - k - 1);
  };
  const float mean = (at(j) + at(j + 1)) / 2.0f;
  constexpr float kScale[7] = {1e-6f, 1e-5f, 1e-4f, 1e-3f, 1e-2f, 1e-1f, 1.0f};
  const float v = kScale[i] * mean;
  return negative ? -v : v;
}

/// The dynamic-map code of x in [-1, 1]: the nearest value (ties to the
/// lower code), by bisection over the sorted map.
inline int dynamicMapCode(float x) {
  int lo = 0, hi = 255;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (dynamicMapValue(mid) <= x ? lo : hi) = mid;
  }
  return std::fabs(x - dynamicMapValue(lo)) <=
                 std::fabs(dynamicMapValue(hi) - x)
             ? lo
             : hi;
}

/// Absmax values per second-level block of double quantization.
constexpr int64_t kDoubleQuantBlock = 256;

/// Absmax `b` of a double-quantized NF4 weight.
AUTOPAR_RT_HOST_DEVICE inline float
doubleQuantAbsmax(const uint8_t *qabsmax, const float *state2, int64_t b) {
  return dynamicMapValue(qabsmax[b]) * state2[1 + b / kDoubleQuantBlock] +
         state2[0];
}

/// Element `e` of an NF4 weight.
AUTOPAR_RT_HOST_DEVICE inline float nf4Dequantize(const uint8_t *codes,
                                                  const float *absmax,
                                                  int64_t block, int64_t e) {
  const uint8_t pair = codes[e >> 1];
  return nf4Value((e & 1) ? pair & 15 : pair >> 4) * absmax[e / block];
}

/// Element `e` of a double-quantized NF4 weight.
AUTOPAR_RT_HOST_DEVICE inline float
nf4DequantizeDouble(const uint8_t *codes, const uint8_t *qabsmax,
                    const float *state2, int64_t block, int64_t e) {
  const uint8_t pair = codes[e >> 1];
  return nf4Value((e & 1) ? pair & 15 : pair >> 4) *
         doubleQuantAbsmax(qabsmax, state2, e / block);
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

/// Element `e` of a quantized [rows, cols] weight, whatever its kind: 0
/// NF4 (absmax f32, or with state2 double-quantized codes), 1 INT8 along
/// `axis`. The loop body of cpu::dequantize, cuda::dequantize and the
/// export.
AUTOPAR_RT_HOST_DEVICE inline float
dequantizeElement(const int8_t *codes, const void *absmax, const float *state2,
                  int kind, int64_t block, int64_t cols, int axis, int64_t e) {
  const auto *nf4 = reinterpret_cast<const uint8_t *>(codes);
  if (kind != 0)
    return int8Dequantize(codes, static_cast<const float *>(absmax), cols, axis,
                          e);
  if (state2)
    return nf4DequantizeDouble(nf4, static_cast<const uint8_t *>(absmax),
                               state2, block, e);
  return nf4Dequantize(nf4, static_cast<const float *>(absmax), block, e);
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

/// Quantizes `blocks` absmax values (bitsandbytes' compress_statistics):
/// the offset is their mean, state2 (1 + ceil(blocks / 256) floats) the
/// offset and each block's absmax of (absmax - offset), qabsmax the nearest
/// dynamic-map code of (absmax - offset) / absmax2.
inline void doubleQuantize(const float *absmax, int64_t blocks,
                           uint8_t *qabsmax, float *state2) {
  double sum = 0;
  for (int64_t b = 0; b < blocks; ++b)
    sum += absmax[b];
  const float offset = blocks > 0 ? static_cast<float>(sum / blocks) : 0.0f;
  state2[0] = offset;
  for (int64_t g = 0; g * kDoubleQuantBlock < blocks; ++g) {
    const int64_t end = std::min(blocks, (g + 1) * kDoubleQuantBlock);
    float m = 0;
    for (int64_t b = g * kDoubleQuantBlock; b < end; ++b)
      m = std::fmax(m, std::fabs(absmax[b] - offset));
    state2[1 + g] = m;
    for (int64_t b = g * kDoubleQuantBlock; b < end; ++b)
      qabsmax[b] = static_cast<uint8_t>(
          dynamicMapCode(m > 0 ? (absmax[b] - offset) / m : 0.0f));
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
