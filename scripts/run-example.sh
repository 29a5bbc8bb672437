#!/usr/bin/env bash
# The main job on the bundled example: builds autopar (installing its
# dependencies first), compiles examples/tiny-gpt/model.onnx with
# examples/tiny-gpt/plan.json into build/tiny-gpt/, and trains it for 300
# steps on examples/tiny-gpt/tokens.bin (byte-level tokens of the project's
# docs), printing the loss every 25 steps. Extra arguments go to `train`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
example="$root/examples/tiny-gpt"
out="$root/build/tiny-gpt"
log="$root/build/tiny-gpt.log.jsonl" # beside OUTDIR: a recompile replaces only what it wrote
"$root/scripts/build.sh" autopar > /dev/null
# This script's own folder, left by an autopar that kept no record of what it
# wrote (.autopar-output), which a compile now refuses to replace.
if [ -d "$out" ] && [ ! -f "$out/.autopar-output" ]; then
  rm -rf "$out"
fi
"$root/build/bin/autopar" compile "$example/model.onnx" \
  --plan "$example/plan.json" -o "$out"
echo "compiled $out/train; report: $out/report.json"
"$out/train" --data "$example/tokens.bin" --steps 300 \
  --log "$log" "$@"
# The falling loss, every 25 steps.
awk -F'[:,]' '/"step"/ { if ($2 % 25 == 0 || $2 == 299)
  printf "step %4d  loss %.4f\n", $2, $4 }' "$log"
