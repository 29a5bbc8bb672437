#!/usr/bin/env bash
# The CUDA target on a machine with a GPU: the runtime's kernel tests, the
# e2e equivalence tests (per-step loss and grad norm of each CUDA program
# against the CPU target's and PyTorch's within relative 1e-3), the
# programs over several ranks sharing the one GPU (below), ONNX's node
# conformance tests as forward-only CUDA programs (test/conformance/run.py
# --target cuda), and the GPU benchmark; one summary table at the end. Exit 0
# when everything passed.
#
# Several ranks on one GPU ("ranks"): started without MPI by
# scripts/launch-local.sh --share-gpu (each rank its own NCCL_HOSTID, NCCL's
# sockets on loopback; correct, not fast). The communicator's own test
# (test/cuda/CommNcclTest.cpp: every group of a 2- and a 2 x 2-rank mesh,
# the host collectives, a ring of transfers); then each plan of ranks_cases
# below trains the same 4-layer GPT for 20 steps: its losses and gradient
# norms against the one-GPU run of the model (fp32 within 1e-5, bf16-mixed
# within 1e-2) and the CPU target's run of the same plan under mpirun
# (within $rtol), every step's logged comm bytes equal to report.json's
# (test/e2e/check_comm_bytes.py). dp2-zero1 also resumes the CPU target's
# step-10 checkpoint (steps 10-19 against the CPU run), and is stopped
# (SIGSTOP of rank 1: rank 0 ends within --comm-timeout with the
# watchdog's line) and killed (SIGKILL of rank 1: the launcher ends rank 0;
# the last checkpoint then resumes). Programs of one kind (one rank, several) share
# one runtime build (AUTOPAR_RUNTIME_LIBRARY).
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
# GPU_CHECK_ONLY="kernels programs ranks conformance bench" (any subset;
# default all) limits --run to those parts, e.g. to fit a per-command time
# limit.
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
  "gpt-lora-dropout|gpt_opset17_static_nofold.onnx||{\"optimizer\": {\"type\": \"adamw\", \"lr\": 0.01, \"max_grad_norm\": 1.0}, \"lora\": {\"targets\": [\"*.c_attn.weight\", \"*.c_proj.weight\"], \"r\": 4, \"alpha\": 8, \"dropout\": 0.1}}"
  "gpt-qlora-nf4|gpt_opset17_static_nofold.onnx||{\"optimizer\": {\"type\": \"adamw\", \"lr\": 0.003, \"max_grad_norm\": 1.0}, \"lora\": {\"targets\": [\"*.c_attn.weight\"], \"r\": 4, \"alpha\": 8}, \"quantize\": {\"weights\": [\"h.*.attn.c_*.weight\", \"h.*.mlp.c_*.weight\"], \"type\": \"nf4\", \"block_size\": 32}}"
  "gpt-qlora-nf4-dq|gpt_opset17_static_nofold.onnx||{\"optimizer\": {\"type\": \"adamw\", \"lr\": 0.003, \"max_grad_norm\": 1.0}, \"lora\": {\"targets\": [\"*.c_attn.weight\"], \"r\": 4, \"alpha\": 8}, \"quantize\": {\"weights\": [\"h.*.attn.c_*.weight\", \"h.*.mlp.c_*.weight\"], \"type\": \"nf4\", \"block_size\": 32, \"double_quant\": true}}"
  "gpt-qlora-int8|gpt_opset17_static_nofold.onnx||{\"optimizer\": {\"type\": \"adamw\", \"lr\": 0.003, \"max_grad_norm\": 1.0}, \"lora\": {\"targets\": [\"*.c_proj.weight\"], \"r\": 4, \"alpha\": 8}, \"quantize\": {\"weights\": [\"h.*.c_fc.weight\", \"h.*.c_proj.weight\"], \"type\": \"int8\"}}"
)

