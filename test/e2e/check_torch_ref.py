#!/usr/bin/python3
"""Check torch_ref.py's ONNX interpreter against the torch models it was exported from.

For each case, builds models.GPT / models.Bert (test/models/models.py) with a
fixed seed, exports it to ONNX the way test/models/export.py does, and trains
both the torch module and torch_ref's interpretation of the ONNX file with
torch_ref.train (AdamW, lr 1e-2, weight decay 0.1) on the same batches of a
token file written by make_tokens.py. The per-step losses must agree within a
relative 1e-5, and the gradient norms (before clipping) within 1e-4.

The cases vary width, heads, layers, vocabulary, sequence length,
activation, tying, opset (14 decomposes LayerNorm, 17 keeps it), constant
folding and static / dynamic batch; dynamic-batch cases also train with two
micro-batches. A tied GPT exported with constant folding is not a case: the
export unties lm_head from wte (a folded copy), so it is a different model.
The ONNX side's extra tensors train like their torch counterparts: a folded
weight transpose (onnx::MatMul_N = W^T) or position embedding under the
elementwise AdamW, an Identity alias like the separate torch parameter it
stands for, float masks not at all (no gradient).

Usage: /usr/bin/python3 test/e2e/check_torch_ref.py [--steps N] [-k SUBSTRING]
Exit status 1 when a case fails.
"""
import argparse
import dataclasses
import os
import sys
import tempfile
import time
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import make_tokens  # noqa: E402
import models  # noqa: E402
import torch_ref  # noqa: E402

RTOL = 1e-5
GRAD_NORM_RTOL = 1e-4
PLAN = {"optimizer": {"type": "adamw", "lr": 1e-2, "weight_decay": 0.1}}
SEED = 1234


@dataclasses.dataclass
class Case:
    """One model to export and train."""
    model: str
    d_model: int
    heads: int
    layers: int
    opset: int
    vocab: int = 64
    seq: int = 16
    batch: int = 4
    tied: bool = False
    activation: str = "gelu"
    fold: bool = True
    dynamic: bool = False
    micro_batches: int = 1

    @property
    def name(self):
        parts = [self.model + ("_tied" if self.tied else ""),
                 f"v{self.vocab}_d{self.d_model}_h{self.heads}_l{self.layers}_t{self.seq}",
                 self.activation if self.model == "gpt" else "",
                 f"opset{self.opset}", "fold" if self.fold else "nofold",
                 "dynamic" if self.dynamic else "static", f"b{self.batch}"]
        if self.micro_batches > 1:
            parts.append(f"micro{self.micro_batches}")
        return "_".join(p for p in parts if p)


CASES = [
    Case("gpt", 32, 4, 2, 17),
    Case("gpt", 32, 4, 2, 14, dynamic=True, micro_batches=2),
    Case("gpt", 48, 6, 1, 14, vocab=80, batch=2, activation="relu", fold=False),
    Case("gpt", 32, 2, 2, 17, seq=8, activation="gelu_tanh", fold=False, dynamic=True,
         micro_batches=2),
    Case("gpt", 64, 8, 2, 17, vocab=128, dynamic=True),
    Case("gpt", 32, 4, 2, 17, tied=True, fold=False),
    Case("gpt", 24, 3, 1, 14, tied=True, fold=False, dynamic=True, micro_batches=2),
    Case("gpt", 32, 4, 1, 14, activation="gelu_tanh"),
    Case("bert", 32, 4, 2, 14),
    Case("bert", 48, 4, 1, 17, vocab=100, fold=False, dynamic=True, micro_batches=2),
    Case("bert", 32, 8, 2, 17),
    Case("bert", 40, 5, 1, 14, seq=12, batch=3, fold=False),
]

INPUT_NAMES = {"gpt": ("idx", "targets"), "bert": ("input_ids", "labels")}


def export(case, module, path):
    """Export module to path as test/models/export.py does (eval, no_grad).
    A dynamic-batch export traces with a batch other than the one trained."""
    module.eval()
    trace_batch = case.batch + 1 if case.dynamic else case.batch
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randint(0, case.vocab, (trace_batch, case.seq), generator=gen)
    y = torch.randint(0, case.vocab, (trace_batch, case.seq), generator=gen)
    names = list(INPUT_NAMES[case.model])
    dynamic_axes = {n: {0: "batch"} for n in names} if case.dynamic else None
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x, y), path, input_names=names, output_names=["loss"],
                          opset_version=case.opset, do_constant_folding=case.fold,
                          dynamic_axes=dynamic_axes, export_params=True)
    module.train()


def run_case(case, workdir, steps):
    """Train the torch module and the interpreted ONNX; returns both logs."""
    torch.manual_seed(SEED)
    module = models.build(case.model, case.vocab, case.d_model, case.heads, case.layers,
                          case.seq, tied=case.tied, activation=case.activation)
    onnx_path = os.path.join(workdir, case.name + ".onnx")
    export(case, module, onnx_path)

    tokens_path = os.path.join(workdir, case.name + ".bin")
    make_tokens.write_tokens(tokens_path, make_tokens.random_tokens(
        steps * case.batch * case.seq + 1, case.vocab, SEED))
    data = torch_ref.TokenData(tokens_path)

    plan = torch_ref.parse_plan(dict(PLAN, batch={"micro_batches": case.micro_batches}))
    interpreted = torch_ref.OnnxModel(onnx_path)
    loss_fn = torch_ref.LossFunction(interpreted, batch=case.batch)

    def batches(step):
        return data.batch(step, case.batch, case.seq)

    ref = list(torch_ref.train(list(module.named_parameters()), module, batches, steps, plan))
    ours = list(torch_ref.train(list(interpreted.params.items()), loss_fn, batches, steps,
                                plan))
    return ref, ours


def rel_diff(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=5, help="training steps per case (5)")
    p.add_argument("-k", dest="select", default="", metavar="SUBSTRING",
                   help="run only the cases whose name contains SUBSTRING")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error("--steps must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(1)
    cases = [c for c in CASES if args.select in c.name]
    if not cases:
        print(f"no case matches {args.select!r}")
        return 1
    failed = []
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="check_torch_ref.") as workdir:
        for case in cases:
            t0 = time.monotonic()
            ref, ours = run_case(case, workdir, args.steps)
            worst, case_ok = 0.0, True
            print(f"{case.name}:")
            for r, o in zip(ref, ours):
                rel = rel_diff(o["loss"], r["loss"])
                norm_rel = rel_diff(o["grad_norm"], r["grad_norm"])
                worst = max(worst, rel)
                step_ok = rel <= RTOL and norm_rel <= GRAD_NORM_RTOL
                case_ok = case_ok and step_ok
                print(f"  step {r['step']}: loss torch {r['loss']:.9f} onnx {o['loss']:.9f} "
                      f"rel {rel:.1e}; grad norm {r['grad_norm']:.6f} vs {o['grad_norm']:.6f} "
                      f"rel {norm_rel:.1e}  {'ok' if step_ok else 'FAIL'}")
            print(f"  {'ok' if case_ok else 'FAIL'}: max loss rel diff {worst:.1e}, "
                  f"{time.monotonic() - t0:.1f}s")
            if not case_ok:
                failed.append(case.name)
    total = time.monotonic() - start
    if failed:
        print(f"FAIL: {len(failed)} of {len(cases)} cases: {', '.join(failed)} ({total:.1f}s)")
        return 1
    print(f"OK: {len(cases)} cases, {args.steps} steps each, losses within rel {RTOL:g} "
          f"({total:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
