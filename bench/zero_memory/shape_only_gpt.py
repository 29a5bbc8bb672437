#!/usr/bin/python3
"""A GPT-2 shaped training-loss ONNX model whose weights need not exist.

Usage (as a program; bench/zero_memory/run.py imports `build`):
  /usr/bin/python3 bench/zero_memory/shape_only_gpt.py -o MODEL.onnx \\
      [--layers L] [--hidden H] [--heads A] [--vocab V] [--seq T] [--batch B] \\
      [--random-weights] [--seed S] [--additive-mask] [--gathered-positions]

The graph (opset 17, written with onnx.helper) is GPT-2's: token embedding
`wte` [V, h] (Gather) plus learned positions `wpe` [T, h] (added whole: the
sequence is always T); L pre-LN blocks of LayerNormalization (weight and
bias), a fused qkv projection [h, 3h] + bias split into q, k, v of shape
[B, a, T, h/a], scores q k^T * 1/sqrt(h/a), a causal mask Where(mask,
scores, -inf) with `causal_mask` a [1, 1, T, T] bool initializer (true on
and below the diagonal: autopar-fuse-attention recognizes it from its
bytes), Softmax over the keys, the output projection [h, h] + bias and the
residual; LayerNormalization, MLP [h, 4h] + bias, exact GELU
0.5 x (1 + erf(x / sqrt 2)), [4h, h] + bias and the residual; a final
LayerNormalization and a tied LM head (MatMul with Transpose(wte): no
separate output weight); SoftmaxCrossEntropyLoss (mean) against the int64
targets. Graph inputs `idx` and `targets`, int64 [B, T] (with --batch 0 the batch dim is dynamic,
named `batch`); output: the scalar
`loss`. Trainable parameters: 12 L h^2 + 13 L h + V h + T h + 2 h.

Two variants write the same model as other exporters do (torch.onnx of
hand-written GPTs): --additive-mask adds a float [1, 1, T, T] table of 0
and -1e9 to the scores (an initializer, inline as the bool mask is)
instead of the Where; --gathered-positions gathers `wpe` by a constant
index 0..T-1 instead of adding it whole. The planner must predict both
alike (bench/planner/variants.py).

Every float initializer over 4 KiB is external data in one file next to the
model (the causal mask is always inline)
(MODEL.onnx.data), which is created with os.truncate to its full size and is
therefore sparse: without --random-weights nothing but the causal mask's
bytes is written (the float tensors read as zeros; small inline LayerNorm
weights are ones), so a 7.5B-parameter model takes a few MiB of disk. With
--random-weights every float tensor gets GPT-2's initialization (normal,
std 0.02; LayerNorm weight 1, biases 0) from numpy's RandomState(seed), for
training the model at a tiny size.
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

OPSET = 17
INLINE_MAX_BYTES = 4096
ALIGN = 4096


def parameter_shapes(layers, hidden, vocab, seq):
    """The trainable float initializers, name -> shape, in graph order."""
    h = hidden
    shapes = {"wte.weight": [vocab, h], "wpe.weight": [seq, h]}
    for i in range(layers):
        p = f"h.{i}."
        shapes.update({
            p + "ln_1.weight": [h], p + "ln_1.bias": [h],
            p + "attn.c_attn.weight": [h, 3 * h], p + "attn.c_attn.bias": [3 * h],
            p + "attn.c_proj.weight": [h, h], p + "attn.c_proj.bias": [h],
            p + "ln_2.weight": [h], p + "ln_2.bias": [h],
            p + "mlp.c_fc.weight": [h, 4 * h], p + "mlp.c_fc.bias": [4 * h],
            p + "mlp.c_proj.weight": [4 * h, h], p + "mlp.c_proj.bias": [h],
        })
    shapes.update({"ln_f.weight": [h], "ln_f.bias": [h]})
    return shapes


def initial_value(name, shape, rng):
    """GPT-2's initialization of one parameter (rng None: shape-only)."""
    if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
        return np.ones(shape, np.float32)
    if rng is None or name.endswith(".bias"):
        return np.zeros(shape, np.float32)
    return (rng.standard_normal(shape) * 0.02).astype(np.float32)


