#!/usr/bin/python3
"""Write a small opset-18 model exercising the ops whose signature changed at
opset 18 (ReduceMean/ReduceMax take axes as an input, Split takes
num_outputs), plus Gemm, Expand, ConstantOfShape, Dropout and Cast.
torch 1.13 cannot export opset 18, so this uses onnx.helper.

Usage: /usr/bin/python3 test/models/make_opset18_model.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_opset18_model.py OUT.onnx")
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((6, 8)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32), "b"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axes"),
        numpy_helper.from_array(np.array([3, 8], dtype=np.int64), "shape"),
    ]
    nodes = [
        # [3,6] x [6,8] + [8] -> [3,8]
        helper.make_node("Gemm", ["x", "w", "b"], ["g"], name="gemm", alpha=0.5),
        helper.make_node("Dropout", ["g"], ["d"], name="dropout"),
        # Split [3,8] along axis 1 into 3 parts: 3, 3, 2.
        helper.make_node("Split", ["d"], ["s0", "s1", "s2"], name="split",
                         axis=1, num_outputs=3),
        helper.make_node("ReduceMean", ["s0", "axes"], ["m"], name="mean",
                         keepdims=1),
        helper.make_node("ReduceMax", ["s1", "axes"], ["mx"], name="max",
                         keepdims=0),
        helper.make_node("Expand", ["m", "shape"], ["e"], name="expand"),
        helper.make_node("ConstantOfShape", ["shape"], ["ones"], name="ones",
                         value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
        helper.make_node("Add", ["e", "ones"], ["y"], name="add"),
        helper.make_node("Cast", ["mx"], ["yi"], name="cast", to=TensorProto.INT32),
    ]
    graph = helper.make_graph(
        nodes, "opset18",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 8]),
         helper.make_tensor_value_info("yi", TensorProto.INT32, [3]),
         helper.make_tensor_value_info("s2", TensorProto.FLOAT, [3, 2])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, sys.argv[1])


if __name__ == "__main__":
    main()
