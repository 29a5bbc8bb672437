#!/usr/bin/python3
"""Check tensor parallelism of one model against the one-device program.

  check_tp.py MODEL.onnx [--input-shape NAME=D0,D1 ...] --data TOKENS.bin
      --steps K --workdir DIR --plan BASE.json --meshes tp=2,dp=2:tp=2,...
      [--zero 0,1] [--min-split N] [--pairs P --hidden H [--vocab V]]

BASE.json is the plan without "mesh" and "zero"; each configuration adds
{"mesh": {...}, "zero": {"stage": S}}. Compiles BASE.json alone (one rank)
and runs it; then, for each mesh and stage, compiles, runs under `mpirun
-np dp*tp` and checks:

 (a) every step's loss and gradient norm equal the one-rank run's within
     relative 1e-5 (the clipping norm counts every gradient once over the
     tensor-parallel blocks), its lr within 1e-9;
 (b) the program is tensor-parallel: at least --min-split parameters
     are stored split over tp (their `dist.sharding` in the final IR names
     tp), and the step communicates over tp (a collective with `axes =
     [tp]`);
 (c) every step's logged comm_bytes equal report.json's
     comm_bytes_per_step, group by group and kind by kind (relative 1e-9),
     report.json's parallel.per_rank lists every rank with its mesh
     coordinates, and its flops_per_step (the whole step's) is one
     device's (but see (e));
 (d) with --pairs P --hidden H, the tp traffic is Megatron's count. Without
     sequence parallelism (tensor_parallel.sequence_parallel false): P
     column/row pairs each all-reduce one activation of b*s*H floats (b the
     samples of a rank's micro-batch) forward and one backward; the
     vocab-parallel embedding all-reduces its lookups (b*s*H) forward, the
     LM head its input gradient (b*s*H) backward, and the vocab-parallel
     cross-entropy the max, the sum of exponentials and the target logit
     (b*s floats each) forward; a ring all-reduce sends 2 (tp-1)/tp of each,
     per micro-batch; nothing else moves over tp. With it (the default),
     each all-reduce of b*s*H becomes an all-gather and a reduce-scatter
     (each sending (tp-1)/tp of it), and the gradients of the parameters
     used on split tokens are all-reduced (at most all the replicated
     parameters' bytes per micro-batch).
 (e) with --vocab V, where tp does not divide V, report.json's
     parallel.padded lists the tensors padded to the next multiple of tp
     (the embedding, the head), and nothing where tp divides V; a padded
     vocabulary's flops_per_step exceeds one device's by at most its
     padding's share (Megatron counts the padded vocabulary).

Prints `OK tp=2 dp=1 zero=0` per configuration; at the first failure one
line `FAIL ...: reason` and exit 1.
"""
import argparse
import json
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_dp_zero as base  # noqa: E402

RTOL = 1e-5


def parse_meshes(text):
    return base.parse_meshes(text, ("dp", "tp"), "tp")


def split_params(ir):
    """Parameter name -> its dist.sharding text, from the final IR."""
    head = ir[ir.index("func.func @train_step"):]
    head = head[:head.index("{\n")]
    out = {}
    for m in re.finditer(r'\{([^{}]*#dist\.sharding<[^>]*>[^{}]*)nn\.param = "([^"]+)"', head):
        out[m.group(2)] = re.search(r"#dist\.sharding<[^>]*>", m.group(1)).group(0)
    return out


