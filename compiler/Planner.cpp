//===- Planner.cpp - `autopar plan`: predicted step time of a plan --------===//

#include "compiler/Planner.h"
#include "frontends/onnx/Validate.h"

#include "compiler/Calibrate.h"
#include "compiler/Compile.h"
#include "compiler/Driver.h"
#include "compiler/PipelineSchedule.h"
#include "compiler/PlanAttr.h"
#include "compiler/Report.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"
#include "dialects/parallel/DistOps.h"
#include "passes/analysis/CostAnalysis.h"
#include "passes/lowering/Passes.h"
#include "passes/parallel/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>

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
/// element (compiler/codegen/CppEmitter.cpp).
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
  /// waits for it, as the emitted program does (CppEmitter's
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
  /// ran): the runtime's reductions and gathers once per step, one
  /// collective per parameter tensor of the rank (`tensors` of them, as
  /// runtime/train/Trainer.cpp issues them); point-to-point sends excluded.
  double runtimeCommSeconds(
      const nlohmann::json &perStep,
      const std::map<std::pair<std::string, std::string>, double> &inStep,
      int64_t tensors) const {
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
        t += commSeconds(kind, group, rest, std::max<int64_t>(1, tensors));
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

/// The parameters whose gradients `functions` return (each once): the
/// tensors the runtime syncs once per step.
int64_t gradientResults(ArrayRef<func::FuncOp> functions) {
  llvm::StringSet<> names;
  for (func::FuncOp f : functions)
    for (unsigned r = 0; r < f.getNumResults(); ++r)
      if (auto g =
              f.getResultAttrOfType<StringAttr>(r, nn::NNDialect::kGradAttr))
        names.insert(g.getValue());
  return int64_t(names.size());
}

bool predictStep(ModuleOp module, const Plan &plan, const Cluster &cluster,
                 const nlohmann::json &report, Prediction &p,
                 std::string &error) {
  TimeModel model(module, cluster);
  const int64_t m = plan.microBatches;
  const nlohmann::json &parallel = report["parallel"];
  if (!module->hasAttr(dist::kPipelineScheduleAttr)) {
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
                                 gradientResults({step}));
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
    auto stage = f->getAttrOfType<IntegerAttr>(dist::kStageAttr);
    auto phase = f->getAttrOfType<StringAttr>(dist::kPhaseAttr);
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
            forward->getAttrOfType<DictionaryAttr>(dist::kPipelineAttr)) {
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
  pipeline::Schedule schedule;
  pipeline::Simulation sim;
  if (!pipeline::buildSchedule(pipelineScheduleOptions(plan), schedule,
                               error) ||
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
  SmallVector<func::FuncOp> onRank;
  for (auto f : module.getOps<func::FuncOp>())
    if (auto stage = f->getAttrOfType<IntegerAttr>(dist::kStageAttr);
        stage && f->hasAttr(dist::kPhaseAttr) && stage.getInt() % pp == busiest)
      onRank.push_back(f);
  const double runtimeComm = model.runtimeCommSeconds(
      rankEntry["comm_bytes_per_step"], inStep, gradientResults(onRank));
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

} // namespace

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
  const double k = double(std::max<size_t>(1, members.size()));
  return {std::min(intra, k * inter), kNetworkStepLatency, inter};
}

double autopar::collectiveSeconds(StringRef kind, int64_t g, double bytes,
                                  int64_t ops, const Link &link) {
  if (bytes <= 0 || ops <= 0 || g <= 1)
    return 0;
  const int64_t steps = kind == "all_reduce" ? 2 * (g - 1)
                        : kind == "send"     ? 1
                                             : g - 1;
  return double(ops) * (kBaseLatency + double(steps) * link.stepLatency) +
         bytes /
             (kind == "send" ? link.sendBytesPerSecond : link.bytesPerSecond);
}

bool autopar::prepareInputs(PlannerOptions &o, std::string &error) {
  std::vector<onnx_import::GraphInput> inputs;
  if (!onnx_import::readGraphInputs(o.model, inputs, error))
    return false;
  int found = 0;
  for (const onnx_import::GraphInput &in : inputs) {
    // int32 (6) or int64 (7) [batch, sequence]: token ids and targets.
    if ((in.elementType != 6 && in.elementType != 7) || in.shape.size() != 2)
      continue;
    if (in.shape[1] < 0) {
      error = o.model + ": input '" + in.name +
              "' has a dynamic sequence length: give it with --input-shape " +
              in.name + "=B,T";
      auto given = o.import.inputShapes.find(in.name);
      if (given == o.import.inputShapes.end() || given->second.size() != 2)
        return false;
      o.import.inputShapes[in.name] = {o.globalBatch, given->second[1]};
    } else {
      o.import.inputShapes[in.name] = {o.globalBatch, in.shape[1]};
    }
    ++found;
  }
  error.clear();
  if (found != 2) {
    error = o.model +
            ": a training model needs two integer [batch, "
            "sequence] graph inputs (token ids and targets), it has " +
            std::to_string(found);
    return false;
  }
  return true;
}

std::string autopar::precisionError(const Cluster &cluster,
                                    const std::string &precision) {
  if (cluster.calibration)
    return "";
  if (precision == "fp32" && cluster.fp32Tflops <= 0)
    return "timing fp32 needs the GPU's float32 rate (gpu.fp32_tflops in "
           "the cluster file: its products run without tensor cores, e.g. "
           "19.5 on an A100, 67 on an H100 SXM)";
  if (precision == "bf16-mixed" && !cluster.bf16)
    return "the cluster's GPU" +
           (cluster.gpuName.empty() ? "" : " (" + cluster.gpuName + ")") +
           " has no bfloat16 (gpu.bf16 is false): fp16-mixed or fp32";
  return "";
}

bool autopar::evaluatePlan(const PlannerOptions &o, const Plan &plan,
                           const std::string &planName, Prediction &p,
                           std::string &error) {
  const int64_t ranks = plan.meshDp * plan.meshTp * plan.meshPp;
  // This machine runs more ranks than cores too (they take turns).
  if (ranks > o.cluster.gpus() && !o.cluster.calibration) {
    error = planName + ": mesh: the plan needs " + std::to_string(ranks) +
            " GPUs, the cluster has " + std::to_string(o.cluster.gpus());
    return false;
  }
  if (o.cluster.calibration && ranks > 1 &&
      o.cluster.calibration->comm.empty()) {
    error = planName + ": mesh: the plan has " + std::to_string(ranks) +
            " ranks, and the calibration measured no collectives (mpirun "
            "was not found): plans of one rank only";
    return false;
  }
  if (std::string why = precisionError(o.cluster, plan.precision);
      !why.empty()) {
    error = planName + ": precision: " + why;
    return false;
  }
  CompileOptions co;
  co.model = o.model;
  co.plan = planName;
  co.planValue = &plan;
  // A calibrated cluster is this machine: its CPU programs.
  co.target = o.cluster.calibration ? "cpu" : "cuda";
  co.reportOnly = true;
  co.import = o.import;
  auto use = [&](ModuleOp module, const ProgramOptions &program,
                 std::string &err) {
    nlohmann::json report;
    if (!readPlanAttr(module, p.plan, err) ||
        !trainReportJson(module, program, report, err) ||
        !predictStep(module, p.plan, o.cluster, report, p, err))
      return false;
    p.memoryBytesPerGpu = report["bytes"]["peak"].get<int64_t>();
    p.commBytesPerStep = report["parallel"]["comm_bytes_per_step"];
    p.flopsPerStep = report["flops_per_step"].get<double>();
    p.trainableParameters = report["trainable_parameters"].get<int64_t>();
    p.memoryBytes = report["bytes"];
    // ZeRO-Offload on GPUs: the optimizer state (and the masters) in host
    // memory, which the node's GPUs share.
    double hostBytes = 0;
    if (p.plan.zeroOffload == "cpu" && !o.cluster.calibration) {
      if (!o.cluster.hasHost()) {
        err = planName +
              ": zero.offload: predicting it needs the cluster's host "
              "(host.memory_gb, host.memory_bandwidth_gbps, host.link_gbps)";
        return false;
      }
      const int64_t state = p.memoryBytes["optimizer_state"].get<int64_t>();
      p.memoryBytesPerGpu -= state;
      p.memoryBytes["optimizer_state"] = 0;
      p.memoryBytes["host"] = state;
      p.memoryBytes["peak"] = p.memoryBytesPerGpu;
      for (const nlohmann::json &e : report["parallel"]["per_rank"])
        hostBytes =
            std::max(hostBytes, e["bytes"]["optimizer_state"].get<double>());
    }
    const double tokens = report["global_batch"].get<double>() *
                          report["sequence_length"].get<double>();
    p.tokensPerSecond = tokens / p.stepSeconds;
    // On this machine (a core a "GPU"), over all its cores.
    const int64_t gpus = o.cluster.calibration
                             ? std::max(ranks, o.cluster.calibration->cores)
                             : ranks;
    // Of the peak of the plan's precision (an fp32 plan's: float32).
    const double peak = !o.cluster.calibration && p.plan.precision == "fp32"
                            ? o.cluster.fp32Tflops
                            : o.cluster.peakTflops;
    p.mfu = p.flopsPerStep / (p.stepSeconds * double(gpus) * peak * 1e12);
    p.fits = double(p.memoryBytesPerGpu) <= o.cluster.memoryBytes() &&
             hostBytes * double(o.cluster.gpusPerNode) <=
                 o.cluster.hostMemoryGB * 1e9;
    return true;
  };
  return lowerModel(co, use, error);
}

nlohmann::json autopar::toJson(const Prediction &p) {
  return {{"plan", toJson(p.plan)},
          {"step_time_s", p.stepSeconds},
          {"tokens_per_s", p.tokensPerSecond},
          {"mfu", p.mfu},
          {"memory_bytes_per_gpu", p.memoryBytesPerGpu},
          {"fits", p.fits},
          {"comm_bytes_per_step", p.commBytesPerStep},
          {"bubble_fraction", p.bubbleFraction},
          {"breakdown",
           {{"compute_s", p.computeSeconds},
            {"exposed_comm_s", p.exposedCommSeconds},
            {"bubble_s", p.bubbleSeconds},
            {"optimizer_s", p.optimizerSeconds}}}};
}

std::string autopar::describePlan(const Plan &plan) {
  std::string text = llvm::formatv("dp={0} tp={1} pp={2} m={3} zero={4}",
                                   plan.meshDp, plan.meshTp, plan.meshPp,
                                   plan.microBatches, plan.zeroStage);
  if (plan.zeroOffload != "none")
    text += " offload";
  text += " " + plan.precision;
  if (plan.fp32Grads())
    text += " fp32-grads";
  if (plan.recompute != "none")
    text += " recompute=" + plan.recompute;
  if (plan.meshTp > 1 && !plan.sequenceParallel)
    text += " no-sp";
  if (plan.attention != "fused")
    text += " attention=" + plan.attention;
  if (plan.meshPp > 1) {
    text += " " + plan.pipelineSchedule;
    if (plan.pipelineChunks > 1)
      text += " v=" + std::to_string(plan.pipelineChunks);
  }
  return text;
}

double autopar::pipelineLayerBound(int64_t layers, int64_t stages,
                                   int64_t microBatches, double firstExtra,
                                   double lastExtra) {
  const int64_t L = layers, S = stages;
  const double m = double(microBatches);
  if (L < S || S < 1 || microBatches < 1)
    return 0;
  auto extra = [&](int64_t s) {
    return (s == 0 ? firstExtra : 0) + (s == S - 1 ? lastExtra : 0);
  };
  // Can every stage's m w_s + (the work before it) stay within g? Each
  // stage takes the most layers it may (leaving one per later stage):
  // taking more early never lowers how many the later stages reach.
  auto fits = [&](double g) {
    int64_t placed = 0;
    double before = 0;
    for (int64_t s = 0; s < S; ++s) {
      const double room = std::floor((g - before) / m - extra(s));
      const int64_t n = std::min<int64_t>(L - placed - (S - 1 - s),
                                          room < 0 ? 0 : int64_t(room + 1e-9));
      if (n < 1)
        return false;
      placed += n;
      before += double(n) + extra(s);
    }
    return placed == L;
  };
  const double total = double(L) + firstExtra + lastExtra;
  double lo = m * std::ceil(double(L) / double(S)), hi = m * total + total;
  for (int i = 0; i < 100 && hi - lo > 1e-9 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (fits(mid) ? hi : lo) = mid;
  }
  return hi;
}

bool autopar::searchPlans(const PlannerOptions &o,
                          std::vector<Prediction> &ranked, std::string &error,
                          SearchStats *statsOut) {
  const int64_t gpus = o.cluster.gpus(), batch = o.globalBatch;
  ranked.clear();
  // Candidates, evaluated on all cores: a mesh with `m` micro-batches, a
  // ZeRO stage, a recompute mode, a schedule; ZeRO-3 only where ZeRO-1
  // does not fit, full recompute only where a plan does not fit without
  // (followUps).
  // The precision: `--precision`, or on GPUs the fastest they compute in
  // (bf16-mixed; fp16-mixed where there is no bfloat16: fp32 is never
  // faster, nor smaller). This machine's CPU programs multiply in fp32
  // whatever the precision: fp32 first, and bf16-mixed for the best meshes
  // (less memory, more conversions).
  const bool local = o.cluster.calibration.has_value();
  const std::string precision = !o.precision.empty() ? o.precision
                                : local              ? "fp32"
                                : o.cluster.bf16     ? "bf16-mixed"
                                                     : "fp16-mixed";
  struct Mesh {
    int64_t dp, tp, pp, m;
    std::string schedule = "1f1b", recompute = "none", precision;
    int64_t chunks = 1, zero = 1;
    /// ZeRO-Offload: the optimizer state in host memory.
    bool offload = false;
    std::vector<Prediction> predictions;
    std::string firstError;
    /// Skipped if its lower bound cannot make the top; `least`: a step it
    /// cannot beat (its plan of less work, evaluated).
    bool bounded = false;
    double least = 0;
    /// Where its plans go among the others (the threads' order aside).
    size_t order = 0;
    /// Not compiled: its model states or saved activations alone exceed a
    /// GPU.
    bool tooLarge = false;
    /// Evaluated before the others of its queue (a tp's first pipeline).
    bool probe = false;
  };
  // What the first round's plans (one sample per micro-batch, no
  // recompute, 1F1B, `precision`) teach about the others of their tp: one
  // micro-batch's compute through the model (without a pipeline) and the
  // least of a layer's (a pipeline's middle stages, where the layers are
  // alike), each with the tp collectives it waits for, and what the first
  // and last stages run beyond their layers. With them, a mesh's step is
  // at least its busiest rank's work (pipelineLayerBound);
  // the data-parallel reductions, the optimizer and recompute only add.
  struct Learned {
    double whole = 0, layer = 0;
    /// Bytes a layer saves per micro-batch in flight (the least of a
    /// pipeline's middle stages), and what the split balances.
    double saved = 0;
    std::vector<double> layerCost;
    double embeddingCost = 0, headCost = 0;
    /// The first and last stages' (seconds, layers): beyond their layers,
    /// the embeddings and the head.
    std::vector<std::pair<double, int64_t>> firsts, lasts;
    /// The least of the first or last stages' work beyond their layers.
    double extra(const std::vector<std::pair<double, int64_t>> &stages) const {
      double e = std::numeric_limits<double>::infinity();
      for (auto [seconds, n] : stages)
        e = std::min(e, seconds - double(n) * layer);
      return stages.empty() ? 0.0 : std::max(0.0, e);
    }
  };
  // By tp and recompute (none; full: its plans bound the others of full).
  std::map<std::pair<int64_t, std::string>, Learned> learned;
  int64_t modelLayers = 0;
  // The trainable parameters (0 before the first plan counted them).
  int64_t trainable = 0;
  SearchStats stats;
  std::vector<double> fitting; // the fitting plans' step seconds, sorted
  std::mutex mutex;
  const size_t keep = size_t(std::max<int64_t>(o.top, 3));
  // A plan of the first round's kind: one sample per micro-batch, 1F1B,
  // `precision` (what `learned` holds comes from such plans and bounds
  // them).
  auto firstRound = [&](StringRef planPrecision, int64_t chunks,
                        StringRef schedule, int64_t dp, int64_t m) {
    return planPrecision == precision && chunks == 1 && schedule == "1f1b" &&
           batch == dp * m;
  };
  auto learn = [&](const Prediction &p) {
    std::lock_guard<std::mutex> lock(mutex);
    const Plan &plan = p.plan;
    if (p.layers)
      modelLayers = p.layers;
    if (p.fits)
      fitting.insert(
          std::upper_bound(fitting.begin(), fitting.end(), p.stepSeconds),
          p.stepSeconds);
    if ((plan.recompute != "none" && plan.recompute != "full") ||
        !firstRound(plan.precision, plan.pipelineChunks, plan.pipelineSchedule,
                    plan.meshDp, plan.microBatches))
      return;
    Learned &l = learned[{plan.meshTp, plan.recompute}];
    auto least = [](double &into, double v) {
      into = into > 0 ? std::min(into, v) : v;
    };
    if (plan.meshPp == 1)
      least(l.whole, p.microBatchSeconds);
    const size_t stages = p.stageLayers.size();
    for (size_t st = 1; st + 1 < stages; ++st) {
      least(l.layer, p.stageSeconds[st] / double(p.stageLayers[st]));
      least(l.saved, double(p.stageSavedBytes[st]) / double(p.stageLayers[st]));
    }
    if (l.layerCost.empty() && !p.layerCost.empty()) {
      l.layerCost = p.layerCost;
      l.embeddingCost = p.embeddingCost;
      l.headCost = p.headCost;
    }
    if (stages >= 2) {
      l.firsts.push_back({p.stageSeconds.front(), p.stageLayers.front()});
      l.lasts.push_back({p.stageSeconds.back(), p.stageLayers.back()});
    }
  };
  auto lowerBound = [&](const Mesh &mesh) {
    std::lock_guard<std::mutex> lock(mutex);
    double bound = mesh.least;
    // ZeRO-3 without a pipeline: each micro-batch gathers every parameter
    // of the rank's share (at least once, at least 2 bytes each) and the
    // step reduce-scatters its fp32 gradients once, all over dp and on
    // the step's one communication stream (predictStep: a micro-batch
    // waits for its collectives; the runtime's run after the step).
    if (mesh.pp == 1 && mesh.zero == 3 && mesh.dp > 1 && !local &&
        trainable > 0) {
      const double share = double(trainable) / double(mesh.tp) *
                           double(mesh.dp - 1) / double(mesh.dp);
      const Link link = linkOf({dist::kMeshAxes.begin(), dist::kMeshAxes.end()},
                               dist::meshAxisSizes(mesh.dp, mesh.tp, mesh.pp),
                               dist::kDataAxis, o.cluster);
      bound = std::max(
          bound,
          double(mesh.m) *
                  collectiveSeconds("all_gather", mesh.dp, 2 * share, 1, link) +
              collectiveSeconds("reduce_scatter", mesh.dp, 4 * share, 1, link));
    }
    if (!firstRound(mesh.precision, mesh.chunks, mesh.schedule, mesh.dp,
                    mesh.m))
      return bound;
    for (const char *recompute : {"none", "full"}) {
      auto it = learned.find({mesh.tp, recompute});
      if (it == learned.end() ||
          (recompute == StringRef("full") && mesh.recompute != "full"))
        continue;
      const Learned &l = it->second;
      if (mesh.pp == 1) {
        bound = std::max(bound,
                         double(mesh.m) *
                             std::max(l.whole, l.layer * double(modelLayers)));
      } else if (l.layer > 0) {
        bound = std::max(
            bound, l.layer * pipelineLayerBound(modelLayers, mesh.pp, mesh.m,
                                                l.extra(l.firsts) / l.layer,
                                                l.extra(l.lasts) / l.layer));
      }
    }
    return bound;
  };
  // The `keep`-th best fitting step so far (infinite before).
  auto threshold = [&]() {
    std::lock_guard<std::mutex> lock(mutex);
    return fitting.size() < keep ? std::numeric_limits<double>::infinity()
                                 : fitting[keep - 1];
  };
  auto makeMesh = [&](int64_t dp, int64_t tp, int64_t pp, int64_t m) {
    Mesh mesh;
    mesh.dp = dp, mesh.tp = tp, mesh.pp = pp, mesh.m = m;
    mesh.precision = precision;
    return mesh;
  };
  // The data inputs, as the first plan's compile found them (the later
  // ones import the model once, at their micro-batch size).
  std::string dataInputs, dataTargets;
  std::map<std::string, std::string> dataFeeds;
  // Model states: mixed precision holds 2 bytes of weight and of gradient
  // per parameter of a rank's share, and 12 of fp32 master and Adam
  // moments sharded further over dp by ZeRO (all 16 at ZeRO-3); fp32 4 and
  // 4, and 8 of moments.
  auto statesBound = [&](const Mesh &mesh, int64_t zero, bool offload) {
    const double share = double(trainable) / double(mesh.tp * mesh.pp);
    const bool fp32 = mesh.precision == "fp32";
    const double replicated = fp32 ? 8.0 : 4.0;
    const double onGpu = offload ? 0.0 : fp32 ? 8.0 : 12.0;
    return mesh.dp > 1 && zero == 3
               ? share * (replicated + onGpu) / double(mesh.dp)
               : share * (replicated + onGpu / double(mesh.dp));
  };
  // Offload is in the space where the cluster file describes the host.
  const bool offloadable = !local && o.cluster.hasHost();
  // A 1F1B pipeline without recompute: the least its busiest rank saves
  // (its micro-batches in flight, min(pp - r, m), times its layers under
  // the split autopar-dist-pipeline-split makes, times a layer's saved
  // bytes), or 0 where nothing is known.
  auto savedBound = [&](const Mesh &mesh) {
    std::lock_guard<std::mutex> lock(mutex);
    if (mesh.recompute != "none" || mesh.pp < 2 ||
        !firstRound(mesh.precision, mesh.chunks, mesh.schedule, mesh.dp,
                    mesh.m) ||
        mesh.pp > modelLayers)
      return 0.0;
    auto it = learned.find({mesh.tp, "none"});
    if (it == learned.end() || it->second.saved <= 0 ||
        int64_t(it->second.layerCost.size()) != modelLayers)
      return 0.0;
    const Learned &l = it->second;
    SmallVector<int64_t> first =
        dist::balanceStages(l.layerCost, l.embeddingCost, l.headCost, mesh.pp);
    double most = 0;
    for (int64_t r = 0; r < mesh.pp; ++r) {
      const int64_t layers =
          (r + 1 < mesh.pp ? first[r + 1] : modelLayers) - first[r];
      most = std::max(most, double(std::min(mesh.pp - r, mesh.m)) *
                                double(layers) * l.saved);
    }
    return most;
  };
  // Skipped where its lower bound cannot make the best `keep`, or (without
  // recompute) where its saved activations cannot fit.
  auto evaluateMesh = [&](Mesh &mesh) {
    if (mesh.bounded && !o.exhaustive &&
        std::max(mesh.least, lowerBound(mesh)) > threshold()) {
      std::lock_guard<std::mutex> lock(mutex);
      ++stats.bounded;
      return;
    }
    if (!o.exhaustive && (savedBound(mesh) > o.cluster.memoryBytes() ||
                          statesBound(mesh, mesh.zero, mesh.offload) >
                              o.cluster.memoryBytes())) {
      std::lock_guard<std::mutex> lock(mutex);
      ++stats.memory;
      mesh.tooLarge = true;
      return;
    }
    Plan plan;
    plan.meshDp = mesh.dp;
    plan.meshTp = mesh.tp;
    plan.meshPp = mesh.pp;
    plan.microBatches = mesh.m;
    plan.zeroStage = mesh.dp > 1 || mesh.offload ? mesh.zero : 0;
    plan.zeroOffload = mesh.offload ? "cpu" : "none";
    plan.precision = mesh.precision;
    plan.recompute = mesh.recompute;
    plan.dataInputs = dataInputs;
    plan.dataTargets = dataTargets;
    plan.dataFeeds = dataFeeds;
    if (mesh.pp > 1) {
      plan.pipelineSchedule = mesh.schedule;
      plan.pipelineChunks = mesh.chunks;
    }
    Prediction p;
    if (!evaluatePlan(o, plan, "plan", p, mesh.firstError))
      return;
    learn(p);
    mesh.predictions.push_back(p);
  };
  // A plan that does not fit comes back with what may fit, bounded by its
  // step (full recompute and a higher ZeRO stage only add to it): ZeRO-3
  // (without a pipeline) and full recompute; one with full recompute as
  // ZeRO-Offload.
  auto followUps = [&](const Mesh &mesh) {
    std::vector<Mesh> next;
    if (mesh.offload || (!mesh.tooLarge && (mesh.predictions.size() != 1 ||
                                            mesh.predictions[0].fits)))
      return next;
    Mesh base = mesh;
    base.predictions.clear();
    base.firstError.clear();
    base.bounded = true;
    base.tooLarge = false;
    base.probe = false;
    if (!mesh.predictions.empty())
      base.least = mesh.predictions[0].stepSeconds;
    // Full recompute that does not fit either: the optimizer state in
    // host memory (all else the same: at least its step without the
    // update on the GPU).
    if (mesh.recompute == "full") {
      if (offloadable) {
        Mesh off = base;
        off.offload = true;
        if (!mesh.predictions.empty())
          off.least = mesh.predictions[0].stepSeconds -
                      mesh.predictions[0].optimizerSeconds;
        off.order = mesh.order + 1;
        next.push_back(off);
      }
      return next;
    }
    if (mesh.recompute != "none")
      return next;
    if (mesh.zero == 1 && mesh.pp == 1 && mesh.dp > 1) {
      Mesh zero3 = base;
      zero3.zero = 3;
      zero3.order = mesh.order + 1;
      next.push_back(zero3);
    }
    Mesh full = base;
    full.recompute = "full";
    full.order = mesh.order + 2;
    next.push_back(full);
    return next;
  };
  // Best first, on all cores: the candidate of the least lower bound next
  // (in their order while nothing bounds them), its follow-ups into the
  // queue, or into `later`. Once the least bound exceeds the best `keep`
  // fitting steps, the rest is skipped.
  std::string firstError;
  auto evaluateQueue = [&](std::vector<Mesh> queue,
                           std::vector<Mesh> *later = nullptr) {
    for (size_t i = 0; i < queue.size(); ++i)
      queue[i].order = 4 * i;
    std::vector<Mesh> done;
    std::mutex queued;
    std::condition_variable changed;
    size_t running = 0;
    auto work = [&]() {
      std::unique_lock<std::mutex> lock(queued);
      for (;;) {
        if (queue.empty()) {
          if (running == 0)
            break;
          changed.wait(lock);
          continue;
        }
        size_t pick = 0;
        double least = std::numeric_limits<double>::infinity();
        for (size_t i = 0; i < queue.size(); ++i)
          if (queue[i].probe) {
            pick = i;
            break;
          } else if (double b = lowerBound(queue[i]); b < least) {
            least = b, pick = i;
          }
        Mesh mesh = std::move(queue[pick]);
        queue.erase(queue.begin() + pick);
        ++running;
        lock.unlock();
        evaluateMesh(mesh);
        std::vector<Mesh> next = followUps(mesh);
        lock.lock();
        --running;
        for (Mesh &m : next)
          (later ? *later : queue).push_back(std::move(m));
        done.push_back(std::move(mesh));
        changed.notify_all();
      }
      changed.notify_all();
    };
    const size_t threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t)
      pool.emplace_back(work);
    work();
    for (std::thread &t : pool)
      t.join();
    // In the candidates' order, whatever the threads' order.
    std::stable_sort(
        done.begin(), done.end(),
        [](const Mesh &a, const Mesh &b) { return a.order < b.order; });
    for (Mesh &mesh : done) {
      ranked.insert(ranked.end(), mesh.predictions.begin(),
                    mesh.predictions.end());
      if (firstError.empty())
        firstError = mesh.firstError;
    }
  };
  // One sample per micro-batch first (the least activation memory, the
  // smallest bubble); then two for the best few meshes.
  // Every GPU; on this machine also fewer ranks (with more threads each).
  std::vector<int64_t> rankCounts = {gpus};
  if (local)
    for (int64_t r = gpus - 1; r >= 1; --r)
      if (gpus % r == 0)
        rankCounts.push_back(r);
  std::vector<Mesh> meshes;
  for (int64_t ranks : rankCounts)
    for (int64_t tp = 1; tp <= o.cluster.gpusPerNode; ++tp) {
      if (o.cluster.gpusPerNode % tp || ranks % tp)
        continue;
      for (int64_t pp = 1; tp * pp <= ranks; ++pp) {
        if (ranks % (tp * pp))
          continue;
        const int64_t dp = ranks / (tp * pp);
        // Fewer micro-batches than stages leaves the pipeline mostly idle.
        if (batch % dp || batch / dp < pp)
          continue;
        meshes.push_back(makeMesh(dp, tp, pp, batch / dp));
      }
    }
  // One mesh first, alone: its report counts the trainable parameters,
  // whose model states alone (bf16-mixed: 2 bytes of weight and of
  // gradient per parameter of a rank's share, 12 of fp32 master and Adam
  // moments sharded further over dp by ZeRO; all 16 over dp at ZeRO-3)
  // rule out the meshes that cannot fit whatever they recompute, and its
  // split the layers. A pipeline of three stages or more (middle stages:
  // a layer's time), the fewest, over the most tp; else the most sharded.
  auto probeFirst = [](const Mesh &a, const Mesh &b) {
    if ((a.pp >= 3) != (b.pp >= 3))
      return a.pp >= 3;
    if (a.pp >= 3)
      return a.pp != b.pp ? a.pp < b.pp : a.tp > b.tp;
    return a.tp * a.pp > b.tp * b.pp;
  };
  std::stable_sort(meshes.begin(), meshes.end(), probeFirst);
  size_t tried = 0;
  std::vector<Mesh> rest, ruledOut;
  // The first probe's follow-ups join the others' queue.
  std::vector<Mesh> retries;
  while (tried < meshes.size() && ranked.empty()) {
    evaluateQueue({meshes[tried++]}, &retries);
    for (const Prediction &p : ranked) {
      trainable = std::max(trainable, p.trainableParameters);
      dataInputs = p.plan.dataInputs;
      dataTargets = p.plan.dataTargets;
      dataFeeds = p.plan.dataFeeds;
    }
  }
  for (size_t i = tried; i < meshes.size(); ++i) {
    const Mesh &mesh = meshes[i];
    // More stages than layers: the model cannot take it.
    if (modelLayers && mesh.pp > modelLayers)
      continue;
    double states = statesBound(mesh, 1, offloadable);
    if (mesh.pp == 1)
      states = std::min(states, statesBound(mesh, 3, offloadable));
    (states > o.cluster.memoryBytes() ? ruledOut : rest).push_back(mesh);
  }
  if (rest.empty() && ranked.empty())
    rest = ruledOut;
  // Then, in one queue, a pipeline of each other tp (its layer's time)
  // first, then the rest and the first probe's follow-ups, best first.
  std::stable_sort(rest.begin(), rest.end(), probeFirst);
  std::set<int64_t> probed;
  for (Mesh &mesh : rest) {
    mesh.bounded = true;
    auto it = learned.find({mesh.tp, "none"});
    const bool known = it != learned.end() && it->second.layer > 0;
    mesh.probe = mesh.pp >= 3 && !known && probed.insert(mesh.tp).second;
  }
  std::stable_partition(rest.begin(), rest.end(),
                        [](const Mesh &mesh) { return mesh.probe; });
  rest.insert(rest.end(), retries.begin(), retries.end());
  evaluateQueue(std::move(rest));
  auto better = [](const Prediction &a, const Prediction &b) {
    if (a.fits != b.fits)
      return a.fits;
    return a.fits ? a.stepSeconds < b.stepSeconds
                  : a.memoryBytesPerGpu < b.memoryBytesPerGpu;
  };
  std::stable_sort(ranked.begin(), ranked.end(), better);
  // The three best meshes again: with micro-batches of two samples (fewer,
  // larger products), a pipeline interleaved over two chunks per rank (a
  // smaller bubble), and selective recompute where full recompute made it
  // fit (less to recompute).
  std::vector<Mesh> again;
  int64_t bestMeshes = 0;
  for (const Prediction &p : ranked) {
    // (This machine's models are small: every mesh.)
    if (!p.fits || (bestMeshes == 3 && !local))
      continue;
    ++bestMeshes;
    const Plan &plan = p.plan;
    const int64_t perRank = batch / plan.meshDp;
    Mesh base = makeMesh(plan.meshDp, plan.meshTp, plan.meshPp, perRank);
    base.recompute = plan.recompute;
    base.zero = plan.zeroStage;
    base.offload = plan.zeroOffload == "cpu";
    base.bounded = true;
    if (local && o.precision.empty()) {
      Mesh mixed = base;
      mixed.precision = "bf16-mixed";
      again.push_back(mixed);
    }
    // Two samples per micro-batch; on this machine every power of two
    // (a CPU's products gain more from size).
    for (int64_t samples = 2;
         perRank % samples == 0 && perRank / samples >= plan.meshPp &&
         (samples == 2 || local);
         samples *= 2) {
      Mesh larger = base;
      larger.m = perRank / samples;
      again.push_back(larger);
    }
    if (plan.meshPp > 1 && perRank % plan.meshPp == 0) {
      Mesh interleaved = base;
      interleaved.schedule = "interleaved";
      interleaved.chunks = 2;
      again.push_back(interleaved);
    }
    // Zero bubble (ZB-H1): the weights' gradients deferred into the bubble.
    if (plan.meshPp > 1) {
      Mesh zeroBubble = base;
      zeroBubble.schedule = "zb-h1";
      again.push_back(zeroBubble);
    }
    if (plan.recompute == "full") {
      Mesh selective = base;
      selective.recompute = "selective";
      // It recomputes more than the same plan without recompute.
      for (const Prediction &q : ranked)
        if (q.plan.recompute == "none" && q.plan.meshDp == plan.meshDp &&
            q.plan.meshTp == plan.meshTp && q.plan.meshPp == plan.meshPp &&
            q.plan.microBatches == plan.microBatches &&
            q.plan.zeroStage == plan.zeroStage &&
            q.plan.precision == plan.precision &&
            q.plan.pipelineChunks == plan.pipelineChunks)
          selective.least = std::max(selective.least, q.stepSeconds);
      again.push_back(selective);
    }
  }
  evaluateQueue(again);
  // Interleaving over more chunks: the best interleaved plan among the
  // three best, again with one more chunk per rank (a smaller bubble, more
  // transfers) while that is predicted faster and the stages (pp x
  // chunks) do not outnumber the layers.
  for (;;) {
    std::stable_sort(ranked.begin(), ranked.end(), better);
    const Prediction *best = nullptr;
    for (size_t i = 0; i < std::min<size_t>(3, ranked.size()); ++i)
      if (ranked[i].fits && ranked[i].plan.pipelineSchedule == "interleaved") {
        best = &ranked[i];
        break;
      }
    if (!best)
      break;
    const Plan plan = best->plan;
    const int64_t chunks = plan.pipelineChunks + 1;
    if (modelLayers > 0 && plan.meshPp * chunks > modelLayers)
      break;
    if (llvm::any_of(ranked, [&](const Prediction &q) {
          const Plan &o = q.plan;
          return o.pipelineSchedule == "interleaved" &&
                 o.pipelineChunks == chunks && o.meshDp == plan.meshDp &&
                 o.meshTp == plan.meshTp && o.meshPp == plan.meshPp &&
                 o.microBatches == plan.microBatches &&
                 o.zeroStage == plan.zeroStage &&
                 o.zeroOffload == plan.zeroOffload &&
                 o.recompute == plan.recompute && o.precision == plan.precision;
        }))
      break;
    Mesh more =
        makeMesh(plan.meshDp, plan.meshTp, plan.meshPp, plan.microBatches);
    more.precision = plan.precision;
    more.recompute = plan.recompute;
    more.zero = plan.zeroStage;
    more.offload = plan.zeroOffload == "cpu";
    more.schedule = "interleaved";
    more.chunks = chunks;
    const size_t evaluated = ranked.size();
    evaluateQueue({more});
    if (ranked.size() == evaluated)
      break; // not compiled (an error, or bounded out)
  }
  if (ranked.empty()) {
    error = firstError.empty() ? "--global-batch " + std::to_string(batch) +
                                     ": no split of it over the cluster's " +
                                     std::to_string(gpus) + " GPUs"
                               : firstError;
    return false;
  }
  std::stable_sort(ranked.begin(), ranked.end(), better);
  if (statsOut)
    *statsOut = stats;
  return true;
}

