#!/usr/bin/python3
"""CPU training-step benchmark: the compiled program against its peers.

Models (--shapes, both by default): "small", GPT 4 layers, d_model 256, 4
heads, vocab 512, T 128, B 8; "wide", GPT 4 layers, d_model 512, 8 heads,
vocab 2048, T 256, B 4; AdamW (lr 1e-3, PyTorch defaults otherwise). Prints,
per shape, from one run on this machine: the median step time and GFLOP/s
of the program `autopar compile` builds and of its peers on the same model,
weights and batches: Debian's PyTorch 1.13 eager (torch_step.py, 1 and 2
threads) and, when bench/cpu_step/setup-peers.sh has installed them, PyTorch
2.15 from PyPI (its MKL) eager and with torch.compile (1 and 2 threads),
onnxruntime-training 1.19.2 (its training API on the same ONNX model, its
own MLAS kernels) and JAX 0.4.35 (the same GPT written in JAX, one jax.jit
step on XLA's CPU backend); the ratio to the best peer; whether each peer's
losses equal the program's (relative difference <= 1e-4 at every step; the
run exits 1 otherwise); the program's matmul GFLOP/s (FLOPs from
report.json) as a fraction of the large-SGEMM rate (2048^3, every core) the
faster of OpenBLAS and oneDNN reaches in the same run.

Shared virtual machines drift between faster and slower phases within
seconds, so the peers are measured in interleaved rounds (the program, each
peer, SGEMM; --rounds of them) and each peer keeps its best
round: the lowest median step time, the highest SGEMM rates. Every round's
figures are printed too.

Prints first what the program multiplies with (`train`'s start line:
oneDNN, its kernels, the threads) and its warning when ONEDNN_MAX_CPU_ISA
caps them below what the CPU runs.

What multiplies: the program, oneDNN's SGEMM (kernels for the CPU's
instruction set); Debian's PyTorch and numpy, the system OpenBLAS (with the
kernels OPENBLAS_CORETYPE names where the environment sets it: these
machines set Haswell, AVX2, on AVX-512 CPUs); PyPI's PyTorch, its MKL;
onnxruntime, its MLAS; XLA, Eigen. Where OpenBLAS misdetects the CPU
(virtual machines report a generic model and get its SSE3 "Prescott"
kernels), OPENBLAS_CORETYPE is set for every peer to the CPU's kernels.

Targets (issue 23): the program >= 1.2x faster than the best peer with the
kernels the CPU supports (>= 1.0x where the environment caps them), at 80%
or more of the SGEMM rate.

Usage: /usr/bin/python3 bench/cpu_step/run.py [--steps N] [--rounds R]
         [--shapes small,wide] [--keep]
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3"
# The benchmark shapes: the GPT, and one twice as wide with twice
# the sequence (attention a larger share) and a 4x vocabulary.
SHAPES = {
    "small": dict(vocab=512, d_model=256, heads=4, layers=4, seq=128, batch=8),
    "wide": dict(vocab=2048, d_model=512, heads=8, layers=4, seq=256, batch=4),
}
LR = "1e-3"

SGEMM = r"""
import ctypes, json, time
import numpy as np
n = 2048
a = np.random.rand(n, n).astype(np.float32)
b = np.random.rand(n, n).astype(np.float32)
c = np.zeros((n, n), dtype=np.float32)
dnnl = ctypes.CDLL("libdnnl.so.2")
dnnl.dnnl_sgemm.argtypes = [ctypes.c_char, ctypes.c_char] + [ctypes.c_int64] * 3 + [
    ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
    ctypes.c_float, ctypes.c_void_p, ctypes.c_int64]
def one_dnn():
    dnnl.dnnl_sgemm(b"N", b"N", n, n, n, 1.0, a.ctypes.data, n, b.ctypes.data, n, 0.0,
                    c.ctypes.data, n)
rates = {}
for name, f in (("openblas", lambda: a @ b), ("onednn", one_dnn)):
    f()
    best = 0
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(3):
            f()
        best = max(best, 3 * 2 * n ** 3 / (time.perf_counter() - t0) / 1e9)
    rates[name] = best
