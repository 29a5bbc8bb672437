#!/usr/bin/env python3
"""Writes a forward-only ONNX model whose elementwise ops become one fused
kernel each, one per vector width the CUDA emitter picks (fused-kernels.test):

  a = x[4,24] + b[24]          f32, bias broadcast along rows: 4 per thread
  c = y[4,20] * r[4,1]         f32, a per-row scalar: 4 per thread
  d = u[3,6] + u               f32, rows of 6: 2 per thread
  e = z[3,5] + z               f32, rows of 5: 1 per thread
  f = h[2,40] + h              f16: 8 per thread
  g = Where(m[4,16], w, 0)     bool mask with f32 values: 8 per thread
  k = n[6] + n                 int64: 2 per thread

Usage: make_fused_model.py OUT.onnx
"""
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save


def main():
    f, h, b8, i64 = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BOOL,
                     TensorProto.INT64)
    inputs = [("x", f, [4, 24]), ("b", f, [24]), ("y", f, [4, 20]),
              ("r", f, [4, 1]), ("u", f, [3, 6]), ("z", f, [3, 5]),
              ("h", h, [2, 40]), ("m", b8, [4, 16]), ("w", f, [4, 16]),
              ("n", i64, [6])]
    nodes = [helper.make_node("Add", ["x", "b"], ["a"]),
             helper.make_node("Mul", ["y", "r"], ["c"]),
             helper.make_node("Add", ["u", "u"], ["d"]),
             helper.make_node("Add", ["z", "z"], ["e"]),
             helper.make_node("Add", ["h", "h"], ["f"]),
             helper.make_node("Where", ["m", "w", "zero"], ["g"]),
             helper.make_node("Add", ["n", "n"], ["k"])]
    outputs = [("a", f, [4, 24]), ("c", f, [4, 20]), ("d", f, [3, 6]),
               ("e", f, [3, 5]), ("f", h, [2, 40]), ("g", f, [4, 16]),
               ("k", i64, [6])]
    graph = helper.make_graph(
        nodes, "fused_kernels",
        [helper.make_tensor_value_info(*i) for i in inputs],
        [helper.make_tensor_value_info(*o) for o in outputs],
        initializer=[numpy_helper.from_array(np.zeros([], np.float32),
                                             "zero")])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    save(model, sys.argv[1])


if __name__ == "__main__":
    main()
