#!/usr/bin/python3
"""Peak resident memory of two runs: NVMe offload against CPU offload.

  max_rss.py REPORT.json [--key parallel.host_bytes] -- CPU-OFFLOAD COMMAND...
      -- NVME COMMAND...

Runs each command (a training program with zero.offload "cpu", then the
same plan with "nvme") and reads its peak RSS (getrusage of the child and
its descendants: the largest process, a rank under mpirun). The value at
--key of REPORT.json (dotted; default the CPU-offload program's
parallel.host_bytes, the optimizer state held in host memory) is what the
second run moves to the swap file (parallel.nvme_param_bytes: the ZeRO-3
parameter shards of zero.offload_params "nvme", against a run with the
state alone on NVMe). Passes when the NVMe run's peak is below the other's
by at least 75% of that (the rest: the swap buffers and allocator slack).
Prints one line "OK: ..." or "FAIL: ..." (exit 1).
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
    key = "parallel.host_bytes"
    if len(args) > 2 and args[1] == "--key":
        key = args[2]
        del args[1:3]
    if len(args) < 4 or args[1] != "--" or "--" not in args[2:]:
        print(__doc__, file=sys.stderr)
        return 2
    state = json.load(open(args[0]))
    for part in key.split("."):
        state = state[part]
    split = args.index("--", 2)
    cpu_cmd, nvme_cmd = args[2:split], args[split + 1:]
    # The NVMe run first: RUSAGE_CHILDREN keeps the largest peak so far.
    nvme, _ = peak_rss(nvme_cmd)
    cpu, grew = peak_rss(cpu_cmd)
    if not grew:
        print(f"FAIL: the first run's peak RSS is not above the NVMe run's "
              f"{nvme >> 20} MB")
        return 1
    saved = cpu - nvme
    mb = 1 << 20
    line = (f"peak RSS {nvme // mb} MB with {key} on NVMe, {cpu // mb} MB without: "
            f"{100 * saved // max(state, 1)}% of its {state // mb} MB saved")
    if state <= 0 or saved < 0.75 * state:
        print("FAIL: " + line)
        return 1
    print("OK: " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
