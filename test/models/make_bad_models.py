#!/usr/bin/python3
"""Write small deliberately bad / edge-case ONNX models for importer tests.

Usage: /usr/bin/python3 test/models/make_bad_models.py OUTDIR

Uses onnx.helper only (no torch), so it is fast enough for test RUN lines.
Output is deterministic.  Files written into OUTDIR:

  unsupported_op.onnx     opset 17; single Conv node "conv0": X float [1,1,4,4],
                          initializer W float [1,1,3,3] -> Y float [1,1,2,2]
  opset_too_old.onnx      Add of a, b float [2,3] -> c; default-domain opset 9
  opset_too_new.onnx      same Add graph; opset 21, ir_version 8 (not checked:
                          onnx 1.12's checker only knows opsets up to 17)
  dynamic_dim.onnx        opset 17; x float ["N", 4] (dim_param "N") -> Relu -> y
  external_data.onnx      opset 17; y = MatMul(x float [2,4], w float [4,4]) with
                          initializer "w" stored externally in "w.bin", which is
                          then deleted: the model refers to a missing file
  external_data_ok.onnx   same graph, "w" external in "external_ok.bin" (present,
                          64 bytes, offset 0); a valid external-data model
  <mutant>.onnx           y = Softmax(MatMul(x, w)) broken one way each
                          (mutants()): empty_input, few_inputs, extra_input,
                          extra_output, no_output, float_axis, raw_and_float,
                          redefined, huge_dims
  non_utf8_name.onnx      the same with the initializer named b"w\xff\xfe"
All models use ir_version 8 so only the intended property differs.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 8


def make_model(graph, opset, check=True):
    m = helper.make_model(graph, producer_name="autopar-make_bad_models",
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = IR_VERSION
    if check:
        onnx.checker.check_model(m)
    return m


def unsupported_op():
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 4, 4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 1, 2, 2])
    w = numpy_helper.from_array(np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3) / 9.0, "W")
    node = helper.make_node("Conv", ["X", "W"], ["Y"], name="conv0")
    g = helper.make_graph([node], "unsupported_op", [x], [y], initializer=[w])
    return make_model(g, 17)


def add_graph(name):
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])
    c = helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 3])
    node = helper.make_node("Add", ["a", "b"], ["c"], name="add0")
    return helper.make_graph([node], name, [a, b], [c])


def dynamic_dim():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    node = helper.make_node("Relu", ["x"], ["y"], name="relu0")
    g = helper.make_graph([node], "dynamic_dim", [x], [y])
    return make_model(g, 17)


def matmul_model(name):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul0")
    g = helper.make_graph([node], name, [x], [y], initializer=[w])
    return make_model(g, 17)


def save_external(model, outdir, name, location):
    path = os.path.join(outdir, name)
    data = os.path.join(outdir, location)
    if os.path.exists(data):
        os.unlink(data)  # onnx appends to an existing data file
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=location, size_threshold=0, convert_attribute=False)
    onnx.checker.check_model(path)
    return path, data


def constant_of_shape(name, dims):
    """ConstantOfShape of a constant shape `dims` (absurd or negative)."""
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], name=name)
    shape = helper.make_tensor("s", TensorProto.INT64, [len(dims)], dims)
    graph = helper.make_graph(
        [node], name, [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [shape])
    return make_model(graph, 17, check=False)


def unsupported_attribute():
    """Softmax with an attribute the importer does not know."""
    node = helper.make_node("Softmax", ["x"], ["y"], name="softmax0", axis=1,
                            frobnicate=2)
    graph = helper.make_graph(
        [node], "unsupported_attribute",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return make_model(graph, 17, check=False)


def matmul_softmax():
    """y = Softmax(MatMul(x float [2,4], w float [4,4]), axis=1): the base of
    the malformed mutants below (nodes "mm" and "sm")."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    mm = helper.make_node("MatMul", ["x", "w"], ["h"], name="mm")
    sm = helper.make_node("Softmax", ["h"], ["y"], name="sm", axis=1)
    graph = helper.make_graph([mm, sm], "matmul_softmax", [x], [y], [w])
    return make_model(graph, 17)


def mutants():
    """Malformed models the importer must refuse in one line (each crashed
    or imported with other semantics before it checked them)."""
    out = {}
    m = matmul_softmax()
    m.graph.node[0].input[1] = ""
    out["empty_input"] = m
    m = matmul_softmax()
    del m.graph.node[0].input[1]
    out["few_inputs"] = m
    m = matmul_softmax()
    m.graph.node[0].input.append("w")
    out["extra_input"] = m
    m = matmul_softmax()
    m.graph.node[1].output.append("z")
    out["extra_output"] = m
    m = matmul_softmax()
    del m.graph.node[1].output[:]
    out["no_output"] = m
    m = matmul_softmax()
    a = m.graph.node[1].attribute[0]
    a.type = onnx.AttributeProto.FLOAT
    a.f = 1.5
    a.ClearField("i")
    out["float_axis"] = m
    m = matmul_softmax()
    m.graph.initializer[0].float_data.extend([1.0] * 16)
    out["raw_and_float"] = m
    m = matmul_softmax()
    m.graph.node[1].output[0] = "x"
    out["redefined"] = m
    m = matmul_softmax()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2 ** 62
    out["huge_dims"] = m
    return out


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} OUTDIR", file=sys.stderr)
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    written = []

    def save(model, name):
        path = os.path.join(outdir, name)
        onnx.save_model(model, path)
        written.append(path)

    save(unsupported_op(), "unsupported_op.onnx")
    save(make_model(add_graph("opset_too_old"), 9), "opset_too_old.onnx")
    save(make_model(add_graph("opset_too_new"), 21, check=False), "opset_too_new.onnx")
    save(dynamic_dim(), "dynamic_dim.onnx")
    save(constant_of_shape("huge", [1000000, 1000000]), "huge_constant.onnx")
    save(constant_of_shape("negative", [-1, 3]), "negative_shape.onnx")
    save(unsupported_attribute(), "unsupported_attribute.onnx")
    for name, model in mutants().items():
        save(model, name + ".onnx")
    # A name that is not UTF-8 (protobuf's Python API refuses to set one).
    m = matmul_softmax()
    m.graph.initializer[0].name = "wQQ"
    m.graph.node[0].input[1] = "wQQ"
    path = os.path.join(outdir, "non_utf8_name.onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString().replace(b"wQQ", b"w\xff\xfe"))
    written.append(path)

    path, data = save_external(matmul_model("external_data"), outdir, "external_data.onnx",
                               "w.bin")
    os.unlink(data)
    written.append(path + f"  (external 'w' -> {os.path.basename(data)}, deleted)")

    path, data = save_external(matmul_model("external_data_ok"), outdir,
                               "external_data_ok.onnx", "external_ok.bin")
    written.append(path + f"  (external 'w' -> {os.path.basename(data)}, "
                   f"{os.path.getsize(data)} bytes)")

    for w in written:
        print("wrote", w)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
