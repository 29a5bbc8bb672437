#!/usr/bin/python3
"""Pad models for pad.test: make_pad_models.py OUTDIR

  constant.onnx  opset 13: x float [2, 3], pads [1, -1, 0, 2] (axis 0: one
                 row before; axis 1: one column cropped at the start, two
                 added at the end), constant_value 2.5 -> y [3, 4]
  edge.onnx      opset 13: x float [2, 3], pads [0, 2, 0, 1], mode edge
  reflect.onnx   opset 13: x float [2, 3], pads [0, 4, 0, 0], mode reflect
                 (more than the axis: reflected again)
  axes.onnx      opset 18: x float [2, 3], axes [-1], pads [1, 1]
  folded.onnx    opset 13: an int64 initializer [1, 2, 3] padded by [2, 1]
                 in reflect mode, then added to x int64 [6]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(nodes, inputs, output, inits, opset):
    g = helper.make_graph(nodes, "pad", inputs, [output], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    if opset <= 17:  # onnx 1.12's checker knows opsets up to 17
        onnx.checker.check_model(m)
    return m


def pad_model(pads, opset=13, mode=None, value=None, axes=None, out_shape=None):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)
    inits = [numpy_helper.from_array(np.array(pads, np.int64), "pads")]
    names = ["x", "pads"]
    nodes = []
    if value is not None or axes is not None:
        names.append("value" if value is not None else "")
        if value is not None:  # a Constant node, as torch.onnx.export writes it
            nodes.append(helper.make_node("Constant", [], ["value"], value=(
                numpy_helper.from_array(np.array(value, np.float32)))))
    if axes is not None:
        names.append("axes")
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
    attrs = {"mode": mode} if mode else {}
    node = helper.make_node("Pad", names, ["y"], name="pad", **attrs)
    return model(nodes + [node], [x], y, inits, opset)


def main(out):
    os.makedirs(out, exist_ok=True)
    onnx.save(pad_model([1, -1, 0, 2], value=2.5, out_shape=[3, 4]),
              os.path.join(out, "constant.onnx"))
    onnx.save(pad_model([0, 2, 0, 1], mode="edge", out_shape=[2, 6]),
              os.path.join(out, "edge.onnx"))
    onnx.save(pad_model([0, 4, 0, 0], mode="reflect", out_shape=[2, 7]),
              os.path.join(out, "reflect.onnx"))
    onnx.save(pad_model([1, 1], opset=18, axes=[-1], out_shape=[2, 5]),
              os.path.join(out, "axes.onnx"))
    c = numpy_helper.from_array(np.array([1, 2, 3], np.int64), "c")
    p = numpy_helper.from_array(np.array([2, 1], np.int64), "pads")
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [6])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [6])
    nodes = [helper.make_node("Pad", ["c", "pads"], ["cp"], mode="reflect"),
             helper.make_node("Add", ["x", "cp"], ["y"])]
    onnx.save(model(nodes, [x], y, [c, p], 13), os.path.join(out, "folded.onnx"))
    # numpy's answer for the folded one, for the test to match.
    print("folded:", np.pad(np.array([1, 2, 3]), (2, 1), mode="reflect").tolist())


if __name__ == "__main__":
    main(sys.argv[1])
