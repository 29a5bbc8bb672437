"""What the planner benchmarks share: a GPT built from its shapes alone,
the A100 nodes of the papers' clusters, and one `autopar plan` run."""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3"
SEQ, VOCAB = 2048, 51200


def shape_only_gpt(path, layers, hidden, heads):
    """A GPT ONNX model (s = 2048, V = 51200, dynamic batch) without its
    weights: planning reads no initializer's bytes, so the data file goes."""
    subprocess.run([PY, os.path.join(ROOT, "bench", "zero_memory", "shape_only_gpt.py"),
                    "-o", path, "--layers", str(layers), "--hidden", str(hidden),
                    "--heads", str(heads), "--vocab", str(VOCAB), "--seq", str(SEQ),
                    "--batch", "0"], check=True, capture_output=True)
    os.remove(path + ".data")


def a100_cluster(gpus):
    """DGX A100 nodes of 8 (NVLink 300 GB/s, 8 x HDR 200 Gb/s = 25 GB/s per
    GPU across nodes)."""
    return {"gpu": {"name": "A100-SXM4-80GB", "peak_tflops": 312, "memory_gb": 80,
                    "memory_bandwidth_gbps": 2039},
            "gpus_per_node": 8, "nodes": gpus // 8,
            "intra_node_gbps": 300, "inter_node_gbps": 25}


def plan(autopar, tmp, model, cluster, batch, plan=None, top=None, extra=()):
    """`autopar plan --json` on `model`: evaluates `plan` (a dict) if given,
    else searches (best `top`). Returns (the parsed output, None) or (None,
    the error line)."""
    cluster_path = os.path.join(tmp, "cluster.json")
    with open(cluster_path, "w") as out:
        json.dump(cluster, out)
    cmd = [autopar, "plan", model, "--cluster", cluster_path, "--global-batch", str(batch),
           "--json"]
    if plan is not None:
        plan_path = os.path.join(tmp, "plan.json")
        with open(plan_path, "w") as out:
            json.dump(plan, out)
        cmd += ["--evaluate", plan_path]
    if top is not None:
        cmd += ["--top", str(top)]
    cmd += list(extra)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    return json.loads(proc.stdout), None
