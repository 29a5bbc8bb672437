#!/usr/bin/python3
"""Writes a copy of an ONNX model with one attribute of the first node of an
op type changed (train-activations.test: a reference trained on the changed
model must differ, so the comparison would catch an importer that ignored
or mis-read that attribute).

Usage: mutate_attr.py IN.onnx OUT.onnx OP_TYPE ATTR FLOAT_VALUE
"""
import sys

import onnx
from onnx import helper


def main():
    src, dst, op_type, attr, value = sys.argv[1:]
    model = onnx.load(src)
    for node in model.graph.node:
        if node.op_type == op_type:
            kept = [a for a in node.attribute if a.name != attr]
            del node.attribute[:]
            node.attribute.extend(kept + [helper.make_attribute(attr, float(value))])
            onnx.save(model, dst)
            return
    sys.exit(f"mutate_attr.py: no {op_type} node in {src}")


if __name__ == "__main__":
    main()
