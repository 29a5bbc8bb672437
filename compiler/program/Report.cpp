//===- Report.cpp - plan.json and report.json -----------------------------===//

#include "compiler/program/Report.h"

#include "llvm/ADT/StringSet.h"

#include "compiler/program/ProgramIR.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"
#include "passes/analysis/CostAnalysis.h"
#include "passes/lowering/Passes.h"
#include "passes/parallel/Passes.h"
#include "passes/parallel/Schedule.h"
#include "runtime/comm/CommBytes.h"

#include <nlohmann/json.hpp>

#include <map>

using namespace mlir;
using namespace autopar;

namespace {

class Reporter : public ProgramStep {
public:
  using ProgramStep::ProgramStep;
  bool run(const std::string &dir);
  /// A training program's report.json.
  bool trainReport(nlohmann::json &r);

private:
  bool report(func::FuncOp step, nlohmann::json &r);
  /// Pipeline parallelism: the phases' costs, and the schedule as
  /// simulated at compile time (dist.pipeline_schedule).
  bool pipelineReport(func::FuncOp forward, nlohmann::json &r);
  nlohmann::json forwardReport(func::FuncOp forward);
};

/// An attribute of dist.pipeline_schedule as JSON.
nlohmann::json attrJson(Attribute a) {
  if (auto i = dyn_cast<IntegerAttr>(a))
    return i.getInt();
  if (auto f = dyn_cast<FloatAttr>(a))
    return f.getValueAsDouble();
  if (auto str = dyn_cast<StringAttr>(a))
    return str.getValue().str();
  if (auto ints = dyn_cast<DenseI64ArrayAttr>(a))
    return std::vector<int64_t>(ints.asArrayRef().begin(),
                                ints.asArrayRef().end());
  nlohmann::json list = nlohmann::json::array();
  if (auto arr = dyn_cast<ArrayAttr>(a))
    for (Attribute e : arr)
      list.push_back(attrJson(e));
  return list;
}

/// The elements argument `i` of `f` (`n` stored) adds to the model's
/// parameter count: a quantized weight's codes count the weight's
/// elements, its scales none (plan quantize).
int64_t modelElements(func::FuncOp f, unsigned i, int64_t n) {
  if (!f.getArgAttr(i, nn::NNDialect::kQuantizedAttr))
    return n;
  for (Operation *user : f.getArgument(i).getUsers())
    if (auto d = dyn_cast<nn::DequantizeOp>(user))
      return d.getCodes() == f.getArgument(i)
                 ? cast<RankedTensorType>(d.getType()).getNumElements()
                 : 0;
  return 0;
}

/// report.json's description of the run: model, target, parameter counts,
/// batch and sequence.
void describeRun(nlohmann::json &r, const std::string &model,
                 const std::string &target, int64_t parameters,
                 int64_t trainable, int64_t globalBatch, const TrainingConfig &config,
                 const ProgramShape &shape) {
  r["model"] = model;
  r["target"] = target;
  r["parameters"] = parameters;
  r["trainable_parameters"] = trainable;
  r["global_batch"] = globalBatch;
  r["micro_batch"] = shape.microBatch;
  r["micro_batches"] = config.microBatches;
  r["sequence_length"] = shape.seqLen;
}

/// The comm bytes of a rank's step keyed by group (its mesh axes joined by
/// ',', mesh order: every axis of size > 1, zeros included; size-1 axes
/// left out, as the runtime's canonical groups leave them), then kind, as
/// the program logs them.
class CommCount {
public:
  explicit CommCount(const ProgramShape &shape) : shape(shape) {
    for (auto [name, size] : llvm::zip(shape.axisNames, shape.axisSizes))
      if (size > 1)
        bytes[name] = {0, 0, 0, 0, 0};
  }
  /// `kind`: 0 all-reduce, 1 reduce-scatter, 2 all-gather, 3 send, 4
  /// all-to-all.
  void add(ArrayRef<StringRef> axes, int kind, double n) {
    if (n <= 0)
      return;
    bytes[groupName(axes)][kind] += n;
  }
  /// The group's name: its axes of more than one rank, in mesh order.
  std::string groupName(ArrayRef<StringRef> axes) const {
    std::string name;
    for (auto [axis, size] : llvm::zip(shape.axisNames, shape.axisSizes))
      if (size > 1 && llvm::is_contained(axes, axis))
        name += (name.empty() ? "" : ",") + axis;
    return name;
  }
  /// The runtime's mask of `axes` (bit i: mesh axis i).
  uint32_t mask(ArrayRef<StringRef> axes) const {
    uint32_t m = 0;
    for (auto [i, axis] : llvm::enumerate(shape.axisNames))
      if (llvm::is_contained(axes, axis))
        m |= 1u << i;
    return m;
  }
  /// The collectives of a function that runs `times` per step.
  void add(const FunctionCost &cost, double times) {
    for (const auto &[key, n] : cost.commBytes) {
      const auto &[kind, axes] = key;
      SmallVector<StringRef> names;
      StringRef(axes).split(names, ',');
      // (Sends: ring attention's shifts; a pipeline's transfers are no
      // ops of its phases, counted from their outputs.)
      for (int k = 0; k < 5; ++k)
        if (kind == kKinds[k])
          add(names, k, n * times);
    }
  }
  nlohmann::json json() const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto &[group, n] : bytes)
      for (int k = 0; k < 5; ++k)
        j[group][kKinds[k]] = n[k];
    return j;
  }
  /// `n` more collectives of `kind` over `axes` that the runtime issues
  /// once per step (beside the step functions').
  void addOps(ArrayRef<StringRef> axes, int kind, int64_t n) {
    if (n > 0)
      ops[groupName(axes)][kind] += n;
  }
  nlohmann::json opsJson() const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto &[group, n] : ops)
      for (int k = 0; k < 3; ++k)
        if (n[k])
          j[group][kKinds[k]] = n[k];
    return j;
  }

