#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The `make demo` story: a fleet of 8 cache nodes, told through the chash CLI.
# usage: tools/chash/demo.sh BUILD_DIR      (the CLI is BUILD_DIR/tools/chash)
set -euo pipefail
chash=${1:-build/release}/tools/chash
[ -x "$chash" ] || { echo "demo: $chash not built (run make build)" >&2; exit 1; }
chash=$(cd "$(dirname "$chash")" && pwd)/chash
cd "$(dirname "$0")/../.." # the report goes to build/ at the top of the tree

if [ -t 1 ]; then bold=$'\e[1m' off=$'\e[0m'; else bold= off=; fi
# Prints a title and the command line, then runs it.
step() {
    local title=$1
    shift
    printf '\n%s== %s%s\n$ chash %s\n\n' "$bold" "$title" "$off" "$*"
    "$chash" "$@"
}

step "Grow the fleet, 8 -> 9 nodes: hash % N remaps ~8/9 of the keys, consistent hashing ~1/9" \
    simulate --nodes 8 --add node-9 --keys 1000000 --algo modulo,ring,rendezvous,jump,maglev,ketama
step "Lose a node, 8 -> 7: jump can only drop its last node; the others move just node-3's keys" \
    simulate --nodes 8 --remove node-3 --keys 1000000 --algo modulo,ring,rendezvous,jump,maglev
step "Virtual nodes: the ring evens out as 1/sqrt(vnodes), and costs memory" \
    sweep --nodes 8
step "Weights 4:4:1:1: ring, rendezvous and maglev honour them (modulo and jump cannot)" \
    simulate --nodes big-1:4,big-2:4,small-1:1,small-2:1 --keys 1000000 \
    --algo modulo,ring,rendezvous,jump,maglev
step "Is the hash fit for placement? Raw FNV-1a clusters; FNV-1a + fmix32 (the default) passes" \
    hashcheck --hash fnv1a32,fnv1a32_fmix
step "Plan the change node by node (exact, from the ring arcs)" \
    plan 8 9
step "A twemproxy fleet: the server nutcracker would pick, from its own config (hash_tag {} too)" \
    lookup --config examples/nutcracker.yml user:42 '{user:42}:cart' user:43
printf 'k%s\n' {a..z}{a..z}{a..z} >build/short.keys # 17,576 short keys: kaaa .. kzzz
step "Its default hash fnv1a_64 unbalances short keys; crc32 puts every key on one server" \
    hashcheck --config examples/nutcracker.yml --key-file build/short.keys \
    --hash fnv1a_64,crc32,murmur,md5
step "Everything in one page, with charts" \
    report --nodes 8 --out build/report.html
printf '\nOpen build/report.html in a browser.\n'
