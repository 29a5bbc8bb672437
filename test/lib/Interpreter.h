//===- Interpreter.h - reference evaluator of nn IR -------------*- C++ -*-===//
//
// A direct, unoptimized evaluator of `nn` functions on host tensors, the
// oracle that tests compare passes, gradients and generated code against.
// Every value is computed in double precision whatever its element type.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TEST_LIB_INTERPRETER_H
#define AUTOPAR_TEST_LIB_INTERPRETER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <vector>

namespace autopar {

/// A tensor on the host: its shape and its elements in row-major order.
/// Integer and boolean elements are stored exactly as doubles (booleans as
/// 0 and 1).
struct HostValue {
  llvm::SmallVector<int64_t> shape;
  std::vector<double> data;

  HostValue() = default;
  HostValue(llvm::ArrayRef<int64_t> shape, std::vector<double> data)
      : shape(shape.begin(), shape.end()), data(std::move(data)) {}

  /// The number of elements `shape` holds.
  int64_t numElements() const;
  /// A tensor of `shape` filled with `value`.
  static HostValue filled(llvm::ArrayRef<int64_t> shape, double value);
};

/// Runs `func` (a single-block func.func of nn ops and func.return) on
/// `args`, one per argument with the argument's shape. Every value is
/// computed in double precision whatever its element type; integer ops
/// truncate like C++ int64 arithmetic, i1 results are 0 or 1, and casts to
/// integer types truncate toward zero. Fails with an error emitted at the op
/// it cannot evaluate (or at the function for bad arguments).
mlir::FailureOr<std::vector<HostValue>>
interpret(mlir::func::FuncOp func, llvm::ArrayRef<HostValue> args);

} // namespace autopar

#endif // AUTOPAR_TEST_LIB_INTERPRETER_H
