#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_fencing: a proxy that cannot prove its membership current answers nothing from it
(docs/FLEET.md, "Fencing"; issue 24, rows 1, 2 and 4 of its table).

A real etcd, 4 real redis-servers, three chash-proxy processes on one etcd membership
(--fleet-ttl 3), each reaching etcd through a forwarder of its own (tests/lib/forwarder.py), so
one proxy can be cut off from etcd while it still serves clients. Values are versioned: a
writer SETs k = v<n> through px0 and waits for the OK; a read that returns an older version
than the last acknowledged before it began is stale.

  1. A partition during `chash fleet apply` (3 -> 4 servers): px2's forwarder SIGSTOPped, a
     writer on px0 and a reader on px2 running. px2 fences itself before its lease can lapse
     at etcd; apply waits for that, commits without px2, exits 3 naming it; status lists it
     lost. Every read through px2 is a fresh value or the fence error, never a stale one (on
     the code before fencing: thousands stale). After SIGCONT px2 registers again, reads the
     commit, unfences, its K/lost/px2 note goes, and its reads are fresh.
  2. px1 SIGSTOPped past its lease, apply commits without it, new versions written through
     px0, then 200 GETs sent to px1 while it is still stopped, then SIGCONT: every one of the
     200 is answered with the fence error (on the old code: 200 stale), then px1 unfences on
     the new epoch and serves fresh values.
  3. membership_fenced: serve, started with etcd down: it serves its file's servers (INFO says
     fleet_fenced:1 and serve); a proxy with a long lease (--fleet-ttl 60) serves on through an
     etcd outage shorter than its lease; both take etcd's document once etcd answers.
  5. A stop between prepare and commit, within the lease (--fleet-ttl 30): the change is
     prepared by every proxy, px3 SIGSTOPped (for at least 0.6 s), the change committed, new
     values written through px0, GETs sent to px3 while it is stopped, then SIGCONT: no GET is
     answered from the old membership (a pool holding a prepared change serves only until
     250 ms after its loop last knew no commit was waiting unread; after the stop it knows that
     again only from a read of K, which swaps the commit in first).
  4. Bounded control work (issue 24, row 7): documents of 10,000 servers, then 10,001, then 3
     again (names only: nothing connects to them): each applied by every proxy, with a few
     summary log lines per change (not one per server), and no proxy fences meanwhile (its
     control thread never stalls past its keepalive: on the code before, one server added to
     10,000 took 3.8 s of control thread under ASan and fenced a 3 s lease).
  6. A prepared change dropped by a later reload (SIGHUP), on px3 (--fleet-ttl 30: a keepalive
     every 10 s): its record says so, and px3 serves on past the bound a held change serves
     under (250 ms after its loop last knew no commit was waiting), its stats not fenced. On
     the code before, the drop did not hand the fence's decision to the workers: every GET
     after the bound was refused with "... (control thread stalled)" until the next keepalive.

Usage: test_fencing.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (etcd or redis-server missing and CI unset).
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from proxyharness import (Proxy, Resp, RespError, fail, free_ports, log, resp_call,  # noqa: E402
                          run_test, sigstop, spawn, start_redises, wait_until, write_file)
import etcd  # noqa: E402
from forwarder import Forwarder  # noqa: E402

POOL = "alpha"
KEY = "/chash/pools/alpha"
WAIT = 20.0
NKEYS = 200
HELD_ALIVE = 0.25  # PX_FENCE_HELD_ALIVE_NS (proxy/fence.h), in seconds


def fence_error(why):
    return RespError("ERR chash-proxy: %s; not serving pool %s" % (why, POOL))


LEASE_LOST = fence_error("membership lease lost (etcd unreachable)")
RESYNC = fence_error("membership lease lost; reading etcd again")


def is_fence_error(r):
    """Any of the fence's errors (docs/FLEET.md): lost, being read again, not read yet."""
    return isinstance(r, RespError) and r.args[0].startswith("ERR chash-proxy: ") and \
        r.args[0].endswith("; not serving pool %s" % POOL)
NOT_READ = fence_error("membership not read from etcd yet (etcd unreachable)")


def doc(redises, names):
    return json.dumps({"servers": ["%s:1 s%d" % (redises[i].text, i) for i in names],
                       "hash": "md5"})


