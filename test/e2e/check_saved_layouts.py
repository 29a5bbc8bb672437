#!/usr/bin/python3
"""Counts the values a pipeline's forward phases save that they all-gather
first (train_step.mlir of `autopar compile`): a saved value keeps the
layout the step holds it in, so under tensor and sequence parallelism
none is gathered whole before it is saved. Prints `GATHERED <n>`.

Usage: check_saved_layouts.py OUTDIR/train_step.mlir
"""
import re
import sys


def main():
    text = open(sys.argv[1]).read()
    gathered = []
    for f in re.split(r"\n  func.func @", text):
        name = f.split("(")[0]
        if not re.match(r"train_step_stage[0-9]+_f$", name):
            continue
        defs = {m.group(1): m.group(2)
                for m in re.finditer(r"^\s+(%[\w#]+)(?::\d+)? = ([\w.]+)", f, re.M)}
        ret = re.search(r"^\s+return (.*?) :", f, re.M).group(1)
        for v in (x.strip() for x in ret.split(",")):
            if defs.get(v) == "dist.all_gather":
                gathered.append((name, v))
    print("GATHERED", len(gathered), gathered)


if __name__ == "__main__":
    main()
