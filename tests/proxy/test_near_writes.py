#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_near_writes: every write kind through chash-proxy ends the near cache's entry of the
key it writes (issue 37, item 3; docs/OPERATIONS.md, "Hot keys").

Real redis-servers and memcacheds, two workers, hot_cache 60 s (an entry left behind would be served for a
minute). Each case makes a key K hot through the proxy (reads until the pool's near cache
counts hits on them), writes K in its own way through the proxy, and once the write is
acknowledged reads K 32 times through the proxy on the connection that wrote (and, Redis, 32 on
another): each read must answer what the server itself answers for K then (read straight from
it), never the value from before the write.

  Redis (hash_tag "{}", two servers; the keys of a case share a tag, so one server):
    SORT src STORE K, GEORADIUS ... STORE K, GEORADIUSBYMEMBER ... STOREDIST K (destinations
    the key spec does not name; RPOPLPUSH, LMOVE and SMOVE are ended the same way, but cannot
    write a key that holds a string, the only kind the near cache keeps), MULTI / SET K / EXEC
    and a SET after WATCH (both sent on the session's own connection, past the route tree),
    EVAL and EVALSHA of a script that writes K without declaring it (the pool's whole near
    cache ends, counted in chash_proxy_near_cache_script_flushes_total, once per script);
  a shadowed write: SET K through pool sa, which mirrors its writes to pool sb (shadow,
    writes: true), with K hot in sb's near cache: once the mirrored write is done, the reads
    through sb answer the new value;
  memcached (two servers): gat -1 K, gats -1 K, mg K T-1 v (reads that give the item a new
    lifetime, here expiring it at once) and touch K -1 (a write already); K read with get. And
    an item set with exptime 3 s, made hot: read through the proxy and straight from its server
    in turn until the server misses it (a condition, polled), every read through the proxy from
    then on must miss too, and the 32 after.

On the code before (ed9fa7a) every case but touch served the old value to all 32 reads, and the
item set with exptime 3 s was served by the proxy after its server had dropped it (33 reads).

Usage: test_near_writes.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server or memcached missing, CI unset).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Mc, Proxy, Resp, fail, free_ports, log, pool_yaml,  # noqa: E402
                          run_test, start_memcacheds, start_redises, wait_until, write_file)
import promtext  # noqa: E402

READS = 32          # reads after each write
HOT_BATCH = 20      # reads between two looks at the hit counter
WAIT = 30.0


def script_flushes(mport):
    """chash_proxy_near_cache_script_flushes_total of pool r; None when there is no such
    family (the code before counted none)."""
    fams = promtext.scrape(mport)
    if "chash_proxy_near_cache_script_flushes_total" not in fams:
        return None
    return promtext.value(fams, "chash_proxy_near_cache_script_flushes_total", pool="r")


def near_hits(mport, pool):
    return promtext.value(promtext.scrape(mport), "chash_proxy_near_cache_hits_total", pool=pool)


def make_hot(mport, pool, read, want, what):
    """Reads through the proxy until the pool's near cache answers some of them (each read must
    answer want meanwhile)."""
    def served():
        before = near_hits(mport, pool)
        for _ in range(HOT_BATCH):
            got = read()
            if got != want:
                fail("%s: a read before the write answered %r, want %r" % (what, got, want))
        return near_hits(mport, pool) > before
    wait_until(served, WAIT, "%s: the key served from the near cache" % what, poll=0)


def stale_reads(read, direct, old, what):
    """The reads after a write that answered the value from before it: each must answer what
    the server answers now."""
    want = direct()
    if want == old:
        fail("%s: the write did not change the key at its server (%r)" % (what, want))
    stale = 0
    for _ in range(READS):
        got = read()
        if got == old:
            stale += 1
        elif got != want:
            fail("%s: a read answered %r, the server %r" % (what, got, want))
    log("%s: %d of %d reads after the write stale" % (what, stale, READS))
    return stale


