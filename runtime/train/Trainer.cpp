//===- Trainer.cpp - the training loop of an emitted program --------------===//
//
// A step: the micro-batches' forward and backward (or the pipeline's
// schedule), the reductions of gradients still pending, the norm and
// clipping, the update (on the device, or on the host under ZeRO-Offload)
// with fp16-mixed's loss scaling, the all-gather of updated shards; then
// the log line, an evaluation, a stop on a signal and a periodic save.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Trainer.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/onnx/OnnxExport.h"
#include "runtime/support/File.h"
#include "runtime/support/Json.h"
#include "runtime/support/Philox.h"
#include "runtime/support/Quantize.h"
#include "runtime/train/TensorLayout.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/// Defined by the generated model source: the plan's optimizer settings.
autopar::rt::OptimizerConfig autoparOptimizerConfig();
autopar::rt::LossScaleConfig autoparLossScaleConfig();

namespace autopar::rt::train {

namespace {

/// The SIGTERM or SIGINT that asked the run to stop (0: none): the step in
/// progress finishes, a checkpoint is saved (--save), and the run exits. A
/// second one ends the process at once.
std::atomic<int> stopSignal{0};

extern "C" void onStopSignal(int sig) {
  if (stopSignal.exchange(sig) != 0) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

/// Checks before training that the file `path` (empty: none) can be
/// created or replaced: not a directory, in a writable directory.
Status checkWritable(const std::string &path) {
  if (path.empty())
    return Status::ok();
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return Status::error(path + ": is a directory");
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0              ? "/"
                                              : path.substr(0, slash);
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(path + ": cannot write: " + dir +
                         " is not a directory");
  // A probe next to it, made and removed (the file itself is written to a
  // temporary name and renamed into place).
  const std::string probe = path + ".probe-" + std::to_string(getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0)
    return Status::error(path + ": cannot write: " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::ok();
}

/// Copies token ids into a graph input of int64 or int32 elements.
void storeIds(const std::vector<int64_t> &ids,
              const autopar::rt::InputInfo &input, char *into) {
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

/// JSON of the bytes the collectives moved since the last reset.
/// The step's comm bytes keyed by group (its mesh axes joined by ',', mesh
/// order; every axis of size > 1 listed, zeros included), then kind (a
/// point-to-point send under the axes the two ranks differ on), as
/// report.json's comm_bytes_per_step.
std::string commBytesJson(const Communicator &comm,
                          const autopar::rt::ModelInfo &info) {
  using autopar::rt::jsonExactNumber;
  std::vector<autopar::rt::AxisMask> groups;
  for (int a = 0; a < info.numMeshAxes; ++a)
    if (info.meshAxisSizes[a] > 1)
      groups.push_back(1u << a);
  for (autopar::rt::AxisMask g : comm.groupsWithBytes())
    if (std::find(groups.begin(), groups.end(), g) == groups.end())
      groups.push_back(g);
  std::sort(groups.begin(), groups.end());
  std::string json = "{";
  for (autopar::rt::AxisMask g : groups) {
    std::string name;
    for (int a = 0; a < info.numMeshAxes; ++a)
      if ((g >> a) & 1)
        name += (name.empty() ? "" : ",") + std::string(info.meshAxisNames[a]);
    json +=
        (json.size() > 1 ? ",\"" : "\"") + name + "\":{\"all_reduce\":" +
        jsonExactNumber(comm.bytes(CollectiveKind::AllReduce, g)) +
        ",\"reduce_scatter\":" +
        jsonExactNumber(comm.bytes(CollectiveKind::ReduceScatter, g)) +
        ",\"all_gather\":" +
        jsonExactNumber(comm.bytes(CollectiveKind::AllGather, g)) +
        ",\"send\":" + jsonExactNumber(comm.bytes(CollectiveKind::Send, g)) +
        ",\"all_to_all\":" +
        jsonExactNumber(comm.bytes(CollectiveKind::AllToAll, g)) + "}";
  }
  return json + "}";
}

} // namespace

Trainer::Trainer(const autopar::rt::ModelInfo &info, const Options &options,
                 Communicator &comm, Device &device)
    : info(info), o(options), comm(comm), device(device),
      config(autoparOptimizerConfig()), store(info, comm, device, config),
      pipeline(info, comm, device, store),
      lossConfig(autoparLossScaleConfig()) {}

Status Trainer::setUp() {
  auto outOfMemory = [&] {
    return Status::error("out of memory on " + device.name());
  };
  AUTOPAR_RT_RETURN_IF_ERROR(store.setUp(static_cast<uint64_t>(o.seed)));
  AUTOPAR_RT_RETURN_IF_ERROR(setUpBuckets());
  // The training step and the forward function never run at once.
  int64_t arenaBytes =
      std::max(info.trainStepArenaBytes, info.forwardArenaBytes);
  if (info.pipeline)
    for (int s = 0; s < info.pipeline->numStages; ++s) {
      const autopar::rt::PipelineStage &st = info.pipeline->stages[s];
      for (const autopar::rt::PipelinePhase *ph :
           {&st.forward, &st.backward, &st.input, &st.weight})
        if (ph->fn)
          arenaBytes = std::max(arenaBytes, ph->arenaBytes);
    }
  arena = device.allocate(arenaBytes);
  lossBuffer = device.allocate(sizeof(float));
  randomBuffer = device.allocate(sizeof(autopar::rt::RandomKey));
  if (!arena || !lossBuffer || !randomBuffer)
    return outOfMemory();
  for (int i = 0; i < info.numInputs; ++i) {
    if (info.inputs[i].role == 2) {
      lossScaleInput = i;
      scaler = autopar::rt::initialLossScale(lossConfig);
    }
    int64_t n = info.inputs[i].elementBytes;
    for (int d = 0; d < info.inputs[i].rank; ++d)
      n *= info.inputs[i].shape[d];
    inputs.push_back(device.allocate(n));
    hostInputs.push_back(allocate(n));
    if (!inputs.back() || !hostInputs.back())
      return outOfMemory();
  }
  const int64_t globalBatch = info.microBatch * info.microBatches * dpSize();
  AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::loadTokenFile(o.data, tokens));
  int64_t vocab = std::min(info.inputVocab, info.targetVocab);
  AUTOPAR_RT_RETURN_IF_ERROR(
      autopar::rt::checkTokenFile(tokens, globalBatch, info.seqLen, vocab));
  if (!o.evalData.empty()) {
    AUTOPAR_RT_RETURN_IF_ERROR(
        autopar::rt::loadTokenFile(o.evalData, evalTokens));
    AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::checkTokenFile(
        evalTokens, globalBatch, info.seqLen, vocab));
    // More batches than one pass over the file would evaluate the same ones
    // again (and a huge count would run without end).
    const int64_t batches =
        autopar::rt::stepsPerPass(evalTokens, globalBatch, info.seqLen);
    if (o.evalSteps > batches)
      return Status::error(
          "--eval-steps " + std::to_string(o.evalSteps) + ": " + o.evalData +
          " holds " + std::to_string(batches) + " batch" +
          (batches == 1 ? "" : "es") + " of " + std::to_string(globalBatch) +
          " x " + std::to_string(info.seqLen) + " tokens; at most " +
          std::to_string(batches));
  }
  if (!o.resume.empty())
    AUTOPAR_RT_RETURN_IF_ERROR(resume());
  // Every output is checked before the run (a save into a folder it would
  // refuse, an export at a folder): no run lost to a late error.
  if (!o.save.empty())
    AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::checkSaveTarget(o.save));
  AUTOPAR_RT_RETURN_IF_ERROR(checkWritable(o.exportOnnx));
  if (!o.exportAdapter.empty()) {
    if (!info.numLora)
      return Status::error("--export-adapter " + o.exportAdapter +
                           ": the program has no LoRA adapters (plan lora)");
    if (info.loraExportProblem)
      return Status::error("--export-adapter " + o.exportAdapter + ": " +
                           info.loraExportProblem);
    struct stat st;
    if (stat(o.exportAdapter.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return Status::error(o.exportAdapter + ": is not a directory");
    } else {
      AUTOPAR_RT_RETURN_IF_ERROR(checkWritable(o.exportAdapter));
    }
  }
  if (leader())
    return logger.open(o.log, /*append=*/!o.resume.empty());
  return Status::ok();
}

Status Trainer::save(const std::string &path, int64_t stepsDone) {
  if (info.pipeline)
    AUTOPAR_RT_RETURN_IF_ERROR(store.syncPipelineTensors());
  AUTOPAR_RT_RETURN_IF_ERROR(store.swapIn(/*read=*/true));
  std::vector<Buffer> full;
  std::vector<autopar::rt::TensorRef> refs =
      store.checkpointTensors(full, true);
  Status status = Status::ok();
  if (leader()) {
    autopar::rt::CheckpointMeta meta;
    meta.step = stepsDone;
    meta.modelFingerprint = info.fingerprint;
    meta.optimizer = optimizerName(config);
    meta.lossScale = scaler.scale;
    meta.lossScaleGoodSteps = scaler.goodSteps;
    meta.lossScaleHysteresisLeft = scaler.hysteresisLeft;
    meta.skippedSteps = skippedSteps;
    status = autopar::rt::saveCheckpoint(path, refs, meta, o.keepLast);
  }
  AUTOPAR_RT_RETURN_IF_ERROR(store.swapOut(/*write=*/false));
  AUTOPAR_RT_RETURN_IF_ERROR(store.wholeParameters(false));
  AUTOPAR_RT_RETURN_IF_ERROR(store.haveOthersState(false));
  return status;
}

Status Trainer::resume() {
  // Every rank reads the full tensors and keeps its part: a checkpoint
  // holds logical tensors, so it loads under any dp / ZeRO plan.
  std::vector<Buffer> full;
  AUTOPAR_RT_RETURN_IF_ERROR(store.haveOthersState(true));
  AUTOPAR_RT_RETURN_IF_ERROR(store.swapIn(/*read=*/false));
  AUTOPAR_RT_RETURN_IF_ERROR(store.wholeParameters(true));
  std::vector<autopar::rt::TensorRef> refs =
      store.checkpointTensors(full, false);
  autopar::rt::CheckpointMeta meta;
  AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::loadCheckpoint(
      o.resume, refs, meta, info.fingerprint, optimizerName(config)));
  startStep = meta.step;
  skippedSteps = meta.skippedSteps;
  // A checkpoint of a run without loss scaling starts the scaler afresh.
  if (lossScaleInput >= 0 && meta.lossScale > 0) {
    scaler.scale = meta.lossScale;
    scaler.goodSteps = meta.lossScaleGoodSteps;
    // A checkpoint of before hysteresis: none used up.
    scaler.hysteresisLeft =
        meta.lossScaleHysteresisLeft > 0
            ? std::min(meta.lossScaleHysteresisLeft, lossConfig.hysteresis)
            : lossConfig.hysteresis;
  }
  store.storeCheckpointTensors(refs);
  AUTOPAR_RT_RETURN_IF_ERROR(store.swapOut(/*write=*/true));
  AUTOPAR_RT_RETURN_IF_ERROR(store.wholeParameters(false));
  return store.haveOthersState(false);
}

Status Trainer::exportOnnx() {
  if (info.pipeline)
    AUTOPAR_RT_RETURN_IF_ERROR(store.syncPipelineTensors());
  AUTOPAR_RT_RETURN_IF_ERROR(store.swapIn(/*read=*/true));
  std::vector<Buffer> full;
  std::vector<autopar::rt::ExportTensor> tensors = store.exportTensors(full);
  // Quantized weights (plan quantize): the model's initializer holds the
  // dequantized values, not its codes and scales.
  std::vector<bool> notExported(info.numTensors);
  std::vector<std::vector<float>> made;
  made.reserve(info.numQuantized + info.numLora);
  auto named = [&](const char *name) -> autopar::rt::ExportTensor * {
    for (autopar::rt::ExportTensor &e : tensors)
      if (e.name == name)
        return &e;
    return nullptr;
  };
  std::vector<autopar::rt::ExportTensor> added;
  for (int k = 0; k < info.numQuantized; ++k) {
    const autopar::rt::QuantizedWeight &q = info.quantized[k];
    notExported[q.codes] = notExported[q.absmax] = true;
    autopar::rt::ExportTensor *codes = named(info.tensors[q.codes].name);
    autopar::rt::ExportTensor *absmax = named(info.tensors[q.absmax].name);
    autopar::rt::ExportTensor *state2 = nullptr;
    if (q.state2 >= 0) {
      notExported[q.state2] = true;
      state2 = named(info.tensors[q.state2].name);
    }
    if (!codes || !absmax || (q.state2 >= 0 && !state2))
      return Status::error(std::string("--export-onnx: the codes of '") +
                           q.name + "' are missing");
    std::vector<float> w(q.rows * q.cols);
    for (int64_t e = 0; e < q.rows * q.cols; ++e)
      w[e] = autopar::rt::dequantizeElement(
          static_cast<const int8_t *>(codes->data), absmax->data,
          state2 ? static_cast<const float *>(state2->data) : nullptr, q.kind,
          q.blockSize, q.cols, q.axis, e);
    made.push_back(std::move(w));
    added.push_back(
        {q.name, 1, {q.rows, q.cols}, made.back().data(), q.rows * q.cols * 4});
  }
  // LoRA: the merged model, each adapted weight W + scale B A in W's own
  // orientation; the adapters are no initializers of the model.
  for (int k = 0; k < info.numLora; ++k) {
    const autopar::rt::LoraAdapter &l = info.lora[k];
    notExported[l.a] = notExported[l.b] = true;
    autopar::rt::ExportTensor *w = nullptr;
    for (autopar::rt::ExportTensor &e : added)
      if (e.name == l.baseName)
        w = &e;
    if (!w)
      w = named(l.baseName);
    autopar::rt::ExportTensor *a = named(info.tensors[l.a].name);
    autopar::rt::ExportTensor *b = named(info.tensors[l.b].name);
    if (!w || !a || !b || w->onnxDataType != 1 || a->onnxDataType != 1 ||
        b->onnxDataType != 1 || a->dims.size() != 2 || b->dims.size() != 2)
      return Status::error(std::string("--export-onnx: the LoRA of '") +
                           l.baseName + "' is not three float32 matrices");
    const int64_t r = a->dims[0], in = a->dims[1], out = b->dims[0];
    const float *wa = static_cast<const float *>(a->data);
    const float *wb = static_cast<const float *>(b->data);
    std::vector<float> m(static_cast<const float *>(w->data),
                         static_cast<const float *>(w->data) + in * out);
    // delta[o][i] = scale sum_j B[o][j] A[j][i]; W is [out, in] or [in, out].
    for (int64_t oi = 0; oi < out; ++oi)
      for (int64_t ii = 0; ii < in; ++ii) {
        double sum = 0;
        for (int64_t j = 0; j < r; ++j)
          sum += static_cast<double>(wb[oi * r + j]) * wa[j * in + ii];
        m[l.inOut ? ii * out + oi : oi * in + ii] +=
            static_cast<float>(l.scale * sum);
      }
    made.push_back(std::move(m));
    w->data = made.back().data();
  }
  if (info.numLora || info.numQuantized) {
    std::vector<autopar::rt::ExportTensor> kept;
    for (int t = 0, e = 0; t < info.numTensors; ++t) {
      if (info.tensors[t].buffer)
        continue;
      if (!notExported[t])
        kept.push_back(tensors[e]);
      ++e;
    }
    kept.insert(kept.end(), added.begin(), added.end());
    tensors = std::move(kept);
  }
  Status status = leader() ? autopar::rt::exportOnnxWeights(
                                 dir + "/model.onnx", o.exportOnnx, tensors)
                           : Status::ok();
  AUTOPAR_RT_RETURN_IF_ERROR(store.swapOut(/*write=*/false));
  AUTOPAR_RT_RETURN_IF_ERROR(store.wholeParameters(false));
  AUTOPAR_RT_RETURN_IF_ERROR(store.haveOthersState(false));
  return status;
}

Status Trainer::exportAdapter() {
  if (info.pipeline)
    AUTOPAR_RT_RETURN_IF_ERROR(store.syncPipelineTensors());
  AUTOPAR_RT_RETURN_IF_ERROR(store.swapIn(/*read=*/true));
  std::vector<Buffer> full;
  std::vector<autopar::rt::ExportTensor> tensors = store.exportTensors(full);
  Status status = Status::ok();
  if (leader()) {
    // safetensors: an 8-byte little-endian header size, the JSON header
    // (name -> dtype, shape, [begin, end) of the data), the data.
    std::vector<std::pair<std::string, const autopar::rt::ExportTensor *>>
        named;
    for (int k = 0; k < info.numLora; ++k)
      for (int t : {info.lora[k].a, info.lora[k].b})
        for (const autopar::rt::ExportTensor &e : tensors)
          if (e.name == info.tensors[t].name)
            named.emplace_back(
                std::string("base_model.model.") + info.lora[k].module +
                    (t == info.lora[k].a ? ".lora_A.weight" : ".lora_B.weight"),
                &e);
    for (int k = 0; k < info.numLoraSaved; ++k)
      for (const autopar::rt::ExportTensor &e : tensors)
        if (e.name == info.tensors[info.loraSaved[k].tensor].name)
          named.emplace_back(info.loraSaved[k].key, &e);
    std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
    int64_t offset = 0;
    for (const auto &[name, e] : named) {
      const char *dtype = e->onnxDataType == 10   ? "F16"
                          : e->onnxDataType == 16 ? "BF16"
                          : e->onnxDataType == 11 ? "F64"
                                                  : "F32";
      header += "," + autopar::rt::jsonQuote(name) + ":{\"dtype\":\"" + dtype +
                "\",\"shape\":[";
      for (size_t d = 0; d < e->dims.size(); ++d)
        header += (d ? "," : "") + std::to_string(e->dims[d]);
      header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
                std::to_string(offset + e->numBytes) + "]}";
      offset += e->numBytes;
    }
    header += "}";
    header.append((8 - header.size() % 8) % 8, ' ');
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i)
      bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
    bytes += header;
    for (const auto &[name, e] : named)
      bytes.append(static_cast<const char *>(e->data), e->numBytes);
    ::mkdir(o.exportAdapter.c_str(), 0755);
    status = autopar::rt::writeFileAtomically(o.exportAdapter +
                                                  "/adapter_model.safetensors",
                                              bytes.data(), bytes.size());
    if (status.isOk())
      status = autopar::rt::writeFileAtomically(
          o.exportAdapter + "/adapter_config.json", info.loraConfig,
          std::strlen(info.loraConfig));
  }
  AUTOPAR_RT_RETURN_IF_ERROR(store.swapOut(/*write=*/false));
  AUTOPAR_RT_RETURN_IF_ERROR(store.wholeParameters(false));
  AUTOPAR_RT_RETURN_IF_ERROR(store.haveOthersState(false));
  return status;
}

