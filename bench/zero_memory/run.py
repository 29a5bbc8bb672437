#!/usr/bin/python3
"""Per-rank ZeRO model-state memory of a 7.5B-parameter GPT, from the
compiler's report, against the ZeRO paper's figures.

Usage:
  /usr/bin/python3 bench/zero_memory/run.py [--layers 36] [--hidden 4096]
      [--heads 32] [--vocab 50304] [--seq 1024] [--batch 64] [--dp 64]
      [--workdir DIR] [--keep] [--autopar PATH]

Builds a shape-only GPT-2 shaped model (shape_only_gpt.py: its weights are a
sparse external-data file, nothing materialized) with psi = 12 L h^2 + 13 L h
+ V h + T h + 2 h trainable parameters (7,459,921,920 by default), then, for
ZeRO stages 0-3, writes the plan {"precision": "bf16-mixed", "mesh": {"dp":
Nd}, "zero": {"stage": S}, "optimizer": {"type": "adamw"}} and runs
`autopar compile MODEL --plan PLAN --report-only -o OUT`. It prints one
table: the per-rank model-state bytes of report.json
(`parallel.model_state_bytes`: bf16 parameters, bf16 gradients, f32 master +
AdamW moments) in GB (1e9 bytes), the closed form for the report's psi
(16 psi, 4 psi + 12 psi/Nd, 2 psi + 14 psi/Nd, 16 psi/Nd), the ZeRO paper's
figure for psi = 7.5e9, Nd = 64 (120, 31.4, 16.6, 1.9 GB; Rajbhandari et al.
2020, Figure 1), the ratio compiler / paper and each compile's wall time.

Checked (exit 1 with one line otherwise): every compile succeeds, the
report's trainable_parameters is the model's psi, and each stage's params,
grads and optimizer_state equal exactly the expectation computed from the
built tensors' shapes with ZeRO's flat-shard padding: a tensor of n elements
has a shard of c = ceil(n / Nd) elements; stage 1 keeps the whole gradient
in a padded flat buffer of Nd c elements; so, in bytes per tensor,

  stage 0: params 2 n, grads 2 n,      optimizer 12 n
  stage 1: params 2 n, grads 2 Nd c,   optimizer 12 c
  stage 2: params 2 n, grads 2 c,      optimizer 12 c
  stage 3: params 2 c, grads 2 c,      optimizer 12 c

which is the closed form when Nd divides every tensor (the default shape),
plus the padding otherwise. The work directory is a temporary one, deleted
at the end unless --keep (a --workdir is kept).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import shape_only_gpt  # noqa: E402

PAPER_PSI = 7.5e9
PAPER_ND = 64
PAPER_GB = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}
FIELDS = ("params", "grads", "optimizer_state")


class Failure(Exception):
    """A failed compile or a report that is not the expected one."""


def closed_form(stage, psi, nd):
    """The ZeRO paper's bf16-mixed AdamW model-state bytes per rank."""
    return {0: 16 * psi, 1: 4 * psi + 12 * psi / nd, 2: 2 * psi + 14 * psi / nd,
            3: 16 * psi / nd}[stage]


