#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_backend_failure: a backend killed (and one hung) under load.

chash-proxy in front of 3 real redis-servers, one pool with auto_eject_hosts: true,
server_failure_limit: 2, server_retry_timeout: 200 ms (server_retry_max: 800 ms), timeout:
500 ms. Reader threads GET preloaded keys and a writer thread SETs (then GETs) its own keys,
one request at a time per connection, throughout:

  1. SIGKILL backend A. Every request still gets an answer within REQUEST_BOUND (a few
     timeouts; no hang). Keys owned by the other backends are untouched: every GET of them
     returns its value, every SET of them succeeds and lands on its owner (checked on the
     backends at the end). Reads of A's keys fail over: after the first SETTLE seconds (A is
     ejected by then) none of them errors. A stays down until the proxy reports it ejected
     and LATE_READS reads of its keys started after SETTLE were answered.
  2. Restart A on the same port (empty: no persistence). It is readmitted after a successful
     probe: a SET of a key A owns lands on A again (checked on A directly) within
     READMIT_BOUND, and a value put on A directly is what a GET through the proxy returns.
  3. SIGSTOP backend B (it accepts connections but never answers: every request to it
     times out). Same checks as 1; then SIGCONT, and B is readmitted the same way.
  4. stats: the pool counts >= 2 ejections. The proxy exits cleanly on SIGTERM, no sanitizer
     report.

Usage: test_backend_failure.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import random
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Redis, Resp, RespError, chash_lookup, fail,  # noqa: E402
                          free_ports, log, poll_until, pool_yaml, run_test, sigstop, soft_fail,
                          start_redises, tail, write_file)

TIMEOUT_MS = 500
REQUEST_BOUND = 6.0    # seconds: 2 candidates x (connect or read timeout), with room for a
                       # loaded CI machine and ASan: a hang detector, not a latency target
SETTLE = 2.0           # seconds after a failure by which the node must be ejected (K = 2
                       # failures of at most TIMEOUT_MS each, with room for a loaded machine)
LATE_READS = 2000      # reads of a down node's keys after SETTLE before it returns (~2 s here)
BACK_REQUESTS = 5000   # requests answered before the first fault and after each node's
                       # return, before the next fault (~1 s here)
FAULT_BOUND = 60.0     # seconds for either: a loaded machine's bound, not a target
READMIT_BOUND = 10.0   # seconds for a returned node to be readmitted
CONN_TIMEOUT = 15.0    # a client socket's timeout: beyond it, a request "hung"


class Loader(threading.Thread):
    """Runs fn(conn, i) in a loop on its own connection; records (t, key, kind, ok, latency,
    reply) for every request."""

    def __init__(self, addr, name, fn):
        super().__init__(daemon=True, name=name)
        self.addr, self.fn = addr, fn
        self.stop_flag = threading.Event()
        self.records = []
        self.hangs = []

    def run(self):
        c = Resp(self.addr, timeout=CONN_TIMEOUT)
        i = 0
        while not self.stop_flag.is_set():
            try:
                self.fn(c, i, self.records)
            except (OSError, RuntimeError) as e:
                self.hangs.append("%s: request %d: %s: %s" % (self.name, i, type(e).__name__, e))
                c.close()
                try:
                    c = Resp(self.addr, timeout=CONN_TIMEOUT)
                except OSError as e2:
                    self.hangs.append("%s: reconnect: %s" % (self.name, e2))
                    return
            i += 1
        c.close()


def since(loaders, t0, pick=lambda r: True):
    """How many records of the loaders started at t0 or later satisfy pick. Each loader's
    records are in the order their requests started: read from the end, only the window."""
    n = 0
    for ld in loaders:
        recs = ld.records
        i = len(recs) - 1
        while i >= 0 and recs[i][0] >= t0:
            n += bool(pick(recs[i]))
            i -= 1
    return n


def timed(records, c, kind, key, *args):
    t0 = time.monotonic()
    r = c.call(*args)
    t1 = time.monotonic()
    records.append((t0, key, kind, r, t1 - t0))
    return r


