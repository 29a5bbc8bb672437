#!/usr/bin/python3
"""Check a run's logged comm bytes against report.json.

  check_comm_bytes.py LOG.jsonl OUTDIR/report.json
                      [--hidden H --sends N [--sequence-parallel]
                       [--element-bytes 4]]

LOG is rank 0's log (the rank that logs). Every step's "comm_bytes" must
equal report.json's parallel.per_rank[0].comm_bytes_per_step group by group
and kind by kind (relative 1e-9), and the report's top-level
comm_bytes_per_step must be rank 0's too. With --hidden and --sends (a
pipeline-parallel run), rank 0's point-to-point bytes
(comm_bytes.pp.send) must be what a pipeline moves: each of its N sends
per micro-batch (an activation to the next stage, an input gradient to the
previous one) is one micro-batch of this data-parallel rank, b * s * h
values of --element-bytes (4: float32; 2 under mixed precision), with
b = global_batch / dp / micro_batches; with --sequence-parallel, each
tensor-parallel rank sends its 1/tp of the tokens. Exit 0 when all hold,
else 1 with the first failure.
"""
import argparse
import json
import sys

KINDS = ("all_reduce", "reduce_scatter", "all_gather", "send", "all_to_all")


def close(a, b, rtol=1e-9):
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1.0)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log")
    p.add_argument("report")
    p.add_argument("--hidden", type=int)
    p.add_argument("--sends", type=int, help="rank 0's sends per micro-batch")
    p.add_argument("--element-bytes", type=int, default=4)
    p.add_argument("--sequence-parallel", action="store_true",
                   help="the activations cross split over tp")
    args = p.parse_args(argv)
    if (args.hidden is None) != (args.sends is None):
        p.error("--hidden and --sends go together")
    report = json.load(open(args.report))
    par = report["parallel"]
    want = par["per_rank"][0]["comm_bytes_per_step"]
    if par["comm_bytes_per_step"] != want:
        return fail(f"report.json comm_bytes_per_step {par['comm_bytes_per_step']} "
                    f"!= per_rank[0]'s {want}")
    records = [json.loads(line) for line in open(args.log) if line.startswith("{")]
    records = [r for r in records if "comm_bytes" in r]
    if not records:
        return fail(f"{args.log}: no step logs comm_bytes")
    for r in records:
        got = r["comm_bytes"]
        if set(got) != set(want):
            return fail(f"step {r['step']}: logged groups {sorted(got)} != "
                        f"report.json's {sorted(want)}")
        for g in want:
            for k in KINDS:
                if not close(got[g][k], want[g][k]):
                    return fail(f"step {r['step']}: logged comm_bytes.{g}.{k} "
                                f"{got[g][k]!r} != report.json's {want[g][k]!r}")
    if args.sends is None:
        print(f"OK: {len(records)} steps log report.json's comm bytes")
        return 0
    m = report["micro_batches"]
    b = report["global_batch"] // par["mesh"]["dp"] // m
    tp = par["mesh"].get("tp", 1) if args.sequence_parallel else 1
    expected = (args.sends * m * b * report["sequence_length"] * args.hidden *
                args.element_bytes / tp)
    send = want["pp"]["send"]
    if not close(send, expected):
        return fail(f"pp send bytes {send!r} != {args.sends} sends x {m} micro-batches "
                    f"x {b} x {report['sequence_length']} x {args.hidden} "
                    f"x {args.element_bytes} / {tp} = {expected}")
    print(f"OK: {len(records)} steps log report.json's comm bytes; "
          f"pp send {send:g} bytes per step")
    return 0


def fail(message):
    print(f"check_comm_bytes.py: {message}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