def redis_cases():
    """(name, setup, write) of each Redis write kind: setup makes K a string 'old' and whatever
    the write reads; write writes K through the proxy connection c."""
    sha = []

    def sort(c, k, t):
        c.call("RPUSH", t + "src", 3, 1, 2)
        return lambda: c.call("SORT", t + "src", "STORE", k)

    def geo(c, k, t):
        c.call("GEOADD", t + "geo", 13.361389, 38.115556, "palermo", 15.087269, 37.502669,
               "catania")
        return lambda: c.call("GEORADIUS", t + "geo", 15, 37, 200, "km", "STORE", k)

    def geo_member(c, k, t):
        c.call("GEOADD", t + "geo", 13.361389, 38.115556, "palermo", 15.087269, 37.502669,
               "catania")
        return lambda: c.call("GEORADIUSBYMEMBER", t + "geo", "palermo", 200, "km", "STOREDIST",
                              k)

    def multi(c, k, t):
        def write():
            got = [c.call("MULTI"), c.call("SET", k, "new"), c.call("EXEC")]
            if got != [b"OK", b"QUEUED", [b"OK"]]:
                fail("MULTI/SET/EXEC answered %r" % got)
        return write

    def watch(c, k, t):
        def write():
            got = [c.call("WATCH", t + "w"), c.call("SET", k, "new"), c.call("UNWATCH")]
            if got != [b"OK", b"OK", b"OK"]:
                fail("WATCH/SET/UNWATCH answered %r" % got)
        return write

    script = "redis.call('SET', ARGV[1], ARGV[2]) return 1"

    def eval_(c, k, t):
        return lambda: c.call("EVAL", script, 1, t + "decl", k, "new")

    def evalsha(c, k, t):
        if not sha:
            sha.append(c.call("SCRIPT", "LOAD", script))
        return lambda: c.call("EVALSHA", sha[0], 1, t + "decl", k, "new")

    return [("SORT src STORE K", sort), ("GEORADIUS ... STORE K", geo),
            ("GEORADIUSBYMEMBER ... STOREDIST K", geo_member), ("MULTI/SET K/EXEC", multi),
            ("WATCH, SET K", watch), ("EVAL writing K undeclared", eval_),
            ("EVALSHA writing K undeclared", evalsha)]


def run_redis(rp, redises, mport):
    failed = []
    with Resp(rp) as c, Resp(rp) as other:
        for i, (name, case) in enumerate(redis_cases()):
            t = "{c%d}" % i
            k = t + "K"
            if c.call("SET", k, "old") != b"OK":
                fail("%s: SET" % name)
            write = case(c, k, t)
            make_hot(mport, "r", lambda: c.call("GET", k), b"old", name)
            flushes = script_flushes(mport)
            write()
            owner = [r for r in redises if r.call("EXISTS", k) == 1]
            if len(owner) != 1:
                fail("%s: K on %d servers after the write" % (name, len(owner)))

            def direct():
                with Resp(owner[0].addr) as d:
                    return d.call("GET", k)
            # The connection that wrote and another (any worker) read K.
            stale = stale_reads(lambda: c.call("GET", k), direct, b"old", name)
            stale += stale_reads(lambda: other.call("GET", k), direct, b"old",
                                 name + " (another connection)")
            if stale:
                failed.append("%s: %d stale" % (name, stale))
            now = script_flushes(mport)
            if now is None:
                failed.append("%s: no chash_proxy_near_cache_script_flushes_total" % name)
            elif name.startswith("EVAL") and now != flushes + 1:
                failed.append("%s: script flushes %d -> %d, want one more" % (name, flushes, now))
            if not name.startswith("EVAL") and now != flushes:
                failed.append("%s: counted as a script flush" % name)
    return failed


def run_shadow(sa, sb, server, mport):
    """A write through pool sa mirrored to pool sb (shadow, writes: true) ends the entry of sb's
    near cache: once the mirrored write is done (sa's shadow requests in flight back to 0), the
    reads through sb answer what sb's server has."""
    name = "SET K through a pool shadowed to K's"
    with Resp(sa) as a, Resp(sb) as b:
        if b.call("SET", "sk", "old") != b"OK":
            fail("%s: SET" % name)
        make_hot(mport, "sb", lambda: b.call("GET", "sk"), b"old", name)
        fams = promtext.scrape(mport)
        sent = promtext.value(fams, "chash_proxy_shadow_sent_total", pool="sa")
        if a.call("SET", "sk", "new") != b"OK":
            fail("%s: SET through sa" % name)

        def mirrored():
            fams = promtext.scrape(mport)
            return promtext.value(fams, "chash_proxy_shadow_sent_total", pool="sa") > sent and \
                promtext.value(fams, "chash_proxy_shadow_in_flight", pool="sa") == 0
        wait_until(mirrored, WAIT, "%s: the write mirrored" % name, poll=0.01)
        stale = stale_reads(lambda: b.call("GET", "sk"), lambda: server.call("GET", "sk"), b"old",
                            name)
    return ["%s: %d stale" % (name, stale)] if stale else []


