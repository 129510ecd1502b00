#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_staged: a staged migration gives 0 stale reads while clients keep writing
(docs/FLEET.md, "Staged migration"; issue 24, row 5 of its table).

For Redis, then memcached: a real etcd, 8 real servers, a pool on 4 of them in etcd, two
chash-proxy processes on it: px0 takes the writes, px1 the reads. 3,000 keys are written with
versioned values (k = v<n>); then a load of 99 GETs through px1 per SET through px0 (1% writes,
one thread: every read begins after the writes before it were acknowledged) runs while
`chash fleet apply NEW --migrate` moves the pool to all 8 servers: the change is proposed and
prepared (every proxy stages it: a write of a key that moves is deleted at its next owner once
written), the moved keys are copied (slowed with --rate so that writes land during the copy,
each copy confirmed at its source), and only then committed. The load goes on after the
switch. A read that returns an older version than the last acknowledged write of its key is
stale; reads that began between the commit and the last proxy's swap (the switch window,
docs/FLEET.md's exception 1) are counted apart.

Before the apply, older copies are planted on the new servers, as a server that owned keys
before (or a migration that never committed) keeps them: for 200 keys an older version at the
key's owner under NEW, and 100 keys that exist nowhere else ("ghosts", as if their owner had
lost them). Checked: the apply exits 0 with a migration that copied keys; writes of moving keys
were staged (chash_proxy_stage_invalidations_total > 0 on px0, no errors); 0 stale reads
outside the switch window; no ghost is served after the switch (the staged copy deletes, at
each new owner, what it would serve without being its owner now); the new servers hold the
moved keys. On the code before (a migration
and then a switch, with writes in between) Redis had 27 stale reads and memcached 124.

