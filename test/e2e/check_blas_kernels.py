#!/usr/bin/python3
"""Check the line `train` prints at start about its BLAS kernels, and the
warning when OPENBLAS_CORETYPE forces weaker kernels than the CPU's.

  check_blas_kernels.py OUT.txt ERR.txt --forced CORE|none [--threads N]

OUT.txt and ERR.txt are one run's stdout and stderr; --forced is the
OPENBLAS_CORETYPE the run had (none: unset). Expected, from this machine's
/proc/cpuinfo flags: stdout starts with `train: cpu (OpenBLAS <version>,
<CORE> kernels, <N> OpenMP threads), 1 rank` (CORE the forced one when
set); stderr has one `train: warning: OPENBLAS_CORETYPE=<CORE> makes
OpenBLAS multiply with its <CORE> kernels, but this CPU runs its <best>
kernels` line exactly when CORE is below what the CPU supports (SkylakeX
with AVX-512 F/BW/VL, Haswell with AVX2 + FMA), and nothing else. Prints
OK, or FAIL and the reason (exit 1).
"""
import argparse
import re
import sys

LEVEL3 = {"skylakex", "cooperlake", "sapphirerapids"}
LEVEL2 = {"haswell", "zen"}


def level(core):
    c = core.lower()
    return 3 if c in LEVEL3 else 2 if c in LEVEL2 else 1 if c == "sandybridge" else 0


def cpu_best():
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if {"avx512f", "avx512bw", "avx512vl"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("err")
    p.add_argument("--forced", required=True)
    p.add_argument("--threads", type=int)
    a = p.parse_args()
    out = open(a.out).read().splitlines()
    err = open(a.err).read().splitlines()
    m = re.match(r"train: cpu \(OpenBLAS [0-9.]+, (\S+) kernels, ([0-9]+) OpenMP threads\), "
                 r"1 rank$", out[0] if out else "")
    if not m:
        print(f"FAIL: first line of stdout: {out[:1]!r}")
        return 1
    core, threads = m.group(1), int(m.group(2))
    if a.forced != "none" and core.lower() != a.forced.lower():
        print(f"FAIL: kernels {core}, OPENBLAS_CORETYPE was {a.forced}")
        return 1
    if a.threads is not None and threads != a.threads:
        print(f"FAIL: {threads} threads, expected {a.threads}")
        return 1
    best = cpu_best()
    warn = a.forced != "none" and best is not None and level(a.forced) < level(best)
    warnings = [l for l in err if l.startswith("train: warning: ")]
    if len(err) != len(warnings):
        print(f"FAIL: stderr has other lines: {err!r}")
        return 1
    if not warn:
        if warnings:
            print(f"FAIL: unexpected warning {warnings!r} (kernels {core}, CPU {best})")
            return 1
        print("OK")
        return 0
    want = (f"train: warning: OPENBLAS_CORETYPE={a.forced} makes OpenBLAS multiply with its "
            f"{core} kernels, but this CPU runs its {best} kernels")
    if len(warnings) != 1 or not warnings[0].startswith(want):
        print(f"FAIL: expected one warning starting {want!r}, got {warnings!r}")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
