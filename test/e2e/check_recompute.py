#!/usr/bin/python3
"""Check activation recompute against the program without it.

  check_recompute.py MODEL.onnx [--input-shape NAME=D0,D1 ...] --data T.bin
      --steps K --workdir DIR --plan BASE.json [--mesh dp=1,tp=2,pp=1]

Compiles BASE.json (plus "mesh") with "recompute" none, selective and full,
runs each for K steps (under `mpirun -np dp*tp*pp` when the mesh has several
ranks) and requires:

 (a) every step's loss and gradient norm equal to the "none" run's within
     relative 1e-5 (the same ops on the same values);
 (b) report.json's bytes.activations strictly decreasing: full < selective
     < none.

Prints `OK recompute=MODE: activations N bytes` per mode; at the first
failure one line `FAIL ...: reason` and exit 1.
"""
import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_dp_zero as base  # noqa: E402

RTOL = 1e-5


def parse_mesh(text):
    mesh = {}
    for part in text.split(","):
        name, _, size = part.partition("=")
        mesh[name] = int(size)
    return mesh


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--input-shape", action="append", default=[])
    p.add_argument("--data", required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--workdir", required=True)
    p.add_argument("--plan", required=True)
    p.add_argument("--mesh", type=parse_mesh, default={})
    p.add_argument("--autopar", default="autopar")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--timeout", type=int, default=300)
    args = p.parse_args(argv)
    args.model = os.path.abspath(args.model)
    args.data = os.path.abspath(args.data)
    with open(args.plan) as f:
        plan = json.load(f)
    if args.mesh:
        plan["mesh"] = args.mesh
    ranks = args.mesh.get("dp", 1) * args.mesh.get("tp", 1) * args.mesh.get("pp", 1)
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    label = "none"
    try:
        activations = {}
        ref = None
        for mode in ("none", "selective", "full"):
            label = mode
            cfg = os.path.join(args.workdir, mode)
            out, report = base.compile_plan(args, dict(plan, recompute=mode), cfg)
            log, _ = base.train(args, out, cfg, ranks)
            if ref is None:
                ref = log
            else:
                for key in ("loss", "grad_norm"):
                    base.compare(log, ref, key, RTOL, "recompute none", args.steps)
            activations[mode] = report["bytes"]["activations"]
            print(f"OK recompute={mode}: activations {activations[mode]} bytes")
        label = "activations"
        if not activations["full"] < activations["selective"] < activations["none"]:
            raise base.Failure(f"activation bytes {activations} are not full < selective "
                               f"< none")
    except base.Failure as e:
        print(f"FAIL {label}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
