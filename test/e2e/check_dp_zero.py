#!/usr/bin/python3
"""Check data parallelism and ZeRO stages 0-3 (and CPU offload) of one model.

  check_dp_zero.py MODEL.onnx [--input-shape NAME=D0,D1 ...] [--batch B]
      --data TOKENS.bin --steps K --workdir DIR --plan BASE.json
      [--dps 2,4] [--stages 0,1,2,3] [--offloads none,cpu] [--bucket-mb X]
      [--shard-size S]

BASE.json is the plan without "mesh" and "zero" (the optimizer, schedule,
...); each configuration adds {"mesh": {"dp": N}, "zero": {"stage": S,
"offload": O}} (and {"comm": {"bucket_mb": X}} with --bucket-mb). With
--shard-size S (hybrid sharding), "zero" gets "shard_size": S: ZeRO shards
over groups of S ranks (the mesh's dp axis) replicated over dp / S groups
(its dpr axis); Nd below is then S, the stages start at 1, and (c) also
requires the shards' all-reduce over dpr, exactly the ring volume
2(R-1)/R * 4psi/S of R = dp / S replicas.

First compiles BASE.json alone (one rank) and runs it, and trains the model
with torch_ref.py (PyTorch, --batch B). Then, for each dp in --dps, each
stage in --stages and each offload in --offloads ("cpu" only for stages >=
1), compiles the plan (`autopar compile MODEL --input-shape ... --plan P -o
DIR`), runs `mpirun --oversubscribe -np dp DIR/train --data ... --steps K
--log ...` (under `timeout`), and checks:

 (a) every step's loss equals the one-rank run's within relative 1e-5 and
     PyTorch's within 1e-4; its grad_norm the one-rank run's within 1e-5
     (and PyTorch's within 1e-4); its lr the one-rank run's within 1e-9
     (bf16-mixed: the wider tolerances of TOLERANCES below);
 (b) report.json's parallel section describes the configuration (mesh.dp,
     ranks, zero_stage, offload) and its model_state_bytes are ZeRO's closed
     forms exactly, with psi = trainable_parameters, Nd = dp and o the
     optimizer's state bytes per parameter (AdamW 8, SGD with momentum 4,
     SGD without 0):
        stage 0: params 4psi,    grads 4psi,    optimizer_state o*psi
        stage 1: params 4psi,    grads 4psi,    optimizer_state o*psi/Nd
        stage 2: params 4psi,    grads 4psi/Nd, optimizer_state o*psi/Nd
        stage 3: params 4psi/Nd, grads 4psi/Nd, optimizer_state o*psi/Nd
     total their sum (with "precision": "bf16-mixed" or "fp16-mixed":
     params and grads 2psi, and o + 4 for the f32 master: 2 + 2 + 12 =
     16 bytes per parameter under AdamW, as in the ZeRO paper; with
     "grad_dtype": "fp32" too, grads 4psi: 18 bytes); host_bytes =
     optimizer_state with offload "cpu", else
     0 (shards are ceil(numel/Nd) elements per tensor, so the forms hold
     exactly when Nd divides every trained tensor, as for the fixtures);
 (c) every step's logged comm_bytes equal report.json's
     comm_bytes_per_step (relative 1e-9; both keyed by the group, here
     "dp" only, then the kind), and what moves is what the stage
     implies (4psi below: the gradients' bytes, 2psi for 16-bit
     gradients; the parameters' for all_gather): stage 0 only all_reduce
     (the gradients: at least the ring
     volume 2(Nd-1)/Nd * 4psi, and less than twice that: once per step,
     also with micro-batches); stages 1 and 2 reduce_scatter (the
     gradients, at least (Nd-1)/Nd * 4psi), all_gather (the updated
     parameters, at least (Nd-1)/Nd * 4psi) and an all_reduce (the loss);
     stage 3 reduce_scatter as much, and more all_gather than stage 2 and
     than (Nd-1)/Nd * 4psi (the parameters are gathered for the forward,
     and those the backward uses again for the backward).

The base plan's clipping, if any, must be active: the one-rank run's
gradient norm exceeds max_grad_norm at every step (otherwise the test would
not exercise the clipped update under sharded gradients).

Prints one line per configuration (`OK dp=2 zero=1 offload=none`) and a
final summary; at the first failure, prints one line `FAIL dp=.. zero=..
offload=..: reason` (or `FAIL dp=1 (baseline): ...`) and exits 1. The output
of each compile and run is kept in WORKDIR/<configuration>/.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_losses  # noqa: E402

# Relative tolerances by the base plan's precision. fp32: the one-rank
# run's within 1e-5, PyTorch's (fp32) within 1e-4. bf16-mixed
# (docs/training.md): gradients are reduced in bf16 over dp, so a sharded
# run rounds differently from one rank; PyTorch runs in fp32.
TOLERANCES = {
    "fp32": {"loss_rank1": 1e-5, "loss_torch": 1e-4, "grad_rank1": 1e-5, "grad_torch": 1e-4},
    "bf16-mixed": {"loss_rank1": 5e-3, "loss_torch": 1e-2, "grad_rank1": 2e-2,
                   "grad_torch": 5e-2},
    "fp16-mixed": {"loss_rank1": 1e-3, "loss_torch": 2e-3, "grad_rank1": 2e-3,
                   "grad_torch": 5e-3},
}
LR_RTOL = 1e-9
COMM_RTOL = 1e-9
KINDS = ("all_reduce", "reduce_scatter", "all_gather")
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


class Failure(Exception):
    """A check failed; the message is the one-line reason."""


def int_list(text):
    try:
        values = [int(v) for v in text.split(",") if v != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}")
    if not values:
        raise argparse.ArgumentTypeError("expected at least one value")
    return values


def str_list(text):
    values = [v for v in text.split(",") if v != ""]
    if not values:
        raise argparse.ArgumentTypeError("expected at least one value")
    return values


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL.onnx")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1",
                   help="passed to autopar compile (repeatable)")
    p.add_argument("--batch", type=int, help="torch_ref.py --batch (a dynamic batch)")
    p.add_argument("--data", required=True, metavar="TOKENS.bin")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--workdir", required=True, metavar="DIR",
                   help="where the plans, programs and logs go (emptied first)")
    p.add_argument("--plan", required=True, metavar="BASE.json",
                   help="the plan without mesh and zero (optimizer, schedule, ...)")
    p.add_argument("--dps", type=int_list, default=[2, 4], help="dp sizes (2,4)")
    p.add_argument("--stages", type=int_list, default=[0, 1, 2, 3], help="ZeRO stages (0,1,2,3)")
    p.add_argument("--offloads", type=str_list, default=["none", "cpu"],
                   help="zero.offload values (none,cpu); cpu is skipped for stage 0")
    p.add_argument("--shard-size", type=int, default=0,
                   help="hybrid sharding: zero.shard_size of every configuration")
    p.add_argument("--bucket-mb", type=float, help="comm.bucket_mb of every dp plan")
    p.add_argument("--autopar", default="autopar", help="the compiler (autopar on PATH)")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--python", default=sys.executable, help="runs torch_ref.py")
    p.add_argument("--timeout", type=int, default=120,
                   help="seconds a compile or a run may take (120)")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error("--steps must be positive")
    for dp in args.dps:
        if dp < 2:
            p.error(f"--dps: {dp}: the dp sizes to check must be >= 2 (dp=1 is the baseline)")
    for s in args.stages:
        if s not in (0, 1, 2, 3):
            p.error(f"--stages: {s}: not a ZeRO stage")
    for o in args.offloads:
        if o not in ("none", "cpu"):
            p.error(f"--offloads: {o}: expected none or cpu")
    return args


def run(cmd, out_path, timeout, env=None):
    """Runs cmd with stdout and stderr into out_path; returns the exit status
    (124 when it ran past timeout, as coreutils' timeout says)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    with open(out_path, "w") as out:
        proc = subprocess.run(["timeout", "-k", "10", str(timeout)] + cmd, stdout=out,
                              stderr=subprocess.STDOUT, env=full_env)
    return proc.returncode


def last_line(path):
    try:
        with open(path, errors="replace") as f:
            lines = [l.strip() for l in f.read().replace("\r", "\n").split("\n") if l.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def compile_plan(args, plan, cfg_dir):
    os.makedirs(cfg_dir)
    plan_path = os.path.join(cfg_dir, "plan.json")
    with open(plan_path, "w") as f:
        json.dump(plan, f)
    out_dir = os.path.join(cfg_dir, "out")
    cmd = [args.autopar, "compile", args.model]
    for shape in args.input_shape:
        cmd += ["--input-shape", shape]
    cmd += ["--plan", plan_path, "-o", out_dir]
    log = os.path.join(cfg_dir, "compile.txt")
    rc = run(cmd, log, args.timeout)
    if rc != 0:
        raise Failure(f"autopar compile exited {rc} ({log}): {last_line(log)}")
    with open(os.path.join(out_dir, "report.json")) as f:
        report = json.load(f)
    return out_dir, report


def train(args, out_dir, cfg_dir, ranks):
    log_path = os.path.join(cfg_dir, "log.jsonl")
    cmd = [os.path.join(out_dir, "train"), "--data", args.data, "--steps", str(args.steps),
           "--log", log_path]
    if ranks > 1:
        cmd = [args.mpirun, "--oversubscribe", "-np", str(ranks)] + cmd
    out = os.path.join(cfg_dir, "run.txt")
    rc = run(cmd, out, args.timeout, MPI_ENV)
    if rc == 124 or rc == 137:
        raise Failure(f"the run did not end within {args.timeout} s ({out})")
    if rc != 0:
        raise Failure(f"the run exited {rc} ({out}): {last_line(out)}")
    records = []
    with open(log_path) as f:
        for line in f:
            records.append(json.loads(line))
    steps = [r.get("step") for r in records]
    if steps != list(range(args.steps)):
        raise Failure(f"{log_path}: logged steps {steps}, expected 0..{args.steps - 1}")
    return log_path, records


def compare(ours, ref, key, rtol, what, steps):
    a = compare_losses.read_log(ours, key)
    b = compare_losses.read_log(ref, key)
    _, failures, rows = compare_losses.compare(a, b, key, rtol, steps)
    if failures:
        raise Failure(f"{key} differs from {what} beyond rtol {rtol:g}: {failures[0]}"
                      + (f" (and {len(failures) - 1} more steps)" if len(failures) > 1 else ""))
    return max((r[0] for r in rows), default=0.0)


def opt_bytes_per_param(plan):
    opt = plan.get("optimizer", {})
    kind = opt.get("type", "adamw")
    if kind == "adamw":
        return 8
    if kind == "sgd":
        return 4 if opt.get("momentum", 0) != 0 else 0
    raise Failure(f"unknown optimizer type {kind!r} in the base plan")


def check_report(report, dp, stage, offload, obytes, wbytes, gbytes, shard_size=0):
    par = report.get("parallel")
    if not isinstance(par, dict):
        raise Failure("report.json has no \"parallel\" object")
    expect = {"ranks": dp, "zero_stage": stage, "offload": offload}
    for key, want in expect.items():
        if par.get(key) != want:
            raise Failure(f"report.json parallel.{key} is {par.get(key)!r}, expected {want!r}")
    # Hybrid sharding: ZeRO's shard group is the mesh's dp, the replicas dpr.
    shards = min(shard_size or dp, dp)
    mesh = par.get("mesh", {})
    if mesh.get("dp") != shards or mesh.get("dpr", 1) != dp // shards:
        raise Failure(f"report.json parallel.mesh is {mesh!r}, expected dp {shards}"
                      + (f" and dpr {dp // shards}" if shards < dp else ""))
    psi = report.get("trainable_parameters")
    if not isinstance(psi, int) or psi <= 0:
        raise Failure(f"report.json trainable_parameters is {psi!r}")

    def shard(nbytes, sharded):
        if not sharded:
            return nbytes
        if nbytes % shards:
            raise Failure(f"closed form {nbytes}/{shards} is not an integer: the fixture's "
                          f"trainable tensors are not all divisible by Nd={shards}")
        return nbytes // shards

    want = {"params": shard(wbytes * psi, stage >= 3),
            "grads": shard(gbytes * psi, stage >= 2),
            "optimizer_state": shard(obytes * psi, stage >= 1)}
    want["total"] = want["params"] + want["grads"] + want["optimizer_state"]
    got = par.get("model_state_bytes", {})
    for key in ("params", "grads", "optimizer_state", "total"):
        if got.get(key) != want[key]:
            raise Failure(f"report.json model_state_bytes.{key} is {got.get(key)!r}, expected "
                          f"{want[key]} (psi={psi}, Nd={shards}, stage {stage})")
    host = want["optimizer_state"] if offload == "cpu" else 0
    if par.get("host_bytes") != host:
        raise Failure(f"report.json host_bytes is {par.get('host_bytes')!r}, expected {host} "
                      f"(offload {offload})")
    return psi


def close(a, b, rtol):
    return a == b or abs(a - b) <= rtol * abs(b)


def groups_of(dp, shard_size):
    """The comm groups of a dp mesh: dp; with hybrid sharding dp (the shard
    group), dpr (the replicas) and both (the loss)."""
    return ("dp",) if not shard_size or shard_size >= dp else ("dp", "dpr", "dpr,dp")


def group_bytes(report, groups):
    """report.json's comm_bytes_per_step, by group (exactly `groups`), then
    kind."""
    per_step = report["parallel"].get("comm_bytes_per_step")
    if not isinstance(per_step, dict) or set(per_step) != set(groups) or any(
            not isinstance(per_step[g].get(k), (int, float)) for g in groups for k in KINDS):
        raise Failure(f"report.json comm_bytes_per_step is {per_step!r}, expected the "
                      f"kinds {KINDS} under the groups {groups} only")
    return per_step


def check_logged_comm(records, per_step, rtol=1e-9):
    """Every logged step's comm_bytes equal `per_step` (report.json's
    comm_bytes_per_step) group by group and kind by kind."""
    for r in records:
        logged = r.get("comm_bytes")
        if not isinstance(logged, dict) or set(logged) != set(per_step):
            raise Failure(f"step {r['step']}: logged comm_bytes groups "
                          f"{sorted(logged or {})} != report.json's {sorted(per_step)}")
        for g in per_step:
            for k in KINDS:
                got, want = logged[g].get(k), per_step[g][k]
                if not isinstance(got, (int, float)) or not close(got, want, rtol):
                    raise Failure(f"step {r['step']}: logged comm_bytes.{g}.{k} {got!r} "
                                  f"!= report.json's {want!r}")


def parse_meshes(text, axes, required):
    """`a=N,b=M:...` into [{a: N, b: M}, ...] over `axes`; each mesh's
    `required` axis at least 2."""
    meshes = []
    for item in text.split(":"):
        mesh = {}
        for part in item.split(","):
            key, _, value = part.partition("=")
            if key not in axes or not value.isdigit() or int(value) < 1:
                raise argparse.ArgumentTypeError(
                    f"{part!r}: expected {', '.join(a + '=N' for a in axes)}")
            mesh[key] = int(value)
        if mesh.get(required, 1) < 2:
            raise argparse.ArgumentTypeError(f"{item!r}: {required} must be at least 2")
        meshes.append(mesh)
    return meshes


def dp_bytes(report):
    """report.json's comm_bytes_per_step over the dp group, by kind."""
    return report["parallel"]["comm_bytes_per_step"]["dp"]


def check_comm(report, records, dp, stage, psi, wbytes, gbytes, stage2_all_gather,
               shard_size=0):
    groups = groups_of(dp, shard_size)
    all_groups = group_bytes(report, groups)
    check_logged_comm(records, all_groups, COMM_RTOL)
    per_step = all_groups["dp"]
    ar, rs, ag = (per_step[k] for k in KINDS)
    if len(groups) > 1:
        # The shards summed over the replicas: a ring over 1/Nd of the
        # gradients; the loss over every rank.
        replicas, shards = dp // shard_size, shard_size
        want = 2 * (replicas - 1) / replicas * gbytes * psi / shards
        got = all_groups["dpr"]["all_reduce"]
        if not close(got, want, COMM_RTOL):
            raise Failure(f"all_reduce over dpr {got:g} != the shards' ring volume {want:g} "
                          f"({replicas} replicas of {shards} shards)")
        if any(all_groups["dpr"][k] for k in KINDS if k != "all_reduce"):
            raise Failure(f"the replicas only all-reduce: {all_groups['dpr']!r}")
        ar = all_groups["dpr,dp"]["all_reduce"]
        dp = shards
    ring = (dp - 1) / dp * gbytes * psi  # one pass of a ring over the gradients
    ring_params = (dp - 1) / dp * wbytes * psi  # and over the parameters
    desc = f"all_reduce {ar:g}, reduce_scatter {rs:g}, all_gather {ag:g}"
    if not (ar > 0 or rs > 0 or ag > 0):
        raise Failure(f"comm_bytes_per_step all zero with dp={dp}")
    if stage == 0:
        if rs != 0 or ag != 0:
            raise Failure(f"stage 0 should only all_reduce, got {desc}")
        if ar < 2 * ring:
            raise Failure(f"stage 0 all_reduce {ar:g} < the gradients' ring volume "
                          f"{2 * ring:g}")
        # Once per step, whatever the micro-batches (DDP's no_sync).
        if ar >= 4 * ring:
            raise Failure(f"stage 0 all_reduce {ar:g}: the gradients are reduced more "
                          f"than once per step (ring volume {2 * ring:g})")
        return
    if ar <= 0:
        raise Failure(f"stage {stage} should all_reduce the loss, got {desc}")
    if rs < ring:
        raise Failure(f"stage {stage} reduce_scatter {rs:g} < the gradients' ring volume "
                      f"{ring:g} ({desc})")
    if stage in (1, 2):
        if ag < ring_params:
            raise Failure(f"stage {stage} all_gather {ag:g} < the parameters' ring volume "
                          f"{ring_params:g} ({desc})")
        return
    if not ag > ring_params:
        raise Failure(f"stage 3 all_gather {ag:g} is not more than the parameters' ring "
                      f"volume {ring_params:g} (gathered for the forward, then again for the "
                      f"backward) ({desc})")
    if stage2_all_gather is not None and not ag > stage2_all_gather:
        raise Failure(f"stage 3 all_gather {ag:g} is not more than stage 2's "
                      f"{stage2_all_gather:g}")


def main(argv=None):
    args = parse_args(argv)
    args.model = os.path.abspath(args.model)
    args.data = os.path.abspath(args.data)
    with open(args.plan) as f:
        base = json.load(f)
    for key in ("mesh", "zero"):
        if key in base:
            print(f"check_dp_zero.py: error: {args.plan}: the base plan must not set {key!r}",
                  file=sys.stderr)
            return 2
    obytes = opt_bytes_per_param(base)
    # Bytes per parameter and gradient element; bf16-mixed adds the f32
    # master to the optimizer state (ZeRO's K = 12 for Adam).
    precision = base.get("precision", "fp32")
    mixed = precision != "fp32"
    wbytes = 2 if mixed else 4
    # grad_dtype fp32: gradients accumulated and reduced in f32.
    gbytes = 4 if base.get("grad_dtype") == "fp32" else wbytes
    if mixed:
        obytes += 4
    tol = TOLERANCES[precision]
    if os.path.exists(args.workdir):
        shutil.rmtree(args.workdir)
    os.makedirs(args.workdir)

    # The one-rank baseline and PyTorch.
    name = "dp=1 (baseline)"
    try:
        cfg_dir = os.path.join(args.workdir, "dp1")
        out_dir, report = compile_plan(args, base, cfg_dir)
        check_report(report, 1, 0, "none", obytes, wbytes, gbytes)
        base_log, base_records = train(args, out_dir, cfg_dir, 1)
        ref_log = os.path.join(args.workdir, "torch.jsonl")
        cmd = [args.python, os.path.join(HERE, "torch_ref.py"), args.model, "--plan", args.plan,
               "--data", args.data, "--steps", str(args.steps), "-o", ref_log]
        if args.batch is not None:
            cmd += ["--batch", str(args.batch)]
        out = os.path.join(args.workdir, "torch.txt")
        rc = run(cmd, out, 20 * args.timeout)
        if rc != 0:
            raise Failure(f"torch_ref.py exited {rc} ({out}): {last_line(out)}")
        rel = compare(base_log, ref_log, "loss", tol["loss_torch"], "PyTorch's", args.steps)
        compare(base_log, ref_log, "grad_norm", tol["grad_torch"], "PyTorch's", args.steps)
        clip = base.get("optimizer", {}).get("max_grad_norm", 0)
        if clip > 0:
            low = [r["step"] for r in base_records if not r["grad_norm"] > clip]
            if low:
                raise Failure(f"max_grad_norm {clip:g} does not clip at steps {low}: "
                              f"make it smaller")
    except Failure as e:
        print(f"FAIL {name}: {e}", flush=True)
        return 1
    print(f"OK {name}: loss vs PyTorch max rel diff {rel:.1e}", flush=True)

    checked = 0
    for dp in args.dps:
        stage2_all_gather = {}
        for stage in args.stages:
            for offload in args.offloads:
                if offload == "cpu" and stage == 0:
                    continue
                name = f"dp={dp} zero={stage} offload={offload}"
                plan = dict(base)
                plan["mesh"] = {"dp": dp}
                plan["zero"] = {"stage": stage, "offload": offload}
                if args.shard_size:
                    if stage == 0:
                        continue
                    plan["zero"]["shard_size"] = args.shard_size
                if args.bucket_mb is not None:
                    plan["comm"] = dict(plan.get("comm", {}), bucket_mb=args.bucket_mb)
                cfg_dir = os.path.join(args.workdir, f"dp{dp}-z{stage}-{offload}")
                try:
                    out_dir, report = compile_plan(args, plan, cfg_dir)
                    psi = check_report(report, dp, stage, offload, obytes, wbytes,
                                       gbytes, args.shard_size)
                    log, records = train(args, out_dir, cfg_dir, dp)
                    rel = compare(log, base_log, "loss", tol["loss_rank1"],
                                  "the one-rank run's", args.steps)
                    compare(log, ref_log, "loss", tol["loss_torch"], "PyTorch's", args.steps)
                    grel = compare(log, base_log, "grad_norm", tol["grad_rank1"],
                                   "the one-rank run's", args.steps)
                    compare(log, ref_log, "grad_norm", tol["grad_torch"], "PyTorch's",
                            args.steps)
                    compare(log, base_log, "lr", LR_RTOL, "the one-rank run's", args.steps)
                    ag2 = stage2_all_gather.get(offload, stage2_all_gather.get("none"))
                    check_comm(report, records, dp, stage, psi, wbytes, gbytes, ag2,
                               args.shard_size)
                except Failure as e:
                    print(f"FAIL {name}: {e}", flush=True)
                    return 1
                if stage == 2:
                    stage2_all_gather[offload] = dp_bytes(report)["all_gather"]
                checked += 1
                print(f"OK {name}: loss max rel diff {rel:.1e}, grad_norm {grel:.1e}",
                      flush=True)
    print(f"PASSED: {checked} configurations of {os.path.basename(args.model)}, "
          f"{args.steps} steps each, equal to one rank and to PyTorch"
          + (f" within the {precision} tolerances" if mixed else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
