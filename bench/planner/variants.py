#!/usr/bin/python3
"""The planner's time model on two exports of one GPT, with and without
sequence parallelism.

Megatron-LM 2021's 7.5B row (tp 4 x dp 32 on 16 A100 nodes of 8, global
batch 512, micro-batch 1, full recompute, bf16-mixed) evaluated by
`autopar plan --evaluate` at ZeRO stages 0 and 1, sequence parallelism off
and on, on two shape-only graphs of the same GPT
(bench/zero_memory/shape_only_gpt.py): the default (a bool causal mask in
a Where, learned positions added whole) and the variant other exporters
write (an additive 0 / -1e9 mask table, positions gathered by a constant
index). Prints each plan's predicted step and exposed communication.

With --check, exits 1 unless (a) sequence parallelism is predicted no
slower than none (it moves the same bytes: a reduce-scatter and an
all-gather for each all-reduce, and Megatron-LM measures it no slower),
and (b) the two graphs' predictions agree within 2%.

Usage: /usr/bin/python3 bench/planner/variants.py [--check] [--layers L]
         [--hidden H] [--heads A] [--autopar PATH]
"""
import argparse
import os
import subprocess
import sys
import tempfile

from common import PY, ROOT, SEQ, VOCAB, a100_cluster, plan as run_plan


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--autopar", default=os.path.join(ROOT, "build", "bin", "autopar"))
    args = ap.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        models = {}
        for name, flags in (("default", []),
                            ("variant", ["--additive-mask", "--gathered-positions"])):
            path = os.path.join(tmp, name + ".onnx")
            subprocess.run([PY, os.path.join(ROOT, "bench", "zero_memory", "shape_only_gpt.py"),
                            "-o", path, "--layers", str(args.layers), "--hidden",
                            str(args.hidden), "--heads", str(args.heads), "--vocab",
                            str(VOCAB), "--seq", str(SEQ), "--batch", "0"] + flags,
                           check=True, capture_output=True)
            os.remove(path + ".data")
            models[name] = path
        print("7.5B row of Megatron-LM 2021, tp 4 x dp 32, 128 A100s, B 512, m 16")
        print("%-8s %5s %4s %8s %10s" % ("graph", "zero", "sp", "step s", "exposed s"))
        steps = {}
        for name, model in models.items():
            for zero in (0, 1):
                for sp in (False, True):
                    plan = {"mesh": {"dp": 32, "tp": 4, "pp": 1},
                            "batch": {"micro_batches": 16}, "zero": {"stage": zero},
                            "precision": "bf16-mixed", "recompute": "full",
                            "tensor_parallel": {"sequence_parallel": sp}}
                    out, error = run_plan(args.autopar, tmp, model, a100_cluster(128), 512,
                                          plan)
                    if error:
                        print("%-8s FAIL: %s" % (name, error))
                        failures.append(error)
                        continue
                    entry = out["plans"][0]
                    steps[name, zero, sp] = entry["step_time_s"]
                    print("%-8s %5d %4s %8.3f %10.3f" % (
                        name, zero, "on" if sp else "off", entry["step_time_s"],
                        entry["breakdown"]["exposed_comm_s"]))
        for (name, zero, sp), step in sorted(steps.items()):
            if sp and (name, zero, False) in steps and step > steps[name, zero, False] * 1.001:
                failures.append("%s zero %d: sequence parallelism predicted slower "
                                "(%.3f s against %.3f s)" % (name, zero, step,
                                                             steps[name, zero, False]))
            other = steps.get(("variant", zero, sp))
            if name == "default" and other and abs(other / step - 1) > 0.02:
                failures.append("zero %d sp %s: the variant graph's %.3f s is not the "
                                "default's %.3f s within 2%%" % (zero, sp, other, step))
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("OK: sequence parallelism no slower; both graphs alike within 2%")
    return 1 if args.check and failures else 0


if __name__ == "__main__":
    sys.exit(main())
