#!/usr/bin/env bash
# The CUDA target on a machine with a GPU: the runtime's kernel tests, the
# e2e equivalence tests (per-step loss and grad norm of each CUDA program
# against the CPU target's and PyTorch's within relative 1e-3), ONNX's node
# conformance tests as forward-only CUDA programs (test/conformance/run.py
# --target cuda), and the GPU benchmark; one summary table at the end. Exit 0
# when everything passed.
#
#   scripts/gpu-check.sh                 # autopar built here and a GPU here
#   scripts/gpu-check.sh --prepare DIR   # where autopar is built (no GPU needed):
#                                        # programs, token file, CPU and
#                                        # PyTorch reference logs, the node
#                                        # tests' model.cu and data into DIR
#   scripts/gpu-check.sh --run DIR       # on the GPU machine: needs nvcc,
#                                        # cmake, python3 (no MLIR, no MPI)
#
# The benchmark (bench/gpu_gpt2: GPT-2 124M, the compiled program against
# PyTorch eager and torch.compile) is prepared only when GPU_CHECK_BENCH=1
# is set for --prepare (exporting the model takes about a minute and 3.5 GB
# of RAM); it goes into DIR/gpu_gpt2 (a few MiB), and --run runs it with
# `python3 bench/gpu_gpt2/run.py --run DIR/gpu_gpt2` (PyTorch 2 with CUDA),
# adding the options in GPU_CHECK_BENCH_ARGS (e.g. "--profile 10" for the
# program's time per op kind, "--skip-torch").
#
# GPU_CHECK_ONLY="kernels programs conformance bench" (any subset; default
# all) limits --run to those parts, e.g. to fit a per-command time limit.
#
# GPU machines often lack LLVM/MLIR (autopar itself), so --prepare writes
# self-contained program directories (sources, CMakeLists.txt, weights) and
# the references, and --run only builds and compares.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
steps=20
kernel_tests=(Kernels Attention)
rtol=1e-3

# name | fixture | extra compile flags | plan [| rtol, default $rtol]
# gpt-pad-vocab: the vocabulary of 64 padded to 96 (pad_vocab_multiple),
# against PyTorch's unpadded model.
# bf16-mixed is compared with the CPU target's bf16-mixed run and PyTorch's
# fp32 within 1e-2 (docs/training.md, "Mixed precision").
cases=(
  "gpt-adamw|gpt_opset17_static.onnx||{\"optimizer\": {\"type\": \"adamw\", \"lr\": 0.003, \"weight_decay\": 0.1, \"max_grad_norm\": 1.0, \"no_decay\": [\"*.bias\"]}, \"lr_schedule\": {\"warmup_steps\": 3, \"decay\": \"cosine\", \"min_lr\": 0.0003}}"
  "gpt-tied-sgd|gpt_tied_opset14_static.onnx||{\"optimizer\": {\"type\": \"sgd\", \"lr\": 0.01, \"momentum\": 0.9, \"nesterov\": true, \"dampening\": 0, \"weight_decay\": 0.01}}"
  "gpt-tanh-adamw|gpt_gelu_tanh_opset17_static.onnx||{\"optimizer\": {\"type\": \"adamw\", \"lr\": 0.003}}"
  "gpt-relu-frozen|gpt_relu_opset14_static.onnx||{\"optimizer\": {\"type\": \"adamw\", \"lr\": 0.003}, \"frozen\": [\"*ln_1*\"]}"
  "gpt-micro|gpt_opset17_dynamic.onnx|--input-shape idx=4,16 --input-shape targets=4,16|{\"optimizer\": {\"type\": \"adamw\", \"lr\": 0.003}, \"batch\": {\"micro_batches\": 2}}"
  "bert-sgd|bert_opset17_static.onnx||{\"optimizer\": {\"type\": \"sgd\", \"lr\": 0.1, \"momentum\": 0.9}}"
  "gpt-pad-vocab|gpt_opset17_static.onnx||{\"pad_vocab_multiple\": 48, \"optimizer\": {\"type\": \"adamw\", \"lr\": 0.003, \"max_grad_norm\": 1.0}}"
  "gpt-bf16|gpt_opset17_static_nofold.onnx||{\"precision\": \"bf16-mixed\", \"optimizer\": {\"type\": \"adamw\", \"lr\": 0.003, \"max_grad_norm\": 1.0}}|1e-2"
  "gpt-bf16-unfused|gpt_opset17_static_nofold.onnx||{\"precision\": \"bf16-mixed\", \"attention\": \"unfused\", \"optimizer\": {\"type\": \"adamw\", \"lr\": 0.003, \"max_grad_norm\": 1.0}}|1e-2"
)

