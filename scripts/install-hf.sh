#!/usr/bin/env bash
# The Hugging Face test suite's Python: a venv at .venv-hf over Debian's
# python3-torch and python3-onnx (--system-site-packages) with transformers
# pinned (4.49.0: the newest that imports with torch 1.13) from PyPI, and
# PEFT (0.13.2) with accelerate (0.34.2) for the LoRA tests, installed
# without their dependencies (pip would replace Debian's torch with a
# PyPI one; the rest they need is there) plus Jinja2 (PEFT's model card).
# Idempotent: an existing venv with the pinned version is kept. The lit
# tests under test/hf run when .venv-hf/bin/python imports it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-hf"
version=4.49.0
peft=0.13.2
accelerate=0.34.2
python=/usr/bin/python3

if [ -x "$venv/bin/python" ] &&
   "$venv/bin/python" -c "import transformers, peft, jinja2, sys; sys.exit(transformers.__version__ != '$version' or peft.__version__ != '$peft')" 2>/dev/null; then
  exit 0
fi
echo "install-hf: installing transformers $version and peft $peft into $venv" >&2
rm -rf "$venv"
"$python" -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "transformers==$version" "Jinja2==3.1.4" >&2
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "peft==$peft" "accelerate==$accelerate" >&2
"$venv/bin/python" -c "import transformers, peft, torch; print('install-hf: transformers', transformers.__version__, 'peft', peft.__version__, 'over torch', torch.__version__)" >&2
