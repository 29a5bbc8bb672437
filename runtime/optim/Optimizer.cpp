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

#ifdef _OPENMP
#define AUTOPAR_RT_PRAGMA(x) _Pragma(#x)
/// Parallel element loop; small tensors stay on the calling thread.
#define AUTOPAR_RT_OMP_PARALLEL_FOR(n)                                         \
  AUTOPAR_RT_PRAGMA(omp parallel for schedule(static) if ((n) > 32768))
/// The same, vectorized (float32 tensors).
#define AUTOPAR_RT_OMP_PARALLEL_FOR_SIMD(n)                                    \
  AUTOPAR_RT_PRAGMA(omp parallel for simd schedule(static) if ((n) > 32768))
#else
#define AUTOPAR_RT_OMP_PARALLEL_FOR(n)
#define AUTOPAR_RT_OMP_PARALLEL_FOR_SIMD(n)
#endif

namespace autopar::rt {

namespace {

/// Elements per partial sum in gradNorm: fixed so the sum's rounding does
/// not depend on the thread count.
constexpr int64_t kNormChunk = 1 << 16;

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

double scheduledLr(const OptimizerConfig &config, int64_t step,
                   int64_t totalSteps) {
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
  // Partial sums over fixed chunks, added in order afterwards.
  std::vector<int64_t> firstChunk(slices.size() + 1, 0);
  for (size_t k = 0; k < slices.size(); ++k)
    firstChunk[k + 1] =
        firstChunk[k] + (slices[k].numElements + kNormChunk - 1) / kNormChunk;
  const int64_t numChunks = firstChunk.back();
  std::vector<double> partial(static_cast<size_t>(numChunks), 0.0);
  for (size_t k = 0; k < slices.size(); ++k) {
    const ParamSlice &s = slices[k];
    const int64_t chunks = firstChunk[k + 1] - firstChunk[k];
    double *out = partial.data() + firstChunk[k];
    AUTOPAR_RT_OMP_PARALLEL_FOR(s.numElements)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kNormChunk;
      const int64_t end = std::min(s.numElements, begin + kNormChunk);
      double sum = 0.0;
      if (s.gradLow) {
        for (int64_t i = begin; i < end; ++i) {
          const double gi = float16Value(s.lowKind, s.gradLow[i]);
          sum += gi * gi;
        }
      } else {
        const float *g = s.grad;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = begin; i < end; ++i)
          sum += static_cast<double>(g[i]) * g[i];
      }
      out[c] = sum;
    }
  }
  double total = 0.0;
  for (double p : partial)
    total += p;
  return total;
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
  for (const ParamSlice &s : slices) {
    const int64_t n = s.numElements;
    float *g = s.grad;
    AUTOPAR_RT_OMP_PARALLEL_FOR(n)
    for (int64_t i = 0; i < n; ++i)
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

void optimizerStep(const OptimizerConfig &config,
                   const std::vector<ParamSlice> &slices, int64_t stepCount,
                   double lr, float gradScale) {
  for (const ParamSlice &s : slices) {
    float *p = s.param;
    const float *g = s.grad;
    const uint16_t *g16 = s.gradLow;
    uint16_t *p16 = s.paramLow;
    const Float16Kind kind = s.lowKind;
    const int64_t n = s.numElements;
    auto grad = [&](int64_t i) {
      return (g16 ? float16Value(kind, g16[i]) : g[i]) * gradScale;
    };
    if (config.kind == OptimizerKind::AdamW) {
      const AdamWScalars a = adamwScalars(config, stepCount, lr, s.decay);
      float *m = s.state0, *v = s.state1;
      if (!g16 && !p16) {
        AUTOPAR_RT_OMP_PARALLEL_FOR_SIMD(n)
        for (int64_t i = 0; i < n; ++i)
          adamwElement(a, p[i], g[i] * gradScale, m[i], v[i]);
        continue;
      }
      AUTOPAR_RT_OMP_PARALLEL_FOR(n)
      for (int64_t i = 0; i < n; ++i) {
        adamwElement(a, p[i], grad(i), m[i], v[i]);
        if (p16)
          p16[i] = float16Bits(kind, p[i]);
      }
    } else {
      const SgdScalars a =
          sgdScalars(config, stepCount, lr, s.decay, s.state0 != nullptr);
      float *buf = s.state0;
      if (!g16 && !p16) {
        AUTOPAR_RT_OMP_PARALLEL_FOR_SIMD(n)
        for (int64_t i = 0; i < n; ++i)
          sgdElement(a, p[i], g[i] * gradScale, buf ? buf + i : nullptr);
        continue;
      }
      AUTOPAR_RT_OMP_PARALLEL_FOR(n)
      for (int64_t i = 0; i < n; ++i) {
        sgdElement(a, p[i], grad(i), buf ? buf + i : nullptr);
        if (p16)
          p16[i] = float16Bits(kind, p[i]);
      }
    }
  }
}

} // namespace autopar::rt
