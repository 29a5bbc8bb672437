//===- ConvertActivations.cpp - activation converters ---------------------===//
//
// The activations without an nn op of their own, decomposed into elementwise
// ops at import (autodiff and both targets take them unchanged): the members
// of Activation, the converter the table's activations share, and PRelu, Abs
// and Clip.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ConvertersImpl.h"

#include "dialects/nn/NNOps.h"

using namespace mlir;
using namespace autopar;

namespace autopar::onnx_import {

Value Activation::scalar(double v) {
  return scalarConstant(b, loc, et, v);
}

Value Activation::cmp(nn::ComparePredicate p, Value x, Value y) {
  return nn::CompareOp::create(b, loc, p, x, y);
}

Value Activation::select(Value c, Value x, Value y) {
  return nn::WhereOp::create(b, loc, c, x, y);
}

Value Activation::add(Value x, Value y) {
  return nn::AddOp::create(b, loc, x, y);
}

Value Activation::sub(Value x, Value y) {
  return nn::SubOp::create(b, loc, x, y);
}

Value Activation::mul(Value x, Value y) {
  return nn::MulOp::create(b, loc, x, y);
}

Value Activation::positive(Value x) {
  return cmp(nn::ComparePredicate::gt, x, scalar(0.0));
}

Value Activation::elu(Value x, double alpha, double scale) {
  Value c = positive(x);
  Value negative = select(c, scalar(0.0), x);
  if (scale != 1.0)
    negative = nn::DivOp::create(b, loc, negative, scalar(scale));
  Value expm1 = sub(nn::ExpOp::create(b, loc, negative), scalar(1.0));
  return select(c, x, mul(scalar(alpha), expm1));
}

Value Activation::abs(Value x) {
  return select(cmp(nn::ComparePredicate::lt, x, scalar(0)),
                nn::NegOp::create(b, loc, x), x);
}

Value Activation::softplus(Value x) {
  Value c = positive(x);
  Value negAbs = select(c, nn::NegOp::create(b, loc, x), x);
  Value log1p = nn::LogOp::create(
      b, loc, add(scalar(1.0), nn::ExpOp::create(b, loc, negAbs)));
  return add(select(c, x, scalar(0.0)), log1p);
}

Value Activation::hardSigmoid(Value x, double alpha, double beta) {
  Value y = add(mul(scalar(alpha), x), scalar(beta));
  y = select(cmp(nn::ComparePredicate::le, y, scalar(0.0)), scalar(0.0), y);
  return select(cmp(nn::ComparePredicate::ge, y, scalar(1.0)), scalar(1.0),
                y);
}

/// A converter of a float activation computing output 0 from input 0.
ConvertFn activation(
    std::function<Value(NodeContext &, Activation &, Value)> build) {
  return [=](NodeContext &ctx) -> LogicalResult {
    Type et = ctx.inputType(0).getElementType();
    if (!isa<FloatType>(et))
      return ctx.fail("element type " + typeString(et) + " is not supported");
    FailureOr<Value> x = ctx.input(0);
    if (failed(x))
      return failure();
    Activation a{ctx.builder(), ctx.loc(), et};
    ctx.setOutput(0, build(ctx, a, *x));
    return success();
  };
}

LogicalResult convertPRelu(NodeContext &ctx) {
  RankedTensorType x = ctx.inputType(0), slope = ctx.inputType(1);
  if (!isa<FloatType>(x.getElementType()))
    return ctx.fail("element type " + typeString(x.getElementType()) +
                    " is not supported");
  if (slope.getElementType() != x.getElementType())
    return ctx.fail("slope's element type differs from X's");
  FailureOr<SmallVector<int64_t>> shape =
      nn::broadcastShapes(x.getShape(), slope.getShape());
  if (failed(shape) || ArrayRef<int64_t>(*shape) != x.getShape())
    return ctx.fail("slope shape " + shapeToString(slope.getShape()) +
                    " does not broadcast to X's " +
                    shapeToString(x.getShape()));
  FailureOr<Value> in = ctx.input(0), s = ctx.input(1);
  if (failed(in) || failed(s))
    return failure();
  Activation a{ctx.builder(), ctx.loc(), x.getElementType()};
  ctx.setOutput(0, a.select(a.positive(*in), *in, a.mul(*s, *in)));
  return success();
}

LogicalResult convertAbs(NodeContext &ctx) {
  Type et = ctx.inputType(0).getElementType();
  if (et.isInteger(1) || (isa<IntegerType>(et) && !et.isSignlessInteger()))
    return ctx.fail("element type " + typeString(et) + " is not supported");
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  Activation a{ctx.builder(), ctx.loc(), et};
  ctx.setOutput(0, a.abs(*x));
  return success();
}

/// Clip(x, min, max) = min(max(x, min), max); min and max are optional
/// scalars (so min > max gives max, and NaN stays NaN). The gradient passes
/// where min <= x <= max, as torch.clamp's.
LogicalResult convertClip(NodeContext &ctx) {
  Type et = ctx.inputType(0).getElementType();
  if (et.isInteger(1))
    return ctx.fail("element type " + typeString(et) + " is not supported");
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  Activation a{ctx.builder(), ctx.loc(), et};
  Value y = *x;
  for (unsigned i : {1u, 2u}) {
    if (!ctx.hasInput(i))
      continue;
    if (ctx.inputType(i).getRank() != 0 ||
        ctx.inputType(i).getElementType() != et)
      return ctx.fail(std::string(i == 1 ? "min" : "max") +
                      " must be a scalar of the input's type");
    FailureOr<Value> bound = ctx.input(i);
    if (failed(bound))
      return failure();
    auto p = i == 1 ? nn::ComparePredicate::lt : nn::ComparePredicate::gt;
    y = a.select(a.cmp(p, y, *bound), *bound, y);
  }
  ctx.setOutput(0, y);
  return success();
}

} // namespace autopar::onnx_import
