//===- Cluster.cpp - the machines a plan runs on --------------------------===//

#include "compiler/Cluster.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

using namespace autopar;
using json = nlohmann::json;

namespace {

/// Checks that `object` has only the keys `known`; false with `error`.
bool onlyKeys(const json &object, const std::string &where,
              std::initializer_list<const char *> known, std::string &error) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool found = false;
    for (const char *k : known)
      found = found || it.key() == k;
    if (!found) {
      error = where + it.key() + ": unknown key";
      return false;
    }
  }
  return true;
}

bool positiveNumber(const json &object, const std::string &where,
                    const char *key, double &out, std::string &error) {
  auto it = object.find(key);
  if (it == object.end()) {
    error = where + key + ": missing";
    return false;
  }
  if (!it->is_number() || !(it->get<double>() > 0)) {
    error = where + key + ": must be a number > 0";
    return false;
  }
  out = it->get<double>();
  return true;
}

bool positiveInteger(const json &object, const char *key, int64_t &out,
                     std::string &error) {
  auto it = object.find(key);
  if (it == object.end()) {
    error = std::string(key) + ": missing";
    return false;
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 1) {
    error = std::string(key) + ": must be an integer >= 1";
    return false;
  }
  out = it->get<int64_t>();
  return true;
}

} // namespace

bool autopar::parseCluster(const json &j, Cluster &c, std::string &error) {
  if (!j.is_object()) {
    error = "must be a JSON object";
    return false;
  }
  if (!onlyKeys(j, "",
                {"gpu", "gpus_per_node", "nodes", "intra_node_gbps",
                 "inter_node_gbps"},
                error))
    return false;
  auto gpu = j.find("gpu");
  if (gpu == j.end()) {
    error = "gpu: missing";
    return false;
  }
  if (!gpu->is_object()) {
    error = "gpu: must be an object";
    return false;
  }
  if (!onlyKeys(*gpu, "gpu.",
                {"name", "peak_tflops", "memory_gb", "memory_bandwidth_gbps"},
                error))
    return false;
  auto name = gpu->find("name");
  if (name != gpu->end() && !name->is_string()) {
    error = "gpu.name: must be a string";
    return false;
  }
  c = Cluster();
  c.gpuName = name == gpu->end() ? "" : name->get<std::string>();
  if (!positiveNumber(*gpu, "gpu.", "peak_tflops", c.peakTflops, error) ||
      !positiveNumber(*gpu, "gpu.", "memory_gb", c.memoryGB, error) ||
      !positiveNumber(*gpu, "gpu.", "memory_bandwidth_gbps",
                      c.memoryBandwidthGBps, error) ||
      !positiveInteger(j, "gpus_per_node", c.gpusPerNode, error) ||
      !positiveInteger(j, "nodes", c.nodes, error) ||
      !positiveNumber(j, "", "intra_node_gbps", c.intraNodeGBps, error))
    return false;
  // One node needs no network.
  if (c.nodes == 1 && !j.contains("inter_node_gbps"))
    c.interNodeGBps = c.intraNodeGBps;
  else if (!positiveNumber(j, "", "inter_node_gbps", c.interNodeGBps, error))
    return false;
  return true;
}

bool autopar::loadCluster(const std::string &path, Cluster &c,
                          std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot open";
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    error = path + ": invalid JSON";
    return false;
  }
  if (!parseCluster(j, c, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

json autopar::toJson(const Cluster &c) {
  return {{"gpu",
           {{"name", c.gpuName},
            {"peak_tflops", c.peakTflops},
            {"memory_gb", c.memoryGB},
            {"memory_bandwidth_gbps", c.memoryBandwidthGBps}}},
          {"gpus_per_node", c.gpusPerNode},
          {"nodes", c.nodes},
          {"intra_node_gbps", c.intraNodeGBps},
          {"inter_node_gbps", c.interNodeGBps}};
}
