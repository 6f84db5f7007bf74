#!/bin/bash
# .ci/vm.sh -- real RDMA in CI: build coredag's verbs and libfabric (ofi) providers on the host, then run
# scripts/vm-test.sh inside a throw-away VM with a Soft-RoCE device (.ci/rxe-vm.sh).
# Exits non-zero if any plan or fault case fails there. Called by .ci/run; runnable alone from the
# repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
RXE_VM=${RXE_VM:-.ci/rxe-vm.sh}
PKGS="qemu-system-x86 busybox-static kmod rdma-core ibverbs-providers ibverbs-utils iproute2 cpio perftest libibverbs-dev libfabric-dev libfabric-bin"

missing=$(for p in $PKGS; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'ok installed' || echo "$p"; done)
if [ -n "$missing" ]; then
  echo "installing: $missing"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
if [ ! -x "$RXE_VM" ]; then
  echo ".ci/vm.sh: $RXE_VM not found (set RXE_VM to the Soft-RoCE VM runner)" >&2
  exit 2
fi

export GOFLAGS=${GOFLAGS:--mod=mod}
mkdir -p out
echo "building with -tags verbs"
go vet -tags verbs ./exec/verbs ./exec/bootstrap
go test -c -tags verbs -o out/verbs.test ./exec/verbs
go build -tags verbs -o out/coredag ./cmd/coredag
cc -O2 -Wall -o out/pingpong-floor scripts/pingpong-floor.c -libverbs
# libfabric's verbs;ofi_rxm on the same Soft-RoCE device. The VM's root is the host's (read-only,
# .ci/rxe-vm.sh), so libfabric1 and its verbs dependencies installed here are the VM's too.
echo "building with -tags ofi"
go vet -tags ofi ./exec/ofi
go test -c -tags ofi -o out/ofi.test ./exec/ofi
go build -tags ofi -o out/coredag-ofi ./cmd/coredag

# The VM is emulated when KVM is unusable: give it time (every plan twice, faults, benchmarks).
VM_TIMEOUT=${VM_TIMEOUT:-1500} "$RXE_VM" scripts/vm-test.sh
