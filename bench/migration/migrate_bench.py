#!/usr/bin/python3 -B
# SPDX-License-Identifier: Apache-2.0
"""`chash migrate` throughput: a pool of 4 servers grows to 6, on loopback.

For each protocol (Redis, memcached): 4 + 2 servers on free loopback ports (the test harness's,
tests/proxy/proxyharness.py; memcached with -m 2048 so nothing is evicted), N keys (default
1,000,000; 32-byte values, a TTL on every other key) written straight to their OWNERS under
OLD (`chash lookup --config OLD`, pipelined), then, in this order:

  dry    `chash migrate OLD NEW --dry-run --json`: the enumeration alone (SCAN COUNT 1000 /
         metadump) and the placement of every key: the baseline of this run
  copy   `chash migrate OLD NEW --rate 0 --json`: the same plus DUMP/PTTL + RESTORE (or mg +
         add) of each moved key, pipelined per batch of 1000
  verify `chash migrate OLD NEW --dry-run --verify --json`: the enumeration plus a PTTL (mg) of
         each moved key at its source and its new owner

Printed per protocol: keys scanned and moved, and per pass the seconds, chash's own CPU seconds
(the rest is the servers' work and the round trips), keys scanned/s, moved keys/s, and copy / dry
(what copying adds to the enumeration). The copy must report 0 failed and every moved
key copied, or the run fails (a benchmark, not a test: no timing is asserted).

usage: bench/migration/migrate_bench.py [--build build/release] [--keys N] [--only redis|memcached]
                                       [--batch N] [--parallel N]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "proxy"))
from proxyharness import (Memcached, free_ports, kill_all, make_tmpdir, pool_yaml,  # noqa: E402
                          require_programs, spawn, start_redises, start_servers, wait_accepting,
                          write_file)

VALUE = b"v" * 32


class BigMemcached(Memcached):
    """A memcached with room for the whole data set (no eviction during the benchmark)."""

    def start(self):
        argv = [self.exe, "-p", str(self.port), "-l", self.host, "-U", "0", "-m", "2048",
                "-t", "2"]
        if os.geteuid() == 0:
            argv += ["-u", "root"]
        self.proc = spawn(argv, self.log)
        wait_accepting(self.proc, [self.addr], self.log, "memcached " + self.text)
        return self


def owners(chash, config, keys):
    r = subprocess.run([chash, "lookup", "--config", config, "-"],
                       input=b"".join(k + b"\n" for k in keys), capture_output=True, check=True)
    out = {}
    for line in r.stdout.split(b"\n"):
        if line:
            k, o = line.split(b"\t")[:2]
            out.setdefault(o.decode(), []).append(k)
    return out


def recv_exact(sock, n):
    got = 0
    while got < n:
        chunk = sock.recv(min(1 << 20, n - got))
        if not chunk:
            raise RuntimeError("connection closed while loading")
        got += len(chunk)


def load(addr, keys, redis):
    """Pipelined writes of keys to addr, 10,000 at a time; replies counted by their size."""
    import socket
    s = socket.create_connection(addr)
    for i in range(0, len(keys), 10000):
        chunk, out = keys[i:i + 10000], []
        for j, k in enumerate(chunk):
            ttl = (i + j) % 2
            if redis:
                if ttl:
                    out.append(b"*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$32\r\n%s\r\n$2\r\nPX\r\n"
                               b"$7\r\n3600000\r\n" % (len(k), k, VALUE))
                else:
                    out.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$32\r\n%s\r\n" % (len(k), k,
                                                                                   VALUE))
            else:
                out.append(b"set %s 0 %d 32\r\n%s\r\n" % (k, 3600 if ttl else 0, VALUE))
        s.sendall(b"".join(out))
        recv_exact(s, len(chunk) * (5 if redis else 8))    # "+OK\r\n" / "STORED\r\n"
    s.close()


def migrate(chash, args):
    t0 = time.monotonic()
    c0 = os.times()
    r = subprocess.run(["nice", "-n", "5", chash, "migrate"] + args + ["--json"],
                       capture_output=True)
    secs = time.monotonic() - t0
    c1 = os.times()
    cpu = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    if r.returncode != 0:
        sys.exit("chash migrate %s exited %d: %s" % (" ".join(args), r.returncode,
                                                      r.stderr.decode()[-2000:]))
    out = json.loads(r.stdout)
    out["cpu"] = cpu     # chash's own CPU seconds (user + system)
    return out, secs


def bench(proto, chash, tmp, n, extra):
    redis = proto == "redis"
    exe, = require_programs("redis-server" if redis else "memcached")
    if redis:
        servers = start_redises(exe, tmp, 6)
    else:
        servers = start_servers(lambda: BigMemcached(exe, tmp), 6, "memcacheds")
    old = [(s.text, 1, None) for s in servers[:4]]
    new = [(s.text, 1, None) for s in servers]
    port = free_ports(1)[0]
    kw = dict(hash="fnv1a_64", distribution="ketama")
    old_cfg = write_file(os.path.join(tmp, proto + "-old.yml"),
                         pool_yaml("bench", port, old, redis=redis, **kw))
    new_cfg = write_file(os.path.join(tmp, proto + "-new.yml"),
                         pool_yaml("bench", port, new, redis=redis, **kw))
    keys = [b"key:%d" % i for i in range(n)]
    t0 = time.monotonic()
    for addr, ks in owners(chash, old_cfg, keys).items():
        host, p = addr.rsplit(":", 1)
        load((host, int(p)), ks, redis)
    print("%s: %d keys loaded on 4 servers in %.1f s" % (proto, n, time.monotonic() - t0),
          flush=True)

    dry, t_dry = migrate(chash, [old_cfg, new_cfg, "--dry-run"] + extra)
    copy, t_copy = migrate(chash, [old_cfg, new_cfg, "--rate", "0"] + extra)
    ver, t_ver = migrate(chash, [old_cfg, new_cfg, "--dry-run", "--verify"] + extra)
    if copy["failed"] or copy["copied"] != copy["moved"] or copy["moved"] != dry["moved"] or \
            ver["verify"]["ok"] != copy["moved"]:
        sys.exit("%s: counts do not add up: dry %r copy %r verify %r" % (
            proto, dry["moved"], {k: copy[k] for k in ("moved", "copied", "failed")},
            ver["verify"]))
    print("%s: scanned %d, moved %d (%.1f%%)" % (proto, copy["scanned"], copy["moved"],
                                                 100.0 * copy["moved_share"]))
    print("  %-8s %8s %10s %14s %14s" % ("pass", "seconds", "chash cpu", "scanned/s",
                                          "moved/s"))
    for name, secs, o in (("dry", t_dry, dry), ("copy", t_copy, copy), ("verify", t_ver, ver)):
        print("  %-8s %8.2f %10.2f %14.0f %14.0f" % (name, secs, o["cpu"], copy["scanned"] / secs,
                                                       copy["moved"] / secs))
    print("  copy / dry: %.2f" % (t_copy / t_dry), flush=True)
    kill_all()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--keys", type=int, default=1000000)
    ap.add_argument("--only", choices=("redis", "memcached"))
    ap.add_argument("--batch", type=int, help="chash migrate --batch (default: its own, 1000)")
    ap.add_argument("--parallel", type=int, help="chash migrate --parallel (default: its own, 4)")
    a = ap.parse_args()
    chash = os.path.abspath(os.path.join(a.build, "tools", "chash"))
    if not os.access(chash, os.X_OK):
        sys.exit("no chash at %s (make build)" % chash)
    tmp = make_tmpdir()
    for proto in ("redis", "memcached"):
        if a.only in (None, proto):
            extra = (["--batch", str(a.batch)] if a.batch else []) + \
                (["--parallel", str(a.parallel)] if a.parallel else [])
            bench(proto, chash, tmp, a.keys, extra)


if __name__ == "__main__":
    main()
