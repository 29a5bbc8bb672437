//===- Cluster.cpp - the machines a plan runs on --------------------------===//

#include "compiler/planner/Cluster.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
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

bool positiveInteger(const json &object, const std::string &where,
                     const char *key, int64_t &out, std::string &error) {
  auto it = object.find(key);
  if (it == object.end()) {
    error = where + key + ": missing";
    return false;
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 1) {
    error = where + key + ": must be an integer >= 1";
    return false;
  }
  out = it->get<int64_t>();
  return true;
}

/// Reads a list of numbers > 0 of `size` entries (any size > 0 if 0).
bool positiveList(const json &object, const std::string &where, const char *key,
                  size_t size, std::vector<double> &out, std::string &error) {
  auto it = object.find(key);
  if (it == object.end()) {
    error = where + key + ": missing";
    return false;
  }
  bool ok = it->is_array() && !it->empty() && (!size || it->size() == size);
  for (size_t i = 0; ok && i < it->size(); ++i)
    ok = (*it)[i].is_number() && (*it)[i].get<double>() > 0;
  if (!ok) {
    error = where + key + ": must be a list of " +
            (size ? std::to_string(size) + " " : std::string()) + "numbers > 0";
    return false;
  }
  out = it->get<std::vector<double>>();
  return true;
}

bool positiveInteger(const json &object, const std::string &where,
                     const char *key, int64_t &out, std::string &error);

bool parseCalibration(const json &j, Calibration &cal, std::string &error) {
  const std::string where = "calibration.";
  if (!j.is_object()) {
    error = "calibration: must be an object";
    return false;
  }
  if (!onlyKeys(j, where, {"cores", "compute", "comm"}, error) ||
      !positiveInteger(j, where, "cores", cal.cores, error))
    return false;
  auto compute = j.find("compute");
  if (compute == j.end() || !compute->is_array() || compute->empty()) {
    error = where + "compute: must be a list of one or more thread counts";
    return false;
  }
  for (size_t i = 0; i < compute->size(); ++i) {
    const json &e = (*compute)[i];
    std::string at = where + "compute[" + std::to_string(i) + "].";
    Calibration::Compute c;
    if (!e.is_object()) {
      error = at.substr(0, at.size() - 1) + ": must be an object";
      return false;
    }
    if (!onlyKeys(e, at,
                  {"threads", "gemm", "attention", "memory", "element_ns",
                   "op_overhead_us"},
                  error) ||
        !positiveInteger(e, at, "threads", c.threads, error))
      return false;
    for (const char *key : {"gemm", "attention", "memory", "element_ns"})
      if (!e.contains(key) || !e[key].is_object()) {
        error = at + key + ": must be an object";
        return false;
      }
    const json &g = e["gemm"], &a = e["attention"], &m = e["memory"];
    if (!onlyKeys(g, at + "gemm.", {"sizes", "gflops"}, error) ||
        !positiveList(g, at + "gemm.", "sizes", 0, c.gemmSizes, error) ||
        !positiveList(g, at + "gemm.", "gflops",
                      c.gemmSizes.size() * c.gemmSizes.size() *
                          c.gemmSizes.size(),
                      c.gemmGflops, error) ||
        !onlyKeys(a, at + "attention.",
                  {"seq", "head_dim", "forward_gflops", "backward_gflops"},
                  error) ||
        !positiveList(a, at + "attention.", "seq", 0, c.attentionSeq, error) ||
        !positiveList(a, at + "attention.", "head_dim", 0, c.attentionHeadDim,
                      error))
      return false;
    const size_t cells = 3 * c.attentionSeq.size() * c.attentionHeadDim.size();
    double overheadUs = 0;
    if (!positiveList(a, at + "attention.", "forward_gflops", cells,
                      c.attentionForward, error) ||
        !positiveList(a, at + "attention.", "backward_gflops", cells,
                      c.attentionBackward, error) ||
        !onlyKeys(m, at + "memory.", {"bytes", "gbps"}, error) ||
        !positiveList(m, at + "memory.", "bytes", 0, c.memoryBytes, error) ||
        !positiveList(m, at + "memory.", "gbps", c.memoryBytes.size(),
                      c.memoryGbps, error) ||
        !positiveNumber(e, at, "op_overhead_us", overheadUs, error))
      return false;
    c.opOverhead = overheadUs * 1e-6;
    for (auto it = e["element_ns"].begin(); it != e["element_ns"].end(); ++it) {
      if (!it->is_number() || !(it->get<double>() > 0)) {
        error = at + "element_ns." + it.key() + ": must be a number > 0";
        return false;
      }
      c.elementNs[it.key()] = it->get<double>();
    }
    if (!cal.compute.empty() && c.threads <= cal.compute.back().threads) {
      error = at + "threads: must increase along the list";
      return false;
    }
    cal.compute.push_back(std::move(c));
  }
  auto comm = j.find("comm");
  if (comm != j.end() && !comm->is_array()) {
    error = where + "comm: must be a list";
    return false;
  }
  for (size_t i = 0; comm != j.end() && i < comm->size(); ++i) {
    const json &e = (*comm)[i];
    std::string at = where + "comm[" + std::to_string(i) + "].";
    Calibration::Comm c;
    if (!e.is_object()) {
      error = at.substr(0, at.size() - 1) + ": must be an object";
      return false;
    }
    if (!onlyKeys(e, at, {"ranks", "bytes", "all_reduce_s", "send_s"}, error) ||
        !positiveInteger(e, at, "ranks", c.ranks, error) ||
        !positiveList(e, at, "bytes", 0, c.bytes, error) ||
        !positiveList(e, at, "all_reduce_s", c.bytes.size(), c.allReduce,
                      error) ||
        !positiveList(e, at, "send_s", c.bytes.size(), c.send, error))
      return false;
    if (c.ranks < 2 ||
        (!cal.comm.empty() && c.ranks <= cal.comm.back().ranks)) {
      error = at + "ranks: must be >= 2 and increase along the list";
      return false;
    }
    cal.comm.push_back(std::move(c));
  }
  return true;
}

