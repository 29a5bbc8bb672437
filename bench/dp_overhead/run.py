#!/usr/bin/python3
"""Data-parallel overhead on the CPU target: dp=2 step time over dp=1.

Model: GPT, 4 layers, d_model 256, 4 heads, vocab 512, T 128, AdamW. The
per-rank batch is the same in both runs (B = 4 per rank: dp=1 trains B=4,
dp=2 trains B=8 on two ranks), so an ideal data-parallel program takes the
same time per step and the ratio dp=2 / dp=1 is its overhead: the gradient
all-reduce (ZeRO 0) or reduce-scatter + all-gather (ZeRO 1, 2) and the
sharing of the machine. Every rank, in both runs, gets the same share of
the machine: cores / 2 threads (OMP_NUM_THREADS and OpenBLAS threads), so
the dp=1 run is one of the dp=2 run's ranks alone and the ideal ratio is
1.00; on a machine with fewer than 2 cores the ratio includes time-sharing
(it says so).

Prints the median ms/step of each run, the measured bytes each rank sent
per step (from the log) and the ratio for ZeRO stages 0, 1 and 2.

Usage: /usr/bin/python3 bench/dp_overhead/run.py [--steps N] [--keep]
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
CONFIG = dict(vocab=512, d_model=256, heads=4, layers=4, seq=128, per_rank_batch=4)


def run(cmd, env, **kw):
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, **kw)


def median_ms(log, steps):
    rows = [json.loads(line) for line in open(log)]
    warm = max(1, steps // 5)
    return statistics.median(r["ms"] for r in rows[warm:]), rows[-1].get("comm_bytes")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cores = os.cpu_count() or 1
    work = tempfile.mkdtemp(prefix="autopar-dp-overhead-")
    c = CONFIG
    model = os.path.join(work, "model.onnx")
    run([PY, os.path.join(ROOT, "test/models/export.py"), "--model", "gpt",
         "--vocab", str(c["vocab"]), "--d-model", str(c["d_model"]), "--heads", str(c["heads"]),
         "--layers", str(c["layers"]), "--seq", str(c["seq"]), "--batch", "1", "--dynamic-batch",
         "--opset", "17", "--no-constant-folding", "--seed", "0", "-o", model], env)
    tokens = os.path.join(work, "tokens.bin")
    count = (args.steps + 1) * 2 * c["per_rank_batch"] * c["seq"] + 1
    run([PY, os.path.join(ROOT, "test/e2e/make_tokens.py"), "-o", tokens, "--count", str(count),
         "--vocab", str(c["vocab"])], env)
    autopar = os.path.join(ROOT, "build/bin/autopar")

    def train(dp, stage):
        batch = c["per_rank_batch"] * dp
        plan = os.path.join(work, f"plan-{dp}-{stage}.json")
        json.dump({"mesh": {"dp": dp}, "zero": {"stage": stage}}, open(plan, "w"))
        prog = os.path.join(work, f"prog-{dp}-{stage}")
        run([autopar, "compile", model, "--plan", plan, "-o", prog,
             "--input-shape", f"idx={batch},{c['seq']}",
             "--input-shape", f"targets={batch},{c['seq']}"], env)
        log = os.path.join(work, f"log-{dp}-{stage}.jsonl")
        threads = str(max(1, cores // 2))
        renv = dict(env, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads)
        cmd = [os.path.join(prog, "train"), "--data", tokens, "--steps", str(args.steps),
               "--log", log]
        if dp > 1:
            cmd = ["mpirun", "--oversubscribe", "-np", str(dp), "-x", "OMP_NUM_THREADS",
                   "-x", "OPENBLAS_NUM_THREADS", "--bind-to", "none"] + cmd
        run(cmd, renv)
        return median_ms(log, args.steps)

    base, _ = train(1, 0)
    print(f"machine: {cores} cores; GPT {c['layers']} layers, d {c['d_model']}, T {c['seq']}, "
          f"{c['per_rank_batch']} samples per rank, AdamW, fp32, CPU target")
    print(f"{'run':<22}{'ms/step':>10}{'bytes sent/rank/step':>24}{'ratio':>8}")
    print(f"{'dp=1':<22}{base:>10.1f}{'-':>24}{'1.00':>8}")
    for stage in (0, 1, 2):
        ms, comm = train(2, stage)
        sent = sum(v for group in comm.values() for v in group.values()) if comm else 0
        print(f"{'dp=2 zero=' + str(stage):<22}{ms:>10.1f}{sent:>24.0f}{ms / base:>8.2f}")
    if cores < 2:
        print("note: fewer cores than ranks; the ratio includes time-sharing")
    if args.keep:
        print(f"work directory: {work}")
    else:
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    sys.exit(main())
