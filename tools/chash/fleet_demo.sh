#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The `make demo` step of issue 14: three chash-proxy processes whose pool takes its servers
# from one etcd key (docs/FLEET.md), switched together by `chash fleet apply` from 4 to 6
# redis-servers; then the stale reads of a rolling SIGHUP rollout beside the two-phase switch
# (bench/fleet/bench_fleet.py --quick). A real etcd and redis-servers on loopback ports, all
# stopped on the way out. About 30 s.
# usage: tools/chash/fleet_demo.sh BUILD_DIR
set -euo pipefail
build=${1:-build/release}
for f in "$build/proxy/chash-proxy" "$build/tools/chash"; do
    [ -x "$f" ] || { echo "fleet demo: $f not built (run make build)" >&2; exit 1; }
done
for p in redis-server etcd; do
    command -v "$p" >/dev/null || {
        echo "fleet demo: $p not found (scripts/bootstrap installs it)" >&2
        exit 1
    }
done
. "$(dirname "$0")/demo_lib.sh"
demo_begin chash-fleet-demo
chash=$build/tools/chash

read -r ec ep r0 r1 r2 r3 r4 r5 l0 l1 l2 s0 s1 s2 <<<"$(demo_ports 14)"
etcd --name demo --data-dir "$tmp/etcd" --log-level error \
    --listen-client-urls "http://127.0.0.1:$ec" --advertise-client-urls "http://127.0.0.1:$ec" \
    --listen-peer-urls "http://127.0.0.1:$ep" --initial-advertise-peer-urls "http://127.0.0.1:$ep" \
    --initial-cluster "demo=http://127.0.0.1:$ep" >"$tmp/etcd.log" 2>&1 &
pids+=($!)
for p in $r0 $r1 $r2 $r3 $r4 $r5; do
    redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/redis-$p.log" 2>&1 &
    pids+=($!)
done
key=/chash/pools/cache
url=etcd://127.0.0.1:$ec$key
pool() { # pool FILE LISTEN_PORT SERVER_PORTS...: a pool over those servers, from etcd or not
    local file=$1 listen=$2
    shift 2
    {
        echo "cache:"
        echo "  listen: 127.0.0.1:$listen"
        echo "  redis: true"
        echo "  warm_up: 30000"
        echo "  membership: $url"
        echo "  servers:"
        local i=0
        for p in "$@"; do echo "    - 127.0.0.1:$p:1 cache-$i"; i=$((i + 1)); done
    } >"$file"
}
pool "$tmp/old.yml" 1 $r0 $r1 $r2 $r3
pool "$tmp/new.yml" 1 $r0 $r1 $r2 $r3 $r4 $r5
for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$ec/health" && break
    sleep 0.1
done
"$chash" fleet apply "$tmp/old.yml" >/dev/null # the first membership, before any proxy

printf '\n%s== One membership for a fleet: three chash-proxy processes on one etcd key (issue 14)%s\n' \
    "$bold" "$off"
echo "   etcd on 127.0.0.1:$ec holds the pool's servers at $key; each proxy's file names that"
echo "   key (membership: $url) and keeps the rest (listen, warm_up)."
i=0
for l in $l0 $l1 $l2; do
    s=$(eval echo "\$s$i")
    printf 'cache:\n  listen: 127.0.0.1:%s\n  redis: true\n  warm_up: 30000\n  membership: %s\n' \
        "$l" "$url" >"$tmp/proxy-$i.yml"
    "$build/proxy/chash-proxy" -c "$tmp/proxy-$i.yml" -s "$s" --fleet-id "proxy-$i" \
        -o "$tmp/proxy-$i.log" &
    pids+=($!)
    i=$((i + 1))
done
for _ in $(seq 100); do
    [ "$("$chash" fleet status --etcd "$url" --json 2>/dev/null | grep -o '"id"' | wc -l)" -ge 3 ] && break
    sleep 0.1
done
printf '$ chash fleet status --etcd %s\n' "$url"
"$chash" fleet status --etcd "$url"
printf '\n%s== Grow 4 -> 6 with the two-phase switch: every proxy builds the change, then all swap%s\n' \
    "$bold" "$off"
printf '$ chash fleet apply new.yml\n'
"$chash" fleet apply "$tmp/new.yml"
printf '\n$ chash fleet status --etcd %s\n' "$url"
"$chash" fleet status --etcd "$url"

printf '\n%s== A write through one proxy, read back at once through another, during the change%s\n' \
    "$bold" "$off"
echo "   today's way (each file rewritten and SIGHUPed, 0.5 s apart) against chash fleet apply:"
printf '$ bench/fleet/bench_fleet.py --quick --modes sighup,apply\n'
/usr/bin/python3 "$(dirname "$0")/../../bench/fleet/bench_fleet.py" --build "$build" --quick \
    --modes sighup,apply
echo "   (stale: an older value read back; docs/OPERATIONS.md, \"Running a fleet on etcd\")"