/// `ys` at `x`, linear in log x and log y between the points of `xs`
/// (increasing); beyond the ends, `ys`' end values.
double logInterpolate(const std::vector<double> &xs,
                      const std::vector<double> &ys, double x) {
  if (x <= xs.front())
    return ys.front();
  if (x >= xs.back())
    return ys.back();
  size_t i = std::upper_bound(xs.begin(), xs.end(), x) - xs.begin();
  double f = std::log(x / xs[i - 1]) / std::log(xs[i] / xs[i - 1]);
  return std::exp(std::log(ys[i - 1]) * (1 - f) + std::log(ys[i]) * f);
}

/// The cell below `x` in `xs` and the weight of the one above it (log
/// scale, clamped to the ends).
std::pair<size_t, double> cellOf(const std::vector<double> &xs, double x) {
  if (xs.size() == 1 || x <= xs.front())
    return {0, 0.0};
  if (x >= xs.back())
    return {xs.size() - 2, 1.0};
  size_t i = std::upper_bound(xs.begin(), xs.end(), x) - xs.begin() - 1;
  return {i, std::log(x / xs[i]) / std::log(xs[i + 1] / xs[i])};
}

} // namespace

const Calibration::Compute &Calibration::forRanks(int64_t ranks) const {
  const int64_t threads =
      std::max<int64_t>(1, cores / std::max<int64_t>(1, ranks));
  const Compute *best = &compute.front();
  for (const Compute &c : compute)
    if (c.threads <= threads)
      best = &c;
  return *best;
}

