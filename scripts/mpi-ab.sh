#!/usr/bin/env bash
# Compares two coredag revisions or libraries in scripts/mpi-bench.sh, alternating them in the
# order ABBA so that a load which rises or falls during the script weighs on both alike (a plain
# A, B, A, B with a rising load put the later library behind in 15 of 21 cells once:
# docs/library.md, Cost).
# A and B are git revisions or directories a library is installed in (PREFIX of
# scripts/build-lib.sh). A revision is checked out in a detached worktree, and both its library
# (its scripts/build-lib.sh) and its bench (its scripts/mpi-bench.sh, examples/mpi/allreduce.c,
# the plans and the switch by size) run; a directory's library runs in this tree's bench (so
# changes not yet committed take a library built from this tree, and this tree's bench). Both
# run with this environment (SIZES, SMALL_BELOW, NP, ...: see scripts/mpi-bench.sh).
# Prints, per configuration and size, the median ratio to Open MPI (coredag / MPI_Allreduce) and
# coredag's median time of each library over RUNS runs, with the ratio's range, then the load.
# Env: RUNS (default 6, even: as many runs of each library in each position), KEEP (a directory
# that keeps every run's output).
# Usage: scripts/mpi-ab.sh A B [shm|sockets|tcp]...   (default: shm sockets tcp)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -ge 2 ] || { sed -n 's/^# Usage: /usage: /p' "$0" >&2; exit 2; }
a=$1 b=$2
shift 2
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(shm sockets tcp)
runs=${RUNS:-6}
tmp=$(mktemp -d)
trees=()
cleanup() {
  for t in "${trees[@]}"; do git worktree remove --force "$t" >/dev/null 2>&1 || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
out=${KEEP:-$tmp/out}
mkdir -p "$out"

# side NAME SPEC: sets lib to the prefix of SPEC's library and bench to the tree whose bench
# runs it: for a directory with lib/libcoredag.so, that directory and this tree; for a git
# revision, its library built into $tmp/NAME and its worktree.
side() {
  if [ -e "$2/lib/libcoredag.so" ]; then
    lib=$(cd "$2" && pwd) bench=$root
    return
  fi
  local rev
  rev=$(git rev-parse --verify --quiet "$2^{commit}") || { echo "$0: $2 is neither a library prefix nor a git revision" >&2; exit 2; }
  git worktree add --detach --quiet "$tmp/src-$1" "$rev"
  trees+=("$tmp/src-$1")
  "$tmp/src-$1/scripts/build-lib.sh" "$tmp/$1" >/dev/null
  lib=$tmp/$1 bench=$tmp/src-$1
}
side a "$a"
pa=$lib ba=$bench
side b "$b"
pb=$lib bb=$bench
echo "# A = $a (library $pa, bench $ba), B = $b (library $pb, bench $bb), $runs runs in the order ABBA: ${configs[*]}"
echo "# $(uptime)"
for i in $(seq 1 "$runs"); do
  order=(a b)
  [ $((i % 2)) = 1 ] || order=(b a)
  for side in "${order[@]}"; do
    prefix=$pa tree=$ba
    [ "$side" = b ] && prefix=$pb tree=$bb
    PREFIX=$prefix "$tree/scripts/mpi-bench.sh" "${configs[@]}" >"$out/$side-$i.txt" 2>&1 || { echo "$0: run $i of $side failed; its output:" >&2; cat "$out/$side-$i.txt" >&2; exit 1; }
  done
done
echo "# $(uptime)"
# One line per run, configuration and size: side config bytes coredag_us ratio.
for i in $(seq 1 "$runs"); do
  for side in a b; do
    awk -v side="$side" '/^== / { config = "" } /^== [a-z]+:/ { config = substr($2, 1, length($2) - 1) }
      config != "" && $1 ~ /^[0-9]+$/ && NF >= 5 { print side, config, $1, $3, $5 }' "$out/$side-$i.txt"
  done
done | sort -k2,2 -k3,3n -k1,1 | awk '
  # sorted(list, v): splits list into v, sorted in increasing order (insertion sort: a few runs).
  function sorted(list, v,   n, i, j, x) {
    n = split(list, v, " ")
    for (i = 2; i <= n; i++) { x = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
    return n
  }
  function median(list,   v, n) { n = sorted(list, v); return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
  function range(list,   v, n) { n = sorted(list, v); return sprintf("%.2f-%.2f", v[1], v[n]) }
  { key = $2 " " $3; if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
    us[key, $1] = us[key, $1] " " $4; ratio[key, $1] = ratio[key, $1] " " $5 }
  END {
    printf "%-8s %9s | %8s %11s %10s | %8s %11s %10s\n", "config", "bytes", "A ratio", "range", "A us", "B ratio", "range", "B us"
    for (i = 1; i <= nk; i++) {
      k = keys[i]; split(k, f, " ")
      printf "%-8s %9s | %8.2f %11s %10.1f | %8.2f %11s %10.1f\n", f[1], f[2],
        median(ratio[k, "a"]), range(ratio[k, "a"]), median(us[k, "a"]), median(ratio[k, "b"]), range(ratio[k, "b"]), median(us[k, "b"])
    }
  }'
