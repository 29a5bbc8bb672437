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

A test at an opset below 13 (the oldest the importer takes) is first
converted with onnx.version_converter, as the importer's message tells
users to do.

Node tests feed shape-like operands (Reshape's shape, Slice's starts, ...)
as graph inputs, while autopar needs them at compile time: the runner fixes
exactly those inputs with `--input-value NAME=input_<i>.pb`, and the program
checks that its input file still holds that value.

The CUDA target takes two phases, since GPU machines often lack LLVM/MLIR
(autopar itself):

  run.py --target cuda --prepare DIR --autopar A --data D   # here
  run.py --target cuda --run DIR                            # on the GPU

--prepare compiles every selected test with `--target cuda --no-build` and
keeps in DIR/tests/<test>/ only its model.cu, weights.bin and data/ (the
inputs and expected outputs), plus DIR/manifest.json: each test's outcome
at compile time, its outputs, the runtime sources and the expected
rejections (expected-rejections.txt and, for the CUDA-only ones,
expected-rejections-cuda.txt). An unlisted rejection fails it. --run builds
the CUDA runtime of forward-only programs once into a static library
(DIR/lib), compiles and links each model.cu against it with nvcc, runs it
and compares as above; --build-only stops after building.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# The repository root, whose runtime/ the CUDA run mode builds.
ROOT = os.path.dirname(os.path.dirname(HERE))

# The oldest ai.onnx opset the importer takes.
MIN_OPSET = 13

