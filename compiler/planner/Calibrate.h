//===- Calibrate.h - `autopar calibrate`: this machine as a cluster -*- C++
//-*-===//
//
// `autopar calibrate` measures what this machine's CPU programs run at
// (runtime/calibrate/Calibrate.cpp: GEMM and attention rates by shape and
// threads, memory bandwidth, MPI collectives) and writes it as a cluster
// file with a "calibration" section (Cluster.h), cached for
// `autopar plan --cluster local` (docs/planner.md, "This machine").
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PLANNER_CALIBRATE_H
#define AUTOPAR_COMPILER_PLANNER_CALIBRATE_H

#include "compiler/planner/Cluster.h"

#include <string>

namespace autopar {

struct CalibrateCommandOptions {
  /// Where to write the cluster file; empty: the cache (localClusterPath).
  std::string output;
};

/// `autopar calibrate`: measures and writes; prints a summary.
int runCalibrateCommand(const CalibrateCommandOptions &options);

/// The cache file of `--cluster local`: $AUTOPAR_CACHE_DIR, else
/// $XDG_CACHE_HOME/autopar, else ~/.cache/autopar, then local-cluster.json.
std::string localClusterPath();

/// The cluster `--cluster local` names: the cache if it was measured by
/// the current autopar-calibrate on as many cores as this machine has,
/// else a fresh calibration (written to the cache; a note on stderr).
bool localCluster(Cluster &cluster, std::string &error);

} // namespace autopar

#endif // AUTOPAR_COMPILER_PLANNER_CALIBRATE_H
