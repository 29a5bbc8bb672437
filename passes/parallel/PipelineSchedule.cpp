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

#include "compiler/PipelineSchedule.h"
#include "compiler/PlanAttr.h"
#include "dialects/nn/NNOps.h"
#include "passes/analysis/CostAnalysis.h"
#include "passes/lowering/Passes.h"

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
    Plan plan;
    std::string error;
    if (!readPlanAttr(module, plan, error)) {
      module.emitError() << error;
      return signalPassFailure();
    }
    const int64_t stages = plan.pipelineStages();
    if (stages == 1)
      return;
    // The phases of each stage.
    std::vector<std::map<std::string, func::FuncOp>> phases(stages);
    for (auto func : module.getOps<func::FuncOp>()) {
      auto stage = func->getAttrOfType<IntegerAttr>(kStageAttr);
      auto phase = func->getAttrOfType<StringAttr>(kPhaseAttr);
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

    pipeline::ScheduleOptions options = pipelineScheduleOptions(plan);
    pipeline::Schedule schedule;
    pipeline::Simulation sim;
    // The transfers too must run without deadlock, under NCCL's ordering
    // (the runtime's groups on every target).
    pipeline::TransferPlan transfers;
    if (!pipeline::buildSchedule(options, schedule, error) ||
        !pipeline::simulate(schedule, times, sim, error) ||
        !pipeline::groupTransfers(schedule, transfers, error)) {
      module.emitError() << error;
      return signalPassFailure();
    }
    // Each rank's activations at its peak: the in-flight micro-batches of
    // its stages times what each keeps.
    SmallVector<int64_t> inFlight(sim.peakInFlight.begin(),
                                  sim.peakInFlight.end());
    SmallVector<int64_t> activationBytes(plan.meshPp, 0);
    for (int64_t r = 0; r < plan.meshPp; ++r) {
      int64_t largest = 0;
      for (int64_t s = r; s < stages; s += plan.meshPp)
        largest = std::max(largest, stash[s]);
      activationBytes[r] = inFlight[r] * largest;
    }
    SmallVector<double> stageTime;
    for (int64_t s = 0; s < stages; ++s)
      stageTime.push_back(times.forward[s] + times.backward[s] +
                          times.weight[s]);
    OpBuilder b(module.getContext());
    module->setAttr(
        kPipelineScheduleAttr,
        b.getDictionaryAttr(
            {b.getNamedAttr("schedule", b.getStringAttr(schedule.kind)),
             b.getNamedAttr("micro_batches",
                            b.getI64IntegerAttr(plan.microBatches)),
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
                            b.getDenseI64ArrayAttr(activationBytes))}));
  }
};

} // namespace
