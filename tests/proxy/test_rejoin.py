#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_rejoin: no stale reads after an ejected server comes back (issue 16, finding 5).

chash-proxy in front of 3 redis-servers, a pool that ejects a server after one failure and
probes it after 300 ms. 3,000 keys are SET to v1 through the proxy. Then backend B is
SIGSTOPped until it is ejected; while it is out every key is written again through the proxy
(v2, by SET and by MSET) and every tenth deleted, so B's keys land on their failover servers
while B still holds their v1. B is resumed and readmitted (a SET of one of its keys reaches it
again). Then every key is read through the proxy: each must be v2, or nil where it was deleted
or where B lost it, and never v1. Before, >= 504 reads returned B's old values.

First with the default rejoin journal (B's written keys are deleted on it before it is
readmitted). Then "spill" (issue 26, a rejoin that never flushes a healthy server): with
rejoin_journal_keys: 50, 500 of B's keys are written while it is out (10 times the bound), the
rest of its keys are left alone. After its readmission, read straight from B: every key left
alone whose bucket (the top 16 bits of XXH3_64 of the key, computed here with python's xxhash)
no written key shares is still there with its v1 (no FLUSHDB), every written key is absent
from B or holds its v2, and 0 reads of v1 through the proxy. Before, B was flushed: 0 of its
untouched keys were left. The same spill case with 3 memcacheds ("lru_crawler metadump all"
walks B), read straight from B with a text get. And "spill_denied": B refuses SCAN (an ACL)
when it comes back: its clean-up fails, it stays out (a write of its key does not reach it),
and once SCAN is allowed again the next probe cleans it up as above.

Usage: test_rejoin.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import signal
import sys
import time

import xxhash

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Mc, Proxy, Resp, fail, free_ports, log, pool_yaml,  # noqa: E402
                          run_test, start_memcacheds, start_redises, wait_until, write_file)

NKEYS = 3000
BOUND = 15.0