std::string autopar::explainBest(const PlannerOptions &o,
                                 const Prediction &best,
                                 const std::vector<Prediction> &ranked) {
  const Plan &plan = best.plan;
  std::string out;
  auto gb = [](int64_t bytes) {
    return llvm::formatv("{0:f1} GB", double(bytes) / 1e9).str();
  };
  if (!best.fits)
    return "No plan fits: the smallest needs " + gb(best.memoryBytesPerGpu) +
           " per GPU, the GPUs have " + gb(int64_t(o.cluster.memoryBytes())) +
           ".";
  out += llvm::formatv("The best plan is predicted at {0:f3} s per step "
                       "({1:f0} tokens/s, {2:f1}% MFU).",
                       best.stepSeconds, best.tokensPerSecond, 100 * best.mfu)
             .str();
  if (plan.meshTp > 1)
    out += " tp = " + std::to_string(plan.meshTp) +
           (plan.meshTp <= o.cluster.gpusPerNode
                ? " keeps the tensor-parallel collectives, every layer's, "
                  "inside a node."
                : ".");
  if (plan.meshPp > 1)
    out += " pp = " + std::to_string(plan.meshPp) +
           llvm::formatv(" cuts the model into stages (bubble {0:f1}% of "
                         "the step).",
                         100 * best.bubbleFraction)
               .str();
  if (plan.meshDp > 1)
    out += " dp = " + std::to_string(plan.meshDp) +
           " takes the rest of the GPUs" +
           (plan.zeroStage ? ", with ZeRO-" + std::to_string(plan.zeroStage) +
                                 " sharding the optimizer state" +
                                 (plan.zeroStage == 3 ? ", gradients and "
                                                        "parameters"
                                                      : "")
                           : "") +
           ".";
  if (plan.recompute != "none")
    out += " Full recompute: without it no plan of this shape fits in " +
           gb(int64_t(o.cluster.memoryBytes())) + ".";
  if (plan.zeroOffload == "cpu" && best.memoryBytes.contains("host"))
    out += " ZeRO-Offload: the optimizer state (" +
           gb(best.memoryBytes["host"].get<int64_t>()) +
           " per GPU) in host memory, updated on the host: without it this "
           "plan does not fit.";
  // The fastest plan that does not fit, if faster.
  for (const Prediction &p : ranked)
    if (!p.fits && p.stepSeconds < best.stepSeconds) {
      out += " (" + describePlan(p.plan) +
             llvm::formatv(" would take {0:f3} s but needs ", p.stepSeconds)
                 .str() +
             gb(p.memoryBytesPerGpu) + " per GPU.)";
      break;
    }
  return out;
}

