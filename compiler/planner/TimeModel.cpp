//===- TimeModel.cpp - the planner's time model of one training step -----===//
//
// Each op of the IR `autopar compile` lowers for a plan timed on the
// cluster's GPUs (a roofline with measured efficiencies), each collective on
// its links (NCCL's ring model), and the step assembled from them: the
// pipeline schedule simulated over the stages' times, the data-parallel
// reduction overlapped with the backward (docs/planner.md).
//
//===----------------------------------------------------------------------===//

#include "compiler/planner/TimeModel.h"

#include "compiler/planner/Calibrate.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"
#include "dialects/parallel/DistOps.h"
#include "frontends/onnx/Validate.h"
#include "passes/analysis/CostAnalysis.h"
#include "passes/lowering/Passes.h"
#include "passes/parallel/Passes.h"
#include "passes/parallel/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <cmath>
#include <map>

using namespace mlir;

using namespace mlir;
using namespace autopar;

namespace {

// The time model's constants (docs/planner.md). Of a GPU's peak, what a
// large matmul reaches; of its memory bandwidth, what the kernels that are
// not products reach.
constexpr double kMatmulEfficiency = 0.8;
// Of a GPU's peak, what fused attention (forward and backward) reaches:
// FlashAttention-2 measures 50-73% of an A100's (Dao 2023).
constexpr double kAttentionEfficiency = 0.6;
constexpr double kMemoryEfficiency = 0.8;
// NCCL's ring latencies (its tuning model, src/graph/tuning.cc, Simple
// protocol): a base per collective plus one per ring step, by link.
constexpr double kBaseLatency = 8.4e-6;
constexpr double kNodeStepLatency = 3.4e-6;
constexpr double kNetworkStepLatency = 14e-6;

/// The math functions the generated loop of an elementwise op calls per
/// element (compiler/codegen/EmitFused.cpp).
SmallVector<const char *, 2> mathCalls(Operation *op) {
  if (isa<nn::ErfOp>(op))
    return {"erf"};
  if (isa<nn::TanhOp>(op))
    return {"tanh"};
  if (isa<nn::ExpOp, nn::SigmoidOp>(op))
    return {"exp"};
  if (isa<nn::LogOp>(op))
    return {"log"};
  if (isa<nn::PowOp>(op))
    return {"log", "exp"};
  if (auto gelu = dyn_cast<nn::GeluOp>(op))
    return {gelu.getApproximate() == nn::GeluApproximation::none ? "erf"
                                                                 : "tanh"};
  if (auto grad = dyn_cast<nn::GeluGradOp>(op)) {
    if (grad.getApproximate() == nn::GeluApproximation::none)
      return {"erf", "exp"};
    return {"tanh"};
  }
  return {};
}

/// The calibrated conversion of a 16-bit float (tensor) type: its widening
/// to float or a float's rounding to it; "" (nothing measured) otherwise.
const char *lowFloat(Type type, bool widen) {
  Type e = getElementTypeOrSelf(type);
  if (e.isBF16())
    return widen ? "bf16_widen" : "bf16_round";
  if (e.isF16())
    return widen ? "f16_widen" : "f16_round";
  return "";
}

class TimeModel {
public:
  TimeModel(ModuleOp module, const Cluster &cluster) : cluster(cluster) {
    rates.flopsPerSecond = cluster.peakTflops * 1e12;
    rates.fp32FlopsPerSecond = cluster.fp32Tflops * 1e12;
    rates.bytesPerSecond = cluster.memoryBandwidthGBps * 1e9;
    rates.matmulEfficiency = kMatmulEfficiency;
    rates.attentionEfficiency = kAttentionEfficiency;
    rates.memoryEfficiency = kMemoryEfficiency;
    rates.tileQuantization = true;
    int64_t ranks = 1;
    if (dist::MeshOp mesh = dist::findMesh(module)) {
      for (Attribute a : mesh.getAxisNames())
        axisNames.push_back(cast<StringAttr>(a).getValue().str());
      for (int64_t size : mesh.getAxisSizes()) {
        axisSizes.push_back(size);
        ranks *= size;
      }
    }
    if (const std::optional<Calibration> &cal = cluster.calibration) {
      local = &cal->forRanks(ranks);
      // More ranks than cores: they take turns.
      share = std::max(1.0, double(ranks) / double(cal->cores));
    }
  }

