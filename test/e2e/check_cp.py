#!/usr/bin/python3
"""Check context parallelism of one model against the one-device program.

  check_cp.py MODEL.onnx [--input-shape NAME=D0,D1 ...] --data TOKENS.bin
      --steps K --workdir DIR --plan BASE.json --meshes cp=2,cp=2:dp=2,...
      [--zero 0,1] --layers L --kv-width W [--activations] [--rtol R]
      [--element-bytes N] [--q-width W]

BASE.json is the plan without "mesh" and "zero"; each configuration adds
{"mesh": {...}, "zero": {"stage": S}}. Compiles BASE.json alone (one rank)
and runs it; then, for each mesh and stage, compiles, runs under `mpirun
-np dp*tp*cp*pp` and checks:

 (a) every step's loss and gradient norm equal the one-rank run's within
     relative 1e-5 (--rtol: bf16-mixed rounds each partial sum), its lr
     within 1e-9;
 (b) the program is context-parallel: every causal nn.attention of the
     step takes `positions` (its block's; an unfused attention's causal
     mask is split with the scores' rows), the keys and values are all-gathered over
     cp (a collective with `axes = [cp]`), and no parameter is stored split
     over cp;
 (c) every step's logged comm_bytes equal report.json's comm_bytes_per_step,
     group by group and kind by kind (relative 1e-9), and report.json's
     parallel.per_rank lists every rank with its mesh coordinates (cp
     among them);
 (d) where each dp rank holds one sample per micro-batch (so the flattened
     [b * s, vocab] logits keep the cp split) and attention is fused
     (nn.attention), the all-gathers over cp are
     exactly the keys' and values' of the --layers
     attention layers, once per micro-batch (the backward reads the
     gathered ones the forward kept; under a pipeline, rank 0's stage's
     L/pp layers, gathered again by the backward phase): 2 x L x (cp-1)/cp
     x b*s*kv bytes per micro-batch (b*s*kv/tp the fp32 (--element-bytes) bytes of the gathered [b, kv heads, s,
     head dim] tensor of a rank's micro-batch: b its samples, s the
     sequence of the first --input-shape, kv = --kv-width, the kv heads
     times the head dim, split over tp), and nothing else is all-gathered
     over cp; otherwise at least that (with more samples the logits and
     labels are gathered over cp before the loss; an unfused attention
     gathers its keys after the grouped-query expand, and again in the
     backward);
 (e) with --activations, report.json's bytes.activations of a rank, less
     the gathered keys and values the forward keeps for the backward
     (2 x L x b*s*kv/tp bytes, whole sequences), is at most 1.1 x 1/cp of
     the same mesh's without cp (compiled only): each rank computes on its
     cp block of the tokens.

With "context_parallel": {"mode": "ulysses"} in BASE.json, (b) asks
instead for all-to-alls over cp (each fused attention's sequence block
exchanged for a block of its heads) and (d) for, where each dp rank holds
one sample per micro-batch, attention is fused and there is no pipeline:
nothing all-gathered over cp and exactly 8 all-to-alls of a rank's
[b, heads, s / cp, head dim] block of the query (--q-width: heads x head
dim, split over tp) per layer and micro-batch (the forward's query, key, value in and output
back; the backward's output gradient in and the three gradients back:
its query, key, value, output and log-sum-exp are the forward's blocks),
8 x L x (cp-1)/cp x b*s/cp*q bytes; (e) keeps no gathered keys but
each layer's output twice, as DeepSpeed-Ulysses does: the head block its
gradient reads and the sequence block the output projection's does (so
less one b*s/cp*q block per layer).

With "mode": "ring", (b) asks for shifts over cp (the blocks of keys and
values passed around the ring) and (d), where each dp rank holds one
sample per micro-batch, attention is fused and there is no pipeline, for
nothing all-gathered over cp and exactly, per layer and micro-batch,
(6 cp - 4) blocks b*s/cp*kv sent (the forward's keys and values cp - 1
times, the backward's again, and the key and value gradients' partial
sums cp times, the last home) and the block's cp - 1 positions (8 bytes
each of s/cp); (e) allows a layer's 6 blocks in flight at once (the next
key and value, the gradients' partial sums passed and arriving, the
block's key and value gradients) besides the 1/cp.

Prints `OK cp=2 dp=1 tp=1 pp=1 zero=0` per configuration; at the first failure
one line `FAIL ...: reason` and exit 1.
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
AXES = ("dp", "tp", "cp", "pp")


def parse_meshes(text):
    return base.parse_meshes(text, AXES, "cp")


def step_ir(out):
    with open(os.path.join(out, "train_step.mlir")) as f:
        return f.read()


def check_ir(ir, mode):
    """(b): positions on every attention, a gather over cp (Ulysses: an
    all-to-all over cp; ring: a shift), no parameter split over cp."""
    attentions = re.findall(r"nn\.attention(?:_grad)? [^\n]*", ir)
    if not attentions and "nn.softmax " not in ir:
        raise base.Failure("the step has no attention (nn.attention or nn.softmax)")
    if mode == "ulysses":
        if not re.search(r"dist\.all_to_all [^\n]*axes = \[cp\]", ir):
            raise base.Failure("the step exchanges nothing over cp (Ulysses)")
    elif mode == "ring":
        if not re.search(r"dist\.shift [^\n]*axes = \[cp\]", ir):
            raise base.Failure("the step passes nothing around the cp ring")
    else:
        missing = [a for a in attentions
                   if " positions " not in a and "causal = true" in a]
        if missing:
            raise base.Failure(f"a causal attention without positions: {missing[0][:120]}")
        if not re.search(r"dist\.all_gather [^\n]*axes = \[cp\]", ir):
            raise base.Failure("the step all-gathers nothing over cp")
    head = ir[ir.index("func.func @train_step"):]
    head = head[:head.index("{\n")]
    for m in re.finditer(r'#dist\.sharding<[^>]*>[^{}]*nn\.param = "([^"]+)"', head):
        if "cp" in m.group(0).split("nn.param")[0]:
            raise base.Failure(f"parameter {m.group(1)} is stored split over cp")


def check_comm(report, records, mesh):
    """(c)."""
    par = report["parallel"]
    per_step = par["comm_bytes_per_step"]
    base.check_logged_comm(records, per_step)
    dp, tp, cp, pp = (mesh.get(a, 1) for a in AXES)
    want = [{"dp": d, "pp": p, "cp": c, "tp": t}
            for d in range(dp) for p in range(pp) for c in range(cp) for t in range(tp)]
    coords = [e.get("coords") for e in par.get("per_rank", [])]
    if coords != want:
        raise base.Failure(f"report.json per_rank coords {coords} != {want}")
    return per_step


def kv_bytes(args, mesh, micro_batches):
    """The fp32 bytes of one layer's gathered keys (or values) of a rank's
    micro-batch (its tp block of the heads), and its samples."""
    batch, seq = (int(x) for x in args.input_shape[0].partition("=")[2].split(","))
    samples = batch // mesh.get("dp", 1) // micro_batches
    return samples * seq * args.kv_width // mesh.get("tp", 1) * args.element_bytes, samples


def query_block_bytes(args, mesh, samples):
    """The bytes of a rank's [b, heads, s / cp, head dim] block of one
    layer's query (or output)."""
    seq = int(args.input_shape[0].partition("=")[2].split(",")[1])
    return (samples * seq // mesh["cp"] * args.q_width // mesh.get("tp", 1)
            * args.element_bytes)


