#!/usr/bin/env python3
"""Trains a Hugging Face family with autopar and with PyTorch and compares.

  check_family.py FAMILY --work DIR [--plan PLAN.json] [--steps 8] [--np N]
                  [--rtol 1e-4] [model options of hf_models.py]

Exports the family's tiny model (hf_models.py export), compiles it with
`autopar compile` (on PATH) and the plan, trains the program on a token file
of the model's vocabulary (--np N: under mpirun with N ranks), trains the
PyTorch model on the same batches (hf_models.py train), and compares the
per-step losses and gradient norms (test/e2e/compare_losses.py). Prints
"FAMILY: OK: N steps, loss max rel diff X, grad_norm max rel diff Y" and
exits 0, or prints what differs and exits 1. Runs in the venv of
scripts/install-hf.sh.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(HERE, "..", "e2e")
sys.path.insert(0, HERE)
import hf_models  # noqa: E402


def run(cmd, what):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        print(f"{what} failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}")
        sys.exit(1)
    return proc.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("family", choices=sorted(hf_models.FAMILIES))
    p.add_argument("--work", required=True)
    p.add_argument("--plan")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--np", type=int, default=1)
    p.add_argument("--rtol", type=float, default=1e-4)
    args, model_args = p.parse_known_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda name: os.path.join(args.work, name)  # noqa: E731
    common = [args.family] + model_args
    vocab = hf_models.parse_args(["export"] + common + ["-o", "-"]).vocab
    hf_models.main(["export"] + common + ["-o", w("model.onnx")])
    run([sys.executable, os.path.join(E2E, "make_tokens.py"), "-o", w("tokens.bin"),
         "--count", "4000", "--vocab", str(vocab), "--seed", "3"], "make_tokens.py")
    plan = ["--plan", args.plan] if args.plan else []
    compile_out = run(["autopar", "compile", w("model.onnx")] + plan + ["-o", w("prog")],
                      "autopar compile")
    warnings = [line for line in compile_out.splitlines() if "warning" in line]
    for line in warnings:
        print(line.replace(args.work + "/", ""))
    train = [w("prog/train"), "--data", w("tokens.bin"), "--steps", str(args.steps),
             "--log", w("ours.jsonl")]
    if args.np > 1:
        train = ["timeout", "600", "mpirun", "--oversubscribe", "-np", str(args.np)] + train
    run(train, "the compiled program")
    hf_models.main(["train"] + common + plan + ["--data", w("tokens.bin"), "--steps",
                                                str(args.steps), "-o", w("ref.jsonl")])
    results = []
    for key in ("loss", "grad_norm"):
        out = run([sys.executable, os.path.join(E2E, "compare_losses.py"), w("ours.jsonl"),
                   w("ref.jsonl"), "--steps", str(args.steps), "--rtol", str(args.rtol),
                   "--key", key], f"compare_losses.py ({key})")
        results.append(out.strip().splitlines()[-1].split("max rel diff ")[-1])
    print(f"{args.family}: OK: {args.steps} steps, loss max rel diff {results[0]}, "
          f"grad_norm max rel diff {results[1]}")


if __name__ == "__main__":
    main()
