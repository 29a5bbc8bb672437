//===- ContextParallelAttention.h - Ulysses and ring attention --*- C++ -*-===//
//
// The per-rank forms of the nn.attention and nn.attention_grad ops that
// autopar-dist-context-parallel marked dist.context_parallel, built by
// spmdization once their operands are this rank's blocks of the sequence.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_PARALLEL_CONTEXTPARALLELATTENTION_H
#define AUTOPAR_PASSES_PARALLEL_CONTEXTPARALLELATTENTION_H

#include "dialects/parallel/DistOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace autopar::dist {

class ContextParallelAttention {
public:
  explicit ContextParallelAttention(MeshOp mesh) : mesh(mesh) {}

  /// `op`, marked, whose operands are per-rank with the sequence (dim
  /// rank - 2 of the query) split over `axes` (n ranks) and whose results
  /// already have the same per-rank types, in its local form. Returns the
  /// values that stand for its results; `replaced`: `op` is to be erased
  /// (the ring's blocks are new ops), otherwise it stays, changed.
  ///  - "ulysses": each operand but the mask and positions exchanged for a
  ///    block of the heads (dist.all_to_all: split the heads, concatenate
  ///    the sequence; made once per value: the gradient reads the
  ///    forward's), `op` on the whole sequence of 1/n of the heads, each
  ///    result exchanged back.
  ///  - "ring": the keys and values (and their positions) passed n - 1
  ///    times around the ring (dist.shift); each block attended in chunks
  ///    of consecutive key positions (its halves) as causal attentions
  ///    whose positions are the queries' less the chunk's first, the
  ///    outputs merged by their log-sum-exps; the gradient passes the
  ///    blocks again, one gradient per chunk, the key and value gradients'
  ///    partial sums passed with them and home at the end.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  lower(mlir::OpBuilder &b, mlir::Operation *op,
        llvm::ArrayRef<llvm::StringRef> axes, int64_t n, bool &replaced);

  /// After a function: drops the exchanges back that nothing reads (the
  /// forward's log-sum-exp, which only the gradient reads, as its block).
  void finish();

private:
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  lowerUlysses(mlir::OpBuilder &b, mlir::Operation *op,
               llvm::ArrayRef<llvm::StringRef> axes, int64_t n);
  llvm::SmallVector<mlir::Value> lowerRing(mlir::OpBuilder &b,
                                           mlir::Operation *op,
                                           llvm::ArrayRef<llvm::StringRef> axes,
                                           int64_t n);
  /// `v` one position on around the ring of `axes`.
  mlir::Value shift(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                    llvm::ArrayRef<llvm::StringRef> axes);

  MeshOp mesh;
  /// Ulysses: a per-rank value's block of the heads (the whole sequence),
  /// or the attention's own result that the value was exchanged back from.
  llvm::DenseMap<mlir::Value, mlir::Value> headBlocks;
  /// Ulysses: the exchanges back.
  llvm::SmallVector<mlir::Operation *> exchangesBack;
  /// Ring: a block's key positions, one position on.
  llvm::DenseMap<mlir::Value, mlir::Value> passedPositions;
};

} // namespace autopar::dist

#endif // AUTOPAR_PASSES_PARALLEL_CONTEXTPARALLELATTENTION_H
