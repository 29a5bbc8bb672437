#!/usr/bin/env python3
"""Compiles the CUDA programs autopar emits, with every warning an error.

For every ONNX fixture and every plan kind the CUDA target takes, runs
`autopar compile --target cuda --no-build` and compiles the generated
model.cu with nvcc (-Werror all-warnings, host -Wall -Werror) for one
architecture. Prints one line per program and a summary; exits 1 on any failure.
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

import onnx

# Plan kinds of the CUDA target: AdamW defaults; SGD with Nesterov
# momentum, clipping, a warmup + cosine schedule, no_decay; AdamW with frozen
# tensors; data parallelism with each ZeRO stage (the collectives through
# the NCCL communicator); micro-batches (fixtures with a dynamic batch, fixed
# to 4 samples).
PLANS = {
    "adamw": {},
    "sgd": {"optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9,
                          "nesterov": True, "weight_decay": 0.01,
                          "max_grad_norm": 1.0, "no_decay": ["*.bias"]},
            "lr_schedule": {"warmup_steps": 2, "decay": "cosine"}},
    "frozen": {"optimizer": {"type": "adamw", "weight_decay": 0.1},
               "frozen": ["*ln*"]},
    "dp2": {"mesh": {"dp": 2}},
    "dp2-zero1": {"mesh": {"dp": 2}, "zero": {"stage": 1}},
    "dp2-zero2": {"mesh": {"dp": 2}, "zero": {"stage": 2},
                  "comm": {"bucket_mb": 0.01}},
    "dp2-zero3": {"mesh": {"dp": 2}, "zero": {"stage": 3}},
    # bf16-mixed: bf16 fused kernels, constants and gradients, bf16
    # collectives, f32 masters.
    "bf16-dp2-zero2": {"precision": "bf16-mixed", "mesh": {"dp": 2},
                       "zero": {"stage": 2}},
    # fp16-mixed: __half kernels, the loss-scale argument.
    "fp16": {"precision": "fp16-mixed"},
    # ZeRO-Offload: the optimizer on the host.
    "dp2-zero2-offload": {"mesh": {"dp": 2}, "zero": {"stage": 2, "offload": "cpu"}},
}
DYNAMIC_PLANS = {"micro": {"batch": {"micro_batches": 2}},
                 # Tensor parallelism on a 2-D mesh: tp-split parameters,
                 # vocab-parallel embedding and loss, sequence parallelism,
                 # bf16 collectives over tp, ZeRO-3 over dp of the tp
                 # blocks, full recompute (collectives in backward).
                 "bf16-dp2-tp2-zero3": {"precision": "bf16-mixed",
                                        "mesh": {"dp": 2, "tp": 2},
                                        "zero": {"stage": 3},
                                        "recompute": "full"},
                 # Pipeline parallelism in 3-D: the zero-bubble schedule's
                 # input- and weight-gradient phases, tp collectives inside
                 # the stages, ZeRO-1 over dp, bf16 (NCCL send/recv between
                 # the stages: the runtime's, compiled with the program).
                 "bf16-dp2-tp2-pp2-zb": {"precision": "bf16-mixed",
                                         "mesh": {"dp": 2, "tp": 2, "pp": 2},
                                         "zero": {"stage": 1},
                                         "batch": {"micro_batches": 2},
                                         "pipeline": {"schedule": "zb-h1"}}}
# Fine-tuning, on the fixtures that keep the modules' names (no constant
# folding): LoRA with its dropout over an NF4 base with double
# quantization (the dequantize kernel, the dropout masks), and bf16-mixed
# LoRA over an INT8 base under tp.
NOFOLD_PLANS = {"qlora-nf4-dropout": {
                    "lora": {"targets": ["*.c_attn.weight"], "r": 4,
                             "alpha": 8, "dropout": 0.1},
                    "quantize": {"weights": ["h.*.mlp.c_*.weight"],
                                 "type": "nf4", "double_quant": True}},
                "bf16-lora-int8-tp2": {
                    "precision": "bf16-mixed", "mesh": {"tp": 2},
                    "lora": {"targets": ["*.c_attn.weight",
                                         "*.c_proj.weight"], "r": 4},
                    "quantize": {"weights": ["h.*.mlp.c_fc.weight"],
                                 "type": "int8"}}}
# None: a forward-only program instead of a training one.
PLANS["forward-only"] = None
def input_shapes(model_path):
    """--input-shape flags fixing the dynamic dims of a fixture (4 x 16)."""
    model = onnx.load(model_path, load_external_data=False)
    flags = []
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") for d in dims):
            fixed = [d.dim_value if d.HasField("dim_value") else (4 if i == 0 else 16)
                     for i, d in enumerate(dims)]
            flags += ["--input-shape",
                      value.name + "=" + ",".join(map(str, fixed))]
    return flags


def run(cmd, cwd=None):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def compile_one(args, fixture, plan_name, plan):
    name = os.path.splitext(os.path.basename(fixture))[0] + "." + plan_name
    work = os.path.join(args.work, name)
    if plan is None:
        # The forward-only program of the fixture (OUTDIR/run).
        flags = ["--forward-only"]
    else:
        flags = ["--plan", work + ".json"]
        with open(work + ".json", "w") as f:
            json.dump(plan, f)
    rc, out = run([args.autopar, "compile", fixture] + flags +
                  ["--target", "cuda", "--no-build", "-o", work] +
                  input_shapes(fixture))
    if rc != 0:
        return name, "autopar compile failed:\n" + out
    rc, out = run([args.nvcc, "-std=c++17", "-O1", "-I.", "-arch=" + args.arch,
                   "--expt-relaxed-constexpr", "-Werror", "all-warnings",
                   "-Xcompiler=-Wall,-Werror", "-c", "model.cu", "-o",
                   "model.o"], cwd=work)
    if rc != 0:
        return name, "nvcc failed:\n" + out
    return name, None


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--autopar", required=True)
    ap.add_argument("--nvcc", default="nvcc")
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--arch", default="sm_80")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    fixtures = sorted(os.path.join(args.fixtures, f)
                      for f in os.listdir(args.fixtures) if f.endswith(".onnx"))
    if not fixtures:
        print("no fixtures in " + args.fixtures)
        return 1
    failed = 0
    jobs = [(f, n, p) for f in fixtures for n, p in PLANS.items()]
    jobs += [(f, n, p) for f in fixtures if input_shapes(f)
             for n, p in DYNAMIC_PLANS.items()]
    jobs += [(f, n, p) for f in fixtures if f.endswith("_nofold.onnx")
             for n, p in NOFOLD_PLANS.items()]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for name, error in pool.map(lambda j: compile_one(args, *j), jobs):
            if error:
                failed += 1
                print("FAIL " + name + ": " + error)
            else:
                print("OK " + name)
    print("cuda programs: %d compiled, %d failed" % (len(jobs), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
