//===- NNDialect.h - nn dialect ---------------------------------*- C++ -*-===//

#ifndef AUTOPAR_DIALECTS_NN_NNDIALECT_H
#define AUTOPAR_DIALECTS_NN_NNDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/nn/NNDialect.h.inc"

#endif // AUTOPAR_DIALECTS_NN_NNDIALECT_H
