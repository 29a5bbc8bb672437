#!/usr/bin/python3
"""Kill one MPI rank of a running job and check the job ends.

  kill_rank.py --rank R --log LOG.jsonl [--timeout S] [--signal STOP]
      -- mpirun ... train ... --log LOG.jsonl

Runs the command, waits until LOG has a step (the ranks are in the
training loop), sends SIGKILL (or --signal) to the process of world rank R (found by
its OMPI_COMM_WORLD_RANK among the command's descendants), and waits for
the command to end. Prints the command's output, then one line: the exit
status and the seconds from the kill to the end. Exit 0 when the command
ended with a non-zero status within --timeout seconds (default 60) of the
kill; 1 when it succeeded, never started training, or hung (then it is
killed).
"""
import argparse
import os
import signal
import subprocess
import sys
import time


def descendants(root):
    children = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(pid))
    out, work = [], [root]
    while work:
        p = work.pop()
        for c in children.get(p, []):
            out.append(c)
            work.append(c)
    return out


def world_rank(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                    return int(item.split(b"=", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--signal", default="KILL",
                   help="the signal's name without SIG (STOP: a rank that hangs)")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.time() + args.timeout
    victim = None
    while time.time() < deadline and proc.poll() is None and victim is None:
        time.sleep(0.1)
        started = os.path.exists(args.log) and '"step"' in open(args.log).read()
        if not started:
            continue
        for pid in descendants(proc.pid):
            if world_rank(pid) == args.rank and not os.path.basename(
                    os.readlink(f"/proc/{pid}/exe")).startswith(("orted", "prted")):
                victim = pid
                break
    if victim is None:
        os.killpg(proc.pid, signal.SIGKILL)
        print(proc.communicate()[0].decode(errors="replace"))
        print(f"kill_rank.py: rank {args.rank} never reached the training loop "
              f"(or the job ended first: status {proc.returncode})", file=sys.stderr)
        return 1
    os.kill(victim, getattr(signal, "SIG" + args.signal))
    killed = time.time()
    try:
        output = proc.communicate(timeout=args.timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        print(proc.communicate()[0].decode(errors="replace"))
        print(f"kill_rank.py: the job hung for {args.timeout:g} s after rank "
              f"{args.rank} was killed", file=sys.stderr)
        return 1
    print(output.decode(errors="replace"))
    print(f"kill_rank.py: status {proc.returncode}, ended {time.time() - killed:.1f} s "
          f"after rank {args.rank} (pid {victim}) got SIG{args.signal}")
    return 0 if proc.returncode != 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
