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
// The 16-bit kernels (bfloat16 and IEEE half q, k, v, out, dout, dq, dk,
// dv; f32 lse) run the same cases on inputs rounded to the type, against
// the CPU kernels on those rounded values: the backward reference takes the
// GPU's (rounded) out and its lse, as the GPU backward does. They round p
// and dS to the type before their products and every result once, so each
// value must be within 2^-6 (bfloat16) or 2^-9 (half) of itself plus the
// same fraction of its tensor's largest magnitude: about 8 and 4 times the
// worst rounding of one element; a misplaced fragment or mask is off by
// the value's magnitude. lse is f32 and held to the f32 tolerance.
//
// The 16-bit cases run twice: on the own kernels (ctx.attentionBackend
// Own) and on cuDNN's fused attention (runtime/cuda/CudnnAttention.h,
// where the test is built with cuDNN), held to the same tolerances and
// the same bit-identical repeat of the backward (its deterministic
// algorithm). A case cuDNN does not take prints "CUDNN-SKIP name: reason";
// the cases of the shapes transformers train (no mask, D 64 or 128, T = S
// causal or not, T a multiple of 64) must be taken, else they fail.
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
#include "runtime/cuda/CudnnAttention.h"
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
#include <type_traits>
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

/// Empty when two backward runs' dq, dk, dv (grads[run][0..2]) are
/// bit-identical (no atomics); else which differs first.
std::string repeatError(const std::vector<float> (&grads)[2][3]) {
  const char *names[3] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i)
    if (std::memcmp(grads[0][i].data(), grads[1][i].data(),
                    grads[0][i].size() * sizeof(float)) != 0)
      return format("backward run twice: %s differs", names[i]);
  return "";
}

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
  t.check(c.name, firstError({compareFloats(gotOut, p.out, "out"),
                              compareFloats(gotLse, p.lse, "lse"),
                              compareFloats(grads[0][0], p.dq, "dq"),
                              compareFloats(grads[0][1], p.dk, "dk"),
                              compareFloats(grads[0][2], p.dv, "dv"),
                              repeatError(grads)}));
}

/// Host conversions of the 16-bit types.
float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
float toFloat(__half x) { return __half2float(x); }
template <typename T> T fromFloat(float x);
template <> __nv_bfloat16 fromFloat(float x) { return __float2bfloat16(x); }
template <> __half fromFloat(float x) { return __float2half(x); }

template <typename T> struct Half16;
template <> struct Half16<__nv_bfloat16> {
  static constexpr const char *kName = "bf16";
  static constexpr double kTolerance = 1.0 / 64;
};
template <> struct Half16<__half> {
  static constexpr const char *kName = "fp16";
  static constexpr double kTolerance = 1.0 / 512;
};

/// `x` rounded to T in place; returns the T values.
template <typename T> std::vector<T> roundTo(std::vector<float> &x) {
  std::vector<T> rounded(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    rounded[i] = fromFloat<T>(x[i]);
    x[i] = toFloat(rounded[i]);
  }
  return rounded;
}

template <typename T>
std::vector<float> downloadAsFloat(Tester &t, const DeviceBuffer &b,
                                   size_t count) {
  const std::vector<T> values = t.CudaTester::download<T>(b.get(), count);
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i)
    out[i] = toFloat(values[i]);
  return out;
}

template <typename T> T *ptr16(const DeviceBuffer &b) {
  return reinterpret_cast<T *>(b.get());
}

/// Which kernels a 16-bit case runs on.
enum class Kernels16 { Own, Cudnn };

/// Whether cuDNN must take case `c`: the shapes a transformer trains.
bool cudnnMustTake(const Case &c) {
  return c.mask == MaskKind::None && (c.d == 64 || c.d == 128) &&
         c.t == c.s && c.t % 64 == 0;
}

