#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_nemesis: a fleet under a random schedule of faults, with a checker that flags every
stale read (issue 24, item 6; the promise it checks is docs/FLEET.md, "Fencing").

The fleet: a real etcd, 12 real redis-servers, three chash-proxy processes (--fleet-ttl 3),
each reaching etcd through a forwarder of its own (tests/lib/forwarder.py), each serving two
pools from etcd: "warm" (warm_up 20000) and "cold" (no warm-up), 8 to 12 servers each, with
failover_depth 1 and auto_eject_hosts false (the promise's condition: docs/FLEET.md). Client
threads own their keys: each round SETs k = v<n> through one proxy and GETs k through another
(both chosen at random), timing every request on the wall clock the proxies' records use.

The nemesis, seeded (--seed; printed, so a run can be replayed), picks one fault at a time:
  - a proxy cut off from etcd (its forwarder SIGSTOPped) within or past its lease;
  - a proxy SIGSTOPped within or past its lease; a proxy killed (-9) and restarted;
  - a redis-server SIGSTOPped (its clients stall: a partition of it from every proxy) or
    killed (-9) and restarted empty;
  - etcd SIGSTOPped, killed and restarted, or restarted empty (data lost; the next change then
    waits, as docs/FLEET.md says, until every live proxy has registered again);
  and, during most faults and alone, `chash fleet apply` of a random change (1 or 2 servers
  added or removed) to a random pool, a third of them staged migrations (--migrate). After
  each fault it heals and waits until every proxy is current again (a proxy that never
  recovers fails the run).

The checker: a read that returns a version older than the newest write acknowledged before the
read began is stale. Exempt, as docs/FLEET.md promises: a read that begins within a switch
window of its pool (from apply's commit to its last swap, from apply's JSON, 100 ms slack each
side), and a read of a key written during such a window until the key is written again after
it (exception 2: a warm-up fill racing a write through a proxy that has not swapped yet; the
staging of every prepared change leaves only that race). A miss (nil) is counted,
not flagged: a killed redis-server comes back empty. The checker tests itself first on
histories with a known answer, so it can fail.

usage: test_nemesis.py CHASH_PROXY CHASH_CLI [--seed N] [--duration S] [--json FILE]
Default: a smoke of 35 s of faults (make test). Long runs: --duration 1800 (docs/FLEET.md).
Exit: 0 no stale read, 1 a stale read or a fleet that did not recover, 77 skip.
"""
import bisect
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from proxyharness import (Proxy, Resp, RespError, bindable, fail, log, run_test,  # noqa: E402
                          sigstop, spawn, start_redises, wait_until, write_file)
import etcd  # noqa: E402
from forwarder import Forwarder  # noqa: E402

POOLS = {"warm": "/chash/pools/warm", "cold": "/chash/pools/cold"}
NPROXY, NREDIS = 3, 12
MIN_SERVERS, MAX_SERVERS = 8, 12
TTL = 3
KEYS_PER_THREAD, THREADS = 300, 4
SLACK_US = 100000
SETTLE_S = 30.0


def now_us():
    return time.time_ns() // 1000


def stable_ports(n, rng):
    """n free ports below the kernel's ephemeral range (checked by binding each), for proxies
    that are killed and restarted on the same port: a port of the ephemeral range may be taken,
    while its proxy is down, as the source port of one of the run's many connections."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    out = []
    for port in rng.sample(range(10000, low), 2000):
        if len(out) == n:
            break
        if bindable("127.0.0.1", port) and port not in out:
            out.append(port)
    if len(out) < n:
        fail("no %d free ports below %d" % (n, low))
    return out


# ---- the checker ----------------------------------------------------------------------------

def check(history, windows, owner=None, moves=None):
    """history: (kind, pool, key, version, t_invoke_us, t_done_us, outcome, proxy) with kind
    "w" or "r"; outcome "ok", "err" or "miss" (reads: version is what was read, 0 for a miss). Each
    key has one writer, whose writes follow each other, so versions grow with time.
    windows: {pool: [(start_us, end_us)]}. owner(pool, key, t_us): the server that owns key at
    t (None: not known). moves(pool, key, t0_us, t1_us): the changes within [t0, t1] that may
    copy key from one server to another, in time order (t, "fill" | "abort" | "migrate", from,
    to, at us: (t, kind, from, to)) (resurrected). Returns (violations, stats). Cost:
    O(n log n)."""
    by_key = {}
    for h in history:
        by_key.setdefault((h[1], h[2]), []).append(h)
    wins = {p: sorted((a - SLACK_US, b + SLACK_US) for a, b in ws) for p, ws in windows.items()}
    starts = {p: [a for a, _ in ws] for p, ws in wins.items()}
    longest = {p: max([b - a for a, b in ws] or [0]) for p, ws in wins.items()}

    def overlapping(pool, t0, t1):
        """The windows of pool that overlap [t0, t1]."""
        ws, st = wins.get(pool, []), starts.get(pool, [])
        k = bisect.bisect_right(st, t1)
        out = []
        while k > 0 and ws[k - 1][0] >= t0 - longest[pool]:
            k -= 1
            if ws[k][1] >= t0:
                out.append(ws[k])
        return out

    violations, exempt, returned, reads, misses, errors = [], 0, 0, 0, 0, 0
    for (pool, key), hs in by_key.items():
        writes = sorted((h for h in hs if h[0] == "w"), key=lambda h: h[4])
        w_start = [w[4] for w in writes]
        ok = [w for w in writes if w[6] == "ok"]
        ok_done = [w[5] for w in ok]
        # a write in flight during a window taints the key from the write's start until a
        # write that began after the window is acknowledged
        taints = []
        for w in writes:
            for _a, b in overlapping(pool, w[4], w[5]):
                k = bisect.bisect_right(w_start, b)
                clean = next((x[5] for x in writes[k:] if x[6] == "ok"), float("inf"))
                taints.append((w[4], clean))
        for r in (h for h in hs if h[0] == "r"):
            if r[6] == "err":
                errors += 1
                continue
            reads += 1
            if r[6] == "miss":
                misses += 1
                continue
            k = bisect.bisect_left(ok_done, r[4])
            if k == 0 or r[3] >= ok[k - 1][3]:
                continue
            if overlapping(pool, r[4], r[4]) or any(a <= r[4] < b for a, b in taints):
                exempt += 1
                continue
            if owner is not None and resurrected(owner, moves, pool, key, r, ok[:k]):
                returned += 1
                continue
            violations.append({"pool": pool, "key": key, "read": r[3], "acked": ok[k - 1][3],
                               "t_invoke_us": r[4]})
    return violations, {"reads": reads, "misses": misses, "errors": errors,
                        "exempt": exempt, "returned": returned, "stale": len(violations)}


def resurrected(owner, moves, pool, key, r, acked):
    """Whether read r found an older copy a server kept (docs/FLEET.md, exception 2): the value
    it returns may be on r's server, no newer acknowledged write having gone there since. A
    write may have gone to the owner before or after a switch within SLACK_US of its flight;
    after it, the value spreads with the changes that copy a key from its owner before to its
    owner after (moves: a warm-up window's fills, a migration that did not commit), and a
    committed staged migration leaves at the new owner what the old owner had, or nothing."""
    def possible(w):
        return {owner(pool, key, w[4] - SLACK_US), owner(pool, key, w[5] + SLACK_US)}
    src = [w for w in acked if w[3] == r[3]]
    here = owner(pool, key, r[4])
    if not src or here is None:
        return False
    where = possible(src[-1])
    # in time order: a newer write that can only have gone to one server overwrites the value
    # there; a change copies the old owner's value to the new owner
    steps = [(w[5], "write", w) for w in acked if w[3] > r[3]]
    steps += [(t, kind, (old, new)) for t, kind, old, new in
              (moves(pool, key, src[-1][4], r[4]) if moves is not None else ())]
    for _t, kind, x in sorted(steps, key=lambda e: e[0]):
        if kind == "write":
            if len(possible(x)) == 1:
                where -= possible(x)
        elif x[0] in where:
            where.add(x[1])
        elif kind == "migrate":
            where.discard(x[1])  # cleaned, or replaced by the old owner's value
    # every newer write that can only have gone to `here` after the value got there removed
    # it above; a staged migration into `here` brings the old owner's value, whatever newer
    # one `here` held before (seed 11's case)
    return here in where


def self_test():
    """The checker on histories whose answer is known: it must flag and exempt exactly."""
    w = lambda v, a, b, o="ok": ("w", "p", "k", v, a, b, o, 0)  # noqa: E731
    r = lambda v, a, b, o="ok": ("r", "p", "k", v, a, b, o, 0)  # noqa: E731
    cases = [
        ([w(1, 0, 10), r(1, 20, 30)], {}, 0, "a fresh read"),
        ([w(1, 0, 10), w(2, 20, 30), r(1, 40, 50)], {}, 1, "a stale read"),
        ([w(1, 0, 10), w(2, 20, 30), r(1, 25, 50)], {}, 0, "a read concurrent with the write"),
        ([w(1, 0, 10), w(2, 20, 30, "err"), r(1, 40, 50)], {}, 0, "an unacknowledged write"),
        ([w(1, 0, 10), w(2, 20, 30), r(0, 40, 50, "miss")], {}, 0, "a miss"),
        ([w(1, 0, 10), w(2, 20, 30), r(1, 10 ** 6, 10 ** 6 + 5)],
         {"p": [(10 ** 6 - 50, 10 ** 6 + 50)]}, 0, "a stale read in a switch window"),
        ([w(1, 0, 10), w(2, 10 ** 6, 10 ** 6 + 10), r(1, 5 * 10 ** 6, 5 * 10 ** 6 + 5)],
         {"p": [(10 ** 6, 10 ** 6 + 20)]}, 0, "a key written in a window, read later"),
        ([w(1, 0, 10), w(2, 10 ** 6, 10 ** 6 + 10), w(3, 3 * 10 ** 6, 3 * 10 ** 6 + 10),
          r(2, 5 * 10 ** 6, 5 * 10 ** 6 + 5)],
         {"p": [(10 ** 6, 10 ** 6 + 20)]}, 1, "the key written again after the window"),
    ]
    for hist, wins, want, what in cases:
        got = len(check(hist, wins)[0])
        if got != want:
            fail("the checker on %s: %d violations, want %d" % (what, got, want))
    # a key that moved from A to B at 100 s and back to A at 200 s: a read at 250 s of the copy
    # A kept from before 100 is a return, not a violation; one while it is on B is stale
    S = 10 ** 6  # a second: far beyond SLACK_US
    own = lambda pool, key, t: "A" if t < 100 * S or t >= 200 * S else "B"  # noqa: E731
    hist = [w(1, 0, 10), w(2, 150 * S, 150 * S + 10), r(1, 250 * S, 250 * S + 10)]
    if len(check(hist, {}, own)[0]) != 0 or check(hist, {}, own)[1]["returned"] != 1:
        fail("the checker on a copy kept from a previous ownership: %s" % (check(hist, {}, own),))
    hist = [w(1, 0, 10), w(2, 20, 30), r(1, 150 * S, 150 * S + 10)]
    if len(check(hist, {}, own)[0]) != 1:
        fail("the checker on a stale read after a move: %s" % (check(hist, {}, own),))
    # k on A until 100 s, B until 200 s, C after. A migration that did not commit, at 50 s,
    # copied k to C (its owner under that change); k is written again on B; at 250 s C returns
    # that copy: a return. Without the copy in moves, or with it before v1 was written, stale.
    own3 = lambda pool, key, t: "A" if t < 100 * S else "B" if t < 200 * S else "C"  # noqa: E731
    aborted = lambda pool, key, t0, t1: [e for e in (  # noqa: E731
        (50 * S, "abort", "A", "C"),) if t0 <= e[0] <= t1]
    hist = [w(1, 0, 10), w(2, 150 * S, 150 * S + 10), r(1, 250 * S, 250 * S + 10)]
    if len(check(hist, {}, own3)[0]) != 1 or len(check(hist, {}, own3, aborted)[0]) != 0:
        fail("the checker on a migration's copy: %s / %s" % (check(hist, {}, own3),
                                                             check(hist, {}, own3, aborted)))
    hist = [w(1, 70 * S, 70 * S + 10), w(2, 150 * S, 150 * S + 10), r(1, 250 * S, 250 * S + 10)]
    if len(check(hist, {}, own3, aborted)[0]) != 1:
        fail("the checker on a copy older than the value read: %s" % (
            check(hist, {}, own3, aborted),))
    # the same copy, then a committed staged migration at 200 s from B to C: C's copy was
    # cleaned (or replaced by B's value), so C returning v1 is stale; had B held v1 (a fill
    # from A at 100 s), C may hold it after the migration: a return
    staged = lambda pool, key, t0, t1: [e for e in (  # noqa: E731
        (50 * S, "abort", "A", "C"), (200 * S, "migrate", "B", "C")) if t0 <= e[0] <= t1]
    if len(check(hist := [w(1, 0, 10), w(2, 150 * S, 150 * S + 10),
                          r(1, 250 * S, 250 * S + 10)], {}, own3, staged)[0]) != 1:
        fail("the checker on a copy a staged migration cleaned: %s" % (
            check(hist, {}, own3, staged),))
    filled = lambda pool, key, t0, t1: [e for e in (  # noqa: E731
        (100 * S, "fill", "A", "B"), (200 * S, "migrate", "B", "C")) if t0 <= e[0] <= t1]
    hist = [w(1, 0, 10), w(2, 50 * S, 50 * S + 10), w(3, 60 * S, 60 * S + 10),
            r(2, 250 * S, 250 * S + 10)]
    if len(check(hist, {}, own3, filled)[0]) != 1:  # v3 went to A after v2 at A: A holds v3
        fail("the checker on a value overwritten before a fill: %s" % (
            check(hist, {}, own3, filled),))
    hist = [w(1, 0, 10), w(2, 50 * S, 50 * S + 10), r(1, 250 * S, 250 * S + 10)]
    if len(check(hist, {}, own3, filled)[0]) != 1:  # v2 at A overwrote v1 before the fill
        fail("the checker on a fill of a newer value: %s" % (check(hist, {}, own3, filled),))
    hist = [w(1, 0, 10), w(2, 150 * S, 150 * S + 10), r(1, 250 * S, 250 * S + 10)]
    if len(check(hist, {}, own3, filled)[0]) != 1:  # v2 on B overwrote the fill's v1 there
        fail("the checker on a fill overwritten before the migration: %s" % (
            check(hist, {}, own3, filled),))
    # k on A, B from 100 s (filled from A), E from 150 s, back on B from 180 s (no fill: B
    # keeps v1, exception 2), C from 200 s by a staged migration from B: C holds what B held
    own5 = lambda pool, key, t: ("A" if t < 100 * S else "B" if t < 150 * S else  # noqa: E731
                                 "E" if t < 180 * S else "B" if t < 200 * S else "C")
    hist = [w(1, 0, 10), w(2, 160 * S, 160 * S + 10), r(1, 250 * S, 250 * S + 10)]
    if len(check(hist, {}, own5, filled)[0]) != 0 or len(check(hist, {}, own5)[0]) != 1:
        fail("the checker on an older copy a staged migration carried over: %s / %s" % (
            check(hist, {}, own5, filled), check(hist, {}, own5)))
    # seed 11's: k on B, on C from 100 s (v2 written there), back on B from 150 s by a change
    # without --migrate (B keeps v1, exception 2), on C again from 200 s by a staged migration
    # from B, which replaces C's v2 with B's v1: C returning v1 is a return, though the newer
    # write went to C. Written again on C after the migration, or on B before it, it is stale.
    own6 = lambda pool, key, t: "C" if 100 * S <= t < 150 * S or t >= 200 * S else "B"  # noqa: E731
    carried = lambda pool, key, t0, t1: [e for e in (  # noqa: E731
        (200 * S, "migrate", "B", "C"),) if t0 <= e[0] <= t1]
    hist = [w(1, 0, 10), w(2, 120 * S, 120 * S + 10), r(1, 250 * S, 250 * S + 10)]
    if len(check(hist, {}, own6, carried)[0]) != 0 or len(check(hist, {}, own6)[0]) != 1:
        fail("the checker on an older copy a staged migration carried over a newer value: "
             "%s / %s" % (check(hist, {}, own6, carried), check(hist, {}, own6)))
    for later, what in ((220, "after the migration"), (170, "at its source before it")):
        hist = [w(1, 0, 10), w(2, 120 * S, 120 * S + 10), w(3, later * S, later * S + 10),
                r(1, 250 * S, 250 * S + 10)]
        if len(check(hist, {}, own6, carried)[0]) != 1:
            fail("the checker on a carried copy overwritten %s: %s" % (
                what, check(hist, {}, own6, carried)))


# ---- the fleet ------------------------------------------------------------------------------

class Fleet:
    def __init__(self, proxy_exe, cli, tmp, rng):
        self.exe, self.cli, self.tmp, self.rng = proxy_exe, cli, tmp, rng
        self.redises = start_redises("redis-server", tmp, NREDIS)
        self.etcd = etcd.EtcdServer(tmp, lambda argv, out: spawn(argv, out)).start()
        self.client = self.etcd.client
        self.servers = {}  # pool -> [redis index]
        for pool, key in POOLS.items():
            self.servers[pool] = sorted(rng.sample(range(NREDIS), MIN_SERVERS + 1))
            self.client.put(key, self.doc(self.servers[pool]))
        self.initial = {p: list(ix) for p, ix in self.servers.items()}
        self.fwds, self.proxies, self.ports = [], [], []
        for i in range(NPROXY):
            fwd = Forwarder(spawn, tmp, "127.0.0.1", self.etcd.port, "fwd%d" % i).start()
            ports = stable_ports(len(POOLS), rng)
            self.fwds.append(fwd)
            self.ports.append(dict(zip(POOLS, ports)))
            self.proxies.append(self.start_proxy(i))
        self.windows = {p: [] for p in POOLS}
        self.applies = {"committed": 0, "without": 0, "aborted": 0, "migrated": 0}
        self.down = set()  # proxies killed, not yet restarted
        self.events = []   # (unix us, what) of the nemesis, for --dump
        self.apply_log = []  # (pool, epoch, committed, servers, t0, t1)
        self.commits = []    # (pool, commit unix us, servers: None when unknown)
        self.copies = []     # (pool, start us, end us, servers, commit us or None): --migrate
        self.probe = False  # --probe: every server read at once after a stale read
        self.probes = []
        self.wait_current("the fleet starts current")

    def doc(self, idx):
        return json.dumps({"servers": ["%s:1 r%d" % (self.redises[i].text, i) for i in idx],
                           "hash": "md5"})

    def conf(self, i):
        lines = []
        for pool, key in POOLS.items():
            # no failover and no ejection: a read that fails over to the next server of its
            # walk may find an older copy there (docs/FLEET.md, exception 3; issue 26)
            lines += ["%s:" % pool, "  listen: 127.0.0.1:%d" % self.ports[i][pool],
                      "  redis: true", "  timeout: 400", "  failover_depth: 1",
                      "  auto_eject_hosts: false",
                      "  membership: etcd://127.0.0.1:%d%s" % (self.fwds[i].port, key),
                      "  membership_hold_down: 0"]
            if pool == "warm":
                lines.append("  warm_up: 20000")
        return write_file(os.path.join(self.tmp, "px%d.yml" % i), "\n".join(lines) + "\n")

    def start_proxy(self, i):
        return Proxy(self.exe, self.tmp, self.conf(i),
                     [("127.0.0.1", self.ports[i][p]) for p in POOLS], label="px%d" % i,
                     extra_args=["--fleet-id", "px%d" % i, "--fleet-ttl", str(TTL)]).start()

    def addr(self, i, pool):
        return ("127.0.0.1", self.ports[i][pool])

    def current(self):
        """Whether every live proxy is current in both pools and nothing is pending."""
        try:
            for i, p in enumerate(self.proxies):
                if i in self.down:
                    continue
                st = p.stats_json()
                if any(st[pool].get("fleet_fenced") != 0 for pool in POOLS):
                    return False
            return all(self.client.get(k + "/pending")[0] is None for k in POOLS.values())
        except Exception:  # noqa: BLE001 (etcd or a proxy mid-restart: not yet)
            return False

    def wait_current(self, what, timeout=SETTLE_S):
        deadline = time.monotonic() + timeout
        while not self.current():
            if time.monotonic() > deadline:
                states = {}
                for i, p in enumerate(self.proxies):
                    try:
                        states[p.label] = {pool: p.stats_json()[pool].get("fleet_fenced")
                                           for pool in POOLS}
                    except Exception as e:  # noqa: BLE001
                        states[p.label] = repr(e)
                fail("%s: the fleet is not current within %.0f s: %s" % (what, timeout, states))
            time.sleep(0.05)

    def apply(self, tag, pool=None, same=False):
        """chash fleet apply of a random change (1 or 2 servers added or removed) to a random
        pool, or of the pool's servers as they are (same); a third of them staged migrations
        (--migrate: the moved keys copied before the commit; --match: the pools share the
        redis-servers, and a pool's copy must not take the other pool's keys for its own)."""
        pool = pool or self.rng.choice(sorted(POOLS))
        migrate = not same and self.rng.random() < 1 / 3
        cur = self.servers[pool]
        out = [i for i in range(NREDIS) if i not in cur]
        n = self.rng.choice([1, 2])
        if same:
            new = list(cur)
        elif len(cur) - n >= MIN_SERVERS and (not out or self.rng.random() < 0.5):
            new = sorted(self.rng.sample(cur, len(cur) - n))
        else:
            new = sorted(cur + self.rng.sample(out, min(n, len(out), MAX_SERVERS - len(cur))))
        lines = ["%s:" % pool, "  listen: 127.0.0.1:1", "  redis: true", "  hash: md5",
                 "  servers:"] + ["    - %s:1 r%d" % (self.redises[i].text, i) for i in new]
        path = write_file(os.path.join(self.tmp, "apply.yml"), "\n".join(lines) + "\n")
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"),
                                                      "detect_leaks=0"]))
        t0 = now_us()
        r = subprocess.run([self.cli, "fleet", "apply", path, "--pool", pool, "--etcd",
                            "etcd://127.0.0.1:%d%s" % (self.etcd.port, POOLS[pool]), "--json",
                            "--timeout", "8000"] +
                           (["--migrate", "--match", pool + ":*"] if migrate else []),
                           capture_output=True, text=True, timeout=90, env=env)
        t1 = now_us()
        try:
            rep = json.loads(r.stdout)
        except ValueError:
            rep = {}
        if migrate and rep.get("failed") not in ("propose", "prepare"):
            # it may have copied keys to their owners under `new`; committed, its commit time
            self.copies.append((pool, t0, t1, new, rep.get("commit_unix_us")
                                if rep.get("committed") else None))
        self.apply_log.append((pool, rep.get("epoch"), bool(rep.get("committed")),
                               ["%s:1 r%d" % (self.redises[i].text, i) for i in new], t0, t1))
        if rep.get("committed"):
            self.servers[pool] = new
            self.commits.append((pool, rep.get("commit_unix_us", t0), new))
            end = rep.get("last_swap_unix_us") or t1
            self.windows[pool].append((rep.get("commit_unix_us", t0), max(end, t0)))
            self.applies["committed"] += 1
            self.applies["without"] += bool(rep.get("committed_without"))
            self.applies["migrated"] += bool(rep.get("migration"))
            return "%s%s %s %d -> %d servers: epoch %s%s" % (
                tag, " (migrated)" if rep.get("migration") else "", pool, len(cur), len(new),
                rep.get("epoch"),
                " without %s" % [x["id"] for x in rep["committed_without"]]
                if rep.get("committed_without") else "")
        if rep.get("failed") == "commit" or not rep:
            # whether it committed is unknown: the whole apply is a window, and the servers
            # are read back from etcd when it is reachable again
            self.windows[pool].append((t0, t1))
            self.servers[pool] = None
            self.commits.append((pool, t0, None))
        self.applies["aborted"] += 1
        return "%s %s: not committed (%s)" % (tag, pool, rep.get("error", r.stderr.strip()[-200:]))

    def owner_oracle(self, keys):
        """owner(pool, key, t): the server `chash lookup` places key on under the membership
        committed last before t (from apply's commit times; None for an apply whose outcome
        is unknown, or inside no known epoch)."""
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"),
                                                      "detect_leaks=0"]))
        timeline = {}
        for pool in POOLS:
            epochs = [(0, self.initial[pool])] + [
                (c, srv) for p, c, srv in self.commits if p == pool]
            ks = sorted(k for p, k in keys if p == pool)
            placed = []
            for t, idx in epochs:
                if idx is None:
                    placed.append((t, None))
                    continue
                placed.append((t, self.placement(pool, idx, ks, env)))
            timeline[pool] = ([t for t, _ in placed], [m for _, m in placed])

        def owner(pool, key, t):
            times, maps = timeline[pool]
            k = bisect.bisect_right(times, t) - 1
            return maps[k].get(key) if k >= 0 and maps[k] is not None else None

        # the changes that copy keys: per pool, (time, kind, placement after or None)
        migrated = {c for _p, _a, _b, _idx, c in self.copies if c is not None}
        events = {p: [] for p in POOLS}
        for p, c, _srv in self.commits:
            if c in migrated:
                events[p].append((c, "migrate", None))
            elif p == "warm":
                events[p].append((c, "fill", None))
        for p, a, _b, idx, c in self.copies:
            if c is None:
                events[p].append((a, "abort", self.placement(
                    p, idx, sorted(k for q, k in keys if q == p), env)))
        for p in events:
            events[p].sort(key=lambda e: e[0])

        def moves(pool, key, t0, t1):
            out = []
            for t, kind, placed in events[pool]:
                if t0 <= t <= t1:
                    new = placed.get(key) if placed is not None else owner(pool, key,
                                                                            t + SLACK_US)
                    out.append((t, kind, owner(pool, key, t - SLACK_US), new))
            return out
        return owner, moves

    def placement(self, pool, idx, ks, env):
        """{key: owner text} of keys ks under servers idx, by `chash lookup`."""
        lines = ["%s:" % pool, "  listen: 127.0.0.1:1", "  redis: true", "  hash: md5",
                 "  servers:"] + ["    - %s:1 r%d" % (self.redises[i].text, i) for i in idx]
        cfg = write_file(os.path.join(self.tmp, "oracle.yml"), "\n".join(lines) + "\n")
        r = subprocess.run([self.cli, "lookup", "--config", cfg, "-"],
                           input="".join(k + "\n" for k in ks), capture_output=True,
                           text=True, timeout=120, env=env)
        if r.returncode != 0:
            fail("chash lookup: %s" % r.stderr)
        return dict(line.split("\t")[:2] for line in r.stdout.splitlines())

    def reread_servers(self):
        """The servers of a pool whose last apply may or may not have committed: K's, or,
        when K is gone (etcd restarted empty), those its proxies serve (their records)."""
        by_text = {r.text: i for i, r in enumerate(self.redises)}
        for pool, key in POOLS.items():
            if self.servers[pool] is None:
                val, _ = self.client.get(key)
                if val is None:
                    fail("%s: K is gone and the last apply's outcome is unknown" % pool)
                self.servers[pool] = sorted(by_text[s.split(":1 ")[0]]
                                            for s in json.loads(val)["servers"])


