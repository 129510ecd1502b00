#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_dropin: chash-proxy is a drop-in replacement for nutcracker — the same config puts every
key on the same backend.

Real redis-servers (4 on free ports of 127.0.0.1, 4 on 127.0.0.X:11211, where twemproxy names an
unnamed server by its host alone) behind 7 pools covering hash x distribution x naming x
weights x hash_tag combinations. The two programs read two configs that differ only in the
pools' `listen` ports (checked: listen is not part of placement). First nutcracker runs: >= 5,000
keys (binary, high bytes, hash-tag shapes) are written through each pool and read back from each
backend (each pool has its own redis_db); the backends are flushed; then chash-proxy runs and the
same is done. Every key of every pool must be on the same backend, in the same database; `chash
lookup --config` is asked too, so a disagreement says which side moved.

Usage: test_dropin.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server or nutcracker missing and CI unset).
"""
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, chash_lookup, encode, fail, free_ports,  # noqa: E402
                          run_test, start_redises, start_redises_11211, write_file)

NKEYS = 5000
BATCH = 1000
NAMES = ["alpha", "b", "srv-3", "node_4.example.com"]     # neither sorted by text nor by length
# (pool name, hash, distribution, naming, weights, hash_tag, backends "plain" or "11211")
POOLS = [
    ("fnv1a64-ketama-named", "fnv1a_64", "ketama", "named", [3, 1, 2, 1], None, "plain"),
    ("murmur-ketama-unnamed11211", "murmur", "ketama", "unnamed", [1, 1, 1, 1], None, "11211"),
    ("md5-modula-unnamed", "md5", "modula", "unnamed", [2, 1, 3, 1], None, "plain"),
    ("crc32a-ketama-named-tag", "crc32a", "ketama", "named", [1, 1, 1, 1], "{}", "plain"),
    ("hsieh-modula-named-tag", "hsieh", "modula", "named", [1, 3, 1, 2], "{}", "11211"),
    ("oaat-ketama-unnamed11211-tag", "one_at_a_time", "ketama", "unnamed", [2, 1, 1, 3], "{}",
     "11211"),
    ("fnv1a32-modula-unnamed-tag", "fnv1a_32", "modula", "unnamed", [1, 1, 1, 1], "{}",
     "plain"),
]

ALPHABET = bytes(b for b in range(1, 256) if b not in (0x09, 0x0a, 0x0d))


def make_keys():
    """Deterministic keys, 1..60 bytes: any bytes (never \\0 \\t \\n \\r: chash lookup reads
    lines), high bytes only (twemproxy's hashes sign-extend chars), ascii, and hash-tag shapes."""
    rng = random.Random(6)
    keys = dict.fromkeys(bytes([b]) for b in ALPHABET)

    def rnd(lo, hi, alphabet=ALPHABET):
        return bytes(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))

    keys.update(dict.fromkeys([b"{", b"}", b"{}", b"}{", b"{a}", b"{}x", b"x{}", b"{unclosed"]))
    shapes = [
        lambda: rnd(1, 60),
        lambda: rnd(1, 60, bytes(range(0x80, 0x100))),
        lambda: b"user:%d" % rng.randrange(10 ** 6),
        lambda: b"{user%d}:%s" % (rng.randrange(40), rnd(0, 20)),
        lambda: b"a{%s}c%s" % (rnd(1, 8), rnd(0, 8)),
        lambda: b"{}%s" % rnd(1, 30),
        lambda: b"{unclosed%s" % rnd(0, 30),
        lambda: b"{%s}%s{%s}" % (rnd(1, 6), rnd(0, 6), rnd(1, 6)),
    ]
    while len(keys) < NKEYS:
        k = rng.choice(shapes)()[:60]
        if k:
            keys[k] = None
    return list(keys)