def one_case(proxy_exe, tmp, backends, label, extra):
    for r in backends:
        r.call("FLUSHALL")
    port = free_ports(1)[0]
    conf = write_file(os.path.join(tmp, label + ".yml"), pool_yaml(
        "rj", port, [(r.text, 1, None) for r in backends], hash="md5", distribution="ketama",
        auto_eject_hosts=True, server_failure_limit=1, server_retry_timeout=300, timeout=300,
        **extra))
    p = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)], label=label).start()
    addr = ("127.0.0.1", port)
    keys = [b"rj:%d" % i for i in range(NKEYS)]
    with Resp(addr) as c:
        for i in range(0, NKEYS, 500):
            got = c.pipeline([("SET", k, b"v1:" + k) for k in keys[i:i + 500]])
            if any(g != b"OK" for g in got):
                fail("%s: the first SETs failed" % label)
    B = backends[1]
    on_b = set(B.keys())
    if len(on_b) < NKEYS // 10:
        fail("%s: backend B holds %d keys only" % (label, len(on_b)))
    os.kill(B.proc.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + BOUND
        with Resp(addr) as c:
            probe_key = next(k for k in keys if k in on_b)
            while p.stats_json()["rj"]["server_ejects"] < 1:
                if time.monotonic() > deadline:
                    fail("%s: B not ejected within %g s" % (label, BOUND))
                c.call("GET", probe_key)
            # B is out: write everything again; every tenth key deleted.
            for i in range(0, NKEYS, 500):
                batch = keys[i:i + 500]
                half = len(batch) // 2
                cmds = [("SET", k, b"v2:" + k) for k in batch[:half]]
                cmds.append(tuple(["MSET"] + [x for k in batch[half:] for x in (k, b"v2:" + k)]))
                cmds += [("DEL", k) for j, k in enumerate(batch) if (i + j) % 10 == 0]
                got = c.pipeline(cmds)
                bad = [g for g in got if isinstance(g, Exception)]
                if bad:
                    fail("%s: writes while B was out failed: %r" % (label, bad[:3]))
    finally:
        os.kill(B.proc.pid, signal.SIGCONT)
    # Readmission: a SET of one of B's keys reaches B again.
    k_back = next(k for k in keys if k in on_b and int(k.split(b":")[1]) % 10 != 0)
    with Resp(addr) as c:
        def lands():
            c.call("SET", k_back, b"v2:" + k_back)
            return B.call("GET", k_back) == b"v2:" + k_back
        wait_until(lands, BOUND, "%s: B readmitted after SIGCONT (a SET of its key on it)" %
                   label, poll=0.1)
        stale, wrong, nils = [], [], 0
        for i in range(0, NKEYS, 500):
            got = c.pipeline([("GET", k) for k in keys[i:i + 500]])
            for j, (k, g) in enumerate(zip(keys[i:i + 500], got)):
                deleted = (i + j) % 10 == 0
                if g == b"v1:" + k:
                    stale.append(k)
                elif g is None:
                    nils += 1
                elif deleted or g != b"v2:" + k:
                    wrong.append((k, g))
    p.stop()
    if stale:
        fail("%s: %d reads after B's readmission returned the value B held before it was "
             "ejected, e.g. %r" % (label, len(stale), stale[:3]))
    if wrong:
        fail("%s: %d unexpected reads, e.g. %r" % (label, len(wrong), wrong[:3]))
    log("%s: %d keys on B, 0 stale reads after its readmission (%d misses)" % (
        label, len(on_b), nils))
    return len(on_b), nils


SPILL_BOUND = 50
SPILL_WRITES = 500
SPILL_KEYS = 6000  # B holds about a third: ~2,000


def bucket(k):
    return xxhash.xxh3_64_intdigest(k) >> 48


def spill_case(proxy_exe, tmp, backends, deny_scan=False):
    """deny_scan: B refuses SCAN (an ACL) when it comes back, so its clean-up fails: it must
    stay out, its dirty state kept, until SCAN is allowed again; then as without."""
    label = "spill_denied" if deny_scan else "spill"
    for r in backends:
        r.call("FLUSHALL")
    port = free_ports(1)[0]
    conf = write_file(os.path.join(tmp, label + ".yml"), pool_yaml(
        "rj", port, [(r.text, 1, None) for r in backends], hash="md5", distribution="ketama",
        auto_eject_hosts=True, server_failure_limit=1, server_retry_timeout=300, timeout=300,
        rejoin_journal_keys=SPILL_BOUND))
    p = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)], label=label).start()
    addr = ("127.0.0.1", port)
    keys = [b"rj:%d" % i for i in range(SPILL_KEYS)]
    with Resp(addr) as c:
        for i in range(0, SPILL_KEYS, 500):
            got = c.pipeline([("SET", k, b"v1:" + k) for k in keys[i:i + 500]])
            if any(g != b"OK" for g in got):
                fail("%s: the first SETs failed" % label)
    B = backends[1]
    on_b = sorted(set(B.keys()))
    if len(on_b) < SPILL_WRITES + 500:
        fail("%s: backend B holds %d keys only" % (label, len(on_b)))
    written = on_b[:SPILL_WRITES]  # written elsewhere while B is out
    untouched = on_b[SPILL_WRITES:]
    dirty = {bucket(k) for k in written}
    kept = [k for k in untouched if bucket(k) not in dirty]
    if deny_scan and B.call("ACL", "SETUSER", "default", "-scan") != b"OK":
        fail("%s: ACL SETUSER default -scan refused" % label)
    os.kill(B.proc.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + BOUND
        with Resp(addr) as c:
            while p.stats_json()["rj"]["server_ejects"] < 1:
                if time.monotonic() > deadline:
                    fail("%s: B not ejected within %g s" % (label, BOUND))
                c.call("GET", written[0])
            got = c.pipeline([("SET", k, b"v2:" + k) for k in written])
            bad = [g for g in got if g != b"OK"]
            if bad:
                fail("%s: writes while B was out failed: %r" % (label, bad[:3]))
    finally:
        os.kill(B.proc.pid, signal.SIGCONT)
    k_back = written[0]
    if deny_scan:
        def failures():
            with open(p.log, errors="replace") as f:
                return f.read().count("its clean-up failed") >= 2
        wait_until(failures, BOUND, "%s: two failed clean-ups of B (SCAN refused)" % label,
                   poll=0.1)
        with Resp(addr) as c:  # B is still out: a write of its key goes elsewhere
            c.call("SET", k_back, b"v3:" + k_back)
        if B.call("GET", k_back) != b"v1:" + k_back:
            fail("%s: B took a write while its clean-up was failing" % label)
        if B.call("ACL", "SETUSER", "default", "+scan") != b"OK":
            fail("%s: ACL SETUSER default +scan refused" % label)
    with Resp(addr) as c:
        def lands():
            c.call("SET", k_back, b"v2:" + k_back)
            return B.call("GET", k_back) == b"v2:" + k_back
        wait_until(lands, BOUND, "%s: B readmitted after SIGCONT (a SET of its key on it)" %
                   label, poll=0.1)
        through = c.pipeline([("GET", k) for k in on_b])
    with Resp(B.addr) as d:
        direct = dict(zip(on_b, d.pipeline([("GET", k) for k in on_b])))
    p.stop()
    lost = [k for k in kept if direct[k] != b"v1:" + k]
    if lost:
        fail("%s: %d of B's %d untouched keys in clean buckets are gone or changed on B after "
             "its readmission (flushed?), e.g. %r" % (label, len(lost), len(kept), lost[:3]))
    stale_b = [k for k in written if direct[k] not in (None, b"v2:" + k)]
    if stale_b:
        fail("%s: %d keys written while B was out still hold their old value on B, e.g. %r" %
             (label, len(stale_b), stale_b[:3]))
    stale = [k for k, g in zip(on_b, through) if g == b"v1:" + k and k in set(written)]
    if stale:
        fail("%s: %d reads through the proxy returned B's old value, e.g. %r" % (
            label, len(stale), stale[:3]))
    log("%s: B held %d keys; %d written while it was out (bound %d); %d of the %d untouched "
        "kept on B (the rest shared a dirty bucket); 0 stale" % (
            label, len(on_b), len(written), SPILL_BOUND, len(kept), len(untouched)))
    return len(kept), len(untouched)


def mc_sets(c, pairs):
    c.send(b"".join(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(v), v) for k, v in pairs))
    return [c.reply() for _ in pairs]