def conf(tmp, name, port, etcd_port, servers=(), extra=()):
    lines = ["%s:" % POOL, "  listen: 127.0.0.1:%d" % port, "  redis: true",
             "  membership: etcd://127.0.0.1:%d%s" % (etcd_port, KEY),
             "  membership_hold_down: 0"] + ["  %s" % e for e in extra]
    if servers:
        lines += ["  servers:"] + ["    - %s" % s for s in servers]
    return write_file(os.path.join(tmp, name), "\n".join(lines) + "\n")


def apply_file(tmp, redises, names):
    lines = ["%s:" % POOL, "  listen: 127.0.0.1:1", "  redis: true", "  hash: md5",
             "  servers:"] + ["    - %s:1 s%d" % (redises[i].text, i) for i in names]
    return write_file(os.path.join(tmp, "apply-%s.yml" % "".join(map(str, names))),
                      "\n".join(lines) + "\n")


def chash(cli, *args):
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    return subprocess.run([cli] + list(args), capture_output=True, text=True, timeout=90,
                          env=env)


def fenced(p):
    return p.stats_json()[POOL].get("fleet_fenced")


def wait_for(pred, what, timeout=WAIT):
    return wait_until(pred, timeout, what)


class Load(threading.Thread):
    """SET k v<n> through writer (waiting for OK), then GET k through reader, round robin over
    keys, until stopped. A read returning a version below the one acknowledged before the
    read began is stale; the fence error and nil are counted apart."""

    def __init__(self, writer, reader, keys):
        super().__init__(daemon=True)
        self.writer, self.reader, self.keys = writer, reader, keys
        self.stop_ev = threading.Event()
        self.version = {k: 0 for k in keys}
        self.reads = self.fresh = self.fence = self.other_err = 0
        self.stale = []
        self.errors = []
        self.error = None

    def run(self):
        try:
            with Resp(self.writer.listens[0]) as w, Resp(self.reader.listens[0]) as r:
                while not self.stop_ev.is_set():
                    for k in self.keys:
                        if self.stop_ev.is_set():
                            break
                        v = self.version[k] + 1
                        if w.call("SET", k, "v%d" % v) == b"OK":
                            self.version[k] = v
                        got = r.call("GET", k)
                        self.reads += 1
                        if is_fence_error(got):
                            self.fence += 1
                        elif isinstance(got, RespError):
                            self.other_err += 1
                            self.errors.append(got)
                        elif got is None or int(got[1:]) < self.version[k]:
                            self.stale.append((k, got, self.version[k]))
                        else:
                            self.fresh += 1
        except Exception as e:  # noqa: BLE001 (reported by stop())
            self.error = repr(e)

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=30)
        if self.error:
            fail("load: %s" % self.error)


