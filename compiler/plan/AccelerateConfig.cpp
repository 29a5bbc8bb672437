//===- AccelerateConfig.cpp - an accelerate config as a plan layer --------===//
//
// accelerate's meanings (accelerate/commands/config/config_args.py, the
// DeepSpeedPlugin and FullyShardedDataParallelPlugin of utils/dataclasses.py,
// as of accelerate 0.34): num_processes is the whole world over every
// machine; DEEPSPEED's inline keys are the DeepSpeed config the plugin
// builds, or deepspeed_config_file names one (then the inline keys it
// replaces are an error, as the plugin raises); FSDP's sharding strategies
// are ZeRO's stages (FULL_SHARD 3, SHARD_GRAD_OP 2, NO_SHARD 0), its
// activation checkpointing wraps each transformer layer (recompute "full").
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/AccelerateConfig.h"
#include "compiler/plan/ConfigSection.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <set>

using nlohmann::json;
using namespace autopar::config;

namespace autopar {

namespace {

//===----------------------------------------------------------------------===//
// YAML
//===----------------------------------------------------------------------===//

/// PyYAML's decimal int: [-+]?(0|[1-9][0-9_]*).
bool isYamlInt(const std::string &s) {
  size_t i = s.size() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size())
    return false;
  if (s[i] == '0')
    return i + 1 == s.size();
  if (s[i] < '1' || s[i] > '9')
    return false;
  for (++i; i < s.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i])) && s[i] != '_')
      return false;
  return true;
}

/// PyYAML's float without inf / nan / sexagesimal forms:
/// [-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+][0-9]+)?, with a digit somewhere.
bool isYamlFloat(const std::string &s) {
  size_t i = s.size() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
  bool digits = false;
  auto run = [&](bool underscores) {
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) ||
                            (underscores && s[i] == '_'))) {
      digits |= s[i] != '_';
      ++i;
    }
  };
  if (i < s.size() && s[i] == '_')
    return false;
  run(true);
  if (i == s.size() || s[i] != '.')
    return false;
  ++i;
  run(true);
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i == s.size() || (s[i] != '-' && s[i] != '+'))
      return false;
    ++i;
    const size_t start = i;
    run(false);
    if (i == start)
      return false;
  }
  return digits && i == s.size();
}

