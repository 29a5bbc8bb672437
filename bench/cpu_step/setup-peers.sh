#!/usr/bin/env bash
# The peers bench/cpu_step/run.py measures beside Debian's PyTorch 1.13:
# onnxruntime-training 1.19.2 (CPU, its own MLAS kernels) and JAX 0.4.35
# (XLA's CPU backend), pinned, from PyPI into bench/cpu_step/.venv-peers over
# Debian's Python 3.11 and its numpy, onnx and torch (system site packages;
# numpy is held at Debian's version, which torch 1.13 needs). About 400 MB;
# not needed by the tests.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-peers"
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
numpy="$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')"
"$venv/bin/pip" install -q onnxruntime-training==1.19.2 jax==0.4.35 jaxlib==0.4.35 \
  "numpy==$numpy"
"$venv/bin/python" -c "import onnxruntime.training.api, jax, torch" 2> /dev/null
echo "setup-peers.sh: onnxruntime-training 1.19.2 and JAX 0.4.35 in $venv"
