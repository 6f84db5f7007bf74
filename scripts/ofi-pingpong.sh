#!/usr/bin/env bash
# Per-hop latency on libfabric's sockets provider over loopback, side by side: coredag's offload
# engine running testdata/ofi/pingpong.dag (HOPS dependent notified writes, target
# triggered-sockets, both ranks in one process, manual progress) and fi_pingpong -p sockets -e rdm
# (two processes). Runs alternate, RUNS of each. fi_pingpong's control socket binds every
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
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
: >"$bin/coredag.txt"
: >"$bin/fi.txt"
echo "run  coredag usec/hop ($hops hops, $lanes lanes, median of 5 iterations / $hops)  fi_pingpong usec/transfer (-S 8 -I 2000)"
for i in $(seq "$runs"); do
  ns=$(timeout 300 "$bin/coredag" run --provider ofi --ofi-provider sockets --target triggered-sockets --iters 5 --json \
    -p "hops=$hops" -p "lanes=$lanes" testdata/ofi/pingpong.dag | sed -n 's/.*"median": *\([0-9]*\).*/\1/p' | head -1)
  c=$(awk -v ns="$ns" -v h="$hops" 'BEGIN { printf "%.1f", ns / 1000 / h }')
  f=$(timeout 120 unshare -n sh -c 'ip link set lo up
    fi_pingpong -p sockets -e rdm -S 8 -I 2000 >/dev/null & srv=$!; sleep 0.5
    fi_pingpong -p sockets -e rdm -S 8 -I 2000 127.0.0.1 | tail -1; wait $srv' 2>/dev/null | awk '{ print $(NF-1) }') || f=""
  echo "$i    $c    ${f:-(fi_pingpong failed)}"
  echo "$c" >>"$bin/coredag.txt"
  [ -z "$f" ] || echo "$f" >>"$bin/fi.txt"
done
mc=$(median <"$bin/coredag.txt")
if [ -s "$bin/fi.txt" ]; then
  mf=$(median <"$bin/fi.txt")
  awk -v c="$mc" -v f="$mf" 'BEGIN { printf "median: coredag %.1f usec/hop, fi_pingpong %.1f usec/transfer, ratio %.2f\n", c, f, c / f }'
else
  echo "median: coredag $mc usec/hop; fi_pingpong did not run"
fi
