#!/usr/bin/python3
"""ONNX ops as torch functions, for the PyTorch reference trainer
(torch_ref.py): OPS maps an op type to fn(inputs, attrs, n_outputs) and the
attributes it accepts. docs/ops.md lists the ops; check_torch_ref_ops.py
checks each against onnx's reference implementation."""
import numpy as np
import torch
import torch.nn.functional as F
from onnx import TensorProto, numpy_helper

import dropout_reference


TORCH_DTYPES = {
    TensorProto.FLOAT: torch.float32,
    TensorProto.DOUBLE: torch.float64,
    TensorProto.FLOAT16: torch.float16,
    TensorProto.BFLOAT16: torch.bfloat16,
    TensorProto.INT8: torch.int8,
    TensorProto.INT16: torch.int16,
    TensorProto.INT32: torch.int32,
    TensorProto.INT64: torch.int64,
    TensorProto.UINT8: torch.uint8,
    TensorProto.BOOL: torch.bool,
}


class RefError(Exception):
    """A bad model, plan or data file, or a model this reference cannot run."""


def torch_dtype(elem_type):
    """The torch dtype of an ONNX element type."""
    if elem_type not in TORCH_DTYPES:
        raise RefError(f"unsupported element type {TensorProto.DataType.Name(elem_type)}")
    return TORCH_DTYPES[elem_type]


def tensor_from_proto(proto):
    """An ONNX TensorProto as a torch tensor of the same element type."""
    array = np.array(numpy_helper.to_array(proto))  # writable copy
    return torch.from_numpy(array).to(torch_dtype(proto.data_type))



# --------------------------------------------------------------------------
# ONNX ops as torch functions: fn(inputs, attrs, n_outputs) -> tensor or tuple.
# inputs holds None for omitted optional inputs; attrs is the node's
# attributes as Python values (tensor attributes as torch tensors).
# --------------------------------------------------------------------------
OPS = {}


def op(name, attrs=()):
    """Register an op implementation with the attributes it accepts."""
    def register(fn):
        OPS[name] = (fn, frozenset(attrs))
        return fn
    return register


def optional_input(inputs, i):
    """Input i of a node, or None when it is absent or empty."""
    return inputs[i] if len(inputs) > i else None


def int_list(tensor):
    """A constant integer tensor (shape, axes, ...) as a list of Python ints."""
    return [int(v) for v in tensor.reshape(-1).tolist()]


def normalize_axis(axis, rank):
    """An ONNX axis (negative counts from the end) as a non-negative index."""
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _register_elementwise():
    # Activations through torch's own functions (their gradients are the
    # ones PyTorch trains with).
    unary = {"Cos": torch.cos, "Sin": torch.sin, "Not": torch.logical_not,
             "Abs": torch.abs, "Softplus": F.softplus, "Softsign": F.softsign,
             "Mish": F.mish, "HardSwish": F.hardswish,
             "Erf": torch.erf, "Exp": torch.exp, "Log": torch.log, "Neg": torch.neg,
             "Reciprocal": torch.reciprocal, "Relu": torch.relu, "Sigmoid": torch.sigmoid,
             "Sqrt": torch.sqrt, "Tanh": torch.tanh}
    binary = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "MatMul": torch.matmul,
              "Equal": torch.eq, "Greater": torch.gt, "GreaterOrEqual": torch.ge,
              "Less": torch.lt, "LessOrEqual": torch.le}
    for name, fn in unary.items():
        op(name)(lambda ins, attrs, n_out, fn=fn: fn(ins[0]))
    for name, fn in binary.items():
        op(name)(lambda ins, attrs, n_out, fn=fn: fn(ins[0], ins[1]))


_register_elementwise()


# Activations with attributes through torch's functions; ONNX attributes
# away from torch's fixed constants through the ONNX formula.
@op("LeakyRelu", ("alpha",))
def _leaky_relu(ins, attrs, n_out):
    return F.leaky_relu(ins[0], attrs.get("alpha", 0.01))


@op("PRelu")
def _prelu(ins, attrs, n_out):
    x, slope = ins
    return torch.where(x > 0, x, slope * x)


@op("Elu", ("alpha",))
def _elu(ins, attrs, n_out):
    return F.elu(ins[0], attrs.get("alpha", 1.0))


@op("Celu", ("alpha",))
def _celu(ins, attrs, n_out):
    return F.celu(ins[0], attrs.get("alpha", 1.0))


