#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_memory: one client cannot make chash-proxy's memory grow without bound (issue 16,
finding 3).

chash-proxy (ASan build, quarantine kept small so freed memory shows) in front of 2
redis-servers, pool timeout 30 s:

1. The backend owning a key is SIGSTOPped; one client pipelines 48 SETs of 16 MiB (768 MiB)
   for that key. With max_client_inflight_bytes at its default (32 MiB) the proxy stops reading
   the client once that much waits for the backend, so its RSS stays under 400 MiB (before: it
   read everything; the issue measured 2.5 GB for 128 such SETs). Then the backend is resumed
   and the first replies arrive.
2. Eight clients each send one GET with a 24 MiB key, then stay connected and idle: their read
   buffers are freed once empty, so the RSS returns to within 120 MiB of what it was before
   (before: each kept its 24+ MiB buffer, +192 MiB and more).
3. A pool with max_client_buffer_bytes 8 MiB: a client reading a 40 MiB value as fast as it can
   gets all of it (before: closed at once, as a client that does not read), and one that never
   reads its replies is still closed (stats client_err) within 10 s.
4. The process-wide budget (--max-memory 96m): six clients pipelining 16 MiB SETs to a stopped
   backend; requests past the budget are refused with an error, the RSS stays bounded, no
   client is closed, and everything drains once the backend is back.

RSS is read from /proc (VmRSS); every wait is bounded.

Usage: test_memory.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import signal
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxyharness  # noqa: E402
from proxyharness import (Proxy, Resp, chash_lookup, encode, fail, free_ports, holds,  # noqa: E402
                          log, poll_until, pool_yaml, run_test, start_redises, wait_until,
                          write_file)

MIB = 1024 * 1024
STOPPED_FOR = 8.0   # seconds a backend stays stopped under pipelined SETs: the fault's length,
                    # long enough for a proxy that kept reading to pass the RSS limits below
RSS_EVERY = 0.2     # seconds between two looks at the proxy's RSS meanwhile
IDLE_BOUND = 2.0    # seconds for the RSS of idle clients' freed buffers to show (allocator)


_sanitizer_env = proxyharness.sanitizer_env


def small_quarantine_env():
    env = _sanitizer_env()
    env["ASAN_OPTIONS"] = env["ASAN_OPTIONS"] + ":quarantine_size_mb=16"
    return env