int autopar::runPlanCommand(const PlanCommandOptions &c) {
  auto fail = [](const std::string &message) {
    llvm::errs() << "autopar: " << onnx_import::oneLine(message) << "\n";
    return 1;
  };
  PlannerOptions o;
  o.model = c.model;
  o.globalBatch = c.globalBatch;
  o.import = c.import;
  std::string error;
  if (!(c.cluster == "local" ? localCluster(o.cluster, error)
                             : loadCluster(c.cluster, o.cluster, error)))
    return fail(error);
  if (!prepareInputs(o, error))
    return fail(error);
  o.top = c.top;
  o.exhaustive = c.exhaustive;
  o.precision = c.precision;
  if (std::string why = precisionError(o.cluster, o.precision); !why.empty())
    return fail(c.cluster + ": --precision " + o.precision + ": " + why);
  std::vector<Prediction> ranked;
  SearchStats stats;
  const auto start = std::chrono::steady_clock::now();
  if (!c.evaluate.empty()) {
    Plan plan;
    Prediction p;
    if (!loadPlanFile(c.evaluate, plan, error) ||
        !evaluatePlan(o, plan, c.evaluate, p, error))
      return fail(error);
    ranked.push_back(p);
  } else if (!searchPlans(o, ranked, error, &stats)) {
    return fail(error);
  } else if (!ranked.front().fits) {
    return fail(
        llvm::formatv("{0}: no plan fits: the smallest needs {1:f2} "
                      "GB per GPU ({2}), the GPUs have {3:f2} GB",
                      c.cluster, double(ranked.front().memoryBytesPerGpu) / 1e9,
                      describePlan(ranked.front().plan), o.cluster.memoryGB)
            .str());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (ranked.size() > size_t(c.top))
    ranked.resize(c.top);
  const Prediction &best = ranked.front();
  if (!c.output.empty()) {
    std::string text =
        toJson(best.plan).dump(2, ' ', false,
                               nlohmann::json::error_handler_t::replace) +
        "\n";
    if (!writeFileAtomically(c.output, text, error))
      return fail(error);
  }
  if (!c.html.empty() &&
      !writeFileAtomically(
          c.html, planReportHtml(o, ranked, seconds, c.evaluate.empty()),
          error))
    return fail(error);
  if (c.json) {
    nlohmann::json plans = nlohmann::json::array();
    for (const Prediction &p : ranked)
      plans.push_back(toJson(p));
    nlohmann::json out = {{"search_seconds", seconds}, {"plans", plans}};
    if (c.evaluate.empty()) {
      out["plans_skipped"] = stats.bounded + stats.memory;
      out["plans_skipped_memory"] = stats.memory;
    }
    llvm::outs() << out.dump(2, ' ', false,
                             nlohmann::json::error_handler_t::replace)
                 << "\n";
    return 0;
  }
  llvm::outs() << llvm::formatv(
      "{0} on {1} x {2} ({3} nodes of {4}), global batch {5}\n", o.model,
      o.cluster.gpus(),
      o.cluster.gpuName.empty() ? std::string("GPU") : o.cluster.gpuName,
      o.cluster.nodes, o.cluster.gpusPerNode, o.globalBatch);
  llvm::outs() << llvm::formatv(
      "{0,-48} {1,8} {2,12} {3,6} {4,10} {5,5} {6,9} {7,9} {8,9} {9,9}\n",
      "plan", "step s", "tokens/s", "MFU", "memory GB", "fits", "compute",
      "comm", "bubble", "optimizer");
  for (const Prediction &p : ranked)
    llvm::outs() << llvm::formatv(
        "{0,-48} {1,8:f3} {2,12:f0} {3,5:f1}% {4,10:f2} {5,5} {6,9:f3} "
        "{7,9:f3} {8,9:f3} {9,9:f3}\n",
        describePlan(p.plan), p.stepSeconds, p.tokensPerSecond, 100 * p.mfu,
        double(p.memoryBytesPerGpu) / 1e9, p.fits ? "yes" : "no",
        p.computeSeconds, p.exposedCommSeconds, p.bubbleSeconds,
        p.optimizerSeconds);
  if (c.evaluate.empty()) {
    std::vector<std::string> why;
    if (stats.bounded)
      why.push_back(llvm::formatv("{0} plan{1} skipped: their lower bounds "
                                  "could not make the top {2}",
                                  stats.bounded, stats.bounded > 1 ? "s" : "",
                                  std::max<int64_t>(c.top, 3)));
    if (stats.memory)
      why.push_back(
          llvm::formatv("{0} plan{1} not compiled: {2} model states or saved "
                        "activations alone exceed the GPU's memory",
                        stats.memory, stats.memory > 1 ? "s" : "",
                        stats.memory > 1 ? "their" : "its"));
    llvm::outs() << llvm::formatv("searched in {0:f1} s", seconds)
                 << (why.empty() ? std::string()
                                 : " (" + llvm::join(why, "; ") + ")")
                 << ". " << explainBest(o, best, ranked) << "\n";
  }
  return 0;
}