# The plans over several ranks: name | ranks | plan | environment.
# pp cases run with a small NCCL_P2P_NET_CHUNKSIZE, so that every transfer
# goes in many pieces and the grouping of sends and receives is stressed.
ranks_opt='"optimizer": {"type": "adamw", "lr": 0.01, "weight_decay": 0.1, "max_grad_norm": 0.5}'
ranks_bf16='"precision": "bf16-mixed"'
ranks_mb='"batch": {"micro_batches": 4}'
ranks_chunk=NCCL_P2P_NET_CHUNKSIZE=2048
ranks_cases=(
  "one|1|{$ranks_opt}|"
  "one-bf16|1|{$ranks_bf16, $ranks_opt}|"
  "dp2-zero0|2|{$ranks_opt, \"mesh\": {\"dp\": 2}}|"
  "dp2-zero1|2|{$ranks_opt, \"mesh\": {\"dp\": 2}, \"zero\": {\"stage\": 1}}|"
  "dp2-zero2|2|{$ranks_opt, \"mesh\": {\"dp\": 2}, \"zero\": {\"stage\": 2}, \"comm\": {\"bucket_mb\": 0.01}}|"
  "dp2-zero3|2|{$ranks_opt, \"mesh\": {\"dp\": 2}, \"zero\": {\"stage\": 3}}|"
  "dp2-zero2-offload|2|{$ranks_opt, \"mesh\": {\"dp\": 2}, \"zero\": {\"stage\": 2, \"offload\": \"cpu\"}}|"
  "tp2-sp|2|{$ranks_opt, \"mesh\": {\"tp\": 2}}|"
  "tp2-nosp|2|{$ranks_opt, \"mesh\": {\"tp\": 2}, \"tensor_parallel\": {\"sequence_parallel\": false}}|"
  "pp2-1f1b|2|{$ranks_opt, $ranks_mb, \"mesh\": {\"pp\": 2}}|$ranks_chunk"
  "pp2-gpipe|2|{$ranks_opt, $ranks_mb, \"mesh\": {\"pp\": 2}, \"pipeline\": {\"schedule\": \"gpipe\"}}|$ranks_chunk"
  "pp2-interleaved|2|{$ranks_opt, $ranks_mb, \"mesh\": {\"pp\": 2}, \"pipeline\": {\"schedule\": \"interleaved\"}}|$ranks_chunk"
  "pp2-zb-h1|2|{$ranks_opt, $ranks_mb, \"mesh\": {\"pp\": 2}, \"pipeline\": {\"schedule\": \"zb-h1\"}}|$ranks_chunk"
  "dp2-tp2|4|{$ranks_opt, \"mesh\": {\"dp\": 2, \"tp\": 2}, \"zero\": {\"stage\": 1}}|"
  "dp2-tp2-pp2|8|{$ranks_opt, $ranks_mb, \"mesh\": {\"dp\": 2, \"tp\": 2, \"pp\": 2}, \"zero\": {\"stage\": 1}}|$ranks_chunk"
  "bf16-dp2-zero2|2|{$ranks_bf16, $ranks_opt, \"mesh\": {\"dp\": 2}, \"zero\": {\"stage\": 2}}|"
  "bf16-dp2-tp2-pp2|8|{$ranks_bf16, $ranks_opt, $ranks_mb, \"mesh\": {\"dp\": 2, \"tp\": 2, \"pp\": 2}}|$ranks_chunk"
  "cp2-all-gather|2|{$ranks_opt, \"mesh\": {\"cp\": 2}}|"
  "cp2-ulysses|2|{$ranks_opt, \"mesh\": {\"cp\": 2}, \"context_parallel\": {\"mode\": \"ulysses\"}}|"
  "cp2-ring|2|{$ranks_opt, \"mesh\": {\"cp\": 2}, \"context_parallel\": {\"mode\": \"ring\"}}|$ranks_chunk"
  "dp2-cp2-ring-zero1|4|{$ranks_opt, \"mesh\": {\"dp\": 2, \"cp\": 2}, \"zero\": {\"stage\": 1}, \"context_parallel\": {\"mode\": \"ring\"}}|$ranks_chunk"
  "bf16-tp2-cp2-ulysses|4|{$ranks_bf16, $ranks_opt, \"mesh\": {\"tp\": 2, \"cp\": 2}, \"context_parallel\": {\"mode\": \"ulysses\"}}|"
)
ranks_shape=(--input-shape "idx=8,16" --input-shape "targets=8,16")