# ---- the load -------------------------------------------------------------------------------

class Client(threading.Thread):
    def __init__(self, fleet, t, seed):
        super().__init__(daemon=True)
        self.fleet, self.rng = fleet, random.Random(seed)
        self.keys = ["n:%d:%d" % (t, i) for i in range(KEYS_PER_THREAD)]
        self.version = {}
        self.history = []
        self.wrong = []  # replies that hold another key's value
        self.acked = {}
        self.stop_ev = threading.Event()
        self.conns = {}

    def conn(self, i, pool):
        c = self.conns.get((i, pool))
        if c is None:
            c = self.conns[(i, pool)] = Resp(self.fleet.addr(i, pool), timeout=3.0)
        return c

    def call(self, i, pool, *args):
        try:
            return self.conn(i, pool).call(*args)
        except Exception as e:  # noqa: BLE001 (a killed or stopped proxy: an error, reconnect)
            c = self.conns.pop((i, pool), None)
            if c is not None:
                c.close()
            return RespError("client: %r" % e)

    def run(self):
        while not self.stop_ev.is_set():
            pool = self.rng.choice(sorted(POOLS))
            key = pool + ":" + self.rng.choice(self.keys)  # the pools share the servers
            a, b = self.rng.randrange(NPROXY), self.rng.randrange(NPROXY)
            v = self.version[(pool, key)] = self.version.get((pool, key), 0) + 1
            t0 = now_us()
            got = self.call(a, pool, "SET", key, "%s=%d" % (key, v))
            t1 = now_us()
            self.history.append(("w", pool, key, v, t0, t1, "ok" if got == b"OK" else "err", a))
            if got == b"OK":
                self.acked[(pool, key)] = v
            t2 = now_us()
            got = self.call(b, pool, "GET", key)
            t3 = now_us()
            if isinstance(got, RespError):
                self.history.append(("r", pool, key, 0, t2, t3, "err", b))
            elif got is None:
                self.history.append(("r", pool, key, 0, t2, t3, "miss", b))
            elif not got.startswith(key.encode() + b"="):
                # another key's value: a reply given to the wrong request
                self.wrong.append((pool, key, got[:80], b, t2))
                self.history.append(("r", pool, key, 0, t2, t3, "err", b))
            else:
                ver = int(got.split(b"=")[1])
                self.history.append(("r", pool, key, ver, t2, t3, "ok", b))
                if self.fleet.probe and ver < self.acked.get((pool, key), 0):
                    self.fleet.probes.append((pool, key, ver, self.acked[(pool, key)], b, t2, {
                        r.text: r.call("GET", key) for r in self.fleet.redises}))
        for c in self.conns.values():
            c.close()


