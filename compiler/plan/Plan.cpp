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

#include "compiler/plan/AccelerateConfig.h"
#include "compiler/plan/DeepSpeedConfig.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
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

/// Whether `value` is a JSON integer >= `min` (and an int64), put in `out`.
bool intAtLeast(const json &value, int64_t min, int64_t &out) {
  if (const auto *i = value.get_ptr<const json::number_integer_t *>()) {
    if (*i < min)
      return false;
    out = *i;
    return true;
  }
  const auto *u = value.get_ptr<const json::number_unsigned_t *>();
  if (!u || *u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
      static_cast<int64_t>(*u) < min)
    return false;
  out = static_cast<int64_t>(*u);
  return true;
}

bool positive(double v) { return v > 0; }
bool nonNegative(double v) { return v >= 0; }
bool unitInterval(double v) { return v >= 0 && v < 1; }
bool aboveOne(double v) { return v > 1; }
bool openUnitInterval(double v) { return v > 0 && v < 1; }

/// Reads values of the plan, and fails with "<key path>: <what is wrong>".
class PlanParser {
public:
  explicit PlanParser(std::string &error) : error(error) {}

  bool parse(const json &root, Plan &plan);

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
    if (intAtLeast(value, min, out))
      return true;
    return fail(path, "expected an integer >= " + std::to_string(min) +
                          ", got " + describe(value));
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

private:
  std::string &error;
};

//===----------------------------------------------------------------------===//
// The keys of the plan
//===----------------------------------------------------------------------===//

/// Reads one key's value (given at `path`) into the plan.
using KeyReader = std::function<bool(PlanParser &, const json &,
                                     const std::string &, Plan &)>;
/// A rule between this key and keys read before it, checked after it is read
/// (only when the key is given).
using KeyRule = std::function<bool(PlanParser &, const json &, Plan &)>;

/// One key of the plan: the only place that spells it. Parsing reads it,
/// toJson() prints it, and an object's "unknown key" message lists its keys
/// from here, in this order.
struct PlanKey {
  /// "zero.stage", or "frozen" at the top level.
  std::string path;
  KeyReader read;
  std::function<json(const Plan &)> print;
  KeyRule rule;
  /// The values of its object's selecting key (an optimizer type, an
  /// lr_schedule type) the key is an option of; empty for every plan.
  std::vector<std::string> onlyFor;
  /// Read before the other keys of its object are checked: it decides which
  /// keys the object may hold (optimizer.type, lr_schedule.type).
  bool selects = false;

  std::string group() const { return path.substr(0, path.find('.')); }
  std::string leaf() const {
    size_t dot = path.find('.');
    return dot == std::string::npos ? std::string() : path.substr(dot + 1);
  }
  /// The value of the selecting key of the key's object.
  const std::string &selection(const Plan &plan) const {
    static const std::string none;
    const std::string g = group();
    return g == "optimizer"     ? plan.optimizer.type
           : g == "lr_schedule" ? plan.lrSchedule.type
                                : none;
  }
  bool appliesTo(const Plan &plan) const {
    return onlyFor.empty() || std::find(onlyFor.begin(), onlyFor.end(),
                                        selection(plan)) != onlyFor.end();
  }
};

/// The field of a plan (or of a const plan) that a key reads and prints.
#define PLAN_FIELD(member)                                                     \
  [](auto &p) -> auto & { return p.member; }

template <typename Field> auto printField(Field field) {
  return [field](const Plan &plan) { return json(field(plan)); };
}

/// A key read by `read(parser, value, path, field)` into its field and
/// printed as the field's value.
template <typename Field, typename Read>
PlanKey fieldKey(const char *path, Field field, Read read) {
  return {path,
          [=](PlanParser &r, const json &v, const std::string &at, Plan &p) {
            return read(r, v, at, field(p));
          },
          printField(field)};
}

template <typename Field>
PlanKey intKey(const char *path, int64_t min, Field field) {
  return fieldKey(path, field,
                  [=](PlanParser &r, auto &v, auto &at, auto &out) {
                    return r.readInt(v, at, min, out);
                  });
}

template <typename Field>
PlanKey numberKey(const char *path, const char *expected, bool (*ok)(double),
                  Field field) {
  return fieldKey(path, field,
                  [=](PlanParser &r, auto &v, auto &at, auto &out) {
                    return r.readNumber(v, at, expected, ok, out);
                  });
}