double Calibration::gemmSeconds(const Compute &c, double m, double n,
                                double k) {
  const std::vector<double> &s = c.gemmSizes;
  const size_t d = s.size();
  auto [im, fm] = cellOf(s, m);
  auto [in, fn] = cellOf(s, n);
  auto [ik, fk] = cellOf(s, k);
  // Trilinear in the logs of the sizes and of the rate.
  double logRate = 0;
  for (int corner = 0; corner < 8; ++corner) {
    size_t a = std::min(d - 1, im + (corner & 1)),
           b = std::min(d - 1, in + ((corner >> 1) & 1)),
           e = std::min(d - 1, ik + ((corner >> 2) & 1));
    double w = ((corner & 1) ? fm : 1 - fm) *
               (((corner >> 1) & 1) ? fn : 1 - fn) *
               (((corner >> 2) & 1) ? fk : 1 - fk);
    logRate += w * std::log(c.gemmGflops[(a * d + b) * d + e]);
  }
  return 2 * m * n * k / (std::exp(logRate) * 1e9);
}

double Calibration::attentionSeconds(const Compute &c, bool backward,
                                     AttentionVariant variant, double seq,
                                     double headDim, double flops) {
  const std::vector<double> &rates =
      backward ? c.attentionBackward : c.attentionForward;
  const size_t hd = c.attentionHeadDim.size(),
               base = size_t(variant) * c.attentionSeq.size() * hd;
  auto [is, fs] = cellOf(c.attentionSeq, seq);
  auto [ih, fh] = cellOf(c.attentionHeadDim, headDim);
  double logRate = 0;
  for (int corner = 0; corner < 4; ++corner) {
    size_t a = std::min(c.attentionSeq.size() - 1, is + (corner & 1)),
           b = std::min(hd - 1, ih + ((corner >> 1) & 1));
    double w = ((corner & 1) ? fs : 1 - fs) * ((corner >> 1) & 1 ? fh : 1 - fh);
    logRate += w * std::log(rates[base + a * hd + b]);
  }
  return flops / (std::exp(logRate) * 1e9);
}

double Calibration::memorySeconds(const Compute &c, double bytes) {
  return bytes / (logInterpolate(c.memoryBytes, c.memoryGbps, bytes) * 1e9);
}

bool Calibration::collectiveSeconds(llvm::StringRef kind, int64_t group,
                                    double bytes, double &seconds) const {
  if (comm.empty())
    return false;
  // The measured ranks nearest below the group's (the fewest above it if
  // none is below).
  const Comm *at = &comm.front();
  for (const Comm &c : comm)
    if (c.ranks <= group)
      at = &c;
  auto curve = [](const std::vector<double> &xs, const std::vector<double> &ts,
                  double x) {
    // Beyond the largest message, its bandwidth.
    if (x > xs.back())
      return ts.back() * x / xs.back();
    return logInterpolate(xs, ts, x);
  };
  if (kind == "send") {
    seconds = curve(at->bytes, at->send, bytes);
    return true;
  }
  // A ring all-reduce of a message of M bytes sends 2 (g - 1) / g M per
  // rank; a reduce-scatter or all-gather sending B is half an all-reduce
  // sending 2 B.
  const double g = double(at->ranks), ring = 2 * (g - 1) / g;
  seconds = kind == "all_reduce"
                ? curve(at->bytes, at->allReduce, bytes / ring)
                : curve(at->bytes, at->allReduce, 2 * bytes / ring) / 2;
  return true;
}