  /// Seconds of one op of the final IR: the roofline of its FLOPs and
  /// bytes, or on a calibrated (local) cluster its measured rates. An op
  /// the emitted program does not run (a view, a folded transpose or
  /// concat) costs nothing there.
  double opSeconds(Operation *op) const {
    if (!local)
      return rooflineSeconds(op, rates);
    if (isViewOp(op) || isFoldedTranspose(op) ||
        isProducerLayoutTranspose(op) || isFoldedConcat(op) ||
        isa<nn::ConstantOp>(op) || op->getNumResults() == 0)
      return 0;
    const Calibration::Compute &c = *local;
    double t;
    auto dims = [](Value v) {
      return cast<RankedTensorType>(v.getType()).getShape();
    };
    if (auto mm = dyn_cast<nn::MatMulOp>(op)) {
      ArrayRef<int64_t> a = dims(mm.getLhs()), b = dims(mm.getRhs());
      double k = double(a.back()), n = double(b.back());
      double m = double(mm.getType().getNumElements()) / n, batch = 1;
      // runtime/cpu's gemm() runs [batch..., m, k] x [k, n] as one product
      // of batch * m rows; other batches product by product.
      if (b.size() > 2 &&
          llvm::any_of(b.drop_back(2), [](int64_t d) { return d != 1; })) {
        m = double(a[a.size() - 2]);
        batch = double(mm.getType().getNumElements()) / (m * n);
      }
      t = productsSeconds(batch, m, n, k);
    } else if (auto gemm = dyn_cast<nn::GemmOp>(op)) {
      ArrayRef<int64_t> out = gemm.getType().getShape();
      t = productsSeconds(1, double(out[0]), double(out[1]),
                          double(dims(gemm.getA())[gemm.getTransA() ? 0 : 1]));
    } else if (isa<nn::AttentionOp, nn::AttentionGradOp>(op)) {
      ArrayRef<int64_t> q = dims(op->getOperand(0));
      Value mask = isa<nn::AttentionOp>(op)
                       ? cast<nn::AttentionOp>(op).getMask()
                       : cast<nn::AttentionGradOp>(op).getMask();
      auto variant = mask ? Calibration::kMaskTensor
                     : op->getAttrOfType<BoolAttr>("causal").getValue()
                         ? Calibration::kCausal
                         : Calibration::kNoMask;
      t = Calibration::attentionSeconds(
          c, isa<nn::AttentionGradOp>(op), variant, double(q[q.size() - 2]),
          double(q.back()), double(modelFlops(op)));
    } else {
      // The bytes it moves, or the measured kernel (or the math functions
      // of a generated loop) on its elements, whichever is longer.
      double kernel = 0;
      auto ns = [&](const char *name) { return elementSeconds(name); };
      auto elements = [&](Value v) {
        return double(cast<RankedTensorType>(v.getType()).getNumElements());
      };
      if (isa<nn::LayerNormOp>(op))
        kernel = elements(op->getOperand(0)) * ns("layer_norm");
      else if (isa<nn::LayerNormGradOp>(op))
        kernel = elements(op->getOperand(0)) * ns("layer_norm_grad");
      else if (isa<nn::ReduceSumOp, nn::ReduceMeanOp, nn::ReduceMaxOp>(op))
        kernel = elements(op->getOperand(0)) * ns("reduce");
      else if (isa<nn::SoftmaxOp>(op))
        kernel = elements(op->getOperand(0)) * ns("softmax");
      else if (isa<nn::SoftmaxGradOp>(op))
        kernel = elements(op->getOperand(0)) * ns("softmax_grad");
      else if (isa<nn::SoftmaxCrossEntropyOp>(op))
        kernel = elements(op->getOperand(0)) * ns("softmax_cross_entropy");
      else if (isa<nn::SoftmaxCrossEntropyGradOp>(op))
        kernel = elements(op->getResult(0)) * ns("softmax_cross_entropy_grad");
      else if (auto fused = dyn_cast<nn::FusedOp>(op)) {
        // Per element of the loop: each math function, each 16-bit operand
        // widened and each 16-bit result rounded (generated loops compute
        // in float).
        double perElement = 0;
        for (BlockArgument arg : fused.getBody().getArguments())
          perElement += ns(lowFloat(arg.getType(), /*widen=*/true));
        fused.getBody().walk([&](Operation *inner) {
          for (const char *f : mathCalls(inner))
            perElement += ns(f);
          for (Value r : inner->getResults())
            perElement += ns(lowFloat(r.getType(), /*widen=*/false));
        });
        kernel = elements(op->getResult(0)) * perElement;
      } else {
        for (const char *f : mathCalls(op))
          kernel += elements(op->getResult(0)) * ns(f);
      }
      t = std::max(kernel,
                   Calibration::memorySeconds(c, double(movedBytes(op)))) +
          c.opOverhead;
    }
    return t * share;
  }

