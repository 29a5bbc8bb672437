//===- ConvertIndexing.cpp - indexing and data movement converters --------===//
//
// Gather, GatherElements (a one-hot select), Tile, Slice, Concat, Pad
// (constant, edge and reflect), CumSum (log2(n) shifted adds) and ScatterND
// (a gather and a where). Constant inputs fold on the host.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ConvertersImpl.h"

#include "dialects/nn/NNOps.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;
using namespace autopar;

namespace autopar::onnx_import {

LogicalResult convertGather(NodeContext &ctx) {
  RankedTensorType data = ctx.inputType(0);
  FailureOr<int64_t> axis = axisAttr(ctx, 0, data.getRank());
  if (failed(axis))
    return failure();
  if (ctx.allInputsConstant())
    return setHost(ctx, hostGather(*ctx.constInput(0), *ctx.constInput(1),
                                   *axis));
  FailureOr<Value> d = ctx.input(0);
  if (failed(d))
    return failure();
  Value indices;
  if (const HostTensor *c = ctx.constInput(1)) {
    // Constant indices: check and normalize them here.
    HostTensor norm = *c;
    int64_t dim = data.getDimSize(*axis);
    for (int64_t i = 0; i < norm.size(); ++i) {
      int64_t v = norm.intAt(i);
      if (v < -dim || v >= dim)
        return ctx.fail("index " + llvm::Twine(v) +
                        " is out of range for a dim of size " +
                        llvm::Twine(dim));
      norm.setInt(i, v < 0 ? v + dim : v);
    }
    indices = nn::ConstantOp::create(ctx.builder(), ctx.loc(),
                                     norm.toAttr(ctx.builder().getContext()));
  } else {
    FailureOr<Value> i = ctx.input(1);
    if (failed(i))
      return failure();
    indices = *i;
  }
  ctx.setOutput(0,
                nn::GatherOp::create(ctx.builder(), ctx.loc(), *d, indices,
                                     *axis));
  return success();
}

/// GatherElements as a one-hot select: out[i] = sum over c of
/// (index[i] == c ? data'[i, c] : 0), data' being data with `axis` moved
/// last (so autodiff scatters the gradient back by the same select). Needs
/// indices of data's shape off `axis`; builds an index-shape x C tensor.
LogicalResult convertGatherElements(NodeContext &ctx) {
  RankedTensorType data = ctx.inputType(0), indices = ctx.inputType(1);
  int64_t rank = data.getRank();
  FailureOr<int64_t> axis = axisAttr(ctx, 0, rank);
  if (failed(axis))
    return failure();
  Type et = data.getElementType();
  // Its sum runs on float32, bfloat16 and float16.
  if (!isa<FloatType>(et) || et.isF64())
    return ctx.fail("element type " + typeString(et) + " is not supported");
  if (indices.getRank() != rank)
    return ctx.fail("indices have rank " + llvm::Twine(indices.getRank()) +
                    ", data rank " + llvm::Twine(rank));
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis && indices.getDimSize(d) != data.getDimSize(d))
      return ctx.fail("indices shape " + shapeToString(indices.getShape()) +
                      " differs from data shape " +
                      shapeToString(data.getShape()) +
                      " off the axis (not supported)");
  FailureOr<Value> x = ctx.input(0), i = ctx.input(1);
  if (failed(x) || failed(i))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  int64_t classes = data.getDimSize(*axis);
  Type it = indices.getElementType();
  Value index = wrapNegative(b, loc, *i, classes);
  SmallVector<int64_t> iotaShape(rank + 1, 1);
  iotaShape[rank] = classes;
  HostTensor iota = HostTensor::zeros(mlirToDType(it), iotaShape);
  for (int64_t c = 0; c < classes; ++c)
    iota.setInt(c, c);
  Value onehot = nn::CompareOp::create(
      b, loc, nn::ComparePredicate::eq,
      nn::UnsqueezeOp::create(b, loc, index, ArrayRef<int64_t>{rank}),
      nn::ConstantOp::create(b, loc, iota.toAttr(b.getContext())));
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis)
      perm.push_back(d);
  perm.push_back(*axis);
  Value moved = *axis == rank - 1
                    ? *x
                    : Value(nn::TransposeOp::create(b, loc, *x, perm));
  moved = nn::UnsqueezeOp::create(b, loc, moved, ArrayRef<int64_t>{*axis});
  Value picked = nn::WhereOp::create(b, loc, onehot, moved,
                                     scalarConstant(b, loc, et, 0));
  ctx.setOutput(0, nn::ReduceSumOp::create(b, loc, picked, {rank}, false));
  return success();
}

