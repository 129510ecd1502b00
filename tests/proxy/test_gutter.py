#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_gutter: a gutter pool takes an ejected server's keys (issue 26, item 2).

chash-proxy in front of a pool of 3 servers (A, B, C) with "gutter: spare", a pool of 1 server
(G), gutter_ttl 4000 ms; the pool ejects a server after one failure and probes it every 300 ms.
Keys are written (v1) through the proxy; their owners are computed independently with
`chash lookup` against the same config. B is SIGSTOPped (it keeps its v1 values) until the
proxy ejects it. Then, for B's keys only, reads and writes through the proxy:

  redis:     GET, SET, SET EX 3600, SET PXAT (an hour ahead), SETEX 3600, MSET, INCR, DEL,
             and RPOPLPUSH (refused: it writes two keys);
  memcached: get, set with exptime 0 and 3600, add, delete, touch 3600, a meta ms whose
             line ends with a bare LF and whose value holds a CRLF (issue 35: its T went into
             the value, the rest read by G as a command of its own), "set k  5 3600" with
             two spaces (issue 35: its client flags were capped as if the exptime, which
             stayed 3600), and an mg touching a key with T0000000000000003600 (issue 35: sent
             uncapped, leading zeros counted as digits too many).

Checked directly on the servers: every write is on G with a lifetime of at most gutter_ttl
(redis PTTL, memcached "mg k t"), deletes are absent there, the reads through the proxy answer
G's values, and A's and C's command counts (redis INFO commandstats, memcached "stats"
cmd_get + cmd_set + delete_* + touch_*) did not move; the chash_proxy_gutter_* counters count
them. With G SIGSTOPped too (redis), once G is ejected a read of B's key is served by the
ring (chash_proxy_gutter_unavailable_total). B is resumed and readmitted (a write of
its key lands on it); then reads of B's keys go to B again (B's own counts rise, G's do not),
and no read returns B's value from before the outage for a key written during it (the rejoin
deleted those on B): 0 values written through the gutter or older are served. Finally G holds
none of the keys once gutter_ttl has passed (polled, with a deadline). A SIGHUP reload adds
a gutter while B is out (B's key then lands on G), another removes it (the ring's way again).
Config errors (-t): an unknown gutter, another protocol, itself, a chain, with
file:line:column.

Usage: test_gutter.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server or memcached missing and CI unset).
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Mc, Proxy, Resp, RespError, chash_lookup, fail, free_ports,  # noqa: E402
                          log, pool_yaml, run_test, sigstop, start_memcacheds, start_redises,
                          wait_until, write_file)
import promtext  # noqa: E402

TTL_MS = 4000
BOUND = 15.0
NKEYS = 600


def config(tmp, label, backends, gutter, port, gport, redis, with_gutter=True):
    extra = {"gutter": "spare", "gutter_ttl": TTL_MS} if with_gutter else {}
    text = pool_yaml("main", port, [(s.text, 1, None) for s in backends], redis=redis,
                     hash="md5", distribution="ketama", auto_eject_hosts=True,
                     server_failure_limit=1, server_retry_timeout=300, timeout=300, **extra)
    text += pool_yaml("spare", gport, [(gutter.text, 1, None)], redis=redis, hash="md5",
                      distribution="ketama", auto_eject_hosts=True, server_failure_limit=1,
                      server_retry_timeout=300, timeout=300, max_ejected_share=1)
    return write_file(os.path.join(tmp, label + ".yml"), text)


def redis_counts(r):
    """calls per command (INFO commandstats), INFO itself left out."""
    out = {}
    for line in r.call("INFO", "commandstats").decode().split("\r\n"):
        if line.startswith("cmdstat_") and not line.startswith("cmdstat_info:"):
            name, rest = line.split(":", 1)
            out[name[8:]] = int(rest.split(",")[0].split("=")[1])
    return out


def wait_ejected(p, read_one, label):
    deadline = time.monotonic() + BOUND
    while p.stats_json()["main"]["server_ejects"] < 1:
        if time.monotonic() > deadline:
            fail("%s: B not ejected within %g s" % (label, BOUND))
        read_one()


