#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_shadow: shadow traffic (docs/PROXY.md, "Shadow traffic"; issue 27): a share of a pool's
requests mirrored, by key hash, to another pool of the same proxy, never delaying or changing
the client's reply, bounded, the two answers compared and counted.

Redis: pool alpha (3 redis-servers) with `shadow: {pool: beta, fraction: 0.1, writes: true}`,
pool beta (2 others). memcached: pool mca (2 memcacheds) shadowed to mcb (1) at 0.25, reads only.

  1. 100,000 SETs through alpha: the keys on beta's servers are exactly those whose
     XXH3-64(key, seed 0x5ad0c0ffee) is in the shadowed share (computed here with
     python3-xxhash), and their number is within 10% of 10,000; every SET answered OK.
  2. GETs of the shadowed keys through alpha: every mirrored read agrees; then 100 values
     changed on beta directly: exactly those 100 disagree (chash_proxy_shadow_*_total).
  3. beta's servers SIGSTOPped (a hung shadow): 20,000 GETs through alpha all answered, right,
     while shadow requests are still in flight (the client's replies did not wait for them),
     the in-flight bound holding (skipped counted); SIGCONT, and in flight drains to 0.
     beta's servers killed: the replies are still right; the shadow's failures are counted.
  4. memcached: 20,000 sets through mca (not mirrored: writes off), the shadowed quarter's
     gets mirrored (mcb misses them: disagree), then the keys set on mcb too: agree.
  5. A shadow of a pool that does not exist, of the other protocol, or of itself: -t refuses
     the file with file:line:column.

Usage: test_shadow.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server, memcached or python3-xxhash missing, CI unset).
"""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Mc, Proxy, Resp, fail, free_ports, log, run_test,  # noqa: E402
                          start_memcacheds, start_redises, wait_until, write_file)
import promtext  # noqa: E402

SEED = 0x5ad0c0ffee
N = 100000


def shadowed(key, fraction):
    """The proxy's rule (route_shadow.c): the key's XXH3-64 xor the seed, through murmur3's
    64-bit finalizer; its high 53 bits as a fraction of 2^53, below the shadowed share."""
    import xxhash
    m = 2 ** 64 - 1
    h = xxhash.xxh3_64_intdigest(key) ^ SEED
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & m
    h ^= h >> 33
    h = (h * 0xc4ceb9fe1a85ec53) & m
    h ^= h >> 33
    return (h >> 11) * 2.0 ** -53 < fraction


def counts(mport, pool):
    fams = promtext.scrape(mport)
    return {k: promtext.value(fams, "chash_proxy_shadow_%s" % k, pool=pool)
            for k in ("sent_total", "skipped_total", "agree_total", "disagree_total",
                      "failed_total", "in_flight")}


def drained(mport, pool):
    """Waits until the pool has no shadow request in flight (then nothing can be skipped for
    the bound by the next batch of at most PX_SHADOW_INFLIGHT requests)."""
    wait_until(lambda: counts(mport, pool)["in_flight"] == 0, 30,
               "the shadow requests of %s drained" % pool)


def in_batches(addr, cmds, mport, pool, size=500):
    """The replies to cmds, pipelined size at a time, the shadow drained after each batch."""
    out = []
    with Resp(addr) as c:
        for i in range(0, len(cmds), size):
            out += c.pipeline(cmds[i:i + size])
            drained(mport, pool)
    return out


def keys_on(servers):
    out = set()
    for r in servers:
        with Resp(r.addr) as c:
            cursor = b"0"
            while True:
                cursor, batch = c.call("SCAN", cursor, "COUNT", 1000)
                out.update(batch)
                if cursor == b"0":
                    break
    return out


def body(t):
    import xxhash  # noqa: F401 (a missing module skips, through run_test's modules)
    tmp = t.tmp
    redises = start_redises(t.programs["redis-server"], tmp, 5)
    mcs = start_memcacheds(t.programs["memcached"], tmp, 3)
    pa, pb, pc, pd, mport = free_ports(5)
    conf = write_file(os.path.join(tmp, "shadow.yml"), "".join([
        "alpha:\n  listen: 127.0.0.1:%d\n  redis: true\n  timeout: 500\n" % pa,
        "  shadow: {pool: beta, fraction: 0.1, writes: true}\n  servers:\n",
        "".join("    - %s:1 a%d\n" % (r.text, i) for i, r in enumerate(redises[:3])),
        "beta:\n  listen: 127.0.0.1:%d\n  redis: true\n  timeout: 30000\n  servers:\n" % pb,
        "".join("    - %s:1 b%d\n" % (r.text, i) for i, r in enumerate(redises[3:])),
        "mca:\n  listen: 127.0.0.1:%d\n  timeout: 500\n" % pc,
        "  shadow:\n    pool: mcb\n    fraction: 0.25\n  servers:\n",
        "".join("    - %s:1 m%d\n" % (m.text, i) for i, m in enumerate(mcs[:2])),
        "mcb:\n  listen: 127.0.0.1:%d\n  timeout: 500\n  servers:\n    - %s:1 n0\n" % (
            pd, mcs[2].text)]))
    px = Proxy(t.proxy, tmp, conf, [("127.0.0.1", p) for p in (pa, pb, pc, pd, mport)],
               extra_args=["--metrics-port", str(mport)]).start()

    # 1. the shadowed share, exactly
    keys = [b"sk:%d" % i for i in range(N)]
    got = in_batches(("127.0.0.1", pa), [("SET", k, b"v-" + k) for k in keys], mport, "alpha",
                     size=4000)  # 400 or so shadowed a batch
    if got != [b"OK"] * N:
        fail("1. a SET through alpha not answered OK: %r" % [g for g in got if g != b"OK"][:3])
    want = {k for k in keys if shadowed(k, 0.1)}
    got = keys_on(redises[3:])
    if got != want:
        fail("1. beta holds %d keys, %d of them not shadowed, %d shadowed ones missing" % (
            len(got), len(got - want), len(want - got)))
    if not 0.9 * N * 0.1 <= len(want) <= 1.1 * N * 0.1:
        fail("1. %d of %d keys shadowed at fraction 0.1" % (len(want), N))
    c1 = counts(mport, "alpha")
    if c1["sent_total"] != len(want) or c1["agree_total"] != len(want) or c1["skipped_total"]:
        fail("1. the mirrored SETs: %s, %d shadowed keys" % (c1, len(want)))
    log("1. %d SETs: exactly the %d keys of the shadowed share mirrored to beta" % (N, len(want)))

    # 2. agreement, and 100 disagreements made on purpose
    sk = sorted(want)
    got = in_batches(("127.0.0.1", pa), [("GET", k) for k in sk], mport, "alpha")
    if got != [b"v-" + k for k in sk]:
        fail("2. GET through alpha: wrong replies")
    c2 = counts(mport, "alpha")
    if c2["agree_total"] - c1["agree_total"] != len(sk) or c2["disagree_total"]:
        fail("2. mirrored GETs: %s -> %s for %d reads" % (c1, c2, len(sk)))
    changed = sk[:100]
    with Resp(("127.0.0.1", pb)) as c:
        c.pipeline([("SET", k, b"other") for k in changed])
    got = in_batches(("127.0.0.1", pa), [("GET", k) for k in sk[:500]], mport, "alpha")
    if got != [b"v-" + k for k in sk[:500]]:
        fail("2. the shadow's other values changed alpha's replies")
    c3 = counts(mport, "alpha")
    if c3["disagree_total"] != 100 or c3["agree_total"] - c2["agree_total"] != 400:
        fail("2. after 100 values changed on beta: %s" % c3)
    log("2. %d mirrored reads agreed; 100 values changed on beta: 100 disagree" % len(sk))

    # 3. the shadow hung, then dead
    for r in redises[3:]:
        os.kill(r.proc.pid, signal.SIGSTOP)
    try:
        with Resp(("127.0.0.1", pa)) as c:
            got = c.pipeline([("GET", k) for k in keys[:20000]])
            if got != [b"v-" + k for k in keys[:20000]]:
                fail("3. with the shadow hung: wrong replies through alpha")
        c4 = counts(mport, "alpha")
        if c4["in_flight"] == 0 or c4["skipped_total"] == 0:
            fail("3. with the shadow hung, every reply came while %d shadow requests were in "
                 "flight (%d skipped): %s" % (c4["in_flight"], c4["skipped_total"], c4))
    finally:
        for r in redises[3:]:
            os.kill(r.proc.pid, signal.SIGCONT)
    wait_until(lambda: counts(mport, "alpha")["in_flight"] == 0, 30,
               "3. the hung shadow's requests drained")
    log("3. shadow hung: 20,000 replies right while %d shadow requests were in flight (%d "
        "skipped at the bound); drained after SIGCONT" % (c4["in_flight"],
                                                          c4["skipped_total"]))
    for r in redises[3:]:
        r.kill()
    before = counts(mport, "alpha")["failed_total"]
    got = in_batches(("127.0.0.1", pa), [("GET", k) for k in sk[:1000]], mport, "alpha")
    if got != [b"v-" + k for k in sk[:1000]]:
        fail("3. with the shadow dead: wrong replies through alpha")
    if counts(mport, "alpha")["failed_total"] - before != 1000:
        fail("3. with the shadow dead: %s" % counts(mport, "alpha"))
    log("3. shadow dead: replies right, its 1,000 failures counted")

    # 4. memcached, reads only
    mk = [b"mk:%d" % i for i in range(20000)]
    with Mc(("127.0.0.1", pc)) as c:
        for k in mk:
            if c.call(b"set %s 0 0 3\r\nabc\r\n" % k) != b"STORED\r\n":
                fail("4. set through mca")
    wait_until(lambda: counts(mport, "mca")["in_flight"] == 0, 30, "4. sets")
    if counts(mport, "mca")["sent_total"] != 0 or mcs[2].keys_present(mk[:2000]):
        fail("4. writes mirrored with writes off: %s" % counts(mport, "mca"))
    msh = [k for k in mk if shadowed(k, 0.25)]

    def gets_through_mca(what):
        with Mc(("127.0.0.1", pc)) as c:
            for i, k in enumerate(msh):
                if c.call(b"get %s\r\n" % k) != b"VALUE %s 0 3\r\nabc\r\nEND\r\n" % k:
                    fail("4. get through mca (%s)" % what)
                if i % 500 == 499:
                    drained(mport, "mca")
        drained(mport, "mca")
    gets_through_mca("mcb misses")
    m1 = counts(mport, "mca")
    if m1["sent_total"] != len(msh) or m1["disagree_total"] != len(msh):
        fail("4. gets of keys mcb misses: %s for %d" % (m1, len(msh)))
    with Mc(("127.0.0.1", pd)) as c:
        for k in msh:
            c.call(b"set %s 0 0 3\r\nabc\r\n" % k)
    gets_through_mca("mcb has them")
    m2 = counts(mport, "mca")
    if m2["agree_total"] != len(msh) or not 0.9 * 5000 <= len(msh) <= 1.1 * 5000:
        fail("4. gets of keys mcb has: %s for %d" % (m2, len(msh)))
    log("4. memcached: %d of 20,000 keys shadowed, writes not mirrored, misses at mcb "
        "disagree, the same values agree" % len(msh))

    # 5. bad shadows
    for text, want_msg in (
            ("a:\n  listen: 127.0.0.1:1\n  servers:\n    - 127.0.0.1:7:1\n"
             "  shadow: {pool: nope, fraction: 0.1}\n",
             ':5:11: pool "a": its shadow pool "nope" is not a pool of this file'),
            ("a:\n  listen: 127.0.0.1:1\n  redis: true\n  servers:\n    - 127.0.0.1:7:1\n"
             "  shadow: {pool: b, fraction: 0.1}\nb:\n  listen: 127.0.0.1:2\n  servers:\n"
             "    - 127.0.0.1:8:1\n", "speaks another protocol"),
            ("a:\n  listen: 127.0.0.1:1\n  servers:\n    - 127.0.0.1:7:1\n"
             "  shadow: {pool: a, fraction: 0.1}\n", "is the pool itself"),
            ("a:\n  listen: 127.0.0.1:1\n  servers:\n    - 127.0.0.1:7:1\n"
             "  shadow: {pool: a, fraction: 2}\n", "above 0 and at most 1")):
        path = write_file(os.path.join(tmp, "bad.yml"), text)
        r = subprocess.run([t.proxy, "-t", "-c", path], capture_output=True, text=True,
                           timeout=30)
        if r.returncode == 0 or want_msg not in r.stdout + r.stderr:
            fail("5. -t on a bad shadow: exit %d, %r, want %r" % (r.returncode,
                                                                  r.stdout + r.stderr, want_msg))
    log("5. bad shadows refused with file:line:column")
    px.stop()
    return "shadow: share exact, agreement counted, replies unchanged with the shadow hung"


run_test(body, programs=("redis-server", "memcached"), modules=("xxhash",))
