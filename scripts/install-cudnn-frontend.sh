#!/usr/bin/env bash
# cudnn_frontend's C++ headers (header-only; the graph API of cuDNN's fused
# attention, runtime/cuda/CudnnAttention.cpp), pinned, into
# .deps/cudnn-frontend/include. Debian has no package: they come from PyPI's
# nvidia-cudnn-frontend wheel, checked against its SHA-256 and unpacked (no
# pip install). Only where the CUDA toolkit with cuDNN is installed; without
# it there is nothing to build them for. Idempotent: the pinned headers in
# place are kept.
#
# 1.18.0 is the last release before cuDNN 9.19 (this machine's toolkit has
# 9.19.0) whose SDPA runs cuDNN's own engines only: 1.19 adds open-source
# SDPA kernels compiled at run time through NVRTC and the CUDA driver API
# (libnvrtc and libcuda linked or loaded), and later frontends were seen to
# break SDPA against 9.19.0 (cudnn-frontend#621). A newer pin needs a device
# run of scripts/gpu-check.sh (its attention test runs cuDNN's kernels).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version=1.18.0
wheel="nvidia_cudnn_frontend-$version-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
sha256=382ea063b92cbfd5b442cb75ff8422932d78276aecf139e46713ed1ad3d07af4
dest="$root/.deps/cudnn-frontend"

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -f "$cuda/include/cudnn.h" ]; then
  exit 0
fi
if [ -f "$dest/VERSION" ] && [ "$(cat "$dest/VERSION")" = "$version" ] &&
   [ -f "$dest/include/cudnn_frontend.h" ]; then
  exit 0
fi
python=/usr/bin/python3
[ -x "$root/.venv-hf/bin/python" ] && python="$root/.venv-hf/bin/python"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "install-cudnn-frontend: fetching nvidia-cudnn-frontend $version" >&2
"$python" -m pip download --quiet --disable-pip-version-check --no-deps \
  --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_x86_64 \
  --dest "$tmp" "nvidia-cudnn-frontend==$version" >&2
if [ ! -f "$tmp/$wheel" ]; then
  echo "install-cudnn-frontend: pip did not fetch $wheel" >&2
  exit 1
fi
got="$(sha256sum "$tmp/$wheel" | cut -d' ' -f1)"
if [ "$got" != "$sha256" ]; then
  echo "install-cudnn-frontend: $wheel has SHA-256 $got, expected $sha256" >&2
  exit 1
fi
rm -rf "$dest.new"
mkdir -p "$dest.new"
"$python" - "$tmp/$wheel" "$dest.new" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.startswith("include/")]
    if "include/cudnn_frontend.h" not in names:
        sys.exit("install-cudnn-frontend: the wheel has no include/cudnn_frontend.h")
    z.extractall(sys.argv[2], names)
EOF
echo "$version" > "$dest.new/VERSION"
rm -rf "$dest"
mv "$dest.new" "$dest"
echo "install-cudnn-frontend: headers in $dest/include" >&2
