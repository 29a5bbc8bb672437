#!/usr/bin/python3
"""Check that an equivalence test would notice a wrong training rule.

  check_sensitivity.py OURS.jsonl MODEL.onnx --plan PLAN.json --data TOKENS.bin
      --steps N [--batch B] [--rtol 1e-4] --mutate KEY=JSON [--mutate ...]

For each --mutate, trains MODEL.onnx with torch_ref.py's trainer under the
plan with that one key changed (KEY is a dotted path such as optimizer.eps or
lr_schedule.decay; JSON the new value, e.g. 1e-8, '[0.9, 0.95]', '"linear"';
the value `delete` removes the key), and requires that its per-step losses or
gradient norms differ from OURS.jsonl (the compiled program's log under the
unchanged plan, which compare_losses.py has found equal to the reference) by
more than rtol at some step. A mutation that does not is reported as
undetectable: the test's learning rate or step count is too small for that
option to matter, so a program ignoring the option would pass.

Prints one line per mutation and exits 1 when one is undetectable.
"""
import argparse
import copy
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_losses  # noqa: E402
import torch_ref  # noqa: E402


def parse_mutation(text):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=JSON, got {text!r}")
    if value == "delete":
        return key.split("."), None, True
    try:
        return key.split("."), json.loads(value), False
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"{text!r}: bad JSON value: {e}") from None


def mutated(plan, path, value, delete):
    plan = copy.deepcopy(plan)
    node = plan
    for part in path[:-1]:
        node = node.setdefault(part, {})
    if delete:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return plan


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ours", metavar="OURS.jsonl")
    p.add_argument("model", metavar="MODEL.onnx")
    p.add_argument("--plan", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--batch", type=int)
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--mutate", type=parse_mutation, action="append", required=True,
                   metavar="KEY=JSON")
    args = p.parse_args(argv)
    torch.set_num_threads(1)

    with open(args.plan) as f:
        base = json.load(f)
    ours = {key: compare_losses.read_log(args.ours, key) for key in ("loss", "grad_norm")}
    data = torch_ref.TokenData(args.data)
    undetected = []
    for path, value, delete in args.mutate:
        name = ".".join(path) + ("" if not delete else " deleted") + \
            ("" if delete else f"={json.dumps(value)}")
        plan = torch_ref.parse_plan(mutated(base, path, value, delete), "mutated plan")
        model = torch_ref.OnnxModel(args.model, frozen=plan.frozen)
        loss_fn = torch_ref.LossFunction(model, plan.inputs, plan.targets, args.batch)
        b, t = loss_fn.batch, loss_fn.seq
        records = list(torch_ref.train(list(model.params.items()), loss_fn,
                                       lambda step: data.batch(step, b, t), args.steps, plan))
        worst = {}
        for key in ("loss", "grad_norm"):
            ref = {r["step"]: float(r[key]) for r in records}
            _, failures, rows = compare_losses.compare(ours[key], ref, key, args.rtol,
                                                       args.steps)
            worst[key] = max((r[0] for r in rows), default=0.0)
        detected = any(w > args.rtol for w in worst.values())
        print(f"{'detectable' if detected else 'UNDETECTABLE'}: {name}: max rel diff "
              f"loss {worst['loss']:.1e}, grad_norm {worst['grad_norm']:.1e}")
        if not detected:
            undetected.append(name)
    if undetected:
        print(f"FAIL: {len(undetected)} mutations stay within rtol {args.rtol:g}: "
              f"{', '.join(undetected)}")
        return 1
    print(f"OK: {len(args.mutate)} mutations detectable")
    return 0


if __name__ == "__main__":
    sys.exit(main())
