//===- Plan.cpp - the parallelization plan file ---------------------------===//
//
// Built with -fexceptions (the rest of the project is not). The code is
// written not to make nlohmann::json throw at all: values are read through
// get_ptr<>() after a type check, and files are parsed with the SAX interface,
// which reports syntax errors through a callback. This matters beyond style:
// nlohmann's inline functions are also compiled with -fno-exceptions in other
// files, where JSON_THROW is abort(), and the linker may keep either copy.
// The try/catch around each entry point is a second line of defense.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/Plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <utility>

using json = nlohmann::json;

namespace autopar {
namespace {

//===----------------------------------------------------------------------===//
// Formatting helpers
//===----------------------------------------------------------------------===//

/// The JSON text of `value` on one line; never throws (invalid UTF-8 in
/// strings is replaced).
std::string dumpOneLine(const json &value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false,
                    json::error_handler_t::replace);
}

std::string quote(std::string_view text) {
  return dumpOneLine(json(std::string(text)));
}

/// A double as JSON writes it, but integral values without ".0" (for values
/// of the plan, not for values of the user's file).
std::string formatNumber(double value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  if (std::nearbyint(value) == value && std::fabs(value) < 1e15)
    return std::to_string(static_cast<int64_t>(value));
  return dumpOneLine(json(value));
}

/// What a value is, for "got ..." in messages: scalars as their JSON text
/// (shortened when long), containers by kind.
std::string describe(const json &value) {
  switch (value.type()) {
  case json::value_t::object:
    return "an object";
  case json::value_t::array:
    return "an array";
  case json::value_t::binary:
    return "binary data";
  case json::value_t::discarded:
    return "nothing";
  case json::value_t::number_float: {
    // Keeps the ".0" of 2.0: it tells why 2.0 is not an integer.
    double v = *value.get_ptr<const json::number_float_t *>();
    if (!std::isfinite(v))
      return formatNumber(v);
    break;
  }
  default:
    break;
  }
  std::string text = dumpOneLine(value);
  constexpr size_t maxChars = 60;
  if (text.size() > maxChars)
    text = text.substr(0, maxChars) + "...";
  return text;
}

bool isPlainKey(std::string_view key) {
  if (key.empty())
    return false;
  for (char c : key)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'))
      return false;
  return true;
}

/// "parent.key", or parent["odd key"] for keys that are not identifiers.
std::string childPath(const std::string &parent, std::string_view key) {
  if (!isPlainKey(key))
    return parent + "[" + quote(key) + "]";
  if (parent.empty())
    return std::string(key);
  return parent + "." + std::string(key);
}

std::string indexPath(const std::string &parent, size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

std::string joinKeys(const std::vector<const char *> &keys) {
  std::string text;
  for (const char *key : keys) {
    if (!text.empty())
      text += ", ";
    text += key;
  }
  return text;
}

bool contains(const std::vector<const char *> &keys, std::string_view key) {
  for (const char *k : keys)
    if (key == k)
      return true;
  return false;
}

//===----------------------------------------------------------------------===//
// Plan validation
//===----------------------------------------------------------------------===//

/// "" if `pattern` is a valid glob, else the problem, naming the pattern.
std::string checkGlob(std::string_view pattern) {
  std::string problem = globProblem(pattern);
  if (problem.empty() || pattern.empty())
    return problem;
  return problem + " " + quote(pattern);
}

const json *member(const json &object, const char *key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

bool positive(double v) { return v > 0; }
bool nonNegative(double v) { return v >= 0; }
bool unitInterval(double v) { return v >= 0 && v < 1; }
bool aboveOne(double v) { return v > 1; }
bool openUnitInterval(double v) { return v > 0 && v < 1; }

class PlanParser {
public:
  explicit PlanParser(std::string &error) : error(error) {}

  bool parse(const json &root, Plan &plan);

private:
  bool fail(const std::string &path, const std::string &what) {
    error = path.empty() ? what : path + ": " + what;
    return false;
  }

  /// Checks that `value` is an object whose keys are all in `keys`.
  bool expectObject(const json &value, const std::string &path,
                    const std::vector<const char *> &keys) {
    if (!value.is_object())
      return fail(path, "expected an object, got " + describe(value));
    for (auto it = value.begin(); it != value.end(); ++it)
      if (!contains(keys, it.key()))
        return fail(childPath(path, it.key()),
                    "unknown key (expected one of: " + joinKeys(keys) + ")");
    return true;
  }

  bool readInt(const json &value, const std::string &path, int64_t min,
               int64_t &out) {
    std::string expected = "expected an integer >= " + std::to_string(min);
    if (const auto *i = value.get_ptr<const json::number_integer_t *>()) {
      if (*i >= min) {
        out = *i;
        return true;
      }
    } else if (const auto *u =
                   value.get_ptr<const json::number_unsigned_t *>()) {
      if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
          static_cast<int64_t>(*u) >= min) {
        out = static_cast<int64_t>(*u);
        return true;
      }
    }
    return fail(path, expected + ", got " + describe(value));
  }

  bool readNumber(const json &value, const std::string &path,
                  const char *expected, bool (*ok)(double), double &out) {
    double v = 0;
    bool isNumber = true;
    if (const auto *f = value.get_ptr<const json::number_float_t *>())
      v = *f;
    else if (const auto *i = value.get_ptr<const json::number_integer_t *>())
      v = static_cast<double>(*i);
    else if (const auto *u = value.get_ptr<const json::number_unsigned_t *>())
      v = static_cast<double>(*u);
    else
      isNumber = false;
    if (!isNumber || !std::isfinite(v) || !ok(v))
      return fail(path, std::string("expected ") + expected + ", got " +
                            describe(value));
    out = v;
    return true;
  }

  bool readEnum(const json &value, const std::string &path,
                const std::vector<const char *> &allowed, std::string &out) {
    if (const auto *s = value.get_ptr<const json::string_t *>())
      if (contains(allowed, *s)) {
        out = *s;
        return true;
      }
    std::string expected;
    for (const char *a : allowed)
      expected += (expected.empty() ? "" : ", ") + quote(a);
    if (allowed.size() == 1)
      expected = "expected " + expected;
    else
      expected = "expected one of " + expected;
    return fail(path, expected + ", got " + describe(value));
  }

  bool readBool(const json &value, const std::string &path, bool &out) {
    if (const auto *b = value.get_ptr<const json::boolean_t *>()) {
      out = *b;
      return true;
    }
    return fail(path, "expected true or false, got " + describe(value));
  }

  bool readString(const json &value, const std::string &path,
                  std::string &out) {
    if (const auto *s = value.get_ptr<const json::string_t *>()) {
      out = *s;
      return true;
    }
    return fail(path, "expected a string, got " + describe(value));
  }

  bool readGlobs(const json &value, const std::string &path,
                 std::vector<std::string> &out) {
    if (!value.is_array())
      return fail(path,
                  "expected an array of glob strings, got " + describe(value));
    out.clear();
    for (size_t i = 0; i < value.size(); ++i) {
      const json &element = value[i];
      const auto *s = element.get_ptr<const json::string_t *>();
      if (!s)
        return fail(indexPath(path, i),
                    "expected a glob string, got " + describe(element));
      std::string problem = checkGlob(*s);
      if (!problem.empty())
        return fail(indexPath(path, i), problem);
      out.push_back(*s);
    }
    return true;
  }

  bool parseOptimizer(const json &value, OptimizerPlan &optimizer);
  bool parseLrSchedule(const json &value, const OptimizerPlan &optimizer,
                       LrSchedulePlan &schedule);

  std::string &error;
};

bool PlanParser::parse(const json &root, Plan &plan) {
  static const std::vector<const char *> topKeys = {
      "mesh",        "batch",           "zero",       "comm",
      "precision",   "grad_dtype",      "loss_scale", "recompute",
      "pipeline",    "tensor_parallel", "optimizer",  "frozen",
      "padding_idx", "lr_schedule",     "data",       "attention"};
  if (!root.is_object())
    return fail("", "expected a JSON object at the top level, got " +
                        describe(root));
  if (!expectObject(root, "", topKeys))
    return false;

  if (const json *mesh = member(root, "mesh")) {
    if (!expectObject(*mesh, "mesh", {"dp", "tp", "pp"}))
      return false;
    if (const json *v = member(*mesh, "dp"))
      if (!readInt(*v, "mesh.dp", 1, plan.meshDp))
        return false;
    if (const json *v = member(*mesh, "tp"))
      if (!readInt(*v, "mesh.tp", 1, plan.meshTp))
        return false;
    if (const json *v = member(*mesh, "pp"))
      if (!readInt(*v, "mesh.pp", 1, plan.meshPp))
        return false;
  }

  if (const json *batch = member(root, "batch")) {
    if (!expectObject(*batch, "batch", {"micro_batches"}))
      return false;
    if (const json *v = member(*batch, "micro_batches"))
      if (!readInt(*v, "batch.micro_batches", 1, plan.microBatches))
        return false;
  }

  if (const json *zero = member(root, "zero")) {
    if (!expectObject(*zero, "zero", {"stage", "offload"}))
      return false;
    if (const json *v = member(*zero, "stage")) {
      int64_t stage = -1;
      if (!readInt(*v, "zero.stage", 0, stage) || stage > 3)
        return fail("zero.stage", "expected 0, 1, 2 or 3, got " + describe(*v));
      plan.zeroStage = stage;
    }
    if (const json *v = member(*zero, "offload"))
      if (!readEnum(*v, "zero.offload", {"none", "cpu"}, plan.zeroOffload))
        return false;
    if (plan.zeroOffload != "none" && plan.zeroStage == 0)
      return fail("zero.offload", "\"" + plan.zeroOffload +
                                      "\" needs zero.stage 1, 2 or 3, got "
                                      "zero.stage 0");
  }

  if (const json *comm = member(root, "comm")) {
    if (!expectObject(*comm, "comm", {"bucket_mb", "timeout_s"}))
      return false;
    if (const json *v = member(*comm, "bucket_mb"))
      if (!readNumber(*v, "comm.bucket_mb", "a number > 0", positive,
                      plan.bucketMb))
        return false;
    if (const json *v = member(*comm, "timeout_s"))
      if (!readNumber(*v, "comm.timeout_s", "a number > 0", positive,
                      plan.commTimeoutS))
        return false;
  }

  if (const json *v = member(root, "precision"))
    if (!readEnum(*v, "precision", {"fp32", "bf16-mixed", "fp16-mixed"},
                  plan.precision))
      return false;
  if (const json *v = member(root, "grad_dtype")) {
    std::string dtype;
    if (!readEnum(*v, "grad_dtype", {"fp32", "bf16", "fp16"}, dtype))
      return false;
    if (dtype != "fp32" && dtype != plan.paramDtype())
      return fail("grad_dtype", "\"" + dtype + "\" needs the parameters in " +
                                    dtype + ", got precision \"" +
                                    plan.precision +
                                    "\" (gradients are fp32 or the "
                                    "parameters' type)");
    plan.gradDtype = dtype;
  }

  if (const json *scale = member(root, "loss_scale")) {
    LossScalePlan &l = plan.lossScale;
    if (!expectObject(*scale, "loss_scale",
                      {"init_scale", "growth_factor", "backoff_factor",
                       "growth_interval"}))
      return false;
    if (const json *v = member(*scale, "init_scale"))
      if (!readNumber(*v, "loss_scale.init_scale", "a number > 0", positive,
                      l.initScale))
        return false;
    if (const json *v = member(*scale, "growth_factor"))
      if (!readNumber(*v, "loss_scale.growth_factor", "a number > 1",
                      aboveOne, l.growthFactor))
        return false;
    if (const json *v = member(*scale, "backoff_factor"))
      if (!readNumber(*v, "loss_scale.backoff_factor", "a number in (0, 1)",
                      openUnitInterval, l.backoffFactor))
        return false;
    if (const json *v = member(*scale, "growth_interval"))
      if (!readInt(*v, "loss_scale.growth_interval", 1, l.growthInterval))
        return false;
  }

  if (const json *v = member(root, "recompute"))
    if (!readEnum(*v, "recompute", {"none", "selective", "full"},
                  plan.recompute))
      return false;

  if (const json *v = member(root, "attention"))
    if (!readEnum(*v, "attention", {"fused", "unfused"}, plan.attention))
      return false;

  if (const json *pipeline = member(root, "pipeline")) {
    if (!expectObject(*pipeline, "pipeline", {"schedule", "chunks", "split"}))
      return false;
    if (const json *v = member(*pipeline, "schedule"))
      if (!readEnum(*v, "pipeline.schedule",
                    {"gpipe", "1f1b", "interleaved", "zb-h1"},
                    plan.pipelineSchedule))
        return false;
    bool interleaved = plan.pipelineSchedule == "interleaved";
    plan.pipelineChunks = interleaved ? 2 : 1;
    if (const json *v = member(*pipeline, "chunks")) {
      if (!readInt(*v, "pipeline.chunks", 1, plan.pipelineChunks))
        return false;
      if (interleaved && plan.pipelineChunks < 2)
        return fail("pipeline.chunks",
                    "the interleaved schedule needs at least 2 model chunks "
                    "per rank, got " +
                        describe(*v));
      if (!interleaved && plan.pipelineChunks != 1)
        return fail("pipeline.chunks",
                    "only the interleaved schedule runs several model chunks "
                    "per rank (" +
                        plan.pipelineSchedule + " got " + describe(*v) + ")");
    }
    if (const json *v = member(*pipeline, "split")) {
      const auto *s = v->get_ptr<const json::string_t *>();
      if (!(s && *s == "auto")) {
        if (!v->is_array())
          return fail("pipeline.split",
                      "expected \"auto\" or a list of layer boundaries, got " +
                          describe(*v));
        int64_t last = 0;
        for (size_t i = 0; i < v->size(); ++i) {
          int64_t at = 0;
          std::string key = "pipeline.split[" + std::to_string(i) + "]";
          if (!readInt((*v)[i], key, 1, at))
            return false;
          if (at <= last)
            return fail(key, "layer boundaries must increase, got " +
                                 std::to_string(at) + " after " +
                                 std::to_string(last));
          last = at;
          plan.pipelineSplit.push_back(at);
        }
        int64_t stages = plan.pipelineStages();
        if (static_cast<int64_t>(plan.pipelineSplit.size()) != stages - 1)
          return fail("pipeline.split",
                      "mesh.pp = " + std::to_string(plan.meshPp) + " x " +
                          std::to_string(plan.pipelineChunks) +
                          " chunks makes " + std::to_string(stages) +
                          " stages, cut at " + std::to_string(stages - 1) +
                          " layer boundaries, got " +
                          std::to_string(plan.pipelineSplit.size()));
      }
    }
    if (interleaved && plan.microBatches % plan.meshPp)
      return fail("batch.micro_batches",
                  "the interleaved schedule runs the micro-batches in groups "
                  "of mesh.pp = " +
                      std::to_string(plan.meshPp) + ", which does not divide " +
                      std::to_string(plan.microBatches));
  }

  if (const json *tp = member(root, "tensor_parallel")) {
    if (!expectObject(*tp, "tensor_parallel", {"rules", "sequence_parallel"}))
      return false;
    if (const json *v = member(*tp, "rules"))
      if (!readEnum(*v, "tensor_parallel.rules", {"auto"}, plan.tpRules))
        return false;
    if (const json *v = member(*tp, "sequence_parallel"))
      if (!readBool(*v, "tensor_parallel.sequence_parallel",
                    plan.sequenceParallel))
        return false;
  }

  if (const json *v = member(root, "optimizer"))
    if (!parseOptimizer(*v, plan.optimizer))
      return false;

  if (const json *v = member(root, "frozen"))
    if (!readGlobs(*v, "frozen", plan.frozen))
      return false;

  if (const json *v = member(root, "padding_idx")) {
    if (!v->is_object())
      return fail("padding_idx",
                  "expected an object of glob: row, got " + describe(*v));
    plan.paddingIdx.clear();
    for (const auto &[glob, row] : v->items()) {
      std::string path = "padding_idx." + glob;
      if (std::string problem = checkGlob(glob); !problem.empty())
        return fail(path, problem);
      int64_t r = 0;
      if (!readInt(row, path, 0, r))
        return false;
      plan.paddingIdx.emplace_back(glob, r);
    }
  }

  if (const json *v = member(root, "lr_schedule"))
    if (!parseLrSchedule(*v, plan.optimizer, plan.lrSchedule))
      return false;

  if (const json *data = member(root, "data")) {
    if (!expectObject(*data, "data",
                      {"inputs", "targets", "feeds", "targets_from"}))
      return false;
    if (const json *v = member(*data, "feeds")) {
      if (!v->is_object())
        return fail("data.feeds",
                    "expected an object of graph input: value, got " +
                        describe(*v));
      plan.dataFeeds.clear();
      for (const auto &[name, value] : v->items()) {
        std::string feed;
        // "shift_right:ID": the targets shifted right by one, ID first (a
        // decoder's inputs, as Hugging Face's shift_tokens_right).
        if (value.is_string() &&
            value.get<std::string>().rfind("shift_right:", 0) == 0) {
          if (!shiftRightStart(value.get<std::string>()))
            return fail("data.feeds." + name,
                        "expected \"shift_right:ID\" with a token id >= 0, "
                        "got " +
                            describe(value));
          plan.dataFeeds[name] = value.get<std::string>();
          continue;
        }
        if (!readEnum(value, "data.feeds." + name,
                      {"ones", "zeros", "arange", "shift_right:ID"}, feed))
          return false;
        plan.dataFeeds[name] = feed;
      }
    }
    if (const json *v = member(*data, "targets_from"))
      if (!readEnum(*v, "data.targets_from", {"next_tokens", "tokens"},
                    plan.targetsFrom))
        return false;
    if (const json *v = member(*data, "inputs"))
      if (!readString(*v, "data.inputs", plan.dataInputs))
        return false;
    if (const json *v = member(*data, "targets"))
      if (!readString(*v, "data.targets", plan.dataTargets))
        return false;
  }
  // Pipeline parallelism: with dp, tp, ZeRO-1 and mixed precision, on
  // both targets. ZeRO-2 and -3 shard what every micro-batch's backward adds
  // to (the gradients, the parameters): with a pipeline's micro-batches in
  // flight that is a reduce-scatter (and a gather) per micro-batch per
  // stage, which DeepSpeed refuses too.
  if (plan.meshPp > 1 && plan.zeroStage > 1)
    return fail("zero.stage",
                "ZeRO-" + std::to_string(plan.zeroStage) +
                    " with pipeline parallelism is not supported (it would "
                    "reduce-scatter the gradients every micro-batch; use "
                    "zero.stage 1, as DeepSpeed's pipeline engine does)");
  return true;
}

bool PlanParser::parseOptimizer(const json &value, OptimizerPlan &optimizer) {
  static const std::vector<const char *> adamwKeys = {
      "type",          "lr",      "betas", "eps", "weight_decay",
      "max_grad_norm", "no_decay"};
  static const std::vector<const char *> sgdKeys = {
      "type",     "lr",           "momentum",      "dampening",
      "nesterov", "weight_decay", "max_grad_norm", "no_decay"};
  if (!value.is_object())
    return fail("optimizer", "expected an object, got " + describe(value));
  if (const json *v = member(value, "type"))
    if (!readEnum(*v, "optimizer.type", {"adamw", "sgd"}, optimizer.type))
      return false;
  bool adamw = optimizer.type == "adamw";
  const std::vector<const char *> &keys = adamw ? adamwKeys : sgdKeys;
  const std::vector<const char *> &otherKeys = adamw ? sgdKeys : adamwKeys;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (contains(keys, it.key()))
      continue;
    std::string path = childPath("optimizer", it.key());
    if (contains(otherKeys, it.key()))
      return fail(path, "not an option of " + optimizer.type + " (only of " +
                            (adamw ? "sgd" : "adamw") + ")");
    return fail(path, "unknown key (expected one of: " + joinKeys(keys) + ")");
  }
  // torch.optim.AdamW defaults to weight_decay=0.01, torch.optim.SGD to 0.
  optimizer.weightDecay = adamw ? 0.01 : 0;

  if (const json *v = member(value, "lr"))
    if (!readNumber(*v, "optimizer.lr", "a number > 0", positive, optimizer.lr))
      return false;
  if (const json *v = member(value, "betas")) {
    if (!v->is_array() || v->size() != 2) {
      std::string got = describe(*v);
      if (v->is_array())
        got = "an array of " + std::to_string(v->size());
      return fail("optimizer.betas",
                  "expected an array of 2 numbers in [0, 1), got " + got);
    }
    if (!readNumber((*v)[0], "optimizer.betas[0]", "a number in [0, 1)",
                    unitInterval, optimizer.beta1) ||
        !readNumber((*v)[1], "optimizer.betas[1]", "a number in [0, 1)",
                    unitInterval, optimizer.beta2))
      return false;
  }
  if (const json *v = member(value, "eps"))
    if (!readNumber(*v, "optimizer.eps", "a number >= 0", nonNegative,
                    optimizer.eps))
      return false;
  if (const json *v = member(value, "momentum"))
    if (!readNumber(*v, "optimizer.momentum", "a number >= 0", nonNegative,
                    optimizer.momentum))
      return false;
  if (const json *v = member(value, "dampening"))
    if (!readNumber(*v, "optimizer.dampening", "a number >= 0", nonNegative,
                    optimizer.dampening))
      return false;
  if (const json *v = member(value, "nesterov"))
    if (!readBool(*v, "optimizer.nesterov", optimizer.nesterov))
      return false;
  if (optimizer.nesterov &&
      (optimizer.momentum <= 0 || optimizer.dampening != 0))
    return fail("optimizer.nesterov",
                "Nesterov momentum requires momentum > 0 and dampening == 0 "
                "(as in torch.optim.SGD), got momentum " +
                    formatNumber(optimizer.momentum) + " and dampening " +
                    formatNumber(optimizer.dampening));
  if (const json *v = member(value, "weight_decay"))
    if (!readNumber(*v, "optimizer.weight_decay", "a number >= 0", nonNegative,
                    optimizer.weightDecay))
      return false;
  if (const json *v = member(value, "max_grad_norm"))
    if (!readNumber(*v, "optimizer.max_grad_norm", "a number >= 0", nonNegative,
                    optimizer.maxGradNorm))
      return false;
  if (const json *v = member(value, "no_decay"))
    if (!readGlobs(*v, "optimizer.no_decay", optimizer.noDecay))
      return false;
  return true;
}

bool PlanParser::parseLrSchedule(const json &value,
                                 const OptimizerPlan &optimizer,
                                 LrSchedulePlan &schedule) {
  if (!expectObject(value, "lr_schedule",
                    {"warmup_steps", "decay", "min_lr", "decay_steps"}))
    return false;
  if (const json *v = member(value, "warmup_steps"))
    if (!readInt(*v, "lr_schedule.warmup_steps", 0, schedule.warmupSteps))
      return false;
  if (const json *v = member(value, "decay"))
    if (!readEnum(*v, "lr_schedule.decay", {"constant", "cosine", "linear"},
                  schedule.decay))
      return false;
  if (const json *v = member(value, "min_lr")) {
    if (!readNumber(*v, "lr_schedule.min_lr", "a number >= 0", nonNegative,
                    schedule.minLr))
      return false;
    if (schedule.minLr > optimizer.lr)
      return fail("lr_schedule.min_lr", "must be <= optimizer.lr (" +
                                            formatNumber(optimizer.lr) +
                                            "), got " + describe(*v));
  }
  if (const json *v = member(value, "decay_steps")) {
    if (!readInt(*v, "lr_schedule.decay_steps", 0, schedule.decaySteps))
      return false;
    if (schedule.decaySteps != 0 && schedule.decay != "constant" &&
        schedule.decaySteps <= schedule.warmupSteps)
      return fail("lr_schedule.decay_steps",
                  "must be 0 or > lr_schedule.warmup_steps (" +
                      std::to_string(schedule.warmupSteps) + "), got " +
                      describe(*v));
  }
  return true;
}

//===----------------------------------------------------------------------===//
// JSON text
//===----------------------------------------------------------------------===//

/// A SAX handler that builds the DOM like json::parse() does, but reports a
/// syntax error or a repeated key instead of throwing.
class DomBuilder {
public:
  /// Plans nest 3 deep; anything past this is refused (100,000 levels took
  /// gigabytes).
  static constexpr size_t kMaxDepth = 64;
  json root;
  bool syntaxError = false;
  /// Set (with the path of the container) when nesting exceeds kMaxDepth.
  std::string tooDeepPath;
  size_t errorByte = 0; // bytes read when the error was found
  std::string errorMessage;
  std::string duplicatePath; // set when a key repeats in an object