/// The 16-bit kernels on case `c` (see the file comment).
template <typename T>
void runCase16(Tester &t, const Case &c, Kernels16 kernels) {
  test::AttentionProblem p(c, t.rng);
  const std::vector<T> q16 = roundTo<T>(p.q), k16 = roundTo<T>(p.k),
                       v16 = roundTo<T>(p.v), dout16 = roundTo<T>(p.dout);
  AttentionDesc d = p.desc;
  const T sentinel = fromFloat<T>(Problem::kSentinel);
  const std::vector<T> sentinelQ(p.q.size(), sentinel),
      sentinelK(p.k.size(), sentinel);
  const std::vector<float> sentinelLse(p.lse.size(), Problem::kSentinel);
  DeviceBuffer q = t.upload(q16), k = t.upload(k16), v = t.upload(v16),
               dout = t.upload(dout16);
  DeviceBuffer mask;
  if (!p.mask.empty()) {
    mask = t.upload(p.mask);
    d.mask = reinterpret_cast<const bool *>(mask.get());
  }
  DeviceBuffer out = t.upload(sentinelQ), lse = t.upload(sentinelLse);
  const cuda::Attention16Type type = std::is_same_v<T, __nv_bfloat16>
                                         ? cuda::Attention16Type::Bf16
                                         : cuda::Attention16Type::Half;
  std::string name = std::string(Half16<T>::kName) +
                     (kernels == Kernels16::Cudnn ? " cudnn " : " ") + c.name;
  if (kernels == Kernels16::Own) {
    t.ctx.attentionBackend = static_cast<int32_t>(AttentionBackend::Own);
    cuda::attentionForward(t.ctx, d, ptr16<T>(q), ptr16<T>(k), ptr16<T>(v),
                           ptr16<T>(out), ptr(lse));
  } else {
    t.ctx.attentionBackend = static_cast<int32_t>(AttentionBackend::Auto);
    if (!cuda::cudnnAttentionForward(t.ctx, d, type, q.get(), k.get(),
                                     v.get(), out.get(), ptr(lse))) {
      if (cudnnMustTake(c))
        t.check(name, "cuDNN did not take it (the line above says why)");
      else
        std::printf("CUDNN-SKIP %s\n", name.c_str());
      return;
    }
  }
  const std::vector<float> gotOut = downloadAsFloat<T>(t, out, p.out.size());
  const std::vector<float> gotLse = t.download(lse, p.lse.size());
  p.forward();
  const double tol = Half16<T>::kTolerance;
  std::string forwardError =
      firstError({test::compareFloats(gotOut, p.out, tol, tol, "out"),
                  compareFloats(gotLse, p.lse, "lse")});

  // The reference backward from the GPU's forward.
  p.out = gotOut;
  p.lse = gotLse;
  p.backward();
  std::vector<float> grads[2][3];
  for (auto &run : grads) {
    DeviceBuffer dq = t.upload(sentinelQ), dk = t.upload(sentinelK),
                 dv = t.upload(sentinelK);
    if (kernels == Kernels16::Own) {
      cuda::attentionBackward(t.ctx, d, ptr16<T>(q), ptr16<T>(k), ptr16<T>(v),
                              ptr16<T>(out), ptr(lse), ptr16<T>(dout),
                              ptr16<T>(dq), ptr16<T>(dk), ptr16<T>(dv));
    } else if (!cuda::cudnnAttentionBackward(
                   t.ctx, d, type, q.get(), k.get(), v.get(), out.get(),
                   ptr(lse), dout.get(), dq.get(), dk.get(), dv.get())) {
      if (cudnnMustTake(c))
        t.check(name, "cuDNN did not take its backward (the line above says "
                      "why)");
      else
        std::printf("CUDNN-SKIP %s (backward)\n", name.c_str());
      return;
    }
    run[0] = downloadAsFloat<T>(t, dq, p.dq.size());
    run[1] = downloadAsFloat<T>(t, dk, p.dk.size());
    run[2] = downloadAsFloat<T>(t, dv, p.dv.size());
  }
  t.check(name,
          firstError({forwardError,
                      test::compareFloats(grads[0][0], p.dq, tol, tol, "dq"),
                      test::compareFloats(grads[0][1], p.dk, tol, tol, "dk"),
                      test::compareFloats(grads[0][2], p.dv, tol, tol, "dv"),
                      repeatError(grads)}));
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
  for (Kernels16 kernels : {Kernels16::Own, Kernels16::Cudnn}) {
    if (kernels == Kernels16::Cudnn && !cuda::builtWithCudnn()) {
      std::printf("CUDNN-SKIP every case: built without cuDNN\n");
      continue;
    }
    for (const Case &c : cases)
      runCase16<__nv_bfloat16>(t, c, kernels);
    for (const Case &c : cases)
      runCase16<__half>(t, c, kernels);
  }
}

} // namespace

int main() { return test::runCudaTests("cuda attention", testAttention); }
