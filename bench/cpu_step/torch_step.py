"""PyTorch peer of bench/cpu_step: the benchmark's GPT (test/models/models.py,
the weights torch.manual_seed(0) gives it, as the exported model has)
trained with AdamW (lr from the command line, PyTorch's defaults otherwise)
on the same batches as the compiled program, eagerly or, with `compile`,
with the model wrapped in torch.compile (default mode; the optimizer step
eager, as most users write it). Prints one JSON line {"ms": [...],
"loss": [...]} (per step; torch.compile's first steps include compiling).

Run with Debian's Python (PyTorch 1.13) or the PyTorch 2.x venv
(bench/cpu_step/setup-peers.sh):
  python torch_step.py ROOT THREADS STEPS TOKENS.bin CONFIG_JSON LR eager|compile
"""
import json
import os
import sys
import time

import torch

from batches import batches


def main():
    root, threads, steps, tokens_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    cfg, lr, mode = json.loads(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
    sys.path.insert(0, os.path.join(root, "test", "models"))
    import models
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = models.GPT(cfg["vocab"], cfg["d_model"], cfg["heads"], cfg["layers"], cfg["seq"])
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    step_model = torch.compile(model) if mode == "compile" else model
    times, losses = [], []
    for inputs, targets in batches(tokens_path, cfg["batch"], cfg["seq"], steps):
        x, y = torch.from_numpy(inputs), torch.from_numpy(targets)
        t0 = time.perf_counter()
        loss = step_model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t0) * 1000)
        losses.append(loss.item())
    print(json.dumps({"ms": times, "loss": losses}))


if __name__ == "__main__":
    main()
