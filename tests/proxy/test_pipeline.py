#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_pipeline: pipelined batches across servers, and the bound on replies held for the rest
of their batch (issue 18: client.c's client_hold).

chash-proxy in front of 3 real redis-servers A, B, C (ketama, fnv1a_64, timeout 20 s so that a
stopped server's requests stay unanswered through every phase), keys placed by `chash lookup`.

  1. 8 connections at once, each 300 batches of 16 pipelined SETs and GETs over keys of all
     three servers: every reply is the right one, in request order; every key is on its owner.
  2. B SIGSTOPped (it accepts bytes, answers nothing). One send of GET a (A's), GET c (C's),
     GET b (B's): a's and c's replies arrive while B is still stopped, and nothing else does (a
     reply ready before its batch is complete may wait for the rest a few loop iterations, not
     for the rest itself); once B is continued, b's reply follows. Unloaded, and then while 6
     other connections keep the proxy's loop busy with A's and C's keys (the bound is then the
     iteration count, not the quiet poll).
  3. The other order, GET b then GET a with B stopped: nothing arrives before B answers (replies
     leave in request order), then both, in order.
Every wait is bounded; then SIGTERM, a clean exit, no sanitizer report.

Usage: test_pipeline.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import random
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, chash_lookup, encode, fail, free_ports, log,  # noqa: E402
                          pool_yaml, run_test, run_threads, sigstop, start_redises, write_file)

CONNS, BATCHES, DEPTH = 8, 300, 16
ARRIVE_BOUND = 10.0   # seconds for a reply that is ready to arrive: a hang detector (the pool's
                      # timeout, 20 s, is what an unbounded hold would wait for)
QUIET_FOR = 0.5       # seconds of silence that show nothing else arrives while B is stopped


def read_now(c):
    """Every byte the proxy has sent c so far, without blocking, after QUIET_FOR of silence."""
    data = b""
    c.sock.settimeout(QUIET_FOR)
    try:
        while True:
            chunk = c.sock.recv(65536)
            if not chunk:
                fail("the proxy closed the connection")
            data += chunk
    except socket.timeout:
        pass
    finally:
        c.sock.settimeout(ARRIVE_BOUND)
    return data


