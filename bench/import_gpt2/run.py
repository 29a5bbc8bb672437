#!/usr/bin/python3
"""Benchmark `autopar import` on a GPT-2 124M shaped ONNX model.

Usage:
  /usr/bin/python3 bench/import_gpt2/run.py [--model PATH] [--autopar BIN]
      [--repeat N] [--regenerate] [--cmd-for-testing CMD] [--json OUT.json]

1. If the model file is missing (default: build/bench/gpt2_124m.onnx under
   the repo root), generate it with test/models/export.py: GPT, 12 layers,
   d_model 768, 12 heads, vocab 50257, seq 1024, batch 1, opset 17, untied,
   exact GELU, random weights (seed 0).  This takes ~1-2 min and a few GB RAM.
2. Run `BIN import MODEL -o /dev/null` N times, measuring each run's wall time
   and peak RSS (ru_maxrss from os.wait4 on that child; on Linux this also
   covers the child's own waited-for descendants).
3. Print weight bytes (sum of initializer sizes), best wall time, peak RSS,
   RSS / weight bytes, and PASS/MISS against the targets
   (wall < 2 s, peak RSS < 1.5 x weight bytes).

Exit status: 0 whether targets are met or missed (this is a benchmark);
1 if the import command fails; 2 for usage errors, a missing binary, or a
failed model generation.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXPORT = os.path.join(ROOT, "test", "models", "export.py")
DEFAULT_MODEL = os.path.join(ROOT, "build", "bench", "gpt2_124m.onnx")
DEFAULT_AUTOPAR = os.path.join(ROOT, "build", "bin", "autopar")

GPT2_124M = ["--model", "gpt", "--vocab", "50257", "--d-model", "768", "--heads", "12",
             "--layers", "12", "--seq", "1024", "--batch", "1", "--opset", "17",
             "--activation", "gelu", "--seed", "0"]

TARGET_WALL_S = 2.0
TARGET_RSS_RATIO = 1.5


def log(msg):
    print(msg, flush=True)


def fmt_bytes(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.2f} {unit} ({n} B)"
    return f"{n} B"


def generate(model_path, python):
    log(f"generating GPT-2 124M shaped model -> {model_path}")
    cmd = [python, EXPORT] + GPT2_124M + ["-o", model_path]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        print(f"run.py: model generation failed (exit {r.returncode}): {shlex.join(cmd)}",
              file=sys.stderr)
        sys.exit(2)
    log(f"generated in {dt:.1f} s, {fmt_bytes(os.path.getsize(model_path))}")


def _weight_bytes_inproc(model_path):
    """Sum of initializer payload sizes (dims x element size), without loading
    external data.  Also counts sparse initializers' values+indices."""
    import numpy as np
    import onnx
    from onnx import helper

    m = onnx.load(model_path, load_external_data=False)

    def nbytes(t):
        n = 1
        for d in t.dims:
            n *= d
        if t.data_type == onnx.TensorProto.STRING:
            return sum(len(s) for s in t.string_data)
        if hasattr(helper, "tensor_dtype_to_np_dtype"):  # onnx >= 1.13
            np_type = helper.tensor_dtype_to_np_dtype(t.data_type)
        else:
            np_type = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.data_type]
        return n * np.dtype(np_type).itemsize

    total = sum(nbytes(t) for t in m.graph.initializer)
    total += sum(nbytes(s.values) + nbytes(s.indices) for s in m.graph.sparse_initializer)
    return total, len(m.graph.initializer)


def weight_bytes(model_path, python):
    """Run _weight_bytes_inproc in a separate process.

    Loading the model with onnx costs ~2x the file size of RSS.  If this
    process held that memory, every child we fork afterwards would report it:
    on Linux a child's ru_maxrss includes the RSS of the parent's address
    space it was forked from (exec() folds the old mm's high-water mark into
    the child's maxrss).  So the benchmark process itself must stay small.
    """
    r = subprocess.run([python, os.path.abspath(__file__), "--_weight-bytes", model_path],
                       stdout=subprocess.PIPE, check=True, text=True)
    d = json.loads(r.stdout)
    return d["bytes"], d["initializers"]


