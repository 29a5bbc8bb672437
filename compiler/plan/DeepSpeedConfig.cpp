//===- DeepSpeedConfig.cpp - a DeepSpeed config as a plan layer -----------===//
//
// DeepSpeed's meanings (deepspeed/runtime/config.py, zero/config.py,
// fp16/loss_scaler.py, ops/adam): the batch triple
// train_batch_size = micro x accumulation x data-parallel ranks, any two
// giving the third as DeepSpeedConfig._set_batch_related_parameters does;
// "auto" (Hugging Face's Trainer integration) leaves a key to the rest of
// the plan, or to the Trainer's own default where the plan has none.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/DeepSpeedConfig.h"
#include "compiler/plan/ConfigSection.h"

#include <cmath>
#include <exception>
#include <map>
#include <optional>
#include <set>

using nlohmann::json;
using namespace autopar::config;

namespace autopar {

namespace {

bool translateBatch(Section &s, const DeepSpeedContext &ctx, json &plan) {
  std::optional<int64_t> train, micro, accum;
  if (!s.readInt("train_batch_size", 1, train) ||
      !s.readInt("train_micro_batch_size_per_gpu", 1, micro) ||
      !s.readInt("gradient_accumulation_steps", 1, accum))
    return false;
  if (!train && !micro && !accum)
    return true;
  // DeepSpeed's data-parallel ranks: the world over tensor and pipeline
  // parallelism (the plan's), from --world-size, else from the triple,
  // else the plan's mesh.dp.
  std::optional<int64_t> dp;
  if (ctx.worldSize > 0) {
    int64_t ranks = 0;
    if (!dataParallelRanks(s, "train_batch_size",
                           "--world-size " + std::to_string(ctx.worldSize),
                           ctx.worldSize, ctx.planSoFar, ranks))
      return false;
    dp = ranks;
  } else if (train && micro && accum) {
    if (*train % (*micro * *accum) != 0)
      return s.fail("train_batch_size",
                    std::to_string(*train) +
                        " is not train_micro_batch_size_per_gpu x "
                        "gradient_accumulation_steps (" +
                        std::to_string(*micro) + " x " +
                        std::to_string(*accum) + ") x a number of ranks");
    dp = *train / (*micro * *accum);
  } else {
    dp = planInt(ctx.planSoFar, "mesh", "dp", 1);
  }
  const int64_t ranks = *dp;
  auto inconsistent = [&](const std::string &why) {
    return s.fail("train_batch_size",
                  "the batch triple is inconsistent: " + why +
                      " (DeepSpeed's rule: train_batch_size = "
                      "train_micro_batch_size_per_gpu x "
                      "gradient_accumulation_steps x data-parallel ranks, "
                      "here " +
                      std::to_string(ranks) + " ranks)");
  };
  // As DeepSpeedConfig._set_batch_related_parameters.
  if (train && micro && !accum) {
    if (*train % (*micro * ranks) != 0)
      return inconsistent(std::to_string(*train) + " is not a multiple of " +
                          std::to_string(*micro) + " x " +
                          std::to_string(ranks));
    accum = *train / (*micro * ranks);
  } else if (train && accum && !micro) {
    if (*train % (*accum * ranks) != 0)
      return inconsistent(std::to_string(*train) + " is not a multiple of " +
                          std::to_string(*accum) + " x " +
                          std::to_string(ranks));
    micro = *train / (*accum * ranks);
  } else if (micro && accum && !train) {
    train = *micro * *accum * ranks;
  } else if (train && !micro && !accum) {
    accum = 1;
    if (*train % ranks != 0)
      return inconsistent(std::to_string(*train) + " is not a multiple of " +
                          std::to_string(ranks));
    micro = *train / ranks;
  } else if (micro && !train && !accum) {
    accum = 1;
    train = *micro * ranks;
  }
  if (train && micro && accum && *train != *micro * *accum * ranks)
    return inconsistent(std::to_string(*train) +
                        " != " + std::to_string(*micro) + " x " +
                        std::to_string(*accum) + " x " + std::to_string(ranks));
  plan["mesh"]["dp"] = ranks;
  if (accum)
    plan["batch"]["micro_batches"] = *accum;
  if (train)
    plan["batch"]["global_batch"] = *train;
  return true;
}

bool translateZero(Section &top, json &plan, std::vector<std::string> &noEffect,
                   std::string &error) {
  const json *zero;
  if (!objectAt(top, "zero_optimization", zero))
    return false;
  if (!zero)
    return true;
  Section s(*zero, "zero_optimization", error);
  std::optional<int64_t> stage;
  if (!s.readInt("stage", 0, stage))
    return false;
  if (stage && *stage > 3)
    return s.fail("stage",
                  "expected 0, 1, 2 or 3, got " + std::to_string(*stage));
  if (stage)
    plan["zero"]["stage"] = *stage;
  for (const char *key : {"offload_optimizer", "offload_param"}) {
    const json *off;
    if (!objectAt(s, key, off))
      return false;
    if (!off)
      continue;
    Section o(*off, s.at(key), error);
    const json *device = o.get("device");
    std::string d = device && device->is_string()  ? device->get<std::string>()
                    : device && !device->is_null() ? "?"
                                                   : "none";
    if (d != "none" && d != "cpu" && d != "nvme")
      return o.fail("device", "expected \"none\", \"cpu\" or \"nvme\", got " +
                                  device->dump());
    if (std::string(key) == "offload_param" && d == "cpu")
      return o.fail("device",
                    "\"cpu\": autopar does not keep parameters in host "
                    "memory for the device; \"nvme\" (with offload_optimizer "
                    "on nvme) puts ZeRO-3's parameter shards in the swap file");
    if (std::string(key) == "offload_param" && d == "nvme") {
      // ZeRO-Infinity's parameters: in the optimizer state's swap file.
      if (!plan.contains("zero") || plan["zero"].value("offload", "") != "nvme")
        return o.fail("device",
                      "\"nvme\" needs offload_optimizer on nvme too: autopar "
                      "keeps the parameter shards in the optimizer state's "
                      "swap file");
      const json *path = o.get("nvme_path");
      const json folder = path ? *path : json("/local_nvme");
      if (folder != plan["zero"]["nvme_path"])
        return o.fail("nvme_path",
                      folder.dump() + " is not offload_optimizer's nvme_path " +
                          plan["zero"]["nvme_path"].dump() +
                          ": autopar keeps both in one swap file");
      plan["zero"]["offload_params"] = "nvme";
    }
    if (std::string(key) == "offload_optimizer") {
      plan["zero"]["offload"] = d;
      // ZeRO-Infinity: the state in swap files under nvme_path
      // (DeepSpeed's default /local_nvme).
      if (d == "nvme") {
        const json *path = o.get("nvme_path");
        if (path && !(path->is_string() && !path->get<std::string>().empty()))
          return o.fail("nvme_path", "expected a folder, got " + path->dump());
        plan["zero"]["nvme_path"] = path ? *path : json("/local_nvme");
      }
    }
    std::optional<double> ratio;
    if (!o.readNumber("ratio", ratio))
      return false;
    if (ratio && *ratio != 1)
      return o.fail("ratio", "a partial offload (" + json(*ratio).dump() +
                                 ") is not supported; autopar offloads all "
                                 "of the optimizer state or none");
    o.noEffect({"pin_memory", "buffer_count", "buffer_size", "fast_init",
                "pipeline", "pipeline_read", "pipeline_write", "max_in_cpu"},
               noEffect);
    if (d != "nvme")
      o.noEffect({"nvme_path"}, noEffect);
    if (!o.finish())
      return false;
  }
  std::optional<bool> cpuOffload;
  if (!s.readBool("cpu_offload", cpuOffload))
    return false;
  if (cpuOffload && *cpuOffload)
    plan["zero"]["offload"] = "cpu";
  // MiCS: ZeRO-3 over groups of mics_shard_size ranks, replicated across
  // them (hybrid sharding). ZeRO++'s hpZ (a second copy of the parameters
  // per group, for the gathers alone) and its quantized collectives change
  // what is sharded or sent.
  std::optional<int64_t> hpz, mics;
  if (!s.readInt("zero_hpz_partition_size", 0, hpz) ||
      !s.readInt("mics_shard_size", -1, mics))
    return false;
  if (hpz && *hpz > 1)
    return s.fail("zero_hpz_partition_size",
                  "ZeRO++'s hpZ (a secondary partition of the parameters) is "
                  "not supported; mics_shard_size (or the plan's "
                  "zero.shard_size) shards every state per group");
  if (mics && *mics > 0) {
    if (stage.value_or(0) != 3)
      return s.fail("mics_shard_size",
                    "MiCS is ZeRO-3's; it needs zero_optimization.stage 3");
    plan["zero"]["shard_size"] = *mics;
  }
  s.noEffect({"mics_hierarchical_params_gather"}, noEffect);
  for (const char *key : {"zero_quantized_weights", "zero_quantized_gradients",
                          "zero_quantized_nontrainable_weights"}) {
    std::optional<bool> on;
    if (!s.readBool(key, on))
      return false;
    if (on && *on)
      return s.fail(key, "ZeRO++'s quantized collectives are not supported");
  }
  // Bucketing, overlap and prefetch knobs: the same sums in another order
  // of messages, or DeepSpeed's memory management.
  s.noEffect({"allgather_partitions",
              "allgather_bucket_size",
              "overlap_comm",
              "reduce_scatter",
              "reduce_bucket_size",
              "contiguous_gradients",
              "round_robin_gradients",
              "sub_group_size",
              "stage3_max_live_parameters",
              "stage3_max_reuse_distance",
              "stage3_prefetch_bucket_size",
              "stage3_param_persistence_threshold",
              "stage3_gather_16bit_weights_on_model_save",
              "stage3_gather_fp16_weights_on_model_save",
              "gather_16bit_weights_on_model_save",
              "stage3_module_granularity_threshold",
              "memory_efficient_linear",
              "load_from_fp32_weights",
              "elastic_checkpoint",
              "ignore_unused_parameters",
              "legacy_stage1",
              "use_multi_rank_bucket_allreduce",
              "zeropp_loco_param",
              "log_trace_cache_warnings"},
             noEffect);
  return s.finish();
}

bool translatePrecision(Section &top, json &plan,
                        std::vector<std::string> &noEffect,
                        std::string &error) {
  std::optional<bool> bf16, fp16;
  const json *bf16Section = nullptr, *fp16Section = nullptr;
  for (const char *key : {"bf16", "bfloat16"}) {
    const json *b;
    if (!objectAt(top, key, b))
      return false;
    if (!b)
      continue;
    bf16Section = b;
    Section s(*b, key, error);
    if (!s.readBool("enabled", bf16))
      return false;
    s.noEffect({"immediate_grad_update", "check_grad_overflow"}, noEffect);
    if (!s.finish())
      return false;
  }
  if (!objectAt(top, "fp16", fp16Section))
    return false;
  if (fp16Section) {
    Section s(*fp16Section, "fp16", error);
    if (!s.readBool("enabled", fp16))
      return false;
    std::optional<double> lossScale, minScale;
    std::optional<int64_t> power, window, hysteresis;
    std::optional<bool> consecutive;
    if (!s.readNumber("loss_scale", lossScale) ||
        !s.readInt("initial_scale_power", 0, power) ||
        !s.readInt("loss_scale_window", 1, window) ||
        !s.readInt("hysteresis", 1, hysteresis) ||
        !s.readBool("consecutive_hysteresis", consecutive) ||
        !s.readNumber("min_loss_scale", minScale))
      return false;
    if (fp16 && *fp16) {
      if (lossScale && *lossScale != 0)
        return s.fail("loss_scale",
                      json(*lossScale).dump() +
                          ": a static loss scale is not supported; 0 "
                          "(dynamic scaling) is");
      // DeepSpeed's dynamic scaler defaults: 2^16, window 1000,
      // hysteresis 2, min_loss_scale 1.
      const int64_t h = hysteresis.value_or(2);
      if (consecutive && *consecutive && h > 1)
        return s.fail("consecutive_hysteresis",
                      "true is not supported (the hysteresis is restored "
                      "when the scale grows, DeepSpeed's default)");
      if (minScale && *minScale < 0)
        return s.fail("min_loss_scale", "expected a number >= 0");
      plan["precision"] = "fp16-mixed";
      plan["loss_scale"]["init_scale"] = std::ldexp(1.0, power.value_or(16));
      plan["loss_scale"]["growth_interval"] = window.value_or(1000);
      plan["loss_scale"]["growth_factor"] = 2;
      plan["loss_scale"]["backoff_factor"] = 0.5;
      plan["loss_scale"]["hysteresis"] = h;
      plan["loss_scale"]["min_scale"] = minScale.value_or(1.0);
    }
    s.noEffect({"auto_cast", "fp16_master_weights_and_grads"}, noEffect);
    if (!s.finish())
      return false;
  }
  if (bf16 && *bf16 && fp16 && *fp16)
    return top.fail("fp16", "fp16 and bf16 are both enabled");
  if (bf16 && *bf16)
    plan["precision"] = "bf16-mixed";
  // Both said off: DeepSpeed trains in fp32.
  const bool bf16Off = bf16 && !*bf16, fp16Off = fp16 && !*fp16;
  if ((bf16Off || !bf16Section) && (fp16Off || !fp16Section) &&
      (bf16Off || fp16Off))
    plan["precision"] = "fp32";
  return true;
}

bool translateOptimizer(Section &top, const DeepSpeedContext &ctx, json &plan,
                        std::vector<std::string> &noEffect,
                        std::string &error) {
  const json *opt;
  if (!objectAt(top, "optimizer", opt))
    return false;
  if (opt) {
    Section s(*opt, "optimizer", error);
    const json *type = s.get("type");
    if (!type || !type->is_string())
      return s.fail("type", "expected a string (\"AdamW\", \"Adam\" or "
                            "\"SGD\")");
    std::string t = type->get<std::string>();
    for (char &c : t)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const json *params;
    if (!objectAt(s, "params", params))
      return false;
    static const json empty = json::object();
    Section p(params ? *params : empty, "optimizer.params", error);
    json &o = plan["optimizer"];
    // "auto": the plan's value, else the Trainer's default.
    auto number = [&](const char *key, const char *planKey, double trainer,
                      double deepspeed) {
      const json *v = p.get(key);
      if (v && isAuto(*v)) {
        if (!planValue(ctx.planSoFar, "optimizer", planKey))
          o[planKey] = trainer;
        return true;
      }
      if (v && !v->is_number())
        return p.fail(key, "expected a number or \"auto\", got " + v->dump());
      o[planKey] = v ? v->get<double>() : deepspeed;
      return true;
    };
    if (t == "adam" || t == "adamw") {
      // DeepSpeed's Adam is AdamW unless adam_w_mode is false (then an L2
      // penalty, which equals AdamW only without weight decay).
      std::optional<bool> adamW;
      if (!p.readBool("adam_w_mode", adamW))
        return false;
      o["type"] = "adamw";
      if (!number("lr", "lr", 5e-5, 1e-3) ||
          !number("eps", "eps", 1e-8, 1e-8) ||
          !number("weight_decay", "weight_decay", 0, 0))
        return false;
      const json *betas = p.get("betas");
      if (betas && isAuto(*betas)) {
        if (!planValue(ctx.planSoFar, "optimizer", "betas"))
          o["betas"] = {0.9, 0.999};
      } else if (betas) {
        if (!betas->is_array() || betas->size() != 2 ||
            !(*betas)[0].is_number() || !(*betas)[1].is_number())
          return p.fail("betas", "expected two numbers or \"auto\", got " +
                                     betas->dump());
        o["betas"] = *betas;
      } else {
        o["betas"] = {0.9, 0.999};
      }
      if (adamW && !*adamW && o["weight_decay"].get<double>() != 0)
        return p.fail("adam_w_mode",
                      "false (Adam with an L2 penalty) is not supported; "
                      "AdamW's decoupled weight decay is");
      p.noEffect({"torch_adam", "bias_correction", "amsgrad_off", "fused",
                  "set_grad_none"},
                 noEffect);
    } else if (t == "sgd") {
      o["type"] = "sgd";
      if (!number("lr", "lr", 5e-5, 1e-3) ||
          !number("momentum", "momentum", 0, 0) ||
          !number("dampening", "dampening", 0, 0) ||
          !number("weight_decay", "weight_decay", 0, 0))
        return false;
      std::optional<bool> nesterov;
      if (!p.readBool("nesterov", nesterov))
        return false;
      if (nesterov)
        o["nesterov"] = *nesterov;
    } else {
      return s.fail("type", "\"" + type->get<std::string>() +
                                "\" is not supported (AdamW, Adam and SGD "
                                "are)");
    }
    if (!p.finish() || !s.finish())
      return false;
  }
  const json *clip = top.get("gradient_clipping");
  if (clip && isAuto(*clip)) {
    if (!planValue(ctx.planSoFar, "optimizer", "max_grad_norm"))
      plan["optimizer"]["max_grad_norm"] = 1.0; // the Trainer's max_grad_norm
  } else if (clip) {
    if (!clip->is_number() || clip->get<double>() < 0)
      return top.fail("gradient_clipping",
                      "expected a number >= 0 or \"auto\", got " +
                          clip->dump());
    plan["optimizer"]["max_grad_norm"] = clip->get<double>();
  }
  return true;
}

/// `scheduler` (deepspeed/runtime/lr_schedules.py, 0.16) as lr_schedule:
/// the whole schedule, every parameter written out with DeepSpeed's default.
bool translateScheduler(Section &top, const DeepSpeedContext &ctx, json &plan,
                        std::string &error) {
  const json *sched;
  if (!objectAt(top, "scheduler", sched))
    return false;
  if (!sched)
    return true;
  Section s(*sched, "scheduler", error);
  const json *type = s.get("type");
  static const std::map<std::string, const char *> kTypes = {
      {"WarmupLR", "deepspeed_warmup_lr"},
      {"WarmupDecayLR", "deepspeed_warmup_decay_lr"},
      {"WarmupCosineLR", "deepspeed_warmup_cosine_lr"}};
  if (!type || !type->is_string())
    return s.fail("type", "expected a string (\"WarmupLR\", \"WarmupDecayLR\" "
                          "or \"WarmupCosineLR\")");
  auto known = kTypes.find(type->get<std::string>());
  if (known == kTypes.end())
    return s.fail("type", type->dump() +
                              " is not supported (WarmupLR, WarmupDecayLR and "
                              "WarmupCosineLR are)");
  const std::string t = known->first;
  const json *params;
  if (!objectAt(s, "params", params))
    return false;
  static const json empty = json::object();
  Section p(params ? *params : empty, "scheduler.params", error);
  json out = json::object();
  out["type"] = known->second;
  // A number >= 0, DeepSpeed's default when absent; "auto" only where the
  // Trainer integration fills it in (`autoValue`).
  auto number = [&](const char *key, double fallback,
                    std::optional<double> autoValue, double &value) {
    const json *v = p.get(key);
    value = fallback;
    if (v && isAuto(*v)) {
      if (!autoValue)
        return p.fail(key, "\"auto\" is not filled in by Hugging Face's "
                           "Trainer; give a number");
      value = *autoValue;
      return true;
    }
    if (v && !(v->is_number() && v->get<double>() >= 0))
      return p.fail(key, "expected a number >= 0, got " + v->dump());
    if (v)
      value = v->get<double>();
    return true;
  };
  // warmup_num_steps "auto": the Trainer's warmup steps (the plan's, else
  // 0); total_num_steps "auto": the run's --steps (decay_steps 0).
  const json *planWarmup =
      planValue(ctx.planSoFar, "lr_schedule", "warmup_steps");
  const json *warmup = p.get("warmup_num_steps");
  if (warmup && isAuto(*warmup))
    out["warmup_steps"] = planWarmup && planWarmup->is_number_integer()
                              ? planWarmup->get<int64_t>()
                              : 0;
  else if (!warmup)
    out["warmup_steps"] = 1000;
  else if (warmup->is_number_integer() && warmup->get<int64_t>() >= 0)
    out["warmup_steps"] = *warmup;
  else
    return p.fail("warmup_num_steps",
                  "expected an integer >= 0 or \"auto\", got " +
                      warmup->dump());
  const json *warmupType = p.get("warmup_type");
  if (warmupType && !(warmupType->is_string() &&
                      (*warmupType == "log" || *warmupType == "linear")))
    return p.fail("warmup_type",
                  "expected \"log\" or \"linear\", got " + warmupType->dump());
  out["warmup_type"] = warmupType ? *warmupType : json("log");
  if (t != "WarmupLR") {
    const json *total = p.get("total_num_steps");
    if (!total)
      return p.fail("total_num_steps", "is required by " + t);
    if (isAuto(*total))
      out["decay_steps"] = 0;
    else if (total->is_number_integer() && total->get<int64_t>() >= 1)
      out["decay_steps"] = *total;
    else
      return p.fail("total_num_steps",
                    "expected an integer >= 1 or \"auto\" (the run's "
                    "--steps), got " +
                        total->dump());
  }
  double value;
  if (t == "WarmupCosineLR") {
    if (!number("warmup_min_ratio", 0, std::nullopt, value))
      return false;
    out["warmup_min_ratio"] = value;
    if (!number("cos_min_ratio", 1e-4, std::nullopt, value))
      return false;
    out["cos_min_ratio"] = value;
  } else {
    if (!number("warmup_min_lr", 0, 0.0, value))
      return false;
    out["warmup_min_lr"] = value;
    // The peak is warmup_max_lr, which DeepSpeed writes over the
    // optimizer's lr; "auto" is the Trainer's learning rate, the plan's.
    const json *maxLr = p.get("warmup_max_lr");
    if (maxLr && isAuto(*maxLr)) {
      if (!plan.contains("optimizer") || !plan["optimizer"].contains("lr"))
        if (!planValue(ctx.planSoFar, "optimizer", "lr"))
          plan["optimizer"]["lr"] = 5e-5; // the Trainer's learning_rate
    } else {
      if (!number("warmup_max_lr", 1e-3, std::nullopt, value))
        return false;
      if (value <= 0)
        return p.fail("warmup_max_lr", "expected a number > 0, got 0");
      plan["optimizer"]["lr"] = value;
    }
  }
  const json *last = p.get("last_batch_iteration");
  if (last && !(last->is_number_integer() && *last == -1))
    return p.fail("last_batch_iteration",
                  last->dump() + " is not supported (-1: a new schedule; a "
                                 "resumed run takes its step from the "
                                 "checkpoint)");
  if (!p.finish() || !s.finish())
    return false;
  plan["lr_schedule"] = std::move(out);
  return true;
}

} // namespace

bool isDeepSpeedConfig(const json &config) {
  if (!config.is_object())
    return false;
  for (const char *key :
       {"zero_optimization", "train_batch_size",
        "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
        "gradient_clipping", "fp16", "bf16", "bfloat16", "scheduler",
        "steps_per_print", "wall_clock_breakdown"})
    if (config.contains(key))
      return true;
  auto opt = config.find("optimizer");
  return opt != config.end() && opt->is_object() && opt->contains("params");
}

bool deepSpeedToPlan(const json &config, const DeepSpeedContext &ctx,
                     json &plan, std::vector<std::string> &noEffect,
                     std::string &error) {
  try {
    if (!config.is_object()) {
      error = "a DeepSpeed config is a JSON object";
      return false;
    }
    plan = json::object();
    Section top(config, "", error);
    if (!translateBatch(top, ctx, plan) ||
        !translateZero(top, plan, noEffect, error) ||
        !translatePrecision(top, plan, noEffect, error) ||
        !translateOptimizer(top, ctx, plan, noEffect, error) ||
        !translateScheduler(top, ctx, plan, error))
      return false;
    if (top.get("amp"))
      return top.fail("amp", "NVIDIA Apex AMP is not supported; use bf16 or "
                             "fp16");
    const json *comm = top.get("communication_data_type");
    if (comm && !comm->is_null() && !(comm->is_string() && *comm == "fp32"))
      return top.fail("communication_data_type",
                      comm->dump() + " is not supported (gradients are "
                                     "reduced in the plan's grad_dtype)");
    // Logging, profiling and engine knobs.
    top.noEffect({"steps_per_print",
                  "wall_clock_breakdown",
                  "dump_state",
                  "memory_breakdown",
                  "flops_profiler",
                  "tensorboard",
                  "wandb",
                  "csv_monitor",
                  "comet",
                  "comms_logger",
                  "prescale_gradients",
                  "gradient_predivide_factor",
                  "sparse_gradients",
                  "zero_allow_untested_optimizer",
                  "zero_force_ds_cpu_optimizer",
                  "activation_checkpointing",
                  "checkpoint",
                  "aio",
                  "elasticity",
                  "autotuning",
                  "data_efficiency",
                  "compile",
                  "timers",
                  "disable_allgather",
                  "seq_parallel_communication_data_type",
                  "graph_harvesting",
                  "use_data_before_expert_parallelism"},
                 noEffect);
    const json *types;
    if (!objectAt(top, "data_types", types))
      return false;
    if (types) {
      Section t(*types, "data_types", error);
      // DeepSpeed's names are the plan's.
      const json *accum = t.get("grad_accum_dtype");
      if (accum && !accum->is_null()) {
        if (!(accum->is_string() &&
              (*accum == "fp32" || *accum == "bf16" || *accum == "fp16")))
          return t.fail("grad_accum_dtype",
                        "expected \"fp32\", \"bf16\" or \"fp16\", got " +
                            accum->dump());
        plan["grad_dtype"] = *accum;
      }
      if (!t.finish())
        return false;
    }
    return top.finish();
  } catch (const std::exception &e) {
    error = std::string("internal error while reading the DeepSpeed config: ") +
            e.what();
    return false;
  }
}

} // namespace autopar
