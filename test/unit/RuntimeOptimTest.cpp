//===- RuntimeOptimTest.cpp - Optimizers against PyTorch 1.13 -------------===//
//
// Expected values were produced with Debian's torch 1.13 (/usr/bin/python3):
// torch.optim.AdamW / SGD (foreach=False) over two parameters, the first in a
// group with weight decay, the second in a group with weight_decay=0, three
// steps with the gradients below; clip_grad_norm_ where stated. The script:
//
//   A0 = [0.5, -1.25, 2.0, 0.125, -0.75]; B0 = [1.5, -0.3, 0.04]
//   a, b = Parameter(A0), Parameter(B0)
//   opt = AdamW([{'params': [a], 'weight_decay': wd},
//                {'params': [b], 'weight_decay': 0.0}], foreach=False, ...)
//   for s in range(3):
//       a.grad, b.grad = GA[s], GB[s]
//       [norms.append(clip_grad_norm_([a, b], clip))]
//       opt.step()
//   print('%.9g' % each element of a and b)
//
//===----------------------------------------------------------------------===//

#include "runtime/optim/Optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace autopar::rt;

namespace {

const float kA0[] = {0.5f, -1.25f, 2.0f, 0.125f, -0.75f};
const float kB0[] = {1.5f, -0.3f, 0.04f};
const float kGA[3][5] = {{0.1f, -0.2f, 0.3f, -0.4f, 0.5f},
                         {0.05f, 0.15f, -0.25f, 0.35f, -0.45f},
                         {-0.3f, 0.2f, 0.1f, 0.0f, -0.6f}};
const float kGB[3][3] = {
    {1.0f, -2.0f, 0.5f}, {-0.7f, 0.8f, 0.9f}, {0.25f, -0.125f, 3.0f}};

// AdamW: adamw {'lr': 0.01, 'betas': (0.9, 0.95), 'eps': 1e-08, 'weight_decay':
// 0.1} clip=None
const float kAdamWA[] = {0.482543439f, -1.23883164f, 1.98174942f, 0.13485536f,
                         -0.753492892f};
const float kAdamWB[] = {1.48653448f, -0.28340742f, 0.0119966427f};
// AdamWDefault: adamw {'weight_decay': 0.0} clip=None
const float kAdamWDefaultA[] = {0.498415053f, -1.24925601f, 1.99877465f,
                                0.126024827f, -0.750574589f};
const float kAdamWDefaultB[] = {1.49865735f, -0.298350662f, 0.0371751599f};
// AdamWClip: adamw {'lr': 0.01, 'betas': (0.9, 0.95), 'eps': 1e-08,
// 'weight_decay': 0.1} clip=0.5
const float kAdamWClipA[] = {0.480571121f, -1.24141884f, 1.98628294f,
                             0.130920842f, -0.750998199f};
const float kAdamWClipB[] = {1.49093008f, -0.286660105f, 0.011754795f};
const double kAdamWClipNorms[] = {2.4083189964294434, 1.5337861776351929,
                                  3.0948545932769775};
// SgdMomentum: sgd {'lr': 0.05, 'momentum': 0.9, 'dampening': 0.1,
// 'weight_decay': 0.01} clip=None
const float kSgdMomentumA[] = {0.494355083f, -1.24141538f, 1.97092772f,
                               0.148915529f, -0.75024718f};
const float kSgdMomentumB[] = {1.41310012f, -0.0917750373f, -0.23969999f};
// SgdNesterov: sgd {'lr': 0.05, 'momentum': 0.9, 'nesterov': True,
// 'weight_decay': 0.01} clip=None
const float kSgdNesterovA[] = {0.502549767f, -1.24994671f, 1.9648025f,
                               0.14578101f, -0.714896142f};
const float kSgdNesterovB[] = {1.39915001f, -0.0526250228f, -0.452924997f};
// SgdPlain: sgd {'lr': 0.05, 'weight_decay': 0.01} clip=None
const float kSgdPlainA[] = {0.506756604f, -1.25563216f, 1.98951018f,
                            0.12730135f, -0.721361816f};
const float kSgdPlainB[] = {1.47249997f, -0.23375003f, -0.180000007f};
// clip_grad_norm_ max_norm=1
const double kClip1Norm = 2.5534288883209229;
const float kClip1GA[] = {0.391630113f, -0.783260226f, 0.195815057f,
                          -0.274141073f, 0.313304096f};
const float kClip1GB[] = {0.0391630121f, -0.0783260241f, 0.11748904f};
// clip_grad_norm_ max_norm=100
const double kClip100Norm = 2.5534288883209229;
const float kClip100GA[] = {1.0f, -2.0f, 0.5f, -0.699999988f, 0.800000012f};
const float kClip100GB[] = {0.100000001f, -0.200000003f, 0.300000012f};

/// Two parameters (A decays, B does not) with their gradients and state.
struct TwoParams {
  std::vector<float> a{std::begin(kA0), std::end(kA0)};
  std::vector<float> b{std::begin(kB0), std::end(kB0)};
  std::vector<float> ga = std::vector<float>(5), gb = std::vector<float>(3);
  std::vector<float> ma = std::vector<float>(5), mb = std::vector<float>(3);
  std::vector<float> va = std::vector<float>(5), vb = std::vector<float>(3);

