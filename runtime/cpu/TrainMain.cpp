//===- TrainMain.cpp - main program of an emitted CPU training binary -----===//
//
//   train --data TOKENS.bin --steps N [--log LOG.jsonl]
//         [--save DIR [--save-every K]] [--resume DIR]
//         [--export-onnx OUT.onnx] [--seed S]
//         [--eval-data TOKENS.bin --eval-every K [--eval-steps M]]
//
// Drives the generated step function (runtime/Model.h): batches from the
// token file, gradient accumulation over micro-steps, clipping, the
// optimizer and LR schedule, the log, checkpoints and the ONNX export.
// Every error is one line naming the input at fault, and a non-zero exit.
//
//===----------------------------------------------------------------------===//

#include "runtime/Model.h"
#include "runtime/Program.h"
#include "runtime/Status.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/data/TokenFile.h"
#include "runtime/log/Logger.h"
#include "runtime/onnx/OnnxExport.h"
#include "runtime/optim/Optimizer.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

/// Defined by the generated model source: the plan's optimizer settings.
autopar::rt::OptimizerConfig autoparOptimizerConfig();

namespace {

using autopar::rt::allocate;
using autopar::rt::Buffer;
using autopar::rt::programDir;
using autopar::rt::readFileExactly;
using autopar::rt::Status;

struct Options {
  std::string data, log, save, resume, exportOnnx, evalData;
  int64_t steps = -1, saveEvery = 0, seed = 0, evalEvery = 0, evalSteps = 1;
};

const char *kUsage =
    "usage: train --data TOKENS.bin --steps N [--log LOG.jsonl] "
    "[--save DIR [--save-every K]] [--resume DIR] [--export-onnx OUT.onnx] "
    "[--seed S] [--eval-data TOKENS.bin --eval-every K [--eval-steps M]]\n";

bool parseInt(const char *text, int64_t &out) {
  char *end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (!*text || *end)
    return false;
  out = v;
  return true;
}

/// Parses argv; on error prints one line and returns false.
bool parseOptions(int argc, char **argv, Options &o, int &exitCode) {
  exitCode = 2;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      exitCode = 0;
      return false;
    }
    std::string *text = nullptr;
    int64_t *number = nullptr;
    if (arg == "--data")
      text = &o.data;
    else if (arg == "--log")
      text = &o.log;
    else if (arg == "--save")
      text = &o.save;
    else if (arg == "--resume")
      text = &o.resume;
    else if (arg == "--export-onnx")
      text = &o.exportOnnx;
    else if (arg == "--eval-data")
      text = &o.evalData;
    else if (arg == "--eval-every")
      number = &o.evalEvery;
    else if (arg == "--eval-steps")
      number = &o.evalSteps;
    else if (arg == "--steps")
      number = &o.steps;
    else if (arg == "--save-every")
      number = &o.saveEvery;
    else if (arg == "--seed")
      number = &o.seed;
    else {
      std::fprintf(stderr, "train: unknown option '%s' (see train --help)\n",
                   arg.c_str());
      return false;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "train: %s needs a value\n", arg.c_str());
      return false;
    }
    const char *value = argv[++i];
    if (text) {
      *text = value;
    } else if (!parseInt(value, *number) || *number < 0) {
      std::fprintf(stderr, "train: %s: expected a non-negative integer, got "
                   "'%s'\n", arg.c_str(), value);
      return false;
    }
  }
  if (o.data.empty() || o.steps < 0) {
    std::fprintf(stderr,
                 "train: --data and --steps are required (see train --help)\n");
    return false;
  }
  if (!o.evalData.empty() != (o.evalEvery > 0)) {
    std::fprintf(stderr, "train: --eval-data and --eval-every K > 0 go "
                         "together\n");
    return false;
  }
  if (o.evalSteps < 1) {
    std::fprintf(stderr, "train: --eval-steps: expected a positive integer\n");
    return false;
  }
  if (o.saveEvery > 0 && o.save.empty()) {
    std::fprintf(stderr, "train: --save-every needs --save DIR\n");
    return false;
  }
  return true;
}