private:
  static constexpr const char *kKinds[] = {"all_reduce", "reduce_scatter",
                                           "all_gather", "send", "all_to_all"};
  const ProgramShape &shape;
  std::map<std::string, std::array<double, 5>> bytes;
  std::map<std::string, std::array<int64_t, 3>> ops;
};

/// The parameters of `func` whose vocabulary is padded to a multiple of tp,
/// by name: the model's shape and the padded one the ranks split.
nlohmann::json paddedJson(func::FuncOp func) {
  nlohmann::json padded = nlohmann::json::object();
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto name = func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    if (!name)
      continue;
    auto full = cast<RankedTensorType>(logicalType(func, i));
    TensorSync sync = readTensorSync(func, i, -1);
    int64_t whole = 1;
    for (int64_t size : sync.whole)
      whole *= size;
    if (whole != full.getNumElements())
      padded[name.getValue().str()] = {{"shape", full.getShape()},
                                       {"padded", sync.whole}};
  }
  return padded;
}

/// The mesh's axis sizes by name.
/// report.json's parallel.offload: where the optimizer state lives.
const char *offloadName(const ProgramShape &shape,
                        const TrainingConfig &config) {
  if (!shape.offload)
    return "none";
  return config.nvmePath.empty() ? "cpu" : "nvme";
}

std::map<std::string, int64_t> meshJson(const ProgramShape &shape) {
  std::map<std::string, int64_t> mesh;
  for (auto [name, size] : llvm::zip(shape.axisNames, shape.axisSizes))
    mesh[name] = size;
  return mesh;
}
/// Rank `rank`'s mesh coordinates (ranks are row-major over the axes).
nlohmann::json rankCoords(const ProgramShape &shape, int64_t rank) {
  nlohmann::json coords = nlohmann::json::object();
  for (int a = static_cast<int>(shape.axisNames.size()) - 1; a >= 0; --a) {
    coords[shape.axisNames[a]] = rank % shape.axisSizes[a];
    rank /= shape.axisSizes[a];
  }
  return coords;
}

