#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_stats: chash-proxy's stats port speaks nutcracker's JSON; nutcracker is the oracle.

The same two pools (named servers; unnamed servers) in front of 3 real redis-servers are run by
nutcracker (-s, -i 100) and then by chash-proxy, with the same traffic through each (SETs and
GETs on one held connection per pool). Checked on chash-proxy's output:
  - each TCP connection to the stats port receives exactly one JSON object, then a close;
  - the top-level fields, the pools, each pool's fields and its servers (names and order), and
    each server's fields (and their order) are exactly nutcracker's, plus our per-pool
    "membership_version" and our top-level "reloads" and "reload_failures"; every field has
    nutcracker's JSON type;
  - membership_version is what `chash lookup --config --show-version` reports for the pool;
  - the values are live and right: client_connections counts the held client, requests and
    responses per server equal nutcracker's for the same traffic (same placement), uptime and
    timestamp are sane, an MGET across nodes counts fragments.

Usage: test_stats.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server or nutcracker missing and CI unset).
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, fail, free_ports, log, pool_yaml, run_test,  # noqa: E402
                          soft_fail, start_redises, write_file)

TOP = ["service", "source", "version", "uptime", "timestamp", "total_connections",
       "curr_connections"]
CHASH_TOP = ["reloads", "reload_failures"]    # chash's additions (hot reload), after nutcracker's
NKEYS = 200


def config(backends, ports):
    return (pool_yaml("named", ports[0], [(b.text, 1, n) for b, n in
                                          zip(backends, ("zeta", "a", "mid-1"))],
                      hash="fnv1a_64", distribution="ketama", timeout=2000) +
            pool_yaml("plain", ports[1], [(b.text, w, None) for b, w in zip(backends, (1, 2, 1))],
                      hash="murmur", distribution="modula", timeout=2000, redis_db=1))


def traffic(addr):
    """SETs then GETs on one connection, kept open (returned) so that it counts as a client."""
    c = Resp(addr)
    cmds = [("SET", "k:%d" % i, "v%d" % i) for i in range(NKEYS)]
    cmds += [("GET", "k:%d" % i) for i in range(NKEYS)]
    got = c.pipeline(cmds)
    if got[:NKEYS] != [b"OK"] * NKEYS or got[NKEYS:] != [b"v%d" % i for i in range(NKEYS)]:
        fail("traffic through %s:%d failed: %r" % (addr[0], addr[1], got[:3]))
    return c


def fields(obj):
    """(scalar field names in order, {object-valued field: object} in order)."""
    return ([k for k, v in obj.items() if not isinstance(v, dict)],
            {k: v for k, v in obj.items() if isinstance(v, dict)})


def jtype(v):
    return type(v).__name__


def counted(st):
    """Whether stats st count the traffic: in each pool one client, and the requests and
    responses of its 2 * NKEYS commands on the servers (what they count exactly is judged by
    the caller)."""
    for pool in ("named", "plain"):
        p = st.get(pool, {})
        servers = [v for v in p.values() if isinstance(v, dict)]
        if p.get("client_connections") != 1 or any(
                sum(s.get(f, 0) for s in servers) < 2 * NKEYS for f in ("requests", "responses")):
            return False
    return True


def run(exe, tmp, label, backends, nutcracker):
    ports = free_ports(2)
    conf = write_file(os.path.join(tmp, label + ".yml"), config(backends, ports))
    p = Proxy(exe, tmp, conf, [("127.0.0.1", x) for x in ports], label=label,
              nutcracker=nutcracker, stats_interval_ms=100).start()
    conns = [traffic(("127.0.0.1", x)) for x in ports]
    # nutcracker aggregates its stats every -i ms: until they show the traffic
    st = p.poll_stats(counted)
    raw = p.stats()
    return p, conf, ports, conns, raw, st


