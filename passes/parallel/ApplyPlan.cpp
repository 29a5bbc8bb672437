//===- ApplyPlan.cpp - the plan -> mesh and parameter marks --------------===//
//
// Writes the plan's mesh (the pass's options) as a dist.mesh and its
// per-parameter decisions (frozen, frozen rows, no weight decay) as
// argument attributes, with each parameter's logical type, and marks the
// gathers of embedding tables with a padding row (nn.padding_idx).
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"
#include "passes/parallel/Globs.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "autopar-apply-plan"

namespace autopar::dist {
#define GEN_PASS_DEF_APPLYPLANPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

struct ApplyPlanPass : public dist::impl::ApplyPlanPassBase<ApplyPlanPass> {
  using ApplyPlanPassBase::ApplyPlanPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    for (auto [key, size] : {std::pair<const char *, int64_t>{"dp", dp},
                             {"tp", tp},
                             {"pp", pp},
                             {"cp", cp}})
      if (size < 1)
        return fail(std::string("mesh.") + key +
                    ": expected an integer >= 1, got " + std::to_string(size));
    for (std::string why :
         {globsProblem("frozen", {frozen.begin(), frozen.end()}),
          globsProblem("optimizer.no_decay", {noDecay.begin(), noDecay.end()})})
      if (!why.empty())
        return fail(why);
    std::vector<std::pair<std::string, int64_t>> padding;
    for (const std::string &entry : paddingIdx) {
      size_t eq = entry.rfind('=');
      int64_t row = -1;
      if (eq == std::string::npos || eq == 0 ||
          StringRef(entry).substr(eq + 1).getAsInteger(10, row) || row < 0)
        return fail("padding-idx: expected GLOB=ROW (a row >= 0), got \"" +
                    entry + "\"");
      padding.emplace_back(entry.substr(0, eq), row);
    }
    if (findMesh(module))
      return fail("the module already has a dist.mesh");

    if (shardSize < 0 || (shardSize > 0 && dp % shardSize != 0))
      return fail("zero.shard_size: " + std::to_string(shardSize) +
                  " does not divide mesh.dp = " + std::to_string(dp));

    OpBuilder b(ctx);
    b.setInsertionPointToStart(module.getBody());
    SmallVector<StringRef> axes(kMeshAxes.begin(), kMeshAxes.end());
    std::vector<int64_t> sizes = meshAxisSizes(dp, tp, pp);
    if (cp > 1) {
      axes.insert(axes.end() - 1, kContextAxis);
      sizes.insert(sizes.end() - 1, cp);
    }
    // Hybrid sharding: the replicas outermost, so a shard group is
    // dp-neighbouring ranks (one node's, with tp and pp inside it).
    if (shardSize > 0 && shardSize < dp) {
      axes.insert(axes.begin(), kReplicaAxis);
      sizes.insert(sizes.begin(), dp / shardSize);
      sizes[1] = shardSize;
    }
    MeshOp::create(b, module.getLoc(), kMeshName, b.getStrArrayAttr(axes),
                   b.getDenseI64ArrayAttr(sizes));