bool Reporter::pipelineReport(func::FuncOp forward, nlohmann::json &r) {
  const TrainingConfig &config = o.training;
  ProgramShape shape;
  if (!readShape(forward, shape))
    return false;
  const int64_t pp = shape.pp, m = config.microBatches;
  // Each pipeline rank's comm: its phases' collectives and sends (an
  // activation to the next stage, an input gradient to the previous one)
  // once per micro-batch; once per step, each gradient it holds reduced
  // over the axes a phase left it pending over (dp; dp and pp for a
  // tensor several ranks read).
  std::vector<CommCount> comm(pp, CommCount(shape));
  // Each phase's FLOPs (every micro-batch runs each phase once).
  int64_t flopsPerMicro = 0;
  for (auto &[f, name] : phaseFunctions(module)) {
    int64_t rank =
        f->getAttrOfType<IntegerAttr>(dist::DistDialect::kStageAttr).getInt() % pp;
    FunctionCost cost = analyzeCost(f);
    flopsPerMicro += cost.flops;
    comm[rank].add(cost, m);
    for (unsigned i = 0; i < f.getNumResults(); ++i) {
      auto output =
          f.getResultAttrOfType<StringAttr>(i, nn::NNDialect::kOutputAttr);
      if ((output && output.getValue() == dist::kStageOutputName) ||
          f.getResultAttr(i, nn::NNDialect::kInputGradAttr))
        comm[rank].add(
            {dist::kPipelineAxis}, 3,
            m * tensorBytes(cast<RankedTensorType>(f.getResultTypes()[i])));
    }
  }
  dist::MeshOp mesh = dist::findMesh(module);
  llvm::StringMap<PipelineTensor> staged = pipelineTensors(module, pp);
  int64_t paramCount = 0, trainableCount = 0;
  // Per pipeline rank: the gradient buffers and float32 state elements
  // (optimizer state, masters) it holds: those of the tensors its stages
  // read, and of those summed over pp (a tied embedding) on every rank.
  std::vector<int64_t> gradBytes(pp, 0), stateElements(pp, 0);
  llvm::StringMap<Type> gradElement = gradElementTypes(module);
  // Each pipeline rank's per-step all-reduces, coalesced as its runtime
  // does (the tensors it holds, in tensor order).
  std::vector<rt::StepBuckets> buckets(
      pp, rt::StepBuckets(stepBucketBytes(config)));
  std::vector<std::map<uint64_t, SmallVector<StringRef>>> bucketAxes(pp);
  auto coalesce = [&](int64_t rank, ArrayRef<StringRef> axes, int64_t bytes,
                      int64_t elementBytes) {
    if (mesh.getGroupSize(axes) <= 1)
      return;
    const uint64_t key =
        uint64_t(comm[rank].mask(axes)) << 8 | uint64_t(elementBytes);
    bucketAxes[rank][key].assign(axes.begin(), axes.end());
    if (buckets[rank].add(key, bytes).bucket < 0)
      comm[rank].addOps(axes, 0, 1);
  };
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    auto name =
        forward.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    if (!name || forward.getArgAttr(i, nn::NNDialect::kBufferAttr))
      continue;
    auto type = cast<RankedTensorType>(forward.getArgument(i).getType());
    auto full = cast<RankedTensorType>(logicalType(forward, i));
    paramCount += modelElements(forward, i, full.getNumElements());
    const PipelineTensor &t = staged.lookup(name.getValue());
    if (!t.trained)
      continue;
    trainableCount += full.getNumElements();
    // ZeRO-1: the update and its state are sharded over dp.
    TensorSync sync = readTensorSync(forward, i, -1);
    const int64_t n = type.getNumElements();
    // Gradients have the stored parameter's type, or f32 (grad_dtype).
    const int64_t eb = onnx_import::dtypeBytes(
        onnx_import::mlirToDType(gradElement.lookup(name.getValue())));
    const int64_t updateGroup = mesh.getGroupSize(sync.updateAxes);
    const bool shared = llvm::is_contained(t.reduceAxes, dist::kPipelineAxis);
    for (int64_t rank = 0; rank < pp; ++rank)
      if (shared || t.ranks.count(rank)) {
        gradBytes[rank] += n * eb;
        stateElements[rank] +=
            rt::zeroLayout(n, updateGroup, false, !t.reduceAxes.empty())
                .stateElements;
      }
    if (t.reduceAxes.empty())
      continue;
    // What the runtime does once per step with the gradient (if one of this
    // rank's stages holds it, or it is summed over pp): an all-reduce; under
    // ZeRO-1 a sum over the axes beyond the update's, a reduce-scatter into
    // the update's shard, and the updated shards all-gathered.
    // Hybrid sharding and cp: their sum runs on the reduced shard (this
    // rank's: the first of the group, min(chunk, n) elements).
    SmallVector<StringRef> beyond, replicas;
    for (StringRef axis : t.reduceAxes)
      if (!llvm::is_contained(sync.updateAxes, axis))
        (summedOnShard(axis) ? replicas : beyond).push_back(axis);
    for (int64_t rank = 0; rank < pp; ++rank) {
      if (!shared && !t.ranks.count(rank))
        continue;
      if (sync.updateAxes.empty()) {
        comm[rank].add(
            t.reduceAxes, 0,
            rt::allReduceBytes(n, mesh.getGroupSize(t.reduceAxes), eb));
        coalesce(rank, t.reduceAxes, n * eb, eb);
        continue;
      }
      comm[rank].add(beyond, 0,
                     rt::allReduceBytes(n, mesh.getGroupSize(beyond), eb));
      coalesce(rank, beyond, n * eb, eb);
      comm[rank].add(sync.updateAxes, 1,
                     rt::reduceScatterFlatBytes(n, updateGroup, eb));
      comm[rank].addOps(sync.updateAxes, 1, 1);
      comm[rank].add(
          replicas, 0,
          rt::allReduceBytes(std::min(n, rt::flatChunk(n, updateGroup)),
                             mesh.getGroupSize(replicas), eb));
      if (mesh.getGroupSize(replicas) > 1)
        comm[rank].addOps(replicas, 0, 1);
      comm[rank].add(
          sync.updateAxes, 2,
          rt::allGatherFlatBytes(n, updateGroup, tensorBytes(type) / n));
      comm[rank].addOps(sync.updateAxes, 2, 1);
    }
  }
  for (int64_t rank = 0; rank < pp; ++rank)
    for (uint64_t key : buckets[rank].bucketKeys())
      comm[rank].addOps(bucketAxes[rank][key], 0, 1);
  auto schedule =
      module->getAttrOfType<DictionaryAttr>(dist::DistDialect::kPipelineScheduleAttr);
  nlohmann::json pipeline = nlohmann::json::object();
  for (NamedAttribute a : schedule)
    pipeline[a.getName().str()] = attrJson(a.getValue());
  std::vector<int64_t> activations =
      pipeline["activation_bytes"].get<std::vector<int64_t>>();
  int states = config.optimizer.type == "adamw" ? 2
               : config.optimizer.momentum > 0  ? 1
                                              : 0;
  // Each rank holds the parameters its stages read (rankParamLayouts, the
  // program's layout); masters of mixed precision count as state, as the
  // ZeRO paper's K.
  FunctionCost cost = analyzeCost(forward);
  std::vector<int64_t> paramBytes;
  rankParamLayouts(forward, staged, pp, paramBytes);
  const int64_t stateBuffers = states + (config.precision != "fp32");
  int64_t globalBatch = shape.microBatch * m * shape.dp;
  // The whole mesh's, counted before partitioning (every stage's step).
  auto modelFlops = module->getAttrOfType<IntegerAttr>(dist::DistDialect::kModelFlopsAttr);
  // In double: a large model's step exceeds int64 (GPT 1T: 5e19).
  double flops =
      modelFlops ? double(modelFlops.getInt()) * double(m)
                 : double(flopsPerMicro) * double(m * shape.dp * shape.tp);
  describeRun(r, o.model, o.target, paramCount, trainableCount, globalBatch,
              config, shape);
  auto bytesJson = [&](int64_t p) {
    int64_t optBytes = 4 * stateBuffers * stateElements[p];
    return nlohmann::json{{"params", paramBytes[p]},
                          {"grads", gradBytes[p]},
                          {"optimizer_state", optBytes},
                          {"activations", activations[p]},
                          {"inputs", cost.inputBytes},
                          {"workspace", 0},
                          {"peak", paramBytes[p] + gradBytes[p] + optBytes +
                                       activations[p] + cost.inputBytes}};
  };
  // The report's own figures: the comm of the first rank (the one that
  // logs), the memory of the rank with the highest peak.
  int64_t highest = 0;
  for (int64_t p = 1; p < pp; ++p)
    if (bytesJson(p)["peak"].get<int64_t>() >
        bytesJson(highest)["peak"].get<int64_t>())
      highest = p;
  r["bytes"] = bytesJson(highest);
  // Per pipeline coordinate (the ranks of one are alike).
  std::vector<nlohmann::json> stageBytes, stageComm;
  for (int64_t p = 0; p < pp; ++p) {
    stageBytes.push_back(bytesJson(p));
    stageComm.push_back(comm[p].json());
  }
  nlohmann::json perRank = nlohmann::json::array();
  for (int64_t rank = 0; rank < shape.ranks; ++rank) {
    nlohmann::json coords = rankCoords(shape, rank);
    int64_t p = coords[dist::kPipelineAxis.str()].get<int64_t>();
    perRank.push_back({{"rank", rank},
                       {"coords", coords},
                       {"bytes", stageBytes[p]},
                       {"comm_bytes_per_step", stageComm[p]},
                       {"runtime_collectives_per_step", comm[p].opsJson()}});
  }
  r["parallel"] = {{"mesh", meshJson(shape)},
                   {"ranks", shape.ranks},
                   {"zero_stage", shape.zeroStage},
                   {"offload", offloadName(shape, config)},
                   {"precision", config.precision},
                   {"pipeline", pipeline},
                   {"comm_bytes_per_step", comm[0].json()},
                   {"runtime_collectives_per_step", comm[0].opsJson()},
                   {"padded", paddedJson(forward)},
                   {"per_rank", perRank}};
  r["flops_per_step"] = flops;
  r["flops_per_token"] =
      flops / double(std::max<int64_t>(1, globalBatch * shape.seqLen));
  return true;
}

