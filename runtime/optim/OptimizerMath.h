//===- OptimizerMath.h - per-element AdamW / SGD updates --------*- C++ -*-===//
//
// The element updates of torch 1.13's AdamW and SGD (see Optimizer.cpp for
// the op-by-op correspondence) and the scalars they take, shared by the CPU
// loops (Optimizer.cpp) and the CUDA kernels (runtime/cuda/Device.cu) so
// both targets run the same float operations: fmaf where torch fuses a
// multiply-add, IEEE sqrt and division (nvcc's defaults).
//
// Header only, inline by design: these are the innermost loop bodies.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_OPTIM_OPTIMIZERMATH_H
#define AUTOPAR_RUNTIME_OPTIM_OPTIMIZERMATH_H

#include "runtime/HostDevice.h"

#include <math.h>

namespace autopar::rt {

/// Scalars of one AdamW step for one tensor (Optimizer.cpp adamwScalars).
struct AdamWScalars {
  float decayFactor; // 1 - lr * wd
  bool applyDecay;
  float beta1, oneMinusBeta1, beta2, oneMinusBeta2;
  float biasCorrection2Sqrt, eps, negStepSize;
};

/// Scalars of one SGD step for one tensor (Optimizer.cpp sgdScalars).
struct SgdScalars {
  bool applyDecay;
  float weightDecay;
  bool useMomentum, firstStep;
  float momentum, oneMinusDampening;
  bool nesterov;
  float negLr;
};

/// a * b rounded to float, which nvcc never contracts with a following
/// addition into an FMA (it does for a plain product by default,
/// -fmad=true; torch's CPU kernels round the product first).
AUTOPAR_RT_HOST_DEVICE inline float mulNoContract(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

/// One element of torch.optim.AdamW: p, m (exp_avg), v (exp_avg_sq) updated
/// in place from the gradient g.
AUTOPAR_RT_HOST_DEVICE inline void adamwElement(const AdamWScalars &s, float &p,
                                                float g, float &m, float &v) {
  float pi = p;
  if (s.applyDecay)
    pi = mulNoContract(pi, s.decayFactor);
  float mi = m * s.beta1;
  mi = fmaf(g, s.oneMinusBeta1, mi);
  float vi = v * s.beta2;
  vi = fmaf(s.oneMinusBeta2 * g, g, vi);
  const float denom = sqrtf(vi) / s.biasCorrection2Sqrt + s.eps;
  const float upd = s.negStepSize * mi;
  p = pi + upd / denom;
  m = mi;
  v = vi;
}

/// One element of torch.optim.SGD: p and the momentum buffer `buf` (unused
/// without momentum) updated in place from the gradient g.
AUTOPAR_RT_HOST_DEVICE inline void sgdElement(const SgdScalars &s, float &p,
                                              float g, float *buf) {
  const float pi = p;
  float d = g;
  if (s.applyDecay)
    d = fmaf(pi, s.weightDecay, d);
  if (s.useMomentum) {
    float b = s.firstStep ? d : fmaf(d, s.oneMinusDampening, *buf * s.momentum);
    *buf = b;
    d = s.nesterov ? fmaf(b, s.momentum, d) : b;
  }
  p = fmaf(d, s.negLr, pi);
}

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_OPTIM_OPTIMIZERMATH_H
