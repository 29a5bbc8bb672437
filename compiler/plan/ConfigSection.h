//===- ConfigSection.h - reading another tool's config as a plan -*- C++
//-*-===//
//
// The readers of foreign configs (DeepSpeed JSON, accelerate YAML) walk
// their objects with Section: each key must be read by one of the readers or
// listed as having no effect, else it is "unknown".
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PLAN_CONFIGSECTION_H
#define AUTOPAR_COMPILER_PLAN_CONFIGSECTION_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace autopar::config {

using nlohmann::json;

inline bool isAuto(const json &v) { return v.is_string() && v == "auto"; }

/// One object of the config being read: each key it holds must be read by
/// one of the readers (or listed as having no effect), else "unknown key".
class Section {
public:
  /// `kind` names the format in "unknown key of <kind>".
  Section(const json &value, std::string path, std::string &error,
          std::string kind = "a DeepSpeed config")
      : value(value), path(std::move(path)), error(error),
        kind(std::move(kind)) {}

  std::string at(const std::string &key) const {
    return path.empty() ? key : path + "." + key;
  }
  bool fail(const std::string &key, const std::string &what) {
    error = at(key) + ": " + what;
    return false;
  }
  /// The value of `key`, or null when absent; marks it read.
  const json *get(const std::string &key) {
    seen.insert(key);
    auto it = value.find(key);
    return it == value.end() ? nullptr : &*it;
  }
  /// `key`'s value into `out` where `ok` takes it; absent, null and
  /// "auto" leave `out` unset.
  template <typename T>
  bool read(const std::string &key, bool (*ok)(const json &),
            const std::string &expected, std::optional<T> &out) {
    const json *v = get(key);
    if (!v || isAuto(*v) || v->is_null())
      return true;
    if (!ok(*v))
      return fail(key,
                  "expected " + expected + " or \"auto\", got " + v->dump());
    out = v->get<T>();
    return true;
  }
  /// An integer >= min.
  bool readInt(const std::string &key, int64_t min,
               std::optional<int64_t> &out) {
    if (!read(
            key, [](const json &v) { return v.is_number_integer(); },
            "an integer >= " + std::to_string(min), out))
      return false;
    if (out && *out < min)
      return fail(key, "expected an integer >= " + std::to_string(min) +
                           " or \"auto\", got " + std::to_string(*out));
    return true;
  }
  bool readNumber(const std::string &key, std::optional<double> &out) {
    return read(
        key, [](const json &v) { return v.is_number(); }, "a number", out);
  }
  bool readBool(const std::string &key, std::optional<bool> &out) {
    return read(
        key, [](const json &v) { return v.is_boolean(); }, "true, false", out);
  }
  /// Keys of DeepSpeed's own engine that change nothing here.
  void noEffect(std::initializer_list<const char *> keys,
                std::vector<std::string> &list) {
    for (const char *key : keys)
      if (get(key))
        list.push_back(at(key));
  }
  /// The first key no reader took.
  bool finish() {
    for (const auto &item : value.items())
      if (!seen.count(item.key()))
        return fail(item.key(), "unknown key of " + kind);
    return true;
  }

private:
  const json &value;
  std::string path;
  std::string &error;
  std::string kind;
  std::set<std::string> seen;
};

/// An object-valued key, or null; `error` when it is something else.
inline bool objectAt(Section &s, const std::string &key, const json *&out) {
  out = s.get(key);
  if (out && !out->is_object())
    return s.fail(key, "expected an object, got " + out->dump());
  return true;
}

/// The value the plan so far gives `path` ("a.b"), or null.
inline const json *planValue(const json &plan, const std::string &a,
                             const std::string &b = "") {
  auto it = plan.find(a);
  if (it == plan.end())
    return nullptr;
  if (b.empty())
    return &*it;
  if (!it->is_object())
    return nullptr;
  auto jt = it->find(b);
  return jt == it->end() ? nullptr : &*jt;
}

inline int64_t planInt(const json &plan, const std::string &a,
                       const std::string &b, int64_t fallback) {
  const json *v = planValue(plan, a, b);
  return v && v->is_number_integer() ? v->get<int64_t>() : fallback;
}

/// The data-parallel ranks of a world of `world` ranks over the plan so
/// far's mesh.tp x mesh.pp into `dp`; false with `key`: "<what> is not a
/// multiple of mesh.tp x mesh.pp (N)".
inline bool dataParallelRanks(Section &s, const std::string &key,
                              const std::string &what, int64_t world,
                              const json &planSoFar, int64_t &dp) {
  const int64_t tp = planInt(planSoFar, "mesh", "tp", 1),
                pp = planInt(planSoFar, "mesh", "pp", 1);
  if (world % (tp * pp) != 0)
    return s.fail(key, what + " is not a multiple of mesh.tp x mesh.pp (" +
                           std::to_string(tp * pp) + ")");
  dp = world / (tp * pp);
  return true;
}

} // namespace autopar::config

#endif // AUTOPAR_COMPILER_PLAN_CONFIGSECTION_H
