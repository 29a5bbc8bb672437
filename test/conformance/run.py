#!/usr/bin/python3
"""ONNX backend node tests against autopar's forward-only programs.

Generates ONNX's node tests from the installed onnx package (once, into
--data), selects every test whose op types the importer supports (`autopar
ops`), compiles each with `autopar compile --forward-only`, links the
generated model.cpp against the prebuilt forward-only runtime, runs it on
the test's inputs and compares each output with ONNX's expected one (rtol
1e-5, atol 1e-6 for floating point, exact for integers and bool).

Every selected test must either pass or be rejected by `autopar compile`
with the one-line reason listed for it in the expected-rejections file; a
wrong answer, a crash, an unlisted rejection or a listed test that now
passes fails the run, and so does a pass rate below --min-pass-rate of the
tests that are not `_expanded` variants.

Node tests feed shape-like operands (Reshape's shape, Slice's starts, ...)
as graph inputs, while autopar needs them at compile time: the runner fixes
exactly those inputs with `--input-value NAME=input_<i>.pb`, and the program
checks that its input file still holds that value.
"""

import argparse
import concurrent.futures
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import numpy as np

# Inputs, by op type, that the importer needs as constants known at import.
SHAPE_INPUTS = {
    "Reshape": [1],
    "Expand": [1],
    "Slice": [1, 2, 3, 4],
    "Unsqueeze": [1],
    "Squeeze": [1],
    "Split": [1],
    "ReduceSum": [1],
    "ReduceMean": [1],
    "ReduceMax": [1],
    "Dropout": [1, 2],
    "ConstantOfShape": [0],
    "Range": [0, 1, 2],
}


def generate(data_dir):
    """Writes ONNX's node tests under data_dir/node (onnx 1.12 on numpy 1.24
    needs the aliases numpy removed)."""
    code = ("import numpy as np\n"
            "for n, t in (('float', float), ('int', int), ('bool', bool),"
            " ('object', object)):\n"
            "    if not hasattr(np, n): setattr(np, n, t)\n"
            "import sys\n"
            "from onnx.backend.test import cmd_tools\n"
            "sys.argv = ['cmd_tools', 'generate-data', '-o', sys.argv[1]]\n"
            "cmd_tools.main()\n")
    tmp = data_dir + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run([sys.executable, "-c", code, tmp], check=True,
                   stdout=subprocess.DEVNULL)
    shutil.rmtree(data_dir, ignore_errors=True)
    os.rename(tmp, data_dir)


def supported_ops(autopar):
    text = subprocess.run([autopar, "ops"], check=True, capture_output=True,
                          text=True).stdout
    return {m.group(1) for m in re.finditer(r"^\| (\w+) \|", text, re.M)
            if m.group(1) != "op"}


def load(onnx, path):
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t, numpy_helper.to_array(t)


def compare(expected, got):
    """None when `got` matches `expected`, else why not."""
    if expected.dtype != got.dtype:
        return "type %s, expected %s" % (got.dtype, expected.dtype)
    if expected.shape != got.shape:
        return "shape %s, expected %s" % (list(got.shape), list(expected.shape))
    if expected.dtype.kind in "fc":
        ok = np.isclose(got, expected, rtol=1e-5, atol=1e-6, equal_nan=True)
    else:
        ok = got == expected
    if ok.all():
        return None
    bad = np.argwhere(~ok)[0]
    i = tuple(int(x) for x in bad)
    return "%d of %d elements differ, first at %s: %r, expected %r" % (
        int((~ok).sum()), ok.size, list(i), got[i].item(), expected[i].item())


