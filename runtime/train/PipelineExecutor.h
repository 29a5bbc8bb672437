//===- PipelineExecutor.h - a pipeline-parallel step ------------*- C++ -*-===//
//
// Pipeline parallelism (ModelInfo::pipeline): each rank runs its list of
// the compiler's schedule, the forward, backward, input-gradient and
// weight-gradient phases of its stages for each micro-batch, with the
// point-to-point transfers of activations and their gradients between
// stages in the groups the compiler placed before each action. The
// transfer buffers and the values a stage saves for its backward come from
// a pool kept from step to step. --trace times every action of one step.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_TRAIN_PIPELINEEXECUTOR_H
#define AUTOPAR_RUNTIME_TRAIN_PIPELINEEXECUTOR_H

#include "runtime/Device.h"
#include "runtime/Model.h"
#include "runtime/Status.h"
#include "runtime/comm/Comm.h"
#include "runtime/train/TensorStore.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace autopar::rt::train {

class PipelineExecutor {
public:
  PipelineExecutor(const autopar::rt::ModelInfo &info,
                   autopar::rt::Communicator &comm, autopar::rt::Device &device,
                   TensorStore &store);
  /// Runs this rank's actions of the schedule for one step (every
  /// micro-batch) and returns the sum of the micro-batches' losses (over
  /// every pipeline rank). The phases read the graph inputs `inputPtrs`,
  /// which `fillInputs(micro)` fills with micro-batch `micro` of the step,
  /// with the dropout key `randomKey(micro)` returns, work in `arena`, and
  /// the last stage's forward writes its loss into
  /// `lossBuffer` (device memory); the gradients accumulate in the store's.
  /// With `tracing`, each action's start and end are kept for writeTrace.
  double run(bool tracing, const std::function<void(int64_t micro)> &fillInputs,
             const std::function<const RandomKey *(int64_t micro)> &randomKey,
             const std::vector<const void *> &inputPtrs, char *arena,
             char *lossBuffer);
  /// Writes the traced step of this rank's pipeline as a Chrome trace.
  Status writeTrace(const std::string &path) const;

private:
  const autopar::rt::ModelInfo &info;
  autopar::rt::Communicator &comm;
  autopar::rt::Device &device;
  TensorStore &store;
  /// --trace: each action's start and end (microseconds of the monotonic
  /// clock) by its index in every rank's lists.
  std::vector<double> traceTimes;
  /// Pipeline parallelism: the buffers of transfers and saved values,
  /// by their bytes, kept from one use to the next (and step to step).
  std::multimap<int64_t, DeviceBuffer> pipelineBuffers;
};

} // namespace autopar::rt::train

#endif // AUTOPAR_RUNTIME_TRAIN_PIPELINEEXECUTOR_H
