//===- Passes.h - lowering passes -------------------------------*- C++ -*-===//

#ifndef AUTOPAR_PASSES_LOWERING_PASSES_H
#define AUTOPAR_PASSES_LOWERING_PASSES_H

#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <optional>

namespace autopar {

/// Alignment of every arena buffer, in bytes.
inline constexpr int64_t kArenaAlignment = 64;

/// True for the 16-bit ops the CUDA target's kernels take as they are
/// (autopar-legalize-precision{target=cuda} leaves them 16-bit): matmuls,
/// layernorms and reductions of one 16-bit type, 16-bit attention ops
/// (lse f32), and cross-entropy of 16-bit scores with an f32 loss.
bool cudaComputesIn16Bits(mlir::Operation *op);

/// True for ops whose result reinterprets its operand's storage.
bool isViewOp(mlir::Operation *op);

/// True on the CPU target (`cuda` false) for an nn.dequantize (plan
/// `quantize`) whose every use is the B operand of a matmul or gemm,
/// directly or through a folded transpose: those GEMMs dequantize the
/// weight a panel at a time into their own scratch (cpu::gemmQuantizedB),
/// so the dequantized weight is never materialized (no arena buffer).
bool isGemmDequantize(mlir::Operation *op, bool cuda);

/// True for a transpose whose every user is a matmul (or, for a swap of the
/// two dims, a gemm) and that keeps the input's last dim as one of the two
/// matrix dims, or an attention op reading it as query, key, value or
/// output gradient with the last dim kept last: the users read its input
/// through strides (row-major with a leading dimension, or transposed), so
/// it is never materialized.
bool isFoldedTranspose(mlir::Operation *op);

/// True for a transpose (not folded) that keeps the last dim last, of an
/// attention output or an attention_grad's dq / dk / dv of rank 3 or 4,
/// whose only other users read it as an attention_grad's `output`: the
/// attention kernels write the value through strides straight into the
/// transpose's layout (the transpose's result owns the storage, the value
/// is a strided view of it), so the transpose is never materialized.
bool isProducerLayoutTranspose(mlir::Operation *op);

/// Where the attention kernels write a value whose transpose is a
/// producer-layout one: in `owner`'s storage (that transpose's result, or
/// a folded concat's result the transpose is an operand of, through
/// reshapes), `offset` elements in, with element strides `strides`.
struct ProducerLayout {
  mlir::Value owner;
  int64_t offset = 0;
  llvm::SmallVector<int64_t> strides;
};
std::optional<ProducerLayout> producerLayout(mlir::Value v);

/// True for a concat each of whose operands is, through single-use
/// reshapes that need no copy, a single-use producer-layout transpose: the
/// attention kernels write dq, dk, dv straight into the concat's storage
/// (the fused q/k/v projection's gradient), which is never copied.
bool isFoldedConcat(mlir::Operation *op);

/// Row-major element strides of `shape`.
llvm::SmallVector<int64_t> contiguousStrides(llvm::ArrayRef<int64_t> shape);

/// The element strides of a view of `shape` (element strides `strides`) as
/// `to` (same element count) when its elements can be addressed in place
/// (numpy's no-copy reshape); failure otherwise.
mlir::FailureOr<llvm::SmallVector<int64_t>>
reshapeStrides(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> strides,
               llvm::ArrayRef<int64_t> to);

/// True for a split each of whose results is read only, through reshapes
/// and folded transposes, as the query, key or value of attention ops
/// (rank 4 at most): the results are strided views of the input (the
/// fused q/k/v projection split per head), never materialized.
bool isFoldedSplit(mlir::Operation *op);

#define GEN_PASS_DECL
#include "passes/lowering/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/lowering/Passes.h.inc"

} // namespace autopar

#endif // AUTOPAR_PASSES_LOWERING_PASSES_H
