//===- AttentionTest.cu - the CUDA attention kernels against the CPU ones -===//
//
// autopar-cuda-attention-test: runs runtime/cuda/Attention.h on random
// inputs of many shapes (odd T, T != S under a causal mask, D from 1 to
// 128, [B, T, H, D] layouts through strides, broadcast bool masks, fully
// masked rows, a long causal sequence) and compares out, lse, dq, dk and
// dv with the CPU kernels (runtime/cpu/Attention.h): each value within
// 1e-4 of itself plus 1e-5 of the largest magnitude of its tensor, NaN
// matching NaN and infinities equal. The backward runs on the GPU's own
// out and lse, and runs twice: the two results must be bit-identical (no
// atomics). Every output starts as a sentinel, so unwritten elements fail.
//
// Prints "PASS name" or "FAIL name: detail" per case, then
// "cuda attention: N passed, M failed", and exits 1 when any failed.
// Without a usable CUDA device it prints "cuda attention: skipped (no CUDA
// device: REASON)" and exits 0.
//
//===----------------------------------------------------------------------===//

#include "runtime/Device.h"
#include "runtime/cpu/Attention.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/Attention.h"
#include "test/cuda/CudaTest.h"
#include "test/unit/AttentionProblem.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace autopar::rt;

namespace {

constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;

using test::format;

/// test::compareFloats within kRtol * |want[i]| + kAtol * max |want|.
std::string compareFloats(const std::vector<float> &got,
                          const std::vector<float> &want, const char *what) {
  return test::compareFloats(got, want, kRtol, kAtol, what);
}

using test::AttentionCase;
using test::MaskKind;
using Case = AttentionCase;

/// The inputs of a case and the CPU kernels' results.
struct Problem : test::AttentionProblem {
  Problem(const Case &c, std::mt19937_64 &rng) : AttentionProblem(c, rng) {
    forward();
    backward();
  }
};

using test::firstError;

class Tester : public test::CudaTester {
public:
  explicit Tester(Device &device)
      : CudaTester(device, 20240612, "autopar-cuda-attention-test") {}
  std::vector<float> download(const DeviceBuffer &b, size_t count) {
    return CudaTester::download<float>(b.get(), count);
  }
};

float *ptr(const DeviceBuffer &b) { return reinterpret_cast<float *>(b.get()); }

void runCase(Tester &t, const Case &c) {
  Problem p(c, t.rng);
  AttentionDesc d = p.desc;
  const float kSentinel = Problem::kSentinel;
  const std::vector<float> sentinelQ(p.q.size(), kSentinel),
      sentinelK(p.k.size(), kSentinel), sentinelLse(p.lse.size(), kSentinel);
  DeviceBuffer q = t.upload(p.q), k = t.upload(p.k), v = t.upload(p.v),
               dout = t.upload(p.dout);
  DeviceBuffer mask;
  if (!p.mask.empty()) {
    mask = t.upload(p.mask);
    d.mask = reinterpret_cast<const bool *>(mask.get());
  }
  DeviceBuffer out = t.upload(sentinelQ), lse = t.upload(sentinelLse);
  cuda::attentionForward(t.ctx, d, ptr(q), ptr(k), ptr(v), ptr(out), ptr(lse));
  const std::vector<float> gotOut = t.download(out, p.out.size());
  const std::vector<float> gotLse = t.download(lse, p.lse.size());

  std::vector<float> grads[2][3];
  for (auto &run : grads) {
    DeviceBuffer dq = t.upload(sentinelQ), dk = t.upload(sentinelK),
                 dv = t.upload(sentinelK);
    cuda::attentionBackward(t.ctx, d, ptr(q), ptr(k), ptr(v), ptr(out),
                            ptr(lse), ptr(dout), ptr(dq), ptr(dk), ptr(dv));
    run[0] = t.download(dq, p.dq.size());
    run[1] = t.download(dk, p.dk.size());
    run[2] = t.download(dv, p.dv.size());
  }
  std::string repeat;
  for (int i = 0; i < 3 && repeat.empty(); ++i)
    if (std::memcmp(grads[0][i].data(), grads[1][i].data(),
                    grads[0][i].size() * sizeof(float)) != 0)
      repeat = format("backward run twice: %s differs", i == 0   ? "dq"
                                                        : i == 1 ? "dk"
                                                                 : "dv");
  t.check(c.name, firstError({compareFloats(gotOut, p.out, "out"),
                              compareFloats(gotLse, p.lse, "lse"),
                              compareFloats(grads[0][0], p.dq, "dq"),
                              compareFloats(grads[0][1], p.dk, "dk"),
                              compareFloats(grads[0][2], p.dv, "dv"), repeat}));
}

void testAttention(Tester &t) {
  const Case cases[] = {
      {"odd T, D=8, causal", 2, 3, 13, 13, 8, true},
      {"T<S causal, D=32", 1, 2, 5, 9, 32, true},
      {"T>S causal: fully masked rows", 1, 2, 9, 5, 16, true},
      {"single row and key, D=1", 1, 1, 1, 1, 1, false},
      {"D=64 causal, partial tiles", 2, 4, 130, 130, 64, true},
      {"D=64, T != S", 1, 3, 100, 70, 64, false},
      {"T<S causal, D=33", 3, 3, 67, 150, 33, true},
      {"T>S causal, D=48", 1, 2, 150, 67, 48, true},
      {"key padding mask", 2, 2, 20, 33, 8, false, MaskKind::KeyPadding},
      {"key padding mask, causal", 4, 3, 70, 70, 16, true,
       MaskKind::KeyPadding},
      {"fully masked row", 1, 2, 11, 17, 8, false, MaskKind::Rows},
      {"fully masked row, causal", 2, 4, 80, 90, 32, true, MaskKind::Rows},
      {"strided [B,T,H,D]", 2, 3, 19, 23, 32, false, MaskKind::None, true},
      {"strided causal", 2, 5, 70, 70, 64, true, MaskKind::None, true},
      {"strided, mask, causal", 1, 3, 66, 129, 16, true, MaskKind::KeyPadding,
       true},
      {"D=65 (128-wide tiles)", 1, 2, 40, 50, 65, false},
      {"D=96 causal, T != S", 2, 2, 100, 77, 96, true},
      {"D=128 causal", 1, 3, 129, 129, 128, true},
      {"D=128 strided, mask", 2, 2, 33, 97, 128, false, MaskKind::Rows, true},
      {"long: T=S=1024, D=64, causal, B*H=24", 2, 12, 1024, 1024, 64, true},
      {"long: T=S=512, D=128, B*H=8", 2, 4, 512, 512, 128, false},
  };
  for (const Case &c : cases)
    runCase(t, c);
}

} // namespace

int main() { return test::runCudaTests("cuda attention", testAttention); }
