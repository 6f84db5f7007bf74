#!/usr/bin/env bash
# The library's performance, side by side with Open MPI in one run (issue 29): builds libcoredag
# and examples/mpi/allreduce.c, then runs its bench mode (-b) with 4 processes, f32 sum, 8 B to
# 16 MiB, coredag start+wait interleaved with MPI_Allreduce on the same buffers, plus the OSU-style
# overlap of both. Like with like:
#   shm:     coredag on libfabric shm (polling engine)  vs  Open MPI ob1 + vader (shared memory)
#   sockets: coredag on libfabric sockets (triggered offload)  vs  Open MPI ob1 + tcp,self
#   tcp:     coredag on libfabric "tcp;ofi_rxm" (polling engine)  vs  Open MPI ob1 + tcp,self
# coredag runs Rabenseifner's reduce-scatter and allgather (examples/mpi/rabenseifner_f32.dag:
# four steps for 4 ranks where the ring takes six, the ring's bytes, and two-sided messages only,
# so no World call per start; on sockets its three-step variant,
# examples/mpi/rabenseifner_merged_f32.dag, whose header has the figures) from SMALL_BELOW bytes
# up (by default 128 KiB on shm, 384 KiB on tcp, 768 KiB on sockets: measured below), and below,
# the recursive doubling of examples/mpi/recursive_doubling_f32.dag (two steps), as MPI libraries
# pick their algorithm by size. LARGE_PLAN picks another plan with data f32[ranks * n], e.g.
# plans/ring_allreduce.dag, SMALL_PLAN another with data f32[n] for the sizes below SMALL_BELOW.
# Also examples/c/callcost.c: one start+wait of a trivial plan from C. Prints the machine's load
# (uptime) before and after: on a shared machine the numbers move with it.
# Env: NP (default 4), MAXBYTES (default 16777216), PREFIX (library; default a temp dir), LARGE_PLAN, SMALL_PLAN,
# SMALL_BELOW (default per transport, above; 0: the large plan at every size), SIZES (comma-separated bytes, e.g.
# 8,4096,65536,262144,1048576,4194304,16777216; default every power of two up to MAXBYTES),
# FI_OFI_RXM_BUFFER_SIZE and FI_OFI_RXM_EAGER_LIMIT (passed to the ranks when set: ofi_rxm's buffer
# size and, over tcp, its eager limit; coredag's defaults 1 KiB and 16 MiB, so tcp messages past
# 16 MiB go by rendezvous; see exec/ofi/README.md, Network).
# Usage: scripts/mpi-bench.sh [shm|sockets|tcp|callcost]...   (default: all)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=${PREFIX:-$tmp/prefix}
[ -e "$prefix/lib/libcoredag.so" ] || scripts/build-lib.sh "$prefix" >/dev/null
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
mpicc -O2 -Wall -o "$tmp/allreduce" examples/mpi/allreduce.c $(pkg-config --cflags --libs coredag)
# shellcheck disable=SC2046
cc -O2 -Wall -o "$tmp/callcost" examples/c/callcost.c $(pkg-config --cflags --libs coredag)
np=${NP:-4}
max=${MAXBYTES:-16777216}
# plans BELOW LARGE: the options that pick the plans, switching at BELOW bytes (0: the large
# plan only) to LARGE, unless LARGE_PLAN says otherwise.
plans() {
  local small=()
  [ "$1" = 0 ] || small=(-q "${SMALL_PLAN:-examples/mpi/recursive_doubling_f32.dag}" -t "$1")
  [ -z "${SIZES:-}" ] || small+=(-s "$SIZES")
  echo "${small[@]}" -p "${LARGE_PLAN:-$2}"
}
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(callcost shm sockets tcp)
echo "# $(uptime)"
echo "# $(nproc) cores; $(mpirun --version 2>/dev/null | head -1); libfabric $(fi_info --version 2>/dev/null | sed -n 's/^libfabric: //p')"
for config in "${configs[@]}"; do
  case $config in
  callcost) echo "== callcost"; "$tmp/callcost" 20000; continue ;;
  shm) mca=(--mca pml ob1 --mca btl vader,self); opts=(-o provider=ofi -o ofi_provider=shm -o engine=poll) ;;
  sockets) mca=(--mca pml ob1 --mca btl tcp,self); opts=(-o provider=ofi -o ofi_provider=sockets -o engine=offload -o target=triggered-sockets) ;;
  tcp) mca=(--mca pml ob1 --mca btl tcp,self); opts=(-o provider=ofi -o "ofi_provider=tcp;ofi_rxm" -o engine=poll) ;;
  *) echo "$0: unknown configuration $config" >&2; exit 2 ;;
  esac
  # Where the switch is, per transport. Session 33, 8 runs each way in ABBA order (load 0.5-4.5),
  # median ratio to Open MPI, recursive doubling against Rabenseifner's: on shm 1.36/1.74 at 64
  # KiB, even at 128 and 192 KiB (1.44/1.47, 1.39/1.47), Rabenseifner's ahead from 256 KiB (1.40/1.27
  # and 1.38/1.25 in two scripts, 1.23/1.10 at 384 KiB); on tcp;ofi_rxm the recursive doubling
  # ahead at 256 KiB (0.97/1.06), Rabenseifner's at 384 KiB (1.23/0.89); on sockets the recursive
  # doubling ahead at 256 KiB (0.98 against 1.16-1.21, 6 runs in turn). Earlier sessions, before the sums
  # got faster: on tcp the recursive doubling ahead at 256 KiB (0.87 and 1.17 against 1.25 and
  # 1.50) and behind from 512 KiB; on shm even at 256 KiB (1.68 and 1.66). Session 34, after
  # Rabenseifner's reduces stopped waiting for their sends (examples/mpi/rabenseifner_f32.dag), on
  # shm, 8 and 10 runs each way in ABBA order (load 2.0-3.1), the recursive doubling ahead at 64
  # and 96 KiB (1.30/1.49, 1.25/1.44), even at 128 KiB (1.39/1.24 and 1.29/1.31, and 1.21/1.31
  # in the session's closing script: faster in 16 of 24 pairs, ratio lower in 12), Rabenseifner's
  # ahead at 192 KiB (1.27/1.19 and 1.35/1.27). Session 41, on sockets against the three-step
  # Rabenseifner, 10 runs each way in ABBA order (load 3.3-4.1): the recursive doubling ahead at
  # 256 and 512 KiB (0.76-0.81 and 0.86-0.87 in two scripts, against 0.91 and 0.93), behind at
  # 768 KiB (1.04 against 0.97); and at 1 MiB 1.50 against the four-step plan's 1.08.
  large=examples/mpi/rabenseifner_f32.dag
  case $config in
  shm) below=131072 ;;
  tcp) below=393216 ;;
  *) below=786432 large=examples/mpi/rabenseifner_merged_f32.dag ;;
  esac
  read -r -a small <<<"$(plans "${SMALL_BELOW:-$below}" "$large")"
  env=(-x FI_SOCKETS_IFACE=lo)
  [ -z "${FI_OFI_RXM_BUFFER_SIZE:-}" ] || env+=(-x FI_OFI_RXM_BUFFER_SIZE)
  [ -z "${FI_OFI_RXM_EAGER_LIMIT:-}" ] || env+=(-x FI_OFI_RXM_EAGER_LIMIT)
  echo "== $config: coredag ${opts[*]}${FI_OFI_RXM_BUFFER_SIZE:+ FI_OFI_RXM_BUFFER_SIZE=$FI_OFI_RXM_BUFFER_SIZE}${FI_OFI_RXM_EAGER_LIMIT:+ FI_OFI_RXM_EAGER_LIMIT=$FI_OFI_RXM_EAGER_LIMIT} vs Open MPI ${mca[*]}"
  timeout -k 10 1800 mpirun --allow-run-as-root --oversubscribe -np "$np" "${mca[@]}" --mca btl_tcp_if_include lo \
    "${env[@]}" "$tmp/allreduce" -b -m "$max" "${small[@]}" "${opts[@]}" || echo "== $config failed (exit $?)"
done
echo "# $(uptime)"
