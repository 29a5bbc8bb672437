//===- TrainMain.cpp - main program of an emitted training binary ---------===//
//
//   train --data TOKENS.bin --steps N [--log LOG.jsonl] [...]
//
// main(): the options (runtime/train/Options.h), the target's Device, the
// communicator of the plan's mesh (runtime/comm/Comm.h), and the trainer
// (runtime/train/Trainer.h), set up on every rank before any trains. Every
// error is one line naming the input at fault, and a non-zero exit.
//
//===----------------------------------------------------------------------===//

#include "runtime/Device.h"
#include "runtime/Model.h"
#include "runtime/Status.h"
#include "runtime/comm/Comm.h"
#include "runtime/comm/Launch.h"
#include "runtime/train/Options.h"
#include "runtime/train/Trainer.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

using autopar::rt::Communicator;
using autopar::rt::Device;
using autopar::rt::Status;
using autopar::rt::train::Options;
using autopar::rt::train::Trainer;
using autopar::rt::train::parseOptions;

/// An error message as one line: control characters (a tensor name in a
/// checkpoint may hold a newline) as \xNN.
std::string oneLine(const std::string &text) {
  std::string out;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out += c;
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02x", u);
    out += buf;
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  Device::prepareProcess(argv);
  const autopar::rt::ModelInfo &info = autoparModelInfo();
  Options options;
  int exitCode = 0;
  if (!parseOptions(argc, argv, options, exitCode))
    return exitCode;
  // The device first: the communicator's GPU streams and NCCL communicators
  // live on it. The launcher's variables say which rank this is before the
  // world forms (runtime/comm/Launch.h).
  autopar::rt::LaunchInfo launch;
  if (std::string error = autopar::rt::readLaunchInfo(launch); !error.empty()) {
    std::fprintf(stderr, "train: %s\n", error.c_str());
    return 1;
  }
  std::unique_ptr<Device> device;
  Status status = Device::create(launch.localRank, launch.rank, device);
  if (!status.isOk()) {
    std::fprintf(stderr, "train: %s\n", oneLine(status.message()).c_str());
    return 1;
  }
  status = device->setAttentionBackend(
      static_cast<autopar::rt::AttentionBackend>(info.attentionBackend));
  if (!status.isOk()) {
    std::fprintf(stderr, "train: rank %d: %s\n", launch.rank,
                 oneLine(status.message()).c_str());
    return 1;
  }
  std::vector<autopar::rt::MeshAxisInfo> axes;
  for (int a = 0; a < info.numMeshAxes; ++a)
    axes.push_back({info.meshAxisNames[a], info.meshAxisSizes[a]});
  std::unique_ptr<Communicator> comm;
  status = Communicator::create(
      &argc, &argv, axes.data(), static_cast<int>(axes.size()), comm,
      options.commTimeout > 0 ? options.commTimeout : info.commTimeoutSeconds,
      "train");
  if (!status.isOk()) {
    std::fprintf(stderr, "train: %s\n", oneLine(status.message()).c_str());
    return 1;
  }
  comm->setComputeStream(device->queue());
  // Set-up errors (inputs, checkpoints) are the same on every rank: each
  // prints its line and all exit together. Later ones (rank 0's writes) end
  // every rank at once so that none waits in a collective.
  auto trainer = std::make_unique<Trainer>(info, options, *comm, *device);
  status = trainer->setUp();
  double failed = status.isOk() ? 0 : 1;
  comm->allReduceSumDouble(&failed, 1, (1u << info.numMeshAxes) - 1);
  if (status.isOk() && failed == 0) {
    status = trainer->run();
    // Stopped by SIGTERM / SIGINT: 128 + the signal, as a shell reports it.
    if (status.isOk() && trainer->stoppedBy())
      return 128 + trainer->stoppedBy();
  }
  if (!status.isOk()) {
    std::fflush(stdout);
    std::fprintf(stderr, "train: %s\n", oneLine(status.message()).c_str());
    if (failed == 0 && comm->worldSize() > 1)
      comm->abort(1);
    return 1;
  }
  return failed == 0 ? 0 : 1;
}
