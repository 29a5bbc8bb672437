#!/usr/bin/python3
"""An attention whose causal mask is the bool triu(1) initializer that
torch.onnx.export's constant folding makes of `masked_fill(~tril, -inf)`:

  make_triu_attention.py OUT.onnx [--shift] [--positions T]

scores = q k^T / sqrt(8); Where(mask, -inf, scores); Softmax; @ v; q, k, v
float [1, 2, 40, 8] graph inputs; mask bool [1, 1, 40, 40] = triu(ones, 1)
(1,600 elements: a buffer, not a small constant). With --shift the mask is
triu(ones, 2) instead: not causal, so it must stay an explicit mask.
With --positions T (sequence T) the mask is computed, as a model that
exports its positions writes it: Less(Unsqueeze(Range(0, T), 1),
Range(0, T)), true where j > i.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

args = sys.argv[1:]
T, D = 40, 8
positions = "--positions" in args
if positions:
    T = int(args.pop(args.index("--positions") + 1))
shift = 2 if "--shift" in args else 1
inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, T, D])
          for n in ("q", "k", "v")]
out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, T, D])


def scalar(name, x):
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.array(x, np.int64)))


if positions:
    mask_nodes = [
        scalar("zero", 0), scalar("count", T), scalar("one", 1),
        helper.make_node("Range", ["zero", "count", "one"], ["pos"]),
        helper.make_node("Unsqueeze", ["pos", "axis1"], ["rows"]),
        helper.make_node("Less", ["rows", "pos"], ["mask"]),
    ]
    inits = [numpy_helper.from_array(np.array([1], np.int64), "axis1")]
else:
    mask = np.triu(np.ones((T, T), dtype=bool), shift).reshape(1, 1, T, T)
    inits = [numpy_helper.from_array(mask, "mask")]
    mask_nodes = []
# Scalars as Constant nodes, as torch.onnx.export writes them.
nodes = mask_nodes + [
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
onnx.save(model, [a for a in args if not a.startswith("--")][0])
