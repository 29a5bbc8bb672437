#!/usr/bin/python3
"""Reads a compiled program's quantized weights back and writes the model
with them dequantized (plan `quantize`; runtime/support/Quantize.h).

  dequantize_weights.py OUTDIR MODEL.onnx -o DEQUANTIZED.onnx [--check]

OUTDIR/weights.json names each quantized weight's codes and absmax
tensors in OUTDIR/weights.bin. NF4 (bitsandbytes): blocks of block_size
consecutive elements, an absmax per block, two 4-bit codes per byte (the
first element in the high nibble), w = NF4[code] * absmax. With
double_quant (bitsandbytes' compress_statistics) the absmax are one byte
each, codes of bitsandbytes' dynamic map, and a "state2" tensor holds
their offset then one scale per 256 of them: absmax = DYN[q] *
state2[1 + b // 256] + state2[0]. INT8: one code
per element, one absmax per output feature (dim `axis`), w = code * absmax
/ 127. The output is MODEL.onnx with those initializers replaced, for the
PyTorch reference to train (torch_ref.py). With --check the codes and
scales must be what quantizing MODEL's initializer gives (nearest NF4
value; round(w / absmax * 127); the offset the mean of the absmax, each
scale the largest |absmax - offset| of its 256, each absmax code the
nearest dynamic-map value).
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


def create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
    """bitsandbytes.functional.create_dynamic_map (0.43), in torch."""
    import torch
    data = []
    non_sign_bits = total_bits - 1
    for i in range(max_exponent_bits):
        fraction_items = int(2 ** (i + non_sign_bits - max_exponent_bits) + 1 if signed
                             else 2 ** (i + non_sign_bits - max_exponent_bits + 1) + 1)
        boundaries = torch.linspace(0.1, 1, fraction_items)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += (10 ** (-(max_exponent_bits - 1) + i) * means).tolist()
        if signed:
            data += (-10 ** (-(max_exponent_bits - 1) + i) * means).tolist()
    data += [0, 1.0]
    data += [0] * (256 - len(data))
    data.sort()
    return torch.tensor(data).numpy()


DYN = create_dynamic_map()


def block_absmax(q, part):
    """The f32 absmax of each NF4 block, dequantized under double_quant."""
    if not q.get("double_quant"):
        return part["absmax"]
    state2 = part["state2"]
    b = np.arange(part["absmax"].size)
    return (DYN[part["absmax"].astype(np.int64)] * state2[1 + b // 256]
            + state2[0]).astype(np.float32)


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


def check_double_quant(name, absmax, part):
    """Double quantization of the f32 absmax as bitsandbytes does it."""
    errors = []
    state2, got = part["state2"], part["absmax"]
    offset = state2[0]
    if not np.isclose(offset, absmax.mean(dtype=np.float64), rtol=1e-6, atol=0):
        errors.append(f"{name}: the offset {offset} is not the absmax mean")
    centred = (absmax - offset).astype(np.float32)
    groups = (absmax.size + 255) // 256
    if state2.size != 1 + groups:
        return errors + [f"{name}: state2 has {state2.size} floats, not {1 + groups}"]
    for g in range(groups):
        block = centred[g * 256:(g + 1) * 256]
        scale = np.abs(block).max()
        if scale != state2[1 + g]:
            errors.append(f"{name}: absmax group {g} has scale {state2[1 + g]}, not {scale}")
            continue
        x = block / (scale if scale > 0 else 1)
        want = np.abs(x[:, None] - DYN[None, :]).argmin(axis=1)
        if not np.array_equal(want, got[g * 256:(g + 1) * 256]):
            wrong = int((want != got[g * 256:(g + 1) * 256]).sum())
            errors.append(f"{name}: {wrong} absmax codes are not the nearest values'")
    return errors


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
        if q["role"] == "codes":
            value = raw.view(np.int8)
        elif q["role"] == "absmax" and q.get("double_quant"):
            value = raw.view(np.uint8)
        else:
            value = raw.view(np.float32)
        parts.setdefault(q["weight"], {"q": q})[q["role"]] = value
    model = onnx.load(args.model)
    by_name = {t.name: t for t in model.graph.initializer}
    errors = []
    for name, part in sorted(parts.items()):
        q = part["q"]
        w = dequantize(q, part["codes"], block_absmax(q, part)).astype(np.float32)
        if args.check:
            original = numpy_helper.to_array(by_name[name]).astype(np.float32)
            codes, absmax = quantize(q, original)
            if q.get("double_quant"):
                errors += check_double_quant(name, absmax, part)
            elif not np.array_equal(absmax, part["absmax"]):
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