# The plans over several ranks (the "ranks" part): the model, each plan's
# CUDA program, and the CPU target's run of it under mpirun (dp2-zero1 also
# saves its step-10 checkpoint for the GPU to resume).
prepare_ranks() {
  local dir="$1/ranks" autopar="$2"
  command -v mpirun > /dev/null || { echo "gpu-check: no mpirun here: the ranks part is not prepared" >&2; return 0; }
  rm -rf "$dir" && mkdir -p "$dir"
  "$py" "$root/test/models/export.py" --model gpt --vocab 64 --d-model 32 --heads 4 --layers 4 \
    --seq 16 --batch 8 --opset 17 --tied --no-constant-folding --dynamic-batch -o "$dir/gpt4.onnx" > /dev/null
  for c in "${ranks_cases[@]}"; do
    IFS='|' read -r name ranks plan _ <<< "$c"
    local out="$dir/$name"
    mkdir -p "$out"
    echo "$plan" > "$out/plan.json"
    "$autopar" compile "$dir/gpt4.onnx" --plan "$out/plan.json" "${ranks_shape[@]}" --target cuda --no-build -o "$out/cuda" > /dev/null
    # All but the first program of a kind (one rank, several) link the
    # first one's runtime (run_ranks): their runtime sources are not carried.
    if [ "$name" != one ] && [ "$name" != dp2-zero0 ]; then
      find "$out/cuda/runtime" \( -name '*.cpp' -o -name '*.cu' \) -delete
    fi
    if [ "$ranks" -gt 1 ]; then
      local save=()
      [ "$name" = dp2-zero1 ] && save=(--save "$out/cpu-ck" --save-every 10 --keep-last 2)
      "$autopar" compile "$dir/gpt4.onnx" --plan "$out/plan.json" "${ranks_shape[@]}" -o "$out/cpu-program" > /dev/null
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 600 \
        mpirun --oversubscribe -np "$ranks" "$out/cpu-program/train" --data "$1/tokens.bin" \
        --steps $steps --log "$out/cpu.jsonl" "${save[@]}" > /dev/null
      rm -rf "$out/cpu-program" "$out/cpu-ck"
    fi
    echo "prepared ranks $name"
  done
}

prepare() {
  local dir="$1" autopar="$root/build/bin/autopar"
  [ -x "$autopar" ] || { echo "gpu-check: $autopar not built (scripts/build.sh)" >&2; exit 1; }
  mkdir -p "$dir"
  "$py" "$root/test/e2e/make_tokens.py" -o "$dir/tokens.bin" --count 4000 --vocab 64 --seed 7
  local first=1
  for c in "${cases[@]}"; do
    IFS='|' read -r name fixture flags plan _ <<< "$c"
    local model="$root/test/models/fixtures/$fixture" out="$dir/$name"
    rm -rf "$out" && mkdir -p "$out"
    echo "$plan" > "$out/plan.json"
    # shellcheck disable=SC2086
    "$autopar" compile "$model" --plan "$out/plan.json" $flags --target cuda --no-build -o "$out/cuda"
    # All but the first link the first one's runtime (run): their runtime
    # sources are not carried.
    [ $first = 1 ] || find "$out/cuda/runtime" \( -name '*.cpp' -o -name '*.cu' \) -delete
    first=0
    # shellcheck disable=SC2086
    "$autopar" compile "$model" --plan "$out/plan.json" $flags -o "$out/cpu-program" > /dev/null
    "$out/cpu-program/train" --data "$dir/tokens.bin" --steps $steps --log "$out/cpu.jsonl" > /dev/null
    # A quantized base (plan quantize): PyTorch trains the program's
    # dequantized weights.
    local ref="$model"
    if grep -q '"quantize"' "$out/plan.json"; then
      ref="$out/dequantized.onnx"
      "$py" "$root/test/e2e/dequantize_weights.py" "$out/cpu-program" "$model" -o "$ref" --check > /dev/null
    fi
    rm -rf "$out/cpu-program"
    local batch=()
    [ -n "$flags" ] && batch=(--batch 4)
    "$py" "$root/test/e2e/torch_ref.py" "$ref" --plan "$out/plan.json" "${batch[@]}" \
      --data "$dir/tokens.bin" --steps $steps -o "$out/torch.jsonl"
    echo "prepared $name"
  done
  prepare_ranks "$dir" "$autopar"
  # cudnn_frontend's headers (the GPU machine reaches no package registry;
  # they include each other as ../include/...: the folder keeps its name).
  rm -rf "$dir/cudnn-frontend"
  if [ -f "$root/.deps/cudnn-frontend/include/cudnn_frontend.h" ]; then
    mkdir -p "$dir/cudnn-frontend"
    cp -r "$root/.deps/cudnn-frontend/include" "$root/.deps/cudnn-frontend/VERSION" "$dir/cudnn-frontend/"
  fi
  "$py" "$root/test/conformance/run.py" --target cuda --prepare "$dir/conformance" \
    --autopar "$autopar" --data "$root/build/test/onnx-node-data"
  if [ "${GPU_CHECK_BENCH:-0}" = 1 ]; then
    "$py" "$root/bench/gpu_gpt2/run.py" --prepare "$dir/gpu_gpt2"
  fi
}

