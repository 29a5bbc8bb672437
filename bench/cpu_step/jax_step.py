"""JAX peer of bench/cpu_step: the benchmark's GPT (test/models/models.py,
the weights torch.manual_seed(0) gives it, as the exported model has)
written in JAX, its loss, gradient and AdamW update (PyTorch's formula and
defaults: betas 0.9/0.999, eps 1e-8, weight decay 0.01) in one jax.jit
step (XLA's CPU backend), trained on the same batches as the compiled
program. Prints one JSON line {"ms": [...], "loss": [...]} (per step).

Run with the peers' venv (bench/cpu_step/setup-peers.sh):
  .venv-peers/bin/python jax_step.py ROOT STEPS TOKENS.bin CONFIG_JSON LR
"""
import json
import math
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch

from batches import batches


def layer_norm(x, w, b):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * w + b


def loss_fn(p, idx, targets, cfg):
    B, T = idx.shape
    H, C = cfg["heads"], cfg["d_model"]
    hd = C // H
    mask = jnp.tril(jnp.ones((T, T), dtype=bool))
    x = p["wte.weight"][idx] + p["wpe.weight"][:T]
    for i in range(cfg["layers"]):
        a = f"h.{i}."
        h = layer_norm(x, p[a + "ln_1.weight"], p[a + "ln_1.bias"])
        qkv = h @ p[a + "attn.c_attn.weight"].T + p[a + "attn.c_attn.bias"]
        q, k, v = (t.reshape(B, T, H, hd).transpose(0, 2, 1, 3)
                   for t in jnp.split(qkv, 3, axis=-1))
        att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(hd))
        att = jax.nn.softmax(jnp.where(mask, att, -jnp.inf), axis=-1)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + y @ p[a + "attn.c_proj.weight"].T + p[a + "attn.c_proj.bias"]
        h = layer_norm(x, p[a + "ln_2.weight"], p[a + "ln_2.bias"])
        h = jax.nn.gelu(h @ p[a + "mlp.c_fc.weight"].T + p[a + "mlp.c_fc.bias"],
                        approximate=False)
        x = x + h @ p[a + "mlp.c_proj.weight"].T + p[a + "mlp.c_proj.bias"]
    x = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
    logits = (x @ p["lm_head.weight"].T).reshape(B * T, -1)
    picked = jnp.take_along_axis(logits, targets.reshape(-1, 1), axis=1)[:, 0]
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)


def main():
    root, steps, tokens_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    cfg, lr = json.loads(sys.argv[4]), float(sys.argv[5])
    sys.path.insert(0, os.path.join(root, "test", "models"))
    import models
    torch.manual_seed(0)
    model = models.GPT(cfg["vocab"], cfg["d_model"], cfg["heads"], cfg["layers"], cfg["seq"])
    params = {n: jnp.asarray(t.detach().numpy()) for n, t in model.named_parameters()}
    b1, b2, eps, wd = 0.9, 0.999, 1e-8, 0.01

    @jax.jit
    def step(params, m, v, t, idx, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, idx, targets, cfg)
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        new_p, new_m, new_v = {}, {}, {}
        for n, p in params.items():
            g = grads[n]
            p = p * (1 - lr * wd)
            new_m[n] = b1 * m[n] + (1 - b1) * g
            new_v[n] = b2 * v[n] + (1 - b2) * g * g
            denom = jnp.sqrt(new_v[n]) / jnp.sqrt(bc2) + eps
            new_p[n] = p - (lr / bc1) * new_m[n] / denom
        return loss, new_p, new_m, new_v

    m = {n: jnp.zeros_like(p) for n, p in params.items()}
    v = {n: jnp.zeros_like(p) for n, p in params.items()}
    times, losses = [], []
    for s, (inputs, targets) in enumerate(
            batches(tokens_path, cfg["batch"], cfg["seq"], steps, np.int32)):
        x, y = jnp.asarray(inputs), jnp.asarray(targets)
        t0 = time.perf_counter()
        loss, params, m, v = step(params, m, v, jnp.float32(s + 1), x, y)
        loss = float(loss.block_until_ready())
        times.append((time.perf_counter() - t0) * 1000)
        losses.append(loss)
    print(json.dumps({"ms": times, "loss": losses}))


if __name__ == "__main__":
    main()
