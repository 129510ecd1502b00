#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_nearcache: chash-proxy's near cache of hot keys (hot_cache; docs/OPERATIONS.md, "Hot
keys"; issue 25) against real redis-servers and memcacheds, two workers.

  1. Redis: a key read 2,000 times (pipelined by 100) is answered from memory once hot: each
     read either reached a server (INFO commandstats on the servers themselves), was a near
     cache hit (chash_proxy_near_cache_hits_total) or joined an identical read in flight
     (chash_proxy_coalesced_reads_total), and the servers saw under a fifth of them.
  2. Every write through the proxy is seen by the next read, from any connection (any worker):
     50 rounds of SET through one connection and GET through another; DEL, then a miss; a
     write of several keys (MSET) and a script's keys too.
  3. MGET: its hot keys answered from memory, the others from their servers, in order.
  4. memcached: the same for get, set, delete and a multi-key get.
  5. The TTL bound, with near_tracking off (proxy_tracking tests it on): a write straight to
     the server (not through the proxy) is missed, but an old value is answered only to reads
     that begin before that write plus hot_cache (300 ms).
  6. The memory bound: 200 hot keys of 1 KiB with hot_cache_max_bytes 65536: the bytes held
     (chash_proxy_near_cache_bytes) never above it, and entries were evicted to stay under.
  7. Bad values of hot_cache, hot_cache_max_bytes and hot_threshold: -t names file:line:column.

Usage: test_nearcache.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server or memcached missing, CI unset).
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Mc, Proxy, Resp, fail, free_ports, log, pool_yaml,  # noqa: E402
                          run_test, start_memcacheds, start_redises, wait_until,
                          write_file)
import promtext  # noqa: E402

THRESHOLD = 100
READS = 2000
BATCH = 100


def coalesced(mport, pool):
    return promtext.value(promtext.scrape(mport), "chash_proxy_coalesced_reads_total", pool=pool)


def near(mport, pool):
    fams = promtext.scrape(mport)
    return {k: promtext.value(fams, "chash_proxy_near_cache_%s" % k, pool=pool)
            for k in ("hits_total", "misses_total", "stores_total", "bytes")}


def redis_gets(servers):
    """GET calls the servers processed (INFO commandstats, each read directly)."""
    total = 0
    for r in servers:
        with Resp(r.addr) as c:
            info = c.call("INFO", "commandstats").decode()
        for line in info.splitlines():
            if line.startswith("cmdstat_get:"):
                total += int(line.split("calls=", 1)[1].split(",", 1)[0])
    return total


def mc_gets(servers):
    total = 0
    for m in servers:
        with Mc(m.addr) as c:
            c.send(b"stats\r\n")
            while True:
                line = c.line()
                if line.startswith(b"END"):
                    break
                if line.startswith(b"STAT cmd_get "):
                    total += int(line.split()[2])
    return total


