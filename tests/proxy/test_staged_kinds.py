#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_staged_kinds: a staged migration gives 0 stale reads for every kind of write: plain
SET, MULTI/EXEC, and a script that writes a key it does not declare (docs/FLEET.md, "What the
staging refuses"; issue 35, item 4).

A real etcd, 12 real redis-servers, a pool with hash_tag "{}" on 8 of them in etcd, two
chash-proxy processes on it: px0 takes the writes, px1 the reads. Keys come in hash-tagged groups
of one kind each, every group written with one version (k = v<n>):

  set    {s:i}              SET through px0 (the control: staged by route_stage.c);
  multi  {m:i}:a {m:i}:b    MULTI, SET both, EXEC, through redis-py's transaction pipeline;
  eval   {e:i}:a {e:i}:u    redis-py's EVAL of a script that declares :a and writes :u too, an
                            undeclared key of the same hash tag (so on the same server).

A writer goes round the groups of each kind through px0 while `chash fleet apply NEW --migrate`
moves the pool to all 12 servers (slowed with --rate so that the copy takes seconds with writes
landing throughout), and stops at the commit. A write refused with -TRYAGAIN (redis-py raises
ResponseError "TRYAGAIN ...") is counted and retried, as a client with a short backoff would,
until it lands (after the commit, at the group's new owner); so is a refusal of the fence (a
watch lost for a moment on a loaded machine), which sends nothing either. Meanwhile it reads moving groups'
keys with EVAL_RO, which must never be refused. After the apply, every key is read through px1:
a value older than the last acknowledged write of its group is stale.

Checked: 0 stale keys for every kind; only groups whose owner changes were refused, and only
MULTI and EVAL writes (plain SETs are staged); transactions and scripts of groups that stay ran
during the apply; refusals were seen (the test hit the staging window) and every one was
retried until it landed; px0's chash_proxy_stage_refused_total equals the refusals the writer
counted. On the code before (71c09e2, the staging of issue 24), 36 runs had 173-310 stale keys
written by MULTI/EXEC and 83-159 undeclared keys written by EVAL (its declared ones were staged:
deleted at their next owners, so they missed), and two of them 1 stale SET (a staged write out
when its proxy swapped: route_stage.c's stale_copy_at since).

Usage: test_staged_kinds.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (etcd, redis-server or python3-redis missing and CI unset).
"""
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from proxyharness import (Proxy, Resp, chash_lookup, fail, free_ports, log,  # noqa: E402
                          run_test, spawn, start_redises, wait_until, write_file)
import etcd  # noqa: E402
import promtext  # noqa: E402

try:
    import redis
except ImportError:  # run_test's modules= skips (or fails in CI) before body runs
    redis = None

GROUPS = 500      # hash-tagged groups per kind: 2,500 keys in all
WAIT = 30.0
RATE = 800        # keys scanned per second by the copy, in batches of BATCH: about 3 s
BATCH = 25
RETRY_S = 0.05    # the writer's backoff before writing a refused group again
DRAIN = 60.0      # bound on retrying refused writes after the commit
POOL, KEY = "kinds", "/chash/pools/staged-kinds"
SCRIPT = "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', ARGV[2], ARGV[1]); return 1"
READ_SCRIPT = "return redis.call('GET', KEYS[1])"
KINDS = ("set", "multi", "eval")


def keys_of(kind, i):
    return {"set": ["{s:%d}" % i], "multi": ["{m:%d}:a" % i, "{m:%d}:b" % i],
            "eval": ["{e:%d}:a" % i, "{e:%d}:u" % i]}[kind]


def doc(servers, names):
    return json.dumps({"servers": ["%s:1 s%d" % (servers[i].text, i) for i in names],
                       "hash": "md5", "hash_tag": "{}"})


def pool_file(tmp, name, port, etcd_port, servers=None, names=()):
    lines = ["%s:" % POOL, "  listen: 127.0.0.1:%d" % port, "  redis: true", "  hash: md5",
             '  hash_tag: "{}"', "  membership: etcd://127.0.0.1:%d%s" % (etcd_port, KEY),
             "  membership_hold_down: 0"]
    if servers is not None:
        lines += ["  servers:"] + ["    - %s:1 s%d" % (servers[i].text, i) for i in names]
    return write_file(os.path.join(tmp, name), "\n".join(lines) + "\n")


def chash(cli, *args):
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    return subprocess.run([cli] + list(args), capture_output=True, text=True, timeout=180,
                          env=env)


def tryagain(e):
    """Whether redis-py's error e is the proxy's refusal of a write it cannot stage."""
    return str(e).startswith("TRYAGAIN") or "error: TRYAGAIN" in str(e)


def fenced(e):
    """Whether redis-py's error e is the fence's refusal (docs/FLEET.md, "Fencing": nothing is
    sent anywhere), e.g. the etcd watch lost for a moment on a loaded machine: retried too."""
    return "; not serving pool " + POOL in str(e)


class Writer(threading.Thread):
    """Round after round, one write of the next group of each kind through px0 (and one EVAL_RO
    of a moving group), until stopped; a refused write is retried after RETRY_S."""

    def __init__(self, addr, version, moving):
        super().__init__(daemon=True)
        self.addr, self.version, self.moving = addr, version, moving
        self.stop_ev = threading.Event()
        self.applying = threading.Event()   # set while `fleet apply` runs
        self.acked = {k: 0 for k in KINDS}
        self.acked_staying_in_apply = {k: 0 for k in KINDS}
        self.refused = {k: 0 for k in KINDS}
        self.owner_changed = 0              # EXECs refused for a commit since their queueing
        self.refused_staying = []           # (kind, group, error): must stay empty
        self.pending = {}                   # (kind, group) -> monotonic time of the next try
        self.ro_reads = 0
        self.fenced = 0                     # fence refusals, retried like TRYAGAIN
        self.ro_errors = []
        self.sample = {}                    # kind -> one refusal's text, as redis-py raised it
        self.error = None

    def write(self, r, kind, i):
        """One write of group i of kind, the next version: True if acknowledged, False if
        refused -TRYAGAIN; any other answer raises."""
        v = "v%d" % (self.version[(kind, i)] + 1)
        ks = keys_of(kind, i)
        try:
            if kind == "set":
                ok = r.set(ks[0], v) is True
            elif kind == "multi":
                p = r.pipeline(transaction=True)
                for k in ks:
                    p.set(k, v)
                ok = p.execute() == [True, True]
            else:
                ok = r.eval(SCRIPT, 1, ks[0], v, ks[1]) == 1
        except redis.ResponseError as e:
            if fenced(e):
                self.fenced += 1
                return False
            if not tryagain(e):
                raise
            self.refused[kind] += 1
            if "changed owner while it was queued" in str(e):
                self.owner_changed += 1  # the switch, not the staging: not in the metric
            self.sample.setdefault(kind, str(e))
            if not self.moving[(kind, i)]:
                self.refused_staying.append((kind, i, str(e)))
            return False
        if not ok:
            raise AssertionError("%s of group %d through px0: unexpected answer" % (kind, i))
        self.version[(kind, i)] += 1
        self.acked[kind] += 1
        if self.applying.is_set() and not self.moving[(kind, i)]:
            self.acked_staying_in_apply[kind] += 1
        return True

    def attempt(self, r, kind, i):
        if self.write(r, kind, i):
            self.pending.pop((kind, i), None)
        else:
            self.pending[(kind, i)] = time.monotonic() + RETRY_S

    def run(self):
        r = None
        try:
            r = redis.Redis(host=self.addr[0], port=self.addr[1], socket_timeout=10)
            moving_eval = [i for i in range(GROUPS) if self.moving[("eval", i)]]
            n = 0
            while not self.stop_ev.is_set():
                for kind in KINDS:
                    if (kind, n % GROUPS) not in self.pending:
                        self.attempt(r, kind, n % GROUPS)
                now = time.monotonic()
                for (kind, i), due in list(self.pending.items()):
                    if due <= now:
                        self.attempt(r, kind, i)
                try:
                    i = moving_eval[n % len(moving_eval)]
                    r.execute_command("EVAL_RO", READ_SCRIPT, 1, keys_of("eval", i)[0])
                    self.ro_reads += 1
                except redis.ResponseError as e:
                    if fenced(e):
                        self.fenced += 1
                    else:
                        self.ro_errors.append(str(e))
                n += 1
            # After the commit: what was refused lands now, retried with the same backoff.
            deadline = time.monotonic() + DRAIN
            while self.pending and time.monotonic() < deadline:
                now = time.monotonic()
                for (kind, i), due in list(self.pending.items()):
                    if due <= now:
                        self.attempt(r, kind, i)
                if self.pending:
                    self.stop_ev.wait(RETRY_S)  # the client's backoff, not a wait on a state
        except Exception as e:  # noqa: BLE001 (reported by stop())
            self.error = repr(e)
        finally:
            if r is not None:
                r.close()

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=DRAIN + 30)
        if self.is_alive():
            fail("writer: still running %g s after it was told to stop" % (DRAIN + 30))
        if self.error:
            fail("writer: %s" % self.error)


def body(t):
    server = etcd.EtcdServer(t.tmp, lambda argv, out: spawn(argv, out)).start()
    servers = start_redises(t.programs["redis-server"], t.tmp, 12)
    client = server.client
    first = client.put(KEY, doc(servers, range(8)))
    proxies, mports = [], []
    for i in range(2):
        port, mport = free_ports(2)
        proxies.append(Proxy(t.proxy, t.tmp,
                             pool_file(t.tmp, "px%d.yml" % i, port, server.port),
                             [("127.0.0.1", port)], label="px%d" % i,
                             extra_args=["--fleet-id", "px%d" % i, "--fleet-ttl", "10",
                                         "--metrics-port", str(mport)]).start())
        mports.append(mport)
    client.wait_records(KEY, lambda r: all(i in r and r[i]["epoch"] == first and
                                           not r[i]["fenced"] for i in ("px0", "px1")), WAIT,
                        "both proxies current on the first epoch")

    # Which groups move: their owner under the 8 servers and under the 12 (the CLI's lookup).
    old = pool_file(t.tmp, "old.yml", 1, server.port, servers, range(8))
    new = pool_file(t.tmp, "new.yml", 1, server.port, servers, range(12))
    firsts = [keys_of(k, i)[0].encode() for k in KINDS for i in range(GROUPS)]
    before, after = chash_lookup(t.chash, old, POOL, firsts), chash_lookup(t.chash, new, POOL,
                                                                            firsts)
    moving = {(k, i): before[keys_of(k, i)[0].encode()] != after[keys_of(k, i)[0].encode()]
              for k in KINDS for i in range(GROUPS)}
    nmoving = {k: sum(moving[(k, i)] for i in range(GROUPS)) for k in KINDS}
    if min(nmoving.values()) < GROUPS // 10:
        fail("too few groups move from 8 to 12 servers: %r" % nmoving)

    version = {}
    with Resp(proxies[0].listens[0]) as w:
        for k in KINDS:
            for i in range(GROUPS):
                version[(k, i)] = 1
                for rep in w.pipeline([("SET", key, "v1") for key in keys_of(k, i)]):
                    if rep != b"OK":
                        fail("preload of %s group %d: %r" % (k, i, rep))

    writer = Writer(proxies[0].listens[0], version, moving)
    writer.start()
    wait_until(lambda: sum(writer.acked.values()) > 3 * GROUPS or writer.error, WAIT,
               "the writer goes once round every group")
    writer.applying.set()
    r = chash(t.chash, "fleet", "apply", new, "--migrate", "--rate", str(RATE), "--batch",
              str(BATCH), "--json", "--timeout", "60000")
    writer.applying.clear()
    try:
        rep = json.loads(r.stdout or "{}")
    except ValueError:
        rep = {}
    if r.returncode != 0 or not rep.get("committed"):
        writer.stop()
        fail("apply --migrate exited %d: %s %s" % (r.returncode, r.stdout, r.stderr))
    writer.stop()
    mig = rep.get("migration") or {}
    if mig.get("moved", 0) == 0 or mig.get("copied", 0) == 0:
        fail("the migration moved or copied nothing: %s" % r.stdout)
    if writer.pending:
        fail("%d refused writes still refused %g s after the commit: %r" % (
            len(writer.pending), DRAIN, sorted(writer.pending)[:5]))

    # Every key through px1, after the switch.
    stale = {k: [] for k in KINDS}
    misses = {k: 0 for k in KINDS}
    with Resp(proxies[1].listens[0]) as rd:
        for k in KINDS:
            for i in range(GROUPS):
                ks = keys_of(k, i)
                for key, got in zip(ks, rd.pipeline([("GET", key) for key in ks])):
                    if got is None:
                        misses[k] += 1
                    elif not isinstance(got, bytes) or int(got[1:]) < version[(k, i)]:
                        stale[k].append((key, got, version[(k, i)]))
    summary = ("apply --migrate 8 -> 12 servers: %d moved, %d copied, %d changed during the "
               "copy, copy %d ms; groups moving of %d per kind: %r; through px0 acknowledged "
               "%r (of groups that stay, during the apply: %r), refused -TRYAGAIN and retried "
               "%r, %d EVAL_RO reads of moving groups, %d fence refusals retried; read back "
               "through px1: stale %r, misses %r" % (
                   mig["moved"], mig["copied"], mig.get("changed", 0), mig.get("ms", 0), GROUPS,
                   nmoving, writer.acked, writer.acked_staying_in_apply, writer.refused,
                   writer.ro_reads, writer.fenced, {k: len(v) for k, v in stale.items()},
                   misses))
    log(summary)
    for k, text in sorted(writer.sample.items()):
        log("a refusal of %s as redis-py raised it: %s" % (k, text))
    for k in KINDS:
        if stale[k]:
            fail("%s: %d stale keys after the migration (first %r); %s" % (
                k, len(stale[k]), stale[k][:3], summary))
    if writer.ro_errors:
        fail("EVAL_RO refused %d times: %r" % (len(writer.ro_errors), writer.ro_errors[:3]))
    if writer.refused_staying:
        fail("writes of groups that stay refused: %r" % writer.refused_staying[:3])
    if writer.refused["set"]:
        fail("plain SETs refused %d times: they are staged, never refused" % (
            writer.refused["set"]))
    for k in ("multi", "eval"):
        if writer.refused[k] == 0:
            fail("no %s write was refused: the writer missed the staging window (%s)" % (
                k, summary))
        if writer.acked_staying_in_apply[k] == 0:
            fail("no %s write of a group that stays ran during the apply" % k)
    metric = promtext.total(promtext.scrape(mports[0]), "chash_proxy_stage_refused_total",
                            pool=POOL)
    staging = writer.refused["multi"] + writer.refused["eval"] - writer.owner_changed
    if metric != staging:
        fail("px0 counted %d refusals for the staging, the writer saw %d" % (metric, staging))
    log("px0's chash_proxy_stage_refused_total: %d, as the writer counted (and %d EXECs "
        "refused for a commit since their queueing)" % (metric, writer.owner_changed))
    for p in proxies:
        p.stop()


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "etcd"), modules=("redis",))
