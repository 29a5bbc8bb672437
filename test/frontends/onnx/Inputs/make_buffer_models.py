#!/usr/bin/python3
"""ONNX models for float-buffers.test: which float initializers the importer
makes parameters and which buffers (frontends/onnx/Buffers.h).

  make_buffer_models.py OUTDIR

writes OUTDIR/rotary.onnx, a forward graph (input ids int64 [2, 8], output
"y" float [2, 8, 8]) that uses, beside a token embedding `emb` [16, 8]:
  inv_freq [4]     a rotary table: outer product with Range positions, then
                   Concat, Cos and Sin, multiplied into the embeddings
  inv_freq_c [4]   the same with positions the exporter folded into a
                   Constant arange (0..7)
  pos_emb [8, 8]   a learned position table gathered by the Range positions
                   (a parameter: its rows reach the output as they are)
  norm_w [8]       1 + norm_w (Gemma's RMSNorm weight): a parameter
  scaled [8, 8]    scaled * 0.5, transposed, then multiplied: a parameter
  mask [8, 8]      a causal table of 0 and -inf added to scores: a buffer
  mask9 [8, 8]     a causal table of 0 and -1e9 added to scores: a buffer
  bias [8]         a finite table added to scores: a parameter
  rel [15]         T5's relative attention bias: gathered by relative
                   positions, plus a causal mask made by comparing positions
                   (known at import), added to scores: a parameter
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

T, D, V = 8, 8, 16


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def main(out_dir):
    rng = np.random.default_rng(0)
    inits = [
        init("emb", rng.standard_normal((V, D)).astype(np.float32)),
        init("inv_freq", (1.0 / 10000 ** (np.arange(0, D, 2) / D)).astype(np.float32)),
        init("inv_freq_c", (1.0 / 500 ** (np.arange(0, D, 2) / D)).astype(np.float32)),
        init("pos_emb", rng.standard_normal((T, D)).astype(np.float32)),
        init("norm_w", rng.standard_normal(D).astype(np.float32)),
        init("scaled", rng.standard_normal((D, D)).astype(np.float32)),
        init("mask", np.triu(np.full((T, T), -np.inf, np.float32), 1)),
        init("mask9", np.triu(np.full((T, T), -1e9, np.float32), 1)),
        init("bias", rng.standard_normal(T).astype(np.float32)),
        init("rel", rng.standard_normal(2 * T - 1).astype(np.float32)),
        init("offset", np.array(T - 1, np.int64)),

        init("zero", np.array(0, np.int64)), init("t", np.array(T, np.int64)),
        init("one", np.array(1, np.int64)), init("ax1", np.array([1], np.int64)),
        init("ax0", np.array([0], np.int64)),
    ]
    arange = numpy_helper.from_array(np.arange(T, dtype=np.float32).reshape(T, 1))
    nodes = [
        helper.make_node("Constant", [], ["onef"], value_float=1.0),
        helper.make_node("Constant", [], ["half"], value_float=0.5),
        helper.make_node("Gather", ["emb", "ids"], ["x"]),
        helper.make_node("Range", ["zero", "t", "one"], ["pos"]),
        # Rotary from Range positions: cos/sin of pos x inv_freq.
        helper.make_node("Cast", ["pos"], ["posf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["posf", "ax1"], ["pcol"]),
        helper.make_node("Unsqueeze", ["inv_freq", "ax0"], ["frow"]),
        helper.make_node("MatMul", ["pcol", "frow"], ["freqs"]),
        helper.make_node("Concat", ["freqs", "freqs"], ["angles"], axis=1),
        helper.make_node("Cos", ["angles"], ["cos"]),
        helper.make_node("Sin", ["angles"], ["sin"]),
        helper.make_node("Mul", ["x", "cos"], ["xc"]),
        helper.make_node("Mul", ["x", "sin"], ["xs"]),
        helper.make_node("Add", ["xc", "xs"], ["r1"]),
        # The same from a folded Constant arange.
        helper.make_node("Constant", [], ["pconst"], value=arange),
        helper.make_node("Unsqueeze", ["inv_freq_c", "ax0"], ["frow_c"]),
        helper.make_node("Mul", ["pconst", "frow_c"], ["freqs_c"]),
        helper.make_node("Concat", ["freqs_c", "freqs_c"], ["angles_c"], axis=1),
        helper.make_node("Cos", ["angles_c"], ["cos_c"]),
        helper.make_node("Mul", ["r1", "cos_c"], ["r2"]),
        # A learned position table gathered by positions.
        helper.make_node("Gather", ["pos_emb", "pos"], ["pe"]),
        helper.make_node("Add", ["r2", "pe"], ["r3"]),
        # 1 + w and 0.5 * W^T: parameters taken through arithmetic.
        helper.make_node("Add", ["onef", "norm_w"], ["gain"]),
        helper.make_node("Mul", ["r3", "gain"], ["r4"]),
        helper.make_node("Mul", ["scaled", "half"], ["sh"]),
        helper.make_node("Transpose", ["sh"], ["sht"], perm=[1, 0]),
        helper.make_node("MatMul", ["r4", "sht"], ["h"]),
        # Scores with an additive -inf mask and a finite bias.
        helper.make_node("Transpose", ["h"], ["ht"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["h", "ht"], ["s"]),
        helper.make_node("Add", ["s", "mask"], ["sm"]),
        helper.make_node("Add", ["sm", "mask9"], ["sm9"]),
        helper.make_node("Add", ["sm9", "bias"], ["sb"]),
        # T5: rel[j - i + T - 1] plus where(j > i, -1e9, 0).
        helper.make_node("Unsqueeze", ["pos", "ax1"], ["pi"]),
        helper.make_node("Sub", ["pos", "pi"], ["dist"]),
        helper.make_node("Add", ["dist", "offset"], ["bucket"]),
        helper.make_node("Gather", ["rel", "bucket"], ["relb"]),
        helper.make_node("Greater", ["pos", "pi"], ["future"]),
        helper.make_node("Constant", [], ["neg"], value_float=-1e9),
        helper.make_node("Constant", [], ["zf"], value_float=0.0),
        helper.make_node("Where", ["future", "neg", "zf"], ["causal"]),
        helper.make_node("Add", ["relb", "causal"], ["relm"]),
        helper.make_node("Add", ["sb", "relm"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "buffers",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, T])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, T, T])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out_dir, "rotary.onnx"))


if __name__ == "__main__":
    main(sys.argv[1])