# Inputs, by op type, that the importer needs as constants known at import.
SHAPE_INPUTS = {
    "Reshape": [1],
    "Expand": [1],
    "Slice": [1, 2, 3, 4],
    "Trilu": [1],
    "OneHot": [1],
    "Unsqueeze": [1],
    "Squeeze": [1],
    "Split": [1],
    "ReduceSum": [1],
    "ReduceMean": [1],
    "ReduceMax": [1],
    "Dropout": [1, 2],
    "ConstantOfShape": [0],
    "Range": [0, 1, 2],
    "Pad": [1, 2, 3],
    "Tile": [1],
    "CumSum": [1],
    "ScatterND": [1],
    "TopK": [1],
    "ScatterElements": [1],
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


def run_program(onnx, exe, data, work, outputs):
    """Runs a built test program on the inputs in `data` into work/out and
    compares output i with data/output_<i>.pb; `outputs` are the graph
    outputs' names. (outcome, detail): outcome is pass, wrong or error."""
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    p = subprocess.run([exe, "--inputs", data, "--outputs", out],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return "error", "run failed (exit %d): %s" % (
            p.returncode, p.stderr.strip()[-2000:])
    problems = []
    for i, name in enumerate(outputs):
        _, want = load(onnx, os.path.join(data, "output_%d.pb" % i))
        path = os.path.join(out, "output_%d.pb" % i)
        if not os.path.exists(path):
            problems.append("output %d (%s) missing" % (i, name))
            continue
        _, got = load(onnx, path)
        why = compare(want, got)
        if why:
            problems.append("output %d (%s): %s" % (i, name, why))
    if problems:
        return "wrong", "; ".join(problems)
    return "pass", ""


class Runner:
    def __init__(self, args, onnx):
        self.args = args
        self.onnx = onnx

    def compile_test(self, test_dir, work):
        """Runs `autopar compile --forward-only --no-build` on the test into
        work: (None, (model, inputs, data)) when it compiled, else
        (outcome, detail) with outcome reject or error."""
        a = self.args
        onnx = self.onnx
        path = os.path.join(test_dir, "model.onnx")
        model = onnx.load(path)
        # A test written at an opset older than the importer takes is
        # converted with onnx.version_converter first, as the importer's
        # message tells users to (where the converter cannot, the original
        # is compiled and rejected).
        opset = max([o.version for o in model.opset_import
                     if o.domain in ("", "ai.onnx")] or [MIN_OPSET])
        if opset < MIN_OPSET:
            try:
                from onnx import version_converter
                converted = version_converter.convert_version(model,
                                                              MIN_OPSET)
                path = work + ".opset%d.onnx" % MIN_OPSET
                onnx.save(converted, path)
                model = converted
            except Exception:  # noqa: BLE001 (any converter failure)
                pass
        inits = {t.name for t in model.graph.initializer}
        inputs = [i for i in model.graph.input if i.name not in inits]
        data = os.path.join(test_dir, "test_data_set_0")
        fixed = set()
        for node in model.graph.node:
            for pos in SHAPE_INPUTS.get(node.op_type, []):
                if pos < len(node.input) and node.input[pos]:
                    fixed.add(node.input[pos])
        shutil.rmtree(work, ignore_errors=True)
        cmd = [a.autopar, "compile", path, "--forward-only", "--no-build",
               "-o", work]
        if a.target != "cpu":
            cmd += ["--target", a.target]
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
        if path != os.path.join(test_dir, "model.onnx"):
            os.remove(path)
        if p.returncode != 0:
            lines = p.stderr.strip().splitlines()
            if len(lines) != 1 or not lines[0].startswith("autopar: "):
                return "error", "compile did not fail with one line: %r" % (
                    p.stderr[-2000:],)
            reason = lines[0][len("autopar: "):]
            prefix = path + ": "
            if reason.startswith(prefix):
                reason = reason[len(prefix):]
            return "reject", reason
        return None, (model, inputs, data)

    def run_test(self, test_dir, name):
        """(outcome, detail): outcome is pass, reject, wrong or error."""
        a = self.args
        work = os.path.join(a.work, name)
        outcome, detail = self.compile_test(test_dir, work)
        if outcome:
            return outcome, detail
        model, inputs, data = detail
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
        outcome, detail = run_program(self.onnx, exe, data, work,
                                      [o.name for o in model.graph.output])
        if outcome == "pass" and not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        return outcome, detail

    def prepare_test(self, test_dir, name):
        """Compiles the test for --prepare: its model.cu, weights.bin and
        data (inputs and expected outputs) into PREPARE/tests/<name>/.
        Returns the test's manifest entry."""
        a = self.args
        work = os.path.join(a.prepare, "work", name)
        outcome, detail = self.compile_test(test_dir, work)
        if outcome:
            shutil.rmtree(work, ignore_errors=True)
            return {"outcome": outcome, "detail": detail}
        model, inputs, data = detail
        # The runtime's sources, one per line of the program's runtime
        # library (or executable) in its CMakeLists.txt.
        with open(os.path.join(work, "CMakeLists.txt")) as f:
            sources = re.findall(r"^\s*(runtime/\S+)\s*$", f.read(), re.M)
        data = self.fix_bfloat16_inputs(inputs, data, work)
        dest = os.path.join(a.prepare, "tests", name)
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        for f in ("model.cu", "weights.bin"):
            shutil.copy(os.path.join(work, f), dest)
        shutil.copytree(data, os.path.join(dest, "data"))
        shutil.rmtree(work, ignore_errors=True)
        return {"outcome": "compiled", "detail": "",
                "dir": os.path.join("tests", name),
                "outputs": [o.name for o in model.graph.output],
                "runtime_sources": sources}

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


def check(selected, results, expected, listed, unlisted, filtered):
    """FAIL lines for the outcomes of the selected tests. results maps each
    test to (outcome, detail); expected maps the listed rejections to their
    reasons (None: rejections are not checked), listed each of them to the
    file listing it; unlisted is where an unlisted rejection belongs."""
    failures = []
    for name in selected:
        outcome, detail = results[name]
        if outcome in ("wrong", "error"):
            failures.append("%s: %s: %s" % (name, outcome.upper(), detail))
        elif outcome == "reject" and expected is not None:
            if name not in expected:
                failures.append("%s: rejected but not in %s: %s" % (
                    name, unlisted, detail))
            elif expected[name] != detail:
                failures.append("%s: rejected for another reason than the "
                                "listed one:\n  listed: %s\n  now:    %s" % (
                                    name, expected[name], detail))
        elif outcome == "pass" and expected and name in expected and \
                not filtered:
            failures.append("%s: passes now; remove it from %s" % (
                name, listed[name]))
    if not filtered and expected is not None:
        for name in expected:
            if name not in results:
                failures.append("%s: listed in %s but not selected" % (
                    name, listed[name]))
    return failures


def summarize(selected, results, failures, min_pass_rate, filtered, start):
    """Prints the summary and the FAIL lines; returns the exit code."""
    counts = {"pass": 0, "reject": 0, "wrong": 0, "error": 0}
    for name in selected:
        outcome = results[name][0]
        counts[outcome] = counts.get(outcome, 0) + 1
    base = [n for n in selected if not n.endswith("_expanded")]
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
    if rate < min_pass_rate and not filtered:
        failures.append("pass rate %.1f%% is below %.0f%%" % (
            100 * rate, 100 * min_pass_rate))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


def select(args, onnx):
    """The node directory and the names of the selected tests."""
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
    return node_dir, selected


def run_cpu(args, onnx):
    start = time.time()
    node_dir, selected = select(args, onnx)
    os.makedirs(args.work, exist_ok=True)
    runner = Runner(args, onnx)

    def one(name):
        try:
            return runner.run_test(os.path.join(node_dir, name), name)
        except subprocess.TimeoutExpired:
            return "error", "timed out"

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = dict(zip(selected, pool.map(one, selected)))

    expected = None if args.write_rejections else read_expected(
        args.expected_rejections)
    listed = {name: args.expected_rejections for name in expected or {}}
    failures = check(selected, results, expected, listed,
                     args.expected_rejections, args.filter)
    if args.write_rejections:
        with open(args.expected_rejections, "w") as f:
            f.write("# ONNX node tests of supported op types that "
                    "`autopar compile --forward-only`\n# rejects, with the "
                    "reason it gives (test/conformance/run.py checks both).\n")
            for name in selected:
                if results[name][0] == "reject":
                    f.write("%s: %s\n" % (name, results[name][1]))
    return summarize(selected, results, failures, args.min_pass_rate,
                     args.filter, start)


def prepare_cuda(args, onnx):
    """--target cuda --prepare DIR: compiles every selected test, keeps what
    the GPU machine needs and writes DIR/manifest.json."""
    start = time.time()
    node_dir, selected = select(args, onnx)
    for sub in ("tests", "work", "lib", "manifest.json"):
        path = os.path.join(args.prepare, sub)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    os.makedirs(os.path.join(args.prepare, "tests"))
    os.makedirs(os.path.join(args.prepare, "work"))
    runner = Runner(args, onnx)

    def one(name):
        return runner.prepare_test(os.path.join(node_dir, name), name)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        entries = dict(zip(selected, pool.map(one, selected)))
    shutil.rmtree(os.path.join(args.prepare, "work"), ignore_errors=True)
    results = {n: (e["outcome"], e["detail"]) for n, e in entries.items()}

    # A CUDA rejection is listed in expected-rejections.txt (both targets)
    # or, where the CPU target compiles the test or gives another reason,
    # in expected-rejections-cuda.txt.
    cpu_expected = read_expected(args.expected_rejections)
    if args.write_rejections:
        with open(args.expected_rejections_cuda, "w") as f:
            f.write("# ONNX node tests of supported op types that "
                    "`autopar compile --forward-only\n# --target cuda` "
                    "rejects, where expected-rejections.txt (both targets)\n"
                    "# does not list them with that reason: the CUDA-only "
                    "rejections, with the\n# reason it gives "
                    "(test/conformance/run.py --target cuda checks both).\n")
            for name in selected:
                outcome, detail = results[name]
                if outcome == "reject" and cpu_expected.get(name) != detail:
                    f.write("%s: %s\n" % (name, detail))
    expected = dict(cpu_expected)
    listed = {name: args.expected_rejections for name in expected}
    if os.path.exists(args.expected_rejections_cuda):
        cuda_expected = read_expected(args.expected_rejections_cuda)
        expected.update(cuda_expected)
        listed.update((n, args.expected_rejections_cuda)
                      for n in cuda_expected)
    unlisted = [args.expected_rejections, args.expected_rejections_cuda]
    failures = check(selected, results,
                     None if args.write_rejections else expected, listed,
                     " or ".join(unlisted), args.filter)
    sources = {tuple(e["runtime_sources"]) for e in entries.values()
               if e["outcome"] == "compiled"}
    for e in entries.values():
        e.pop("runtime_sources", None)
    if len(sources) > 1:
        failures.append("the tests' CMakeLists.txt list different runtime "
                        "sources: %s" % sorted(sources))
    manifest = {
        "target": args.target,
        "onnx": onnx.__version__,
        "filter": args.filter,
        "min_pass_rate": args.min_pass_rate,
        "compare": "every output: type and shape equal; floating point "
                   "numpy.isclose(rtol=1e-5, atol=1e-6, equal_nan=True), "
                   "others exact",
        "runtime_sources": sorted(sources)[0] if sources else [],
        "expected_rejections": expected,
        "listed_in": {n: os.path.relpath(p, ROOT) for n, p in listed.items()},
        "unlisted": [os.path.relpath(p, ROOT) for p in unlisted],
        "selected": selected,
        "tests": entries,
    }
    with open(os.path.join(args.prepare, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    base = [n for n in selected if not n.endswith("_expanded")]
    if not base:
        failures.append("no node test was selected (is onnx installed?)")
    counts = {}
    for outcome, _ in results.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    print("onnx node tests of supported op types: %d (+%d _expanded)" % (
        len(base), len(selected) - len(base)))
    print("  prepared for the cuda target in %s: compiled %d; rejected at "
          "compile: %d; errors: %d; %.0f s" % (
              args.prepare, counts.get("compiled", 0), counts.get("reject", 0),
              counts.get("error", 0), time.time() - start))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


def tool(cmd):
    """cmd, through ccache where there is one."""
    return (["ccache"] if shutil.which("ccache") else []) + cmd


def build_cuda_runtime(args, sources, lib_dir):
    """Compiles the runtime sources of a forward-only CUDA program (as its
    CMakeLists.txt lists them) once into lib_dir/libAutoparRuntimeRunCuda.a.
    Returns the library, or None after printing why it does not build."""
    shutil.rmtree(lib_dir, ignore_errors=True)
    os.makedirs(lib_dir)

    def one(src):
        obj = os.path.join(lib_dir, src.replace("/", "_") + ".o")
        p = subprocess.run(tool([args.nvcc] + cuda_flags(args) +
                                ["-O2", "-c", os.path.join(ROOT, src),
                                 "-o", obj]),
                           capture_output=True, text=True)
        return obj, (None if p.returncode == 0 else
                     "%s: %s" % (src, (p.stdout + p.stderr)[-3000:]))

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        built = list(pool.map(one, sources))
    errors = [e for _, e in built if e]
    lib = os.path.join(lib_dir, "libAutoparRuntimeRunCuda.a")
    if not errors and sources:
        p = subprocess.run(["ar", "rcs", lib] + [o for o, _ in built],
                           capture_output=True, text=True)
        if p.returncode != 0:
            errors.append("ar: " + p.stderr)
    if not sources:
        errors.append("the manifest lists no runtime sources")
    if errors:
        for e in errors:
            print("FAIL the CUDA runtime does not build: " + e)
        return None
    return lib


def cuda_flags(args):
    """nvcc's flags for every source, as the generated CMakeLists.txt of a
    CUDA program sets them (the repository root for runtime/...)."""
    return ["-std=c++17", "--expt-relaxed-constexpr", "-arch=" + args.arch,
            "-I", ROOT, "-DAUTOPAR_TARGET_CUDA", "-DAUTOPAR_WITH_NCCL"]


def run_cuda(args, onnx):
    """--target cuda --run DIR: on the GPU machine, builds the runtime once,
    then builds, runs and compares every compiled test of the manifest."""
    start = time.time()
    with open(os.path.join(args.run, "manifest.json")) as f:
        manifest = json.load(f)
    selected = [n for n in manifest["selected"]
                if not args.filter or re.search(args.filter, n)]
    filtered = manifest["filter"] or args.filter
    tests = manifest["tests"]
    results = {n: (tests[n]["outcome"], tests[n]["detail"]) for n in selected}
    lib = build_cuda_runtime(args, manifest["runtime_sources"],
                             os.path.join(args.run, "lib"))
    if lib is None:
        return 1

    def one(name):
        t = tests[name]
        work = os.path.join(args.run, t["dir"])
        obj = os.path.join(work, "model.o")
        exe = os.path.join(work, "run")
        build = [tool([args.nvcc] + cuda_flags(args) +
                      ["-O1", "-c", os.path.join(work, "model.cu"),
                       "-o", obj]),
                 [args.nvcc, "-arch=" + args.arch, "-cudart", "shared", obj,
                  lib, "-lcublasLt", "-o", exe]]
        for c in build:
            p = subprocess.run(c, capture_output=True, text=True)
            if p.returncode != 0:
                return "error", "the generated code does not build: " + \
                    (p.stdout + p.stderr)[-3000:]
        if args.build_only:
            return "built", ""
        try:
            outcome, detail = run_program(
                onnx, exe, os.path.join(work, "data"), work, t["outputs"])
        except subprocess.TimeoutExpired:
            return "error", "timed out"
        if outcome == "pass" and not args.keep:
            for f in (obj, exe):
                os.remove(f)
            shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
        return outcome, detail

    compiled = [n for n in selected if results[n][0] == "compiled"]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results.update(zip(compiled, pool.map(one, compiled)))
    # The expected-rejections files, as paths from this checkout's root.
    listed = {n: os.path.join(ROOT, p)
              for n, p in manifest["listed_in"].items()}
    unlisted = " or ".join(os.path.join(ROOT, p)
                           for p in manifest["unlisted"])
    failures = check(selected, results, manifest["expected_rejections"],
                     listed, unlisted, filtered)
    if not args.build_only:
        return summarize(selected, results, failures,
                         manifest["min_pass_rate"], filtered, start)
    base = [n for n in selected if not n.endswith("_expanded")]
    built = sum(results[n][0] == "built" for n in compiled)
    print("onnx node tests of supported op types: %d (+%d _expanded)" % (
        len(base), len(selected) - len(base)))
    print("  --build-only: built %d of %d compiled for the cuda target "
          "(-arch=%s); errors: %d; %.0f s" % (
              built, len(compiled), args.arch, len(compiled) - built,
              time.time() - start))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--prepare", metavar="DIR",
                    help="--target cuda: compile the tests into DIR")
    ap.add_argument("--run", metavar="DIR",
                    help="--target cuda: build, run and compare the tests "
                    "prepared in DIR (on the GPU machine)")
    ap.add_argument("--autopar")
    ap.add_argument("--data",
                    help="where the node tests are (generated if missing)")
    ap.add_argument("--work", help="scratch directory")
    ap.add_argument("--runtime-lib",
                    help="the prebuilt forward-only runtime (static library)")
    ap.add_argument("--cxx", default="c++")
    ap.add_argument("--cxx-flags", default="")
    ap.add_argument("--link-flags", default="-ldnnl")
    ap.add_argument("--expected-rejections")
    ap.add_argument("--expected-rejections-cuda",
                    default=os.path.join(HERE, "expected-rejections-cuda.txt"),
                    help="--prepare: the rejections of the CUDA target only")
    ap.add_argument("--write-rejections", action="store_true",
                    help="rewrite the expected-rejections file from this run "
                    "(--prepare: the CUDA one)")
    ap.add_argument("--min-pass-rate", type=float, default=0.8)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--filter", default="", help="regex on test names")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directories of passing tests")
    ap.add_argument("--nvcc", default=shutil.which("nvcc") or
                    "/usr/local/cuda/bin/nvcc", help="--run: nvcc")
    ap.add_argument("--arch", default="native",
                    help="--run: nvcc's -arch (default: the GPU here)")
    ap.add_argument("--build-only", action="store_true",
                    help="--run: only build the runtime and every test "
                    "program (no GPU needed)")
    args = ap.parse_args()
    if args.write_rejections and args.filter:
        ap.error("--write-rejections lists every rejection: no --filter")
    if args.target == "cpu":
        if args.prepare or args.run:
            ap.error("--prepare and --run are for --target cuda")
        required = ["autopar", "data", "work", "runtime_lib",
                    "expected_rejections"]
    elif bool(args.prepare) == bool(args.run):
        ap.error("--target cuda needs --prepare DIR or --run DIR")
    elif args.prepare:
        required = ["autopar", "data"]
        if not args.expected_rejections:
            args.expected_rejections = os.path.join(
                HERE, "expected-rejections.txt")
    else:
        required = []
        if args.write_rejections:
            ap.error("--write-rejections is for --prepare")
    missing = ["--" + r.replace("_", "-") for r in required
               if not getattr(args, r)]
    if missing:
        ap.error("the following arguments are required: " + ", ".join(missing))
    import onnx

    if args.target == "cpu":
        return run_cpu(args, onnx)
    if args.prepare:
        return prepare_cuda(args, onnx)
    return run_cuda(args, onnx)


if __name__ == "__main__":
    sys.exit(main())
