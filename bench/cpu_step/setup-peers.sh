#!/usr/bin/env bash
# The peers bench/cpu_step/run.py measures beside Debian's PyTorch 1.13,
# pinned, from PyPI:
# - onnxruntime-training 1.19.2 (CPU, its own MLAS kernels) and JAX 0.4.35
#   (XLA's CPU backend) in bench/cpu_step/.venv-peers over Debian's Python
#   3.11 and its numpy, onnx and torch (system site packages; numpy is held
#   at Debian's version, which torch 1.13 needs). About 400 MB.
# - PyTorch 2.15.0 (eager and torch.compile; MKL) in bench/cpu_step/.venv-torch,
#   a venv of its own: PyPI's Linux wheel brings its CUDA 13 libraries
#   (about 5 GB; the CPU peer loads but does not use them).
# Not needed by the tests.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-peers"
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
numpy="$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')"
"$venv/bin/pip" install -q onnxruntime-training==1.19.2 jax==0.4.35 jaxlib==0.4.35 \
  "numpy==$numpy"
"$venv/bin/python" -c "import onnxruntime.training.api, jax, torch" 2> /dev/null
echo "setup-peers.sh: onnxruntime-training 1.19.2 and JAX 0.4.35 in $venv"
torch2="$here/.venv-torch"
[ -x "$torch2/bin/python" ] || /usr/bin/python3 -m venv "$torch2"
"$torch2/bin/pip" install -q torch==2.15.0 numpy==2.4.6
"$torch2/bin/python" -c "import torch" 2> /dev/null
echo "setup-peers.sh: PyTorch 2.15.0 in $torch2"
