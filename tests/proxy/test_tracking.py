#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_tracking: the near cache kept coherent by the servers themselves (issue 37, items 1-2;
docs/OPERATIONS.md, "Hot keys"): CLIENT TRACKING on the reads that fill it, invalidations on a
link per server, and nothing kept from a server while its invalidations may be lost. Real
redis-servers, two workers per proxy, hot_cache 60 s so that a TTL never hides a stale read.

  1. Two proxies A and B on the same 4 servers, a writer of versioned values of one hot key
     through A (every 5 ms), readers through A and B for 3 s: no read returns a version older
     than the last write acknowledged more than BOUND before the read began, and B's near cache
     served the key (hits). Printed: the reads older than a write acknowledged at all before
     they began, and by how much (the invalidation's delay itself), and an upper bound of the
     delay per write (its acknowledgement to the first read through B begun after it that saw
     it, the reader's own gaps included): p50, p99, max; and the costs (invalidations per
     write, tracked fills).
  2. Writers the proxy never sees, each at the key's server: a SET, a Lua script, SORT ... STORE,
     an expiry (PEXPIRE), FLUSHALL, an eviction (maxmemory with allkeys-lru): after each, reads
     through the proxy see the change (or the miss) within BOUND of the server.
  3. Faults, each with a write straight to the server right after it: the invalidation link
     killed (CLIENT KILL of the connections named chash-invalidate), the connections that
     carried the fills killed (the others but the test's own), the server SIGSTOPped past
     the pool's timeout and resumed, the server restarted empty, the server replaced by a
     reload (SIGHUP) with another holding another value: no read begun BOUND after the write
     (or the restart, or the reload counted in the stats) is answered from an entry older.
  4. /metrics and INFO count the links per state (chash_proxy_near_tracking_live, ...).
  5. A server whose ACL refuses CLIENT TRACKING: counted refused in /metrics and INFO, and its
     hot key still cached (bounded by hot_cache alone, as before).
  6. The server's tracking table holds the near cache's keys only (OPTIN): 500 cold keys and a
     hot one read through the proxy, INFO's tracking_total_keys at most 2.

Parts 1-3 fail on a proxy without tracking (ed9fa7a: it serves the old value for hot_cache,
60 s), 4 and 5 for want of its metrics; 6 is a property of tracking (a proxy that tracks
nothing passes it). --part N runs part N alone (repeatable), to see each fail there.

Usage: test_tracking.py CHASH_PROXY CHASH_CLI [--part N]...
Exit: 0 pass, 1 fail, 77 skip (redis-server missing, CI unset).
"""
import bisect
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, RespError, fail, free_ports, log, pool_yaml,  # noqa: E402
                          poll_until, run_test, sigstop, soft_fail, start_redises, wait_until,
                          write_file)
import promtext  # noqa: E402

BOUND = 0.100       # s: a read begun this long after a write sees it (the invalidation delay's
                    # bound on this box, shared with other jobs: measured p99 is far below)
HOT = 10            # hot_threshold
TTL = 60000         # hot_cache: far beyond any wait here
RUN = 3.0           # s of part 1


def near(mport, pool):
    fams = promtext.scrape(mport)
    out = {k: promtext.value(fams, "chash_proxy_near_cache_%s" % k, pool=pool)
           for k in ("hits_total", "stores_total")}
    # (none on a proxy without tracking: its parts still run, to show they fail)
    out["invalidations"] = promtext.value(fams, "chash_proxy_near_invalidations_total",
                                          pool=pool) if "chash_proxy_near_invalidations_total" \
        in fams else 0
    return out


def cmdstat(servers, name):
    """Calls of command name (INFO commandstats' cmdstat_<name>) summed over servers."""
    total = 0
    for r in servers:
        with Resp(r.addr) as c:
            info = c.call("INFO", "commandstats").decode()
        for line in info.splitlines():
            if line.startswith("cmdstat_%s:" % name):
                total += int(line.split("calls=", 1)[1].split(",", 1)[0])
    return total


def make_hot(c, key, want, mport, pool):
    """Reads key through c until the proxy has stored it and answers it from memory."""
    def cached():
        n0 = near(mport, pool)["hits_total"]
        got = c.pipeline([("GET", key)] * (HOT * 4))
        if any(g != want for g in got):
            fail("GET %s answered %r, want %r" % (key, got[0], want))
        return near(mport, pool)["hits_total"] - n0 >= HOT
    wait_until(cached, 10, "%s answered from the near cache" % key, poll=0.01)


def sees(c, key, want, since, what):
    """Reads key through c until it answers want (a value, or a predicate of the reply); fails
    when a read begun BOUND after since (time.monotonic of the change at the server) still
    answers something else."""
    stale = 0
    while True:
        t0 = time.monotonic()
        got = c.call("GET", key)
        if (want(got) if callable(want) else got == want):
            return t0 - since, stale
        if t0 > since + BOUND:
            # each case on its own: the next ones are still run and reported
            soft_fail("%s: a read begun %.0f ms after the change answered %r, want %r" % (
                what, (t0 - since) * 1000, got, want if not callable(want) else "a change"))
            return float("nan"), stale
        stale += 1


def part1(t, redises):
    a_port, b_port, ma, mb = free_ports(4)
    servers = [(r.text, 1, "s%d" % i) for i, r in enumerate(redises)]
    pa = Proxy(t.proxy, t.tmp, write_file(os.path.join(t.tmp, "a.yml"), pool_yaml(
        "p", a_port, servers, hot_cache=TTL, hot_threshold=HOT)),
        [("127.0.0.1", a_port), ("127.0.0.1", ma)], label="A",
        extra_args=["--threads", "2", "--metrics-port", str(ma)]).start()
    pb = Proxy(t.proxy, t.tmp, write_file(os.path.join(t.tmp, "b.yml"), pool_yaml(
        "p", b_port, servers, hot_cache=TTL, hot_threshold=HOT)),
        [("127.0.0.1", b_port), ("127.0.0.1", mb)], label="B",
        extra_args=["--threads", "2", "--metrics-port", str(mb)]).start()
    a, b = ("127.0.0.1", a_port), ("127.0.0.1", b_port)
    with Resp(a) as c:
        c.call("SET", "hot", "0")
    acked = [(0.0, 0)]         # (time acknowledged, version), in order
    reads = {"A": [], "B": []}  # (time begun, version)
    stop = threading.Event()
    errors = []

    def writer():
        try:
            with Resp(a) as c:
                v = 0
                while not stop.is_set():
                    v += 1
                    if c.call("SET", "hot", str(v)) != b"OK":
                        errors.append("SET %d" % v)
                        return
                    acked.append((time.monotonic(), v))
                    time.sleep(0.005)
        except Exception as e:  # noqa: BLE001
            errors.append("writer: %r" % e)

    def reader(name, addr):
        try:
            with Resp(addr) as c:
                while not stop.is_set():
                    t0 = time.monotonic()
                    got = c.call("GET", "hot")
                    reads[name].append((t0, int(got)))
        except Exception as e:  # noqa: BLE001
            errors.append("reader %s: %r" % (name, e))

    b0, a0 = near(mb, "p"), near(ma, "p")
    c0 = cmdstat(redises, "client|caching")
    threads = [threading.Thread(target=writer, daemon=True)] + [
        threading.Thread(target=reader, args=(n, addr), daemon=True)
        for n, addr in (("A", a), ("B", b), ("B", b))]
    for th in threads:
        th.start()
    time.sleep(RUN)  # the run's length, not a wait for a state
    stop.set()
    for th in threads:
        th.join(10)
    if errors:
        fail("1. %s" % errors[0])
    b1, a1 = near(mb, "p"), near(ma, "p")
    hits = b1["hits_total"] - b0["hits_total"]
    fills = b1["stores_total"] - b0["stores_total"] + a1["stores_total"] - a0["stores_total"]
    log("1. costs: %d writes, %d invalidations received (A and B), %d tracked fills "
        "(CLIENT CACHING at the servers) for %d entries kept" % (
            len(acked) - 1, b1["invalidations"] - b0["invalidations"] + a1["invalidations"] -
            a0["invalidations"], cmdstat(redises, "client|caching") - c0, fills))
    times = [x[0] for x in acked]
    vers = [x[1] for x in acked]
    delays = []
    for name in ("A", "B"):
        rs = sorted(reads[name])
        stale, oldest = 0, 0.0
        # with no allowance at all: reads older than a write acknowledged before they began,
        # and by how long (the staleness the invalidation's delay leaves)
        late = [t0 - acked[bisect.bisect_right(vers, v)][0] for t0, v in rs
                if acked[bisect.bisect_right(times, t0) - 1][1] > v]
        log("1. reads through %s older than a write acknowledged before they began: %d of %d%s"
            % (name, len(late), len(rs), ", by at most %.2f ms" % (max(late) * 1000)
               if late else ""))
        for t0, v in rs:
            # the newest version acknowledged BOUND before the read began
            i = bisect.bisect_right(times, t0 - BOUND) - 1
            if acked[i][1] > v:
                stale += 1
                # how long before the read the first newer version was acknowledged
                j = bisect.bisect_right(vers, v)
                oldest = max(oldest, t0 - acked[j][0])
        log("1. reads through %s: %d, %d older than a write acknowledged %.0f ms before "
            "they began (the oldest %.0f ms)" % (name, len(rs), stale, BOUND * 1000,
                                                 oldest * 1000))
        if stale:
            fail("1. %d of %d reads through %s answered a value older than a write "
                 "acknowledged %.0f ms before they began (one by %.0f ms)" % (
                     stale, len(rs), name, BOUND * 1000, oldest * 1000))
        if name == "B":
            # the delay per write: its acknowledgement to the first read through B begun after
            # it that saw it (or a later version)
            k = 0
            for at, v in acked[1:]:
                while k < len(rs) and (rs[k][0] < at or rs[k][1] < v):
                    k += 1
                if k == len(rs):
                    break
                delays.append(rs[k][0] - at)
    delays.sort()
    if not delays or hits < len(reads["B"]) // 4:
        fail("1. B answered %d of its %d reads from memory: the key was not cached" % (
            hits, len(reads["B"])))

    def pct(p):
        return delays[min(len(delays) - 1, int(p * len(delays)))] * 1000

    log("1. invalidation delay through B, bounded above by the first read through B begun after "
        "a write's ack that saw it (the reader's own gaps included), %d writes: p50 %.2f ms, "
        "p99 %.2f ms, max %.2f ms; B's reads from memory: %d" % (
            len(delays), pct(0.50), pct(0.99), delays[-1] * 1000, hits))
    pa.stop()
    pb.stop()
    return "delay p50 %.2f ms p99 %.2f ms max %.2f ms" % (pct(0.50), pct(0.99),
                                                            delays[-1] * 1000)


def setup_one(t, redises, evict, acl):
    """A proxy with pool one on redises[0], pool ev on evict (maxmemory set by part 2), pool acl
    on a server whose ACL refuses CLIENT TRACKING."""
    port, mport, eport, aport = free_ports(4)

    def conf_text(one):
        return "".join([
            pool_yaml("one", port, [(one.text, 1, "o0")], hot_cache=TTL, hot_threshold=HOT,
                      timeout=400),
            pool_yaml("ev", eport, [(evict.text, 1, "e0")], hot_cache=TTL, hot_threshold=HOT),
            pool_yaml("acl", aport, [(acl.text, 1, "a0")], hot_cache=300, hot_threshold=HOT),
        ])
    conf = write_file(os.path.join(t.tmp, "one.yml"), conf_text(redises[0]))
    px = Proxy(t.proxy, t.tmp, conf, [("127.0.0.1", port), ("127.0.0.1", eport),
                                      ("127.0.0.1", aport), ("127.0.0.1", mport)], label="one",
               extra_args=["--threads", "2", "--metrics-port", str(mport)]).start()
    px.conf_text = conf_text
    return px, port, mport, eport, aport


def part2(redises, evict, port, mport, eport):
    srv = redises[0]
    out = []
    with Resp(("127.0.0.1", port)) as c, Resp(srv.addr) as d:
        def case(what, prepare, change, want):
            d.call("SET", "k", "old")
            if prepare:
                prepare()
            make_hot(c, "k", b"old", mport, "one")
            change()
            delay, stale = sees(c, "k", want, time.monotonic(), "2. " + what)
            out.append("%s %.1f ms" % (what, delay * 1000))

        case("a direct SET", None, lambda: d.call("SET", "k", "new"), b"new")
        case("a Lua script", None, lambda: d.call(
            "EVAL", "redis.call('SET', KEYS[1], 'lua') return 1", 1, "k"), b"lua")
        case("SORT ... STORE", lambda: (d.call("DEL", "src"), d.call("RPUSH", "src", "3", "1")),
             lambda: d.call("SORT", "src", "STORE", "k"),
             lambda got: isinstance(got, RespError) and "WRONGTYPE" in str(got))

        def expire():
            d.call("PEXPIRE", "k", 50)
            # the server drops the key itself (its expiry cycle, 10 times a second)
            wait_until(lambda: d.call("EXISTS", "k") == 0, 5, "k expired at the server")
        case("an expiry", None, expire, None)
        case("FLUSHALL", None, lambda: d.call("FLUSHALL"), None)

    # an eviction: the server's maxmemory is reached, allkeys-lru evicts the cached key (which
    # the proxy's reads from memory never touch, so it is the least recently used)
    with Resp(("127.0.0.1", eport)) as c, Resp(evict.addr) as d:
        d.call("FLUSHALL")
        d.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        d.call("CONFIG", "SET", "maxmemory", "0")
        d.call("SET", "k", "old")
        make_hot(c, "k", b"old", mport, "ev")
        used = int([line for line in d.call("INFO", "memory").decode().splitlines()
                    if line.startswith("used_memory:")][0].split(":")[1])
        d.call("CONFIG", "SET", "maxmemory", used + 2 * 1024 * 1024)
        pad = "x" * 10000
        i = 0
        while d.call("EXISTS", "k") == 1:
            d.call("SET", "pad:%d" % i, pad)
            i += 1
            if i > 10000:
                fail("2. the cached key was never evicted")
        delay, _ = sees(c, "k", None, time.monotonic(), "2. an eviction")
        out.append("an eviction %.1f ms" % (delay * 1000))
        d.call("CONFIG", "SET", "maxmemory", "0")
    log("2. each seen through the proxy after the server: " + ", ".join(out))


def links(srv):
    """The ids of the server's client connections named chash-invalidate."""
    with Resp(srv.addr) as d:
        text = d.call("CLIENT", "LIST").decode()
    return [line.split("id=", 1)[1].split(" ", 1)[0] for line in text.splitlines()
            if "name=chash-invalidate" in line]


def have_links(srv, what):
    """Waits for an invalidation link per worker (2) at srv; a soft failure after 10 s, so that
    a proxy without them still runs the faults (and shows what they do to it)."""
    if not poll_until(lambda: len(links(srv)) >= 2, 10):
        soft_fail("3. %s at %s: %d connections named chash-invalidate" % (
            what, srv.text, len(links(srv))))


def part3(t, redises, px, port, mport):
    srv = redises[0]
    out = []
    with Resp(("127.0.0.1", port)) as c:
        # the link killed
        have_links(srv, "a link per worker")
        srv.call("SET", "k", "old")
        make_hot(c, "k", b"old", mport, "one")
        with Resp(srv.addr) as d:
            for i in links(srv):
                d.call("CLIENT", "KILL", "ID", i)
            d.call("SET", "k", "new")
        delay, _ = sees(c, "k", b"new", time.monotonic(), "3. the link killed")
        out.append("link killed: seen in %.1f ms" % (delay * 1000))
        have_links(srv, "the links back")

        # the connections that carried the fills killed (the server forgets what it tracked
        # for them), the links kept
        srv.call("SET", "k", "old")
        make_hot(c, "k", b"old", mport, "one")
        with Resp(srv.addr) as d:
            me = d.call("CLIENT", "ID")
            text = d.call("CLIENT", "LIST").decode()
            fills = [line.split("id=", 1)[1].split(" ", 1)[0] for line in text.splitlines()
                     if "name=chash-invalidate" not in line and "id=%d " % me not in line]
            for i in fills:
                d.call("CLIENT", "KILL", "ID", i)
            d.call("SET", "k", "new")
        delay, _ = sees(c, "k", b"new", time.monotonic(), "3. the fill connections killed")
        out.append("%d fill connections killed: seen in %.1f ms" % (len(fills), delay * 1000))

        # the server stopped past the pool's timeout (the link's keepalive times out), resumed
        srv.call("SET", "k", "old")
        make_hot(c, "k", b"old", mport, "one")
        sigstop(srv.proc.pid)
        time.sleep(1.0)  # the fault's length: past the pool's timeout (400 ms)
        os.kill(srv.proc.pid, signal.SIGCONT)
        srv.call("SET", "k", "new")
        delay, _ = sees(c, "k", b"new", time.monotonic(), "3. the server stopped and resumed")
        out.append("stopped 1 s: seen in %.1f ms" % (delay * 1000))

        # restarted empty on the same port
        have_links(srv, "the links back")
        srv.call("SET", "k", "old")
        make_hot(c, "k", b"old", mport, "one")
        srv.kill()
        srv.proc = None
        srv.start()
        delay, _ = sees(c, "k", None, time.monotonic(), "3. the server restarted empty")
        out.append("restarted: a miss in %.1f ms" % (delay * 1000))

        # replaced by a reload: pool one's server is now redises[1], which holds another value
        have_links(srv, "the links back")
        srv.call("SET", "k", "old")
        make_hot(c, "k", b"old", mport, "one")
        redises[1].call("SET", "k", "other")
        reloads = px.stats_json().get("reloads")
        write_file(px.config, px.conf_text(redises[1]))
        px.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: px.stats_json().get("reloads") == reloads + 1, 10, "the reload")
        delay, _ = sees(c, "k", b"other", time.monotonic(), "3. the server replaced by a reload")
        out.append("replaced by a reload: seen in %.1f ms" % (delay * 1000))
        write_file(px.config, px.conf_text(srv))
        px.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: px.stats_json().get("reloads") == reloads + 2, 10, "the reload back")
    log("3. " + ", ".join(out))


def part4(px, port, mport):
    def states():
        fams = promtext.scrape(mport)
        return {st: promtext.value(fams, "chash_proxy_near_tracking_%s" % st, pool="one")
                for st in ("live", "down", "refused")}
    # one server, two workers: both links back after part 3's restart
    got = poll_until(lambda: states() == {"live": 2, "down": 0, "refused": 0}, 10) or states()
    if got is not True:
        fail("4. chash_proxy_near_tracking_* of pool one: %r" % got)
    got = states()
    # INFO is the worker's own count (its last tick's, every 100 ms): one link live
    seen = []

    def info_live():
        with Resp(("127.0.0.1", port)) as c:
            info = c.call("INFO").decode()
        seen[:] = [line for line in info.splitlines() if "near_tracking" in line]
        return "pool_one_near_tracking_live:1" in seen
    if not poll_until(info_live, 10):
        fail("4. INFO has no pool_one_near_tracking_live:1: %s" % seen)
    log("4. links per state: %r" % got)


def part5(acl, aport, mport):
    def refused():
        return promtext.value(promtext.scrape(mport), "chash_proxy_near_tracking_refused",
                              pool="acl")
    wait_until(lambda: refused() == 2, 10, "pool acl's server counted as refusing tracking")
    with Resp(("127.0.0.1", aport)) as c:
        info = c.call("INFO").decode()
        if "pool_acl_near_tracking_refused:1\r\n" not in info:
            fail("5. INFO has no pool_acl_near_tracking_refused:1:\n%s" % info)
        acl.call("SET", "k", "v")
        make_hot(c, "k", b"v", mport, "acl")  # the TTL alone bounds it, as before
    log("5. a server refusing CLIENT TRACKING (ACL): counted refused, its hot key cached")


def part6(redises, port, mport):
    srv = redises[0]

    def tracked():
        info = srv.call("INFO", "stats").decode()
        return int(info.split("tracking_total_keys:", 1)[1].split("\r\n", 1)[0])
    srv.call("SET", "k", "v")
    with Resp(("127.0.0.1", port)) as c:
        c.pipeline([("GET", "cold:%d" % i) for i in range(500)])  # each read once: not hot
        make_hot(c, "k", b"v", mport, "one")
    n = tracked()
    log("6. 500 cold keys and a hot one read through the proxy: the server tracks %d key(s)" % n)
    if n > 2:
        fail("6. the server tracks %d keys: more than the near cache's" % n)


def body(t):
    redises = start_redises(t.programs["redis-server"], t.tmp, 4)
    evict, acl = start_redises(t.programs["redis-server"], t.tmp, 2)
    if acl.call("ACL", "SETUSER", "default", "-client|tracking") != b"OK":
        fail("ACL SETUSER")
    parts = set(t.parts or (1, 2, 3, 4, 5, 6))
    summary = part1(t, redises) if 1 in parts else None
    if parts & {2, 3, 4, 5, 6}:
        px, port, mport, eport, aport = setup_one(t, redises, evict, acl)
        if 2 in parts:
            part2(redises, evict, port, mport, eport)
        if 3 in parts:
            part3(t, redises, px, port, mport)
        if 4 in parts:
            part4(px, port, mport)
        if 5 in parts:
            part5(acl, aport, mport)
        if 6 in parts:
            part6(redises, port, mport)
        px.stop()
    return summary


def options(parser):
    parser.add_argument("--part", dest="parts", type=int, action="append",
                        help="run this part only (repeatable; default: all), e.g. to see each "
                        "fail on a proxy without tracking")


run_test(body, options=options)
