#!/usr/bin/python3
"""Context parallelism on the CPU target: cp=2 step time over cp=1 in each
mode, and the cp traffic over each mode's formula.

Model: a causal GPT, 4 layers, d_model 128, 4 heads, vocab 512, T 2048, one
sequence per step, AdamW, fp32 (fused causal attention: at this length the
attention's T^2 work is most of the step). Both runs train the same tokens
on the same machine: cp=1 one rank with every core, cp=2 two ranks with
half the cores each (OMP_NUM_THREADS and OpenBLAS threads), each holding
half of every sequence (zig-zag chunks by default, contiguous blocks with
context_parallel.load_balance "none"), so an ideal context-parallel program
takes the same time per step and the ratio cp=2 / cp=1 is its overhead
(the key and value gathers, their gradients' reduce-scatter, the gradient
sum over cp) and its imbalance: contiguous blocks give the second rank
three times the first's causal attention work, zig-zag chunks the same.
On a machine with fewer than 2 cores the ratio includes time-sharing (it
says so).

The cp traffic per step by Llama 3's all-gather scheme: each layer
all-gathers its keys and values, (cp - 1)/cp of b*s*h floats each, once
(the backward reads what the forward gathered), and reduce-scatters their
gradients, the same bytes again; the weights' gradients are summed over cp
(an all-reduce), but for GPT's learned position table: each rank's tokens
give gradients to their own rows, all-gathered ((cp - 1)/cp of s*h
floats). The measured all-gathered bytes (the log's
comm_bytes.cp.all_gather) over the formula's gathers is printed as a ratio
(1.00 exactly when nothing else is gathered over cp), with report.json's
activation bytes per rank.

The same for the other two modes (context_parallel.mode): Ulysses
exchanges each layer's query, key, value and output, and in the backward
their gradients, between a block of the sequence and a block of the heads
(8 all-to-alls of (cp - 1)/cp of a rank's b*s/cp*h floats); the ring
passes the keys and values around the ring (cp - 1 times forward and
backward) and the key and value gradients' partial sums (cp times), with
the blocks' positions. Each row's ratio is the mode's bytes (all_gather,
all_to_all or send over cp) over its formula.

Usage: /usr/bin/python3 bench/cp/run.py [--steps N] [--keep]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cpu_ranks import Work, median_ms, mpi_env, parse_args, report  # noqa: E402

CONFIG = dict(vocab=512, d_model=128, heads=4, layers=4, seq=2048, batch=1)


def main():
    args = parse_args(__doc__, 10)
    cores = os.cpu_count() or 1
    c = CONFIG
    work = Work("cp", mpi_env(), args.keep)
    model = work.export("gpt", c, c["batch"])
    tokens = work.tokens((args.steps + 1) * c["batch"] * c["seq"] + 1, c["vocab"])

    def train(cp, balance="zigzag", mode="all_gather"):
        name = f"{cp}-{balance}-{mode}"
        plan = {"mesh": {"cp": cp},
                "context_parallel": {"mode": mode, "load_balance": balance}}
        prog = work.compile(model, name, plan)
        rows = work.train_log(prog, cp, tokens, args.steps, cores // cp)
        activations = report(prog)["bytes"]["activations"]
        return median_ms(rows, args.steps), rows[-1].get("comm_bytes", {}).get("cp", {}), \
            activations

    base, _, base_act = train(1)
    cp = 2
    L, b, s, h = c["layers"], c["batch"], c["seq"], c["d_model"]
    share = (cp - 1) / cp * s * h * 4
    block = b * s // cp * h * 4  # a rank's keys (or queries) of one layer
    # Per mode: the kind of the cp traffic and its bytes per rank and step.
    formulas = {
        # Keys and values gathered once, the position table's gradient rows.
        "all_gather": ("all_gather", 2 * L * b * share + share),
        # Query, key, value, output and their gradients: (cp-1)/cp each.
        "ulysses": ("all_to_all", 8 * L * (cp - 1) / cp * block),
        # Keys and values cp - 1 times each way, the key and value
        # gradients' partial sums cp times, the block positions (i64).
        "ring": ("send", L * ((6 * cp - 4) * block + (cp - 1) * s // cp * 8)),
    }
    print(f"machine: {cores} cores; GPT {L} layers, d {h}, {c['heads']} heads, "
          f"vocab {c['vocab']}, T {s}, batch {b}, AdamW, fp32, CPU target")
    print(f"{'run':<22}{'ms/step':>10}{'ratio':>8}{'cp B/step (kind)':>28}"
          f"{'/ formula':>11}{'reduce-scattered':>18}{'activations':>13}")
    print(f"{'cp=1':<22}{base:>10.1f}{'1.00':>8}{'-':>28}{'-':>11}{'-':>18}{base_act:>13}")
    for mode, balance in (("all_gather", "none"), ("all_gather", "zigzag"),
                          ("ulysses", "none"), ("ring", "zigzag")):
        ms, cp_bytes, act = train(cp, balance, mode)
        kind, formula = formulas[mode]
        moved = cp_bytes.get(kind, 0)
        label = f"cp=2 {mode} {balance}"
        print(f"{label:<22}{ms:>10.1f}{ms / base:>8.2f}{f'{moved:.0f} ({kind})':>28}"
              f"{moved / formula:>11.2f}{cp_bytes.get('reduce_scatter', 0):>18.0f}"
              f"{act:>13}")
    for mode, (kind, formula) in formulas.items():
        print(f"formula {mode}: {formula:.0f} bytes ({kind}) per rank and step")
    if cores < 2:
        print("note: fewer cores than ranks; the ratio includes time-sharing")
    work.close()


if __name__ == "__main__":
    sys.exit(main())
