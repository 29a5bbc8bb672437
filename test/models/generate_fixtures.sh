#!/bin/bash
# Regenerate the committed ONNX fixtures in test/models/fixtures/ with export.py.
# Usage: test/models/generate_fixtures.sh [OUTDIR]   (default: test/models/fixtures)
# Requires Debian's /usr/bin/python3 with torch (1.13) and onnx (1.12).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-$HERE/fixtures}"
PY="${PYTHON:-/usr/bin/python3}"
mkdir -p "$OUT"

# Common tiny shape: vocab 64, d 32, 4 heads, 2 layers, seq 16, batch 2.
TINY=(--vocab 64 --d-model 32 --heads 4 --layers 2 --seq 16 --batch 2)

export_model() { # export_model NAME ARGS...
  local name="$1"; shift
  PYTHONWARNINGS=ignore "$PY" "$HERE/export.py" "$@" -o "$OUT/$name.onnx"
}

for opset in 14 17; do
  export_model "gpt_opset${opset}_static"       --model gpt  "${TINY[@]}" --opset "$opset"
  export_model "gpt_opset${opset}_dynamic"      --model gpt  "${TINY[@]}" --opset "$opset" --dynamic-batch
  export_model "gpt_tied_opset${opset}_static"  --model gpt  "${TINY[@]}" --opset "$opset" --tied
  export_model "gpt_tied_opset${opset}_dynamic" --model gpt  "${TINY[@]}" --opset "$opset" --tied --dynamic-batch
  export_model "bert_opset${opset}_static"      --model bert "${TINY[@]}" --opset "$opset"
  export_model "bert_opset${opset}_dynamic"     --model bert "${TINY[@]}" --opset "$opset" --dynamic-batch
done
export_model gpt_opset17_static_nofold      --model gpt "${TINY[@]}" --opset 17 --no-constant-folding
# With constant folding the weight tie disappears (lm_head becomes a folded,
# transposed copy of wte.weight); only the unfolded export shows it as
# Transpose(wte.weight) feeding the lm_head MatMul.
export_model gpt_tied_opset17_static_nofold --model gpt "${TINY[@]}" --opset 17 --tied --no-constant-folding
export_model gpt_gelu_tanh_opset17_static   --model gpt "${TINY[@]}" --opset 17 --activation gelu_tanh
export_model gpt_relu_opset14_static        --model gpt "${TINY[@]}" --opset 14 --activation relu

# Human-readable description of every fixture (inputs/outputs, op histogram,
# initializers, Identity-of-initializer aliases), for writing importer tests.
# Only this script's own fixtures, in a fixed order, so the file is stable.
(cd "$OUT" && "$PY" "$HERE/describe.py" \
  gpt_opset14_static.onnx gpt_opset14_dynamic.onnx \
  gpt_opset17_static.onnx gpt_opset17_dynamic.onnx \
  gpt_tied_opset14_static.onnx gpt_tied_opset14_dynamic.onnx \
  gpt_tied_opset17_static.onnx gpt_tied_opset17_dynamic.onnx \
  bert_opset14_static.onnx bert_opset14_dynamic.onnx \
  bert_opset17_static.onnx bert_opset17_dynamic.onnx \
  gpt_opset17_static_nofold.onnx gpt_tied_opset17_static_nofold.onnx \
  gpt_gelu_tanh_opset17_static.onnx gpt_relu_opset14_static.onnx) > "$OUT/DESCRIPTION.txt"
echo "wrote $OUT/DESCRIPTION.txt"