prepare() {
  local dir="$1" autopar="$root/build/bin/autopar"
  [ -x "$autopar" ] || { echo "gpu-check: $autopar not built (scripts/build.sh)" >&2; exit 1; }
  mkdir -p "$dir"
  "$py" "$root/test/e2e/make_tokens.py" -o "$dir/tokens.bin" --count 4000 --vocab 64 --seed 7
  for c in "${cases[@]}"; do
    IFS='|' read -r name fixture flags plan _ <<< "$c"
    local model="$root/test/models/fixtures/$fixture" out="$dir/$name"
    rm -rf "$out" && mkdir -p "$out"
    echo "$plan" > "$out/plan.json"
    # shellcheck disable=SC2086
    "$autopar" compile "$model" --plan "$out/plan.json" $flags --target cuda --no-build -o "$out/cuda"
    # shellcheck disable=SC2086
    "$autopar" compile "$model" --plan "$out/plan.json" $flags -o "$out/cpu-program" > /dev/null
    "$out/cpu-program/train" --data "$dir/tokens.bin" --steps $steps --log "$out/cpu.jsonl" > /dev/null
    rm -rf "$out/cpu-program"
    local batch=()
    [ -n "$flags" ] && batch=(--batch 4)
    "$py" "$root/test/e2e/torch_ref.py" "$model" --plan "$out/plan.json" "${batch[@]}" \
      --data "$dir/tokens.bin" --steps $steps -o "$out/torch.jsonl"
    echo "prepared $name"
  done
  "$py" "$root/test/conformance/run.py" --target cuda --prepare "$dir/conformance" \
    --autopar "$autopar" --data "$root/build/test/onnx-node-data"
  if [ "${GPU_CHECK_BENCH:-0}" = 1 ]; then
    "$py" "$root/bench/gpu_gpt2/run.py" --prepare "$dir/gpu_gpt2"
  fi
}

# Prints "PASS" / "FAIL" and the worst relative difference of loss and
# grad_norm between two logs.
compare() {
  local ours="$1" ref="$2" rtol="$3" result="PASS" worst=""
  for key in loss grad_norm; do
    local out
    if out=$("$py" "$root/test/e2e/compare_losses.py" "$ours" "$ref" --steps $steps --rtol $rtol --key "$key" 2>&1); then
      worst+="$(echo "$out" | sed -n 's/^OK: .*max rel diff \(.*\)$/\1/p') "
    else
      result="FAIL"
      worst+="? "
    fi
  done
  echo "$result $worst"
}