  std::vector<ParamSlice> slices() {
    return {{a.data(), ga.data(), ma.data(), va.data(), 5, true},
            {b.data(), gb.data(), mb.data(), vb.data(), 3, false}};
  }
  void setGrads(int step) {
    ga.assign(std::begin(kGA[step]), std::end(kGA[step]));
    gb.assign(std::begin(kGB[step]), std::end(kGB[step]));
  }
  /// Three steps at constant lr; returns the norms clipGradNorm reported.
  std::vector<double> run(const OptimizerConfig &config) {
    std::vector<double> norms;
    std::vector<ParamSlice> s = slices();
    for (int step = 0; step < 3; ++step) {
      setGrads(step);
      norms.push_back(clipGradNorm(config, s));
      optimizerStep(config, s, step + 1, config.lr);
    }
    return norms;
  }
};

void expectClose(double actual, double expected, const char *what, int i) {
  double tol = 1e-6 * std::max(std::fabs(expected), 1e-3);
  EXPECT_NEAR(actual, expected, tol) << what << "[" << i << "]";
}

template <size_t N>
void expectAll(const std::vector<float> &actual, const float (&expected)[N],
               const char *what) {
  ASSERT_EQ(actual.size(), N) << what;
  for (size_t i = 0; i < N; ++i)
    expectClose(actual[i], expected[i], what, static_cast<int>(i));
}

// DeepSpeed's DynamicLossScaler (hysteresis 2, window 3, min 1, not
// consecutive): the first overflow only skips, the second halves; growth
// restores the hysteresis; the scale stops at min_scale.
TEST(RuntimeOptimTest, LossScaleHysteresisAsDeepSpeed) {
  LossScaleConfig c;
  c.initScale = 8;
  c.growthInterval = 3;
  c.hysteresis = 2;
  c.minScale = 1;
  LossScaleState s = initialLossScale(c);
  // DeepSpeed's update_scale over the same overflows gives these scales.
  const bool overflow[] = {true,  true, false, false, false, true,
                           false, true, true,  true,  true};
  const double want[] = {8, 4, 4, 4, 8, 8, 8, 4, 2, 1, 1};
  for (size_t i = 0; i < std::size(overflow); ++i) {
    updateLossScale(c, s, overflow[i]);
    EXPECT_EQ(s.scale, want[i]) << "after step " << i;
  }
  // Hysteresis 1 is GradScaler's: every overflow backs off.
  LossScaleConfig t;
  t.initScale = 4;
  t.growthInterval = 2;
  LossScaleState u = initialLossScale(t);
  for (bool o : {true, false, false, true})
    updateLossScale(t, u, o);
  EXPECT_EQ(u.scale, 2.0);
}

TEST(RuntimeOptimTest, NumStateBuffers) {
  OptimizerConfig c;
  EXPECT_EQ(numStateBuffers(c), 2);
  c.kind = OptimizerKind::Sgd;
  EXPECT_EQ(numStateBuffers(c), 0);
  c.momentum = 0.9;
  EXPECT_EQ(numStateBuffers(c), 1);
}

TEST(RuntimeOptimTest, AdamWWithWeightDecayMatchesTorch) {
  OptimizerConfig c;
  c.lr = 1e-2;
  c.beta1 = 0.9;
  c.beta2 = 0.95;
  c.eps = 1e-8;
  c.weightDecay = 0.1;
  TwoParams p;
  p.run(c);
  expectAll(p.a, kAdamWA, "a");
  expectAll(p.b, kAdamWB, "b");
}

TEST(RuntimeOptimTest, AdamWDefaultsWithoutWeightDecayMatchTorch) {
  OptimizerConfig c; // torch defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8
  c.weightDecay = 0;
  TwoParams p;
  p.run(c);
  expectAll(p.a, kAdamWDefaultA, "a");
  expectAll(p.b, kAdamWDefaultB, "b");
}

TEST(RuntimeOptimTest, AdamWWithClippingMatchesTorch) {
  OptimizerConfig c;
  c.lr = 1e-2;
  c.beta1 = 0.9;
  c.beta2 = 0.95;
  c.weightDecay = 0.1;
  c.maxGradNorm = 0.5;
  TwoParams p;
  std::vector<double> norms = p.run(c);
  for (int i = 0; i < 3; ++i)
    expectClose(norms[i], kAdamWClipNorms[i], "norm", i);
  expectAll(p.a, kAdamWClipA, "a");
  expectAll(p.b, kAdamWClipB, "b");
}

TEST(RuntimeOptimTest, SgdMomentumDampeningMatchesTorch) {
  OptimizerConfig c;
  c.kind = OptimizerKind::Sgd;
  c.lr = 0.05;
  c.momentum = 0.9;
  c.dampening = 0.1;
  c.weightDecay = 0.01;
  TwoParams p;
  p.run(c);
  expectAll(p.a, kSgdMomentumA, "a");
  expectAll(p.b, kSgdMomentumB, "b");
}

TEST(RuntimeOptimTest, SgdNesterovMatchesTorch) {
  OptimizerConfig c;
  c.kind = OptimizerKind::Sgd;
  c.lr = 0.05;
  c.momentum = 0.9;
  c.nesterov = true;
  c.weightDecay = 0.01;
  TwoParams p;
  p.run(c);
  expectAll(p.a, kSgdNesterovA, "a");
  expectAll(p.b, kSgdNesterovB, "b");
}

TEST(RuntimeOptimTest, SgdPlainMatchesTorch) {
  OptimizerConfig c;
  c.kind = OptimizerKind::Sgd;
  c.lr = 0.05;
  c.weightDecay = 0.01;
  TwoParams p;
  // No momentum: no state buffers at all.
  std::vector<ParamSlice> s = p.slices();
  for (ParamSlice &slice : s)
    slice.state0 = slice.state1 = nullptr;
  for (int step = 0; step < 3; ++step) {
    p.setGrads(step);
    optimizerStep(c, s, step + 1, c.lr);
  }
  expectAll(p.a, kSgdPlainA, "a");
  expectAll(p.b, kSgdPlainB, "b");
}

TEST(RuntimeOptimTest, ClipGradNormMatchesTorch) {
  for (int maxNorm : {1, 100}) {
    TwoParams p;
    // Gradients as in the script: a.grad = GB[0] + GB[1][:2], b.grad =
    // GA[0][:3].
    p.ga = {kGB[0][0], kGB[0][1], kGB[0][2], kGB[1][0], kGB[1][1]};
    p.gb = {kGA[0][0], kGA[0][1], kGA[0][2]};
    OptimizerConfig c;
    c.maxGradNorm = maxNorm;
    std::vector<ParamSlice> s = p.slices();
    EXPECT_NEAR(gradNorm(s), kClip1Norm, 1e-6 * kClip1Norm);
    double norm = clipGradNorm(c, s);
    if (maxNorm == 1) {
      expectClose(norm, kClip1Norm, "norm", 0);
      expectAll(p.ga, kClip1GA, "ga");
      expectAll(p.gb, kClip1GB, "gb");
    } else {
      expectClose(norm, kClip100Norm, "norm", 0);
      expectAll(p.ga, kClip100GA, "ga");
      expectAll(p.gb, kClip100GB, "gb");
    }
  }
}

TEST(RuntimeOptimTest, NoClippingLeavesGradients) {
  TwoParams p;
  p.setGrads(0);
  OptimizerConfig c; // maxGradNorm = 0
  std::vector<ParamSlice> s = p.slices();
  double norm = clipGradNorm(c, s);
  double expected = 0;
  for (float g : kGA[0])
    expected += double(g) * g;
  for (float g : kGB[0])
    expected += double(g) * g;
  EXPECT_NEAR(norm, std::sqrt(expected), 1e-12);
  EXPECT_EQ(p.ga[4], kGA[0][4]);
  EXPECT_EQ(p.gb[1], kGB[0][1]);
}

TEST(RuntimeOptimTest, GradNormOfLargeTensorIsExactAndDeterministic) {
  // Spans several fixed chunks (and threads, when built with OpenMP).
  std::vector<float> g(1000003, 0.5f), p(g.size(), 0.f);
  std::vector<ParamSlice> s = {
      {p.data(), g.data(), nullptr, nullptr, (int64_t)g.size(), true}};
  double norm = gradNorm(s);
  EXPECT_DOUBLE_EQ(norm, 0.5 * std::sqrt(double(g.size())));
  EXPECT_EQ(norm, gradNorm(s));
}

TEST(RuntimeOptimTest, ScheduledLrWarmupAndDecays) {
  OptimizerConfig c;
  c.lr = 1e-3;
  c.minLr = 1e-4;
  c.warmupSteps = 10;
  const int64_t total = 110;
  for (LrDecay d : {LrDecay::Constant, LrDecay::Cosine, LrDecay::Linear}) {
    c.decay = d;
    EXPECT_DOUBLE_EQ(scheduledLr(c, 0, total), 1e-4);
    EXPECT_DOUBLE_EQ(scheduledLr(c, 4, total), 5e-4);
    EXPECT_DOUBLE_EQ(scheduledLr(c, 9, total), 1e-3);
    EXPECT_DOUBLE_EQ(scheduledLr(c, 10, total), 1e-3);
  }
  c.decay = LrDecay::Constant;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 60, total), 1e-3);
  EXPECT_DOUBLE_EQ(scheduledLr(c, 500, total), 1e-3);

  c.decay = LrDecay::Cosine;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 60, total), 5.5e-4); // p = 0.5
  EXPECT_NEAR(scheduledLr(c, 35, total),
              1e-4 + 0.5 * (1 + std::cos(3.14159265358979323846 * 0.25)) * 9e-4,
              1e-15);
  EXPECT_DOUBLE_EQ(scheduledLr(c, 110, total), 1e-4);
  EXPECT_DOUBLE_EQ(scheduledLr(c, 500, total), 1e-4); // clamped

  c.decay = LrDecay::Linear;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 35, total), 7.75e-4); // p = 0.25
  EXPECT_DOUBLE_EQ(scheduledLr(c, 60, total), 5.5e-4);
  EXPECT_DOUBLE_EQ(scheduledLr(c, 110, total), 1e-4);

  // decaySteps overrides the run length.
  c.decaySteps = 60;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 35, total), 5.5e-4); // p = 25/50
  EXPECT_DOUBLE_EQ(scheduledLr(c, 80, total), 1e-4);
  c.decay = LrDecay::Cosine;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 35, total), 5.5e-4);

  // Horizon not past warmup: straight to minLr after warmup.
  c.decaySteps = 5;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 9, total), 1e-3);
  EXPECT_DOUBLE_EQ(scheduledLr(c, 10, total), 1e-4);

  // No warmup, cosine over the whole run.
  OptimizerConfig n;
  n.lr = 2.0;
  n.decay = LrDecay::Cosine;
  EXPECT_DOUBLE_EQ(scheduledLr(n, 0, 100), 2.0);
  EXPECT_DOUBLE_EQ(scheduledLr(n, 50, 100), 1.0);
}

