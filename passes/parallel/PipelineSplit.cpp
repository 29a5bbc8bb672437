//===- PipelineSplit.cpp - the forward cut into balanced pipeline stages --===//
//
// Finds the model's layers where a single activation (the residual stream)
// crosses, and assigns them to mesh.pp x pipeline.chunks contiguous stages:
// at the plan's boundaries, or balanced by predicted cost. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"
#include "passes/analysis/CostAnalysis.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <limits>

#define DEBUG_TYPE "autopar-dist-pipeline-split"

namespace autopar::dist {
#define GEN_PASS_DEF_PIPELINESPLITPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

struct PipelineSplitPass
    : public dist::impl::PipelineSplitPassBase<PipelineSplitPass> {
  using PipelineSplitPassBase::PipelineSplitPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ranks < 1 || chunks < 1) {
      module.emitError() << "ranks and chunks must be >= 1";
      return signalPassFailure();
    }
    int64_t stages = ranks * chunks;
    if (stages == 1)
      return;
    if (!split.empty() && int64_t(split.size()) != stages - 1) {
      module.emitError() << "split: " << stages << " stages are cut at "
                         << stages - 1 << " layer boundaries, got "
                         << split.size();
      return signalPassFailure();
    }
    for (size_t i = 0; i < split.size(); ++i)
      if (split[i] <= (i ? split[i - 1] : 0)) {
        module.emitError() << "split: layer boundaries must increase from 1";
        return signalPassFailure();
      }
    auto func = module.lookupSymbol<func::FuncOp>(function);
    if (!func || func.isExternal()) {
      module.emitError() << "no function @" << function << " to split";
      return signalPassFailure();
    }
    if (failed(cut(func, stages)))
      signalPassFailure();
  }

  LogicalResult cut(func::FuncOp func, int64_t stages) {
    Block &body = func.getBody().front();
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    const int64_t n = ops.size();
    DenseMap<Operation *, int64_t> index;
    for (auto [i, op] : llvm::enumerate(ops))
      index[op] = i;
    // Activations: values computed from a parameter that is not a constant
    // of the model (buffers: masks, rotary tables). What only depends on
    // graph inputs, constants and buffers, each stage computes itself.
    auto isWeight = [&](Value v) {
      auto arg = dyn_cast<BlockArgument>(v);
      if (!arg)
        return false;
      unsigned i = arg.getArgNumber();
      return func.getArgAttr(i, nn::NNDialect::kParamAttr) &&
             !func.getArgAttr(i, nn::NNDialect::kBufferAttr) &&
             !func.getArgAttr(i, nn::NNDialect::kTrilAttr) &&
             !func.getArgAttr(i, nn::NNDialect::kTriuAttr);
    };
    DenseSet<Value> activation;
    for (Operation *op : ops)
      if (llvm::any_of(op->getOperands(), [&](Value v) {
            return isWeight(v) || activation.contains(v);
          }))
        activation.insert(op->result_begin(), op->result_end());
    // Where each activation is last used (n: returned).
    DenseMap<Value, int64_t> lastUse;
    for (Operation *op : ops)
      for (Value r : op->getResults())
        if (activation.contains(r)) {
          int64_t last = index[op];
          for (Operation *user : r.getUsers())
            last = std::max(
                last, user == body.getTerminator() ? n : index.lookup(user));
          lastUse[r] = last;
        }
    // Cuts: after op i, one float activation is live (and more activation
    // ops follow).
    SmallVector<int64_t> cuts;
    SmallVector<Value> live;
    int64_t lastActivationOp = -1;
    for (int64_t i = 0; i < n; ++i)
      if (llvm::any_of(ops[i]->getResults(),
                       [&](Value r) { return activation.contains(r); }))
        lastActivationOp = i;
    for (int64_t i = 0; i + 1 < n && i < lastActivationOp; ++i) {
      for (Value r : ops[i]->getResults())
        if (activation.contains(r))
          live.push_back(r);
      llvm::erase_if(live, [&](Value v) { return lastUse[v] <= i; });
      if (live.size() == 1 &&
          isa<FloatType>(
              cast<RankedTensorType>(live[0].getType()).getElementType()) &&
          !llvm::any_of(ops[i]->getResults(),
                        [&](Value r) { return !activation.contains(r); }))
        cuts.push_back(i);
    }
    // Layers begin at the cuts followed by an attention (before the next
    // cut); a model without attention, at every cut.
    auto isAttention = [](Operation *op) {
      return isa<nn::AttentionOp, nn::SoftmaxOp>(op);
    };
    SmallVector<int64_t> layerStarts;
    for (auto [k, c] : llvm::enumerate(cuts)) {
      int64_t end = k + 1 < cuts.size() ? cuts[k + 1] : n - 1;
      for (int64_t i = c + 1; i <= end; ++i)
        if (isAttention(ops[i])) {
          layerStarts.push_back(c);
          break;
        }
    }
    if (layerStarts.empty())
      layerStarts = cuts;
    const int64_t layers = layerStarts.size();
    auto describe = [&]() {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << "mesh.pp = " << ranks;
      if (chunks > 1)
        os << " x " << chunks << " chunks";
      return s;
    };
    if (layers < stages)
      return func.emitError()
             << describe() << " makes " << stages
             << " pipeline stages, but the model has " << layers
             << (layers == 1 ? " layer" : " layers")
             << " (where one activation crosses) to put in them";

    // Cost of each layer; the ops before the first layer (embeddings)
    // count with the first stage, those after the last layer's end (final
    // norm, head, loss) with the last.
    double unit = flopsPerByte;
    auto cost = [&](int64_t from, int64_t to) { // ops (from, to]
      double c = 0;
      for (int64_t i = from + 1; i <= to; ++i)
        if (llvm::any_of(ops[i]->getResults(),
                         [&](Value r) { return activation.contains(r); }))
          c += rooflineFlops(ops[i], unit);
      return c;
    };
    SmallVector<double> layerCost(layers);
    for (int64_t k = 0; k < layers; ++k)
      layerCost[k] =
          cost(layerStarts[k], k + 1 < layers ? layerStarts[k + 1] : n - 1);
    // The head and loss: after the last cut of the last layer.
    double head = 0;
    if (!cuts.empty() && cuts.back() > layerStarts.back()) {
      head = cost(cuts.back(), n - 1);
      layerCost.back() -= head;
    }
    double embedding = cost(-1, layerStarts.front());

    // Stage s holds layers [first[s], first[s + 1]).
    SmallVector<int64_t> first;
    if (!split.empty()) {
      first.push_back(0);
      for (auto [i, at] : llvm::enumerate(split)) {
        if (at >= layers)
          return func.emitError()
                 << "pipeline.split[" << i << "]: stage " << i + 1
                 << " would begin at layer " << at << ", but the model has "
                 << layers << (layers == 1 ? " layer" : " layers");
        first.push_back(at);
      }
    } else {
      first = balanceStages(layerCost, embedding, head, stages);
    }
    first.push_back(layers);

    // Each op of the activations gets its stage.
    MLIRContext *ctx = func.getContext();
    OpBuilder b(ctx);
    SmallVector<int64_t> stageCost(stages, 0);
    int64_t s = 0;
    for (int64_t i = 0; i < n; ++i) {
      while (s + 1 < stages && i > layerStarts[first[s + 1]])
        ++s;
      if (!llvm::any_of(ops[i]->getResults(),
                        [&](Value r) { return activation.contains(r); }))
        continue;
      ops[i]->setAttr(DistDialect::kStageAttr, b.getI64IntegerAttr(s));
      stageCost[s] += std::llround(rooflineFlops(ops[i], unit));
    }
    SmallVector<int64_t> starts(first.begin(), first.end() - 1);
    // Layers alike (their costs within 1%; the last may cost more: it ends
    // with the final norm and the head): the planner bounds a stage's time
    // by its layers.
    const double most =
        layers > 1 ? *std::max_element(layerCost.begin(), layerCost.end() - 1)
                   : layerCost.front();
    const bool uniform =
        *std::min_element(layerCost.begin(), layerCost.end()) >= 0.99 * most;
    func->setAttr(
        DistDialect::kPipelineAttr,
        b.getDictionaryAttr(
            {b.getNamedAttr("layers", b.getI64IntegerAttr(layers)),
             b.getNamedAttr("stage_first_layer",
                            b.getDenseI64ArrayAttr(starts)),
             b.getNamedAttr("stage_cost", b.getDenseI64ArrayAttr(stageCost)),
             b.getNamedAttr("uniform_layers", b.getBoolAttr(uniform)),
             // What the split balanced (balanceStages' inputs).
             b.getNamedAttr("layer_cost", b.getDenseF64ArrayAttr(layerCost)),
             b.getNamedAttr("embedding_cost", b.getF64FloatAttr(embedding)),
             b.getNamedAttr("head_cost", b.getF64FloatAttr(head))}));
    return success();
  }
};

} // namespace

