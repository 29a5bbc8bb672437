//===- Passes.h - dist passes -----------------------------------*- C++ -*-===//

#ifndef AUTOPAR_PASSES_PARALLEL_PASSES_H
#define AUTOPAR_PASSES_PARALLEL_PASSES_H

#include "dialects/nn/NNDialect.h"
#include "dialects/parallel/DistDialect.h"
#include "dialects/parallel/DistOps.h"
#include "passes/parallel/Schedule.h"
#include "passes/parallel/ShardingRules.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <array>
#include <vector>

namespace autopar::dist {

/// The nn.output name of a pipeline stage's result (the activation it
/// sends to the next stage).
inline constexpr llvm::StringLiteral kStageOutputName = "stage_output";
/// The data-parallel mesh axis, over which ZeRO shards too.
inline constexpr llvm::StringLiteral kDataAxis = "dp";
/// Hybrid sharding's replica axis (zero.shard_size): the data-parallel
/// groups that each hold every shard; outside kDataAxis, which is then the
/// shard group.
inline constexpr llvm::StringLiteral kReplicaAxis = "dpr";
/// The tensor-parallel mesh axis.
inline constexpr llvm::StringLiteral kTensorAxis = "tp";
/// The context-parallel mesh axis (mesh.cp): every sequence split over it.
inline constexpr llvm::StringLiteral kContextAxis = "cp";
/// The pipeline-parallel mesh axis.
inline constexpr llvm::StringLiteral kPipelineAxis = "pp";
/// The mesh autopar-apply-plan creates, and its axes in order (ranks are
/// row-major over them: tp innermost).
inline constexpr llvm::StringLiteral kMeshName = "mesh";
inline constexpr std::array<llvm::StringLiteral, 3> kMeshAxes = {
    kDataAxis, kPipelineAxis, kTensorAxis};
/// The sizes of kMeshAxes for a plan's mesh.
inline std::vector<int64_t> meshAxisSizes(int64_t dp, int64_t tp, int64_t pp) {
  return {dp, pp, tp};
}

/// The data-parallel axes of `mesh` that it has, outermost first: the
/// replica axis (hybrid sharding) and dp. The batch is split over them.
llvm::SmallVector<llvm::StringRef, 2> dataAxes(MeshOp mesh);

/// The module's mesh (the one dist.mesh), or null with no error.
MeshOp findMesh(mlir::ModuleOp module);

/// The module's mesh, or null after an error saying to run
/// autopar-apply-plan first.
MeshOp requireMesh(mlir::ModuleOp module);

/// The size of the module's mesh axis `axis`, or failure after an error
/// (no mesh, or no such axis).
mlir::FailureOr<int64_t> requireAxisSize(mlir::ModuleOp module,
                                         llvm::StringRef axis);

/// Axis sizes of `mesh` by name.
MeshSizes meshSizes(MeshOp mesh);

/// The first layer of each of `stages` stages that minimises the costliest
/// stage, every stage at least one layer; the first stage also runs
/// `embedding`, the last `head` (autopar-dist-pipeline-split's "auto"
/// split; the planner predicts other meshes' splits with it).
llvm::SmallVector<int64_t> balanceStages(llvm::ArrayRef<double> layerCost,
                                         double embedding, double head,
                                         int64_t stages);

/// The pipeline schedule autopar-dist-pipeline-schedule recorded in the
/// module's dist.pipeline_schedule: every rank's actions and transfer
/// groups, checked again under NCCL's ordering. False with `error` (one
/// line) if there is none or it is malformed.
bool readPipelineSchedule(mlir::ModuleOp module, pipeline::Schedule &schedule,
                          pipeline::TransferPlan &transfers,
                          std::string &error);

#define GEN_PASS_DECL
#include "passes/parallel/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/parallel/Passes.h.inc"

} // namespace autopar::dist

#endif // AUTOPAR_PASSES_PARALLEL_PASSES_H
