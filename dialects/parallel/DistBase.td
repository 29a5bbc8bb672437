//===- DistBase.td - dist dialect definition ---------------*- tablegen -*-===//
//
// The `dist` dialect: the vocabulary of data, tensor and pipeline parallelism
// and ZeRO. A device mesh with named axes, a sharding attribute that says how
// a value is laid out over the mesh, and the explicit communication ops that
// spmdization produces.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DIST_BASE
#define AUTOPAR_DIST_BASE

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let summary = "Device meshes, shardings and the collectives of parallel "
                "training";
  let description = [{
    `dist` describes how a training program is spread over devices. Data
    parallelism, ZeRO and tensor parallelism are one mechanism: shardings of
    values over the named axes of a `dist.mesh`. Pipeline parallelism is the
    other: `dist.pipeline_stage` regions that exchange tensors with
    `dist.send` / `dist.recv`. Upstream MLIR's `shard` dialect is the model
    for the vocabulary; `dist` keeps partial (pending-reduction) axes, which
    upstream dropped, and adds ZeRO's flat shards, host offload and pipeline
    stages.

    Every op works on statically shaped ranked tensors with value semantics,
    like `nn`. The IR exists in two views:

    - Global view (before spmdization): every tensor has its logical, full
      shape; `dist.shard` annotates values with a `#dist.sharding` and
      sharding propagation fills in the rest.
    - Local view (after spmdization): the program one rank runs. Tensors
      have their per-rank shapes and data moves only through the explicit
      ops: `dist.tensor_split`, the collectives, `dist.zero_gather` /
      `dist.zero_scatter`, `dist.send` / `dist.recv`, `dist.offload` /
      `dist.fetch`.

    Ops that refer to a mesh name it with `on @mesh` (`dist.shard` in its
    `#dist.sharding`) and name its axes; their verifiers look the mesh up
    (it must be a `dist.mesh` in an enclosing symbol table), check that the
    axes are axes of that mesh, and check the sizes that must divide. A
    list of axes is major to minor: the rank's position in the group of
    axes `[a, b]` is `index(a) * size(b) + index(b)`, and block `i` of a
    split dimension belongs to position `i`.

    Side effects. Communication is not a pure function to the generic
    passes: two identical all-reduces are two communications that every rank
    of the group must take part in, in the same order, and a receive that
    nobody reads still has to match its peer's send. Every op that
    communicates therefore reads and writes the resource
    `::autopar::dist::CommResource` (the communicator): CSE does not merge
    them, DCE does not drop them, and passes that respect effects keep their
    relative order. `dist.offload` / `dist.fetch` read and write
    `::autopar::dist::HostMemoryResource` for the same reasons (they are
    placed by the ZeRO-Offload schedule to bound device memory). Neither
    resource is the default one, so pure `nn` ops still move freely around
    them. `dist.shard` and `dist.tensor_split` do not communicate and are
    pure. Dead communication is removed by the `dist` passes that know the
    schedule, never by generic DCE.
  }];
  let cppNamespace = "::autopar::dist";
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Registers the attributes (in DistAttrs.cpp, where they are complete).
    void registerAttributes();

    // The discardable attributes that carry the parallel decisions through
    // the passes to the program writer; the dialect verifies each one's
    // kind and place (DistOps.cpp), and any other `dist.` name is an error.

    /// Argument / result: the value's #dist.sharding.
    static constexpr llvm::StringLiteral kShardingAttr = "dist.sharding";
    /// Op: one #dist.sharding per result (sharding propagation).
    static constexpr llvm::StringLiteral kShardingsAttr = "dist.shardings";
    /// Argument of a ZeRO-3 flat shard: the type of the block it stands for
    /// (the tensor before flattening).
    static constexpr llvm::StringLiteral kBlockTypeAttr = "dist.block_type";
    /// Argument / result (unit): stored as ZeRO flat shards over dp.
    static constexpr llvm::StringLiteral kZeroAttr = "dist.zero";
    /// Module: the ZeRO stage (0 to 3), the offload target ("none", "cpu")
    /// and the gradient bucket size in bytes of the data-parallel
    /// reduction (autopar-annotate-sharding).
    static constexpr llvm::StringLiteral kZeroStageAttr = "dist.zero_stage";
    static constexpr llvm::StringLiteral kOffloadAttr = "dist.offload";
    static constexpr llvm::StringLiteral kBucketBytesAttr = "dist.bucket_bytes";
    /// Module: the model FLOPs of one micro-step of the whole mesh, counted
    /// before partitioning (under tensor parallelism the ranks' programs
    /// no longer add up to it: they repeat the replicated ops).
    static constexpr llvm::StringLiteral kModelFlopsAttr = "dist.model_flops";
    /// Op: the gradient bucket of a scheduled collective.
    static constexpr llvm::StringLiteral kBucketAttr = "dist.bucket";
    /// Op or function: the pipeline stage an op of the forward runs in, or
    /// that a phase function computes.
    static constexpr llvm::StringLiteral kStageAttr = "dist.stage";
    /// Function: the forward's layers and stages
    /// (autopar-dist-pipeline-split).
    static constexpr llvm::StringLiteral kPipelineAttr = "dist.pipeline";
    /// Function: the phase of a pipeline stage's training step it computes
    /// ("forward", "backward", "input", "weight").
    static constexpr llvm::StringLiteral kPhaseAttr = "dist.phase";
    /// Module: the plan's pipeline schedule as built and simulated at
    /// compile time, with every rank's actions and transfer groups
    /// (autopar-dist-pipeline-schedule).
    static constexpr llvm::StringLiteral kPipelineScheduleAttr =
        "dist.pipeline_schedule";
    /// nn.attention / nn.attention_grad: how spmdization reaches the keys
    /// of the other cp blocks (autopar-dist-context-parallel): "ulysses"
    /// (the sequence exchanged for heads around the op) or "ring" (the
    /// blocks of keys and values passed around the cp ring).
    static constexpr llvm::StringLiteral kContextParallelAttr =
        "dist.context_parallel";
  }];
}

/// The communicator: every op that communicates reads and writes it.
def Dist_CommResource : Resource<"::autopar::dist::CommResource">;
/// Host (CPU) memory of ZeRO-Offload: dist.offload and dist.fetch.
def Dist_HostMemoryResource : Resource<"::autopar::dist::HostMemoryResource">;

def Dist_ReductionKind : I32EnumAttr<"ReductionKind",
    "reduction of the values that the ranks of a group hold", [
      I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"max", 1>]> {
  let cppNamespace = "::autopar::dist";
}

#endif // AUTOPAR_DIST_BASE
