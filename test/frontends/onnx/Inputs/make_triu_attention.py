#!/usr/bin/python3
"""An attention whose causal mask is the bool triu(1) initializer that
torch.onnx.export's constant folding makes of `masked_fill(~tril, -inf)`:

  make_triu_attention.py OUT.onnx [--shift]

scores = q k^T / sqrt(8); Where(mask, -inf, scores); Softmax; @ v; q, k, v
float [1, 2, 40, 8] graph inputs; mask bool [1, 1, 40, 40] = triu(ones, 1)
(1,600 elements: a buffer, not a small constant). With --shift the mask is
triu(ones, 2) instead: not causal, so it must stay an explicit mask.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

T, D = 40, 8
shift = 2 if "--shift" in sys.argv else 1
mask = np.triu(np.ones((T, T), dtype=bool), shift).reshape(1, 1, T, T)
inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, T, D])
          for n in ("q", "k", "v")]
out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, T, D])
inits = [numpy_helper.from_array(mask, "mask")]
# Scalars as Constant nodes, as torch.onnx.export writes them.
nodes = [
    helper.make_node("Constant", [], ["scale"], value=numpy_helper.from_array(
        np.array(1 / np.sqrt(D), np.float32))),
    helper.make_node("Constant", [], ["ninf"], value=numpy_helper.from_array(
        np.array(-np.inf, np.float32))),
    helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
    helper.make_node("MatMul", ["q", "kt"], ["s"]),
    helper.make_node("Mul", ["s", "scale"], ["ss"]),
    helper.make_node("Where", ["mask", "ninf", "ss"], ["masked"]),
    helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
    helper.make_node("MatMul", ["p", "v"], ["y"]),
]
graph = helper.make_graph(nodes, "triu_attention", inputs, [out], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, [a for a in sys.argv[1:] if not a.startswith("--")][0])
