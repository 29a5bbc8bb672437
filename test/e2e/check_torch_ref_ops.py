#!/usr/bin/python3
"""Check torch_ref.py's op semantics, parameters and schedule on small cases.

check_torch_ref.py covers what torch exports; this covers the rest of
docs/ops.md (Gemm, negative-step Slice, Gather with negative indices,
opset-18 Reduce and Split forms, Expand, Range, SoftmaxCrossEntropyLoss
with ignore_index and reductions, ...) against values computed with numpy,
plus Identity aliases, frozen globs, rejected models, the plan parser and
the learning-rate schedule.

Usage: /usr/bin/python3 test/e2e/check_torch_ref_ops.py
Exit status 1 when a check fails.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_ref  # noqa: E402

INT64_MAX, INT64_MIN = 2**63 - 1, -2**63
CHECKS = []


def check(fn):
    """Register a check: a function that raises AssertionError on failure."""
    CHECKS.append(fn)
    return fn


def make_model(nodes, outputs, opset=13, initializers=()):
    """A ModelProto of nodes; its values are fed to run(), so it declares no inputs."""
    graph = helper.make_graph(
        nodes, "check", [], [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None)
                             for n in outputs],
        [numpy_helper.from_array(v, n) for n, v in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def run(nodes, feeds, outputs, opset=13):
    """The outputs (numpy) of nodes run by torch_ref on feeds (name -> numpy array)."""
    model = torch_ref.OnnxModel(make_model(nodes, outputs, opset))
    results = model.run({n: torch.from_numpy(np.asarray(v)) for n, v in feeds.items()})
    return [r.detach().numpy() for r in results]


def node(op_type, inputs, outputs, **attrs):
    return helper.make_node(op_type, inputs, outputs, name=op_type.lower(), **attrs)


def expect(got, want, rtol=1e-6):
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-7)


def i64(*values):
    return np.array(values, dtype=np.int64)


def f32(a):
    return np.asarray(a, dtype=np.float32)


def log_softmax(x, axis):
    x = x - x.max(axis=axis, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=axis, keepdims=True))


RNG = np.random.RandomState(0)
X345 = f32(RNG.standard_normal((3, 4, 5)))


@check
def gemm():
    a, b = f32(RNG.standard_normal((3, 4))), f32(RNG.standard_normal((5, 4)))
    c = f32([1, 2, 3, 4, 5])
    (y,) = run([node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=2.0, transB=1)],
               {"a": a, "b": b, "c": c}, ["y"])
    expect(y, 0.5 * a @ b.T + 2 * c, rtol=1e-5)
    (y,) = run([node("Gemm", ["a", "b"], ["y"], alpha=2.0, transA=1)],
               {"a": a.T.copy(), "b": b.T.copy()}, ["y"])
    expect(y, 2 * a @ b.T, rtol=1e-5)


@check
def slice_forms():
    feeds = {"x": X345, "s": i64(4, -1), "e": i64(INT64_MIN, 0), "a": i64(2, -2),
             "st": i64(-2, -1)}
    (y,) = run([node("Slice", ["x", "s", "e", "a", "st"], ["y"])], feeds, ["y"])
    expect(y, X345[:, 3:0:-1, 4::-2])
    (y,) = run([node("Slice", ["x", "s", "e", "a", "st"], ["y"])],
               {"x": X345, "s": i64(1), "e": i64(INT64_MAX), "a": i64(0), "st": i64(2)}, ["y"])
    expect(y, X345[1::2])
    (y,) = run([node("Slice", ["x", "s", "e"], ["y"])],
               {"x": X345, "s": i64(0, 1), "e": i64(2, -1)}, ["y"])
    expect(y, X345[0:2, 1:-1])
    (y,) = run([node("Slice", ["x", "s", "e", "", "st"], ["y"])],
               {"x": X345, "s": i64(-1), "e": i64(-4), "st": i64(-1)}, ["y"])
    expect(y, X345[2:-4:-1])


@check
def gather_negative_indices():
    data = f32(np.arange(12).reshape(4, 3))
    (y,) = run([node("Gather", ["d", "i"], ["y"])],
               {"d": data, "i": i64(-1, 0, 2, -4).reshape(2, 2)}, ["y"])
    expect(y, data[np.array([[3, 0], [2, 0]])])
    (y,) = run([node("Gather", ["d", "i"], ["y"], axis=1)], {"d": data, "i": np.int64(-1)}, ["y"])
    expect(y, data[:, 2])


@check
def reductions_opset13():
    nodes = [node("ReduceSum", ["x", "ax"], ["sum"], keepdims=0),
             node("ReduceSum", ["x"], ["all"]),
             node("ReduceSum", ["x"], ["noop"], noop_with_empty_axes=1),
             node("ReduceMean", ["x"], ["mean"], axes=[0, 2]),
             node("ReduceMax", ["x"], ["max"], axes=[1], keepdims=0)]
    s, a, n, m, mx = run(nodes, {"x": X345, "ax": i64(-1)}, ["sum", "all", "noop", "mean", "max"])
    expect(s, X345.sum(-1), rtol=1e-5)
    expect(a, X345.sum(keepdims=True), rtol=1e-4)
    expect(n, X345)
    expect(m, X345.mean(axis=(0, 2), keepdims=True), rtol=1e-5)
    expect(mx, X345.max(axis=1))


@check
def reductions_opset18():
    nodes = [node("ReduceMean", ["x", "ax"], ["mean"], keepdims=0),
             node("ReduceMax", ["x", "ax"], ["max"])]
    m, mx = run(nodes, {"x": X345, "ax": i64(0, -1)}, ["mean", "max"], opset=18)
    expect(m, X345.mean(axis=(0, 2)), rtol=1e-5)
    expect(mx, X345.max(axis=(0, 2), keepdims=True))


@check
def split_forms():
    x = f32(np.arange(16).reshape(2, 8))
    y = run([node("Split", ["x", "sp"], ["a", "b"], axis=1)], {"x": x, "sp": i64(3, 5)},
            ["a", "b"])
    expect(y[0], x[:, :3])
    expect(y[1], x[:, 3:])
    y = run([node("Split", ["x"], ["a", "b"], axis=-1)], {"x": x}, ["a", "b"])
    expect(y[1], x[:, 4:])
    y = run([node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)], {"x": x},
            ["a", "b", "c"], opset=18)
    assert [t.shape[1] for t in y] == [3, 3, 2], [t.shape for t in y]
    expect(y[2], x[:, 6:])


@check
def squeeze_unsqueeze():
    x = f32(RNG.standard_normal((1, 3, 1, 2)))
    a, b, c = run([node("Squeeze", ["x", "ax"], ["a"]), node("Squeeze", ["x"], ["b"]),
                   node("Unsqueeze", ["b", "ax2"], ["c"])],
                  {"x": x, "ax": i64(0, -2), "ax2": i64(-1, 0)}, ["a", "b", "c"])
    expect(a, x.reshape(3, 2))
    expect(b, x.reshape(3, 2))
    expect(c, x.reshape(1, 3, 2, 1))


@check
def shape_tensors():
    nodes = [node("Shape", ["x"], ["mid"], start=1, end=-1),
             node("Shape", ["x"], ["all"], start=-10),
             node("ConstantOfShape", ["mid"], ["sevens"],
                  value=numpy_helper.from_array(i64(7))),
             node("ConstantOfShape", ["mid"], ["zeros"]),
             node("Range", ["r0", "r1", "r2"], ["ri"]),
             node("Range", ["f0", "f1", "f2"], ["rf"]),
             node("Range", ["n0", "n1", "n2"], ["rn"]),
             node("Constant", [], ["ci"], value_ints=[1, 2]),
             node("Constant", [], ["cf"], value_float=2.5)]
    feeds = {"x": X345, "r0": np.int64(1), "r1": np.int64(10), "r2": np.int64(3),
             "f0": np.float32(0), "f1": np.float32(1), "f2": np.float32(0.25),
             "n0": np.int64(5), "n1": np.int64(0), "n2": np.int64(-2)}
    mid, all_, sevens, zeros, ri, rf, rn, ci, cf = run(
        nodes, feeds, ["mid", "all", "sevens", "zeros", "ri", "rf", "rn", "ci", "cf"])
    expect(mid, i64(4))
    expect(all_, i64(3, 4, 5))
    expect(sevens, np.full((4,), 7, dtype=np.int64))
    expect(zeros, np.zeros((4,), dtype=np.float32))
    expect(ri, i64(1, 4, 7))
    expect(rf, f32([0, 0.25, 0.5, 0.75]))
    expect(rn, i64(5, 3, 1))
    expect(ci, i64(1, 2))
    expect(cf, np.float32(2.5))


@check
def reshape_transpose_concat_expand():
    nodes = [node("Reshape", ["x", "s"], ["r"]),
             node("Reshape", ["empty", "s0"], ["rz"], allowzero=1),
             node("Transpose", ["x"], ["t"]),
             node("Transpose", ["x"], ["tp"], perm=[1, 0, 2]),
             node("Concat", ["x", "x"], ["c"], axis=-1),
             node("Expand", ["col", "es"], ["e"]),
             node("Expand", ["row", "es2"], ["e2"])]
    col, row = f32([[1], [2], [3]]), f32([[1, 2, 3, 4]])
    feeds = {"x": X345, "s": i64(0, -1), "empty": np.zeros((4, 0), np.float32),
             "s0": i64(0, 4), "col": col, "es": i64(2, 1, 4), "row": row, "es2": i64(3, 1)}
    r, rz, t, tp, c, e, e2 = run(nodes, feeds, ["r", "rz", "t", "tp", "c", "e", "e2"])
    expect(r, X345.reshape(3, 20))
    expect(rz, np.zeros((0, 4), np.float32))
    expect(t, X345.transpose())
    expect(tp, X345.transpose(1, 0, 2))
    expect(c, np.concatenate([X345, X345], axis=-1))
    expect(e, np.broadcast_to(col, (2, 3, 4)))
    expect(e2, np.broadcast_to(row, (3, 4)))


@check
def softmax_cross_entropy():
    scores = f32(RNG.standard_normal((4, 5)))
    labels = i64(1, -1, 3, 0)
    logp = log_softmax(scores, 1)
    picked = -logp[[0, 2, 3], [1, 3, 0]]
    mean, total, each, lp = run(
        [node("SoftmaxCrossEntropyLoss", ["s", "l"], ["mean"], ignore_index=-1),
         node("SoftmaxCrossEntropyLoss", ["s", "l"], ["sum"], ignore_index=-1, reduction="sum"),
         node("SoftmaxCrossEntropyLoss", ["s", "l"], ["none", "lp"], ignore_index=-1,
              reduction="none")],
        {"s": scores, "l": labels}, ["mean", "sum", "none", "lp"])
    expect(mean, np.float32(picked.mean()), rtol=1e-5)
    expect(total, np.float32(picked.sum()), rtol=1e-5)
    expect(each, f32([picked[0], 0, picked[1], picked[2]]), rtol=1e-5)
    expect(lp, logp, rtol=1e-5)
    scores3 = f32(RNG.standard_normal((2, 5, 3)))
    labels3 = i64(0, 4, 2, 1, 1, 3).reshape(2, 3)
    (loss,) = run([node("SoftmaxCrossEntropyLoss", ["s", "l"], ["loss"])],
                  {"s": scores3, "l": labels3}, ["loss"])
    logp3 = log_softmax(scores3, 1)
    want = -np.mean([logp3[n, labels3[n, d], d] for n in range(2) for d in range(3)])
    expect(loss, np.float32(want), rtol=1e-5)


@check
def softmax_and_layer_norm():
    scale, bias = f32(RNG.standard_normal((4, 5))), f32(RNG.standard_normal((4, 5)))
    sm, sm_last, y, mean, inv = run(
        [node("Softmax", ["x"], ["sm"], axis=1), node("Softmax", ["x"], ["sm_last"]),
         node("LayerNormalization", ["x", "scale", "bias"], ["y", "mean", "inv"], axis=-2,
              epsilon=1e-3)],
        {"x": X345, "scale": scale, "bias": bias}, ["sm", "sm_last", "y", "mean", "inv"])
    expect(sm, np.exp(log_softmax(X345, 1)), rtol=1e-5)
    expect(sm_last, np.exp(log_softmax(X345, -1)), rtol=1e-5)
    want_mean = X345.mean(axis=(1, 2), keepdims=True)
    want_inv = 1 / np.sqrt(X345.var(axis=(1, 2), keepdims=True) + 1e-3)
    expect(mean, want_mean, rtol=1e-5)
    expect(inv, want_inv, rtol=1e-5)
    expect(y, (X345 - want_mean) * want_inv * scale + bias, rtol=1e-4)


@check
def elementwise():
    x = f32([0.25, 1.0, 2.5])
    names = ["Erf", "Exp", "Log", "Neg", "Reciprocal", "Relu", "Sigmoid", "Sqrt", "Tanh"]
    outs = run([node(n, ["x"], [n]) for n in names], {"x": x}, names)
    wants = [[math.erf(v) for v in x], np.exp(x), np.log(x), -x, 1 / x, x, 1 / (1 + np.exp(-x)),
             np.sqrt(x), np.tanh(x)]
    for got, want in zip(outs, wants):
        expect(got, f32(want), rtol=1e-6)
    cmp = {"Equal": np.equal, "Greater": np.greater, "GreaterOrEqual": np.greater_equal,
           "Less": np.less, "LessOrEqual": np.less_equal}
    outs = run([node(n, ["x", "two"], [n]) for n in cmp], {"x": x, "two": np.float32(1.0)},
               list(cmp))
    for got, fn in zip(outs, cmp.values()):
        expect(got, fn(x, np.float32(1.0)))


@check
def arithmetic_where_cast_pow_dropout():
    nodes = [node("Div", ["a", "b"], ["idiv"]),
             node("Div", ["x", "y"], ["fdiv"]),
             node("Pow", ["x", "two"], ["pow"]),
             node("Cast", ["neg"], ["ci"], to=TensorProto.INT32),
             node("Cast", ["neg"], ["cb"], to=TensorProto.BOOL),
             node("Where", ["cond", "row", "zero"], ["w"]),
             node("Dropout", ["x"], ["d", "mask"]),
             node("Sub", ["x", "y"], ["sub"]),
             node("Mul", ["x", "y"], ["mul"]),
             node("Add", ["x", "y"], ["add"]),
             node("MatMul", ["m1", "m2"], ["mm"])]
    x, y = f32([-2.0, 0.5, 3.0]), f32([4.0, -1.0, 0.5])
    m1, m2 = f32(RNG.standard_normal((2, 3, 4))), f32(RNG.standard_normal((4, 2)))
    feeds = {"a": i64(-7, 7, 9), "b": i64(2, 2, -4), "x": x, "y": y, "two": i64(2),
             "neg": f32([-1.7, 0.0, 2.9]), "cond": np.array([[True], [False]]),
             "row": f32([[1, 2]]), "zero": np.float32(0), "m1": m1, "m2": m2}
    idiv, fdiv, pw, ci, cb, w, d, mask, sub, mul, add, mm = run(
        nodes, feeds, ["idiv", "fdiv", "pow", "ci", "cb", "w", "d", "mask", "sub", "mul",
                       "add", "mm"])
    expect(idiv, i64(-3, 3, -2))
    expect(fdiv, x / y)
    expect(pw, x * x)
    expect(ci, np.array([-1, 0, 2], dtype=np.int32))
    expect(cb, np.array([True, False, True]))
    expect(w, f32([[1, 2], [0, 0]]))
    expect(d, x)
    expect(mask, np.ones(3, dtype=bool))
    expect(sub, x - y)
    expect(mul, x * y)
    expect(add, x + y)
    expect(mm, m1 @ m2, rtol=1e-5)


@check
def opset18_fixture_model():
    """test/models/make_opset18_model.py's model (Gemm, Dropout, Split num_outputs,
    ReduceMean/ReduceMax axes inputs, Expand, ConstantOfShape, Cast)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "opset18.onnx")
        subprocess.run([sys.executable, os.path.join(HERE, "..", "models",
                                                     "make_opset18_model.py"), path],
                       check=True)
        model = torch_ref.OnnxModel(path)
        w = numpy_helper.to_array(onnx.load(path).graph.initializer[0])
    x = f32(RNG.standard_normal((3, 6)))
    y, yi, s2 = [t.detach().numpy() for t in model.run({"x": torch.from_numpy(x)})]
    g = 0.5 * x @ w + model.params["b"].detach().numpy()
    expect(y, np.broadcast_to(g[:, 0:3].mean(axis=1, keepdims=True) + 1, (3, 8)), rtol=1e-5)
    expect(yi, g[:, 3:6].max(axis=1).astype(np.int32))
    expect(s2, g[:, 6:8], rtol=1e-5)


