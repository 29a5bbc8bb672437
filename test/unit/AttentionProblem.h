//===- AttentionProblem.h - random attention problems for the tests -*- C++ -*-===//
//
// One attention case (shape, causal, mask kind, memory layout) and its
// random inputs in their memory layouts, with every output set to a
// sentinel so unwritten elements show: shared by the CPU kernel tests
// (test/unit/RuntimeAttentionTest.cpp) and the CUDA kernel tests
// (test/cuda/AttentionTest.cu), which compare against the CPU kernels run
// here (forward(), backward()).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TEST_UNIT_ATTENTIONPROBLEM_H
#define AUTOPAR_TEST_UNIT_ATTENTIONPROBLEM_H

#include "runtime/cpu/Attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace autopar::rt::test {

enum class MaskKind {
  None,
  /// [B, 1, 1, S]: random keys of each batch index masked (key 0 never).
  KeyPadding,
  /// [1, 1, T, S]: random entries, and every key of row T / 2.
  Rows,
};

struct AttentionCase {
  std::string name;
  int64_t batch, heads, t, s, d;
  bool causal;
  MaskKind mask = MaskKind::None;
  /// q, out, dout, dq in [B, T, H, D] memory; k, v, dk, dv in [B, S, H, D].
  bool strided = false;
};

/// Inputs and outputs of one attention, in their memory layouts.
struct AttentionProblem {
  /// What every output holds before a kernel writes it.
  static constexpr float kSentinel = -12345.0f;

  AttentionDesc desc;
  std::vector<float> q, k, v, dout;
  std::vector<unsigned char> mask; // bool bytes
  std::vector<float> out, lse, dq, dk, dv;

  /// Random inputs from std::mt19937(seed).
  explicit AttentionProblem(const AttentionCase &c, uint32_t seed = 1) {
    std::mt19937 gen(seed);
    init(c, gen);
  }
  /// Random inputs from `gen`.
  template <typename Rng> AttentionProblem(const AttentionCase &c, Rng &gen) {
    init(c, gen);
  }

  /// The CPU kernels on this problem.
  void forward() {
    cpu::attentionForward(desc, q.data(), k.data(), v.data(), out.data(),
                          lse.data());
  }
  void backward() {
    cpu::attentionBackward(desc, q.data(), k.data(), v.data(), out.data(),
                           lse.data(), dout.data(), dq.data(), dk.data(),
                           dv.data());
  }

private:
  template <typename Rng> void init(const AttentionCase &c, Rng &gen) {
    AttentionDesc &d = desc;
    d.batch = c.batch;
    d.heads = c.heads;
    d.t = c.t;
    d.s = c.s;
    d.d = c.d;
    d.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    d.causal = c.causal;
    auto setStrides = [&](int64_t *st, int64_t rows) {
      if (c.strided) {
        st[0] = rows * d.heads * d.d;
        st[1] = d.d;
        st[2] = d.heads * d.d;
      } else {
        st[0] = d.heads * rows * d.d;
        st[1] = rows * d.d;
        st[2] = d.d;
      }
    };
    for (int64_t *st : {d.qStrides, d.outStrides, d.doutStrides, d.dqStrides})
      setStrides(st, d.t);
    for (int64_t *st : {d.kStrides, d.vStrides, d.dkStrides, d.dvStrides})
      setStrides(st, d.s);
    auto fill = [&](std::vector<float> &x, int64_t rows, float range) {
      std::uniform_real_distribution<float> dist(-range, range);
      x.resize(d.batch * d.heads * rows * d.d);
      for (float &e : x)
        e = dist(gen);
    };
    fill(q, d.t, 2.0f);
    fill(k, d.s, 1.0f);
    fill(v, d.s, 1.0f);
    fill(dout, d.t, 1.0f);
    if (c.mask == MaskKind::KeyPadding) {
      mask.resize(d.batch * d.s);
      for (size_t i = 0; i < mask.size(); ++i)
        mask[i] = static_cast<int64_t>(i) % d.s == 0 || gen() % 4 != 0;
      const int64_t strides[4] = {d.s, 0, 0, 1};
      std::copy(strides, strides + 4, d.maskStrides);
    } else if (c.mask == MaskKind::Rows) {
      mask.resize(d.t * d.s);
      for (size_t i = 0; i < mask.size(); ++i)
        mask[i] = static_cast<int64_t>(i) / d.s != d.t / 2 && gen() % 3 != 0;
      const int64_t strides[4] = {0, 0, d.s, 1};
      std::copy(strides, strides + 4, d.maskStrides);
    }
    d.mask =
        mask.empty() ? nullptr : reinterpret_cast<const bool *>(mask.data());
    out.assign(q.size(), kSentinel);
    lse.assign(d.batch * d.heads * d.t, kSentinel);
    dq.assign(q.size(), kSentinel);
    dk.assign(k.size(), kSentinel);
    dv.assign(v.size(), kSentinel);
  }
};

} // namespace autopar::rt::test

#endif // AUTOPAR_TEST_UNIT_ATTENTIONPROBLEM_H