void Trainer::fillInputs(const autopar::rt::TokenFile &file, int64_t step,
                         int64_t micro) {
  // Micro-batch `micro` is samples [micro * B/m, (micro + 1) * B/m) of the
  // step's global batch B, whatever the plan; this rank takes its dp block.
  const int64_t dp = dpSize();
  const int64_t globalBatch = info.microBatch * info.microBatches * dp;
  const int64_t first =
      (micro * dp + comm.groupIndex(dpMask())) * info.microBatch;
  autopar::rt::fillSamples(file, step, globalBatch, info.seqLen, first,
                           info.microBatch, sampleIds.data(),
                           sampleTargets.data());
  if (info.targetsFromTokens)
    sampleTargets = sampleIds;
  for (int i : {tokensInput, targetsInput}) {
    storeIds(i == tokensInput ? sampleIds : sampleTargets, info.inputs[i],
             hostInputs[i].get());
    device.upload(inputs[i].get(), hostInputs[i].get(),
                  static_cast<int64_t>(sampleIds.size()) *
                      info.inputs[i].elementBytes);
  }
}

const autopar::rt::RandomKey *Trainer::randomKey(int64_t step, int64_t micro) {
  if (!info.dropout)
    return nullptr;
  const autopar::rt::RandomKey key{static_cast<uint64_t>(o.seed),
                                   static_cast<uint64_t>(step),
                                   static_cast<uint64_t>(micro)};
  device.upload(randomBuffer.get(), &key, sizeof(key));
  return reinterpret_cast<const autopar::rt::RandomKey *>(randomBuffer.get());
}