def body(t):
    proxy_exe, chash, redis_exe, tmp = t.proxy, t.chash, t.programs["redis-server"], t.tmp
    backends = start_redises(redis_exe, tmp, 3)
    by_addr = {b.text: b for b in backends}
    port = free_ports(1)[0]
    config = write_file(os.path.join(tmp, "proxy.yml"), pool_yaml(
        "pipe", port, [(b.text, 1, None) for b in backends], hash="fnv1a_64",
        distribution="ketama", timeout=20000))
    proxy = Proxy(proxy_exe, tmp, config, [("127.0.0.1", port)]).start()
    addr = ("127.0.0.1", port)
    owner = chash_lookup(chash, config, "pipe", [b"k:%d" % i for i in range(3000)])
    keys = {a: [k for k in owner if owner[k] == a] for a in by_addr}
    if min(len(v) for v in keys.values()) < 200:
        fail("keys per backend too uneven to test: %s" % {a: len(v) for a, v in keys.items()})
    A, B, C = backends

    # 1. Batches across the three servers, several connections at once.
    errors = []

    def batches(n):
        rng = random.Random(n)
        allkeys = sorted(owner)
        with Resp(addr, timeout=ARRIVE_BOUND) as c:
            for b in range(BATCHES):
                cmds, want = [], []
                for i in range(DEPTH):
                    k = allkeys[rng.randrange(len(allkeys))]
                    if i % 2 == 0:
                        v = b"%d:%d:%d:%s" % (n, b, i, k)
                        cmds.append(("SET", k, v))
                        want.append(b"OK")
                        last = (k, v)
                    else:  # the value this connection set just before, or one set since
                        cmds.append(("GET", last[0]))
                        want.append(last)
                got = c.pipeline(cmds)
                for g, w in zip(got, want):
                    if isinstance(w, tuple):
                        if not isinstance(g, bytes) or g.split(b":", 3)[-1] != w[0]:
                            errors.append("conn %d batch %d: GET %r -> %r" % (n, b, w[0], g))
                    elif g != w:
                        errors.append("conn %d batch %d: %r, want %r" % (n, b, g, w))
                if errors:
                    return

    run_threads(batches, CONNS, 120, "phase 1: the connections' batches")
    if errors:
        fail("phase 1: " + errors[0])
    for a, b in by_addr.items():
        for k in b.keys():
            if owner.get(k) != a:
                fail("phase 1: %r is on %s, chash lookup says %s" % (k, a, owner.get(k)))
    log("phase 1: %d connections x %d batches of %d across 3 servers, every reply right"
        % (CONNS, BATCHES, DEPTH))

    ka, kb, kc = keys[A.text][0], keys[B.text][0], keys[C.text][0]
    with Resp(addr) as c:
        for k in (ka, kb, kc):
            if c.call("SET", k, b"v:" + k) != b"OK":
                fail("SET %r failed" % k)
    want_ac = b"$%d\r\nv:%s\r\n$%d\r\nv:%s\r\n" % (len(ka) + 2, ka, len(kc) + 2, kc)

    # 2. A ready reply does not wait for a stopped server's, unloaded and under load.
    for loaded in (False, True):
        stop = threading.Event()
        load_errors = []

        def load(n):
            rng = random.Random(100 + n)
            pool = keys[A.text][:100] + keys[C.text][:100]
            with Resp(addr, timeout=ARRIVE_BOUND) as lc:
                while not stop.is_set():
                    got = lc.pipeline([("GET", pool[rng.randrange(len(pool))]) for _ in range(8)])
                    if any(isinstance(g, Exception) for g in got):
                        load_errors.append(repr(got))
                        return

        loaders = [threading.Thread(target=load, args=(n,), daemon=True)
                   for n in range(6 if loaded else 0)]
        for t in loaders:
            t.start()
        with Resp(addr, timeout=ARRIVE_BOUND) as c:
            sigstop(B.proc.pid)
            try:
                c.send(encode("GET", ka) + encode("GET", kc) + encode("GET", kb))
                got, deadline = b"", time.monotonic() + ARRIVE_BOUND
                while len(got) < len(want_ac) and time.monotonic() < deadline:
                    got += read_now(c)
                got += read_now(c)
                label = "under load" if loaded else "unloaded"
                if got != want_ac:
                    fail("phase 2 (%s): with B stopped, got %r, want A's and C's replies %r "
                         "alone" % (label, got, want_ac))
            finally:
                os.kill(B.proc.pid, signal.SIGCONT)
            c.sock.settimeout(ARRIVE_BOUND)
            if c.read() != b"v:" + kb:
                fail("phase 2 (%s): B's reply after SIGCONT is wrong" % label)
        stop.set()
        for t in loaders:
            t.join(ARRIVE_BOUND)
        if load_errors:
            fail("phase 2 (%s): a loader got %s" % (label, load_errors[0]))
        log("phase 2 (%s): A's and C's replies arrived while B was stopped, B's after" % label)

    # 3. Request order: nothing overtakes B's reply.
    with Resp(addr, timeout=ARRIVE_BOUND) as c:
        sigstop(B.proc.pid)
        try:
            c.send(encode("GET", kb) + encode("GET", ka))
            early = read_now(c)
        finally:
            os.kill(B.proc.pid, signal.SIGCONT)
        if early:
            fail("phase 3: %r arrived before B answered" % early)
        if c.read() != b"v:" + kb or c.read() != b"v:" + ka:
            fail("phase 3: replies out of order once B answered")
    log("phase 3: nothing overtook B's reply; both in order once B answered")
    proxy.stop()
    return "batches across servers right; held replies bounded by the loop, not the batch"


if __name__ == "__main__":
    run_test(body)
