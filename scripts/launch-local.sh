#!/usr/bin/env bash
# Starts N ranks of a program on this machine without MPI, as torchrun
# does: each with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
# MASTER_ADDR and MASTER_PORT (the endpoint where a CUDA program's ranks
# meet: runtime/comm/Rendezvous.h). When a rank fails, the others are
# stopped (SIGTERM, then SIGKILL after 5 s) and the script exits with the
# failed rank's status; 0 when every rank exits 0.
#
#   scripts/launch-local.sh -n N [--port P] [--share-gpu] [--log-dir DIR] \
#       -- PROGRAM ARGS...
#
#   --port P      MASTER_PORT (default: a free port)
#   --share-gpu   several ranks on one GPU: each rank its own NCCL_HOSTID
#                 (NCCL then treats the ranks as separate hosts, so its
#                 duplicate-GPU check passes) and NCCL's socket transport on
#                 loopback (NCCL_SOCKET_IFNAME=lo, NCCL_IB_DISABLE=1,
#                 NVLS and CollNet off). Correct, not fast.
#   --log-dir DIR each rank's output (stdout and stderr) into DIR/rank-R.log
#                 instead of this terminal, and its process id into
#                 DIR/rank-R.pid
set -uo pipefail
usage() {
  echo "usage: scripts/launch-local.sh -n N [--port P] [--share-gpu] [--log-dir DIR] -- PROGRAM ARGS..." >&2
  exit 2
}
n="" port="" share=0 logdir=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n="${2:-}"; shift 2 || usage ;;
    --port) port="${2:-}"; shift 2 || usage ;;
    --share-gpu) share=1; shift ;;
    --log-dir) logdir="${2:-}"; shift 2 || usage ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ $# -gt 0 ] || usage
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "launch-local: -n '$n' is not a rank count >= 1" >&2; exit 2; }
if [ -z "$port" ]; then
  py=/usr/bin/python3
  [ -x "$py" ] || py=python3
  port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
if ! [[ "$port" =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
  echo "launch-local: --port '$port' is not a TCP port (1 to 65535)" >&2
  exit 2
fi
[ -z "$logdir" ] || mkdir -p "$logdir" || exit 2

pids=()
stop_all() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null; done
  for _ in $(seq 50); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2> /dev/null && alive=1; done
    [ $alive = 1 ] || return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2> /dev/null; done
}
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM

for ((r = 0; r < n; ++r)); do
  env_vars=("RANK=$r" "WORLD_SIZE=$n" "LOCAL_RANK=$r" "LOCAL_WORLD_SIZE=$n"
            MASTER_ADDR=127.0.0.1 "MASTER_PORT=$port")
  if [ $share = 1 ]; then
    env_vars+=("NCCL_HOSTID=autopar-local-rank-$r" NCCL_SOCKET_IFNAME=lo
               NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_COLLNET_ENABLE=0)
  fi
  if [ -n "$logdir" ]; then
    env "${env_vars[@]}" "$@" > "$logdir/rank-$r.log" 2>&1 &
  else
    env "${env_vars[@]}" "$@" &
  fi
  pids+=($!)
  [ -z "$logdir" ] || echo $! > "$logdir/rank-$r.pid"
done

# The first rank to fail ends the others; otherwise wait for all.
status=0 left=$n
while [ "$left" -gt 0 ]; do
  wait -n "${pids[@]}"
  rc=$?
  left=$((left - 1))
  if [ "$rc" -ne 0 ]; then
    status=$rc
    stop_all
    wait 2> /dev/null
    break
  fi
done
exit $status
