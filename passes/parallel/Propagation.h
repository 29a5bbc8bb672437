//===- Propagation.h - sharding propagation over a function -----*- C++ -*-===//
//
// The engine of autopar-propagate-sharding, also driven step by step by the
// passes that place seeds from what propagation already implies
// (autopar-dist-tensor-parallel).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_PARALLEL_PROPAGATION_H
#define AUTOPAR_PASSES_PARALLEL_PROPAGATION_H

#include "passes/parallel/Passes.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

#include <limits>
#include <memory>
#include <optional>
#include <vector>

namespace autopar::dist {

/// Whether `func` is a training step (returns an nn.grad result).
bool returnsGradients(mlir::func::FuncOp func);

/// A dist.shard's priority (0 when it has none).
int64_t priorityOf(ShardOp shard);

/// Sharding propagation over one function. Every value has a layout: an
/// op's results the decision of its rule over its operands' layouts and
/// the hints on its results; a `dist.shard` result its sharding; an
/// argument with `dist.sharding` that sharding (fixed); an argument
/// without one (open) its hints. Hints are the splits a value's users
/// want: a dist.shard wants its operand laid out as its sharding, an op
/// wants each operand split as its decision splits it. Hints only ever
/// gain axes (a dim already split, or an axis already used, keeps what it
/// has: the first hint wins), so settling ends.
class ShardingPropagator {
public:
  ShardingPropagator(mlir::func::FuncOp func, const MeshSizes &sizes);

  /// Propagates in both directions until nothing changes, with the
  /// dist.shard seeds of priority <= `level` (the function may have gained
  /// ops since the last call).
  mlir::LogicalResult settle(int64_t level);

  /// The layout `v` has now.
  Layout layoutOf(mlir::Value v) const;

  /// A trial: the changes made from beginTrial() on are kept by commit()
  /// or undone by rollback() (the function's ops the trial added must be
  /// erased after it); layoutBeforeTrial reads the layouts as they were.
  void beginTrial();
  void commit();
  void rollback();
  Layout layoutBeforeTrial(mlir::Value v) const;

  /// Writes the layouts: `dist.shardings` on every op with results,
  /// `dist.sharding` on the open arguments, and each gradient result's
  /// dims as its parameter's.
  void annotate(llvm::StringRef meshName);

private:
  Layout hintOf(mlir::Value v) const;
  bool setLayout(mlir::Value v, const Layout &l);
  /// Adds the splits of `want` that `v`'s hint can take; true if it grew.
  bool addHint(mlir::Value v, const Layout &want);
  /// Applies `op`'s rule (seeds of priority <= `level` only); true if a
  /// layout or a hint changed.
  bool visit(mlir::Operation *op, int64_t level);
  /// Marks the users of `v`, whose layout changed, for a visit (the
  /// return too for an argument: it reads the parameters' layouts).
  void layoutChanged(mlir::Value v);
  /// Marks `op` for a visit: in the sweep under way if it is ahead of the
  /// op being visited (`cursor`), else in the next.
  void markDirty(mlir::Operation *op);
  /// The sweep's order as a heap's "less than" (the next op on top).
  struct SweepOrder {
    bool forward;
    bool operator()(mlir::Operation *a, mlir::Operation *b) const;
  };

  mlir::func::FuncOp func;
  const MeshSizes &sizes;
  llvm::DenseMap<mlir::Value, Layout> layouts, hints;
  /// A sweep visits an op again only if a layout of its operands or a
  /// hint of its results changed since its last visit (it is `dirty`):
  /// otherwise its rule would decide the same. Each settle starts with the
  /// ops not visited yet and the dist.shard annotations whose priority
  /// comes in (above the highest level settled so far, up to its own)
  /// dirty: visiting the others again would decide the same (the return
  /// reads the parameters' layouts: layoutChanged marks it).
  llvm::DenseSet<mlir::Operation *> visited, dirty;
  int64_t settledLevel = std::numeric_limits<int64_t>::min(),
          settledLevelBefore = std::numeric_limits<int64_t>::min();
  /// The sweep under way: its direction, the op it visits, the dirty ops
  /// ahead of it.
  bool forwardSweep = true;
  mlir::Operation *cursor = nullptr;
  std::vector<mlir::Operation *> queue;
  /// The trial's journal: each layout and hint before its first change
  /// (none if it had none), the ops first visited, the dirty ops.
  bool inTrial = false;
  llvm::DenseMap<mlir::Value, std::optional<Layout>> layoutsBefore, hintsBefore;
  llvm::SmallVector<mlir::Operation *> visitedInTrial;
  llvm::DenseSet<mlir::Operation *> dirtyBefore;
  /// In a trial: keeps `v`'s entry of `map` in `before` if it has none yet.
  void record(const llvm::DenseMap<mlir::Value, Layout> &map,
              llvm::DenseMap<mlir::Value, std::optional<Layout>> &before,
              mlir::Value v) const;
  /// Arguments without a dist.sharding: laid out as their hints say.
  llvm::SmallPtrSet<mlir::Value, 8> openArgs;
  /// Per gradient result: its parameter, whose layout it is wanted in.
  llvm::SmallVector<std::pair<unsigned, mlir::BlockArgument>> gradients;
};

/// Regroups sums that mix whole terms with terms pending (as sums) over the
/// same axes under `prop`'s layouts so the pending ones are added first and
/// reduced once; true if it changed `func`.
bool groupPendingSums(mlir::func::FuncOp func, const ShardingPropagator &prop);

/// Propagates `func`'s seeds in the order of their priorities, regrouping
/// pending sums (groupPendingSums) and propagating again if that changed
/// the function; null after an error.
std::unique_ptr<ShardingPropagator> propagateSeeds(mlir::func::FuncOp func,
                                                   const MeshSizes &sizes);

/// The layouts one function hands the next: a parameter has one layout in
/// the program (one blob holds it for every function), and a pipeline
/// stage's training step receives its input and its output's gradient laid
/// out as the neighbouring stages return them.
class StageLayouts {
public:
  /// The module's functions in the order their layouts are decided:
  /// pipeline stages' training steps by stage, then training steps, then
  /// the rest (the forward of evaluation).
  static llvm::SmallVector<mlir::func::FuncOp> order(mlir::ModuleOp module);

  /// Fixes `func`'s arguments without a dist.sharding that an earlier
  /// function laid out: parameters, and unless `paramsOnly` the stage's
  /// input and output gradient.
  void take(mlir::func::FuncOp func, llvm::StringRef meshName,
            bool paramsOnly = false);

  /// Before a stage chooses its splits over `axis`: its input and output
  /// gradient as handed less their splits over `axis` (the batch's
  /// data-parallel split stays, so what the stage computes stays split
  /// over dp). `take` replaces them with the whole layouts.
  void takeWithout(mlir::func::FuncOp func, llvm::StringRef meshName,
                   llvm::StringRef axis);

  /// Records `func`'s parameters' layouts as `prop` found them (fixing
  /// the open ones) and what it hands the neighbouring stages: its output
  /// as computed, its pending sums reduced; its input's gradient as its
  /// input; a result with a dist.sharding as that. Sets those results'
  /// dist.sharding.
  void record(mlir::func::FuncOp func, const ShardingPropagator &prop,
              llvm::StringRef meshName);

private:
  llvm::StringMap<ShardingAttr> params, boundaries;
  /// The arguments takeWithout set, by function and argument number.
  llvm::DenseSet<std::pair<mlir::Operation *, unsigned>> provisional;
};

} // namespace autopar::dist

#endif // AUTOPAR_PASSES_PARALLEL_PROPAGATION_H
