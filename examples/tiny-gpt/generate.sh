#!/bin/bash
# Regenerate examples/tiny-gpt/model.onnx: a byte-level (vocab 256) GPT-2 style
# training-loss graph, d_model 64, 4 heads, 2 layers, seq 64, batch 8, opset 17,
# static shapes, untied embeddings, exact GELU, random weights (seed 0).
# Requires Debian's /usr/bin/python3 with torch (1.13) and onnx (1.12).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-/usr/bin/python3}"

PYTHONWARNINGS=ignore "$PY" "$ROOT/test/models/export.py" \
  --model gpt --vocab 256 --d-model 64 --heads 4 --layers 2 --seq 64 --batch 8 \
  --opset 17 --activation gelu --seed 0 -o "$HERE/model.onnx"