// A DP over prefix sums.
SmallVector<int64_t> autopar::dist::balanceStages(ArrayRef<double> layerCost,
                                                  double embedding, double head,
                                                  int64_t stages) {
  const int64_t L = layerCost.size();
  SmallVector<double> prefix(L + 1, 0);
  for (int64_t k = 0; k < L; ++k)
    prefix[k + 1] = prefix[k] + layerCost[k];
  auto range = [&](int64_t a, int64_t b, int64_t stage) {
    double c = prefix[b] - prefix[a];
    if (stage == 0)
      c += embedding;
    if (stage == stages - 1)
      c += head;
    return c;
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[s][k]: the costliest of stages 0..s holding layers [0, k).
  std::vector<std::vector<double>> best(stages,
                                        std::vector<double>(L + 1, inf));
  std::vector<std::vector<int64_t>> from(stages,
                                         std::vector<int64_t>(L + 1, -1));
  for (int64_t k = 1; k <= L; ++k)
    best[0][k] = range(0, k, 0);
  for (int64_t s = 1; s < stages; ++s)
    for (int64_t k = s + 1; k <= L; ++k)
      for (int64_t j = s; j < k; ++j) {
        double c = std::max(best[s - 1][j], range(j, k, s));
        if (c < best[s][k]) {
          best[s][k] = c;
          from[s][k] = j;
        }
      }
  SmallVector<int64_t> first(stages, 0);
  for (int64_t s = stages - 1, k = L; s > 0; --s) {
    k = from[s][k];
    first[s] = k;
  }
  return first;
}