std::string dtypeName(int32_t onnxType) {
  switch (onnxType) {
  case 1: return "f32";
  case 11: return "f64";
  case 7: return "i64";
  case 6: return "i32";
  case 5: return "i16";
  case 3: return "i8";
  case 2: return "u8";
  case 9: return "bool";
  case 10: return "f16";
  case 16: return "bf16";
  default: return "t" + std::to_string(onnxType);
  }
}

/// Checks before training that `path` (empty: none) can be created or
/// replaced: its directory exists and is writable.
Status checkWritable(const std::string &path) {
  if (path.empty())
    return Status::ok();
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0              ? "/"
                                              : path.substr(0, slash);
  if (access(dir.c_str(), W_OK) != 0)
    return Status::error(path + ": cannot write: " + std::strerror(errno));
  return Status::ok();
}

/// Copies token ids into a graph input of int64 or int32 elements.
void storeIds(const std::vector<int64_t> &ids, const autopar::rt::InputInfo &input,
              char *into) {
  if (input.elementBytes == 8) {
    std::memcpy(into, ids.data(), ids.size() * sizeof(int64_t));
    return;
  }
  int32_t *out = reinterpret_cast<int32_t *>(into);
  for (size_t i = 0; i < ids.size(); ++i)
    out[i] = static_cast<int32_t>(ids[i]);
}

const char *optimizerName(const autopar::rt::OptimizerConfig &config) {
  return config.kind == autopar::rt::OptimizerKind::AdamW ? "adamw" : "sgd";
}

class Trainer {
public:
  Trainer(const autopar::rt::ModelInfo &info, const Options &options)
      : info(info), o(options), config(autoparOptimizerConfig()) {}
  Status run();

private:
  Status setUp();
  std::vector<autopar::rt::TensorRef> checkpointTensors();
  Status save(const std::string &dir, int64_t stepsDone);
  /// Mean forward loss over the first --eval-steps batches of --eval-data.
  double evaluate();
  void fillInputs(const autopar::rt::TokenFile &file, int64_t step,
                  int64_t micro);
  Status exportOnnx();

  const autopar::rt::ModelInfo &info;
  const Options &o;
  autopar::rt::OptimizerConfig config;
  std::string dir = programDir();
  Buffer params, arena;
  std::vector<Buffer> grads, state0, state1;
  std::vector<Buffer> inputs;
  std::vector<autopar::rt::ParamSlice> slices;
  autopar::rt::TokenFile tokens, evalTokens;
  std::vector<int64_t> sampleIds, sampleTargets;
  std::vector<const void *> inputPtrs;
  int tokensInput = -1, targetsInput = -1;
  autopar::rt::Logger logger;
  int64_t startStep = 0;
};

