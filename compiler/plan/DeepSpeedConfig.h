//===- DeepSpeedConfig.h - a DeepSpeed config as a plan layer ---*- C++ -*-===//
//
// `autopar compile --plan ds_config.json` (or --deepspeed FILE): the keys of
// DeepSpeed's JSON config with DeepSpeed's meanings, translated into a layer
// of autopar's own plan format (docs/deepspeed.md lists every key: mapped,
// accepted with no effect, or refused).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PLAN_DEEPSPEEDCONFIG_H
#define AUTOPAR_COMPILER_PLAN_DEEPSPEEDCONFIG_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace autopar {

/// Whether `config` reads as a DeepSpeed config rather than an autopar
/// plan: an object with a key only DeepSpeed's format has
/// (zero_optimization, train_batch_size, train_micro_batch_size_per_gpu,
/// gradient_accumulation_steps, gradient_clipping, fp16, bf16, scheduler,
/// or an optimizer of DeepSpeed's {"type", "params"} form).
bool isDeepSpeedConfig(const nlohmann::json &config);

/// What the translation knows of the plan so far: the layers before it
/// (merged), and the number of ranks (`autopar compile --world-size`; 0
/// when not given).
struct DeepSpeedContext {
  nlohmann::json planSoFar = nlohmann::json::object();
  int64_t worldSize = 0;
};

/// Translates the DeepSpeed config `config` into a plan layer `plan` (keys
/// of docs/plan.md). The keys that change nothing in autopar (DeepSpeed's
/// own tuning knobs) are appended to `noEffect` as dotted paths. False
/// with a one-line `error` "<dotted key>: <what is wrong>" on a key whose
/// meaning autopar cannot honour, an unknown key, a bad value, or an
/// inconsistent batch triple.
bool deepSpeedToPlan(const nlohmann::json &config, const DeepSpeedContext &ctx,
                     nlohmann::json &plan, std::vector<std::string> &noEffect,
                     std::string &error);

} // namespace autopar

#endif // AUTOPAR_COMPILER_PLAN_DEEPSPEEDCONFIG_H
