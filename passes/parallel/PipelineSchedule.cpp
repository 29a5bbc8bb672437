//===- PipelineSchedule.cpp - the plan's schedule, simulated at compile time
//-===//
//
// Builds the plan's pipeline schedule over the stages' phase functions,
// simulates every rank's action list with the phases' predicted times, and
// records the prediction (or fails on a schedule that cannot run). See
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"
#include "passes/analysis/CostAnalysis.h"
#include "passes/lowering/Passes.h"
#include "passes/parallel/Schedule.h"

#include "mlir/IR/Builders.h"

#include <map>

#define DEBUG_TYPE "autopar-dist-pipeline-schedule"

namespace autopar::dist {
#define GEN_PASS_DEF_PIPELINESCHEDULEPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

/// Per rank, its actions as (op, stage, micro-batch) triples.
ArrayAttr actionsAttr(Builder &b, const pipeline::Schedule &schedule) {
  SmallVector<Attribute> ranks;
  for (const auto &list : schedule.actions) {
    SmallVector<int32_t> flat;
    for (const pipeline::Action &a : list)
      flat.append({int32_t(a.op), a.stage, a.micro});
    ranks.push_back(b.getDenseI32ArrayAttr(flat));
  }
  return b.getArrayAttr(ranks);
}

/// Per rank, its transfer groups in order, each (before, receives, sends)
/// followed by its receives' and then its sends' (gradient, stage,
/// micro-batch).
ArrayAttr transfersAttr(Builder &b, const pipeline::TransferPlan &plan) {
  SmallVector<Attribute> ranks;
  for (const auto &groups : plan) {
    SmallVector<int32_t> flat;
    for (const pipeline::TransferGroup &g : groups) {
      flat.append({g.before, int32_t(g.recvs.size()), int32_t(g.sends.size())});
      for (const auto *list : {&g.recvs, &g.sends})
        for (const pipeline::Transfer &t : *list)
          flat.append({int32_t(t.gradient), t.stage, t.micro});
    }
    ranks.push_back(b.getDenseI32ArrayAttr(flat));
  }
  return b.getArrayAttr(ranks);
}

struct PipelineSchedulePass
    : public dist::impl::PipelineSchedulePassBase<PipelineSchedulePass> {
  using PipelineSchedulePassBase::PipelineSchedulePassBase;

  /// Predicted seconds of one run of `func`: each op's model FLOPs at
  /// `flopsPerSecond` or the bytes it reads and writes at `bytesPerSecond`,
  /// whichever is longer (a roofline).
  double timeOf(func::FuncOp func) {
    MachineRates rates;
    rates.flopsPerSecond = flopsPerSecond;
    rates.bytesPerSecond = bytesPerSecond;
    return rooflineSeconds(func, rates);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string error;
    if (ranks < 1 || chunks < 1 || microBatches < 1) {
      module.emitError() << "ranks, chunks and micro-batches must be >= 1";
      return signalPassFailure();
    }
    const int64_t stages = ranks * chunks;
    if (stages == 1)
      return;
    // The phases of each stage.
    std::vector<std::map<std::string, func::FuncOp>> phases(stages);
    for (auto func : module.getOps<func::FuncOp>()) {
      auto stage = func->getAttrOfType<IntegerAttr>(DistDialect::kStageAttr);
      auto phase = func->getAttrOfType<StringAttr>(DistDialect::kPhaseAttr);
      if (stage && phase && stage.getInt() < stages)
        phases[stage.getInt()][phase.getValue().str()] = func;
    }
    pipeline::StageTimes times;
    SmallVector<int64_t> stash(stages, 0), sent(stages, 0);
    for (int64_t s = 0; s < stages; ++s) {
      auto &p = phases[s];
      bool split = p.count("input") && p.count("weight");
      if (!p.count("forward") || (!split && !p.count("backward"))) {
        module.emitError() << "pipeline stage " << s
                           << " has no forward and backward phases (run "
                              "autopar-dist-pipeline-phases)";
        return signalPassFailure();
      }
      func::FuncOp f = p["forward"];
      times.forward.push_back(timeOf(f));
      times.backward.push_back(timeOf(split ? p["input"] : p["backward"]));
      times.weight.push_back(split ? timeOf(p["weight"]) : 0.0);
      // What a micro-batch in flight keeps until its backward: the saved
      // values and the activation received.
      for (unsigned r = 0; r < f.getNumResults(); ++r)
        if (f.getResultAttr(r, nn::NNDialect::kSavedAttr))
          stash[s] += tensorBytes(f.getResultTypes()[r]);
        else if (f.getResultAttr(r, nn::NNDialect::kOutputAttr) &&
                 s + 1 < stages)
          sent[s] = tensorBytes(f.getResultTypes()[r]);
      for (unsigned i = 0; i < f.getNumArguments(); ++i)
        if (f.getArgAttr(i, nn::NNDialect::kStageInputAttr))
          stash[s] += tensorBytes(f.getArgumentTypes()[i]);
    }
    // One transfer: the largest activation a stage sends.
    int64_t boundary = 0;
    for (int64_t b : sent)
      boundary = std::max(boundary, b);
    times.transfer = double(boundary) / linkBytesPerSecond;

    pipeline::ScheduleOptions options;
    options.kind = schedule;
    options.ranks = ranks;
    options.chunks = chunks;
    options.microBatches = microBatches;
    pipeline::Schedule actions;
    pipeline::Simulation sim;
    // The transfers too must run without deadlock, under NCCL's ordering
    // (the runtime's groups on every target).
    pipeline::TransferPlan transfers;
    if (!pipeline::buildSchedule(options, actions, error) ||
        !pipeline::simulate(actions, times, sim, error) ||
        !pipeline::groupTransfers(actions, transfers, error)) {
      module.emitError() << error;
      return signalPassFailure();
    }
    // Each rank's activations at its peak: the in-flight micro-batches of
    // its stages times what each keeps.
    SmallVector<int64_t> inFlight(sim.peakInFlight.begin(),
                                  sim.peakInFlight.end());
    SmallVector<int64_t> activationBytes(ranks, 0);
    for (int64_t r = 0; r < ranks; ++r) {
      int64_t largest = 0;
      for (int64_t s = r; s < stages; s += ranks)
        largest = std::max(largest, stash[s]);
      activationBytes[r] = inFlight[r] * largest;
    }
    SmallVector<double> stageTime;
    for (int64_t s = 0; s < stages; ++s)
      stageTime.push_back(times.forward[s] + times.backward[s] +
                          times.weight[s]);
    OpBuilder b(module.getContext());
    module->setAttr(
        DistDialect::kPipelineScheduleAttr,
        b.getDictionaryAttr(
            {b.getNamedAttr("schedule", b.getStringAttr(actions.kind)),
             b.getNamedAttr("ranks", b.getI64IntegerAttr(ranks)),
             b.getNamedAttr("chunks", b.getI64IntegerAttr(chunks)),
             b.getNamedAttr("micro_batches", b.getI64IntegerAttr(microBatches)),
             b.getNamedAttr("bubble_fraction",
                            b.getF64FloatAttr(sim.bubbleFraction)),
             b.getNamedAttr("step_seconds", b.getF64FloatAttr(sim.makespan)),
             b.getNamedAttr("stage_seconds", b.getF64ArrayAttr(stageTime)),
             // Each phase's predicted time, the simulation's input (the
             // report draws the predicted timeline from them).
             b.getNamedAttr("forward_seconds",
                            b.getF64ArrayAttr(times.forward)),
             b.getNamedAttr("backward_seconds",
                            b.getF64ArrayAttr(times.backward)),
             b.getNamedAttr("weight_seconds", b.getF64ArrayAttr(times.weight)),
             b.getNamedAttr("transfer_seconds",
                            b.getF64FloatAttr(times.transfer)),
             b.getNamedAttr("stash_bytes", b.getDenseI64ArrayAttr(stash)),
             b.getNamedAttr("in_flight", b.getDenseI64ArrayAttr(inFlight)),
             b.getNamedAttr("activation_bytes",
                            b.getDenseI64ArrayAttr(activationBytes)),
             // What every rank runs, in order, and the transfers it groups
             // (the program writer's tables).
             b.getNamedAttr("actions", actionsAttr(b, actions)),
             b.getNamedAttr("transfers", transfersAttr(b, transfers))}));
  }
};

} // namespace

