#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The `make demo` memcached story: chash-proxy on a twemproxy config with a memcached pool
# (redis: false) in front of 3 local memcacheds; values set and read with a real client
# (pymemcache), each key found on its memcached and on the server chash lookup --config names,
# a multiget split over the servers and answered as one reply, memcached's meta protocol. Free
# loopback ports, a temp dir, everything stopped on the way out (EXIT, INT, TERM).
# usage: tools/chash/proxy_memcache_demo.sh BUILD_DIR
set -euo pipefail
build=${1:-build/release}
proxy=$build/proxy/chash-proxy
chash=$build/tools/chash
for f in "$proxy" "$chash"; do
    [ -x "$f" ] || { echo "memcached demo: $f not built (run make build)" >&2; exit 1; }
done
for p in memcached /usr/bin/python3; do
    command -v "$p" >/dev/null || {
        echo "memcached demo: $p not found (scripts/bootstrap installs memcached)" >&2
        exit 1
    }
done
/usr/bin/python3 -c 'import pymemcache' 2>/dev/null || {
    echo "memcached demo: python3-pymemcache not found (scripts/bootstrap installs it)" >&2
    exit 1
}

. "$(dirname "$0")/demo_lib.sh"
demo_begin chash-mc-demo

read -r -a ports <<<"$(demo_ports 5)"
backends=("${ports[@]:0:3}")
names=(mc-01 mc-02 mc-03)
pport=${ports[3]} sport=${ports[4]}
user=()
[ "$(id -u)" -eq 0 ] && user=(-u root)
for i in 0 1 2; do
    memcached -l 127.0.0.1 -p "${backends[$i]}" -U 0 -m 32 "${user[@]}" >"$tmp/mc$i.log" 2>&1 &
    pids+=($!)
done
{
    echo "sessions:"
    echo "  listen: 127.0.0.1:$pport"
    echo "  redis: false"
    echo "  hash: md5"
    echo "  distribution: ketama"
    echo "  auto_eject_hosts: true"
    echo "  servers:"
    for i in 0 1 2; do echo "   - 127.0.0.1:${backends[$i]}:1 ${names[$i]}"; done
} >"$tmp/proxy.yml"
"$proxy" -c "$tmp/proxy.yml" -s "$sport" -a 127.0.0.1 -o "$tmp/proxy.log" &
pids+=($!)

printf '\n%s== chash-proxy speaks memcached: a redis: false pool in front of 3 memcacheds%s\n' \
    "$bold" "$off"
sed 's/^/   /' "$tmp/proxy.yml"
echo "   (the same file runs unchanged under nutcracker, with the same placement)"

/usr/bin/python3 - "$pport" "$chash" "$tmp/proxy.yml" "${names[*]}" "${backends[@]}" <<'EOF'
import socket, subprocess, sys, time
from pymemcache.client.base import Client
pport, chash, conf, names = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4].split()
backends = [int(p) for p in sys.argv[5:]]

def connect(port):
    for _ in range(100):
        try:
            return Client(("127.0.0.1", port), timeout=5, connect_timeout=1)
        except OSError:
            time.sleep(0.1)
    sys.exit("memcached demo: nothing answers on port %d" % port)

for port in backends + [pport]:
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
c = connect(pport)
keys = ["user:1", "user:42", "cart:7", "cart:42", "session:9", "order:1001"]
print("\n$ pymemcache: set_many(%s)" % ", ".join("%s=value-of-%s" % (k, k) for k in keys[:2])
      + ", ...")
c.set_many({k: "value-of-" + k for k in keys}, noreply=False)
print("$ pymemcache: get_many(%s)" % keys)
got = c.get_many(keys)
for k in keys:
    print("   %-10s -> %s" % (k, got[k].decode()))

print("\n\033[1m== Where each key went: asked of the memcacheds, and of chash lookup --config\033[0m"
      if sys.stdout.isatty() else "\n== Where each key went: asked of the memcacheds, and of "
      "chash lookup --config")
lookup = subprocess.run([chash, "lookup", "--config", conf] + keys, capture_output=True,
                        text=True, check=True).stdout.splitlines()
predicted = {line.split("\t")[0]: line.split("\t")[2] for line in lookup}
for k in keys:
    held = [names[i] for i, p in enumerate(backends)
            if Client(("127.0.0.1", p), timeout=5).get(k) is not None]
    print("   %-10s on %-6s (chash lookup: %s)" % (k, " ".join(held) or "nowhere", predicted[k]))

s = socket.create_connection(("127.0.0.1", pport), timeout=5)
def call(data, until):
    s.sendall(data)
    out = b""
    while not out.endswith(until):
        out += s.recv(65536)
    return out.decode()
print("\n== One multiget, split over the servers by the proxy, answered in key order")
print("$ printf 'get %s\\r\\n'" % " ".join(keys[:4]))
print("".join("   " + l + "\n" for l in call(("get %s\r\n" % " ".join(keys[:4])).encode(),
                                            b"END\r\n").splitlines()), end="")
print("\n== memcached's meta protocol: quiet mode and pipelines end with mn")
req = "mg user:1 v q\r\nmg nope v q\r\nmn\r\n"
print("$ printf %r   (the miss of nope is quiet: no reply)" % req)
print("".join("   " + l + "\n" for l in call(req.encode(), b"MN\r\n").splitlines()), end="")
EOF

printf '\n%s== Stats (twemproxy JSON on port %s), in short%s\n' "$bold" "$sport" "$off"
/usr/bin/python3 - "$sport" <<'EOF'
import json, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
pool = json.loads(data)["sessions"]
print("   fragments %d (from the split multigets)" % pool["fragments"])
for name, srv in pool.items():
    if isinstance(srv, dict):
        print("   %s: %d requests" % (name, srv["requests"]))
EOF
