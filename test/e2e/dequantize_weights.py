#!/usr/bin/python3
"""Reads a compiled program's quantized weights back and writes the model
with them dequantized (plan `quantize`; runtime/support/Quantize.h).

  dequantize_weights.py OUTDIR MODEL.onnx -o DEQUANTIZED.onnx [--check]

OUTDIR/weights.json names each quantized weight's codes and absmax
tensors in OUTDIR/weights.bin. NF4 (bitsandbytes): blocks of block_size
consecutive elements, an absmax per block, two 4-bit codes per byte (the
first element in the high nibble), w = NF4[code] * absmax. INT8: one code
per element, one absmax per output feature (dim `axis`), w = code * absmax
/ 127. The output is MODEL.onnx with those initializers replaced, for the
PyTorch reference to train (torch_ref.py). With --check the codes and
scales must be what quantizing MODEL's initializer gives (nearest NF4
value; round(w / absmax * 127)).
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                0.07958029955625534, 0.16093020141124725, 0.24611230194568634,
                0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], dtype=np.float32)


def dequantize(q, codes, absmax):
    rows, cols = q["shape"]
    n = rows * cols
    if q["type"] == "nf4":
        packed = codes.view(np.uint8)
        c = np.empty(packed.size * 2, dtype=np.int64)
        c[0::2], c[1::2] = packed >> 4, packed & 15
        block = np.arange(n) // q["block_size"]
        return (NF4[c[:n]] * absmax[block]).reshape(rows, cols)
    scale = (absmax / np.float32(127)).astype(np.float32)
    c = codes.astype(np.float32).reshape(rows, cols)
    return c * (scale[:, None] if q["axis"] == 0 else scale[None, :])


def quantize(q, w):
    """The codes and absmax of w as the spec says (for --check)."""
    flat = w.reshape(-1).astype(np.float32)
    if q["type"] == "nf4":
        b = q["block_size"]
        absmax = np.array([np.abs(flat[i:i + b]).max() for i in range(0, flat.size, b)],
                          dtype=np.float32)
        x = flat / np.where(absmax > 0, absmax, 1)[np.arange(flat.size) // b]
        codes = np.abs(x[:, None] - NF4[None, :]).argmin(axis=1)
        if codes.size % 2:
            codes = np.append(codes, 7)
        return ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8).view(np.int8), absmax
    axis = q["axis"]
    absmax = np.abs(w).max(axis=1 - axis).astype(np.float32)
    m = absmax[:, None] if axis == 0 else absmax[None, :]
    codes = np.clip(np.rint(w / np.where(m > 0, m, 1) * np.float32(127)), -127, 127)
    return codes.astype(np.int8).reshape(-1), absmax


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("outdir")
    p.add_argument("model")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    with open(os.path.join(args.outdir, "weights.json")) as f:
        manifest = json.load(f)
    blob = np.fromfile(os.path.join(args.outdir, "weights.bin"), dtype=np.uint8)
    parts = {}
    for t in manifest["tensors"]:
        q = t.get("quantized")
        if not q:
            continue
        raw = blob[t["offset"]:t["offset"] + t["bytes"]]
        value = raw.view(np.int8) if q["role"] == "codes" else raw.view(np.float32)
        parts.setdefault(q["weight"], {"q": q})[q["role"]] = value
    model = onnx.load(args.model)
    by_name = {t.name: t for t in model.graph.initializer}
    errors = []
    for name, part in sorted(parts.items()):
        q = part["q"]
        w = dequantize(q, part["codes"], part["absmax"]).astype(np.float32)
        if args.check:
            original = numpy_helper.to_array(by_name[name]).astype(np.float32)
            codes, absmax = quantize(q, original)
            if not np.array_equal(absmax, part["absmax"]):
                errors.append(f"{name}: the absmax scales are not the weight's")
            if not np.array_equal(codes, part["codes"]):
                wrong = int((codes != part["codes"]).sum())
                errors.append(f"{name}: {wrong} code bytes are not the nearest values'")
        by_name[name].CopyFrom(numpy_helper.from_array(w, name))
    if errors:
        print("\n".join(errors))
        return 1
    onnx.save(model, args.output)
    print(f"OK: {len(parts)} quantized weights dequantized")
    return 0


if __name__ == "__main__":
    sys.exit(main())