print(json.dumps(rates))
"""


TORCH1, TORCH2 = "1.13", "2.15.0"  # Debian's; setup-peers.sh's, from PyPI
PEERS_PY = os.path.join(ROOT, "bench/cpu_step/.venv-peers/bin/python")
TORCH2_PY = os.path.join(ROOT, "bench/cpu_step/.venv-torch/bin/python")
STEP = {name: os.path.join(ROOT, "bench/cpu_step", name + "_step.py")
        for name in ("torch", "ort", "jax")}


def peer_commands(model, work, steps, tokens, c):
    """Each peer's name and the command that prints its {"ms", "loss"} line;
    those setup-peers.sh did not install are left out (and named)."""
    cfg = json.dumps(c)
    peers = {f"PyTorch {TORCH1} eager, {t} thread(s)":
             [PY, STEP["torch"], ROOT, str(t), str(steps), tokens, cfg, LR, "eager"]
             for t in (1, 2)}
    missing = []
    if os.path.exists(TORCH2_PY) and subprocess.run(
            [TORCH2_PY, "-c", "import torch"], capture_output=True).returncode == 0:
        for mode, label in (("eager", "eager"), ("compile", "torch.compile")):
            for t in (1, 2):
                peers[f"PyTorch {TORCH2} {label}, {t} thread(s)"] = [
                    TORCH2_PY, STEP["torch"], ROOT, str(t), str(steps), tokens, cfg, LR, mode]
    else:
        missing.append(f"PyTorch {TORCH2}")
    if os.path.exists(PEERS_PY):
        peers["onnxruntime-training 1.19.2"] = [
            PEERS_PY, STEP["ort"], model, work, str(steps), tokens, str(c["batch"]),
            str(c["seq"]), LR]
        peers["JAX 0.4.35 (jax.jit)"] = [PEERS_PY, STEP["jax"], ROOT, str(steps), tokens, cfg, LR]
    else:
        missing.append("onnxruntime-training 1.19.2, JAX 0.4.35")
    return peers, missing


def loss_difference(ours, theirs):
    """The largest relative difference of two runs' per-step losses."""
    return max(abs(a - b) / abs(b) for a, b in zip(ours, theirs, strict=True))


def run(cmd, env, **kw):
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, **kw)


