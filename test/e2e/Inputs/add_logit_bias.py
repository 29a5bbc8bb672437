#!/usr/bin/python3
"""Adds a float initializer to a model's logits, as BART's final_logits_bias:
the scores input of the SoftmaxCrossEntropyLoss node becomes scores + bias.

  add_logit_bias.py IN.onnx OUT.onnx --name NAME --size V [--value X]

The bias is [V] (the vocabulary, the scores' last dim) of X (default 0).
"""
import argparse

import numpy as np
import onnx
from onnx import helper, numpy_helper


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("input")
    p.add_argument("output")
    p.add_argument("--name", required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--value", type=float, default=0.0)
    a = p.parse_args()
    m = onnx.load(a.input)
    loss = next(n for n in m.graph.node if n.op_type == "SoftmaxCrossEntropyLoss")
    scores = loss.input[0]
    biased = scores + "_biased"
    m.graph.initializer.append(
        numpy_helper.from_array(np.full([a.size], a.value, np.float32), a.name))
    index = list(m.graph.node).index(loss)
    m.graph.node.insert(index, helper.make_node("Add", [scores, a.name], [biased]))
    loss.input[0] = biased
    onnx.save(m, a.output)


if __name__ == "__main__":
    main()