# Prints "PASS" / "FAIL" and the worst relative difference of loss and
# grad_norm between two logs (further arguments go to compare_losses.py).
compare() {
  local ours="$1" ref="$2" rtol="$3" result="PASS" worst=""
  shift 3
  for key in loss grad_norm; do
    local out
    if out=$("$py" "$root/test/e2e/compare_losses.py" "$ours" "$ref" --steps $steps --rtol "$rtol" --key "$key" "$@" 2>&1); then
      worst+="$(echo "$out" | sed -n 's/^OK: .*max rel diff \(.*\)$/\1/p') "
    else
      result="FAIL"
      worst+="? "
    fi
  done
  echo "$result $worst"
}

# Configures and builds the program in $1 into $2, linking the prebuilt
# runtime $3 when given ($nvcc, the NCCL found by find_nccl, and only this
# GPU's architecture, $cuda_arch, not every one the program lists).
build_program() {
  local args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc")
  [ -z "$cuda_arch" ] || args+=(-DCMAKE_CUDA_ARCHITECTURES="$cuda_arch")
  [ -z "$3" ] || args+=(-DAUTOPAR_RUNTIME_LIBRARY="$3")
  [ -z "$nccl_inc" ] || args+=(-DNCCL_INCLUDE_DIR="$nccl_inc" -DNCCL_LIBRARY="$nccl_lib")
  [ -z "$cudnn_inc" ] || args+=(-DCUDNN_FRONTEND_INCLUDE_DIR="$frontend_inc"
    -DCUDNN_INCLUDE_DIR="$cudnn_inc" -DCUDNN_LIBRARY="$cudnn_lib")
  cmake -S "$1" -B "$2" "${args[@]}" && cmake --build "$2" -j
}

# Sets found_inc and found_lib: the header folder and library of a CUDA
# library (header $1, library libNAME $2, so version $3, PyTorch's pip
# wheel module $4), from the CUDA toolkit, the system, or the wheel; empty
# when none is found.
find_cuda_library() {
  found_inc="" found_lib=""
  local wheel d l
  wheel=$(python3 -c "import $4 as m; print(list(m.__path__)[0])" 2> /dev/null || true)
  for d in "$(dirname "$(dirname "$nvcc")")" /usr "$wheel"; do
    if [ -z "$d" ] || [ ! -f "$d/include/$1" ]; then continue; fi
    for l in "$d/lib64/lib$2.so" "$d/lib/lib$2.so" "$d/lib/lib$2.so.$3" "$d/lib64/lib$2.so.$3" \
             "/usr/lib/x86_64-linux-gnu/lib$2.so.$3"; do
      if [ -f "$l" ]; then found_inc="$d/include" found_lib="$l"; return 0; fi
    done
  done
}

# Sets cudnn_inc and cudnn_lib (cuDNN, or the pip wheel nvidia-cudnn) when
# the prepared folder has cudnn_frontend's headers ($frontend_inc); empty
# when either is missing (the programs then run their own attention
# kernels).
find_cudnn() {
  cudnn_inc="" cudnn_lib=""
  [ -f "$frontend_inc/cudnn_frontend.h" ] || return 0
  find_cuda_library cudnn.h cudnn 9 nvidia.cudnn
  cudnn_inc="$found_inc" cudnn_lib="$found_lib"
}

# Sets nccl_inc and nccl_lib (NCCL, or the pip wheel nvidia-nccl); empty
# when none is found.
find_nccl() {
  find_cuda_library nccl.h nccl 2 nvidia.nccl
  nccl_inc="$found_inc" nccl_lib="$found_lib"
}

