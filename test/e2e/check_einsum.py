#!/usr/bin/python3
"""Einsum through forward-only programs against numpy.einsum (ONNX's own
Einsum node tests are float64, whose contractions autopar refuses).

Usage: check_einsum.py --autopar AUTOPAR --work DIR
Prints one line per equation; exits 1 on any mismatch.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CASES = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),    # batched matmul
    ("i,j->ij", [(3,), (4,)]),                     # outer product (rotary)
    ("ij->ji", [(3, 4)]),                          # transpose
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),  # attention scores
    ("ij,ij", [(3, 4), (3, 4)]),                   # implicit output: scalar
    ("ijk->", [(2, 3, 4)]),                        # sum
    ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]),    # three operands
    ("ba,ca->bc", [(3, 2), (4, 2)]),               # output not in letter order
]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--autopar", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    failed = 0
    for n, (eq, shapes) in enumerate(CASES):
        vals = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        ref = np.einsum(eq, *vals)
        names = ["x%d" % i for i in range(len(shapes))]
        graph = helper.make_graph(
            [helper.make_node("Einsum", names, ["y"], equation=eq)], "einsum",
            [helper.make_tensor_value_info(nm, TensorProto.FLOAT, s)
             for nm, s in zip(names, shapes)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                           list(ref.shape))])
        model = helper.make_model(graph,
                                  opset_imports=[helper.make_opsetid("", 13)])
        d = os.path.join(args.work, "case%d" % n)
        os.makedirs(os.path.join(d, "in"), exist_ok=True)
        os.makedirs(os.path.join(d, "out"), exist_ok=True)
        onnx.save(model, os.path.join(d, "model.onnx"))
        for i, v in enumerate(vals):
            with open(os.path.join(d, "in", "input_%d.pb" % i), "wb") as f:
                f.write(numpy_helper.from_array(v).SerializeToString())
        subprocess.run([args.autopar, "compile", os.path.join(d, "model.onnx"),
                        "--forward-only", "-o", os.path.join(d, "prog")],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([os.path.join(d, "prog", "run"), "--inputs",
                        os.path.join(d, "in"), "--outputs",
                        os.path.join(d, "out")], check=True)
        t = onnx.TensorProto()
        with open(os.path.join(d, "out", "output_0.pb"), "rb") as f:
            t.ParseFromString(f.read())
        got = numpy_helper.to_array(t)
        ok = got.shape == ref.shape and np.allclose(got, ref, rtol=1e-5,
                                                    atol=1e-6)
        failed += not ok
        print("%s %s" % ("OK" if ok else "FAIL", eq))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
