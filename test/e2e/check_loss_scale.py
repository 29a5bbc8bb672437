#!/usr/bin/python3
"""Replays fp16-mixed's dynamic loss scaling on a training log.

  check_loss_scale.py LOG.jsonl --init S --growth-interval N
      [--growth-factor 2] [--backoff-factor 0.5] [--lr-plan PLAN.json]

Every step's line must carry "loss_scale"; the first step's is S; a step
with "skipped": true (gradients with an inf or NaN) is followed by the scale
times the backoff factor, and after N steps in a row without a skip the
scale is multiplied by the growth factor (torch.cuda.amp.GradScaler). The
log must hold at least one skipped step, one growth, and a last loss below
the first. With --lr-plan, every step's "lr" must be the plan's schedule
(torch_ref.py's): DeepSpeed's schedules are not stepped on a skipped update,
so step s runs at iteration s - 1 - (skips before s). Prints "OK: K steps, A skipped, B growths, loss X -> Y" or one
"FAIL: ..." line and exits 1.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log")
    p.add_argument("--init", type=float, required=True)
    p.add_argument("--growth-interval", type=int, required=True)
    p.add_argument("--growth-factor", type=float, default=2.0)
    p.add_argument("--backoff-factor", type=float, default=0.5)
    p.add_argument("--lr-plan", metavar="PLAN.json")
    a = p.parse_args()
    plan = None
    if a.lr_plan:
        import torch_ref
        plan = torch_ref.load_plan(a.lr_plan)
    steps = [json.loads(line) for line in open(a.log) if '"step"' in line]
    if not steps:
        print(f"FAIL: {a.log}: no steps")
        return 1
    scale, good, skipped, growths = a.init, 0, 0, 0
    for r in steps:
        if plan:
            if plan.schedule == "warmup_decay":
                lr = torch_ref.scheduled_lr(plan, r["step"], len(steps))
            else:
                lr = torch_ref.deepspeed_lr(plan, r["step"] - 1 - skipped, len(steps))
            if abs(r["lr"] - lr) > 1e-8 * abs(lr):
                print(f"FAIL: step {r['step']}: lr {r['lr']}, expected {lr} "
                      f"({skipped} updates skipped before it)")
                return 1
        if r.get("loss_scale") != scale:
            print(f"FAIL: step {r['step']}: loss_scale {r.get('loss_scale')}, expected {scale}")
            return 1
        if r.get("skipped"):
            if r.get("grad_norm") is not None:
                print(f"FAIL: step {r['step']}: skipped with a finite grad_norm")
                return 1
            skipped += 1
            scale *= a.backoff_factor
            good = 0
        else:
            good += 1
            if good == a.growth_interval:
                scale *= a.growth_factor
                growths += 1
                good = 0
    first, last = steps[0]["loss"], steps[-1]["loss"]
    if not skipped or not growths or not last < first:
        print(f"FAIL: {skipped} skipped, {growths} growths, loss {first} -> {last}")
        return 1
    print(f"OK: {len(steps)} steps, {skipped} skipped, {growths} growths, "
          f"loss {first:.4f} -> {last:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
