"""What the CPU benchmarks over several ranks share (bench/dp_overhead,
bench/tp, bench/pp): a work directory with a test model and a token file,
one compile, one training run over MPI ranks, and the log's median step."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
AUTOPAR = os.path.join(ROOT, "build/bin/autopar")


def parse_args(doc, steps):
    """The benchmarks' command line: --steps N (default `steps`), --keep."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    return parser.parse_args()


def run(cmd, env):
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)


def mpi_env(**extra):
    """The environment, with Open MPI allowed to run as root."""
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                **extra)


class Work:
    """A temporary directory holding a model from test/models/export.py and a
    token file for `steps` steps of `tokens_per_step` tokens."""

    def __init__(self, name, env, keep):
        self.env, self.keep = env, keep
        self.dir = tempfile.mkdtemp(prefix=f"autopar-{name}-")

    def path(self, name):
        return os.path.join(self.dir, name)

    def export(self, model, config, batch, *extra):
        """The ONNX model `model` (gpt, bert...) of config's vocab, d_model,
        heads, layers and seq at `batch`."""
        out = self.path("model.onnx")
        run([PY, os.path.join(ROOT, "test/models/export.py"), "--model", model,
             "--vocab", str(config["vocab"]), "--d-model", str(config["d_model"]),
             "--heads", str(config["heads"]), "--layers", str(config["layers"]),
             "--seq", str(config["seq"]), "--batch", str(batch), "--opset", "17",
             "--seed", "0", *extra, "-o", out], self.env)
        return out

    def tokens(self, count, vocab):
        out = self.path("tokens.bin")
        run([PY, os.path.join(ROOT, "test/e2e/make_tokens.py"), "-o", out, "--count", str(count),
             "--vocab", str(vocab)], self.env)
        return out

    def compile(self, model, name, plan, *extra):
        """The program compiled from `model` under the plan dictionary `plan`."""
        plan_path = self.path(f"plan-{name}.json")
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        prog = self.path(f"prog-{name}")
        run([AUTOPAR, "compile", model, "--plan", plan_path, "-o", prog, *extra], self.env)
        return prog

    def train(self, prog, ranks, args, env=None):
        """Runs the program's trainer with `args` on `ranks` MPI ranks (one
        process without mpirun for one rank)."""
        cmd = [os.path.join(prog, "train"), *args]
        if ranks > 1:
            cmd = ["mpirun", "--oversubscribe", "-np", str(ranks), "-x", "OMP_NUM_THREADS",
                   "-x", "OPENBLAS_NUM_THREADS", "--bind-to", "none"] + cmd
        run(cmd, env or self.env)

    def train_log(self, prog, ranks, tokens, steps, threads):
        """Trains `steps` steps of `tokens` on `ranks` ranks of `threads`
        threads each; the rows of the log."""
        log = prog + "-log.jsonl"
        self.train(prog, ranks, ["--data", tokens, "--steps", str(steps), "--log", log],
                   threads_env(self.env, threads))
        return log_rows(log)

    def close(self):
        if self.keep:
            print(f"work directory: {self.dir}")
        else:
            shutil.rmtree(self.dir)


def threads_env(env, threads):
    """`env` with OpenMP and OpenBLAS held to `threads` threads."""
    threads = str(max(1, threads))
    return dict(env, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads)


def report(prog):
    """The program's report.json."""
    with open(os.path.join(prog, "report.json")) as f:
        return json.load(f)


def log_rows(log):
    with open(log) as f:
        return [json.loads(line) for line in f]


def median_ms(rows, steps):
    """The median step time after the first fifth of the steps (warm-up)."""
    warm = max(1, steps // 5)
    return statistics.median(r["ms"] for r in rows[warm:])
