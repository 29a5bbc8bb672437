#!/usr/bin/python3
"""The planner against Llama 3 405B's pre-training (Dubey et al. 2024,
Table 4; ../shared/REFERENCE.md).

Builds Llama 3 405B from its shapes alone (bench/zero_memory/
shape_only_llama.py: 126 layers, d 16384, 128 heads, 8 KV heads, FFN 53248,
vocabulary 128256, SwiGLU, RMSNorm, rotary; no weights) at the row's
sequence length and runs `autopar plan --evaluate` on the row's own plan:
tp 8 x pp 16 x dp, micro-batches of one sequence (batch/DP of them),
bf16-mixed with fp32 gradient reduction, ZeRO-1 (autopar's pipelines take
stages 0-1; Llama 3 shards more), sequence parallelism, fused attention,
the interleaved schedule over 2 chunks per rank (126 layers over 32
stages, uneven as Llama 3's), on H100 SXM nodes of 8 (NVLink 450 GB/s per
direction, 400 Gb/s RoCE = 50 GB/s per GPU; docs/clusters/h100-sxm.json).
Prints, per row, the predicted step time, TFLOP/s per GPU (the program's
model FLOPs, report.json's, over the GPUs and the time) and MFU against
the published ones, whether the plan fits in 80 GB (the recompute it needs
where it does not), and how long the evaluation took. The row with
context parallelism (cp 16 at 128K tokens) runs mesh.cp in the all-gather
mode Llama 3 used (each rank's queries against the whole sequence's keys
and values, gathered over cp).

Usage: /usr/bin/python3 bench/planner/llama3.py [--rows 1,2] [--check]
         [--autopar PATH]
With --check, exits 1 if an evaluated row's TFLOP/s is more than 15% off.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from common import PY, ROOT, plan as run_plan

LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, VOCAB = 126, 16384, 128, 8, 53248, 128256
PEAK = 989
# GPUs, tp, cp, pp, dp, seq, batch per dp rank, TFLOP/s per GPU, MFU
ROWS = [
    (8192, 8, 1, 16, 64, 8192, 32, 430, 0.43),
    (16384, 8, 1, 16, 128, 8192, 16, 400, 0.41),
    (16384, 8, 16, 16, 8, 131072, 16, 380, 0.38),
]


def h100_cluster(gpus):
    with open(os.path.join(ROOT, "docs", "clusters", "h100-sxm.json")) as f:
        cluster = json.load(f)
    cluster["nodes"] = gpus // cluster["gpus_per_node"]
    return cluster


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="1,2,3")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--autopar", default=os.path.join(ROOT, "build", "bin", "autopar"))
    args = ap.parse_args()
    print("planner vs Llama 3 405B pre-training (Dubey et al. 2024, Table 4; H100 80 GB)")
    print("%-30s %6s %8s %8s %8s %6s %6s %6s %-18s %6s" % (
        "plan", "GPUs", "pred s", "pred TF", "paper TF", "ratio", "MFU", "paper", "fits",
        "eval s"))
    worst = 0.0
    models = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in [int(x) for x in args.rows.split(",")]:
            gpus, tp, cp, pp, dp, seq, per_dp, tflops, mfu = ROWS[r - 1]
            name = "tp%d cp%d pp%d dp%d s%dK" % (tp, cp, pp, dp, seq // 1024)
            if seq not in models:
                path = os.path.join(tmp, "llama%d.onnx" % seq)
                subprocess.run([PY, os.path.join(ROOT, "bench", "zero_memory",
                                                 "shape_only_llama.py"),
                                "-o", path, "--layers", str(LAYERS), "--hidden", str(HIDDEN),
                                "--heads", str(HEADS), "--kv-heads", str(KV_HEADS),
                                "--ffn", str(FFN), "--vocab", str(VOCAB), "--seq", str(seq),
                                "--batch", "0"], check=True, capture_output=True)
                os.remove(path + ".data")
                models[seq] = path
            base = {"mesh": {"dp": dp, "tp": tp, "pp": pp, "cp": cp},
                    "batch": {"micro_batches": per_dp}, "zero": {"stage": 1},
                    "precision": "bf16-mixed", "grad_dtype": "fp32", "attention": "fused",
                    "tensor_parallel": {"sequence_parallel": True},
                    "pipeline": {"schedule": "interleaved", "chunks": 2}}
            start = time.time()
            entry, needed = None, None
            for recompute in ("none", "selective", "full"):
                out, error = run_plan(args.autopar, tmp, models[seq], h100_cluster(gpus),
                                      per_dp * dp, dict(base, recompute=recompute),
                                      # The global batch's scores, before the
                                      # plan splits them: 2^46 bytes.
                                      extra=["--max-tensor-bytes", str(1 << 50)])
                if error:
                    print("%-30s FAIL: %s" % (name, error))
                    worst = float("inf")
                    break
                entry, needed = out["plans"][0], recompute
                if entry["fits"]:
                    break
            took = time.time() - start
            if entry is None:
                continue
            pred = entry["mfu"] * PEAK
            ratio = pred / tflops
            worst = max(worst, abs(ratio - 1))
            fits = ("yes, recompute " + needed) if entry["fits"] else "no (%.0f GB)" % (
                entry["memory_bytes_per_gpu"] / 1e9)
            print("%-30s %6d %8.2f %8.1f %8.1f %6.2f %5.0f%% %5.0f%% %-18s %6.1f" % (
                name, gpus, entry["step_time_s"], pred, tflops, ratio, 100 * entry["mfu"],
                100 * mfu, fits, took))
    print("largest deviation: %.0f%% (target: 15%%)" % (100 * worst))
    return 1 if args.check and worst > 0.15 else 0


if __name__ == "__main__":
    sys.exit(main())
