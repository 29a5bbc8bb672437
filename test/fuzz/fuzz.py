#!/usr/bin/python3
"""Seeded fuzzing of autopar's inputs: ONNX models, plans, token files and
checkpoints.

  fuzz.py onnx       --seed S --count N --workdir DIR [--model M.onnx]
  fuzz.py plan       --seed S --count N --workdir DIR --model M.onnx
                     [--input-shape NAME=D0,D1]...
  fuzz.py tokens     --seed S --count N --workdir DIR --train OUTDIR/train
  fuzz.py checkpoint --seed S --count N --workdir DIR --train OUTDIR/train

Each target makes N mutants of a valid input from the seed (the same seed,
the same mutants), runs the tool that reads it and classifies the run:

  ok         exit 0, or exit 1 with exactly one line on stderr that starts
             with the tool's prefix ("autopar: ", "train: ")
  crash      killed by a signal, exit >= 2 (but a usage error), or an abort,
             assertion, sanitizer or C++ exception message
  hang       still running after --timeout seconds
  noisy      failed with more or less than one line, or without the prefix
  leftover   failed and left files where it writes (OUTDIR, OUTDIR.tmp-*,
             a checkpoint's .tmp-*)
  wrong      (checkpoint) resumed with exit 0 from a checkpoint whose bytes
             changed (not re-signed), and logged other losses than the
             original resumes to

onnx:       `autopar import MODEL --summary` on byte flips, truncations,
            attribute type swaps, an input or output added or removed, huge
            or negative dims, names that are not UTF-8, ops renamed, values
            defined twice.
plan:       `autopar compile MODEL --plan P --report-only -o OUT` on plans
            with byte flips, values of other types and ranges, unknown
            keys, deep nesting.
tokens:     `train --data T --steps 2` on token files with byte flips in
            the header and data, truncations, extensions.
checkpoint: `train --resume CK --steps S+1` on a saved checkpoint with byte
            flips, truncations and zeroed runs in its shard and manifest,
            and manifests with values replaced (the checksum made right
            again, so that the checks behind it are reached).

Prints one line per class with its count, the first few failures with the
mutation that made them, and exits 1 if any run is not ok. Long campaigns:
a large --count (bench/ and scripts/ do not run it in CI).
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import zlib

PREFIX = {"onnx": "autopar: ", "plan": "autopar: ", "tokens": "train: ",
          "checkpoint": "train: "}
CRASH_TEXT = ("Assertion", "terminate called", "Stack dump", "AddressSanitizer",
              "runtime error:", "LLVM ERROR", "Segmentation fault", "core dumped",
              "FatalException", "libprotobuf FATAL")


def run(cmd, timeout, cwd=None):
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        return None, ""
    return r.returncode, r.stderr.decode(errors="replace")


def classify(target, code, err):
    if code is None:
        return "hang"
    if code < 0 or code >= 128 or any(t in err for t in CRASH_TEXT):
        return "crash"
    if code == 0:
        return "ok"
    lines = [l for l in err.splitlines() if l.strip()]
    if code == 1 and len(lines) == 1 and lines[0].startswith(PREFIX[target]):
        return "ok"
    if code == 2 and len(lines) == 1:  # a command-line error
        return "ok"
    return "noisy" if code in (1, 2) else "crash"


# ---------------------------------------------------------------- bytes --

def flip_bytes(rng, data, n=None):
    data = bytearray(data)
    for _ in range(n or rng.randint(1, 8)):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8) if rng.random() < 0.7 else rng.randrange(1, 256)
    return bytes(data), "byte flips"


def truncate(rng, data):
    n = rng.randrange(len(data))
    return data[:n], f"truncated to {n} bytes"


def zero_run(rng, data):
    data = bytearray(data)
    i = rng.randrange(len(data))
    n = rng.randint(1, 256)
    data[i:i + n] = bytes(min(n, len(data) - i))
    return bytes(data), f"zeroed {n} bytes at {i}"


# ----------------------------------------------------------------- onnx --

def onnx_mutant(rng, model_bytes):
    import onnx
    kind = rng.choice(["flip", "flip", "truncate", "attr_type", "inputs", "outputs",
                       "dims", "utf8", "op", "redefine", "initializer"])
    if kind == "flip":
        return flip_bytes(rng, model_bytes)
    if kind == "truncate":
        return truncate(rng, model_bytes)
    m = onnx.load_from_string(model_bytes)
    g = m.graph
    node = g.node[rng.randrange(len(g.node))]
    what = f"{kind} on node {node.name!r} ({node.op_type})"
    if kind == "attr_type":
        if not node.attribute:
            node.attribute.add(name="axis", type=onnx.AttributeProto.FLOAT, f=1.5)
        else:
            a = node.attribute[rng.randrange(len(node.attribute))]
            t = rng.choice([onnx.AttributeProto.FLOAT, onnx.AttributeProto.INT,
                            onnx.AttributeProto.STRING, onnx.AttributeProto.INTS,
                            onnx.AttributeProto.TENSOR])
            what += f" attribute {a.name} -> type {t}"
            a.type = t
            if t == onnx.AttributeProto.FLOAT:
                a.f = rng.choice([1.5, -1e30, float("nan")])
            elif t == onnx.AttributeProto.INT:
                a.i = rng.choice([-(2 ** 63), 2 ** 62, -1, 0, 7])
            elif t == onnx.AttributeProto.STRING:
                a.s = rng.choice([b"", b"x", b"\xff"])
    elif kind == "inputs":
        if node.input and rng.random() < 0.5:
            del node.input[rng.randrange(len(node.input))]
        else:
            node.input.append(rng.choice(["", node.input[0] if node.input else "x",
                                          "undefined_value"]))
    elif kind == "outputs":
        if node.output and rng.random() < 0.5:
            del node.output[:]
        else:
            node.output.append(rng.choice(["", "extra_out", node.output[0]
                                           if node.output else "y"]))
    elif kind == "dims":
        tensors = list(g.input) + list(g.output)
        if rng.random() < 0.5 and g.initializer:
            init = g.initializer[rng.randrange(len(g.initializer))]
            if init.dims:
                init.dims[rng.randrange(len(init.dims))] = rng.choice(
                    [2 ** 32, 2 ** 62, -1, 0, 3])
            what = f"dims of initializer {init.name!r}"
        else:
            t = tensors[rng.randrange(len(tensors))]
            dims = t.type.tensor_type.shape.dim
            if dims:
                dims[rng.randrange(len(dims))].dim_value = rng.choice(
                    [2 ** 32, 2 ** 62, 0, 1])
            what = f"dims of {t.name!r}"
    elif kind == "op":
        node.op_type = rng.choice(["Add", "MatMul", "Softmax", "Reshape", "Gather",
                                   "Concat", "", "Conv", "LayerNormalization"])
        what += f" -> {node.op_type!r}"
    elif kind == "redefine":
        if node.output:
            node.output[0] = rng.choice([i.name for i in g.input] +
                                        [i.name for i in g.initializer[:3]])
    elif kind == "initializer":
        init = g.initializer[rng.randrange(len(g.initializer))]
        what = f"initializer {init.name!r} data"
        choice = rng.randrange(3)
        if choice == 0:
            init.float_data.extend([1.0, 2.0])
        elif choice == 1:
            init.raw_data = init.raw_data[: len(init.raw_data) // 2]
        else:
            init.data_type = rng.choice([0, 8, 14, 100])
    data = m.SerializeToString()
    if kind == "utf8":
        name = rng.choice([n.name for n in g.node if n.name] or ["x"])
        data = data.replace(name.encode(), b"\xff\xfe" + name.encode()[2:], 1)
        what = f"non-UTF-8 name from {name!r}"
    return data, what


def fuzz_onnx(args, rng, report):
    model = open(args.model, "rb").read()
    path = os.path.join(args.workdir, "mutant.onnx")
    for i in range(args.count):
        data, what = onnx_mutant(rng, model)
        with open(path, "wb") as f:
            f.write(data)
        code, err = run([args.autopar, "import", path, "--summary"], args.timeout)
        report(classify("onnx", code, err), what, err)


# ----------------------------------------------------------------- plan --

VALID_PLAN = {"mesh": {"dp": 1, "tp": 1, "pp": 1}, "batch": {"micro_batches": 2},
              "zero": {"stage": 0}, "precision": "bf16-mixed",
              "optimizer": {"type": "adamw", "lr": 0.001, "betas": [0.9, 0.99],
                            "weight_decay": 0.1, "max_grad_norm": 1.0},
              "recompute": "selective", "comm": {"bucket_mb": 25, "timeout_s": 60},
              "lr_schedule": {"warmup_steps": 2, "decay": "cosine"}}
ODD_VALUES = [None, True, False, 0, -1, 1.5, 2 ** 63, -2 ** 63, 1e308, -0.0, "",
              "x", "\u00ff", [], {}, [1, 2], {"a": 1}, 3, 8, 1024]


def plan_mutant(rng):
    kind = rng.choice(["value", "value", "key", "flip", "truncate", "nest"])
    plan = json.loads(json.dumps(VALID_PLAN))
    if kind == "value":
        section = rng.choice(list(plan))
        value = rng.choice(ODD_VALUES)
        if isinstance(plan[section], dict) and plan[section]:
            key = rng.choice(list(plan[section]))
            plan[section][key] = value
            return json.dumps(plan).encode(), f"{section}.{key} = {value!r}"
        plan[section] = value
        return json.dumps(plan).encode(), f"{section} = {value!r}"
    if kind == "key":
        section = rng.choice(list(plan))
        if isinstance(plan[section], dict):
            plan[section]["unknown_" + str(rng.randrange(100))] = 1
        else:
            plan["unknown"] = plan[section]
        return json.dumps(plan).encode(), f"unknown key in {section}"
    text = json.dumps(plan).encode()
    if kind == "flip":
        return flip_bytes(rng, text, rng.randint(1, 3))
    if kind == "truncate":
        return truncate(rng, text)
    depth = rng.choice([100, 10000, 100000])
    return (b'{"mesh": ' + b"[" * depth + b"]" * depth + b"}", f"nested {depth} deep")


def fuzz_plan(args, rng, report):
    path = os.path.join(args.workdir, "plan.json")
    out = os.path.join(args.workdir, "out")
    for i in range(args.count):
        data, what = plan_mutant(rng)
        with open(path, "wb") as f:
            f.write(data)
        shutil.rmtree(out, ignore_errors=True)
        shapes = [a for spec in args.input_shape for a in ("--input-shape", spec)]
        code, err = run([args.autopar, "compile", args.model, *shapes, "--plan", path,
                         "--report-only", "-o", out], args.timeout)
        cls = classify("plan", code, err)
        if cls == "ok" and code != 0 and (os.path.exists(out) or any(
                n.startswith("out.tmp-") for n in os.listdir(args.workdir))):
            cls = "leftover"
        report(cls, what, err)


# --------------------------------------------------------------- tokens --

def make_tokens(path):
    """A valid token file of 400 tokens below 64 at `path`."""
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "e2e",
                                                 "make_tokens.py"),
                    "-o", path, "--count", "400", "--vocab", "64", "--seed", "3"],
                   check=True, stdout=subprocess.DEVNULL)
    return path


def fuzz_tokens(args, rng, report):
    valid = make_tokens(os.path.join(args.workdir, "valid.bin"))
    data = open(valid, "rb").read()
    path = os.path.join(args.workdir, "tokens.bin")
    for i in range(args.count):
        kind = rng.choice(["header", "data", "truncate", "extend"])
        if kind == "header":
            d = bytearray(data)
            j = rng.randrange(0, 12)
            d[j] ^= 1 << rng.randrange(8)
            mutant, what = bytes(d), f"header byte {j} flipped"
        elif kind == "data":
            mutant, what = flip_bytes(rng, data)
        elif kind == "truncate":
            mutant, what = truncate(rng, data)
        else:
            mutant, what = data + bytes(rng.randrange(1, 64)), "extended"
        with open(path, "wb") as f:
            f.write(mutant)
        code, err = run([args.train, "--data", path, "--steps", "2"], args.timeout,
                        cwd=args.workdir)
        report(classify("tokens", code, err), what, err)


# ----------------------------------------------------------- checkpoint --

def resign(text):
    key = b',"checksum":"crc32c:'
    at = text.rfind(key)
    if at < 0:
        return text
    crc = crc32c(text[:at])
    return text[:at] + key + b"%08x" % crc + b'"}\n'


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def first_losses(log):
    with open(log) as f:
        return [json.loads(l)["loss"] for l in f if '"loss"' in l]


def fuzz_checkpoint(args, rng, report):
    tokens = make_tokens(os.path.join(args.workdir, "tokens.bin"))
    base = os.path.join(args.workdir, "base")
    shutil.rmtree(base, ignore_errors=True)
    subprocess.run([args.train, "--data", tokens, "--steps", "2", "--save", base],
                   check=True, stdout=subprocess.DEVNULL)
    ref_log = os.path.join(args.workdir, "ref.jsonl")
    if os.path.exists(ref_log):
        os.remove(ref_log)
    subprocess.run([args.train, "--data", tokens, "--steps", "3", "--resume", base,
                    "--log", ref_log], check=True, stdout=subprocess.DEVNULL)
    reference = first_losses(ref_log)
    manifest = open(os.path.join(base, "manifest.json"), "rb").read()
    shard = open(os.path.join(base, "shard-00000.bin"), "rb").read()
    ck = os.path.join(args.workdir, "ck")
    log = os.path.join(args.workdir, "resumed.jsonl")
    for i in range(args.count):
        m, s = manifest, shard
        resigned = False
        kind = rng.choice(["shard", "shard", "manifest", "value", "truncate", "zero"])
        if kind == "shard":
            s, what = flip_bytes(rng, shard, rng.randint(1, 3))
            what = "shard " + what
        elif kind == "zero":
            s, what = zero_run(rng, shard)
            what = "shard " + what
        elif kind == "truncate":
            s, what = truncate(rng, shard)
            what = "shard " + what
        elif kind == "manifest":
            m, what = flip_bytes(rng, manifest, rng.randint(1, 3))
            what = "manifest " + what
        else:
            text = json.loads(manifest)
            field = rng.choice(["step", "offset", "bytes", "shape", "dtype", "crc32c",
                                "name", "shards"])
            value = rng.choice([-5, 0, 2 ** 62, 1, "f16", "", [2 ** 40, 2 ** 40], None])
            if field == "step":
                text["step"] = value
            elif field == "shards":
                text["shards"][0]["bytes"] = value
            else:
                text["tensors"][rng.randrange(len(text["tensors"]))][field] = value
            del text["checksum"]
            body = json.dumps(text, separators=(",", ":")).encode()
            m = resign(body[:-1] + b',"checksum":"crc32c:00000000"}\n')
            what = f"manifest {field} = {value!r} (re-signed)"
            resigned = True
        shutil.rmtree(ck, ignore_errors=True)
        os.makedirs(ck)
        with open(os.path.join(ck, "manifest.json"), "wb") as f:
            f.write(m)
        with open(os.path.join(ck, "shard-00000.bin"), "wb") as f:
            f.write(s)
        if os.path.exists(log):
            os.remove(log)
        code, err = run([args.train, "--data", tokens, "--steps", "3", "--resume", ck,
                         "--log", log], args.timeout, cwd=args.workdir)
        cls = classify("checkpoint", code, err)
        # Bytes changed behind the checksums' back must not train: a run
        # that succeeds must be the original's. (A re-signed edit is the
        # user's: it may run, if what it says passes the checks.)
        if cls == "ok" and code == 0 and not resigned and \
                (m, s) != (manifest, shard) and first_losses(log) != reference:
            cls = "wrong"
        report(cls, what, err)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", choices=["onnx", "plan", "tokens", "checkpoint"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--workdir", required=True)
    p.add_argument("--model")
    p.add_argument("--input-shape", action="append", default=[],
                   help="plan: the model's input shapes (NAME=D0,D1)")
    p.add_argument("--train")
    p.add_argument("--autopar", default="autopar")
    p.add_argument("--timeout", type=float, default=60)
    args = p.parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    rng = random.Random(args.seed)
    counts = {c: 0 for c in ("ok", "crash", "hang", "noisy", "leftover", "wrong")}
    shown = []

    def report(cls, what, err):
        counts[cls] += 1
        if cls != "ok" and len(shown) < 10:
            shown.append(f"  {cls}: {what}: {err.strip()[:300]!r}")

    {"onnx": fuzz_onnx, "plan": fuzz_plan, "tokens": fuzz_tokens,
     "checkpoint": fuzz_checkpoint}[args.target](args, rng, report)
    print(f"{args.target}: {args.count} mutants (seed {args.seed}): " +
          ", ".join(f"{counts[c]} {c}" for c in counts))
    for line in shown:
        print(line)
    return 0 if counts["ok"] == args.count else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
