#!/usr/bin/env bash
# Installs libchash into a temporary prefix from a plain (unsanitized) build, then compiles the
# README example against it through pkg-config, shared and static, and runs both. Also checks
# that the shared library exports only the public ch_ API.
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake -S "$src" -B "$work/build" -DCHASH_TESTS=OFF -DCHASH_BENCH=OFF \
      -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
cmake --build "$work/build" -j 2 >/dev/null
cmake --install "$work/build" >/dev/null

libdir=$(find "$work/prefix" -name chash.pc -printf '%h\n' | head -n 1)
export PKG_CONFIG_PATH=$libdir
for f in include/chash.h; do test -f "$work/prefix/$f" || { echo "missing $f" >&2; exit 1; }; done
ls "$libdir"/../libchash.a "$libdir"/../libchash.so >/dev/null

cc -Wall -Werror "$src/examples/readme_example.c" $(pkg-config --cflags --libs chash) \
   -Wl,-rpath,"$libdir/.." -o "$work/shared"
cc -Wall -Werror "$src/examples/readme_example.c" $(pkg-config --cflags chash) \
   "$libdir/../libchash.a" $(pkg-config --libs-only-l --static chash | sed 's/-lchash//') -o "$work/static"
out_shared=$("$work/shared")
out_static=$("$work/static")
echo "$out_shared"
[ "$out_shared" = "$out_static" ] || { echo "shared and static builds disagree" >&2; exit 1; }
grep -q '^user:42 -> cache-0[123] (failover cache-0[123])$' <<<"$out_shared"

leaked=$(nm -D --defined-only "$libdir/../libchash.so" | awk '$2 == "T" && $3 !~ /^ch_[a-z]/')
[ -z "$leaked" ] || { echo "non-API symbols exported: $leaked" >&2; exit 1; }
echo "install: ok"
