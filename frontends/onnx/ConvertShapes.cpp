//===- ConvertShapes.cpp - shape converters -------------------------------===//
//
// The ops that change a tensor's shape, not its elements: Reshape, Flatten,
// Unsqueeze, Squeeze, Expand, Transpose and Split, and Identity and Dropout
// (inference: the identity), which forward their input. Each folds a
// constant input on the host.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ConvertersImpl.h"

#include "dialects/nn/NNOps.h"

#include "llvm/ADT/STLExtras.h"

#include <cstdio>

using namespace mlir;
using namespace autopar;

namespace autopar::onnx_import {

namespace {

/// Output 0 is input 0 reshaped to `shape` (folded when it is constant).
LogicalResult setReshaped(NodeContext &ctx, ArrayRef<int64_t> shape) {
  return foldOrBuild(
      ctx, [&](const HostTensor &c) { return hostReshape(c, shape); },
      [&](Value x) {
        return nn::ReshapeOp::create(ctx.builder(), ctx.loc(),
                                     ctx.inputType(0).clone(shape), x);
      });
}

} // namespace

LogicalResult convertReshape(NodeContext &ctx) {
  FailureOr<const HostTensor *> target = ctx.requireConst(1, "shape");
  if (failed(target))
    return failure();
  RankedTensorType in = ctx.inputType(0);
  llvm::Expected<SmallVector<int64_t>> shape = computeReshape(
      in.getShape(), (*target)->toInts(), ctx.intAttr("allowzero", 0) != 0);
  if (!shape)
    return failWith(ctx, shape.takeError());
  return setReshaped(ctx, *shape);
}

/// Flatten: a reshape to [prod(dims before axis), prod(dims from axis)].
LogicalResult convertFlatten(NodeContext &ctx) {
  RankedTensorType in = ctx.inputType(0);
  const int64_t rank = in.getRank();
  int64_t axis = ctx.intAttr("axis", 1);
  if (axis < -rank || axis > rank)
    return ctx.fail("axis " + llvm::Twine(axis) + " is out of range for rank " +
                    llvm::Twine(rank));
  if (axis < 0)
    axis += rank;
  SmallVector<int64_t> shape = {numElements(in.getShape().take_front(axis)),
                                numElements(in.getShape().drop_front(axis))};
  return setReshaped(ctx, shape);
}

LogicalResult convertUnsqueeze(NodeContext &ctx) {
  FailureOr<const HostTensor *> axesT = ctx.requireConst(1, "axes");
  if (failed(axesT))
    return failure();
  RankedTensorType in = ctx.inputType(0);
  SmallVector<int64_t> raw = (*axesT)->toInts();
  FailureOr<SmallVector<int64_t>> axes =
      normalizeAxes(ctx, raw, in.getRank() + raw.size());
  if (failed(axes))
    return failure();
  auto type = cast<RankedTensorType>(nn::inferUnsqueezeType(in, *axes));
  return foldOrBuild(
      ctx, [&](const HostTensor &c) { return hostReshape(c, type.getShape()); },
      [&](Value x) {
        return nn::UnsqueezeOp::create(ctx.builder(), ctx.loc(), x, *axes);
      });
}

LogicalResult convertSqueeze(NodeContext &ctx) {
  RankedTensorType in = ctx.inputType(0);
  SmallVector<int64_t> axes;
  if (ctx.hasInput(1)) {
    FailureOr<const HostTensor *> t = ctx.requireConst(1, "axes");
    if (failed(t))
      return failure();
    FailureOr<SmallVector<int64_t>> norm =
        normalizeAxes(ctx, (*t)->toInts(), in.getRank());
    if (failed(norm))
      return failure();
    axes = *norm;
  } else {
    for (int64_t i = 0; i < in.getRank(); ++i)
      if (in.getDimSize(i) == 1)
        axes.push_back(i);
  }
  for (int64_t a : axes)
    if (in.getDimSize(a) != 1)
      return ctx.fail("dim " + llvm::Twine(a) + " has size " +
                      llvm::Twine(in.getDimSize(a)) + ", not 1");
  auto type = cast<RankedTensorType>(nn::inferReduceType(in, axes, false));
  return foldOrBuild(
      ctx, [&](const HostTensor &c) { return hostReshape(c, type.getShape()); },
      [&](Value x) {
        return nn::SqueezeOp::create(ctx.builder(), ctx.loc(), x, axes);
      });
}

LogicalResult convertExpand(NodeContext &ctx) {
  FailureOr<const HostTensor *> shapeT = ctx.requireConst(1, "shape");
  if (failed(shapeT))
    return failure();
  RankedTensorType in = ctx.inputType(0);
  auto shape = nn::broadcastShapes(in.getShape(), (*shapeT)->toInts());
  if (failed(shape))
    return ctx.fail("input shape " + shapeToString(in.getShape()) +
                    " does not broadcast with " +
                    shapeToString((*shapeT)->toInts()));
  return foldOrBuild(
      ctx, [&](const HostTensor &c) { return hostExpand(c, *shape); },
      [&](Value x) -> Value {
        if (ArrayRef(*shape) == in.getShape())
          return x;
        return nn::ExpandOp::create(ctx.builder(), ctx.loc(), in.clone(*shape),
                                    x);
      });
}

LogicalResult convertTranspose(NodeContext &ctx) {
  RankedTensorType in = ctx.inputType(0);
  SmallVector<int64_t> perm;
  if (auto p = ctx.intsAttr("perm"))
    perm = *p;
  else
    for (int64_t i = in.getRank() - 1; i >= 0; --i)
      perm.push_back(i);
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  for (auto [i, p] : llvm::enumerate(sorted))
    if (p != static_cast<int64_t>(i) ||
        static_cast<int64_t>(perm.size()) != in.getRank())
      return ctx.fail("perm " + shapeToString(perm) +
                      " is not a permutation of rank " +
                      llvm::Twine(in.getRank()));
  return foldOrBuild(
      ctx, [&](const HostTensor &c) { return hostTranspose(c, perm); },
      [&](Value x) {
        return nn::TransposeOp::create(ctx.builder(), ctx.loc(), x, perm);
      });
}

LogicalResult convertSplit(NodeContext &ctx) {
  RankedTensorType in = ctx.inputType(0);
  FailureOr<int64_t> axis = axisAttr(ctx, 0, in.getRank());
  if (failed(axis))
    return failure();
  int64_t dim = in.getDimSize(*axis);
  unsigned n = ctx.numOutputs();
  SmallVector<int64_t> sizes;
  if (ctx.hasInput(1)) {
    FailureOr<const HostTensor *> t = ctx.requireConst(1, "split");
    if (failed(t))
      return failure();
    sizes = (*t)->toInts();
  } else if (ctx.version() >= 18 && ctx.attr("num_outputs")) {
    int64_t parts = ctx.intAttr("num_outputs", 0);
    if (parts != n)
      return ctx.fail("num_outputs " + llvm::Twine(parts) + " differs from " +
                      llvm::Twine(n) + " outputs");
    int64_t chunk = (dim + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::min(chunk, dim - i * chunk));
  } else {
    if (dim % n != 0)
      return ctx.fail("dim " + llvm::Twine(dim) + " does not split evenly " +
                      "into " + llvm::Twine(n) + " outputs");
    sizes.assign(n, dim / n);
  }
  int64_t total = 0;
  bool negative = false;
  for (int64_t s : sizes) {
    total += s;
    negative |= s < 0;
  }
  if (sizes.size() != n || total != dim || negative)
    return ctx.fail("split sizes " + shapeToString(sizes) +
                    " do not divide dim " + llvm::Twine(dim) + " into " +
                    llvm::Twine(n) + " outputs");
  if (const HostTensor *c = ctx.constInput(0)) {
    int64_t offset = 0;
    for (unsigned i = 0; i < n; ++i) {
      SliceSpec spec;
      spec.offsets.assign(in.getRank(), 0);
      spec.strides.assign(in.getRank(), 1);
      spec.counts.assign(in.getShape().begin(), in.getShape().end());
      spec.offsets[*axis] = offset;
      spec.counts[*axis] = sizes[i];
      offset += sizes[i];
      ctx.setOutput(i, hostSlice(*c, spec));
    }
    return success();
  }
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  SmallVector<Type> types;
  for (int64_t s : sizes) {
    SmallVector<int64_t> shape(in.getShape());
    shape[*axis] = s;
    types.push_back(in.clone(shape));
  }
  auto split = nn::SplitOp::create(ctx.builder(), ctx.loc(), types, *x,
                                   ctx.builder().getI64IntegerAttr(*axis));
  for (unsigned i = 0; i < n; ++i)
    ctx.setOutput(i, split.getResult(i));
  return success();
}

LogicalResult convertIdentity(NodeContext &ctx) {
  ctx.forwardInput(0, 0, /*aliasParam=*/true);
  return success();
}

LogicalResult convertDropout(NodeContext &ctx) {
  bool training = false;
  if (ctx.hasInput(2)) {
    FailureOr<const HostTensor *> t = ctx.requireConst(2, "training_mode");
    if (failed(t))
      return failure();
    if ((*t)->size() != 1)
      return ctx.fail("training_mode must be a scalar");
    training = (*t)->intAt(0) != 0;
  }
  double ratio = 0.5;
  if (ctx.hasInput(1)) {
    FailureOr<const HostTensor *> r = ctx.requireConst(1, "ratio");
    if (failed(r))
      return failure();
    if ((*r)->size() != 1)
      return ctx.fail("ratio must be a scalar");
    ratio = (*r)->floatAt(0);
  }
  // Inference, or training with ratio 0 (nothing dropped): the identity,
  // the mask all true.
  if (!training || ratio == 0) {
    ctx.forwardInput(0, 0, /*aliasParam=*/false);
    if (ctx.outputUsed(1)) {
      RankedTensorType type = ctx.inputType(0);
      ctx.setOutput(1, HostTensor::ofInts(
                           DType::Bool, type.getShape(),
                           std::vector<int64_t>(type.getNumElements(), 1)));
    }
    return success();
  }
  if (!ctx.training())
    return ctx.fail("training_mode = true with ratio > 0 drops at random, "
                    "which only training programs do (export the model in "
                    "eval mode)");
  if (!(ratio > 0 && ratio < 1)) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", ratio);
    return ctx.fail("ratio must be in [0, 1), got " + std::string(text));
  }
  if (ctx.outputUsed(1))
    return ctx.fail("the mask output of a training-mode Dropout is not "
                    "supported (only its data output)");
  if (!isa<FloatType>(ctx.inputType(0).getElementType()))
    return ctx.fail("training-mode Dropout of a non-float tensor");
  // Sites are numbered in graph order: the same under every plan.
  Block *block = ctx.builder().getInsertionBlock();
  int64_t site = 0;
  block->getParentOp()->walk([&](nn::DropoutOp) { ++site; });
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  ctx.setOutput(
      0, nn::DropoutOp::create(ctx.builder(), ctx.loc(), *x, ratio, site));
  return success();
}

} // namespace autopar::onnx_import
