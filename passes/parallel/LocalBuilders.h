//===- LocalBuilders.h - small builders of per-rank ops ---------*- C++ -*-===//
//
// What spmdization and the context-parallel attention lowering both build:
// axis lists, 0-d constants, casts.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_PARALLEL_LOCALBUILDERS_H
#define AUTOPAR_PASSES_PARALLEL_LOCALBUILDERS_H

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"

namespace autopar::dist {

/// The mesh axis names as an attribute.
inline mlir::ArrayAttr axesAttr(mlir::Builder &b,
                                llvm::ArrayRef<llvm::StringRef> axes) {
  llvm::SmallVector<mlir::Attribute> names;
  for (llvm::StringRef a : axes)
    names.push_back(b.getStringAttr(a));
  return b.getArrayAttr(names);
}

/// A 0-d constant of `element` type (float or integer).
inline mlir::Value scalar(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Type element, double value) {
  auto type = mlir::RankedTensorType::get({}, element);
  mlir::Attribute a =
      mlir::isa<mlir::FloatType>(element)
          ? mlir::Attribute(mlir::FloatAttr::get(element, value))
          : mlir::Attribute(
                mlir::IntegerAttr::get(element, static_cast<int64_t>(value)));
  return nn::ConstantOp::create(b, loc, type,
                                mlir::DenseElementsAttr::get(type, a));
}

/// `v` with element type `element` (itself if it has it).
inline mlir::Value castTo(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                          mlir::Type element) {
  auto type = mlir::cast<mlir::RankedTensorType>(v.getType());
  if (type.getElementType() == element)
    return v;
  return nn::CastOp::create(b, loc, type.clone(element), v);
}

} // namespace autopar::dist

#endif // AUTOPAR_PASSES_PARALLEL_LOCALBUILDERS_H
