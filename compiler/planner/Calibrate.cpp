//===- Calibrate.cpp - `autopar calibrate`: this machine as a cluster -----===//

#include "compiler/planner/Calibrate.h"

#include "compiler/driver/Driver.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <unistd.h>

extern char **environ;

using namespace autopar;
using json = nlohmann::json;

namespace {

/// autopar-calibrate, beside the running autopar.
std::string calibratorPath() {
  std::string self = llvm::sys::fs::getMainExecutable(
      nullptr, reinterpret_cast<void *>(&calibratorPath));
  llvm::SmallString<256> path(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(path, "autopar-calibrate");
  return std::string(path);
}

int64_t machineCores() {
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

/// The value of the first line of `file` that starts with `key` (after
/// its ':'), trimmed; empty if none.
std::string procField(const char *file, llvm::StringRef key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (llvm::StringRef(line).starts_with(key)) {
      auto colon = line.find(':');
      if (colon != std::string::npos)
        return llvm::StringRef(line).substr(colon + 1).trim().str();
    }
  return "";
}

/// Runs `program args` with `setEnv` added to the environment; its stdout
/// parsed as JSON into `out`. `what` names the run in errors.
bool runJson(llvm::StringRef program, llvm::ArrayRef<std::string> args,
             llvm::ArrayRef<std::string> setEnv, const std::string &what,
             json &out, std::string &error) {
  llvm::SmallString<128> outFile, errFile;
  if (llvm::sys::fs::createTemporaryFile("autopar-calibrate", "json",
                                         outFile) ||
      llvm::sys::fs::createTemporaryFile("autopar-calibrate", "err", errFile)) {
    error = "cannot create a temporary file";
    return false;
  }
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    llvm::StringRef var(*e);
    bool replaced = llvm::any_of(setEnv, [&](const std::string &s) {
      return var.split('=').first == llvm::StringRef(s).split('=').first;
    });
    if (!replaced)
      env.push_back(var.str());
  }
  env.insert(env.end(), setEnv.begin(), setEnv.end());
  std::vector<llvm::StringRef> argv = {program}, envp(env.begin(), env.end());
  for (const std::string &a : args)
    argv.push_back(a);
  std::optional<llvm::StringRef> redirects[] = {
      llvm::StringRef(""), llvm::StringRef(outFile), llvm::StringRef(errFile)};
  std::string message;
  // Minutes at most (the whole calibration takes seconds).
  int rc = llvm::sys::ExecuteAndWait(program, argv, envp, redirects,
                                     /*SecondsToWait=*/300, 0, &message);
  auto text = llvm::MemoryBuffer::getFile(outFile);
  auto errText = llvm::MemoryBuffer::getFile(errFile);
  llvm::sys::fs::remove(outFile);
  llvm::sys::fs::remove(errFile);
  if (rc != 0) {
    std::string detail = message;
    // The first line that says something (mpirun frames its messages
    // with rows of dashes).
    llvm::SmallVector<llvm::StringRef> lines;
    if (detail.empty() && errText)
      (*errText)->getBuffer().split(lines, '\n');
    for (llvm::StringRef line : lines)
      if (detail.empty() &&
          line.find_first_not_of("- \t") != llvm::StringRef::npos)
        detail = line.trim().str();
    error = what + " failed (exit " + std::to_string(rc) + ")" +
            (detail.empty() ? "" : ": " + detail);
    return false;
  }
  out = text ? json::parse((*text)->getBuffer(), nullptr, false)
             : json(json::value_t::discarded);
  if (out.is_discarded() || !out.is_object()) {
    error = what + " printed no JSON object";
    return false;
  }
  return true;
}

/// Measures this machine: the cluster file's JSON, and the cluster it
/// parses to.
bool measure(json &cluster, Cluster &parsed, std::string &error,
             llvm::raw_ostream &log) {
  const std::string calibrator = calibratorPath();
  if (!llvm::sys::fs::can_execute(calibrator)) {
    error = calibrator + ": not found (autopar was built without MPI, or "
                         "without its autopar-calibrate)";
    return false;
  }
  const int64_t cores = machineCores();
  // Other work on the cores lowers every rate measured (up to 10x while a
  // build kept both cores of a 2-core machine busy).
  double load = 0;
  if (std::ifstream loadavg("/proc/loadavg");
      loadavg >> load && load > 0.5 * double(cores))
    log << llvm::formatv("calibrating: warning: the machine is busy (load "
                         "{0:f1} on {1} cores); the rates will come out low: "
                         "run `autopar calibrate` again when it is quiet\n",
                         load, cores);
  std::vector<int64_t> threads;
  for (int64_t t = 1; t < cores; t *= 2)
    threads.push_back(t);
  threads.push_back(cores);
  auto mpirun = llvm::sys::findProgramByName("mpirun");
  // The calibration's own ranks may run as root (as CI's do); the
  // programs' runs are the user's to allow.
  std::vector<std::string> mpiEnv;
  if (geteuid() == 0)
    mpiEnv = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  json compute = json::array();
  for (int64_t t : threads) {
    // A plan's ranks share the cores: cores / t ranks of t threads each
    // measure at once (one alone without mpirun).
    const int64_t ranks = mpirun ? cores / t : 1;
    log << "calibrating: kernels on " << t << " thread" << (t > 1 ? "s" : "")
        << (ranks > 1 ? ", " + std::to_string(ranks) + " ranks at once" : "")
        << "\n";
    std::string what = calibrator + " compute";
    std::vector<std::string> args = {"compute"},
                             env = {"OMP_NUM_THREADS=" + std::to_string(t),
                                    "OPENBLAS_NUM_THREADS=1"};
    std::string program = calibrator;
    if (ranks > 1) {
      what = "mpirun -np " + std::to_string(ranks) + " " + what;
      args = {"--oversubscribe",
              "--bind-to",
              "none",
              "-np",
              std::to_string(ranks),
              "-x",
              env[0],
              "-x",
              env[1],
              calibrator,
              "compute"};
      env = mpiEnv;
      program = *mpirun;
    }
    json one;
    if (!runJson(program, args, env, what, one, error))
      return false;
    compute.push_back(one);
  }
  json comm = json::array();
  if (!mpirun) {
    log << "calibrating: mpirun not found; no collectives measured (plans of "
           "one rank only)\n";
  } else {
    for (int64_t r = 2; r <= std::max<int64_t>(2, cores); r *= 2) {
      log << "calibrating: MPI collectives over " << r << " ranks\n";
      json one;
      if (!runJson(
              *mpirun,
              {"--oversubscribe", "--bind-to", "none", "-np", std::to_string(r),
               "-x", "OMP_NUM_THREADS=1", calibrator, "comm"},
              mpiEnv,
              "mpirun -np " + std::to_string(r) + " " + calibrator + " comm",
              one, error))
        return false;
      comm.push_back(one);
    }
  }
  // The "GPU" is a core: its one-thread peak, its share of the memory.
  double peak = 0, bandwidth = 0, linkGbps = 1;
  for (const json &g : compute.front()["gemm"]["gflops"])
    peak = std::max(peak, g.get<double>());
  bandwidth = compute.front()["memory"]["gbps"].back().get<double>();
  if (!comm.empty()) {
    // A ring all-reduce of the largest message: bytes each rank sends
    // per second.
    const json &c = comm.front();
    double g = c["ranks"].get<double>(), m = c["bytes"].back().get<double>();
    linkGbps =
        2 * (g - 1) / g * m / c["all_reduce_s"].back().get<double>() / 1e9;
  }
  double memoryKb = std::atof(procField("/proc/meminfo", "MemTotal").c_str());
  if (memoryKb <= 0)
    memoryKb = 1e6;
  std::string model = procField("/proc/cpuinfo", "model name");
  cluster = {{"gpu",
              {{"name", "CPU core" + (model.empty() ? "" : " (" + model + ")")},
               {"peak_tflops", peak / 1e3},
               {"memory_gb", memoryKb * 1e3 / 1e9 / double(cores)},
               {"memory_bandwidth_gbps", bandwidth}}},
             {"gpus_per_node", cores},
             {"nodes", 1},
             {"intra_node_gbps", linkGbps},
             {"calibration",
              {{"cores", cores}, {"compute", compute}, {"comm", comm}}}};
  if (!parseCluster(cluster, parsed, error)) {
    error = "the calibration's output is not a cluster: " + error;
    return false;
  }
  return true;
}

/// Measures into `cluster` and writes its file at `path`.
bool calibrateTo(const std::string &path, Cluster &cluster, std::string &error,
                 llvm::raw_ostream &log) {
  json j;
  if (!measure(j, cluster, error, log))
    return false;
  llvm::SmallString<256> dir(llvm::sys::path::parent_path(path));
  if (!dir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(dir)) {
      error = "cannot create " + std::string(dir) + ": " + ec.message();
      return false;
    }
  return writeFileAtomically(
      path,
      j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
      error);
}

} // namespace

std::string autopar::localClusterPath() {
  llvm::SmallString<256> path;
  if (const char *dir = std::getenv("AUTOPAR_CACHE_DIR"); dir && *dir) {
    path = dir;
  } else if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    path = xdg;
    llvm::sys::path::append(path, "autopar");
  } else {
    const char *home = std::getenv("HOME");
    path = home && *home ? home : "/tmp";
    llvm::sys::path::append(path, ".cache", "autopar");
  }
  llvm::sys::path::append(path, "local-cluster.json");
  return std::string(path);
}