/// A plain scalar as PyYAML's implicit resolvers read it (the decimal
/// forms; octal, hex and sexagesimal stay strings).
json plainScalar(const std::string &s) {
  static const std::set<std::string> kTrue = {
      "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
  static const std::set<std::string> kFalse = {
      "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
  static const std::set<std::string> kNull = {"", "~", "null", "Null", "NULL"};
  if (kNull.count(s))
    return nullptr;
  if (kTrue.count(s))
    return true;
  if (kFalse.count(s))
    return false;
  std::string digits;
  for (char c : s)
    if (c != '_')
      digits += c;
  errno = 0;
  char *end = nullptr;
  if (isYamlInt(s)) {
    long long v = std::strtoll(digits.c_str(), &end, 10);
    if (errno == 0 && *end == '\0')
      return static_cast<int64_t>(v);
  } else if (isYamlFloat(s)) {
    double v = std::strtod(digits.c_str(), &end);
    if (errno == 0 && *end == '\0')
      return v;
  }
  return s;
}

constexpr int kMaxDepth = 64;
/// Aliases can make a few lines stand for billions of values (the "billion
/// laughs"); a config has a few hundred.
constexpr int64_t kMaxValues = 1000000;

bool yamlToJson(const YAML::Node &node, int depth, const std::string &at,
                int64_t &budget, json &out, std::string &error) {
  if (--budget < 0) {
    error = "more than " + std::to_string(kMaxValues) +
            " values (aliases expanded)";
    return false;
  }
  if (depth > kMaxDepth) {
    error = (at.size() > 32 ? at.substr(0, 32) + "..." : at) +
            ": nested deeper than " + std::to_string(kMaxDepth) + " levels";
    return false;
  }
  switch (node.Type()) {
  case YAML::NodeType::Null:
  case YAML::NodeType::Undefined:
    out = nullptr;
    return true;
  case YAML::NodeType::Scalar:
    // "!" is a quoted scalar's tag, "?" a plain one's.
    out = node.Tag() == "?" ? plainScalar(node.Scalar()) : json(node.Scalar());
    return true;
  case YAML::NodeType::Sequence: {
    out = json::array();
    size_t k = 0;
    for (const YAML::Node &item : node) {
      json v;
      if (!yamlToJson(item, depth + 1, at + "[" + std::to_string(k++) + "]",
                      budget, v, error))
        return false;
      out.push_back(std::move(v));
    }
    return true;
  }
  case YAML::NodeType::Map: {
    out = json::object();
    for (const auto &item : node) {
      if (!item.first.IsScalar()) {
        error = (at.empty() ? "" : at + ": ") + "a key that is not a scalar";
        return false;
      }
      const std::string key = item.first.Scalar();
      const std::string path = at.empty() ? key : at + "." + key;
      if (out.contains(key)) {
        error = path + ": duplicate key";
        return false;
      }
      json v;
      if (!yamlToJson(item.second, depth + 1, path, budget, v, error))
        return false;
      out[key] = std::move(v);
    }
    return true;
  }
  }
  out = nullptr;
  return true;
}

//===----------------------------------------------------------------------===//
// The config
//===----------------------------------------------------------------------===//

const char *const kKind = "an accelerate config";

/// An integer >= min at `key`, or unset when absent or null.
bool readIntKey(Section &s, const char *key, int64_t min,
                std::optional<int64_t> &out) {
  const json *v = s.get(key);
  if (!v || v->is_null())
    return true;
  if (!v->is_number_integer() || v->get<int64_t>() < min)
    return s.fail(key, "expected an integer >= " + std::to_string(min) +
                           ", got " + v->dump());
  out = v->get<int64_t>();
  return true;
}

/// A boolean at `key` (PyYAML's true/false/yes/no), or unset.
bool readBoolKey(Section &s, const char *key, std::optional<bool> &out) {
  const json *v = s.get(key);
  if (!v || v->is_null())
    return true;
  if (v->is_string() && (*v == "true" || *v == "false")) {
    out = *v == "true";
    return true;
  }
  if (!v->is_boolean())
    return s.fail(key, "expected true or false, got " + v->dump());
  out = v->get<bool>();
  return true;
}

/// One of `allowed` at `key` (a string), or unset.
bool readEnumKey(Section &s, const char *key,
                 std::initializer_list<const char *> allowed,
                 std::optional<std::string> &out) {
  const json *v = s.get(key);
  if (!v || v->is_null())
    return true;
  std::string list;
  for (const char *a : allowed) {
    if (v->is_string() && *v == a) {
      out = a;
      return true;
    }
    list += std::string(list.empty() ? "" : ", ") + a;
  }
  return s.fail(key, "expected one of " + list + ", got " + v->dump());
}

/// The offload device of DEEPSPEED's inline keys: "none", "cpu" and
/// "nvme" (under offload_optimizer_nvme_path) for the optimizer state;
/// "none" and "nvme" for the parameters (beside that state: read after
/// the optimizer's).
bool readOffload(Section &s, const char *key, bool params, json &plan) {
  std::optional<std::string> device;
  if (!readEnumKey(s, key, {"none", "cpu", "nvme"}, device))
    return false;
  if (!device || *device == "none")
    return true;
  if (params) {
    if (*device == "cpu")
      return s.fail(key, "\"cpu\": autopar does not keep parameters in "
                         "host memory for the device; \"nvme\" (with "
                         "offload_optimizer_device nvme) puts ZeRO-3's "
                         "parameter shards in the swap file");
    if (!plan.contains("zero") || plan["zero"].value("offload", "") != "nvme")
      return s.fail(key, "\"nvme\" needs offload_optimizer_device nvme: "
                         "autopar keeps the parameter shards in the "
                         "optimizer state's swap file");
    const json *path = s.get("offload_param_nvme_path");
    if (path && !path->is_null() && *path != "none" &&
        *path != plan["zero"]["nvme_path"])
      return s.fail("offload_param_nvme_path",
                    path->dump() + " is not offload_optimizer_nvme_path " +
                        plan["zero"]["nvme_path"].dump() +
                        ": autopar keeps both in one swap file");
    plan["zero"]["offload_params"] = "nvme";
    return true;
  }
  plan["zero"]["offload"] = *device;
  if (*device == "nvme") {
    const json *path = s.get("offload_optimizer_nvme_path");
    if (!path || !path->is_string() || path->get<std::string>().empty() ||
        *path == "none")
      return s.fail("offload_optimizer_nvme_path",
                    "offload_optimizer_device nvme needs the folder of the "
                    "swap files");
    plan["zero"]["nvme_path"] = *path;
  }
  return true;
}

bool translateDeepSpeed(Section &top, const DeepSpeedContext &ctx,
                        const JsonFileReader &readJson, json &plan,
                        std::vector<std::string> &noEffect,
                        std::string &error) {
  const json *section;
  if (!objectAt(top, "deepspeed_config", section))
    return false;
  static const json empty = json::object();
  Section s(section ? *section : empty, "deepspeed_config", error, kKind);
  s.noEffect({"zero3_init_flag", "deepspeed_multinode_launcher",
              "deepspeed_hostfile", "deepspeed_exclusion_filter",
              "deepspeed_inclusion_filter"},
             noEffect);
  if (const json *moe = s.get("deepspeed_moe_layer_cls_names"))
    if (!moe->is_null())
      return s.fail("deepspeed_moe_layer_cls_names",
                    "expert parallelism is not supported yet");
  const json *file = s.get("deepspeed_config_file");
  if (file && !file->is_null()) {
    if (!file->is_string() || file->get<std::string>().empty())
      return s.fail("deepspeed_config_file",
                    "expected a file name, got " + file->dump());
    // The keys the plugin takes from the file instead (it raises when the
    // accelerate config gives them too).
    for (const char *key :
         {"gradient_accumulation_steps", "gradient_clipping", "zero_stage",
          "offload_optimizer_device", "offload_param_device",
          "offload_param_nvme_path", "offload_optimizer_nvme_path",
          "zero3_save_16bit_model"})
      if (s.get(key))
        return s.fail(key, "is given by deepspeed_config_file; set it in " +
                               file->get<std::string>() +
                               " (accelerate refuses both)");
    if (!s.finish())
      return false;
    const std::string path = file->get<std::string>();
    json ds;
    std::string why;
    if (!readJson(path, ds, why))
      return s.fail("deepspeed_config_file", why);
    DeepSpeedContext inner = ctx;
    inner.planSoFar.merge_patch(plan);
    json translated;
    std::vector<std::string> keys;
    if (!deepSpeedToPlan(ds, inner, translated, keys, why))
      return s.fail("deepspeed_config_file", path + ": " + why);
    for (const std::string &key : keys)
      noEffect.push_back(path + ": " + key);
    // accelerate's mixed_precision fills the file's "auto" and may not
    // contradict what it enables.
    const json *mine = planValue(plan, "precision");
    const json *theirs = planValue(translated, "precision");
    if (mine && theirs && *mine != "fp32" && *theirs != *mine)
      return top.fail("mixed_precision", "gives " + mine->dump() + " but " +
                                             path + " gives " + theirs->dump());
    plan.merge_patch(translated);
    return true;
  }
  std::optional<int64_t> stage, accum;
  if (!readIntKey(s, "zero_stage", 0, stage) ||
      !readIntKey(s, "gradient_accumulation_steps", 1, accum))
    return false;
  if (stage && *stage > 3)
    return s.fail("zero_stage",
                  "expected 0, 1, 2 or 3, got " + std::to_string(*stage));
  // The plugin's DeepSpeed config: ZeRO stage 2 unless told.
  plan["zero"]["stage"] = stage.value_or(2);
  if (accum)
    plan["batch"]["micro_batches"] = *accum;
  if (const json *clip = s.get("gradient_clipping"); clip && !clip->is_null()) {
    if (!clip->is_number() || clip->get<double>() < 0)
      return s.fail("gradient_clipping",
                    "expected a number >= 0, got " + clip->dump());
    plan["optimizer"]["max_grad_norm"] = clip->get<double>();
  }
  if (!readOffload(s, "offload_optimizer_device", false, plan) ||
      !readOffload(s, "offload_param_device", true, plan))
    return false;
  if (!plan.contains("zero") || !plan["zero"].contains("nvme_path"))
    s.noEffect({"offload_optimizer_nvme_path"}, noEffect);
  if (!plan.contains("zero") || !plan["zero"].contains("offload_params"))
    s.noEffect({"offload_param_nvme_path"}, noEffect);
  s.noEffect({"zero3_save_16bit_model"}, noEffect);
  return s.finish();
}

/// `world` and `machines`: the processes and machines (0: not given), for
/// hybrid sharding's groups (one machine's processes).
bool translateFsdp(Section &top, const std::string &distributed, int64_t world,
                   int64_t machines, json &plan,
                   std::vector<std::string> &noEffect, std::string &error) {
  const json *section;
  if (!objectAt(top, "fsdp_config", section))
    return false;
  static const json empty = json::object();
  Section s(section ? *section : empty, "fsdp_config", error, kKind);
  if (distributed != "FSDP") {
    // Written by `accelerate config` for every type; read for FSDP only.
    if (section && !section->empty())
      noEffect.push_back("fsdp_config");
    for (const auto &item : (section ? *section : empty).items())
      s.get(item.key());
    return true;
  }
  std::optional<int64_t> version;
  if (!readIntKey(s, "fsdp_version", 1, version))
    return false;
  if (version && *version > 2)
    return s.fail("fsdp_version",
                  "expected 1 or 2, got " + std::to_string(*version));
  int64_t stage = 3; // FULL_SHARD, FSDP's default
  if (version.value_or(1) == 2) {
    if (s.get("fsdp_sharding_strategy"))
      return s.fail("fsdp_sharding_strategy",
                    "is FSDP 1's; fsdp_version 2 takes "
                    "fsdp_reshard_after_forward");
    std::optional<bool> reshard;
    if (!readBoolKey(s, "fsdp_reshard_after_forward", reshard))
      return false;
    stage = reshard.value_or(true) ? 3 : 2;
  } else if (const json *v = s.get("fsdp_sharding_strategy");
             v && !v->is_null()) {
    // The names of torch's ShardingStrategy, or their numbers (1-based).
    static const char *const kNames[] = {"FULL_SHARD", "SHARD_GRAD_OP",
                                         "NO_SHARD", "HYBRID_SHARD",
                                         "HYBRID_SHARD_ZERO2"};
    int64_t index = 0;
    if (v->is_number_integer() && *v >= 1 && *v <= 5)
      index = v->get<int64_t>();
    for (int64_t k = 0; k < 5 && v->is_string(); ++k)
      if (*v == kNames[k] || *v == std::string("_") + kNames[k])
        index = k + 1;
    if (index == 0)
      return s.fail("fsdp_sharding_strategy",
                    "expected FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, "
                    "HYBRID_SHARD, HYBRID_SHARD_ZERO2 or 1-5, got " +
                        v->dump());
    // HYBRID_SHARD(_ZERO2): FULL_SHARD (SHARD_GRAD_OP) within each
    // machine, replicated across them.
    if (index >= 4) {
      if (world <= 0)
        return s.fail("fsdp_sharding_strategy",
                      std::string(kNames[index - 1]) +
                          " shards within each machine: it needs "
                          "num_processes (or --world-size)");
      plan["zero"]["shard_size"] = world / machines;
    }
    stage = index == 1 || index == 4 ? 3 : index == 3 ? 0 : 2;
  }
  plan["zero"]["stage"] = stage;
  std::optional<bool> offload, checkpointing;
  if (!readBoolKey(s, "fsdp_offload_params", offload) ||
      !readBoolKey(s, "fsdp_activation_checkpointing", checkpointing))
    return false;
  if (offload && *offload)
    return s.fail("fsdp_offload_params",
                  "true offloads the parameters, which autopar does not; "
                  "zero.offload \"cpu\" in a plan offloads the optimizer "
                  "state");
  // Each wrapped (transformer) layer recomputed whole in the backward.
  if (checkpointing && *checkpointing)
    plan["recompute"] = "full";
  std::optional<std::string> ignored;
  if (!readEnumKey(
          s, "fsdp_state_dict_type",
          {"FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT"},
          ignored) ||
      !readEnumKey(s, "fsdp_auto_wrap_policy",
                   {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"},
                   ignored))
    return false;
  for (const char *key :
       {"fsdp_backward_prefetch", "fsdp_backward_prefetch_policy"})
    if (!readEnumKey(s, key, {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"},
                     ignored))
      return false;
  // Checkpoint formats, wrapping granularity, prefetch order, loading:
  // autopar's checkpoints are its own; the rest changes when bytes move,
  // not what is computed.
  s.noEffect({"fsdp_state_dict_type", "fsdp_auto_wrap_policy",
              "fsdp_transformer_layer_cls_to_wrap", "fsdp_min_num_params",
              "fsdp_backward_prefetch", "fsdp_backward_prefetch_policy",
              "fsdp_forward_prefetch", "fsdp_sync_module_states",
              "fsdp_cpu_ram_efficient_loading", "fsdp_use_orig_params",
              "fsdp_reshard_after_forward", "fsdp_version"},
             noEffect);
  return s.finish();
}

} // namespace

bool isAccelerateConfigPath(const std::string &path) {
  for (const char *ext : {".yaml", ".yml"}) {
    const size_t n = std::char_traits<char>::length(ext);
    if (path.size() > n && path.compare(path.size() - n, n, ext) == 0)
      return true;
  }
  return false;
}

bool parseYaml(const std::string &text, const std::string &path, json &value,
               std::string &error) {
  try {
    YAML::Node root = YAML::Load(text);
    std::string why;
    int64_t budget = kMaxValues;
    if (!yamlToJson(root, 0, "", budget, value, why)) {
      error = path + ": " + why;
      return false;
    }
    return true;
  } catch (const YAML::Exception &e) {
    error = path + ":" + std::to_string(e.mark.line + 1) + ":" +
            std::to_string(e.mark.column + 1) + ": invalid YAML: " + e.msg;
    return false;
  } catch (const std::exception &e) {
    error = path + ": invalid YAML: " + e.what();
    return false;
  }
}

bool accelerateToPlan(const json &config, const DeepSpeedContext &ctx,
                      const JsonFileReader &readJson, json &plan,
                      std::vector<std::string> &noEffect, std::string &error) {
  try {
    if (!config.is_object()) {
      error = "an accelerate config is a YAML mapping";
      return false;
    }
    plan = json::object();
    Section top(config, "", error, kKind);
    std::string type = "NO";
    if (const json *v = top.get("distributed_type"); v && !v->is_null()) {
      static const std::set<std::string> kTypes = {
          "NO", "MULTI_GPU", "MULTI_CPU", "DEEPSPEED", "FSDP"};
      if (!v->is_string() || !kTypes.count(v->get<std::string>()))
        return top.fail("distributed_type",
                        v->dump() + " is not supported (NO, MULTI_GPU, "
                                    "MULTI_CPU, DEEPSPEED and FSDP are)");
      type = v->get<std::string>();
    }
    // The world: num_processes over every machine.
    std::optional<int64_t> processes, machines;
    if (!readIntKey(top, "num_processes", -1, processes) ||
        !readIntKey(top, "num_machines", 1, machines))
      return false;
    if (processes && *processes == 0)
      return top.fail("num_processes", "expected an integer >= 1, got 0");
    int64_t world = processes && *processes > 0 ? *processes : 0;
    if (type == "NO") {
      if (world > 1)
        return top.fail("num_processes",
                        std::to_string(world) +
                            " processes with distributed_type NO");
      world = 1;
    }
    if (ctx.worldSize > 0 && world > 0 && ctx.worldSize != world)
      return top.fail("num_processes", std::to_string(world) +
                                           ", but --world-size is " +
                                           std::to_string(ctx.worldSize));
    if (world == 0)
      world = ctx.worldSize;
    if (machines && world > 0 && world % *machines != 0)
      return top.fail("num_machines", std::to_string(*machines) +
                                          " machines do not divide " +
                                          std::to_string(world) + " processes");
    if (world > 0) {
      int64_t dp = 0;
      if (!dataParallelRanks(top, "num_processes", std::to_string(world), world,
                             ctx.planSoFar, dp))
        return false;
      plan["mesh"]["dp"] = dp;
    }
    // "no" is YAML 1.1's false unless quoted.
    const json *mp = top.get("mixed_precision");
    if (mp && !mp->is_null()) {
      if (*mp == false || *mp == "no")
        plan["precision"] = "fp32";
      else if (*mp == "fp16")
        plan["precision"] = "fp16-mixed";
      else if (*mp == "bf16")
        plan["precision"] = "bf16-mixed";
      else if (*mp == "fp8")
        return top.fail("mixed_precision", "\"fp8\" is not supported (no, "
                                           "fp16 and bf16 are)");
      else
        return top.fail("mixed_precision",
                        "expected no, fp16, bf16 or fp8, got " + mp->dump());
    }
    std::optional<int64_t> accum;
    if (!readIntKey(top, "gradient_accumulation_steps", 1, accum))
      return false;
    if (accum)
      plan["batch"]["micro_batches"] = *accum;
    if (type == "DEEPSPEED") {
      DeepSpeedContext inner = ctx;
      inner.worldSize = world;
      if (!translateDeepSpeed(top, inner, readJson, plan, noEffect, error))
        return false;
    } else if (const json *ds = top.get("deepspeed_config");
               ds && !ds->is_null() && !ds->empty()) {
      noEffect.push_back("deepspeed_config");
    }
    if (!translateFsdp(top, type, world, machines.value_or(1), plan, noEffect,
                       error))
      return false;
    if (const json *m = top.get("megatron_lm_config");
        m && !m->is_null() && !m->empty())
      return top.fail("megatron_lm_config",
                      "is not read; give mesh.tp and mesh.pp in a plan");
    std::optional<bool> useCpu;
    if (!readBoolKey(top, "use_cpu", useCpu))
      return false;
    // Where and how the processes start, and the other back ends'
    // sections: the launcher's business, or another accelerator's.
    top.noEffect({"compute_environment",
                  "debug",
                  "machine_rank",
                  "main_process_ip",
                  "main_process_port",
                  "rdzv_backend",
                  "same_network",
                  "main_training_function",
                  "enable_cpu_affinity",
                  "gpu_ids",
                  "use_cpu",
                  "downcast_bf16",
                  "dynamo_config",
                  "ipex_config",
                  "mpirun_config",
                  "fp8_config",
                  "tpu_name",
                  "tpu_zone",
                  "tpu_use_cluster",
                  "tpu_use_sudo",
                  "tpu_vm",
                  "tpu_env",
                  "command_file",
                  "commands"},
                 noEffect);
    return top.finish();
  } catch (const std::exception &e) {
    error = std::string("internal error while reading the accelerate "
                        "config: ") +
            e.what();
    return false;
  }
}

} // namespace autopar