/// Tile: along each repeated axis d, the input seen as [1, n] expanded to
/// [r, n] and read as r * n (reshape, expand, reshape: autodiff sums the
/// copies' gradients).
LogicalResult convertTile(NodeContext &ctx) {
  FailureOr<const HostTensor *> repeatsT = ctx.requireConst(1, "repeats");
  if (failed(repeatsT))
    return failure();
  RankedTensorType in = ctx.inputType(0);
  SmallVector<int64_t> repeats = (*repeatsT)->toInts();
  if (int64_t(repeats.size()) != in.getRank() ||
      llvm::any_of(repeats, [](int64_t r) { return r < 0; }))
    return ctx.fail("repeats " + shapeToString(repeats) +
                    " is not one count >= 0 per dim of " +
                    shapeToString(in.getShape()));
  const HostTensor *c = ctx.constInput(0);
  std::optional<HostTensor> host;
  Value v;
  if (c) {
    host = *c;
  } else {
    FailureOr<Value> x = ctx.input(0);
    if (failed(x))
      return failure();
    v = *x;
  }
  SmallVector<int64_t> shape(in.getShape());
  OpBuilder &b = ctx.builder();
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (repeats[d] == 1)
      continue;
    SmallVector<int64_t> split(shape), wide(shape), out(shape);
    split.insert(split.begin() + d, 1);
    wide.insert(wide.begin() + d, repeats[d]);
    out[d] *= repeats[d];
    if (host) {
      llvm::Expected<HostTensor> e =
          hostExpand(hostReshape(*host, split), wide);
      if (!e)
        return failWith(ctx, e.takeError());
      host = hostReshape(*e, out);
    } else {
      Type et = in.getElementType();
      Value r = nn::ReshapeOp::create(b, ctx.loc(),
                                      RankedTensorType::get(split, et), v);
      r = nn::ExpandOp::create(b, ctx.loc(), RankedTensorType::get(wide, et),
                               r);
      v = nn::ReshapeOp::create(b, ctx.loc(), RankedTensorType::get(out, et),
                                r);
    }
    shape = out;
  }
  if (host)
    ctx.setOutput(0, std::move(*host));
  else
    ctx.setOutput(0, v);
  return success();
}

LogicalResult convertSlice(NodeContext &ctx) {
  SmallVector<int64_t> args[4];
  const char *names[] = {"starts", "ends", "axes", "steps"};
  for (unsigned i = 0; i < 4; ++i) {
    if (!ctx.hasInput(i + 1))
      continue;
    FailureOr<const HostTensor *> t = ctx.requireConst(i + 1, names[i]);
    if (failed(t))
      return failure();
    args[i] = (*t)->toInts();
  }
  RankedTensorType in = ctx.inputType(0);
  llvm::Expected<SliceSpec> spec =
      computeSlice(in.getShape(), args[0], args[1], args[2], args[3]);
  if (!spec)
    return failWith(ctx, spec.takeError());
  return foldOrBuild(
      ctx, [&](const HostTensor &c) { return hostSlice(c, *spec); },
      [&](Value x) -> Value {
        if (ArrayRef(spec->counts) == in.getShape() &&
            llvm::all_of(spec->strides, [](int64_t s) { return s == 1; }))
          return x;
        OpBuilder &b = ctx.builder();
        return nn::SliceOp::create(b, ctx.loc(), in.clone(spec->counts), x,
                                   b.getDenseI64ArrayAttr(spec->offsets),
                                   b.getDenseI64ArrayAttr(spec->strides));
      });
}