@op("Selu", ("alpha", "gamma"))
def _selu(ins, attrs, n_out):
    alpha = attrs.get("alpha", 1.6732632423543772)
    gamma = attrs.get("gamma", 1.0507009873554805)
    if (abs(alpha - 1.6732632423543772) < 1e-6 and
            abs(gamma - 1.0507009873554805) < 1e-6):
        return F.selu(ins[0])
    return gamma * F.elu(ins[0], alpha)


@op("ThresholdedRelu", ("alpha",))
def _thresholded_relu(ins, attrs, n_out):
    x = ins[0]
    return torch.where(x > attrs.get("alpha", 1.0), x, torch.zeros_like(x))


@op("HardSigmoid", ("alpha", "beta"))
def _hard_sigmoid(ins, attrs, n_out):
    alpha, beta = attrs.get("alpha", 0.2), attrs.get("beta", 0.5)
    if abs(alpha - 1.0 / 6.0) < 1e-7 and beta == 0.5:
        return F.hardsigmoid(ins[0])
    return torch.clamp(alpha * ins[0] + beta, 0.0, 1.0)


@op("Clip")
def _clip(ins, attrs, n_out):
    x, lo, hi = ins[0], optional_input(ins, 1), optional_input(ins, 2)
    if lo is not None:
        x = torch.maximum(x, lo)
    if hi is not None:
        x = torch.minimum(x, hi)
    return x


@op("Einsum", ("equation",))
def _einsum(ins, attrs, n_out):
    equation = attrs["equation"]
    if isinstance(equation, bytes):
        equation = equation.decode()
    return torch.einsum(equation, *ins)


@op("Trilu", ("upper",))
def _trilu(ins, attrs, n_out):
    x, k = ins[0], optional_input(ins, 1)
    k = int(k.item()) if k is not None else 0
    return torch.triu(x, k) if attrs.get("upper", 1) else torch.tril(x, k)


@op("OneHot", ("axis",))
def _one_hot(ins, attrs, n_out):
    indices, depth, values = ins
    depth = int(depth.item())
    index = indices.long()
    index = torch.where(index < 0, index + depth, index)
    classes = torch.arange(depth)
    axis = normalize_axis(attrs.get("axis", -1), indices.dim() + 1)
    shape = [1] * (indices.dim() + 1)
    shape[axis] = depth
    hot = index.unsqueeze(axis) == classes.reshape(shape)
    return torch.where(hot, values[1], values[0])


@op("ReduceLogSumExp", ("axes", "keepdims", "noop_with_empty_axes"))
def _reduce_log_sum_exp(ins, attrs, n_out):
    x = ins[0]
    axes = attrs.get("axes")
    if axes is None and optional_input(ins, 1) is not None:
        axes = int_list(ins[1])
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return x
        axes = list(range(x.dim()))
    return torch.logsumexp(x, dim=[normalize_axis(a, x.dim()) for a in axes],
                           keepdim=bool(attrs.get("keepdims", 1)))


@op("GatherElements", ("axis",))
def _gather_elements(ins, attrs, n_out):
    data, index = ins
    axis = normalize_axis(attrs.get("axis", 0), data.dim())
    index = index.long()
    index = torch.where(index < 0, index + data.shape[axis], index)
    return torch.gather(data, axis, index)


@op("Div")
def _div(ins, attrs, n_out):
    a, b = ins
    if a.is_floating_point():
        return a / b
    return torch.div(a, b, rounding_mode="trunc")  # ONNX integer division truncates


@op("Pow")
def _pow(ins, attrs, n_out):
    base, exponent = ins
    return torch.pow(base, exponent.to(base.dtype))


@op("Where")
def _where(ins, attrs, n_out):
    cond, x, y = ins
    return torch.where(cond.to(torch.bool), x, y)


@op("Identity")
def _identity(ins, attrs, n_out):
    return ins[0]


class DropoutState:
    """What training-mode Dropout draws its mask from: the run's seed, the
    step and micro-batch in progress (set by the trainer), the site (the
    node's number among the graph's training-mode Dropouts with a ratio
    above 0, counted by the graph run) and the plan's dropout.ratio (None:
    each node's own)."""
    seed = 0
    step = 0
    micro = 0
    site = 0
    ratio = None


DROPOUT = DropoutState()