def cp_bytes(per_step, kind):
    """The bytes of `kind` each rank sent over the cp group per step."""
    return per_step.get("cp", {}).get(kind, 0)


def check_moved(per_step, kind, want, exact, what, formula):
    """(d) of the ulysses and ring modes: `kind`'s bytes over cp exactly
    `want` where `exact` (and nothing all-gathered over cp), at least it
    otherwise."""
    got = cp_bytes(per_step, kind)
    gathered = cp_bytes(per_step, "all_gather")
    if exact and gathered:
        raise base.Failure(f"all-gathered {gathered} bytes over cp per step (this "
                           "mode gathers nothing)")
    if exact and not base.close(got, want, 1e-9) or got < want * (1 - 1e-9):
        raise base.Failure(f"{what} {got} bytes over cp per step, expected "
                           f"{'' if exact else 'at least '}{want:.0f} ({formula})")
    return got


def check_exchanged_bytes(args, per_step, mesh, micro_batches, fused):
    """(d), Ulysses."""
    cp, pp = mesh["cp"], mesh.get("pp", 1)
    _, samples = kv_bytes(args, mesh, micro_batches)
    q = query_block_bytes(args, mesh, samples)
    want = 8 * args.layers // pp * (cp - 1) / cp * q * micro_batches
    return check_moved(per_step, "all_to_all", want, samples == 1 and fused and pp == 1,
                       "exchanged", f"8 x {args.layers} layers x (cp-1)/cp x {q} x "
                       f"{micro_batches} micro-batches")


def check_ring_bytes(args, per_step, mesh, micro_batches, fused):
    """(d), ring."""
    cp, pp = mesh["cp"], mesh.get("pp", 1)
    kv, samples = kv_bytes(args, mesh, micro_batches)
    block = kv // cp
    seq = int(args.input_shape[0].partition("=")[2].split(",")[1])
    positions = seq // cp * 8
    layers = args.layers // pp
    want = layers * micro_batches * ((6 * cp - 4) * block + (cp - 1) * positions)
    return check_moved(per_step, "send", want, samples == 1 and fused and pp == 1,
                       "passed", f"{layers} layers x {micro_batches} micro-batches x "
                       f"((6 cp - 4) x {block} + (cp - 1) x {positions})")


