#!/usr/bin/python3
"""Runs OUTDIR/run (make_triu_attention.py's model, compiled with
--forward-only) on random q, k, v and compares its output with numpy's
masked softmax attention: check_triu_attention.py OUTDIR [--shift]."""
import os
import subprocess
import sys
import tempfile

import numpy as np
from onnx import numpy_helper

out_dir = sys.argv[1]
shift = 2 if "--shift" in sys.argv else 1
T, D = 40, 8
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((1, 2, T, D)).astype(np.float32) for _ in range(3))
with tempfile.TemporaryDirectory() as tmp:
    ins, outs = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    os.makedirs(ins)
    os.makedirs(outs)
    for i, x in enumerate((q, k, v)):
        with open(os.path.join(ins, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x).SerializeToString())
    subprocess.run([os.path.join(out_dir, "run"), "--inputs", ins, "--outputs", outs],
                   check=True)
    from onnx import TensorProto
    t = TensorProto()
    with open(os.path.join(outs, "output_0.pb"), "rb") as f:
        t.ParseFromString(f.read())
    got = numpy_helper.to_array(t)
s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / np.sqrt(D)
s = np.where(np.triu(np.ones((T, T), bool), shift), -np.inf, s)
p = np.exp(s - s.max(-1, keepdims=True))
p /= p.sum(-1, keepdims=True)
ref = p @ v.astype(np.float64)
err = np.abs(got - ref).max()
print(f"max abs error {err:.2e}: {'OK' if err < 1e-5 else 'FAIL'}")
sys.exit(0 if err < 1e-5 else 1)