def config_text(pools, listen_of):
    out = []
    for p in pools:
        out += ["%s:" % p["name"],
                "  listen: 127.0.0.1:%d" % listen_of[p["name"]],
                "  redis: true",
                "  redis_db: %d" % p["db"],
                "  hash: %s" % p["hash"],
                "  distribution: %s" % p["dist"],
                "  timeout: 10000",
                "  auto_eject_hosts: false",
                "  server_connections: 1"]
        if p["tag"]:
            out.append('  hash_tag: "%s"' % p["tag"])
        out.append("  servers:")
        for b, w, name in p["servers"]:
            out.append("   - %s:%d%s" % (b.text, w, " " + name if name else ""))
    return "\n".join(out) + "\n"


def write_through(addr, pool, keys):
    """SETs every key through the proxy at addr; None or an error message."""
    try:
        with Resp(addr, timeout=30) as c:
            for i in range(0, len(keys), BATCH):
                chunk = keys[i:i + BATCH]
                c.send(b"".join(encode(b"SET", k, b"1") for k in chunk))
                for k in chunk:
                    r = c.read()
                    if r != b"OK":
                        return "pool %s: SET %r answered %r" % (pool, k, r)
    except (OSError, RuntimeError) as e:
        return "pool %s: %s" % (pool, e)
    return None


def read_through(addr, pool, keys):
    """GETs every key back through the proxy: None or an error message."""
    try:
        with Resp(addr, timeout=30) as c:
            for i in range(0, len(keys), BATCH):
                chunk = keys[i:i + BATCH]
                c.send(b"".join(encode(b"GET", k) for k in chunk))
                for k in chunk:
                    r = c.read()
                    if r != b"1":
                        return "pool %s: GET %r answered %r" % (pool, k, r)
    except (OSError, RuntimeError) as e:
        return "pool %s: %s" % (pool, e)
    return None


def placements(pools, keys, who):
    """{pool: {key: (backend text, db)}} read from the backends, checking every key is held
    exactly once among the pool's backends in the pool's database."""
    key_set = set(keys)
    out = {}
    for p in pools:
        where = {}
        for b, _, _ in p["servers"]:
            for k in b.keys(p["db"]):
                if k not in key_set:
                    fail("%s, pool %s: unexpected key %r on %s db %d" % (
                        who, p["name"], k, b.text, p["db"]))
                if k in where:
                    fail("%s, pool %s: key %r on both %s and %s" % (
                        who, p["name"], k, where[k], b.text))
                where[k] = b.text
        lost = [k for k in keys if k not in where]
        if lost:
            dbs = {b.text: {db: b.call("DBSIZE") if b.call("SELECT", db) == b"OK" else None
                            for db in range(len(pools))} for b, _, _ in p["servers"]}
            fail("%s, pool %s (redis_db %d): %d of %d keys on no backend in that database, "
                 "e.g. %r; keys per database: %s" % (who, p["name"], p["db"], len(lost),
                                                     len(keys), lost[0], dbs))
        if len(set(where.values())) < 2:
            fail("%s, pool %s: every key on one backend: the comparison would prove nothing" % (
                who, p["name"]))
        out[p["name"]] = where
    return out


def flush(backends):
    for b in backends:
        if b.call("FLUSHALL") != b"OK":
            fail("FLUSHALL on %s" % b.text)


def run_through(label, proxy, pools, listen_of, keys):
    for p in pools:
        addr = ("127.0.0.1", listen_of[p["name"]])
        err = write_through(addr, p["name"], keys) or read_through(addr, p["name"], keys)
        if err:
            fail("%s: %s\nlog:\n%s" % (label, err, proxy_log(proxy)))


def proxy_log(proxy):
    from proxyharness import tail
    return tail(proxy.log) + "\n" + tail(proxy.stderr)


