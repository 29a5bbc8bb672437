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
// missing world size as 1.
//
// The endpoint where the ranks of a program without MPI meet (rank 0
// listens there; runtime/comm/Rendezvous.h) is torch.distributed's:
// MASTER_ADDR (rank 0's host) and MASTER_PORT, except that under torchrun's
// agent (TORCHELASTIC_USE_AGENT_STORE=True) the agent's store already
// listens on MASTER_PORT, so the ranks meet on MASTER_PORT + 1.
//
// Header-only and free of MPI and CUDA: the trainer and every build of the
// communicator include it.
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
  /// An MPI launcher (Open MPI, MPICH): MPI_Init can join its world.
  bool byMpi = false;
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
    bool mpi;
  };
  static const Launcher kLaunchers[] = {
      {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK", true},
      {"MPICH (PMI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", true},
      {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", false},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", false},
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
    info.byMpi = l.mpi;
    out = info;
    return "";
  }
  return "";
}

/// Where the ranks of a world meet: a host name or address and a TCP port,
/// and the variables they came from (for messages).
struct Endpoint {
  std::string host;
  int port = 0;
  std::string source;
  /// "HOST:PORT", an IPv6 address in brackets.
  std::string text() const {
    bool v6 = host.find(':') != std::string::npos;
    return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  }
};

/// Fills `out` from MASTER_ADDR and MASTER_PORT (see the file comment) and
/// sets `found`; "" (with `found` false when neither is set) or one line
/// naming the variable that is wrong or missing.
inline std::string readEndpoint(Endpoint &out, bool &found,
                                GetEnv getenv = processEnv) {
  out = Endpoint();
  found = false;
  const char *addr = getenv("MASTER_ADDR");
  const char *port = getenv("MASTER_PORT");
  bool hasAddr = addr && *addr, hasPort = port && *port;
  if (!hasAddr && !hasPort)
    return "";
  if (!hasAddr)
    return "MASTER_PORT is set but MASTER_ADDR is not (rank 0's host)";
  if (!hasPort)
    return "MASTER_ADDR is set but MASTER_PORT is not (a free TCP port on "
           "rank 0's host)";
  std::string host = addr;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  for (char c : host)
    if (c <= ' ' || c == 0x7f || c == '/' || c == '[' || c == ']')
      return std::string("MASTER_ADDR is '") + addr +
             "', not a host name or address";
  int value = 0;
  bool present = false;
  if (std::string error =
          launch_detail::readInt(getenv, "MASTER_PORT", 1, value, present);
      !error.empty() || value > 65535)
    return std::string("MASTER_PORT is '") + port +
           "', not a TCP port (1 to 65535)";
  const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
  bool agentStore =
      agent && (std::string(agent) == "True" || std::string(agent) == "true" ||
                std::string(agent) == "1");
  if (agentStore && value == 65535)
    return "MASTER_PORT is 65535: under torchrun's agent the ranks meet on "
           "MASTER_PORT + 1, which is no TCP port";
  out.host = host;
  out.port = agentStore ? value + 1 : value;
  out.source = agentStore ? "MASTER_ADDR, MASTER_PORT + 1 (torchrun's agent "
                            "store holds MASTER_PORT)"
                          : "MASTER_ADDR, MASTER_PORT";
  found = true;
  return "";
}

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_COMM_LAUNCH_H