Status Trainer::setUpBuckets() {
  // In tensor order, as the compiler's report counts them.
  autopar::rt::StepBuckets buckets(info.stepBucketBytes);
  pendingSums.assign(store.shards.size(), PendingSum());
  for (size_t k = 0; k < store.shards.size(); ++k) {
    const autopar::rt::TensorInfo &ti = *store.shards[k].tensor;
    if (!ti.gradReduceAxes ||
        store.othersTensor(static_cast<int>(&ti - info.tensors)))
      continue;
    // Beyond the update's axes (and hybrid sharding's replicas, summed on
    // the shard after), or all of them.
    PendingSum &sum = pendingSums[k];
    sum.axes = ti.updateAxes
                   ? ti.gradReduceAxes & ~ti.updateAxes & ~ti.shardReduceAxes
                   : ti.gradReduceAxes;
    if (!sum.axes)
      continue;
    const uint64_t key =
        uint64_t{sum.axes} << 8 | static_cast<uint64_t>(ti.gradElementBytes);
    sum.place = buckets.add(key, ti.numElements * ti.gradElementBytes);
    if (sum.place.bucket >= static_cast<int>(bucketAxes.size())) {
      bucketAxes.push_back(sum.axes);
      bucketTypes.push_back(gradCommType(ti));
    }
  }
  for (size_t b = 0; b < buckets.bucketSizes().size(); ++b) {
    const int64_t bytes = buckets.bucketSizes()[b];
    bucketMemory.push_back(device.allocate(bytes));
    if (!bucketMemory.back())
      return Status::error("out of memory on " + device.name() +
                           " for the gradient buckets");
    // The bucket's element size is its key's low byte.
    bucketElements.push_back(
        bytes / static_cast<int64_t>(buckets.bucketKeys()[b] & 0xFF));
  }
  return Status::ok();
}

