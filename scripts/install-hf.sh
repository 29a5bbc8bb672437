#!/usr/bin/env bash
# The Hugging Face test suite's Python: a venv at .venv-hf over Debian's
# python3-torch and python3-onnx (--system-site-packages) with transformers
# pinned (4.49.0: the newest that imports with torch 1.13) from PyPI.
# Idempotent: an existing venv with the pinned version is kept. The lit
# tests under test/hf run when .venv-hf/bin/python imports it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-hf"
version=4.49.0
python=/usr/bin/python3

if [ -x "$venv/bin/python" ] &&
   "$venv/bin/python" -c "import transformers, sys; sys.exit(transformers.__version__ != '$version')" 2>/dev/null; then
  exit 0
fi
echo "install-hf: installing transformers $version into $venv" >&2
rm -rf "$venv"
"$python" -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "transformers==$version" >&2
"$venv/bin/python" -c "import transformers, torch; print('install-hf: transformers', transformers.__version__, 'over torch', torch.__version__)" >&2
