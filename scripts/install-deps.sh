#!/usr/bin/env bash
# Installs every Debian package autopar needs to build, test and run its
# examples on a fresh Debian 12 machine. Idempotent: does nothing when all
# packages are present. Runs apt as root or through sudo.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build ccache g++ pkg-config
  # LLVM/MLIR 22 (bookworm-security); conflicts with libmlir-19*
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  # ONNX protobuf classes
  libonnx-dev libprotobuf-dev protobuf-compiler
  # plan files (JSON; accelerate's YAML), unit tests
  nlohmann-json3-dev libyaml-cpp-dev libgtest-dev
  # CPU runtime and parallel tests; the NVMe offload's io_uring
  libdnnl-dev libopenmpi-dev openmpi-bin liburing-dev
  # the BLAS of Debian's numpy and torch (the reference numerics, the peers)
  libopenblas0
  # reference numerics and test-model generation
  python3 python3-numpy python3-torch python3-onnx
  # the venv of the Hugging Face suite (scripts/install-hf.sh)
  python3-venv
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-deps: missing packages (${missing[*]}) and not root, no sudo" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# MLIR 19 and 22 cannot be installed together.
if dpkg-query -W -f='${Package}\n' 'libmlir-19*' 2>/dev/null | grep -q .; then
  $SUDO apt-get remove -y 'libmlir-19*' 'mlir-19-tools' >&2 || true
fi
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
