//===- Optimizer.cpp - AdamW / SGD, gradient clipping, lr schedule --------===//
//
// Mirrors torch 1.13 torch/optim/adamw.py (_single_tensor_adamw),
// torch/optim/sgd.py (_single_tensor_sgd) and clip_grad_norm_ op by op:
//
//   AdamW  param.mul_(1 - lr*wd)
//          exp_avg.mul_(b1).add_(grad, alpha=1-b1)        add = fma(g, a, m)
//          exp_avg_sq.mul_(b2).addcmul_(grad, grad, value=1-b2)
//                                                          fma((1-b2)*g, g, v)
//          denom = (exp_avg_sq.sqrt() / sqrt(bc2)).add_(eps)
//          param.addcdiv_(exp_avg, denom, value=-lr/bc1)   p + ((-s)*m)/denom
//   SGD    d_p = grad.add(param, alpha=wd)                 fma(p, wd, g)
//          buf = clone(d_p) | buf.mul_(mu).add_(d_p, alpha=1-dampening)
//          d_p = d_p.add(buf, alpha=mu) | buf
//          param.add_(d_p, alpha=-lr)                      fma(d_p, -lr, p)
//
//===----------------------------------------------------------------------===//

#include "runtime/optim/Optimizer.h"
#include "runtime/Float16.h"
#include "runtime/optim/OptimizerMath.h"

#include <algorithm>
#include <cmath>

// OpenMP is optional: CUDA programs build the host optimizer without it.
#ifdef _OPENMP
#define AUTOPAR_RT_PRAGMA(x) _Pragma(#x)
#else
#define AUTOPAR_RT_PRAGMA(x)
#endif
/// A parallel loop over pieces when there are enough elements in all.
#define AUTOPAR_RT_PARALLEL_FOR(total)                                         \
  AUTOPAR_RT_PRAGMA(omp parallel for schedule(static) if ((total) >           \
                                                          kMinParallelElements))
/// A vectorized loop (a sum reduction into `var`).
#define AUTOPAR_RT_SIMD AUTOPAR_RT_PRAGMA(omp simd)
#define AUTOPAR_RT_SIMD_SUM(var) AUTOPAR_RT_PRAGMA(omp simd reduction(+ : var))