def padded_expectation(stage, shapes, nd):
    """Exact per-rank bytes {params, grads, optimizer_state} with every
    tensor flat-sharded into ceil(n / nd) elements (see the docstring)."""
    bytes_ = dict.fromkeys(FIELDS, 0)
    for shape in shapes.values():
        n = math.prod(shape)
        c = -(-n // nd)
        bytes_["params"] += 2 * (c if stage == 3 else n)
        bytes_["grads"] += 2 * {0: n, 1: nd * c}.get(stage, c)
        bytes_["optimizer_state"] += 12 * (n if stage == 0 else c)
    return bytes_


def compile_report(autopar, model, workdir, stage, dp):
    """Runs `autopar compile --report-only` for one stage; returns its
    report.json and wall seconds."""
    plan = os.path.join(workdir, f"plan-zero{stage}.json")
    with open(plan, "w") as f:
        json.dump({"precision": "bf16-mixed", "mesh": {"dp": dp}, "zero": {"stage": stage},
                   "optimizer": {"type": "adamw"}}, f)
    out = os.path.join(workdir, f"zero{stage}")
    start = time.monotonic()
    proc = subprocess.run([autopar, "compile", model, "--plan", plan, "--report-only", "-o", out],
                          capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise Failure(f"stage {stage}: autopar compile failed (exit {proc.returncode}): {last}")
    with open(os.path.join(out, "report.json")) as f:
        return json.load(f), seconds


def check(stage, report, shapes, psi, dp):
    """Raises Failure unless the report is the model's exact expectation."""
    if report["trainable_parameters"] != psi:
        raise Failure(f"stage {stage}: report has {report['trainable_parameters']} trainable "
                      f"parameters, the model {psi}")
    got = report["parallel"]["model_state_bytes"]
    want = padded_expectation(stage, shapes, dp)
    for field in FIELDS:
        if got[field] != want[field]:
            raise Failure(f"stage {stage}: model_state_bytes.{field} is {got[field]}, "
                          f"expected {want[field]} (closed form plus flat-shard padding)")
    if got["total"] != sum(want.values()):
        raise Failure(f"stage {stage}: model_state_bytes.total is {got['total']}, "
                      f"expected {sum(want.values())}")


def unit_of(rows):
    """GB (1e9 bytes), or MB (1e6) for a model whose stage-0 states are
    under 1 GB (the small shapes of the tests)."""
    return ("GB", 1e9) if rows[0][1]["parallel"]["model_state_bytes"]["total"] >= 1e9 \
        else ("MB", 1e6)


def print_table(rows, psi, dp):
    unit, scale = unit_of(rows)
    print(f"{'stage':>5} {'params ' + unit:>9} {'grads ' + unit:>9} {'optim ' + unit:>9} "
          f"{'total ' + unit:>9} {'closed ' + unit:>9} {'paper GB':>8} {'ratio':>6} "
          f"{'padding B':>9} {'compile s':>9}")
    for stage, report, seconds in rows:
        m = report["parallel"]["model_state_bytes"]
        print(f"{stage:>5} {m['params'] / scale:>9.3f} {m['grads'] / scale:>9.3f} "
              f"{m['optimizer_state'] / scale:>9.3f} {m['total'] / scale:>9.3f} "
              f"{closed_form(stage, psi, dp) / scale:>9.3f} {PAPER_GB[stage]:>8.1f} "
              f"{m['total'] / 1e9 / PAPER_GB[stage]:>6.3f} "
              f"{m['total'] - closed_form(stage, psi, dp):>9.0f} {seconds:>9.2f}")


def run(args, workdir):
    model = os.path.join(workdir, "model.onnx")
    start = time.monotonic()
    shapes = shape_only_gpt.build(model, args.layers, args.hidden, args.heads, args.vocab,
                                  args.seq, args.batch)
    built = time.monotonic() - start
    psi = sum(math.prod(shape) for shape in shapes.values())
    L, h, V, T = args.layers, args.hidden, args.vocab, args.seq
    if psi != 12 * L * h * h + 13 * L * h + V * h + T * h + 2 * h:
        raise Failure(f"the built model has {psi} parameters, not 12 L h^2 + 13 L h + V h + "
                      f"T h + 2 h")
    print(f"zero_memory: GPT L={args.layers} h={args.hidden} a={args.heads} V={args.vocab} "
          f"T={args.seq} B={args.batch}, bf16-mixed AdamW, Nd={args.dp} "
          f"(shape-only model built in {built:.2f} s)")
    rows = []
    for stage in range(4):
        report, seconds = compile_report(args.autopar, model, workdir, stage, args.dp)
        check(stage, report, shapes, psi, args.dp)
        rows.append((stage, report, seconds))
    print(f"psi = 12 L h^2 + 13 L h + V h + T h + 2 h = {psi}; report.json "
          f"trainable_parameters: {rows[0][1]['trainable_parameters']}")
    print("per-rank model states from report.json (GB = 1e9 bytes, MB = 1e6); closed: the "
          "closed form for this psi and Nd;")
    print(f"paper: psi = 7.5e9, Nd = {PAPER_ND}, as printed there; ratio: total / paper "
          f"(psi / 7.5e9 = {psi / PAPER_PSI:.4f}); padding: total - closed form")
    print_table(rows, psi, args.dp)
    print("exact: every stage's report equals the closed form plus the per-tensor "
          "flat-shard padding")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=36)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=50304)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--dp", type=int, default=64)
    parser.add_argument("--workdir", help="work directory (kept); default: a temporary one")
    parser.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    parser.add_argument("--autopar", default=os.path.join(ROOT, "build", "bin", "autopar"))
    args = parser.parse_args()
    start = time.monotonic()
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
        workdir = args.workdir
    else:
        workdir = tempfile.mkdtemp(prefix="autopar-zero-memory-")
    try:
        run(args, workdir)
    except (Failure, ValueError, OSError) as e:
        sys.exit(f"zero_memory: FAIL: {e}")
    finally:
        if args.workdir or args.keep:
            print(f"work directory: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"wall time: {time.monotonic() - start:.1f} s")


if __name__ == "__main__":
    main()
