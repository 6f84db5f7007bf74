#!/usr/bin/env bash
# Per-hop latency on libfabric's sockets provider over loopback, side by side: coredag's offload
# engine running testdata/ofi/pingpong.dag (HOPS dependent notified writes, target
# triggered-sockets, manual progress) with both ranks in one process and with one process per
# rank (bootstrap on 127.0.0.1), and fi_pingpong -p sockets -e rdm (two processes). Runs
# alternate, RUNS of each; coredag's figure is the median of 5 iterations / HOPS. fi_pingpong's control socket binds every
# interface, so it runs in a private network namespace holding only lo (unshare -n; needs root or
# user namespaces). Both run with FI_SOCKETS_IFACE=lo; fi_pingpong with FI_SOCKETS_PE_WAITTIME=0
# (its progress thread sleeps at once; the default costs it milliseconds per transfer).
# Prints each run, the medians and their ratio.
# LANES (env, default 1) spreads the hops over that many queue pairs (testdata/ofi/pingpong.dag).
# Usage: scripts/ofi-pingpong.sh [HOPS (1000)] [RUNS (5)]
set -euo pipefail
hops=${1:-1000}
runs=${2:-5}
lanes=${LANES:-1}
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -tags ofi -o "$bin/coredag" ./cmd/coredag
export FI_SOCKETS_IFACE=lo FI_SOCKETS_PE_WAITTIME=0
COREDAG_JOB_SECRET=$(head -c 32 /dev/urandom | base64) # the two-process runs' job secret
export COREDAG_JOB_SECRET
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
: >"$bin/coredag.txt"
: >"$bin/coredag2.txt"
: >"$bin/fi.txt"
run=(run --provider ofi --ofi-provider sockets --target triggered-sockets --iters 5 --json -p "hops=$hops" -p "lanes=$lanes")
perhop() { awk -v ns="$1" -v h="$hops" 'BEGIN { if (ns == "") print "-"; else printf "%.1f", ns / 1000 / h }'; }
echo "usec per hop ($hops hops, $lanes lanes) / per transfer"
echo "run  coredag-1-process  coredag-2-processes  fi_pingpong(-S 8 -I 2000)"
for i in $(seq "$runs"); do
  c=$(perhop "$(timeout 300 "$bin/coredag" "${run[@]}" testdata/ofi/pingpong.dag | sed -n 's/.*"median": *\([0-9]*\).*/\1/p' | head -1)")
  port=$(( 40000 + RANDOM % 20000 ))
  timeout 300 "$bin/coredag" "${run[@]}" --rank 1 --ranks 2 --bootstrap "127.0.0.1:$port" testdata/ofi/pingpong.dag >/dev/null 2>&1 &
  c2=$(perhop "$(timeout 300 "$bin/coredag" "${run[@]}" --rank 0 --ranks 2 --bootstrap "127.0.0.1:$port" testdata/ofi/pingpong.dag |
    sed -n 's/.*"median_ns": *\([0-9]*\).*/\1/p' | head -1)")
  wait
  f=$(timeout 120 unshare -n sh -c 'ip link set lo up
    fi_pingpong -p sockets -e rdm -S 8 -I 2000 >/dev/null & srv=$!; sleep 0.5
    fi_pingpong -p sockets -e rdm -S 8 -I 2000 127.0.0.1 | tail -1; wait $srv' 2>/dev/null | awk '{ print $(NF-1) }') || f=""
  echo "$i    $c    $c2    ${f:-(fi_pingpong failed)}"
  [ "$c" = - ] || echo "$c" >>"$bin/coredag.txt"
  [ "$c2" = - ] || echo "$c2" >>"$bin/coredag2.txt"
  [ -z "$f" ] || echo "$f" >>"$bin/fi.txt"
done
mc=$(median <"$bin/coredag.txt")
mc2=$(median <"$bin/coredag2.txt")
if [ -s "$bin/fi.txt" ]; then
  mf=$(median <"$bin/fi.txt")
  awk -v c="$mc" -v c2="$mc2" -v f="$mf" 'BEGIN {
    printf "medians: coredag %.1f usec/hop in 1 process (ratio %.2f to fi_pingpong), %.1f in 2 processes (ratio %.2f); fi_pingpong %.1f usec/transfer\n", c, c / f, c2, c2 / f, f }'
else
  echo "medians: coredag $mc usec/hop in 1 process, $mc2 in 2 processes; fi_pingpong did not run"
fi