def alias_model():
    inits = [("w", f32([1, 2])), ("mask", np.array([1, 0], dtype=np.int64))]
    nodes = [node("Identity", ["w"], ["w2"]), node("Identity", ["mask"], ["mask2"]),
             node("Add", ["w", "w2"], ["y"])]
    return make_model(nodes, ["y"], initializers=inits)


@check
def identity_aliases_and_frozen():
    model = torch_ref.OnnxModel(alias_model())
    assert list(model.params) == ["w", "w2"], list(model.params)
    assert model.params["w"] is not model.params["w2"]
    assert model.tensors["mask2"] is model.tensors["mask"]
    model.params["w"].data.add_(1)
    expect(model.params["w2"].detach().numpy(), f32([1, 2]))
    frozen = torch_ref.OnnxModel(alias_model(), frozen=["w?"])
    assert list(frozen.params) == ["w"], list(frozen.params)
    assert not frozen.tensors["w2"].requires_grad


@check
def rejected_models():
    bad = {
        "unsupported op": make_model([node("Conv", ["x", "w"], ["y"])], ["y"]),
        "unsupported attribute": make_model([node("Softmax", ["x"], ["y"], foo=1)], ["y"]),
        "opset 12": make_model([node("Relu", ["x"], ["y"])], ["y"], opset=12),
    }
    for what, model in bad.items():
        try:
            torch_ref.OnnxModel(model)
        except torch_ref.RefError:
            continue
        raise AssertionError(f"{what} was accepted")


