#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The `make demo` proxy story: chash-proxy in front of 3 local redis-servers, driven by the
# ordinary redis-cli and redis-benchmark, then a 4th server added by a hot reload (SIGHUP). Everything runs on free loopback ports in a temp dir
# and is stopped on the way out (EXIT, INT, TERM).
# usage: tools/chash/proxy_demo.sh BUILD_DIR   (the proxy is BUILD_DIR/proxy/chash-proxy)
set -euo pipefail
build=${1:-build/release}
proxy=$build/proxy/chash-proxy
chash=$build/tools/chash
for f in "$proxy" "$chash"; do
    [ -x "$f" ] || { echo "proxy demo: $f not built (run make build)" >&2; exit 1; }
done
for p in redis-server redis-cli redis-benchmark python3; do
    command -v "$p" >/dev/null || {
        echo "proxy demo: $p not found (scripts/bootstrap installs redis-server, redis-tools)" >&2
        exit 1
    }
done
proxy=$(cd "$(dirname "$proxy")" && pwd)/chash-proxy
chash=$(cd "$(dirname "$chash")" && pwd)/chash

. "$(dirname "$0")/demo_lib.sh"
demo_begin chash-proxy-demo

# Free loopback ports: 3 backends, the proxy, its stats, a 4th backend added by a reload.
read -r -a ports <<<"$(demo_ports 6)"
backends=("${ports[@]:0:3}" "${ports[5]}")
names=(cache-01 cache-02 cache-03 cache-04)
pport=${ports[3]} sport=${ports[4]}

wait_ping() { # port: until redis-cli PING answers (10 s at most)
    local i
    for i in $(seq 100); do
        [ "$(redis-cli -p "$1" PING 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    echo "proxy demo: nothing answers on port $1" >&2
    return 1
}

for i in 0 1 2 3; do
    mkdir "$tmp/r$i"
    redis-server --port "${backends[$i]}" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$tmp/r$i" >"$tmp/r$i/log" 2>&1 &
    pids+=($!)
done
{
    echo "demo:"
    echo "  listen: 127.0.0.1:$pport"
    echo "  redis: true"
    echo "  hash: fnv1a_64"
    echo "  distribution: ketama"
    echo "  auto_eject_hosts: true"
    echo "  servers:"
    for i in 0 1 2; do echo "   - 127.0.0.1:${backends[$i]}:1 ${names[$i]}"; done
} >"$tmp/proxy.yml"
for i in 0 1 2 3; do wait_ping "${backends[$i]}"; done
"$proxy" -c "$tmp/proxy.yml" -s "$sport" -a 127.0.0.1 -o "$tmp/proxy.log" &
proxy_pid=$!
pids+=($proxy_pid)
wait_ping "$pport" || { cat "$tmp/proxy.log" >&2; exit 1; }

printf '\n%s== chash-proxy: one Redis address (port %s) in front of 3 redis-servers%s\n' \
    "$bold" "$pport" "$off"
for i in 0 1 2; do printf '   %s  127.0.0.1:%s\n' "${names[$i]}" "${backends[$i]}"; done
echo "   (its config is twemproxy's: nutcracker would run it unchanged, with the same placement)"

keys=(user:1 user:42 cart:7 cart:42 session:9 order:1001) # two per node (fnv1a_64 is lumpy)
args=()
for k in "${keys[@]}"; do args+=("$k" "value-of-$k"); done
printf '\n$ redis-cli -p %s MSET %s\n' "$pport" "${args[*]}"
redis-cli -p "$pport" MSET "${args[@]}"
printf '\n$ redis-cli -p %s MGET %s\n' "$pport" "${keys[*]}"
redis-cli -p "$pport" MGET "${keys[@]}"

printf '\n%s== Where each key went: asked of the backends, and of chash lookup --config%s\n' \
    "$bold" "$off"
lookup=$("$chash" lookup --config "$tmp/proxy.yml" "${keys[@]}")
for k in "${keys[@]}"; do
    held=
    for i in 0 1 2; do
        [ "$(redis-cli -p "${backends[$i]}" EXISTS "$k")" = 1 ] && held+="${names[$i]} "
    done
    predicted=$(awk -F'\t' -v k="$k" '$1 == k { print $3 }' <<<"$lookup")
    printf '   %-10s on %-9s (chash lookup: %s)\n' "$k" "${held:-nowhere}" "$predicted"
done

printf '\n%s== redis-benchmark through the proxy%s\n' "$bold" "$off"
printf '$ redis-benchmark -p %s -t get,set -n 20000 -r 100000 -q\n' "$pport"
redis-benchmark -p "$pport" -t get,set -n 20000 -r 100000 -q 2>/dev/null | tr '\r' '\n' |
    grep 'requests per second' | sed 's/^ */   /'

printf '\n%s== Stats (twemproxy JSON on port %s), in short%s\n' "$bold" "$sport" "$off"
python3 - "$sport" <<'EOF'
import json, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
st = json.loads(data)
pool = st["demo"]
print("   membership_version %s, %d connections served" % (
    pool["membership_version"], st["total_connections"]))
for name, srv in pool.items():
    if isinstance(srv, dict):
        print("   %s: %d requests" % (name, srv["requests"]))
EOF

printf '\n%s== Hot reload: cache-04 added to the file, then kill -HUP (no client disconnected)%s\n' \
    "$bold" "$off"
info() { redis-cli -p "$pport" INFO | tr -d '\r' | grep -E '^(pool_demo_membership_version|pool_demo_servers|worker_threads):'; }
info | sed 's/^/   before: /'
echo "   - 127.0.0.1:${backends[3]}:1 ${names[3]}" >>"$tmp/proxy.yml"
kill -HUP "$proxy_pid"
for _ in $(seq 50); do
    grep -q 'reload done' "$tmp/proxy.log" && break
    sleep 0.1
done
grep -o 'reload: pool demo: membership.*' "$tmp/proxy.log" | sed 's/^/   log:    /'
info | sed 's/^/   after:  /'
echo "   (chash plan OLD NEW --pool demo --keys 100000 gives the same share before the reload;"
echo "    kill -HUP or POST /-/reload on --metrics-port apply it; docs/OPERATIONS.md)"

# Issue 13: the same reload under a cache-aside load, with and without warm-up.
"$(dirname "$0")/migration_demo.sh" "$build"

# Issue 14: three proxies on one etcd membership, switched together by chash fleet apply.
"$(dirname "$0")/fleet_demo.sh" "$build"
