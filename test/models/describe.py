#!/usr/bin/python3
"""Print a precise, deterministic description of an ONNX model.

Usage: /usr/bin/python3 test/models/describe.py MODEL.onnx [--nodes] [--no-initializers]

Sections: header (ir_version, opsets, producer, file size), graph inputs and
outputs (with dim_param names for symbolic dims), op-type histogram,
initializers (name, dtype, shape, bytes, data location), Identity nodes whose
input is an initializer (torch's dedup aliases), Constant nodes summary, and
optionally every node (--nodes).
External data is not loaded (works on models whose external file is missing).
"""
import argparse
import collections
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def dtype_name(elem_type):
    return TensorProto.DataType.Name(elem_type)


def dims_str(dims):
    return "[" + ", ".join(dims) + "]"


def value_info_str(vi):
    t = vi.type
    if not t.HasField("tensor_type"):
        return f"{vi.name}: <non-tensor type {t.WhichOneof('value')}>"
    tt = t.tensor_type
    if not tt.HasField("shape"):
        return f"{vi.name}: {dtype_name(tt.elem_type)} <unranked>"
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(str(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(repr(d.dim_param))
        else:
            dims.append("?")
    return f"{vi.name}: {dtype_name(tt.elem_type)} {dims_str(dims)}"


def tensor_nbytes(t):
    n = int(np.prod(t.dims)) if len(t.dims) else 1
    if hasattr(helper, "tensor_dtype_to_np_dtype"):  # onnx >= 1.13
        np_type = helper.tensor_dtype_to_np_dtype(t.data_type)
    else:  # onnx 1.12 (Debian)
        np_type = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.data_type]
    itemsize = np.dtype(np_type).itemsize
    return n * itemsize


def tensor_location(t):
    if t.data_location == TensorProto.EXTERNAL:
        kv = {e.key: e.value for e in t.external_data}
        return "external(" + ", ".join(f"{k}={kv[k]}" for k in sorted(kv)) + ")"
    if t.raw_data:
        return "raw_data"
    for f in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data",
              "string_data"):
        if len(getattr(t, f)):
            return f
    return "empty"


def constant_value_str(node):
    for a in node.attribute:
        if a.name == "value":
            t = a.t
            shape = list(t.dims)
            s = f"{dtype_name(t.data_type)} {shape}"
            n = int(np.prod(shape)) if shape else 1
            if n <= 8 and t.data_location != TensorProto.EXTERNAL:
                arr = numpy_helper.to_array(t)
                s += " = " + np.array2string(arr.reshape(-1), separator=",")
            return s
        return f"{a.name}=..."
    return "<no value>"


def describe(path, show_nodes=False, show_inits=True, out=sys.stdout):
    m = onnx.load(path, load_external_data=False)
    g = m.graph
    p = lambda *a: print(*a, file=out)  # noqa: E731

    opsets = ", ".join(f"{o.domain or 'ai.onnx'}:{o.version}" for o in m.opset_import)
    p(f"file: {os.path.basename(path)}  ({os.path.getsize(path)} bytes)")
    p(f"ir_version: {m.ir_version}  opsets: {opsets}  producer: "
      f"{m.producer_name} {m.producer_version}  graph: {g.name!r}")

    init_names = [t.name for t in g.initializer]
    init_set = set(init_names)
    real_inputs = [vi for vi in g.input if vi.name not in init_set]
    p(f"inputs ({len(real_inputs)}):")
    for vi in real_inputs:
        p("  " + value_info_str(vi))
    if len(real_inputs) != len(g.input):
        p(f"  (+{len(g.input) - len(real_inputs)} graph inputs that are also initializers)")
    p(f"outputs ({len(g.output)}):")
    for vi in g.output:
        p("  " + value_info_str(vi))

    hist = collections.Counter(n.op_type for n in g.node)
    p(f"nodes: {len(g.node)}  op histogram: " +
      " ".join(f"{k}:{v}" for k, v in sorted(hist.items())))

    total = sum(tensor_nbytes(t) for t in g.initializer)
    p(f"initializers ({len(g.initializer)}, {total} bytes):")
    if show_inits:
        for t in g.initializer:
            p(f"  {t.name}: {dtype_name(t.data_type)} {list(t.dims)} "
              f"{tensor_nbytes(t)}B {tensor_location(t)}")

    idents = [n for n in g.node if n.op_type == "Identity" and n.input and n.input[0] in init_set]
    p(f"identity-of-initializer nodes ({len(idents)}):")
    for n in idents:
        p(f"  {n.name}: {n.input[0]} -> {n.output[0]}")

    consts = [n for n in g.node if n.op_type == "Constant"]
    if consts:
        cc = collections.Counter(constant_value_str(n).split(" = ")[0] for n in consts)
        p(f"constant nodes ({len(consts)}): " +
          ", ".join(f"{k} x{v}" for k, v in sorted(cc.items())))

    if show_nodes:
        p("graph nodes:")
        for n in g.node:
            extra = ""
            if n.op_type == "Constant":
                extra = "  value=" + constant_value_str(n)
            attrs = [a.name for a in n.attribute if n.op_type != "Constant"]
            if attrs:
                extra += "  attrs=" + ",".join(attrs)
            p(f"  [{n.op_type}] {n.name}: ({', '.join(n.input)}) -> "
              f"({', '.join(n.output)}){extra}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="+")
    ap.add_argument("--nodes", action="store_true", help="also list every node")
    ap.add_argument("--no-initializers", action="store_true",
                    help="do not list individual initializers")
    a = ap.parse_args()
    for i, path in enumerate(a.model):
        if i:
            print()
        describe(path, show_nodes=a.nodes, show_inits=not a.no_initializers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