@op("Dropout", ("seed",))
def _dropout(ins, attrs, n_out):
    x = ins[0]
    training = optional_input(ins, 2)
    given = optional_input(ins, 1)
    ratio = float(given.item()) if given is not None else 0.5
    if training is None or not bool(training.item()) or ratio == 0:
        if n_out > 1:
            return x, torch.ones(x.shape, dtype=torch.bool)
        return x
    site = DROPOUT.site
    DROPOUT.site += 1
    if DROPOUT.ratio is not None:
        ratio = DROPOUT.ratio
    if ratio == 0:
        keep = np.ones(tuple(x.shape), dtype=bool)
    else:
        keep = dropout_reference.keep_mask(tuple(x.shape), DROPOUT.seed, DROPOUT.step,
                                           DROPOUT.micro, site, ratio)
    mask = torch.from_numpy(keep.astype(np.float32) * dropout_reference.scale(ratio))
    y = x * mask.to(x.dtype)
    return (y, torch.from_numpy(keep)) if n_out > 1 else y


@op("Cast", ("to",))
def _cast(ins, attrs, n_out):
    return ins[0].to(torch_dtype(attrs["to"]))


@op("Constant", ("value", "value_float", "value_floats", "value_int", "value_ints"))
def _constant(ins, attrs, n_out):
    if "value" in attrs:
        return attrs["value"]
    if "value_float" in attrs or "value_floats" in attrs:
        return torch.tensor(attrs.get("value_float", attrs.get("value_floats")),
                            dtype=torch.float32)
    if "value_int" in attrs or "value_ints" in attrs:
        return torch.tensor(attrs.get("value_int", attrs.get("value_ints")), dtype=torch.int64)
    raise ValueError("Constant has no value attribute")


@op("ConstantOfShape", ("value",))
def _constant_of_shape(ins, attrs, n_out):
    value = attrs.get("value", torch.zeros(1, dtype=torch.float32))
    return torch.full(int_list(ins[0]), value.reshape(-1)[0].item(), dtype=value.dtype)


@op("Shape", ("start", "end"))
def _shape(ins, attrs, n_out):
    dims = list(ins[0].shape)
    end = attrs.get("end", len(dims))
    return torch.tensor(dims[attrs.get("start", 0):end], dtype=torch.int64)


@op("Range")
def _range(ins, attrs, n_out):
    start, limit, delta = ins
    return torch.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)


@op("Reshape", ("allowzero",))
def _reshape(ins, attrs, n_out):
    x, shape = ins
    dims = int_list(shape)
    if not attrs.get("allowzero", 0):
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return x.reshape(dims)


@op("Transpose", ("perm",))
def _transpose(ins, attrs, n_out):
    x = ins[0]
    return x.permute(attrs.get("perm", list(range(x.dim() - 1, -1, -1))))


@op("Concat", ("axis",))
def _concat(ins, attrs, n_out):
    return torch.cat(ins, dim=attrs["axis"])


@op("Pad", ("mode",))
def _pad(ins, attrs, n_out):
    """ONNX Pad (opsets 13 and 18) with numpy's semantics: negative pads
    crop; constant fills, edge repeats the border, reflect mirrors without
    it (again and again past the axis)."""
    x, pads = ins[0], int_list(ins[1])
    value = optional_input(ins, 2)
    axes = optional_input(ins, 3)
    axes = ([normalize_axis(a, x.dim()) for a in int_list(axes)]
            if axes is not None else list(range(x.dim())))
    mode = attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    for k, axis in enumerate(axes):
        before, after = pads[k], pads[k + len(axes)]
        n = x.shape[axis]
        x = x.narrow(axis, max(0, -before), n - max(0, -before) - max(0, -after))
        before, after, n = max(0, before), max(0, after), x.shape[axis]
        if mode == "constant":
            fill = value.reshape(()).to(x.dtype) if value is not None else \
                torch.zeros((), dtype=x.dtype)
            shape = list(x.shape)
            parts = []
            for width in (before, None, after):
                if width is None:
                    parts.append(x)
                elif width:
                    shape[axis] = width
                    parts.append(fill.expand(shape))
            x = torch.cat(parts, dim=axis)
        else:
            index = []
            for i in range(-before, n + after):
                if mode == "edge" or n == 1:
                    j = min(max(i, 0), n - 1)
                else:
                    period = 2 * (n - 1)
                    j = i % period
                    j = period - j if j >= n else j
                index.append(j)
            x = torch.index_select(x, axis, torch.tensor(index, dtype=torch.int64))
    return x


