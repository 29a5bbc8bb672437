//===- ShardingRules.h - how shardings flow through nn ops ------*- C++ -*-===//
//
// The nn ops' sharding rules (dialects/parallel/ShardingRule.h), attached
// to them as ShardingRuleOpInterface models. `decide` turns the layouts of
// an op's operands into the layouts its operands must have and the layouts
// of its results, from the op's rule; propagation and spmdization both call
// it, so they agree by construction.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_PARALLEL_SHARDINGRULES_H
#define AUTOPAR_PASSES_PARALLEL_SHARDINGRULES_H

#include "dialects/parallel/DistAttrs.h"
#include "dialects/parallel/ShardingRule.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

namespace autopar::dist {

/// A tensor's layout over the mesh while the passes work on it: the axes
/// splitting each dim (major to minor) and the axes holding a pending sum.
struct Layout {
  llvm::SmallVector<llvm::SmallVector<llvm::StringRef, 1>> dims;
  llvm::SmallVector<llvm::StringRef, 1> partial;
  /// How the pending values over `partial` combine (sum or max).
  ReductionKind partialKind = ReductionKind::sum;

  static Layout replicated(int64_t rank);
  static Layout fromAttr(ShardingAttr attr);
  ShardingAttr toAttr(mlir::MLIRContext *context, llvm::StringRef mesh) const;
  bool isReplicated() const;
  bool operator==(const Layout &other) const {
    return dims == other.dims && partial == other.partial &&
           (partial.empty() || partialKind == other.partialKind);
  }
  bool operator!=(const Layout &other) const { return !(*this == other); }
};

/// Axis sizes of the mesh the passes work on.
using MeshSizes = llvm::StringMap<int64_t>;

/// Product of the sizes of `axes`.
int64_t groupSize(const MeshSizes &mesh, llvm::ArrayRef<llvm::StringRef> axes);

/// The per-rank type of a tensor of global type `type` laid out as `layout`.
mlir::RankedTensorType localType(mlir::RankedTensorType type,
                                 const Layout &layout, const MeshSizes &mesh);

/// What an op does with the layouts of its operands.
struct Decision {
  /// The layout each operand must have (resharded to it if it has another).
  llvm::SmallVector<Layout> operands;
  /// The layout of each result.
  llvm::SmallVector<Layout> results;
  /// Per result: the local op computes a mean over a split factor (its
  /// local count), so the result must be divided by this group size to
  /// stand for the global mean's term (1: no scaling).
  llvm::SmallVector<int64_t> resultScale;
};

/// Attaches the built-in rules to the nn ops (when the nn dialect loads).
/// The passes that read rules add it to their dependent dialects.
void registerShardingRuleModels(mlir::DialectRegistry &registry);

/// `op`'s sharding rule through its ShardingRuleOpInterface; failure for an
/// op without the interface or without a rule.
mlir::FailureOr<OpShardingRule> shardingRuleOf(mlir::Operation *op);

/// The decision for `op` given its operands' current layouts and, when
/// given, the layouts its results' users want (hints: a factor no operand
/// splits is split as a result hint says, its operands sliced locally).
/// Operand splits win over hints. Ops without a rule take replicated
/// operands and give replicated results: correct everywhere, fast nowhere.
Decision decide(mlir::Operation *op, llvm::ArrayRef<Layout> operands,
                const MeshSizes &mesh, llvm::ArrayRef<Layout> resultHints = {});

} // namespace autopar::dist

#endif // AUTOPAR_PASSES_PARALLEL_SHARDINGRULES_H
