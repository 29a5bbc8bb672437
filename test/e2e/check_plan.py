#!/usr/bin/env python3
"""Checks `autopar plan --evaluate --json` against report.json.

Usage: check_plan.py PLAN-OUT.json REPORT.json CLUSTER.json --batch B --seq T

PLAN-OUT.json is the planner's output, REPORT.json the report of
`autopar compile --report-only --target cuda` for the same plan. Requires
exactly one entry whose breakdown sums to its step time, whose tokens/s and
MFU follow from the step time (B x T tokens, the report's FLOPs over the
step and the mesh's GPUs at the cluster's peak), whose memory and
communication are the report's, whose plan is the report's plan.json, and
whose every part is positive where the plan has it. Prints "OK" or the
first mismatch and exits 1.
"""
import argparse
import json
import os
import sys


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check_breakdown(entry, what="the entry"):
    """The breakdown of a --json entry sums to its step time."""
    b = entry["breakdown"]
    parts = b["compute_s"] + b["exposed_comm_s"] + b["bubble_s"] + b["optimizer_s"]
    if not close(parts, entry["step_time_s"]):
        fail("%s's breakdown sums to %r, its step is %r" % (what, parts, entry["step_time_s"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("report")
    ap.add_argument("cluster")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    args = ap.parse_args()
    out = json.load(open(args.out))
    report = json.load(open(args.report))
    cluster = json.load(open(args.cluster))
    plan_json = json.load(open(os.path.join(os.path.dirname(args.report), "plan.json")))

    plans = out["plans"]
    if len(plans) != 1:
        fail("%d entries, expected one" % len(plans))
    p = plans[0]
    b = p["breakdown"]
    check_breakdown(p)
    if not close(p["tokens_per_s"], args.batch * args.seq / p["step_time_s"]):
        fail("tokens_per_s %r is not B x T / step time" % p["tokens_per_s"])
    ranks = report["parallel"]["ranks"]
    # Of the peak of the plan's precision (fp32: the float32 rate).
    peak = cluster["gpu"]["fp32_tflops" if plan_json["precision"] == "fp32"
                          else "peak_tflops"] * 1e12
    mfu = report["flops_per_step"] / (p["step_time_s"] * ranks * peak)
    if not close(p["mfu"], mfu):
        fail("mfu %r, report's FLOPs give %r" % (p["mfu"], mfu))
    if p["memory_bytes_per_gpu"] != report["bytes"]["peak"]:
        fail("memory %r, report.json's peak %r" % (p["memory_bytes_per_gpu"], report["bytes"]["peak"]))
    if p["fits"] != (report["bytes"]["peak"] <= cluster["gpu"]["memory_gb"] * 1e9):
        fail("fits is %r" % p["fits"])
    if p["comm_bytes_per_step"] != report["parallel"]["comm_bytes_per_step"]:
        fail("comm_bytes_per_step differs from report.json's")
    if p["plan"] != plan_json:
        fail("the plan differs from report's plan.json")
    for key in ("compute_s", "optimizer_s"):
        if not b[key] > 0:
            fail("%s is %r" % (key, b[key]))
    if ranks > 1 and not b["exposed_comm_s"] > 0:
        fail("no communication time on %d ranks" % ranks)
    pipelined = report["parallel"].get("pipeline")
    if pipelined and not (b["bubble_s"] > 0 and 0 < p["bubble_fraction"] < 1):
        fail("a pipeline without a bubble")
    if not pipelined and (b["bubble_s"] != 0 or p["bubble_fraction"] != 0):
        fail("a bubble without a pipeline")
    print("OK")


if __name__ == "__main__":
    main()
