//===- NNOps.h - nn dialect ops ---------------------------------*- C++ -*-===//

#ifndef AUTOPAR_DIALECTS_NN_NNOPS_H
#define AUTOPAR_DIALECTS_NN_NNOPS_H

#include "dialects/nn/NNDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

#include "dialects/nn/NNEnums.h.inc"

namespace autopar::nn {

/// The numpy broadcast of two shapes, or failure if they do not broadcast.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Whether a tensor of `shape` whose element k is `at(k)` is an additive
/// causal mask: in each of its square matrices (last two dims, at least
/// 2 x 2), 0 on and below the diagonal and -inf or at most -1e9 above
/// (masked_fill's -1e9, torch.finfo(float32).min): softmax gives the masked
/// entries exactly 0 where every row keeps its diagonal.
bool isAdditiveCausalMask(llvm::ArrayRef<int64_t> shape,
                          llvm::function_ref<double(int64_t)> at);

/// The result type of a broadcasting binary op on `lhs` and `rhs` (ranked
/// tensors whose shapes broadcast): the broadcast shape, lhs's element type.
mlir::Type inferBroadcastBinaryType(mlir::Type lhs, mlir::Type rhs);

/// The result type of reducing `axes` (sorted, non-negative) of `input`.
mlir::Type inferReduceType(mlir::Type input, llvm::ArrayRef<int64_t> axes,
                           bool keepdims);

/// The result type of inserting size-1 dims at `axes` (sorted, non-negative
/// dims of the result) into `input`.
mlir::Type inferUnsqueezeType(mlir::Type input, llvm::ArrayRef<int64_t> axes);

/// Result shape of numpy.matmul on the given shapes (ranks >= 1, contracting
/// dims equal, batch dims broadcast), or failure.
mlir::FailureOr<llvm::SmallVector<int64_t>>
matmulShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

/// The element type of nn.attention's log-sum-exp for queries of
/// `queryElement`: that type, or f32 for 16-bit floats (the backward
/// recomputes probabilities from it).
mlir::Type attentionLseElementType(mlir::Type queryElement);

/// True for the elementwise ops an nn.fused body may hold (unary, binary,
/// compare, where, cast, expand, gelu, gelu_grad, constant).
bool isElementwise(mlir::Operation *op);

/// The value of `v` where it is a splat float nn.constant with a single
/// element per broadcast (every dim 1): a scalar of the exported graph.
std::optional<double> scalarConstant(mlir::Value v);

/// `v` if it is an argument of a function's entry block that the function
/// marks a parameter (nn.param), else null.
mlir::BlockArgument paramArgument(mlir::Value v);

} // namespace autopar::nn

#define GET_OP_CLASSES
#include "dialects/nn/NNOps.h.inc"

#endif // AUTOPAR_DIALECTS_NN_NNOPS_H