template <typename Field>
PlanKey enumKey(const char *path, std::vector<const char *> allowed,
                Field field) {
  return fieldKey(path, field,
                  [=](PlanParser &r, auto &v, auto &at, auto &out) {
                    return r.readEnum(v, at, allowed, out);
                  });
}

template <typename Field> PlanKey boolKey(const char *path, Field field) {
  return fieldKey(path, field, [](PlanParser &r, auto &v, auto &at, auto &out) {
    return r.readBool(v, at, out);
  });
}

template <typename Field> PlanKey stringKey(const char *path, Field field) {
  return fieldKey(path, field, [](PlanParser &r, auto &v, auto &at, auto &out) {
    return r.readString(v, at, out);
  });
}

template <typename Field> PlanKey globsKey(const char *path, Field field) {
  return fieldKey(path, field, [](PlanParser &r, auto &v, auto &at, auto &out) {
    return r.readGlobs(v, at, out);
  });
}

PlanKey withRule(PlanKey key, KeyRule rule) {
  key.rule = std::move(rule);
  return key;
}

PlanKey onlyFor(std::vector<std::string> selections, PlanKey key) {
  key.onlyFor = std::move(selections);
  return key;
}

// DeepSpeed's schedulers as lr_schedule types.
constexpr const char *kDsWarmup = "deepspeed_warmup_lr";
constexpr const char *kDsWarmupDecay = "deepspeed_warmup_decay_lr";
constexpr const char *kDsWarmupCosine = "deepspeed_warmup_cosine_lr";

/// lr_schedule.decay_steps: past the warmup where a decay follows it.
/// WarmupCosineLR divides by total_num_steps - max(2, warmup_num_steps).
bool checkDecaySteps(PlanParser &r, const json &v, Plan &plan) {
  const LrSchedulePlan &s = plan.lrSchedule;
  int64_t warmup = s.warmupSteps;
  if (s.type == kDsWarmupDecay)
    return true; // as DeepSpeed, decays from wherever the warmup ends
  if (s.type == kDsWarmupCosine)
    warmup = std::max<int64_t>(2, warmup);
  else if (s.decay == "constant")
    return true;
  if (s.decaySteps == 0 || s.decaySteps > warmup)
    return true;
  const std::string bound = s.type == kDsWarmupCosine
                                ? "max(2, lr_schedule.warmup_steps) ("
                                : "lr_schedule.warmup_steps (";
  return r.fail("lr_schedule.decay_steps", "must be 0 or > " + bound +
                                               std::to_string(warmup) +
                                               "), got " + describe(v));
}

bool readZeroStage(PlanParser &r, const json &v, const std::string &at,
                   Plan &plan) {
  int64_t stage = -1;
  if (!intAtLeast(v, 0, stage) || stage > 3)
    return r.fail(at, "expected 0, 1, 2 or 3, got " + describe(v));
  plan.zeroStage = stage;
  return true;
}

bool readGradDtype(PlanParser &r, const json &v, const std::string &at,
                   Plan &plan) {
  std::string dtype;
  if (!r.readEnum(v, at, {"fp32", "bf16", "fp16"}, dtype))
    return false;
  if (dtype != "fp32" && dtype != plan.paramDtype())
    return r.fail(at, "\"" + dtype + "\" needs the parameters in " + dtype +
                          ", got precision \"" + plan.precision +
                          "\" (gradients are fp32 or the parameters' type)");
  plan.gradDtype = dtype;
  return true;
}

bool readPipelineSplit(PlanParser &r, const json &v, const std::string &at,
                       Plan &plan) {
  const auto *s = v.get_ptr<const json::string_t *>();
  if (s && *s == "auto")
    return true;
  if (!v.is_array())
    return r.fail(at, "expected \"auto\" or a list of layer boundaries, got " +
                          describe(v));
  int64_t last = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t boundary = 0;
    std::string key = indexPath(at, i);
    if (!r.readInt(v[i], key, 1, boundary))
      return false;
    if (boundary <= last)
      return r.fail(key, "layer boundaries must increase, got " +
                             std::to_string(boundary) + " after " +
                             std::to_string(last));
    last = boundary;
    plan.pipelineSplit.push_back(boundary);
  }
  int64_t stages = plan.pipelineStages();
  if (static_cast<int64_t>(plan.pipelineSplit.size()) != stages - 1)
    return r.fail(at, "mesh.pp = " + std::to_string(plan.meshPp) + " x " +
                          std::to_string(plan.pipelineChunks) +
                          " chunks makes " + std::to_string(stages) +
                          " stages, cut at " + std::to_string(stages - 1) +
                          " layer boundaries, got " +
                          std::to_string(plan.pipelineSplit.size()));
  return true;
}

