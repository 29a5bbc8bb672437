#!/usr/bin/python3
"""SIGTERM / SIGINT to `autopar compile` and to `OUTDIR/train`.

  check_interrupt.py compile --signal TERM --workdir DIR -- autopar compile MODEL ... -o DIR/out
  check_interrupt.py train --signal INT --workdir DIR --data T.bin --train OUTDIR/train

compile: starts the command, waits until its build runs (DIR/out.tmp-*/build
exists), sends the signal to autopar, and requires: exit status 128 + the
signal, one line on stderr, neither DIR/out nor DIR/out.tmp-* left, and no
process of the build (cmake, ninja, the compiler: a command line naming the
temporary directory) still running.

train: starts `train --data T.bin --steps 1000000 --save DIR/ck --log
DIR/run.jsonl`, waits for 3 logged steps, sends the signal, and requires:
exit status 128 + the signal, one line on stderr naming the step, a
checkpoint at DIR/ck of the steps logged (S); then resuming it to S + 3
steps logs the losses of an uninterrupted run of S + 3 steps, bit for bit.

Prints "OK <what>" per check; on the first failure "FAIL <what>: <why>" and
exits 1.
"""
import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time


class Failure(Exception):
    pass


def wait_for(predicate, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise Failure(f"{what} did not happen within {seconds} s")


def finish(proc, seconds=60):
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise Failure(f"the process did not end within {seconds} s of the signal")
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def check_status(code, err, sig):
    if code != 128 + sig:
        raise Failure(f"exit status {code}, expected {128 + sig}; stderr: {err!r}")
    lines = [l for l in err.splitlines() if l.strip()]
    if len(lines) != 1:
        raise Failure(f"stderr has {len(lines)} lines, expected 1: {err!r}")
    return lines[0]


def compile_case(args, sig):
    out = os.path.join(args.workdir, "out")
    proc = subprocess.Popen(args.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: glob.glob(out + ".tmp-*/build") or proc.poll() is not None, 300,
             "the build")
    if proc.poll() is not None:
        raise Failure(f"compile ended before its build started (status {proc.returncode})")
    tmp = glob.glob(out + ".tmp-*")[0]
    time.sleep(0.2)  # cmake is configuring by now
    proc.send_signal(sig)
    code, _, err = finish(proc)
    line = check_status(code, err, sig)
    print(f"OK compile: exit {code}: {line}")
    left = [p for p in (out, tmp) if os.path.exists(p)] + glob.glob(out + ".tmp-*")
    if left:
        raise Failure(f"left behind: {left}")
    print("OK compile: nothing left at OUTDIR or beside it")
    time.sleep(0.5)
    running = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if os.path.basename(tmp).encode() in f.read():
                        running.append(pid)
            except OSError:
                pass
    if running:
        raise Failure(f"build processes still running: {running}")
    print("OK compile: the build stopped")


def read_log(path):
    with open(path) as f:
        return [json.loads(l) for l in f if '"loss"' in l]


def train_case(args, sig):
    train = args.command[0]
    ck = os.path.join(args.workdir, "ck")
    log = os.path.join(args.workdir, "run.jsonl")
    proc = subprocess.Popen([train, "--data", args.data, "--steps", "1000000", "--save", ck,
                             "--log", log], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: proc.poll() is not None or
             (os.path.exists(log) and len(read_log(log)) >= 3), 120, "3 logged steps")
    if proc.poll() is not None:
        raise Failure(f"train ended before 3 steps (status {proc.returncode}): "
                      f"{proc.stderr.read().decode(errors='replace')!r}")
    proc.send_signal(sig)
    code, _, err = finish(proc)
    line = check_status(code, err, sig)
    steps = len(read_log(log))
    name = "SIGINT" if sig == signal.SIGINT else "SIGTERM"
    expected = f"train: {name}: stopped after step {steps} of 1000000; checkpoint saved to {ck}"
    if line != expected:
        raise Failure(f"stderr {line!r}, expected {expected!r}")
    print(f"OK train: exit {code}: stopped after step N of 1000000")
    with open(os.path.join(ck, "manifest.json")) as f:
        saved = json.load(f)["step"]
    if saved != steps:
        raise Failure(f"the checkpoint is of step {saved}, {steps} steps were logged")
    print("OK train: the checkpoint holds every logged step")
    # Resume to S + 3 against an uninterrupted run of S + 3 steps.
    total = steps + 3
    resumed = os.path.join(args.workdir, "resumed.jsonl")
    with open(log) as f, open(resumed, "w") as g:
        g.write(f.read())
    full = os.path.join(args.workdir, "full.jsonl")
    for cmd in ([train, "--data", args.data, "--steps", str(total), "--resume", ck, "--log",
                 resumed],
                [train, "--data", args.data, "--steps", str(total), "--log", full]):
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
        if r.returncode != 0:
            raise Failure(f"{' '.join(cmd)}: status {r.returncode}: {r.stderr.decode()!r}")
    a = [(r["step"], r["loss"], r["grad_norm"]) for r in read_log(resumed)]
    b = [(r["step"], r["loss"], r["grad_norm"]) for r in read_log(full)]
    if a != b:
        raise Failure(f"the resumed run logs {a[-4:]}, the uninterrupted one {b[-4:]}")
    print("OK train: resumed, the losses of an uninterrupted run")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["compile", "train"])
    p.add_argument("--signal", default="TERM")
    p.add_argument("--workdir", required=True)
    p.add_argument("--data")
    p.add_argument("--train", help="the train program (train)")
    # The command of `compile` follows "--".
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    args = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.command = command or [args.train]
    sig = getattr(signal, "SIG" + args.signal)
    os.makedirs(args.workdir, exist_ok=True)
    try:
        (compile_case if args.what == "compile" else train_case)(args, sig)
    except Failure as e:
        print(f"FAIL {args.what}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
