#!/usr/bin/env python3
"""CPU training step of a Hugging Face model: the compiled program against
PyTorch eager training the same transformers model.

Model: a transformers family (default llama: RMSNorm, SwiGLU, rotary,
grouped-query attention) built by test/hf/hf_models.py with hidden 256, 4
layers, 4 heads, vocab 512, T 128, B 8; AdamW (lr 1e-3), the labels the
input tokens (plan data.targets_from "tokens"). Exported as a user does,
compiled with `autopar compile` (on PATH), trained --steps steps; PyTorch
trains the model it was exported from for as many steps, with 1 and 2
threads. Prints each peer's median step time, in --rounds interleaved rounds
(a shared machine drifts), the best of each, and the ratio
PyTorch / compiled (> 1: the compiled program is faster).

Usage (in the venv of scripts/install-hf.sh):
  .venv-hf/bin/python bench/hf_step/run.py [--family llama] [--steps 20] [--rounds 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "hf"))
import hf_models  # noqa: E402
import torch  # noqa: E402

CONFIG = ["--hidden", "256", "--layers", "4", "--vocab", "512", "--seq", "128",
          "--batch", "8"]
PLAN = {"optimizer": {"type": "adamw", "lr": 1e-3},
        "data": {"targets_from": "tokens"}}


def compiled_median(work, steps):
    log = os.path.join(work, "log.jsonl")
    subprocess.run([os.path.join(work, "prog", "train"), "--data",
                    os.path.join(work, "tokens.bin"), "--steps", str(steps + 2),
                    "--log", log], check=True, stdout=subprocess.DEVNULL)
    with open(log) as f:
        ms = [json.loads(line)["ms"] for line in f if line.startswith("{")]
    return statistics.median(ms[2:])  # the first steps warm up


def torch_median(args, threads, data, steps):
    torch.set_num_threads(threads)
    a = hf_models.parse_args(["train", args.family, *CONFIG, "--data", data, "-o", "-"])
    model = hf_models.build_model(a)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = hf_models.torch_ref.TokenData(data)
    times = []
    for step in range(steps + 2):
        x, _ = tokens.batch(step, a.batch, a.seq)
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        hf_models.loss(model, x, x).backward()
        optimizer.step()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times[2:])


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--family", default="llama")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "model.onnx")
        hf_models.main(["export", args.family, *CONFIG, "-o", model])
        data = os.path.join(work, "tokens.bin")
        subprocess.run([sys.executable, os.path.join(ROOT, "test", "e2e", "make_tokens.py"),
                        "-o", data, "--count", "200000", "--vocab", "512", "--seed", "1"],
                       check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(work, "plan.json"), "w") as f:
            json.dump(PLAN, f)
        subprocess.run(["autopar", "compile", model, "--plan", os.path.join(work, "plan.json"),
                        "-o", os.path.join(work, "prog")], check=True,
                       stdout=subprocess.DEVNULL)
        best = {}
        for r in range(args.rounds):
            row = {"compiled": compiled_median(work, args.steps)}
            for threads in (1, 2):
                row[f"pytorch {threads}t"] = torch_median(args, threads, data, args.steps)
            print(f"round {r}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in row.items()))
            for k, v in row.items():
                best[k] = min(best.get(k, v), v)
    peer = min(v for k, v in best.items() if k.startswith("pytorch"))
    print(f"{args.family} hidden 256, 4 layers, T 128, B 8, AdamW: compiled "
          f"{best['compiled']:.1f} ms/step, PyTorch eager {peer:.1f} ms/step "
          f"(best of 1 and 2 threads)")
    print(f"hf_step: PyTorch / compiled {peer / best['compiled']:.2f}x (> 1: compiled faster)")


if __name__ == "__main__":
    main()