def body(t):
    chash, tmp = t.chash, t.tmp
    backends = start_redises(t.programs["redis-server"], tmp, 3)
    by_addr = {b.text: b for b in backends}
    port = free_ports(1)[0]
    config = write_file(os.path.join(tmp, "proxy.yml"), pool_yaml(
        "fo", port, [(b.text, 1, n) for b, n in zip(backends, ("one", "two", "three"))],
        hash="fnv1a_64", distribution="ketama", timeout=TIMEOUT_MS, auto_eject_hosts=True,
        server_failure_limit=2, server_retry_timeout=200, server_retry_max=800,
        server_connections=1))
    proxy = Proxy(t.proxy, tmp, config, [("127.0.0.1", port)], stats_interval_ms=100).start()
    addr = ("127.0.0.1", port)

    # 100 read keys and 50 write keys per backend, whatever the balance of the hash.
    owner = chash_lookup(chash, config, "fo", [b"ro:%d" % i for i in range(5000)] +
                         [b"rw:%d" % i for i in range(5000)])
    read_keys, write_keys = [], []
    for a in by_addr:
        read_keys += [k for k in owner if k.startswith(b"ro:") and owner[k] == a][:100]
        write_keys += [k for k in owner if k.startswith(b"rw:") and owner[k] == a][:50]
    random.Random(1).shuffle(write_keys)
    probe_owner = chash_lookup(chash, config, "fo", [b"readmit:%d" % i for i in range(3000)])
    counts = {a: sum(owner[k] == a for k in read_keys) for a in by_addr}
    if min(counts.values()) < 100 or min(sum(o == a for o in probe_owner.values())
                                          for a in by_addr) < 5:
        fail("keys per backend too uneven to test: %s" % counts)
    A, B = backends[0], backends[1]          # killed; hung

    with Resp(addr) as c:
        for k in read_keys:
            if c.call("SET", k, b"v:" + k) != b"OK":
                fail("preload: SET %r failed" % k)
    for k in read_keys:
        if by_addr[owner[k]].call("GET", k) != b"v:" + k:
            fail("preload: %r not on its owner %s (chash lookup)" % (k, owner[k]))

    # Loaders. Readers GET read_keys; the writer SETs write_keys then GETs them back.
    last_written = {}       # key -> value of its last SET answered +OK
    wlock = threading.Lock()

    def reader(c, i, rec):
        k = read_keys[random.randrange(len(read_keys))]
        timed(rec, c, "get", k, "GET", k)

    def writer(c, i, rec):
        k = write_keys[i % len(write_keys)]
        v = b"w%d" % i
        r = timed(rec, c, "set", k, "SET", k, v)
        if r == b"OK":
            with wlock:
                last_written[k] = v
        timed(rec, c, "getw", k, "GET", k)

    loaders = [Loader(addr, "reader-%d" % i, reader) for i in range(2)]
    loaders.append(Loader(addr, "writer", writer))
    t_start = time.monotonic()
    for ld in loaders:
        ld.start()

    def records_between(t0, t1):
        out = []
        for ld in loaders:
            out += [r for r in list(ld.records) if t0 <= r[0] < t1]
        return out

    def check_window(label, t0, t1, down):
        """Checks the requests started in [t0, t1) while backend `down` (or None) was out."""
        recs = records_between(t0, t1)
        if down is None:      # only requests that completed before the next event
            recs = [r for r in recs if r[0] + r[4] < t1]
        if len(recs) < 20:
            soft_fail("%s: only %d requests completed" % (label, len(recs)))
        slow = [r for r in recs if r[4] > REQUEST_BOUND]
        if slow:
            worst = max(slow, key=lambda r: r[4])
            soft_fail("%s: %d requests took more than %gs (worst %.2fs: %s %r -> %r)" % (
                label, len(slow), REQUEST_BOUND, worst[4], worst[2], worst[1], worst[3]))
        # A writer's GET checks its own SET just before: one whose SET started before the
        # window (a readmission in between moves the key back to a server the SET missed) says
        # nothing of this window.
        set_at = {}
        for ld in loaders:
            for t, k, kind, _r, _dt in list(ld.records):
                if kind == "set":
                    set_at.setdefault(k, []).append(t)
        bad_other = []
        for t, k, kind, r, dt in recs:
            if down is not None and owner[k] == down.text:
                continue
            if kind == "getw" and max([x for x in set_at.get(k, []) if x <= t], default=0) < t0:
                continue
            if kind == "get" and r != b"v:" + k:
                bad_other.append((kind, k, r))
            elif kind == "set" and r != b"OK":
                bad_other.append((kind, k, r))
            elif kind == "getw" and (r is None or isinstance(r, RespError)):
                bad_other.append((kind, k, r))
        if bad_other:
            soft_fail("%s: %d requests for keys of live backends failed, e.g. %s" % (
                label, len(bad_other), bad_other[:3]))
        if down is None:
            return "%d requests" % len(recs)
        mine = [r for r in recs if owner[r[1]] == down.text]
        reads = [r for r in mine if r[2] == "get"]
        late = [r for r in reads if r[0] >= t0 + SETTLE]
        late_err = [r for r in late if isinstance(r[3], RespError)]
        if not late:
            soft_fail("%s: no read of the down backend's keys after %gs" % (label, SETTLE))
        elif late_err:
            soft_fail("%s: %d of %d reads of the down backend's keys failed after %gs (no "
                      "failover?), e.g. %r" % (label, len(late_err), len(late), SETTLE,
                                               late_err[0][3]))
        errs = sum(isinstance(r[3], RespError) for r in mine)
        sets = [r for r in mine if r[2] == "set"]
        set_ok = sum(r[3] == b"OK" for r in sets)
        return ("%d requests, %d for the down backend's keys (%d errors; %d/%d of its SETs "
                "answered OK), worst latency %.3fs" % (
                    len(recs), len(mine), errs, set_ok, len(sets),
                    max((r[4] for r in recs), default=0)))

    def ejections():
        return proxy.stats_json()["fo"]["server_ejects"]

    def down_until_failover(node, t0, before):
        """The fault's length: until the proxy reports node ejected (more server_ejects than
        `before`, the count before t0) and LATE_READS reads of node's keys started SETTLE s
        after t0 or later were answered, failed over or not (check_window judges them);
        FAULT_BOUND at most."""
        poll_until(lambda: since(loaders, t0 + SETTLE,
                                 lambda r: r[2] == "get" and owner[r[1]] == node.text) >=
                   LATE_READS and ejections() > before,
                   FAULT_BOUND, poll=0.1)

    def traffic_after(t0):
        """Until BACK_REQUESTS requests started at t0 or later were answered (every one is
        checked by check_window); FAULT_BOUND at most."""
        poll_until(lambda: since(loaders, t0) >= BACK_REQUESTS, FAULT_BOUND, poll=0.1)

    def readmitted(node, label, t0):
        """Waits until a SET through the proxy of a key `node` owns lands on node; the time
        since t0 (when node returned), or None."""
        mine = [k for k, o in probe_owner.items() if o == node.text]
        n = [0]
        with Resp(addr) as c:
            def lands():
                k = mine[n[0] % len(mine)]
                n[0] += 1
                return c.call("SET", k, b"back") == b"OK" and node.call("GET", k) == b"back"
            if poll_until(lands, t0 + READMIT_BOUND - time.monotonic(), poll=0.1):
                return time.monotonic() - t0
        soft_fail("%s: %s not readmitted within %gs of its return (SETs of its keys do not "
                  "reach it)" % (label, node.text, READMIT_BOUND))
        return None

    def routed_back(node, label):
        """A value put on node directly is what GET through the proxy returns (reads route
        back too)."""
        k = next(k for k in read_keys if owner[k] == node.text)
        node.call("SET", k, b"direct")
        with Resp(addr) as c:
            r = c.call("GET", k)
        if r != b"direct":
            soft_fail("%s: GET %r through the proxy answered %r, not the value on its owner "
                      "%s" % (label, k, r, node.text))
        node.call("SET", k, b"v:" + k)

    summary = []
    traffic_after(t_start)
    # 1. SIGKILL A.
    before = ejections()
    t_kill = time.monotonic()
    A.kill()
    down_until_failover(A, t_kill, before)
    t_restart = time.monotonic()
    summary.append("before: " + check_window("before the kill", t_start, t_kill, None))
    summary.append("A killed: " + check_window("A killed", t_kill, t_restart, A))
    # 2. Restart A on the same port.
    ejects = proxy.stats_json().get("fo", {}).get("server_ejects")
    if ejects != 1:
        # More than one: A was readmitted without a successful probe and ejected again.
        soft_fail("stats: pool server_ejects is %r while A was down, expected 1" % (ejects,))
    A2 = Redis(A.exe, tmp, port=A.port).start()
    t_up = time.monotonic()
    by_addr[A.text] = A2
    for k in read_keys:           # A came back empty: reload its read keys directly
        if owner[k] == A.text:
            A2.call("SET", k, b"v:" + k)
    dt = readmitted(A2, "A restarted", t_up)
    if dt is not None:
        summary.append("A readmitted %.2fs after its restart" % dt)
        routed_back(A2, "A restarted")
    # The window starts after routed_back: while it runs, one key holds "direct" on purpose.
    t_back = time.monotonic()
    traffic_after(t_back)
    t_stop = time.monotonic()
    summary.append("A back: " + check_window("A back", t_back, t_stop, None))
    # 3. SIGSTOP B.
    before = ejections()
    try:
        sigstop(B.proc.pid)
        down_until_failover(B, t_stop, before)
    finally:
        os.kill(B.proc.pid, signal.SIGCONT)
    t_cont = time.monotonic()
    summary.append("B hung: " + check_window("B hung (SIGSTOP)", t_stop, t_cont, B))
    dt = readmitted(B, "B resumed", t_cont)
    if dt is not None:
        summary.append("B readmitted %.2fs after SIGCONT" % dt)
        routed_back(B, "B resumed")
    t_back = time.monotonic()
    traffic_after(t_back)
    t_end = time.monotonic()
    summary.append("B back: " + check_window("B back", t_back, t_end, None))

    for ld in loaders:
        ld.stop_flag.set()
    for ld in loaders:
        ld.join(timeout=CONN_TIMEOUT + 5)
        if ld.is_alive():
            soft_fail("%s is stuck in a request" % ld.name)
        if ld.hangs:
            soft_fail("%s: %d requests without an answer (hang or lost connection), e.g. %s" % (
                ld.name, len(ld.hangs), ld.hangs[:2]))

    # Writes of keys whose owner never went down are on that owner, with the last value.
    for k, v in last_written.items():
        if owner[k] in (A.text, B.text):
            continue
        got = by_addr[owner[k]].call("GET", k)
        if got != v:
            soft_fail("key %r: its owner %s holds %r, the last SET answered OK was %r" % (
                k, owner[k], got, v))
            break

    st = proxy.stats_json()
    ejects = st.get("fo", {}).get("server_ejects")
    if ejects != 2:
        soft_fail("stats: pool server_ejects is %r after two backends were ejected once each" % (
            ejects,))
    for node in (A, B):
        name = next(n for b, n in zip(backends, ("one", "two", "three")) if b is node)
        at = st.get("fo", {}).get(name, {}).get("server_ejected_at")
        if not isinstance(at, int) or at <= 0:
            soft_fail("stats: server %s server_ejected_at is %r after its ejection and readmission "
                      "(nutcracker keeps the last ejection time)" % (name, at))
    if not proxy.alive():
        fail("chash-proxy died; stderr:\n%s" % tail(proxy.stderr))
    proxy.stop()
    for line in summary:
        log(line)
    return "kill, restart, hang, resume: every request answered within %gs" % REQUEST_BOUND


if __name__ == "__main__":
    run_test(body)
