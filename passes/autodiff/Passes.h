//===- Passes.h - autodiff passes -------------------------------*- C++ -*-===//

#ifndef AUTOPAR_PASSES_AUTODIFF_PASSES_H
#define AUTOPAR_PASSES_AUTODIFF_PASSES_H

#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace autopar {

/// Adds function `trainStep` to `module`: `forward` followed by the reverse
/// pass, returning the loss (the result named `loss`, or the only scalar
/// float result if `loss` is empty) and the gradient of every trainable
/// parameter. With `lossScaleArgument`, the train step takes one more
/// argument, last, `nn.loss_scale`: the scalar that seeds the backward pass
/// (every gradient is multiplied by it). Emits an error and fails on a
/// model it cannot differentiate.
mlir::LogicalResult differentiate(mlir::ModuleOp module,
                                  llvm::StringRef forward, llvm::StringRef loss,
                                  llvm::StringRef trainStep,
                                  bool lossScaleArgument = false);

/// The index of the loss among `func`'s results: the result whose nn.output
/// is `loss`, or (if `loss` is empty) the only scalar floating-point result.
/// Emits an error and fails otherwise.
mlir::FailureOr<unsigned> findLoss(mlir::func::FuncOp func,
                                   llvm::StringRef loss);

/// True for a trainable argument of a model function: a floating-point
/// `nn.param` that is neither `nn.buffer` nor `nn.frozen`.
bool isTrainableParam(mlir::func::FuncOp func, unsigned argIndex);

#define GEN_PASS_DECL
#include "passes/autodiff/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/autodiff/Passes.h.inc"

} // namespace autopar

#endif // AUTOPAR_PASSES_AUTODIFF_PASSES_H
