//===- ConvertersImpl.h - the converters, across their files ----*- C++ -*-===//
//
// What the converter files share, internal to the importer (OnnxImporter.cpp
// and the tests see Converters.h only): the helpers of every op family
// (ConverterHelpers.cpp), and each family's converters, declared for the
// one table that lists them all (ConverterTable.cpp). Each family is one
// file, Convert<Family>.cpp, where its converters are documented; the
// templates and Activation, which the table instantiates and builds
// activations from, are here.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTENDS_ONNX_CONVERTERSIMPL_H
#define AUTOPAR_FRONTENDS_ONNX_CONVERTERSIMPL_H

#include "frontends/onnx/Converters.h"

#include "dialects/nn/NNOps.h"

#include <functional>
#include <string>

namespace autopar::onnx_import {

//===----------------------------------------------------------------------===//
// Helpers (ConverterHelpers.cpp)
//===----------------------------------------------------------------------===//

mlir::LogicalResult failWith(NodeContext &ctx, llvm::Error err);
mlir::LogicalResult setHost(NodeContext &ctx, llvm::Expected<HostTensor> t);
/// Output 0 of a node whose input 0 may be a constant: `fold(constant)`
/// (a HostTensor, or an llvm::Expected of one) at import when it is one,
/// else `build(input 0)`, the value computed at run time.
template <typename Fold, typename Build>
mlir::LogicalResult foldOrBuild(NodeContext &ctx, Fold fold, Build build) {
  if (const HostTensor *c = ctx.constInput(0))
    return setHost(ctx, fold(*c));
  mlir::FailureOr<mlir::Value> x = ctx.input(0);
  if (mlir::failed(x))
    return mlir::failure();
  ctx.setOutput(0, mlir::Value(build(*x)));
  return mlir::success();
}
mlir::FailureOr<const HostTensor *>
requireOneValue(NodeContext &ctx, unsigned i, llvm::StringRef what);
std::string typeString(mlir::Type t);
mlir::FailureOr<llvm::SmallVector<int64_t>>
normalizeAxes(NodeContext &ctx, llvm::ArrayRef<int64_t> axes, int64_t rank);
mlir::FailureOr<int64_t> axisAttr(NodeContext &ctx, int64_t dflt, int64_t rank);
mlir::Value scalarConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::Type t,
                           double v);
mlir::Value wrapNegative(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::Value index, int64_t size);
ConvertFn floatOnly(ConvertFn convert);

//===----------------------------------------------------------------------===//
// Elementwise (ConvertElementwise.cpp)
//===----------------------------------------------------------------------===//

mlir::LogicalResult binaryOperands(NodeContext &ctx, mlir::Value &lhs,
                                   mlir::Value &rhs, bool castRhs);

template <typename OpTy>
ConvertFn binary(HostBinary hostOp, bool floatOnly = false) {
  return [=](NodeContext &ctx) -> mlir::LogicalResult {
    if (ctx.allInputsConstant())
      return setHost(ctx, hostBinary(hostOp, *ctx.constInput(0),
                                     *ctx.constInput(1)));
    if (floatOnly &&
        !mlir::isa<mlir::FloatType>(ctx.inputType(0).getElementType()))
      return ctx.fail("only floating-point operands are supported, got " +
                      typeString(ctx.inputType(0).getElementType()));
    mlir::Value lhs, rhs;
    if (mlir::failed(binaryOperands(ctx, lhs, rhs, /*castRhs=*/floatOnly)))
      return mlir::failure();
    ctx.setOutput(0, OpTy::create(ctx.builder(), ctx.loc(), lhs, rhs));
    return mlir::success();
  };
}

ConvertFn compare(nn::ComparePredicate pred, HostBinary hostOp);

template <typename OpTy>
ConvertFn unary(HostUnary hostOp, bool floatOnly) {
  return [=](NodeContext &ctx) -> mlir::LogicalResult {
    if (ctx.allInputsConstant()) {
      ctx.setOutput(0, hostUnary(hostOp, *ctx.constInput(0)));
      return mlir::success();
    }
    mlir::Type et = ctx.inputType(0).getElementType();
    if ((floatOnly && !mlir::isa<mlir::FloatType>(et)) || et.isInteger(1) ||
        (mlir::isa<mlir::IntegerType>(et) &&
         mlir::cast<mlir::IntegerType>(et).isUnsigned()))
      return ctx.fail("element type " + typeString(et) + " is not supported");
    mlir::FailureOr<mlir::Value> x = ctx.input(0);
    if (mlir::failed(x))
      return mlir::failure();
    ctx.setOutput(0, OpTy::create(ctx.builder(), ctx.loc(), *x));
    return mlir::success();
  };
}

mlir::LogicalResult convertWhere(NodeContext &ctx);
mlir::LogicalResult convertCast(NodeContext &ctx);
mlir::LogicalResult convertPow(NodeContext &ctx);
ConvertFn extremum(bool isMax);

//===----------------------------------------------------------------------===//
// Reductions and normalizations (ConvertReductions.cpp)
//===----------------------------------------------------------------------===//

/// Builds a reduction of x over `axes` (normalized, sorted).
using ReduceBuild =
    std::function<mlir::Value(mlir::OpBuilder &, mlir::Location, mlir::Value,
                              llvm::ArrayRef<int64_t>, bool)>;

ConvertFn reduceWith(int64_t axesInputSince, ReduceBuild build);

/// ReduceX: axes from the attribute (older versions) or the second input
/// (ReduceSum-13, ReduceMean/Max-18).
template <typename OpTy> ConvertFn reduce(int64_t axesInputSince) {
  return reduceWith(axesInputSince,
                    [](mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                       llvm::ArrayRef<int64_t> axes,
                       bool keepdims) -> mlir::Value {
                      return OpTy::create(b, loc, x, axes, keepdims);
                    });
}

