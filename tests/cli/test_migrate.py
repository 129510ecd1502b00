#!/usr/bin/python3 -B
# SPDX-License-Identifier: Apache-2.0
"""chash migrate against real servers: a pool grows from 4 to 6 servers.

usage: test_migrate.py CHASH-PROXY CHASH redis|memcached|guard

(guard: the run's guards on Redis: progress, the checkpoint's checks, a source dying mid-copy.)

The keys are written through chash-proxy running on OLD, so each lands where the proxy puts it
(not where chash migrate thinks it is); after the migration chash-proxy on NEW must read every
one back. The keys that move are computed independently of chash migrate: the owner of each key
under OLD and NEW by `chash lookup` (and their count checked against `chash plan --key-file`).

Checked: --dry-run writes nothing and counts what moves (per pair, adding up); --limit with
--checkpoint stops early (exit 3) and a rerun completes with nothing lost and counts that add
up; every moved key is at its new owner with its TTL (and type, flags), nothing else was
written, nothing deleted; --verify; a key already at the new owner is kept without --replace and
overwritten with it; a new owner that refuses writes (Redis: maxmemory + noeviction; memcached:
an item size limit) makes its keys fail, listed, exit 1; bad input (unknown pool, protocols that
differ, an unreachable server, a refused password) is a clear error that names the server and
never prints the password; Redis servers with a password and a database (redis_auth,
redis_db). Every chash run is checked for sanitizer reports (leaks included; ThreadSanitizer
in `make test-tsan`).
"""
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "proxy"))
import xxhash  # noqa: E402  (python3-xxhash: the checkpoint's checksum)
from proxyharness import (Mc, Memcached, Proxy, Resp, SANITIZER_MARKS, fail,  # noqa: E402
                          free_ports, log, pool_yaml, require_programs, run_test, sanitizer_env,
                          start_memcacheds, start_redises, start_servers, write_file)

N_STRINGS = 3000
N_HASHES = 60
N_LISTS = 60
TTL_MS = 600000
TTL_TOLERANCE_MS = 5000
PASSWORD = "s3cret-never-printed"


def chash_run(chash, args, expect=None):
    """Runs `chash args...`; returns (status, parsed JSON or None, stderr text)."""
    r = subprocess.run([chash] + args, capture_output=True, timeout=60, env=sanitizer_env())
    err = r.stderr.decode("utf-8", "replace")
    for m in SANITIZER_MARKS:
        if m.decode() in err:
            fail("chash %s: sanitizer report:\n%s" % (" ".join(args), err[-3000:]))
    out = None
    if "--json" in args and r.stdout.strip():
        try:
            out = json.loads(r.stdout)
        except ValueError as e:
            fail("chash %s: not one JSON object (%s): %r" % (" ".join(args), e, r.stdout[:300]))
    if expect is not None and r.returncode != expect:
        fail("chash %s exited %d, not %d; stderr:\n%s\nstdout:\n%s" % (
            " ".join(args), r.returncode, expect, err[-2000:],
            r.stdout.decode("utf-8", "replace")[-2000:]))
    return r.returncode, out, err


# A progress line of --progress: "chash migrate: migrating [###...]  42%  1234/5678 keys  400
# keys/s  ETA 0:11".
PROGRESS = re.compile(r"^chash migrate: (\w+) \[[#.]{30}\] +(\d+)%  (\d+)/(\d+) keys  "
                      r"(\d+|--) keys/s  ETA (\d+:\d\d(?::\d\d)?|--)$")


