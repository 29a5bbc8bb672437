//===- PlanSearch.cpp - `autopar plan`: searching the plan space ----------===//
//
// The search (searchPlans, Planner.h) walks the meshes, ZeRO stages,
// micro-batch counts and recompute modes a cluster allows, evaluating the
// candidates (evaluatePlan) on all cores and skipping what a lower bound
// proves slower. PlanSearch holds what one search learns as it goes.
//
//===----------------------------------------------------------------------===//

#include "compiler/planner/Planner.h"

#include "passes/parallel/Passes.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

using namespace autopar;
using llvm::SmallVector;
using llvm::StringRef;

namespace {

/// One search of the plans for a model on a cluster (searchPlans).
/// Candidates, evaluated on all cores: a mesh with `m` micro-batches, a
/// ZeRO stage, a recompute mode, a schedule; ZeRO-3 only where ZeRO-1 does
/// not fit, full recompute only where a plan does not fit without
/// (followUps). What the plans evaluated so far teach (learn) bounds the
/// others' steps (lowerBound) and memory (statesBound, savedBound).
class PlanSearch {
public:
  /// A search for `o` that puts its predictions in `ranked`.
  PlanSearch(const PlannerOptions &o, std::vector<Prediction> &ranked);

  /// Runs the search: `ranked` holds every plan it evaluated that compiles,
  /// best first, and `statsOut` (if set) what it skipped. False with
  /// `error` (one line) if none compiles.
  bool run(std::string &error, SearchStats *statsOut);

private:
  /// A candidate: its mesh and the plan's other keys, and what evaluating
  /// it gave.
  struct Mesh {
    int64_t dp, tp, pp, m;
    /// Context parallelism: each sequence split over this many ranks.
    int64_t cp = 1;
    std::string schedule = "1f1b", recompute = "none", precision;
    int64_t chunks = 1, zero = 1;
    /// Hybrid sharding: ZeRO over groups of this many dp ranks (0: all).
    int64_t shard = 0;
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
  /// What the first round's plans (one sample per micro-batch, no
  /// recompute, 1F1B, `precision`) teach about the others of their tp: one
  /// micro-batch's compute through the model (without a pipeline) and the
  /// least of a layer's (a pipeline's middle stages, where the layers are
  /// alike), each with the tp collectives it waits for, and what the first
  /// and last stages run beyond their layers. With them, a mesh's step is
  /// at least its busiest rank's work (pipelineLayerBound);
  /// the data-parallel reductions, the optimizer and recompute only add.
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
  /// One evaluateQueue's candidates, shared by its threads: those left
  /// (`queue`), where their follow-ups go (`later`, or `queue` if null),
  /// those evaluated (`done`), and how many a thread is evaluating.
  struct Queue {
    std::vector<Mesh> queue;
    std::vector<Mesh> *later = nullptr;
    std::vector<Mesh> done;
    std::mutex queued;
    std::condition_variable changed;
    size_t running = 0;
  };

