//===- Planner.h - `autopar plan`: predicted step time of a plan -*- C++
//-*-===//
//
// The planner predicts how a plan trains a model on a cluster (Cluster.h)
// from the IR `autopar compile` lowers for it: the same pipeline, run
// without writing anything (lowerModel), and the same cost analysis
// (passes/analysis/CostAnalysis.h: each op's roofline, the collectives'
// bytes), report (memory per GPU) and pipeline schedule simulator
// (passes/parallel/Schedule.h) as report.json. docs/planner.md gives the
// time model.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PLANNER_PLANNER_H
#define AUTOPAR_COMPILER_PLANNER_PLANNER_H

#include "compiler/plan/Plan.h"
#include "compiler/planner/Cluster.h"
#include "frontends/onnx/OnnxImporter.h"
#include "passes/parallel/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringRef.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace autopar {

struct PlannerOptions {
  std::string model;
  Cluster cluster;
  /// Samples per step over all data-parallel ranks.
  int64_t globalBatch = 0;
  /// --input-shape for inputs other than the data (set by prepareInputs for
  /// the token ids and targets).
  onnx_import::ImportOptions import;
  /// How many of the best plans the search ranks exactly (`--top`; the
  /// search's second round takes the best three meshes either way).
  int64_t top = 5;
  /// Evaluate every plan of the space (no lower-bound skipping).
  bool exhaustive = false;
  /// The model's sequence length (its token-id input's dim 1; set by
  /// prepareInputs): the search tries context parallelism where it is long.
  int64_t sequence = 0;
  /// The plans' precision (`--precision`); empty: the search picks
  /// (bf16-mixed on GPUs that compute in bfloat16, else fp16-mixed; this
  /// machine: fp32, and bf16-mixed for the best meshes).
  std::string precision;
};

/// Fixes the model's token-id and target inputs to [globalBatch, sequence]
/// (the sequence length is the model's); false with `error` (one line) if
/// the model has no such inputs or a dynamic sequence length.
bool prepareInputs(PlannerOptions &options, std::string &error);

/// Why plans of `precision` cannot be timed on `cluster` (fp32 without
/// gpu.fp32_tflops, bf16-mixed on a GPU without bfloat16), or "".
std::string precisionError(const Cluster &cluster,
                           const std::string &precision);

/// A plan's predicted step on the cluster.
struct Prediction {
  /// The plan as compiled: every key resolved (the data inputs named).
  Plan plan;
  double stepSeconds = 0, tokensPerSecond = 0, mfu = 0, bubbleFraction = 0;
  /// The most any GPU holds (report.json's bytes.peak).
  int64_t memoryBytesPerGpu = 0;
  bool fits = false;
  /// report.json's parallel.comm_bytes_per_step (rank 0's).
  nlohmann::json commBytesPerStep;
  /// The step: compute, the communication nothing overlaps, the pipeline's
  /// idle time and the optimizer's update (their sum is stepSeconds).
  double computeSeconds = 0, exposedCommSeconds = 0, bubbleSeconds = 0,
         optimizerSeconds = 0;
  /// The model FLOPs of one step (report.json's flops_per_step).
  double flopsPerStep = 0;
  /// report.json's trainable_parameters.
  int64_t trainableParameters = 0;
  /// report.json's bytes of the rank that holds the most (params, grads,
  /// optimizer_state, activations, inputs, peak).
  nlohmann::json memoryBytes;
  /// A pipeline: the simulated step's actions on its `pipelineRanks`
  /// ranks (the phases' predicted times; empty without a pipeline).
  std::vector<pipeline::Event> timeline;
  int64_t pipelineRanks = 0;
  /// The model's layers (where one activation crosses; 0 without a
  /// pipeline).
  int64_t layers = 0;
  /// What bounds other plans' steps (the search): without a pipeline, one
  /// micro-batch's compute and the communication it waits for; with one,
  /// each stage's (forward and backward) and its layers (empty where the
  /// model's layers differ in cost).
  double microBatchSeconds = 0;
  std::vector<double> stageSeconds;
  std::vector<int64_t> stageLayers;
  /// A pipeline: what each stage keeps per micro-batch in flight (its
  /// forward's saved values, without the activation it receives), and what
  /// its split balanced (dist.pipeline's layer_cost, embedding_cost,
  /// head_cost): the search predicts other meshes' splits and activations.
  std::vector<int64_t> stageSavedBytes;
  std::vector<double> layerCost;
  double embeddingCost = 0, headCost = 0;
};

/// "dp=32 tp=1 pp=1 m=16 zero=1 bf16-mixed recompute=full".
std::string describePlan(const Plan &plan);

/// `--json`'s entry for a prediction.
nlohmann::json toJson(const Prediction &prediction);

/// Predicts `plan` (named `planName` in errors) for `options` (prepared by
/// prepareInputs). False with `error` (one line) if the plan does not
/// compile for the model or asks for more GPUs than the cluster has.
bool evaluatePlan(const PlannerOptions &options, const Plan &plan,
                  const std::string &planName, Prediction &prediction,
                  std::string &error);

