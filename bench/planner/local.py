#!/usr/bin/python3
"""The planner on this machine: `autopar plan --cluster local` predicts the
step time of the CPU programs `autopar compile` builds; this runs them and
prints predicted / measured for a one-device, a dp, a tp and a pp plan
(issue 20: within 25%), and dp = 4 (on fewer than 4 cores, ranks taking
turns).

Model: GPT (pre-LN, fused attention), 4 layers, d_model 256, 4 heads, vocab
512, T 128, global batch 8, AdamW, fp32. Every plan trains the same global
batch with all the machine's cores: R ranks with cores / R threads each
(OMP_NUM_THREADS), as `--cluster local` assumes. The prediction comes from
`autopar calibrate`'s measurements (cached; --recalibrate measures again).
Measured: the median ms/step of the training log after the first quarter
of the steps.

Usage: /usr/bin/python3 bench/planner/local.py [--steps N] [--recalibrate] [--keep]
           [--model gpt|bert|llama] [--d-model D] [--heads H] [--layers L]
           [--vocab V] [--seq T] [--plan-extra JSON]
(the options change the model and add keys to every plan: other shapes,
precisions, optimizers.)
Exit status 1 when a prediction is more than 25% off.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3"
CONFIG = dict(vocab=512, d_model=256, heads=4, layers=4, seq=128, batch=8)
PLANS = [
    ("one device", {}),
    ("dp=2", {"mesh": {"dp": 2}}),
    ("tp=2", {"mesh": {"tp": 2}}),
    ("pp=2 1F1B m=4", {"mesh": {"pp": 2}, "batch": {"micro_batches": 4},
                       "pipeline": {"schedule": "1f1b"}}),
    ("dp=4", {"mesh": {"dp": 4}}),
]
TOLERANCE = 0.25


def run(cmd, env):
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return done


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--recalibrate", action="store_true",
                        help="run `autopar calibrate` first")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--model", choices=["gpt", "bert", "llama"], default="gpt")
    parser.add_argument("--d-model", type=int, default=CONFIG["d_model"])
    parser.add_argument("--heads", type=int, default=CONFIG["heads"])
    parser.add_argument("--layers", type=int, default=CONFIG["layers"])
    parser.add_argument("--vocab", type=int, default=CONFIG["vocab"])
    parser.add_argument("--seq", type=int, default=CONFIG["seq"])
    parser.add_argument("--plan-extra", default="{}",
                        help="JSON merged into every plan (precision, optimizer, zero...)")
    args = parser.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cores = os.cpu_count() or 1
    autopar = os.path.join(ROOT, "build", "bin", "autopar")
    work = tempfile.mkdtemp(prefix="autopar-plan-local-")
    c = dict(CONFIG, d_model=args.d_model, heads=args.heads, layers=args.layers,
             vocab=args.vocab, seq=args.seq)
    inputs = ("input_ids", "labels") if args.model == "bert" else ("idx", "targets")
    model = os.path.join(work, "model.onnx")
    run([PY, os.path.join(ROOT, "test", "models", "export.py"), "--model", args.model,
         "--vocab", str(c["vocab"]), "--d-model", str(c["d_model"]), "--heads",
         str(c["heads"]), "--layers", str(c["layers"]), "--seq", str(c["seq"]),
         "--batch", str(c["batch"]), "--opset", "17", "--seed", "0", "--dynamic-batch",
         "-o", model], env)
    shape = f"{c['batch']},{c['seq']}"
    shapes = ["--input-shape", f"{inputs[0]}={shape}", "--input-shape", f"{inputs[1]}={shape}"]
    tokens = os.path.join(work, "tokens.bin")
    run([PY, os.path.join(ROOT, "test", "e2e", "make_tokens.py"), "-o", tokens, "--count",
         str((args.steps + 1) * c["batch"] * c["seq"] + 1), "--vocab", str(c["vocab"])], env)
    if args.recalibrate:
        run([autopar, "calibrate"], env)

    extra = json.loads(args.plan_extra)
    print(f"machine: {cores} cores; {args.model} {c['layers']} layers, d {c['d_model']}, "
          f"{c['heads']} heads, vocab {c['vocab']}, T {c['seq']}, batch {c['batch']}, "
          f"CPU target, plans + {json.dumps(extra)}")
    print(f"{'plan':<16}{'ranks':>6}{'threads':>8}{'predicted ms':>14}{'measured ms':>13}"
          f"{'ratio':>7}   predicted compute / comm / bubble / optimizer ms")
    worst = 0.0
    for i, (label, plan) in enumerate(PLANS):
        mesh = plan.get("mesh", {})
        ranks = mesh.get("dp", 1) * mesh.get("tp", 1) * mesh.get("pp", 1)
        plan_path = os.path.join(work, f"plan{i}.json")
        plan = dict(plan, **extra)
        if args.model == "bert":
            plan["data"] = {"inputs": inputs[0], "targets": inputs[1]}
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        out = run([autopar, "plan", model, "--cluster", "local", "--global-batch",
                   str(c["batch"]), "--evaluate", plan_path, "--json"], env)
        predicted = json.loads(out.stdout)["plans"][0]
        prog = os.path.join(work, f"prog{i}")
        run([autopar, "compile", model, "--plan", plan_path, "-o", prog] + shapes, env)
        log = os.path.join(work, f"log{i}.jsonl")
        threads = str(max(1, cores // ranks))
        renv = dict(env, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS="1")
        cmd = [os.path.join(prog, "train"), "--data", tokens, "--steps", str(args.steps),
               "--log", log]
        if ranks > 1:
            cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks),
                   "-x", "OMP_NUM_THREADS", "-x", "OPENBLAS_NUM_THREADS"] + cmd
        run(cmd, renv)
        rows = [json.loads(line) for line in open(log)]
        measured = statistics.median(r["ms"] for r in rows[max(1, args.steps // 4):])
        step = predicted["step_time_s"] * 1e3
        ratio = step / measured
        worst = max(worst, abs(ratio - 1))
        b = predicted["breakdown"]
        parts = " / ".join(f"{b[k] * 1e3:.1f}" for k in
                           ("compute_s", "exposed_comm_s", "bubble_s", "optimizer_s"))
        print(f"{label:<16}{ranks:>6}{threads:>8}{step:>14.1f}{measured:>13.1f}"
              f"{ratio:>7.2f}   {parts}")
    ok = worst <= TOLERANCE
    print(f"planner/local: worst |predicted / measured - 1| = {worst:.2f} "
          f"(target <= {TOLERANCE:.2f}: {'met' if ok else 'not met'})")
    if cores < 4:
        print(f"note: {cores} core(s): plans of more ranks time-share them")
    if args.keep:
        print(f"work directory: {work}")
    else:
        subprocess.run(["rm", "-rf", work])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