float Trainer::runStep(autopar::rt::StepFunction fn, int numResults,
                       autopar::rt::StepIO io) {
  io.comm = &comm;
  io.device = device.context();
  if (autopar::rt::ParamSwap *source = store.paramSource()) {
    source->beginPass(reinterpret_cast<const void *>(fn));
    io.paramSource = source;
  }
  // A step with collectives in it runs without CUDA graphs for now.
  if (comm.worldSize() > 1)
    fn(io);
  else
    device.runStep(fn, io, info.numInputs, numResults);
  float loss = 0;
  device.download(&loss, lossBuffer.get(), sizeof(float));
  return loss;
}

Status Trainer::evaluate(double &loss) {
  if (info.pipeline)
    AUTOPAR_RT_RETURN_IF_ERROR(store.syncPipelineTensors(/*withState=*/false));
  void *outputs[] = {lossBuffer.get()};
  double sum = 0;
  for (int64_t step = 0; step < o.evalSteps; ++step)
    for (int64_t micro = 0; micro < info.microBatches; ++micro) {
      fillInputs(evalTokens, step, micro);
      sum +=
          runStep(info.forward, 1,
                  {info.pipeline ? store.wholeParams.get() : store.params.get(),
                   inputPtrs.data(), arena.get(), outputs, 1.0f, false});
    }
  loss = sum / static_cast<double>(o.evalSteps * info.microBatches);
  if (autopar::rt::ParamSwap *source = store.paramSource())
    AUTOPAR_RT_RETURN_IF_ERROR(source->takeFailure());
  return info.pipeline ? store.wholeParameters(false) : Status::ok();
}

