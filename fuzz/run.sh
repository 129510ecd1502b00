#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds a fuzz target (fuzz/TARGET_fuzz.c and the sources it tests) with clang's libFuzzer, ASan
# and UBSan, and runs it for SECONDS (default 60) from the seed corpus fuzz/corpus/TARGET.
# TARGET is resp (the RESP parser, the default), mc (the memcached parser), mcbin (memcached's
# binary protocol as the proxy translates it to meta and back), codec (the Redis
# codec's own parsing: key specs, SCAN cursors and replies, pub/sub pushes, merges), config (the
# YAML config loader, with the placement library for the memberships it builds), address (the
# config's address and number parsers), membership (the membership document, as etcd hands it to
# chash-proxy), etcd (the parsers of etcd's answers and watch messages, src/fleet/etcd_msg.c),
# admin (the admin port's HTTP request head parser), walk (the codecs' rejoin-walk page parsers:
# SCAN replies, memcached metadump lines), hotpath (the codecs' hot-key, near-cache, warm-up copy
# and gutter paths), topk (the heavy-hitter summary, src/hot/topk.c) or near (the near cache,
# src/hot/near.c).
#
#   fuzz/run.sh [TARGET] [SECONDS] [BUILD_DIR]   BUILD_DIR defaults to build/fuzz
#   fuzz/run.sh 20 build/fuzz                    the resp target (a first argument that is a
#                                                number is SECONDS)
#   FUZZ_JOBS=4 fuzz/run.sh mc 600               four workers for ten minutes
#   FUZZ_FLAGS="-max_len=1024" fuzz/run.sh mc    more libFuzzer flags
#
# New inputs go to BUILD_DIR/corpus (the seed corpus is only read); a crash is written to
# BUILD_DIR/crash-* and makes this script fail. Without clang or libFuzzer it exits 77 (skip),
# or 1 when CI is set: a fuzz test never passes silently.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target=resp
case "${1:-}" in
    resp | mc | mcbin | codec | config | address | membership | etcd | admin | walk | hotpath | topk | near) target=$1; shift ;;
    '' | *[!0-9]*) [ -z "${1:-}" ] || { echo "fuzz/run.sh: unknown target '$1' (resp, mc, mcbin, codec, config, address, membership, etcd, admin, walk, hotpath, topk, near)" >&2; exit 2; } ;;
esac
seconds=${1:-60}
out=${2:-$root/build/fuzz}
jobs=${FUZZ_JOBS:-1}
cc=${CC_FUZZ:-clang}

unavailable() {
    echo "fuzz/run.sh: $1 (Debian: apt-get install clang libclang-rt-14-dev, or scripts/bootstrap)" >&2
    if [ -n "${CI:-}" ]; then exit 1; fi
    exit 77
}

command -v "$cc" >/dev/null 2>&1 || unavailable "$cc not found"
mkdir -p "$out/corpus"
out=$(cd "$out" && pwd) # absolute: the fuzzer runs from inside it
probe="$out/probe.c"
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe"
"$cc" -fsanitize=fuzzer "$probe" -o "$out/probe" >/dev/null 2>&1 ||
    unavailable "$cc cannot link -fsanitize=fuzzer (libFuzzer missing)"

# chash_version.h is CMake's (configure_file): made here from the project's version (config and
# codec include the public headers).
ver=$(sed -n 's/^project(chash VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
IFS=. read -r vmaj vmin vpat <<<"$ver"
sed -e "s/@PROJECT_VERSION_MAJOR@/$vmaj/" -e "s/@PROJECT_VERSION_MINOR@/$vmin/" \
    -e "s/@PROJECT_VERSION_PATCH@/$vpat/" -e "s/@PROJECT_VERSION@/$ver/" \
    "$root/include/chash_version.h.in" >"$out/chash_version.h"

# The sources and libraries of each target.
case "$target" in
    resp | mc)
        srcs=("$root/proxy/proto/${target}.c") incs=(-I "$root/proxy/proto") libs=() ;;
    codec | walk | hotpath | mcbin)
        srcs=("$root"/proxy/proto/{resp,resp_codec,codec,mc,mc_codec,mc_bin}.c "$root/proxy/buf.c")
        incs=(-I "$out" -I "$root/proxy/proto" -I "$root/proxy" -I "$root/include"
              -DPX_VERSION='"fuzz"')
        libs=() ;;
    address)
        srcs=("$root/src/config/address.c") incs=(-I "$root/src/config" -I "$root/include")
        libs=() ;;
    admin)
        srcs=("$root/proxy/http_req.c") incs=(-I "$root/proxy") libs=() ;;
    topk | near)
        srcs=("$root/src/hot/$target.c") incs=(-I "$root/src/hot") libs=(-lm) ;;
    config | membership)
        mapfile -t srcs < <(ls "$root"/src/*.c "$root"/src/hash/*.c "$root"/src/place/*.c \
            "$root"/src/route/*.c "$root"/src/config/*.c 2>/dev/null)
        incs=(-I "$out" -I "$root/src/config" -I "$root/src" -I "$root/include")
        libs=(-lyaml -lxxhash -lmd -lm) ;;
    etcd)
        srcs=("$root/src/fleet/etcd_msg.c") incs=(-I "$root/src/fleet")
        libs=(-ljansson -lcrypto) ;;
esac
bin="$out/${target}_fuzz"
"$cc" -std=c11 -g -O1 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Werror \
    -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    "${incs[@]}" "$root/fuzz/${target}_fuzz.c" "${srcs[@]}" "${libs[@]}" -o "$bin"

# A crash must fail the run: libFuzzer's own exit status for one is 77, which is this script's
# (and ctest's) skip.
args=(-max_total_time="$seconds" -artifact_prefix="$out/" -print_final_stats=1 -error_exitcode=1)
if [ -f "$root/fuzz/$target.dict" ]; then args+=(-dict="$root/fuzz/$target.dict"); fi
# More libFuzzer flags, e.g. FUZZ_FLAGS="-max_len=1024".
if [ -n "${FUZZ_FLAGS:-}" ]; then read -r -a extra <<<"$FUZZ_FLAGS"; args+=("${extra[@]}"); fi
if [ "$jobs" -gt 1 ]; then args+=(-jobs="$jobs" -workers="$jobs"); fi
cd "$out"
exec "$bin" "${args[@]}" "$out/corpus" "$root/fuzz/corpus/$target"
