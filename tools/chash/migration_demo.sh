#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The `make demo` step of issue 13: chash-proxy over 8 of 12 local redis-servers under a
# cache-aside load (build/release/bench/cache_aside), reloaded to all 12, once without warm-up
# and once with `warm_up:` (when this build has it), the misses per second side by side. It is
# bench/migration/bench_migration.py --quick, 8 -> 12 only, Redis only: about 50 s.
# usage: tools/chash/migration_demo.sh BUILD_DIR
set -euo pipefail
build=${1:-build/release}
for f in "$build/proxy/chash-proxy" "$build/tools/chash" "$build/bench/cache_aside"; do
    [ -x "$f" ] || { echo "migration demo: $f not built (run make build)" >&2; exit 1; }
done
command -v redis-server >/dev/null || {
    echo "migration demo: redis-server not found (scripts/bootstrap installs it)" >&2
    exit 1
}
. "$(dirname "$0")/demo_lib.sh"

printf '\n%s== A reload 8 -> 12 under load: moved keys miss, the database pays (issue 13)%s\n' \
    "$bold" "$off"
echo "   15,000 keys, 5,000 reads/s through chash-proxy, every miss = a database read + SET;"
echo "   after 4 s the proxy is reloaded from 8 to 12 redis-servers (SIGHUP), without warm-up,"
echo "   then with warm_up: 14000 (a moved key missing at its new owner is read from its old one"
echo "   and copied over), the window chash plan gives for 99% of the moved keys:"
printf '$ chash plan 8 12 --pool-keys 15000 --read-rate 5000 | grep -A3 warm_up\n'
"$build/tools/chash" plan 8 12 --pool-keys 15000 --read-rate 5000 | grep -A3 '^warm_up'
printf '$ bench/migration/bench_migration.py --quick --only redis --changes 8-12 --modes none,warm_up --window 14 --max-after 22 --columns\n'
/usr/bin/python3 "$(dirname "$0")/../../bench/migration/bench_migration.py" --build "$build" \
    --quick --only redis --changes 8-12 --modes none,warm_up --window 14 --max-after 22 --columns
echo "   (the moved keys nobody read within the window miss after it: sized for 99%, about 1%"
echo "    of them; docs/OPERATIONS.md, \"Growing and shrinking without a miss storm\")"
echo "   (make bench runs the whole matrix: 8 -> 12 and 8 -> 7, warm-up and ramp, Redis and"
echo "    memcached pools; docs/PERFORMANCE.md, \"Membership changes\")"