Status Trainer::run() {
  if (!o.trace.empty()) {
    if (!info.pipeline)
      return Status::error("--trace: this program has no pipeline "
                           "(mesh.pp = 1); only pipeline-parallel programs "
                           "trace their steps");
    // The last step: the pipeline in its steady state.
    tracedStep = o.steps - 1;
  }
  const int64_t dp = dpSize();
  const int64_t globalBatch = info.microBatch * info.microBatches * dp;
  std::vector<void *> outputs(std::max(info.trainStepResults, 1));
  outputs[0] = lossBuffer.get();
  if (!info.pipeline) {
    size_t k = 0;
    for (int t = 0; t < info.numTensors; ++t)
      if (info.tensors[t].trainable)
        outputs[info.tensors[t].gradResult] = store.grads[k++].get();
  }
  for (DeviceBuffer &b : inputs)
    inputPtrs.push_back(b.get());
  for (int i = 0; i < info.numInputs; ++i) {
    if (info.inputs[i].role == 0)
      tokensInput = i;
    else if (info.inputs[i].role == 1)
      targetsInput = i;
  }
  sampleIds.resize(info.microBatch * info.seqLen);
  sampleTargets.resize(sampleIds.size());

  // What computes, once the run is set up: the device and its kernels, and
  // a warning where the environment makes them slower than they can be.
  if (leader()) {
    std::printf("train: %s, %d rank%s\n", device.describe().c_str(),
                comm.worldSize(), comm.worldSize() == 1 ? "" : "s");
    // ZeRO-Infinity: where the state is and how it moves.
    if (const autopar::rt::SwapFile *swap = store.swapFile())
      std::printf("train: optimizer state%s in %s (%s, %s)\n",
                  store.paramSource() ? " and ZeRO-3 parameter shards" : "",
                  info.nvmePath, swap->asyncIo() ? "io_uring" : "pread/pwrite",
                  swap->direct() ? "O_DIRECT" : "page cache");
    std::fflush(stdout);
    if (std::string warning = device.performanceWarning(); !warning.empty())
      std::fprintf(stderr, "train: warning: %s\n", warning.c_str());
  }
  // From here SIGTERM and SIGINT end the run after the step in progress.
  struct sigaction action = {};
  action.sa_handler = onStopSignal;
  // The handler only records the signal, which the loop reads after the
  // step: calls it interrupts (a write to a pipe, a wait) carry on.
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  int64_t stepsDone = std::max(o.steps, startStep);
  if (const autopar::rt::SwapFile *swap = store.swapFile()) {
    swapRead = swap->bytesRead;
    swapWritten = swap->bytesWritten;
  }
  for (int64_t step = startStep; step < o.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    // The NCCL build's collectives block the host only at the step's waits
    // for its GPU work: the watchdog (comm.timeout_s) spans the step.
    const std::string stepWork =
        "step " + std::to_string(step) + "'s GPU work and NCCL collectives";
    std::optional<autopar::rt::Communicator::DeviceWork> watched;
    watched.emplace(comm, stepWork.c_str());
    comm.resetBytes();
    const double stepScale = scaler.scale;
    if (lossScaleInput >= 0) {
      float scale = static_cast<float>(scaler.scale);
      device.upload(inputs[lossScaleInput].get(), &scale, sizeof(scale));
    }
    double lossSum = 0;
    if (info.pipeline)
      lossSum = pipeline.run(
          step == tracedStep,
          [&](int64_t micro) { fillInputs(tokens, step, micro); },
          [&](int64_t micro) { return randomKey(step, micro); }, inputPtrs,
          arena.get(), lossBuffer.get());
    for (int64_t micro = 0; micro < info.microBatches && !info.pipeline;
         ++micro) {
      fillInputs(tokens, step, micro);
      autopar::rt::StepIO io{store.params.get(),
                             inputPtrs.data(),
                             arena.get(),
                             outputs.data(),
                             1.0f / static_cast<float>(info.microBatches),
                             micro > 0};
      io.random = randomKey(step, micro);
      lossSum += runStep(info.trainStep, info.trainStepResults, io);
    }
    // Parameter offload: a shard that could not be read fails the run.
    if (autopar::rt::ParamSwap *source = store.paramSource())
      AUTOPAR_RT_RETURN_IF_ERROR(source->takeFailure());
    // Gradients whose sum is still pending (ZeRO-1; gradient accumulation
    // at stage 0), once per step. First the all-reduces: a sum pending
    // over more axes than the update is sharded over (a replicated
    // parameter's over tp, a tied embedding's over pp) before the
    // reduce-scatter, or the whole sum; the small ones a bucket at a time.
    bool reducing = false;
    for (size_t k = 0; k < store.shards.size(); ++k) {
      const PendingSum &sum = pendingSums[k];
      if (!sum.axes)
        continue;
      reducing = true;
      const autopar::rt::TensorInfo &ti = *store.shards[k].tensor;
      char *full = store.grads[k].get();
      const int64_t bytes = ti.numElements * ti.gradElementBytes;
      if (sum.place.bucket >= 0)
        device.copy(bucketMemory[sum.place.bucket].get() + sum.place.offset,
                    full, bytes);
      else
        comm.allReduceSum(full, ti.numElements, gradCommType(ti), sum.axes);
    }
    for (size_t b = 0; b < bucketMemory.size() && reducing; ++b)
      comm.allReduceSum(bucketMemory[b].get(), bucketElements[b],
                        bucketTypes[b], bucketAxes[b]);
    if (reducing) {
      comm.waitAll();
      for (size_t k = 0; k < store.shards.size(); ++k)
        if (const PendingSum &sum = pendingSums[k]; sum.place.bucket >= 0)
          device.copy(store.grads[k].get(),
                      bucketMemory[sum.place.bucket].get() + sum.place.offset,
                      store.shards[k].tensor->numElements *
                          store.shards[k].tensor->gradElementBytes);
    }
    // Then the reduce-scatters into the update's shards (ZeRO-1; with
    // hybrid sharding, the shard's sum over the replicas after).
    for (size_t k = 0; k < store.shards.size(); ++k) {
      const autopar::rt::TensorInfo &ti = *store.shards[k].tensor;
      if (!ti.gradReduceAxes || !ti.updateAxes ||
          store.othersTensor(
              static_cast<int>(store.shards[k].tensor - info.tensors)))
        continue;
      reducing = true;
      char *full = store.grads[k].get();
      char *shard = full + store.shards[k].begin * ti.gradElementBytes;
      autopar::rt::CommRequest scatter = comm.reduceScatterFlat(
          full, ti.numElements, shard, gradCommType(ti), ti.updateAxes);
      // The replicas of a shard have the same position in their groups:
      // the same elements, the same count.
      if (ti.shardReduceAxes) {
        comm.wait(scatter);
        comm.allReduceSum(shard, store.shards[k].count, gradCommType(ti),
                          ti.shardReduceAxes);
      }
    }
    if (reducing)
      comm.waitAll();
    // Each group's squares are summed over the ranks holding its shards.
    double squares = 0;
    for (const auto &[axes, group] : store.normGroups) {
      double part = device.gradSquaredSum(group);
      if (axes)
        comm.allReduceSumDouble(&part, 1, axes);
      squares += part;
    }
    double norm = std::sqrt(squares);
    double lr = autopar::rt::scheduledLr(config, step, o.steps, skippedSteps);
    // fp16-mixed: gradients of the scaled loss. An inf or NaN among them
    // (the same on every rank: the squares are summed over dp) skips the
    // update; otherwise they are unscaled, with the clipping coefficient,
    // inside the update (in float, as torch's GradScaler unscales before
    // clip_grad_norm_).
    const bool skipped = scaler.scale > 0 && !std::isfinite(squares);
    if (scaler.scale > 0)
      norm /= scaler.scale;
    if (skipped) {
      ++skippedSteps;
    } else {
      // The update multiplies each gradient by the inverse loss scale and
      // the clipping coefficient, in float: the value torch's
      // grad.mul_(coef) stores.
      float gradScale =
          scaler.scale > 0 ? static_cast<float>(1.0 / scaler.scale) : 1.0f;
      float coef;
      if (autopar::rt::clipCoefficient(config, norm, coef))
        gradScale *= coef;
      const int64_t stepCount = step + 1 - skippedSteps;
      if (info.nvmePath) {
        // ZeRO-Infinity: the state streamed from and to the swap file.
        AUTOPAR_RT_RETURN_IF_ERROR(store.swapUpdate(stepCount, lr, gradScale));
      } else if (info.offload) {
        // ZeRO-Offload: the optimizer state and its update on the host.
        for (size_t k = 0; k < store.slices.size(); ++k)
          store.hostUpdate(k, stepCount, lr, gradScale);
      } else {
        device.optimizerStep(config, store.slices, stepCount, lr,
                             gradScale);
      }
    }
    if (scaler.scale > 0) {
      autopar::rt::updateLossScale(lossConfig, scaler, skipped);
    }
    if (!skipped) {
      // Every rank updated its shard of a whole parameter (ZeRO-1/2):
      // all-gather.
      bool gathering = false;
      for (const Shard &sh : store.shards) {
        const autopar::rt::TensorInfo &ti = *sh.tensor;
        if (!ti.updateAxes || ti.paramSharded ||
            store.othersTensor(static_cast<int>(&ti - info.tensors)))
          continue;
        gathering = true;
        char *full = store.paramAt(static_cast<int>(&ti - info.tensors));
        comm.allGatherFlat(full + sh.begin * ti.elementBytes, ti.numElements,
                           full, commType(ti), ti.updateAxes);
      }
      if (gathering)
        comm.waitAll();
    }
    device.synchronize();
    watched.reset();
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    double stepTokens = static_cast<double>(globalBatch * info.seqLen);
    if (leader()) {
      autopar::rt::StepRecord record{step, lossSum / info.microBatches, lr,
                                     norm, ms, stepTokens / (ms / 1000.0)};
      if (comm.worldSize() > 1)
        record.extra = "\"comm_bytes\":" + commBytesJson(comm, info);
      if (stepScale > 0)
        record.extra += (record.extra.empty() ? "" : ",") +
                        std::string("\"loss_scale\":") +
                        autopar::rt::jsonNumber(stepScale) +
                        (skipped ? ",\"skipped\":true" : "");
      // ZeRO-Infinity: this rank's swap file traffic of the step.
      if (const autopar::rt::SwapFile *swap = store.swapFile()) {
        record.extra +=
            (record.extra.empty() ? "" : ",") +
            std::string("\"nvme_bytes\":{\"read\":") +
            std::to_string(swap->bytesRead - swapRead) +
            ",\"write\":" + std::to_string(swap->bytesWritten - swapWritten) +
            "}";
        swapRead = swap->bytesRead;
        swapWritten = swap->bytesWritten;
      }
      logger.logStep(record, o.steps);
      AUTOPAR_RT_RETURN_IF_ERROR(logger.writeStatus());
    }
    // Evaluation with the weights after step + 1 updates (those the
    // forward of step + 1 uses), every --eval-every steps and at the end.
    if (o.evalEvery > 0 &&
        ((step + 1) % o.evalEvery == 0 || step + 1 == o.steps)) {
      double evalLoss = 0;
      AUTOPAR_RT_RETURN_IF_ERROR(evaluate(evalLoss));
      if (leader()) {
        char line[128];
        std::snprintf(line, sizeof(line), "{\"step\":%lld,\"eval_loss\":%s}",
                      static_cast<long long>(step + 1),
                      autopar::rt::jsonNumber(evalLoss).c_str());
        logger.logEvent(line);
        AUTOPAR_RT_RETURN_IF_ERROR(logger.writeStatus());
      }
    }
    // SIGTERM / SIGINT on any rank: every rank stops after this step (they
    // agree through the sum), saves and exits.
    double stop = stopSignal.load() != 0 ? 1 : 0;
    if (comm.worldSize() > 1)
      comm.allReduceSumDouble(&stop, 1, (1u << info.numMeshAxes) - 1);
    if (stop > 0 && step + 1 < o.steps) {
      stopped = stopSignal.load() != 0 ? stopSignal.load() : SIGTERM;
      stepsDone = step + 1;
      break;
    }
    if (o.saveEvery > 0 && (step + 1) % o.saveEvery == 0 && step + 1 < o.steps)
      AUTOPAR_RT_RETURN_IF_ERROR(save(o.save, step + 1));
  }
  if (leader())
    logger.finish();
  if (leader() && tracedStep >= startStep && !stopped)
    AUTOPAR_RT_RETURN_IF_ERROR(pipeline.writeTrace(o.trace));
  if (!o.save.empty())
    AUTOPAR_RT_RETURN_IF_ERROR(save(o.save, stepsDone));
  if (stopped) {
    if (leader()) {
      std::fflush(stdout);
      std::fprintf(stderr, "train: %s: stopped after step %lld of %lld; %s\n",
                   stopped == SIGINT ? "SIGINT" : "SIGTERM",
                   static_cast<long long>(stepsDone),
                   static_cast<long long>(o.steps),
                   o.save.empty() ? "nothing saved (no --save)"
                                  : ("checkpoint saved to " + o.save).c_str());
    }
    return Status::ok();
  }
  if (!o.exportOnnx.empty())
    AUTOPAR_RT_RETURN_IF_ERROR(exportOnnx());
  if (!o.exportAdapter.empty())
    AUTOPAR_RT_RETURN_IF_ERROR(exportAdapter());
  return Status::ok();
}

} // namespace autopar::rt::train