bool autopar::dist::readPipelineSchedule(ModuleOp module,
                                         pipeline::Schedule &schedule,
                                         pipeline::TransferPlan &transfers,
                                         std::string &error) {
  auto fail = [&](const std::string &what) {
    error = std::string(DistDialect::kPipelineScheduleAttr) + ": " + what;
    return false;
  };
  auto dict = module->getAttrOfType<DictionaryAttr>(DistDialect::kPipelineScheduleAttr);
  if (!dict)
    return fail("missing (run autopar-dist-pipeline-schedule)");
  auto kind = dict.getAs<StringAttr>("schedule");
  auto ranks = dict.getAs<IntegerAttr>("ranks");
  auto chunks = dict.getAs<IntegerAttr>("chunks");
  auto micro = dict.getAs<IntegerAttr>("micro_batches");
  auto actions = dict.getAs<ArrayAttr>("actions");
  auto groups = dict.getAs<ArrayAttr>("transfers");
  if (!kind || !ranks || !chunks || !micro || !actions || !groups)
    return fail("expected schedule, ranks, chunks, micro_batches, actions "
                "and transfers");
  schedule = pipeline::Schedule();
  schedule.kind = kind.getValue().str();
  schedule.ranks = ranks.getInt();
  schedule.chunks = chunks.getInt();
  schedule.microBatches = micro.getInt();
  if (int64_t(actions.size()) != schedule.ranks ||
      int64_t(groups.size()) != schedule.ranks)
    return fail("expected one list of actions and transfers per rank");
  transfers.assign(schedule.ranks, {});
  for (int64_t r = 0; r < schedule.ranks; ++r) {
    auto list = dyn_cast<DenseI32ArrayAttr>(actions[r]);
    auto flat = dyn_cast<DenseI32ArrayAttr>(groups[r]);
    if (!list || list.size() % 3 || !flat)
      return fail("rank " + std::to_string(r) +
                  ": actions must be (op, stage, micro) triples");
    std::vector<pipeline::Action> &out = schedule.actions.emplace_back();
    for (int64_t i = 0; i < list.size(); i += 3) {
      if (list[i] < 0 || list[i] > int32_t(pipeline::Op::BackwardWeight))
        return fail("rank " + std::to_string(r) + ": unknown action kind " +
                    std::to_string(list[i]));
      out.push_back({pipeline::Op(list[i]), list[i + 1], list[i + 2]});
    }
    ArrayRef<int32_t> g = flat.asArrayRef();
    while (!g.empty()) {
      if (g.size() < 3 || g[1] < 0 || g[2] < 0 ||
          g.size() < 3 + 3 * size_t(g[1] + g[2]))
        return fail("rank " + std::to_string(r) +
                    ": a transfer group is cut short");
      pipeline::TransferGroup &group = transfers[r].emplace_back();
      group.before = g[0];
      for (int32_t k = 0; k < g[1] + g[2]; ++k) {
        const int32_t *t = g.data() + 3 + 3 * k;
        (k < g[1] ? group.recvs : group.sends)
            .push_back({t[0] != 0, t[1], t[2]});
      }
      g = g.drop_front(3 + 3 * (g[1] + g[2]));
    }
  }
  // What the pass recorded passes its own checks, or the IR was edited.
  return pipeline::checkTransfers(schedule, transfers, error);
}