bool Reporter::report(func::FuncOp step, nlohmann::json &r) {
  // Everything is per rank (every rank of a dp / ZeRO mesh holds the same
  // amounts), except the FLOPs, which are the whole step's.
  const TrainingConfig &config = o.training;
  ProgramShape shape;
  if (!readShape(step, shape))
    return false;
  const int64_t dp = shape.dp;
  dist::MeshOp meshOp = dist::findMesh(module);
  std::vector<Type> globalArgTypes = logicalTypes(step);
  // The step as the IR says: FLOPs, argument bytes, arena, collectives.
  FunctionCost cost = analyzeCost(step);
  const int64_t inputBytes = cost.inputBytes;
  int64_t paramCount = 0, trainableCount = 0;
  int64_t trainableBytes = 0, gradBytes = 0, stateElements = 0;
  // f32 master copies of 16-bit parameters (mixed precision), counted as
  // optimizer state like the ZeRO paper's K = 12 (master, m, v).
  int64_t masterElements = 0;
  // All-reduce, reduce-scatter, all-gather: those of the step (the cost
  // analysis) and those the runtime issues once per step around the
  // optimizer, as the IR tells it to (readTensorSync).
  CommCount comm(shape);
  llvm::StringMap<int> gradOf = gradResults(step);
  llvm::StringMap<Type> gradElement = gradElementTypes(module);
  nlohmann::json padded = paddedJson(step);
  int64_t nvmeParamBytes = 0;
  // The runtime's per-step all-reduces, coalesced as it does (its
  // buckets' keys: the group's mask and the element size).
  rt::StepBuckets buckets(stepBucketBytes(config));
  std::map<uint64_t, SmallVector<StringRef>> bucketAxes;
  auto coalesce = [&](ArrayRef<StringRef> axes, int64_t bytes,
                      int64_t elementBytes) {
    const uint64_t key =
        uint64_t(comm.mask(axes)) << 8 | uint64_t(elementBytes);
    bucketAxes[key].assign(axes.begin(), axes.end());
    if (buckets.add(key, bytes).bucket < 0)
      comm.addOps(axes, 0, 1);
  };
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto type = cast<RankedTensorType>(step.getArgument(i).getType());
    auto param = step.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    if (!param)
      continue;
    StringRef name = param.getValue();
    auto full = cast<RankedTensorType>(globalArgTypes[i]);
    int64_t n = full.getNumElements();
    // ZeRO-Infinity's parameter offload: ZeRO-3's shards in the swap file.
    if (config.nvmeParams && step.getArgAttr(i, dist::DistDialect::kZeroAttr))
      nvmeParamBytes += tensorBytes(type);
    if (gradOf.count(name)) {
      paramCount += n;
      trainableCount += n;
      TensorSync sync = readTensorSync(step, i, gradOf.lookup(name));
      // The runtime syncs this rank's block of the logical tensor.
      n = 1;
      for (int64_t size : sync.block)
        n *= size;
      const int64_t updateGroup = meshOp.getGroupSize(sync.updateAxes);
      const int64_t reduceGroup = meshOp.getGroupSize(sync.gradReduceAxes);
      rt::ZeroLayout zero = rt::zeroLayout(n, updateGroup, sync.gradSharded,
                                           !sync.gradReduceAxes.empty());
      // Gradients have the stored parameter's type, or f32 (grad_dtype).
      int64_t elementBytes = onnx_import::dtypeBytes(
          onnx_import::mlirToDType(gradElement.lookup(name)));
      trainableBytes += tensorBytes(type);
      gradBytes += elementBytes * zero.gradElements;
      stateElements += zero.stateElements;
      if (type.getElementType() != full.getElementType())
        masterElements += zero.stateElements;
      // What the runtime does once per step (runtime/Model.h TensorInfo):
      // a pending gradient sum reduce-scattered into the update's shard or
      // all-reduced; updated shards of a whole parameter all-gathered.
      // A sum pending over more axes than the update's (a replicated
      // parameter's over tp) is all-reduced over those first.
      // Hybrid sharding and cp: the sum over them runs on this rank's
      // reduced shard (the first of its group: min(chunk, n) elements).
      if (!sync.gradReduceAxes.empty() && !sync.updateAxes.empty()) {
        SmallVector<StringRef> beyond, replicas;
        for (StringRef axis : sync.gradReduceAxes)
          if (!llvm::is_contained(sync.updateAxes, axis))
            (summedOnShard(axis) ? replicas : beyond).push_back(axis);
        if (!beyond.empty()) {
          comm.add(
              beyond, 0,
              rt::allReduceBytes(n, meshOp.getGroupSize(beyond), elementBytes));
          coalesce(beyond, n * elementBytes, elementBytes);
        }
        comm.add(sync.updateAxes, 1,
                 rt::reduceScatterFlatBytes(n, updateGroup, elementBytes));
        comm.addOps(sync.updateAxes, 1, 1);
        if (!replicas.empty()) {
          comm.add(
              replicas, 0,
              rt::allReduceBytes(std::min(n, rt::flatChunk(n, updateGroup)),
                                 meshOp.getGroupSize(replicas), elementBytes));
          comm.addOps(replicas, 0, 1);
        }
      } else if (!sync.gradReduceAxes.empty()) {
        comm.add(sync.gradReduceAxes, 0,
                 rt::allReduceBytes(n, reduceGroup, elementBytes));
        coalesce(sync.gradReduceAxes, n * elementBytes, elementBytes);
      }
      if (!sync.updateAxes.empty() && !sync.paramSharded) {
        comm.add(
            sync.updateAxes, 2,
            rt::allGatherFlatBytes(n, updateGroup,
                                   tensorBytes(type) / type.getNumElements()));
        comm.addOps(sync.updateAxes, 2, 1);
      }
    } else if (!step.getArgAttr(i, nn::NNDialect::kBufferAttr)) {
      paramCount += modelElements(step, i, n);
    }
  }
  for (uint64_t key : buckets.bucketKeys())
    comm.addOps(bucketAxes[key], 0, 1);
  // The collectives of the generated step, once per micro-batch.
  comm.add(cost, config.microBatches);
  nlohmann::json commJson = comm.json();
  int states = config.optimizer.type == "adamw" ? 2
               : config.optimizer.momentum > 0  ? 1
                                              : 0;
  int64_t optBytes = 4 * (stateElements * states + masterElements);
  int64_t arena = cost.arenaBytes;
  // The whole mesh's step: counted before partitioning where the program
  // is partitioned (tensor parallelism repeats the replicated ops on every
  // rank), else this rank's times the data-parallel ranks.
  auto modelFlops = module->getAttrOfType<IntegerAttr>(dist::DistDialect::kModelFlopsAttr);
  double flops = double(modelFlops ? modelFlops.getInt() : cost.flops * dp) *
                 double(config.microBatches);
  int64_t globalBatch = shape.microBatch * config.microBatches * dp;
  const int64_t seqLen = shape.seqLen;
  describeRun(r, o.model, o.target, paramCount, trainableCount, globalBatch,
              config, shape);
  // What the rank's memory holds of the parameter blob.
  const int64_t paramBytes = cost.paramBytes - nvmeParamBytes;
  r["bytes"] = {
      {"params", paramBytes},
      {"grads", gradBytes},
      {"optimizer_state", optBytes},
      {"activations", arena},
      {"inputs", inputBytes},
      {"workspace", 0},
      {"peak", paramBytes + gradBytes + optBytes + arena + inputBytes}};
  // Every rank runs the same program on blocks of the same sizes: one entry
  // per rank, with its mesh coordinates (ranks row-major over the axes).
  nlohmann::json perRank = nlohmann::json::array();
  for (int64_t rank = 0; rank < shape.ranks; ++rank) {
    perRank.push_back({{"rank", rank},
                       {"coords", rankCoords(shape, rank)},
                       {"bytes", r["bytes"]},
                       {"comm_bytes_per_step", commJson},
                       {"runtime_collectives_per_step", comm.opsJson()}});
  }
  r["parallel"] = {
      {"mesh", meshJson(shape)},
      {"ranks", shape.ranks},
      {"zero_stage", shape.zeroStage},
      {"offload", offloadName(shape, config)},
      {"precision", config.precision},
      // The ZeRO paper's model states: trainable parameters, their
      // gradients and the optimizer state, per rank.
      {"model_state_bytes",
       {{"params", trainableBytes},
        {"grads", gradBytes},
        {"optimizer_state", optBytes},
        {"total", trainableBytes + gradBytes + optBytes}}},
      // ZeRO-Offload's state in host memory; ZeRO-Infinity's
      // in the swap file under zero.nvme_path instead.
      {"host_bytes", shape.offload && config.nvmePath.empty() ? optBytes : 0},
      // With zero.offload_params "nvme", the parameter shards there too
      // (nvme_param_bytes of them).
      {"nvme_bytes", config.nvmePath.empty() ? 0 : optBytes + nvmeParamBytes},
      {"nvme_param_bytes", nvmeParamBytes},
      {"comm_bytes_per_step", commJson},
      // How many collectives the runtime issues once per step beside the
      // step functions' (the time model's latencies).
      {"runtime_collectives_per_step", comm.opsJson()},
      {"padded", padded},
      {"per_rank", perRank}};
  r["flops_per_step"] = flops;
  r["flops_per_token"] =
      flops / double(std::max<int64_t>(1, globalBatch * seqLen));
  return true;
}