bool checkPipelineChunks(PlanParser &r, const json &v, Plan &plan) {
  bool interleaved = plan.pipelineSchedule == "interleaved";
  if (interleaved && plan.pipelineChunks < 2)
    return r.fail("pipeline.chunks",
                  "the interleaved schedule needs at least 2 model chunks "
                  "per rank, got " +
                      describe(v));
  if (!interleaved && plan.pipelineChunks != 1)
    return r.fail("pipeline.chunks",
                  "only the interleaved schedule runs several model chunks "
                  "per rank (" +
                      plan.pipelineSchedule + " got " + describe(v) + ")");
  return true;
}

bool readBetas(PlanParser &r, const json &v, const std::string &at,
               Plan &plan) {
  if (!v.is_array() || v.size() != 2) {
    std::string got = describe(v);
    if (v.is_array())
      got = "an array of " + std::to_string(v.size());
    return r.fail(at, "expected an array of 2 numbers in [0, 1), got " + got);
  }
  OptimizerPlan &o = plan.optimizer;
  return r.readNumber(v[0], indexPath(at, 0), "a number in [0, 1)",
                      unitInterval, o.beta1) &&
         r.readNumber(v[1], indexPath(at, 1), "a number in [0, 1)",
                      unitInterval, o.beta2);
}

bool checkNesterov(PlanParser &r, const json &, Plan &plan) {
  const OptimizerPlan &o = plan.optimizer;
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    return r.fail("optimizer.nesterov",
                  "Nesterov momentum requires momentum > 0 and dampening == 0 "
                  "(as in torch.optim.SGD), got momentum " +
                      formatNumber(o.momentum) + " and dampening " +
                      formatNumber(o.dampening));
  return true;
}

bool readPaddingIdx(PlanParser &r, const json &v, const std::string &at,
                    Plan &plan) {
  if (!v.is_object())
    return r.fail(at, "expected an object of glob: row, got " + describe(v));
  plan.paddingIdx.clear();
  for (const auto &[glob, row] : v.items()) {
    std::string path = at + "." + glob;
    if (std::string problem = checkGlob(glob); !problem.empty())
      return r.fail(path, problem);
    int64_t index = 0;
    if (!r.readInt(row, path, 0, index))
      return false;
    plan.paddingIdx.emplace_back(glob, index);
  }
  return true;
}

json printPaddingIdx(const Plan &plan) {
  json padding = json::object();
  for (const auto &[glob, row] : plan.paddingIdx)
    padding[glob] = row;
  return padding;
}

bool readFeeds(PlanParser &r, const json &v, const std::string &at,
               Plan &plan) {
  if (!v.is_object())
    return r.fail(at, "expected an object of graph input: value, got " +
                          describe(v));
  plan.dataFeeds.clear();
  for (const auto &[name, value] : v.items()) {
    std::string path = at + "." + name;
    // "shift_right:ID": the targets shifted right by one, ID first (a
    // decoder's inputs, as Hugging Face's shift_tokens_right).
    const auto *s = value.get_ptr<const json::string_t *>();
    if (s && s->rfind("shift_right:", 0) == 0) {
      if (!shiftRightStart(*s))
        return r.fail(path, "expected \"shift_right:ID\" with a token id "
                            ">= 0, got " +
                                describe(value));
      plan.dataFeeds[name] = *s;
      continue;
    }
    std::string feed;
    if (!r.readEnum(value, path, {"ones", "zeros", "arange", "shift_right:ID"},
                    feed))
      return false;
    plan.dataFeeds[name] = feed;
  }
  return true;
}

bool readDropoutRatio(PlanParser &r, const json &v, const std::string &at,
                      Plan &plan) {
  const auto *s = v.get_ptr<const json::string_t *>();
  if (s && *s == "model") {
    plan.dropoutRatio = -1;
    return true;
  }
  return r.readNumber(
      v, at, "\"model\" or a number in [0, 1)",
      [](double x) { return x >= 0 && x < 1; }, plan.dropoutRatio);
}

bool readPadVocabMultiple(PlanParser &r, const json &v, const std::string &at,
                          Plan &plan) {
  const auto *s = v.get_ptr<const json::string_t *>();
  if (s && *s == "auto") {
    plan.padVocabMultiple = 0;
    return true;
  }
  if (!intAtLeast(v, 1, plan.padVocabMultiple))
    return r.fail(at, "expected \"auto\" or an integer >= 1, got " +
                          describe(v));
  return true;
}

