#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""haproxy_compat.py -- HAProxy's "hash-type consistent" against libchash's haproxy@2.

    haproxy_compat.py PLACE

A real HAProxy (Debian haproxy, 2.6) runs on loopback only: one frontend per backend server on
127.0.0.x:<free port> answering 200 itself (`http-request return`), and a front whose backend
lists those servers in list order, with their weights (and, in some sets, explicit numeric
`id`s), under `balance hdr(X-Key)` and `hash-type consistent` (its default function, sdbm). Each
key is sent as the X-Key header of one request over a kept-alive connection; the front names
the server it chose in a response header (`%s`). PLACE (clients_place) places the same keys
with haproxy@2; every key must agree.

Server sets: 2, 3, 8 and 30 servers, unequal weights (1:2:3:5:1:8:1:2, 1:10:100:3), a server
removed from and one added in the middle of the list with and without explicit ids; >= 5,000
keys each (ASCII, UTF-8 and binary bytes a header carries unchanged, no comma: hdr() hashes the
first element of a comma-separated list). Then failover: 8 servers with 1 and 2 of them down
(nothing listening; health checks mark them down, HAProxy takes their points out of its tree)
against chash's route over the up servers. Then the empty key, which HAProxy sends round robin:
the test shows it spread over every server (chash does not reproduce it: docs/COMPATIBILITY.md).