  /// Whether a plan is of the first round's kind: one sample per
  /// micro-batch, 1F1B, `precision` (what `learned` holds comes from such
  /// plans and bounds them).
  bool isFirstRoundKind(StringRef planPrecision, int64_t chunks,
                        StringRef schedule, int64_t dp, int64_t m) const;
  /// Takes in what an evaluated plan teaches: the model's layers, its step
  /// if it fits (`fitting`), and for a plan of the first round's kind (no
  /// recompute or full) what `learned` holds for its tp.
  void learn(const Prediction &p);
  /// Keeps the least of `into` and `v` in `into` (`v` where `into` is 0:
  /// nothing known yet).
  static void keepLeast(double &into, double v);
  /// The least step `mesh` can take: its `least`, ZeRO-3's collectives
  /// without a pipeline, and for a plan of the first round's kind its
  /// busiest rank's work as `learned` predicts it.
  double lowerBound(const Mesh &mesh) const;
  /// The `keep`-th best fitting step so far (infinite before).
  double threshold() const;
  /// A mesh of the search's precision and the defaults of Mesh.
  Mesh makeMesh(int64_t dp, int64_t tp, int64_t pp, int64_t m,
                int64_t cp = 1) const;
  /// The context-parallel sizes tried with `tp` x `pp` on `ranks`: 1, and
  /// for a sequence of 8K tokens or more each power of two that leaves
  /// every rank a block of at least kContextBlock tokens (Megatron-Core
  /// and Llama 3 use it from 8K; Llama 3's 128K stage: 8K per rank).
  std::vector<int64_t> contextSizes(int64_t ranks, int64_t tp,
                                    int64_t pp) const;
  /// The bytes of model states a GPU of `mesh` holds at ZeRO `zero`
  /// (`offload`: the optimizer state on the host): mixed precision holds 2
  /// bytes of weight and of gradient per parameter of a rank's share, and
  /// 12 of fp32 master and Adam moments sharded further over dp by ZeRO
  /// (all 16 at ZeRO-3); fp32 4 and 4, and 8 of moments.
  double statesBound(const Mesh &mesh, int64_t zero, bool offload) const;
  /// A 1F1B pipeline without recompute: the least its busiest rank saves
  /// (its micro-batches in flight, min(pp - r, m), times its layers under
  /// the split autopar-dist-pipeline-split makes, times a layer's saved
  /// bytes), or 0 where nothing is known.
  double savedBound(const Mesh &mesh) const;
  /// Evaluates `mesh`'s plan into its predictions (or its `firstError`).
  /// Skipped where its lower bound cannot make the best `keep`, or (without
  /// recompute) where its saved activations cannot fit.
  void evaluateMesh(Mesh &mesh);
  /// A plan that does not fit comes back with what may fit, bounded by its
  /// step (full recompute and a higher ZeRO stage only add to it): ZeRO-3
  /// (without a pipeline) and full recompute; one with full recompute as
  /// ZeRO-Offload.
  std::vector<Mesh> followUps(const Mesh &mesh) const;
  /// Best first, on all cores: the candidate of the least lower bound next
  /// (in their order while nothing bounds them), its follow-ups into the
  /// queue, or into `later`. Once the least bound exceeds the best `keep`
  /// fitting steps, the rest is skipped.
  /// Their predictions join `ranked` in the candidates' order, and the
  /// first error `firstError`.
  void evaluateQueue(std::vector<Mesh> queue,
                     std::vector<Mesh> *later = nullptr);
  /// One thread of evaluateQueue: evaluates the next candidate of `q` (a
  /// probe, else the one of the least lower bound) and queues its
  /// follow-ups, until none is left or being evaluated.
  void work(Queue &q);
  /// The first round's candidates: every mesh of one sample per
  /// micro-batch over every GPU (on this machine also over fewer ranks).
  std::vector<Mesh> candidateMeshes() const;
  /// The order in which meshes are probed: a pipeline of three stages or
  /// more (middle stages: a layer's time), the fewest, over the most tp;
  /// else the most sharded.
  static bool probeFirst(const Mesh &a, const Mesh &b);
  /// The ranking: plans that fit first, by step time; then the others by
  /// memory per GPU.
  static bool better(const Prediction &a, const Prediction &b);
  /// The first round: one mesh alone (it counts the trainable parameters
  /// and finds the data inputs), then every other that may fit.
  void searchMeshes();
  /// The second round: the best meshes again with larger micro-batches,
  /// other schedules, selective recompute (and on this machine bf16-mixed).
  void searchBestAgain();
  /// The last round: the best interleaved plan with more chunks per rank,
  /// while that is faster.
  void searchMoreChunks();
  /// Whether `ranked` holds `plan` interleaved over `chunks` chunks per
  /// rank (its mesh, micro-batches, ZeRO, recompute and precision alike).
  bool hasInterleaved(const Plan &plan, int64_t chunks) const;

