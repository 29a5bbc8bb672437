//===- ConvertConstants.cpp - constant and shape query converters ---------===//
//
// Constant, Shape, ConstantOfShape and Range: always folded at import, their
// outputs host tensors.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ConvertersImpl.h"

#include "onnx/onnx_pb.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace autopar;

namespace autopar::onnx_import {

LogicalResult convertConstant(NodeContext &ctx) {
  const onnx::NodeProto &node = ctx.node();
  if (node.attribute_size() != 1)
    return ctx.fail("needs exactly one value attribute");
  const onnx::AttributeProto &a = node.attribute(0);
  if (a.name() == "value") {
    llvm::Expected<HostTensor> t = decodeTensor(a.t(), "");
    return setHost(ctx, std::move(t));
  }
  if (a.name() == "value_float")
    ctx.setOutput(0, HostTensor::ofFloats(DType::Float, {}, {a.f()}));
  else if (a.name() == "value_floats")
    ctx.setOutput(0, HostTensor::ofFloats(
                         DType::Float, {a.floats_size()},
                         std::vector<double>(a.floats().begin(),
                                             a.floats().end())));
  else if (a.name() == "value_int")
    ctx.setOutput(0, HostTensor::ofInts(DType::Int64, {}, {a.i()}));
  else
    ctx.setOutput(0, HostTensor::ofInts(
                         DType::Int64, {a.ints_size()},
                         std::vector<int64_t>(a.ints().begin(),
                                              a.ints().end())));
  return success();
}

LogicalResult convertShape(NodeContext &ctx) {
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  int64_t rank = shape.size();
  int64_t start = ctx.intAttr("start", 0), end = ctx.intAttr("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  std::vector<int64_t> dims(shape.begin() + start, shape.begin() + end);
  int64_t rankOut = dims.size();
  ctx.setOutput(0, HostTensor::ofInts(DType::Int64, {rankOut}, std::move(dims)));
  return success();
}

LogicalResult convertConstantOfShape(NodeContext &ctx) {
  FailureOr<const HostTensor *> shapeT = ctx.requireConst(0, "input");
  if (failed(shapeT))
    return failure();
  SmallVector<int64_t> shape = (*shapeT)->toInts();
  HostTensor value = HostTensor::ofFloats(DType::Float, {}, {0.0});
  if (const onnx::AttributeProto *a = ctx.attr("value")) {
    llvm::Expected<HostTensor> t = decodeTensor(a->t(), "");
    if (!t)
      return failWith(ctx, t.takeError());
    if (t->size() != 1)
      return ctx.fail("value must hold one element");
    value = std::move(*t);
  }
  value.shape.clear();
  return setHost(ctx, hostExpand(value, shape));
}

LogicalResult convertRange(NodeContext &ctx) {
  if (!ctx.allInputsConstant())
    return ctx.fail("start, limit and delta must be constants known at "
                    "import");
  const HostTensor &start = *ctx.constInput(0), &limit = *ctx.constInput(1),
                   &delta = *ctx.constInput(2);
  double s = start.floatAt(0), l = limit.floatAt(0), d = delta.floatAt(0);
  if (d == 0)
    return ctx.fail("delta is 0");
  double count = std::ceil((l - s) / d);
  if (count > double(int64_t(1) << 26))
    return ctx.fail("range of " + std::to_string(count) +
                    " elements is too large to fold at import");
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  HostTensor out = HostTensor::zeros(start.dtype, {n});
  for (int64_t i = 0; i < n; ++i) {
    if (start.isFloat())
      out.set(i, s + i * d);
    else
      out.setInt(i, start.intAt(0) + i * delta.intAt(0));
  }
  ctx.setOutput(0, std::move(out));
  return success();
}

} // namespace autopar::onnx_import
