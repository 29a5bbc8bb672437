#!/usr/bin/env bash
# Installs what is missing (scripts/install-deps.sh, install-hf.sh,
# install-cudnn-frontend.sh), configures build/ with
# CMake + Ninja against Debian's LLVM/MLIR 22 (ccache when present) and builds
# everything. Extra arguments are passed to ninja (e.g. a target name).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/install-deps.sh
scripts/install-hf.sh
scripts/install-cudnn-frontend.sh
export CCACHE_BASEDIR="$root"
# The CUDA toolkit's nvcc, where it is installed but not on PATH: the CUDA
# runtime and its tests are built when CMake finds it.
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir > build-configure.log 2>&1 ||
    { cat build-configure.log >&2; exit 1; }
  rm -f build-configure.log
fi
ninja -C build "$@"