  const PlannerOptions &o;
  std::vector<Prediction> &ranked;
  /// The cluster's GPUs and the global batch.
  const int64_t gpus, batch;
  /// A calibrated cluster: this machine's CPU programs.
  const bool local;
  /// The precision: `--precision`, or on GPUs the fastest they compute in
  /// (bf16-mixed; fp16-mixed where there is no bfloat16: fp32 is never
  /// faster, nor smaller). This machine's CPU programs multiply in fp32
  /// whatever the precision: fp32 first, and bf16-mixed for the best meshes
  /// (less memory, more conversions).
  const std::string precision;
  /// How many of the best fitting steps bound the others (`--top`, at
  /// least 3).
  const size_t keep;
  /// Offload is in the space where the cluster file describes the host.
  const bool offloadable;
  /// By tp, cp and recompute (none; full: its plans bound the others of
  /// full).
  std::map<std::tuple<int64_t, int64_t, std::string>, Learned> learned;
  /// The model's layers (0 before a pipeline plan counted them).
  int64_t modelLayers = 0;
  /// The trainable parameters (0 before the first plan counted them).
  int64_t trainable = 0;
  SearchStats stats;
  /// The fitting plans' step seconds, sorted.
  std::vector<double> fitting;
  /// Guards what the threads of evaluateQueue share: `learned`,
  /// `modelLayers`, `stats` and `fitting`.
  mutable std::mutex mutex;
  /// The data inputs, as the first plan's compile found them (the later
  /// ones import the model once, at their micro-batch size).
  std::string dataInputs, dataTargets;
  std::map<std::string, std::string> dataFeeds;
  /// The first error of a plan that did not compile.
  std::string firstError;
};

} // namespace

PlanSearch::PlanSearch(const PlannerOptions &o, std::vector<Prediction> &ranked)
    : o(o), ranked(ranked), gpus(o.cluster.gpus()), batch(o.globalBatch),
      local(o.cluster.calibration.has_value()),
      precision(!o.precision.empty() ? o.precision
                : local              ? "fp32"
                : o.cluster.bf16     ? "bf16-mixed"
                                     : "fp16-mixed"),
      keep(size_t(std::max<int64_t>(o.top, 3))),
      offloadable(!local && o.cluster.hasHost()) {}

bool PlanSearch::isFirstRoundKind(StringRef planPrecision, int64_t chunks,
                                  StringRef schedule, int64_t dp,
                                  int64_t m) const {
  return planPrecision == precision && chunks == 1 && schedule == "1f1b" &&
         batch == dp * m;
}

void PlanSearch::learn(const Prediction &p) {
  std::lock_guard<std::mutex> lock(mutex);
  const Plan &plan = p.plan;
  if (p.layers)
    modelLayers = p.layers;
  if (p.fits)
    fitting.insert(
        std::upper_bound(fitting.begin(), fitting.end(), p.stepSeconds),
        p.stepSeconds);
  if ((plan.recompute != "none" && plan.recompute != "full") ||
      !isFirstRoundKind(plan.precision, plan.pipelineChunks,
                        plan.pipelineSchedule, plan.meshDp, plan.microBatches))
    return;
  Learned &l = learned[{plan.meshTp, plan.meshCp, plan.recompute}];
  if (plan.meshPp == 1)
    keepLeast(l.whole, p.microBatchSeconds);
  const size_t stages = p.stageLayers.size();
  for (size_t st = 1; st + 1 < stages; ++st) {
    keepLeast(l.layer, p.stageSeconds[st] / double(p.stageLayers[st]));
    keepLeast(l.saved,
              double(p.stageSavedBytes[st]) / double(p.stageLayers[st]));
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
}

void PlanSearch::keepLeast(double &into, double v) {
  into = into > 0 ? std::min(into, v) : v;
}

double PlanSearch::lowerBound(const Mesh &mesh) const {
  std::lock_guard<std::mutex> lock(mutex);
  double bound = mesh.least;
  // ZeRO-3 without a pipeline: each micro-batch gathers every parameter
  // of the rank's share (at least once, at least 2 bytes each) and the
  // step reduce-scatters its fp32 gradients once, all over dp and on
  // the step's one communication stream (predictStep: a micro-batch
  // waits for its collectives; the runtime's run after the step).
  if (mesh.pp == 1 && mesh.zero == 3 && mesh.dp > 1 && mesh.cp == 1 && !local &&
      trainable > 0 && mesh.shard == 0) {
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
  if (!isFirstRoundKind(mesh.precision, mesh.chunks, mesh.schedule, mesh.dp,
                        mesh.m))
    return bound;
  for (const char *recompute : {"none", "full"}) {
    auto it = learned.find({mesh.tp, mesh.cp, recompute});
    if (it == learned.end() ||
        (recompute == StringRef("full") && mesh.recompute != "full"))
      continue;
    const Learned &l = it->second;
    if (mesh.pp == 1) {
      bound =
          std::max(bound, double(mesh.m) *
                              std::max(l.whole, l.layer * double(modelLayers)));
    } else if (l.layer > 0) {
      bound = std::max(
          bound, l.layer * pipelineLayerBound(modelLayers, mesh.pp, mesh.m,
                                              l.extra(l.firsts) / l.layer,
                                              l.extra(l.lasts) / l.layer));
    }
  }
  return bound;
}

double PlanSearch::threshold() const {
  std::lock_guard<std::mutex> lock(mutex);
  return fitting.size() < keep ? std::numeric_limits<double>::infinity()
                               : fitting[keep - 1];
}

PlanSearch::Mesh PlanSearch::makeMesh(int64_t dp, int64_t tp, int64_t pp,
                                      int64_t m, int64_t cp) const {
  Mesh mesh;
  mesh.dp = dp, mesh.tp = tp, mesh.pp = pp, mesh.m = m, mesh.cp = cp;
  mesh.precision = precision;
  return mesh;
}

double PlanSearch::statesBound(const Mesh &mesh, int64_t zero,
                               bool offload) const {
  const double share = double(trainable) / double(mesh.tp * mesh.pp);
  const bool fp32 = mesh.precision == "fp32";
  const double replicated = fp32 ? 8.0 : 4.0;
  const double onGpu = offload ? 0.0 : fp32 ? 8.0 : 12.0;
  const double shards = double(mesh.shard ? mesh.shard : mesh.dp);
  return mesh.dp > 1 && zero == 3 ? share * (replicated + onGpu) / shards
                                  : share * (replicated + onGpu / shards);
}

double PlanSearch::savedBound(const Mesh &mesh) const {
  std::lock_guard<std::mutex> lock(mutex);
  if (mesh.recompute != "none" || mesh.pp < 2 ||
      !isFirstRoundKind(mesh.precision, mesh.chunks, mesh.schedule, mesh.dp,
                        mesh.m) ||
      mesh.pp > modelLayers)
    return 0.0;
  auto it = learned.find({mesh.tp, mesh.cp, "none"});
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
}

void PlanSearch::evaluateMesh(Mesh &mesh) {
  if (mesh.bounded && !o.exhaustive &&
      std::max(mesh.least, lowerBound(mesh)) > threshold()) {
    std::lock_guard<std::mutex> lock(mutex);
    ++stats.bounded;
    return;
  }
  if (!o.exhaustive &&
      (savedBound(mesh) > o.cluster.memoryBytes() ||
       statesBound(mesh, mesh.zero, mesh.offload) > o.cluster.memoryBytes())) {
    std::lock_guard<std::mutex> lock(mutex);
    ++stats.memory;
    mesh.tooLarge = true;
    return;
  }
  Plan plan;
  plan.meshDp = mesh.dp;
  plan.meshTp = mesh.tp;
  plan.meshPp = mesh.pp;
  plan.meshCp = mesh.cp;
  plan.microBatches = mesh.m;
  plan.zeroStage = mesh.dp > 1 || mesh.offload ? mesh.zero : 0;
  plan.zeroOffload = mesh.offload ? "cpu" : "none";
  plan.zeroShardSize = plan.zeroStage > 0 ? mesh.shard : 0;
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
}

std::vector<PlanSearch::Mesh> PlanSearch::followUps(const Mesh &mesh) const {
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
}

void PlanSearch::evaluateQueue(std::vector<Mesh> queue,
                               std::vector<Mesh> *later) {
  for (size_t i = 0; i < queue.size(); ++i)
    queue[i].order = 4 * i;
  Queue q;
  q.queue = std::move(queue);
  q.later = later;
  const size_t threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t)
    pool.emplace_back(&PlanSearch::work, this, std::ref(q));
  work(q);
  for (std::thread &t : pool)
    t.join();
  // In the candidates' order, whatever the threads' order.
  std::stable_sort(
      q.done.begin(), q.done.end(),
      [](const Mesh &a, const Mesh &b) { return a.order < b.order; });
  for (Mesh &mesh : q.done) {
    ranked.insert(ranked.end(), mesh.predictions.begin(),
                  mesh.predictions.end());
    if (firstError.empty())
      firstError = mesh.firstError;
  }
}

void PlanSearch::work(Queue &q) {
  std::unique_lock<std::mutex> lock(q.queued);
  for (;;) {
    if (q.queue.empty()) {
      if (q.running == 0)
        break;
      q.changed.wait(lock);
      continue;
    }
    size_t pick = 0;
    double least = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < q.queue.size(); ++i)
      if (q.queue[i].probe) {
        pick = i;
        break;
      } else if (double b = lowerBound(q.queue[i]); b < least) {
        least = b, pick = i;
      }
    Mesh mesh = std::move(q.queue[pick]);
    q.queue.erase(q.queue.begin() + pick);
    ++q.running;
    lock.unlock();
    evaluateMesh(mesh);
    std::vector<Mesh> next = followUps(mesh);
    lock.lock();
    --q.running;
    for (Mesh &m : next)
      (q.later ? *q.later : q.queue).push_back(std::move(m));
    q.done.push_back(std::move(mesh));
    q.changed.notify_all();
  }
  q.changed.notify_all();
}

std::vector<PlanSearch::Mesh> PlanSearch::candidateMeshes() const {
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
        for (int64_t cp : contextSizes(ranks, tp, pp)) {
          const int64_t dp = ranks / (tp * pp * cp);
          // Fewer micro-batches than stages leaves the pipeline mostly
          // idle.
          if (batch % dp || batch / dp < pp)
            continue;
          meshes.push_back(makeMesh(dp, tp, pp, batch / dp, cp));
        }
      }
    }
  return meshes;
}