def redis_case(t):
    servers = start_redises(t.programs["redis-server"], t.tmp, 4)
    backends, G = servers[:3], servers[3]
    port, gport, mport = free_ports(3)
    conf = config(t.tmp, "redis", backends, G, port, gport, True)
    p = Proxy(t.proxy, t.tmp, conf, [("127.0.0.1", port), ("127.0.0.1", gport),
                                     ("127.0.0.1", mport)],
              label="redis", extra_args=["--metrics-port", str(mport)]).start()
    addr = ("127.0.0.1", port)
    keys = [b"gt:%d" % i for i in range(NKEYS)]
    owner = chash_lookup(t.chash, conf, "main", keys)
    A, B, C = backends
    mine = [k for k in keys if owner[k] == B.text]
    others = [k for k in keys if owner[k] != B.text]
    if len(mine) < 60:
        fail("redis: B owns %d keys only" % len(mine))
    with Resp(addr) as c:
        got = c.pipeline([("SET", k, b"v1:" + k) for k in keys])
        if any(g != b"OK" for g in got):
            fail("redis: the first SETs failed")
    on_b = set(B.keys())
    if on_b != set(mine):
        fail("redis: B holds %d keys, chash lookup says %d" % (len(on_b), len(mine)))

    sigstop(B.proc.pid)
    try:
        with Resp(addr) as c:
            wait_ejected(p, lambda: c.call("GET", mine[0]), "redis")
            before_a, before_c, before_g = redis_counts(A), redis_counts(C), redis_counts(G)
            # B's keys while it is out: reads miss at first (the gutter is empty), writes of
            # each kind, a delete, a refused write of two keys.
            n = len(mine) // 8
            plain, ex, pxat, setex, mset, incr, dele, reads = (
                mine[0:n], mine[n:2 * n], mine[2 * n:3 * n], mine[3 * n:4 * n],
                mine[4 * n:5 * n], mine[5 * n:6 * n], mine[6 * n:7 * n], mine[7 * n:])
            first = c.pipeline([("GET", k) for k in reads])
            if any(g is not None for g in first):
                fail("redis: a read of B's key answered %r while B was out and the gutter "
                     "empty (B's old value?)" % [g for g in first if g is not None][:2])
            later = int(time.time() * 1000) + 3600 * 1000
            cmds = [("SET", k, b"v2:" + k) for k in plain]
            cmds += [("SET", k, b"v2:" + k, "EX", "3600") for k in ex]
            cmds += [("SET", k, b"v2:" + k, "PXAT", str(later)) for k in pxat]
            cmds += [("SETEX", k, "3600", b"v2:" + k) for k in setex]
            cmds.append(tuple(["MSET"] + [x for k in mset for x in (k, b"v2:" + k)]))
            cmds += [c_ for k in incr for c_ in (("DEL", k), ("INCR", k))]
            cmds += [("DEL", k) for k in dele]
            got = c.pipeline(cmds)
            bad = [(cm[:2], g) for cm, g in zip(cmds, got)
                   if g not in (b"OK", 1) and not (cm[0] == "DEL" and g == 0)]
            if bad:
                fail("redis: writes of B's keys while it was out failed: %r" % bad[:3])
            e = c.call("RPOPLPUSH", mine[0], mine[1])
            if not isinstance(e, RespError) or "gutter" not in str(e):
                fail("redis: RPOPLPUSH of B's key answered %r, not the gutter's refusal" % e)
            # the writes are on G, capped
            written = plain + ex + pxat + setex + mset
            with Resp(G.addr) as d:
                vals = d.pipeline([("GET", k) for k in written])
                ttls = d.pipeline([("PTTL", k) for k in written + incr])
                gone = d.pipeline([("EXISTS", k) for k in dele])
            wrong = [(k, v) for k, v in zip(written, vals) if v != b"v2:" + k]
            if wrong:
                fail("redis: %d writes of B's keys not on the gutter, e.g. %r" % (len(wrong),
                                                                                    wrong[:3]))
            uncapped = [tt for tt in ttls if not 0 < tt <= TTL_MS]
            if uncapped:
                fail("redis: %d keys on the gutter with PTTL outside (0, %d], e.g. %r" % (
                    len(uncapped), TTL_MS, uncapped[:5]))
            if any(gone):
                fail("redis: a deleted key of B is on the gutter")
            through = c.pipeline([("GET", k) for k in written])
            if through != vals:
                fail("redis: reads of B's keys through the proxy are not the gutter's values")
            after_a, after_c, after_g = redis_counts(A), redis_counts(C), redis_counts(G)
            if after_a != before_a or after_c != before_c:
                fail("redis: the healthy servers took requests for B's keys while it was out: "
                     "A %r -> %r, C %r -> %r" % (before_a, after_a, before_c, after_c))
            served = sum(after_g.values()) - sum(before_g.values())
            if served < len(reads) + len(cmds) - 1:
                fail("redis: the gutter took %d requests, fewer than were sent" % served)
            # The counters: every read and write of B's keys, the refusal; nothing unavailable.
            fams = promtext.scrape(mport)
            got = {k: promtext.value(fams, "chash_proxy_gutter_%s_total" % k, pool="main")
                   for k in ("reads", "writes", "refused", "unavailable")}
            want = {"reads": len(reads) + len(written), "writes": len(cmds) - 1 + len(mset),
                    "refused": 1, "unavailable": 0}
            if got["reads"] < want["reads"] or got["writes"] != want["writes"] or \
                    got["refused"] != 1 or got["unavailable"] != 0:
                fail("redis: gutter counters %r, want %r (reads at least: the ejection's)" % (
                    got, want))
            # A split read over healthy and lost owners: each key from its own place.
            mixed = others[:5] + written[:5]
            want = [b"v1:" + k for k in others[:5]] + [b"v2:" + k for k in written[:5]]
            if c.call("MGET", *mixed) != want:
                fail("redis: MGET over A/C's and B's keys answered %r" % c.call("MGET", *mixed))
            # The gutter out too: once it is ejected, B's keys go the ring's way (counted).
            sigstop(G.proc.pid)
            try:
                def ring_way():
                    r = c.call("GET", reads[1])
                    v = promtext.value(promtext.scrape(mport), "chash_proxy_gutter_"
                                       "unavailable_total", pool="main")
                    return v > 0 and not isinstance(r, RespError)
                wait_until(ring_way, BOUND, "redis: with the gutter out too, a read of B's key "
                           "served by the ring", poll=0.05)
            finally:
                os.kill(G.proc.pid, signal.SIGCONT)
    finally:
        os.kill(B.proc.pid, signal.SIGCONT)

    # B is back: once readmitted (a write of its key lands on it), reads go to it.
    k_back = reads[0]
    with Resp(addr) as c:
        def lands():
            c.call("SET", k_back, b"v3:" + k_back)
            return B.call("GET", k_back) == b"v3:" + k_back
        wait_until(lands, BOUND, "redis: B readmitted after SIGCONT (a SET of its key on it)",
                   poll=0.1)
        before_b, before_g = redis_counts(B), redis_counts(G)
        back = c.pipeline([("GET", k) for k in mine])
        after_b, after_g = redis_counts(B), redis_counts(G)
    changed = set(plain + ex + pxat + setex + mset + incr + dele)
    stale = [k for k, g in zip(mine, back) if k in changed and g is not None]
    if stale:
        fail("redis: %d reads after B's return answered a value for a key written while it was "
             "out (B's old one or the gutter's), e.g. %r" % (len(stale), stale[:3]))
    kept = [k for k, g in zip(mine, back) if k not in changed and k != k_back and
            g != b"v1:" + k]
    if kept:
        fail("redis: %d keys of B not written while it was out lost their value: %r" % (
            len(kept), kept[:3]))
    if after_b.get("get", 0) - before_b.get("get", 0) < len(mine) or \
            after_g.get("get", 0) != before_g.get("get", 0):
        fail("redis: reads after B's return did not all go to B (B %r -> %r, G %r -> %r)" % (
            before_b.get("get"), after_b.get("get"), before_g.get("get"), after_g.get("get")))
    # Nothing written through the gutter outlives gutter_ttl there.
    with Resp(G.addr) as d:
        wait_until(lambda: d.call("DBSIZE") == 0, TTL_MS / 1000.0 + BOUND,
                   "redis: the gutter empty once gutter_ttl passed", poll=0.2)
    p.stop()
    log("redis: %d keys of B: reads and writes on the gutter (PTTL <= %d ms), A and C "
        "untouched, 0 stale reads after B's return" % (len(mine), TTL_MS))
    for s in servers:
        s.kill()


