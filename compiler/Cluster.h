//===- Cluster.h - the machines a plan runs on ------------------*- C++ -*-===//
//
// `autopar plan --cluster CLUSTER.json`: the GPUs (peak dense 16-bit
// TFLOP/s, memory, memory bandwidth), how many per node and how many
// nodes, and the bandwidth between two GPUs of a node and of two nodes
// (GB/s per GPU and direction). docs/planner.md documents the file;
// docs/clusters/ has ready ones.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_CLUSTER_H
#define AUTOPAR_COMPILER_CLUSTER_H

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

namespace autopar {

struct Cluster {
  std::string gpuName;
  double peakTflops = 0;
  double memoryGB = 0;
  double memoryBandwidthGBps = 0;
  int64_t gpusPerNode = 0;
  int64_t nodes = 0;
  double intraNodeGBps = 0;
  double interNodeGBps = 0;

  int64_t gpus() const { return gpusPerNode * nodes; }
  /// Bytes of one GPU's memory.
  double memoryBytes() const { return memoryGB * 1e9; }
};

/// Reads `json` into `cluster`; false with `error` (one line, the key path
/// first: "gpu.peak_tflops: must be a number > 0") on a missing, unknown or
/// ill-typed key.
bool parseCluster(const nlohmann::json &json, Cluster &cluster,
                  std::string &error);

/// Reads the cluster file at `path`; errors start with the path.
bool loadCluster(const std::string &path, Cluster &cluster, std::string &error);

/// The cluster as its file's JSON.
nlohmann::json toJson(const Cluster &cluster);

} // namespace autopar

#endif // AUTOPAR_COMPILER_CLUSTER_H
