#!/usr/bin/env python3
"""Checks `autopar plan --json` (the search) against its rules.

Usage: check_plan_search.py SEARCH.json BEST.json BEST-EVAL.json --gpus N --top K

SEARCH.json is the search's output, BEST.json what -o wrote, BEST-EVAL.json
`--evaluate BEST.json --json`. Requires search_seconds, 1 to K entries, the
fitting ones first and each group by step time, every mesh of N GPUs, each
breakdown summing to its step, BEST.json the first entry's plan, and its
evaluation the same step time. Prints "OK" or the first mismatch (exit 1).
"""
import argparse
import json

from check_plan import check_breakdown, close, fail


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("search")
    ap.add_argument("best")
    ap.add_argument("evaluated")
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--top", type=int, required=True)
    args = ap.parse_args()
    out = json.load(open(args.search))
    best = json.load(open(args.best))
    evaluated = json.load(open(args.evaluated))

    if not out.get("search_seconds", -1) >= 0:
        fail("no search_seconds")
    plans = out["plans"]
    if not 1 <= len(plans) <= args.top:
        fail("%d entries for --top %d" % (len(plans), args.top))
    for i, p in enumerate(plans):
        mesh = p["plan"]["mesh"]
        if mesh["dp"] * mesh["tp"] * mesh["pp"] != args.gpus:
            fail("entry %d's mesh %r does not use %d GPUs" % (i, mesh, args.gpus))
        check_breakdown(p, "entry %d" % i)
    for a, b in zip(plans, plans[1:]):
        if (a["fits"], b["fits"]) == (False, True):
            fail("a plan that does not fit ranks above one that does")
        if a["fits"] and b["fits"] and a["step_time_s"] > b["step_time_s"]:
            fail("plans not ranked by step time")
    if best != plans[0]["plan"]:
        fail("-o did not write the best plan")
    e = evaluated["plans"][0]
    if not close(e["step_time_s"], plans[0]["step_time_s"]):
        fail("the best plan evaluates to %r s, the search said %r" % (e["step_time_s"], plans[0]["step_time_s"]))
    print("OK")


if __name__ == "__main__":
    main()
