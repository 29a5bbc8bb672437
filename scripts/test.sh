#!/usr/bin/env bash
# Builds autopar (installing its dependencies first) and runs every test:
# the lit suite, which includes the gtest unit tests (target check-autopar),
# then autopar built with ASan + UBSan on a bounded fuzz corpus and a smoke
# test (scripts/sanitize.sh --ci: about a minute with a warm ccache, 9 from
# scratch on two cores).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh"
ninja -C "$root/build" check-autopar
"$root/scripts/sanitize.sh" --ci