def body(t):
    proxy_exe, chash, tmp = t.proxy, t.chash, t.tmp
    redis_exe, nutcracker = t.programs["redis-server"], t.programs["nutcracker"]
    backends = start_redises(redis_exe, tmp, 3)

    nc, _, _, nconns, _, want = run(nutcracker, tmp, "nutcracker", backends, True)
    for c in nconns:
        c.close()
    nc.stop()
    for b in backends:
        b.call("FLUSHALL")

    px, conf, ports, conns, raw, got = run(proxy_exe, tmp, "chash-proxy", backends, False)
    log("nutcracker: %s" % want)
    log("chash-proxy: %s" % got)

    # One JSON object per connection, then a close (stats() reads until the close).
    if raw.count(b"{") < 1 or not raw.rstrip().endswith(b"}"):
        soft_fail("stats output is not one JSON object: %r" % raw[:200])

    # Top level.
    wtop, wpools = fields(want)
    gtop, gpools = fields(got)
    if wtop != TOP:
        fail("nutcracker's top-level fields are %s, not the expected %s: oracle changed?" % (
            wtop, TOP))
    if gtop != wtop + CHASH_TOP:
        soft_fail("top-level fields %s, nutcracker's %s plus chash's %s" % (gtop, wtop,
                                                                          CHASH_TOP))
    for k in CHASH_TOP:
        if got.get(k) != 0:
            soft_fail("top-level %s = %r without any reload" % (k, got.get(k)))
    for k in wtop:
        if k in got and jtype(got[k]) != jtype(want[k]):
            soft_fail("top-level %s is a %s, nutcracker's a %s" % (k, jtype(got[k]),
                                                                   jtype(want[k])))
    if list(gpools) != list(wpools):
        soft_fail("pools %s, nutcracker's %s" % (list(gpools), list(wpools)))

    for pname, wp in wpools.items():
        gp = gpools.get(pname)
        if gp is None:
            continue
        wf, wservers = fields(wp)
        gf, gservers = fields(gp)
        if "membership_version" not in gf:
            soft_fail("pool %s: no membership_version" % pname)
        gf = [f for f in gf if f != "membership_version"]
        if gf != wf:
            soft_fail("pool %s: fields %s, nutcracker's %s" % (pname, gf, wf))
        for f in wf:
            if f in gp and jtype(gp[f]) != jtype(wp[f]):
                soft_fail("pool %s: %s is a %s, nutcracker's a %s" % (
                    pname, f, jtype(gp[f]), jtype(wp[f])))
        if list(gservers) != list(wservers):
            soft_fail("pool %s: servers %s, nutcracker's %s (names and order must match)" % (
                pname, list(gservers), list(wservers)))
        for sname, ws in wservers.items():
            gs = gservers.get(sname)
            if gs is None:
                continue
            if list(gs) != list(ws):
                soft_fail("pool %s server %s: fields %s, nutcracker's %s" % (
                    pname, sname, list(gs), list(ws)))
            for f in ws:
                if f in gs and jtype(gs[f]) != jtype(ws[f]):
                    soft_fail("pool %s server %s: %s is a %s, nutcracker's a %s" % (
                        pname, sname, f, jtype(gs[f]), jtype(ws[f])))
            # Same traffic, same placement: the same requests and responses per server.
            for f in ("requests", "responses"):
                if gs.get(f) != ws.get(f):
                    soft_fail("pool %s server %s: %s = %r, nutcracker counted %r for the same "
                              "traffic" % (pname, sname, f, gs.get(f), ws.get(f)))
            for f in ("request_bytes", "response_bytes"):
                if gs.get(f) != ws.get(f):
                    log("note: pool %s server %s: %s = %r, nutcracker's %r" % (
                        pname, sname, f, gs.get(f), ws.get(f)))
        # Live values.
        if gp.get("client_connections") != 1:
            soft_fail("pool %s: client_connections = %r with one client connected" % (
                pname, gp.get("client_connections")))
        total = sum(s.get("requests", 0) for s in gservers.values()
                    if isinstance(s.get("requests"), int))
        if total < 2 * NKEYS:
            soft_fail("pool %s: %d requests counted for %d sent" % (pname, total, 2 * NKEYS))

    # membership_version: what chash lookup --show-version says.
    for pname in gpools:
        r = subprocess.run([chash, "lookup", "--config", conf, "--pool", pname, "--show-version",
                            "x"], capture_output=True, timeout=60)
        first = r.stdout.decode().split("\n")[0]
        if r.returncode != 0 or not first.startswith("# version "):
            fail("chash lookup --show-version: %r %r" % (first, r.stderr[:200]))
        if gpools[pname].get("membership_version") != first[len("# version "):]:
            soft_fail("pool %s: membership_version %r, chash lookup --show-version says %r" % (
                pname, gpools[pname].get("membership_version"), first[len("# version "):]))

    now = time.time()
    if not isinstance(got.get("timestamp"), int) or abs(got["timestamp"] - now) > 10:
        soft_fail("timestamp %r, now is %d" % (got.get("timestamp"), now))
    if not isinstance(got.get("uptime"), int) or not 0 <= got["uptime"] < 600:
        soft_fail("uptime %r" % (got.get("uptime"),))
    if not isinstance(got.get("curr_connections"), int) or got["curr_connections"] < 2:
        soft_fail("curr_connections %r with 2 clients connected" % (got.get("curr_connections"),))
    if not isinstance(got.get("total_connections"), int) or \
            got["total_connections"] < got.get("curr_connections", 0):
        soft_fail("total_connections %r < curr_connections" % (got.get("total_connections"),))

    # An MGET across the 3 nodes creates fragments; closing the clients is seen.
    before = got["named"].get("fragments", 0)
    r = conns[0].call("MGET", *["k:%d" % i for i in range(30)])
    if r != [b"v%d" % i for i in range(30)]:
        soft_fail("MGET through the proxy: %r" % r[:5])
    for c in conns:
        c.close()

    def closed(st):
        return st["named"].get("fragments", 0) > before and all(
            st[p].get("client_connections") == 0 and st[p].get("client_eof", 0) >= 1
            for p in ("named", "plain"))
    after = px.poll_stats(closed)
    if not after["named"].get("fragments", 0) > before:
        soft_fail("fragments did not grow after an MGET over 3 servers (%r -> %r)" % (
            before, after["named"].get("fragments")))
    for pname in ("named", "plain"):
        if after[pname].get("client_connections") != 0:
            soft_fail("pool %s: client_connections %r after the clients closed" % (
                pname, after[pname].get("client_connections")))
        if after[pname].get("client_eof", 0) < 1:
            soft_fail("pool %s: client_eof %r after a client closed" % (
                pname, after[pname].get("client_eof")))
    if after.get("uptime", 0) < got.get("uptime", 0):
        soft_fail("uptime went backwards")
    px.stop()
    return "fields, order, types, server names and request counts as nutcracker's"


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "nutcracker"))
