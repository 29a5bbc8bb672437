#!/usr/bin/python3
"""Pipeline parallelism on CPU ranks: the measured bubble of each schedule
against the one the compiler predicts.

Model: GPT, 4 layers, d_model 256, 4 heads, vocab 512, T 128, 16 samples
per step in 8 micro-batches, AdamW, fp32, on pp = 2 ranks (one core each:
OMP_NUM_THREADS and OpenBLAS threads 1): GPipe, 1F1B, ZB-H1 and
interleaved 1F1B (2 chunks, 4 stages of one layer). For each, report.json's
parallel.pipeline.bubble_fraction (the compile-time simulation of the
schedule with each phase's roofline time) against the bubble of the last
step `train --trace` measured: 1 - (time the ranks computed) / (ranks x
the step's span), where an action runs from its inputs' arrival to the end
of its computation (waiting for a message, sending and the optimizer are
idle time). Printed: both bubbles and their ratio (measured / predicted),
and the measured step span.

On a machine with fewer cores than ranks the ranks time-share and the
measured bubble means little (it says so).

Usage: /usr/bin/python3 bench/pp/run.py [--steps N] [--keep]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cpu_ranks import Work, mpi_env, parse_args  # noqa: E402

CONFIG = dict(vocab=512, d_model=256, heads=4, layers=4, seq=128, batch=16, micro=8)
SCHEDULES = ("gpipe", "1f1b", "zb-h1", "interleaved")


def measured_bubble(trace_path):
    events = [e for e in json.load(open(trace_path))["traceEvents"] if e.get("ph") == "X"]
    ranks = {e["tid"] for e in events}
    start = min(e["ts"] for e in events)
    end = max(e["ts"] + e["dur"] for e in events)
    busy = sum(e["dur"] for e in events)
    span = end - start
    return 1 - busy / (len(ranks) * span), span


def main():
    args = parse_args(__doc__, 6)
    pp = 2
    cores = os.cpu_count() or 1
    c = CONFIG
    work = Work("pp", mpi_env(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"), args.keep)
    model = work.export("gpt", c, c["batch"], "--dynamic-batch")
    tokens = work.tokens((args.steps + 1) * c["batch"] * c["seq"] + 1, c["vocab"])
    print(f"pp: GPT L={c['layers']} h={c['d_model']} V={c['vocab']} T={c['seq']} "
          f"B={c['batch']} m={c['micro']}, pp={pp} CPU ranks, {cores} cores"
          + ("" if cores >= pp else " (fewer cores than ranks: time-shared, not meaningful)"))
    print(f"{'schedule':<12} {'predicted':>9} {'measured':>9} {'ratio':>6} {'step ms':>8}")
    for schedule in SCHEDULES:
        shape = f"{c['batch']},{c['seq']}"
        prog = work.compile(model, schedule, {
            "mesh": {"pp": pp}, "pipeline": {"schedule": schedule},
            "batch": {"micro_batches": c["micro"]},
            "optimizer": {"type": "adamw", "lr": 1e-3}},
            "--input-shape", f"idx={shape}", "--input-shape", f"targets={shape}")
        predicted = json.load(open(os.path.join(prog, "report.json")))[
            "parallel"]["pipeline"]["bubble_fraction"]
        trace = work.path(f"trace-{schedule}.json")
        work.train(prog, pp, ["--data", tokens, "--steps", str(args.steps), "--trace", trace])
        bubble, span = measured_bubble(trace)
        print(f"{schedule:<12} {predicted:>9.3f} {bubble:>9.3f} "
              f"{bubble / predicted if predicted else float('nan'):>6.2f} {span / 1000:>8.1f}")
    work.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