def _extremum(pick):
    def fn(ins, attrs, n_out):
        out = ins[0]
        for x in ins[1:]:
            out = pick(out, x)
        return out
    return fn


op("Max")(_extremum(torch.maximum))
op("Min")(_extremum(torch.minimum))


@op("Tile")
def _tile(ins, attrs, n_out):
    return ins[0].repeat(*int_list(ins[1]))


@op("Flatten", ("axis",))
def _flatten(ins, attrs, n_out):
    x = ins[0]
    axis = normalize_axis(attrs.get("axis", 1), x.dim() + 1)
    lead = 1
    for d in x.shape[:axis]:
        lead *= d
    return x.reshape(lead, -1) if x.numel() else x.reshape(lead, 0)


@op("Expand")
def _expand(ins, attrs, n_out):
    x, shape = ins
    return x.expand(torch.broadcast_shapes(x.shape, tuple(int_list(shape))))


@op("Gather", ("axis",))
def _gather(ins, attrs, n_out):
    data, indices = ins
    axis = normalize_axis(attrs.get("axis", 0), data.dim())
    dim = data.shape[axis]
    indices = indices.to(torch.int64)
    indices = torch.where(indices < 0, indices + dim, indices)
    out = torch.index_select(data, axis, indices.reshape(-1))
    return out.reshape(data.shape[:axis] + indices.shape + data.shape[axis + 1:])


@op("CumSum", ("exclusive", "reverse"))
def _cumsum(ins, attrs, n_out):
    x, axis = ins
    axis = normalize_axis(int(axis.reshape(-1)[0]), x.dim())
    if attrs.get("reverse", 0):
        x = torch.flip(x, (axis,))
    y = torch.cumsum(x, axis).to(x.dtype)
    if attrs.get("exclusive", 0):
        y = y - x
    if attrs.get("reverse", 0):
        y = torch.flip(y, (axis,))
    return y


@op("TopK", ("axis", "largest", "sorted"))
def _topk(ins, attrs, n_out):
    x, k = ins
    axis = normalize_axis(attrs.get("axis", -1), x.dim())
    values, indices = torch.topk(x, int(k.reshape(-1)[0]), dim=axis,
                                 largest=bool(attrs.get("largest", 1)), sorted=True)
    return values, indices


@op("ScatterND", ("reduction",))
def _scatter_nd(ins, attrs, n_out):
    data, indices, updates = ins
    if attrs.get("reduction", "none") != "none":
        raise ValueError("only reduction none is supported")
    k = indices.shape[-1]
    idx = indices.to(torch.int64).reshape(-1, k)
    idx = torch.where(idx < 0, idx + torch.tensor(data.shape[:k]), idx)
    upd = updates.reshape((-1,) + tuple(data.shape[k:]))
    return data.index_put(tuple(idx[:, d] for d in range(k)), upd)


def padded_gather(row):
    """Gather along axis 0 of a table whose row `row` gets no gradient from
    its lookups (torch's embedding with padding_idx)."""
    def fn(ins, attrs, n_out):
        data, indices = ins
        indices = indices.to(torch.int64)
        indices = torch.where(indices < 0, indices + data.shape[0], indices)
        flat = data.reshape(data.shape[0], -1)
        out = torch.nn.functional.embedding(indices, flat, padding_idx=row)
        return out.reshape(indices.shape + data.shape[1:])
    return fn


@op("Gemm", ("alpha", "beta", "transA", "transB"))
def _gemm(ins, attrs, n_out):
    a, b = ins[0], ins[1]
    c = optional_input(ins, 2)
    if attrs.get("transA", 0):
        a = a.t()
    if attrs.get("transB", 0):
        b = b.t()
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if c is None:
        return alpha * (a @ b)
    return torch.addmm(c, a, b, beta=beta, alpha=alpha)


def _reduce_axes(ins, attrs, rank):
    """The axes of a Reduce op (attribute before opset 18 for Mean and Max,
    input for Sum from 13 and all from 18), or None for 'no reduction'."""
    axes = attrs.get("axes")
    if axes is None and optional_input(ins, 1) is not None:
        axes = int_list(ins[1])
    if not axes:
        return None if attrs.get("noop_with_empty_axes", 0) else list(range(rank))
    return [normalize_axis(a, rank) for a in axes]