  bool null() { return insert(json(nullptr)); }
  bool boolean(bool value) { return insert(json(value)); }
  bool number_integer(json::number_integer_t value) {
    return insert(json(value));
  }
  bool number_unsigned(json::number_unsigned_t value) {
    return insert(json(value));
  }
  bool number_float(json::number_float_t value, const json::string_t &) {
    return insert(json(value));
  }
  bool string(json::string_t &value) { return insert(json(std::move(value))); }
  bool binary(json::binary_t &value) {
    return insert(json::binary(std::move(value)));
  }
  bool start_object(std::size_t) { return insert(json::object(), true); }
  bool key(json::string_t &key) {
    Frame &frame = stack.back();
    if (frame.value->find(key) != frame.value->end()) {
      duplicatePath = childPath(frame.path, key);
      return false;
    }
    frame.key = std::move(key);
    return true;
  }
  bool end_object() {
    stack.pop_back();
    return true;
  }
  bool start_array(std::size_t) { return insert(json::array(), true); }
  bool end_array() {
    stack.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string &,
                   const nlohmann::detail::exception &ex) {
    syntaxError = true;
    errorByte = position;
    errorMessage = ex.what();
    return false;
  }

private:
  struct Frame {
    json *value;
    std::string path;
    std::string key; // the key of the next member of an object
  };
  // The open containers, outermost first. A container is only added to while
  // it is the innermost one, so the pointers stay valid.
  std::vector<Frame> stack;