mlir::Value logSumExp(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                      llvm::ArrayRef<int64_t> axes, bool keepdims);
mlir::LogicalResult convertLayerNorm(NodeContext &ctx);
mlir::LogicalResult convertSoftmax(NodeContext &ctx);
mlir::LogicalResult convertLogSoftmax(NodeContext &ctx);
mlir::LogicalResult convertSoftmaxCrossEntropy(NodeContext &ctx);

//===----------------------------------------------------------------------===//
// Linear algebra (ConvertLinearAlgebra.cpp)
//===----------------------------------------------------------------------===//

mlir::LogicalResult convertMatMul(NodeContext &ctx);
mlir::LogicalResult convertGemm(NodeContext &ctx);
mlir::LogicalResult convertEinsum(NodeContext &ctx);

//===----------------------------------------------------------------------===//
// Shapes (ConvertShapes.cpp)
//===----------------------------------------------------------------------===//

mlir::LogicalResult convertReshape(NodeContext &ctx);
mlir::LogicalResult convertFlatten(NodeContext &ctx);
mlir::LogicalResult convertUnsqueeze(NodeContext &ctx);
mlir::LogicalResult convertSqueeze(NodeContext &ctx);
mlir::LogicalResult convertExpand(NodeContext &ctx);
mlir::LogicalResult convertTranspose(NodeContext &ctx);
mlir::LogicalResult convertSplit(NodeContext &ctx);
mlir::LogicalResult convertIdentity(NodeContext &ctx);
mlir::LogicalResult convertDropout(NodeContext &ctx);

//===----------------------------------------------------------------------===//
// Indexing and data movement (ConvertIndexing.cpp)
//===----------------------------------------------------------------------===//

mlir::LogicalResult convertGather(NodeContext &ctx);
mlir::LogicalResult convertGatherElements(NodeContext &ctx);
mlir::LogicalResult convertTile(NodeContext &ctx);
mlir::LogicalResult convertSlice(NodeContext &ctx);
mlir::LogicalResult convertConcat(NodeContext &ctx);
mlir::LogicalResult convertPad(NodeContext &ctx);
mlir::LogicalResult convertCumSum(NodeContext &ctx);
mlir::LogicalResult convertScatterND(NodeContext &ctx);

//===----------------------------------------------------------------------===//
// NonZero and ScatterElements: mixture-of-experts dispatch
// (ConvertDispatch.cpp)
//===----------------------------------------------------------------------===//

mlir::LogicalResult convertNonZero(NodeContext &ctx);
mlir::LogicalResult convertScatterElements(NodeContext &ctx);

//===----------------------------------------------------------------------===//
// Constants and shape queries, always folded (ConvertConstants.cpp)
//===----------------------------------------------------------------------===//

mlir::LogicalResult convertConstant(NodeContext &ctx);
mlir::LogicalResult convertShape(NodeContext &ctx);
mlir::LogicalResult convertConstantOfShape(NodeContext &ctx);
mlir::LogicalResult convertRange(NodeContext &ctx);

//===----------------------------------------------------------------------===//
// Activations built from elementwise ops (ConvertActivations.cpp)
//===----------------------------------------------------------------------===//

/// The ops of a decomposed activation of x (autodiff differentiates the
/// composition). Every branch of a select is computed on values that keep it
/// finite (exp of the clamped input), so no inf * 0 reaches a gradient, and
/// each select takes PyTorch's side at the kink (the gradient there is
/// torch's: x > 0 selects x, everything else the negative branch).
struct Activation {
  mlir::OpBuilder &b;
  mlir::Location loc;
  mlir::Type et;

  mlir::Value scalar(double v);
  mlir::Value cmp(nn::ComparePredicate p, mlir::Value x, mlir::Value y);
  mlir::Value select(mlir::Value c, mlir::Value x, mlir::Value y);
  mlir::Value add(mlir::Value x, mlir::Value y);
  mlir::Value sub(mlir::Value x, mlir::Value y);
  mlir::Value mul(mlir::Value x, mlir::Value y);
  mlir::Value positive(mlir::Value x);
  /// alpha (exp(x / scale) - 1) for x <= 0 and x for x > 0 (Elu, Celu).
  mlir::Value elu(mlir::Value x, double alpha, double scale);
  /// x < 0 ? -x : x.
  mlir::Value abs(mlir::Value x);
  /// ln(1 + exp(x)) as max(x, 0) + ln(1 + exp(-|x|)).
  mlir::Value softplus(mlir::Value x);
  /// max(0, min(1, alpha x + beta)), its gradient alpha strictly inside.
  mlir::Value hardSigmoid(mlir::Value x, double alpha, double beta);
};

ConvertFn activation(
    std::function<mlir::Value(NodeContext &, Activation &, mlir::Value)> build);
mlir::LogicalResult convertPRelu(NodeContext &ctx);
mlir::LogicalResult convertAbs(NodeContext &ctx);
mlir::LogicalResult convertClip(NodeContext &ctx);

//===----------------------------------------------------------------------===//
// Logic, masks, one-hot and constant-only math (ConvertLogic.cpp)
//===----------------------------------------------------------------------===//

mlir::LogicalResult convertTopK(NodeContext &ctx);
mlir::LogicalResult convertNot(NodeContext &ctx);
mlir::LogicalResult convertTrilu(NodeContext &ctx);
ConvertFn constantOnly(HostUnary op, llvm::StringRef name);
mlir::LogicalResult convertOneHot(NodeContext &ctx);

} // namespace autopar::onnx_import

#endif // AUTOPAR_FRONTENDS_ONNX_CONVERTERSIMPL_H
