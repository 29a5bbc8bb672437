#!/usr/bin/python3
"""Compare per-step values of two JSON-lines training logs.

  compare_losses.py OURS.jsonl REF.jsonl [--rtol 1e-4] [--key loss] [--steps N]
                    [--min-step M] [--ours-offset K]

Each log holds one JSON object per line with a "step" and the compared key;
other lines (text, objects without both) are ignored, and when a step
appears twice (a resumed run) its last line counts. null (how the compiled
program logs NaN and infinities) reads as NaN. A step passes when
|ours - ref| <= rtol * |ref|. With --steps N, steps 0..N-1 are compared and
each must be in both logs; without it, every step in either log is, and a
step missing from one of them fails. With --min-step M, steps below M are
not compared (e.g. the steps a resumed run did not redo). With --ours-offset K,
step s of REF is compared with step s + K of OURS (e.g. a model exported after
K steps, trained again by the reference from step 0). NaN never passes.

Prints the worst steps and "OK: N steps, max rel diff X" (exit 0), or each
failing step (exit 1). Exit 2 for an unreadable log.
"""
import argparse
import json
import math
import sys

WORST_SHOWN = 5


class LogError(Exception):
    """A log that cannot be read."""


def read_log(path, key):
    """{step: value of key (None when it is not a number)} of a log."""
    values = {}
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as e:
        raise LogError(f"{path}: {e.strerror}") from e
    for lineno, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict) or "step" not in record or key not in record:
            continue
        step, value = record["step"], record[key]
        if not isinstance(step, int) or isinstance(step, bool):
            raise LogError(f"{path}:{lineno}: step is not an integer: {step!r}")
        if value is None:
            values[step] = math.nan
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            values[step] = float(value)
        else:
            values[step] = None
    return values


def rel_diff(ours, ref):
    """|ours - ref| / |ref| (0 when equal, inf when ref is 0 and they differ, nan for NaN)."""
    if ours == ref:
        return 0.0
    if math.isnan(ours) or math.isnan(ref):
        return math.nan
    if ref == 0 or math.isinf(ref) or math.isinf(ours):
        return math.inf
    return abs(ours - ref) / abs(ref)


def compare(ours, ref, key, rtol, steps=None, min_step=0):
    """(the steps checked, failure lines, [(rel, step, ours, ref)] of the steps
    whose values could be compared)."""
    wanted = list(range(steps)) if steps is not None else sorted(set(ours) | set(ref))
    wanted = [s for s in wanted if s >= min_step]
    failures, rows = [], []
    for step in wanted:
        a, b = ours.get(step), ref.get(step)
        if step not in ours or step not in ref:
            failures.append(f"step {step}: missing from {'OURS' if step not in ours else 'REF'}")
        elif a is None or b is None:
            failures.append(f"step {step}: no numeric {key!r} in {'OURS' if a is None else 'REF'}")
        else:
            rel = rel_diff(a, b)
            rows.append((rel, step, a, b))
            if not rel <= rtol:  # NaN fails
                failures.append(f"step {step}: {key} {a:.7g} vs {b:.7g} (rel {rel:.1e})")
    return wanted, failures, rows


def worst_table(rows, key):
    """The WORST_SHOWN steps with the largest relative difference, as text."""
    worst = sorted(rows, key=lambda r: (-(math.inf if math.isnan(r[0]) else r[0]), r[1]))
    worst = worst[:WORST_SHOWN]
    lines = [f"{'step':>6}  {'ours ' + key:>16}  {'ref ' + key:>16}  {'rel diff':>9}"]
    lines += [f"{step:>6}  {a:>16.9g}  {b:>16.9g}  {rel:>9.2e}" for rel, step, a, b in worst]
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ours", metavar="OURS.jsonl", help="the compiled program's log")
    p.add_argument("ref", metavar="REF.jsonl", help="the reference log (torch_ref.py)")
    p.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance (1e-4)")
    p.add_argument("--key", default="loss", help="the compared key (loss)")
    p.add_argument("--steps", type=int, help="compare steps 0..STEPS-1")
    p.add_argument("--min-step", type=int, default=0, metavar="M",
                   help="compare only steps >= M (0)")
    p.add_argument("--ours-offset", type=int, default=0, metavar="K",
                   help="compare REF's step s with OURS' step s + K (0)")
    args = p.parse_args(argv)
    if not args.rtol >= 0:
        p.error("--rtol must be >= 0")
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be positive")
    if args.min_step < 0 or args.ours_offset < 0:
        p.error("--min-step and --ours-offset must be >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        ours = read_log(args.ours, args.key)
        ref = read_log(args.ref, args.key)
    except LogError as e:
        print(f"compare_losses.py: error: {e}", file=sys.stderr)
        return 2
    if args.ours_offset:
        ours = {s - args.ours_offset: v for s, v in ours.items() if s >= args.ours_offset}
    wanted, failures, rows = compare(ours, ref, args.key, args.rtol, args.steps,
                                     args.min_step)
    if not wanted:
        print("FAIL: no steps to compare")
        return 1
    if rows:
        print(worst_table(rows, args.key))
    if failures:
        for line in failures:
            print(line)
        print(f"FAIL: {len(failures)} of {len(wanted)} steps differ by more than "
              f"rtol {args.rtol:g} or are missing")
        return 1
    print(f"OK: {len(rows)} steps, max rel diff {max(r[0] for r in rows):.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