std::vector<int64_t> PlanSearch::contextSizes(int64_t ranks, int64_t tp,
                                              int64_t pp) const {
  constexpr int64_t kContextBlock = 4096;
  std::vector<int64_t> sizes = {1};
  if (o.sequence < 2 * kContextBlock)
    return sizes;
  for (int64_t cp = 2; tp * pp * cp <= ranks && o.sequence % cp == 0 &&
                       o.sequence / cp >= kContextBlock;
       cp *= 2)
    if (ranks % (tp * pp * cp) == 0)
      sizes.push_back(cp);
  return sizes;
}

bool PlanSearch::probeFirst(const Mesh &a, const Mesh &b) {
  if ((a.pp >= 3) != (b.pp >= 3))
    return a.pp >= 3;
  if (a.pp >= 3)
    return a.pp != b.pp ? a.pp < b.pp : a.tp > b.tp;
  return a.tp * a.pp > b.tp * b.pp;
}

bool PlanSearch::better(const Prediction &a, const Prediction &b) {
  if (a.fits != b.fits)
    return a.fits;
  return a.fits ? a.stepSeconds < b.stepSeconds
                : a.memoryBytesPerGpu < b.memoryBytesPerGpu;
}

void PlanSearch::searchMeshes() {
  std::vector<Mesh> meshes = candidateMeshes();
  // One mesh first, alone: its report counts the trainable parameters,
  // whose model states alone (bf16-mixed: 2 bytes of weight and of
  // gradient per parameter of a rank's share, 12 of fp32 master and Adam
  // moments sharded further over dp by ZeRO; all 16 over dp at ZeRO-3)
  // rule out the meshes that cannot fit whatever they recompute, and its
  // split the layers. A pipeline of three stages or more (middle stages:
  // a layer's time), the fewest, over the most tp; else the most sharded.
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
  std::set<std::pair<int64_t, int64_t>> probed;
  for (Mesh &mesh : rest) {
    mesh.bounded = true;
    auto it = learned.find({mesh.tp, mesh.cp, "none"});
    const bool known = it != learned.end() && it->second.layer > 0;
    mesh.probe =
        mesh.pp >= 3 && !known && probed.insert({mesh.tp, mesh.cp}).second;
  }
  std::stable_partition(rest.begin(), rest.end(),
                        [](const Mesh &mesh) { return mesh.probe; });
  rest.insert(rest.end(), retries.begin(), retries.end());
  evaluateQueue(std::move(rest));
}

