//===- AnnotateSharding.cpp - plan -> mesh and argument shardings ---------===//
//
// Data parallelism and ZeRO as shardings over the `dp` axis: inputs split
// their batch dim, parameters are replicated (or, at ZeRO-3, stored as flat
// shards; under tensor parallelism left for propagation to lay out), the
// loss is wanted replicated and gradients replicated, partial (ZeRO-1) or
// flat-sharded (ZeRO-2/3).
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"
#include "passes/parallel/Propagation.h"

#include "passes/analysis/CostAnalysis.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "autopar-annotate-sharding"

namespace autopar::dist {
#define GEN_PASS_DEF_ANNOTATESHARDINGPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

MeshOp dist::findMesh(ModuleOp module) {
  for (auto mesh : module.getOps<MeshOp>())
    return mesh;
  return nullptr;
}

MeshOp dist::requireMesh(ModuleOp module) {
  MeshOp mesh = findMesh(module);
  if (!mesh)
    module.emitError() << "has no dist.mesh (run autopar-apply-plan)";
  return mesh;
}

FailureOr<int64_t> dist::requireAxisSize(ModuleOp module, StringRef axis) {
  MeshOp mesh = requireMesh(module);
  if (!mesh)
    return failure();
  std::optional<int64_t> size = mesh.getAxisSize(axis);
  if (!size)
    return module.emitError() << "the mesh has no axis '" << axis << "'";
  return *size;
}

SmallVector<StringRef, 2> dist::dataAxes(MeshOp mesh) {
  SmallVector<StringRef, 2> axes;
  for (StringRef axis : {kReplicaAxis.str(), kDataAxis.str()})
    if (mesh.getAxisSize(axis))
      axes.push_back(axis == kReplicaAxis ? kReplicaAxis : kDataAxis);
  return axes;
}

MeshSizes dist::meshSizes(MeshOp mesh) {
  MeshSizes sizes;
  for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes()))
    sizes[cast<StringAttr>(name).getValue()] = size;
  return sizes;
}

namespace {

/// A pipeline stage's argument or result that a neighbouring stage returns
/// or takes: its input or output, their gradients.
bool isPipelineBoundary(DictionaryAttr attrs) {
  if (!attrs)
    return false;
  auto output = attrs.getAs<StringAttr>(nn::NNDialect::kOutputAttr);
  return attrs.get(nn::NNDialect::kStageInputAttr) ||
         attrs.get(nn::NNDialect::kOutputGradAttr) ||
         attrs.get(nn::NNDialect::kInputGradAttr) ||
         (output && output.getValue() == kStageOutputName);
}

struct AnnotateShardingPass
    : public dist::impl::AnnotateShardingPassBase<AnnotateShardingPass> {
  using AnnotateShardingPassBase::AnnotateShardingPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    MeshOp mesh = requireMesh(module);
    if (!mesh)
      return signalPassFailure();
    std::optional<int64_t> dpSize = mesh.getAxisSize("dp");
    if (!dpSize)
      return fail(module, "the mesh has no dp axis");
    for (auto [name, size] :
         llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes())) {
      StringRef axis = cast<StringAttr>(name).getValue();
      // The pipeline axis is no partition of a function: each pipeline
      // rank runs its stages' own.
      if (size > 1 && axis != kDataAxis && axis != kReplicaAxis &&
          axis != kTensorAxis && axis != kPipelineAxis &&
          axis != kContextAxis)
        return fail(module, "mesh axis '" + axis.str() + "' has size " +
                                std::to_string(size) +
                                ": only the dpr, dp, pp, cp and tp axes are "
                                "partitioned yet");
    }
    // The batch is split over every data-parallel rank (the replicas of
    // hybrid sharding too).
    data = dataAxes(mesh);
    dp = mesh.getGroupSize(data);
    if (mesh.getAxisSize(kReplicaAxis).value_or(1) > 1 && zeroStage == 0)
      return fail(module, "a dpr (replica) axis needs a ZeRO stage of 1 or "
                          "more (it is hybrid sharding's)");
    tp = mesh.getAxisSize(kTensorAxis).value_or(1);
    cp = mesh.getAxisSize(kContextAxis).value_or(1);
    if (zeroStage < 0 || zeroStage > 3)
      return fail(module, "zero-stage must be 0 to 3, got " +
                              std::to_string(zeroStage));
    if (offload != "none" && offload != "cpu")
      return fail(module, "offload must be none or cpu, got '" +
                              std::string(offload) + "'");
    if (offload == "cpu" && zeroStage == 0)
      return fail(module, "offload = cpu needs a ZeRO stage of 1 or more");
    if (deferReduction && zeroStage != 0)
      return fail(module, "defer-reduction is for ZeRO stage 0 (stage 1 "
                          "always defers, stages 2 and 3 shard the "
                          "gradients as they are reduced)");
    meshName = mesh.getSymName();

    OpBuilder b(ctx);
    module->setAttr(DistDialect::kZeroStageAttr, b.getI64IntegerAttr(zeroStage));
    if (offload == "cpu")
      module->setAttr(DistDialect::kOffloadAttr, b.getStringAttr(offload));
    module->setAttr(DistDialect::kBucketBytesAttr, b.getI64IntegerAttr(static_cast<int64_t>(
                                          bucketMb * 1024.0 * 1024.0)));