# Starts `ranks` ranks of a program on the one GPU; the ranks' logs go to
# $1/ranks-logs. Returns the launcher's status.
launch_ranks() {
  local out="$1" ranks="$2" env_vars="$3"
  shift 3
  rm -rf "$out/ranks-logs"
  # shellcheck disable=SC2086 # env_vars: NAME=VALUE words
  env $env_vars "$root/scripts/launch-local.sh" -n "$ranks" --share-gpu --log-dir "$out/ranks-logs" -- "$@"
}

# Waits until the log $1 has $2 lines (at most 120 s).
wait_for_lines() {
  for _ in $(seq 1200); do
    [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}

# The ranks part of run(): adds its rows; returns 1 on any failure.
run_ranks() {
  local dir="$1/ranks" tokens="$1/tokens.bin" bad=0 runtime_one="" runtime_many="" line
  find_nccl
  # The communicator's own test, without MPI.
  local ct="$dir/comm-test"
  mkdir -p "$ct"
  if [ -z "$nccl_inc" ]; then
    rows+=("ranks comm test|FAIL|no NCCL (nccl.h and libnccl) in the CUDA toolkit, /usr or the nvidia-nccl wheel"); return 1
  fi
  local cuda_home
  cuda_home="$(dirname "$(dirname "$nvcc")")"
  if (cd "$root" && g++ -std=c++17 -O2 -Wall -Werror -I. -I"$cuda_home/include" -I"$nccl_inc" -DAUTOPAR_WITH_NCCL \
        test/cuda/CommNcclTest.cpp runtime/comm/Comm.cpp runtime/comm/NcclBackend.cpp runtime/comm/Rendezvous.cpp \
        -L"$cuda_home/lib64" -lcudart "$nccl_lib" -Wl,-rpath,"$(dirname "$nccl_lib")" -pthread -o "$ct/test") > "$ct/build.log" 2>&1; then
    local mesh
    for mesh in "2" "2 2"; do
      local n=$(( ${mesh// /*} )) status=PASS
      # shellcheck disable=SC2086 # mesh: the sizes as arguments
      launch_ranks "$ct" "$n" "" "$ct/test" $mesh > /dev/null 2>&1 || status=FAIL
      [ "$status" = PASS ] || bad=1
      line=$(grep -h "autopar-comm-nccl-test:\|error\|failed" "$ct"/ranks-logs/rank-*.log | head -1 || true)
      rows+=("ranks comm ${mesh// /x}|$status|$line")
    done
  else
    rows+=("ranks comm test|FAIL|build failed ($ct/build.log)"); bad=1
  fi
  # Each plan: build, train on its ranks, compare.
  for c in "${ranks_cases[@]}"; do
    local name ranks plan env_vars
    IFS='|' read -r name ranks plan env_vars <<< "$c"
    local out="$dir/$name" lib tol=1e-5 one=one status=PASS detail=""
    [[ "$name" == bf16* ]] && tol=1e-2 one=one-bf16
    if [ "$ranks" = 1 ]; then lib="$runtime_one"; else lib="$runtime_many"; fi
    if ! build_program "$out/cuda" "$out/build" "$lib" > "$out/build.log" 2>&1; then
      rows+=("ranks $name|FAIL|build failed ($out/build.log)"); bad=1; continue
    fi
    if [ -z "$lib" ]; then
      if [ "$ranks" = 1 ]; then runtime_one="$out/build/libautopar_runtime.a"; else runtime_many="$out/build/libautopar_runtime.a"; fi
    fi
    if ! launch_ranks "$out" "$ranks" "$env_vars" "$out/cuda/train" --data "$tokens" --steps $steps \
           --log "$out/cuda.jsonl" --comm-timeout 60 > /dev/null 2>&1; then
      line=$(tail -qn1 "$out"/ranks-logs/rank-*.log | grep -v '^{' | head -1 || true)
      rows+=("ranks $name|FAIL|train failed: $line"); bad=1; continue
    fi
    if [ "$ranks" = 1 ]; then
      rows+=("ranks $name|DONE|the one-GPU reference")
      continue
    fi
    local vs_one vs_cpu bytes
    vs_one=$(compare "$out/cuda.jsonl" "$dir/$one/cuda.jsonl" "$tol")
    vs_cpu=$(compare "$out/cuda.jsonl" "$out/cpu.jsonl" "$rtol")
    [[ "$vs_one" == PASS* && "$vs_cpu" == PASS* ]] || status=FAIL
    if bytes=$("$py" "$root/test/e2e/check_comm_bytes.py" "$out/cuda.jsonl" "$out/cuda/report.json" 2>&1); then
      bytes="comm bytes as reported"
    else
      status=FAIL
    fi
    detail="vs 1 GPU: ${vs_one#* }vs cpu: ${vs_cpu#* }$bytes"
    if [ "$name" = dp2-zero1 ]; then
      # The CPU target's step-10 checkpoint, resumed by the GPU ranks.
      local resumed="PASS"
      rm -f "$out/resumed.jsonl"
      if launch_ranks "$out" 2 "" "$out/cuda/train" --data "$tokens" --steps $steps --resume "$out/cpu-ck.step-10" \
           --log "$out/resumed.jsonl" --comm-timeout 60 > /dev/null 2>&1; then
        resumed=$(compare "$out/resumed.jsonl" "$out/cpu.jsonl" "$rtol" --min-step 10)
      else
        resumed="FAIL (resume failed)"
      fi
      [[ "$resumed" == PASS* ]] || status=FAIL
      detail+="; cpu step-10 checkpoint resumed: ${resumed%% *}"
    fi
    [ "$status" = PASS ] || bad=1
    rows+=("ranks $name|$status|$detail")
  done
  run_faults "$dir/dp2-zero1" "$tokens" || bad=1
  return $bad
}

# A stopped rank ends the others with the watchdog's line, a killed rank
# ends the job through the launcher (the dp2-zero1 program, timeout 5 s);
# the killed run's last checkpoint resumes.
run_faults() {
  local out="$1" tokens="$2" status line started bad=0
  [ -x "$out/cuda/train" ] || return 1
  for fault in STOP KILL; do
    status=PASS
    rm -rf "$out/fault-ck" "$out/fault.jsonl"
    launch_ranks "$out" 2 "" "$out/cuda/train" --data "$tokens" --steps 1000000 --log "$out/fault.jsonl" \
      --save "$out/fault-ck" --save-every 5 --comm-timeout 5 > /dev/null 2>&1 &
    local launcher=$!
    started=$(date +%s)
    if wait_for_lines "$out/fault.jsonl" 12; then
      kill -"$fault" "$(cat "$out/ranks-logs/rank-1.pid")" || true
      started=$(date +%s)
      # The launcher must report the failure.
      if wait $launcher; then status=FAIL; fi
    else
      kill $launcher 2> /dev/null || true
      wait $launcher || true
      status=FAIL
    fi
    local took=$(( $(date +%s) - started ))
    line=$(grep -h "comm.timeout_s\|NCCL failed" "$out/ranks-logs/rank-0.log" | head -1 || true)
    # A stopped rank: the others end on their own, with the watchdog's line.
    # A killed one: the launcher ends the others (as torchrun does).
    [ "$fault" = KILL ] || [ -n "$line" ] || status=FAIL
    # The job ends within the timeout plus the launcher's 5 s to kill.
    [ "$took" -le 20 ] || status=FAIL
    local detail="rank 0 after ${took} s: ${line:-no line}"
    if [ "$fault" = KILL ]; then
      local next
      next=$("$py" -c "import json,sys; print(json.load(open(sys.argv[1] + '/manifest.json'))['step'] + 2)" "$out/fault-ck" 2> /dev/null || echo 0)
      if [ "$next" -gt 2 ] && launch_ranks "$out" 2 "" "$out/cuda/train" --data "$tokens" --steps "$next" \
           --resume "$out/fault-ck" --comm-timeout 60 > /dev/null 2>&1; then
        detail+="; the last checkpoint resumed"
      else
        status=FAIL; detail+="; the last checkpoint did not resume"
      fi
    fi
    [ "$status" = PASS ] || bad=1
    rows+=("ranks SIG$fault rank 1|$status|$detail")
  done
  return $bad
}

run() {
  local dir="$1" rows=() failed=0
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
  nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  nccl_inc="" nccl_lib="" cuda_arch="" frontend_inc="$dir/cudnn-frontend/include"
  find_cudnn
  if [ -n "$cudnn_lib" ]; then
    # cuDNN loads its engine libraries from its own folder.
    LD_LIBRARY_PATH="$(dirname "$cudnn_lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
    echo "gpu-check: cuDNN $cudnn_lib, cudnn_frontend $(cat "$frontend_inc/../VERSION" 2> /dev/null || true)"
  else
    echo "gpu-check: no cuDNN or no cudnn_frontend headers: attention runs the own kernels"
  fi
  # This GPU's architecture (9.0: 90a, as the programs' default list has it).
  if command -v nvidia-smi > /dev/null; then
    cuda_arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -1 | tr -d '. ' || true)
    [ "$cuda_arch" != 90 ] || cuda_arch=90a
  fi
  local only=" ${GPU_CHECK_ONLY:-kernels programs ranks conformance bench} "
  # 1. The runtime's CUDA kernels against their CPU references.
  local kt="$dir/kernel-tests" blas=(-ldnnl) define=() cudnn=()
  [ -z "$cudnn_lib" ] || cudnn=(-DAUTOPAR_WITH_CUDNN -isystem "$frontend_inc" -isystem "$cudnn_inc"
    "$cudnn_lib" -Xlinker -rpath -Xlinker "$(dirname "$cudnn_lib")")
  [[ "$only" == *" kernels "* ]] || kernel_tests=()
  mkdir -p "$kt"
  if ! echo 'int main(){}' | g++ -x c++ - -ldnnl -o "$kt/probe" 2> /dev/null ||
     ! echo '#include <oneapi/dnnl/dnnl.h>' | g++ -x c++ -fsyntax-only - 2> /dev/null; then
    blas=() define=(-DAUTOPAR_RT_NO_BLAS)
  fi
  for test in "${kernel_tests[@]}"; do
    local status="FAIL" line="build failed ($kt/$test.build.log)" sources=("test/cuda/${test}Test.cu")
    # A test split over files (KernelsTest.cu and KernelsDataTest.cu).
    [ ! -f "$root/test/cuda/${test}DataTest.cu" ] || sources+=("test/cuda/${test}DataTest.cu")
    if (cd "$root" && "$nvcc" -std=c++17 -O2 -arch=native -I. \
          "${define[@]}" -Xcompiler=-fopenmp "${sources[@]}" runtime/cuda/*.cu \
          runtime/cuda/CudnnAttention.cpp "${cudnn[@]}" runtime/optim/Optimizer.cpp \
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
  # 2. Each program: build (the first one's runtime serves the others),
  # train, compare.
  local program_cases=("${cases[@]}") runtime_lib=""
  [[ "$only" == *" programs "* ]] || program_cases=()
  for c in "${program_cases[@]}"; do
    local name case_rtol
    IFS='|' read -r name _ _ _ case_rtol <<< "$c"
    local out="$dir/$name" status vs_cpu vs_torch ms
    if ! build_program "$out/cuda" "$out/build" "$runtime_lib" > "$out/build.log" 2>&1; then
      rows+=("$name|FAIL|build failed ($out/build.log)"); failed=1; continue
    fi
    [ -n "$runtime_lib" ] || runtime_lib="$out/build/libautopar_runtime.a"
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
  # 3. Several ranks on the one GPU.
  if [[ "$only" == *" ranks "* ]]; then
    if [ -d "$dir/ranks" ]; then run_ranks "$dir" "$nvcc" || failed=1; else rows+=("ranks|SKIP|not prepared (no mpirun where it was prepared)"); fi
  fi
  # 4. ONNX's node tests as forward-only CUDA programs: the runtime built
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
  # 5. The GPU benchmark (bench/gpu_gpt2), when prepared (GPU_CHECK_BENCH=1).
  if [[ "$only" != *" bench "* ]]; then
    :
  elif [ -f "$dir/gpu_gpt2/bench.json" ]; then
    local bench_log="$dir/gpu_gpt2.log" summary
    # shellcheck disable=SC2086 # GPU_CHECK_BENCH_ARGS: options, split on spaces
    if AUTOPAR_CUDNN_FRONTEND_DIR="$frontend_inc" \
         python3 "$root/bench/gpu_gpt2/run.py" --run "$dir/gpu_gpt2" ${GPU_CHECK_BENCH_ARGS:-} \
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