/// Every key of the plan, in the order of docs/plan.md. A key comes after
/// the keys its rule reads.
const std::vector<PlanKey> &planKeys() {
  static const std::vector<PlanKey> keys = {
      intKey("mesh.dp", 1, PLAN_FIELD(meshDp)),
      intKey("mesh.tp", 1, PLAN_FIELD(meshTp)),
      intKey("mesh.pp", 1, PLAN_FIELD(meshPp)),
      intKey("mesh.cp", 1, PLAN_FIELD(meshCp)),
      intKey("batch.micro_batches", 1, PLAN_FIELD(microBatches)),
      intKey("batch.global_batch", 0, PLAN_FIELD(globalBatch)),
      {"zero.stage", readZeroStage, printField(PLAN_FIELD(zeroStage))},
      withRule(
          enumKey("zero.offload", {"none", "cpu", "nvme"},
                  PLAN_FIELD(zeroOffload)),
          [](PlanParser &r, const json &, Plan &plan) {
            if (plan.zeroOffload == "none" || plan.zeroStage != 0)
              return true;
            return r.fail("zero.offload",
                          "\"" + plan.zeroOffload +
                              "\" needs zero.stage 1, 2 or 3, got "
                              "zero.stage 0");
          }),
      stringKey("zero.nvme_path", PLAN_FIELD(zeroNvmePath)),
      numberKey("zero.nvme_chunk_mb", "a number > 0", positive,
                PLAN_FIELD(zeroNvmeChunkMb)),
      enumKey("zero.offload_params", {"none", "nvme"},
              PLAN_FIELD(zeroOffloadParams)),
      intKey("zero.shard_size", 0, PLAN_FIELD(zeroShardSize)),
      numberKey("comm.bucket_mb", "a number > 0", positive,
                PLAN_FIELD(bucketMb)),
      numberKey("comm.timeout_s", "a number > 0", positive,
                PLAN_FIELD(commTimeoutS)),
      enumKey("precision", {"fp32", "bf16-mixed", "fp16-mixed"},
              PLAN_FIELD(precision)),
      {"grad_dtype", readGradDtype,
       [](const Plan &plan) { return json(plan.effectiveGradDtype()); }},
      numberKey("loss_scale.init_scale", "a number > 0", positive,
                PLAN_FIELD(lossScale.initScale)),
      numberKey("loss_scale.growth_factor", "a number > 1", aboveOne,
                PLAN_FIELD(lossScale.growthFactor)),
      numberKey("loss_scale.backoff_factor", "a number in (0, 1)",
                openUnitInterval, PLAN_FIELD(lossScale.backoffFactor)),
      intKey("loss_scale.growth_interval", 1,
             PLAN_FIELD(lossScale.growthInterval)),
      intKey("loss_scale.hysteresis", 1, PLAN_FIELD(lossScale.hysteresis)),
      numberKey("loss_scale.min_scale", "a number >= 0", nonNegative,
                PLAN_FIELD(lossScale.minScale)),
      enumKey("recompute", {"none", "selective", "full"},
              PLAN_FIELD(recompute)),
      withRule(enumKey("pipeline.schedule",
                       {"gpipe", "1f1b", "interleaved", "zb-h1"},
                       PLAN_FIELD(pipelineSchedule)),
               [](PlanParser &, const json &, Plan &plan) {
                 // An interleaved schedule runs 2 chunks unless told.
                 plan.pipelineChunks =
                     plan.pipelineSchedule == "interleaved" ? 2 : 1;
                 return true;
               }),
      withRule(intKey("pipeline.chunks", 1, PLAN_FIELD(pipelineChunks)),
               checkPipelineChunks),
      {"pipeline.split", readPipelineSplit,
       [](const Plan &plan) {
         return plan.pipelineSplit.empty() ? json("auto")
                                           : json(plan.pipelineSplit);
       }},
      enumKey("tensor_parallel.rules", {"auto"}, PLAN_FIELD(tpRules)),
      boolKey("tensor_parallel.sequence_parallel",
              PLAN_FIELD(sequenceParallel)),
      withRule(enumKey("context_parallel.mode",
                       {"all_gather", "ring", "ulysses"},
                       PLAN_FIELD(contextParallelMode)),
               [](PlanParser &, const json &, Plan &plan) {
                 // Ulysses: every rank attends over all of the sequence
                 // for its heads, balanced without zig-zag chunks.
                 if (plan.contextParallelMode == "ulysses")
                   plan.contextParallelLoadBalance = "none";
                 return true;
               }),
      withRule(enumKey("context_parallel.load_balance", {"zigzag", "none"},
                       PLAN_FIELD(contextParallelLoadBalance)),
               [](PlanParser &r, const json &, Plan &plan) {
                 if (plan.contextParallelMode != "ulysses" ||
                     plan.contextParallelLoadBalance == "none")
                   return true;
                 return r.fail("context_parallel.load_balance",
                               "\"zigzag\" balances \"all_gather\" mode's "
                               "causal blocks; \"ulysses\" gives each rank "
                               "the whole sequence of its heads (use "
                               "\"none\")");
               }),
      [] {
        PlanKey type = withRule(enumKey("optimizer.type", {"adamw", "sgd"},
                                        PLAN_FIELD(optimizer.type)),
                                [](PlanParser &, const json &, Plan &plan) {
                                  // torch.optim.AdamW defaults to
                                  // weight_decay=0.01, torch.optim.SGD to 0.
                                  plan.optimizer.weightDecay =
                                      plan.optimizer.type == "adamw" ? 0.01 : 0;
                                  return true;
                                });
        type.selects = true;
        return type;
      }(),
      numberKey("optimizer.lr", "a number > 0", positive,
                PLAN_FIELD(optimizer.lr)),
      onlyFor(
          {"adamw"},
          {"optimizer.betas", readBetas,
           [](const Plan &plan) {
             return json::array({plan.optimizer.beta1, plan.optimizer.beta2});
           }}),
      onlyFor({"adamw"}, numberKey("optimizer.eps", "a number >= 0", nonNegative,
                                 PLAN_FIELD(optimizer.eps))),
      onlyFor({"sgd"}, numberKey("optimizer.momentum", "a number >= 0",
                               nonNegative, PLAN_FIELD(optimizer.momentum))),
      onlyFor({"sgd"}, numberKey("optimizer.dampening", "a number >= 0",
                               nonNegative, PLAN_FIELD(optimizer.dampening))),
      onlyFor({"sgd"}, withRule(boolKey("optimizer.nesterov",
                                      PLAN_FIELD(optimizer.nesterov)),
                              checkNesterov)),
      numberKey("optimizer.weight_decay", "a number >= 0", nonNegative,
                PLAN_FIELD(optimizer.weightDecay)),
      numberKey("optimizer.max_grad_norm", "a number >= 0", nonNegative,
                PLAN_FIELD(optimizer.maxGradNorm)),
      globsKey("optimizer.no_decay", PLAN_FIELD(optimizer.noDecay)),
      globsKey("frozen", PLAN_FIELD(frozen)),
      globsKey("lora.targets", PLAN_FIELD(lora.targets)),
      intKey("lora.r", 1, PLAN_FIELD(lora.r)),
      numberKey("lora.alpha", "a number > 0", positive, PLAN_FIELD(lora.alpha)),
      numberKey(
          "lora.dropout", "a number in [0, 1)",
          [](double x) { return x >= 0 && x < 1; }, PLAN_FIELD(lora.dropout)),
      stringKey("lora.init_adapter", PLAN_FIELD(lora.initAdapter)),
      globsKey("lora.also_train", PLAN_FIELD(lora.alsoTrain)),
      stringKey("lora.module_prefix", PLAN_FIELD(lora.modulePrefix)),
      globsKey("quantize.weights", PLAN_FIELD(quantize.weights)),
      enumKey("quantize.type", {"nf4", "int8"}, PLAN_FIELD(quantize.type)),
      intKey("quantize.block_size", 1, PLAN_FIELD(quantize.blockSize)),
      withRule(boolKey("quantize.double_quant", PLAN_FIELD(quantize.doubleQuant)),
               [](PlanParser &r, const json &, Plan &plan) {
                 if (!plan.quantize.doubleQuant || plan.quantize.type == "nf4")
                   return true;
                 return r.fail("quantize.double_quant",
                               "true is for type \"nf4\" (bitsandbytes' "
                               "compress_statistics), got type \"" +
                                   plan.quantize.type + "\"");
               }),
      {"padding_idx", readPaddingIdx, printPaddingIdx},
      [] {
        PlanKey type = withRule(
            enumKey("lr_schedule.type",
                    {"warmup_decay", kDsWarmup, kDsWarmupDecay, kDsWarmupCosine},
                    PLAN_FIELD(lrSchedule.type)),
            [](PlanParser &, const json &, Plan &plan) {
              // DeepSpeed's warmup_num_steps defaults to 1000.
              if (plan.lrSchedule.type != "warmup_decay")
                plan.lrSchedule.warmupSteps = 1000;
              return true;
            });
        type.selects = true;
        return type;
      }(),
      intKey("lr_schedule.warmup_steps", 0, PLAN_FIELD(lrSchedule.warmupSteps)),
      onlyFor({"warmup_decay"},
              enumKey("lr_schedule.decay", {"constant", "cosine", "linear"},
                      PLAN_FIELD(lrSchedule.decay))),
      onlyFor({"warmup_decay"},
              withRule(numberKey("lr_schedule.min_lr", "a number >= 0",
                                 nonNegative, PLAN_FIELD(lrSchedule.minLr)),
                       [](PlanParser &r, const json &v, Plan &plan) {
                         if (plan.lrSchedule.minLr <= plan.optimizer.lr)
                           return true;
                         return r.fail("lr_schedule.min_lr",
                                       "must be <= optimizer.lr (" +
                                           formatNumber(plan.optimizer.lr) +
                                           "), got " + describe(v));
                       })),
      onlyFor({"warmup_decay", kDsWarmupDecay, kDsWarmupCosine},
              withRule(intKey("lr_schedule.decay_steps", 0,
                              PLAN_FIELD(lrSchedule.decaySteps)),
                       checkDecaySteps)),
      onlyFor({kDsWarmup, kDsWarmupDecay, kDsWarmupCosine},
              enumKey("lr_schedule.warmup_type", {"log", "linear"},
                      PLAN_FIELD(lrSchedule.warmupType))),
      onlyFor({kDsWarmup, kDsWarmupDecay},
              numberKey("lr_schedule.warmup_min_lr", "a number >= 0",
                        nonNegative, PLAN_FIELD(lrSchedule.warmupMinLr))),
      onlyFor({kDsWarmupCosine},
              numberKey("lr_schedule.warmup_min_ratio", "a number >= 0",
                        nonNegative, PLAN_FIELD(lrSchedule.warmupMinRatio))),
      onlyFor({kDsWarmupCosine},
              numberKey("lr_schedule.cos_min_ratio", "a number >= 0",
                        nonNegative, PLAN_FIELD(lrSchedule.cosMinRatio))),
      stringKey("data.inputs", PLAN_FIELD(dataInputs)),
      stringKey("data.targets", PLAN_FIELD(dataTargets)),
      {"data.feeds", readFeeds, printField(PLAN_FIELD(dataFeeds))},
      enumKey("data.targets_from", {"next_tokens", "tokens"},
              PLAN_FIELD(targetsFrom)),
      enumKey("attention", {"fused", "unfused"}, PLAN_FIELD(attention)),
      enumKey("attention_backend", {"auto", "cudnn", "own"},
              PLAN_FIELD(attentionBackend)),
      {"dropout.ratio", readDropoutRatio,
       [](const Plan &plan) {
         return plan.dropoutRatio < 0 ? json("model") : json(plan.dropoutRatio);
       }},
      {"pad_vocab_multiple", readPadVocabMultiple,
       [](const Plan &plan) {
         return plan.padVocabMultiple ? json(plan.padVocabMultiple)
                                      : json("auto");
       }},
  };
  return keys;
}

