//===- Optimizer.h - AdamW, SGD, clipping, lr schedule ----------*- C++ -*-===//
//
// PyTorch 1.13 semantics (torch.optim.AdamW / SGD single-tensor code paths,
// torch.nn.utils.clip_grad_norm_). Per-element arithmetic is float32 in
// torch's order of operations; scalars are computed in double as Python does
// and rounded to float where torch's kernels take them; where torch's CPU
// kernels fuse a multiply-add (add_ with alpha, addcmul_) we call std::fma.
// The updates are bit-identical to torch's on CPU for the same gradients.
// Norms accumulate in double (torch: float), so a clipped step can differ
// from torch's in the last bit of the clip coefficient.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_OPTIM_OPTIMIZER_H
#define AUTOPAR_RUNTIME_OPTIM_OPTIMIZER_H

#include "runtime/Float16.h"
#include "runtime/optim/OptimizerMath.h"

#include <cstdint>
#include <vector>

namespace autopar::rt {

enum class OptimizerKind { AdamW, Sgd };
enum class LrDecay { Constant, Cosine, Linear };
/// autopar's warmup-then-decay schedule, or one of DeepSpeed's
/// (deepspeed/runtime/lr_schedules.py, 0.16: WarmupLR, WarmupDecayLR,
/// WarmupCosineLR) stepped as DeepSpeed's engine steps it.
enum class LrScheduleKind {
  WarmupDecay,
  DeepSpeedWarmup,
  DeepSpeedWarmupDecay,
  DeepSpeedWarmupCosine
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::AdamW;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.01,
         momentum = 0, dampening = 0;
  bool nesterov = false;
  /// Clip the global gradient 2-norm to this; 0 = no clipping.
  double maxGradNorm = 0;
  int64_t warmupSteps = 0;
  LrDecay decay = LrDecay::Constant;
  double minLr = 0;
  /// Steps over which lr decays (counted from step 0); 0 = the whole run.
  /// DeepSpeed's schedules: their total_num_steps.
  int64_t decaySteps = 0;
  LrScheduleKind schedule = LrScheduleKind::WarmupDecay;
  /// DeepSpeed's schedules: warmup_type "log" (else "linear"),
  /// WarmupLR/WarmupDecayLR's warmup_min_lr (warmup_max_lr is `lr`),
  /// WarmupCosineLR's warmup_min_ratio and cos_min_ratio (of `lr`).
  bool logWarmup = true;
  double warmupMinLr = 0, warmupMinRatio = 0, cosMinRatio = 1e-4;
};

/// One parameter tensor (or this rank's shard of it) with its gradient and
/// optimizer state. state0 = exp_avg (AdamW) or momentum_buffer (SGD with
/// momentum > 0); state1 = exp_avg_sq (AdamW); unused ones may be null.
struct ParamSlice {
  /// The float32 values the optimizer updates: the parameter itself, or
  /// under mixed precision its master copy.
  float *param;
  /// The float32 gradient; null under mixed precision (gradLow).
  float *grad;
  float *state0;
  float *state1;
  int64_t numElements;
  /// Whether weight decay applies (false for no_decay parameters).
  bool decay;
  /// Mixed precision (runtime/Float16.h): the 16-bit gradient (format
  /// lowKind), read in place of `grad`, and the 16-bit parameter the step
  /// functions use, rewritten from `param` (rounded) after each update.
  /// Null otherwise.
  uint16_t *gradLow = nullptr;
  uint16_t *paramLow = nullptr;
  Float16Kind lowKind = Float16Kind::BF16;
};

/// fp16-mixed's dynamic loss scaling, as torch.cuda.amp.GradScaler: the
/// loss (so every gradient) is multiplied by the scale; a step whose
/// gradients hold an inf or NaN is skipped and the scale multiplied by
/// backoffFactor (not below minScale); after growthInterval steps in a row
/// without one, by growthFactor. With hysteresis h > 1, as DeepSpeed's
/// DynamicLossScaler: the scale is lowered only at the h-th overflow since
/// it last grew (the others only skip their step).
struct LossScaleConfig {
  double initScale = 65536;
  double growthFactor = 2;
  double backoffFactor = 0.5;
  int64_t growthInterval = 2000;
  int64_t hysteresis = 1;
  double minScale = 0;
};

/// The scaler between steps: the scale, the steps without an overflow
/// since the last change or overflow, and the overflows still tolerated
/// before the scale is lowered.
struct LossScaleState {
  double scale = 0;
  int64_t goodSteps = 0;
  int64_t hysteresisLeft = 1;
};

/// The scaler at its start.
LossScaleState initialLossScale(const LossScaleConfig &config);

/// The scaler after a step whose gradients did (`overflow`) or did not
/// hold an inf or NaN.
void updateLossScale(const LossScaleConfig &config, LossScaleState &state,
                     bool overflow);

/// State buffers per parameter: AdamW 2; SGD 1 if momentum > 0 else 0.
int numStateBuffers(const OptimizerConfig &config);

/// Learning rate of 0-based `step` in a run of `totalSteps`, after
/// `skippedSteps` updates skipped on an fp16 overflow.
/// WarmupDecay: linear warmup lr*(s+1)/warmup, then constant, cosine or
/// linear decay to minLr over decaySteps (or totalSteps when decaySteps is
/// 0). DeepSpeed's: the scheduler's value at batch iteration
/// step - 1 - skippedSteps (its engine steps the scheduler after each
/// applied update, so step 0 runs at iteration -1).
double scheduledLr(const OptimizerConfig &config, int64_t step,
                   int64_t totalSteps, int64_t skippedSteps = 0);

/// DeepSpeed's scheduler value at batch iteration `iteration` (>= -1)
/// with total_num_steps `totalSteps`, in DeepSpeed's order of operations.
double deepSpeedLr(const OptimizerConfig &config, int64_t iteration,
                   int64_t totalSteps);

/// Sum of the squares of all gradients, accumulated in double in a fixed
/// order (the result does not depend on the number of threads). Ranks that
/// hold shards of the gradients add their sums to get the global one.
double gradSquaredSum(const std::vector<ParamSlice> &slices);

/// 2-norm over all gradients: sqrt(gradSquaredSum(slices)).
double gradNorm(const std::vector<ParamSlice> &slices);

/// clip_grad_norm_'s coefficient for a known global `norm`: false when
/// maxGradNorm is 0 (no clipping), else min(maxGradNorm / (norm + 1e-6), 1)
/// computed in float as torch does.
bool clipCoefficient(const OptimizerConfig &config, double norm, float &coef);

/// Multiplies every (float32) gradient by `coef`. The training programs
/// clip through optimizerStep's gradScale instead, the same float product.
void scaleGrads(const std::vector<ParamSlice> &slices, float coef);

/// The clipping of clip_grad_norm_ for a known global `norm`: when
/// maxGradNorm > 0 multiplies every gradient by
/// min(maxGradNorm / (norm + 1e-6), 1).
void clipToNorm(const OptimizerConfig &config,
                const std::vector<ParamSlice> &slices, double norm);

/// torch.nn.utils.clip_grad_norm_: returns the norm before clipping; when
/// maxGradNorm > 0 multiplies every gradient by
/// min(maxGradNorm / (norm + 1e-6), 1).
double clipGradNorm(const OptimizerConfig &config,
                    const std::vector<ParamSlice> &slices);

/// The scalars of one step (`stepCount` 1-based, learning rate `lr`) for a
/// tensor with or without weight decay (runtime/optim/OptimizerMath.h).
AdamWScalars adamwScalars(const OptimizerConfig &config, int64_t stepCount,
                          double lr, bool decay);
SgdScalars sgdScalars(const OptimizerConfig &config, int64_t stepCount,
                      double lr, bool decay, bool hasMomentumBuffer);

/// One optimizer step. `stepCount` is t, 1-based (steps including this one).
/// Each gradient is multiplied by `gradScale` (in float) first: a loss
/// scale's inverse, times the clipping coefficient under mixed precision.
void optimizerStep(const OptimizerConfig &config,
                   const std::vector<ParamSlice> &slices, int64_t stepCount,
                   double lr, float gradScale = 1.0f);

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_OPTIM_OPTIMIZER_H