bool autopar::localCluster(Cluster &cluster, std::string &error) {
  const std::string path = localClusterPath();
  // Fresh: newer than the calibrator that would measure it, and measured
  // on as many cores.
  llvm::sys::fs::file_status cached, tool;
  if (!llvm::sys::fs::status(path, cached) && llvm::sys::fs::exists(cached) &&
      (llvm::sys::fs::status(calibratorPath(), tool) ||
       cached.getLastModificationTime() >= tool.getLastModificationTime())) {
    std::string ignored;
    if (loadCluster(path, cluster, ignored) && cluster.calibration &&
        cluster.calibration->cores == machineCores())
      return true;
  }
  llvm::errs() << "autopar: calibrating this machine for --cluster local "
                  "(once; cached in "
               << path << ")\n";
  if (!calibrateTo(path, cluster, error, llvm::errs())) {
    error = "--cluster local: " + error;
    return false;
  }
  return true;
}

int autopar::runCalibrateCommand(const CalibrateCommandOptions &o) {
  const std::string path = o.output.empty() ? localClusterPath() : o.output;
  Cluster c;
  std::string error;
  if (!calibrateTo(path, c, error, llvm::errs())) {
    llvm::errs() << "autopar: calibrate: " << error << "\n";
    return 1;
  }
  const Calibration &cal = *c.calibration;
  llvm::outs() << llvm::formatv("this machine: {0} cores, {1}\n", cal.cores,
                                c.gpuName);
  // GFLOP/s and GB/s from the lookups the planner times ops with.
  for (const Calibration::Compute &e : cal.compute) {
    auto gemm = [&](double x) {
      return 2 * x * x * x / Calibration::gemmSeconds(e, x, x, x) / 1e9;
    };
    auto attention = [&](bool backward) {
      return 1 / Calibration::attentionSeconds(
                     e, backward, Calibration::kNoMask, 256, 64, 1e9);
    };
    auto memory = [&](double bytes) {
      return bytes / Calibration::memorySeconds(e, bytes) / 1e9;
    };
    llvm::outs() << llvm::formatv(
        "  {0,2} thread(s): GEMM 2048^3 {1:f1} GFLOP/s, 128^3 {2:f1}; "
        "attention T 256 d 64 {3:f1} / {4:f1} (forward / backward); memory "
        "{5:f1} GB/s (256 MiB), {6:f1} (1 MiB); an op {7:f2} us\n",
        e.threads, gemm(2048), gemm(128), attention(false), attention(true),
        memory(double(1 << 28)), memory(double(1 << 20)), e.opOverhead * 1e6);
  }
  for (const Calibration::Comm &e : cal.comm)
    llvm::outs() << llvm::formatv(
        "  MPI, {0} ranks: all-reduce of {1} bytes {2:f2} ms, of {3} bytes "
        "{4:f1} us; send of {1} bytes {5:f2} ms\n",
        e.ranks, int64_t(e.bytes.back()), e.allReduce.back() * 1e3,
        int64_t(e.bytes.front()), e.allReduce.front() * 1e6,
        e.send.back() * 1e3);
  if (cal.comm.empty())
    llvm::outs() << "  MPI: not measured (mpirun not found)\n";
  llvm::outs() << "wrote " << path << "\n";
  return 0;
}
