//===- ConverterHelpers.cpp - what the converters share -------------------===//
//
// The helpers of every op family's converters: failing a node with an
// error, setting an output folded on the host, reading constant inputs and
// axes; the nn values several families build (a scalar constant, an index
// with negative values wrapped), and the float-only wrapper of a converter.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ConvertersImpl.h"

#include "dialects/nn/NNOps.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace autopar;

namespace autopar::onnx_import {

/// Fails the node with the message of `err`.
LogicalResult failWith(NodeContext &ctx, llvm::Error err) {
  return ctx.fail(llvm::toString(std::move(err)));
}

/// Sets output 0 from a host computation, or fails with its error.
LogicalResult setHost(NodeContext &ctx, llvm::Expected<HostTensor> t) {
  if (!t)
    return failWith(ctx, t.takeError());
  ctx.setOutput(0, std::move(*t));
  return success();
}

/// Optional input i as a constant holding one value (a scalar or a
/// one-element tensor); fails naming `what` if it is not.
FailureOr<const HostTensor *> requireOneValue(NodeContext &ctx, unsigned i,
                                              StringRef what) {
  FailureOr<const HostTensor *> t = ctx.requireConst(i, what);
  if (failed(t))
    return failure();
  if ((*t)->size() != 1)
    return ctx.fail(what + " must hold one value");
  return t;
}

std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// Normalizes and sorts `axes` for a tensor of rank `rank`.
FailureOr<SmallVector<int64_t>> normalizeAxes(NodeContext &ctx,
                                              ArrayRef<int64_t> axes,
                                              int64_t rank) {
  SmallVector<int64_t> out;
  for (int64_t a : axes) {
    llvm::Expected<int64_t> n = normalizeAxis(a, rank);
    if (!n)
      return failWith(ctx, n.takeError());
    if (llvm::is_contained(out, *n))
      return ctx.fail("axis " + llvm::Twine(a) + " is repeated");
    out.push_back(*n);
  }
  llvm::sort(out);
  return out;
}

FailureOr<int64_t> axisAttr(NodeContext &ctx, int64_t dflt, int64_t rank) {
  llvm::Expected<int64_t> axis =
      normalizeAxis(ctx.intAttr("axis", dflt), rank);
  if (!axis)
    return failWith(ctx, axis.takeError());
  return *axis;
}

/// A rank-0 constant `v` of element type `t` (broadcasts against anything).
Value scalarConstant(OpBuilder &b, Location loc, Type t, double v) {
  auto type = RankedTensorType::get({}, t);
  Attribute a = isa<FloatType>(t) ? Attribute(b.getFloatAttr(t, v))
                                  : Attribute(b.getIntegerAttr(t, int64_t(v)));
  return nn::ConstantOp::create(b, loc, DenseElementsAttr::get(type, a));
}

/// Integer `index` with negative values counted from the end of a dim of
/// `size` (index < 0 ? index + size : index).
Value wrapNegative(OpBuilder &b, Location loc, Value index, int64_t size) {
  Type t = cast<RankedTensorType>(index.getType()).getElementType();
  return nn::WhereOp::create(
      b, loc,
      nn::CompareOp::create(b, loc, nn::ComparePredicate::lt, index,
                            scalarConstant(b, loc, t, 0)),
      nn::AddOp::create(b, loc, index, scalarConstant(b, loc, t, size)),
      index);
}

/// `convert` for float32, bfloat16 and float16 inputs only.
ConvertFn floatOnly(ConvertFn convert) {
  return [=](NodeContext &ctx) -> LogicalResult {
    Type et = ctx.inputType(0).getElementType();
    if (!isa<FloatType>(et) || et.isF64())
      return ctx.fail("element type " + typeString(et) + " is not supported");
    return convert(ctx);
  };
}

} // namespace autopar::onnx_import