@check
def plan_parsing():
    plan = torch_ref.parse_plan({"optimizer": {"type": "sgd", "momentum": 0.9},
                                 "mesh": {"dp": 2}, "batch": {"micro_batches": 2}})
    assert (plan.optimizer, plan.weight_decay, plan.momentum, plan.micro_batches) == \
        ("sgd", 0.0, 0.9, 2), plan
    assert torch_ref.parse_plan({}).weight_decay == 0.01
    for bad in ({"optimizer": {"type": "adam"}}, {"optimizer": {"lr": "1"}},
                {"lr_schedule": {"decay": "step"}}, {"batch": {"micro_batches": 0}},
                {"frozen": "w"}, []):
        try:
            torch_ref.parse_plan(bad)
        except torch_ref.RefError:
            continue
        raise AssertionError(f"plan {bad} was accepted")


@check
def globs():
    cases = [("*.bias", "h.0.attn.c_attn.bias", True), ("*", "a/b.c", True),
             ("h.?.mlp.*", "h.3.mlp.c_fc.bias", True), ("h.?.mlp.*", "h.10.mlp.c_fc.bias", False),
             ("h.[0-5].*", "h.5.x", True), ("h.[!0-5].*", "h.5.x", False),
             ("h.[^0-5].*", "h.7.x", True), ("[]a]", "]", True), ("[a-]", "-", True),
             ("[-a]", "b", False), ("a\\*b", "a*b", True), ("a\\*b", "axb", False),
             ("[\\]]x", "]x", True), ("onnx::MatMul_*", "onnx::MatMul_12", True),
             ("wte.weight", "wte.weight2", False), ("^x", "^x", True)]
    for pattern, name, want in cases:
        got = torch_ref.matches_any(name, [pattern])
        assert got == want, f"{pattern!r} on {name!r}: {got}"
    for bad in ("", "[a", "[9-0]", "a\\", "[a\\"):
        try:
            torch_ref.glob_regex(bad)
        except torch_ref.RefError:
            continue
        raise AssertionError(f"glob {bad!r} was accepted")
    plan = torch_ref.parse_plan({"data": {"inputs": "", "targets": "y"}})
    assert (plan.inputs, plan.targets) == (None, "y"), plan


