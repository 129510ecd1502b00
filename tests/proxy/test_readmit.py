#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_readmit: slow start on readmission (readmit_ramp, issue 40, item 3).

chash-proxy in front of 4 redis-servers, a pool that ejects a server after one failure, probes
it every 300 ms and has readmit_ramp: RAMP ms. 3,000 keys are SET to v1 through the proxy.
Backend B is killed (SIGKILL) and ejected; while it is out every key it owned is written again
through the proxy (v2: they land on the walk's next servers). B is restarted empty on its port
and readmitted (its log line). Then, in rounds until every key of B's has gone back to it:

- the probe keys (B's keys, never written again) are read through the proxy: each answers its
  v2 (not switched yet: still on the server that held it meanwhile) or nil (switched: B came
  back empty), never v1, and a key that answered nil never answers v2 again (a switch is
  final);
- the switched keys are those whose XXH3_64(key) mod RAMP is smallest (the ramp's rule, the
  proxy's readmission time unknown here but common to all: at every round, no key still
  unswitched is ahead of a switched one by more than SLACK_MS);
- a few of the written keys are SET through the proxy to a new value and read back at once:
  the latest value, every time (a write of a key not switched yet switches its bucket, the top
  16 bits of its XXH3, to B: the write and the reads after it go there; the probe keys of such
  buckets are left out of the order check above); and every later read of a written key
  answers its latest value or nil (B empty after the switch), never an older one.

The keys must switch gradually: some round sees between 10% and 90% of the probe keys switched;
and all of them switch within the ramp plus a bound. Before, readmit_ramp was refused (the
proxy does not start); with readmit_ramp 0 every key returns at once (no gradual round).

Then "memory": B comes back with its memory (SIGSTOP, SIGCONT) and keys of its, untouched
while it was out, are written during the ramp before their switch: 0 reads of its old value
after (memory_case).

Usage: test_readmit.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import random
import signal
import sys
import time

import xxhash

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Redis, Resp, fail, free_ports, log, pool_yaml,  # noqa: E402
                          run_test, sigstop, start_redises, wait_log, wait_until,
                          write_file)

NKEYS = 3000
RAMP = 6000      # ms
SLACK_MS = 300   # a round's reads take time while the ramp goes on
BOUND = 15.0


def xh(k):
    return xxhash.xxh3_64_intdigest(k) % RAMP


def body(t):
    backends = start_redises(t.programs["redis-server"], t.tmp, 4)
    port = free_ports(1)[0]
    conf = write_file(os.path.join(t.tmp, "readmit.yml"), pool_yaml(
        "ra", port, [(r.text, 1, None) for r in backends], hash="md5", distribution="ketama",
        auto_eject_hosts=True, server_failure_limit=1, server_retry_timeout=300, timeout=300,
        readmit_ramp=RAMP))
    p = Proxy(t.proxy, t.tmp, conf, [("127.0.0.1", port)], label="readmit").start()
    addr = ("127.0.0.1", port)
    keys = [b"ra:%d" % i for i in range(NKEYS)]
    with Resp(addr) as c:
        for i in range(0, NKEYS, 500):
            if any(g != b"OK" for g in c.pipeline([("SET", k, b"v1") for k in keys[i:i + 500]])):
                fail("the first SETs failed")
    B = backends[1]
    on_b = sorted(set(B.keys()))
    if len(on_b) < NKEYS // 8:
        fail("backend B holds %d keys only" % len(on_b))
    rng = random.Random(40)
    written = set(rng.sample(on_b, len(on_b) // 5))
    probe = [k for k in on_b if k not in written]
    latest = {}
    B.kill()
    with Resp(addr) as c:
        def ejected():
            c.call("GET", probe[0])
            return p.stats_json()["ra"]["server_ejects"] >= 1
        wait_until(ejected, BOUND, "B ejected after its kill")
        got = c.pipeline([("SET", k, b"v2") for k in on_b])
        if any(g != b"OK" for g in got):
            fail("writes while B was out failed: %r" % [g for g in got if g != b"OK"][:3])
    latest.update((k, b"v2") for k in on_b)
    log_at = os.path.getsize(p.log)
    B2 = Redis(B.exe, t.tmp, port=B.port).start()
    wait_log(p.log, r"server \S+ readmitted after a probe", "B readmitted", start=log_at,
             timeout=BOUND)
    switched_at = {}   # probe key -> the round that first read it as nil
    rounds, n, early = [], [0], set()
    wlist = sorted(written)
    with Resp(addr) as c:
        def one_round():
            n[0] += 1
            r = n[0]
            # Writes, each read back at once.
            for k in rng.sample(wlist, 10):
                early.add(xxhash.xxh3_64_intdigest(k) >> 48)  # its bucket may switch now
                v = b"v3:%d" % r
                if c.call("SET", k, v) != b"OK":
                    fail("round %d: SET %r failed" % (r, k))
                g = c.call("GET", k)
                if g != v:
                    fail("round %d: %r written %r through the proxy reads back %r" %
                         (r, k, v, g))
                latest[k] = v
            got = c.pipeline([("GET", k) for k in on_b])
            for k, g in zip(on_b, got):
                if g is not None and g != latest[k]:
                    fail("round %d: %r read %r, its latest value is %r (stale)" %
                         (r, k, g, latest[k]))
                if k in written:
                    continue
                if g is None:
                    switched_at.setdefault(k, r)
                elif k in switched_at:
                    fail("round %d: %r answered nil in round %d, now %r: it went back" %
                         (r, k, switched_at[k], g))
            done = [k for k in probe if k in switched_at]
            left = [k for k in probe if k not in switched_at]
            timed = [k for k in done if xxhash.xxh3_64_intdigest(k) >> 48 not in early]
            if timed and left and max(xh(k) for k in timed) > min(xh(k) for k in left) + SLACK_MS:
                fail("round %d: a key switched (XXH3 mod ramp %d) before one still out (%d)" %
                     (r, max(xh(k) for k in timed), min(xh(k) for k in left)))
            rounds.append(len(done))
            return not left
        wait_until(one_round, RAMP / 1000 + BOUND, "every probe key back on B", poll=0.05)
    # After the ramp every key of B's is on B: the written ones hold their latest value there
    # when it was written after the key's switch, else nothing (B came back empty).
    with Resp(B2.addr) as d:
        direct = dict(zip(on_b, d.pipeline([("GET", k) for k in on_b])))
    if any(direct[k] is not None for k in probe):
        fail("probe keys found on B though nobody wrote them after its return")
    p.stop()
    memory = memory_case(t, backends[:1] + [B2] + backends[2:])
    gradual = [x for x in rounds if len(probe) // 10 <= x <= len(probe) * 9 // 10]
    if not gradual:
        fail("no round saw between 10%% and 90%% of the %d probe keys switched: %r" %
             (len(probe), rounds))
    return ("B held %d keys; %d rounds over a %d ms ramp, probe keys switched per round %s; "
            "0 stale reads; %d writes read back; %s" % (
                len(on_b), len(rounds), RAMP,
                ",".join(str(x) for x in rounds[::max(1, len(rounds) // 12)]),
                10 * len(rounds), memory))


def memory_case(t, backends):
    """B comes back with its memory (SIGSTOP until ejected, then SIGCONT): a fifth of its keys
    are written (v2) while it is out (the rejoin deletes them on B), the rest keep their v1 on
    B. During the ramp, keys of B's not switched yet are written (v3) through the proxy: such a
    write goes to B at once (its bucket switches), so once the ramp is over every read answers
    the latest value or nil, never B's v1 of a key written during the ramp. Before (a write
    during the ramp went to the interim server), reads after the key's switch answered v1."""
    for r in backends:
        r.call("FLUSHALL")
    port = free_ports(1)[0]
    conf = write_file(os.path.join(t.tmp, "memory.yml"), pool_yaml(
        "ra", port, [(r.text, 1, None) for r in backends], hash="md5", distribution="ketama",
        auto_eject_hosts=True, server_failure_limit=1, server_retry_timeout=300, timeout=300,
        readmit_ramp=RAMP))
    p = Proxy(t.proxy, t.tmp, conf, [("127.0.0.1", port)], label="memory").start()
    addr = ("127.0.0.1", port)
    keys = [b"ra:%d" % i for i in range(NKEYS)]
    with Resp(addr) as c:
        for i in range(0, NKEYS, 500):
            if any(g != b"OK" for g in c.pipeline([("SET", k, b"v1") for k in keys[i:i + 500]])):
                fail("memory: the first SETs failed")
    B = backends[1]
    on_b = sorted(set(B.keys()))
    rng = random.Random(41)
    written = set(rng.sample(on_b, len(on_b) // 5))
    kept = [k for k in on_b if k not in written]
    latest = {k: b"v1" for k in on_b}
    log_at = os.path.getsize(p.log)
    sigstop(B.proc.pid)
    try:
        with Resp(addr) as c:
            def ejected():
                c.call("GET", kept[0])
                return p.stats_json()["ra"]["server_ejects"] >= 1
            wait_until(ejected, BOUND, "memory: B ejected while stopped")
            if any(g != b"OK" for g in c.pipeline([("SET", k, b"v2") for k in written])):
                fail("memory: writes while B was out failed")
            latest.update((k, b"v2") for k in written)
    finally:
        os.kill(B.proc.pid, signal.SIGCONT)
    wait_log(p.log, r"server \S+ readmitted after a probe", "memory: B readmitted",
             start=log_at, timeout=BOUND)
    t_back = time.monotonic()
    n, during = [0], [0]
    with Resp(addr) as c:
        def one_round():
            n[0] += 1
            for k in rng.sample(kept, 10):
                v = b"v3:%d" % n[0]
                if c.call("SET", k, v) != b"OK":
                    fail("memory: SET %r failed" % k)
                latest[k] = v
                during[0] += 1
            got = c.pipeline([("GET", k) for k in on_b])
            for k, g in zip(on_b, got):
                if g is not None and g != latest[k]:
                    fail("memory: round %d: %r read %r, its latest value is %r (stale)" %
                         (n[0], k, g, latest[k]))
            return time.monotonic() - t_back > RAMP / 1000 + 1
        wait_until(one_round, RAMP / 1000 + BOUND, "memory: the ramp over", poll=0.05)
    p.stop()
    return "back with its memory: %d writes during the ramp, %d rounds, 0 stale" % (
        during[0], n[0])


if __name__ == "__main__":
    run_test(body)
