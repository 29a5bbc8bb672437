//===- PlanCommand.cpp - the `autopar plan` command -----------------------===//
//
// Reads the cluster, prepares the model's inputs, evaluates the plan given
// (--evaluate) or searches, prints the ranking and why the best plan won,
// and writes the plan, JSON and HTML outputs.
//
//===----------------------------------------------------------------------===//

#include "compiler/planner/Planner.h"

#include "compiler/driver/Driver.h"
#include "compiler/planner/Calibrate.h"
#include "dialects/nn/NNDialect.h"
#include "frontends/onnx/Validate.h"
#include "passes/analysis/CostAnalysis.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <thread>

using namespace mlir;

using namespace mlir;
using namespace autopar;

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
  if (plan.meshCp > 1)
    out += llvm::formatv(" cp = {0} splits each sequence: {1} tokens per "
                         "rank, the keys and values all-gathered.",
                         plan.meshCp, o.sequence / plan.meshCp)
               .str();
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
