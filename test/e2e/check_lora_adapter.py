#!/usr/bin/python3
"""Check a LoRA adapter written by a compiled program's --export-adapter.

  check_lora_adapter.py DIR --ref ADAPTERS.npz --r R --alpha A
                        [--module-prefix P] [--rtol 1e-4] [--atol 1e-6]

DIR must hold PEFT's two files:
- adapter_config.json: peft_type "LORA", r R, lora_alpha A, and as
  target_modules exactly the modules of the reference's adapters;
- adapter_model.safetensors (read from its format by torch_ref.py's
  read_safetensors, without the safetensors package): one F32 tensor
  "base_model.model.<M>.lora_A.weight" [r, in] and "...lora_B.weight"
  [out, r] per module M, where the
  reference (torch_ref.py --save-lora) names them "<P><M>.lora_A.weight";
  each within ||ours - ref|| <= rtol * ||ref|| + atol * sqrt(size).
Prints "OK: N tensors of M modules" or what differs, and exits 1.
"""
import argparse
import json
import os
import sys

import numpy as np

from torch_ref import read_safetensors


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--ref", required=True)
    p.add_argument("--r", type=int, required=True)
    p.add_argument("--alpha", type=float, required=True)
    p.add_argument("--module-prefix", default="")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-6)
    args = p.parse_args()
    errors = []
    with open(os.path.join(args.dir, "adapter_config.json")) as f:
        config = json.load(f)
    dtypes = {}
    ours = read_safetensors(os.path.join(args.dir, "adapter_model.safetensors"), dtypes)
    errors += [f"{name}: {dtype}, expected F32" for name, dtype in sorted(dtypes.items())
               if dtype != "F32"]
    with np.load(args.ref) as npz:
        ref = {k: npz[k] for k in npz.files}
    modules = sorted({n.rsplit(".lora_", 1)[0][len(args.module_prefix):] for n in ref})
    for key, want in (("peft_type", "LORA"), ("r", args.r), ("lora_alpha", args.alpha)):
        if config.get(key) != want:
            errors.append(f"adapter_config.json: {key} is {config.get(key)!r}, expected {want!r}")
    if sorted(config.get("target_modules") or []) != modules:
        errors.append(f"adapter_config.json: target_modules {config.get('target_modules')}, "
                      f"expected {modules}")
    expected = {}
    for name, value in ref.items():
        module, role = name.rsplit(".lora_", 1)
        expected[f"base_model.model.{module[len(args.module_prefix):]}.lora_{role}"] = value
    for name in sorted(set(expected) ^ set(ours)):
        errors.append(f"{name}: {'missing' if name in expected else 'not expected'}")
    for name in sorted(set(expected) & set(ours)):
        a, b = ours[name], expected[name]
        if a.shape != b.shape:
            errors.append(f"{name}: shape {list(a.shape)}, expected {list(b.shape)}")
            continue
        diff = float(np.linalg.norm(a.astype(np.float64) - b))
        bound = args.rtol * float(np.linalg.norm(b)) + args.atol * np.sqrt(b.size)
        if not diff <= bound:
            errors.append(f"{name}: ||ours - ref|| = {diff:.3g} > {bound:.3g}")
    if errors:
        print("\n".join(errors))
        return 1
    print(f"OK: {len(ours)} tensors of {len(modules)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