  bool insert(json value, bool open = false) {
    json *slot;
    std::string path;
    if (stack.empty()) {
      root = std::move(value);
      slot = &root;
    } else if (stack.back().value->is_array()) {
      json &array = *stack.back().value;
      path = indexPath(stack.back().path, array.size());
      array.push_back(std::move(value));
      slot = &array.back();
    } else {
      Frame &frame = stack.back();
      path = childPath(frame.path, frame.key);
      slot = &(*frame.value)[frame.key];
      *slot = std::move(value);
    }
    if (open) {
      if (stack.size() >= kMaxDepth) {
        tooDeepPath = path;
        return false;
      }
      stack.push_back(Frame{slot, std::move(path), ""});
    }
    return true;
  }
};

/// The reason of a nlohmann parse error, without the
/// "[json.exception.parse_error.101] parse error at line 1, column 2: "
/// prefix.
std::string parseErrorReason(const std::string &message) {
  std::string reason = message;
  size_t at = message.find("parse error");
  if (at != std::string::npos) {
    size_t colon = message.find(": ", at);
    if (colon != std::string::npos)
      reason = message.substr(colon + 2);
  }
  for (char &c : reason)
    if (c == '\n' || c == '\r')
      c = ' ';
  return reason;
}

/// The 1-based line and byte column of the last byte read, `bytesRead` bytes
/// into `text` (the end of the text if past it).
void lineAndColumn(const std::string &text, size_t bytesRead, size_t &line,
                   size_t &column) {
  size_t offset = bytesRead == 0 ? 0 : bytesRead - 1;
  if (offset > text.size())
    offset = text.size();
  line = 1;
  size_t lineStart = 0;
  for (size_t i = 0; i < offset; ++i)
    if (text[i] == '\n') {
      ++line;
      lineStart = i + 1;
    }
  column = offset - lineStart + 1;
}

bool readFile(const std::string &path, std::string &contents,
              std::string &error) {
  std::FILE *file = std::fopen(path.c_str(), "rb");
  if (!file) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  contents.clear();
  char buffer[65536];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0)
    contents.append(buffer, n);
  bool failed = std::ferror(file);
  int savedErrno = errno;
  std::fclose(file);
  if (failed) {
    error = path + ": cannot read: " + std::strerror(savedErrno);
    return false;
  }
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// Public interface
//===----------------------------------------------------------------------===//

bool parsePlan(const json &value, Plan &plan, std::string &error) {
  try {
    Plan parsed;
    PlanParser parser(error);
    if (!parser.parse(value, parsed))
      return false;
    plan = std::move(parsed);
    return true;
  } catch (const std::exception &e) {
    error = std::string("internal error while reading the plan: ") + e.what();
    return false;
  }
}

bool loadPlanFile(const std::string &path, Plan &plan, std::string &error) {
  try {
    std::string text;
    if (!readFile(path, text, error))
      return false;
    DomBuilder builder;
    if (!json::sax_parse(text, &builder)) {
      if (!builder.duplicatePath.empty()) {
        error = path + ": " + builder.duplicatePath + ": duplicate key";
        return false;
      }
      if (!builder.tooDeepPath.empty()) {
        std::string at = builder.tooDeepPath;
        if (at.size() > 32)
          at = at.substr(0, 32) + "...";
        error = path + ": " + at + ": nested deeper than " +
                std::to_string(DomBuilder::kMaxDepth) + " levels";
        return false;
      }
      size_t line = 0, column = 0;
      lineAndColumn(text, builder.errorByte, line, column);
      error = path + ":" + std::to_string(line) + ":" + std::to_string(column) +
              ": invalid JSON: " +
              (builder.syntaxError ? parseErrorReason(builder.errorMessage)
                                   : std::string("parse error"));
      return false;
    }
    if (!parsePlan(builder.root, plan, error)) {
      error = path + ": " + error;
      return false;
    }
    return true;
  } catch (const std::exception &e) {
    error = path + ": internal error while reading the plan: " + e.what();
    return false;
  }
}

json toJson(const Plan &plan) {
  const OptimizerPlan &o = plan.optimizer;
  json optimizer = json::object();
  optimizer["type"] = o.type;
  optimizer["lr"] = o.lr;
  if (o.type == "sgd") {
    optimizer["momentum"] = o.momentum;
    optimizer["dampening"] = o.dampening;
    optimizer["nesterov"] = o.nesterov;
  } else {
    optimizer["betas"] = json::array({o.beta1, o.beta2});
    optimizer["eps"] = o.eps;
  }
  optimizer["weight_decay"] = o.weightDecay;
  optimizer["max_grad_norm"] = o.maxGradNorm;
  optimizer["no_decay"] = o.noDecay;

  json result = json::object();
  result["mesh"] = {
      {"dp", plan.meshDp}, {"tp", plan.meshTp}, {"pp", plan.meshPp}};
  result["batch"] = {{"micro_batches", plan.microBatches}};
  result["zero"] = {{"stage", plan.zeroStage}, {"offload", plan.zeroOffload}};
  result["comm"] = {{"bucket_mb", plan.bucketMb},
                    {"timeout_s", plan.commTimeoutS}};
  result["precision"] = plan.precision;
  result["grad_dtype"] = plan.effectiveGradDtype();
  result["loss_scale"] = {{"init_scale", plan.lossScale.initScale},
                          {"growth_factor", plan.lossScale.growthFactor},
                          {"backoff_factor", plan.lossScale.backoffFactor},
                          {"growth_interval", plan.lossScale.growthInterval}};
  result["recompute"] = plan.recompute;
  result["attention"] = plan.attention;
  result["pipeline"] = {{"schedule", plan.pipelineSchedule},
                        {"chunks", plan.pipelineChunks},
                        {"split", plan.pipelineSplit.empty()
                                      ? json("auto")
                                      : json(plan.pipelineSplit)}};
  result["tensor_parallel"] = {{"rules", plan.tpRules},
                               {"sequence_parallel", plan.sequenceParallel}};
  result["optimizer"] = std::move(optimizer);
  result["frozen"] = plan.frozen;
  json padding = json::object();
  for (const auto &[glob, row] : plan.paddingIdx)
    padding[glob] = row;
  result["padding_idx"] = std::move(padding);
  result["lr_schedule"] = {{"warmup_steps", plan.lrSchedule.warmupSteps},
                           {"decay", plan.lrSchedule.decay},
                           {"min_lr", plan.lrSchedule.minLr},
                           {"decay_steps", plan.lrSchedule.decaySteps}};
  result["data"] = {{"inputs", plan.dataInputs},
                    {"targets", plan.dataTargets},
                    {"feeds", plan.dataFeeds},
                    {"targets_from", plan.targetsFrom}};
  return result;
}

std::optional<int64_t> shiftRightStart(const std::string &feed) {
  static const std::string prefix = "shift_right:";
  if (feed.compare(0, prefix.size(), prefix) != 0 ||
      feed.size() == prefix.size() || feed.size() > prefix.size() + 10 ||
      !std::all_of(feed.begin() + prefix.size(), feed.end(),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const int64_t start = std::stoll(feed.substr(prefix.size()));
  if (start > INT32_MAX)
    return std::nullopt;
  return start;
}

} // namespace autopar

autopar::TrainingConfig autopar::trainingConfig(const Plan &plan) {
  TrainingConfig config;
  config.optimizer = plan.optimizer;
  config.lrSchedule = plan.lrSchedule;
  config.lossScale = plan.lossScale;
  config.precision = plan.precision;
  config.microBatches = plan.microBatches;
  config.dataInputs = plan.dataInputs;
  config.dataTargets = plan.dataTargets;
  config.targetsFrom = plan.targetsFrom;
  config.commTimeoutS = plan.commTimeoutS;
  return config;
}

autopar::pipeline::ScheduleOptions
autopar::pipelineScheduleOptions(const Plan &plan) {
  pipeline::ScheduleOptions options;
  options.kind = plan.pipelineSchedule;
  options.ranks = plan.meshPp;
  options.chunks = plan.pipelineChunks;
  options.microBatches = plan.microBatches;
  return options;
}