def peak_rss_then_resume(p, stopped, base, limit_mib, what):
    """Checks that the proxy's RSS stays within limit_mib of base (KiB) for the STOPPED_FOR
    seconds the stopped server stays stopped (what: the load, for the message), then resumes
    the server; the highest RSS seen."""
    peak = [0]

    def bounded():
        peak[0] = max(peak[0], p.rss_kib() or 0)
        return peak[0] - base <= limit_mib * 1024
    try:
        holds(bounded, STOPPED_FOR, lambda: "%s: RSS grew by %d MiB; the limit is %d" % (
            what, (peak[0] - base) // 1024, limit_mib), poll=RSS_EVERY)
    finally:
        os.kill(stopped.proc.pid, signal.SIGCONT)
    return peak[0]


def body(t):
    proxy_exe, chash, redis_server, tmp = t.proxy, t.chash, t.programs["redis-server"], t.tmp
    backends = start_redises(redis_server, tmp, 2)
    for r in backends:
        r.call("CONFIG", "SET", "proto-max-bulk-len", str(64 * MIB))
    port = free_ports(1)[0]
    sport = free_ports(1)[0]
    conf = write_file(os.path.join(tmp, "mem.yml"), pool_yaml(
        "mem", port, [(r.text, 1, None) for r in backends], hash="md5", distribution="ketama",
        timeout=30000) + pool_yaml(
        "small", sport, [(r.text, 1, None) for r in backends], hash="md5",
        distribution="ketama", max_client_buffer_bytes=8 * MIB))
    proxyharness.sanitizer_env = small_quarantine_env  # the Proxy class reads it at start
    p = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port), ("127.0.0.1", sport)], label="mem",
              extra_args=("--threads", "1")).start()
    key = b"big:1"
    owner = chash_lookup(chash, conf, "mem", [key])[key]
    stopped = next(r for r in backends if r.text == owner)
    base = p.rss_kib()

    # 1. Pipelined big SETs to a stopped backend.
    value = b"x" * (16 * MIB)
    one = encode("SET", key, value)
    os.kill(stopped.proc.pid, signal.SIGSTOP)
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sent = [0]

    def writer():
        try:
            for _ in range(48):
                sock.sendall(one)
                sent[0] += 1
        except OSError:
            pass

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    peak = peak_rss_then_resume(p, stopped, base, 400, "48 pipelined 16 MiB SETs to a stopped "
                                "backend (%d sent so far)" % sent[0])
    sock.settimeout(30)
    first = sock.recv(64)
    if not first.startswith(b"+OK"):
        fail("after SIGCONT the first reply is %r" % first[:60])
    sock.close()
    t.join(timeout=30)
    log("pipelined big SETs: RSS +%d MiB at most (%d of 48 sent while the backend was stopped)"
        % ((peak - base) // 1024, sent[0]))

    # 2. Huge requests once, then idle: their buffers go. The baseline once the SETs of 1 have
    # drained and their client is gone.
    def drained():
        st = p.stats_json()["mem"]
        return st["client_connections"] == 0 and all(
            v["in_queue"] == 0 and v["out_queue"] == 0 for v in st.values() if isinstance(v, dict))
    wait_until(drained, 30, "the pipelined SETs drained, their client gone")
    before = p.rss_kib()
    idle = []
    for i in range(8):
        c = Resp(("127.0.0.1", port), timeout=60)
        if c.call("GET", b"k%d:" % i + b"y" * (24 * MIB)) is not None:
            fail("GET of a 24 MiB key that does not exist answered a value")
        idle.append(c)
    # Each buffer is freed once its request is parsed, before its reply: the RSS shows it as
    # soon as the allocator gives the memory back.
    def idle_rss():
        r = p.rss_kib()
        return r if r - before <= 120 * 1024 else None
    after = poll_until(idle_rss, IDLE_BOUND) or p.rss_kib()
    if after - before > 120 * 1024:
        fail("8 idle clients that each sent one 24 MiB request hold %d MiB (limit 120)" % (
            (after - before) // 1024))
    with Resp(("127.0.0.1", port)) as c:
        if c.call("PING") != b"PONG":
            fail("the proxy does not answer after the big requests")
    for c in idle:
        c.close()

    # 3. Big replies: a reading client is served, a client that never reads is closed.
    big = b"b" * (40 * MIB)
    with Resp(("127.0.0.1", sport), timeout=60) as c:
        if c.call("SET", "bigval", big) != b"OK":
            fail("SET of a 40 MiB value failed")
    with Resp(("127.0.0.1", sport), timeout=60) as c:
        got = c.call("GET", "bigval")
        if got != big:
            fail("a reading client's GET of a 40 MiB value with max_client_buffer_bytes 8 MiB: "
                 "%r" % (got if not isinstance(got, bytes) else len(got)))
    errs = p.stats_json()["small"]["client_err"]
    lazy = socket.socket()
    lazy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    lazy.connect(("127.0.0.1", sport))
    lazy.settimeout(10)
    try:
        lazy.sendall(encode("GET", "bigval") * 2)
    except OSError:
        pass
    wait_until(lambda: p.stats_json()["small"]["client_err"] != errs, 10,
               "a client that never reads its 40 MiB replies closed (client_err)", poll=0.2)
    lazy.close()
    p.stop()
    budget_growth, refused = budget_phase(proxy_exe, chash, tmp, backends)
    return ("RSS +%d MiB under 768 MiB of pipelined SETs; +%d MiB after 8 x 24 MiB requests; "
            "+%d MiB with 6 clients over a 96 MiB budget (%d requests refused)" % (
                (peak - base) // 1024, max(0, after - before) // 1024, budget_growth, refused))


def budget_phase(proxy_exe, chash, tmp, backends):
    """4. The process-wide budget: --max-memory 96m, 6 clients each pipelining 16 MiB SETs to a
    stopped backend (each may have 32 MiB waiting, 192 MiB in all, twice as many bytes again in
    the backend's output): requests past the budget are refused with an error in their place,
    the RSS stays within 300 MiB of the start, no client is closed, and once the backend is
    back every client gets its replies and a new SET succeeds."""
    port = free_ports(1)[0]
    conf = write_file(os.path.join(tmp, "budget.yml"), pool_yaml(
        "budget", port, [(r.text, 1, None) for r in backends], hash="md5",
        distribution="ketama", timeout=30000))
    p = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)], label="budget",
              extra_args=("--threads", "1", "--max-memory", "96m")).start()
    key = b"big:1"
    owner = chash_lookup(chash, conf, "budget", [key])[key]
    stopped = next(r for r in backends if r.text == owner)
    base = p.rss_kib()
    one = encode("SET", key, b"z" * (16 * MIB))
    per_client = 6
    os.kill(stopped.proc.pid, signal.SIGSTOP)
    socks = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(6)]

    def writer(sk):
        try:
            for _ in range(per_client):
                sk.sendall(one)
        except OSError:
            pass
    threads = [threading.Thread(target=writer, args=(sk,), daemon=True) for sk in socks]
    for t in threads:
        t.start()
    peak = peak_rss_then_resume(p, stopped, base, 300, "6 clients of pipelined 16 MiB SETs "
                                "under --max-memory 96m")
    growth = (peak - base) // 1024
    ok = refused = 0
    for sk in socks:
        sk.settimeout(60)
        buf = b""
        while buf.count(b"\r\n") < per_client:
            chunk = sk.recv(65536)
            if not chunk:
                fail("a client was closed under the memory budget (replies so far %r)" % buf[:200])
            buf += chunk
        for line in buf.split(b"\r\n")[:per_client]:
            if line == b"+OK":
                ok += 1
            elif b"memory budget" in line:
                refused += 1
            else:
                fail("a reply under the memory budget: %r" % line[:200])
        sk.close()
    for t in threads:
        t.join(timeout=30)
    if refused == 0:
        fail("no request refused with 6 x %d pipelined 16 MiB SETs over a 96 MiB budget" %
             per_client)
    with Resp(("127.0.0.1", port), timeout=60) as c:
        got = [None]

        def stored():
            got[0] = c.call("SET", key, b"small")
            return got[0] == b"OK"
        poll_until(stored, 20, poll=0.2)
        got = got[0]
        if got != b"OK":
            fail("a SET after the load drained: %r" % got)
    p.stop()
    log("memory budget: RSS +%d MiB, %d SETs stored, %d refused with the budget's error" % (
        growth, ok, refused))
    return growth, refused


if __name__ == "__main__":
    run_test(body)