# ---- the nemesis ----------------------------------------------------------------------------

def nemesis_step(fleet, rng, counts):
    """One fault, healed, with an apply during it when it may commit. Returns a log line."""
    kind = rng.choices(["etcd_partition", "proxy_stop", "proxy_kill", "server_stop",
                        "server_kill", "etcd_stop", "etcd_kill", "etcd_empty", "apply"],
                       [4, 4, 2, 2, 2, 1, 1, 1, 3])[0]
    counts[kind] = counts.get(kind, 0) + 1
    i = rng.randrange(NPROXY)
    past = rng.random() < 0.5
    hold = rng.uniform(TTL + 0.5, TTL + 3.0) if past else rng.uniform(0.2, 1.2)
    line = kind
    fleet.events.append((now_us(), "start " + kind))
    if kind == "apply":
        line = fleet.apply("apply")
        fleet.events.append((now_us(), line))
        return line
    if kind == "etcd_partition":
        fleet.fwds[i].pause()
        line = "px%d cut off from etcd for %.1f s" % (i, hold)
    elif kind == "proxy_stop":
        sigstop(fleet.proxies[i].proc.pid)
        line = "px%d stopped for %.1f s" % (i, hold)
    elif kind == "proxy_kill":
        fleet.proxies[i].proc.kill()
        fleet.proxies[i].proc.wait(timeout=10)
        fleet.down.add(i)
        line = "px%d killed for %.1f s" % (i, hold)
    elif kind in ("server_stop", "server_kill"):
        s = fleet.redises[rng.randrange(NREDIS)]
        hold = rng.uniform(0.3, 1.5)
        if kind == "server_stop":
            os.kill(s.proc.pid, signal.SIGSTOP)
        else:
            s.kill()
        line = "redis %s %s for %.1f s" % (s.text, "stopped" if kind == "server_stop" else
                                            "killed", hold)
    elif kind == "etcd_stop":
        os.kill(fleet.etcd.proc.pid, signal.SIGSTOP)
        line = "etcd stopped for %.1f s" % hold
    elif kind in ("etcd_kill", "etcd_empty"):
        fleet.etcd.stop()
        if kind == "etcd_empty":
            subprocess.run(["rm", "-rf", fleet.etcd.dir], check=True)
        line = "etcd killed%s" % (" and restarted empty" if kind == "etcd_empty" else "")
    applied = []
    t_end = time.monotonic() + hold
    during = None
    if kind in ("etcd_partition", "proxy_stop", "proxy_kill", "server_stop",
                "server_kill") and rng.random() < 0.7:
        during = threading.Thread(target=lambda: applied.append(fleet.apply("apply during it")),
                                  daemon=True)
        during.start()
    left = t_end - time.monotonic()
    if left > 0:
        time.sleep(left)  # the fault's length: a parameter of the schedule, not a wait
    # heal
    if kind == "etcd_partition":
        fleet.fwds[i].resume()
    elif kind == "proxy_stop":
        os.kill(fleet.proxies[i].proc.pid, signal.SIGCONT)
    elif kind == "proxy_kill":
        fleet.proxies[i] = fleet.start_proxy(i)
        fleet.down.discard(i)
    elif kind == "server_stop":
        os.kill(s.proc.pid, signal.SIGCONT)
    elif kind == "server_kill":
        s.start()
    elif kind == "etcd_stop":
        os.kill(fleet.etcd.proc.pid, signal.SIGCONT)
    elif kind in ("etcd_kill", "etcd_empty"):
        fleet.etcd.start()
        if kind == "etcd_empty":
            # docs/FLEET.md: after an empty restart, wait until every live instance has
            # registered again before a change
            wait_until(lambda: all(("px%d" % j) in fleet.client.records(k)
                                   for k in POOLS.values() for j in range(NPROXY)),
                       SETTLE_S, "every proxy registered again in the empty etcd")
            # and the recovery docs/OPERATIONS.md gives: the membership written again (an
            # apply of what is served), so that a proxy that restarts finds its pool's key
            for pool in POOLS:
                applied.append(fleet.apply("recovery", pool=pool, same=True))
    if during is not None:
        during.join(timeout=120)
        if during.is_alive():
            fail("apply during %s did not end within 120 s" % line)
    line += "".join("; " + a for a in applied)
    fleet.events.append((now_us(), line))
    fleet.wait_current("after: " + line)
    fleet.reread_servers()
    return line


