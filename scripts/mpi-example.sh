#!/usr/bin/env bash
# Builds libcoredag (scripts/build-lib.sh) and the MPI example (examples/mpi/allreduce.c, with
# Open MPI's mpicc), then runs it as CI does: 2 and 4 processes under mpirun, coredag on
# libfabric's shm provider with the polling engine, and on the sockets provider with the
# triggered offload engine (target triggered-sockets), on shm with half the ranks using CMA
# (mixed), and through the plan sets scripts/mpi-bench.sh runs (coredag_plan_open_set), the plans
# they pick for short (doubling) and long (rabenseifner) vectors on shm, and for long vectors on
# sockets, triggered (merged); these check that the set picked the plan they name for each world
# size. Each run writes fresh data every iteration and compares coredag's sums with
# MPI_Allreduce's; any difference or error fails.
# Env: ITERS (default 300), COUNT f32 per rank (default 4096), TIMEOUT seconds per run (default
# 300), PREFIX (where to build the library; default a temporary directory).
# Last, tests/c/mpi_dlopen.c loads the library with dlopen after MPI_Init and checks that a panic
# inside it comes back as COREDAG_ERR_INTERNAL.
# Usage: scripts/mpi-example.sh [shm|sockets|boot|mixed|doubling|rabenseifner|merged]...   (default: all)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=${PREFIX:-$tmp/prefix}
scripts/build-lib.sh "$prefix" >/dev/null
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
mpicc -O2 -Wall -o "$tmp/allreduce" examples/mpi/allreduce.c $(pkg-config --cflags --libs coredag)
# shellcheck disable=SC2046
mpicc -O2 -Wall -o "$tmp/mpi_dlopen" tests/c/mpi_dlopen.c -ldl $(pkg-config --cflags coredag)
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(shm sockets boot mixed doubling rabenseifner merged)
for config in "${configs[@]}"; do
  want2= want4= # the plan a set must pick for 2 and 4 processes
  case $config in
  shm) opts=(-o provider=ofi -o ofi_provider=shm -o engine=poll) ;;
  sockets) opts=(-o provider=ofi -o ofi_provider=sockets -o engine=offload -o target=triggered-sockets) ;;
  boot) opts=(-B -o provider=ofi -o ofi_provider=shm -o engine=poll) ;;
  # Half the ranks with cross-memory attach, half without: each pair then moves by segments,
  # whatever one side's own settings say (exec/ofi/README.md, Shared memory copies).
  mixed) opts=(-o provider=ofi -o ofi_provider=shm -o engine=poll) ;;
  # The plans examples/mpi/shm.set picks below and from its switch (4 ranks: 128 KiB; 2 ranks:
  # 4 MiB): 16 KiB, and 256 KiB, where 2 ranks still run the recursive doubling.
  doubling) want2=recursive_doubling_f32 want4=recursive_doubling_f32 opts=(-p examples/mpi/shm.set -c 4096 -o provider=ofi -o ofi_provider=shm -o engine=poll) ;;
  rabenseifner) want2=recursive_doubling_f32 want4=rabenseifner_f32 opts=(-p examples/mpi/shm.set -c 65536 -o provider=ofi -o ofi_provider=shm -o engine=poll) ;;
  # The plan examples/mpi/sockets.set picks from its switch for 4 ranks (192 KiB), triggered: 1
  # MiB (2 ranks switch at 2 MiB).
  merged) want2=recursive_doubling_f32 want4=rabenseifner_merged_f32 opts=(-p examples/mpi/sockets.set -c 262144 -o provider=ofi -o ofi_provider=sockets -o engine=offload -o target=triggered-sockets) ;;
  *) echo "$0: unknown configuration $config (want shm, sockets, boot, mixed, doubling, rabenseifner or merged)" >&2; exit 2 ;;
  esac
  for np in 2 4; do
    echo "== $config, $np processes: ${opts[*]}"
    env=(-x FI_SOCKETS_IFACE=lo)
    if [ "$config" = boot ]; then
      port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((40000 + RANDOM % 20000)))
      env+=(-x "COREDAG_BOOTSTRAP=127.0.0.1:$port")
    fi
    # FI_SOCKETS_IFACE keeps the sockets provider on loopback; timeout bounds a hung run.
    args=("$tmp/allreduce" -i "${ITERS:-300}" -c "${COUNT:-4096}" "${opts[@]}")
    if [ "$config" = mixed ]; then
      timeout -k 10 "${TIMEOUT:-300}" mpirun --allow-run-as-root --oversubscribe \
        -np $((np / 2)) "${env[@]}" -x FI_SHM_DISABLE_CMA=0 "${args[@]}" : \
        -np $((np / 2)) "${env[@]}" -x FI_SHM_DISABLE_CMA=1 "${args[@]}"
      continue
    fi
    timeout -k 10 "${TIMEOUT:-300}" mpirun --allow-run-as-root --oversubscribe -np "$np" "${env[@]}" "${args[@]}" | tee "$tmp/out"
    want=$want4
    [ "$np" = 4 ] || want=$want2
    if [ -n "$want" ] && ! grep -q "(plan $want)" "$tmp/out"; then
      echo "$0: $config, $np processes: the set did not pick $want" >&2
      exit 1
    fi
  done
done
# The library loaded after MPI_Init, and a panic inside it recovered, in an Open MPI process.
echo "== dlopen after MPI_Init, 2 processes"
timeout -k 10 "${TIMEOUT:-300}" mpirun --allow-run-as-root --oversubscribe -np 2 "$tmp/mpi_dlopen" "$prefix/lib/libcoredag.so"