@check
def lr_schedule():
    plan = torch_ref.parse_plan({"optimizer": {"lr": 1.0}, "lr_schedule": {
        "warmup_steps": 2, "decay": "cosine", "min_lr": 0.1, "decay_steps": 6}})
    got = [torch_ref.scheduled_lr(plan, s, 10) for s in range(8)]
    cos = [0.1 + 0.45 * (1 + math.cos(math.pi * p)) for p in (0, 0.25, 0.5, 0.75, 1, 1)]
    np.testing.assert_allclose(got, [0.5, 1.0] + cos, rtol=1e-12)
    plan.decay, plan.decay_steps = "linear", 0
    got = [torch_ref.scheduled_lr(plan, s, 10) for s in (2, 6, 9)]
    np.testing.assert_allclose(got, [1.0, 0.1 + 0.9 * 0.5, 0.1 + 0.9 * 0.125], rtol=1e-12)
    plan.warmup_steps = 10
    assert torch_ref.scheduled_lr(plan, 10, 10) == 0.1
    plan.decay = "constant"
    assert torch_ref.scheduled_lr(plan, 10, 10) == 1.0


def main(argv=None):
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    torch.set_num_threads(1)
    failed = 0
    for fn in CHECKS:
        try:
            fn()
        except (AssertionError, torch_ref.RefError) as e:
            failed += 1
            print(f"FAIL {fn.__name__}: {e}")
        else:
            print(f"ok   {fn.__name__}")
    if failed:
        print(f"FAIL: {failed} of {len(CHECKS)} checks")
        return 1
    print(f"OK: {len(CHECKS)} checks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
