#!/usr/bin/python3
"""Checks the rank_threads_driver's lines (test/e2e/rank-threads.test)
against what runtime/cpu's setRankThreads promises for R ranks on this
machine's C cores: without the user's OMP_NUM_THREADS, max(1, C / R)
threads; OMP_WAIT_POLICY=passive where R x threads > C (unless the user set
it); one process (R = 1): its threads bound (OMP_PROC_BIND=true, unless the
user set it), nothing else set.

Usage: check_rank_threads.py OUT --ranks R [--user-threads T] [--user-wait W]
         [--user-bind B]
Prints "OK" or the first failed check (exit 1).
"""
import argparse
import json
import os
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--user-threads", default="")
    p.add_argument("--user-wait", default="")
    p.add_argument("--user-bind", default="")
    a = p.parse_args()
    cores = len(os.sched_getaffinity(0))
    lines = [json.loads(line) for line in open(a.out) if line.startswith("{")]
    if len(lines) != a.ranks:
        print(f"FAIL: {len(lines)} lines for {a.ranks} ranks")
        sys.exit(1)
    if a.ranks == 1:
        threads = a.user_threads
        wait = a.user_wait
    else:
        threads = a.user_threads or str(max(1, cores // a.ranks))
        wait = a.user_wait or ("passive" if a.ranks * int(threads) > cores else "")
    bind = a.user_bind or ("true" if a.ranks == 1 else "")
    for line in lines:
        want = {"omp_num_threads": threads, "omp_wait_policy": wait,
                "omp_proc_bind": bind}
        got = {k: line[k] for k in want}
        if got != want:
            print(f"FAIL: {got}, expected {want} ({a.ranks} ranks, {cores} cores)")
            sys.exit(1)
        if line["bound"] != (bind not in ("", "false")):
            print(f"FAIL: OpenMP's binding is {line['bound']} with OMP_PROC_BIND={bind!r}")
            sys.exit(1)
        if threads and line["max_threads"] != int(threads):
            print(f"FAIL: OpenMP runs {line['max_threads']} threads, expected {threads}")
            sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
