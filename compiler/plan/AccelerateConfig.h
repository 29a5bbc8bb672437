//===- AccelerateConfig.h - an accelerate config as a plan layer -*- C++
//-*-===//
//
// Hugging Face accelerate's config (`accelerate config` writes it as
// default_config.yaml) with accelerate's meanings, translated into a layer
// of autopar's plan format as DeepSpeedConfig.h translates a DeepSpeed one.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PLAN_ACCELERATECONFIG_H
#define AUTOPAR_COMPILER_PLAN_ACCELERATECONFIG_H

#include "compiler/plan/DeepSpeedConfig.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace autopar {

/// Whether `path` names an accelerate config: a .yaml or .yml file.
bool isAccelerateConfigPath(const std::string &path);

/// Parses the YAML text of file `path` into JSON, plain scalars resolved as
/// PyYAML's safe_load (YAML 1.1, what accelerate reads with) resolves
/// them: null, booleans (true/false, yes/no, on/off), integers, floats,
/// else strings; quoted scalars stay strings. False with
/// "PATH:LINE:COL: invalid YAML: ..." or "PATH: ..." in `error`.
bool parseYaml(const std::string &text, const std::string &path,
               nlohmann::json &value, std::string &error);

/// Reads a DeepSpeed config file named by `deepspeed_config_file` (the plan
/// reader's JSON reader).
using JsonFileReader = std::function<bool(
    const std::string &path, nlohmann::json &value, std::string &error)>;

/// Translates the accelerate config `config` into a plan layer `plan`:
/// distributed_type (NO, MULTI_GPU, MULTI_CPU, DEEPSPEED, FSDP),
/// num_processes (the world: mesh.dp over the plan's tp x pp),
/// num_machines, mixed_precision, gradient_accumulation_steps,
/// deepspeed_config (inline keys, or deepspeed_config_file through
/// deepSpeedToPlan) and fsdp_config. `ctx` as for deepSpeedToPlan; a
/// --world-size that differs from num_processes is an error. Keys with no
/// effect here are appended to `noEffect`; false with a one-line `error`
/// "<dotted key>: <what is wrong>" otherwise.
bool accelerateToPlan(const nlohmann::json &config, const DeepSpeedContext &ctx,
                      const JsonFileReader &readJson, nlohmann::json &plan,
                      std::vector<std::string> &noEffect, std::string &error);

} // namespace autopar

#endif // AUTOPAR_COMPILER_PLAN_ACCELERATECONFIG_H
