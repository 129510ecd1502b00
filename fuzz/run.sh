#!/usr/bin/env bash
# Builds the RESP fuzz target (fuzz/resp_fuzz.c + proxy/proto/resp.c) with clang's libFuzzer,
# ASan and UBSan, and runs it for SECONDS (default 60) from the seed corpus fuzz/corpus/resp.
#
#   fuzz/run.sh [SECONDS] [BUILD_DIR]        BUILD_DIR defaults to build/fuzz
#   FUZZ_JOBS=4 fuzz/run.sh 600              four workers for ten minutes
#
# New inputs go to BUILD_DIR/corpus (the seed corpus is only read); a crash is written to
# BUILD_DIR/crash-* and makes this script fail. Without clang or libFuzzer it exits 77 (skip),
# or 1 when CI is set: a fuzz test never passes silently.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
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
probe="$out/probe.c"
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe"
"$cc" -fsanitize=fuzzer "$probe" -o "$out/probe" >/dev/null 2>&1 ||
    unavailable "$cc cannot link -fsanitize=fuzzer (libFuzzer missing)"

bin="$out/resp_fuzz"
"$cc" -std=c11 -g -O1 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Werror \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I "$root/proxy/proto" "$root/fuzz/resp_fuzz.c" "$root/proxy/proto/resp.c" -o "$bin"

args=(-max_total_time="$seconds" -artifact_prefix="$out/" -print_final_stats=1)
if [ "$jobs" -gt 1 ]; then args+=(-jobs="$jobs" -workers="$jobs"); fi
cd "$out"
exec "$bin" "${args[@]}" "$out/corpus" "$root/fuzz/corpus/resp"