def blas_core_type():
    """OPENBLAS_CORETYPE to use: the kernels the CPU supports when OpenBLAS
    falls back to Prescott, else None (OpenBLAS's own choice)."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return os.environ["OPENBLAS_CORETYPE"]
    lib = ctypes.CDLL("libopenblas.so.0")
    lib.openblas_get_corename.restype = ctypes.c_char_p
    if lib.openblas_get_corename().decode() != "Prescott":
        return None
    flags = open("/proc/cpuinfo").read()
    if all(f in flags for f in ("avx512f", "avx512bw", "avx512vl")):
        return "SkylakeX"
    if "avx2" in flags and " fma" in flags:
        return "Haswell"
    return None


def bench_shape(name, c, args, env):
    """Measures one shape; prints its table. Returns the names of peers whose
    losses differ from the program's."""
    work = tempfile.mkdtemp(prefix="autopar-cpu-step-")
    model = os.path.join(work, "model.onnx")
    tokens = os.path.join(work, "tokens.bin")
    run([PY, os.path.join(ROOT, "test/models/export.py"), "--model", "gpt",
         "--vocab", str(c["vocab"]), "--d-model", str(c["d_model"]), "--heads", str(c["heads"]),
         "--layers", str(c["layers"]), "--seq", str(c["seq"]), "--batch", str(c["batch"]),
         "--opset", "17", "--no-constant-folding", "--seed", "0", "-o", model], env)
    count = (args.steps + 1) * c["batch"] * c["seq"] + 1
    run([PY, os.path.join(ROOT, "test/e2e/make_tokens.py"), "-o", tokens, "--count", str(count),
         "--vocab", str(c["vocab"])], env)
    prog = os.path.join(work, "prog")
    run([os.path.join(ROOT, "build/bin/autopar"), "compile", model, "-o", prog], env)
    log = os.path.join(work, "log.jsonl")
    warm = max(1, args.steps // 5)
    flops = json.load(open(os.path.join(prog, "report.json")))["flops_per_step"]
    peers, missing = peer_commands(model, work, args.steps, tokens, c)
    print(f"\n== shape {name}: GPT {c['layers']} layers, d {c['d_model']}, {c['heads']} heads, "
          f"vocab {c['vocab']}, T {c['seq']}, B {c['batch']}, AdamW; "
          f"{flops / 1e9:.2f} GFLOP (matmul) per step")
    for m in missing:
        print(f"{m}: not installed (bench/cpu_step/setup-peers.sh)")
    rounds, losses, weaker = [], {}, False
    for i in range(max(1, args.rounds)):
        r = run([os.path.join(prog, "train"), "--data", tokens, "--steps", str(args.steps),
                 "--log", log], env)
        if not rounds:
            # The kernels and threads the program multiplies with, and a
            # warning where the environment forces weaker kernels.
            for line in r.stdout.splitlines()[:1] + r.stderr.splitlines():
                print(line)
            weaker = "makes oneDNN multiply with its" in r.stderr
        records = [json.loads(line) for line in open(log)]
        ours_losses = [r["loss"] for r in records]
        measured = {"autopar": statistics.median([r["ms"] for r in records][warm:])}
        for peer, cmd in peers.items():
            out = json.loads(run(cmd, env).stdout.splitlines()[-1])
            measured[peer] = statistics.median(out["ms"][warm:])
            losses[peer] = max(losses.get(peer, 0), loss_difference(ours_losses, out["loss"]))
        sgemm = json.loads(run([PY, "-c", SGEMM], env).stdout)
        rounds.append(measured)
        print(f"  round {i + 1}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in measured.items()) +
              f"; SGEMM OpenBLAS {sgemm['openblas']:.1f}, oneDNN {sgemm['onednn']:.1f} GFLOP/s")
        measured["sgemm"] = sgemm
    best = {k: min(r[k] for r in rounds) for k in rounds[0] if k != "sgemm"}
    sgemm_by = {lib: max(r["sgemm"][lib] for r in rounds) for lib in ("openblas", "onednn")}
    sgemm = max(sgemm_by.values())
    ours_ms = best.pop("autopar")
    rate = flops / (ours_ms / 1000) / 1e9
    print(f"{'peer':<40}{'ms/step':>9}{'GFLOP/s':>9}  losses vs autopar (max rel diff)")
    print(f"{'autopar (compiled, CPU target)':<40}{ours_ms:>9.1f}{rate:>9.1f}")
    for peer, ms in best.items():
        print(f"{peer:<40}{ms:>9.1f}{flops / ms / 1e6:>9.1f}  {losses[peer]:.1e} "
              f"{'OK' if losses[peer] <= 1e-4 else 'DIFFERENT LOSSES'}")
    print(f"SGEMM 2048^3, {os.cpu_count()} threads: OpenBLAS (numpy) {sgemm_by['openblas']:.1f}, oneDNN "
          f"{sgemm_by['onednn']:.1f} GFLOP/s (each figure: its best of {len(rounds)} "
          f"interleaved rounds)")
    best_peer = min(best, key=best.get)
    speedup = best[best_peer] / ours_ms
    fraction = rate / sgemm
    target = 1.0 if weaker else 1.2
    print(f"speedup vs the best peer ({best_peer}): {speedup:.2f}x (target >= {target:.2f} "
          f"with {'the weaker kernels the environment caps it at' if weaker else 'the CPU' + chr(39) + 's kernels'}) "
          f"{'OK' if speedup >= target else 'BELOW TARGET'}")
    print(f"compiled program: {rate:.1f} GFLOP/s = {fraction:.2f} of the faster SGEMM "
          f"(target >= 0.80) {'OK' if fraction >= 0.8 else 'BELOW TARGET'}")
    if not args.keep:
        subprocess.run(["rm", "-rf", work])
    else:
        print(f"work directory: {work}")
    return [f"{name}: {peer}" for peer, diff in losses.items() if diff > 1e-4]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds; each peer keeps its best")
    parser.add_argument("--shapes", default=",".join(SHAPES),
                        help="comma-separated, of: " + ", ".join(SHAPES))
    parser.add_argument("--keep", action="store_true", help="keep the work directories")
    args = parser.parse_args()
    env = dict(os.environ)
    core = blas_core_type()
    if core:
        env["OPENBLAS_CORETYPE"] = core
    print(f"machine: {os.cpu_count()} cores, OpenBLAS kernels {core or 'auto-detected'}")
    different = []
    for name in args.shapes.split(","):
        if name not in SHAPES:
            parser.error(f"--shapes: unknown shape '{name}' (expected {', '.join(SHAPES)})")
        different += bench_shape(name, SHAPES[name], args, env)
    # A peer that trains to other losses is not the same computation: the
    # comparison is void.
    if different:
        print(f"error: losses differ from the program's: {'; '.join(different)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