def _register_reductions():
    reductions = {"ReduceMean": torch.mean, "ReduceSum": torch.sum, "ReduceMax": torch.amax}
    for name, fn in reductions.items():
        def run(ins, attrs, n_out, fn=fn):
            x = ins[0]
            axes = _reduce_axes(ins, attrs, x.dim())
            if axes is None:
                return x
            return fn(x, dim=axes, keepdim=bool(attrs.get("keepdims", 1)))
        op(name, ("axes", "keepdims", "noop_with_empty_axes"))(run)


_register_reductions()


@op("Split", ("axis", "num_outputs"))
def _split(ins, attrs, n_out):
    x = ins[0]
    axis = normalize_axis(attrs.get("axis", 0), x.dim())
    dim = x.shape[axis]
    split = optional_input(ins, 1)
    if split is not None:
        sizes = int_list(split)
    elif "num_outputs" in attrs:  # opset 18: the last chunk may be smaller
        n = attrs["num_outputs"]
        if n != n_out:
            raise ValueError(f"num_outputs {n} but the node has {n_out} outputs")
        size = -(-dim // n)
        sizes = [size] * (n - 1) + [dim - size * (n - 1)]
    else:
        if dim % n_out:
            raise ValueError(f"dim {dim} does not split evenly into {n_out} outputs")
        sizes = [dim // n_out] * n_out
    if len(sizes) != n_out or sum(sizes) != dim or min(sizes) < 0:
        raise ValueError(f"split sizes {sizes} do not fit dim {dim} and {n_out} outputs")
    return tuple(torch.split(x, sizes, dim=axis))


@op("Squeeze")
def _squeeze(ins, attrs, n_out):
    x = ins[0]
    axes = optional_input(ins, 1)
    if axes is None:
        return x.squeeze()
    for axis in sorted((normalize_axis(a, x.dim()) for a in int_list(axes)), reverse=True):
        if x.shape[axis] != 1:
            raise ValueError(f"cannot squeeze axis {axis} of size {x.shape[axis]}")
        x = x.squeeze(axis)
    return x


@op("Unsqueeze")
def _unsqueeze(ins, attrs, n_out):
    x, axes = ins
    axes = int_list(axes)
    rank = x.dim() + len(axes)
    for axis in sorted(normalize_axis(a, rank) for a in axes):
        x = x.unsqueeze(axis)
    return x


@op("Slice")
def _slice(ins, attrs, n_out):
    x = ins[0]
    starts, ends = int_list(ins[1]), int_list(ins[2])
    axes = optional_input(ins, 3)
    axes = int_list(axes) if axes is not None else list(range(len(starts)))
    steps = optional_input(ins, 4)
    steps = int_list(steps) if steps is not None else [1] * len(starts)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = normalize_axis(axis, x.dim())
        dim = x.shape[axis]
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            index = (slice(None),) * axis + (slice(min(max(start, 0), dim),
                                                   min(max(end, 0), dim), step),)
            x = x[index]
        elif step < 0:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            x = torch.index_select(x, axis, torch.arange(start, end, step, dtype=torch.int64))
        else:
            raise ValueError("Slice step 0")
    return x


@op("LogSoftmax", ("axis",))
def _log_softmax(ins, attrs, n_out):
    return F.log_softmax(ins[0], dim=attrs.get("axis", -1))


@op("Softmax", ("axis",))
def _softmax(ins, attrs, n_out):
    return torch.softmax(ins[0], dim=attrs.get("axis", -1))


@op("LayerNormalization", ("axis", "epsilon", "stash_type"))
def _layer_norm(ins, attrs, n_out):
    x, scale = ins[0], ins[1]
    bias = optional_input(ins, 2)
    axis = normalize_axis(attrs.get("axis", -1), x.dim())
    eps = attrs.get("epsilon", 1e-5)
    y = F.layer_norm(x, x.shape[axis:], scale, bias, eps)
    if n_out == 1:
        return y
    dims = list(range(axis, x.dim()))
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    return y, mean, torch.rsqrt(var + eps)


@op("SoftmaxCrossEntropyLoss", ("ignore_index", "reduction"))
def _softmax_cross_entropy(ins, attrs, n_out):
    scores, labels = ins[0], ins[1]
    weights = optional_input(ins, 2)
    reduction = attrs.get("reduction", b"mean")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    loss = F.cross_entropy(scores, labels.to(torch.int64), weight=weights,
                           ignore_index=attrs.get("ignore_index", -100), reduction=reduction)
    if n_out == 1:
        return loss
    return loss, F.log_softmax(scores, dim=1)
