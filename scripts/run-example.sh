#!/usr/bin/env bash
# The main job on the bundled example: builds autopar (installing its
# dependencies first), imports examples/tiny-gpt/model.onnx and prints the
# summary of its IR. Extra arguments go to `autopar import`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh" autopar > /dev/null
exec "$root/build/bin/autopar" import "$root/examples/tiny-gpt/model.onnx" \
  --summary "$@"
