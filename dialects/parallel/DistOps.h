//===- DistOps.h - dist dialect ops -----------------------------*- C++ -*-===//

#ifndef AUTOPAR_DIALECTS_PARALLEL_DISTOPS_H
#define AUTOPAR_DIALECTS_PARALLEL_DISTOPS_H

#include "dialects/parallel/DistAttrs.h"
#include "dialects/parallel/DistDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/parallel/DistOps.h.inc"

namespace autopar::dist {

/// The dist.mesh that `mesh` names, seen from `from`, or null.
MeshOp lookupMesh(mlir::Operation *from, mlir::FlatSymbolRefAttr mesh,
                  mlir::SymbolTableCollection &symbolTables);

} // namespace autopar::dist

#endif // AUTOPAR_DIALECTS_PARALLEL_DISTOPS_H