#undef PLAN_FIELD

/// The rules between keys of different objects, checked once every key is
/// read.
bool checkPlan(PlanParser &r, const Plan &plan) {
  // The other lora keys say how to adapt what lora.targets names.
  const LoraPlan lora;
  if (!plan.lora.enabled() &&
      (plan.lora.r != lora.r || plan.lora.alpha != lora.alpha ||
       plan.lora.dropout != lora.dropout || !plan.lora.initAdapter.empty() ||
       !plan.lora.alsoTrain.empty() || !plan.lora.modulePrefix.empty()))
    return r.fail("lora.targets", "the lora keys need lora.targets (globs "
                                  "of the weights to adapt), got none");
  const QuantizePlan quantize;
  if (!plan.quantize.enabled() &&
      (plan.quantize.type != quantize.type ||
       plan.quantize.blockSize != quantize.blockSize ||
       plan.quantize.doubleQuant != quantize.doubleQuant))
    return r.fail("quantize.weights", "the quantize keys need "
                                      "quantize.weights (globs of the "
                                      "weights to quantize), got none");
  if (plan.pipelineSchedule == "interleaved" && plan.microBatches % plan.meshPp)
    return r.fail("batch.micro_batches",
                  "the interleaved schedule runs the micro-batches in groups "
                  "of mesh.pp = " +
                      std::to_string(plan.meshPp) + ", which does not divide " +
                      std::to_string(plan.microBatches));
  // Pipeline parallelism: with dp, tp, ZeRO-1 and mixed precision, on
  // both targets. ZeRO-2 and -3 shard what every micro-batch's backward adds
  // to (the gradients, the parameters): with a pipeline's micro-batches in
  // flight that is a reduce-scatter (and a gather) per micro-batch per
  // stage, which DeepSpeed refuses too.
  if (plan.zeroOffload == "nvme" && plan.zeroNvmePath.empty())
    return r.fail("zero.nvme_path",
                  "offload \"nvme\" needs the folder of the swap files");
  if (plan.zeroOffload != "nvme" && !plan.zeroNvmePath.empty())
    return r.fail("zero.nvme_path", "is for zero.offload \"nvme\", got \"" +
                                        plan.zeroOffload + "\"");
  if (plan.zeroOffload == "nvme" && plan.meshPp > 1)
    return r.fail("zero.offload",
                  "\"nvme\" with pipeline parallelism is not supported yet");
  if (plan.zeroOffloadParams == "nvme" && plan.zeroStage != 3)
    return r.fail("zero.offload_params",
                  "\"nvme\" offloads ZeRO-3's parameter shards; it needs "
                  "zero.stage 3, got " +
                      std::to_string(plan.zeroStage));
  if (plan.zeroOffloadParams == "nvme" && plan.zeroOffload != "nvme")
    return r.fail("zero.offload_params",
                  "\"nvme\" needs the optimizer state on NVMe too "
                  "(zero.offload \"nvme\"), got zero.offload \"" +
                      plan.zeroOffload + "\"");
  if (plan.zeroShardSize > 0 && plan.zeroStage == 0)
    return r.fail("zero.shard_size",
                  std::to_string(plan.zeroShardSize) +
                      " shards ZeRO's states; it needs zero.stage 1, 2 or 3");
  if (plan.zeroShardSize > 0 && plan.meshDp % plan.zeroShardSize != 0)
    return r.fail("zero.shard_size", std::to_string(plan.zeroShardSize) +
                                         " does not divide mesh.dp = " +
                                         std::to_string(plan.meshDp));
  if (plan.meshPp > 1 && plan.zeroStage > 1)
    return r.fail("zero.stage",
                  "ZeRO-" + std::to_string(plan.zeroStage) +
                      " with pipeline parallelism is not supported (it would "
                      "reduce-scatter the gradients every micro-batch; use "
                      "zero.stage 1, as DeepSpeed's pipeline engine does)");
  return true;
}