class ExternalFile:
    """Lays tensors out in one sparse data file; writes only given bytes."""

    def __init__(self, model_path):
        self.location = os.path.basename(model_path) + ".data"
        self.path = os.path.join(os.path.dirname(os.path.abspath(model_path)), self.location)
        self.size = 0
        self.writes = []

    def tensor(self, name, dtype, shape, nbytes, data=None):
        offset = self.size
        self.size = -(-(offset + nbytes) // ALIGN) * ALIGN
        if data is not None:
            self.writes.append((offset, data))
        t = TensorProto(name=name, data_type=dtype, dims=shape)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", self.location), ("offset", offset), ("length", nbytes)):
            entry = t.external_data.add()
            entry.key, entry.value = key, str(value)
        return t

    def write(self):
        with open(self.path, "wb") as f:
            for offset, data in self.writes:
                f.seek(offset)
                f.write(data)
        os.truncate(self.path, self.size)


def initializer(store, name, dtype, shape, array=None):
    """An inline tensor of `array` when small, else an external one (its
    bytes written only when `array` is given)."""
    nbytes = math.prod(shape) * (1 if dtype == TensorProto.BOOL else 4)
    if dtype == TensorProto.BOOL:
        # The causal mask stays in the model: autopar recognizes it from
        # its bytes, which a plan from shapes alone still needs.
        return helper.make_tensor(name, dtype, shape, array.tobytes(), raw=True)
    if nbytes <= INLINE_MAX_BYTES:
        return helper.make_tensor(name, dtype, shape, array.flatten().tolist())
    return store.tensor(name, dtype, shape, nbytes, None if array is None else array.tobytes())


class Graph:
    """Node and constant bookkeeping for one onnx.helper graph."""

    def __init__(self):
        self.nodes, self.initializers, self.count = [], [], 0

    def op(self, op_type, *inputs, **attrs):
        self.count += 1
        out = f"{op_type.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def ops(self, op_type, inputs, n, **attrs):
        self.count += 1
        outs = [f"{op_type.lower()}_{self.count}_{k}" for k in range(n)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs

    def const(self, value, dtype=TensorProto.FLOAT, shape=()):
        """A Constant node (scalar floats, shapes, splits): a float
        initializer would be a trained parameter."""
        values = value if isinstance(value, list) else [value]
        return self.op("Constant", value=helper.make_tensor("value", dtype, list(shape), values))

    def ints(self, values):
        return self.const(list(values), TensorProto.INT64, [len(values)])


def attention(g, x, p, mask, batch, seq, hidden, heads, additive=False):
    """Causal self-attention of one block, before the output projection's
    residual: returns [B, T, h]. `additive`: `mask` is a float table added
    to the scores."""
    d = hidden // heads
    qkv = g.op("Add", g.op("MatMul", x, p + "attn.c_attn.weight"), p + "attn.c_attn.bias")
    q, k, v = g.ops("Split", [qkv, g.ints([hidden] * 3)], 3, axis=2)
    # A dynamic batch (0): Reshape copies dim 0 of its input.
    heads_shape = g.ints([batch, seq, heads, d])
    q = g.op("Transpose", g.op("Reshape", q, heads_shape), perm=[0, 2, 1, 3])
    kt = g.op("Transpose", g.op("Reshape", k, heads_shape), perm=[0, 2, 3, 1])
    v = g.op("Transpose", g.op("Reshape", v, heads_shape), perm=[0, 2, 1, 3])
    scores = g.op("Mul", g.op("MatMul", q, kt), g.const(1.0 / math.sqrt(d)))
    masked = (g.op("Add", scores, mask) if additive
              else g.op("Where", mask, scores, g.const(float("-inf"))))
    y = g.op("MatMul", g.op("Softmax", masked, axis=-1), v)
    y = g.op("Reshape", g.op("Transpose", y, perm=[0, 2, 1, 3]), g.ints([batch, seq, hidden]))
    return g.op("Add", g.op("MatMul", y, p + "attn.c_proj.weight"), p + "attn.c_proj.bias")


def mlp(g, x, p):
    """The block's MLP with exact GELU."""
    fc = g.op("Add", g.op("MatMul", x, p + "mlp.c_fc.weight"), p + "mlp.c_fc.bias")
    erf = g.op("Erf", g.op("Div", fc, g.const(math.sqrt(2.0))))
    gelu = g.op("Mul", g.op("Mul", fc, g.const(0.5)), g.op("Add", erf, g.const(1.0)))
    return g.op("Add", g.op("MatMul", gelu, p + "mlp.c_proj.weight"), p + "mlp.c_proj.bias")


def layer_norm(g, x, prefix):
    return g.op("LayerNormalization", x, prefix + ".weight", prefix + ".bias",
                axis=-1, epsilon=1e-5)


def build(path, layers, hidden, heads, vocab, seq, batch, random_weights=False, seed=0,
          additive_mask=False, gathered_positions=False):
    """Writes the model to `path` (and its data file); returns the trainable
    parameters' shapes (name -> shape)."""
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    shapes = parameter_shapes(layers, hidden, vocab, seq)
    rng = np.random.RandomState(seed) if random_weights else None
    store = ExternalFile(path)
    g = Graph()
    for name, shape in shapes.items():
        small = math.prod(shape) * 4 <= INLINE_MAX_BYTES
        value = initial_value(name, shape, rng) if random_weights or small else None
        g.initializers.append(initializer(store, name, TensorProto.FLOAT, shape, value))
    tril = np.tril(np.ones((seq, seq), np.bool_)).reshape(1, 1, seq, seq)
    if additive_mask:
        table = np.where(tril, 0.0, -1e9).astype(np.float32)
        g.initializers.append(helper.make_tensor(
            "causal_mask", TensorProto.FLOAT, [1, 1, seq, seq], table.tobytes(), raw=True))
    else:
        g.initializers.append(
            initializer(store, "causal_mask", TensorProto.BOOL, [1, 1, seq, seq], tril))

    positions = "wpe.weight"
    if gathered_positions:
        positions = g.op("Gather", "wpe.weight", g.ints(range(seq)), axis=0)
    x = g.op("Add", g.op("Gather", "wte.weight", "idx", axis=0), positions)
    for i in range(layers):
        p = f"h.{i}."
        x = g.op("Add", x, attention(g, layer_norm(g, x, p + "ln_1"), p, "causal_mask",
                                     batch, seq, hidden, heads, additive_mask))
        x = g.op("Add", x, mlp(g, layer_norm(g, x, p + "ln_2"), p))
    logits = g.op("MatMul", layer_norm(g, x, "ln_f"), g.op("Transpose", "wte.weight", perm=[1, 0]))
    write_model(g, store, path, "shape_only_gpt", logits, batch, seq, vocab)
    onnx.checker.check_model(path)
    return shapes


def write_model(g, store, path, name, logits, batch, seq, vocab):
    """The mean cross-entropy of `logits` [B, T, V] against `targets` as the
    graph's output `loss` (inputs `idx` and `targets`, int64 [B, T]; batch
    0: dynamic); writes the model to `path` and its sparse data file."""
    rows = batch * seq if batch else -1
    flat_logits = g.op("Reshape", logits, g.ints([rows, vocab]))
    flat_targets = g.op("Reshape", "targets", g.ints([rows]))
    g.nodes.append(helper.make_node("SoftmaxCrossEntropyLoss", [flat_logits, flat_targets],
                                    ["loss"], reduction="mean"))
    tokens = [batch if batch else "batch", seq]
    graph = helper.make_graph(
        g.nodes, name,
        [helper.make_tensor_value_info("idx", TensorProto.INT64, tokens),
         helper.make_tensor_value_info("targets", TensorProto.INT64, tokens)],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        initializer=g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="bench/zero_memory")
    store.write()
    onnx.save(model, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", dest="output", required=True, help="the .onnx file to write")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=64)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--batch", type=int, default=4,
                        help="the batch; 0: dynamic (the dim named 'batch')")
    parser.add_argument("--random-weights", action="store_true",
                        help="materialize GPT-2-initialized weights (for training)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--additive-mask", action="store_true",
                        help="a float 0 / -1e9 mask table added to the scores")
    parser.add_argument("--gathered-positions", action="store_true",
                        help="wpe gathered by a constant index 0..T-1")
    args = parser.parse_args()
    try:
        shapes = build(args.output, args.layers, args.hidden, args.heads, args.vocab, args.seq,
                       args.batch, args.random_weights, args.seed, args.additive_mask,
                       args.gathered_positions)
    except (ValueError, OSError) as e:
        sys.exit(f"shape_only_gpt: {e}")
    print(f"{args.output}: {sum(math.prod(s) for s in shapes.values())} trainable parameters")


if __name__ == "__main__":
    main()
