#!/usr/bin/python3
"""Models, input files and reference checks for forward-only programs
(`autopar compile --forward-only`, forward-only.test).

  check_forward.py make DIR
      Writes DIR/model.onnx, a small graph of several input and output types
      (see make_model), its inputs as DIR/in/input_<i>.pb (raw_data) and as
      DIR/in-typed/input_<i>.pb (the typed data fields), the value of its
      shape-like input as DIR/shape.pb, and files for the error cases:
      DIR/x-int64.pb (INT64 [2], not x's FLOAT [2, 3]), DIR/shape-other.pb
      (another value of the same type and shape as shape.pb), DIR/shape-float.pb
      (FLOAT [2, 3, 4]), DIR/garbage.pb (not a TensorProto), DIR/rank9.onnx (a
      model whose output has rank 9, which the runtime does not support).
  check_forward.py check OUTPUTS
      Compares OUTPUTS/output_<i>.pb with the outputs of the model of `make`
      on its inputs, computed with numpy: same type and shape, values equal for
      integers and bool, within rtol 1e-6 / atol 1e-7 for floating point.
  check_forward.py make-unsigned DIR
      Writes DIR/model.onnx, a small graph of UINT8, UINT16, UINT32 and
      UINT64 inputs holding values above the signed range (see
      make_unsigned_model), and its inputs as DIR/in/input_<i>.pb (raw_data)
      and DIR/in-typed/input_<i>.pb (int32_data, uint64_data).
  check_forward.py check-unsigned OUTPUTS
      Compares OUTPUTS/output_<i>.pb with the outputs of the model of
      `make-unsigned` computed with numpy: same type and shape, values equal
      (floating point too).
  check_forward.py tokens MODEL DIR [--seed S] [--vocab V]
      Writes random token ids in [0, V) for each graph input of MODEL (integer
      inputs of static shape) as DIR/input_<i>.pb.
  check_forward.py torch-ref MODEL INPUTS OUTPUTS [--rtol R]
      Evaluates MODEL on INPUTS/input_<i>.pb with torch_ref.py's interpreter
      (the ONNX graph run with torch ops) and compares each
      output with OUTPUTS/output_<i>.pb within the relative tolerance R
      (default 1e-5).

Prints one line per output and "OK: N outputs" (exit 0), or what differs
(exit 1).
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))

# The values of the small model's inputs and initializers.
X = np.array([[0.5, -1.25, 2.0], [-0.75, 3.5, 0.125]], dtype=np.float32)
SHAPE = np.array([3, 2], dtype=np.int64)
# 3e9 does not fit in 32 bits: the int64 arithmetic must be 64-bit.
N = np.array([3, -7, 3_000_000_000, 0], dtype=np.int64)
MASK = np.array([[True, False, True], [False, True, True]])
D = np.array([0.1, -2.5, 1e-3], dtype=np.float64)
W = np.array([[0.25, -0.5, 1.0, 0.75],
              [-1.5, 0.125, 0.5, -0.25],
              [0.3, 0.6, -0.9, 1.2]], dtype=np.float32)
BIAS = np.array([0.1, -0.2, 0.3, -4.0], dtype=np.float32)
COEF = np.array([2, -3, 1, 7], dtype=np.int64)


def make_model():
    """Graph inputs (in this order): x FLOAT [2, 3], shape INT64 [2] (Reshape's
    shape), n INT64 [4], mask BOOL [2, 3], d DOUBLE [3]; initializers W FLOAT
    [3, 4], bias FLOAT [4], coef INT64 [4] and scalar constants. Outputs:
      0 y     FLOAT [2, 4]  Relu(x @ W + bias)
      1 k     INT64 [4]     n * coef + n
      2 pos   BOOL [2, 3]   Where(mask, x > 0, false)
      3 r     FLOAT [3, 2]  Reshape(x, shape)
      4 sel   FLOAT [2, 3]  Where(mask, x, -x)
      5 dd    DOUBLE [3]    d * d + 1
      6 k32   INT32 [4]     Cast(min(|n|, 2^31 - 1), INT32) (by Where, Less, Greater)
      7 h     FLOAT16 [2, 3] Cast(x, FLOAT16) squared
    """
    f, i64, b, f64 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL, TensorProto.DOUBLE
    inputs = [helper.make_tensor_value_info("x", f, [2, 3]),
              helper.make_tensor_value_info("shape", i64, [2]),
              helper.make_tensor_value_info("n", i64, [4]),
              helper.make_tensor_value_info("mask", b, [2, 3]),
              helper.make_tensor_value_info("d", f64, [3])]
    outputs = [helper.make_tensor_value_info("y", f, [2, 4]),
               helper.make_tensor_value_info("k", i64, [4]),
               helper.make_tensor_value_info("pos", b, [2, 3]),
               helper.make_tensor_value_info("r", f, [3, 2]),
               helper.make_tensor_value_info("sel", f, [2, 3]),
               helper.make_tensor_value_info("dd", f64, [3]),
               helper.make_tensor_value_info("k32", TensorProto.INT32, [4]),
               helper.make_tensor_value_info("h", TensorProto.FLOAT16, [2, 3])]
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(BIAS, "bias"),
             numpy_helper.from_array(COEF, "coef"),
             numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero"),
             numpy_helper.from_array(np.array(0, dtype=np.int64), "izero"),
             numpy_helper.from_array(np.array(False), "false"),
             numpy_helper.from_array(np.array(1.0, dtype=np.float64), "one"),
             numpy_helper.from_array(np.array(2**31 - 1, dtype=np.int64), "cap")]
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "bias"], ["xwb"]),
        helper.make_node("Relu", ["xwb"], ["y"]),
        helper.make_node("Mul", ["n", "coef"], ["nc"]),
        helper.make_node("Add", ["nc", "n"], ["k"]),
        helper.make_node("Greater", ["x", "zero"], ["gt"]),
        helper.make_node("Where", ["mask", "gt", "false"], ["pos"]),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Neg", ["x"], ["negx"]),
        helper.make_node("Where", ["mask", "x", "negx"], ["sel"]),
        helper.make_node("Mul", ["d", "d"], ["d2"]),
        helper.make_node("Add", ["d2", "one"], ["dd"]),
        helper.make_node("Less", ["n", "izero"], ["neg"]),
        helper.make_node("Neg", ["n"], ["negn"]),
        helper.make_node("Where", ["neg", "negn", "n"], ["absn"]),
        helper.make_node("Greater", ["absn", "cap"], ["big"]),
        helper.make_node("Where", ["big", "cap", "absn"], ["absn32"]),
        helper.make_node("Cast", ["absn32"], ["k32"], to=TensorProto.INT32),
        helper.make_node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16),
        helper.make_node("Mul", ["xh", "xh"], ["h"]),
    ]
    graph = helper.make_graph(nodes, "forward_only_test", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="check_forward.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


# The unsigned model: for each type, its input (values above the signed range
# and small ones), the constant of Greater and the constant added to it. The
# sums wrap around modulo 2^bits; the casts to FLOAT and DOUBLE round to
# nearest (4294967295 and 2^64 - 1 to 2^32 and 2^64, 1e19 to float32 once,
# whether directly or through float64, where it is exact).
UNSIGNED = [
    ("a", np.uint8, [200, 100, 255, 0], 150, [100, 100, 1, 255]),
    ("b", np.uint16, [40_000, 100, 65_535, 0], 35_000, [30_000, 40_000, 1, 65_535]),
    ("c", np.uint32, [3_000_000_000, 100, 2**32 - 1, 0], 2_500_000_000,
     [2_000_000_000, 3_000_000_000, 1, 2**32 - 1]),
    ("e", np.uint64, [10**19, 100, 2**64 - 1, 0], 9_500_000_000_000_000_000,
     [10**19, 10**19, 1, 2**64 - 1]),
]


def make_unsigned_model():
    """Graph inputs (in this order): a UINT8 [4], b UINT16 [4], c UINT32 [4],
    e UINT64 [4] (UNSIGNED). For each input v, in that order, five outputs:
      Cast(v, FLOAT)  FLOAT [4]
      Cast(v, DOUBLE) DOUBLE [4]
      v > gt          BOOL [4]  gt: a scalar initializer above the signed range
      v + k           same type [4]  k: an initializer [4]; wraps around
      Identity(v)     same type [4]
    Computed as signed, the casts of 200, 40000, 3e9 and 1e19 would be
    negative and v > gt would hold for 100 (gt being negative then)."""
    inputs, outputs, inits, nodes = [], [], [], []
    for name, dtype, _, gt, k in UNSIGNED:
        t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype)) if hasattr(
            helper, "np_dtype_to_tensor_dtype") else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[
                np.dtype(dtype)]
        inputs.append(helper.make_tensor_value_info(name, t, [4]))
        inits += [numpy_helper.from_array(np.array(gt, dtype=dtype), name + "_gt"),
                  numpy_helper.from_array(np.array(k, dtype=dtype), name + "_k")]
        nodes += [
            helper.make_node("Cast", [name], [name + "_f"], to=TensorProto.FLOAT),
            helper.make_node("Cast", [name], [name + "_d"], to=TensorProto.DOUBLE),
            helper.make_node("Greater", [name, name + "_gt"], [name + "_gt_out"]),
            helper.make_node("Add", [name, name + "_k"], [name + "_sum"]),
            helper.make_node("Identity", [name], [name + "_id"]),
        ]
        outputs += [helper.make_tensor_value_info(name + "_f", TensorProto.FLOAT, [4]),
                    helper.make_tensor_value_info(name + "_d", TensorProto.DOUBLE, [4]),
                    helper.make_tensor_value_info(name + "_gt_out", TensorProto.BOOL, [4]),
                    helper.make_tensor_value_info(name + "_sum", t, [4]),
                    helper.make_tensor_value_info(name + "_id", t, [4])]
    graph = helper.make_graph(nodes, "forward_only_unsigned", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="check_forward.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def unsigned_reference():
    """The outputs of make_unsigned_model() on UNSIGNED's inputs, with numpy."""
    wants = []
    with np.errstate(over="ignore"):
        for _, dtype, values, gt, k in UNSIGNED:
            v = np.array(values, dtype=dtype)
            wants += [v.astype(np.float32), v.astype(np.float64),
                      v > np.array(gt, dtype=dtype), v + np.array(k, dtype=dtype), v]
    return wants


