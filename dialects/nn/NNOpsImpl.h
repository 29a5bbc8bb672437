//===- NNOpsImpl.h - what the nn op verifiers share -------------*- C++ -*-===//
//
// The helpers of the nn op verifiers and builders, shared by the files that
// define the ops' members: NNOps.cpp (which defines the first group here
// and includes the op classes TableGen generates), NNForwardOps.cpp (the
// second group: types a forward op and its backward op both check) and
// NNBackwardOps.cpp. Each is documented where it is defined. Internal to
// the dialect: passes see NNOps.h only.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DIALECTS_NN_NNOPSIMPL_H
#define AUTOPAR_DIALECTS_NN_NNOPSIMPL_H

#include "dialects/nn/NNOps.h"

#include <string>

namespace autopar::nn {

// NNOps.cpp

mlir::RankedTensorType tensorType(mlir::Value v);
mlir::LogicalResult verifyResultType(mlir::Operation *op, mlir::Type result,
                                     mlir::Type inferred);
mlir::LogicalResult verifyAxis(mlir::Operation *op, int64_t axis, int64_t rank,
                               const llvm::Twine &name);
mlir::LogicalResult verifyAxes(mlir::Operation *op,
                               llvm::ArrayRef<int64_t> axes, int64_t rank,
                               const llvm::Twine &name);
mlir::LogicalResult verifyResultElementType(mlir::Operation *op,
                                            mlir::Value input);
mlir::LogicalResult verifySameElementType(mlir::Operation *op, mlir::Value a,
                                          llvm::StringRef aName, mlir::Value b,
                                          llvm::StringRef bName);
std::string shapeString(llvm::ArrayRef<int64_t> shape);

// NNForwardOps.cpp

mlir::FailureOr<mlir::RankedTensorType> lossType(mlir::Operation *op,
                                                 mlir::Value scoresValue,
                                                 mlir::Value labelsValue,
                                                 LossReduction reduction);
bool isLossType(mlir::Type type, mlir::RankedTensorType loss);
/// A loss's `classes` attribute, if any, is within 1..C of its scores.
mlir::LogicalResult verifyClassCount(mlir::Operation *op, mlir::Value scores,
                                     std::optional<int64_t> classes);
mlir::FailureOr<mlir::RankedTensorType>
shardStatsType(mlir::Operation *op, mlir::Value scores, mlir::Value labels);
mlir::RankedTensorType gatherType(mlir::RankedTensorType data,
                                  mlir::RankedTensorType indices, int64_t axis);
mlir::LogicalResult
verifySlice(mlir::Operation *op, mlir::RankedTensorType input,
            mlir::RankedTensorType result, llvm::ArrayRef<int64_t> offsets,
            llvm::ArrayRef<int64_t> strides, llvm::StringRef name);

} // namespace autopar::nn

#endif // AUTOPAR_DIALECTS_NN_NNOPSIMPL_H
