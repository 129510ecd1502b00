#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_bounded: bounded_load_factor (consistent hashing with bounded loads) caps a hot key's
owner.

One chash-proxy, two pools in front of the same 3 real redis-servers, same hash, distribution
and (named) servers: "plain" (no bound) and "bounded" (bounded_load_factor: 1.25). The key
space is skewed: one hot key takes HOT_SHARE of the GETs, a few cold keys the rest. Every key is
SET directly on every backend with the same value, so that any backend can answer any GET:
bounded loads move a key's requests off its owner while the owner is over its bound, which is
only correct for read-mostly replicated data or a cache filled on a miss (docs/PROXY.md,
"Bounded loads").

The same traffic goes through each pool: CLIENTS connections, each sending ROUNDS pipelines of
PIPELINE GETs at once (all clients' pipelines written before any reply is read), so that many
requests are in flight together. Checked, from the stats port's per-server "requests":
  - plain: the hot key's owner takes at least the hot share (every hot GET goes to it);
  - bounded: the hot owner's share is measurably lower (at most MAX_BOUNDED_SHARE) and every
    server takes requests;
  - both: every GET answered with the right value, the pools' request totals equal what was sent;
  - clean exit (no sanitizer report).

Usage: test_bounded.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, WAIT_TIMEOUT, encode, fail, free_ports, log,  # noqa: E402
                          poll_until, pool_yaml, run_test, soft_fail, start_redises, write_file)

NAMES = ("a", "b", "c")
CLIENTS = 8
ROUNDS = 10
PIPELINE = 200
HOT_SHARE = 0.9          # of the GETs, on the hot key
MAX_BOUNDED_SHARE = 0.6  # the hot owner's share under bounded_load_factor 1.25 (plain: >= 0.9)
COLD = ["cold:%d" % i for i in range(20)]


def config(backends, ports):
    servers = [(b.text, 1, n) for b, n in zip(backends, NAMES)]
    # coalesce_reads off: the hot key's identical GETs in flight would otherwise share backend
    # requests (docs/PROXY.md, "Coalescing"), and this test measures where the GETs go.
    common = dict(hash="murmur", distribution="ketama", timeout=5000, coalesce_reads=False)
    return (pool_yaml("plain", ports[0], servers, **common) +
            pool_yaml("bounded", ports[1], servers, bounded_load_factor=1.25, **common))


def commands():
    """One pipeline: the hot key HOT_SHARE of the time, cold keys in turn otherwise."""
    out, j = [], 0
    for i in range(PIPELINE):
        if i % 10 < HOT_SHARE * 10:
            out.append("hot")
        else:
            out.append(COLD[j % len(COLD)])
            j += 1
    return out


def traffic(addr, values):
    keys = commands()
    data = b"".join(encode("GET", k) for k in keys)
    conns = [Resp(addr) for _ in range(CLIENTS)]
    sent = bad = 0
    try:
        for _ in range(ROUNDS):
            for c in conns:
                c.send(data)
                sent += len(keys)
            for c in conns:
                for k in keys:
                    r = c.read()
                    if r != values[k]:
                        bad += 1
                        if bad <= 3:
                            soft_fail("%s:%d: GET %s -> %r, want %r" % (addr[0], addr[1], k, r,
                                                                     values[k]))
    finally:
        for c in conns:
            c.close()
    return sent, bad


def per_server(px, pool):
    st = px.stats_json().get(pool)
    if not isinstance(st, dict):
        fail("stats: no pool %r" % pool)
    out = {}
    for n in NAMES:
        s = st.get(n)
        if not isinstance(s, dict) or not isinstance(s.get("requests"), int):
            fail("stats: pool %s has no server %r with requests" % (pool, n))
        out[n] = s["requests"]
    return out


def body(t):
    tmp = t.tmp
    backends = start_redises(t.programs["redis-server"], tmp, 3)
    values = {k: b"value-of-" + k.encode() for k in ["hot"] + COLD}
    for b in backends:  # replicated: any backend can answer any key
        for k, v in values.items():
            if b.call("SET", k, v) != b"OK":
                fail("SET %s on %s failed" % (k, b.text))

    ports = free_ports(2)
    conf = write_file(os.path.join(tmp, "bounded.yml"), config(backends, ports))
    px = Proxy(t.proxy, tmp, conf, [("127.0.0.1", x) for x in ports],
               stats_interval_ms=100).start()

    shares = {}
    for pool, port in (("plain", ports[0]), ("bounded", ports[1])):
        sent, bad = traffic(("127.0.0.1", port), values)
        # Every GET was answered, so counted; a total short of what was sent is judged below.
        def counted():
            req = per_server(px, pool)
            return req if sum(req.values()) >= sent else None
        req = poll_until(counted, WAIT_TIMEOUT) or per_server(px, pool)
        total = sum(req.values())
        if total != sent:
            soft_fail("pool %s: %d requests counted for %d sent" % (pool, total, sent))
        if bad:
            soft_fail("pool %s: %d of %d GETs answered wrongly" % (pool, bad, sent))
        top = max(NAMES, key=lambda n: req[n])
        shares[pool] = (top, req[top] / max(total, 1), req)
        log("pool %s: requests per server %s; busiest %s with %.1f%%" % (
            pool, req, top, 100.0 * shares[pool][1]))

    ptop, pshare, _ = shares["plain"]
    btop, bshare, breq = shares["bounded"]
    if pshare < HOT_SHARE:
        soft_fail("plain pool: the hot key's owner took %.1f%% of the requests, expected >= "
                  "%.0f%% (every hot GET on its owner)" % (100 * pshare, 100 * HOT_SHARE))
    if bshare > MAX_BOUNDED_SHARE:
        soft_fail("bounded pool: the busiest server (%s) took %.1f%% of the requests, expected "
                  "<= %.0f%% with bounded_load_factor 1.25 (plain: %.1f%% on %s)" % (
                      btop, 100 * bshare, 100 * MAX_BOUNDED_SHARE, 100 * pshare, ptop))
    if min(breq.values()) == 0:
        soft_fail("bounded pool: a server took no request: %s" % breq)

    px.stop()
    return "hot owner's share %.1f%% unbounded, %.1f%% with bounded_load_factor 1.25" % (
        100 * pshare, 100 * bshare)


if __name__ == "__main__":
    run_test(body)