Usage: test_staged.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (etcd, redis-server or memcached missing and CI unset).
"""
import json
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from proxyharness import (Mc, Proxy, Resp, RespError, chash_lookup, fail,  # noqa: E402
                          free_ports, log, run_test, spawn, start_memcacheds, start_redises,
                          wait_until, write_file)
import etcd  # noqa: E402
import promtext  # noqa: E402

NKEYS = 3000
WAIT = 30.0
RATE = 1000       # keys scanned per second by the copy, in batches of BATCH: about 3 s
BATCH = 50
AFTER = 3000      # reads after the switch


def doc(servers, names):
    return json.dumps({"servers": ["%s:1 s%d" % (servers[i].text, i) for i in names],
                       "hash": "md5"})


def conf(tmp, name, pool, key, redis, port, etcd_port):
    lines = ["%s:" % pool, "  listen: 127.0.0.1:%d" % port,
             "  redis: %s" % ("true" if redis else "false"),
             "  membership: etcd://127.0.0.1:%d%s" % (etcd_port, key),
             "  membership_hold_down: 0"]
    return write_file(os.path.join(tmp, name), "\n".join(lines) + "\n")


def apply_file(tmp, pool, key, redis, etcd_port, servers, names):
    lines = ["%s:" % pool, "  listen: 127.0.0.1:1",
             "  redis: %s" % ("true" if redis else "false"), "  hash: md5",
             "  membership: etcd://127.0.0.1:%d%s" % (etcd_port, key),
             "  servers:"] + ["    - %s:1 s%d" % (servers[i].text, i) for i in names]
    return write_file(os.path.join(tmp, "apply-%s.yml" % pool), "\n".join(lines) + "\n")


def chash(cli, *args):
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    return subprocess.run([cli] + list(args), capture_output=True, text=True, timeout=180,
                          env=env)


class RedisKv:
    def __init__(self, addr):
        self.c = Resp(addr)

    def set(self, k, v):
        return self.c.call("SET", k, v) == b"OK"

    def get(self, k):
        r = self.c.call("GET", k)
        if isinstance(r, RespError):
            raise RespError(r.args[0])
        return r

    def close(self):
        self.c.close()


class McKv:
    def __init__(self, addr):
        self.c = Mc(addr)

    def set(self, k, v):
        return self.c.call(b"set %s 0 0 %d\r\n%s\r\n" % (k.encode(), len(v), v.encode())) == \
            b"STORED\r\n"

    def get(self, k):
        r = self.c.call(b"get %s\r\n" % k.encode())
        if r == b"END\r\n":
            return None
        if not r.startswith(b"VALUE "):
            raise RespError(r.decode("utf-8", "replace").strip())
        head, _, rest = r.partition(b"\r\n")
        return rest[:int(head.split()[3])]

    def close(self):
        self.c.close()


class Load(threading.Thread):
    """99 GETs through the reader per SET through the writer, on random keys, until stopped."""

    def __init__(self, kv, writer, reader, keys, version):
        super().__init__(daemon=True)
        self.kv, self.writer, self.reader, self.keys = kv, writer, reader, keys
        self.version = version
        self.stop_ev = threading.Event()
        self.rng = random.Random(24)
        self.reads = self.writes = self.misses = 0
        self.stale = []  # (key, got, acknowledged version, when the read began: unix s)
        self.error = None

    def run(self):
        w = r = None
        try:
            w, r = self.kv(self.writer.listens[0]), self.kv(self.reader.listens[0])
            while not self.stop_ev.is_set():
                for _ in range(99):
                    k = self.rng.choice(self.keys)
                    began = time.time()
                    got = r.get(k)
                    self.reads += 1
                    if got is None:
                        self.misses += 1
                    elif int(got[1:]) < self.version[k]:
                        self.stale.append((k, got, self.version[k], began))
                k = self.rng.choice(self.keys)
                v = self.version[k] + 1
                if not w.set(k, "v%d" % v):
                    raise AssertionError("SET %s through %s refused" % (k, self.writer.label))
                self.version[k] = v
                self.writes += 1
        except Exception as e:  # noqa: BLE001 (reported by stop())
            self.error = repr(e)
        finally:
            for c in (w, r):
                if c is not None:
                    c.close()

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=30)
        if self.error:
            fail("load: %s" % self.error)


def stage_counts(proxy, mport, pool):
    fams = promtext.scrape(mport)
    return (promtext.total(fams, "chash_proxy_stage_invalidations_total", pool=pool),
            promtext.total(fams, "chash_proxy_stage_invalidate_errors_total", pool=pool))


def run_protocol(t, server, redis):
    name = "redis" if redis else "memcached"
    pool, key = "stg" + ("r" if redis else "m"), "/chash/pools/staged-%s" % name
    servers = start_redises("redis-server", t.tmp, 8) if redis else \
        start_memcacheds("memcached", t.tmp, 8)
    client = server.client
    first = client.put(key, doc(servers, [0, 1, 2, 3]))
    proxies, mports = [], []
    for i in range(2):
        port, mport = free_ports(2)
        proxies.append(Proxy(t.proxy, t.tmp,
                             conf(t.tmp, "%s-p%d.yml" % (pool, i), pool, key, redis, port,
                                  server.port),
                             [("127.0.0.1", port)], label="%s-px%d" % (name, i),
                             extra_args=["--fleet-id", "px%d" % i, "--fleet-ttl", "10",
                                         "--metrics-port", str(mport)]).start())
        mports.append(mport)
    client.wait_records(key, lambda r: all(i in r and r[i]["epoch"] == first and
                                           not r[i]["fenced"] for i in ("px0", "px1")), WAIT,
                        "%s: both proxies current on the first epoch" % name)
    kv = RedisKv if redis else McKv
    keys = ["st:%d" % i for i in range(NKEYS)]
    version = {}
    w = kv(proxies[0].listens[0])
    for k in keys:
        if not w.set(k, "v1"):
            fail("%s: the preload's SET %s was refused" % (name, k))
        version[k] = 1
    w.close()

    # older copies on the new servers (servers[4:]), at the keys' owners under NEW
    new = apply_file(t.tmp, pool, key, redis, server.port, servers, range(8))
    ghosts = ["st:ghost:%d" % i for i in range(400)]
    owners = chash_lookup(t.chash, new, pool, [k.encode() for k in keys[:800] + ghosts])
    by_addr = {s.text: s for s in servers[4:]}
    planted = {"old": 0, "ghost": 0}
    for k in keys[:800] + ghosts:
        srv = by_addr.get(owners[k.encode()])
        kind = "ghost" if k in ghosts else "old"
        if srv is None or planted[kind] >= (100 if kind == "ghost" else 200):
            continue
        c = kv(srv.addr)
        if not c.set(k, "v0"):
            fail("%s: planting %s at %s" % (name, k, srv.text))
        c.close()
        planted[kind] += 1
    ghosts = [g for g in ghosts if owners[g.encode()] in by_addr][:planted["ghost"]]
    if planted["ghost"] < 50 or planted["old"] < 100:
        fail("%s: planted only %r" % (name, planted))

    load = Load(kv, proxies[0], proxies[1], keys, version)
    load.start()
    wait_until(lambda: load.reads > 1000 or load.error, WAIT, "%s: the load runs" % name)
    r = chash(t.chash, "fleet", "apply", new, "--migrate", "--rate", str(RATE), "--batch",
              str(BATCH), "--json",
              "--timeout", "60000")
    try:
        rep = json.loads(r.stdout or "{}")
    except ValueError:
        rep = {}
    if r.returncode != 0 or not rep.get("committed"):
        load.stop()
        fail("%s: apply --migrate exited %d: %s %s" % (name, r.returncode, r.stdout, r.stderr))
    mig = rep.get("migration") or {}
    if mig.get("moved", 0) == 0 or mig.get("copied", 0) == 0:
        fail("%s: the migration moved or copied nothing: %s" % (name, r.stdout))
    window = (rep["commit_unix_us"] / 1e6, rep["last_swap_unix_us"] / 1e6)
    reads_at_switch = load.reads
    wait_until(lambda: load.reads > reads_at_switch + AFTER or load.error, WAIT,
               "%s: %d reads after the switch" % (name, AFTER))
    load.stop()
    inv, inv_err = stage_counts(proxies[0], mports[0], pool)
    r1 = kv(proxies[1].listens[0])
    served = [g for g in ghosts if r1.get(g) is not None]
    r1.close()
    if served:
        fail("%s: %d of %d older copies that exist nowhere else served after the switch: %r" %
             (name, len(served), len(ghosts), served[:5]))
    if mig.get("cleaned", 0) < len(ghosts):
        fail("%s: the staged copy deleted %d older copies at the new owners, %d were planted "
             "with no current value" % (name, mig.get("cleaned", 0), len(ghosts)))
    in_window = [s for s in load.stale if window[0] <= s[3] <= window[1]]
    stale = [s for s in load.stale if not window[0] <= s[3] <= window[1]]
    if stale:
        fail("%s: %d stale reads outside the switch window (of %d reads, %d writes): first %r" %
             (name, len(stale), load.reads, load.writes, stale[:5]))
    if inv == 0 or inv_err != 0:
        fail("%s: px0 staged %d writes of moving keys with %d errors: the copy ran without "
             "writes to stage, or staging failed" % (name, inv, inv_err))
    # The new servers hold the copies: every one but those dropped again (changed at the
    # source during their copy) and those a staged write deleted.
    moved_at_new = 0
    if redis:
        for s in servers[4:]:
            moved_at_new += resp_dbsize(s.addr)
    else:
        for s in servers[4:]:
            moved_at_new += len(s.keys_present([k.encode() for k in keys]))
    if moved_at_new < mig["copied"] - mig.get("changed", 0) - inv:
        fail("%s: the new servers hold %d keys, the migration copied %d" % (
            name, moved_at_new, mig["copied"]))
    log("%s: apply --migrate 4 -> 8 servers: %d moved, %d copied, %d changed during the copy, "
        "%d older copies deleted first (%d planted: %d older versions, %d ghosts, none served), "
        "copy %d ms; %d reads and %d writes: 0 stale (%d in the switch window of %.1f ms), "
        "%d misses; px0 staged %d writes of moving keys" % (
            name, mig["moved"], mig["copied"], mig.get("changed", 0), mig.get("cleaned", 0),
            planted["old"] + planted["ghost"], planted["old"], planted["ghost"],
            mig.get("ms", 0), load.reads, load.writes, len(in_window),
            (window[1] - window[0]) * 1000, load.misses, inv))
    for p in proxies:
        p.stop()


def resp_dbsize(addr):
    with Resp(addr) as c:
        return int(c.call("DBSIZE"))


def body(t):
    server = etcd.EtcdServer(t.tmp, lambda argv, out: spawn(argv, out)).start()
    run_protocol(t, server, True)
    run_protocol(t, server, False)


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "memcached", "etcd"))