def mc_spill_case(proxy_exe, tmp, mcs):
    label = "mc_spill"
    port = free_ports(1)[0]
    conf = write_file(os.path.join(tmp, label + ".yml"), pool_yaml(
        "rj", port, [(m.text, 1, None) for m in mcs], redis=False, hash="md5",
        distribution="ketama", auto_eject_hosts=True, server_failure_limit=1,
        server_retry_timeout=300, timeout=300, rejoin_journal_keys=SPILL_BOUND))
    p = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)], label=label).start()
    addr = ("127.0.0.1", port)
    keys = [b"rj:%d" % i for i in range(SPILL_KEYS)]
    with Mc(addr) as c:
        for i in range(0, SPILL_KEYS, 500):
            got = mc_sets(c, [(k, b"v1:" + k) for k in keys[i:i + 500]])
            if any(g != b"STORED\r\n" for g in got):
                fail("%s: the first sets failed: %r" % (label, got[:3]))
    B = mcs[1]
    on_b = sorted(B.keys_present(keys))
    if len(on_b) < SPILL_WRITES + 500:
        fail("%s: backend B holds %d keys only" % (label, len(on_b)))
    written, untouched = on_b[:SPILL_WRITES], on_b[SPILL_WRITES:]
    dirty = {bucket(k) for k in written}
    kept = [k for k in untouched if bucket(k) not in dirty]
    os.kill(B.proc.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + BOUND
        with Mc(addr) as c:
            while p.stats_json()["rj"]["server_ejects"] < 1:
                if time.monotonic() > deadline:
                    fail("%s: B not ejected within %g s" % (label, BOUND))
                c.call(b"get %s\r\n" % written[0])
            got = mc_sets(c, [(k, b"v2:" + k) for k in written])
            bad = [g for g in got if g != b"STORED\r\n"]
            if bad:
                fail("%s: writes while B was out failed: %r" % (label, bad[:3]))
    finally:
        os.kill(B.proc.pid, signal.SIGCONT)
    k_back = written[0]
    with Mc(addr) as c:
        def lands():
            mc_sets(c, [(k_back, b"v2:" + k_back)])
            with Mc(B.addr) as d:
                return d.get_many([k_back]).get(k_back) == b"v2:" + k_back
        wait_until(lands, BOUND, "%s: B readmitted after SIGCONT (a set of its key on it)" %
                   label, poll=0.1)
        through = {}
        for i in range(0, len(on_b), 100):
            through.update(c.get_many(on_b[i:i + 100]))
    direct = {}
    with Mc(B.addr) as d:
        for i in range(0, len(on_b), 100):
            direct.update(d.get_many(on_b[i:i + 100]))
    p.stop()
    lost = [k for k in kept if direct.get(k) != b"v1:" + k]
    if lost:
        fail("%s: %d of B's %d untouched keys in clean buckets are gone or changed on B after "
             "its readmission (flushed?), e.g. %r" % (label, len(lost), len(kept), lost[:3]))
    stale_b = [k for k in written if direct.get(k) not in (None, b"v2:" + k)]
    if stale_b:
        fail("%s: %d keys written while B was out still hold their old value on B, e.g. %r" %
             (label, len(stale_b), stale_b[:3]))
    stale = [k for k in written if through.get(k) == b"v1:" + k]
    if stale:
        fail("%s: %d reads through the proxy returned B's old value, e.g. %r" % (
            label, len(stale), stale[:3]))
    log("%s: B held %d keys; %d written while it was out (bound %d); %d of the %d untouched "
        "kept on B; 0 stale" % (label, len(on_b), len(written), SPILL_BOUND, len(kept),
                                len(untouched)))
    return len(kept), len(untouched)


def body(t):
    proxy_exe, redis_server, tmp = t.proxy, t.programs["redis-server"], t.tmp
    backends = start_redises(redis_server, tmp, 3)
    n1, _ = one_case(proxy_exe, tmp, backends, "journal", {})
    kept, untouched = spill_case(proxy_exe, tmp, backends)
    spill_case(proxy_exe, tmp, backends, deny_scan=True)
    mkept, muntouched = mc_spill_case(proxy_exe, tmp,
                                      start_memcacheds(t.programs["memcached"], tmp, 3))
    return ("0 stale reads over %d keys: B's keys deleted on it (%d); past the bound, %d of "
            "B's %d untouched keys kept (no flush); memcached: %d of %d kept" % (
                NKEYS, n1, kept, untouched, mkept, muntouched))


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "memcached"))
