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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cpu_ranks import Work, median_ms, mpi_env, parse_args  # noqa: E402

CONFIG = dict(vocab=512, d_model=256, heads=4, layers=4, seq=128, per_rank_batch=4)


def main():
    args = parse_args(__doc__, 20)
    cores = os.cpu_count() or 1
    c = CONFIG
    work = Work("dp-overhead", mpi_env(), args.keep)
    model = work.export("gpt", c, 1, "--dynamic-batch", "--no-constant-folding")
    tokens = work.tokens((args.steps + 1) * 2 * c["per_rank_batch"] * c["seq"] + 1, c["vocab"])

    def train(dp, stage):
        batch = c["per_rank_batch"] * dp
        name = f"{dp}-{stage}"
        prog = work.compile(model, name, {"mesh": {"dp": dp}, "zero": {"stage": stage}},
                            "--input-shape", f"idx={batch},{c['seq']}",
                            "--input-shape", f"targets={batch},{c['seq']}")
        rows = work.train_log(prog, dp, tokens, args.steps, cores // 2)
        return median_ms(rows, args.steps), rows[-1].get("comm_bytes")

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
    work.close()


if __name__ == "__main__":
    sys.exit(main())