LogicalResult convertConcat(NodeContext &ctx) {
  RankedTensorType first = ctx.inputType(0);
  FailureOr<int64_t> axis = axisAttr(ctx, 0, first.getRank());
  if (failed(axis))
    return failure();
  for (unsigned i = 1; i < ctx.numInputs(); ++i) {
    RankedTensorType t = ctx.inputType(i);
    bool ok = t.getRank() == first.getRank() &&
              t.getElementType() == first.getElementType();
    for (int64_t d = 0; ok && d < t.getRank(); ++d)
      ok = d == *axis || t.getDimSize(d) == first.getDimSize(d);
    if (!ok)
      return ctx.fail("input #" + llvm::Twine(i) + " " +
                      shapeToString(t.getShape()) +
                      " does not concatenate with " +
                      shapeToString(first.getShape()) + " along axis " +
                      llvm::Twine(*axis));
  }
  if (ctx.allInputsConstant()) {
    SmallVector<const HostTensor *> parts;
    for (unsigned i = 0; i < ctx.numInputs(); ++i)
      parts.push_back(ctx.constInput(i));
    ctx.setOutput(0, hostConcat(parts, *axis));
    return success();
  }
  SmallVector<Value> inputs;
  for (unsigned i = 0; i < ctx.numInputs(); ++i) {
    if (ctx.inputType(i).getDimSize(*axis) == 0)
      continue;
    FailureOr<Value> v = ctx.input(i);
    if (failed(v))
      return failure();
    inputs.push_back(*v);
  }
  ctx.setOutput(0,
                nn::ConcatOp::create(ctx.builder(), ctx.loc(), inputs, *axis));
  return success();
}

