//===- Cluster.h - the machines a plan runs on ------------------*- C++ -*-===//
//
// `autopar plan --cluster CLUSTER.json`: the GPUs (peak dense 16-bit
// and float32 TFLOP/s, memory, memory bandwidth), how many per node and how
// many nodes, and the bandwidth between two GPUs of a node and of two nodes
// (GB/s per GPU and direction). docs/planner.md documents the file;
// docs/clusters/ has ready ones.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PLANNER_CLUSTER_H
#define AUTOPAR_COMPILER_PLANNER_CLUSTER_H

#include <nlohmann/json_fwd.hpp>

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace autopar {

/// What `autopar calibrate` measured on this machine (runtime/calibrate/
/// Calibrate.cpp): one rank's kernels by its OpenMP threads, and the MPI
/// collectives by ranks. With it, a cluster times the CPU programs of
/// `autopar compile --target cpu` (`autopar plan --cluster local`): a plan
/// of R ranks on C cores gives each max(1, C / R) threads, as bench/ runs
/// them.
struct Calibration {
  /// One thread count's rates.
  struct Compute {
    int64_t threads = 1;
    /// GFLOP/s of runtime/cpu's gemm() on C[m, n] = A[m, k] B[k, n], each
    /// of m, n, k over `gemmSizes` (index (m, n, k), k fastest).
    std::vector<double> gemmSizes, gemmGflops;
    /// GFLOP/s (model FLOPs) of the fused attention, forward and backward,
    /// by (variant, sequence, head dim), 8 (batch, head) pairs; variants:
    /// no mask, causal, a mask tensor.
    std::vector<double> attentionSeq, attentionHeadDim, attentionForward,
        attentionBackward;
    /// GB/s of an elementwise loop by the bytes it moves.
    std::vector<double> memoryBytes, memoryGbps;
    /// Nanoseconds per element of the runtime's row kernels (layer_norm,
    /// layer_norm_grad, reduce, softmax, softmax_grad,
    /// softmax_cross_entropy, softmax_cross_entropy_grad) and of the math
    /// functions of generated loops (erf, exp, tanh, log).
    std::map<std::string, double> elementNs;
    /// Seconds of one generated op on a few elements.
    double opOverhead = 0;
  };
  /// Seconds of an all-reduce and of a send by message bytes, `ranks`
  /// ranks.
  struct Comm {
    int64_t ranks = 2;
    std::vector<double> bytes, allReduce, send;
  };
  int64_t cores = 1;
  std::vector<Compute> compute; // by threads, increasing
  std::vector<Comm> comm;       // by ranks, increasing

  /// The rates of one rank of `ranks` on the cores (the measured thread
  /// count nearest below cores / ranks).
  const Compute &forRanks(int64_t ranks) const;
  /// Seconds of one product on `threads`' rates (log-linear in m, n, k
  /// between the grid's sizes, its edges beyond).
  static double gemmSeconds(const Compute &c, double m, double n, double k);
  enum AttentionVariant { kNoMask = 0, kCausal = 1, kMaskTensor = 2 };
  static double attentionSeconds(const Compute &c, bool backward,
                                 AttentionVariant variant, double seq,
                                 double headDim, double flops);
  static double memorySeconds(const Compute &c, double bytes);
  /// Seconds of a collective of `kind` (all_reduce, reduce_scatter,
  /// all_gather, send) in which each of `group` ranks sends `bytes` (a
  /// ring's count, CollectiveCost::bytes); false if none was measured.
  bool collectiveSeconds(llvm::StringRef kind, int64_t group, double bytes,
                         double &seconds) const;
};

struct Cluster {
  std::string gpuName;
  /// Dense 16-bit tensor-core TFLOP/s (`gpu.peak_tflops`).
  double peakTflops = 0;
  /// Float32 TFLOP/s without tensor cores (`gpu.fp32_tflops`, optional):
  /// the rate of fp32 products (the CUDA target's GEMMs and attention do
  /// not use TF32). 0 where the file does not say: fp32 plans cannot be
  /// timed.
  double fp32Tflops = 0;
  /// Whether the GPU computes in bfloat16 (`gpu.bf16`, default true; a
  /// V100 does not: the search takes fp16-mixed).
  bool bf16 = true;
  double memoryGB = 0;
  double memoryBandwidthGBps = 0;
  int64_t gpusPerNode = 0;
  int64_t nodes = 0;
  double intraNodeGBps = 0;
  double interNodeGBps = 0;
  /// The host (`host`, optional; ZeRO-Offload needs it): a node's memory
  /// and its bandwidth (GB and GB/s per node), and one GPU's link to it
  /// (GB/s per direction, PCIe). 0 where the file has no `host`.
  double hostMemoryGB = 0, hostMemoryBandwidthGBps = 0, hostLinkGBps = 0;

  /// What `autopar calibrate` measured: this machine's CPU programs,
  /// timed from measured rates instead of the peaks above.
  std::optional<Calibration> calibration;

  int64_t gpus() const { return gpusPerNode * nodes; }
  /// Bytes of one GPU's memory.
  double memoryBytes() const { return memoryGB * 1e9; }
  /// Whether the file describes the host (offload can be predicted).
  bool hasHost() const { return hostMemoryGB > 0; }
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

#endif // AUTOPAR_COMPILER_PLANNER_CLUSTER_H
