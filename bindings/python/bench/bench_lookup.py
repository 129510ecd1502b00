#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Python lookups: chash (the binding over libchash) against uhashring, Python's best-known
native consistent-hash ring, in one run: the same nodes, the same keys, the same placement.

uhashring's HashRing (python3-uhashring) with its defaults is the scheme uhashring@2 in libchash,
so the two answer the same owner for every key; the run checks that before it times anything.
Figures: ns per key (best of --repeat runs over all keys) for
  uhashring  HashRing.get_node(key)                   one call per key
  chash      Table.lookup(key), the same scheme       one call per key
  chash      Table.lookup_many(keys)                  one call for all keys
  chash      Table.lookup(key) and lookup_many(keys) with ring (chash's default scheme)

usage: bench_lookup.py [--build BUILD_DIR] [--nodes N] [--keys K] [--repeat R] [--json]
  --build: a build tree whose bindings/python/ is imported (default: the installed chash)
"""
import argparse
import json
import os
import sys
import time


def best(fn, repeat):
    t = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build")
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--keys", type=int, default=200000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.build:
        sys.path.insert(0, os.path.join(os.path.abspath(a.build), "bindings", "python"))
    import chash
    from uhashring import HashRing

    nodes = ["cache-%02d:11211" % i for i in range(1, a.nodes + 1)]
    keys = ["user:%d:profile" % i for i in range(a.keys)]
    ring = HashRing(nodes=nodes)
    table = chash.Table(nodes, "uhashring@2")
    default = chash.Table(nodes, "ring")
    want = [ring.get_node(k) for k in keys]
    if table.lookup_many(keys) != want:
        print("bench_lookup: chash's uhashring@2 and uhashring disagree", file=sys.stderr)
        return 1

    get_node, lookup, dlookup = ring.get_node, table.lookup, default.lookup
    res = {
        "uhashring_get_node": best(lambda: [get_node(k) for k in keys], a.repeat),
        "chash_lookup": best(lambda: [lookup(k) for k in keys], a.repeat),
        "chash_lookup_many": best(lambda: table.lookup_many(keys), a.repeat),
        "chash_ring_lookup": best(lambda: [dlookup(k) for k in keys], a.repeat),
        "chash_ring_lookup_many": best(lambda: default.lookup_many(keys), a.repeat),
    }
    ns = {k: v / len(keys) * 1e9 for k, v in res.items()}
    if a.json:
        print(json.dumps({"nodes": a.nodes, "keys": a.keys, "ns_per_key": ns,
                          "python": sys.version.split()[0]}))
        return 0
    base = ns["uhashring_get_node"]
    print("python lookups: %d nodes, %d keys, best of %d (Python %s)"
          % (a.nodes, a.keys, a.repeat, sys.version.split()[0]))
    for name, label in (("uhashring_get_node", "uhashring HashRing.get_node(key)"),
                        ("chash_lookup", "chash Table.lookup(key), uhashring@2"),
                        ("chash_lookup_many", "chash Table.lookup_many(keys), uhashring@2"),
                        ("chash_ring_lookup", "chash Table.lookup(key), ring"),
                        ("chash_ring_lookup_many", "chash Table.lookup_many(keys), ring")):
        print("  %-44s %8.1f ns/key  %5.2fx uhashring's cost" % (label, ns[name], ns[name] / base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
