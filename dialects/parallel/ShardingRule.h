//===- ShardingRule.h - the sharding rule of an op --------------*- C++ -*-===//
//
// An op's sharding rule (after Shardy's OpShardingRule and GSPMD's per-op
// propagation): its iteration space as a list of factors, the factor each
// operand and result dim indexes, which factors are contracted (summed or
// averaged) and which must stay whole, and how a pending sum of an operand
// passes to the results. Ops provide it through ShardingRuleOpInterface.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DIALECTS_PARALLEL_SHARDINGRULE_H
#define AUTOPAR_DIALECTS_PARALLEL_SHARDINGRULE_H

#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

namespace autopar::dist {

struct OpShardingRule {
  /// The reduction over a factor for the results that do not index it.
  /// `Within`: the op's local form reduces over the factor itself, with
  /// collectives (the classes of a vocab-parallel cross-entropy), so those
  /// results are whole.
  enum class Reduction { Sum, Mean, Within };
  /// How the op may pass a pending sum of an operand on to its results.
  enum class Linearity {
    /// Not linear: partial operands are all-reduced first.
    None,
    /// Linear in each operand listed as linear, one at a time (mul, div's
    /// numerator, matmul): at most one of them may be partial.
    OneOf,
    /// Linear in all of them jointly (add, sub, concat): the result is
    /// partial only if every listed operand is partial over the same axes.
    AllOf,
  };

  /// Per operand / result dim: its factor, or -1 (a broadcast dim of size
  /// 1, or a dim the op does not let anyone split).
  llvm::SmallVector<llvm::SmallVector<int64_t>> operandFactors, resultFactors;
  /// Per factor: whether it may be split.
  llvm::SmallVector<bool> splittable;
  /// Per factor: the reduction over it for results that do not index it.
  llvm::SmallVector<Reduction> reduction;
  /// Factors that, when split, make the local op's results a local mean
  /// that must be scaled (a mean-reduced loss's gradient).
  llvm::SmallVector<int64_t> meanScaled;
  /// Factors only results index whose block the local op computes (the
  /// table rows of a gather's gradient): users may have them split.
  llvm::SmallVector<int64_t> placeable;
  Linearity linearity = Linearity::None;
  llvm::SmallVector<bool> linearOperand;

  /// A reshape that merges dims [.., M, N, ..] into one (or splits one into
  /// them): its major factor indexes M and the merged dim, the next one
  /// (`minor`, not splittable alone) N. When M is split over axes whose
  /// ranks hold one index of it each, N may take further axes: the merged
  /// dim is then split over M's axes followed by N's, and each rank's block
  /// of it is still contiguous (a context-parallel rank's tokens of its one
  /// sample, [B, T, V] -> [B * T, V]).
  struct Tail {
    int64_t major, minor;
    /// M's extent.
    int64_t majorExtent;
    /// The merged dim: of the operand (true) or the result, and which.
    bool mergedInOperand;
    int64_t mergedDim;
  };
  llvm::SmallVector<Tail> tails;

  int64_t addFactor(bool canSplit = true, Reduction r = Reduction::Sum) {
    splittable.push_back(canSplit);
    reduction.push_back(r);
    return splittable.size() - 1;
  }

  /// Prints the rule of `op` in Shardy's notation, factors named i, j, k,
  /// ... with the sizes of the dims they index (from `op`'s types; several,
  /// joined by '/', for a reshape's major factor), then the factors that
  /// must stay whole, those a result reduces over (sum or mean), the
  /// mean-scaled ones and the linearity:
  ///   ([i, k], [k, j])->([i, j]) {i=8, j=16, k=4} reduction={k}
  ///   linear=one_of(0, 1)
  void print(llvm::raw_ostream &os, mlir::Operation *op) const;
};

} // namespace autopar::dist

#include "dialects/parallel/ShardingInterface.h.inc"

#endif // AUTOPAR_DIALECTS_PARALLEL_SHARDINGRULE_H