// DeepSpeed 0.16's schedulers as its engine steps them: step s runs at batch
// iteration s - 1 - (updates skipped before s).
TEST(RuntimeOptimTest, ScheduledLrDeepSpeedWarmup) {
  OptimizerConfig c;
  c.lr = 1e-3; // warmup_max_lr
  c.warmupSteps = 10;
  c.schedule = LrScheduleKind::DeepSpeedWarmup;
  c.warmupMinLr = 1e-4;
  const int64_t total = 100;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 0, total), 1e-4); // iteration -1: the min
  EXPECT_DOUBLE_EQ(scheduledLr(c, 1, total), 1e-4); // log(1) = 0
  EXPECT_NEAR(scheduledLr(c, 2, total),
              1e-4 + 9e-4 * std::log(2.0) / std::log(10.0), 1e-18);
  EXPECT_DOUBLE_EQ(scheduledLr(c, 11, total), 1e-3); // iteration 10: the max
  EXPECT_DOUBLE_EQ(scheduledLr(c, 90, total), 1e-3);
  // An update skipped on an overflow does not step the scheduler.
  EXPECT_EQ(scheduledLr(c, 3, total, 1), scheduledLr(c, 2, total));
  EXPECT_EQ(scheduledLr(c, 12, total, 2), scheduledLr(c, 10, total));
  c.logWarmup = false;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 6, total), 1e-4 + 9e-4 * 0.5); // 5 / 10
  // warmup_num_steps is at least 2.
  c.warmupSteps = 0;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 2, total), 1e-4 + 9e-4 * 0.5); // 1 / 2
  EXPECT_DOUBLE_EQ(scheduledLr(c, 3, total), 1e-3);
}