class Runner:
    def __init__(self, args, onnx):
        self.args = args
        self.onnx = onnx

    def run_test(self, test_dir, name):
        """(outcome, detail): outcome is pass, reject, wrong or error."""
        a = self.args
        onnx = self.onnx
        model = onnx.load(os.path.join(test_dir, "model.onnx"))
        inits = {t.name for t in model.graph.initializer}
        inputs = [i for i in model.graph.input if i.name not in inits]
        data = os.path.join(test_dir, "test_data_set_0")
        fixed = set()
        for node in model.graph.node:
            for pos in SHAPE_INPUTS.get(node.op_type, []):
                if pos < len(node.input) and node.input[pos]:
                    fixed.add(node.input[pos])
        work = os.path.join(a.work, name)
        shutil.rmtree(work, ignore_errors=True)
        cmd = [a.autopar, "compile", os.path.join(test_dir, "model.onnx"),
               "--forward-only", "--no-build", "-o", work]
        for i, inp in enumerate(inputs):
            pb = os.path.join(data, "input_%d.pb" % i)
            if inp.name in fixed:
                cmd += ["--input-value", "%s=%s" % (inp.name, pb)]
                continue
            # The data's shape completes dynamic dims; where the data
            # contradicts the model, the compile says so.
            if not inp.type.HasField("tensor_type"):
                continue  # a sequence or optional: the import rejects it
            dims = [d.dim_value if d.HasField("dim_value") else None
                    for d in inp.type.tensor_type.shape.dim]
            _, value = load(onnx, pb)
            if value.size and value.ndim and list(value.shape) != dims:
                cmd += ["--input-shape", "%s=%s" % (
                    inp.name, ",".join(str(d) for d in value.shape))]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            lines = p.stderr.strip().splitlines()
            if len(lines) != 1 or not lines[0].startswith("autopar: "):
                return "error", "compile did not fail with one line: %r" % (
                    p.stderr[-2000:],)
            reason = lines[0][len("autopar: "):]
            prefix = os.path.join(test_dir, "model.onnx") + ": "
            if reason.startswith(prefix):
                reason = reason[len(prefix):]
            return "reject", reason
        obj = os.path.join(work, "model.o")
        exe = os.path.join(work, "run")
        cxx = shlex.split(a.cxx)
        if shutil.which("ccache"):
            cxx = ["ccache"] + cxx
        build = [cxx + ["-std=c++17", "-O1", "-march=native", "-fopenmp",
                        "-w"] + shlex.split(a.cxx_flags) +
                 ["-I", work, "-c", os.path.join(work, "model.cpp"), "-o", obj],
                 cxx + ["-fopenmp", obj, a.runtime_lib, "-o", exe] +
                 shlex.split(a.link_flags)]
        for c in build:
            p = subprocess.run(c, capture_output=True, text=True)
            if p.returncode != 0:
                return "error", "the generated code does not build: " + \
                    p.stderr[-3000:]
        data = self.fix_bfloat16_inputs(inputs, data, work)
        out = os.path.join(work, "out")
        os.makedirs(out)
        p = subprocess.run([exe, "--inputs", data, "--outputs", out],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            return "error", "run failed (exit %d): %s" % (
                p.returncode, p.stderr.strip()[-2000:])
        problems = []
        for i, o in enumerate(model.graph.output):
            _, want = load(onnx, os.path.join(data, "output_%d.pb" % i))
            path = os.path.join(out, "output_%d.pb" % i)
            if not os.path.exists(path):
                problems.append("output %d (%s) missing" % (i, o.name))
                continue
            _, got = load(onnx, path)
            why = compare(want, got)
            if why:
                problems.append("output %d (%s): %s" % (i, o.name, why))
        if problems:
            return "wrong", "; ".join(problems)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        return "pass", ""


    def fix_bfloat16_inputs(self, inputs, data, work):
        """onnx 1.12 writes the BFLOAT16 inputs of its tests as UINT16
        tensors (numpy has no bfloat16): returns a directory of the inputs
        where those files say BFLOAT16, bits unchanged."""
        onnx = self.onnx
        fixed = None
        for i, inp in enumerate(inputs):
            if inp.type.tensor_type.elem_type != onnx.TensorProto.BFLOAT16:
                continue
            t, _ = load(onnx, os.path.join(data, "input_%d.pb" % i))
            if t.data_type != onnx.TensorProto.UINT16:
                continue
            if fixed is None:
                fixed = os.path.join(work, "inputs")
                shutil.copytree(data, fixed)
            t.data_type = onnx.TensorProto.BFLOAT16
            if not t.raw_data:
                t.raw_data = np.array(t.int32_data, np.uint16).tobytes()
                del t.int32_data[:]
            with open(os.path.join(fixed, "input_%d.pb" % i), "wb") as f:
                f.write(t.SerializeToString())
        return fixed or data


def read_expected(path):
    expected = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(": ")
            expected[name] = reason
    return expected


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--autopar", required=True)
    ap.add_argument("--data", required=True,
                    help="where the node tests are (generated if missing)")
    ap.add_argument("--work", required=True, help="scratch directory")
    ap.add_argument("--runtime-lib", required=True,
                    help="the prebuilt forward-only runtime (static library)")
    ap.add_argument("--cxx", default="c++")
    ap.add_argument("--cxx-flags", default="")
    ap.add_argument("--link-flags", default="-lopenblas")
    ap.add_argument("--expected-rejections", required=True)
    ap.add_argument("--write-rejections", action="store_true",
                    help="rewrite the expected-rejections file from this run")
    ap.add_argument("--min-pass-rate", type=float, default=0.8)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--filter", default="", help="regex on test names")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directories of passing tests")
    args = ap.parse_args()
    if args.write_rejections and args.filter:
        ap.error("--write-rejections lists every rejection: no --filter")
    import onnx

    start = time.time()
    node_dir = os.path.join(args.data, "node")
    if not os.path.isdir(node_dir):
        generate(args.data)
    ops = supported_ops(args.autopar)
    selected = []
    for name in sorted(os.listdir(node_dir)):
        if args.filter and not re.search(args.filter, name):
            continue
        model = onnx.load(os.path.join(node_dir, name, "model.onnx"),
                          load_external_data=False)
        if all(n.op_type in ops for n in model.graph.node):
            selected.append(name)
    os.makedirs(args.work, exist_ok=True)
    runner = Runner(args, onnx)

    def one(name):
        try:
            return runner.run_test(os.path.join(node_dir, name), name)
        except subprocess.TimeoutExpired:
            return "error", "timed out"

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = dict(zip(selected, pool.map(one, selected)))

    expected = {} if args.write_rejections else read_expected(
        args.expected_rejections)
    failures = []
    counts = {"pass": 0, "reject": 0, "wrong": 0, "error": 0}
    base = [n for n in selected if not n.endswith("_expanded")]
    for name in selected:
        outcome, detail = results[name]
        counts[outcome] += 1
        if outcome in ("wrong", "error"):
            failures.append("%s: %s: %s" % (name, outcome.upper(), detail))
        elif outcome == "reject" and not args.write_rejections:
            if name not in expected:
                failures.append("%s: rejected but not in %s: %s" % (
                    name, args.expected_rejections, detail))
            elif expected[name] != detail:
                failures.append("%s: rejected for another reason than the "
                                "listed one:\n  listed: %s\n  now:    %s" % (
                                    name, expected[name], detail))
        elif outcome == "pass" and name in expected and not args.filter:
            failures.append("%s: passes now; remove it from %s" % (
                name, args.expected_rejections))
    if not args.filter and not args.write_rejections:
        for name in expected:
            if name not in results:
                failures.append("%s: listed in %s but not selected" % (
                    name, args.expected_rejections))
    if args.write_rejections:
        with open(args.expected_rejections, "w") as f:
            f.write("# ONNX node tests of supported op types that "
                    "`autopar compile --forward-only`\n# rejects, with the "
                    "reason it gives (test/conformance/run.py checks both).\n")
            for name in selected:
                if results[name][0] == "reject":
                    f.write("%s: %s\n" % (name, results[name][1]))
    if not base:
        failures.append("no node test was selected (is onnx installed?)")
    passed = sum(results[n][0] == "pass" for n in base)
    rate = passed / len(base) if base else 0.0
    expanded = [n for n in selected if n.endswith("_expanded")]
    print("onnx node tests of supported op types: %d (+%d _expanded)" % (
        len(base), len(expanded)))
    print("  passed %d of %d (%.1f%%); _expanded passed %d of %d" % (
        passed, len(base), 100 * rate,
        sum(results[n][0] == "pass" for n in expanded), len(expanded)))
    print("  rejected at compile: %d; wrong: %d; errors: %d; %.0f s" % (
        counts["reject"], counts["wrong"], counts["error"],
        time.time() - start))
    if rate < args.min_pass_rate and not args.filter:
        failures.append("pass rate %.1f%% is below %.0f%%" % (
            100 * rate, 100 * args.min_pass_rate))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
