//===- DistAttrs.h - dist dialect attributes and enums ----------*- C++ -*-===//

#ifndef AUTOPAR_DIALECTS_PARALLEL_DISTATTRS_H
#define AUTOPAR_DIALECTS_PARALLEL_DISTATTRS_H

#include "dialects/parallel/DistDialect.h"

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

#include "dialects/parallel/DistEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/parallel/DistAttrs.h.inc"

namespace autopar::dist {

/// Parses a list of mesh axis names, `[dp, tp]` (a name is a bare identifier
/// or a string literal).
mlir::ParseResult parseAxisList(mlir::AsmParser &parser,
                                llvm::SmallVectorImpl<mlir::StringAttr> &axes);

/// Prints `axes` as parseAxisList reads them.
void printAxisList(mlir::AsmPrinter &printer,
                   llvm::ArrayRef<llvm::StringRef> axes);

/// The names in an array attribute of strings (e.g. an op's `axes`).
llvm::SmallVector<llvm::StringRef> toAxisNames(mlir::ArrayAttr axes);

/// Joins `axes` as `[a, b]`, for diagnostics.
std::string formatAxes(llvm::ArrayRef<llvm::StringRef> axes);

/// The number of elements of each ZeRO flat shard of a tensor of
/// `numElements` elements over `numRanks` ranks: ceil(numElements / numRanks).
inline int64_t zeroShardSize(int64_t numElements, int64_t numRanks) {
  return (numElements + numRanks - 1) / numRanks;
}

} // namespace autopar::dist

#endif // AUTOPAR_DIALECTS_PARALLEL_DISTATTRS_H