def body(t):
    proxy_exe, chash, tmp = t.proxy, t.chash, t.tmp
    redis_exe, nutcracker = t.programs["redis-server"], t.programs["nutcracker"]
    sets = {"plain": start_redises(redis_exe, tmp, 4),
            "11211": start_redises_11211(redis_exe, tmp, 4)}
    pools = []
    for db, (name, h, dist, naming, weights, tag, bset) in enumerate(POOLS):
        servers = [(b, w, NAMES[i] if naming == "named" else None)
                   for i, (b, w) in enumerate(zip(sets[bset], weights))]
        pools.append(dict(name=name, hash=h, dist=dist, tag=tag, servers=servers, db=db))
    ports = free_ports(2 * len(pools))
    listen_nc = {p["name"]: ports[i] for i, p in enumerate(pools)}
    listen_px = {p["name"]: ports[len(pools) + i] for i, p in enumerate(pools)}
    nc_conf = write_file(os.path.join(tmp, "nutcracker.yml"), config_text(pools, listen_nc))
    px_conf = write_file(os.path.join(tmp, "chash-proxy.yml"), config_text(pools, listen_px))
    # Honesty: the two files differ in the listen lines only.
    with open(nc_conf) as f, open(px_conf) as g:
        a, b = f.read().split("\n"), g.read().split("\n")
    diff = [(x, y) for x, y in zip(a, b) if x != y]
    if len(a) != len(b) or len(diff) != len(pools) or \
            any(not x.strip().startswith("listen:") for x, _ in diff):
        fail("the two configs differ in more than their listen lines: %s" % diff[:3])
    t = subprocess.run([nutcracker, "-t", "-c", nc_conf], capture_output=True, timeout=30)
    if t.returncode != 0:
        fail("nutcracker -t rejects %s:\n%s" % (nc_conf, t.stderr.decode("utf-8", "replace")))

    keys = make_keys()
    backends = sets["plain"] + sets["11211"]

    # nutcracker first: the oracle.
    nc = Proxy(nutcracker, tmp, nc_conf, [("127.0.0.1", v) for v in listen_nc.values()],
               label="nutcracker", nutcracker=True, verbosity=4).start()
    run_through("nutcracker", nc, pools, listen_nc, keys)
    truth = placements(pools, keys, "nutcracker")
    nc.stop()
    flush(backends)

    px = Proxy(proxy_exe, tmp, px_conf, [("127.0.0.1", v) for v in listen_px.values()],
               label="chash-proxy").start()
    run_through("chash-proxy", px, pools, listen_px, keys)
    ours = placements(pools, keys, "chash-proxy")
    if not px.alive():
        fail("chash-proxy exited during the test")
    px.stop()

    failed, lines = [], []
    for p in pools:
        t, o = truth[p["name"]], ours[p["name"]]
        # Honesty: the comparison sees a shifted answer as wrong everywhere.
        addrs = [b.text for b, _, _ in p["servers"]]
        shifted = {k: addrs[(addrs.index(v) + 1) % len(addrs)] for k, v in t.items()}
        if any(shifted[k] == t[k] for k in keys):
            fail("the comparator is broken")
        bad = [k for k in keys if t[k] != o[k]]
        lk = chash_lookup(chash, px_conf, p["name"], keys)
        lbad = sum(lk[k] != t[k] for k in keys)
        lines.append("%-30s %-14s %-7s %5d keys, chash-proxy agrees on %5d, chash lookup on %5d" % (
            p["name"], p["hash"], p["dist"], len(keys), len(keys) - len(bad), len(keys) - lbad))
        if bad:
            failed.append(p["name"])
            for k in bad[:3]:
                lines.append("    key %r: nutcracker %s, chash-proxy %s, chash lookup %s" % (
                    k, t[k], o[k], lk[k]))
    print("\n".join(lines), flush=True)
    if failed:
        fail("placement differs from nutcracker's in %d of %d pools: %s" % (
            len(failed), len(pools), ", ".join(failed)))
    return "%d pools x %d keys: every key on nutcracker's backend" % (len(pools), len(keys))


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "nutcracker"))
