#!/usr/bin/env bash
# Builds coredag's C library and installs it under PREFIX (default: ./build):
#   PREFIX/lib/libcoredag.so           go build -buildmode=c-shared -tags ofi ./cmd/libcoredag
#                                      (-tags ofi,verbs where libibverbs' headers are installed,
#                                      libibverbs-dev: then provider=verbs runs too)
#   PREFIX/include/coredag.h           the hand-written header (cmd/libcoredag/coredag.h)
#   PREFIX/lib/pkgconfig/coredag.pc    so that this works:
#     cc prog.c $(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig pkg-config --cflags --libs coredag)
# The .pc's Libs carry -Wl,-rpath,PREFIX/lib, so the program finds the library without
# LD_LIBRARY_PATH. Needs Go with cgo, a C compiler, and libfabric's headers (libfabric-dev);
# GOFLAGS and CC are honoured. Usage: scripts/build-lib.sh [PREFIX]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-$root/build}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
tmp=$(mktemp -d "$prefix/lib/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tags=ofi
[ ! -e /usr/include/infiniband/verbs.h ] || tags=ofi,verbs
(cd "$root" && CGO_ENABLED=1 go build -buildmode=c-shared -tags "$tags" -o "$tmp/libcoredag.so" ./cmd/libcoredag)
# go build also writes cgo's export header (libcoredag.h) there; users include coredag.h instead.
mv "$tmp/libcoredag.so" "$prefix/lib/libcoredag.so"
install -m 644 "$root/cmd/libcoredag/coredag.h" "$prefix/include/coredag.h"
version=$(sed -n 's/^#define COREDAG_VERSION_\(MAJOR\|MINOR\) \([0-9]*\)$/\2/p' "$root/cmd/libcoredag/coredag.h" | paste -sd.)
cat >"$prefix/lib/pkgconfig/coredag.pc.tmp" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: coredag
Description: proven collective and pipeline plans on RDMA NICs, as persistent collectives on the caller's memory
URL: https://github.com/coredag/coredag
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lcoredag
PC
mv "$prefix/lib/pkgconfig/coredag.pc.tmp" "$prefix/lib/pkgconfig/coredag.pc"
echo "installed $prefix/lib/libcoredag.so (providers softnic, ${tags/,/, }), $prefix/include/coredag.h, $prefix/lib/pkgconfig/coredag.pc"