  /// A calibrated kernel's seconds per element (Calibration::Compute::
  /// elementNs), 0 if it was not measured.
  double elementSeconds(const char *name) const {
    auto it = local->elementNs.find(name);
    return it == local->elementNs.end() ? 0.0 : it->second * 1e-9;
  }

  /// `batch` products of [m, k] x [k, n] as runtime/cpu's gemm() runs them:
  /// on one thread when small or when the rank has one, a product per
  /// thread when there are as many, else each over all threads.
  double productsSeconds(double batch, double m, double n, double k) const {
    const Calibration::Compute &one = cluster.calibration->compute.front();
    if (local->threads == 1 || 2 * batch * m * n * k < 2e5)
      return batch * Calibration::gemmSeconds(one, m, n, k);
    if (batch >= double(local->threads))
      return std::ceil(batch / double(local->threads)) *
             Calibration::gemmSeconds(one, m, n, k);
    return batch * Calibration::gemmSeconds(*local, m, n, k);
  }

  /// `ops` collectives of `kind` over `group` that send `bytes` per rank.
  double commSeconds(StringRef kind, StringRef group, double bytes,
                     int64_t ops) const {
    SmallVector<StringRef> axes;
    group.split(axes, ',', -1, false);
    int64_t size = 1;
    for (size_t a = 0; a < axisNames.size(); ++a)
      if (llvm::is_contained(axes, axisNames[a]))
        size *= axisSizes[a];
    if (local) {
      double seconds = 0;
      if (bytes <= 0 || ops <= 0 || size <= 1 ||
          !cluster.calibration->collectiveSeconds(kind, size,
                                                  bytes / double(ops), seconds))
        return 0;
      return double(ops) * seconds * share;
    }
    return collectiveSeconds(kind, size, bytes, ops,
                             linkOf(axisNames, axisSizes, group, cluster));
  }

  /// One run of a function: its ops' roofline and its collectives, on the
  /// program's two streams. Ops run one after another on the compute
  /// stream; a collective starts when the compute stream reaches it and the
  /// collectives before it are done (the communication stream runs them in
  /// issue order), and the first op that reads its result (or the return)
  /// waits for it, as the emitted program does (the emitter's
  /// waitOperands). `comm` is the time the compute stream waits: the
  /// exposed communication.
  struct Cost {
    double compute = 0, comm = 0;
    FunctionCost counts;
  };
  Cost costOf(func::FuncOp f) const {
    Cost c;
    c.counts = analyzeCost(f);
    double clock = 0, commClock = 0;
    DenseMap<Value, double> done;
    for (Operation &op : f.getBody().front()) {
      for (Value v : op.getOperands())
        if (auto it = done.find(v); it != done.end()) {
          c.comm += std::max(0.0, it->second - clock);
          clock = std::max(clock, it->second);
          done.erase(it);
        }
      if (std::optional<CollectiveCost> cc = collectiveCost(&op)) {
        commClock = std::max(clock, commClock) +
                    commSeconds(cc->kind, cc->axes, cc->bytes, 1);
        // MPI's collectives progress only inside MPI calls: on this
        // machine a collective runs when it is waited for.
        if (local) {
          c.comm += commClock - clock;
          clock = commClock;
        }
        for (Value r : op.getResults())
          done[r] = commClock;
        continue;
      }
      if (isa<func::ReturnOp>(op)) {
        c.comm += std::max(0.0, commClock - clock);
        clock = std::max(clock, commClock);
        continue;
      }
      // The op, and any op in its regions but an nn.fused chain's body
      // (timed once, as the chain).
      double t = 0;
      op.walk([&](Operation *inner) {
        if (!inner->getParentOfType<nn::FusedOp>() ||
            !op.isProperAncestor(inner))
          t += opSeconds(inner);
      });
      c.compute += t;
      clock += t;
    }
    return c;
  }

