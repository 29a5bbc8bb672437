#!/usr/bin/python3
"""Check the line `train` prints at start about its matrix products, and the
warning when ONEDNN_MAX_CPU_ISA caps oneDNN's kernels below the CPU's.

  check_gemm_kernels.py OUT.txt ERR.txt --cap ISA|none [--setting NAME=ISA]
                        [--threads N]

OUT.txt and ERR.txt are one run's stdout and stderr; --cap is the
instruction set the run capped oneDNN at (ONEDNN_MAX_CPU_ISA or
DNNL_MAX_CPU_ISA; none: unset), --setting how it was set (what the warning
names). Expected, from this machine's /proc/cpuinfo flags: stdout starts
with `train: cpu (oneDNN <version>, <ISA> kernels, <N> OpenMP threads),
1 rank`, ISA of the vector level of the CPU (AVX-512: avx512_core*, with
AVX-512 F/BW/VL/DQ; AVX2: avx2*, with AVX2 + FMA), or of the cap where that
is lower; stderr has one `train: warning: <setting> makes oneDNN multiply
with its <ISA> kernels, but this CPU runs <AVX-512|AVX2>` line exactly when
the kernels are below the CPU's level, and nothing else. Prints OK, or FAIL
and the reason (exit 1).
"""
import argparse
import re
import sys


def level(isa):
    """3 AVX-512, 2 AVX2, 1 older, of a oneDNN ISA name."""
    isa = isa.lower()
    return 3 if isa.startswith("avx512_core") else 2 if isa.startswith("avx2") else 1


def cpu_level():
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return 3
    if {"avx2", "fma"} <= flags:
        return 2
    return 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("err")
    p.add_argument("--cap", required=True)
    p.add_argument("--setting")
    p.add_argument("--threads", type=int)
    a = p.parse_args()
    out = open(a.out).read().splitlines()
    err = open(a.err).read().splitlines()
    m = re.match(r"train: cpu \(oneDNN [0-9.]+, (\S+) kernels, ([0-9]+) OpenMP threads\), "
                 r"1 rank$", out[0] if out else "")
    if not m:
        print(f"FAIL: first line of stdout: {out[:1]!r}")
        return 1
    isa, threads = m.group(1), int(m.group(2))
    best = cpu_level()
    want = best if a.cap == "none" else min(best, level(a.cap))
    if level(isa) != want:
        print(f"FAIL: kernels {isa} (level {level(isa)}), expected level {want} "
              f"(CPU {best}, cap {a.cap})")
        return 1
    if a.threads is not None and threads != a.threads:
        print(f"FAIL: {threads} threads, expected {a.threads}")
        return 1
    warnings = [l for l in err if l.startswith("train: warning: ")]
    if len(err) != len(warnings):
        print(f"FAIL: stderr has other lines: {err!r}")
        return 1
    if want >= best:
        if warnings:
            print(f"FAIL: unexpected warning {warnings!r} (kernels {isa}, CPU level {best})")
            return 1
        print("OK")
        return 0
    expected = (f"train: warning: {a.setting} makes oneDNN multiply with its {isa} kernels, "
                f"but this CPU runs {'AVX-512' if best == 3 else 'AVX2'}: ")
    if len(warnings) != 1 or not warnings[0].startswith(expected):
        print(f"FAIL: expected one warning starting {expected!r}, got {warnings!r}")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