def check_kv_bytes(args, per_step, mesh, micro_batches, fused):
    """(d)."""
    cp = mesh["cp"]
    kv, samples = kv_bytes(args, mesh, micro_batches)
    # Rank 0 reports: its pipeline stage holds 1/pp of the layers, and its
    # backward phase gathers the keys and values again (a stage's phases
    # keep what they save split).
    pp = mesh.get("pp", 1)
    want = (2 * args.layers // pp * (cp - 1) / cp * kv * micro_batches
            * (2 if pp > 1 else 1))
    got = cp_bytes(per_step, "all_gather")
    exact = samples == 1 and fused
    if exact and not base.close(got, want, 1e-9) or got < want * (1 - 1e-9):
        raise base.Failure(f"all-gathered {got} bytes over cp per step, expected "
                           f"{'' if exact else 'at least '}{want:.0f} "
                           f"(2 x {args.layers} layers x (cp-1)/cp x {kv} x "
                           f"{micro_batches} micro-batches)")
    return got


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
    p.add_argument("--layers", type=int, required=True,
                   help="the model's attention layers (d)")
    p.add_argument("--kv-width", type=int, required=True,
                   help="kv heads x head dim (d)")
    p.add_argument("--activations", action="store_true", help="check (e)")
    p.add_argument("--rtol", type=float, default=RTOL,
                   help="(a)'s tolerance (default 1e-5; bf16-mixed: its rounding)")
    p.add_argument("--element-bytes", type=int, default=4,
                   help="bytes of a gathered key (4: fp32, 2: bf16-mixed)")
    p.add_argument("--q-width", type=int,
                   help="heads x head dim (Ulysses' (d); default --kv-width)")
    p.add_argument("--autopar", default="autopar")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--timeout", type=int, default=300)
    args = p.parse_args(argv)
    args.model = os.path.abspath(args.model)
    args.data = os.path.abspath(args.data)
    with open(args.plan) as f:
        plan = json.load(f)
    micro_batches = plan.get("batch", {}).get("micro_batches", 1)
    mode = plan.get("context_parallel", {}).get("mode", "all_gather")
    if args.q_width is None:
        args.q_width = args.kv_width
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    label = "baseline"
    try:
        cfg = os.path.join(args.workdir, "one")
        base.compile_plan(args, plan, cfg)
        ref, _ = base.train(args, os.path.join(cfg, "out"), cfg, 1)
        print("OK cp=1 (baseline)")
        for mesh in args.meshes:
            for stage in (int(s) for s in args.zero.split(",")):
                dp, tp, cp, pp = (mesh.get(a, 1) for a in AXES)
                label = f"cp={cp} dp={dp} tp={tp} pp={pp} zero={stage}"
                cfg = os.path.join(args.workdir, f"cp{cp}-dp{dp}-tp{tp}-pp{pp}-z{stage}")
                out, report = base.compile_plan(
                    args, dict(plan, mesh=dict(mesh), zero={"stage": stage}), cfg)
                ir = step_ir(out)
                check_ir(ir, mode)
                log, records = base.train(args, out, cfg, dp * tp * cp * pp)
                worst = 0.0
                for key in ("loss", "grad_norm"):
                    worst = max(worst, base.compare(log, ref, key, args.rtol, "one rank",
                                                    args.steps))
                base.compare(log, ref, "lr", 1e-9, "one rank", args.steps)
                per_step = check_comm(report, records, mesh)
                fused = "nn.attention " in ir
                moved = {"ulysses": check_exchanged_bytes, "ring": check_ring_bytes,
                         "all_gather": check_kv_bytes}[mode](
                    args, per_step, mesh, micro_batches, fused)
                extra = ""
                if args.activations:
                    samples = kv_bytes(args, mesh, micro_batches)[1]
                    kept = {"ulysses": args.layers * query_block_bytes(args, mesh, samples),
                            "ring": 6 * kv_bytes(args, mesh, micro_batches)[0] // cp,
                            "all_gather": 2 * args.layers
                            * kv_bytes(args, mesh, micro_batches)[0]}[mode]
                    mine = report["bytes"]["activations"] - kept
                    without = {a: n for a, n in mesh.items() if a != "cp"}
                    _, nocp = base.compile_plan(
                        args, dict(plan, mesh=without, zero={"stage": stage}), cfg + "-nocp")
                    full = nocp["bytes"]["activations"]
                    if mine > 1.1 * full / cp:
                        raise base.Failure(f"{mine} activation bytes per rank besides the "
                                           f"{kept} kept (keys and values; Ulysses: "
                                           f"head-split outputs), more than "
                                           f"1.1 x 1/{cp} of the {full} without cp")
                    extra = (f", activations x{mine / full:.3f} of those without cp besides "
                             + {"ulysses": "the head-split outputs",
                                "ring": "6 blocks in flight",
                                "all_gather": "K, V"}[mode])
                how = {"ulysses": "exchanged", "ring": "passed",
                       "all_gather": "all-gathered"}[mode]
                print(f"OK {label}: max rel diff {worst:.2e}, {moved:.0f} bytes "
                      f"{how} over cp per step{extra}")
    except base.Failure as e:
        print(f"FAIL {label}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