  /// The collectives of report.json's comm_bytes_per_step entry `perStep`
  /// (group -> kind -> bytes) beyond `inStep` (what the step functions
  /// ran): the runtime's reductions and gathers once per step, as many as
  /// the rank's runtime_collectives_per_step entry `ops` (group -> kind ->
  /// count) says it issues; point-to-point sends excluded.
  double runtimeCommSeconds(
      const nlohmann::json &perStep,
      const std::map<std::pair<std::string, std::string>, double> &inStep,
      const nlohmann::json &ops) const {
    double t = 0;
    for (auto &[group, kinds] : perStep.items())
      for (auto &[kind, value] : kinds.items()) {
        if (kind == "send")
          continue;
        auto it = inStep.find({kind, group});
        double rest =
            value.get<double>() - (it == inStep.end() ? 0.0 : it->second);
        if (rest <= 1e-6 * value.get<double>())
          continue;
        const int64_t n = ops.contains(group) && ops[group].contains(kind)
                              ? ops[group][kind].get<int64_t>()
                              : 1;
        t += commSeconds(kind, group, rest, std::max<int64_t>(1, n));
      }
    return t;
  }

  /// The optimizer's update: every parameter, gradient and state byte of
  /// the rank read and written once; on a calibrated cluster, the measured
  /// update and gradient norm per element (report.json's bytes: 4 per
  /// float32 state element, the float32 master among them under mixed
  /// precision).
  double optimizerSeconds(const nlohmann::json &bytes, const Plan &plan) const {
    const double params = bytes["params"].get<double>(),
                 grads = bytes["grads"].get<double>(),
                 state = bytes["optimizer_state"].get<double>();
    const double moved = 2.0 * (params + grads + state);
    const bool adamw = plan.optimizer.type == "adamw",
               momentum = !adamw && plan.optimizer.momentum > 0,
               mixed = plan.precision != "fp32";
    const double gradElements = grads / (mixed ? 2 : 4);
    // The fp32 buffers per updated element (moments, master): the state's
    // elements are the shard the rank updates.
    const int states = (adamw ? 2 : momentum ? 1 : 0) + (mixed ? 1 : 0);
    const double updated = states ? state / (4.0 * states) : gradElements;
    if (!local && plan.zeroOffload == "cpu") {
      // ZeRO-Offload (runtime/train/TensorStore.cpp's hostUpdate, one shard
      // after another): the shard's fp32 gradient down the host link, its state
      // and master read and written in host memory (the node's bandwidth
      // shared by its GPUs), the fp32 parameter back up.
      const double hostShare =
          cluster.hostMemoryBandwidthGBps * 1e9 / double(cluster.gpusPerNode);
      return 2 * 4 * updated / (cluster.hostLinkGBps * 1e9) +
             (2 * state + 2 * 4 * updated) / hostShare;
    }
    if (!local)
      return moved / (rates.bytesPerSecond * rates.memoryEfficiency);
    auto ns = [&](const char *name) { return elementSeconds(name); };
    const double kernels = updated * ns(adamw      ? "adamw"
                                        : momentum ? "sgd_momentum"
                                                   : "sgd") +
                           gradElements * ns("grad_norm");
    return (kernels > 0 ? kernels : Calibration::memorySeconds(*local, moved)) *
           share;
  }

  const Cluster &cluster;
  MachineRates rates;
  /// A calibrated cluster's rates for one rank of the plan, and the
  /// ranks per core beyond one.
  const Calibration::Compute *local = nullptr;
  double share = 1;
  std::vector<std::string> axisNames;
  std::vector<int64_t> axisSizes;
};

/// Adds `n` runs of `cost`'s collectives to `into`.
void addComm(std::map<std::pair<std::string, std::string>, double> &into,
             const FunctionCost &cost, int64_t n) {
  for (auto &[key, bytes] : cost.commBytes)
    into[key] += double(n) * bytes;
}

} // namespace