Status Trainer::setUp() {
  params = allocate(info.paramBytes);
  // The training step and the forward function never run at once.
  arena = allocate(std::max(info.trainStepArenaBytes, info.forwardArenaBytes));
  if (!params || !arena)
    return Status::error("train: out of memory");
  AUTOPAR_RT_RETURN_IF_ERROR(
      readFileExactly(dir + "/weights.bin", params.get(), info.paramBytes,
                      "initial weights"));
  int states = autopar::rt::numStateBuffers(config);
  for (int t = 0; t < info.numTensors; ++t) {
    const autopar::rt::TensorInfo &ti = info.tensors[t];
    if (!ti.trainable)
      continue;
    int64_t bytes = ti.numElements * 4;
    grads.push_back(allocate(bytes));
    state0.push_back(states > 0 ? allocate(bytes) : Buffer());
    state1.push_back(states > 1 ? allocate(bytes) : Buffer());
    slices.push_back({reinterpret_cast<float *>(params.get() + ti.offset),
                      reinterpret_cast<float *>(grads.back().get()),
                      reinterpret_cast<float *>(state0.back().get()),
                      reinterpret_cast<float *>(state1.back().get()),
                      ti.numElements, ti.decay});
  }
  for (int i = 0; i < info.numInputs; ++i) {
    int64_t n = info.inputs[i].elementBytes;
    for (int d = 0; d < info.inputs[i].rank; ++d)
      n *= info.inputs[i].shape[d];
    inputs.push_back(allocate(n));
  }
  AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::loadTokenFile(o.data, tokens));
  int64_t vocab = std::min(info.inputVocab, info.targetVocab);
  AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::checkTokenFile(
      tokens, info.microBatch * info.microBatches, info.seqLen, vocab));
  if (!o.evalData.empty()) {
    AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::loadTokenFile(o.evalData, evalTokens));
    AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::checkTokenFile(
        evalTokens, info.microBatch * info.microBatches, info.seqLen, vocab));
  }
  if (!o.resume.empty()) {
    autopar::rt::CheckpointMeta meta;
    AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::loadCheckpoint(
        o.resume, checkpointTensors(), meta, info.fingerprint,
        optimizerName(config)));
    startStep = meta.step;
  }
  AUTOPAR_RT_RETURN_IF_ERROR(checkWritable(o.save));
  AUTOPAR_RT_RETURN_IF_ERROR(checkWritable(o.exportOnnx));
  return logger.open(o.log, /*append=*/!o.resume.empty());
}

std::vector<autopar::rt::TensorRef> Trainer::checkpointTensors() {
  std::vector<autopar::rt::TensorRef> refs;
  size_t k = 0;
  for (int t = 0; t < info.numTensors; ++t) {
    const autopar::rt::TensorInfo &ti = info.tensors[t];
    std::vector<int64_t> shape(ti.shape, ti.shape + ti.rank);
    int64_t bytes = ti.numElements * ti.elementBytes;
    refs.push_back({ti.name, dtypeName(ti.onnxType), shape,
                    params.get() + ti.offset, bytes});
    if (!ti.trainable)
      continue;
    bool adamw = config.kind == autopar::rt::OptimizerKind::AdamW;
    if (state0[k])
      refs.push_back({std::string(ti.name) +
                          (adamw ? ".exp_avg" : ".momentum_buffer"),
                      "f32", shape, state0[k].get(), bytes});
    if (state1[k])
      refs.push_back({std::string(ti.name) + ".exp_avg_sq", "f32", shape,
                      state1[k].get(), bytes});
    ++k;
  }
  return refs;
}

Status Trainer::save(const std::string &path, int64_t stepsDone) {
  autopar::rt::CheckpointMeta meta;
  meta.step = stepsDone;
  meta.modelFingerprint = info.fingerprint;
  meta.optimizer = optimizerName(config);
  return autopar::rt::saveCheckpoint(path, checkpointTensors(), meta);
}

Status Trainer::exportOnnx() {
  std::vector<autopar::rt::ExportTensor> tensors;
  for (int t = 0; t < info.numTensors; ++t) {
    // Every parameter, frozen ones too: a frozen Identity alias of a
    // trained tensor must become an initializer of its own.
    const autopar::rt::TensorInfo &ti = info.tensors[t];
    if (ti.buffer)
      continue;
    tensors.push_back({ti.name, ti.onnxType,
                       std::vector<int64_t>(ti.shape, ti.shape + ti.rank),
                       params.get() + ti.offset,
                       ti.numElements * ti.elementBytes});
  }
  return autopar::rt::exportOnnxWeights(dir + "/model.onnx", o.exportOnnx,
                                        tensors);
}

void Trainer::fillInputs(const autopar::rt::TokenFile &file, int64_t step,
                         int64_t micro) {
  autopar::rt::fillSamples(file, step, info.microBatch * info.microBatches,
                           info.seqLen, micro * info.microBatch,
                           info.microBatch, sampleIds.data(),
                           sampleTargets.data());
  storeIds(sampleIds, info.inputs[tokensInput], inputs[tokensInput].get());
  storeIds(sampleTargets, info.inputs[targetsInput],
           inputs[targetsInput].get());
}