def make_rank9_model():
    """x FLOAT [2, 3] reshaped to [1, 1, 1, 1, 1, 1, 1, 2, 3]: imports, but the
    runtime takes tensors of rank 8 at most, so `autopar compile
    --forward-only` fails while writing the program (after it began writing
    OUTDIR's temporary sibling)."""
    shape = [1] * 7 + [2, 3]
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"])], "rank9",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(np.array(shape, dtype=np.int64), "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def reference():
    """The outputs of make_model() on the inputs above, with numpy."""
    absn = np.minimum(np.abs(N), 2**31 - 1)
    return [np.maximum(X @ W + BIAS, 0).astype(np.float32),
            N * COEF + N,
            (X > 0) & MASK,
            X.reshape(SHAPE),
            np.where(MASK, X, -X),
            D * D + 1.0,
            absn.astype(np.int32),
            X.astype(np.float16) * X.astype(np.float16)]


def save(array, path, name=None):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array, name).SerializeToString())


def load(path):
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def make(directory):
    for sub in ("in", "in-typed"):
        os.makedirs(os.path.join(directory, sub), exist_ok=True)
    onnx.save(make_model(), os.path.join(directory, "model.onnx"))
    for i, (name, value) in enumerate((("x", X), ("shape", SHAPE), ("n", N),
                                       ("mask", MASK), ("d", D))):
        save(value, os.path.join(directory, "in", "input_%d.pb" % i), name)
        # The same values in the typed fields (float_data, int64_data,
        # int32_data for bool, double_data) instead of raw_data.
        typed = helper.make_tensor(name, helper.np_dtype_to_tensor_dtype(value.dtype)
                                   if hasattr(helper, "np_dtype_to_tensor_dtype") else
                                   onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[value.dtype],
                                   value.shape, value.flatten().tolist(), raw=False)
        assert not typed.raw_data
        with open(os.path.join(directory, "in-typed", "input_%d.pb" % i), "wb") as f:
            f.write(typed.SerializeToString())
    save(SHAPE, os.path.join(directory, "shape.pb"), "shape")
    save(np.array([2, 3], dtype=np.int64), os.path.join(directory, "shape-other.pb"))
    save(np.zeros((2, 3, 4), dtype=np.float32), os.path.join(directory, "shape-float.pb"))
    save(np.array([1, 2], dtype=np.int64), os.path.join(directory, "x-int64.pb"))
    onnx.save(make_rank9_model(), os.path.join(directory, "rank9.onnx"))
    with open(os.path.join(directory, "garbage.pb"), "wb") as f:
        f.write(b"not a tensor\n")
    print("wrote %s/model.onnx and its inputs" % directory)
    return 0