class Running:
    """chash migrate ... --progress started, its stderr read as it comes (a thread), so a test
    can act once the copy is seen running: wait_running() returns once a progress line shows
    some keys done and some left. Acting then (a signal, a kill) is deterministic as long as
    what is left takes longer than the act, which the test's --rate ensures."""

    def __init__(self, chash, args):
        self.p = subprocess.Popen([chash] + args + ["--progress"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=sanitizer_env())
        self.lines, self.cond = [], threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.p.stderr:
            with self.cond:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)  # end of stderr
            self.cond.notify_all()

    def progress(self):
        with self.cond:
            return [m for m in (PROGRESS.match(l) for l in self.lines if l) if m]

    def wait_running(self, timeout=60, rated=False):
        """The first progress line with 0 < done < total (rated: and a rate, which shows after
        a second); fails if the run ends first."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    m = line and PROGRESS.match(line)
                    if m and m.group(1) == "migrating" and \
                            0 < int(m.group(3)) < int(m.group(4)) and \
                            (not rated or m.group(5) != "--"):
                        return m
                if None in self.lines or time.monotonic() > deadline:
                    fail("chash migrate: never seen running (exit %s); stderr:\n%s" % (
                        self.p.poll(), "\n".join(l for l in self.lines if l)[-3000:]))
                self.cond.wait(deadline - time.monotonic())

    def finish(self, timeout=60):
        """(exit status, the JSON object, stderr text)."""
        out_b = self.p.stdout.read()
        self.p.wait(timeout=timeout)
        self.reader.join(timeout=timeout)
        err = "\n".join(l for l in self.lines if l)
        for m in SANITIZER_MARKS:
            if m.decode() in err:
                fail("chash migrate: sanitizer report:\n%s" % err[-3000:])
        try:
            return self.p.returncode, json.loads(out_b), err
        except ValueError:
            fail("chash migrate: not JSON: %r; stderr:\n%s" % (out_b[:300], err[-2000:]))


def owners(chash, config, keys):
    """{key (bytes): owner address} by `chash lookup --config`, which places as nutcracker."""
    r = subprocess.run([chash, "lookup", "--config", config, "-"],
                       input=b"".join(k + b"\n" for k in keys), capture_output=True, timeout=60,
                       env=sanitizer_env())
    if r.returncode != 0:
        fail("chash lookup: %s" % r.stderr.decode())
    out = {}
    for k, line in zip(keys, r.stdout.split(b"\n")):
        parts = line.split(b"\t")
        if parts[0] != k:
            fail("chash lookup: unexpected line %r" % line)
        out[k] = parts[1].decode()
    return out


def plan_moved(chash, tmp, old, new, keys):
    """The number of keys `chash plan OLD NEW --key-file` lists as moving."""
    path = write_file(os.path.join(tmp, "keys.txt"), "".join(k.decode() + "\n" for k in keys))
    r = subprocess.run([chash, "plan", old, new, "--key-file", path], capture_output=True,
                       timeout=60, env=sanitizer_env())
    if r.returncode != 0:
        fail("chash plan: %s" % r.stderr.decode())
    return len([l for l in r.stdout.split(b"\n") if l])


def _tag(i):
    """A varied suffix: FNV-1a (the pools' hash) places "k:0", "k:1", ... on few points of the
    continuum, which would make the share that moves depend on luck."""
    return hashlib.md5(b"%d" % i).hexdigest()[:8].encode()


def check_sums(out, expected_moved, what):
    """The JSON's counts add up: pairs to moved, moved to its outcomes."""
    pairs = sum(p["keys"] for p in out["pairs"])
    if out["moved"] != expected_moved or pairs != out["moved"]:
        fail("%s: moved %d, pairs add up to %d, expected %d" % (
            what, out["moved"], pairs, expected_moved))
    if not out["dry_run"]:
        outcomes = out["copied"] + out["present"] + out["expired"] + out["failed"]
        if outcomes != out["moved"]:
            fail("%s: copied+present+expired+failed = %d, moved %d" % (what, outcomes,
                                                                         out["moved"]))
    per_source = sum(s["moved"] for s in out["sources"])
    if per_source != out["moved"]:
        fail("%s: sources' moved add up to %d, not %d" % (what, per_source, out["moved"]))


# ---------------------------------------------------------------------------------------------
# Redis

class RedisSide:
    def __init__(self, srv, password=None):
        self.srv, self.password = srv, password

    def conn(self):
        c = Resp(self.srv.addr)
        if self.password:
            c.call("AUTH", self.password)
        return c

    def keys(self):
        with self.conn() as c:
            return set(c.call("KEYS", "*"))

    def flush(self):
        with self.conn() as c:
            c.call("FLUSHALL")


def redis_test(proxy_exe, chash, tmp):
    redis_exe, = require_programs("redis-server")
    olds = start_redises(redis_exe, tmp, 4)
    news = start_redises(redis_exe, tmp, 2)
    # Names, weights and a hash tag: the placement chash-proxy builds from them is the one to
    # copy by. The servers of OLD keep their names in NEW.
    old_servers = [(s.text, 2 if i == 0 else 1, "r%d" % (i + 1)) for i, s in enumerate(olds)]
    new_servers = old_servers + [(s.text, 1, "r%d" % (i + 5)) for i, s in enumerate(news)]
    po, pn = free_ports(2)
    settings = dict(hash="fnv1a_64", distribution="ketama", hash_tag='"{}"')
    old_cfg = write_file(os.path.join(tmp, "old.yml"),
                         pool_yaml("cache", po, old_servers, redis=True, **settings))
    new_cfg = write_file(os.path.join(tmp, "new.yml"),
                         pool_yaml("cache", pn, new_servers, redis=True, **settings))

    # 1. Written through chash-proxy on OLD: strings with and without a TTL, hashes, lists,
    #    hash-tagged keys.
    strings = [b"user:%d:%s" % (i, _tag(i)) for i in range(N_STRINGS)]
    tagged = [b"{acct:%d}:profile" % i for i in range(100)]
    hashes = [b"h:%d" % i for i in range(N_HASHES)]
    lists = [b"l:%d" % i for i in range(N_LISTS)]
    allkeys = strings + tagged + hashes + lists
    proxy_old = Proxy(proxy_exe, tmp, old_cfg, [("127.0.0.1", po)], label="proxy-old").start()
    with Resp(("127.0.0.1", po)) as c:
        cmds = []
        for i, k in enumerate(strings + tagged):
            if i % 5 == 0:
                cmds.append(("SET", k, b"v-" + k))       # no TTL
            else:
                cmds.append(("SET", k, b"v-" + k, "PX", TTL_MS + i))
        for k in hashes:
            cmds.append(("HSET", k, "a", b"1-" + k, "b", "2"))
            cmds.append(("PEXPIRE", k, TTL_MS))
        for k in lists:
            cmds.append(("RPUSH", k, "x", "y", b"z-" + k))
        for i in range(0, len(cmds), 500):
            for rep in c.pipeline(cmds[i:i + 500]):
                if not isinstance(rep, (bytes, int)):
                    fail("write through chash-proxy on OLD: %r" % rep)
    proxy_old.stop()

    before = {s.text: RedisSide(s).keys() for s in olds}
    if sum(len(v) for v in before.values()) != len(allkeys):
        fail("the OLD servers hold %d keys, %d were written" % (
            sum(len(v) for v in before.values()), len(allkeys)))
    own_old = owners(chash, old_cfg, allkeys)
    own_new = owners(chash, new_cfg, allkeys)
    for k in allkeys:      # the proxy put each key where chash lookup says
        if k not in before[own_old[k]]:
            fail("%r is not on %s, its owner under OLD" % (k, own_old[k]))
    moved = {k for k in allkeys if own_old[k] != own_new[k]}
    planned = plan_moved(chash, tmp, old_cfg, new_cfg, allkeys)
    if planned != len(moved):
        fail("chash plan --key-file lists %d moving keys, chash lookup %d" % (planned, len(moved)))
    log("%d keys written through chash-proxy, %d move (chash lookup and chash plan agree)" % (
        len(allkeys), len(moved)))

    # 2. --dry-run: counts, and nothing written.
    _, out, _ = chash_run(chash, ["migrate", old_cfg, new_cfg, "--dry-run", "--json"], expect=0)
    check_sums(out, len(moved), "--dry-run")
    if out["scanned"] != len(allkeys) or out["stray"] != 0 or out["copied"] != 0:
        fail("--dry-run: scanned %d (of %d), %d stray, copied %d" % (
            out["scanned"], len(allkeys), out["stray"], out["copied"]))
    if any(RedisSide(s).keys() for s in news) or \
            any(RedisSide(s).keys() != before[s.text] for s in olds):
        fail("--dry-run wrote keys")

    # 3. --limit with --checkpoint stops early; the rerun completes.
    ckpt = os.path.join(tmp, "migrate.ckpt")
    rc, out, _ = chash_run(chash, ["migrate", old_cfg, new_cfg, "--checkpoint", ckpt,
                                   "--limit", "700", "--batch", "100", "--parallel", "1",
                                   "--json"], expect=3)
    if out["complete"] or out["scanned"] >= len(allkeys) or out["scanned"] < 700:
        fail("--limit 700: complete %s after %d keys" % (out["complete"], out["scanned"]))
    part = sum(len(RedisSide(s).keys()) for s in olds + news) - len(allkeys)
    if part == 0 or part >= len(moved):
        fail("--limit 700: %d of %d moved keys copied" % (part, len(moved)))
    _, out, _ = chash_run(chash, ["migrate", old_cfg, new_cfg, "--checkpoint", ckpt, "--batch",
                                  "100", "--json"], expect=0)
    check_sums(out, len(moved), "resumed run")
    # A key moved to an OLD server scanned later is seen there too, as "stray" (not its owner
    # under OLD): scanned less stray is what OLD's owners hold.
    if not out["complete"] or out["scanned"] - out["stray"] != len(allkeys) or out["failed"] or \
            out["copied"] + out["present"] != len(moved) or out["expired"] != 0:
        fail("resumed run: %r" % {k: out[k] for k in ("complete", "scanned", "stray", "copied",
                                                       "present", "expired", "failed")})
    log("checkpoint: stopped after %d of %d moved keys, resumed: %d copied in all" % (
        part, len(moved), out["copied"]))
    _, again, _ = chash_run(chash, ["migrate", old_cfg, new_cfg, "--checkpoint", ckpt,
                                    "--json"], expect=0)
    if again["copied"] != out["copied"] or again["keys_per_second"] != 0:
        fail("a finished checkpoint did more work: %r" % again)

    # 4. Every moved key at its new owner, type and TTL kept; nothing else written or deleted
    #    (with weights, twemproxy's ketama also moves keys between servers of OLD).
    for s in olds + news:
        want = before.get(s.text, set()) | {k for k in moved if own_new[k] == s.text}
        have = RedisSide(s).keys()
        if have != want:
            fail("%s holds %d keys, not %d (%d extra, %d missing)" % (
                s.text, len(have), len(want), len(have - want), len(want - have)))
    inside = len([k for k in moved if own_new[k] in before])
    log("%d moved keys went to servers of OLD (weights), %d to the new ones" % (
        inside, len(moved) - inside))
    srv = {s.text: s for s in olds + news}
    mk = sorted(moved)
    for i in range(0, len(mk), 500):
        chunk = mk[i:i + 500]
        t0 = time.monotonic()
        types_src, types_dst, pttl_src, pttl_dst = _pipelined(srv, chunk, own_old, own_new)
        gap_ms = (time.monotonic() - t0) * 1000      # between a key's two PTTL readings
        for k, src_t, dst_t, src_p, dst_p in zip(chunk, types_src, types_dst, pttl_src,
                                                 pttl_dst):
            if src_t != dst_t:
                fail("%r: type %r at the source, %r at the new owner" % (k, src_t, dst_t))
            if (src_p < 0) != (dst_p < 0) or \
                    not src_p - gap_ms - TTL_TOLERANCE_MS <= dst_p <= src_p + TTL_TOLERANCE_MS:
                fail("%r: PTTL %d at the source, %d at the new owner (read %.0f ms apart at "
                     "most)" % (k, src_p, dst_p, gap_ms))

    # 5. chash-proxy on NEW reads every key back.
    proxy_new = Proxy(proxy_exe, tmp, new_cfg, [("127.0.0.1", pn)], label="proxy-new").start()
    with Resp(("127.0.0.1", pn)) as c:
        reps = c.pipeline([("GET", k) for k in strings + tagged])
        for k, v in zip(strings + tagged, reps):
            if v != b"v-" + k:
                fail("GET %r through chash-proxy on NEW: %r" % (k, v))
        for k, v in zip(hashes, c.pipeline([("HGET", k, "a") for k in hashes])):
            if v != b"1-" + k:
                fail("HGET %r a through chash-proxy on NEW: %r" % (k, v))
        for k, v in zip(lists, c.pipeline([("LRANGE", k, 0, -1) for k in lists])):
            if v != [b"x", b"y", b"z-" + k]:
                fail("LRANGE %r through chash-proxy on NEW: %r" % (k, v))
    proxy_new.stop()
    log("chash-proxy on NEW reads all %d keys back" % len(allkeys))

    # 6. --verify.
    _, out, _ = chash_run(chash, ["migrate", old_cfg, new_cfg, "--dry-run", "--verify", "--json"],
                          expect=0)
    v = out["verify"]
    if v["checked"] != len(moved) or v["ok"] != len(moved):
        fail("--verify: %r" % v)

    # 7. A key already at its new owner is newer: kept without --replace, overwritten with it.
    victim = sorted(k for k in moved if k.startswith(b"user:"))[0]
    tgt = RedisSide(srv[own_new[victim]])
    with tgt.conn() as c:
        c.call("SET", victim, "newer")
    _, out, _ = chash_run(chash, ["migrate", old_cfg, new_cfg, "--json"], expect=0)
    check_sums(out, len(moved), "rerun")
    if out["present"] != len(moved) or out["copied"] != 0:
        fail("rerun without --replace: copied %d, present %d" % (out["copied"], out["present"]))
    with tgt.conn() as c:
        if c.call("GET", victim) != b"newer":
            fail("a key already at the new owner was overwritten without --replace")
    _, out, _ = chash_run(chash, ["migrate", old_cfg, new_cfg, "--replace", "--json"], expect=0)
    if out["copied"] != len(moved):
        fail("--replace: copied %d of %d" % (out["copied"], len(moved)))
    with tgt.conn() as c:
        if c.call("GET", victim) != b"v-" + victim:
            fail("--replace did not overwrite %r" % victim)

    # 8. A new owner that refuses writes: its keys fail, are listed, exit 1.
    for s in news:
        RedisSide(s).flush()
    full = news[1]
    with RedisSide(full).conn() as c:
        c.pipeline([("CONFIG", "SET", "maxmemory-policy", "noeviction"),
                    ("CONFIG", "SET", "maxmemory", "1")])
    to_full = len([k for k in moved if own_new[k] == full.text])
    rc, out, err = chash_run(chash, ["migrate", old_cfg, new_cfg, "--json"], expect=1)
    if out["failed"] != to_full or out["copied"] + out["present"] != len(moved) - to_full:
        fail("refused writes: failed %d (expected %d), copied %d, present %d" % (
            out["failed"], to_full, out["copied"], out["present"]))
    if not out["failures"] or "OOM" not in out["failures"][0]["error"] or \
            out["failures"][0]["to"] != full.text or "chash migrate: failed:" not in err:
        fail("refused writes: not listed: %r / %r" % (out["failures"][:1], err[:300]))
    with RedisSide(full).conn() as c:
        c.call("CONFIG", "SET", "maxmemory", "0")
    log("a full new owner: %d keys failed and listed, exit 1" % to_full)

    # 9. Killed midway (SIGTERM, during a --rate-limited run): exit 3 with the checkpoint saved;
    #    the rerun completes with nothing lost.
    for s in news:
        RedisSide(s).flush()
    # The signal is sent once a progress line shows the copy running with keys left; at 100
    # moved keys a second the ~800 that move take 8 s, so the run cannot end before it lands
    # (sending it once the checkpoint file appeared raced the copy's end: 1 in 4 under TSan).
    ckpt2 = os.path.join(tmp, "killed.ckpt")
    run_ = Running(chash, ["migrate", old_cfg, new_cfg, "--rate", "100", "--checkpoint", ckpt2,
                           "--json"])
    run_.wait_running()
    run_.p.send_signal(signal.SIGTERM)
    rc, killed, err = run_.finish()
    if rc != 3 or killed["complete"] or killed["moved"] >= len(moved):
        fail("SIGTERM: exit %d, %r; stderr:\n%s" % (rc, {k: killed[k] for k in (
            "complete", "moved", "copied")}, err[-3000:]))
    _, out, _ = chash_run(chash, ["migrate", old_cfg, new_cfg, "--checkpoint", ckpt2, "--json"],
                          expect=0)
    check_sums(out, len(moved), "after SIGTERM")
    if out["failed"] or out["copied"] + out["present"] != len(moved):
        fail("after SIGTERM: %r" % {k: out[k] for k in ("copied", "present", "failed")})
    log("SIGTERM after %d moved keys: exit 3; the rerun completes (%d copied, %d present)" % (
        killed["moved"], out["copied"], out["present"]))

    # 10. Bad input.
    rc, _, err = chash_run(chash, ["migrate", old_cfg, new_cfg, "--pool", "nope"], expect=2)
    if "no pool 'nope'" not in err:
        fail("unknown pool: %r" % err)
    mc_cfg = write_file(os.path.join(tmp, "mc.yml"),
                        pool_yaml("cache", pn, new_servers, redis=False, **settings))
    _, _, err = chash_run(chash, ["migrate", old_cfg, mc_cfg], expect=2)
    if "protocols" not in err:
        fail("protocols that differ: %r" % err)
    dead = "127.0.0.1:%d" % free_ports(1)[0]
    dead_cfg = write_file(os.path.join(tmp, "dead.yml"), pool_yaml(
        "cache", pn, new_servers + [(dead, 1, "r9")], redis=True, **settings))
    _, _, err = chash_run(chash, ["migrate", old_cfg, dead_cfg], expect=1)
    if dead not in err or "NEW server" not in err:
        fail("unreachable server not named: %r" % err)
    auth_cfg = write_file(os.path.join(tmp, "auth.yml"), pool_yaml(
        "cache", pn, new_servers, redis=True, redis_auth=PASSWORD, **settings))
    _, _, err = chash_run(chash, ["migrate", old_cfg, auth_cfg], expect=1)
    if "AUTH" not in err or PASSWORD in err:
        fail("refused password: %r" % err)

    # A checkpoint of another migration, or not a checkpoint at all, is refused.
    body_ = "chash-migrate-checkpoint 2\nid cache m-1 m-2\nmoves 0123456789abcdef\n"
    other = write_file(os.path.join(tmp, "other.ckpt"), body_ + "check %s\nend\n"
                       % xxhash.xxh64(body_.encode()).hexdigest())
    _, _, err = chash_run(chash, ["migrate", old_cfg, new_cfg, "--checkpoint", other], expect=1)
    if "another migration" not in err:
        fail("a checkpoint of another migration: %r" % err)
    junk = write_file(os.path.join(tmp, "junk.ckpt"), "hello\n")
    _, _, err = chash_run(chash, ["migrate", old_cfg, new_cfg, "--checkpoint", junk], expect=1)
    if "not a chash migrate checkpoint" not in err:
        fail("a file that is not a checkpoint: %r" % err)

    # 11. Password-protected servers and a database: redis_auth and redis_db are used (and the
    #     password printed nowhere).
    locked = start_redises(redis_exe, tmp, 2, password=PASSWORD)
    lk = {"redis_auth": PASSWORD, "redis_db": 3}
    lo = write_file(os.path.join(tmp, "lold.yml"), pool_yaml(
        "cache", pn, [(locked[0].text, 1, None)], redis=True, **dict(settings, **lk)))
    ln = write_file(os.path.join(tmp, "lnew.yml"), pool_yaml(
        "cache", pn, [(l.text, 1, None) for l in locked], redis=True, **dict(settings, **lk)))
    lkeys = [b"auth:%d:%s" % (i, _tag(i)) for i in range(300)]
    with Resp(locked[0].addr) as c:
        c.call("AUTH", PASSWORD)
        c.call("SELECT", 3)
        c.pipeline([("SET", k, b"v-" + k) for k in lkeys])
    lmoved = [k for k, o in owners(chash, ln, lkeys).items() if o == locked[1].text]
    rc, out, err = chash_run(chash, ["migrate", lo, ln, "--json"], expect=0)
    if out["copied"] != len(lmoved) or PASSWORD in err or PASSWORD in json.dumps(out):
        fail("with redis_auth and redis_db: copied %d of %d" % (out["copied"], len(lmoved)))
    with Resp(locked[1].addr) as c:
        c.call("AUTH", PASSWORD)
        c.call("SELECT", 3)
        if sorted(c.call("KEYS", "*")) != sorted(lmoved):
            fail("with redis_auth and redis_db: the new server's database 3 does not hold the "
                 "moved keys")
    log("redis_auth and redis_db: %d keys copied into database 3" % len(lmoved))

    # 12. A new owner killed midway: its keys fail (listed, exit 1), the others are copied.
    for s in news:
        RedisSide(s).flush()
    victim_srv = news[0]
    to_victim = len([k for k in moved if own_new[k] == victim_srv.text])
    run_ = Running(chash, ["migrate", old_cfg, new_cfg, "--rate", "250", "--parallel", "1",
                           "--json"])
    run_.wait_running()      # then ~3 s of copying are left at 250 keys/s
    victim_srv.kill()
    rc, out, err = run_.finish()
    if rc != 1 or out["failed"] == 0 or out["failed"] > to_victim or \
            out["copied"] + out["present"] + out["failed"] + out["expired"] != len(moved) or \
            any(f["to"] != victim_srv.text for f in out["failures"]) or \
            victim_srv.text not in err:
        fail("a new owner killed midway: exit %d, %r; stderr %r" % (
            rc, {k: out[k] for k in ("copied", "present", "failed")}, err[-600:]))
    log("a new owner killed midway: %d of its %d keys failed (%s), the rest copied, exit 1" % (
        out["failed"], to_victim, out["failures"][0]["error"]))
    return "%d keys, %d moved" % (len(allkeys), len(moved))


def _pipelined(srv, keys, own_old, own_new):
    """(types at the source, types at the new owner, PTTLs at the source, at the new owner)."""
    def ask(owner_of, cmd):
        by = {}
        for k in keys:
            by.setdefault(owner_of[k], []).append(k)
        res = {}
        for addr, ks in by.items():
            with Resp(srv[addr].addr) as c:
                for k, r in zip(ks, c.pipeline([(cmd, k) for k in ks])):
                    res[k] = r
        return [res[k] for k in keys]
    return (ask(own_old, "TYPE"), ask(own_new, "TYPE"), ask(own_old, "PTTL"),
            ask(own_new, "PTTL"))


# ---------------------------------------------------------------------------------------------
# memcached

class SmallMemcached(Memcached):
    """A memcached that refuses items over 1 KiB."""

    def start(self):
        argv = [self.exe, "-p", str(self.port), "-l", self.host, "-U", "0", "-m", "64",
                "-I", "1k", "-o", "slab_chunk_max=512"]
        if os.geteuid() == 0:
            argv += ["-u", "root"]
        from proxyharness import spawn, wait_accepting
        self.proc = spawn(argv, self.log)
        wait_accepting(self.proc, [self.addr], self.log, "memcached " + self.text)
        return self


def mc_items(srv, keys):
    """{key: (value, flags, ttl)} of the keys srv holds (mg v f t)."""
    out = {}
    with Mc(srv.addr) as c:
        for i in range(0, len(keys), 200):
            chunk = keys[i:i + 200]
            c.send(b"".join(b"mg " + k + b" v f t\r\n" for k in chunk))
            for k in chunk:
                rep = c.reply()
                if rep.startswith(b"VA "):
                    head, _, rest = rep.partition(b"\r\n")
                    parts = head.split()
                    flags = int([p for p in parts if p.startswith(b"f")][0][1:])
                    ttl = int([p for p in parts if p.startswith(b"t")][0][1:])
                    out[k] = (rest[:-2], flags, ttl)
                elif rep != b"EN\r\n":
                    fail("mg %r at %s: %r" % (k, srv.text, rep))
    return out


def mc_test(proxy_exe, chash, tmp):
    mc_exe, = require_programs("memcached")
    olds = start_memcacheds(mc_exe, tmp, 4)
    news = start_memcacheds(mc_exe, tmp, 1)
    news += start_servers(lambda: SmallMemcached(mc_exe, tmp), 1, "memcacheds")
    old_servers = [(s.text, 1, None) for s in olds]
    new_servers = old_servers + [(s.text, 1, None) for s in news]
    po, pn = free_ports(2)
    settings = dict(hash="fnv1a_64", distribution="ketama")
    old_cfg = write_file(os.path.join(tmp, "old.yml"),
                         pool_yaml("mc", po, old_servers, redis=False, **settings))
    new_cfg = write_file(os.path.join(tmp, "new.yml"),
                         pool_yaml("mc", pn, new_servers, redis=False, **settings))

    keys = [b"item:%d:%s" % (i, _tag(i)) for i in range(N_STRINGS)]
    proxy_old = Proxy(proxy_exe, tmp, old_cfg, [("127.0.0.1", po)], label="proxy-old").start()

    def write(c, ks, big=False):
        c.send(b"".join(b"set %s %d %d %d\r\n%s\r\n" % (
            k, i % 7, 0 if i % 4 == 0 else 600 + i % 100, len(val(k, big)), val(k, big))
            for i, k in enumerate(ks)))
        for k in ks:
            if c.reply() != b"STORED\r\n":
                fail("set %r through chash-proxy on OLD failed" % k)

    def val(k, big=False):
        return (b"B" * 2000 + k) if big else b"v-" + k

    with Mc(("127.0.0.1", po)) as c:
        for i in range(0, len(keys), 500):
            write(c, keys[i:i + 500])
    own_old = owners(chash, old_cfg, keys)
    own_new = owners(chash, new_cfg, keys)
    srv = {s.text: s for s in olds + news}
    for s in olds:
        mine = [k for k in keys if own_old[k] == s.text]
        if len(mc_items(s, mine)) != len(mine):
            fail("%s lacks keys chash lookup puts on it" % s.text)
    moved = {k for k in keys if own_old[k] != own_new[k]}
    planned = plan_moved(chash, tmp, old_cfg, new_cfg, keys)
    if planned != len(moved):
        fail("chash plan --key-file lists %d moving keys, chash lookup %d" % (planned, len(moved)))
    log("%d keys written through chash-proxy, %d move" % (len(keys), len(moved)))

    def new_count():
        return sum(len(mc_items(s, keys)) for s in news)

    _, out, _ = chash_run(chash, ["migrate", old_cfg, new_cfg, "--dry-run", "--json"], expect=0)
    check_sums(out, len(moved), "--dry-run")
    if out["scanned"] != len(keys) or new_count() != 0:
        fail("--dry-run: scanned %d of %d, or wrote" % (out["scanned"], len(keys)))

    # --limit stops inside a server's dump: the rerun dumps it again (no cursor), and its keys
    # copied by the first run are "present".
    ckpt = os.path.join(tmp, "migrate.ckpt")
    _, out, _ = chash_run(chash, ["migrate", old_cfg, new_cfg, "--checkpoint", ckpt, "--limit",
                                  "500", "--batch", "100", "--json"], expect=3)
    part = new_count()
    if out["complete"] or part == 0 or part >= len(moved):
        fail("--limit 500: complete %s, %d of %d copied: %r" % (out["complete"], part, len(moved),
                                                              out))
    _, out, _ = chash_run(chash, ["migrate", old_cfg, new_cfg, "--checkpoint", ckpt, "--verify",
                                  "--json"], expect=0)
    check_sums(out, len(moved), "resumed run")
    if out["failed"] or out["copied"] + out["present"] != len(moved) or \
            out["verify"]["ok"] != len(moved) or out["copied"] < len(moved) - part:
        fail("resumed run: %r" % {k: out[k] for k in ("copied", "present", "failed", "verify")})
    log("checkpoint: %d copied before the stop, resumed: %d copied, %d present" % (
        part, out["copied"], out["present"]))

    # Values, flags and TTLs at the new owners; nothing else written; nothing deleted.
    for s in news:
        t0 = time.monotonic()
        have = mc_items(s, keys)
        want = {k for k in moved if own_new[k] == s.text}
        if set(have) != want:
            fail("%s holds %d keys, %d moved to it" % (s.text, len(have), len(want)))
        src = {}
        for o in olds:
            src.update(mc_items(o, sorted(k for k in want if own_old[k] == o.text)))
        gap = time.monotonic() - t0     # the source read after the new owner, at most this later
        for k in want:
            v, f, t = have[k]
            sv, sf, st = src[k]
            if v != sv or f != sf or (t < 0) != (st < 0) or \
                    not t - gap - 2 <= st <= t + 2:
                fail("%r: (%r, flags %d, ttl %d) at the new owner, (%r, %d, %d) at the source"
                     % (k, v[:20], f, t, sv[:20], sf, st))
    for s in olds:
        mine = [k for k in keys if own_old[k] == s.text]
        if len(mc_items(s, mine)) != len(mine):
            fail("%s lost keys" % s.text)

    proxy_new = Proxy(proxy_exe, tmp, new_cfg, [("127.0.0.1", pn)], label="proxy-new").start()
    with Mc(("127.0.0.1", pn)) as c:
        for i in range(0, len(keys), 100):
            chunk = keys[i:i + 100]
            got = c.get_many(chunk)
            for k in chunk:
                if got.get(k) != b"v-" + k:
                    fail("get %r through chash-proxy on NEW: %r" % (k, got.get(k)))
    proxy_new.stop()
    log("chash-proxy on NEW reads all %d keys back" % len(keys))

    # Kept without --replace, overwritten with it.
    victim = sorted(moved)[0]
    with Mc(srv[own_new[victim]].addr) as c:
        if c.call(b"set %s 0 0 5\r\nnewer\r\n" % victim) != b"STORED\r\n":
            fail("set at the new owner failed")
    _, out, _ = chash_run(chash, ["migrate", old_cfg, new_cfg, "--json"], expect=0)
    if out["present"] != len(moved) or out["copied"] != 0:
        fail("rerun without --replace: %d copied, %d present" % (out["copied"], out["present"]))
    if mc_items(srv[own_new[victim]], [victim])[victim][0] != b"newer":
        fail("overwritten without --replace")
    _, out, _ = chash_run(chash, ["migrate", old_cfg, new_cfg, "--replace", "--json"], expect=0)
    if out["copied"] != len(moved) or \
            mc_items(srv[own_new[victim]], [victim])[victim][0] != b"v-" + victim:
        fail("--replace: copied %d of %d" % (out["copied"], len(moved)))

    # Big values: the new owner with a 1 KiB item limit refuses them.
    small = news[1]
    # Varied names: FNV-1a places "big:0", "big:1", ... on few points of the continuum.
    big = [b"big:%s" % hashlib.md5(b"%d" % i).hexdigest().encode() for i in range(400)]
    own_old_b, own_new_b = owners(chash, old_cfg, big), owners(chash, new_cfg, big)
    movers = [k for k in big if own_old_b[k] != own_new_b[k]]
    big = [k for k in movers if own_new_b[k] == small.text][:20] + \
        [k for k in movers if own_new_b[k] != small.text][:20]
    to_small = len([k for k in big if own_new_b[k] == small.text])
    if to_small == 0 or to_small == len(big):
        fail("of %d big keys that move, %d go to the small memcached" % (len(big), to_small))
    with Mc(("127.0.0.1", po)) as c:
        write(c, big, big=True)
    proxy_old.stop()
    rc, out, err = chash_run(chash, ["migrate", old_cfg, new_cfg, "--json"], expect=1)
    if out["failed"] != to_small or "too large" not in out["failures"][0]["error"] or \
            "chash migrate: failed:" not in err:
        fail("items too large: failed %d (expected %d): %r" % (
            out["failed"], to_small, out["failures"][:1]))
    log("a new owner refusing big items: %d failed and listed, exit 1" % to_small)

    # A new owner killed midway: its keys fail (listed, exit 1), the others are copied.
    for s in news:
        with Mc(s.addr) as c:
            c.call(b"flush_all\r\n")
    time.sleep(1.1)     # flush_all hides items stored within the same second
    victim_srv = news[0]
    run_ = Running(chash, ["migrate", old_cfg, new_cfg, "--rate", "250", "--parallel", "1",
                           "--json"])
    run_.wait_running()
    victim_srv.kill()
    rc, out, _ = run_.finish()
    # (The big keys bound for the small memcached still fail as above.)
    lost = [f for f in out["failures"] if f["to"] == victim_srv.text]
    others = [f for f in out["failures"] if f["to"] != victim_srv.text]
    if rc != 1 or not lost or \
            any("unreachable" not in f["error"] and "connection" not in f["error"]
                for f in lost) or \
            any(f["to"] != small.text or "too large" not in f["error"] for f in others):
        fail("a new owner killed midway: exit %d, %r" % (
            rc, {k: out[k] for k in ("copied", "present", "failed", "failures")}))
    log("a new owner killed midway: %d keys failed (%s), exit 1" % (
        out["failed"], lost[0]["error"]))

    _, _, err = chash_run(chash, ["migrate", old_cfg, new_cfg, "--pool", "nope"], expect=2)
    dead = "127.0.0.1:%d" % free_ports(1)[0]
    dead_cfg = write_file(os.path.join(tmp, "dead.yml"), pool_yaml(
        "mc", pn, old_servers + [(dead, 1, None)], redis=False, **settings))
    _, _, err = chash_run(chash, ["migrate", dead_cfg, new_cfg], expect=1)
    if dead not in err or "OLD server" not in err:
        fail("unreachable server not named: %r" % err)
    return "%d keys, %d moved" % (len(keys), len(moved))


# ---------------------------------------------------------------------------------------------
# The guards of a run (Redis): progress with counts, rate and ETA; a checkpoint edited, of
# other configs, or whose counts do not add up is refused, an untouched one resumes; a source
# that dies mid-copy leaves the run incomplete (exit 1).

N_GUARD = 4000


def retally(text):
    """The checkpoint's text with its checksum recomputed (an edit a checksum cannot see: what
    is left to catch it are the checks that the counts add up)."""
    body = text[:text.index("check ")]
    return body + "check %s\nend\n" % xxhash.xxh64(body.encode()).hexdigest()


def edit_source(text, pick, field, value):
    """text with `field` of the first source line pick(fields) accepts set to value."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("source "):
            f = line.split(" ")
            d = dict(zip(f[2::2], f[3::2]))
            if pick(d):
                d[field] = value
                lines[i] = " ".join(f[:2] + [x for k in f[2::2] for x in (k, d[k])])
                return "\n".join(lines)
    fail("no source line to edit in:\n%s" % text)


def guard_test(proxy_exe, chash, tmp):
    redis_exe, = require_programs("redis-server")
    olds = start_redises(redis_exe, tmp, 3)
    news = start_redises(redis_exe, tmp, 2)
    old_servers = [(s.text, 1, "g%d" % (i + 1)) for i, s in enumerate(olds)]
    new_servers = old_servers + [(s.text, 1, "g%d" % (i + 4)) for i, s in enumerate(news)]
    po, pn = free_ports(2)
    settings = dict(hash="fnv1a_64", distribution="ketama")
    old_cfg = write_file(os.path.join(tmp, "old.yml"),
                         pool_yaml("cache", po, old_servers, redis=True, **settings))
    new_cfg = write_file(os.path.join(tmp, "new.yml"),
                         pool_yaml("cache", pn, new_servers, redis=True, **settings))
    keys = [b"g:%d:%s" % (i, _tag(i)) for i in range(N_GUARD)]
    own_old, own_new = owners(chash, old_cfg, keys), owners(chash, new_cfg, keys)
    srv = {s.text: s for s in olds + news}
    for addr in set(own_old.values()):
        with Resp(srv[addr].addr) as c:
            c.pipeline([("SET", k, b"v-" + k) for k in keys if own_old[k] == addr])
    moved = {k for k in keys if own_old[k] != own_new[k]}

    def new_keys():
        return set().union(*(RedisSide(s).keys() for s in news))

    # 1. --progress: lines "N/M keys, keys/s, ETA" while it copies (M: the keys the OLD servers
    #    hold, DBSIZE); SIGTERM once seen running stops it (exit 3) with the checkpoint saved.
    ckpt = os.path.join(tmp, "guard.ckpt")
    run_ = Running(chash, ["migrate", old_cfg, new_cfg, "--rate", "200", "--batch", "100",
                           "--checkpoint", ckpt, "--json"])
    m = run_.wait_running(rated=True)
    # The rate is of keys scanned: --rate paces the moved ones (~38% of them).
    if int(m.group(4)) != N_GUARD or int(m.group(5)) <= 0 or m.group(6) == "--":
        fail("--progress: %r: wanted N/%d keys, a rate and an ETA" % (m.group(0), N_GUARD))
    run_.p.send_signal(signal.SIGTERM)
    rc, out, err = run_.finish()
    if rc != 3 or out["complete"]:
        fail("SIGTERM once running: exit %d, complete %s" % (rc, out["complete"]))
    lines = run_.progress()
    done = [int(x.group(3)) for x in lines]
    if done != sorted(done) or any(int(x.group(4)) != N_GUARD for x in lines):
        fail("--progress: counts not rising to %d: %r" % (N_GUARD, [x.group(0) for x in lines]))
    log("--progress: %d lines, e.g. %r" % (len(lines), m.group(0)))
    # 2. The checkpoint: every edit is refused, naming the file and what is wrong, and nothing
    #    is copied; the untouched file then resumes.
    text = open(ckpt).read()
    copied_before = new_keys()
    undone = lambda d: d["done"] == "0"                                  # noqa: E731
    some = lambda d: int(d["copied"]) > 0                                # noqa: E731
    pick = undone if any("done 0" in l for l in text.split("\n")) else some
    bad = {
        "done 1": (edit_source(text, undone, "done", "1"), "checksum"),
        "cursor moved": (edit_source(text, pick, "cursor", "12345"), "checksum"),
        "negative count": (edit_source(text, some, "copied", "-1"), "checksum"),
        "negative count, checksum redone": (
            retally(edit_source(text, some, "copied", "-1")), "plain decimals"),
        "cursor 0, checksum redone": (
            retally(edit_source(text, lambda d: int(d["scanned"]) > 0 and d["done"] == "0",
                                "cursor", "0")), "cursor 0"),
        "truncated": (text[:len(text) // 2], "checkpoint"),
        "an older format": ("chash-migrate-checkpoint 1\n" + text.split("\n", 1)[1],
                            "without a checksum"),
    }
    # A wrapping count: copied 2^64 - 1 and present + copied + 1 keep the outcomes' sum
    # equal to moved modulo 2^64.
    line = [l for l in text.split("\n") if l.startswith("source ") and some(
        dict(zip(l.split(" ")[2::2], l.split(" ")[3::2])))][0]
    d = dict(zip(line.split(" ")[2::2], line.split(" ")[3::2]))
    wrapped = edit_source(text, lambda x: x == d, "copied", str(2 ** 64 - 1))
    wrapped = edit_source(wrapped, lambda x: x["cursor"] == d["cursor"], "present",
                          str(int(d["present"]) + int(d["copied"]) + 1))
    bad["wrapping count, checksum redone"] = (retally(wrapped), "overflow")
    for what, (content, reason) in bad.items():
        path = write_file(os.path.join(tmp, "bad.ckpt"), content)
        rc, _, err = chash_run(chash, ["migrate", old_cfg, new_cfg, "--checkpoint", path],
                               expect=1)
        if path not in err or (reason and reason not in err) or "--restart" not in err:
            fail("checkpoint %s: the message must name the file, %r and --restart: %r" % (
                what, reason, err))
        if open(path).read() != content or new_keys() != copied_before:
            fail("checkpoint %s: refused, yet the file or the new servers changed" % what)
        log("checkpoint %s: refused: %s" % (what, err.strip().split(": ", 2)[-1][:110]))
    # OLD and NEW swapped: another migration.
    rc, _, err = chash_run(chash, ["migrate", new_cfg, old_cfg, "--checkpoint", ckpt], expect=1)
    if ckpt not in err or "another" not in err:
        fail("configs swapped: %r" % err)
    # The same configs, another --match: another moved set.
    rc, _, err = chash_run(chash, ["migrate", old_cfg, new_cfg, "--checkpoint", ckpt,
                                   "--match", "g:*"], expect=1)
    if ckpt not in err or "moved set" not in err:
        fail("another --match: %r" % err)
    if open(ckpt).read() != text:
        fail("a refused run rewrote the checkpoint")
    rc, out, err = chash_run(chash, ["migrate", old_cfg, new_cfg, "--checkpoint", ckpt,
                                     "--json"], expect=0)
    check_sums(out, len(moved), "resumed from the untouched checkpoint")
    if not out["complete"] or out["failed"] or new_keys() != moved:
        fail("resumed: complete %s, failed %d, %d of %d moved keys at their new owners" % (
            out["complete"], out["failed"], len(new_keys() & moved), len(moved)))
    # --restart starts a refused file afresh (everything present now).
    path = write_file(os.path.join(tmp, "bad.ckpt"), bad["done 1"][0])
    rc, out, err = chash_run(chash, ["migrate", old_cfg, new_cfg, "--checkpoint", path,
                                     "--restart", "--json"], expect=0)
    if out["moved"] != len(moved) or out["present"] != len(moved):
        fail("--restart: %r" % {k: out[k] for k in ("moved", "present", "copied")})

    # On a terminal, the same counts after the bar (a pty).
    import pty
    master, slave = pty.openpty()
    # Every moved key is present by now; at 600 a second the run takes over 2 s.
    p = subprocess.Popen([chash, "migrate", old_cfg, new_cfg, "--rate", "600", "--batch",
                          "100"], stdout=subprocess.DEVNULL, stderr=slave, env=sanitizer_env())
    os.close(slave)
    tty = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        tty += chunk
    p.wait(timeout=60)
    os.close(master)
    bars = [b for b in tty.decode("utf-8", "replace").split("\r") if "keys/s" in b]
    if p.returncode != 0 or not bars or not re.search(r"\d+/%d keys +\d+ keys/s +ETA " % N_GUARD,
                                                      bars[-1]):
        fail("progress on a terminal: exit %s, %r" % (p.returncode, tty[-300:]))

    # 3. A source killed mid-copy: not complete, exit 1, the failure counted and named.
    for s in news:
        RedisSide(s).flush()
    run_ = Running(chash, ["migrate", old_cfg, new_cfg, "--rate", "200", "--batch", "100",
                           "--parallel", "1", "--json"])
    run_.wait_running()      # ~1,500 moved keys at 200/s: 7 s left
    for s in olds:           # the source being drained is one of them
        s.kill()
    rc, out, err = run_.finish()
    outcomes = out["copied"] + out["present"] + out["expired"] + out["failed"] + out["changed"]
    if rc != 1 or out["complete"] or out["failed_sources"] < 1 or outcomes != out["moved"] or \
            not any(s.text in err for s in olds) or out["moved"] >= len(moved):
        fail("a source killed mid-copy: exit %d, %r; stderr %r" % (rc, {k: out[k] for k in (
            "complete", "moved", "copied", "failed", "failed_sources")}, err[-800:]))
    log("a source killed mid-copy: exit 1, complete false, %d of %d moved copied, %d failed, "
        "%d sources failed" % (out["copied"], out["moved"], out["failed"],
                               out["failed_sources"]))
    return "%d keys, %d moved" % (len(keys), len(moved))


def body(t):
    t0 = time.monotonic()
    test = {"redis": redis_test, "memcached": mc_test, "guard": guard_test}[t.proto]
    return "%s in %.1f s" % (test(t.proxy, t.chash, t.tmp), time.monotonic() - t0)


if __name__ == "__main__":
    # The servers the protocol needs are required by redis_test / mc_test themselves.
    run_test(body, programs=(), options=lambda ap: ap.add_argument(
        "proto", choices=("redis", "memcached", "guard")))