/// The link a group of mesh axes (their names joined by ',') sends over:
/// within a node when the ranks it spans fit in one (ranks are row-major
/// over the mesh axes `axisNames` of sizes `axisSizes`), else across
/// nodes. Bytes per second per GPU and direction for a collective and for
/// a point-to-point send, and the latency of one ring step. Across nodes a
/// collective's rings use the NICs of all the group's GPUs in a node (NCCL
/// runs a ring per NIC, each carrying its share): k of them in a node give
/// it k x inter_node_gbps, at most the node's own links; a send goes
/// through one. `stepLatency` is a ring step's over this link: NVLink's
/// within a node, the network's across nodes, where only the steps that
/// cross nodes pay it (`nodes`: the nodes the group spans, 1 within one).
struct Link {
  double bytesPerSecond = 0;
  double stepLatency = 0;
  double sendBytesPerSecond = 0;
  int64_t nodes = 1;
};
Link linkOf(const std::vector<std::string> &axisNames,
            const std::vector<int64_t> &axisSizes, llvm::StringRef group,
            const Cluster &cluster);

/// `ops` collectives of `kind` (all_reduce, reduce_scatter, all_gather,
/// all_to_all, send) over a group of `groupSize` ranks that send
/// `bytesSent` bytes per rank in all, on NCCL's ring model: per collective
/// a base latency and one per ring step (2 (g - 1) for an all-reduce, g - 1
/// for a reduce-scatter, all-gather or all-to-all (its g - 1 peers'
/// blocks), 1 for a send), plus the bytes at the
/// link's bandwidth. A ring over N nodes crosses the network 2 N times in
/// an all-reduce and N times in the others (NCCL's tuning model,
/// nInterSteps): those steps take the network's latency, the rest
/// NVLink's.
double collectiveSeconds(llvm::StringRef kind, int64_t groupSize,
                         double bytesSent, int64_t ops, const Link &link);

/// One run of a function of the final IR on one of `cluster`'s GPUs: its
/// ops one after another on the roofline (rooflineSeconds at the GPU's
/// rates), and its collectives on a communication stream of their own, in
/// issue order, each started when the ops before it have run; the first op
/// that reads a collective's result (or the return) waits for it, as the
/// emitted program does. `exposedCommSeconds` is the time spent waiting.
struct FunctionTime {
  double computeSeconds = 0, exposedCommSeconds = 0;
};
FunctionTime timeFunction(mlir::func::FuncOp func, const Cluster &cluster);

/// The search's candidates, best first: every plan it evaluated that
/// compiles (those that fit the GPUs' memory first, then by step time).
/// The space: tp over the divisors of a node's GPUs, pp over the divisors
/// of the rest, dp for the rest (dividing the global batch); micro-batches of
/// one sample; ZeRO-1, and ZeRO-3 where pp = 1; full recompute when a plan does
/// not fit without, and ZeRO-Offload when that does not fit either (where the
/// cluster describes its host); bf16-mixed, 1F1B, sequence parallelism with
/// tp. The
/// three best meshes again with micro-batches of two samples, interleaved
/// over two chunks and ZB-H1 (pp > 1), and selective recompute (where full
/// made them fit). Meshes whose model states alone exceed a GPU are not
/// compiled. A candidate the model cannot take (more stages than layers, a tp
/// that divides no heads) is left out. Unless `options.exhaustive`, a plan
/// whose lower bound (its busiest rank's layers, pipelineLayerBound; its mesh's
/// plan of less work) exceeds the best `options.top` (at least 3) fitting
/// steps found so far is skipped (`stats->bounded` counts them): the best
/// plans are the same. A pipeline plan without recompute whose saved
/// activations alone exceed a GPU's memory (a layer's, as a plan of its tp
/// saved them, times each rank's layers under balanceStages' split and its
/// 1F1B micro-batches in flight) is not compiled either: its plan with full
/// recompute is (`stats->memory`). False with `error` (one line) if none
/// compiles.
struct SearchStats {
  int64_t bounded = 0, memory = 0;
};
bool searchPlans(const PlannerOptions &options, std::vector<Prediction> &ranked,
                 std::string &error, SearchStats *stats = nullptr);

/// A 1F1B pipeline's least makespan in units of one layer's forward and
/// backward: `layers` alike layers over `stages` stages (each at least one),
/// `microBatches` micro-batches, the first stage running `firstExtra` more
/// (the embeddings) and the last `lastExtra` (the head and loss), in the
/// same units. Stage s cannot start before the first micro-batch's forward
/// through stages 0..s-1, and after its own m forwards and backwards the
/// last backward still runs through them: the step is at least max over s
/// of (m w_s + the work of the stages before s), minimised over the splits.
/// 0 if there are more stages than layers.
double pipelineLayerBound(int64_t layers, int64_t stages, int64_t microBatches,
                          double firstExtra = 0, double lastExtra = 0);

/// Why `best` wins, in a few sentences (tp inside a node, pp across nodes,
/// dp for the rest; what memory asked for).
std::string explainBest(const PlannerOptions &options, const Prediction &best,
                        const std::vector<Prediction> &ranked);

/// The page `--html` writes: the cluster, the ranked plans with their time
/// and memory breakdowns as bar charts (SVG), and the best plan's pipeline
/// timeline (one row per pipeline rank); no script, no external file.
std::string planReportHtml(const PlannerOptions &options,
                           const std::vector<Prediction> &ranked,
                           double searchSeconds, bool searched);

struct PlanCommandOptions {
  std::string model, cluster, evaluate, output, html, precision;
  int64_t globalBatch = 0;
  int64_t top = 5;
  bool json = false, exhaustive = false;
  onnx_import::ImportOptions import;
};

/// `autopar plan`: prints the prediction of the plan `evaluate`, or the
/// search's best `top` plans and why the best wins, as a table (or
/// `--json`), and writes the (best) plan to `output` if set. Returns the
/// exit code (1 with one line on stderr on an error).
int runPlanCommand(const PlanCommandOptions &options);

} // namespace autopar

#endif // AUTOPAR_COMPILER_PLANNER_PLANNER_H
