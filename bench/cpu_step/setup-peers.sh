#!/usr/bin/env bash
# The peers bench/cpu_step/run.py measures beside Debian's PyTorch 1.13:
# onnxruntime-training 1.19.2 (PyPI, CPU, its own MLAS kernels), pinned, in
# bench/cpu_step/.venv-peers over Debian's Python 3.11 (system site packages:
# numpy, onnx). About 300 MB; not needed by the tests.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-peers"
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q onnxruntime-training==1.19.2
"$venv/bin/python" -c "import onnxruntime.training.api" 2> /dev/null
echo "setup-peers.sh: onnxruntime-training 1.19.2 in $venv"