bool autopar::predictStep(ModuleOp module, const Plan &plan,
                          const Cluster &cluster, const nlohmann::json &report,
                          Prediction &p, std::string &error) {
  TimeModel model(module, cluster);
  const int64_t m = plan.microBatches;
  const nlohmann::json &parallel = report["parallel"];
  if (!module->hasAttr(dist::DistDialect::kPipelineScheduleAttr)) {
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      error = "internal error: the lowered module has no train_step";
      return false;
    }
    TimeModel::Cost c = model.costOf(step);
    std::map<std::pair<std::string, std::string>, double> inStep;
    addComm(inStep, c.counts, m);
    p.computeSeconds = double(m) * c.compute;
    p.microBatchSeconds = c.compute + c.comm;
    p.exposedCommSeconds =
        double(m) * c.comm +
        model.runtimeCommSeconds(parallel["comm_bytes_per_step"], inStep,
                                 parallel["runtime_collectives_per_step"]);
    p.optimizerSeconds = model.optimizerSeconds(report["bytes"], plan);
    p.stepSeconds =
        p.computeSeconds + p.exposedCommSeconds + p.optimizerSeconds;
    return true;
  }
  // A pipeline: each phase's time (its compute and its collectives) into
  // the schedule's simulation.
  const int64_t stages = plan.pipelineStages(), pp = plan.meshPp;
  std::vector<std::map<std::string, TimeModel::Cost>> phases(stages);
  p.stageSavedBytes.assign(stages, 0);
  int64_t boundaryBytes = 0;
  for (auto f : module.getOps<func::FuncOp>()) {
    auto stage = f->getAttrOfType<IntegerAttr>(dist::DistDialect::kStageAttr);
    auto phase = f->getAttrOfType<StringAttr>(dist::DistDialect::kPhaseAttr);
    if (!stage || !phase || stage.getInt() >= stages)
      continue;
    phases[stage.getInt()][phase.getValue().str()] = model.costOf(f);
    if (phase.getValue() != "forward")
      continue;
    // What it keeps per micro-batch in flight, and what it sends.
    for (unsigned r = 0; r < f.getNumResults(); ++r) {
      const int64_t bytes = tensorBytes(f.getResultTypes()[r]);
      if (f.getResultAttr(r, nn::NNDialect::kSavedAttr))
        p.stageSavedBytes[stage.getInt()] += bytes;
      else if (auto out = f.getResultAttrOfType<StringAttr>(
                   r, nn::NNDialect::kOutputAttr);
               out && out.getValue() == dist::kStageOutputName)
        boundaryBytes = std::max(boundaryBytes, bytes);
    }
  }
  pipeline::StageTimes times;
  for (int64_t s = 0; s < stages; ++s) {
    auto &ph = phases[s];
    auto total = [&](const char *name) {
      auto it = ph.find(name);
      return it == ph.end() ? 0.0 : it->second.compute + it->second.comm;
    };
    bool split = ph.count("input");
    times.forward.push_back(total("forward"));
    times.backward.push_back(total(split ? "input" : "backward"));
    times.weight.push_back(split ? total("weight") : 0.0);
    double seconds = 0;
    for (auto &[name, cost] : ph)
      seconds += cost.compute + cost.comm;
    p.stageSeconds.push_back(seconds);
  }
  // The stages' layers (autopar-dist-pipeline-split), where they are alike.
  if (auto forward = module.lookupSymbol<func::FuncOp>("forward"))
    if (auto split =
            forward->getAttrOfType<DictionaryAttr>(dist::DistDialect::kPipelineAttr)) {
      auto layers = split.getAs<IntegerAttr>("layers");
      auto first = split.getAs<DenseI64ArrayAttr>("stage_first_layer");
      auto uniform = split.getAs<BoolAttr>("uniform_layers");
      if (layers)
        p.layers = layers.getInt();
      if (auto costs = split.getAs<DenseF64ArrayAttr>("layer_cost"))
        p.layerCost.assign(costs.asArrayRef().begin(),
                           costs.asArrayRef().end());
      if (auto e = split.getAs<FloatAttr>("embedding_cost"))
        p.embeddingCost = e.getValueAsDouble();
      if (auto h = split.getAs<FloatAttr>("head_cost"))
        p.headCost = h.getValueAsDouble();
      if (layers && first && uniform && uniform.getValue() &&
          int64_t(first.size()) == stages)
        for (int64_t s = 0; s < stages; ++s)
          p.stageLayers.push_back(
              (s + 1 < stages ? first[s + 1] : layers.getInt()) - first[s]);
    }
  times.transfer =
      model.commSeconds("send", dist::kPipelineAxis, double(boundaryBytes), 1);
  // The schedule the compile built and checked (dist.pipeline_schedule),
  // simulated with the cluster's times.
  pipeline::Schedule schedule;
  pipeline::TransferPlan transfers;
  pipeline::Simulation sim;
  if (!dist::readPipelineSchedule(module, schedule, transfers, error) ||
      !pipeline::simulate(schedule, times, sim, error))
    return false;
  // The busiest pipeline rank sets the breakdown.
  int64_t busiest = 0;
  for (int64_t r = 1; r < pp; ++r)
    if (sim.busy[r] > sim.busy[busiest])
      busiest = r;
  double compute = 0, comm = 0;
  std::map<std::pair<std::string, std::string>, double> inStep;
  for (const pipeline::Action &a : schedule.actions[busiest]) {
    const char *name = a.op == pipeline::Op::Forward         ? "forward"
                       : a.op == pipeline::Op::Backward      ? "backward"
                       : a.op == pipeline::Op::BackwardInput ? "input"
                                                             : "weight";
    const TimeModel::Cost &c = phases[a.stage][name];
    compute += c.compute;
    comm += c.comm;
    addComm(inStep, c.counts, 1);
  }
  // That rank's entry of report.json (the first with its pp coordinate).
  nlohmann::json rankEntry = parallel["per_rank"][0];
  for (const nlohmann::json &e : parallel["per_rank"])
    if (e["coords"][dist::kPipelineAxis.str()].get<int64_t>() == busiest) {
      rankEntry = e;
      break;
    }
  const double runtimeComm =
      model.runtimeCommSeconds(rankEntry["comm_bytes_per_step"], inStep,
                               rankEntry["runtime_collectives_per_step"]);
  p.computeSeconds = compute;
  p.exposedCommSeconds = comm + runtimeComm;
  p.bubbleSeconds = sim.makespan - sim.busy[busiest];
  p.timeline = sim.events;
  p.pipelineRanks = pp;
  p.bubbleFraction = sim.bubbleFraction;
  p.optimizerSeconds = model.optimizerSeconds(rankEntry["bytes"], plan);
  p.stepSeconds = sim.makespan + runtimeComm + p.optimizerSeconds;
  return true;
}


