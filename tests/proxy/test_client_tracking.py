#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_client_tracking: client-side caching through the proxy (issue 37, item 4; docs/PROXY.md,
"Client-side caching"). A RESP3 client that turns CLIENT TRACKING on (default, OPTIN, OPTOUT or
BCAST mode) gets the invalidation pushes Redis would send it, for the keys it read through the
proxy (BCAST: under its prefixes), across every server of a 4-server pool, whoever wrote them.
Real redis-servers, two workers.

  1. A tracking client reads 32 keys, 8 at each of the 4 servers (GET, and MGET over servers);
     another client writes half of them through the proxy and the others straight at their
     servers, and 4 keys the tracking client never read: a push names each key read (within a
     deadline), none names the others.
     CLIENT TRACKINGINFO and GETREDIR answer as Redis does for RESP3 in-band tracking; /metrics
     counts the client and the pushes, no read untracked.
  2. NOLOOP: the client's own write of a key it read is not echoed to it (and the key is no
     longer tracked, as on Redis); another client's write of another key it read is.
  3. FLUSHALL at one server: a null push (every key). The invalidation link of one server
     killed (CLIENT KILL of a connection named chash-invalidate): a null push.
  4. CLIENT TRACKING off: no push after; HELLO 2 turns it off. Refused with a clear error: a
     pool without a live link (near_tracking: false), RESP2 without REDIRECT, REDIRECT to no
     client, BCAST with NOLOOP,
     PREFIX without BCAST, CLIENT CACHING outside OPTIN/OPTOUT.
  5. node-redis 6 (npm redis) with RESP 3 and clientSideCache reads 16 keys over the servers
     twice (the second reads its cache's hits); each key written straight at its server: each
     read after answers the new value within 5 s (its cache has no TTL: only the pushes end an
     entry).
  6. OPTIN: only the reads right after CLIENT CACHING yes are pushed; OPTOUT: every read but
     the one right after CLIENT CACHING no; a mode switched while on refused as Redis does.
  7. The connections that carried the tracked reads killed at their server (it forgets what it
     tracked for them), a reload (SIGHUP) that replaces a server: a null push each.
  9. REDIRECT (RESP2's way): the steps run at a real redis-server and through the proxy give
     the same bytes: A (RESP2) SUBSCRIBEs to __redis__:invalidate, B's REDIRECT to a bad id
     refused, to A's accepted, TRACKINGINFO, the message of a key B read and written
     elsewhere, FLUSHALL's null message, tracking-redir-broken to a RESP3 C once A is gone,
     C's TRACKINGINFO with broken_redirect. Then 8 RESP2 B's (4 on A's worker, 4 on the
     other: INFO's worker_id) read 8 keys each over the 4 servers, written at the servers: A
     gets each key's message once, none for 8 keys not read; NOLOOP; a RESP3 target gets the
     push; redis-py 4 (python3-redis): pubsub on __redis__:invalidate,
     client_tracking_on(clientid=).
  8. BCAST with two prefixes, through a one-worker proxy: once registered at every server (a
     null push each), a push for every key under them written through the proxy or straight at
     a server, none read by the client; none for keys outside them (markers); a default-mode
     client of the same worker (same links) still pushed; FLUSHALL a null push.

Every part fails on a proxy without client-side caching (464c3d5, main: CLIENT TRACKING
refused; part 5: node-redis's handshake fails); part 9 before REDIRECT was served (122b3f0:
REDIRECT refused).

Usage: test_client_tracking.py CHASH_PROXY CHASH_CLI [--part N]...
Exit: 0 pass, 1 fail, 77 skip (redis-server missing, CI unset).
"""
import hashlib
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Push, Resp, RespError, encode, fail, free_ports, log,  # noqa: E402
                          pool_yaml,
                          poll_until, run_test, start_redises, wait_until, write_file)
import promtext  # noqa: E402

DEADLINE = 5.0  # s: a push expected arrives within this (measured: well under 1 ms)


class Tracker(Resp):
    """A RESP3 connection that sets aside the invalidation pushes it reads between replies."""

    def __init__(self, addr):
        super().__init__(addr)
        self.pushes = []  # each: a list of key bytes, or None (every key)
        if not isinstance(self.call("HELLO", "3"), dict):
            fail("HELLO 3 through the proxy")

    def reply(self):
        while True:
            r = self.read()
            if isinstance(r, Push):
                self.take(r)
                continue
            return r

    def take(self, r):
        if len(r) != 2 or r[0] != b"invalidate":
            fail("a push that is not an invalidation: %r" % (r,))
        self.pushes.append(r[1])

    def call(self, *args):
        from proxyharness import encode
        self.sock.sendall(encode(*args))
        return self.reply()

    def drain(self, until, what):
        """Reads pushes until until(self) holds, DEADLINE at most."""
        end = time.monotonic() + DEADLINE
        while not until(self):
            left = end - time.monotonic()
            if left <= 0:
                fail("%s: not within %.0f s; pushes so far: %r" % (what, DEADLINE, self.pushes))
            self.sock.settimeout(left)
            try:
                r = self.read()
            except socket.timeout:
                continue
            finally:
                self.sock.settimeout(10.0)
            if not isinstance(r, Push):
                fail("%s: a reply where a push was awaited: %r" % (what, r))
            self.take(r)

    def keys(self):
        out = set()
        for p in self.pushes:
            if p is not None:
                out.update(p)
        return out

    def flushes(self):
        return sum(1 for p in self.pushes if p is None)

    def barrier(self, w, redises, keys, what, caching=False):
        """Every invalidation the servers of keys sent before now for this client delivered:
        per server a marker key of it read (tracked; caching: after CLIENT CACHING yes) and
        written through w, and its push awaited. A server's invalidations come to the client's
        worker on one link, in order, so a push owed (or wrongly sent) for an earlier write
        there comes before the marker's. Returns the markers."""
        marks = []
        for srv in {owner(redises, k).addr: owner(redises, k) for k in keys}.values():
            m = marker_of(w, redises, srv)
            if caching:
                self.call("CLIENT", "CACHING", "yes")
            self.call("GET", m)
            marks.append(m.encode())
        for m in marks:
            w.call("SET", m, "1")
        self.drain(lambda c: set(marks) <= c.keys(), what)
        return set(marks)

    def settle(self):
        """A round trip: every push the proxy queued before it is read."""
        if self.call("PING") != b"PONG":
            fail("PING")


def owner(redises, key):
    for r in redises:
        if r.call("EXISTS", key) == 1:
            return r
    fail("no server holds %r" % key)


def marker_of(w, redises, srv):
    """A key (written through w) that srv owns."""
    for i in range(400):
        k = "mk:" + hashlib.md5(b"m%d" % i).hexdigest()[:8]
        w.call("SET", k, "0")
        if owner(redises, k) is srv:
            return k
    fail("no key of %s among 400" % srv.text)


def links(srv):
    text = srv.call("CLIENT", "LIST").decode()
    return [line.split("id=", 1)[1].split(" ", 1)[0] for line in text.splitlines()
            if "name=chash-invalidate" in line]


def part1(redises, addr, mport):
    # 8 keys of each server: candidates written through the proxy, then found at their owner
    by_server = {r.addr: [] for r in redises}
    with Resp(addr) as w:
        for i in range(400):
            k = "k:" + hashlib.md5(b"%d" % i).hexdigest()[:8]  # short similar names cluster
            w.call("SET", k, "v0")
            o = owner(redises, k).addr
            if len(by_server[o]) < 8:
                by_server[o].append(k)
            if all(len(v) == 8 for v in by_server.values()):
                break
        if not all(by_server.values()):
            fail("1. keys at %r only" % {r.text: len(by_server[r.addr]) for r in redises})
        read = [k for ks in by_server.values() for k in ks]
        other = ["u%d" % i for i in range(4)]
        for k in other:
            w.call("SET", k, "v0")
        for k in read:
            w.call("SET", k, "v0")
    with Tracker(addr) as t, Resp(addr) as w:
        if t.call("CLIENT", "TRACKING", "on") != b"OK":
            fail("1. CLIENT TRACKING on: %r" % (t.call("CLIENT", "TRACKING", "on"),))
        info = t.call("CLIENT", "TRACKINGINFO")
        if not isinstance(info, dict) or info.get(b"flags") != {b"on"} or \
                info.get(b"redirect") != 0 or info.get(b"prefixes") != []:
            fail("1. CLIENT TRACKINGINFO: %r" % (info,))
        if t.call("CLIENT", "GETREDIR") != 0:
            fail("1. CLIENT GETREDIR is not 0 with in-band tracking")
        for k in read:
            if t.call("GET", k) != b"v0":
                fail("1. GET %s" % k)
        if t.call("MGET", *read[:4]) != [b"v0"] * 4:
            fail("1. MGET")
        for k in read[::2] + other:
            w.call("SET", k, "v1")
        for k in read[1::2]:
            owner(redises, k).call("SET", k, "v2")
        want = {k.encode() for k in read}
        t.drain(lambda c: want <= c.keys(), "1. a push for each key read")
        marks = t.barrier(w, redises, other, "1. the markers after the other keys' writes")
        stray = t.keys() - want - marks
        if stray or t.flushes():
            fail("1. pushes for keys not read: %r (flushes %d)" % (stray, t.flushes()))

        def counted():  # each worker's table is read at its tick (100 ms)
            fams = promtext.scrape(mport)
            return (promtext.value(fams, "chash_proxy_client_tracking_clients", pool="p") == 1 and
                    promtext.value(fams, "chash_proxy_client_tracking_pushes_total",
                                   pool="p") >= len(read) and
                    promtext.value(fams, "chash_proxy_client_tracking_untracked_total",
                                   pool="p") == 0)
        wait_until(counted, DEADLINE, "1. /metrics: 1 tracking client, %d pushes, 0 untracked" %
                   len(read))
    log("1. %d keys read over %d servers, half written through the proxy and half at the "
        "servers: a push for each, none for the 4 not read" % (
            len(read), sum(1 for v in by_server.values() if v)))


def part2(redises, addr):
    with Tracker(addr) as n, Resp(addr) as w:
        if n.call("CLIENT", "TRACKING", "on", "NOLOOP") != b"OK":
            fail("2. CLIENT TRACKING on NOLOOP")
        flags = n.call("CLIENT", "TRACKINGINFO").get(b"flags")
        if flags != {b"on", b"noloop"}:
            fail("2. TRACKINGINFO flags %r" % (flags,))
        n.call("GET", "na")
        n.call("GET", "nb")
        if n.call("SET", "na", "mine") != b"OK":
            fail("2. SET")
        w.call("SET", "nb", "theirs")
        n.drain(lambda c: b"nb" in c.keys(), "2. the push for another client's write")
        n.settle()
        w.call("SET", "na", "theirs")  # na is no longer tracked after the client's own write
        n.barrier(w, redises, ["na"], "2. the marker after na's writes")
        if b"na" in n.keys() or n.flushes():
            fail("2. NOLOOP: the client's own write was echoed: %r" % n.pushes)
    log("2. NOLOOP: the own write not echoed, another client's write pushed")


def part3(redises, addr):
    with Tracker(addr) as t:
        t.call("CLIENT", "TRACKING", "on")
        t.call("GET", "f1")
        redises[1].call("FLUSHALL")
        t.drain(lambda c: c.flushes() >= 1, "3. a null push on FLUSHALL")
        t.pushes.clear()
        t.call("GET", "f1")
        srv = redises[2]
        ids = links(srv)
        if not ids:
            fail("3. no invalidation link at %s" % srv.text)
        srv.call("CLIENT", "KILL", "ID", ids[0])
        if len(ids) > 1:
            srv.call("CLIENT", "KILL", "ID", ids[1])
        t.drain(lambda c: c.flushes() >= 1, "3. a null push when the invalidation link is "
                "killed")
    log("3. FLUSHALL and the link killed: a null push each")


def part4(redises, addr, nt_addr):
    with Tracker(addr) as t, Resp(addr) as w:
        t.call("CLIENT", "TRACKING", "on")
        t.call("GET", "o1")
        if t.call("CLIENT", "TRACKING", "off") != b"OK":
            fail("4. CLIENT TRACKING off")
        if t.call("CLIENT", "GETREDIR") != -1:
            fail("4. GETREDIR after off")
        w.call("SET", "o1", "x")
        t.call("CLIENT", "TRACKING", "on")  # for the marker: o1 was read before, while on
        marks = t.barrier(w, redises, ["o1"], "4. the marker after o1's write")
        if t.keys() - marks or t.flushes():
            fail("4. pushes after tracking off: %r" % t.pushes)
        t.call("CLIENT", "TRACKING", "off")
        for args in (("BCAST", "NOLOOP"), ("PREFIX", "a"), ("REDIRECT", "987654321")):
            r = t.call("CLIENT", "TRACKING", "on", *args)
            if not isinstance(r, RespError):
                fail("4. CLIENT TRACKING on %s: %r, want an error" % (" ".join(args), r))
        r = t.call("CLIENT", "CACHING", "yes")
        if not isinstance(r, RespError):
            fail("4. CLIENT CACHING yes outside OPTIN: %r" % (r,))
    with Tracker(addr) as t:  # HELLO 2 ends tracking (RESP2 cannot carry pushes)
        t.call("CLIENT", "TRACKING", "on")
        t.call("HELLO", "2")
        if t.call("CLIENT", "GETREDIR") != -1:
            fail("4. tracking still on after HELLO 2")
    with Resp(addr) as r2:
        r = r2.call("CLIENT", "TRACKING", "on")
        if not isinstance(r, RespError) or "RESP3" not in str(r):
            fail("4. RESP2 CLIENT TRACKING on: %r, want an error naming RESP3" % (r,))
    with Tracker(nt_addr) as t:
        r = t.call("CLIENT", "TRACKING", "on")
        if not isinstance(r, RespError) or "near_tracking" not in str(r):
            fail("4. a pool without tracking: %r, want an error naming near_tracking" % (r,))
    log("4. off: no push after; refused with an error: RESP2, BCAST with NOLOOP, PREFIX "
        "without BCAST, REDIRECT, CACHING outside OPTIN/OPTOUT, a pool without tracking")


def part6(redises, addr):
    with Tracker(addr) as t, Tracker(addr) as o, Resp(addr) as w:
        if t.call("CLIENT", "TRACKING", "on", "OPTIN") != b"OK" or \
                o.call("CLIENT", "TRACKING", "on", "OPTOUT") != b"OK":
            fail("6. CLIENT TRACKING on OPTIN / OPTOUT")
        t.call("GET", "in-no")            # not after CACHING yes: not tracked
        if t.call("CLIENT", "CACHING", "yes") != b"OK":
            fail("6. CLIENT CACHING yes")
        flags = t.call("CLIENT", "TRACKINGINFO").get(b"flags")
        if flags != {b"on", b"optin", b"caching-yes"}:
            fail("6. TRACKINGINFO flags after CACHING yes: %r" % (flags,))
        t.call("CLIENT", "CACHING", "yes")
        t.call("MGET", "in-yes", "in-yes2")  # tracked
        t.call("GET", "in-no2")            # the choice was the MGET's only
        if o.call("CLIENT", "CACHING", "no") != b"OK":
            fail("6. CLIENT CACHING no")
        o.call("GET", "out-no")           # after CACHING no: not tracked
        o.call("GET", "out-yes")          # tracked
        for k in ("in-no", "in-yes", "in-yes2", "in-no2", "out-no", "out-yes"):
            w.call("SET", k, "x")
        t.drain(lambda c: {b"in-yes", b"in-yes2"} <= c.keys(), "6. OPTIN's pushes")
        o.drain(lambda c: b"out-yes" in c.keys(), "6. OPTOUT's push")
        mt = t.barrier(w, redises, ["in-no", "in-no2"], "6. OPTIN's markers", caching=True)
        mo = o.barrier(w, redises, ["out-no"], "6. OPTOUT's marker")
        if t.keys() - mt != {b"in-yes", b"in-yes2"} or o.keys() - mo != {b"out-yes"}:
            fail("6. pushes OPTIN %r, OPTOUT %r" % (t.pushes, o.pushes))
        r = t.call("CLIENT", "TRACKING", "on", "OPTOUT")
        if not isinstance(r, RespError) or "switch" not in str(r):
            fail("6. a mode switched while on: %r" % (r,))
    log("6. OPTIN: only the reads after CLIENT CACHING yes pushed; OPTOUT: all but the one "
        "after CLIENT CACHING no")


def part7(t, redises, spare, px, conf_text, addr):
    with Tracker(addr) as t1:
        t1.call("CLIENT", "TRACKING", "on")
        # the connections that carried the tracked reads killed at one server (it forgets what
        # it tracked for them): a null push
        t1.call("GET", "f7")
        srv = owner_or_any(redises, "f7")
        me = srv.call("CLIENT", "ID")
        text = srv.call("CLIENT", "LIST").decode()
        fills = [line.split("id=", 1)[1].split(" ", 1)[0] for line in text.splitlines()
                 if "name=chash-invalidate" not in line and "id=%d " % me not in line]
        for i in fills:
            srv.call("CLIENT", "KILL", "ID", i)
        t1.drain(lambda c: c.flushes() >= 1, "7. a null push when the tracked reads' "
                 "connections are killed")
        t1.pushes.clear()
        # a reload that replaces a server (keys change owner): a null push
        t1.call("GET", "f7")
        reloads = px.stats_json().get("reloads")
        write_file(px.config, conf_text(redises[:3] + [spare]))
        px.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: px.stats_json().get("reloads") == reloads + 1, 10, "the reload")
        t1.drain(lambda c: c.flushes() >= 1, "7. a null push after a reload replaced a server")
        write_file(px.config, conf_text(redises))
        px.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: px.stats_json().get("reloads") == reloads + 2, 10, "the reload back")
        # the links to the server added back live before the next part: a read sent to it
        # before is not tracked, and its client is sent a null push
        for r in redises:
            wait_until(lambda: len(links(r)) >= 2, 10, "the links back at %s" % r.text)
    log("7. the tracked reads' connections killed (%d), a server replaced by a reload: a null "
        "push each" % len(fills))


def part8(t, redises):
    # one worker: the BCAST client, a default-mode client and the near cache share its links
    port1, = free_ports(1)
    servers = [(r.text, 1, "s%d" % i) for i, r in enumerate(redises)]
    px1 = Proxy(t.proxy, t.tmp, write_file(os.path.join(t.tmp, "one.yml"), pool_yaml(
        "p", port1, servers, hot_cache=60000, hot_threshold=1000000)),
        [("127.0.0.1", port1)], label="one", extra_args=["--threads", "1"]).start()
    addr = ("127.0.0.1", port1)
    for r in redises:
        wait_until(lambda: len(links(r)) >= 3, 10, "the one-worker proxy's link at %s" % r.text)
    with Tracker(addr) as b, Tracker(addr) as d, Resp(addr) as w:
        d.call("CLIENT", "TRACKING", "on")
        if b.call("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "bc:", "PREFIX", "user:") != \
                b"OK":
            fail("8. CLIENT TRACKING on BCAST PREFIX bc: PREFIX user:")
        info = b.call("CLIENT", "TRACKINGINFO")
        if info.get(b"flags") != {b"on", b"bcast"} or \
                sorted(info.get(b"prefixes")) != [b"bc:", b"user:"]:
            fail("8. TRACKINGINFO %r" % (info,))
        # each of this worker's links registers the prefixes at its server: a null push each
        b.drain(lambda c: c.flushes() >= len(redises), "8. the prefixes registered at every "
                "server (a null push per server)")
        b.pushes.clear()
        keys = ["bc:" + hashlib.md5(b"b%d" % i).hexdigest()[:8] for i in range(12)] + \
               ["user:" + hashlib.md5(b"u%d" % i).hexdigest()[:8] for i in range(4)]
        outside = ["zz:" + hashlib.md5(b"z%d" % i).hexdigest()[:8] for i in range(4)]
        for k in keys[::2] + outside:  # none of them read by the client: BCAST needs no read
            w.call("SET", k, "1")
        for k in keys[1::2]:
            w.call("SET", k, "0")
            owner(redises, k).call("SET", k, "1")  # straight at the server
        want = {k.encode() for k in keys}
        b.drain(lambda c: want <= c.keys(), "8. a push for each key under the prefixes")
        marks = set()
        for srv in {owner(redises, k).addr: owner(redises, k) for k in outside}.values():
            for i in range(400):  # a marker under a prefix, at the server of an outside key
                m = "bc:mk" + hashlib.md5(b"%d" % i).hexdigest()[:8]
                w.call("SET", m, "0")
                if owner(redises, m) is srv:
                    marks.add(m.encode())
                    break
        b.drain(lambda c: marks <= c.keys(), "8. the markers' pushes")
        stray = {k for k in b.keys() if not k.startswith((b"bc:", b"user:"))}
        if stray:
            fail("8. pushes for keys outside the prefixes: %r" % stray)
        # the links in BCAST mode still carry the opt-in reads' invalidations: a default-mode
        # client's read, written at its server, pushed to it
        d.call("GET", outside[0])
        owner(redises, outside[0]).call("SET", outside[0], "2")
        d.drain(lambda c: outside[0].encode() in c.keys(), "8. the default-mode client's push "
                "beside BCAST")
        # FLUSHALL: a null push
        redises[0].call("FLUSHALL")
        b.drain(lambda c: c.flushes() >= 1, "8. a null push on FLUSHALL")
    px1.stop()
    log("8. BCAST PREFIX bc: PREFIX user:: a push for each of %d keys under them written "
        "through the proxy or at the servers, none read; none for keys outside; a default-mode "
        "client on the same worker still pushed; FLUSHALL a null push" % len(keys))


def owner_or_any(redises, key):
    for r in redises:
        if r.call("EXISTS", key) == 1:
            return r
    return redises[0]


NPM_MODULES = "/usr/local/lib/chash-oracles/node_modules"  # scripts/bootstrap installs them


def part5(redises, addr):
    node = shutil.which("node")
    if node is None or not os.path.isdir(os.path.join(NPM_MODULES, "redis")):
        if os.environ.get("CI"):
            fail("5. node or node-redis (%s) missing" % NPM_MODULES)
        log("5. skipped: node or node-redis (%s) missing" % NPM_MODULES)
        return
    keys = ["n:" + hashlib.md5(b"n%d" % i).hexdigest()[:8] for i in range(16)]
    with Resp(addr) as w:
        for k in keys:
            w.call("SET", k, "old")
    servers = {owner(redises, k).addr for k in keys}
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "csc_node.js")
    env = dict(os.environ, NODE_PATH=NPM_MODULES)
    p = subprocess.Popen([node, script, addr[0], str(addr[1]), "old", "new"] + keys, env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        if not select.select([p.stdout], [], [], 30)[0]:
            p.kill()
            fail("5. node-redis not ready within 30 s: %s" % p.stderr.read()[-2000:])
        line = p.stdout.readline()
        if line.strip() != "ready":
            p.kill()
            fail("5. node-redis: %r %s" % (line, p.stderr.read()[-2000:]))
        for k in keys:
            owner(redises, k).call("SET", k, "new")
        out, err = p.communicate("go\n", timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("5. node-redis did not finish within 30 s")
    if p.returncode != 0 or not out.startswith("ok"):
        fail("5. node-redis with clientSideCache: %s" % (err[-2000:] or out))
    log("5. node-redis 6 with clientSideCache over %d servers, each key written straight at its "
        "server: its cache invalidated for every key it read (%s)" % (len(servers), out.strip()))


INVAL = b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"


def inval(key):
    """What a RESP2 REDIRECT target subscribed to __redis__:invalidate gets for key (Redis 7)."""
    return INVAL + b"*1\r\n$%d\r\n%s\r\n" % (len(key), key)


def raw_within(c, what, deadline=DEADLINE):
    """The next message's bytes on c, within deadline, or None."""
    end = time.monotonic() + deadline
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return None
        c.sock.settimeout(left)
        try:
            return c.read_raw()
        except socket.timeout:
            continue
        finally:
            c.sock.settimeout(10.0)


def redirect_steps(addr, write_at, key, bad_id):
    """The steps of part 9 whose bytes a real redis-server gives too (the oracle): A (RESP2)
    subscribes to __redis__:invalidate, B tracks with REDIRECT to A's id and reads key, which is
    written elsewhere (write_at), then FLUSHALL'd; a RESP3 C is told when A is gone. Returns
    every byte each saw, in order."""
    seen = []
    with Resp(addr) as a, Resp(addr) as b, Resp(addr) as c3:
        b.call("SET", key, "x0")  # on its server (write_at finds it there)
        aid = a.call("CLIENT", "ID")
        seen.append(a.call_raw("SUBSCRIBE", "__redis__:invalidate"))
        seen.append(b.call_raw("CLIENT", "TRACKING", "on", "REDIRECT", str(bad_id)))
        seen.append(b.call_raw("CLIENT", "TRACKING", "on", "REDIRECT", str(aid)))
        seen.append(b.call_raw("CLIENT", "TRACKINGINFO").replace(b":%d\r\n" % aid, b":A\r\n"))
        b.call("GET", key)
        write_at(key, "x1")
        seen.append(raw_within(a, "A: the invalidation of %s" % key))
        b.call("SET", key, "x0")
        b.call("GET", key)
        write_at("FLUSHALL", None)
        seen.append(raw_within(a, "A: the null of FLUSHALL"))
        seen.append(c3.call_raw("HELLO", "3")[:0])
        seen.append(c3.call_raw("CLIENT", "TRACKING", "on", "REDIRECT", str(aid)))
        c3.call("SET", key, "x0")
        c3.call("GET", key)
        a.close()
        wait_until(lambda: isinstance(c3.call("CLIENT", "TRACKING", "on", "REDIRECT", str(aid)),
                                      RespError), DEADLINE, "A's close seen")
        write_at(key, "x2")
        m = raw_within(c3, "C: tracking-redir-broken")
        seen.append(m.replace(b":%d\r\n" % aid, b":A\r\n") if m else m)
        info = c3.call_raw("CLIENT", "TRACKINGINFO")
        seen.append(info.replace(b":%d\r\n" % aid, b":A\r\n"))
    return seen


def worker_of(c):
    """The worker serving connection c (INFO's worker_id)."""
    for line in c.call("INFO").decode().splitlines():
        if line.startswith("worker_id:"):
            return int(line.split(":", 1)[1])
    fail("INFO has no worker_id")


def part9(t, redises, addr):
    # the oracle: the same steps at a real redis-server, byte for byte
    oracle = start_redises(t.programs["redis-server"], t.tmp, 1)[0]

    def at_oracle(k, v):
        oracle.call("FLUSHALL") if v is None else oracle.call("SET", k, v)

    def at_owner(k, v):
        if v is None:
            for r in redises:
                r.call("FLUSHALL")
        else:
            owner_or_any(redises, k).call("SET", k, v)

    want = redirect_steps(oracle.addr, at_oracle, "rd:k", 987654321)
    got = redirect_steps(addr, at_owner, "rd:k", 987654321)
    # Redis sends a null per tracking client on FLUSHALL; the proxy's servers each flush: one
    # null or more, each byte for byte Redis's
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            fail("9. step %d: the proxy sent %r, redis-server %r" % (i, g, w))
    if want[4] != inval(b"rd:k") or want[5] != INVAL + b"$-1\r\n":
        fail("9. the oracle's bytes are not as expected: %r" % (want,))
    # 8 RESP2 B's, 4 on A's worker and 4 on the other (INFO's worker_id), each reading its own
    # keys of 4 servers
    with Resp(addr) as a, Resp(addr) as w:
        aid = a.call("CLIENT", "ID")
        awk = worker_of(a)
        a.call("SUBSCRIBE", "__redis__:invalidate")
        bs, spare = [], []
        for _ in range(64):
            b = Resp(addr)
            same = sum(1 for x in bs if worker_of(x) == awk)
            mine = worker_of(b) == awk
            if (same < 4) if mine else (len(bs) - same < 4):
                bs.append(b)
            else:
                spare.append(b)
            if len(bs) == 8:
                break
        for b in spare:
            b.close()
        if len(bs) != 8:
            fail("9. 64 connections did not give 4 on each worker")
        try:
            keys = {}
            for i, b in enumerate(bs):
                if b.call("CLIENT", "TRACKING", "on", "REDIRECT", str(aid)) != b"OK":
                    fail("9. CLIENT TRACKING on REDIRECT %d" % aid)
                keys[i] = ["rd%d:%d" % (i, j) for j in range(8)]
                for k in keys[i]:
                    w.call("SET", k, "v0")
                    b.call("GET", k)
            servers = {owner(redises, k).addr for ks in keys.values() for k in ks}
            if len(servers) != 4:
                fail("9. the keys read are on %d servers, want 4" % len(servers))
            unread = ["rdu:%d" % j for j in range(8)]
            for k in unread:
                owner_or_any(redises, k).call("SET", k, "v1")
            for ks in keys.values():
                for k in ks:
                    owner(redises, k).call("SET", k, "v1")
            expect = {inval(k.encode()) for ks in keys.values() for k in ks}
            seen = set()
            while not expect <= seen:
                m = raw_within(a, "9. A")
                if m is None:
                    fail("9. A did not get %d invalidations within %.0f s: %r" %
                         (len(expect - seen), DEADLINE, sorted(expect - seen)[:4]))
                if m not in expect:
                    fail("9. A got %r, not an invalidation of a key read" % (m,))
                seen.add(m)
            a.send(encode("PING"))
            if a.read_raw() != b"*2\r\n$4\r\npong\r\n$0\r\n\r\n":
                fail("9. A got more than the keys read (a key not read, or twice)")
            # NOLOOP: the B's own write is not sent to A; another's is
            b = bs[0]
            b.call("CLIENT", "TRACKING", "off")
            if b.call("CLIENT", "TRACKING", "on", "REDIRECT", str(aid), "NOLOOP") != b"OK":
                fail("9. REDIRECT with NOLOOP")
            b.call("GET", "rdn:own")
            b.call("GET", "rdn:other")
            b.call("SET", "rdn:own", "mine")
            w.call("SET", "rdn:other", "theirs")
            m = raw_within(a, "9. A: NOLOOP")
            if m != inval(b"rdn:other"):
                fail("9. NOLOOP: A got %r first, want rdn:other's invalidation" % (m,))
            a.send(encode("PING"))
            if a.read_raw() != b"*2\r\n$4\r\npong\r\n$0\r\n\r\n":
                fail("9. NOLOOP: the B's own write was sent to A")
        finally:
            for b in bs:
                b.close()
    # a RESP3 target gets Redis's in-band push
    with Tracker(addr) as a3, Resp(addr) as b:
        if b.call("CLIENT", "TRACKING", "on", "REDIRECT", str(a3.call("CLIENT", "ID"))) != b"OK":
            fail("9. REDIRECT to a RESP3 client")
        b.call("SET", "rd3:k", "0")
        b.call("GET", "rd3:k")
        owner_or_any(redises, "rd3:k").call("SET", "rd3:k", "1")
        a3.drain(lambda c: b"rd3:k" in c.keys(), "9. a RESP3 target's push")
    # redis-py 4 (Debian python3-redis): its pubsub on __redis__:invalidate, its tracking with
    # clientid=
    try:
        import redis
    except ImportError:
        redis = None
    if redis is None:
        if os.environ.get("CI"):
            fail("9. python3-redis missing")
    else:
        r = redis.Redis(host=addr[0], port=addr[1], socket_timeout=10)
        conn = r.connection_pool.get_connection("CLIENT")  # its id first, then its pubsub
        conn.send_command("CLIENT", "ID")
        sid = conn.read_response()
        sub = r.pubsub()
        sub.connection = conn
        sub.subscribe("__redis__:invalidate")
        if sub.get_message(timeout=DEADLINE)["type"] != "subscribe":
            fail("9. redis-py: no subscribe confirmation")
        b = redis.Redis(host=addr[0], port=addr[1], socket_timeout=10,
                        single_connection_client=True)
        if not b.client_tracking_on(clientid=sid):
            fail("9. redis-py: client_tracking_on(clientid=%r)" % sid)
        b.set("rdpy:k", "0")
        b.get("rdpy:k")
        owner_or_any(redises, "rdpy:k").call("SET", "rdpy:k", "1")
        m = sub.get_message(timeout=DEADLINE)
        if m is None or m["channel"] != b"__redis__:invalidate" or m["data"] != [b"rdpy:k"]:
            fail("9. redis-py: the invalidation message: %r" % (m,))
        b.close()
        sub.close()
        r.close()
    log("9. REDIRECT: a RESP2 subscriber of __redis__:invalidate gets each key 8 RESP2 clients "
        "read (over 4 servers, 4 of them on A's worker and 4 on the other) as Redis 7 writes "
        "it, none other, none of a NOLOOP client's own write; FLUSHALL's null, "
        "tracking-redir-broken, the bad id's error and TRACKINGINFO byte for byte "
        "redis-server's; a RESP3 target the push; redis-py 4's pubsub and "
        "client_tracking_on(clientid=)")


def body(t):
    redises = start_redises(t.programs["redis-server"], t.tmp, 4)
    nt, spare = start_redises(t.programs["redis-server"], t.tmp, 2)
    port, ntport, mport = free_ports(3)

    def conf_text(rs):
        servers = [(r.text, 1, "s%d" % i) for i, r in enumerate(rs)]
        return "".join([
            pool_yaml("p", port, servers, hot_cache=60000, hot_threshold=1000000),
            pool_yaml("nt", ntport, [(nt.text, 1, "n0")], hot_cache=60000,
                      near_tracking=False)])
    conf = write_file(os.path.join(t.tmp, "p.yml"), conf_text(redises))
    px = Proxy(t.proxy, t.tmp, conf, [("127.0.0.1", port), ("127.0.0.1", ntport),
                                      ("127.0.0.1", mport)], label="px",
               extra_args=["--threads", "2", "--metrics-port", str(mport)]).start()
    for r in redises:
        wait_until(lambda: len(links(r)) >= 2, 10, "an invalidation link per worker at %s" %
                   r.text)
    addr = ("127.0.0.1", port)
    parts = set(t.parts or (1, 2, 3, 4, 5, 6, 7, 8, 9))
    if 1 in parts:
        part1(redises, addr, mport)
    if 2 in parts:
        part2(redises, addr)
    if 3 in parts:
        part3(redises, addr)
        # the links back before the next part
        for r in redises:
            wait_until(lambda: len(links(r)) >= 2, 10, "the links back at %s" % r.text)
    if 4 in parts:
        part4(redises, addr, ("127.0.0.1", ntport))
    if 5 in parts:
        part5(redises, addr)
    if 6 in parts:
        part6(redises, addr)
    if 7 in parts:
        part7(t, redises, spare, px, conf_text, addr)
    if 9 in parts:
        part9(t, redises, addr)
    if 8 in parts:
        part8(t, redises)
    px.stop()
    return None


def options(parser):
    parser.add_argument("--part", dest="parts", type=int, action="append",
                        help="run this part only (repeatable; default: all)")


run_test(body, options=options)
