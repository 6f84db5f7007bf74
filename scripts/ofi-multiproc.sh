#!/usr/bin/env bash
# Runs PLAN on libfabric's sockets provider with one process per rank: NPROCS processes of
# `coredag run --provider ofi --rank R --ranks NPROCS` (--ranks sets the plan's ranks param), the
# ranks meeting at a bootstrap on 127.0.0.1. Waits at most TIMEOUT seconds (default 120) for every
# rank, kills those still running after that, and fails if any rank failed or was killed; a failed
# rank's output is printed. Extra arguments go to every `coredag run` (default: --target
# triggered-sockets --iters 3, the offload engine on counters and triggered operations).
# Env: COREDAG (the binary; default: built here with -tags ofi), TIMEOUT.
# Usage: scripts/ofi-multiproc.sh PLAN NPROCS [RUN-ARGS...]
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 PLAN NPROCS [RUN-ARGS...]" >&2
  exit 2
fi
plan=$1 nprocs=$2
shift 2
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--target triggered-sockets --iters 3)
timeout=${TIMEOUT:-120}
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# The ranks prove to each other that they belong to this job with a secret made for it, which
# other users of the machine cannot read from the environment of its processes.
COREDAG_JOB_SECRET=$(head -c 32 /dev/urandom | base64)
export COREDAG_JOB_SECRET
bin=${COREDAG:-}
if [ -z "$bin" ]; then
  (cd "$(dirname "$0")/.." && go build -tags ofi -o "$tmp/coredag" ./cmd/coredag)
  bin=$tmp/coredag
fi
export FI_SOCKETS_IFACE=lo
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
  echo $((40000 + RANDOM % 20000)))
for r in $(seq 0 $((nprocs - 1))); do
  # timeout bounds each rank; the kill after it covers a rank that ignores SIGTERM.
  timeout -k 5 "$timeout" "$bin" run --provider ofi --ofi-provider sockets "${args[@]}" \
    --rank "$r" --ranks "$nprocs" --bootstrap "127.0.0.1:$port" "$plan" >"$tmp/out.$r" 2>&1 &
  pids+=($!)
done
failed=0
for r in "${!pids[@]}"; do
  if wait "${pids[$r]}"; then
    continue
  else
    rc=$?
  fi
  failed=1
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "FAIL $plan: rank $r of $nprocs did not finish within ${timeout}s" >&2
  else
    echo "FAIL $plan: rank $r of $nprocs exited $rc:" >&2
  fi
  sed 's/^/  /' "$tmp/out.$r" >&2
done
pids=()
if [ "$failed" = 0 ]; then
  head -1 "$tmp/out.0"
fi
exit "$failed"
