#!/usr/bin/python3
"""GPU training benchmark: GPT-2 124M, the compiled CUDA program against
PyTorch eager and torch.compile (bf16 autocast, fused AdamW, attention by
F.scaled_dot_product_attention(is_causal=True), i.e. flash attention) on
one GPU, and torch.compile with the vocabulary padded to 50304 as nanoGPT
pads it (an extra line; the ratio is against the unpadded torch.compile).
The compiled program pads its vocabulary to 50304 too (the CUDA target's
pad_vocab_multiple 64), masked so that it trains the 50257-class model.

Model: GPT-2 124M from test/models/models.py (12 layers, d_model 768, 12
heads, vocab 50257, T 1024, lm_head tied to wte as in GPT-2, exact GELU),
random weights; 124,439,808 parameters. Optimizer: AdamW lr 6e-4, betas
(0.9, 0.95), weight decay 0.1, gradients clipped to norm 1.0, on both sides.

GPU machines have no LLVM/MLIR (so no autopar), hence two phases:

  /usr/bin/python3 bench/gpu_gpt2/run.py --prepare DIR   # where autopar is built
  python3 bench/gpu_gpt2/run.py --run DIR                # on the GPU machine
  python3 bench/gpu_gpt2/run.py                          # both, in build/bench/gpu_gpt2

--prepare exports the model to ONNX once (build/bench/, dynamic batch,
do_constant_folding=False; about a minute and 3.5 GB of RAM), runs `autopar compile
--target cuda --no-build` for each batch size (the plan asks for bf16-mixed
and falls back to fp32 where autopar refuses it; bench.json records which),
drops weights.bin and model.onnx from each program directory (the run phase
writes random weights from weights.json instead), and writes a random token
file: DIR stays a few MiB, small enough to carry to the GPU machine.

--run, for each prepared batch size from the largest: writes weights.bin,
builds the program (cmake -G Ninja), trains --steps steps and takes the
median step time after the first 5; a batch that runs out of memory moves
on to the next smaller one. Then PyTorch on the same architecture (each try
in its own process), eager and torch.compile, each at the largest batch of
the same list that fits, same T, same timing. Prints one table (ms/step,
tokens/s, model TFLOP/s and MFU: 6 psi + 12 L h s FLOPs per token over the
GPU's dense bf16 peak, both from ../shared/REFERENCE.md), the compiled
program's tokens/s over torch.compile's, and the targets: >= 1.20x
torch.compile and MFU >= 40%. Writes the same as JSON to DIR/gpu_gpt2.json.

--run --profile STEPS then rebuilds the measured program with AUTOPAR_PROFILE
(every generated op timed after a stream synchronization, no CUDA graphs) and
prints its time per op kind (nn.matmul, nn.attention_grad, nn.fused, ...)
over STEPS steps: where the step's time goes.

Exit status: 0 when measured (targets met or not); 1 when a phase fails
(export, compile, or the compiled program at every batch); 2 for usage.
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXPORT = os.path.join(ROOT, "test", "models", "export.py")
MAKE_TOKENS = os.path.join(ROOT, "test", "e2e", "make_tokens.py")
DEFAULT_AUTOPAR = os.path.join(ROOT, "build", "bin", "autopar")
DEFAULT_DIR = os.path.join(ROOT, "build", "bench", "gpu_gpt2")
MODEL = os.path.join(ROOT, "build", "bench", "gpt2_124m_tied_nofold_dynbatch.onnx")

# GPT-2 124M: bench/import_gpt2's export arguments (its GPT2_124M), here
# tied as GPT-2 is, with a dynamic batch and without constant folding.
CONFIG = dict(vocab=50257, d_model=768, heads=12, layers=12, seq=1024, tied=True,
              activation="gelu")
EXPORT_EXTRA = ["--tied", "--dynamic-batch", "--no-constant-folding"]
BATCHES = [4, 8, 16, 32, 64]  # 64 fits an H200 (report.json: ~89 GB in fp32)
OPTIMIZER = {"type": "adamw", "lr": 6e-4, "betas": [0.9, 0.95], "weight_decay": 0.1,
             "max_grad_norm": 1.0}
TOKENS = 1 << 20  # random tokens in the token file (2 MiB); the data wraps
STEPS = 30
WARMUP = 5  # steps left out of the median
MARKER = ".gpu_gpt2"  # in every DIR --prepare made (and may empty again)
PREPARED_LIMIT = 48 << 20  # DIR must travel in 64 MiB with the rest of a check

# ../shared/REFERENCE.md: dense bf16 peaks (H200: same compute as H100).
PEAK_BF16 = [("H100", 989e12), ("H200", 989e12), ("A100", 312e12)]
TARGET_RATIO = 1.2
TARGET_MFU = 0.40

OOM_EXIT = 3  # the PyTorch worker's exit status for out of memory

# The PyTorch peers (SDPA attention, fused AdamW, bf16 autocast); the ratio
# is taken against "compile".
TORCH_LABELS = {"eager": "PyTorch eager", "compile": "PyTorch torch.compile",
                "compile-pad": "torch.compile V=50304"}
PADDED_VOCAB = 50304


def log(msg=""):
    print(msg, flush=True)


def fail(msg, code=1):
    print(f"gpu_gpt2: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


def mib(n):
    return f"{n / (1 << 20):.1f} MiB"


def dir_bytes(path):
    total = 0
    for base, _, files in os.walk(path):
        for f in files:
            p = os.path.join(base, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


# ---------------------------------------------------------------------------
# FLOPs and peaks (../shared/REFERENCE.md)
# ---------------------------------------------------------------------------
def parameter_count(c=CONFIG):
    """psi of models.GPT: embeddings, per layer 2 LayerNorms, qkv, proj and
    the MLP (12 d^2 + 13 d), the final LayerNorm, lm_head unless tied."""
    v, d, t, n = c["vocab"], c["d_model"], c["seq"], c["layers"]
    psi = v * d + t * d + n * (12 * d * d + 13 * d) + 2 * d
    return psi if c["tied"] else psi + v * d


def flops_per_token(psi, c=CONFIG):
    """Training FLOPs per token: 6 psi + 12 L h s (nanoGPT/llm.c)."""
    return 6 * psi + 12 * c["layers"] * c["d_model"] * c["seq"]


def peak_bf16(gpu_name):
    for key, peak in PEAK_BF16:
        if key in (gpu_name or ""):
            return peak
    return None


# ---------------------------------------------------------------------------
# weights.bin from weights.json
# ---------------------------------------------------------------------------
ONNX_FLOAT_TYPES = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}
ONNX_OTHER_TYPES = {9: "bool", 7: "int64", 6: "int32", 2: "uint8", 3: "int8"}


def is_causal_mask_shape(shape):
    return len(shape) == 4 and shape[0] == 1 and shape[1] == 1 and shape[2] == shape[3]


def initial_values(t, rng):
    """The initial value of one tensor of weights.json as a numpy array.

    - a float [1, 1, S, S]: models.py's causal-mask buffer,
      torch.tril(torch.ones(S, S)).view(1, 1, S, S): 1 on and below the
      diagonal, 0 above;
    - a bool [1, 1, S, S]: that buffer constant-folded through the model's
      `bias == 0` test (what masked_fill takes): True above the diagonal;
    - other float tensors: rank >= 2 normal(0, 0.02); rank 1 (and 0) ones
      when the name ends in "weight" (LayerNorm scales), else zeros;
    - any other non-float tensor: an error (nothing sensible to invent).
    """
    import numpy as np
    shape = [int(d) for d in t["shape"]]
    onnx_type = int(t["onnx_type"])
    n = 1
    for d in shape:
        n *= d
    if onnx_type in ONNX_FLOAT_TYPES:
        if is_causal_mask_shape(shape):
            a = np.tril(np.ones((shape[2], shape[3]), dtype=np.float32)).reshape(shape)
        elif len(shape) >= 2:
            a = rng.standard_normal(n, dtype=np.float32)
            a *= np.float32(0.02)
        elif t["init_from"].endswith("weight"):
            a = np.ones(n, dtype=np.float32)
        else:
            a = np.zeros(n, dtype=np.float32)
        kind = ONNX_FLOAT_TYPES[onnx_type]
        if kind == "bfloat16":  # no numpy type: the upper half of the float32 bits
            bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
            return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
        return np.ascontiguousarray(a, dtype=np.dtype(kind).newbyteorder("<"))
    if onnx_type == 9 and is_causal_mask_shape(shape):
        causal = np.tril(np.ones((shape[2], shape[3]), dtype=np.float32))
        return (causal == 0).reshape(shape)
    kind = ONNX_OTHER_TYPES.get(onnx_type, f"onnx type {onnx_type}")
    raise ValueError(f"{t['name']}: no rule for an initial {kind} tensor of shape {shape}")


def pack_weights(manifest_path, out_path, seed=0):
    """Write weights.bin as weights.json lays it out, with the values of
    initial_values(); returns the number of tensors written. Aliases
    (init_from another tensor) start from their source's values, as in the
    compiled program's own weights.bin."""
    import numpy as np
    with open(manifest_path) as f:
        manifest = json.load(f)
    total = int(manifest["bytes"])
    tensors = manifest["tensors"]
    sources = {t["init_from"] for t in tensors if t["init_from"] != t["name"]}
    rng = np.random.default_rng(seed)
    cache = {}
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as f:
        f.truncate(total)  # zeros between the 64-byte aligned tensors
        for t in tensors:
            src = t["init_from"]
            if src in cache:
                a = cache[src]
            else:
                a = initial_values(dict(t, name=src), rng)
                if src in sources:
                    cache[src] = a
            data = a.tobytes()
            off, nbytes = int(t["offset"]), int(t["bytes"])
            if len(data) != nbytes or off < 0 or off + nbytes > total:
                raise ValueError(f"{manifest_path}: {t['name']}: {len(data)} bytes generated, "
                                 f"{nbytes} at offset {off} in a {total}-byte blob")
            f.seek(off)
            f.write(data)
    os.replace(tmp, out_path)
    return len(tensors)