def check_padding(args, padded, tp):
    """(e): a vocabulary that tp does not divide is padded to the next
    multiple of tp (and only then); --vocab V names it."""
    if not args.vocab:
        return
    want = -(-args.vocab // tp) * tp
    if want == args.vocab:
        if padded:
            raise base.Failure(f"report.json parallel.padded {padded}, but tp = {tp} "
                               f"divides the vocabulary {args.vocab}")
        return
    rows = [(name, p) for name, p in padded.items() if args.vocab in p["shape"]]
    if not rows:
        raise base.Failure(f"report.json parallel.padded {padded} does not pad the "
                           f"vocabulary {args.vocab} over tp = {tp}")
    for name, p in rows:
        got = [w for s_, w in zip(p["shape"], p["padded"]) if s_ != w]
        if got != [want]:
            raise base.Failure(f"{name}: {p['shape']} padded to {p['padded']}, "
                               f"expected the vocabulary {args.vocab} padded to {want}")


def check_flops(report, one, padded):
    """flops_per_step is one device's (the same model and global batch); a
    padded vocabulary adds its padding's share at most (Megatron counts the
    padded vocabulary too)."""
    got, base_flops = report["flops_per_step"], one["flops_per_step"]
    if not padded:
        if got != base_flops:
            raise base.Failure(f"report.json flops_per_step {got} != one device's "
                               f"{base_flops} (the same model and global batch)")
        return
    share = 0.0
    for p in padded.values():
        n = m = 1
        for a, b in zip(p["shape"], p["padded"]):
            n, m = n * a, m * b
        share = max(share, (m - n) / n)
    if not base_flops < got <= base_flops * (1 + share):
        raise base.Failure(f"report.json flops_per_step {got} not within one device's "
                           f"{base_flops} and {base_flops * (1 + share):.0f} (the padded "
                           f"vocabulary's share)")


def check_megatron_count(args, plan, report, got, tp, out, params):
    """(d): the tp bytes of a step against Megatron's count."""
    b, s, micro = report["micro_batch"], report["sequence_length"], report["micro_batches"]
    tokens = b * s * 4                   # bytes of one float per token
    ring = 2 * (tp - 1) / tp * tokens    # an all-reduce
    half = (tp - 1) / tp * tokens        # an all-gather or a reduce-scatter
    vocab = 1  # vocab-parallel, the vocabulary padded where tp does not divide it
    # Sequence parallelism applies where tp divides the tokens.
    sp = plan.get("tensor_parallel", {}).get("sequence_parallel", True) and s % tp == 0
    h, pairs = args.hidden, args.pairs
    if not sp:
        want = {"all_reduce": (2 * pairs + 2 * vocab) * h * ring + 3 * vocab * ring,
                "reduce_scatter": 0, "all_gather": 0}
        bound = 0
    else:
        # Each pair: an all-gather before the column-parallel projection
        # and a reduce-scatter after the row-parallel one, forward and
        # backward; the embedding's lookups are reduce-scattered (forward)
        # and their gradient all-gathered; the head's input all-gathered
        # and its gradient reduce-scattered. The gradients of parameters
        # used on split tokens (norms, row-parallel biases) are summed over
        # tp: at most one all-reduce of each replicated parameter.
        moved = (2 * pairs + 2 * vocab) * h * half
        want = {"all_reduce": 3 * vocab * ring, "reduce_scatter": moved,
                "all_gather": moved}
        with open(os.path.join(out, "weights.json")) as f:
            tensors = json.load(f)["tensors"]
        replicated = sum(t["bytes"] for t in tensors
                         if "tp" not in params.get(t["name"], "tp"))
        bound = 2 * (tp - 1) / tp * replicated
    for k in base.KINDS:
        w = want[k] * micro
        # (Reduced per micro-batch: the sums over tp are not deferred.)
        ok = (w <= got[k] <= w + bound * micro if k == "all_reduce" and sp
              else base.close(got[k], w, 1e-9))
        if not ok:
            raise base.Failure(
                f"tp {k} {got[k]!r} per step, Megatron's count is {w!r}"
                + (f" (+ at most {bound * micro!r} of replicated gradients)"
                   if k == "all_reduce" and sp else "")
                + f" ({pairs} pairs, b={b}, s={s}, h={h}, sequence parallel {sp})")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--input-shape", action="append", default=[])
    p.add_argument("--data", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--plan", required=True)
    p.add_argument("--meshes", type=parse_meshes, required=True)
    p.add_argument("--zero", default="0")
    p.add_argument("--min-split", type=int, default=1)
    p.add_argument("--pairs", type=int, help="Megatron column/row pairs of the model")
    p.add_argument("--hidden", type=int, help="the width of the activations they reduce")
    p.add_argument("--vocab", type=int, help="the vocabulary: checks its padding (e)")
    p.add_argument("--autopar", default="autopar")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--timeout", type=int, default=300)
    args = p.parse_args(argv)
    args.model = os.path.abspath(args.model)
    args.data = os.path.abspath(args.data)
    with open(args.plan) as f:
        plan = json.load(f)
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    label = "baseline"
    try:
        cfg = os.path.join(args.workdir, "one")
        out, one = base.compile_plan(args, plan, cfg)
        ref, _ = base.train(args, out, cfg, 1)
        print("OK tp=1 (baseline)")
        for mesh in args.meshes:
            for stage in (int(s) for s in args.zero.split(",")):
                tp, dp = mesh["tp"], mesh.get("dp", 1)
                label = f"tp={tp} dp={dp} zero={stage}"
                cfg = os.path.join(args.workdir, f"tp{tp}-dp{dp}-z{stage}")
                out, report = base.compile_plan(
                    args, dict(plan, mesh={"dp": dp, "tp": tp}, zero={"stage": stage}), cfg)
                with open(os.path.join(out, "train_step.mlir")) as f:
                    ir = f.read()
                params = split_params(ir)
                split = sorted(n for n, s in params.items() if "tp" in s)
                if len(split) < args.min_split:
                    raise base.Failure(f"{len(split)} parameters split over tp ({split}), "
                                       f"expected at least {args.min_split}")
                if "axes = [tp]" not in ir:
                    raise base.Failure("the step has no collective over tp")
                log, records = base.train(args, out, cfg, tp * dp)
                worst = 0.0
                for key in ("loss", "grad_norm"):
                    worst = max(worst, base.compare(log, ref, key, RTOL, "one rank",
                                                    args.steps))
                base.compare(log, ref, "lr", 1e-9, "one rank", args.steps)
                par = report["parallel"]
                per_step = par["comm_bytes_per_step"]
                base.check_logged_comm(records, per_step)
                check_padding(args, par.get("padded", {}), tp)
                check_flops(report, one, par.get("padded", {}))
                ranks = par.get("per_rank", [])
                coords = [e.get("coords") for e in ranks]
                want_coords = [{"dp": d, "pp": 0, "tp": t} for d in range(dp) for t in range(tp)]
                if coords != want_coords:
                    raise base.Failure(f"report.json per_rank coords {coords} != {want_coords}")
                if args.pairs:
                    check_megatron_count(args, plan, report, per_step["tp"], tp,
                                         out, params)
                print(f"OK {label}: max rel diff {worst:.2e}, {len(split)} parameters "
                      f"split over tp")
    except base.Failure as e:
        print(f"FAIL {label}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