def mc_case(t):
    servers = start_memcacheds(t.programs["memcached"], t.tmp, 4)
    backends, G = servers[:3], servers[3]
    port, gport = free_ports(2)
    conf = config(t.tmp, "memcache", backends, G, port, gport, False)
    p = Proxy(t.proxy, t.tmp, conf, [("127.0.0.1", port), ("127.0.0.1", gport)],
              label="memcache").start()
    addr = ("127.0.0.1", port)
    keys = [b"gm:%d" % i for i in range(NKEYS)]
    owner = chash_lookup(t.chash, conf, "main", keys)
    A, B, C = backends
    mine = [k for k in keys if owner[k] == B.text]
    if len(mine) < 60:
        fail("memcache: B owns %d keys only" % len(mine))
    with Mc(addr) as c:
        for k in keys:
            if c.call(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(k) + 3, b"v1:" + k)) != b"STORED\r\n":
                fail("memcache: the first sets failed")
    if B.keys_present(keys) != set(mine):
        fail("memcache: B does not hold exactly chash lookup's keys")

    def counts(s):
        with Mc(s.addr) as d:
            d.send(b"stats\r\n")
            out = {}
            while True:
                line = d.line()
                if line == b"END\r\n":
                    break
                parts = line.split()
                if parts[0] == b"STAT" and parts[1] in (b"cmd_get", b"cmd_set", b"cmd_touch",
                                                          b"delete_hits", b"delete_misses"):
                    out[parts[1].decode()] = int(parts[2])
            return out

    sigstop(B.proc.pid)
    try:
        with Mc(addr) as c:
            wait_ejected(p, lambda: c.call(b"get %s\r\n" % mine[0]), "memcache")
            before_a, before_c = counts(A), counts(C)
            n = len(mine) // 5
            zero, hour, add, dele, touch = (mine[0:n], mine[n:2 * n], mine[2 * n:3 * n],
                                            mine[3 * n:4 * n], mine[4 * n:-2])
            lf_key, sp_key = mine[-1], mine[-2]
            for k in mine:
                if c.call(b"get %s\r\n" % k) != b"END\r\n":
                    fail("memcache: a get of B's key %r found a value while the gutter was "
                         "empty" % k)
            for keys_, ex, verb in ((zero, 0, b"set"), (hour, 3600, b"set"),
                                    (add, 3600, b"add"), (touch, 0, b"set")):
                for k in keys_:
                    v = b"v2:" + k
                    if c.call(b"%s %s 0 %d %d\r\n%s\r\n" % (verb, k, ex, len(v), v)) != \
                            b"STORED\r\n":
                        fail("memcache: %s of B's key failed while B was out" % verb.decode())
            for k in touch:
                if c.call(b"touch %s 3600\r\n" % k) != b"TOUCHED\r\n":
                    fail("memcache: touch of B's key failed while B was out")
            for k in dele:
                if c.call(b"delete %s\r\n" % k) not in (b"NOT_FOUND\r\n", b"DELETED\r\n"):
                    fail("memcache: delete of B's key failed while B was out")
            lf_value = b"a\r\nmn\r\nb:" + lf_key
            got = c.call(b"ms %s %d\n%s\r\n" % (lf_key, len(lf_value), lf_value))
            after = c.call(b"mn\r\n")
            if got != b"HD\r\n" or after != b"MN\r\n":
                fail("memcache: ms with a bare-LF line: %r, then mn: %r (want HD, MN)" % (
                    got, after))
            if c.call(b"set %s  5 3600 2\r\nsp\r\n" % sp_key) != b"STORED\r\n":
                fail("memcache: a set with two spaces failed while B was out")
            with Mc(G.addr) as d:
                rep = d.call(b"mg %s t f v\r\n" % sp_key)
                head = rep.split(b"\r\n")[0].split()
                if head[0] != b"VA" or b"f5" not in head[2:] or \
                        not [f for f in head[2:] if f.startswith(b"t") and
                             0 < int(f[1:]) <= TTL_MS // 1000]:
                    fail("memcache: 'set k  5 3600' on the gutter as %r, want flags 5 and a "
                         "lifetime of at most %d s" % (rep, TTL_MS // 1000))
                if c.call(b"mg %s T0000000000000003600\r\n" % sp_key) != b"HD\r\n":
                    fail("memcache: mg T0000000000000003600 of B's key failed while B was out")
                rep = d.call(b"mg %s t\r\n" % sp_key)
                ttl = [int(f[1:]) for f in rep.split() if f.startswith(b"t")]
                if not ttl or not 0 < ttl[0] <= TTL_MS // 1000:
                    fail("memcache: after mg T0000000000000003600 the gutter has %r, want a "
                         "lifetime of at most %d s" % (rep, TTL_MS // 1000))
                rep = d.call(b"mg %s t v\r\n" % lf_key)
                head = rep.split(b"\r\n")[0].split()
                ttl = [int(f[1:]) for f in head[2:] if f.startswith(b"t")]
                if head[0] != b"VA" or not ttl or not 0 < ttl[0] <= TTL_MS // 1000 or \
                        rep[rep.index(b"\r\n") + 2:-2] != lf_value:
                    fail("memcache: the bare-LF ms on the gutter as %r, want %r with a "
                         "lifetime of at most %d s" % (rep, lf_value, TTL_MS // 1000))
            written = zero + hour + add + touch
            with Mc(G.addr) as d:
                for k in written:
                    rep = d.call(b"mg %s t v\r\n" % k)
                    head = rep.split(b"\r\n")[0].split()
                    ttl = [int(f[1:]) for f in head[2:] if f.startswith(b"t")]
                    if head[0] != b"VA" or not ttl or not 0 < ttl[0] <= TTL_MS // 1000 or \
                            rep.split(b"\r\n")[1] != b"v2:" + k:
                        fail("memcache: B's key %r on the gutter as %r, want its v2 with a "
                             "lifetime of at most %d s" % (k, rep, TTL_MS // 1000))
                for k in dele:
                    if d.call(b"mg %s v\r\n" % k) != b"EN\r\n":
                        fail("memcache: a deleted key of B is on the gutter")
            got = c.get_many(written)
            if any(got.get(k) != b"v2:" + k for k in written):
                fail("memcache: reads of B's keys through the proxy are not the gutter's values")
            after_a, after_c = counts(A), counts(C)
            if after_a != before_a or after_c != before_c:
                fail("memcache: the healthy servers took requests for B's keys while it was "
                     "out: A %r -> %r, C %r -> %r" % (before_a, after_a, before_c, after_c))
    finally:
        os.kill(B.proc.pid, signal.SIGCONT)
    k_back = dele[0]
    with Mc(addr) as c:
        def lands():
            c.call(b"set %s 0 0 2\r\nv3\r\n" % k_back)
            with Mc(B.addr) as d:
                return d.get_many([k_back]).get(k_back) == b"v3"
        wait_until(lands, BOUND, "memcache: B readmitted after SIGCONT (a set of its key on it)",
                   poll=0.1)
        before_b, before_g = counts(B), counts(G)
        back = c.get_many(mine)
        after_b, after_g = counts(B), counts(G)
    if after_b["cmd_get"] - before_b["cmd_get"] < len(mine) or \
            after_g["cmd_get"] != before_g["cmd_get"]:
        fail("memcache: reads after B's return did not all go to B (B %r -> %r, G %r -> %r)" % (
            before_b, after_b, before_g, after_g))
    stale = [k for k in written + dele if k != k_back and k in back]
    if stale:
        fail("memcache: %d reads after B's return answered a value for a key written while it "
             "was out, e.g. %r" % (len(stale), stale[:3]))
    wait_until(lambda: not G.keys_present(written), TTL_MS / 1000.0 + 2 + BOUND,
               "memcache: the gutter empty once gutter_ttl passed", poll=0.2)
    p.stop()
    log("memcache: %d keys of B: reads and writes on the gutter (TTL <= %d s), A and C "
        "untouched, 0 stale reads after B's return" % (len(mine), TTL_MS // 1000))
    for s in servers:
        s.kill()


def reload_case(t):
    """A reload adds the gutter while B is out (B stays ejected across it), then removes it."""
    servers = start_redises(t.programs["redis-server"], t.tmp, 4)
    backends, G = servers[:3], servers[3]
    port, gport = free_ports(2)
    conf = config(t.tmp, "reload", backends, G, port, gport, True, with_gutter=False)
    p = Proxy(t.proxy, t.tmp, conf, [("127.0.0.1", port), ("127.0.0.1", gport)],
              label="reload").start()
    keys = [b"gr:%d" % i for i in range(200)]
    owner = chash_lookup(t.chash, conf, "main", keys)
    B = backends[1]
    mine = [k for k in keys if owner[k] == B.text]
    sigstop(B.proc.pid)
    try:
        with Resp(("127.0.0.1", port)) as c:
            wait_ejected(p, lambda: c.call("GET", mine[0]), "reload")

            def write_lands(k, server, step):
                if c.call("SET", k, step) != b"OK":
                    fail("reload: SET of B's key failed (%s)" % step)
                return server.call("GET", k) == step.encode()

            if not write_lands(mine[0], backends[0], "ring") and \
                    not write_lands(mine[0], backends[2], "ring"):
                fail("reload: without a gutter, B's key did not go the ring's way")
            for with_gutter, n, where, what in ((True, 1, G, "added"),
                                                (False, 2, None, "removed")):
                config(t.tmp, "reload", backends, G, port, gport, True, with_gutter=with_gutter)
                p.proc.send_signal(signal.SIGHUP)
                p.wait_stats(lambda st: st.get("reloads", 0) >= n, "reload %d" % n)
                k = mine[n]
                if where is not None and not write_lands(k, G, "gutter"):
                    fail("reload: after a reload that %s the gutter, B's key is not on it "
                         "(A %r, C %r, G %r; stats %r)" % (
                             what, backends[0].call("GET", k), backends[2].call("GET", k),
                             G.call("GET", k), p.stats_json()["main"]))
                if where is None and (write_lands(k, G, "after") or
                                      not (backends[0].call("GET", k) == b"after" or
                                           backends[2].call("GET", k) == b"after")):
                    fail("reload: after a reload that %s the gutter, B's key did not go the "
                         "ring's way" % what)
    finally:
        os.kill(B.proc.pid, signal.SIGCONT)
    p.stop()
    log("reload: a gutter added and removed by SIGHUP while B was out")
    for s in servers:
        s.kill()


def bad_configs(t):
    base = "  listen: 127.0.0.1:%d\n  servers:\n    - 127.0.0.1:7:1\n"
    cases = (
        ("a:\n" + base % 1 + "  gutter: nope\n", "bad.yml:5:11: pool \"a\": its gutter pool "
         "\"nope\" is not a pool of this file"),
        ("a:\n" + base % 1 + "  gutter: a\n", "bad.yml:5:11: pool \"a\": its gutter pool \"a\" "
         "is the pool itself"),
        ("a:\n" + base % 1 + "  gutter: b\nb:\n" + base % 2 + "  redis: true\n",
         "bad.yml:5:11: pool \"a\": its gutter pool \"b\" speaks another protocol"),
        ("a:\n" + base % 1 + "  gutter: b\nb:\n" + base % 2 + "  gutter: c\nc:\n" + base % 3,
         "bad.yml:5:11: pool \"a\": its gutter pool \"b\" has a gutter of its own"),
    )
    for text, want in cases:
        path = write_file(os.path.join(t.tmp, "bad.yml"), text)
        r = subprocess.run([t.proxy, "-t", "-c", path], capture_output=True, text=True,
                           timeout=30)
        if r.returncode == 0 or want not in r.stdout + r.stderr:
            fail("-t on a bad gutter: exit %d, %r, want %r" % (r.returncode, r.stdout + r.stderr,
                                                               want))
    log("bad gutters refused with file:line:column")


def body(t):
    bad_configs(t)
    redis_case(t)
    reload_case(t)
    mc_case(t)
    return "gutter: a lost server's keys on the gutter, capped, healthy servers untouched"


run_test(body, programs=("redis-server", "memcached"))
