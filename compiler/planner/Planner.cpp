//===- Planner.cpp - `autopar plan`: evaluating plans ---------------------===//
//
// A plan is evaluated by lowering the model for it (the compile pipeline,
// nothing written) and timing the IR (TimeModel.cpp); pipelineLayerBound
// bounds a pipeline's step. The search over the plans a cluster allows is
// in PlanSearch.cpp.
//
//===----------------------------------------------------------------------===//

#include "compiler/planner/Planner.h"

#include "compiler/driver/Compile.h"
#include "compiler/plan/PlanAttr.h"
#include "compiler/planner/Calibrate.h"
#include "compiler/planner/TimeModel.h"
#include "compiler/program/Report.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"
#include "dialects/parallel/DistOps.h"
#include "frontends/onnx/Validate.h"
#include "passes/analysis/CostAnalysis.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace autopar;

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
    o.sequence = o.import.inputShapes[in.name][1];
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
  const int64_t ranks =
      plan.meshDp * plan.meshTp * plan.meshPp * plan.meshCp;
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
  std::string text = llvm::formatv("dp={0} tp={1} pp={2}", plan.meshDp,
                                   plan.meshTp, plan.meshPp);
  if (plan.meshCp > 1)
    text += " cp=" + std::to_string(plan.meshCp);
  text +=
      llvm::formatv(" m={0} zero={1}", plan.microBatches, plan.zeroStage).str();
  if (plan.zeroShardSize > 0)
    text += " shard=" + std::to_string(plan.zeroShardSize);
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
