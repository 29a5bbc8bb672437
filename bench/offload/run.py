#!/usr/bin/python3
"""ZeRO-Infinity's NVMe offload against the disk it runs on and against
ZeRO-Offload (the state in host memory).

Usage:
  /usr/bin/python3 bench/offload/run.py [--nvme-path DIR] [--layers 4]
      [--hidden 512] [--heads 8] [--vocab 8192] [--seq 128] [--batch 8]
      [--steps 6] [--chunk-mb 4] [--precision fp32] [--workdir DIR]
      [--autopar PATH]

Exports a GPT (test/models/export.py) and compiles one plan twice:
{"zero": {"stage": 1, "offload": O}} with O "cpu" (the peer, measured in
the same run) and "nvme" (the state in a swap file under --nvme-path,
default the work folder). Measures the folder's disk first: a file of
twice the state written and read back with O_DIRECT (where the file system
takes it) in chunks of --chunk-mb, the sequential bandwidth each way.
Then trains each program --steps steps and prints, from the log's steps
after the first: the median step time of each, their ratio, the swap
file's bytes read and written per step (the log's nvme_bytes), the
bandwidth the NVMe run's step achieves over those bytes, and that
bandwidth over the disk's measured one. Checked (exit 1 otherwise): both
runs train the same losses bit for bit, and the bytes per step are the
same every step, read and written alike.
"""
import argparse
import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"


def disk_bandwidth(folder, total, chunk):
    """(write, read) bytes per second of a file of `total` bytes in `folder`,
    in `chunk`-byte direct transfers where the file system allows them, and
    whether it did."""
    path = os.path.join(folder, ".autopar-bench-disk")
    flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC
    direct = True
    try:
        fd = os.open(path, flags | os.O_DIRECT, 0o600)
    except OSError:
        fd = os.open(path, flags, 0o600)
        direct = False
    buf = mmap.mmap(-1, chunk)  # page-aligned, as O_DIRECT needs
    buf.write(os.urandom(chunk))
    try:
        n = max(1, total // chunk)
        start = time.perf_counter()
        for k in range(n):
            os.pwritev(fd, [buf], k * chunk)
        os.fsync(fd)
        write = n * chunk / (time.perf_counter() - start)
        start = time.perf_counter()
        for k in range(n):
            os.preadv(fd, [buf], k * chunk)
        read = n * chunk / (time.perf_counter() - start)
    finally:
        os.close(fd)
        os.unlink(path)
    return write, read, direct


def train(program, data, steps, log):
    subprocess.run([program, "--data", data, "--steps", str(steps), "--log", log],
                   check=True, stdout=subprocess.DEVNULL)
    with open(log) as f:
        return [json.loads(line) for line in f if '"step"' in line]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nvme-path")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--chunk-mb", type=float, default=4)
    p.add_argument("--precision", default="fp32")
    p.add_argument("--workdir")
    p.add_argument("--autopar", default="autopar")
    a = p.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix="autopar-bench-offload-")
    os.makedirs(work, exist_ok=True)
    swap = a.nvme_path or os.path.join(work, "swap")
    os.makedirs(swap, exist_ok=True)
    model = os.path.join(work, "gpt.onnx")
    subprocess.run([PY, os.path.join(ROOT, "test", "models", "export.py"), "--model", "gpt",
                    "--vocab", str(a.vocab), "--d-model", str(a.hidden), "--heads",
                    str(a.heads), "--layers", str(a.layers), "--seq", str(a.seq), "--batch",
                    str(a.batch), "--opset", "17", "--no-constant-folding", "-o", model],
                   check=True, stdout=subprocess.DEVNULL)
    data = os.path.join(work, "tokens.bin")
    subprocess.run([PY, os.path.join(ROOT, "test", "e2e", "make_tokens.py"), "-o", data,
                    "--count", str(a.batch * a.seq * (a.steps + 2) + 1), "--vocab",
                    str(a.vocab), "--seed", "1"], check=True, stdout=subprocess.DEVNULL)
    logs = {}
    state = 0
    for off in ("cpu", "nvme"):
        zero = {"stage": 1, "offload": off}
        if off == "nvme":
            zero.update(nvme_path=os.path.abspath(swap), nvme_chunk_mb=a.chunk_mb)
        plan = os.path.join(work, off + ".json")
        with open(plan, "w") as f:
            json.dump({"zero": zero, "precision": a.precision}, f)
        out = os.path.join(work, off)
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([a.autopar, "compile", model, "--plan", plan, "-o", out], check=True,
                       stdout=subprocess.DEVNULL)
        if off == "cpu":
            with open(os.path.join(out, "report.json")) as f:
                state = json.load(f)["parallel"]["host_bytes"]
            write_bw, read_bw, direct = disk_bandwidth(swap, 2 * state,
                                                       int(a.chunk_mb * (1 << 20)))
        logs[off] = train(os.path.join(out, "train"), data, a.steps,
                          os.path.join(work, off + ".jsonl"))
    cpu, nvme = logs["cpu"], logs["nvme"]
    if [r["loss"] for r in cpu] != [r["loss"] for r in nvme]:
        print("FAIL: the NVMe run's losses are not the CPU-offload run's")
        return 1
    moved = [r["nvme_bytes"] for r in nvme]
    if any(m != moved[0] or m["read"] != m["write"] for m in moved):
        print(f"FAIL: the swap file's bytes differ between steps or ways: {moved}")
        return 1
    ms_cpu = statistics.median(r["ms"] for r in cpu[1:])
    ms_nvme = statistics.median(r["ms"] for r in nvme[1:])
    per_step = moved[0]["read"] + moved[0]["write"]
    achieved = per_step / (ms_nvme / 1e3)
    disk = 2 / (1 / write_bw + 1 / read_bw)  # the mean rate of a read and a write
    mb = 1e6
    print(f"model: {a.layers} layers, hidden {a.hidden}, vocab {a.vocab}; optimizer state "
          f"{state / mb:.1f} MB ({a.precision}, AdamW), swap folder {swap}")
    print(f"disk: write {write_bw / mb:.0f} MB/s, read {read_bw / mb:.0f} MB/s "
          f"({'O_DIRECT ' if direct else 'page-cached '}chunks of {a.chunk_mb:g} MiB)")
    print(f"step: ZeRO-Offload (cpu) {ms_cpu:.1f} ms, ZeRO-Infinity (nvme) {ms_nvme:.1f} ms: "
          f"ratio nvme / cpu {ms_nvme / ms_cpu:.2f}")
    print(f"swap per step: read {moved[0]['read'] / mb:.1f} MB, write "
          f"{moved[0]['write'] / mb:.1f} MB; achieved {achieved / mb:.0f} MB/s over the "
          f"step = {achieved / disk:.2f} of the disk's {disk / mb:.0f} MB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