    // An entry of `frozen` that matches no initializer as a glob but ends
    // in a row list ("wte.weight[0]") freezes those rows.
    std::vector<bool> frozenUsed(frozen.size());
    std::vector<std::optional<FrozenRows>> rowEntries(frozen.size());
    for (auto [k, pattern] : llvm::enumerate(frozen)) {
      bool matches = false;
      for (auto func : module.getOps<func::FuncOp>())
        for (unsigned i = 0; i < func.getNumArguments() && !matches; ++i)
          if (auto name = func.getArgAttrOfType<StringAttr>(
                  i, nn::NNDialect::kParamAttr))
            matches = globMatch(pattern, name.getValue());
      if (!matches)
        rowEntries[k] = parseFrozenRows(pattern);
    }
    bool anyParam = false, anyTrainable = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      for (unsigned i = 0; i < func.getNumArguments(); ++i) {
        auto name =
            func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
        if (!name)
          continue;
        anyParam = true;
        std::string n = name.getValue().str();
        auto type = cast<RankedTensorType>(func.getArgument(i).getType());
        bool trained = !func.getArgAttr(i, nn::NNDialect::kBufferAttr) &&
                       isa<FloatType>(type.getElementType());
        bool isFrozen = false;
        std::vector<std::pair<int64_t, int64_t>> rows;
        for (auto [k, pattern] : llvm::enumerate(frozen)) {
          if (!rowEntries[k]) {
            if (globMatch(pattern, n))
              frozenUsed[k] = isFrozen = true;
            continue;
          }
          if (!globMatch(rowEntries[k]->glob, n))
            continue;
          frozenUsed[k] = true;
          if (!trained)
            continue;
          const int64_t dim0 = type.getRank() ? type.getDimSize(0) : 0;
          if (rowEntries[k]->ranges.back().second > dim0)
            return fail("frozen[" + std::to_string(k) + "]: \"" + pattern +
                        "\": row " +
                        std::to_string(std::max(
                            rowEntries[k]->ranges.back().first, dim0)) +
                        " is outside '" + n + "' (" + std::to_string(dim0) +
                        (type.getRank() ? " rows)" : " rows: a scalar)"));
          rows.insert(rows.end(), rowEntries[k]->ranges.begin(),
                      rowEntries[k]->ranges.end());
        }
        // Sorted, disjoint, non-adjacent; every row frozen is the tensor.
        llvm::sort(rows);
        SmallVector<int64_t> merged;
        for (auto [begin, end] : rows)
          if (!merged.empty() && begin <= merged.back())
            merged.back() = std::max(merged.back(), end);
          else
            merged.append({begin, end});
        if (merged.size() == 2 && merged[0] == 0 &&
            merged[1] == type.getDimSize(0))
          isFrozen = true;
        if (isFrozen)
          func.setArgAttr(i, nn::NNDialect::kFrozenAttr, b.getUnitAttr());
        else if (!merged.empty())
          func.setArgAttr(i, nn::NNDialect::kFrozenRowsAttr,
                          b.getDenseI64ArrayAttr(merged));
        if (globMatchAny(noDecay, n))
          func.setArgAttr(i, nn::NNDialect::kNoDecayAttr, b.getUnitAttr());
        func.setArgAttr(i, nn::NNDialect::kLogicalTypeAttr,
                        TypeAttr::get(type));
        anyTrainable |= !isFrozen && trained;
      }
    }
    for (auto [k, used] : llvm::enumerate(frozenUsed))
      if (!used)
        return fail("frozen[" + std::to_string(k) + "]: \"" + frozen[k] +
                    "\" matches no initializer of the model");
    if (anyParam && !anyTrainable && !frozen.empty())
      return fail("frozen: every parameter of the model is frozen: nothing "
                  "to train");
    for (const auto &[glob, row] : padding)
      if (!markPaddingIdx(module, glob, row))
        return;
  }

  /// Marks the gathers (along axis 0) of the parameters `glob` matches with
  /// nn.padding_idx = row; fails if it matches no such table or the row is
  /// outside one.
  bool markPaddingIdx(ModuleOp module, const std::string &glob, int64_t row) {
    std::string key = "padding_idx." + glob;
    bool matched = false;
    for (auto func : module.getOps<func::FuncOp>())
      for (unsigned i = 0; i < func.getNumArguments(); ++i) {
        auto name =
            func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
        if (!name || !globMatch(glob, name.getValue().str()))
          continue;
        BlockArgument table = func.getArgument(i);
        auto type = cast<RankedTensorType>(table.getType());
        bool gathered = false;
        for (Operation *user : table.getUsers()) {
          auto gather = dyn_cast<nn::GatherOp>(user);
          if (!gather || gather.getData() != table || gather.getAxis() != 0)
            continue;
          gathered = true;
          gather->setAttr(nn::NNDialect::kPaddingIdxAttr,
                          OpBuilder(user).getI64IntegerAttr(row));
        }
        if (!gathered)
          continue;
        if (row >= type.getDimSize(0)) {
          fail(key + ": row " + std::to_string(row) + " is outside '" +
               name.getValue().str() + "' (" +
               std::to_string(type.getDimSize(0)) + " rows)");
          return false;
        }
        matched = true;
      }
    if (!matched)
      fail(key + ": matches no embedding table (a parameter that a Gather "
                 "reads rows of)");
    return matched;
  }

  void fail(const std::string &message) {
    getOperation().emitError() << message;
    signalPassFailure();
  }
};

} // namespace