def options(ap):
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--duration", type=float, default=35.0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--dump", default=None, help="the histories of the keys with stale reads")
    ap.add_argument("--probe", action="store_true",
                    help="after a stale read, read the key on every server (for --dump)")


def body(args):
    proxy_exe, cli, tmp = args.proxy, args.cli, args.tmp
    self_test()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    log("seed %d (replay: --seed %d), %.0f s of faults" % (seed, seed, args.duration))
    rng = random.Random(seed)
    fleet = Fleet(proxy_exe, cli, tmp, rng)
    fleet.probe = args.probe
    if args.probe:  # every command each server runs, with its client's address
        for r in fleet.redises:
            spawn(["redis-cli", "-p", str(r.port), "monitor"],
                  os.path.join(tmp, "monitor-%d.log" % r.port))
    clients = [Client(fleet, t, seed * 100 + t) for t in range(THREADS)]
    for c in clients:
        c.start()
    counts, steps = {}, 0
    t_end = time.monotonic() + args.duration
    try:
        while time.monotonic() < t_end:
            line = nemesis_step(fleet, rng, counts)
            steps += 1
            log("step %d: %s" % (steps, line))
            time.sleep(rng.uniform(0.1, 0.5))
    finally:
        for c in clients:
            c.stop_ev.set()
        for c in clients:
            c.join(timeout=30)
    history = [h for c in clients for h in c.history]
    owner, moves = fleet.owner_oracle({(h[1], h[2]) for h in history})
    wrong = [x for c in clients for x in c.wrong]
    if wrong:
        fail("%d replies held another key's value (seed %d), e.g. %s" % (len(wrong), seed,
                                                                       wrong[:3]))
    violations, st = check(history, fleet.windows, owner, moves)
    summary = {"seed": seed, "duration_s": args.duration, "faults": steps, "by_kind": counts,
               "applies": fleet.applies, "writes": sum(h[0] == "w" for h in history), **st,
               "violations": violations[:20]}
    if args.json:
        write_file(args.json, json.dumps(summary, indent=1) + "\n")
    if args.dump and violations:
        bad = {(v["pool"], v["key"]) for v in violations[:50]}
        bad |= {(p[0], p[1]) for p in fleet.probes[:20]}
        write_file(args.dump, json.dumps({
            "events": fleet.events, "windows": fleet.windows, "servers": fleet.servers,
            "applies": fleet.apply_log,
            "initial": {p: ["%s:1 r%d" % (fleet.redises[i].text, i) for i in ix]
                        for p, ix in fleet.initial.items()},
            "probes": [list(p[:6]) + [{k: (v.decode() if isinstance(v, bytes) else repr(v))
                                       for k, v in p[6].items()}] for p in fleet.probes[:20]],
            "histories": {"%s/%s" % pk: [h for h in history if (h[1], h[2]) == pk]
                          for pk in bad}}, indent=0) + "\n")
    log("%d faults %s; applies %s; %d writes, %d reads (%d misses, %d errors; stale but "
        "promised: %d in switch windows, %d copies kept from a previous ownership), %d stale" % (
            steps, counts, fleet.applies, summary["writes"], st["reads"], st["misses"],
            st["errors"], st["exempt"], st["returned"], st["stale"]))
    if violations:
        fail("%d stale reads (seed %d), e.g. %s" % (len(violations), seed, violations[:3]))
    for p in fleet.proxies:
        p.stop()
    return "seed %d: %d faults, %d reads, 0 stale" % (seed, steps, st["reads"])


run_test(body, programs=("redis-server", "etcd"),
         binaries=(("proxy", "chash-proxy"), ("cli", "chash")), options=options)