bool autopar::parseCluster(const json &j, Cluster &c, std::string &error) {
  if (!j.is_object()) {
    error = "must be a JSON object";
    return false;
  }
  if (!onlyKeys(j, "",
                {"gpu", "gpus_per_node", "nodes", "intra_node_gbps",
                 "inter_node_gbps", "host", "calibration"},
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
                {"name", "peak_tflops", "fp32_tflops", "bf16", "memory_gb",
                 "memory_bandwidth_gbps"},
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
      !positiveInteger(j, "", "gpus_per_node", c.gpusPerNode, error) ||
      !positiveInteger(j, "", "nodes", c.nodes, error) ||
      !positiveNumber(j, "", "intra_node_gbps", c.intraNodeGBps, error))
    return false;
  if (gpu->contains("fp32_tflops") &&
      !positiveNumber(*gpu, "gpu.", "fp32_tflops", c.fp32Tflops, error))
    return false;
  if (auto bf16 = gpu->find("bf16"); bf16 != gpu->end()) {
    if (!bf16->is_boolean()) {
      error = "gpu.bf16: must be true or false";
      return false;
    }
    c.bf16 = bf16->get<bool>();
  }
  // One node needs no network.
  if (c.nodes == 1 && !j.contains("inter_node_gbps"))
    c.interNodeGBps = c.intraNodeGBps;
  else if (!positiveNumber(j, "", "inter_node_gbps", c.interNodeGBps, error))
    return false;
  if (auto host = j.find("host"); host != j.end()) {
    if (!host->is_object()) {
      error = "host: must be an object";
      return false;
    }
    if (!onlyKeys(*host, "host.",
                  {"memory_gb", "memory_bandwidth_gbps", "link_gbps"}, error) ||
        !positiveNumber(*host, "host.", "memory_gb", c.hostMemoryGB, error) ||
        !positiveNumber(*host, "host.", "memory_bandwidth_gbps",
                        c.hostMemoryBandwidthGBps, error) ||
        !positiveNumber(*host, "host.", "link_gbps", c.hostLinkGBps, error))
      return false;
  }
  if (auto cal = j.find("calibration"); cal != j.end()) {
    c.calibration.emplace();
    if (!parseCalibration(*cal, *c.calibration, error))
      return false;
  }
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
  // Cluster files nest 3 deep (calibrations 4): a bound, checked by a
  // parser callback before a deeper container is built.
  constexpr int kMaxDepth = 64;
  bool tooDeep = false;
  json::parser_callback_t depth = [&](int level, json::parse_event_t event,
                                      json &) {
    if ((event == json::parse_event_t::object_start ||
         event == json::parse_event_t::array_start) &&
        level >= kMaxDepth)
      tooDeep = true;
    return !tooDeep;
  };
  json j;
  try {
    j = json::parse(text.str(), depth, /*allow_exceptions=*/false);
  } catch (const std::exception &) {
    j = json(json::value_t::discarded);
  }
  if (tooDeep) {
    error =
        path + ": nested deeper than " + std::to_string(kMaxDepth) + " levels";
    return false;
  }
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
  json j = {{"gpu",
             {{"name", c.gpuName},
              {"peak_tflops", c.peakTflops},
              {"memory_gb", c.memoryGB},
              {"memory_bandwidth_gbps", c.memoryBandwidthGBps}}},
            {"gpus_per_node", c.gpusPerNode},
            {"nodes", c.nodes},
            {"intra_node_gbps", c.intraNodeGBps},
            {"inter_node_gbps", c.interNodeGBps}};
  if (c.fp32Tflops > 0)
    j["gpu"]["fp32_tflops"] = c.fp32Tflops;
  if (!c.bf16)
    j["gpu"]["bf16"] = false;
  if (c.hasHost())
    j["host"] = {{"memory_gb", c.hostMemoryGB},
                 {"memory_bandwidth_gbps", c.hostMemoryBandwidthGBps},
                 {"link_gbps", c.hostLinkGBps}};
  if (!c.calibration)
    return j;
  json compute = json::array(), comm = json::array();
  for (const Calibration::Compute &e : c.calibration->compute)
    compute.push_back(
        {{"threads", e.threads},
         {"gemm", {{"sizes", e.gemmSizes}, {"gflops", e.gemmGflops}}},
         {"attention",
          {{"seq", e.attentionSeq},
           {"head_dim", e.attentionHeadDim},
           {"forward_gflops", e.attentionForward},
           {"backward_gflops", e.attentionBackward}}},
         {"memory", {{"bytes", e.memoryBytes}, {"gbps", e.memoryGbps}}},
         {"element_ns", e.elementNs},
         {"op_overhead_us", e.opOverhead * 1e6}});
  for (const Calibration::Comm &e : c.calibration->comm)
    comm.push_back({{"ranks", e.ranks},
                    {"bytes", e.bytes},
                    {"all_reduce_s", e.allReduce},
                    {"send_s", e.send}});
  j["calibration"] = {
      {"cores", c.calibration->cores}, {"compute", compute}, {"comm", comm}};
  return j;
}
