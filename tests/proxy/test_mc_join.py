#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_mc_join: single-key gets joined into one multi-key get per memcached connection
(issue 18: backend.c's conn_join, the codec's join and scan_joined).

chash-proxy in front of 3 real memcacheds (ketama, fnv1a_64, server_connections 1 so that every
client's gets to a server share one connection and join), keys placed by `chash lookup`:

  1. 8 connections at once, 200 pipelined batches each of 24 requests: gets of keys present and
     absent, a key asked twice in a row, keys of 1 to 250 bytes, the line ends and spaces
     clients send ("get k\\n", "get  k  \\r\\n"), multigets of 2 to 5 of those keys (their
     parts join as well), the same with gets (a gets joins a gets, never a get: its values
     carry their CAS, as memcached's own gets answers), and between them sets, deletes, gets
     and multigets of the connection's own keys. Every reply is
     byte for byte what that memcached itself answers the request alone: for the shared keys
     the values written directly on their owners at the start, for a connection's own keys
     the model of what it wrote (nobody else writes them). Then
     chash_proxy_server_joined_requests_total > 0 on every server: the joining was exercised.
  2. A memcached SIGSTOPped while 40 gets to it are queued joined (pool timeout 400 ms): every
     one is answered, by the key's next candidate (END: it does not hold the key) or with the
     proxy's error, none with a value; after SIGCONT the same gets answer their values.
  3. A peer that answers any multi-key get with "SERVER_ERROR busy" and a single get with END
     (a scripted fault, in the test: real memcacheds do not fail a valid get): 10 pipelined gets
     through the proxy all get "SERVER_ERROR busy", and a set after them is answered in order
     (the stream stays in step).
  4. 8 connections streaming gets of one 240-byte key (one server, one shared connection whose
     FIFO then never empties) without waiting for replies, 480,000 in all: the proxy's RSS
     grows by less than 40 MiB (the keys kept for joined replies are dropped as they are
     answered; before, they piled up: 100 MB in 8 s).
Every wait is bounded; then SIGTERM, a clean exit, no sanitizer report.

Usage: test_mc_join.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (memcached missing and CI unset).
"""
import os
import random
import signal
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import promtext  # noqa: E402
from proxyharness import (Mc, Proxy, chash_lookup, fail, free_ports, log, pool_yaml,  # noqa: E402
                          run_test, run_threads, sigstop, start_memcacheds, wait_until, write_file)

CONNS, BATCHES, DEPTH = 8, 200, 24
BOUND = 15.0  # seconds for any reply: a hang detector
STREAM_REQS = 60000           # per connection in phase 4 (each records a 242-byte key if joined)
STREAM_GROWTH_KIB = 40 * 1024  # what phase 4 may grow the proxy by: the records of 8 x 60,000
                               # requests are 116 MB if never dropped


def value_reply(key, flags, data):
    return b"VALUE %s %d %d\r\n%s\r\nEND\r\n" % (key, flags, len(data), data)


def get_line(key, rng):
    """A single-key get as clients write it: canonical, "\\n" alone, or with extra spaces."""
    return rng.choice((b"get %s\r\n", b"get %s\n", b"get  %s  \r\n", b"get %s \n")) % key


def read_replies(c, n):
    return [c.reply() for _ in range(n)]


def body(t):
    proxy_exe, chash, memcached, tmp = t.proxy, t.chash, t.programs["memcached"], t.tmp
    mcs = start_memcacheds(memcached, tmp, 3)
    by_addr = {m.text: m for m in mcs}
    port, mport = free_ports(2)
    config = write_file(os.path.join(tmp, "join.yml"), pool_yaml(
        "mc", port, [(m.text, 1, None) for m in mcs], redis=False, hash="fnv1a_64",
        distribution="ketama", server_connections=1, timeout=400))
    proxy = Proxy(proxy_exe, tmp, config, [("127.0.0.1", port)],
                  extra_args=("--metrics-port", str(mport))).start()
    addr = ("127.0.0.1", port)

    # Shared keys, 1 to 250 bytes, half of them stored (flags = their index) on their owner
    # directly: the oracle for a get is that memcached's own answer.
    rng = random.Random(18)
    shared = [b"s%d:" % i + b"x" * rng.choice((0, 3, 40, 200)) for i in range(600)]
    shared += [b"L" * 250, b"k"]
    owner = chash_lookup(chash, config, "mc", shared)
    present = {}
    for i, k in enumerate(shared):
        if i % 2 == 0:
            data = b"v%d" % i
            with Mc(by_addr[owner[k]].addr) as c:
                if c.call(b"set %s %d 0 %d\r\n%s\r\n" % (k, i, len(data), data)) != \
                        b"STORED\r\n":
                    fail("preload of %r failed" % k)
            present[k] = (i, data)
    want_get, want_gets = {}, {}
    for k in shared:
        with Mc(by_addr[owner[k]].addr) as c:
            want_get[k] = c.call(b"get %s\r\n" % k)
            want_gets[k] = c.call(b"gets %s\r\n" % k)  # its CAS: nobody writes shared keys
        if want_get[k] != (value_reply(k, *present[k]) if k in present else b"END\r\n"):
            fail("memcached answered get %r with %r" % (k, want_get[k]))

    # 1. Batches from several connections at once.
    errors = []

    def batches(n):
        r = random.Random(100 + n)
        own = {}  # this connection's keys: key -> data (absent: not stored)
        with Mc(addr, timeout=BOUND) as c:
            for b in range(BATCHES):
                reqs, want = [], []
                for _ in range(DEPTH):
                    x = r.random()
                    if x < 0.10:  # a multiget of shared keys: its parts join too
                        ks = [r.choice(shared) for _ in range(r.randrange(2, 6))]
                        cas = r.random() < 0.3  # gets joins gets, never a get
                        reqs.append(b"%s %s\r\n" % (b"gets" if cas else b"get", b" ".join(ks)))
                        want.append(b"".join((want_gets if cas else want_get)[k][:-5]
                                             for k in ks) + b"END\r\n")
                    elif x < 0.55:
                        k = r.choice(shared)
                        for _ in range(2 if r.random() < 0.1 else 1):
                            reqs.append(get_line(k, r))
                            want.append(want_get[k])
                    elif x < 0.70:
                        k = r.choice(shared)
                        reqs.append(b"gets %s\r\n" % k)
                        want.append(want_gets[k])
                    elif x < 0.80:
                        k = b"own:%d:%d" % (n, r.randrange(20))
                        data = b"%d.%d" % (b, len(reqs))
                        reqs.append(b"set %s 7 0 %d\r\n%s\r\n" % (k, len(data), data))
                        want.append(b"STORED\r\n")
                        own[k] = data
                    elif x < 0.85:
                        k = b"own:%d:%d" % (n, r.randrange(20))
                        reqs.append(b"delete %s\r\n" % k)
                        want.append(b"DELETED\r\n" if k in own else b"NOT_FOUND\r\n")
                        own.pop(k, None)
                    elif x < 0.95:
                        k = b"own:%d:%d" % (n, r.randrange(20))
                        reqs.append(get_line(k, r))
                        want.append(value_reply(k, 7, own[k]) if k in own else b"END\r\n")
                    else:
                        ks = [b"own:%d:%d" % (n, r.randrange(20)) for _ in range(3)]
                        reqs.append(b"get %s\r\n" % b" ".join(ks))
                        want.append(b"".join(b"VALUE %s 7 %d\r\n%s\r\n" % (k, len(own[k]), own[k])
                                             for k in ks if k in own) + b"END\r\n")
                c.send(b"".join(reqs))
                got = read_replies(c, len(want))
                for i, (g, w) in enumerate(zip(got, want)):
                    if g != w:
                        errors.append("conn %d batch %d request %d %r: got %r, want %r"
                                      % (n, b, i, reqs[i][:60], g[:200], w[:200]))
                        return

    run_threads(batches, CONNS, 180, "phase 1: the connections' batches")
    if errors:
        fail("phase 1: " + errors[0])
    fams = promtext.scrape(mport)
    joined = {m.text: promtext.total(fams, "chash_proxy_server_joined_requests_total",
                                     pool="mc", server=m.text) for m in mcs}
    if min(joined.values()) <= 0:
        fail("phase 1: no get was joined on some server: %s" % joined)
    log("phase 1: %d connections x %d batches of %d, every reply memcached's own; joined "
        "per server %s" % (CONNS, BATCHES, DEPTH, sorted(joined.values())))

    # 2. A stopped server: every joined request is answered (an error), none wrongly.
    victim = mcs[1]
    vkeys = [k for k in shared if owner[k] == victim.text][:40]
    sigstop(victim.proc.pid)
    try:
        with Mc(addr, timeout=BOUND) as c:
            c.send(b"".join(b"get %s\r\n" % k for k in vkeys))
            got = read_replies(c, len(vkeys))
    finally:
        os.kill(victim.proc.pid, signal.SIGCONT)
    # Each get times out on its owner and is retried on the key's next candidate (a read),
    # which does not hold it: END; or the proxy's error. Never a value: its owner is stopped.
    bad = [g for g in got if g != b"END\r\n" and not g.startswith(b"SERVER_ERROR ")]
    if bad:
        fail("phase 2: with %s stopped, %d of %d gets answered %r" % (victim.text, len(bad),
                                                                     len(got), bad[0][:120]))
    got = []

    def answered():
        with Mc(addr, timeout=BOUND) as c:
            c.send(b"".join(b"get %s\r\n" % k for k in vkeys))
            got[:] = read_replies(c, len(vkeys))
        return got == [want_get[k] for k in vkeys]
    wait_until(answered, BOUND, lambda: "phase 2: after SIGCONT the gets still answer %r" % (
        got[0][:120],), poll=0.2)
    log("phase 2: %d joined gets to a stopped memcached all answered (failed over or an "
        "error); back after SIGCONT" % len(vkeys))

    # 3. An error for the joined line answers each of its requests; the stream stays in step.
    fport = free_ports(1)[0]
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", fport))
    lsock.listen(4)
    lsock.settimeout(BOUND)
    lines_seen = []

    def fault_peer():
        s, _ = lsock.accept()
        s.settimeout(BOUND)
        buf = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return
                buf += chunk
                while b"\r\n" in buf:
                    line, buf = buf.split(b"\r\n", 1)
                    lines_seen.append(line)
                    words = line.split()
                    if words[:1] == [b"get"]:
                        s.sendall(b"SERVER_ERROR busy\r\n" if len(words) > 2 else b"END\r\n")
                    elif words[:1] == [b"set"]:
                        n = int(words[4])
                        while len(buf) < n + 2:
                            buf += s.recv(65536)
                        buf = buf[n + 2:]
                        s.sendall(b"STORED\r\n")
                    elif words[:1] == [b"version"]:
                        s.sendall(b"VERSION fault-peer\r\n")
        except OSError:
            return
        finally:
            s.close()

    peer = threading.Thread(target=fault_peer, daemon=True)
    peer.start()
    pport = free_ports(1)[0]
    pconf = write_file(os.path.join(tmp, "fault.yml"), pool_yaml(
        "f", pport, [("127.0.0.1:%d" % fport, 1, None)], redis=False, server_connections=1,
        timeout=2000))
    fproxy = Proxy(proxy_exe, tmp, pconf, [("127.0.0.1", pport)], label="fault").start()
    with Mc(("127.0.0.1", pport), timeout=BOUND) as c:
        c.send(b"".join(b"get f%d\r\n" % i for i in range(10)) + b"set z 0 0 1\r\nz\r\n")
        got = read_replies(c, 11)
    if got[:10] != [b"SERVER_ERROR busy\r\n"] * 10 or got[10] != b"STORED\r\n":
        fail("phase 3: got %r (lines the peer read: %r)" % (got, lines_seen))
    if not any(len(line.split()) > 2 for line in lines_seen):
        fail("phase 3: the gets were not joined: the peer read %r" % lines_seen)
    log("phase 3: an error for a joined get answered each of its %d requests; the set after "
        "them answered in order (peer read %r)" % (10, lines_seen))
    fproxy.stop()
    lsock.close()

    # 4. Steady load: the keys kept for joined replies do not grow while the FIFO never empties
    # (before the fix they did: 100 MB in 8 s at this load).
    big = b"z" * 240  # on one server: every connection's gets share its connection
    base = proxy.rss_kib()
    stream_for = [STREAM_REQS]

    def stream(n):
        with Mc(addr, timeout=BOUND) as c:
            def drain():
                try:
                    while c.sock.recv(1 << 20):
                        pass
                except OSError:
                    pass
            reader = threading.Thread(target=drain, daemon=True)
            reader.start()
            chunk = (b"get %s\r\n" % big) * 200
            for _ in range(stream_for[0] // 200):
                c.send(chunk)
            c.sock.shutdown(socket.SHUT_WR)
            reader.join(BOUND * 4)

    run_threads(stream, 8, 240, "phase 4: the streaming connections")
    grown = (proxy.rss_kib() or 0) - (base or 0)
    if grown > STREAM_GROWTH_KIB:
        fail("phase 4: %d joined-get requests of a 240-byte key on 8 connections grew the "
             "proxy by %d KiB (bound %d)" % (8 * STREAM_REQS, grown, STREAM_GROWTH_KIB))
    log("phase 4: %d requests streamed on 8 connections: the proxy grew %d KiB"
        % (8 * STREAM_REQS, grown))
    proxy.stop()
    return "joined gets answer what each get alone would; errors and stopped servers bounded"


if __name__ == "__main__":
    run_test(body, programs=("memcached",))
