#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_replicas: `replicas: N` in chash-proxy (issue 26, item 1; docs/PROXY.md, "Replicated
pools").

chash-proxy (2 worker threads) in front of 4 real redis-servers, then 4 memcacheds; a pool with
replicas 2 or 3, ejecting a server after one failure. A key's owners come from `chash lookup
--config FILE --replicas N` (the CLI's walk, an oracle independent of the proxy); what a server
holds is read on the server directly.

For Redis with replicas 2 and 3, and memcached with replicas 2:
  placement: keys written by SET / MSET (memcached: set) are on exactly their N owners and on
    no other server; a multi-key DEL (memcached: delete) removes them from every owner and
    answers the primary's count; MGET (memcached: a multi-key get) reads keys of every owner.
  kill -9 of one server: every key written before reads back through the proxy, by GET and
    MGET: 0 errors, 0 misses (each served by its other owner).
  its return (a new, empty server on its port): once readmitted, its keys miss there, are read
    from the next owner (chash_proxy_replica_reads_total), and are copied back to it: every key
    of which it is the first owner is on it again with its value (read directly).
For Redis, replicas 2:
  partial failure: with one owner SIGSTOPped and not ejected yet, a SET is answered with its
    timeout (an error), though the first owner took it.
  rejoin: a server SIGSTOPped until ejected; while it is out its keys are written again (SET,
    MSET) and every tenth deleted, all answered OK (the owner out is skipped); it is resumed and
    readmitted: 0 reads of its old values through the proxy, none of its old values left on it
    (the rejoin journal covered every owner out, not only the first).
  repair never overwrites: a key deleted at its first owner is read (repaired from the second)
    with a SET of a new value pipelined right behind the read; once every repair has ended
    (repairs + skips = replica reads, from /metrics), both owners hold the new value.
  a reload 4 -> 5 servers with warm_up: every key reads back right after it (0 misses), and
    after every key is written again every read is fresh and on its new owners; then a reload
    replacing two servers: 0 misses, and a key none of whose new owners held it is copied to
    each of them (the warm-up's fill, one per owner up).
Then SIGTERM: a clean exit, no sanitizer report.

Usage: test_replicas.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server or memcached missing and CI unset).
"""
import http.client
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Mc, Memcached, Proxy, Redis, Resp, fail, free_ports, log,  # noqa: E402
                          pool_yaml, run_test, sigstop, start_memcacheds, start_redises,
                          wait_until, write_file)

POOL = "rep"
NKEYS = 600
WAIT = 20.0


def owners(chash, conf, keys, n):
    """{key: [owner host:port, ...]} by `chash lookup --replicas n` (the walk's first n)."""
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    r = subprocess.run([chash, "lookup", "--config", conf, "--pool", POOL, "--replicas", str(n),
                        "-"], input=b"".join(k + b"\n" for k in keys), capture_output=True,
                       timeout=60, env=env)
    if r.returncode != 0:
        fail("chash lookup exited %d: %s" % (r.returncode, r.stderr.decode(errors="replace")))
    out = {}
    for k, line in zip(keys, r.stdout.split(b"\n")):
        parts = line.split(b"\t")
        if parts[0] != k or len(parts) != n + 1:
            fail("unexpected chash lookup line %r" % line[:200])
        out[k] = [p.decode() for p in parts[1:]]
    if len(out) != len(keys) or len(set(map(tuple, out.values()))) < 2:
        fail("chash lookup: %d lines for %d keys" % (len(out), len(keys)))
    return out


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics")
        body = c.getresponse().read().decode()
    finally:
        c.close()
    return {m.group(1): int(m.group(2)) for m in re.finditer(
        r'^chash_proxy_(replica_\w+|warm_up_\w+)_total\{pool="%s"\} (\d+)$' % POOL, body, re.M)}


def repairs_done(mport):
    """The replica counters once every replica read's repair has ended (a store or a skip)."""
    last = [None]

    def done():
        last[0] = metrics(mport)
        return last[0].get("replica_repairs", 0) + last[0].get("replica_repair_skips", 0) == \
            last[0].get("replica_reads", -1)
    wait_until(done, WAIT, lambda: "every repair ended (%r)" % last[0], poll=0.05)
    return last[0]


# ---- the two protocols ---------------------------------------------------------------------


class RedisKind:
    name, redis = "redis", True
    Client = Resp

    @staticmethod
    def write(c, pairs):
        """Half by SET, half by MSET; every reply must be OK."""
        half = len(pairs) // 2
        cmds = [("SET", k, v) for k, v in pairs[:half]]
        for i in range(half, len(pairs), 25):
            cmds.append(tuple(["MSET"] + [x for kv in pairs[i:i + 25] for x in kv]))
        got = c.pipeline(cmds)
        bad = [g for g in got if g != b"OK"]
        if bad:
            fail("writes through the proxy answered %r" % bad[:3])

    @staticmethod
    def read(c, keys):
        """{key: value or None}: half by GET, half by MGET of 25 keys; errors fail."""
        half = len(keys) // 2
        cmds = [("GET", k) for k in keys[:half]]
        cmds += [tuple(["MGET"] + keys[i:i + 25]) for i in range(half, len(keys), 25)]
        got = c.pipeline(cmds)
        errors = [g for g in got if isinstance(g, Exception)]
        if errors:
            fail("%d reads answered an error, e.g. %r" % (len(errors), errors[0]))
        out = dict(zip(keys[:half], got[:half]))
        for i, g in zip(range(half, len(keys), 25), got[half:]):
            out.update(zip(keys[i:i + 25], g))
        return out

    @staticmethod
    def delete(c, keys):
        """A DEL of 10 keys at a time; answers the count of keys that existed."""
        got = c.pipeline([tuple(["DEL"] + keys[i:i + 10]) for i in range(0, len(keys), 10)])
        if any(isinstance(g, Exception) for g in got):
            fail("DEL answered %r" % got[:3])
        return sum(got)

    @staticmethod
    def held(srv, keys):
        with Resp(srv.addr) as d:
            return {k: v for k, v in zip(keys, d.pipeline([("GET", k) for k in keys]))
                    if v is not None}

    @staticmethod
    def drop(srv, k):
        srv.call("DEL", k)

    @staticmethod
    def start(exe, tmp, n):
        return start_redises(exe, tmp, n)

    @staticmethod
    def restart(exe, tmp, srv):
        return Redis(exe, tmp, port=srv.port).start()


class McKind:
    name, redis = "memcached", False
    Client = Mc

    @staticmethod
    def write(c, pairs):
        c.send(b"".join(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(v), v) for k, v in pairs))
        got = [c.reply() for _ in pairs]
        bad = [g for g in got if g != b"STORED\r\n"]
        if bad:
            fail("sets through the proxy answered %r" % bad[:3])

    @staticmethod
    def read(c, keys):
        """{key: value or None}: half by single gets, half by gets of 25 keys."""
        half = len(keys) // 2
        out = {k: None for k in keys}
        for k in keys[:half]:
            rep = c.call(b"get %s\r\n" % k)
            if rep.startswith(b"VALUE "):
                out[k] = rep.split(b"\r\n")[1]
            elif rep != b"END\r\n":
                fail("get %r answered %r" % (k, rep[:200]))
        for i in range(half, len(keys), 25):
            out.update(c.get_many(keys[i:i + 25]))
        return out

    @staticmethod
    def delete(c, keys):
        c.send(b"".join(b"delete %s\r\n" % k for k in keys))
        got = [c.reply() for _ in keys]
        if any(g not in (b"DELETED\r\n", b"NOT_FOUND\r\n") for g in got):
            fail("deletes answered %r" % got[:3])
        return sum(g == b"DELETED\r\n" for g in got)

    @staticmethod
    def held(srv, keys):
        with Mc(srv.addr) as d:
            out = {}
            for i in range(0, len(keys), 100):
                out.update(d.get_many(keys[i:i + 100]))
            return out

    @staticmethod
    def drop(srv, k):
        with Mc(srv.addr) as d:
            d.call(b"delete %s\r\n" % k)

    @staticmethod
    def start(exe, tmp, n):
        return start_memcacheds(exe, tmp, n)

    @staticmethod
    def restart(exe, tmp, srv):
        return Memcached(exe, tmp, port=srv.port).start()


# ---- one pool ------------------------------------------------------------------------------


class Setup:
    def __init__(self, t, kind, exe, n, label, nservers=4, members=4, **extra):
        self.t, self.kind, self.exe, self.n, self.label = t, kind, exe, n, label
        self.servers = kind.start(exe, t.tmp, nservers)
        self.port, self.mport = free_ports(2)
        self.addr = ("127.0.0.1", self.port)
        self.extra = extra
        self.conf = self.write_conf(self.servers[:members], label)
        self.proxy = Proxy(t.proxy, t.tmp, self.conf, [self.addr, ("127.0.0.1", self.mport)],
                           label=label, extra_args=["--metrics-port", str(self.mport),
                                                    "--threads", "2"]).start()

    def write_conf(self, servers, name, **more):
        settings = dict(hash="md5", distribution="ketama", auto_eject_hosts=True,
                        server_failure_limit=1, server_retry_timeout=300, timeout=1000,
                        replicas=self.n)
        settings.update(self.extra)
        settings.update(more)
        return write_file(os.path.join(self.t.tmp, name + ".yml"), pool_yaml(
            POOL, self.port, [(s.text, 1, None) for s in servers], redis=self.kind.redis,
            **settings))

    def by_text(self):
        return {s.text: s for s in self.servers}

    def ejects(self):
        return self.proxy.stats_json()[POOL]["server_ejects"]


def placement(s, keys):
    """Keys written through the proxy are on exactly their N owners; deletes reach them all."""
    kind = s.kind
    own = owners(s.t.chash, s.conf, keys, s.n)
    with kind.Client(s.addr) as c:
        kind.write(c, [(k, b"v1:" + k) for k in keys])
    held = {srv.text: kind.held(srv, keys) for srv in s.servers}
    for k in keys:
        on = sorted(t for t, h in held.items() if h.get(k) == b"v1:" + k)
        if on != sorted(own[k]):
            fail("%s: key %r is on %s, its %d owners are %s" % (s.label, k, on, s.n,
                                                                sorted(own[k])))
    gone = keys[::10]
    with kind.Client(s.addr) as c:
        count = kind.delete(c, gone)
        if count != len(gone):
            fail("%s: deletes of %d keys that exist counted %d" % (s.label, len(gone), count))
        got = kind.read(c, keys)
    for srv in s.servers:
        left = kind.held(srv, gone)
        if left:
            fail("%s: %d deleted keys still on %s, e.g. %r" % (s.label, len(left), srv.text,
                                                               sorted(left)[:3]))
    want = {k: (None if k in set(gone) else b"v1:" + k) for k in keys}
    wrong = [k for k in keys if got[k] != want[k]]
    if wrong:
        fail("%s: %d reads (GET and multi-key) wrong after the writes, e.g. %r -> %r" % (
            s.label, len(wrong), wrong[0], got[wrong[0]]))
    return own, want


def lost_node(s, keys, own, want):
    """kill -9 of one server: 0 errors, 0 misses; its return: repaired from the next owner."""
    kind = s.kind
    victim = s.servers[1]
    victim.kill()
    with kind.Client(s.addr) as c:
        got = kind.read(c, keys)  # errors fail inside
        again = kind.read(c, keys)  # and once it is ejected
    for g in (got, again):
        wrong = [k for k in keys if g[k] != want[k]]
        if wrong:
            fail("%s: %d reads wrong with %s killed, e.g. %r -> %r (owners %s)" % (
                s.label, len(wrong), victim.text, wrong[0], g[wrong[0]], own[wrong[0]]))
    served = sum(1 for k in keys if victim.text in own[k] and want[k] is not None)
    # Its return: a new, empty server on the same port.
    back = kind.restart(s.exe, s.t.tmp, victim)
    s.servers[1] = back
    first = [k for k in keys if own[k][0] == victim.text and want[k] is not None]
    probe = first[0]
    with kind.Client(s.addr) as c:
        def readmitted():
            kind.write(c, [(probe, want[probe])])
            return kind.held(back, [probe]).get(probe) == want[probe]
        wait_until(readmitted, WAIT, "%s: %s readmitted" % (s.label, back.text), poll=0.1)
        before = metrics(s.mport).get("replica_reads", 0)
        got = kind.read(c, keys)
    wrong = [k for k in keys if got[k] != want[k]]
    if wrong:
        fail("%s: %d reads wrong after %s came back empty, e.g. %r -> %r" % (
            s.label, len(wrong), back.text, wrong[0], got[wrong[0]]))
    m = repairs_done(s.mport)
    if m["replica_reads"] - before < len(first) - 1:
        fail("%s: %d replica reads for the %d keys first owned by the returned server" % (
            s.label, m["replica_reads"] - before, len(first)))
    have = kind.held(back, first)
    missing = [k for k in first if have.get(k) != want[k]]
    if missing:
        fail("%s: %d of the %d keys first owned by %s not copied back to it, e.g. %r" % (
            s.label, len(missing), len(first), back.text, missing[0]))
    return served, len(first)


def rejoin(s, keys, own):
    """SIGSTOP until ejected; its keys rewritten and deleted meanwhile; no stale read after."""
    kind = s.kind
    for srv in s.servers:
        srv.call("FLUSHALL")
    with kind.Client(s.addr) as c:
        kind.write(c, [(k, b"v1:" + k) for k in keys])
    B = s.servers[2]
    mine = [k for k in keys if B.text in own[k]]
    gone = set(mine[::10])
    ejects = s.ejects()
    sigstop(B.proc.pid)
    try:
        with kind.Client(s.addr) as c:
            # A partial failure: a write whose second owner (B, not ejected yet) times out is
            # answered with that failure, not the primary's OK (which took it).
            second = next(k for k in mine if own[k][1] == B.text and k not in gone)
            got = c.call("SET", second, b"v2:" + second)
            if not isinstance(got, Exception):
                fail("%s: a SET whose second owner timed out answered %r, want an error" % (
                    s.label, got))
            if s.by_text()[own[second][0]].call("GET", second) != b"v2:" + second:
                fail("%s: the primary of %r did not take the partially failed write" % (
                    s.label, second))
            first = [k for k in mine if own[k][0] == B.text]

            def ejected():  # a read of a key B owns first: it times out there
                kind.read(c, first[:1])
                return s.ejects() > ejects
            wait_until(ejected, WAIT, "%s: %s ejected" % (s.label, B.text), poll=0.05)
            kind.write(c, [(k, b"v2:" + k) for k in mine])
            kind.delete(c, sorted(gone))
    finally:
        os.kill(B.proc.pid, signal.SIGCONT)
    # Not the partially failed SET's key: B may apply that SET, left in its socket, on resuming.
    probe = next(k for k in mine if k not in gone and k != second)
    with kind.Client(s.addr) as c:
        def readmitted():
            kind.write(c, [(probe, b"v2:" + probe)])
            return kind.held(B, [probe]).get(probe) == b"v2:" + probe
        wait_until(readmitted, WAIT, "%s: %s readmitted" % (s.label, B.text), poll=0.1)
        got = kind.read(c, keys)
    mine_set = set(mine)
    stale = [k for k in mine if got[k] == b"v1:" + k]
    if stale:
        fail("%s: %d reads returned the value %s held before it was ejected, e.g. %r" % (
            s.label, len(stale), B.text, stale[0]))
    want = {k: None if k in gone else (b"v2:" + k if k in mine_set else b"v1:" + k)
            for k in keys}
    wrong = [k for k in keys if got[k] != want[k]]
    if wrong:
        fail("%s: %d reads wrong after the rejoin, e.g. %r -> %r" % (s.label, len(wrong),
                                                                       wrong[0], got[wrong[0]]))
    old = [k for k, v in kind.held(B, mine).items() if v == b"v1:" + k]
    if old:
        fail("%s: %d keys written while %s was out still hold their old value on it, e.g. %r"
             % (s.label, len(old), B.text, old[0]))
    return len(mine)


def no_overwrite(s, keys, own):
    """A repair racing a newer write never leaves the older value."""
    by_text = s.by_text()
    ks = keys[:200]
    with Resp(s.addr) as c:
        RedisKind.write(c, [(k, b"v1:" + k) for k in ks])
    for k in ks:
        by_text[own[k][0]].call("DEL", k)
    with Resp(s.addr) as c:
        got = c.pipeline([x for k in ks for x in (("GET", k), ("SET", k, b"v2:" + k))])
    if any(g not in (b"v1:" + k, b"v2:" + k, b"OK") for k, g in zip(
            [k for k in ks for _ in (0, 1)], got)):
        fail("%s: GET + SET pipelines answered %r" % (s.label, got[:4]))
    m = repairs_done(s.mport)
    for k in ks:
        for o in own[k]:
            v = by_text[o].call("GET", k)
            if v != b"v2:" + k:
                fail("%s: %r holds %r on its owner %s after a repair raced its SET of v2" % (
                    s.label, k, v, o))
    return m


def reload_to(s, conf, live, members, what):
    """Moves conf over the live file, SIGHUP, and waits until INFO names every member."""
    os.rename(conf, live)
    s.proxy.proc.send_signal(signal.SIGHUP)

    def serving():
        with Resp(s.addr) as c:
            info = c.call("INFO")
        return b"servers:%d" % len(members) in info and all(
            m.text.encode() in s.proxy.stats() for m in members)
    wait_until(serving, WAIT, what, poll=0.1)


def reload_grow(t, redis_exe):
    """4 -> 5 servers with replicas 2 and warm_up: reads stay hits, then fresh; then two servers
    replaced: keys new to both their owners are copied to both."""
    s = Setup(t, RedisKind, redis_exe, 2, "redis-grow", nservers=6, members=4)
    live, five = s.conf, s.servers[:5]  # the live file: 4 servers
    keys = [b"g:%d" % i for i in range(NKEYS)]
    with Resp(s.addr) as c:
        RedisKind.write(c, [(k, b"v1:" + k) for k in keys])
    c5 = s.write_conf(five, "redis-grow5", warm_up=120000)
    own4 = owners(t.chash, live, keys, 2)
    own5 = owners(t.chash, c5, keys, 2)
    moved = [k for k in keys if own4[k][0] != own5[k][0]]
    reload_to(s, c5, live, five, "the reload to 5 servers")
    with Resp(s.addr) as c:
        got = RedisKind.read(c, keys)
    wrong = [k for k in keys if got[k] != b"v1:" + k]
    if wrong:
        fail("grow: %d of %d reads missed or wrong after the reload, e.g. %r -> %r" % (
            len(wrong), len(keys), wrong[0], got[wrong[0]]))
    with Resp(s.addr) as c:
        RedisKind.write(c, [(k, b"v2:" + k) for k in keys])
        got = RedisKind.read(c, keys)
    wrong = [k for k in keys if got[k] != b"v2:" + k]
    if wrong:
        fail("grow: %d reads not fresh after the writes, e.g. %r -> %r" % (
            len(wrong), wrong[0], got[wrong[0]]))
    by_text = s.by_text()
    for k in keys:
        for o in own5[k]:
            if by_text[o].call("GET", k) != b"v2:" + k:
                fail("grow: %r not written to its new owner %s" % (k, o))
    # Two servers replaced (-> s0, s1, s4, s5; s2 and s3 stay alive as the window's old
    # owners): a key that none of its new owners held is read from its old owner and copied to
    # each of its new owners (the warm-up's fill, one per owner up).
    repl = [s.servers[i] for i in (0, 1, 4, 5)]
    cr = s.write_conf(repl, "redis-repl", warm_up=120000)
    ownr = owners(t.chash, cr, keys, 2)
    filled = [k for k in keys if not set(ownr[k]) & set(own5[k])]
    if not filled:
        fail("replace: no key whose new owners both lack it (the test needs some)")
    reload_to(s, cr, live, repl, "the reload replacing two servers")
    with Resp(s.addr) as c:
        got = RedisKind.read(c, keys)
    wrong = [k for k in keys if got[k] != b"v2:" + k]
    if wrong:
        fail("replace: %d reads missed or wrong after the reload, e.g. %r -> %r" % (
            len(wrong), wrong[0], got[wrong[0]]))

    def copied():
        return all(by_text[o].call("GET", k) == b"v2:" + k for k in filled for o in ownr[k])
    wait_until(copied, WAIT, "replace: the %d keys new to both their owners copied to both" %
               len(filled), poll=0.1)
    s.proxy.stop()
    return len(moved), len(filled)


def body(t):
    redis_exe, mc_exe = t.programs["redis-server"], t.programs["memcached"]
    keys = [b"r:%d" % i for i in range(NKEYS)]
    out = []
    for n in (2, 3):
        s = Setup(t, RedisKind, redis_exe, n, "redis-r%d" % n)
        own, want = placement(s, keys)
        served, first = lost_node(s, keys, own, want)
        out.append("redis r%d: kill -9: %d keys served by their other owners, %d repaired" % (
            n, served, first))
        if n == 2:
            rewritten = rejoin(s, keys, own)
            m = no_overwrite(s, keys, own)
            out.append("rejoin: %d keys rewritten, 0 stale; repairs %r" % (rewritten, m))
        s.proxy.stop()
        for srv in s.servers:
            srv.kill()
    s = Setup(t, McKind, mc_exe, 2, "mc-r2")
    own, want = placement(s, keys)
    served, first = lost_node(s, keys, own, want)
    out.append("memcached r2: kill -9: %d served, %d repaired" % (served, first))
    s.proxy.stop()
    moved, filled = reload_grow(t, redis_exe)
    out.append("grow 4 -> 5: %d first owners moved, 0 misses, %d copied to both new owners" % (
        moved, filled))
    return "; ".join(out)


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "memcached"))
