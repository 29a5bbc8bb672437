#!/usr/bin/env python3
"""Trains LoRA adapters of a Hugging Face family with autopar and with PEFT,
and compares.

  check_lora.py FAMILY --work DIR --targets GLOB... [--r 8] [--alpha 16]
                [--also-train MODULE...] [--plan-extra JSON] [--np N]
                [--steps 8] [--rtol 1e-4]

Exports the family's tiny model (hf_models.py export: initializers named
"model.<parameter>"), makes PEFT's adapter of the modules whose weight a
glob matches (get_peft_model with LoraConfig(r, lora_alpha,
target_modules, init_lora_weights=False: A and B random, so the update is
not zero) and saves it, then:
- compiles the model with the plan {"lora": {"targets", "r", "alpha",
  "init_adapter": that adapter, "module_prefix": "model."}, AdamW with
  clipping (lr 0.002: at 0.01, Adam turns rounding noise into lr-sized
  steps of some adapters within 8 steps), lora.also_train "model.M.*" for
  each --also-train module M (PEFT's modules_to_save), --plan-extra's keys (mesh,
  zero, ...)} and trains it (--np N: under mpirun), exporting the adapter (--export-adapter) and the merged
  model (--export-onnx);
- trains PEFT's model (PeftModel.from_pretrained(..., is_trainable=True))
  on the same batches with the same optimizer (torch_ref.py's);
- checks the per-step losses and gradient norms within rtol; that the
  exported adapter loads with PeftModel.from_pretrained and holds PEFT's
  trained adapters (and modules_to_save), its logits those of PEFT's
  trained model; and that the
  merged ONNX model's weights are those of PEFT's merge_and_unload().
Prints "FAMILY: OK: ..." and exits 0, or what differs and exits 1.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(HERE, "..", "e2e")
sys.path.insert(0, HERE)
sys.path.insert(0, E2E)
import hf_models  # noqa: E402
import torch_ref  # noqa: E402
from check_family import run  # noqa: E402

PREFIX = "model."  # what hf_models.py's export wrapper puts before the names


def norm_diff(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("family", choices=sorted(hf_models.FAMILIES))
    p.add_argument("--work", required=True)
    p.add_argument("--targets", nargs="+", required=True)
    p.add_argument("--r", type=int, default=8)
    p.add_argument("--alpha", type=float, default=16)
    p.add_argument("--also-train", nargs="+", default=[])
    p.add_argument("--plan-extra", default="{}")
    p.add_argument("--np", type=int, default=1)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--rtol", type=float, default=1e-4)
    args = p.parse_args()
    import peft
    os.makedirs(args.work, exist_ok=True)
    w = lambda name: os.path.join(args.work, name)  # noqa: E731
    model_args = hf_models.parse_args(["train", args.family, "--data", "-", "-o", "-"])
    hf_models.main(["export", args.family, "-o", w("model.onnx")])
    run([sys.executable, os.path.join(E2E, "make_tokens.py"), "-o", w("tokens.bin"),
         "--count", "4000", "--vocab", str(model_args.vocab), "--seed", "3"], "make_tokens.py")

    # PEFT's adapter of the targeted modules, random (init_lora_weights=False).
    torch.set_num_threads(1)
    base = hf_models.build_model(model_args)
    modules = [m for m, mod in base.named_modules()
               if isinstance(getattr(mod, "weight", None), torch.Tensor)
               and torch_ref.matches_any(PREFIX + m + ".weight", tuple(args.targets))]
    if not modules:
        print(f"{args.family}: the targets {args.targets} match no module")
        return 1
    conv1d = any(type(base.get_submodule(m)).__name__ == "Conv1D" for m in modules)
    config = peft.LoraConfig(r=args.r, lora_alpha=args.alpha, target_modules=modules,
                             lora_dropout=0.0, init_lora_weights=False,
                             fan_in_fan_out=conv1d,
                             modules_to_save=args.also_train or None)
    torch.manual_seed(11)
    peft.get_peft_model(base, config).save_pretrained(w("init"))

    plan = {"optimizer": {"type": "adamw", "lr": 0.002, "weight_decay": 0.1,
                          "max_grad_norm": 1.0},
            "lora": {"targets": args.targets, "r": args.r, "alpha": args.alpha,
                     "init_adapter": w("init"), "module_prefix": PREFIX,
                     "also_train": [PREFIX + m + ".*" for m in args.also_train]}}
    plan.update(json.loads(args.plan_extra))
    with open(w("plan.json"), "w") as f:
        json.dump(plan, f)
    run(["autopar", "compile", w("model.onnx"), "--plan", w("plan.json"), "-o", w("prog")],
        "autopar compile")
    train = [w("prog/train"), "--data", w("tokens.bin"), "--steps", str(args.steps),
             "--log", w("ours.jsonl"), "--export-adapter", w("adapter"),
             "--export-onnx", w("merged.onnx")]
    if args.np > 1:
        train = ["timeout", "600", "mpirun", "--oversubscribe", "-np", str(args.np)] + train
    run(train, "the compiled program")

    # PEFT trains the same adapter on the same batches.
    ref_plan = torch_ref.load_plan(w("plan.json"))
    model = peft.PeftModel.from_pretrained(hf_models.build_model(model_args), w("init"),
                                           is_trainable=True)
    named = [(n, q) for n, q in model.named_parameters() if q.requires_grad]
    data = torch_ref.TokenData(w("tokens.bin"))

    def loss_fn(inputs, targets):
        return hf_models.loss(model, inputs, targets)

    batch = lambda s: data.batch(s, model_args.batch, model_args.seq,  # noqa: E731
                                 ref_plan.targets_from)
    records = list(torch_ref.train(named, loss_fn, batch, args.steps, ref_plan))
    with open(w("ref.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    results = []
    for key in ("loss", "grad_norm"):
        out = run([sys.executable, os.path.join(E2E, "compare_losses.py"), w("ours.jsonl"),
                   w("ref.jsonl"), "--steps", str(args.steps), "--rtol", str(args.rtol),
                   "--key", key], f"compare_losses.py ({key})")
        results.append(out.strip().splitlines()[-1].split("max rel diff ")[-1])

    # The exported adapter in PEFT: PEFT's trained adapters, PEFT's logits.
    errors = []
    loaded = peft.PeftModel.from_pretrained(hf_models.build_model(model_args), w("adapter"))
    exported_keys = ("lora_", "modules_to_save")
    trained = {n.replace(".default", ""): q.detach() for n, q in model.named_parameters()
               if any(k in n for k in exported_keys)}
    got = {n.replace(".default", ""): q.detach() for n, q in loaded.named_parameters()
           if any(k in n for k in exported_keys)}
    if sorted(got) != sorted(trained):
        errors.append(f"the exported adapter's tensors {sorted(got)[:4]}... are not PEFT's "
                      f"{sorted(trained)[:4]}...")
    adapter_diff = max((norm_diff(got[n], trained[n]) for n in trained if n in got), default=0)
    if adapter_diff > args.rtol:
        errors.append(f"the exported adapter differs from PEFT's trained one by {adapter_diff:.3g}")
    model.eval()
    inputs, targets = batch(0)
    with torch.no_grad():
        want = model(input_ids=inputs).logits
        logits = loaded.eval()(input_ids=inputs).logits
    logits_diff = norm_diff(logits, want)
    if logits_diff > args.rtol:
        errors.append(f"the exported adapter's logits differ from PEFT's by {logits_diff:.3g}")

    # The merged export: PEFT's merge_and_unload().
    import onnx
    from onnx import numpy_helper
    exported = {t.name: numpy_helper.to_array(t)
                for t in onnx.load(w("merged.onnx")).graph.initializer}
    merged = model.merge_and_unload().state_dict()
    merged_diff = 0.0
    saved = [n for n in merged if any(n.startswith(m + ".") for m in args.also_train)]
    for key in [m + ".weight" for m in modules] + saved:
        name = PREFIX + key
        if name not in exported:
            errors.append(f"merged.onnx has no {name}")
            continue
        merged_diff = max(merged_diff, norm_diff(exported[name], merged[key]))
    if merged_diff > args.rtol:
        errors.append(f"merged.onnx's weights differ from merge_and_unload's by {merged_diff:.3g}")
    if errors:
        print("\n".join(f"{args.family}: {e}" for e in errors))
        return 1
    saved_note = f", {len(saved)} saved tensors" if args.also_train else ""
    print(f"{args.family}: OK: {args.steps} steps, {len(modules)} modules{saved_note}, "
          f"loss max rel diff "
          f"{results[0]}, grad_norm max rel diff {results[1]}, adapter {adapter_diff:.1e}, "
          f"logits {logits_diff:.1e}, merged {merged_diff:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
