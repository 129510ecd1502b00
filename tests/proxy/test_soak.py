#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_soak: steady SET/GET/MGET load while a backend is killed and restarted twice.

chash-proxy in front of 3 real redis-servers, one pool with auto_eject_hosts: true,
server_failure_limit: 2, server_retry_timeout: 200 ms, timeout: 500 ms. NTHREADS client
threads, each on its own connection, one request at a time, loop for SOAK_SECONDS over:
SET of one of its own keys, GET of it back, MGET of 4 of its keys on the live backends, and now
and then a SET / GET / MGET touching a key owned by backend A. Backend A is SIGKILLed and
restarted (empty, same port) twice during the run (at 15%/30% and 55%/70% of it).

Checks:
  - no request hung: every one answered within REQUEST_BOUND (the client socket timeout is
    longer, so a hang shows up as a slow answer or a timeout, both failures), no connection
    closed by the proxy;
  - requests touching only the live backends' keys (B, C) never failed: every SET +OK, every
    GET / MGET the value last written by the thread; at the end those keys hold those values on
    their owners (chash lookup), read directly;
  - requests touching A's keys are answered (a value, a nil or an error: A may be down);
  - RSS (VmRSS of the proxy, sampled every 0.5 s): the last third's max <= the first third's max
    * 1.5 + 20 MiB (ASan's quarantine would look like growth: the proxy runs with
    ASAN_OPTIONS quarantine_size_mb=16, appended to the caller's);
  - after the load stops: every server's in_queue and out_queue back to 0 and the pool's
    client_connections back to 0 within STATS_BOUND (no stuck connection);
  - SIGTERM: a clean exit, no sanitizer (LeakSanitizer) report.

Duration: SOAK_SECONDS (default 45). A longer soak, e.g. 30 minutes:
    SOAK_SECONDS=1800 python3 -B tests/proxy/test_soak.py build/test/proxy/chash-proxy \\
        build/test/tools/chash
(ctest's TIMEOUT of 180 s covers only the default; run a long one by hand like this.)

Usage: test_soak.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, RespError, chash_lookup, fail, free_ports, log,  # noqa: E402
                          poll_until, pool_yaml, run_test, soft_fail, start_redises, write_file)

NTHREADS = 3
REQUEST_BOUND = 6.0    # seconds: a hang detector (2 x timeout with room for ASan and a busy box)
CONN_TIMEOUT = 15.0    # a client socket's timeout
STATS_BOUND = 15.0     # seconds for queues and client counts to drain after the load
KEYS_PER_BACKEND = 20  # per thread
MIB = 1024             # KiB


class Loader(threading.Thread):
    def __init__(self, addr, n, live_keys, a_keys, stop):
        super().__init__(daemon=True, name="loader-%d" % n)
        self.addr, self.n, self.stop = addr, n, stop
        self.live_keys, self.a_keys = live_keys, a_keys
        self.rng = random.Random(n)
        self.values = {}           # live key -> value last written (+OK)
        self.errors = []           # failures (live key failed, hang, close)
        self.count = 0
        self.a_count = 0
        self.a_failed = 0
        self.max_latency = 0.0

    def call(self, c, *args):
        t0 = time.monotonic()
        r = c.call(*args)
        dt = time.monotonic() - t0
        self.max_latency = max(self.max_latency, dt)
        self.count += 1
        if dt > REQUEST_BOUND:
            self.errors.append("%s: %r answered after %.1fs (bound %gs)" % (
                self.name, args[:3], dt, REQUEST_BOUND))
        return r

    def live_fail(self, what):
        if len(self.errors) < 50:
            self.errors.append("%s: %s" % (self.name, what))

    def run(self):
        try:
            c = Resp(self.addr, timeout=CONN_TIMEOUT)
        except OSError as e:
            self.errors.append("%s: connect: %s" % (self.name, e))
            return
        i = 0
        try:
            while not self.stop.is_set():
                i += 1
                k = self.live_keys[self.rng.randrange(len(self.live_keys))]
                v = b"%d:%d" % (self.n, i)
                r = self.call(c, "SET", k, v)
                if r != b"OK":
                    self.live_fail("SET %r (live) answered %r" % (k, r))
                else:
                    self.values[k] = v
                r = self.call(c, "GET", k)
                if r != self.values.get(k):
                    self.live_fail("GET %r (live) answered %r, expected %r" % (
                        k, r, self.values.get(k)))
                ks = self.rng.sample(self.live_keys, 4)
                r = self.call(c, "MGET", *ks)
                exp = [self.values.get(x) for x in ks]
                if r != exp:
                    self.live_fail("MGET %r (live) answered %r, expected %r" % (ks, r, exp))
                if i % 4 == 0:        # A's keys: any answer will do, but an answer
                    ka = self.a_keys[self.rng.randrange(len(self.a_keys))]
                    kind = (i // 4) % 3
                    if kind == 0:
                        r = self.call(c, "SET", ka, v)
                    elif kind == 1:
                        r = self.call(c, "GET", ka)
                    else:
                        r = self.call(c, "MGET", ka, ks[0], ks[1])
                    self.a_count += 1
                    if isinstance(r, RespError) or (isinstance(r, list) and any(
                            isinstance(x, RespError) for x in r)):
                        self.a_failed += 1
        except (OSError, RuntimeError) as e:
            self.errors.append("%s: request %d: %s: %s (hang or close)" % (
                self.name, i, type(e).__name__, e))
        finally:
            c.close()


def queues(proxy, pool, servers):
    st = proxy.stats_json()[pool]
    return {s: (st[s]["in_queue"], st[s]["out_queue"]) for s in servers}, \
        st["client_connections"]


def body(t):
    proxy_exe, chash, redis_exe, tmp = t.proxy, t.chash, t.programs["redis-server"], t.tmp
    os.environ["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                        "quarantine_size_mb=16"]))
    seconds = float(os.environ.get("SOAK_SECONDS", "45"))
    backends = start_redises(redis_exe, tmp, 3)
    names = ("one", "two", "three")
    port = free_ports(1)[0]
    config = write_file(os.path.join(tmp, "proxy.yml"), pool_yaml(
        "soak", port, [(b.text, 1, n) for b, n in zip(backends, names)],
        hash="fnv1a_64", distribution="ketama", timeout=500, auto_eject_hosts=True,
        server_failure_limit=2, server_retry_timeout=200, server_connections=1))
    proxy = Proxy(proxy_exe, tmp, config, [("127.0.0.1", port)]).start()
    addr = ("127.0.0.1", port)
    A = backends[0]
    by_addr = {b.text: b for b in backends}

    cand = [b"soak:%d:%d" % (t, j) for t in range(NTHREADS) for j in range(2000)]
    owner = chash_lookup(chash, config, "soak", cand)
    live, akeys = [], []
    for t in range(NTHREADS):
        mine = [k for k in cand if k.startswith(b"soak:%d:" % t)]
        lk = []
        for b in backends[1:]:
            lk += [k for k in mine if owner[k] == b.text][:KEYS_PER_BACKEND]
        ak = [k for k in mine if owner[k] == A.text][:KEYS_PER_BACKEND]
        if len(lk) < 2 * KEYS_PER_BACKEND or len(ak) < KEYS_PER_BACKEND:
            fail("keys per backend too uneven to test")
        live.append(lk)
        akeys.append(ak)

    stop = threading.Event()
    loaders = [Loader(addr, t, live[t], akeys[t], stop) for t in range(NTHREADS)]
    rss = []                    # (t, KiB)
    t_start = time.monotonic()

    def sampler():
        while not stop.is_set():
            v = proxy.rss_kib()
            if v is not None:
                rss.append((time.monotonic() - t_start, v))
            stop.wait(0.5)

    samp = threading.Thread(target=sampler, daemon=True)
    for ld in loaders:
        ld.start()
    samp.start()

    def soak_until(at):
        """Until `at` s into the soak (the schedule's next point: a duration the test sets),
        watching: fails if the proxy exits; true if a loader saw an error (the soak ends)."""
        def watched():
            if not proxy.alive():
                fail("chash-proxy exited during the soak")
            return any(ld.errors for ld in loaders) or time.monotonic() - t_start >= at
        poll_until(watched, t_start + at - time.monotonic() + 1, poll=0.1)
        return any(ld.errors for ld in loaders)

    schedule = [(0.15, "kill"), (0.30, "restart"), (0.55, "kill"), (0.70, "restart")]
    try:
        for frac, what in schedule:
            if soak_until(frac * seconds):
                break
            if what == "kill":
                A.kill()
            else:
                A.start()
            log("%.1fs: backend A (%s) %sed" % (time.monotonic() - t_start, A.text,
                                               "kill" if what == "kill" else "restart"))
        else:
            soak_until(seconds)
    finally:
        stop.set()
        for ld in loaders:
            ld.join(CONN_TIMEOUT + 5)
        samp.join(5)
    elapsed = time.monotonic() - t_start

    for ld in loaders:
        if ld.is_alive():
            soft_fail("%s still blocked %gs after the load stopped" % (ld.name, CONN_TIMEOUT + 5))
        for e in ld.errors[:10]:
            soft_fail(e)
    total = sum(ld.count for ld in loaders)
    a_total = sum(ld.a_count for ld in loaders)
    a_failed = sum(ld.a_failed for ld in loaders)
    max_lat = max(ld.max_latency for ld in loaders)
    log("%.1fs, %d requests (%d touching A, %d of them errors), max latency %.2fs" % (
        elapsed, total, a_total, a_failed, max_lat))
    if total < 100:
        soft_fail("only %d requests in %.0fs" % (total, elapsed))

    # Live keys hold what was last written, on their owners.
    for ld in loaders:
        for k, v in ld.values.items():
            got = by_addr[owner[k]].call("GET", k)
            if got != v:
                soft_fail("%r on its owner %s is %r, the last SET answered +OK wrote %r" % (
                    k, owner[k], got, v))
                break

    # RSS after warm-up.
    if len(rss) >= 6:
        third = elapsed / 3
        first = max(v for t, v in rss if t < third)
        last = max((v for t, v in rss if t >= 2 * third), default=rss[-1][1])
        log("RSS: first third max %d KiB, last third max %d KiB (%d samples)" % (
            first, last, len(rss)))
        if last > first * 1.5 + 20 * MIB:
            soft_fail("RSS grew: last third's max %d KiB > first third's max %d KiB * 1.5 + "
                      "20 MiB" % (last, first))
    else:
        soft_fail("only %d RSS samples" % len(rss))

    # No stuck connection: queues drain, clients gone.
    def drained():
        q, clients = queues(proxy, "soak", names)
        return clients == 0 and all(v == (0, 0) for v in q.values())
    if not poll_until(drained, STATS_BOUND, poll=0.1):
        q, clients = queues(proxy, "soak", names)
        soft_fail("%gs after the load stopped: client_connections %d, (in_queue, "
                  "out_queue) per server %s" % (STATS_BOUND, clients, q))
    # And the proxy still serves every backend (A restarted, readmitted).
    with Resp(addr) as c:
        for ks in live[0][:3] + akeys[0][:3]:
            if not poll_until(lambda: c.call("SET", ks, b"final") == b"OK", 10, poll=0.2):
                soft_fail("SET %r still failing 10 s after the soak" % ks)
    proxy.stop()
    return "%.0fs, %d requests, max latency %.2fs" % (elapsed, total, max_lat)


if __name__ == "__main__":
    run_test(body)