# ---------------------------------------------------------------------------
# --prepare
# ---------------------------------------------------------------------------
def export_args():
    """bench/import_gpt2's GPT2_124M plus EXPORT_EXTRA, checked against CONFIG."""
    import importlib.util
    path = os.path.join(ROOT, "bench", "import_gpt2", "run.py")
    spec = importlib.util.spec_from_file_location("import_gpt2_run", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = list(mod.GPT2_124M)
    given = dict(zip(args[::2], args[1::2]))
    for key, flag in (("vocab", "--vocab"), ("d_model", "--d-model"), ("heads", "--heads"),
                      ("layers", "--layers"), ("seq", "--seq"),
                      ("activation", "--activation")):
        if str(given.get(flag)) != str(CONFIG[key]):
            fail(f"{path}: GPT2_124M has {flag} {given.get(flag)}, this benchmark "
                 f"{CONFIG[key]}")
    return args + EXPORT_EXTRA


def export_model(model, python):
    log(f"exporting GPT-2 124M (tied, dynamic batch, no constant folding) -> {model}")
    os.makedirs(os.path.dirname(model), exist_ok=True)
    cmd = [python, EXPORT] + export_args() + ["-o", model]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    if r.returncode != 0:
        fail(f"model export failed (exit {r.returncode}): {shlex.join(cmd)}")
    log(f"exported in {time.perf_counter() - t0:.1f} s, {mib(os.path.getsize(model))}")


def compile_program(autopar, model, batch, plan, out):
    """autopar compile --target cuda --no-build; returns (ok, output, command)."""
    plan_path = os.path.join(os.path.dirname(out), "plan.json")
    with open(plan_path, "w") as f:
        json.dump(plan, f, indent=1)
        f.write("\n")
    seq = CONFIG["seq"]
    cmd = [autopar, "compile", model, "--plan", plan_path, "--target", "cuda", "--no-build",
           "--input-shape", f"idx={batch},{seq}", "--input-shape", f"targets={batch},{seq}",
           "-o", out]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    msg = r.stdout.strip()
    if r.returncode == 0:
        log(f"  batch {batch}: compiled in {time.perf_counter() - t0:.1f} s")
    return r.returncode == 0, msg, shlex.join(cmd)


def prepare(args):
    autopar = os.path.abspath(args.autopar)
    if not (os.path.isfile(autopar) and os.access(autopar, os.X_OK)):
        fail(f"autopar not built: {autopar} (or pass --autopar)", 2)
    d = os.path.abspath(args.dir)
    model = os.path.abspath(args.model)
    if args.regenerate or not os.path.exists(model):
        export_model(model, args.python)
    # A fresh preparation (no stale programs or results), but never of a
    # directory this script did not make.
    if os.path.isdir(d) and os.listdir(d) and not os.path.exists(os.path.join(d, MARKER)):
        fail(f"{d} is not empty and was not prepared by this benchmark; give another DIR", 2)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    open(os.path.join(d, MARKER), "w").close()

    precision, refused = "bf16-mixed", None
    programs = {}
    for batch in sorted(args.batches, reverse=True):
        out = os.path.join(d, f"b{batch}")
        plan = {"precision": precision, "optimizer": OPTIMIZER}
        ok, msg, cmd = compile_program(autopar, model, batch, plan, out)
        if not ok and precision == "bf16-mixed" and "not supported yet" in msg:
            refused = msg.splitlines()[-1] if msg else "refused"
            log(f"  bf16-mixed refused ({refused}); falling back to fp32")
            precision = "fp32"
            plan["precision"] = precision
            ok, msg, cmd = compile_program(autopar, model, batch, plan, out)
        if not ok:
            fail(f"autopar compile failed for batch {batch}:\n{msg}\ncommand: {cmd}")
        if not os.path.exists(os.path.join(out, "weights.json")):
            fail(f"{out}: no weights.json (autopar older than the weights.json manifest?)")
        for big in ("weights.bin", "model.onnx"):  # regenerated / not needed on the GPU side
            p = os.path.join(out, big)
            if os.path.exists(p):
                os.unlink(p)
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
        programs[str(batch)] = {
            "dir": f"b{batch}",
            "predicted_peak_bytes": report.get("bytes", {}).get("peak"),
            "trainable_parameters": report.get("trainable_parameters"),
            "flops_per_step_matmul": report.get("flops_per_step"),
            "model_source_bytes": max((os.path.getsize(os.path.join(out, f))
                                       for f in ("model.cu", "model.cpp")
                                       if os.path.exists(os.path.join(out, f))), default=0),
        }

    psi = parameter_count()
    for b, p in programs.items():
        if p["trainable_parameters"] not in (None, psi):
            log(f"  note: batch {b}: report.json counts {p['trainable_parameters']} trainable "
                f"parameters, the formula {psi}")

    count = TOKENS + 1
    r = subprocess.run([args.python, MAKE_TOKENS, "-o", os.path.join(d, "tokens.bin"),
                        "--count", str(count), "--vocab", str(CONFIG["vocab"]), "--seed", "0"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        fail(f"token file: {r.stdout.strip()}")

    bench = {
        "model": dict(CONFIG),
        "onnx": os.path.relpath(model, ROOT),
        "parameters": psi,
        "flops_per_token": flops_per_token(psi),
        "precision": precision,
        "precision_note": (f"bf16-mixed refused by autopar: {refused}" if refused else
                           "bf16-mixed accepted"),
        "plan": {"precision": precision, "optimizer": OPTIMIZER},
        "batches": sorted((int(b) for b in programs), reverse=True),
        "programs": programs,
        "tokens": "tokens.bin",
        "token_count": count,
    }
    with open(os.path.join(d, "bench.json"), "w") as f:
        json.dump(bench, f, indent=1)
        f.write("\n")

    size = dir_bytes(d)
    log(f"prepared {d}: batches {bench['batches']}, program precision {precision}, "
        f"{mib(size)} in all")
    for b in bench["batches"]:
        p = programs[str(b)]
        log(f"  b{b}: {mib(dir_bytes(os.path.join(d, p['dir'])))} (model source "
            f"{mib(p['model_source_bytes'])}), predicted peak "
            f"{(p['predicted_peak_bytes'] or 0) / 2**30:.1f} GiB")
    if size > PREPARED_LIMIT:
        fail(f"{d} is {mib(size)}, over the {mib(PREPARED_LIMIT)} that may travel")
    return 0


# ---------------------------------------------------------------------------
# --run: the compiled program
# ---------------------------------------------------------------------------
def gpu_info():
    """(name, total memory in bytes) of GPU 0: torch.cuda.get_device_name()
    in a child process (this one keeps no CUDA context), else nvidia-smi."""
    probe = ("import json, torch; p = torch.cuda.get_device_properties(0); "
             "print(json.dumps([torch.cuda.get_device_name(0), p.total_memory]))")
    try:
        r = subprocess.run([sys.executable, "-c", probe], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, timeout=300)
        if r.returncode == 0:
            name, total = json.loads(r.stdout.strip().splitlines()[-1])
            return name, int(total)
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        pass
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total",
                            "--format=csv,noheader,nounits", "-i", "0"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        name, total = r.stdout.strip().splitlines()[0].rsplit(",", 1)
        return name.strip(), int(float(total)) << 20
    except (OSError, ValueError, IndexError):
        return None, None


def cuda_architectures():
    """CMAKE_CUDA_ARCHITECTURES for GPU 0 when it is sm_90 (the program's
    default list, 80;90a, compiles everything twice), else None."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader",
                            "-i", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True)
        return "90a" if r.stdout.strip() == "9.0" else None
    except OSError:
        return None


def median_ms(values):
    timed = values[WARMUP:] if len(values) > WARMUP else values
    return statistics.median(timed)


def build_program(out, arch, build_name="build", extra=()):
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    build = os.path.join(out, build_name)
    cache = os.path.join(build, "CMakeCache.txt")
    if os.path.exists(cache):  # a build tree of another copy of DIR: start again
        with open(cache, errors="replace") as f:
            if f"CMAKE_HOME_DIRECTORY:INTERNAL={out}\n" not in f.read():
                shutil.rmtree(build)
    cfg = ["cmake", "-G", "Ninja", "-S", out, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
           f"-DCMAKE_CUDA_COMPILER={nvcc}", *extra]
    # cudnn_frontend's headers where this machine has them elsewhere than
    # where the program was compiled (scripts/gpu-check.sh carries them).
    frontend = os.environ.get("AUTOPAR_CUDNN_FRONTEND_DIR")
    if frontend:
        cfg.append(f"-DCUDNN_FRONTEND_INCLUDE_DIR={frontend}")
    if arch:
        cfg.append(f"-DCMAKE_CUDA_ARCHITECTURES={arch}")
    with open(os.path.join(out, f"{build_name}.log"), "w") as logf:
        for cmd in (cfg, ["cmake", "--build", build, "-j"]):
            logf.write(f"$ {shlex.join(cmd)}\n")
            logf.flush()
            if subprocess.run(cmd, stdout=logf, stderr=subprocess.STDOUT).returncode != 0:
                return False
    return True


def run_compiled(d, bench, steps, gpu_mem):
    """Largest prepared batch first; returns the row dict."""
    row = {"config": "autopar compiled program", "precision": bench["precision"],
           "attempts": []}
    arch = cuda_architectures()
    tokens = os.path.join(d, bench["tokens"])
    for batch in bench["batches"]:
        p = bench["programs"][str(batch)]
        out = os.path.join(d, p["dir"])
        attempt = {"batch": batch}
        row["attempts"].append(attempt)
        peak = p.get("predicted_peak_bytes")
        if peak and gpu_mem and peak > gpu_mem:
            attempt["result"] = (f"skipped: report.json predicts {peak / 2**30:.1f} GiB, "
                                 f"the GPU has {gpu_mem / 2**30:.1f} GiB")
            log(f"compiled, batch {batch}: {attempt['result']}")
            continue
        weights = os.path.join(out, "weights.bin")
        t0 = time.perf_counter()
        pack_weights(os.path.join(out, "weights.json"), weights)
        log(f"compiled, batch {batch}: weights.bin written in {time.perf_counter() - t0:.1f} s;"
            " building")
        t0 = time.perf_counter()
        if not build_program(out, arch):
            attempt["result"] = f"build failed ({os.path.join(out, 'build.log')})"
            log(f"compiled, batch {batch}: {attempt['result']}")
            os.unlink(weights)
            row["error"] = attempt["result"]
            return row
        log(f"compiled, batch {batch}: built in {time.perf_counter() - t0:.0f} s; training "
            f"{steps} steps")
        jsonl = os.path.join(out, "log.jsonl")
        train_log = os.path.join(out, "train.log")
        with open(train_log, "w") as logf:
            r = subprocess.run([os.path.join(out, "train"), "--data", tokens, "--steps",
                                str(steps), "--log", jsonl], stdout=logf,
                               stderr=subprocess.STDOUT)
        os.unlink(weights)
        with open(train_log, errors="replace") as f:
            text = f.read()
        if r.returncode != 0:
            last = text.strip().splitlines()[-1] if text.strip() else f"exit {r.returncode}"
            attempt["result"] = last
            log(f"compiled, batch {batch}: {last}")
            if "out of memory" in text:
                continue
            row["error"] = f"batch {batch}: {last}"
            return row
        steps_log = [json.loads(line) for line in open(jsonl) if line.strip()]
        ms = [s["ms"] for s in steps_log if "ms" in s]
        attempt["result"] = "ok"
        # The start-up line: the GPU and what ran the attention.
        for line in text.splitlines():
            if line.startswith("train: ") and "attention: " in line:
                row["attention"] = line.split("attention: ", 1)[1].rsplit(", ", 1)[0]
                log(f"compiled, batch {batch}: attention: {row['attention']}")
                break
        row.update(batch=batch, ms_per_step=median_ms(ms), step_ms=ms,
                   loss_first=steps_log[0].get("loss"), loss_last=steps_log[-1].get("loss"))
        log(f"compiled, batch {batch}: median {row['ms_per_step']:.1f} ms/step, loss "
            f"{row['loss_first']} -> {row['loss_last']}")
        return row
    row["error"] = "no batch fits" if row["attempts"] else "nothing prepared"
    return row


def profile_compiled(d, bench, batch, steps):
    """--profile: the program of `batch` rebuilt with AUTOPAR_PROFILE (every op
    timed after a stream synchronization, no CUDA graphs; it replaces
    OUTDIR/train) and run `steps` steps; returns the per-op-kind lines it
    prints at exit, or an error line."""
    out = os.path.join(d, bench["programs"][str(batch)]["dir"])
    weights = os.path.join(out, "weights.bin")
    pack_weights(os.path.join(out, "weights.json"), weights)
    try:
        if not build_program(out, cuda_architectures(), "build-profile",
                             ["-DAUTOPAR_PROFILE=ON"]):
            return [f"profile build failed ({os.path.join(out, 'build-profile.log')})"]
        r = subprocess.run([os.path.join(out, "train"), "--data",
                            os.path.join(d, bench["tokens"]), "--steps", str(steps)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    finally:
        os.unlink(weights)
    lines = r.stderr.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("profile:")), None)
    if r.returncode != 0 or start is None:
        return [f"profile run failed (exit {r.returncode}): "
                + (lines[-1] if lines else "no output")]
    return lines[start:]


# ---------------------------------------------------------------------------
# --run: PyTorch
# ---------------------------------------------------------------------------
def torch_worker(mode, batch, d, steps):
    """One PyTorch measurement in this process; prints 'RESULT {json}'.
    Exits with OOM_EXIT (after one 'out of memory' line) when it does not fit."""
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(ROOT, "test", "models"))
    import models

    c = CONFIG
    T = c["seq"]
    with open(os.path.join(d, "bench.json")) as f:
        bench = json.load(f)
    tokens = np.fromfile(os.path.join(d, bench["tokens"]), dtype="<u2", offset=1024)
    data = torch.from_numpy(tokens.astype(np.int64)).cuda()
    per_pass = (len(tokens) - 1) // (batch * T)
    if per_pass < 1:
        raise SystemExit(f"token file too short for batch {batch}")
    torch.manual_seed(0)
    torch.set_float32_matmul_precision("high")
    # The attention users write in PyTorch 2 (flash attention); "compile-pad"
    # is torch.compile with the vocabulary padded to 50304 as nanoGPT pads it
    # (its padded classes in the softmax: a peer for speed, not for losses).
    vocab = PADDED_VOCAB if mode == "compile-pad" else c["vocab"]
    model = models.GPT(vocab, c["d_model"], c["heads"], c["layers"], T,
                       tied=c["tied"], activation=c["activation"], sdpa=True)
    with torch.no_grad():  # the compiled program's initial values (initial_values())
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            elif name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.zero_()
    model = model.cuda()
    o = OPTIMIZER
    opt = torch.optim.AdamW(model.parameters(), lr=o["lr"], betas=tuple(o["betas"]),
                            weight_decay=o["weight_decay"], fused=True)
    fwd = torch.compile(model) if mode.startswith("compile") else model
    times, losses = [], []
    for s in range(steps):
        base = (s % per_pass) * batch * T  # docs/data.md: the program's windows
        x = data[base:base + batch * T].view(batch, T)
        y = data[base + 1:base + batch * T + 1].view(batch, T)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), o["max_grad_norm"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1000)
    print("RESULT " + json.dumps({"step_ms": times, "loss_first": losses[0],
                                  "loss_last": losses[-1],
                                  "max_memory_allocated": torch.cuda.max_memory_allocated()}),
          flush=True)


def torch_available():
    r = subprocess.run([sys.executable, "-c",
                        "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode == 0:
        return None
    if r.returncode == 3:
        return "torch.cuda.is_available() is False"
    return (r.stderr.strip().splitlines() or ["cannot import torch"])[-1]


def run_torch(d, mode, batches, steps):
    label = TORCH_LABELS[mode]
    row = {"config": label, "precision": "bf16 autocast", "attempts": []}
    for batch in batches:
        attempt = {"batch": batch}
        row["attempts"].append(attempt)
        log(f"{label}, batch {batch}: running {steps} steps")
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--_torch", mode,
                            str(batch), d, str(steps)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        result = None
        for line in r.stdout.splitlines():
            if line.startswith("RESULT "):
                result = json.loads(line[len("RESULT "):])
        if r.returncode == 0 and result:
            row.update(batch=batch, ms_per_step=median_ms(result["step_ms"]), **result)
            attempt["result"] = "ok"
            log(f"{label}, batch {batch}: median {row['ms_per_step']:.1f} ms/step, loss "
                f"{result['loss_first']:.4f} -> {result['loss_last']:.4f} "
                f"({time.perf_counter() - t0:.0f} s in all)")
            return row
        lines = r.stdout.strip().splitlines()
        attempt["result"] = lines[-1] if lines else f"exit {r.returncode}"
        log(f"{label}, batch {batch}: {attempt['result']}")
        if r.returncode == OOM_EXIT:
            continue
        with open(os.path.join(d, f"torch-{mode}-b{batch}.log"), "w") as f:
            f.write(r.stdout)
        row["error"] = f"batch {batch}: {attempt['result']}"
        return row
    row["error"] = "no batch fits"
    return row


# ---------------------------------------------------------------------------
# --run: the table
# ---------------------------------------------------------------------------
def finish_row(row, fpt, peak):
    if "ms_per_step" not in row:
        return row
    tokens = row["batch"] * CONFIG["seq"]
    row["tokens_per_s"] = tokens / (row["ms_per_step"] / 1000)
    row["model_tflops"] = row["tokens_per_s"] * fpt / 1e12
    row["mfu"] = row["tokens_per_s"] * fpt / peak if peak else None
    return row


def verdict(ok):
    return "n/a" if ok is None else ("met" if ok else "not met")


def print_table(rows):
    head = f"{'configuration':<26}{'precision':<15}{'batch':>6}{'ms/step':>10}" \
           f"{'tokens/s':>11}{'TFLOP/s':>9}{'MFU':>8}"
    log(head)
    log("-" * len(head))
    for r in rows:
        if "tokens_per_s" in r:
            mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "n/a"
            log(f"{r['config']:<26}{r['precision']:<15}{r['batch']:>6}{r['ms_per_step']:>10.1f}"
                f"{r['tokens_per_s']:>11.0f}{r['model_tflops']:>9.1f}{mfu:>8}")
        else:
            log(f"{r['config']:<26}{r['precision']:<15}  {r.get('error', 'not run')}")


def run(args):
    d = os.path.abspath(args.dir)
    try:
        with open(os.path.join(d, "bench.json")) as f:
            bench = json.load(f)
    except OSError as e:
        fail(f"{d}: not prepared ({e}); run --prepare first", 2)
    import importlib.util
    if importlib.util.find_spec("numpy") is None:  # weights.bin, the PyTorch worker
        fail(f"--run needs numpy, which {sys.executable} lacks (run it with the python3 "
             "that has torch)", 2)
    name, mem = gpu_info()
    peak = peak_bf16(name)
    fpt = bench["flops_per_token"]
    log(f"GPU: {name or 'unknown'}, " + (f"{mem / 2**30:.0f} GiB" if mem else "memory unknown")
        + "; dense bf16 peak " + (f"{peak / 1e12:.0f} TFLOP/s (REFERENCE.md)" if peak else
                                  "unknown (REFERENCE.md has H100, H200, A100): no MFU"))
    log(f"model: GPT-2 124M ({bench['parameters']:,} parameters), T {CONFIG['seq']}, "
        f"{fpt / 1e9:.3f} GFLOP per token (6 psi + 12 L h s); program precision "
        f"{bench['precision']} ({bench['precision_note']})")

    rows = [run_compiled(d, bench, args.steps, mem)]
    why_not = None if args.skip_torch else torch_available()
    if args.skip_torch or why_not:
        note = "skipped (--skip-torch)" if args.skip_torch else f"skipped: {why_not}"
        rows += [{"config": label, "precision": "bf16 autocast", "error": note}
                 for label in TORCH_LABELS.values()]
    else:
        for mode in TORCH_LABELS:
            rows.append(run_torch(d, mode, bench["batches"], args.steps))
    for r in rows:
        finish_row(r, fpt, peak)

    ours, tc = rows[0], rows[2]
    ratio = (ours["tokens_per_s"] / tc["tokens_per_s"]
             if "tokens_per_s" in ours and "tokens_per_s" in tc else None)
    mfu = ours.get("mfu")
    ratio_ok = None if ratio is None else ratio >= TARGET_RATIO
    mfu_ok = None if mfu is None else mfu >= TARGET_MFU
    log()
    print_table(rows)
    log()
    ratio_s = f"{ratio:.2f}x" if ratio is not None else "n/a"
    mfu_s = f"{100 * mfu:.1f}%" if mfu is not None else "n/a"
    log(f"compiled / torch.compile tokens/s: {ratio_s}   target >= {TARGET_RATIO:.2f}x   "
        f"{verdict(ratio_ok)}")
    log(f"compiled program MFU:              {mfu_s}   target >= {100 * TARGET_MFU:.0f}%   "
        f"{verdict(mfu_ok)}")
    if bench["precision"] == "fp32":
        log("(MFU is over the dense bf16 peak for every row; the fp32 program's GEMMs run "
            "without TF32, whose own dense peak REFERENCE.md gives as 67 TFLOP/s on H100)")
    summary = (f"compiled/torch.compile {ratio_s} (>= {TARGET_RATIO:.2f}x {verdict(ratio_ok)}), "
               f"MFU {mfu_s} (>= {100 * TARGET_MFU:.0f}% {verdict(mfu_ok)}), "
               f"program {bench['precision']}")
    if "tokens_per_s" not in ours:
        summary = f"compiled program: {ours.get('error', 'not run')}; {summary}"
    result = {
        "gpu": name, "gpu_memory_bytes": mem, "peak_bf16_flops": peak,
        "model": bench["model"], "parameters": bench["parameters"],
        "flops_per_token": fpt, "steps": args.steps, "warmup_steps_skipped": WARMUP,
        "program_precision": bench["precision"], "precision_note": bench["precision_note"],
        "rows": rows, "compiled_over_torch_compile": ratio,
        "targets": {"compiled_over_torch_compile": TARGET_RATIO, "mfu": TARGET_MFU},
        "ratio_met": ratio_ok, "mfu_met": mfu_ok, "summary": summary,
    }
    with open(os.path.join(d, "gpu_gpt2.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    if args.profile and "batch" in ours:
        log()
        log(f"per-op profile of the compiled program, batch {ours['batch']}, "
            f"{args.profile} steps (synchronized after every op, no CUDA graphs):")
        result["profile"] = profile_compiled(d, bench, ours["batch"], args.profile)
        for line in result["profile"]:
            log(line)
        with open(os.path.join(d, "gpu_gpt2.json"), "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    log(f"gpu_gpt2: {summary}")
    return 0 if "tokens_per_s" in ours else 1


def parse_batches(text):
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()}, reverse=True)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list: {text!r}") from None
    if not values or values[-1] < 1:
        raise argparse.ArgumentTypeError(f"batches must be positive: {text!r}")
    return values


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_torch"]:  # internal: one PyTorch measurement
        mode, batch, d, steps = argv[1], int(argv[2]), argv[3], int(argv[4])
        try:
            torch_worker(mode, batch, d, steps)
        except Exception as e:  # noqa: BLE001 (torch.compile wraps OOMs in its own types)
            if "out of memory" in str(e).lower():
                print(f"out of memory: {str(e).splitlines()[0][:200]}", flush=True)
                return OOM_EXIT
            raise
        return 0

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    phase = ap.add_mutually_exclusive_group()
    phase.add_argument("--prepare", metavar="DIR", help="phase 1: compile programs into DIR")
    phase.add_argument("--run", metavar="DIR", help="phase 2: build and measure on the GPU")
    ap.add_argument("--batches", type=parse_batches, default=BATCHES,
                    help="batch sizes to prepare (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=STEPS,
                    help=f"steps per measurement; the first {WARMUP} are not timed "
                         "(default: %(default)s)")
    ap.add_argument("--skip-torch", action="store_true", help="--run: only the compiled program")
    ap.add_argument("--profile", type=int, default=0, metavar="STEPS",
                    help="--run: afterwards rebuild the measured program with AUTOPAR_PROFILE "
                         "and print its time per op kind over STEPS steps (default: off)")
    ap.add_argument("--autopar", default=DEFAULT_AUTOPAR, help="default: %(default)s")
    ap.add_argument("--model", default=MODEL, help="the ONNX file, exported there if missing "
                    "(default: %(default)s)")
    ap.add_argument("--regenerate", action="store_true", help="export the model again")
    ap.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3")
                    else sys.executable,
                    help="interpreter with torch and onnx for the export (default: %(default)s)")
    args = ap.parse_args(argv)
    if args.steps <= WARMUP:
        ap.error(f"--steps must be more than {WARMUP}")
    if args.prepare:
        args.dir = args.prepare
        return prepare(args)
    if args.run:
        args.dir = args.run
        return run(args)
    args.dir = DEFAULT_DIR
    prepare(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
