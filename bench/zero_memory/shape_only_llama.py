#!/usr/bin/python3
"""A Llama-shaped training-loss ONNX model whose weights need not exist.

Usage (as a program; bench/planner/llama3.py imports `build`):
  /usr/bin/python3 bench/zero_memory/shape_only_llama.py -o MODEL.onnx \\
      [--layers L] [--hidden H] [--heads A] [--kv-heads K] [--ffn F] \\
      [--vocab V] [--seq T] [--batch B]

The graph (opset 17, written with onnx.helper as shape_only_gpt.py writes
GPT-2) is Llama's: token embedding `embed_tokens` [V, h] (Gather); L
pre-norm blocks of RMSNorm (x / sqrt(mean(x^2) + 1e-5) * weight), q, k, v
projections without bias ([h, h], [h, K h/A] twice), rotary embeddings
(x cos + rotate_half(x) sin, the [T, h/A] tables Constant nodes), grouped-
query attention (each of the K key/value heads expanded over A / K query
heads), scores q k^T / sqrt(h/A) with a causal mask (in a Where: j <= i, the
positions Range(0, T) compared as a column with themselves as a row, so no
[T, T] table is stored), Softmax, the output projection [h, h] and the
residual; RMSNorm, SwiGLU (silu(x W_gate) * (x W_up)) W_down with W_gate,
W_up [h, F] and W_down [F, h], and the residual; a final RMSNorm and an
untied LM head [h, V]; SoftmaxCrossEntropyLoss (mean). Graph inputs `idx`
and `targets`, int64 [B, T] (--batch 0: a dynamic batch). Trainable
parameters: L (2 h^2 + 2 h K h/A + 3 h F + 2 h) + 2 V h + h.

As in shape_only_gpt.py, every float initializer over 4 KiB is external
data in a sparse file next to the model that nothing is written to: the
planner reads shapes alone (delete the file: `autopar plan` does not open
it), so Llama 3 405B takes a few MiB.
"""
import argparse
import math
import os
import sys

import numpy as np
from onnx import TensorProto, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shape_only_gpt import ExternalFile, Graph, initializer, write_model  # noqa: E402


def parameter_shapes(layers, hidden, kv_dim, ffn, vocab):
    """The trainable float initializers, name -> shape, in graph order."""
    h = hidden
    shapes = {"embed_tokens.weight": [vocab, h]}
    for i in range(layers):
        p = f"layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": [h],
            p + "self_attn.q_proj.weight": [h, h], p + "self_attn.k_proj.weight": [h, kv_dim],
            p + "self_attn.v_proj.weight": [h, kv_dim], p + "self_attn.o_proj.weight": [h, h],
            p + "post_attention_layernorm.weight": [h],
            p + "mlp.gate_proj.weight": [h, ffn], p + "mlp.up_proj.weight": [h, ffn],
            p + "mlp.down_proj.weight": [ffn, h],
        })
    shapes.update({"norm.weight": [h], "lm_head.weight": [h, vocab]})
    return shapes


def rms_norm(g, x, weight):
    mean = g.op("ReduceMean", g.op("Mul", x, x), axes=[-1], keepdims=1)
    inv = g.op("Reciprocal", g.op("Sqrt", g.op("Add", mean, g.const(1e-5))))
    return g.op("Mul", g.op("Mul", x, inv), weight)