TEST(RuntimeOptimTest, ScheduledLrDeepSpeedWarmupDecay) {
  OptimizerConfig c;
  c.lr = 1e-3;
  c.warmupSteps = 10;
  c.schedule = LrScheduleKind::DeepSpeedWarmupDecay;
  c.logWarmup = false;
  const int64_t total = 20;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 0, total), 0);
  EXPECT_DOUBLE_EQ(scheduledLr(c, 10, total), 9e-4); // 9 / 10
  EXPECT_DOUBLE_EQ(scheduledLr(c, 11, total), 1e-3); // (20 - 10) / 10
  EXPECT_DOUBLE_EQ(scheduledLr(c, 16, total), 5e-4); // (20 - 15) / 10
  EXPECT_DOUBLE_EQ(scheduledLr(c, 21, total), 0);    // iteration 20
  EXPECT_DOUBLE_EQ(scheduledLr(c, 40, total), 0);    // max(0, ...)
  // total_num_steps given: the run's length does not matter.
  c.decaySteps = 30;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 21, total), 5e-4); // (30 - 20) / 20
}

TEST(RuntimeOptimTest, ScheduledLrDeepSpeedWarmupCosine) {
  OptimizerConfig c;
  c.lr = 2e-3; // the optimizer's lr, scaled by the ratio
  c.warmupSteps = 10;
  c.schedule = LrScheduleKind::DeepSpeedWarmupCosine;
  c.logWarmup = false;
  c.warmupMinRatio = 0.1;
  c.cosMinRatio = 0.01;
  const int64_t total = 30;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 0, total), 0); // 0 before it starts
  EXPECT_DOUBLE_EQ(scheduledLr(c, 1, total), 2e-3 * 0.1);
  EXPECT_DOUBLE_EQ(scheduledLr(c, 6, total), 2e-3 * (0.1 + 0.5 * 0.9));
  // Iteration 19: 10 of the 20 decay steps, cos(pi / 2) = 0.
  EXPECT_NEAR(scheduledLr(c, 20, total), 2e-3 * (0.01 + 0.99 * 0.5), 1e-18);
  // Iteration 29: the end, cos(pi) = -1: the floor.
  EXPECT_DOUBLE_EQ(scheduledLr(c, 30, total), 2e-3 * 0.01);
  // Iteration 10: the first decay step.
  EXPECT_NEAR(
      scheduledLr(c, 11, total),
      2e-3 * (0.01 + 0.99 * (1 + std::cos(3.14159265358979323846 / 20)) / 2),
      1e-18);
}

} // namespace