    // Trainable parameters: those the training step returns a gradient of.
    llvm::StringSet<> trainable;
    for (auto func : module.getOps<func::FuncOp>())
      for (unsigned r = 0; r < func.getNumResults(); ++r)
        if (auto p = func.getResultAttrOfType<StringAttr>(
                r, nn::NNDialect::kGradAttr))
          trainable.insert(p.getValue());

    // The model FLOPs of one micro-batch over the whole mesh, before
    // partitioning: of the training step, or of every pipeline stage's.
    int64_t modelFlops = 0;
    bool counted = false;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && returnsGradients(func)) {
        modelFlops += analyzeCost(func).flops;
        counted = true;
      }
    if (counted)
      module->setAttr(DistDialect::kModelFlopsAttr, b.getI64IntegerAttr(modelFlops));
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(annotate(func, trainable)))
        return signalPassFailure();
  }

  /// The mesh's size along dp, tp and cp, and its symbol.
  int64_t dp = 1, tp = 1, cp = 1;
  /// The data-parallel axes (dataAxes), the batch's split and the
  /// gradients' pending sum.
  SmallVector<StringRef, 2> data;
  StringRef meshName;

  void fail(ModuleOp module, const std::string &message) {
    module.emitError() << message;
    signalPassFailure();
  }

  LogicalResult annotate(func::FuncOp func,
                         const llvm::StringSet<> &trainable) {
    MLIRContext *ctx = func.getContext();
    auto replicated = [&](Type t) {
      return Layout::replicated(cast<RankedTensorType>(t).getRank())
          .toAttr(ctx, meshName);
    };
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto type = cast<RankedTensorType>(func.getArgument(i).getType());
      if (auto input =
              func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kInputAttr)) {
        if (type.getRank() == 0 || type.getDimSize(0) % dp != 0)
          return func.emitError()
                 << "input '" << input.getValue() << "': batch dim "
                 << (type.getRank() ? type.getDimSize(0) : 0)
                 << " is not divisible by mesh.dp = "
                 << static_cast<int64_t>(dp);
        Layout l = Layout::replicated(type.getRank());
        for (StringRef axis : data)
          l.dims[0].push_back(axis);
        func.setArgAttr(i, DistDialect::kShardingAttr, l.toAttr(ctx, meshName));
        // Context parallelism: every rank of a cp group reads the whole
        // sequence (token ids are small) and keeps its block of it.
        if (cp > 1 && type.getRank() >= 2 && !func.getBody().empty()) {
          if (type.getDimSize(1) % cp != 0)
            return func.emitError()
                   << "input '" << input.getValue() << "': sequence dim "
                   << type.getDimSize(1) << " is not divisible by mesh.cp = "
                   << cp;
          BlockArgument arg = func.getArgument(i);
          OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
          l.dims[1].push_back(kContextAxis);
          auto seed = ShardOp::create(b, arg.getLoc(), arg,
                                      l.toAttr(ctx, meshName), IntegerAttr());
          arg.replaceAllUsesExcept(seed.getResult(), seed);
        }
        continue;
      }
      // What a pipeline stage receives from another is laid out as that
      // one returns it (autopar-propagate-sharding).
      if (isPipelineBoundary(func.getArgAttrDict(i)))
        continue;
      auto param =
          func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
      if (zeroStage == 3 && param && trainable.contains(param.getValue()))
        func.setArgAttr(i, DistDialect::kZeroAttr, UnitAttr::get(ctx));
      // Under tensor parallelism a parameter is stored as propagation
      // finds its users want it (an open argument; ZeRO-3 then keeps a
      // flat shard of that block).
      if (tp > 1 && param)
        continue;
      func.setArgAttr(i, DistDialect::kShardingAttr, replicated(type));
    }
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      Type t = func.getResultTypes()[r];
      if (isPipelineBoundary(func.getResultAttrDict(r)))
        continue;
      if (!func.getResultAttr(r, nn::NNDialect::kGradAttr)) {
        func.setResultAttr(r, DistDialect::kShardingAttr, replicated(t));
        continue;
      }
      if (zeroStage >= 2) {
        func.setResultAttr(r, DistDialect::kZeroAttr, UnitAttr::get(ctx));
        continue;
      }
      Layout l = Layout::replicated(cast<RankedTensorType>(t).getRank());
      // ZeRO-1 keeps full local gradients, reduce-scattered once per step;
      // stage 0 with deferReduction too, all-reduced once per step.
      // Context parallelism's sum over cp too: the runtime adds it on the
      // reduced shard (cp ranks hold the same shards, as hybrid sharding's
      // replicas), or in the one all-reduce over dp and cp.
      if (zeroStage == 1 || deferReduction) {
        for (StringRef axis : data)
          l.partial.push_back(axis);
        if (cp > 1)
          l.partial.push_back(kContextAxis);
      }
      func.setResultAttr(r, DistDialect::kShardingAttr, l.toAttr(ctx, meshName));
    }
    return success();
  }
};

} // namespace
