#!/usr/bin/python3
"""train-pipeline-pp.test: the first rank's peak activations under 1F1B are
half of GPipe's (2 of 4 micro-batches in flight), and ZB-H1's predicted
bubble is smaller than 1F1B's."""
import re
import sys


def field(path, name):
    text = open(path).read()
    m = re.search(name + r" = (array<i64: ([0-9, ]+)>|([0-9.eE+-]+) : f64)", text)
    if not m:
        sys.exit(f"{path}: no {name}")
    if m.group(2):
        return [int(x) for x in m.group(2).split(",")]
    return float(m.group(3))


gpipe, one, zb = sys.argv[1:4]
a_g, a_1 = field(gpipe, "activation_bytes"), field(one, "activation_bytes")
if not (a_1[0] * 2 == a_g[0] and a_1[1] * 4 == a_g[1]):
    sys.exit(f"activation bytes: 1F1B {a_1}, GPipe {a_g}")
b_1, b_z = field(one, "bubble_fraction"), field(zb, "bubble_fraction")
if not 0 < b_z < b_1:
    sys.exit(f"bubble: ZB-H1 {b_z}, 1F1B {b_1}")
print(f"OK: activations 1F1B {a_1} GPipe {a_g}; bubble ZB-H1 {b_z:.3f} < 1F1B {b_1:.3f}")
