#!/usr/bin/env bash
# The library's performance, side by side with Open MPI in one run (issue 29): builds libcoredag
# and examples/mpi/allreduce.c, then runs its bench mode (-b) with 4 processes, f32 sum, 8 B to
# 16 MiB, coredag start+wait interleaved with MPI_Allreduce on the same buffers, plus the OSU-style
# overlap of both. Like with like:
#   shm:     coredag on libfabric shm (polling engine)  vs  Open MPI ob1 + vader (shared memory)
#   sockets: coredag on libfabric sockets (triggered offload)  vs  Open MPI ob1 + tcp,self
#   tcp:     coredag on libfabric "tcp;ofi_rxm" (polling engine)  vs  Open MPI ob1 + tcp,self
# coredag runs the plans of a plan set per transport, examples/mpi/{shm,tcp,sockets}.set, whose
# headers say where each switches and why: the recursive doubling
# (examples/mpi/recursive_doubling_f32.dag, two steps) for short vectors, and for long ones
# Rabenseifner's reduce-scatter and allgather (examples/mpi/rabenseifner_f32.dag: four steps for 4
# ranks where the ring takes six, the ring's bytes, two-sided messages only, so no World call per
# start; on sockets its three-step variant, examples/mpi/rabenseifner_merged_f32.dag, up to 2
# MiB), as MPI libraries pick their algorithm by size. The bench's table names the plan that ran
# each size. SET runs another set; LARGE_PLAN, SMALL_PLAN and SMALL_BELOW replace the set's
# plans and first switch (a set of their own is written): SMALL_PLAN runs the sizes below
# SMALL_BELOW bytes (0: none), LARGE_PLAN every size from there up, a plan whose data is
# f32[ranks * n] or f32[n] (e.g. plans/ring_allreduce.dag); without it the set's own plans run
# from SMALL_BELOW up (a line that ends below it dropped).
# Also examples/c/callcost.c: one start+wait of a trivial plan from C. Prints the machine's load
# (uptime) before and after: on a shared machine the numbers move with it.
# Env: NP (default 4), MAXBYTES (default 16777216), PREFIX (library; default a temp dir), SET,
# LARGE_PLAN, SMALL_PLAN, SMALL_BELOW (defaults from the transport's set), SIZES (comma-separated
# bytes, e.g. 8,4096,65536,262144,1048576,4194304,16777216; default every power of two up to
# MAXBYTES), FI_OFI_RXM_BUFFER_SIZE and FI_OFI_RXM_EAGER_LIMIT (passed to the ranks when set:
# ofi_rxm's buffer size and, over tcp, its eager limit; coredag's defaults 1 KiB and 16 MiB, so
# tcp messages past 16 MiB go by rendezvous; see exec/ofi/README.md, Network).
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
# planset CONFIG: the plan set the bench runs on CONFIG's transport: SET, or one written from
# LARGE_PLAN, SMALL_PLAN and SMALL_BELOW over the transport's own set's plans and switch.
planset() {
  local own=examples/mpi/$1.set
  if [ -n "${SET:-}" ]; then echo "$SET"; return; fi
  if [ -z "${LARGE_PLAN:-}${SMALL_PLAN:-}${SMALL_BELOW:-}" ]; then echo "$own"; return; fi
  # the transport's set at NP ranks: its first such line's plan below its switch (SMALL_PLAN,
  # SMALL_BELOW), then LARGE_PLAN from the switch up, or else the set's own later lines from the
  # switch up (a line that ends below it dropped)
  local small below lines
  lines=$(awk -v np="$np" '$1 == "plan" {
      lo = $6; hi = $6; sub(/\.\..*/, "", lo); sub(/.*\.\./, "", hi)
      if (np + 0 >= lo + 0 && (hi == "" || np + 0 <= hi + 0)) print $2, $4 }' "$own")
  small=examples/mpi/$(echo "$lines" | awk 'NR == 1 { print $1 }')
  below=$(echo "$lines" | awk 'NR == 2 { sub(/\.\..*/, "", $2); print $2 }')
  small=$(realpath "${SMALL_PLAN:-$small}") below=${SMALL_BELOW:-$below}
  {
    echo "collective allreduce"
    [ "$below" = 0 ] || echo "plan $small sizes 0..$below ranks 1.."
    if [ -n "${LARGE_PLAN:-}" ]; then
      echo "plan $(realpath "$LARGE_PLAN") sizes $below.. ranks 1.."
    else
      echo "$lines" | awk -v below="$below" -v dir="$root/examples/mpi" '
        function bytes(x) { # 192KiB, 2MiB, 4096
          if (x ~ /KiB$/) return substr(x, 1, length(x) - 3) * 1024
          if (x ~ /MiB$/) return substr(x, 1, length(x) - 3) * 1048576
          return x + 0
        }
        NR >= 2 {
          lo = $2; hi = $2; sub(/\.\..*/, "", lo); sub(/.*\.\./, "", hi)
          if (hi != "" && bytes(hi) <= bytes(below)) next
          if (NR == 2 || bytes(lo) < bytes(below)) lo = below
          print "plan " dir "/" $1 " sizes " lo ".." hi " ranks 1.."
        }'
    fi
  } >"$tmp/$1.set"
  echo "$tmp/$1.set"
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
  set=$(planset "$config")
  sizes=()
  [ -z "${SIZES:-}" ] || sizes=(-s "$SIZES")
  env=(-x FI_SOCKETS_IFACE=lo)
  [ -z "${FI_OFI_RXM_BUFFER_SIZE:-}" ] || env+=(-x FI_OFI_RXM_BUFFER_SIZE)
  [ -z "${FI_OFI_RXM_EAGER_LIMIT:-}" ] || env+=(-x FI_OFI_RXM_EAGER_LIMIT)
  echo "== $config: coredag ${opts[*]}${FI_OFI_RXM_BUFFER_SIZE:+ FI_OFI_RXM_BUFFER_SIZE=$FI_OFI_RXM_BUFFER_SIZE}${FI_OFI_RXM_EAGER_LIMIT:+ FI_OFI_RXM_EAGER_LIMIT=$FI_OFI_RXM_EAGER_LIMIT} vs Open MPI ${mca[*]}"
  timeout -k 10 1800 mpirun --allow-run-as-root --oversubscribe -np "$np" "${mca[@]}" --mca btl_tcp_if_include lo \
    "${env[@]}" "$tmp/allreduce" -b -m "$max" -p "$set" "${sizes[@]}" "${opts[@]}" || echo "== $config failed (exit $?)"
done
echo "# $(uptime)"
