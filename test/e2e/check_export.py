#!/usr/bin/python3
"""Check a model written by a compiled program's --export-onnx.

  check_export.py SOURCE.onnx EXPORTED.onnx [--checkpoint DIR] [--weights W.npz|W.onnx]
                  [--rtol 1e-4] [--atol 1e-6] [--unchanged GLOB]...
                  [--unchanged-rows NAME[ROWS]]...

SOURCE.onnx is the model that was compiled, EXPORTED.onnx what
`train --export-onnx` wrote. Checks:

- EXPORTED loads with onnx and passes onnx.checker (full check, with shape
  inference);
- it is a copy of SOURCE: same opsets, graph inputs and outputs, and the same
  nodes in the same order, except the Identity nodes whose input is an
  initializer and whose output became an initializer of its own (the aliases
  the compiler trains as separate parameters);
- every initializer of SOURCE, and every such alias, is an initializer of
  EXPORTED with the same element type and shape.

The other checks are on the tensors the exported model computes with: its
initializers, and for each Identity-of-initializer node it keeps, the value
of that node's input under the node's output name (so a frozen alias of a
trained tensor must not silently follow the trained value):

- with --checkpoint DIR (a checkpoint the same run saved after its last step),
  each of them that the checkpoint holds has exactly the checkpoint's bytes;
- with --weights W.npz (torch_ref.py --save-weights after the same steps)
  or W.onnx (another program's --export-onnx: its initializers), each
  tensor W names is within ||ours - ref|| <= rtol * ||ref|| + atol *
  sqrt(size) of W's value (2-norms over the tensor: the per-tensor relative
  error, as the losses are compared), and no tensor W does not name was
  changed. Single elements are not compared one by one: after 20 steps of
  aggressive training, float rounding differences of the order of 1e-7 per
  step (summation order, vector math) grow to a few 1e-5 in some elements,
  in PyTorch itself between 1 and 2 threads too. Adam's update of an
  element whose gradient is rounding noise (e.g. an attention key bias) is
  noise of the size of lr, so compare weights after SGD training;
- with --unchanged GLOB (repeatable; Python's fnmatchcase, e.g. the plan's
  frozen globs), each tensor whose name matches has SOURCE's value;
- with --unchanged-rows NAME[ROWS] (repeatable; ROWS as the plan's frozen
  rows: "0", "3:5", "0,3:5"), those rows of dim 0 of tensor NAME have
  SOURCE's value and some other row does not.

Prints a summary line ("OK: ...") and exits 0, or prints each failure and
exits 1.
"""
import argparse
import fnmatch
import json
import os
import re
import sys

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper

CHECKPOINT_DTYPES = {"f32": "<f4", "f64": "<f8", "i64": "<i8", "i32": "<i4", "i16": "<i2",
                     "i8": "i1", "u8": "u1", "bool": "?", "f16": "<f2"}


def identity_aliases(graph):
    """{alias name: source initializer name} of the Identity-of-initializer nodes."""
    inits = {t.name for t in graph.initializer}
    return {n.output[0]: n.input[0] for n in graph.node
            if n.op_type == "Identity" and len(n.input) == 1 and n.input[0] in inits}


def read_checkpoint(directory):
    """{tensor name: numpy array} of a checkpoint directory (manifest.json + shards)."""
    with open(os.path.join(directory, "manifest.json")) as f:
        manifest = json.load(f)
    shards, tensors = {}, {}
    for t in manifest["tensors"]:
        if t["file"] not in shards:
            with open(os.path.join(directory, t["file"]), "rb") as f:
                shards[t["file"]] = f.read()
        raw = shards[t["file"]][t["offset"]:t["offset"] + t["bytes"]]
        if len(raw) != t["bytes"]:
            raise ValueError(f"{directory}: tensor {t['name']} runs past the end of {t['file']}")
        dtype = CHECKPOINT_DTYPES[t["dtype"]]
        tensors[t["name"]] = np.frombuffer(raw, dtype=dtype).reshape(t["shape"])
    return manifest, tensors