namespace autopar::rt {

namespace {

/// Elements per partial sum in gradNorm: fixed so the sum's rounding does
/// not depend on the thread count.
constexpr int64_t kNormChunk = 1 << 16;

/// Elements per task of the update.
constexpr int64_t kUpdatePiece = 1 << 14;

/// Below this many elements in all, the loops stay on the calling thread.
constexpr int64_t kMinParallelElements = 1 << 15;

/// Elements [begin, end) of slices[slice].
struct Piece {
  size_t slice;
  int64_t begin, end;
};

/// Every slice cut into pieces of `size` elements (the last of each slice
/// shorter), in order; `total` gets the element count.
std::vector<Piece> cutSlices(const std::vector<ParamSlice> &slices,
                             int64_t size, int64_t &total) {
  std::vector<Piece> pieces;
  total = 0;
  for (size_t k = 0; k < slices.size(); ++k) {
    const int64_t n = slices[k].numElements;
    for (int64_t begin = 0; begin < n; begin += size)
      pieces.push_back({k, begin, std::min(n, begin + size)});
    total += n;
  }
  return pieces;
}

constexpr double kPi = 3.14159265358979323846;

} // namespace

int numStateBuffers(const OptimizerConfig &config) {
  switch (config.kind) {
  case OptimizerKind::AdamW:
    return 2;
  case OptimizerKind::Sgd:
    return config.momentum != 0 ? 1 : 0;
  }
  return 0;
}

LossScaleState initialLossScale(const LossScaleConfig &config) {
  LossScaleState state;
  state.scale = config.initScale;
  state.hysteresisLeft = config.hysteresis;
  return state;
}

void updateLossScale(const LossScaleConfig &config, LossScaleState &state,
                     bool overflow) {
  if (overflow) {
    // DeepSpeed: lowered at the last tolerated overflow, and every one
    // after it until the scale grows again.
    if (state.hysteresisLeft <= 1)
      state.scale =
          std::max(state.scale * config.backoffFactor, config.minScale);
    else
      --state.hysteresisLeft;
    state.goodSteps = 0;
  } else if (++state.goodSteps == config.growthInterval) {
    state.scale *= config.growthFactor;
    state.goodSteps = 0;
    state.hysteresisLeft = config.hysteresis;
  }
}

double deepSpeedLr(const OptimizerConfig &config, int64_t iteration,
                   int64_t totalSteps) {
  // lr_schedules.py as of DeepSpeed 0.16: warmup_num_steps at least 2,
  // gamma = log(i + 1) / log(W) (as inverse_log_warm_up * log) or i / W.
  const int64_t w = std::max<int64_t>(2, config.warmupSteps);
  const double i = static_cast<double>(iteration);
  auto warmupGamma = [&] {
    if (config.logWarmup)
      return (1.0 / std::log(static_cast<double>(w))) * std::log(i + 1);
    return i / static_cast<double>(w);
  };
  if (config.schedule == LrScheduleKind::DeepSpeedWarmupCosine) {
    // WarmupCosineLR: a ratio of the optimizer's lr; 0 before it starts.
    if (iteration < 0)
      return 0.0;
    double ratio;
    if (iteration < w) {
      ratio =
          config.warmupMinRatio + warmupGamma() * (1.0 - config.warmupMinRatio);
    } else {
      const double realLast = static_cast<double>(iteration - w + 1);
      const double realTotal = static_cast<double>(totalSteps - w);
      ratio = (1 + std::cos(kPi * realLast / realTotal)) / 2;
      ratio = std::max(0.0,
                       config.cosMinRatio + (1.0 - config.cosMinRatio) * ratio);
    }
    return config.lr * ratio;
  }
  // WarmupLR, WarmupDecayLR: min + (max - min) * gamma, min before start.
  const double minLr = config.warmupMinLr, delta = config.lr - minLr;
  if (iteration < 0)
    return minLr;
  double gamma = 1.0;
  if (iteration < w)
    gamma = warmupGamma();
  else if (config.schedule == LrScheduleKind::DeepSpeedWarmupDecay)
    gamma = std::max(
        0.0, static_cast<double>(totalSteps - iteration) /
                 std::max<double>(1.0, static_cast<double>(totalSteps - w)));
  return minLr + delta * gamma;
}

double scheduledLr(const OptimizerConfig &config, int64_t step,
                   int64_t totalSteps, int64_t skippedSteps) {
  if (config.schedule != LrScheduleKind::WarmupDecay)
    return deepSpeedLr(config, step - 1 - skippedSteps,
                       config.decaySteps ? config.decaySteps : totalSteps);
  const int64_t warmup = config.warmupSteps;
  if (warmup > 0 && step < warmup)
    return config.lr * static_cast<double>(step + 1) /
           static_cast<double>(warmup);
  if (config.decay == LrDecay::Constant)
    return config.lr;
  const int64_t horizon = config.decaySteps ? config.decaySteps : totalSteps;
  const int64_t w = std::max<int64_t>(warmup, 0);
  double progress = 1.0;
  if (horizon > w)
    progress = std::clamp(static_cast<double>(step - w) /
                              static_cast<double>(horizon - w),
                          0.0, 1.0);
  const double span = config.lr - config.minLr;
  if (config.decay == LrDecay::Cosine)
    return config.minLr + 0.5 * (1.0 + std::cos(kPi * progress)) * span;
  return config.minLr + (1.0 - progress) * span;
}

double gradNorm(const std::vector<ParamSlice> &slices) {
  return std::sqrt(gradSquaredSum(slices));
}

double gradSquaredSum(const std::vector<ParamSlice> &slices) {
  // Partial sums over fixed chunks of every slice, added in order afterwards;
  // one parallel loop over all of them.
  int64_t total = 0;
  const std::vector<Piece> chunks = cutSlices(slices, kNormChunk, total);
  const int64_t numChunks = static_cast<int64_t>(chunks.size());
  std::vector<double> partial(chunks.size(), 0.0);
  AUTOPAR_RT_PARALLEL_FOR(total)
  for (int64_t c = 0; c < numChunks; ++c) {
    const ParamSlice &s = slices[chunks[c].slice];
    double sum = 0.0;
    if (s.gradLow) {
      for (int64_t i = chunks[c].begin; i < chunks[c].end; ++i) {
        const double gi = float16Value(s.lowKind, s.gradLow[i]);
        sum += gi * gi;
      }
    } else {
      const float *g = s.grad;
      AUTOPAR_RT_SIMD_SUM(sum)
      for (int64_t i = chunks[c].begin; i < chunks[c].end; ++i)
        sum += static_cast<double>(g[i]) * g[i];
    }
    partial[c] = sum;
  }
  double sum = 0.0;
  for (double p : partial)
    sum += p;
  return sum;
}

double clipGradNorm(const OptimizerConfig &config,
                    const std::vector<ParamSlice> &slices) {
  const double norm = gradNorm(slices);
  clipToNorm(config, slices, norm);
  return norm;
}

bool clipCoefficient(const OptimizerConfig &config, double norm,
                     float &coef) {
  if (!(config.maxGradNorm > 0))
    return false;
  // torch: total_norm is a float tensor; clip_coef = max_norm / (total + 1e-6)
  // evaluates as (total + 1e-6).reciprocal() * max_norm in float, then
  // clamp(max=1.0) and grad.mul_(coef).
  const float denom = static_cast<float>(norm) + static_cast<float>(1e-6);
  coef = (1.0f / denom) * static_cast<float>(config.maxGradNorm);
  if (coef > 1.0f)
    coef = 1.0f;
  return true;
}

void scaleGrads(const std::vector<ParamSlice> &slices, float coef) {
  int64_t total = 0;
  const std::vector<Piece> pieces = cutSlices(slices, kUpdatePiece, total);
  const int64_t numPieces = static_cast<int64_t>(pieces.size());
  AUTOPAR_RT_PARALLEL_FOR(total)
  for (int64_t t = 0; t < numPieces; ++t) {
    float *g = slices[pieces[t].slice].grad;
    AUTOPAR_RT_SIMD
    for (int64_t i = pieces[t].begin; i < pieces[t].end; ++i)
      g[i] = g[i] * coef;
  }
}

void clipToNorm(const OptimizerConfig &config,
                const std::vector<ParamSlice> &slices, double norm) {
  float coef;
  if (clipCoefficient(config, norm, coef))
    scaleGrads(slices, coef);
}

AdamWScalars adamwScalars(const OptimizerConfig &config, int64_t stepCount,
                          double lr, bool decay) {
  const double t = static_cast<double>(stepCount);
  const double biasCorrection1 = 1.0 - std::pow(config.beta1, t);
  const double biasCorrection2 = 1.0 - std::pow(config.beta2, t);
  const double stepSize = lr / biasCorrection1;
  const double wd = decay ? config.weightDecay : 0.0;
  return {static_cast<float>(1.0 - lr * wd),
          wd != 0.0,
          static_cast<float>(config.beta1),
          static_cast<float>(1.0 - config.beta1),
          static_cast<float>(config.beta2),
          static_cast<float>(1.0 - config.beta2),
          static_cast<float>(std::sqrt(biasCorrection2)),
          static_cast<float>(config.eps),
          static_cast<float>(-stepSize)};
}

SgdScalars sgdScalars(const OptimizerConfig &config, int64_t stepCount,
                      double lr, bool decay, bool hasMomentumBuffer) {
  const double wd = decay ? config.weightDecay : 0.0;
  return {wd != 0.0,
          static_cast<float>(wd),
          config.momentum != 0.0 && hasMomentumBuffer,
          stepCount <= 1,
          static_cast<float>(config.momentum),
          static_cast<float>(1.0 - config.dampening),
          config.nesterov,
          static_cast<float>(-lr)};
}

namespace {

/// Updates elements [begin, end) of one slice.
void updatePiece(const OptimizerConfig &config, const ParamSlice &s,
                 const AdamWScalars &adamw, const SgdScalars &sgd,
                 int64_t begin, int64_t end, float gradScale) {
  float *p = s.param;
  const float *g = s.grad;
  const uint16_t *g16 = s.gradLow;
  uint16_t *p16 = s.paramLow;
  const Float16Kind kind = s.lowKind;
  auto grad = [&](int64_t i) {
    return (g16 ? float16Value(kind, g16[i]) : g[i]) * gradScale;
  };
  if (config.kind == OptimizerKind::AdamW) {
    float *m = s.state0, *v = s.state1;
    if (!g16 && !p16) {
      AUTOPAR_RT_SIMD
      for (int64_t i = begin; i < end; ++i)
        adamwElement(adamw, p[i], g[i] * gradScale, m[i], v[i]);
      return;
    }
    for (int64_t i = begin; i < end; ++i) {
      adamwElement(adamw, p[i], grad(i), m[i], v[i]);
      if (p16)
        p16[i] = float16Bits(kind, p[i]);
    }
    return;
  }
  float *buf = s.state0;
  if (!g16 && !p16) {
    AUTOPAR_RT_SIMD
    for (int64_t i = begin; i < end; ++i)
      sgdElement(sgd, p[i], g[i] * gradScale, buf ? buf + i : nullptr);
    return;
  }
  for (int64_t i = begin; i < end; ++i) {
    sgdElement(sgd, p[i], grad(i), buf ? buf + i : nullptr);
    if (p16)
      p16[i] = float16Bits(kind, p[i]);
  }
}

} // namespace

void optimizerStep(const OptimizerConfig &config,
                   const std::vector<ParamSlice> &slices, int64_t stepCount,
                   double lr, float gradScale) {
  // The scalars of every slice, then one parallel loop over pieces of all
  // slices (each element's update is independent of the others).
  std::vector<AdamWScalars> adamw(slices.size());
  std::vector<SgdScalars> sgd(slices.size());
  for (size_t k = 0; k < slices.size(); ++k) {
    if (config.kind == OptimizerKind::AdamW)
      adamw[k] = adamwScalars(config, stepCount, lr, slices[k].decay);
    else
      sgd[k] = sgdScalars(config, stepCount, lr, slices[k].decay,
                          slices[k].state0 != nullptr);
  }
  int64_t total = 0;
  const std::vector<Piece> pieces = cutSlices(slices, kUpdatePiece, total);
  const int64_t numPieces = static_cast<int64_t>(pieces.size());
  AUTOPAR_RT_PARALLEL_FOR(total)
  for (int64_t t = 0; t < numPieces; ++t) {
    const size_t k = pieces[t].slice;
    updatePiece(config, slices[k], adamw[k], sgd[k], pieces[t].begin,
                pieces[t].end, gradScale);
  }
}

} // namespace autopar::rt