double Trainer::evaluate() {
  float loss = 0;
  void *outputs[] = {&loss};
  double sum = 0;
  for (int64_t step = 0; step < o.evalSteps; ++step)
    for (int64_t micro = 0; micro < info.microBatches; ++micro) {
      fillInputs(evalTokens, step, micro);
      info.forward({params.get(), inputPtrs.data(), arena.get(), outputs,
                    1.0f, false});
      sum += loss;
    }
  return sum / static_cast<double>(o.evalSteps * info.microBatches);
}

Status Trainer::run() {
  AUTOPAR_RT_RETURN_IF_ERROR(setUp());
  int64_t globalBatch = info.microBatch * info.microBatches;
  std::vector<void *> outputs(info.trainStepResults);
  float loss = 0;
  outputs[0] = &loss;
  {
    size_t k = 0;
    for (int t = 0; t < info.numTensors; ++t)
      if (info.tensors[t].trainable)
        outputs[info.tensors[t].gradResult] = grads[k++].get();
  }
  for (Buffer &b : inputs)
    inputPtrs.push_back(b.get());
  for (int i = 0; i < info.numInputs; ++i)
    (info.inputs[i].role == 0 ? tokensInput : targetsInput) = i;
  sampleIds.resize(info.microBatch * info.seqLen);
  sampleTargets.resize(sampleIds.size());

  for (int64_t step = startStep; step < o.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    double lossSum = 0;
    for (int64_t micro = 0; micro < info.microBatches; ++micro) {
      fillInputs(tokens, step, micro);
      autopar::rt::StepIO io{params.get(), inputPtrs.data(), arena.get(),
                             outputs.data(),
                             1.0f / static_cast<float>(info.microBatches),
                             micro > 0};
      info.trainStep(io);
      lossSum += loss;
    }
    double norm = autopar::rt::clipGradNorm(config, slices);
    double lr = autopar::rt::scheduledLr(config, step, o.steps);
    autopar::rt::optimizerStep(config, slices, step + 1, lr);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    double stepTokens = static_cast<double>(globalBatch * info.seqLen);
    logger.logStep({step, lossSum / info.microBatches, lr, norm, ms,
                    stepTokens / (ms / 1000.0)},
                   o.steps);
    AUTOPAR_RT_RETURN_IF_ERROR(logger.writeStatus());
    // Evaluation with the weights after step + 1 updates (those the
    // forward of step + 1 uses), every --eval-every steps and at the end.
    if (o.evalEvery > 0 &&
        ((step + 1) % o.evalEvery == 0 || step + 1 == o.steps)) {
      char line[128];
      std::snprintf(line, sizeof(line), "{\"step\":%lld,\"eval_loss\":%s}",
                    static_cast<long long>(step + 1),
                    autopar::rt::jsonNumber(evaluate()).c_str());
      logger.logEvent(line);
      AUTOPAR_RT_RETURN_IF_ERROR(logger.writeStatus());
    }
    if (o.saveEvery > 0 && (step + 1) % o.saveEvery == 0 && step + 1 < o.steps)
      AUTOPAR_RT_RETURN_IF_ERROR(save(o.save, step + 1));
  }
  logger.finish();
  if (!o.save.empty())
    AUTOPAR_RT_RETURN_IF_ERROR(save(o.save, std::max(o.steps, startStep)));
  if (!o.exportOnnx.empty())
    AUTOPAR_RT_RETURN_IF_ERROR(exportOnnx());
  return Status::ok();
}

} // namespace

int main(int argc, char **argv) {
  autopar::rt::cpu::fixBlasCoreType(argv);
  autopar::rt::cpu::initBlas();
  Options options;
  int exitCode = 0;
  if (!parseOptions(argc, argv, options, exitCode))
    return exitCode;
  const autopar::rt::ModelInfo &info = autoparModelInfo();
  Trainer trainer(info, options);
  Status status = trainer.run();
  if (!status.isOk()) {
    std::fflush(stdout);
    std::fprintf(stderr, "train: %s\n", status.message().c_str());
    return 1;
  }
  return 0;
}