FunctionTime autopar::timeFunction(func::FuncOp func, const Cluster &cluster) {
  TimeModel model(func->getParentOfType<ModuleOp>(), cluster);
  TimeModel::Cost c = model.costOf(func);
  return {c.compute, c.comm};
}

Link autopar::linkOf(const std::vector<std::string> &axisNames,
                     const std::vector<int64_t> &axisSizes, StringRef group,
                     const Cluster &cluster) {
  SmallVector<StringRef> axes;
  group.split(axes, ',', -1, false);
  // The ranks from the outermost of the group's axes inwards.
  int64_t span = 1;
  bool inside = false;
  for (size_t a = 0; a < axisNames.size(); ++a) {
    inside = inside || llvm::is_contained(axes, axisNames[a]);
    if (inside)
      span *= axisSizes[a];
  }
  const double intra = cluster.intraNodeGBps * 1e9,
               inter = cluster.interNodeGBps * 1e9;
  if (span <= cluster.gpusPerNode && cluster.gpusPerNode % span == 0)
    return {intra, kNodeStepLatency, intra};
  // The group's ranks in rank 0's node (the others' nodes hold as many).
  std::vector<int64_t> members = {0};
  int64_t stride = 1;
  for (size_t a = axisNames.size(); a-- > 0;) {
    if (llvm::is_contained(axes, axisNames[a])) {
      std::vector<int64_t> more;
      for (int64_t m : members)
        for (int64_t c = 0; c < axisSizes[a]; ++c)
          if (m + c * stride < cluster.gpusPerNode)
            more.push_back(m + c * stride);
      members = std::move(more);
    }
    stride *= axisSizes[a];
  }
  const int64_t k = std::max<int64_t>(1, int64_t(members.size()));
  int64_t groupSize = 1;
  for (size_t a = 0; a < axisNames.size(); ++a)
    if (llvm::is_contained(axes, axisNames[a]))
      groupSize *= axisSizes[a];
  return {std::min(intra, double(k) * inter), kNetworkStepLatency, inter,
          std::max<int64_t>(1, groupSize / k)};
}

double autopar::collectiveSeconds(StringRef kind, int64_t g, double bytes,
                                  int64_t ops, const Link &link) {
  if (bytes <= 0 || ops <= 0 || g <= 1)
    return 0;
  const int64_t steps = kind == "all_reduce" ? 2 * (g - 1)
                        : kind == "send"     ? 1
                                             : g - 1;
  // Within one node every step is the link's; across nodes only those
  // that cross the network are.
  const int64_t crossing =
      link.nodes <= 1 ? steps
                      : std::min(steps, kind == "all_reduce" ? 2 * link.nodes
                                        : kind == "send"     ? int64_t{1}
                                                             : link.nodes);
  const double latency = kBaseLatency +
                         double(steps - crossing) * kNodeStepLatency +
                         double(crossing) * link.stepLatency;
  return double(ops) * latency +
         bytes /
             (kind == "send" ? link.sendBytesPerSecond : link.bytesPerSecond);
}
