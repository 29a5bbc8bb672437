#!/usr/bin/python3
"""Peak resident memory of two runs: NVMe offload against CPU offload.

  max_rss.py REPORT.json -- CPU-OFFLOAD COMMAND... -- NVME COMMAND...

Runs each command (a training program with zero.offload "cpu", then the
same plan with "nvme") and reads its peak RSS (getrusage of the child).
REPORT.json is the CPU-offload program's report: its host_bytes are the
optimizer state held in host memory. Passes when the NVMe run's peak is
below the CPU run's by at least 75% of that state (the rest: the swap
buffers and allocator slack). Prints one line "OK: ..." or "FAIL: ..."
(exit 1).
"""
import json
import resource
import subprocess
import sys


def peak_rss(cmd):
    """The peak RSS in bytes of `cmd` (run alone, to completion)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        print(f"FAIL: {' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}")
        sys.exit(1)
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # RUSAGE_CHILDREN's maximum is over every child so far: a later run's
    # peak shows only where it exceeds the earlier ones' (`grew`).
    return after * 1024, after > before


def main():
    args = sys.argv[1:]
    if len(args) < 4 or args[1] != "--" or "--" not in args[2:]:
        print(__doc__, file=sys.stderr)
        return 2
    report = json.load(open(args[0]))
    state = report["parallel"]["host_bytes"]
    split = args.index("--", 2)
    cpu_cmd, nvme_cmd = args[2:split], args[split + 1:]
    # The NVMe run first: RUSAGE_CHILDREN keeps the largest peak so far.
    nvme, _ = peak_rss(nvme_cmd)
    cpu, grew = peak_rss(cpu_cmd)
    if not grew:
        print(f"FAIL: the CPU-offload run's peak RSS is not above the NVMe run's "
              f"{nvme >> 20} MB")
        return 1
    saved = cpu - nvme
    mb = 1 << 20
    line = (f"peak RSS {nvme // mb} MB with the state on NVMe, {cpu // mb} MB in host "
            f"memory: {100 * saved // max(state, 1)}% of the state's {state // mb} MB saved")
    if state <= 0 or saved < 0.75 * state:
        print("FAIL: " + line)
        return 1
    print("OK: " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
