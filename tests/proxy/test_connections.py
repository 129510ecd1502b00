#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_connections: 5,000 concurrent client connections held, served, closed without leaks.

chash-proxy (default backlog 512) in front of 2 real redis-servers. RLIMIT_NOFILE is raised
(soft up to the hard limit) before the proxy starts, so the proxy inherits it; with a hard limit
too low for NCONN client sockets on each side, the test skips (77), or fails when CI is set.

Two identical cycles, each:
  1. NCONN non-blocking connections opened in waves of WAVE; each connection sends PING and must
     get +PONG before the next wave starts (so every one was accepted, and the listen backlog is
     never overrun: a dropped SYN would cost a 1 s retransmit).
  2. With all NCONN held open at once: stats curr_connections and the pool's
     client_connections equal baseline + NCONN; then every connection sends one GET at once (half
     of a preloaded key, half of a missing key) and every one is answered correctly.
  3. All closed: curr_connections / client_connections return to the baseline within a bound.
RSS (VmRSS) is sampled before cycle 1 and after each cycle's close: after cycle 1 it is within
FIRST_MARGIN of the start (the allocator, and ASan's quarantine, keep freed memory), and after
cycle 2 within SECOND_MARGIN of after cycle 1 (the same work again: no growth per connection).
ASan's quarantine (256 MiB by default) would hold freed memory and look like growth: the proxy
runs with ASAN_OPTIONS quarantine_size_mb=16 (appended to the caller's ASAN_OPTIONS).
Finally SIGTERM: a clean exit, no sanitizer (LeakSanitizer) report.

Every wait is bounded (a hang detector, not a latency target); the test runs in a few seconds.

Usage: test_connections.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing or fd hard limit too low, and CI unset).
"""
import errno
import os
import resource
import selectors
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, encode, fail, free_ports, log, pool_yaml,  # noqa: E402
                          run_test, skip, start_redises, wait_until, write_file)

NCONN = 5000
WAVE = 250             # connections per wave (below the proxy's default backlog of 512)
FD_SLACK = 200         # fds beyond NCONN: backends, stats, logs, Python itself
WAVE_BOUND = 30.0      # seconds for one wave's connects and PONGs
ROUND_BOUND = 60.0     # seconds for NCONN GETs answered
STATS_BOUND = 15.0     # seconds for the counters to return to the baseline after close
FIRST_MARGIN = 512 * 1024    # KiB: RSS after cycle 1 vs before (allocator + ASan quarantine)
SECOND_MARGIN = 64 * 1024    # KiB: RSS after cycle 2 vs after cycle 1 (growth = a leak)


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = NCONN + FD_SLACK
    if hard != resource.RLIM_INFINITY and hard < need:
        skip("RLIMIT_NOFILE hard limit %d < %d needed" % (hard, need))
    want = max(soft, need * 2) if soft != resource.RLIM_INFINITY else soft
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want


class Conn:
    __slots__ = ("sock", "buf", "want", "i")

    def __init__(self, sock, i):
        self.sock, self.buf, self.want, self.i = sock, b"", None, i


def run_round(sel, conns, requests, expect, bound, what):
    """Sends requests[i] on conns[i] (all at once), waits for exactly expect[i] on each."""
    pending = {}
    for c, req, exp in zip(conns, requests, expect):
        c.buf, c.want = b"", exp
        try:
            n = c.sock.send(req)
        except OSError as e:
            fail("%s: connection %d: send: %s" % (what, c.i, e))
        if n != len(req):
            fail("%s: connection %d: short send (%d of %d)" % (what, c.i, n, len(req)))
        sel.modify(c.sock, selectors.EVENT_READ, c)
        pending[c.sock.fileno()] = c
    deadline = time.monotonic() + bound
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            c = next(iter(pending.values()))
            fail("%s: %d of %d connections unanswered after %gs (e.g. connection %d, got %r)"
                 % (what, len(pending), len(conns), bound, c.i, c.buf[:100]))
        for key, _ev in sel.select(min(left, 1.0)):
            c = key.data
            if c.sock.fileno() not in pending:
                try:
                    extra = c.sock.recv(4096)
                except BlockingIOError:
                    continue
                fail("%s: connection %d: unexpected data or close: %r" % (what, c.i, extra[:100]))
            try:
                chunk = c.sock.recv(4096)
            except BlockingIOError:
                continue
            except OSError as e:
                fail("%s: connection %d: recv: %s" % (what, c.i, e))
            if not chunk:
                fail("%s: connection %d closed by the proxy (had %r)" % (what, c.i, c.buf[:100]))
            c.buf += chunk
            if len(c.buf) >= len(c.want):
                if c.buf != c.want:
                    fail("%s: connection %d: answered %r, expected %r" % (
                        what, c.i, c.buf[:200], c.want))
                sel.modify(c.sock, selectors.EVENT_READ, c)
                del pending[c.sock.fileno()]
    for c in conns:
        sel.unregister(c.sock)


def open_wave(sel, addr, first, n):
    """n non-blocking connects; returns the Conns once all are connected."""
    conns, waiting = [], {}
    for i in range(first, first + n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rc = s.connect_ex(addr)
        if rc not in (0, errno.EINPROGRESS):
            s.close()
            fail("connection %d: connect: %s" % (i, os.strerror(rc)))
        c = Conn(s, i)
        conns.append(c)
        sel.register(s, selectors.EVENT_WRITE, c)
        waiting[s.fileno()] = c
    deadline = time.monotonic() + WAVE_BOUND
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            fail("%d connects still pending after %gs" % (len(waiting), WAVE_BOUND))
        for key, _ev in sel.select(min(left, 1.0)):
            c = key.data
            if c.sock.fileno() not in waiting:
                continue
            err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                fail("connection %d: connect: %s" % (c.i, os.strerror(err)))
            sel.unregister(c.sock)
            del waiting[c.sock.fileno()]
    for c in conns:
        sel.register(c.sock, selectors.EVENT_READ, c)
    return conns


def counters(proxy, pool):
    st = proxy.stats_json()
    return st["curr_connections"], st[pool]["client_connections"]


def wait_counters(proxy, pool, want, what):
    wait_until(lambda: counters(proxy, pool) == want, STATS_BOUND,
               lambda: "%s: (curr_connections, client_connections) = %s, expected %s" % (
                   what, counters(proxy, pool), want), poll=0.1)


def cycle(proxy, addr, pool, base, n_cycle):
    sel = selectors.DefaultSelector()
    conns = []
    t0 = time.monotonic()
    try:
        for first in range(0, NCONN, WAVE):
            wave = open_wave(sel, addr, first, min(WAVE, NCONN - first))
            conns += wave
            run_round(sel, wave, [encode("PING")] * len(wave), [b"+PONG\r\n"] * len(wave),
                      WAVE_BOUND, "cycle %d PING wave at %d" % (n_cycle, first))
            for c in wave:
                sel.register(c.sock, selectors.EVENT_READ, c)
        t1 = time.monotonic()
        got = counters(proxy, pool)
        want = (base[0] + NCONN, base[1] + NCONN)
        if got != want:
            fail("cycle %d: %d connections held: (curr_connections, client_connections) = %s, "
                 "expected %s" % (n_cycle, NCONN, got, want))
        if not proxy.alive():
            fail("chash-proxy exited with %d connections open" % NCONN)
        reqs, exps = [], []
        for c in conns:
            if c.i % 2:
                reqs.append(encode("GET", "conn:hit:%d" % (c.i % 64)))
                v = b"v%d" % (c.i % 64)
                exps.append(b"$%d\r\n%s\r\n" % (len(v), v))
            else:
                reqs.append(encode("GET", "conn:miss:%d" % c.i))
                exps.append(b"$-1\r\n")
        run_round(sel, conns, reqs, exps, ROUND_BOUND, "cycle %d GET round" % n_cycle)
        t2 = time.monotonic()
    finally:
        for c in conns:
            c.sock.close()
        sel.close()
    wait_counters(proxy, pool, base, "cycle %d after closing all" % n_cycle)
    log("cycle %d: %d connections opened+PINGed in %.1fs, GETs answered in %.1fs, closed" % (
        n_cycle, NCONN, t1 - t0, t2 - t1))


def body(t):
    proxy_exe, tmp = t.proxy, t.tmp
    nofile = raise_nofile()
    os.environ["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                        "quarantine_size_mb=16"]))
    backends = start_redises(t.programs["redis-server"], tmp, 2)
    port = free_ports(1)[0]
    config = write_file(os.path.join(tmp, "proxy.yml"), pool_yaml(
        "conns", port, [(b.text, 1, None) for b in backends], hash="fnv1a_64",
        distribution="ketama", timeout=2000))
    proxy = Proxy(proxy_exe, tmp, config, [("127.0.0.1", port)]).start()
    addr = ("127.0.0.1", port)
    with open("/proc/%d/limits" % proxy.proc.pid) as f:
        line = next((ln for ln in f if ln.startswith("Max open files")), "")
    if int(line.split()[3]) < NCONN + FD_SLACK:
        fail("chash-proxy did not inherit the raised RLIMIT_NOFILE: %r" % line)

    with Resp(addr) as c:
        for i in range(64):
            if c.call("SET", "conn:hit:%d" % i, "v%d" % i) != b"OK":
                fail("preload SET failed")
    # The preload connection is closed: wait until the proxy has seen it go (reading the
    # counters at once could count it, and then every later comparison is off by one).
    wait_counters(proxy, "conns", (0, 0), "baseline")
    base = counters(proxy, "conns")
    rss0 = proxy.rss_kib()
    cycle(proxy, addr, "conns", base, 1)
    rss1 = proxy.rss_kib()
    cycle(proxy, addr, "conns", base, 2)
    rss2 = proxy.rss_kib()
    log("RSS: %d KiB before, %d KiB after cycle 1, %d KiB after cycle 2 (RLIMIT_NOFILE %d)" % (
        rss0, rss1, rss2, nofile))
    if rss1 > rss0 + FIRST_MARGIN:
        fail("RSS grew from %d KiB to %d KiB over %d connections (bound +%d KiB)" % (
            rss0, rss1, NCONN, FIRST_MARGIN))
    if rss2 > rss1 + SECOND_MARGIN:
        fail("RSS grew from %d KiB to %d KiB over a second identical cycle of %d connections "
             "(bound +%d KiB): a leak per connection?" % (rss1, rss2, NCONN, SECOND_MARGIN))
    proxy.stop()
    return "%d connections x 2 cycles, RSS %d -> %d -> %d KiB" % (NCONN, rss0, rss1, rss2)


if __name__ == "__main__":
    run_test(body)