def body(t):
    tmp = t.tmp
    redises = start_redises(t.programs["redis-server"], tmp, 5)
    mcs = start_memcacheds(t.programs["memcached"], tmp, 2)
    alpha, ttlp, small, mca, mport = free_ports(5)
    conf = write_file(os.path.join(tmp, "near.yml"), "".join([
        pool_yaml("alpha", alpha, [(r.text, 1, "a%d" % i) for i, r in enumerate(redises[:3])],
                  hot_cache=60000, hot_threshold=THRESHOLD),
        pool_yaml("ttl", ttlp, [(redises[3].text, 1, "t0")], hot_cache=300, hot_threshold=10,
                  near_tracking=False),
        pool_yaml("small", small, [(redises[4].text, 1, "s0")], hot_cache=60000,
                  hot_cache_max_bytes=65536, hot_threshold=2),
        pool_yaml("mca", mca, [(m.text, 1, "m%d" % i) for i, m in enumerate(mcs)], redis=False,
                  hot_cache=60000, hot_threshold=THRESHOLD),
    ]))
    px = Proxy(t.proxy, tmp, conf, [("127.0.0.1", p) for p in (alpha, ttlp, small, mca, mport)],
               extra_args=["--threads", "2", "--metrics-port", str(mport)]).start()
    a = ("127.0.0.1", alpha)
    # Redis pools keep nothing from a server before its invalidation link is live (near_tracking,
    # on by default; proxy_tracking): one per server and worker.
    wait_until(lambda: [promtext.value(promtext.scrape(mport), "chash_proxy_near_tracking_live",
                                       pool=p) for p in ("alpha", "small")] == [6, 2],
               10, "the invalidation links live")

    # 1. one hot key
    with Resp(a) as c:
        if c.call("SET", "hot", "v1") != b"OK":
            fail("1. SET")
        b0, n0, c0 = redis_gets(redises[:3]), near(mport, "alpha"), coalesced(mport, "alpha")
        for i in range(0, READS, BATCH):
            got = c.pipeline([("GET", "hot")] * BATCH)
            if got != [b"v1"] * BATCH:
                fail("1. GETs answered %r" % got[:3])
        reached = redis_gets(redises[:3]) - b0
        n1 = near(mport, "alpha")
        joined = coalesced(mport, "alpha") - c0
    hits = n1["hits_total"] - n0["hits_total"]
    log("1. %d reads of a hot key: %d reached its server, %d near cache hits, %d stores" % (
        READS, reached, hits, n1["stores_total"] - n0["stores_total"]))
    # A read not answered from memory either reached a server or joined an identical one in
    # flight there (coalesce_reads, on by default).
    if hits + reached + joined != READS or reached * 5 >= READS or hits == 0:
        fail("1. %d reached the servers, %d were hits and %d joined another, of %d" % (
            reached, hits, joined, READS))

    # 2. writes through the proxy are seen at once, from any connection
    conns = [Resp(a) for _ in range(4)]
    try:
        for i in range(50):
            w, r = conns[i % 4], conns[(i + 1 + i // 4) % 4]
            if w.call("SET", "hot", "w%d" % i) != b"OK":
                fail("2. SET")
            got = r.call("GET", "hot")
            if got != b"w%d" % i:
                fail("2. round %d: GET after SET answered %r" % (i, got))
        if conns[0].call("DEL", "hot") != 1 or conns[1].call("GET", "hot") is not None:
            fail("2. a GET after DEL was not a miss")
        # multi-key writes: MSET and a script's declared keys
        conns[0].call("SET", "hot", "m0")
        for _ in range(THRESHOLD + BATCH):
            conns[1].call("GET", "hot")
        conns[2].call("MSET", "other", "x", "hot", "m1")
        if conns[3].call("GET", "hot") != b"m1":
            fail("2. MSET not seen")
        for _ in range(BATCH):
            conns[1].call("GET", "hot")
        conns[2].call("EVAL", "redis.call('SET', KEYS[1], ARGV[1]) return 1", 1, "hot", "m2")
        if conns[3].call("GET", "hot") != b"m2" or conns[1].call("GET", "hot") != b"m2":
            fail("2. a script's write not seen")
    finally:
        for c in conns:
            c.close()

    # 3. MGET: hot keys from memory, in order
    with Resp(a) as c:
        for i in range(BATCH):  # MGET's parts are kept apart from GET's replies
            got = c.call("MGET", "hot", "other", "nokey", "hot")
            if got != [b"m2", b"x", None, b"m2"]:
                fail("3. MGET answered %r" % got)
        before = near(mport, "alpha")["hits_total"]
        if c.call("MGET", "hot", "other", "nokey", "hot") != [b"m2", b"x", None, b"m2"]:
            fail("3. MGET")
        hits = near(mport, "alpha")["hits_total"] - before
    log("3. MGET of a hot key twice and two others: %d of its keys from the near cache" % hits)
    if hits != 3:  # hot twice, other (hot too by now) once; nokey, a miss, is never kept
        fail("3. %d of the MGET's keys from the near cache, want 3" % hits)

    # 4. memcached
    with Mc(("127.0.0.1", mca)) as c:
        if c.call(b"set hot 5 0 2\r\nv1\r\n") != b"STORED\r\n":
            fail("4. set")
        b0, n0 = mc_gets(mcs), near(mport, "mca")
        for _ in range(READS):
            if c.call(b"get hot\r\n") != b"VALUE hot 5 2\r\nv1\r\nEND\r\n":
                fail("4. get")
        reached, hits = mc_gets(mcs) - b0, near(mport, "mca")["hits_total"] - n0["hits_total"]
        log("4. memcached: %d gets, %d reached the servers, %d hits" % (READS, reached, hits))
        if hits + reached != READS or reached * 5 >= READS:
            fail("4. %d reached, %d hits" % (reached, hits))
        if c.call(b"set hot 6 0 2\r\nv2\r\n") != b"STORED\r\n" or \
                c.call(b"get hot\r\n") != b"VALUE hot 6 2\r\nv2\r\nEND\r\n":
            fail("4. a set through the proxy not seen")
        c.call(b"set other 0 0 1\r\nx\r\n")
        if c.get_many([b"hot", b"other", b"hot"]) != {b"hot": b"v2", b"other": b"x"}:
            fail("4. multi-key get")
        if c.call(b"delete hot\r\n") != b"DELETED\r\n" or c.call(b"get hot\r\n") != b"END\r\n":
            fail("4. a get after delete was not a miss")

    # 5. the TTL bound against a writer that is not the proxy
    tp = ("127.0.0.1", ttlp)
    with Resp(tp) as c:
        c.call("SET", "k", "old")
        # kept from the first read begun once the key is hot (its server tracks that read)
        wait_until(lambda: c.pipeline([("GET", "k")] * 50) and
                   near(mport, "ttl")["stores_total"] > 0, 5, "5. the key cached")
        with Resp(redises[3].addr) as d:
            d.call("SET", "k", "new")
        t_write = time.monotonic()
        stale, last = 0, 0.0
        while True:
            t0 = time.monotonic()
            got = c.call("GET", "k")
            if got == b"new":
                break
            if got != b"old":
                fail("5. GET answered %r" % got)
            if t0 >= t_write + 0.300:
                fail("5. the old value answered to a read begun %.0f ms after the write "
                     "(hot_cache 300 ms)" % ((t0 - t_write) * 1000))
            stale, last = stale + 1, t0 - t_write
            if t0 - t_write > 5:
                fail("5. the new value never came")
    log("5. ttl 300 ms: %d reads answered the old value, the last %.0f ms after the write" % (
        stale, last * 1000))

    # 6. the memory bound
    sp = ("127.0.0.1", small)
    val = b"v" * 1024
    with Resp(sp) as c:
        for k in range(200):
            c.call("SET", "big:%d" % k, val)
            if c.pipeline([("GET", "big:%d" % k)] * 5) != [val] * 5:
                fail("6. GET")
            if k % 20 == 19:
                held = near(mport, "small")["bytes"]
                if held > 65536:
                    fail("6. %d bytes held over a bound of 65536" % held)
    n = near(mport, "small")
    log("6. 200 hot keys of 1 KiB, bound 65536: %d bytes held, %d stores" % (
        n["bytes"], n["stores_total"]))
    if not 0 < n["bytes"] <= 65536 or n["stores_total"] <= 65536 // 1100:
        fail("6. %s" % n)

    # 7. bad values
    for key, value, want in (("hot_cache", "-1", "expected an integer >= 0"),
                             ("hot_cache", "3600001", "(an hour, in ms)"),
                             ("hot_threshold", "0", "expected an integer >= 1"),
                             ("hot_cache_max_bytes", "x", "expected an integer")):
        bad = write_file(os.path.join(tmp, "bad.yml"), pool_yaml(
            "p", free_ports(1)[0], [(redises[0].text, 1, None)], **{key: value}))
        r = subprocess.run([t.proxy, "-t", "-c", bad], capture_output=True, text=True,
                           timeout=30)
        out = r.stdout + r.stderr
        if r.returncode == 0 or "bad.yml:4:" not in out or want not in out:
            fail("7. %s: %s: %s" % (key, value, out.strip()))
    px.stop()
    return "near cache: hits from memory, writes seen at once, the TTL and memory bounds"


run_test(body, programs=("redis-server", "memcached"))
