#!/usr/bin/python3
"""Check a pipeline's measured trace (train --trace) against its predicted
one (OUTDIR/schedule.json).

  check_pp_trace.py MEASURED.json PREDICTED.json

Both must be Chrome traces (Perfetto opens them) with the same actions:
one complete event ("ph": "X") per action of the step, named like "F3 s1"
(the forward of micro-batch 3 on stage 1; B, I, W for the backward, its
input and weight halves) on the track (tid) of the pipeline rank that runs
it, in the same order on each rank. In each, a rank's actions must not
overlap, and the data dependencies must hold in time: the forward of a
micro-batch on stage s + 1 starts after its forward on stage s ends, and
its backward (or input half) on stage s after that on stage s + 1. Exit 0
when all hold, else 1 with the first failure. (Times are in microseconds, written to 0.001: 0.01 of slack.)
"""
import json
import sys


def events(path):
    trace = json.load(open(path))
    out = {}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X":
            continue
        key = (e["name"], e["tid"])
        if key in out:
            raise ValueError(f"{path}: {e['name']} on rank {e['tid']} twice")
        if e["dur"] < 0:
            raise ValueError(f"{path}: {e['name']} has a negative duration")
        out[key] = (e["ts"], e["ts"] + e["dur"], e["args"]["stage"],
                    e["args"]["micro_batch"], e["cat"])
    return out


def check(path, ev):
    by_rank = {}
    for (name, tid), t in ev.items():
        by_rank.setdefault(tid, []).append((t[0], t[1], name))
    for tid, spans in by_rank.items():
        spans.sort()
        for a, b in zip(spans, spans[1:]):
            if b[0] < a[1] - 0.01:
                raise ValueError(f"{path}: on rank {tid}, {b[2]} starts before "
                                 f"{a[2]} ends")
    at = {(t[4], t[2], t[3]): t for t in ev.values()}
    for (op, stage, micro), t in at.items():
        if op == "F" and ("F", stage - 1, micro) in at:
            if t[0] < at[("F", stage - 1, micro)][1] - 0.01:
                raise ValueError(f"{path}: F{micro} s{stage} starts before "
                                 f"F{micro} s{stage - 1} ends")
        if op in ("B", "I"):
            after = at.get(("B", stage + 1, micro)) or at.get(("I", stage + 1, micro))
            if after and t[0] < after[1] - 0.01:
                raise ValueError(f"{path}: {op}{micro} s{stage} starts before the "
                                 f"backward of micro-batch {micro} on stage "
                                 f"{stage + 1} ends")


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        measured, predicted = events(argv[0]), events(argv[1])
        if set(measured) != set(predicted):
            diff = sorted(set(measured) ^ set(predicted))[:5]
            raise ValueError(f"the traces' actions differ: {diff}")
        check(argv[0], measured)
        check(argv[1], predicted)
        order = lambda ev, tid: [n for (t, n) in sorted(
            (v[0], k[0]) for k, v in ev.items() if k[1] == tid)]
        for tid in {k[1] for k in measured}:
            if order(measured, tid) != order(predicted, tid):
                raise ValueError(f"rank {tid} ran {order(measured, tid)}, the "
                                 f"schedule says {order(predicted, tid)}")
    except (OSError, ValueError, KeyError) as e:
        print(f"check_pp_trace.py: {e}", file=sys.stderr)
        return 1
    print(f"OK: {len(measured)} actions, in the predicted order of every "
          f"rank and dependency")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