def self_rss_bytes():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_once(cmd, shell):
    """Run cmd, return (returncode, wall seconds, peak RSS bytes)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, shell=shell, stdin=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)  # keep Popen from re-waiting
    return p.returncode, wall, ru.ru_maxrss * 1024  # Linux: ru_maxrss is in KiB


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--_weight-bytes":  # internal helper mode
        b, n = _weight_bytes_inproc(argv[1])
        print(json.dumps({"bytes": b, "initializers": n}))
        return 0

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_MODEL,
                    help="ONNX model path; generated there if missing (default: %(default)s)")
    ap.add_argument("--autopar", default=DEFAULT_AUTOPAR,
                    help="autopar binary (default: %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, help="number of timed runs (default 3)")
    ap.add_argument("--regenerate", action="store_true", help="re-export even if the model exists")
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="interpreter with torch+onnx for generation (default: %(default)s)")
    ap.add_argument("--cmd-for-testing", metavar="CMD",
                    help="run this shell command instead of autopar; '{model}' is replaced by "
                         "the quoted model path (e.g. 'cat {model} > /dev/null')")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON to OUT")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")

    model = os.path.abspath(args.model)
    if args.regenerate or not os.path.exists(model):
        os.makedirs(os.path.dirname(model), exist_ok=True)
        generate(model, args.python)

    if args.cmd_for_testing:
        cmd = args.cmd_for_testing.replace("{model}", shlex.quote(model))
        shell = True
        cmd_str = cmd
    else:
        if not (os.path.isfile(args.autopar) and os.access(args.autopar, os.X_OK)):
            print(f"run.py: autopar binary not found or not executable: {args.autopar} "
                  "(build it first, or pass --autopar)", file=sys.stderr)
            return 2
        cmd = [args.autopar, "import", model, "-o", "/dev/null"]
        shell = False
        cmd_str = shlex.join(cmd)

    wbytes, n_init = weight_bytes(model, args.python)
    fbytes = os.path.getsize(model)
    log(f"model:        {model}")
    log(f"file size:    {fmt_bytes(fbytes)}")
    log(f"weight bytes: {fmt_bytes(wbytes)} in {n_init} initializers")
    log(f"command:      {cmd_str}")
    # A child's ru_maxrss can never be below the RSS of this process at fork time.
    log(f"RSS floor:    {fmt_bytes(self_rss_bytes())} (this runner's own RSS)")

    runs = []
    for i in range(args.repeat):
        rc, wall, rss = run_once(cmd, shell)
        runs.append({"rc": rc, "wall_s": wall, "peak_rss_bytes": rss})
        log(f"run {i + 1}/{args.repeat}: wall {wall:.3f} s, peak RSS {fmt_bytes(rss)}, exit {rc}")
        if rc != 0:
            print(f"run.py: import command failed with exit status {rc}: {cmd_str}",
                  file=sys.stderr)
            return 1

    best_wall = min(r["wall_s"] for r in runs)
    peak_rss = max(r["peak_rss_bytes"] for r in runs)
    ratio = peak_rss / wbytes if wbytes else float("inf")
    wall_ok = best_wall < TARGET_WALL_S
    rss_ok = ratio < TARGET_RSS_RATIO
    log(f"best wall:    {best_wall:.3f} s   target < {TARGET_WALL_S:g} s   "
        f"{'PASS' if wall_ok else 'MISS'}")
    log(f"peak RSS:     {fmt_bytes(peak_rss)}   RSS/weights {ratio:.3f}   "
        f"target < {TARGET_RSS_RATIO:g}   {'PASS' if rss_ok else 'MISS'}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": model, "file_bytes": fbytes, "weight_bytes": wbytes,
                       "initializers": n_init, "command": cmd_str, "runs": runs,
                       "best_wall_s": best_wall, "peak_rss_bytes": peak_rss,
                       "rss_over_weights": ratio,
                       "wall_target_s": TARGET_WALL_S, "rss_ratio_target": TARGET_RSS_RATIO,
                       "wall_pass": wall_ok, "rss_pass": rss_ok}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