void PlanSearch::searchBestAgain() {
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
    Mesh base =
        makeMesh(plan.meshDp, plan.meshTp, plan.meshPp, perRank, plan.meshCp);
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
    // Hybrid sharding where the data-parallel group spans nodes: ZeRO
    // within each node (its gathers and reduce-scatters on the node's
    // links), each shard's all-reduce across the nodes.
    const int64_t inner = plan.meshTp * plan.meshCp * plan.meshPp;
    const int64_t perNode = o.cluster.gpusPerNode / inner;
    if (plan.zeroStage > 0 && plan.zeroShardSize == 0 && perNode >= 2 &&
        o.cluster.gpusPerNode % inner == 0 && perNode < plan.meshDp &&
        plan.meshDp % perNode == 0) {
      Mesh hybrid = base;
      hybrid.m = plan.microBatches;
      hybrid.precision = plan.precision;
      if (plan.meshPp > 1) {
        hybrid.schedule = plan.pipelineSchedule;
        hybrid.chunks = plan.pipelineChunks;
      }
      hybrid.shard = perNode;
      again.push_back(hybrid);
    }
    if (plan.recompute == "full") {
      Mesh selective = base;
      selective.recompute = "selective";
      // It recomputes more than the same plan without recompute.
      for (const Prediction &q : ranked)
        if (q.plan.recompute == "none" && q.plan.meshDp == plan.meshDp &&
            q.plan.meshTp == plan.meshTp && q.plan.meshPp == plan.meshPp &&
            q.plan.meshCp == plan.meshCp &&
            q.plan.microBatches == plan.microBatches &&
            q.plan.zeroStage == plan.zeroStage &&
            q.plan.precision == plan.precision &&
            q.plan.pipelineChunks == plan.pipelineChunks)
          selective.least = std::max(selective.least, q.stepSeconds);
      again.push_back(selective);
    }
  }
  evaluateQueue(again);
}