// Mixed precision: a step on 16-bit gradients (gradLow) updates the f32
// master exactly as a step on their f32 values does, and writes the master
// rounded into the 16-bit parameter (paramLow); the gradient multiplier is
// a float product before the update (as torch's grad.mul_). Both formats,
// AdamW and SGD with momentum.
TEST(RuntimeOptimTest, SixteenBitGradientsAndParameters) {
  for (Float16Kind kind : {Float16Kind::BF16, Float16Kind::Half}) {
    for (OptimizerKind type : {OptimizerKind::AdamW, OptimizerKind::Sgd}) {
      OptimizerConfig config;
      config.kind = type;
      config.momentum = 0.9;
      config.weightDecay = 0.01;
      const int64_t n = 1000;
      std::vector<float> master(n), reference(n), ref16Grads(n);
      std::vector<uint16_t> grads(n), params(n);
      for (int64_t i = 0; i < n; ++i) {
        master[i] = reference[i] = 0.5f - 0.001f * static_cast<float>(i);
        grads[i] = float16Bits(kind, 0.01f * std::sin(static_cast<float>(i)));
      }
      std::vector<float> s0(n, 0.0f), s1(n, 0.0f), r0(n, 0.0f), r1(n, 0.0f);
      const float gradScale = 0.375f;
      for (int64_t step = 1; step <= 3; ++step) {
        for (int64_t i = 0; i < n; ++i)
          ref16Grads[i] = float16Value(kind, grads[i]) * gradScale;
        ParamSlice low{master.data(), nullptr, s0.data(), s1.data(), n, true};
        low.gradLow = grads.data();
        low.paramLow = params.data();
        low.lowKind = kind;
        ParamSlice f32{reference.data(), ref16Grads.data(), r0.data(),
                       r1.data(), n, true};
        optimizerStep(config, {low}, step, 1e-3, gradScale);
        optimizerStep(config, {f32}, step, 1e-3);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(master[i], reference[i]) << "step " << step << " i " << i;
          ASSERT_EQ(params[i], float16Bits(kind, master[i]));
        }
      }
      // The squared norm reads the 16-bit values.
      ParamSlice low{master.data(), nullptr, nullptr, nullptr, n, true};
      low.gradLow = grads.data();
      low.lowKind = kind;
      double want = 0;
      for (int64_t i = 0; i < n; ++i)
        want += static_cast<double>(float16Value(kind, grads[i])) *
                float16Value(kind, grads[i]);
      EXPECT_DOUBLE_EQ(gradSquaredSum({low}), want);
    }
  }
}