bool PlanParser::parse(const json &root, Plan &plan) {
  const std::vector<PlanKey> &keys = planKeys();
  // The objects (and top-level values), in the order of their first key.
  std::vector<std::string> groups;
  for (const PlanKey &key : keys)
    if (groups.empty() || groups.back() != key.group())
      groups.push_back(key.group());
  std::vector<const char *> groupNames;
  for (const std::string &group : groups)
    groupNames.push_back(group.c_str());
  if (!root.is_object())
    return fail("", "expected a JSON object at the top level, got " +
                        describe(root));
  if (!expectObject(root, "", groupNames))
    return false;

  auto readKey = [&](const PlanKey &key, const json &value) {
    std::string path = key.path;
    return key.read(*this, value, path, plan) &&
           (!key.rule || key.rule(*this, value, plan));
  };
  for (const std::string &group : groups) {
    const json *object = member(root, group.c_str());
    if (!object)
      continue;
    std::vector<const PlanKey *> members;
    for (const PlanKey &key : keys)
      if (key.group() == group)
        members.push_back(&key);
    if (members.front()->leaf().empty()) {
      if (!readKey(*members.front(), *object))
        return false;
      continue;
    }
    if (!object->is_object())
      return fail(group, "expected an object, got " + describe(*object));
    for (const PlanKey *key : members)
      if (key->selects)
        if (const json *v = member(*object, key->leaf().c_str()))
          if (!readKey(*key, *v))
            return false;
    std::vector<std::string> leaves;
    for (const PlanKey *key : members)
      if (key->appliesTo(plan))
        leaves.push_back(key->leaf());
    for (auto it = object->begin(); it != object->end(); ++it) {
      auto known =
          std::find_if(members.begin(), members.end(), [&](const PlanKey *key) {
            return key->leaf() == it.key();
          });
      std::string path = childPath(group, it.key());
      if (known == members.end()) {
        std::string expected;
        for (const std::string &leaf : leaves)
          expected += (expected.empty() ? "" : ", ") + leaf;
        return fail(path, "unknown key (expected one of: " + expected + ")");
      }
      if (!(*known)->appliesTo(plan)) {
        std::string only;
        for (const std::string &value : (*known)->onlyFor)
          only += (only.empty() ? "" : ", ") + value;
        return fail(path, "not an option of " + (*known)->selection(plan) +
                              " (only of " + only + ")");
      }
    }
    for (const PlanKey *key : members)
      if (!key->selects)
        if (const json *v = member(*object, key->leaf().c_str()))
          if (!readKey(*key, *v))
            return false;
  }
  return checkPlan(*this, plan);
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

namespace {

/// The JSON of the plan file at `path`, with loadPlanFile's errors.
bool readPlanJson(const std::string &path, json &value, std::string &error) {
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
  value = std::move(builder.root);
  return true;
}

} // namespace

bool loadPlanFiles(const std::vector<PlanLayer> &layers, int64_t worldSize,
                   Plan &plan, std::vector<std::string> &noEffect,
                   std::string &error) {
  try {
    json merged = json::object();
    std::string names;
    for (const PlanLayer &layer : layers) {
      json value;
      // A foreign config (accelerate's YAML, DeepSpeed's JSON) becomes a
      // layer of autopar's format.
      const bool accelerate = isAccelerateConfigPath(layer.path);
      std::string text;
      if (accelerate ? !(readFile(layer.path, text, error) &&
                         parseYaml(text, layer.path, value, error))
                     : !readPlanJson(layer.path, value, error))
        return false;
      const bool deepspeed =
          !accelerate && (layer.deepspeed || isDeepSpeedConfig(value));
      if (accelerate || deepspeed) {
        DeepSpeedContext ctx;
        ctx.planSoFar = merged;
        ctx.worldSize = worldSize;
        json translated;
        std::vector<std::string> keys;
        if (accelerate
                ? !accelerateToPlan(value, ctx, readPlanJson, translated, keys,
                                    error)
                : !deepSpeedToPlan(value, ctx, translated, keys, error)) {
          error = layer.path + ": " + error;
          return false;
        }
        if (!keys.empty()) {
          std::string line = layer.path + ": accepted with no effect here: ";
          for (size_t k = 0; k < keys.size(); ++k)
            line += (k ? ", " : "") + keys[k];
          noEffect.push_back(line);
        }
        value = std::move(translated);
        // A DeepSpeed scheduler is the whole schedule: nothing of an
        // earlier file's lr_schedule (another type's keys) remains.
        if (value.contains("lr_schedule"))
          merged.erase("lr_schedule");
      }
      Plan alone;
      if (!parsePlan(value, alone, error)) {
        error = layer.path + ": " + error;
        return false;
      }
      merged.merge_patch(value);
      names += (names.empty() ? "" : " + ") + layer.path;
    }
    if (!parsePlan(merged, plan, error)) {
      error = names + ": " + error;
      return false;
    }
    return true;
  } catch (const std::exception &e) {
    error = "internal error while reading the plans: " + std::string(e.what());
    return false;
  }
}

bool loadPlanFile(const std::string &path, Plan &plan, std::string &error) {
  try {
    json value;
    if (!readPlanJson(path, value, error))
      return false;
    if (!parsePlan(value, plan, error)) {
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
  json result = json::object();
  for (const PlanKey &key : planKeys()) {
    if (!key.appliesTo(plan))
      continue;
    if (key.leaf().empty())
      result[key.path] = key.print(plan);
    else
      result[key.group()][key.leaf()] = key.print(plan);
  }
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

int64_t autopar::padVocabMultiple(const Plan &plan, std::string_view target) {
  if (plan.padVocabMultiple)
    return plan.padVocabMultiple;
  return target == "cuda" ? 64 : 1;
}

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
  config.bucketMb = plan.bucketMb;
  config.attentionBackend = plan.attentionBackend;
  config.lora = plan.lora;
  config.quantize = plan.quantize;
  if (plan.zeroOffload == "nvme") {
    config.nvmePath = plan.zeroNvmePath;
    config.nvmeChunkMb = plan.zeroNvmeChunkMb;
    config.nvmeParams = plan.zeroOffloadParams == "nvme";
  }
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