run() {
  local dir="$1" rows=() failed=0
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
  local nvcc
  nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  local only=" ${GPU_CHECK_ONLY:-kernels programs conformance bench} "
  # 1. The runtime's CUDA kernels against their CPU references.
  local kt="$dir/kernel-tests" blas=(-ldnnl) define=()
  [[ "$only" == *" kernels "* ]] || kernel_tests=()
  mkdir -p "$kt"
  if ! echo 'int main(){}' | g++ -x c++ - -ldnnl -o "$kt/probe" 2> /dev/null ||
     ! echo '#include <oneapi/dnnl/dnnl.h>' | g++ -x c++ -fsyntax-only - 2> /dev/null; then
    blas=() define=(-DAUTOPAR_RT_NO_BLAS)
  fi
  for test in "${kernel_tests[@]}"; do
    local status="FAIL" line="build failed ($kt/$test.build.log)"
    if (cd "$root" && "$nvcc" -std=c++17 -O2 -arch=native -I. \
          "${define[@]}" -Xcompiler=-fopenmp "test/cuda/${test}Test.cu" runtime/cuda/*.cu \
          runtime/optim/Optimizer.cpp \
          runtime/cpu/Kernels.cpp runtime/cpu/Attention.cpp -lcublasLt "${blas[@]}" \
          -o "$kt/$test") > "$kt/$test.build.log" 2>&1; then
      if "$kt/$test" > "$kt/$test.log" 2>&1; then status="PASS"; fi
      line="$(tail -1 "$kt/$test.log")"
      # No GPU: the test skips itself, and nothing was checked.
      [[ "$line" == *"skipped"* ]] && status="SKIP"
    fi
    [ "$status" = PASS ] || failed=1
    rows+=("$test test|$status|$line")
  done
  # 2. Each program: build, train, compare.
  local program_cases=("${cases[@]}")
  [[ "$only" == *" programs "* ]] || program_cases=()
  for c in "${program_cases[@]}"; do
    local name case_rtol
    IFS='|' read -r name _ _ _ case_rtol <<< "$c"
    local out="$dir/$name" status vs_cpu vs_torch ms
    if ! cmake -S "$out/cuda" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
           > "$out/build.log" 2>&1 || ! cmake --build "$out/build" -j >> "$out/build.log" 2>&1; then
      rows+=("$name|FAIL|build failed ($out/build.log)"); failed=1; continue
    fi
    if ! "$out/cuda/train" --data "$dir/tokens.bin" --steps $steps --log "$out/cuda.jsonl" > "$out/train.log" 2>&1; then
      rows+=("$name|FAIL|train failed: $(tail -1 "$out/train.log")"); failed=1; continue
    fi
    vs_cpu=$(compare "$out/cuda.jsonl" "$out/cpu.jsonl" "${case_rtol:-$rtol}")
    vs_torch=$(compare "$out/cuda.jsonl" "$out/torch.jsonl" "${case_rtol:-$rtol}")
    ms=$("$py" -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if '\"ms\"' in l]; print('%.2f' % sorted(x['ms'] for x in r)[len(r)//2])" "$out/cuda.jsonl")
    status=PASS
    [[ "$vs_cpu" == PASS* && "$vs_torch" == PASS* ]] || { status=FAIL; failed=1; }
    rows+=("$name|$status|vs cpu (loss, grad_norm): ${vs_cpu#* } vs torch: ${vs_torch#* } median ${ms} ms/step")
  done
  # 3. ONNX's node tests as forward-only CUDA programs: the runtime built
  # once, each model.cu compiled, linked, run and compared (rtol 1e-5).
  if [[ "$only" != *" conformance "* ]]; then
    :
  elif [ -f "$dir/conformance/manifest.json" ]; then
    local conf="$dir/conformance" status=PASS summary
    python3 "$root/test/conformance/run.py" --target cuda --run "$conf" --nvcc "$nvcc" \
      > "$conf.log" 2>&1 || { status=FAIL; failed=1; }
    # "passed P of N (x%); rejected R; wrong: W; errors: E"
    summary=$(sed -n -e 's/^  passed \([0-9]* of [0-9]* ([0-9.]*%)\).*/passed \1;/p' \
      -e 's/^  rejected at compile: \([0-9]*\); \(wrong: [0-9]*; errors: [0-9]*\);.*/rejected \1; \2/p' \
      "$conf.log" | tr '\n' ' ')
    summary="${summary% }"
    [ -n "$summary" ] || summary="$(tail -1 "$conf.log")"
    [ "$status" = PASS ] || summary+=" ($conf.log)"
    rows+=("conformance (cuda)|$status|$summary")
  else
    rows+=("conformance (cuda)|SKIP|not prepared")
  fi
  # 4. The GPU benchmark (bench/gpu_gpt2), when prepared (GPU_CHECK_BENCH=1).
  if [[ "$only" != *" bench "* ]]; then
    :
  elif [ -f "$dir/gpu_gpt2/bench.json" ]; then
    local bench_log="$dir/gpu_gpt2.log" summary
    # shellcheck disable=SC2086 # GPU_CHECK_BENCH_ARGS: options, split on spaces
    if python3 "$root/bench/gpu_gpt2/run.py" --run "$dir/gpu_gpt2" ${GPU_CHECK_BENCH_ARGS:-} \
         > "$bench_log" 2>&1; then
      # "compiled/torch.compile R.RRx (...), MFU M.M% (...), program PRECISION"
      summary=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"])' \
                  "$dir/gpu_gpt2/gpu_gpt2.json" 2> /dev/null || tail -1 "$bench_log")
      rows+=("bench gpu_gpt2|DONE|$summary")
    else
      rows+=("bench gpu_gpt2|FAIL|$(tail -1 "$bench_log") ($bench_log)"); failed=1
    fi
  else
    rows+=("bench gpu_gpt2|SKIP|not prepared (GPU_CHECK_BENCH=1 with --prepare)")
  fi
  echo
  printf '%-18s %-5s %s\n' "check" "" "result (rtol $rtol, $steps steps)"
  for r in "${rows[@]}"; do
    IFS='|' read -r a b rest <<< "$r"
    printf '%-18s %-5s %s\n' "$a" "$b" "$rest"
  done
  return $failed
}

case "${1:-}" in
  --prepare) prepare "${2:?--prepare needs a directory}" ;;
  --run) run "${2:?--run needs a directory}" ;;
  "") prepare "$root/build/gpu-check" && run "$root/build/gpu-check" ;;
  *) echo "usage: scripts/gpu-check.sh [--prepare DIR | --run DIR]" >&2; exit 2 ;;
esac
