//===- ProgramIR.h - what the program reads from the final IR ---*- C++ -*-===//
//
// After the pipeline, the IR is the whole program: the program writer, the
// runtime tables and the report read the plan's parallel decisions from it
// (the mesh, ZeRO, the pipeline schedule, each parameter's logical tensor),
// never from the plan file; the rest reaches them as a TrainingConfig.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PROGRAM_PROGRAMIR_H
#define AUTOPAR_COMPILER_PROGRAM_PROGRAMIR_H

#include "compiler/plan/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

#include <set>
#include <string>
#include <vector>

namespace autopar {

/// The logical type of argument `i` of `func`: a parameter's
/// `nn.logical_type` (the full tensor in its master precision), else the
/// argument's type.
mlir::Type logicalType(mlir::func::FuncOp func, unsigned i);

/// The logical types of all of `func`'s arguments: the layout of weights.bin.
std::vector<mlir::Type> logicalTypes(mlir::func::FuncOp func);

/// The train step's result index of each parameter's gradient, by name.
llvm::StringMap<int> gradResults(mlir::func::FuncOp step);

/// The element type of each parameter's gradient, by name, as the
/// module's functions return it (the train step, or a pipeline's phases):
/// the stored parameter's type, or f32 under grad_dtype fp32.
llvm::StringMap<mlir::Type> gradElementTypes(mlir::ModuleOp module);

/// What the runtime tables and the report read from the final IR beyond
/// the types: the mesh, ZeRO, the data inputs and micro-batching.
struct ProgramShape {
  /// The mesh's axes in order (dist.mesh).
  std::vector<std::string> axisNames;
  std::vector<int64_t> axisSizes;
  /// dp: every data-parallel rank (the product over dataAxes).
  int64_t dp = 1, tp = 1, pp = 1, ranks = 1;
  /// The data-parallel axes (dp, and hybrid sharding's dpr) as a mask.
  uint32_t dataAxes = 0;
  /// dist.zero_stage (0 where no pass set it: one device, tp alone).
  int64_t zeroStage = 0;
  /// dist.offload = "cpu".
  bool offload = false;
  /// Argument indices of the token ids and the targets (the plan's data
  /// inputs).
  int tokens = -1, targets = -1;
  /// Samples per micro-step per rank, and the sequence length.
  int64_t microBatch = 0, seqLen = 0;
};

/// What the runtime does once per step with trainable parameter `arg` of
/// the train step, read off the final IR (runtime/Model.h TensorInfo):
/// the ZeRO stage (`dist.zero_stage`) shards the update over dp; the
/// gradient result's `dist.sharding` says over which axes its sum is still
/// pending; `dist.zero` on the result and on the argument says the step
/// returns the gradient and takes the parameter as flat shards.
struct TensorSync {
  /// Mesh axis names (held by the IR's context).
  llvm::SmallVector<llvm::StringRef, 1> updateAxes, gradReduceAxes;
  bool gradSharded = false, paramSharded = false;
  /// Tensor parallelism: the axes splitting each dim of the whole tensor
  /// (the argument's dist.sharding); the rank stores that block.
  llvm::SmallVector<llvm::SmallVector<llvm::StringRef, 1>> splitAxes;
  /// This rank's block (the argument's type, or at ZeRO-3 the type its flat
  /// shard stands for, dist.block_type) and the whole tensor it is a block
  /// of, in the IR's view of it: the logical tensor (nn.logical_type)
  /// itself, or a reshape of it (autopar-dist-split-fused-projections).
  llvm::SmallVector<int64_t> block, whole;
};
/// Whether a gradient's sum pending over mesh axis `axis` (beyond its
/// update's shards) is added on the reduced shard, after the
/// reduce-scatter: the axis's ranks hold the same shards (hybrid sharding's
/// replicas dpr, context parallelism's cp).
bool summedOnShard(llvm::StringRef axis);
TensorSync readTensorSync(mlir::func::FuncOp step, unsigned arg,
                          int gradResult);

/// The pipeline phase functions of `module` (dist.stage and dist.phase),
/// by stage then phase ("forward", "backward", "input", "weight"), and
/// the C++ name each is emitted as ("stage<s>_<phase>").
std::vector<std::pair<mlir::func::FuncOp, std::string>>
phaseFunctions(mlir::ModuleOp module);

/// Pipeline parallelism: what the phases say of a parameter.
struct PipelineTensor {
  /// The pipeline ranks whose phases read it (two or more: a tied
  /// embedding, its gradient summed over pp).
  std::set<int64_t> ranks;
  /// A phase returns its gradient.
  bool trained = false;
  /// The mesh axes a phase leaves its gradient pending over (dp: reduced
  /// once per step), then pp if several ranks read it.
  llvm::SmallVector<llvm::StringRef, 2> reduceAxes;
};
/// The parameters of `module`'s pipeline phases over `pp` pipeline ranks
/// (stage s runs on rank s mod pp), by name.
llvm::StringMap<PipelineTensor> pipelineTensors(mlir::ModuleOp module,
                                                int64_t pp);

/// Pipeline parallelism: each pipeline rank's parameter blob holds only
/// the parameters its stages read, those summed over pp (a tied
/// embedding: every rank takes part in the sum and the update) on every
/// rank, and one no stage reads on rank 0; laid out as layoutArguments lays
/// out `forward`'s (argument order, 64-byte aligned). Per rank, the byte
/// offsets by parameter name; `bytes`: each blob's size.
std::vector<llvm::StringMap<int64_t>>
rankParamLayouts(mlir::func::FuncOp forward,
                 const llvm::StringMap<PipelineTensor> &staged, int64_t pp,
                 std::vector<int64_t> &bytes);

/// Reads the ProgramShape of train step `step` from its module (the data
/// inputs `config` names); false with `error` set if the IR lacks what the
/// pipeline writes.
bool readProgramShape(mlir::func::FuncOp step, const TrainingConfig &config,
                      ProgramShape &shape, std::string &error);

} // namespace autopar

#endif // AUTOPAR_COMPILER_PROGRAM_PROGRAMIR_H