def make_unsigned(directory):
    for sub in ("in", "in-typed"):
        os.makedirs(os.path.join(directory, sub), exist_ok=True)
    onnx.save(make_unsigned_model(), os.path.join(directory, "model.onnx"))
    for i, (name, dtype, values, _, _) in enumerate(UNSIGNED):
        value = np.array(values, dtype=dtype)
        save(value, os.path.join(directory, "in", "input_%d.pb" % i), name)
        # The typed fields: int32_data for UINT8 and UINT16, uint64_data for
        # UINT32 and UINT64.
        typed = helper.make_tensor(name, helper.np_dtype_to_tensor_dtype(value.dtype)
                                   if hasattr(helper, "np_dtype_to_tensor_dtype") else
                                   onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[value.dtype],
                                   value.shape, value.tolist(), raw=False)
        assert not typed.raw_data
        with open(os.path.join(directory, "in-typed", "input_%d.pb" % i), "wb") as f:
            f.write(typed.SerializeToString())
    print("wrote %s/model.onnx and its inputs" % directory)
    return 0


def compare(i, want, got, rtol, atol):
    """None when got matches want, else why not."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return "output %d: %s %s, expected %s %s" % (i, got.dtype, list(got.shape),
                                                     want.dtype, list(want.shape))
    if want.dtype.kind == "f":
        ok = np.isclose(got, want, rtol=rtol, atol=atol)
    else:
        ok = got == want
    if ok.all():
        return None
    j = tuple(int(v) for v in np.argwhere(~ok)[0])
    return "output %d: %d of %d elements differ, first at %s: %r, expected %r" % (
        i, int((~ok).sum()), ok.size, list(j), got[j].item(), want[j].item())


def check_outputs(wants, outputs, rtol, atol, exact=False):
    problems = []
    for i, want in enumerate(wants):
        path = os.path.join(outputs, "output_%d.pb" % i)
        if not os.path.exists(path):
            problems.append("output %d: %s is missing" % (i, path))
            continue
        got = load(path)
        why = compare(i, want, got, rtol, atol)
        if why:
            problems.append(why)
        elif want.dtype.kind == "f" and want.size and not exact:
            rel = np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), 1e-30)
            print("output %d: %s %s ok, max rel diff %.1e" % (i, got.dtype, list(got.shape),
                                                            rel.max()))
        else:
            print("output %d: %s %s ok" % (i, got.dtype, list(got.shape)))
    extra = os.path.join(outputs, "output_%d.pb" % len(wants))
    if os.path.exists(extra):
        problems.append("%s: more outputs than the model has" % extra)
    for p in problems:
        print("FAIL " + p)
    if problems:
        return 1
    print("OK: %d outputs" % len(wants))
    return 0


def check(outputs):
    return check_outputs(reference(), outputs, rtol=1e-6, atol=1e-7)


def check_unsigned(outputs):
    return check_outputs(unsigned_reference(), outputs, rtol=0, atol=0, exact=True)


def tokens(model_path, directory, seed, vocab):
    model = onnx.load(model_path)
    inits = {t.name for t in model.graph.initializer}
    rng = np.random.RandomState(seed)
    os.makedirs(directory, exist_ok=True)
    for i, vi in enumerate(v for v in model.graph.input if v.name not in inits):
        tt = vi.type.tensor_type
        dims = [d.dim_value for d in tt.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type) if hasattr(
            helper, "tensor_dtype_to_np_dtype") else onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[
                tt.elem_type]
        save(rng.randint(0, vocab, size=dims).astype(dtype),
             os.path.join(directory, "input_%d.pb" % i), vi.name)
    return 0


def torch_ref(model_path, inputs, outputs, rtol):
    sys.path.insert(0, HERE)
    import torch
    import torch_ref as ref
    torch.set_num_threads(1)
    model = ref.OnnxModel(model_path)
    feeds = {vi.name: torch.from_numpy(load(os.path.join(inputs, "input_%d.pb" % i)).copy())
             for i, vi in enumerate(model.inputs)}
    with torch.no_grad():
        wants = [t.detach().numpy() for t in model.run(feeds)]
    return check_outputs(wants, outputs, rtol=rtol, atol=0)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    c = sub.add_parser("check")
    c.add_argument("outputs")
    mu = sub.add_parser("make-unsigned")
    mu.add_argument("dir")
    cu = sub.add_parser("check-unsigned")
    cu.add_argument("outputs")
    t = sub.add_parser("tokens")
    t.add_argument("model")
    t.add_argument("dir")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--vocab", type=int, default=64)
    r = sub.add_parser("torch-ref")
    r.add_argument("model")
    r.add_argument("inputs")
    r.add_argument("outputs")
    r.add_argument("--rtol", type=float, default=1e-5)
    a = p.parse_args()
    if a.command == "make":
        return make(a.dir)
    if a.command == "check":
        return check(a.outputs)
    if a.command == "make-unsigned":
        return make_unsigned(a.dir)
    if a.command == "check-unsigned":
        return check_unsigned(a.outputs)
    if a.command == "tokens":
        return tokens(a.model, a.dir, a.seed, a.vocab)
    return torch_ref(a.model, a.inputs, a.outputs, a.rtol)


if __name__ == "__main__":
    sys.exit(main())
