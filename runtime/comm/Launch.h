//===- Launch.h - who this process is, as its launcher says -----*- C++ -*-===//
//
// The rank identity a launcher exports to each process it starts, read
// before MPI (or anything else) starts: which GPU a rank takes (its local
// rank modulo the node's devices), and how many processes a program built
// without MPI was started as. One precedence, the first launcher whose
// rank or world-size variable is set:
//   1. Open MPI's mpirun: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK;
//   2. MPICH/Hydra (PMI): PMI_RANK, PMI_SIZE, MPI_LOCALRANKID;
//   3. Slurm's srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID;
//   4. torchrun (and torch.distributed launchers): RANK, WORLD_SIZE,
//      LOCAL_RANK.
// MPI's own launchers come first because under `srun --mpi=pmix` or an
// allocation's environment the Slurm variables describe the allocation,
// not necessarily this MPI world. A local rank the launcher does not
// export is taken as the rank (one node), a missing rank as 0 and a
// missing world size as 1. Header-only and free of MPI and
// CUDA: the trainer and every build of the communicator include it.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_COMM_LAUNCH_H
#define AUTOPAR_RUNTIME_COMM_LAUNCH_H

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>

namespace autopar::rt {

struct LaunchInfo {
  /// "Open MPI", "MPICH (PMI)", "Slurm", "torchrun", or "" (no launcher:
  /// one process).
  std::string launcher;
  int rank = 0, worldSize = 1, localRank = 0;
};

/// The environment lookup: the process's (processEnv), or a test's.
using GetEnv = const char *(*)(const char *);

inline const char *processEnv(const char *name) { return std::getenv(name); }

namespace launch_detail {

/// Reads the integer variable `name` (unset or empty: `present` false);
/// "" or the one-line error naming it.
inline std::string readInt(GetEnv getenv, const char *name, int min,
                           int &value, bool &present) {
  const char *text = getenv(name);
  present = text && *text;
  if (!present)
    return "";
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (*end != 0 || errno == ERANGE || v < min || v > INT_MAX)
    return std::string("the launcher's ") + name + " is '" + text +
           "', not an integer >= " + std::to_string(min);
  value = static_cast<int>(v);
  return "";
}

} // namespace launch_detail

/// Fills `out` from the environment; "" or one line naming the variable
/// that is wrong (not a number, a rank outside the world).
inline std::string readLaunchInfo(LaunchInfo &out,
                                  GetEnv getenv = processEnv) {
  struct Launcher {
    const char *name, *rank, *size, *localRank;
  };
  static const Launcher kLaunchers[] = {
      {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"MPICH (PMI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
  };
  out = LaunchInfo();
  for (const Launcher &l : kLaunchers) {
    LaunchInfo info;
    bool hasRank = false, hasSize = false, hasLocal = false;
    std::string error =
        launch_detail::readInt(getenv, l.rank, 0, info.rank, hasRank);
    if (error.empty())
      error = launch_detail::readInt(getenv, l.size, 1, info.worldSize,
                                     hasSize);
    if (!error.empty())
      return error;
    if (!hasRank && !hasSize)
      continue;
    if (info.rank >= info.worldSize)
      return std::string("the launcher's ") + l.rank + " is " +
             std::to_string(info.rank) + ", outside its world of " +
             std::to_string(info.worldSize) + " (" + l.size + ")";
    error = launch_detail::readInt(getenv, l.localRank, 0, info.localRank,
                                   hasLocal);
    if (!error.empty())
      return error;
    if (!hasLocal)
      info.localRank = info.rank;
    info.launcher = l.name;
    out = info;
    return "";
  }
  return "";
}

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_COMM_LAUNCH_H