Without haproxy the test skips (exit 77), or fails when CI is set; scripts/bootstrap installs it.
"""
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clients_compat as cc  # noqa: E402
from http_oracle import ask, free_port, header_keys, running  # noqa: E402
from nginx_compat import header_key as nginx_header_key  # noqa: E402

HAPROXY = "/usr/sbin/haproxy"


def header_key(k):
    """A header value HAProxy hashes whole: as nginx's, and no comma (hdr() takes a header as a
    comma-separated list and hashes its first element)."""
    return nginx_header_key(k) and b"," not in k


def config(front, servers, down=()):
    """servers: [(name, addr, weight, explicit id or None)]. With down (indexes), those servers
    have no frontend (nothing listens) and every server has a health check that marks a server
    down at its first failure."""
    lines = ["global", "  maxconn 512", "defaults", "  mode http",
             "  timeout connect 2s", "  timeout client 10s", "  timeout server 10s"]
    for i, (name, addr, _, _) in enumerate(servers):
        if i not in down:
            lines += ["frontend be_%d" % i, "  bind %s" % addr,
                      "  http-request return status 200"]
    lines += ["backend pool", "  balance hdr(X-Key)", "  hash-type consistent"]
    check = " check inter 100 fall 1 rise 1" if down else ""
    for name, addr, w, sid in servers:
        lines.append("  server %s %s weight %d%s%s" % (name, addr, w,
                                                        " id %d" % sid if sid else "", check))
    lines += ["frontend front", "  bind 127.0.0.1:%d" % front, "  default_backend pool",
              "  http-response set-header X-Server %s"]
    return "\n".join(lines) + "\n"


def haproxy(tmp, text, settle=0.0):
    """HAProxy on the config text, for a with block."""
    cfg = os.path.join(tmp, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(text)
    return running([HAPROXY, "-db", "-f", cfg], settle=settle)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: haproxy_compat.py PLACE")
    place = sys.argv[1]
    if not os.access(HAPROXY, os.X_OK):
        print("haproxy_compat: haproxy missing; run scripts/bootstrap")
        sys.exit(1 if os.environ.get("CI") else 77)
    rng = random.Random("haproxy_compat")

    def tcp(n, weights=None, first=1, ids=None):
        out = []
        for i in range(n):
            host = "127.0.0.%d" % (first + i)
            addr = "%s:%d" % (host, free_port(host))
            out.append(("s%d_%d" % (first, i), addr, weights[i] if weights else 1,
                        ids[i] if ids else None))
        return out

    nine = tcp(9, first=20)
    nine_ids = tcp(9, first=40, ids=[11, 12, 13, 14, 15, 16, 17, 18, 19])
    mid = 4
    sets = [("2 servers", tcp(2)), ("3 servers", tcp(3)), ("8 servers", tcp(8)),
            ("30 servers", tcp(30, first=60)),
            ("unequal weights 1:2:3:5:1:8:1:2", tcp(8, [1, 2, 3, 5, 1, 8, 1, 2], first=100)),
            ("very unequal weights 1:10:100:3", tcp(4, [1, 10, 100, 3], first=110)),
            ("9 servers", nine),
            ("9, middle one removed (ids renumber)", nine[:mid] + nine[mid + 1:]),
            ("9, one added in the middle (ids renumber)",
             nine[:mid] + tcp(1, first=120) + nine[mid:]),
            ("9 with ids 11..19", nine_ids),
            ("ids 11..19, middle one removed", nine_ids[:mid] + nine_ids[mid + 1:]),
            ("ids 11..19, id 99 added in the middle",
             nine_ids[:mid] + tcp(1, first=130, ids=[99]) + nine_ids[mid:])]
    total = 0
    nsets = len(sets)
    with tempfile.TemporaryDirectory() as tmp:
        for set_name, servers in sets:
            keys = header_keys(rng, header_key)
            front = free_port("127.0.0.1")
            with haproxy(tmp, config(front, servers)):
                names = ask(front, keys, 200, "X-Server", "haproxy")
            index = {name: i for i, (name, _, _, _) in enumerate(servers)}
            want = [index[n] for n in names]
            # chash's ids: the servers' numeric ids where the backend gives them, else their
            # names (haproxy@2 numbers those by position, as HAProxy does).
            nodes = [((b"%d" % sid) if sid else name.encode(), w)
                     for name, _, w, sid in servers]
            got = cc.run_owners([place, "haproxy@2"], cc.case_text(nodes, keys), "clients_place")
            bad = [i for i in range(len(keys)) if want[i] != got[i]]
            if bad:
                print("haproxy_compat [%s]: %d of %d keys differ" % (set_name, len(bad), len(keys)))
                for i in bad[:5]:
                    print("  key %s: haproxy -> %s, chash -> %s"
                          % (keys[i].hex(), servers[want[i]][0], servers[got[i]][0]))
                sys.exit(1)
            print("  %-45s %2d servers, %5d keys, %2d servers used: equal"
                  % (set_name, len(servers), len(keys), len(set(want))))
            total += len(keys)
        # Servers down: HAProxy's health check marks them down and takes their points out of
        # its tree, so their keys go to the nearest point left (before or after). chash's route
        # over the up servers (haproxy@2's walk: points by increasing distance) must agree.
        eight = tcp(8, [1, 2, 1, 3, 1, 1, 2, 1], first=150)
        for down in ([3], [0, 5]):
            keys = header_keys(rng, header_key)
            front = free_port("127.0.0.1")
            # settle: a few checks, so the down servers are marked down
            with haproxy(tmp, config(front, eight, down), settle=1.5):
                names = ask(front, keys, 200, "X-Server", "haproxy")
            index = {name: i for i, (name, _, _, _) in enumerate(eight)}
            want = [index[n] for n in names]
            owners = cc.run_owners([place, "haproxy@2"],
                                   cc.case_text([(n.encode(), w) for n, _, w, _ in eight], keys),
                                   "clients_place")
            moved = sum(1 for o in owners if o in down)
            got = cc.run_owners([place, "haproxy@2"],
                                cc.case_text([(n.encode(), w) for n, _, w, _ in eight], keys,
                                             down=down), "clients_place")
            bad = [i for i in range(len(keys)) if want[i] != got[i]]
            if bad:
                print("haproxy_compat [8 servers, down %s]: %d of %d keys differ"
                      % (down, len(bad), len(keys)))
                for i in bad[:5]:
                    print("  key %s: haproxy -> %s, chash -> %s"
                          % (keys[i].hex(), eight[want[i]][0],
                             eight[got[i]][0] if got[i] >= 0 else "(none)"))
                sys.exit(1)
            print("  %-45s %2d servers, %5d keys, %4d off the down ones: equal"
                  % ("8 servers, %d down %s" % (len(down), down), len(eight), len(keys), moved))
            total += len(keys)
            nsets += 1

        # The empty key: HAProxy's hdr() balancer sends a request whose header is empty (or
        # absent) round robin (weighted): its server follows the requests before it, not the
        # key, which no placement reproduces. Shown on 3 servers weighted 1:2:1, 40 requests:
        # all three take some (with hash-type consistent HAProxy steps round its tree of points,
        # so the shares only follow the weights roughly: 12/15/13 in 2.6.12).
        servers = tcp(3, [1, 2, 1], first=140)
        front = free_port("127.0.0.1")
        with haproxy(tmp, config(front, servers)):
            names = ask(front, [b""] * 40, 200, "X-Server", "haproxy")
        index = {name: i for i, (name, _, _, _) in enumerate(servers)}
        counts = [sum(1 for n in names if index[n] == i) for i in range(3)]
        nodes = [(name.encode(), w) for name, _, w, _ in servers]
        chash = cc.run_owners([place, "haproxy@2"], cc.case_text(nodes, [b""]), "clients_place")[0]
        if min(counts) == 0:
            sys.exit("haproxy_compat [empty key]: expected round robin over all 3 servers, "
                     "HAProxy gave %s" % counts)
        print("  %-45s  3 servers, 40 requests, round robin %s (chash's placement: server %d)"
              % ("empty key, weights 1:2:1", "/".join(map(str, counts)), chash))
    print("haproxy_compat: %d server sets, %d keys through a real HAProxy, 100%% equal"
          % (nsets, total))


if __name__ == "__main__":
    main()
