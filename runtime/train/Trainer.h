//===- Trainer.h - the training loop of an emitted program ------*- C++ -*-===//
//
// Drives the generated step function (runtime/Model.h): batches from the
// token file, gradient accumulation over micro-steps, clipping, the
// optimizer and LR schedule, the log, evaluation, checkpoints and the ONNX
// export.
//
// The same code serves every target: parameters, gradients, optimizer
// state, inputs and the loss live in the memory of the target's Device
// (runtime/Device.h: host memory on the CPU, GPU memory on CUDA), which
// also runs the optimizer; token batches, checkpoints and exports are
// staged through host memory.
//
// On a mesh (mpirun -np N, N = mesh size) every rank runs the program on
// its share of each micro-batch; the generated step holds the collectives
// of data parallelism and ZeRO-2/3. The trainer adds what happens between
// steps: ZeRO-1's reduce-scatter of the accumulated gradients, the
// optimizer on this rank's flat shards (ZeRO 1-3), the all-gather of the
// updated parameters (ZeRO 1-2), the global gradient norm, and full
// tensors for checkpoints and the ONNX export (written by rank 0). Where
// the tensors are kept is the tensor store's (runtime/train/TensorStore.h);
// a pipeline-parallel step is the pipeline executor's
// (runtime/train/PipelineExecutor.h).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_TRAIN_TRAINER_H
#define AUTOPAR_RUNTIME_TRAIN_TRAINER_H

#include "runtime/Device.h"
#include "runtime/Model.h"
#include "runtime/Program.h"
#include "runtime/Status.h"
#include "runtime/comm/Comm.h"
#include "runtime/comm/CommBytes.h"
#include "runtime/data/TokenFile.h"
#include "runtime/log/Logger.h"
#include "runtime/optim/Optimizer.h"
#include "runtime/train/Options.h"
#include "runtime/train/PipelineExecutor.h"
#include "runtime/train/TensorStore.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autopar::rt::train {

class Trainer {
public:
  Trainer(const autopar::rt::ModelInfo &info, const Options &options,
          Communicator &comm, Device &device);
  /// Allocates and loads what the run needs (the weights, the token files,
  /// the checkpoint of --resume) and checks every output before the run.
  Status setUp();
  /// Trains up to --steps (or until SIGTERM / SIGINT), then saves
  /// (--save) and exports (--export-onnx).
  Status run();
  /// The signal the run stopped on (0: it ran to --steps).
  int stoppedBy() const { return stopped; }

private:
  bool leader() const { return comm.rank() == 0; }
  int64_t dpSize() const {
    int64_t size = 1;
    for (int a = 0; a < info.numMeshAxes; ++a)
      if ((info.dataAxes >> a) & 1)
        size *= info.meshAxisSizes[a];
    return size;
  }
  autopar::rt::AxisMask dpMask() const { return info.dataAxes; }
  Status save(const std::string &dir, int64_t stepsDone);
  Status resume();
  /// The mean forward loss over the first --eval-steps batches of
  /// --eval-data, into `loss`.
  Status evaluate(double &loss);
  void fillInputs(const autopar::rt::TokenFile &file, int64_t step,
                  int64_t micro);
  /// The dropout key of micro-batch `micro` of step `step` (the seed from
  /// --seed), uploaded to the device buffer the step functions read.
  const autopar::rt::RandomKey *randomKey(int64_t step, int64_t micro);
  Status exportOnnx();
  /// The LoRA adapters in PEFT's format (--export-adapter DIR).
  Status exportAdapter();
  /// Runs the step function `fn` (with `numResults` results) on `io` and
  /// returns its loss (result 0).
  float runStep(autopar::rt::StepFunction fn, int numResults,
                autopar::rt::StepIO io);

  const autopar::rt::ModelInfo &info;
  const Options &o;
  Communicator &comm;
  Device &device;
  autopar::rt::OptimizerConfig config;
  TensorStore store;
  PipelineExecutor pipeline;
  int stopped = 0;
  std::string dir = programDir();
  DeviceBuffer arena, lossBuffer, randomBuffer;
  /// Graph inputs: device buffers and their host staging.
  std::vector<DeviceBuffer> inputs;
  std::vector<Buffer> hostInputs;
  autopar::rt::TokenFile tokens, evalTokens;
  std::vector<int64_t> sampleIds, sampleTargets;
  std::vector<const void *> inputPtrs;
  int tokensInput = -1, targetsInput = -1;
  /// fp16-mixed: the input that takes the loss scale (role 2), the scaler
  /// (scale 0: no loss scaling), and the steps skipped for inf / NaN
  /// gradients (AdamW's step count leaves them out).
  int lossScaleInput = -1;
  autopar::rt::LossScaleConfig lossConfig;
  autopar::rt::LossScaleState scaler;
  int64_t skippedSteps = 0;
  /// The gradient sums still pending after a step (ZeRO-1, accumulation
  /// at stage 0, a replicated parameter's sum over tp), each trainable
  /// tensor's all-reduce (before its reduce-scatter, or whole) in a bucket
  /// with the other small ones of its group and type (rt::StepBuckets;
  /// bucket -1: alone), and the buckets: device memory, group, type.
  struct PendingSum {
    autopar::rt::AxisMask axes = 0;
    autopar::rt::StepBuckets::Place place;
  };
  std::vector<PendingSum> pendingSums;
  std::vector<DeviceBuffer> bucketMemory;
  std::vector<autopar::rt::AxisMask> bucketAxes;
  std::vector<autopar::rt::CommType> bucketTypes;
  std::vector<int64_t> bucketElements;
  /// Lays the buckets out (once, after the store).
  Status setUpBuckets();
  /// ZeRO-Infinity: the swap file's bytes before the step (the log's
  /// nvme_bytes are the step's).
  int64_t swapRead = 0, swapWritten = 0;
  autopar::rt::Logger logger;
  int64_t startStep = 0;
  /// --trace: the step whose pipeline actions are timed (-1: none).
  int64_t tracedStep = -1;
};

} // namespace autopar::rt::train

#endif // AUTOPAR_RUNTIME_TRAIN_TRAINER_H
