#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_spread: spreading a hot key's reads over its replicas (hot_spread; docs/OPERATIONS.md,
"Hot keys"; issue 25) against real redis-servers, two workers.

Pool rep: 4 redis-servers, replicas 2, hot_spread, hot_threshold 50. Pool ctl: 4 others,
replicas 2 without hot_spread. Both without coalesce_reads, so that each GET is a server's
(coalescing would fold a pipeline's identical GETs into one). The key's two owners come from
`chash lookup --replicas 2`.

  1. 2,000 GETs of one key (pipelined by 100) through rep: every answer right, both owners
     served a fifth or more of them and no other server any (INFO commandstats, read on each
     server); through ctl, its first owner served every one.
  2. A write through the proxy reaches both owners: every read after it has the new value.
  3. The key deleted at its second owner behind the proxy's back: reads still answer the value
     (the miss read from the other owner), and the copy back restores it there.
  4. hot_spread without replicas >= 2: -t names file:line:column.

Usage: test_spread.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing, CI unset).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Resp, Proxy, fail, free_ports, log, pool_yaml, run_test,  # noqa: E402
                          start_redises, wait_until, write_file)
import promtext  # noqa: E402

READS = 2000
BATCH = 100


def gets(servers):
    """{server text: GET calls it processed} (INFO commandstats, each read directly)."""
    out = {}
    for r in servers:
        with Resp(r.addr) as c:
            info = c.call("INFO", "commandstats").decode()
        out[r.text] = sum(int(line.split("calls=", 1)[1].split(",", 1)[0])
                          for line in info.splitlines() if line.startswith("cmdstat_get:"))
    return out


def owners(chash, conf, pool, key):
    r = subprocess.run([chash, "lookup", "--config", conf, "--pool", pool, "--replicas", "2",
                        key], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail("chash lookup: %s" % r.stderr)
    fields = r.stdout.strip().split("\t")
    # KEY, then per owner host:port and its name
    return [f for f in fields[1:] if f.startswith("127.0.0.1:")]


def delta(after, before):
    return {k: after[k] - before[k] for k in after}


def body(t):
    tmp = t.tmp
    redises = start_redises(t.programs["redis-server"], tmp, 8)
    rep, ctl, mport = free_ports(3)
    conf = write_file(os.path.join(tmp, "spread.yml"), "".join([
        pool_yaml("rep", rep, [(r.text, 1, "r%d" % i) for i, r in enumerate(redises[:4])],
                  replicas=2, hot_spread=True, hot_threshold=50, timeout=1000,
                  coalesce_reads=False),
        pool_yaml("ctl", ctl, [(r.text, 1, "c%d" % i) for i, r in enumerate(redises[4:])],
                  replicas=2, hot_threshold=50, timeout=1000, coalesce_reads=False),
    ]))
    px = Proxy(t.proxy, tmp, conf, [("127.0.0.1", p) for p in (rep, ctl, mport)],
               extra_args=["--threads", "2", "--metrics-port", str(mport)]).start()
    by_text = {r.text: r for r in redises}

    # 1. spread over the two owners; the control pool reads its first owner only
    for pool, port, servers, spread in (("rep", rep, redises[:4], True),
                                        ("ctl", ctl, redises[4:], False)):
        own = owners(t.chash, conf, pool, "hot")
        if len(own) != 2:
            fail("1. chash lookup gave owners %r" % own)
        with Resp(("127.0.0.1", port)) as c:
            if c.call("SET", "hot", "v1") != b"OK":
                fail("1. SET")
            for o in own:
                with Resp(by_text[o].addr) as d:
                    if d.call("GET", "hot") != b"v1":
                        fail("1. %s: owner %s does not hold the write" % (pool, o))
            before = gets(servers)
            for _ in range(0, READS, BATCH):
                if c.pipeline([("GET", "hot")] * BATCH) != [b"v1"] * BATCH:
                    fail("1. %s: a GET answered wrong" % pool)
            d = delta(gets(servers), before)
        log("1. %s: %d GETs of a hot key: %s" % (
            pool, READS, ", ".join("%s %d" % (k, v) for k, v in sorted(d.items()))))
        if sum(d.values()) != READS or any(d[k] for k in d if k not in own):
            fail("1. %s: GETs at the servers %r, want %d at the owners %r" % (pool, d, READS, own))
        if spread and min(d[o] for o in own) * 5 < READS:
            fail("1. rep: not spread over both owners: %r" % d)
        if not spread and d[own[0]] != READS:
            fail("1. ctl: the first owner served %d of %d" % (d[own[0]], READS))
    fams = promtext.scrape(mport)
    if promtext.value(fams, "chash_proxy_replica_spread_reads_total", pool="rep") == 0 or \
            promtext.value(fams, "chash_proxy_replica_spread_reads_total", pool="ctl") != 0:
        fail("1. chash_proxy_replica_spread_reads_total not as sent")

    # 2. a write through the proxy: every read after it has it
    own = owners(t.chash, conf, "rep", "hot")
    with Resp(("127.0.0.1", rep)) as c:
        if c.call("SET", "hot", "v2") != b"OK":
            fail("2. SET")
        got = c.pipeline([("GET", "hot")] * 400)
        if got != [b"v2"] * 400:
            fail("2. reads after the write: %r" % sorted(set(got)))

        # 3. the copy at the second owner deleted behind the proxy's back
        with Resp(by_text[own[1]].addr) as d:
            d.call("DEL", "hot")
        got = c.pipeline([("GET", "hot")] * 400)
        if got != [b"v2"] * 400:
            fail("3. reads with one copy gone: %r" % sorted(set(got)))

        def restored():
            with Resp(by_text[own[1]].addr) as d:
                return d.call("GET", "hot") == b"v2"
        wait_until(restored, 10, "3. the copy back at the second owner")
    log("2-3. writes reach both owners; a lost copy is read from the other and copied back")

    # 4. hot_spread needs replicas
    bad = write_file(os.path.join(tmp, "bad.yml"), pool_yaml(
        "p", free_ports(1)[0], [(redises[0].text, 1, None)], hot_spread=True))
    r = subprocess.run([t.proxy, "-t", "-c", bad], capture_output=True, text=True, timeout=30)
    out = r.stdout + r.stderr
    if r.returncode == 0 or "bad.yml:4:" not in out or "needs \"replicas\"" not in out:
        fail("4. hot_spread without replicas: %s" % out.strip())
    px.stop()
    return "a hot key's reads over both replicas; writes to both; a lost copy repaired"


run_test(body)