void PlanSearch::searchMoreChunks() {
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
    if (hasInterleaved(plan, chunks))
      break;
    Mesh more = makeMesh(plan.meshDp, plan.meshTp, plan.meshPp,
                         plan.microBatches, plan.meshCp);
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
}

bool PlanSearch::hasInterleaved(const Plan &plan, int64_t chunks) const {
  for (const Prediction &q : ranked) {
    const Plan &other = q.plan;
    if (other.pipelineSchedule == "interleaved" &&
        other.pipelineChunks == chunks && other.meshDp == plan.meshDp &&
        other.meshTp == plan.meshTp && other.meshPp == plan.meshPp &&
        other.meshCp == plan.meshCp &&
        other.microBatches == plan.microBatches &&
        other.zeroStage == plan.zeroStage &&
        other.zeroOffload == plan.zeroOffload &&
        other.recompute == plan.recompute && other.precision == plan.precision)
      return true;
  }
  return false;
}

bool PlanSearch::run(std::string &error, SearchStats *statsOut) {
  ranked.clear();
  searchMeshes();
  std::stable_sort(ranked.begin(), ranked.end(), better);
  searchBestAgain();
  searchMoreChunks();
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

bool autopar::searchPlans(const PlannerOptions &o,
                          std::vector<Prediction> &ranked, std::string &error,
                          SearchStats *statsOut) {
  return PlanSearch(o, ranked).run(error, statsOut);
}
