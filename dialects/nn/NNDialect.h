//===- NNDialect.h - nn dialect ---------------------------------*- C++ -*-===//

#ifndef AUTOPAR_DIALECTS_NN_NNDIALECT_H
#define AUTOPAR_DIALECTS_NN_NNDIALECT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "dialects/nn/NNDialect.h.inc"

namespace autopar {

/// Bytes of a ranked tensor's elements (i1 stored as one byte): what the
/// memory plan, the cost analysis and the program writer count.
inline int64_t tensorBytes(mlir::Type type) {
  auto tensor = mlir::cast<mlir::RankedTensorType>(type);
  unsigned bits = tensor.getElementType().getIntOrFloatBitWidth();
  return tensor.getNumElements() * static_cast<int64_t>((bits + 7) / 8);
}

} // namespace autopar

#endif // AUTOPAR_DIALECTS_NN_NNDIALECT_H
