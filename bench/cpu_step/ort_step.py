"""onnxruntime-training peer of bench/cpu_step: trains the benchmark's ONNX
loss model with ORT's training API (1.19) and AdamW with PyTorch's defaults
(lr from the command line, betas 0.9/0.999, eps 1e-8, weight decay 0.01) on
the same batches as the compiled program, and prints one JSON line
{"ms": [...], "loss": [...]} (per step).

Run with the peers' venv (bench/cpu_step/setup-peers.sh):
  .venv-peers/bin/python ort_step.py MODEL.onnx WORKDIR STEPS TOKENS.bin B T LR
"""
import json
import os
import sys
import time

import onnx
from onnx import TensorProto
from onnxruntime.training import artifacts
from onnxruntime.training.api import CheckpointState, Module, Optimizer
from onnxruntime.training.onnxblock.optim import AdamW

from batches import batches


def prepare(m):
    """The model as ORT's gradient builder takes it; the trained names."""
    # Identity aliases of initializers (torch.onnx.export's de-duplication
    # of equal tensors) are parameters of their own, as in PyTorch.
    inits = {t.name: t for t in m.graph.initializer}
    for n in list(m.graph.node):
        if n.op_type == "Identity" and n.input[0] in inits:
            copy = onnx.TensorProto()
            copy.CopyFrom(inits[n.input[0]])
            copy.name = n.output[0]
            m.graph.initializer.append(copy)
            m.graph.node.remove(n)
    # ORT's gradient builders read the optional outputs torch.onnx.export
    # leaves out (LayerNormalization's mean and inverse std, the loss's
    # log-probabilities).
    for k, n in enumerate(m.graph.node):
        want = {"LayerNormalization": 3, "SoftmaxCrossEntropyLoss": 2}.get(n.op_type, 0)
        while len(n.output) < want:
            n.output.append(f"_ort_extra_{k}_{len(n.output)}")
    return [t.name for t in m.graph.initializer if t.data_type == TensorProto.FLOAT]


def main():
    model_path, work, steps, tokens_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    B, T, lr = int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
    m = onnx.load(model_path)
    params = prepare(m)
    art = os.path.join(work, "ort")
    os.makedirs(art, exist_ok=True)
    while True:
        try:
            artifacts.generate_artifacts(m, requires_grad=params, loss=None,
                                         optimizer=AdamW(eps=1e-8, weight_decay=0.01),
                                         artifact_directory=art)
            break
        except RuntimeError as e:
            # Float buffers (masks) have no gradient: ORT names each.
            marker = "partial derivative for '"
            if marker not in str(e):
                raise
            params.remove(str(e).split(marker)[1].split("'")[0])
    state = CheckpointState.load_checkpoint(os.path.join(art, "checkpoint"))
    module = Module(os.path.join(art, "training_model.onnx"), state,
                    os.path.join(art, "eval_model.onnx"))
    opt = Optimizer(os.path.join(art, "optimizer_model.onnx"), module)
    opt.set_learning_rate(lr)
    module.train()
    times, losses = [], []
    for x, y in batches(tokens_path, B, T, steps):
        t0 = time.perf_counter()
        loss = module(x, y)
        opt.step()
        module.lazy_reset_grad()
        times.append((time.perf_counter() - t0) * 1000)
        losses.append(float(loss))
    print(json.dumps({"ms": times, "loss": losses}))


if __name__ == "__main__":
    main()
