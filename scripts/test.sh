#!/usr/bin/env bash
# Builds autopar (installing its dependencies first) and runs every test:
# the lit suite, which includes the gtest unit tests (target check-autopar).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh"
ninja -C "$root/build" check-autopar
