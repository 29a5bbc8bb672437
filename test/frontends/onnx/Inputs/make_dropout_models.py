#!/usr/bin/python3
"""Write small models with Dropout nodes for dropout.test.

  make_dropout_models.py DIR

DIR/train.onnx: three Dropouts of y = tanh(x): training mode with ratio 0.2,
training mode with ratio 0 (nothing dropped), and eval mode; the first's
data output only is used. DIR/mask.onnx: a training-mode Dropout whose
mask output is a graph output. DIR/ratio.onnx: a training-mode Dropout of
ratio 1.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(nodes, outputs, path):
    graph = helper.make_graph(
        nodes, "dropout", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        outputs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def scalar(name, value, dtype):
    """A Constant node (a float initializer would be a parameter)."""
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.array(value, dtype=dtype)))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_dropout_models.py DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    consts = [scalar("r2", 0.2, np.float32), scalar("r0", 0.0, np.float32),
              scalar("r1", 1.0, np.float32), scalar("on", True, np.bool_),
              scalar("off", False, np.bool_)]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    model(consts + [helper.make_node("Tanh", ["x"], ["t"]),
           helper.make_node("Dropout", ["t", "r2", "on"], ["a", "am"]),
           helper.make_node("Dropout", ["a", "r0", "on"], ["b"]),
           helper.make_node("Dropout", ["b", "r2", "off"], ["y"])],
          [y], os.path.join(out, "train.onnx"))
    model(consts + [helper.make_node("Dropout", ["x", "r2", "on"], ["y", "m"])],
          [y, helper.make_tensor_value_info("m", TensorProto.BOOL, [2, 4])],
          os.path.join(out, "mask.onnx"))
    model(consts + [helper.make_node("Dropout", ["x", "r1", "on"], ["y"])], [y],
          os.path.join(out, "ratio.onnx"))


if __name__ == "__main__":
    main()