def body(t):
    proxy_exe, cli, tmp = t.proxy, t.chash, t.tmp
    redises = start_redises("redis-server", tmp, 4)
    server = etcd.EtcdServer(tmp, lambda argv, out: spawn(argv, out)).start()
    client = server.client
    url = "etcd://127.0.0.1:%d%s" % (server.port, KEY)
    first = client.put(KEY, doc(redises, [0, 1, 2]))
    fwds, proxies = [], []
    for i in range(3):
        fwd = Forwarder(spawn, tmp, "127.0.0.1", server.port, "fwd%d" % i).start()
        port = free_ports(1)[0]
        proxies.append(Proxy(proxy_exe, tmp, conf(tmp, "p%d.yml" % i, port, fwd.port),
                             [("127.0.0.1", port)], label="px%d" % i,
                             extra_args=["--fleet-id", "px%d" % i, "--fleet-ttl", "3"]).start())
        fwds.append(fwd)
    ids = ["px0", "px1", "px2"]
    client.wait_records(KEY, lambda r: all(i in r and r[i]["epoch"] == first and
                                           not r[i]["fenced"] for i in ids), WAIT,
                        "every proxy current on the first epoch")
    keys = ["fc:%d" % i for i in range(NKEYS)]

    # 1. px2 cut off from etcd during apply
    load = Load(proxies[0], proxies[2], keys)
    load.start()
    wait_for(lambda: load.fresh > 100, "the load reads fresh values through px2")
    fwds[2].pause()
    try:
        r = chash(cli, "fleet", "apply", apply_file(tmp, redises, [0, 1, 2, 3]), "--pool", POOL,
                  "--etcd", url, "--json", "--timeout", "20000")
        rep = json.loads(r.stdout or "{}")
        if r.returncode != 3 or [x["id"] for x in rep.get("committed_without", [])] != ["px2"]:
            fail("1. apply with px2 cut off: exit %d, %s %s" % (r.returncode, r.stdout,
                                                                 r.stderr))
        if fenced(proxies[2]) != 1 or resp_call(proxies[2].listens[0], "GET", keys[0]) != \
                LEASE_LOST:
            fail("1. px2 is not fenced after the commit without it")
        reads_at_commit = load.reads
        wait_for(lambda: load.reads > reads_at_commit + 200, "the load goes on after the commit")
        st = json.loads(chash(cli, "fleet", "status", "--etcd", url, "--json").stdout)
        if [x["id"] for x in st["lost"]] != ["px2"]:
            fail("1. status does not list px2 as lost: %s" % json.dumps(st))
    finally:
        fwds[2].resume()
    epoch = rep["epoch"]
    client.wait_records(KEY, lambda r: "px2" in r and r["px2"]["epoch"] == epoch and
                        not r["px2"]["fenced"], WAIT, "1. px2 back on the new epoch, unfenced")
    wait_for(lambda: client.get(KEY + "/lost/px2")[0] is None,
             "1. px2's K/lost/px2 note deleted once it is current")
    fresh_before = load.fresh
    wait_for(lambda: load.fresh > fresh_before + 200, "1. px2 serves fresh values again")
    load.stop()
    if load.stale:
        fail("1. %d stale reads through px2 (of %d): first %r" % (
            len(load.stale), load.reads, load.stale[:5]))
    if load.fence == 0 or load.other_err:
        fail("1. px2 answered %d fence errors and %d other errors: %r" % (
            load.fence, load.other_err, sorted(set(load.errors))[:5]))
    log("1. px2 cut off from etcd during apply: apply committed without it (exit 3), %d reads "
        "through px2: %d fresh, %d refused while fenced, 0 stale" % (
            load.reads, load.fresh, load.fence))

    # 2. px1 paused past its lease; reads sent while it is paused
    with Resp(proxies[1].listens[0]) as c:
        if c.call("GET", keys[0]) != ("v%d" % load.version[keys[0]]).encode():
            fail("2. px1 does not serve the current value before the pause")
        sigstop(proxies[1].proc.pid)
        try:
            client.wait_records(KEY, lambda r: "px1" not in r, WAIT,
                                "2. px1's record gone with its lease")
            r = chash(cli, "fleet", "apply", apply_file(tmp, redises, [0, 1, 2]), "--pool", POOL,
                      "--etcd", url, "--json")
            rep = json.loads(r.stdout or "{}")
            if r.returncode != 3 or [x["id"] for x in rep.get("committed_without", [])] != \
                    ["px1"]:
                fail("2. apply with px1 paused: exit %d, %s %s" % (r.returncode, r.stdout,
                                                                    r.stderr))
            latest = {}
            with Resp(proxies[0].listens[0]) as w:
                for k in keys:
                    v = "w%d" % (load.version[k] + 1000)
                    if w.call("SET", k, v) != b"OK":
                        fail("2. SET through px0 after the commit")
                    latest[k] = v.encode()
            c.send(b"".join(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k.encode())
                            for k in keys))
        finally:
            os.kill(proxies[1].proc.pid, signal.SIGCONT)
        got = [c.read() for _ in keys]
    stale = [(k, g) for k, g in zip(keys, got) if not is_fence_error(g) and g != latest[k]]
    if stale:
        fail("2. %d of %d reads queued during the pause answered from the old membership: %r" %
             (len(stale), len(keys), stale[:5]))
    refused = sum(is_fence_error(g) for g in got)
    client.wait_records(KEY, lambda r: "px1" in r and r["px1"]["epoch"] == rep["epoch"] and
                        not r["px1"]["fenced"], WAIT, "2. px1 back on the new epoch, unfenced")
    with Resp(proxies[1].listens[0]) as c:
        after = c.pipeline([("GET", k) for k in keys])
    if after != [latest[k] for k in keys]:
        fail("2. px1 after it unfenced: %d of %d reads not the latest value" % (
            sum(a != latest[k] for a, k in zip(after, keys)), len(keys)))
    log("2. px1 paused past its lease: %d of %d reads sent during the pause refused (the rest "
        "fresh), none stale; after SIGCONT it unfenced on epoch %d" % (refused, len(keys),
                                                                      rep["epoch"]))

    # 3. membership_fenced: serve, and a lease longer than an etcd outage
    server.proc.kill()
    server.proc.wait(timeout=10)
    port = free_ports(1)[0]
    srv = Proxy(proxy_exe, tmp, conf(tmp, "serve.yml", port, server.port,
                                     servers=["%s:1 s0" % redises[0].text],
                                     extra=["membership_fenced: serve"]),
                [("127.0.0.1", port)], label="serve",
                extra_args=["--fleet-id", "serve", "--fleet-ttl", "3"]).start()
    with Resp(srv.listens[0]) as c:
        if c.call("SET", "fc:serve", "x") != b"OK" or c.call("GET", "fc:serve") != b"x":
            fail("3. a membership_fenced: serve pool started with etcd down does not serve")
        info = c.call("INFO").decode()
    if "pool_alpha_fleet_fenced:1" not in info or \
            "pool_alpha_fleet_membership_fenced:serve" not in info:
        fail("3. INFO of a fenced pool that serves: %s" % info)
    server.start()
    client.wait_records(KEY, lambda r: "serve" in r and r["serve"]["on_fence"] == "serve" and
                        not r["serve"]["fenced"] and r["serve"]["servers"] == 3, WAIT,
                        "3. the serve pool takes etcd's document once etcd answers")
    port = free_ports(1)[0]
    slow = Proxy(proxy_exe, tmp, conf(tmp, "long.yml", port, server.port),
                 [("127.0.0.1", port)], label="long",
                 extra_args=["--fleet-id", "long", "--fleet-ttl", "60"]).start()
    wait_for(lambda: fenced(slow) == 0, "3. the long-lease proxy current")
    server.proc.kill()
    server.proc.wait(timeout=10)
    with Resp(slow.listens[0]) as c:
        got = c.pipeline([("GET", k) for k in keys])
    if got != [latest[k] for k in keys]:
        fail("3. a proxy within its 60 s lease does not serve through an etcd outage: %r" %
             got[:3])
    server.start()
    log("3. membership_fenced: serve serves its file's servers with etcd down (INFO: fenced, "
        "serve); a 60 s lease serves on through an etcd outage")

    # 4. 10,000 servers
    wait_for(lambda: all(fenced(p) == 0 for p in proxies), "4. every proxy current")
    fences0 = [p.stats_json()[POOL]["fleet_fences"] for p in proxies]
    for n in (10000, 10001, 3):
        lines0 = [len(open(p.log).read().splitlines()) for p in proxies]
        big = json.dumps({"servers": ["127.0.0.1:%d:1 b%d" % (20000 + i % 40000, i)
                                      for i in range(n)], "hash": "md5"})
        rev = client.put(KEY, big)
        client.wait_records(KEY, lambda r: all(i in r and r[i]["epoch"] == rev and
                                               r[i]["servers"] == n for i in ids), 60,
                            "4. every proxy on the %d-server document" % n)
        for p, l0 in zip(proxies, lines0):
            new_lines = open(p.log).read().splitlines()[l0:]
            if len(new_lines) > 10:
                fail("4. %s logged %d lines for the %d-server change: %s ..." % (
                    p.label, len(new_lines), n, new_lines[:3]))
    fences = [p.stats_json()[POOL]["fleet_fences"] for p in proxies]
    if fences != fences0:
        fail("4. a proxy fenced during the 10,000-server changes: fences %s -> %s" % (fences0,
                                                                                     fences))
    log("4. 10,000 -> 10,001 -> 3 servers: applied by all, <= 10 log lines a change, no fence")

    # 5. stopped between prepare and commit, within the lease
    first = client.put(KEY, doc(redises, [0, 1, 2]))
    port = free_ports(1)[0]
    px3 = Proxy(proxy_exe, tmp, conf(tmp, "p3.yml", port, server.port), [("127.0.0.1", port)],
                label="px3", extra_args=["--fleet-id", "px3", "--fleet-ttl", "30"]).start()
    all_ids = ids + ["px3", "serve", "long"]
    client.wait_records(KEY, lambda r: all(i in r and r[i]["epoch"] == first and
                                           not r[i]["fenced"] for i in all_ids), WAIT,
                        "5. every proxy current on 3 servers")
    with Resp(proxies[0].listens[0]) as w:
        w.pipeline([("SET", k, "old") for k in keys])
    epoch = max(r["epoch"] for r in client.records(KEY).values()) + 1
    pend = json.loads(doc(redises, [0, 1, 2, 3]))
    pend["epoch"] = epoch
    p_rev = client.put(KEY + "/pending", json.dumps(pend))
    client.wait_records(KEY, lambda r: all(r[i]["prepared"] == epoch for i in all_ids), WAIT,
                        "5. every proxy prepared epoch %d" % epoch)
    with Resp(px3.listens[0]) as c:
        sigstop(px3.proc.pid)
        stopped_at = time.monotonic()
        try:
            client.call("/v3/kv/txn", {
                "compare": [{"key": etcd.b64(KEY + "/pending"), "target": "MOD",
                             "result": "EQUAL", "mod_revision": str(p_rev)}],
                "success": [{"request_put": {"key": etcd.b64(KEY),
                                             "value": etcd.b64(json.dumps(pend))}},
                            {"request_delete_range": {"key": etcd.b64(KEY + "/pending")}}]})
            client.wait_records(KEY, lambda r: all(r[i]["epoch"] == epoch for i in ids), WAIT,
                                "5. px0-px2 swapped while px3 is stopped")
            with Resp(proxies[0].listens[0]) as w:
                if w.pipeline([("SET", k, "new") for k in keys]) != [b"OK"] * len(keys):
                    fail("5. SET through px0 after the commit")
            c.send(b"".join(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k.encode())
                            for k in keys))
            # the fault's length: a stop longer than HELD_ALIVE_MS (250 ms, proxy/fleet.c);
            # a shorter one is within the switch window the docs promise
            left = stopped_at + 0.6 - time.monotonic()
            if left > 0:
                time.sleep(left)
        finally:
            os.kill(px3.proc.pid, signal.SIGCONT)
        got = [c.read() for _ in keys]
    stale = [(k, g) for k, g in zip(keys, got) if g != b"new" and not is_fence_error(g)]
    if stale:
        fail("5. %d of %d GETs queued while px3 was stopped between prepare and commit were "
             "answered from the old membership: %r" % (len(stale), len(keys), stale[:5]))
    log("5. stopped between prepare and commit, within its lease: %d of %d queued GETs fresh, "
        "%d refused, none stale" % (got.count(b"new"), len(keys),
                                   sum(is_fence_error(g) for g in got)))

    # 6. a prepared change dropped by a later reload
    wait_for(lambda: fenced(px3) == 0 and client.records(KEY)["px3"]["epoch"] == epoch,
             "6. px3 current on epoch %d after SIGCONT" % epoch)
    pend = json.loads(doc(redises, [0, 1, 2]))
    pend["epoch"] = epoch + 1
    client.put(KEY + "/pending", json.dumps(pend))
    client.wait_records(KEY, lambda r: r["px3"]["prepared"] == epoch + 1, WAIT,
                        "6. px3 prepared epoch %d" % (epoch + 1))
    px3.proc.send_signal(signal.SIGHUP)
    client.wait_records(KEY, lambda r: r["px3"]["prepared"] == 0 and
                        r["px3"]["prepare_failed"] == epoch + 1 and
                        r["px3"]["prepare_error"] == "dropped by a later reload (SIGHUP)", WAIT,
                        "6. px3's record says SIGHUP dropped its prepared change")
    # The drop came before its record was seen here, and the bound a held change serves under
    # ends HELD_ALIVE after the loop last confirmed it, before the drop: the last GETs go past
    # it, a bounded load each of whose answers must be the value.
    past_bound = time.monotonic() + HELD_ALIVE + 0.1
    got = []
    with Resp(px3.listens[0]) as c:
        while not got or time.monotonic() < past_bound:
            got.append(c.call("GET", keys[len(got) % len(keys)]))
    refused = [g for g in got if g != b"new"]
    if refused:
        fail("6. px3 after SIGHUP dropped its prepared change: %d of %d GETs not answered, "
             "first %r" % (len(refused), len(got), refused[0]))
    if fenced(px3) != 0:
        fail("6. px3's stats say fenced after SIGHUP dropped its prepared change: %s" %
             json.dumps(px3.stats_json()[POOL]))
    client.delete(KEY + "/pending")
    client.wait_records(KEY, lambda r: all(r[i]["prepared"] == 0 for i in all_ids), WAIT,
                        "6. the withdrawn change dropped by every proxy")
    log("6. a prepared change dropped by SIGHUP: %d GETs through px3 until past the held "
        "bound, all answered; not fenced" % len(got))

    for p in proxies + [srv, slow, px3]:
        p.stop()
    return "fencing: partition, pause, serve"


run_test(body, programs=("redis-server", "etcd"))