def mc_get(c, k):
    return c.call(b"get " + k + b"\r\n")


def run_memcached(mp, mcs, mport):
    failed = []
    old = lambda k: b"VALUE " + k + b" 0 3\r\nold\r\nEND\r\n"  # noqa: E731
    writes = [("gat -1 K", lambda k: b"gat -1 " + k + b"\r\n"),
              ("gats -1 K", lambda k: b"gats -1 " + k + b"\r\n"),
              ("mg K T-1 v", lambda k: b"mg " + k + b" T-1 v\r\n"),
              ("touch K -1", lambda k: b"touch " + k + b" -1\r\n")]
    with Mc(mp) as c:
        for i, (name, req) in enumerate(writes):
            k = b"mc%d" % i
            if c.call(b"set " + k + b" 0 0 3\r\nold\r\n") != b"STORED\r\n":
                fail("%s: set" % name)
            make_hot(mport, "m", lambda: mc_get(c, k), old(k), name)
            got = c.call(req(k))
            if got.startswith((b"ERROR", b"CLIENT_ERROR", b"SERVER_ERROR")):
                fail("%s answered %r" % (name, got))

            def direct():
                return b"".join(mc_direct(m, k) for m in mcs)
            stale = stale_reads(lambda: mc_get(c, k), lambda: direct() or b"END\r\n", old(k),
                                name)
            if stale:
                failed.append("%s: %d stale" % (name, stale))

        # An item that expires at its server: set with exptime 3 s, hot; once its server misses
        # it, the proxy must miss it too.
        k = b"short"
        if c.call(b"set " + k + b" 0 3 3\r\nold\r\n") != b"STORED\r\n":
            fail("exptime: set")
        make_hot(mport, "m", lambda: mc_get(c, k), old(k), "exptime 3 s")
        served_late = []

        def server_missed():
            # the server first: a read through the proxy begun after it missed must miss
            gone = b"".join(mc_direct(m, k) for m in mcs) == b""
            got = mc_get(c, k)
            if gone and got != b"END\r\n":
                served_late.append(got)
            return gone
        wait_until(server_missed, WAIT, "exptime 3 s: the item expired at its server", poll=0)
        late = sum(mc_get(c, k) != b"END\r\n" for _ in range(READS))
        log("exptime 3 s: after its server dropped it, %d of %d reads answered the item" % (
            late, READS))
        if late or served_late:
            failed.append("exptime 3 s: %d reads served after the server's miss" % (
                late + len(served_late)))
    return failed


def mc_direct(server, k):
    """The server's get reply for k less its END: b"" when it misses."""
    with Mc(server.addr) as d:
        got = d.call(b"get " + k + b"\r\n")
    return got[:-len(b"END\r\n")]


def body(t):
    tmp = t.tmp
    redises = start_redises(t.programs["redis-server"], tmp, 4)
    mcs = start_memcacheds(t.programs["memcached"], tmp, 2)
    rport, mcport, saport, sbport, mport = free_ports(5)
    conf = write_file(os.path.join(tmp, "near.yml"), "".join([
        pool_yaml("r", rport, [(r.text, 1, "r%d" % i) for i, r in enumerate(redises[:2])],
                  hash_tag='"{}"', hot_cache=60000, hot_threshold=10),
        pool_yaml("m", mcport, [(m.text, 1, "m%d" % i) for i, m in enumerate(mcs)],
                  redis=False, hot_cache=60000, hot_threshold=10),
        pool_yaml("sa", saport, [(redises[2].text, 1, "sa0")],
                  shadow="{pool: sb, fraction: 1, writes: true}"),
        pool_yaml("sb", sbport, [(redises[3].text, 1, "sb0")], hot_cache=60000,
                  hot_threshold=10),
    ]))
    px = Proxy(t.proxy, tmp, conf, [("127.0.0.1", p) for p in (rport, mcport, saport, sbport, mport)],
               extra_args=["--threads", "2", "--metrics-port", str(mport)]).start()
    failed = run_redis(("127.0.0.1", rport), redises[:2], mport)
    failed += run_shadow(("127.0.0.1", saport), ("127.0.0.1", sbport), redises[3], mport)
    failed += run_memcached(("127.0.0.1", mcport), mcs, mport)
    px.stop()
    if failed:
        fail("; ".join(failed))
    return "near cache: every write kind through the proxy ends its key's entry, 0 stale reads"


run_test(body, programs=("redis-server", "memcached"))