nlohmann::json Reporter::forwardReport(func::FuncOp forward) {
  int64_t paramCount = 0;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (forward.getArgAttr(i, nn::NNDialect::kParamAttr) &&
        !forward.getArgAttr(i, nn::NNDialect::kBufferAttr))
      paramCount += cast<RankedTensorType>(forward.getArgument(i).getType())
                        .getNumElements();
  FunctionCost cost = analyzeCost(forward);
  nlohmann::json r;
  r["model"] = o.model;
  r["target"] = o.target;
  r["program"] = "forward-only";
  r["parameters"] = paramCount;
  r["bytes"] = {{"params", cost.paramBytes},
                {"activations", cost.arenaBytes},
                {"inputs", cost.inputBytes},
                {"outputs", cost.resultBytes},
                {"peak", cost.paramBytes + cost.arenaBytes + cost.inputBytes +
                             cost.resultBytes}};
  r["flops_per_run"] = cost.flops;
  return r;
}

bool Reporter::run(const std::string &dir) {
  auto write = [&](StringRef name, StringRef contents) {
    std::string err;
    if (!writeProgramFile(dir, name, contents, err))
      return fail(err);
    return true;
  };
  if (o.forwardOnly)
    return write(
        "report.json",
        forwardReport(module.lookupSymbol<func::FuncOp>("forward"))
                .dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
            "\n");
  nlohmann::json r;
  bool pipelined = module->hasAttr(dist::DistDialect::kPipelineScheduleAttr);
  if (!trainReport(r) ||
      !write("report.json",
             r.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                 "\n"))
    return false;
  if (!pipelined)
    return true;
  // The predicted timeline of one step as a Chrome trace: the recorded
  // schedule simulated with each phase's predicted time (as the
  // compile-time check ran it).
  const nlohmann::json &p = r["parallel"]["pipeline"];
  pipeline::StageTimes times;
  times.forward = p["forward_seconds"].get<std::vector<double>>();
  times.backward = p["backward_seconds"].get<std::vector<double>>();
  times.weight = p["weight_seconds"].get<std::vector<double>>();
  times.transfer = p["transfer_seconds"].get<double>();
  pipeline::Schedule schedule;
  pipeline::TransferPlan transfers;
  pipeline::Simulation sim;
  std::string why;
  if (!dist::readPipelineSchedule(module, schedule, transfers, why) ||
      !pipeline::simulate(schedule, times, sim, why))
    return fail(o.model + ": internal error: " + why);
  return write("schedule.json", pipeline::chromeTrace(sim, 1e6));
}

bool Reporter::trainReport(nlohmann::json &r) {
  return module->hasAttr(dist::DistDialect::kPipelineScheduleAttr)
             ? pipelineReport(module.lookupSymbol<func::FuncOp>("forward"), r)
             : report(module.lookupSymbol<func::FuncOp>("train_step"), r);
}

} // namespace

bool autopar::trainReportJson(ModuleOp module, const ProgramOptions &options,
                              nlohmann::json &report, std::string &error) {
  Reporter reporter(module, options);
  return reporter.finish(reporter.trainReport(report), error);
}

bool autopar::writeReport(ModuleOp module, const ProgramOptions &options,
                          const std::string &dir, std::string &error) {
  Reporter reporter(module, options);
  return reporter.finish(reporter.run(dir), error);
}