def node_key(node):
    return node.SerializeToString(deterministic=True)


def check(args):
    failures = []
    source = onnx.load(args.source)
    exported = onnx.load(args.exported)
    try:
        onnx.checker.check_model(exported, full_check=True)
    except Exception as e:  # onnx raises ValidationError and InferenceError
        failures.append(f"onnx.checker: {str(e).splitlines()[0]}")

    sg, eg = source.graph, exported.graph
    if [(o.domain, o.version) for o in source.opset_import] != \
       [(o.domain, o.version) for o in exported.opset_import]:
        failures.append("the opsets differ")
    for what in ("input", "output"):
        a = [v.SerializeToString() for v in getattr(sg, what)]
        b = [v.SerializeToString() for v in getattr(eg, what)]
        if a != b:
            failures.append(f"the graph {what}s differ")

    aliases = identity_aliases(sg)
    exported_inits = {t.name: t for t in eg.initializer}
    converted = {a for a in aliases if a in exported_inits}
    kept_nodes = [node_key(n) for n in sg.node
                  if not (n.op_type == "Identity" and n.output[0] in converted)]
    if kept_nodes != [node_key(n) for n in eg.node]:
        failures.append(f"the nodes differ beyond the {len(converted)} Identity aliases "
                        f"turned into initializers")

    source_inits = {t.name: t for t in sg.initializer}
    expected_names = set(source_inits) | converted
    missing = sorted(set(source_inits) - set(exported_inits))
    extra = sorted(set(exported_inits) - expected_names)
    if missing:
        failures.append(f"initializers missing from the export: {missing}")
    if extra:
        failures.append(f"unexpected initializers in the export: {extra}")
    if len(eg.initializer) != len(exported_inits):
        failures.append("an initializer name appears twice in the export")

    values = {name: numpy_helper.to_array(t) for name, t in exported_inits.items()}
    originals = {name: numpy_helper.to_array(t) for name, t in source_inits.items()}
    for alias, source_name in aliases.items():
        originals[alias] = originals[source_name]
    for name in sorted(set(values) & set(originals)):
        src_t = source_inits.get(name) or source_inits[aliases[name]]
        if exported_inits[name].data_type != src_t.data_type:
            failures.append(f"{name}: element type {exported_inits[name].data_type}, "
                            f"source {src_t.data_type}")
        if values[name].shape != originals[name].shape:
            failures.append(f"{name}: shape {list(values[name].shape)}, source "
                            f"{list(originals[name].shape)}")
    # What the exported model computes with: its initializers, and for an
    # alias it keeps as an Identity node, the value of that node's input.
    effective = dict(values)
    for alias, source_name in identity_aliases(eg).items():
        effective[alias] = values[source_name]

    changed = {n for n in effective if n in originals and
               effective[n].shape == originals[n].shape and
               not np.array_equal(effective[n], originals[n])}
    summary = [f"{len(values)} initializers ({len(converted)} from Identity aliases), "
               f"{len(changed)} tensors changed by training"]

    if args.unchanged:
        frozen = {n for n in effective if any(fnmatch.fnmatchcase(n, g) for g in args.unchanged)}
        for name in sorted(frozen & changed):
            why = (f" (an Identity of {identity_aliases(eg)[name]} in the export, which was "
                   f"trained)" if name not in values else "")
            failures.append(f"{name}: matches --unchanged but was changed by training{why}")
        summary.append(f"{len(frozen)} unchanged as expected")

    for arg in args.unchanged_rows:
        m = re.fullmatch(r"(.+)\[(\d+(?::\d+)?(?:,\d+(?::\d+)?)*)\]", arg)
        if not m or m.group(1) not in effective:
            raise ValueError(f"--unchanged-rows {arg!r}: expected NAME[ROWS] naming a tensor")
        name, kept = m.group(1), np.zeros(effective[m.group(1)].shape[0], dtype=bool)
        for part in m.group(2).split(","):
            a, _, b = part.partition(":")
            kept[int(a):int(b) if b else int(a) + 1] = True
        same = [np.array_equal(effective[name][r], originals[name][r])
                for r in range(kept.size)]
        for r in np.flatnonzero(kept):
            if not same[r]:
                failures.append(f"{name}: row {r} was changed by training")
        if all(same[r] for r in np.flatnonzero(~kept)):
            failures.append(f"{name}: no row outside {m.group(2)} was changed")
        summary.append(f"{name}: {int(kept.sum())} rows unchanged, "
                       f"{sum(not x for x in same)} changed")

    if args.checkpoint:
        _, ckpt = read_checkpoint(args.checkpoint)
        compared = 0
        for name, value in sorted(effective.items()):
            if name not in ckpt:
                continue
            compared += 1
            ref = ckpt[name]
            if ref.shape != value.shape or ref.tobytes() != np.ascontiguousarray(
                    value.astype(ref.dtype)).tobytes():
                diff = np.max(np.abs(value.astype(np.float64) - ref.astype(np.float64))) \
                    if ref.shape == value.shape else "shape"
                failures.append(f"{name}: differs from the checkpoint (max abs diff {diff})")
        not_in_ckpt = sorted(changed - set(ckpt))
        if not_in_ckpt:
            failures.append(f"trained tensors not in the checkpoint: {not_in_ckpt}")
        summary.append(f"{compared} equal to the checkpoint")

    if args.weights and args.weights.endswith(".onnx"):
        weights = {t.name: numpy_helper.to_array(t)
                   for t in onnx.load(args.weights).graph.initializer}
    elif args.weights:
        with np.load(args.weights) as npz:
            weights = {k: npz[k] for k in npz.files}
    if args.weights:
        for name in sorted(set(weights) - set(effective)):
            failures.append(f"{name}: trained by the reference but not in the export")
        for name, ref in sorted(weights.items()):
            if name not in effective:
                continue
            ours = effective[name].astype(np.float64)
            ref = ref.astype(np.float64)
            if ours.shape != ref.shape:
                failures.append(f"{name}: shape {list(ours.shape)}, reference {list(ref.shape)}")
                continue
            error = float(np.linalg.norm(ours - ref))
            bound = args.rtol * float(np.linalg.norm(ref)) + args.atol * np.sqrt(ref.size)
            if error > bound:
                i = int(np.argmax(np.abs(ours - ref)))
                failures.append(f"{name}: ||ours - ref|| = {error:.3g} > {bound:.3g} "
                                f"(rtol {args.rtol:g} * ||ref|| + atol {args.atol:g} * "
                                f"sqrt(size)); worst element {i}: {ours.flat[i]:.9g} vs "
                                f"{ref.flat[i]:.9g}")
        for name in sorted(changed - set(weights)):
            failures.append(f"{name}: changed, but the reference does not train it")
        summary.append(f"{len(weights)} within rtol {args.rtol:g} (norm-wise) of the "
                       f"reference")
    return failures, summary


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", metavar="SOURCE.onnx")
    p.add_argument("exported", metavar="EXPORTED.onnx")
    p.add_argument("--checkpoint", metavar="DIR")
    p.add_argument("--weights", metavar="W.npz|W.onnx")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-6)
    p.add_argument("--unchanged", action="append", default=[], metavar="GLOB",
                   help="initializers that training must leave as they are")
    p.add_argument("--unchanged-rows", action="append", default=[], metavar="NAME[ROWS]",
                   help="rows of a tensor that training must leave as they are")
    args = p.parse_args(argv)
    try:
        failures, summary = check(args)
    except (OSError, ValueError, KeyError, DecodeError) as e:
        print(f"check_export.py: error: {e}", file=sys.stderr)
        return 2
    for line in failures:
        print(f"FAIL: {line}")
    if failures:
        return 1
    print("OK: " + "; ".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
