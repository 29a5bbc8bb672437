#!/usr/bin/env bash
# The sanitizer run (ASan + UBSan): builds autopar into build-asan/ with
# -fsanitize=address,undefined (errors fatal), runs the fuzz corpus of
# test/fuzz/fuzz.py against it (ONNX models, plans), compiles a GPT with it
# and builds that program with the same sanitizers, then trains, saves,
# resumes and runs the token-file and checkpoint corpus on the program.
# Any sanitizer report fails the run. About 10 minutes on two cores from
# scratch; ccache makes later runs fast:
#
#   scripts/sanitize.sh [COUNT]     # COUNT mutants per corpus (default 200)
#   scripts/sanitize.sh --ci        # what CI runs (scripts/test.sh): the
#                                   # tools only, 40 mutants per corpus, and
#                                   # the smoke test (compile and train a
#                                   # GPT); test/fuzz/sanitized-program.test
#                                   # covers the program
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
ci=0
if [ "${1:-}" = "--ci" ]; then
  ci=1
  count=40
else
  count="${1:-200}"
  scripts/install-deps.sh
fi
export CCACHE_BASEDIR="$root"
# Debug info names the build folder: without this, ccache would not share
# objects between clones.
export CCACHE_NOHASHDIR=1
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
if [ ! -f build-asan/build.ninja ]; then
  cmake -G Ninja -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    > build-asan-configure.log 2>&1 ||
    { cat build-asan-configure.log >&2; exit 1; }
  rm -f build-asan-configure.log
fi
ninja -C build-asan autopar
# LLVM's and protobuf's allocations live until exit: leaks are not errors.
# allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons the slabs it opens
# when compiled with ASan, which only our instrumented copies of its inline
# code do; Debian's libMLIR (not instrumented) then allocates from such a
# slab without unpoisoning, and MLIR's own writes there read as
# use-after-poison (which slab is whose depends on the order of
# allocations: a tp = 1024 plan mutant tripped it). Real errors still
# report: heap, stack and globals keep their redzones.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
autopar="$root/build-asan/bin/autopar"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fixtures=test/models/fixtures
py=/usr/bin/python3
$py test/fuzz/fuzz.py onnx --seed 11 --count "$count" --workdir "$work/onnx" \
  --autopar "$autopar" --model $fixtures/gpt_opset17_static.onnx
$py test/fuzz/fuzz.py onnx --seed 12 --count "$count" --workdir "$work/bert" \
  --autopar "$autopar" --model $fixtures/bert_opset14_static.onnx
$py test/fuzz/fuzz.py plan --seed 11 --count "$count" --workdir "$work/plan" \
  --autopar "$autopar" --model $fixtures/gpt_opset17_dynamic.onnx \
  --input-shape idx=4,16 --input-shape targets=4,16
if [ "$ci" = 1 ]; then
  # The smoke test with the sanitized compiler: compile a GPT (the program
  # built as usual) and train it.
  "$autopar" compile $fixtures/gpt_opset17_static.onnx -o "$work/gpt" > /dev/null
  $py test/e2e/make_tokens.py -o "$work/tokens.bin" --count 3000 --vocab 64 --seed 5 > /dev/null
  "$work/gpt/train" --data "$work/tokens.bin" --steps 4 > /dev/null
  echo "sanitize.sh: autopar clean (ASan + UBSan)"
  exit 0
fi
# The emitted program, built with the same sanitizers.
"$autopar" compile $fixtures/gpt_opset17_static.onnx --no-build -o "$work/gpt"
cmake -S "$work/gpt" -B "$work/gpt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  > /dev/null
cmake --build "$work/gpt/build" -j 2 > /dev/null
$py test/e2e/make_tokens.py -o "$work/tokens.bin" --count 3000 --vocab 64 --seed 5 > /dev/null
"$work/gpt/train" --data "$work/tokens.bin" --steps 4 --save "$work/ck" > /dev/null
"$work/gpt/train" --data "$work/tokens.bin" --steps 8 --resume "$work/ck" \
  --export-onnx "$work/out.onnx" > /dev/null
$py test/fuzz/fuzz.py tokens --seed 11 --count "$count" --workdir "$work/tokens" \
  --train "$work/gpt/train"
$py test/fuzz/fuzz.py checkpoint --seed 11 --count "$count" --workdir "$work/ckpt" \
  --train "$work/gpt/train"
echo "sanitize.sh: clean (ASan + UBSan)"
