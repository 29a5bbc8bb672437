#!/usr/bin/python3
"""Writes one-node ONNX models of the ops the importer builds from other
ops (test/frontends/onnx/decomposed-ops.test): NAME.onnx into OUTDIR, the
`bad_*` ones each with one thing the importer refuses.

Usage: make_op_models.py OUTDIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def model(name, op, inputs, output, attrs=None, inits=(), opset=17):
    graph = helper.make_graph(
        [helper.make_node(op, [i[0] for i in inputs] + [n for n, _ in inits],
                          ["y"], **(attrs or {}))],
        name,
        [helper.make_tensor_value_info(*i) for i in inputs],
        [helper.make_tensor_value_info("y", *output)],
        initializer=[numpy_helper.from_array(v, n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def sin_of_constant():
    """Sin of a Constant node (a float initializer would be a parameter)."""
    c = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
        np.array([0.0, 1.0, 2.0], np.float32)))
    graph = helper.make_graph(
        [c, helper.make_node("Sin", ["c"], ["s"]),
         helper.make_node("Add", ["x", "s"], ["y"])], "m",
        [helper.make_tensor_value_info("x", F, [3])],
        [helper.make_tensor_value_info("y", F, [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main(out):
    os.makedirs(out, exist_ok=True)
    x = ("x", F, [2, 3])
    models = {
        "leaky_relu": model("m", "LeakyRelu", [x], (F, [2, 3]), {"alpha": 0.1}),
        "elu": model("m", "Elu", [x], (F, [2, 3]), {"alpha": 0.5}),
        "softplus": model("m", "Softplus", [x], (F, [2, 3])),
        "hard_swish": model("m", "HardSwish", [x], (F, [2, 3])),
        "not": model("m", "Not", [("x", B, [2, 3])], (B, [2, 3])),
        "trilu": model("m", "Trilu", [x], (F, [2, 3]), {"upper": 0}),
        "log_softmax": model("m", "LogSoftmax", [x], (F, [2, 3])),
        "gather_elements": model("m", "GatherElements",
                                 [x, ("i", I64, [2, 1])], (F, [2, 1]),
                                 {"axis": 1}),
        "einsum": model("m", "Einsum", [x, ("w", F, [3, 4])], (F, [2, 4]),
                        {"equation": "ij,jk->ik"}),
        "sin_constant": sin_of_constant(),
        "bad_sin_runtime": model("m", "Sin", [x], (F, [2, 3])),
        "bad_einsum_ellipsis": model("m", "Einsum", [x], (F, [2, 3]),
                                     {"equation": "...i->...i"}),
        "bad_einsum_repeated": model("m", "Einsum", [("x", F, [3, 3])],
                                     (F, [3]), {"equation": "ii->i"}),
        "bad_gather_elements": model("m", "GatherElements",
                                     [x, ("i", I64, [1, 1])], (F, [1, 1]),
                                     {"axis": 1}),
        "bad_not_float": model("m", "Not", [x], (B, [2, 3])),
        "bad_trilu_rank1": model("m", "Trilu", [("x", F, [3])], (F, [3])),
        "bad_clip_min": model("m", "Clip", [x, ("lo", F, [3])], (F, [2, 3])),
    }
    for name, m in models.items():
        save(m, os.path.join(out, name + ".onnx"))
        print(name)


if __name__ == "__main__":
    main(sys.argv[1])