def rotary(g, x, cos, sin, d):
    """x cos + rotate_half(x) sin over the last dim (d)."""
    first = g.op("Slice", x, g.ints([0]), g.ints([d // 2]), g.ints([-1]))
    second = g.op("Slice", x, g.ints([d // 2]), g.ints([d]), g.ints([-1]))
    half = g.op("Concat", g.op("Neg", second), first, axis=-1)
    return g.op("Add", g.op("Mul", x, cos), g.op("Mul", half, sin))


def attention(g, x, p, mask, cos, sin, batch, seq, hidden, heads, kv_heads):
    d = hidden // heads
    q = g.op("MatMul", x, p + "self_attn.q_proj.weight")
    k = g.op("MatMul", x, p + "self_attn.k_proj.weight")
    v = g.op("MatMul", x, p + "self_attn.v_proj.weight")
    q = g.op("Transpose", g.op("Reshape", q, g.ints([batch, seq, heads, d])), perm=[0, 2, 1, 3])

    def kv(t):
        t = g.op("Transpose", g.op("Reshape", t, g.ints([batch, seq, kv_heads, d])),
                 perm=[0, 2, 1, 3])
        return t

    k, v = kv(k), kv(v)
    q, k = rotary(g, q, cos, sin, d), rotary(g, k, cos, sin, d)

    def expand(t):
        # [B, K, T, d] -> [B, K, A/K, T, d] -> [B, A, T, d] (repeat_interleave).
        rep = heads // kv_heads
        t = g.op("Unsqueeze", t, g.ints([2]))
        b = batch if batch else 1
        t = g.op("Expand", t, g.ints([b, kv_heads, rep, seq, d]))
        return g.op("Reshape", t, g.ints([batch, heads, seq, d]))

    k, v = expand(k), expand(v)
    scores = g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])),
                  g.const(1.0 / math.sqrt(d)))
    masked = g.op("Where", mask, scores, g.const(float("-inf")))
    y = g.op("MatMul", g.op("Softmax", masked, axis=-1), v)
    y = g.op("Reshape", g.op("Transpose", y, perm=[0, 2, 1, 3]), g.ints([batch, seq, hidden]))
    return g.op("MatMul", y, p + "self_attn.o_proj.weight")


def mlp(g, x, p):
    gate = g.op("MatMul", x, p + "mlp.gate_proj.weight")
    up = g.op("MatMul", x, p + "mlp.up_proj.weight")
    silu = g.op("Mul", gate, g.op("Sigmoid", gate))
    return g.op("MatMul", g.op("Mul", silu, up), p + "mlp.down_proj.weight")


def build(path, layers, hidden, heads, kv_heads, ffn, vocab, seq, batch):
    """Writes the model to `path` (and its sparse data file); returns the
    trainable parameters' shapes (name -> shape)."""
    if hidden % heads or heads % kv_heads:
        raise ValueError(f"hidden {hidden}, heads {heads}, kv heads {kv_heads}: "
                         "heads must divide hidden and kv heads heads")
    d = hidden // heads
    shapes = parameter_shapes(layers, hidden, kv_heads * d, ffn, vocab)
    store = ExternalFile(path)
    g = Graph()
    for name, shape in shapes.items():
        small = math.prod(shape) * 4 <= 4096
        value = np.ones(shape, np.float32) if small else None
        g.initializers.append(initializer(store, name, TensorProto.FLOAT, shape, value))
    # The causal mask from the positions, j <= i (a [T, T] table would be
    # 16 GiB at 128K tokens).
    position = g.op("Range", g.const(0, TensorProto.INT64), g.const(seq, TensorProto.INT64),
                    g.const(1, TensorProto.INT64))
    mask = g.op("GreaterOrEqual", g.op("Unsqueeze", position, g.ints([1])), position)
    # The rotary tables (Llama's theta 500000 for Llama 3), [T, d].
    inv = 1.0 / (500000.0 ** (np.arange(0, d, 2, dtype=np.float64) / d))
    angles = np.outer(np.arange(seq, dtype=np.float64), inv)
    angles = np.concatenate([angles, angles], axis=-1)
    cos, sin = (g.op("Constant", value=numpy_helper.from_array(
        f(angles).astype(np.float32), "value")) for f in (np.cos, np.sin))

    x = g.op("Gather", "embed_tokens.weight", "idx", axis=0)
    for i in range(layers):
        p = f"layers.{i}."
        x = g.op("Add", x, attention(g, rms_norm(g, x, p + "input_layernorm.weight"), p, mask, cos,
                                     sin, batch, seq, hidden, heads, kv_heads))
        x = g.op("Add", x, mlp(g, rms_norm(g, x, p + "post_attention_layernorm.weight"), p))
    logits = g.op("MatMul", rms_norm(g, x, "norm.weight"), "lm_head.weight")
    write_model(g, store, path, "shape_only_llama", logits, batch, seq, vocab)
    return shapes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", dest="output", required=True)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--ffn", type=int, default=176)
    parser.add_argument("--vocab", type=int, default=128)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--batch", type=int, default=4,
                        help="the batch; 0: dynamic (the dim named 'batch')")
    args = parser.parse_args()
    try:
        shapes = build(args.output, args.layers, args.hidden, args.heads, args.kv_heads,
                       args.ffn, args.vocab, args.seq, args.batch)
    except (ValueError, OSError) as e:
        sys.exit(f"shape_only_llama: {e}")
    print(f"{args.output}: {sum(math.prod(s) for s in shapes.values())} trainable parameters")


if __name__ == "__main__":
    main()
