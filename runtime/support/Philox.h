//===- Philox.h - counter-based random numbers for dropout ------*- C++ -*-===//
//
// Philox 4x32-10 (Salmon et al., SC'11; the generator of cuRAND and of
// PyTorch's CUDA dropout) and the dropout mask autopar draws with it. A
// mask element depends only on the seed, the step, the dropout site and
// the element's index in the logical tensor of the step, never on the plan
// (ranks, blocks, micro-batch size) or the target, so every plan and both
// targets drop the same elements:
//
//   key     = (seed mod 2^32, seed / 2^32)
//   element = micro * N + linear index in the micro-batch's logical tensor
//             (N its element count; batch outermost, this is the index in
//             the logical tensor of the whole step)
//   counter = (element / 4 mod 2^32, element / 2^34, site, step mod 2^32)
//   bits    = word (element mod 4) of philox4x32_10(counter, key)
//   dropped = bits < threshold, threshold = floor(ratio * 2^32)
//   y       = dropped ? 0 : x * float(1 / (1 - ratio))
//
// docs/fine-tuning.md states the same; test/e2e/dropout_reference.py
// reimplements it in Python. LoRA's A is drawn from the same generator
// (loraInitValue, its own streams).
//
// Header only, inline by design: innermost loop bodies of both targets.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_SUPPORT_PHILOX_H
#define AUTOPAR_RUNTIME_SUPPORT_PHILOX_H

#include "runtime/HostDevice.h"

#include <stdint.h>

#include <cmath>

namespace autopar::rt {

struct Philox4x32 {
  uint32_t v[4];
};

/// philox4x32_10(counter, key): ten rounds, the key bumped between them.
AUTOPAR_RT_HOST_DEVICE inline Philox4x32 philox4x32(Philox4x32 c, uint32_t k0,
                                                    uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c.v[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c.v[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32);
    const uint32_t lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32);
    const uint32_t lo1 = static_cast<uint32_t>(p1);
    c = Philox4x32{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
  }
  return c;
}

/// The key of one call of a step function: which seed, step and
/// micro-batch its masks belong to (StepIO::random points at one).
struct RandomKey {
  uint64_t seed;
  uint64_t step;
  uint64_t micro;
};

/// The dropout of one site: its threshold and scale (dropoutSite).
struct DropoutSite {
  uint32_t threshold;
  uint32_t site;
  float scale;
  /// The logical tensor's element count (one micro-batch).
  uint64_t numElements;
};

/// threshold = floor(ratio * 2^32) and scale = float(1 / (1 - ratio)) for
/// ratio in [0, 1).
inline DropoutSite dropoutSite(double ratio, uint32_t site,
                               uint64_t numElements) {
  double t = ratio * 4294967296.0;
  DropoutSite s;
  s.threshold = t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
  s.site = site;
  s.scale = static_cast<float>(1.0 / (1.0 - ratio));
  s.numElements = numElements;
  return s;
}

/// The generator's element of logical element `element`: micro * N +
/// element.
AUTOPAR_RT_HOST_DEVICE inline uint64_t dropoutCounter(const RandomKey &key,
                                                      const DropoutSite &site,
                                                      uint64_t element) {
  return key.micro * site.numElements + element;
}

/// The four words of the group of generator element `counter` (counter /
/// 4); word counter mod 4 is the element's.
AUTOPAR_RT_HOST_DEVICE inline Philox4x32
dropoutWords(const RandomKey &key, const DropoutSite &site, uint64_t counter) {
  const uint64_t group = counter >> 2;
  return philox4x32(Philox4x32{{static_cast<uint32_t>(group),
                                static_cast<uint32_t>(group >> 32), site.site,
                                static_cast<uint32_t>(key.step)}},
                    static_cast<uint32_t>(key.seed),
                    static_cast<uint32_t>(key.seed >> 32));
}

/// Whether logical element `element` is kept.
AUTOPAR_RT_HOST_DEVICE inline bool
dropoutKeeps(const RandomKey &key, const DropoutSite &site, uint64_t element) {
  const uint64_t counter = dropoutCounter(key, site, element);
  return dropoutWords(key, site, counter).v[counter & 3] >= site.threshold;
}

/// Element `element` (row-major) of a LoRA A [r, in] as PEFT initializes
/// it (torch.nn.init.kaiming_uniform_ with a = sqrt(5): uniform in
/// [-1/sqrt(in), 1/sqrt(in))): 24 bits of word element mod 4 of
/// philox4x32_10((element/4 mod 2^32, element/2^34, stream, 2^32 - 1),
/// (seed mod 2^32, seed/2^32)) as u in [0, 1), the value (2u - 1) /
/// sqrt(fanIn) rounded to float. The counter's last word is never a step
/// of dropout's below 2^32 - 1.
inline float loraInitValue(uint64_t seed, uint32_t stream, uint64_t element,
                           int64_t fanIn) {
  const uint64_t group = element >> 2;
  Philox4x32 w = philox4x32(
      Philox4x32{{static_cast<uint32_t>(group),
                  static_cast<uint32_t>(group >> 32), stream, 0xFFFFFFFFu}},
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const double u = static_cast<double>(w.v[element & 3] >> 8) * 0x1p-24;
  return static_cast<float>((2 * u - 1) *
                            (1.0 / std::sqrt(static_cast<double>(fanIn))));
}

/// Where a dropout's tensor lies in its logical tensor: this rank's block
/// of shape `shape`, which starts at *offsets[d] in dim d (a null offset:
/// 0) of a tensor of shape logicalShape. The input steps by `strides`
/// (elements) through the block, the output is contiguous.
struct DropoutBlock {
  static constexpr int kMaxRank = 8;
  int rank;
  int64_t shape[kMaxRank];
  int64_t logicalShape[kMaxRank];
  int64_t strides[kMaxRank];
  const int64_t *offsets[kMaxRank];
};

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_SUPPORT_PHILOX_H
