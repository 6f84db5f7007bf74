#!/usr/bin/env bash
# Per-hop latency on libfabric's sockets provider over loopback: coredag's offload engine running
# testdata/ofi/pingpong.dag (200 hops, target triggered-sockets, every rank in one process)
# beside fi_pingpong -p sockets -e rdm. fi_pingpong's control socket binds every interface, so it
# runs in a private network namespace holding only lo (unshare -n; needs root or user namespaces).
# Both run with FI_SOCKETS_PE_WAITTIME=0 and FI_SOCKETS_IFACE=lo. Usage: scripts/ofi-pingpong.sh [RUNS]
set -euo pipefail
runs=${1:-5}
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -tags ofi -o "$bin/coredag" ./cmd/coredag
export FI_SOCKETS_IFACE=lo FI_SOCKETS_PE_WAITTIME=0
echo "coredag offload engine, triggered-sockets, 200 hops, median iteration / 200 (usec per hop):"
for _ in $(seq "$runs"); do
  ns=$(timeout 300 "$bin/coredag" run --provider ofi --ofi-provider sockets --target triggered-sockets --iters 5 --json \
    testdata/ofi/pingpong.dag | sed -n 's/.*"median": *\([0-9]*\).*/\1/p' | head -1)
  awk -v ns="$ns" 'BEGIN { printf "  %.1f\n", ns / 1000 / 200 }'
done
echo "fi_pingpong -p sockets -e rdm -S 8 -I 2000 (usec per transfer, half a round trip):"
for _ in $(seq "$runs"); do
  timeout 120 unshare -n sh -c 'ip link set lo up
    fi_pingpong -p sockets -e rdm -S 8 -I 2000 >/dev/null & srv=$!; sleep 0.5
    fi_pingpong -p sockets -e rdm -S 8 -I 2000 127.0.0.1 | tail -1; wait $srv' |
    awk '{ print "  " $(NF-1) }' 2>/dev/null || echo "  (fi_pingpong failed)"
done
