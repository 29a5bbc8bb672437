//===- ZeroPartition.cpp - ZeRO-2/3 flat shards over dp -------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"
#include "runtime/comm/CommBytes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "autopar-zero-partition"

namespace autopar::dist {
#define GEN_PASS_DEF_ZEROPARTITIONPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

struct ZeroPartitionPass
    : public dist::impl::ZeroPartitionPassBase<ZeroPartitionPass> {
  using ZeroPartitionPassBase::ZeroPartitionPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto stage = module->getAttrOfType<IntegerAttr>(DistDialect::kZeroStageAttr);
    if (!stage || stage.getInt() < 2)
      return;
    MeshOp mesh = requireMesh(module);
    if (!mesh)
      return signalPassFailure();
    MeshSizes sizes = meshSizes(mesh);
    if (!sizes.count(axis)) {
      module.emitError() << "mesh @" << mesh.getSymName() << " has no axis '"
                         << axis << "'";
      return signalPassFailure();
    }
    group = sizes.lookup(axis);
    meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() &&
          (failed(shardParams(func)) || failed(shardGrads(func))))
        return signalPassFailure();
  }

  RankedTensorType shardType(RankedTensorType full) {
    return RankedTensorType::get({rt::flatChunk(full.getNumElements(), group)},
                                 full.getElementType());
  }

  ArrayAttr axes(Builder &b) { return b.getArrayAttr({b.getStringAttr(axis)}); }

  /// ZeRO-3: the argument becomes this rank's flat shard, gathered right
  /// before each op that uses it.
  LogicalResult shardParams(func::FuncOp func) {
    OpBuilder b(func.getContext());
    for (BlockArgument arg : func.getArguments()) {
      if (!func.getArgAttr(arg.getArgNumber(), DistDialect::kZeroAttr))
        continue;
      auto full = cast<RankedTensorType>(arg.getType());
      llvm::SetVector<Operation *> users;
      for (Operation *user : arg.getUsers())
        users.insert(user);
      func.setArgAttr(arg.getArgNumber(), DistDialect::kBlockTypeAttr, TypeAttr::get(full));
      arg.setType(shardType(full));
      for (Operation *user : users) {
        b.setInsertionPoint(user);
        Value gathered = ZeroGatherOp::create(b, user->getLoc(), full, arg,
                                              meshRef, axes(b));
        user->replaceUsesOfWith(arg, gathered);
      }
    }
    updateType(func);
    return success();
  }

  /// ZeRO-2/3: each `dist.zero` gradient is reduce-scattered into its flat
  /// shard where it is complete.
  LogicalResult shardGrads(func::FuncOp func) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    OpBuilder b(func.getContext());
    for (OpOperand &operand : ret->getOpOperands()) {
      unsigned r = operand.getOperandNumber();
      if (!func.getResultAttr(r, DistDialect::kZeroAttr))
        continue;
      Value v = operand.get();
      auto attr = func.getResultAttrOfType<ShardingAttr>(r, DistDialect::kShardingAttr);
      if (!attr)
        return func.emitError() << "result #" << r
                                << " has no dist.sharding (run "
                                   "autopar-dist-spmdize first)";
      // The rank's block (split over other axes, as tensor parallelism
      // splits it) is what ZeRO shards.
      Layout l = Layout::fromAttr(attr);
      bool splitOverAxis = llvm::any_of(l.dims, [&](const auto &axes) {
        return llvm::is_contained(axes, axis) ||
               llvm::is_contained(axes, kReplicaAxis);
      });
      // Hybrid sharding: pending over the replicas too.
      SmallVector<StringRef> replicas;
      for (StringRef a : l.partial)
        if (a == kReplicaAxis)
          replicas.push_back(a);
      // Over one data-parallel rank a gradient is its own sum (nothing need
      // have left it pending over the axis of size 1).
      const bool pending = llvm::is_contained(l.partial, StringRef(axis));
      const bool complete = !pending && group == 1 && replicas.empty();
      if (l.partial.size() != (pending ? 1 : 0) + replicas.size() ||
          !(pending || complete) || splitOverAxis ||
          (pending && l.partialKind != ReductionKind::sum))
        return func.emitError()
               << "result #" << r << " is laid out as " << attr
               << "; ZeRO shards only a gradient that is a pending sum over '"
               << axis << "' (and the replicas '" << kReplicaAxis
               << "') and not split over it";
      if (auto def = v.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(&func.getBody().front());
      auto full = cast<RankedTensorType>(v.getType());
      Value shard = ZeroScatterOp::create(
          b, ret.getLoc(), shardType(full), v,
          ReductionKindAttr::get(b.getContext(), ReductionKind::sum), meshRef,
          axes(b));
      // Then each shard summed over the replicas that hold it too: the
      // shard's bytes cross the replica groups' (slower) links, not the
      // whole gradient's.
      if (!replicas.empty())
        shard = AllReduceOp::create(
            b, ret.getLoc(), shard.getType(), shard,
            ReductionKindAttr::get(b.getContext(), ReductionKind::sum), meshRef,
            b.getStrArrayAttr(replicas));
      operand.set(shard);
      func.removeResultAttr(r,
                            StringAttr::get(func.getContext(), DistDialect::kShardingAttr));
    }
    updateType(func);
    return success();
  }

  void updateType(func::FuncOp func) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    func.setType(FunctionType::get(func.getContext(),
                                   func.getBody().front().getArgumentTypes(),
                                   ret.getOperandTypes()));
  }

  int64_t group = 1;
  FlatSymbolRefAttr meshRef;
};

} // namespace
