//===- CostAnalysis.h - FLOPs, bytes and communication of IR ----*- C++ -*-===//
//
// One cost analysis over the final IR, per rank: what report.json reports
// (and a planner will predict from). The FLOPs are the model's (the products
// the graph asks for); communication is what the runtime's counters measure
// (runtime/comm/Comm.h's byte formulas, per collective kind and the mesh
// axes of its group).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_ANALYSIS_COSTANALYSIS_H
#define AUTOPAR_PASSES_ANALYSIS_COSTANALYSIS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>
#include <optional>
#include <string>

namespace autopar {

/// Model FLOPs of one op: 2 M N K of a matmul or gemm; for nn.attention
/// the products of the graph it replaced (q k^T and p v: 2 x 2 T S D per
/// head, masked entries included), for nn.attention_grad the backward's
/// four (dv, dp, dq, dk; its recomputation of q k^T is not model FLOPs);
/// 0 for every other op.
int64_t modelFlops(mlir::Operation *op);

/// Bytes `op` reads and writes: its operands and results, except that a
/// lookup (nn.gather) reads only the rows it returns of its table. With
/// modelFlops, what a roofline times an op by.
int64_t movedBytes(mlir::Operation *op);

/// The roofline's cost of `op` in FLOPs: its model FLOPs, or the bytes it
/// moves times `flopsPerByte` (the machine's balance) if that is more.
double rooflineFlops(mlir::Operation *op, double flopsPerByte);

/// A machine's rates for a roofline: peak FLOP/s, memory bytes/s, and the
/// fractions of them real kernels reach.
struct MachineRates {
  double flopsPerSecond = 1e12;
  /// The rate of products whose operands are float32 (no tensor cores);
  /// 0: flopsPerSecond.
  double fp32FlopsPerSecond = 0;
  double bytesPerSecond = 1e11;
  /// Of the peak, what a large matmul and a fused attention reach; of the
  /// bandwidth, what the other ops reach.
  double matmulEfficiency = 1, attentionEfficiency = 1, memoryEfficiency = 1;
  /// Matmuls lose the part of their 128 x 128 output tiles and 32-deep k
  /// steps that their shape leaves empty (tile quantization).
  bool tileQuantization = false;
};

/// The roofline's seconds of `op`: its model FLOPs at the matmul rate
/// (modelFlops; the float32 rate for float32 operands; efficiency and tiles
/// by its shape) or the bytes it moves
/// (movedBytes) at the memory rate, whichever is longer.
double rooflineSeconds(mlir::Operation *op, const MachineRates &rates);
/// The sum over `func`'s ops (an nn.fused chain once, not its body).
double rooflineSeconds(mlir::func::FuncOp func, const MachineRates &rates);

/// What one run of a function of the final IR costs one rank.
struct FunctionCost {
  /// Model FLOPs of the function's ops (modelFlops).
  int64_t flops = 0;
  /// Bytes of the arguments that are parameters (`nn.param`, as stored)
  /// and of the others (graph inputs, the loss scale), of the results, and
  /// the function's arena (`nn.arena_bytes`, 0 before memory planning).
  int64_t paramBytes = 0, inputBytes = 0, resultBytes = 0, arenaBytes = 0;
  /// Bytes this rank sends per run, keyed by collective kind (all_reduce,
  /// reduce_scatter, all_gather, send, all_to_all) and the group's mesh axes
  /// joined by ',' ("dp").
  std::map<std::pair<std::string, std::string>, double> commBytes;

  /// The bytes sent by collectives of `kind` over any axes.
  double commBytesOfKind(llvm::StringRef kind) const;
};

/// What one collective (or point-to-point send) of the final IR sends.
struct CollectiveCost {
  /// all_reduce, reduce_scatter, all_gather, all_to_all or send; the group's
  /// mesh axes joined by ',', and its size on the module's mesh.
  std::string kind, axes;
  int64_t group = 1;
  /// Bytes this rank sends (a ring's: 2 (g - 1) / g of an all-reduce's
  /// tensor, (g - 1) / g of an all-gather's result).
  double bytes = 0;
};

/// `op`'s communication if it is a dist collective or send.
std::optional<CollectiveCost> collectiveCost(mlir::Operation *op);

/// Analyzes `func`. Collectives are sized over the group their axes name on
/// the module's mesh (dist.mesh).
FunctionCost analyzeCost(mlir::func::FuncOp func);

} // namespace autopar

#endif // AUTOPAR_PASSES_ANALYSIS_COSTANALYSIS_H
