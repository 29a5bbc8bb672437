#!/usr/bin/python3
"""Tensor parallelism on the CPU target: tp=2 step time over tp=1, and the
tp traffic over Megatron's formula.

Model: BERT (post-LN encoder, separate q, k, v), 4 layers, d_model 256, 4
heads, vocab 512, T 128, batch 8, AdamW, fp32: tensor parallelism splits
every layer's attention and MLP (2 column/row pairs per layer). Both runs
train the same global batch on the same machine: tp=1 one rank with every
core, tp=2 two ranks with half the cores each (OMP_NUM_THREADS and
OpenBLAS threads), so an ideal tensor-parallel program takes the same time
per step and the ratio tp=2 / tp=1 is its overhead (the all-reduces, the
work every rank repeats: norms, embedding, loss). On a machine with fewer
than 2 cores the ratio includes time-sharing (it says so).

Megatron's count of the tp traffic per step: per pair one all-reduce of
b*s*h floats forward and one backward, the vocab-parallel embedding and LM
head one each, the vocab-parallel loss three of b*s floats, a ring
all-reduce sending 2 (tp-1)/tp of each; with sequence parallelism each
b*s*h all-reduce is an all-gather plus a reduce-scatter (the same bytes),
and the gradients of the norms and row-parallel biases (run on split
tokens) are all-reduced besides. The measured bytes (the log's
comm_bytes.tp) over that count is printed as a ratio (1.00 exactly when
nothing else moves over tp), for tp = 2 without and with sequence
parallelism, with report.json's activation bytes per rank.

Usage: /usr/bin/python3 bench/tp/run.py [--steps N] [--keep]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cpu_ranks import Work, median_ms, mpi_env, parse_args, report  # noqa: E402

CONFIG = dict(vocab=512, d_model=256, heads=4, layers=4, seq=128, batch=8)


def main():
    args = parse_args(__doc__, 20)
    cores = os.cpu_count() or 1
    c = CONFIG
    work = Work("tp", mpi_env(), args.keep)
    model = work.export("bert", c, c["batch"])
    tokens = work.tokens((args.steps + 1) * c["batch"] * c["seq"] + 1, c["vocab"])

    def train(tp, sp=True):
        name = f"{tp}-{'sp' if sp else 'nosp'}"
        prog = work.compile(model, name, {
            "mesh": {"tp": tp}, "data": {"inputs": "input_ids", "targets": "labels"},
            "tensor_parallel": {"sequence_parallel": sp}})
        rows = work.train_log(prog, tp, tokens, args.steps, cores // tp)
        activations = report(prog)["bytes"]["activations"]
        return (median_ms(rows, args.steps), rows[-1].get("comm_bytes", {}).get("tp", {}),
                activations)

    base, _, base_act = train(1)
    tp = 2
    ring = 2 * (tp - 1) / tp * c["batch"] * c["seq"] * 4
    formula = (2 * c["layers"] * 2 + 2) * ring * c["d_model"] + 3 * ring
    print(f"machine: {cores} cores; BERT {c['layers']} layers, d {c['d_model']}, "
          f"{c['heads']} heads, vocab {c['vocab']}, T {c['seq']}, batch {c['batch']}, AdamW, "
          f"fp32, CPU target")
    print(f"{'run':<14}{'ms/step':>10}{'ratio':>8}{'tp bytes/rank/step':>21}"
          f"{'/ Megatron':>12}{'activations':>13}")
    print(f"{'tp=1':<14}{base:>10.1f}{'1.00':>8}{'-':>21}{'-':>12}{base_act:>13}")
    for sp in (False, True):
        ms, tp_bytes, act = train(2, sp)
        measured = sum(tp_bytes.values())
        label = "tp=2 SP" if sp else "tp=2"
        print(f"{label:<14}{ms:>10.1f}{ms / base:>8.2f}{measured:>21.0f}"
              f"{measured / formula:>12.2f}{act:>13}")
    print(f"Megatron's count: {formula:.0f} bytes per rank and step")
    if cores < 2:
        print("note: fewer cores than ranks; the ratio includes time-sharing")
    work.close()


if __name__ == "__main__":
    sys.exit(main())
