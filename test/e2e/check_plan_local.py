#!/usr/bin/python3
"""Checks `autopar plan --cluster local --json` entries (test/e2e/
plan-local.test): one plan each, its breakdown summing to the step (no
pipeline: compute + exposed communication + optimizer), tokens/s =
batch x sequence / step, communication exposed exactly where the plan has
collectives (dp > 1 or tp > 1), and the memory of `autopar compile
--target cpu --report-only`'s report.json for the same plan.

Usage: check_plan_local.py OUT.json REPORT.json --batch B --seq T [--comm]
Prints "OK" or the first failed check (exit 1).
"""
import argparse
import json
import math
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("report")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--comm", action="store_true", help="the plan has collectives")
    a = p.parse_args()
    out = json.load(open(a.out))
    report = json.load(open(a.report))

    def fail(msg):
        print(f"FAIL: {msg}")
        sys.exit(1)

    if len(out["plans"]) != 1:
        fail(f"{len(out['plans'])} plans, expected 1")
    e = out["plans"][0]
    b = e["breakdown"]
    if not e["step_time_s"] > 0 or not b["compute_s"] > 0:
        fail(f"step {e['step_time_s']}, compute {b['compute_s']}")
    total = b["compute_s"] + b["exposed_comm_s"] + b["bubble_s"] + b["optimizer_s"]
    if not math.isclose(total, e["step_time_s"], rel_tol=1e-9):
        fail(f"breakdown sums to {total}, step {e['step_time_s']}")
    if not math.isclose(e["tokens_per_s"], a.batch * a.seq / e["step_time_s"], rel_tol=1e-9):
        fail(f"tokens/s {e['tokens_per_s']}")
    if a.comm != (b["exposed_comm_s"] > 0):
        fail(f"exposed communication {b['exposed_comm_s']} (collectives: {a.comm})")
    if e["memory_bytes_per_gpu"] != report["bytes"]["peak"]:
        fail(f"memory {e['memory_bytes_per_gpu']}, report.json {report['bytes']['peak']}")
    print("OK")


if __name__ == "__main__":
    main()