/// Pad: negative pads crop (a slice); positive ones, axis by axis, add
/// blocks of the constant value on each side (constant mode: a concat) or
/// gather the input's border (edge: the nearest element; reflect: the
/// mirror image without the border, numpy's reflect) along the axis by
/// constant indices. Autodiff and both targets take the slices, concats
/// and gathers as they are.
LogicalResult convertPad(NodeContext &ctx) {
  std::string mode = ctx.stringAttr("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    return ctx.fail("mode '" + mode +
                    "' is not supported (constant, edge or reflect)");
  RankedTensorType in = ctx.inputType(0);
  const int64_t rank = in.getRank();
  FailureOr<const HostTensor *> padsInput = ctx.requireConst(1, "pads");
  if (failed(padsInput))
    return failure();
  SmallVector<int64_t> pads = (*padsInput)->toInts();
  SmallVector<int64_t> axes;
  if (ctx.version() >= 18 && ctx.hasInput(3)) {
    FailureOr<const HostTensor *> a = ctx.requireConst(3, "axes");
    if (failed(a))
      return failure();
    for (int64_t axis : (*a)->toInts()) {
      int64_t norm = axis < 0 ? axis + rank : axis;
      if (norm < 0 || norm >= rank || llvm::is_contained(axes, norm))
        return ctx.fail("axes " + shapeToString((*a)->toInts()) +
                        " are not distinct axes of rank " + llvm::Twine(rank));
      axes.push_back(norm);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size())
    return ctx.fail("pads has " + llvm::Twine(pads.size()) +
                    " values, expected 2 x " + llvm::Twine(axes.size()));
  double value = 0;
  if (ctx.hasInput(2)) {
    FailureOr<const HostTensor *> v = requireOneValue(ctx, 2, "constant_value");
    if (failed(v))
      return failure();
    value = (*v)->floatAt(0);
  }
  SmallVector<int64_t> begin(rank, 0), end(rank, 0), shape(in.getShape());
  for (auto [k, axis] : llvm::enumerate(axes)) {
    begin[axis] = pads[k];
    end[axis] = pads[k + axes.size()];
    if (shape[axis] + begin[axis] + end[axis] < 0)
      return ctx.fail("pads " + shapeToString(pads) + " crop axis " +
                      llvm::Twine(axis) + " of " +
                      shapeToString(in.getShape()) + " below 0");
  }
  const DType dtype = mlirToDType(in.getElementType());
  // A block of the constant value.
  auto filled = [&](ArrayRef<int64_t> blockShape) {
    HostTensor t = HostTensor::zeros(dtype, blockShape);
    for (int64_t i = 0; i < t.size(); ++i)
      t.set(i, value);
    return t;
  };
  // Crop first (negative pads), then add the blocks.
  SliceSpec crop;
  crop.strides.assign(rank, 1);
  for (int64_t d = 0; d < rank; ++d) {
    crop.offsets.push_back(std::max<int64_t>(0, -begin[d]));
    crop.counts.push_back(shape[d] - std::max<int64_t>(0, -begin[d]) -
                          std::max<int64_t>(0, -end[d]));
  }
  // Edge and reflect: the indices along `axis` of the padded result, in
  // the cropped input of `n` elements.
  auto borderIndices = [&](int64_t d, int64_t n) {
    std::vector<int64_t> idx;
    for (int64_t i = -std::max<int64_t>(0, begin[d]);
         i < n + std::max<int64_t>(0, end[d]); ++i) {
      int64_t j = i;
      if (mode == "edge" || n == 1) {
        j = std::clamp<int64_t>(i, 0, n - 1);
      } else {
        const int64_t period = 2 * (n - 1);
        j = ((i % period) + period) % period;
        if (j >= n)
          j = period - j;
      }
      idx.push_back(j);
    }
    return HostTensor::ofInts(DType::Int64, {int64_t(idx.size())}, idx);
  };
  const bool gathers = mode != "constant";
  for (int64_t d = 0; d < rank; ++d)
    if (gathers && (begin[d] > 0 || end[d] > 0) && crop.counts[d] == 0)
      return ctx.fail("mode '" + mode + "' pads axis " + llvm::Twine(d) +
                      ", which has no elements");
  if (const HostTensor *c = ctx.constInput(0)) {
    HostTensor t = hostSlice(*c, crop);
    for (int64_t d = 0; gathers && d < rank; ++d)
      if (begin[d] > 0 || end[d] > 0) {
        llvm::Expected<HostTensor> g =
            hostGather(t, borderIndices(d, t.shape[d]), d);
        if (!g)
          return failWith(ctx, g.takeError());
        t = std::move(*g);
      }
    for (int64_t d = 0; !gathers && d < rank; ++d) {
      SmallVector<int64_t> blockShape(t.shape);
      SmallVector<const HostTensor *> parts;
      HostTensor before, after;
      if (begin[d] > 0) {
        blockShape[d] = begin[d];
        before = filled(blockShape);
        parts.push_back(&before);
      }
      parts.push_back(&t);
      if (end[d] > 0) {
        blockShape[d] = end[d];
        after = filled(blockShape);
        parts.push_back(&after);
      }
      if (parts.size() > 1)
        t = hostConcat(parts, d);
    }
    ctx.setOutput(0, std::move(t));
    return success();
  }
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  OpBuilder &b = ctx.builder();
  Value v = *x;
  if (ArrayRef(crop.counts) != in.getShape())
    v = nn::SliceOp::create(b, ctx.loc(), in.clone(crop.counts), v,
                            b.getDenseI64ArrayAttr(crop.offsets),
                            b.getDenseI64ArrayAttr(crop.strides));
  for (int64_t d = 0; gathers && d < rank; ++d) {
    if (begin[d] <= 0 && end[d] <= 0)
      continue;
    const int64_t n = cast<RankedTensorType>(v.getType()).getDimSize(d);
    Value idx = nn::ConstantOp::create(
        b, ctx.loc(), borderIndices(d, n).toAttr(b.getContext()));
    v = nn::GatherOp::create(b, ctx.loc(), v, idx, d);
  }
  for (int64_t d = 0; !gathers && d < rank; ++d) {
    SmallVector<Value> parts;
    SmallVector<int64_t> blockShape(
        cast<RankedTensorType>(v.getType()).getShape());
    if (begin[d] > 0) {
      blockShape[d] = begin[d];
      parts.push_back(nn::ConstantOp::create(
          b, ctx.loc(), filled(blockShape).toAttr(b.getContext())));
    }
    parts.push_back(v);
    if (end[d] > 0) {
      blockShape[d] = end[d];
      parts.push_back(nn::ConstantOp::create(
          b, ctx.loc(), filled(blockShape).toAttr(b.getContext())));
    }
    if (parts.size() > 1)
      v = nn::ConcatOp::create(b, ctx.loc(), parts, d);
  }
  ctx.setOutput(0, v);
  return success();
}

/// CumSum: on constants, folded; at run time, log2(n) steps of
/// y += y shifted by 1, 2, 4, ... along the axis (a slice concatenated with
/// zeros): exact for integers, differentiable for floats, no n x n matrix.
LogicalResult convertCumSum(NodeContext &ctx) {
  RankedTensorType in = ctx.inputType(0);
  if (in.getElementType().isInteger(1))
    return ctx.fail("bool input is not supported");
  FailureOr<const HostTensor *> axisT = requireOneValue(ctx, 1, "axis");
  if (failed(axisT))
    return failure();
  llvm::Expected<int64_t> axis =
      normalizeAxis((*axisT)->intAt(0), in.getRank());
  if (!axis)
    return failWith(ctx, axis.takeError());
  const bool exclusive = ctx.intAttr("exclusive", 0) != 0;
  const bool reverse = ctx.intAttr("reverse", 0) != 0;
  const int64_t n = in.getDimSize(*axis);
  if (const HostTensor *c = ctx.constInput(0)) {
    HostTensor out = *c;
    int64_t inner = 1;
    for (int64_t d = *axis + 1; d < in.getRank(); ++d)
      inner *= in.getDimSize(d);
    const int64_t outer = n == 0 ? 0 : c->size() / (n * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t e = 0; e < inner; ++e) {
        double fsum = 0;
        int64_t isum = 0;
        for (int64_t k = 0; k < n; ++k) {
          int64_t j = reverse ? n - 1 - k : k;
          int64_t at = (o * n + j) * inner + e;
          if (exclusive)
            c->isFloat() ? out.set(at, fsum) : out.setInt(at, isum);
          fsum += c->floatAt(at);
          isum += c->intAt(at);
          if (!exclusive)
            c->isFloat() ? out.set(at, fsum) : out.setInt(at, isum);
        }
      }
    ctx.setOutput(0, std::move(out));
    return success();
  }
  FailureOr<Value> x = ctx.input(0);
  if (failed(x))
    return failure();
  OpBuilder &b = ctx.builder();
  DType dtype = mlirToDType(in.getElementType());
  // y shifted by `s` along the axis toward the summing direction, zeros
  // coming in.
  auto shifted = [&](Value y, int64_t s) -> Value {
    SmallVector<int64_t> offsets(in.getRank(), 0), strides(in.getRank(), 1);
    SmallVector<int64_t> kept(in.getShape()), zeros(in.getShape());
    kept[*axis] = n - s;
    zeros[*axis] = s;
    if (reverse)
      offsets[*axis] = s;
    Value part = nn::SliceOp::create(b, ctx.loc(), in.clone(kept), y,
                                     b.getDenseI64ArrayAttr(offsets),
                                     b.getDenseI64ArrayAttr(strides));
    Value pad = nn::ConstantOp::create(
        b, ctx.loc(), HostTensor::zeros(dtype, zeros).toAttr(b.getContext()));
    SmallVector<Value> parts =
        reverse ? SmallVector<Value>{part, pad} : SmallVector<Value>{pad, part};
    return nn::ConcatOp::create(b, ctx.loc(), parts, *axis);
  };
  Value y = *x;
  for (int64_t s = 1; s < n; s *= 2)
    y = nn::AddOp::create(b, ctx.loc(), y, shifted(y, s));
  if (exclusive && n > 0)
    y = shifted(y, 1);
  ctx.setOutput(0, y);
  return success();
}

/// ScatterND (reduction "none") with constant indices: each element of the
/// result comes from `updates` where an index tuple covers it (the last
/// tuple that does), from `data` elsewhere: where(covered, gather(updates
/// flattened, source), data), so both get their gradients.
LogicalResult convertScatterND(NodeContext &ctx) {
  if (ctx.stringAttr("reduction", "none") != "none")
    return ctx.fail("reduction '" + ctx.stringAttr("reduction", "none") +
                    "' is not supported (only \"none\")");
  RankedTensorType dataType = ctx.inputType(0), updType = ctx.inputType(2);
  FailureOr<const HostTensor *> idxT = ctx.requireConst(1, "indices");
  if (failed(idxT))
    return failure();
  const HostTensor &idx = **idxT;
  const int64_t rank = dataType.getRank();
  if (idx.shape.empty() || idx.shape.back() < 1 || idx.shape.back() > rank)
    return ctx.fail("indices " + shapeToString(idx.shape) +
                    " must end in a dim of 1 to the data's rank " +
                    llvm::Twine(rank));
  const int64_t k = idx.shape.back();
  SmallVector<int64_t> expected(idx.shape.begin(), idx.shape.end() - 1);
  expected.append(dataType.getShape().begin() + k, dataType.getShape().end());
  if (ArrayRef(expected) != updType.getShape() ||
      dataType.getElementType() != updType.getElementType())
    return ctx.fail("updates " + shapeToString(updType.getShape()) +
                    " do not match indices " + shapeToString(idx.shape) +
                    " and data " + shapeToString(dataType.getShape()) +
                    " (expected " + shapeToString(expected) + ")");
  int64_t inner = 1;
  for (int64_t d = k; d < rank; ++d)
    inner *= dataType.getDimSize(d);
  const int64_t tuples = k == 0 ? 0 : idx.size() / k;
  // source[p]: the element of the flattened updates that lands at data
  // position p, or -1.
  std::vector<int64_t> source(numElements(dataType.getShape()), -1);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t dim = dataType.getDimSize(d), i = idx.intAt(t * k + d);
      if (i < -dim || i >= dim)
        return ctx.fail("index " + llvm::Twine(i) +
                        " is out of range for dim " + llvm::Twine(d) +
                        " of size " + llvm::Twine(dim));
      offset = offset * dim + (i < 0 ? i + dim : i);
    }
    for (int64_t e = 0; e < inner; ++e)
      source[offset * inner + e] = t * inner + e;
  }
  if (ctx.allInputsConstant()) {
    HostTensor out = *ctx.constInput(0);
    const HostTensor &upd = *ctx.constInput(2);
    for (size_t p = 0; p < source.size(); ++p)
      if (source[p] >= 0)
        upd.isFloat() ? out.set(p, upd.floatAt(source[p]))
                      : out.setInt(p, upd.intAt(source[p]));
    ctx.setOutput(0, std::move(out));
    return success();
  }
  FailureOr<Value> data = ctx.input(0), updates = ctx.input(2);
  if (failed(data) || failed(updates))
    return failure();
  OpBuilder &b = ctx.builder();
  SmallVector<int64_t> dataShape(dataType.getShape());
  HostTensor covered = HostTensor::zeros(DType::Bool, dataShape);
  HostTensor from = HostTensor::zeros(DType::Int64, dataShape);
  for (size_t p = 0; p < source.size(); ++p) {
    covered.setInt(p, source[p] >= 0);
    from.setInt(p, std::max<int64_t>(source[p], 0));
  }
  Value flat =
      nn::ReshapeOp::create(b, ctx.loc(),
                            RankedTensorType::get({updType.getNumElements()},
                                                  updType.getElementType()),
                            *updates);
  Value gathered = nn::GatherOp::create(
      b, ctx.loc(), flat,
      nn::ConstantOp::create(b, ctx.loc(), from.toAttr(b.getContext())), 0);
  ctx.setOutput(
      0, nn::WhereOp::create(b, ctx.loc(),
                             nn::ConstantOp::create(
                                 b, ctx.loc(), covered.toAttr(b.getContext())),
                             gathered, *data));
  return success();
}

} // namespace autopar::onnx_import
