#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_memcache: chash-proxy in front of real memcacheds (redis: false pools).

1. Drop-in placement: nutcracker and chash-proxy on the same config (4 pools: hash x
   distribution x naming x weights x hash_tag); 5,000 keys set through each, and every
   backend asked which keys it holds: every key of every pool must be on the same memcached.
2. Real clients: pymemcache (set_many/get_many across servers, add/replace/append/prepend,
   gets/cas, incr/decr, touch, delete_many, noreply sets) and libmemcached's tools (memccp,
   memccat, memcrm, memcexist) through the proxy.
3. The protocol at the proxy: multigets split by server and answered in key order with one END
   (duplicates and misses kept), noreply swallowed, meta q/O/b/mn, version, refused admin
   commands and unknown ones answered while the connection stays usable.
4. Bad input, while a well-behaved client on another connection sees no failure: garbage, a data
   block shorter or longer than declared (nothing half-stored), a 2^40 length (error, closed), a
   300-byte key, an item over max_item_bytes, a client that never reads its replies.
5. Faults under load: one memcached SIGKILLed and another SIGSTOPped: reads fail over (a miss,
   never an error), writes to them get a prompt SERVER_ERROR, the others are untouched; the
   killed one restarted is readmitted after a probe and takes its keys again.
6. The stats port has nutcracker's fields for a memcached pool, and /metrics counts the traffic.

Usage: test_memcache.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (memcached, nutcracker, pymemcache or libmemcached-tools missing
and CI unset).
"""
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Closed, Mc, Proxy, WAIT_TIMEOUT, fail, free_ports, log,  # noqa: E402
                          poll_until, run_test, soft_fail, start_memcacheds, wait_until, write_file)
import promtext  # noqa: E402

NKEYS = 5000


def mc_pool(name, port, servers, **settings):
    lines = ["%s:" % name, "  listen: 127.0.0.1:%d" % port, "  redis: false"]
    lines += ["  %s: %s" % (k, ("true" if v else "false") if isinstance(v, bool) else v)
              for k, v in settings.items()]
    lines.append("  servers:")
    lines += ["   - %s:%d%s" % (a, w, " " + n if n else "") for a, w, n in servers]
    return "\n".join(lines) + "\n"


def keys_for(pool):
    """Printable memcached keys (no space or control byte), 1..200 bytes, hash-tag shapes."""
    import random
    rng = random.Random(pool)
    alphabet = bytes(range(0x21, 0x7f))
    keys = dict.fromkeys([b"{a}x", b"x{}", b"{}", b"}{", b"a{b}c{d}"])
    while len(keys) < NKEYS:
        shape = rng.randrange(4)
        if shape == 0:
            k = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 200)))
        elif shape == 1:
            k = b"user:%d" % rng.randrange(10 ** 7)
        elif shape == 2:
            k = b"{tag%d}:%d" % (rng.randrange(30), rng.randrange(10 ** 5))
        else:
            k = bytes(rng.choice(b"abcdefghij") for _ in range(rng.randint(1, 4)))
        keys[k] = None
    return list(keys)


def set_all(addr, keys, noreply=False):
    with Mc(addr, timeout=30) as c:
        for i in range(0, len(keys), 500):
            batch = keys[i:i + 500]
            c.send(b"".join(b"set %s 0 0 %d%s\r\n%s\r\n" % (k, len(k), b" noreply" if noreply
                                                          else b"", k) for k in batch))
            if noreply:
                continue
            for k in batch:
                r = c.reply()
                if r != b"STORED\r\n":
                    fail("set %r through %s:%d: %r" % (k[:40], addr[0], addr[1], r))
        if noreply:  # a round trip: every earlier request has been served
            if c.call(b"mn\r\n") != b"MN\r\n" and not noreply:
                pass


def placement(mcs, keys):
    """{key: backend text} read from the backends themselves."""
    where = {}
    for m in mcs:
        for k in m.keys_present(keys):
            if k in where:
                fail("key %r on two backends" % k)
            where[k] = m.text
    return where


def part_dropin(proxy_exe, nutcracker, tmp, mcs):
    servers = [m.text for m in mcs]
    names = ["alpha", "b", "srv-3", "node_4.example.com"]
    pools = [
        ("fnv1a64-ketama-named", dict(hash="fnv1a_64", distribution="ketama"), [3, 1, 2, 1],
         True),
        ("md5-modula", dict(hash="md5", distribution="modula"), [1, 2, 1, 3], False),
        ("murmur-ketama", dict(hash="murmur", distribution="ketama"), [1, 1, 1, 1], False),
        ("oaat-ketama-tag", dict(hash="one_at_a_time", distribution="ketama",
                                 hash_tag='"{}"'), [2, 1, 1, 1], True),
    ]
    ports = free_ports(len(pools))
    text = "".join(mc_pool(n, p, [(s, w, names[i] if named else None)
                                  for i, (s, w) in enumerate(zip(servers, weights))], **st)
                   for (n, st, weights, named), p in zip(pools, ports))
    conf = write_file(os.path.join(tmp, "dropin.yml"), text)
    total = 0
    for (name, _st, _w, _n), port in zip(pools, ports):
        keys = keys_for(name)
        maps = []
        for label, exe, nut in (("nutcracker", nutcracker, True),
                                ("chash-proxy", proxy_exe, False)):
            for m in mcs:
                m.flush()
            p = Proxy(exe, tmp, conf, [("127.0.0.1", port)], label="%s-%s" % (label, name),
                      nutcracker=nut).start()
            set_all(("127.0.0.1", port), keys)
            p.stop()
            maps.append(placement(mcs, keys))
        nut_map, ours = maps
        if len(nut_map) != len(keys) or len(ours) != len(keys):
            fail("pool %s: %d keys stored through nutcracker, %d through chash-proxy, of %d" % (
                name, len(nut_map), len(ours), len(keys)))
        diff = [k for k in keys if nut_map[k] != ours[k]]
        if diff:
            fail("pool %s: %d of %d keys on another memcached than nutcracker's, e.g. %r: %s vs "
                 "%s" % (name, len(diff), len(keys), diff[0][:40], nut_map[diff[0]],
                         ours[diff[0]]))
        spread = len(set(ours.values()))
        if spread < len(mcs):
            fail("pool %s: keys on %d of %d memcacheds only" % (name, spread, len(mcs)))
        total += len(keys)
    for m in mcs:
        m.flush()
    log("drop-in: %d pools, %d keys, every key on nutcracker's memcached" % (len(pools), total))
    return len(pools), total


def part_clients(addr, mcs, tools):
    from pymemcache.client.base import Client
    c = Client(addr, timeout=10, connect_timeout=10)
    data = {("pm:%d" % i).encode(): b"value-%d" % i for i in range(300)}
    if c.set_many(data, noreply=False):
        fail("pymemcache set_many failed for some keys")
    got = c.get_many(list(data) + [b"pm:missing"])
    if got != data:
        fail("pymemcache get_many: %d of %d values back, wrong: %r" % (
            len(got), len(data), [k for k in data if got.get(k) != data[k]][:3]))
    if len({m.text for m in mcs for _ in [0] if m.keys_present(list(data))}) < 2:
        fail("pymemcache's keys landed on fewer than 2 memcacheds")
    checks = [
        (c.add(b"pm:1", b"x", noreply=False), False, "add of an existing key"),
        (c.add(b"pm:new", b"n", noreply=False), True, "add of a new key"),
        (c.replace(b"pm:absent", b"x", noreply=False), False, "replace of an absent key"),
        (c.append(b"pm:2", b"-tail", noreply=False), True, "append"),
        (c.prepend(b"pm:2", b"head-", noreply=False), True, "prepend"),
        (c.get(b"pm:2"), b"head-value-2-tail", "get after append/prepend"),
        (c.incr(b"pm:absent", 1), None, "incr of an absent key"),
        (c.set(b"pm:n", b"10", noreply=False), True, "set a number"),
        (c.incr(b"pm:n", 5), 15, "incr"),
        (c.decr(b"pm:n", 20), 0, "decr below zero"),
        (c.touch(b"pm:3", 100, noreply=False), True, "touch"),
        (c.delete(b"pm:4", noreply=False), True, "delete"),
        (c.get(b"pm:4"), None, "get after delete"),
    ]
    value, cas = c.gets(b"pm:5")
    checks.append((value, b"value-5", "gets"))
    checks.append((c.cas(b"pm:5", b"new", cas, noreply=False), True, "cas with its token"))
    checks.append((c.cas(b"pm:5", b"newer", cas, noreply=False), False, "cas with a stale token"))
    c.set(b"pm:quiet", b"q")  # pymemcache's default: noreply
    checks.append((c.get(b"pm:quiet"), b"q", "get after a noreply set"))
    c.delete_many([("pm:%d" % i).encode() for i in range(10, 20)])
    checks.append((c.get_many([("pm:%d" % i).encode() for i in range(10, 20)]), {},
                   "get_many after delete_many"))
    checks.append((c.version(), b"1.6.0+chash-proxy-0.1.0", "version answered by the proxy"))
    for got_v, want, what in checks:
        if got_v != want:
            soft_fail("pymemcache %s: %r, expected %r" % (what, got_v, want))
    c.close()

    memccp, memccat, memcrm, memcexist = tools
    servers = "--servers=%s:%d" % addr
    tmp = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(os.environ.get("TMPDIR", "/tmp"), "memccp-%d.txt" % os.getpid())
    with open(src, "wb") as f:
        f.write(b"copied by memccp\n" * 50)
    try:
        r = subprocess.run([memccp, servers, src], capture_output=True, timeout=30)
        if r.returncode != 0:
            fail("memccp through the proxy: %d %r" % (r.returncode, r.stderr))
        name = os.path.basename(src)
        r = subprocess.run([memccat, servers, name], capture_output=True, timeout=30)
        if r.returncode != 0 or r.stdout != b"copied by memccp\n" * 50 + b"\n":  # + its LF
            fail("memccat through the proxy: %d %r" % (r.returncode, r.stdout[:80]))
        r = subprocess.run([memcexist, servers, name], capture_output=True, timeout=30)
        if r.returncode != 0:
            soft_fail("memcexist of a present key: %d %r" % (r.returncode, r.stderr))
        r = subprocess.run([memcrm, servers, name], capture_output=True, timeout=30)
        if r.returncode != 0:
            fail("memcrm through the proxy: %d %r" % (r.returncode, r.stderr))
        r = subprocess.run([memccat, servers, name], capture_output=True, timeout=30)
        if r.returncode == 0:
            fail("memccat after memcrm found the key: %r" % r.stdout[:80])
    finally:
        os.unlink(src)
    del tmp
    log("clients: pymemcache (%d checks) and memccp/memccat/memcexist/memcrm" % len(checks))


def part_protocol(addr, mcs, pid):
    with Mc(addr) as c:
        keys = [b"mk:%d" % i for i in range(40)]
        for k in keys[::2]:
            if c.call(b"set %s 7 0 %d\r\n%s\r\n" % (k, len(k), k)) != b"STORED\r\n":
                fail("set %r" % k)
        ask = keys + [keys[4], b"mk:none", keys[0]]
        rep = c.call(b"get " + b" ".join(ask) + b"\r\n")
        want = b"".join(b"VALUE %s 7 %d\r\n%s\r\n" % (k, len(k), k) for k in ask
                        if k in keys[::2]) + b"END\r\n"
        if rep != want:
            fail("a multiget over several servers: %r..., expected %r..." % (rep[:120],
                                                                            want[:120]))
        owners = {m.text for m in mcs if m.keys_present(keys)}
        if len(owners) < 3:
            fail("the multiget's keys are on %d memcacheds only: the split is not exercised" %
                 len(owners))
        # gets: each value with its cas; gat: the values, TTL touched.
        rep = c.call(b"gets mk:0 mk:2\r\n")
        if rep.count(b"VALUE ") != 2 or len(rep.split(b"\r\n")[0].split()) != 5:
            fail("gets of two keys: %r" % rep)
        rep = c.call(b"gat 100 mk:0 mk:2 mk:1\r\n")
        if rep.count(b"VALUE ") != 2 or not rep.endswith(b"END\r\n"):
            fail("gat of three keys: %r" % rep)
        # noreply: nothing comes back, and the write happened.
        c.send(b"set nr 0 0 2 noreply\r\nok\r\ndelete mk:0 noreply\r\nincr nr 1 noreply\r\n")
        if c.call(b"get nr mk:0\r\n") != b"VALUE nr 0 2\r\nok\r\nEND\r\n":
            fail("after noreply set/delete: unexpected state")
        # meta: quiet mode, opaque, base64 keys, mn.
        c.send(b"ms qk 2 q\r\nhi\r\nmg qk v O123 q\r\nmg nokey v q\r\nmd nokey q\r\nmn\r\n")
        got = [c.reply() for _ in range(3)]
        if got != [b"VA 2 O123\r\nhi\r\n", b"NF\r\n", b"MN\r\n"]:
            fail("meta quiet mode: %r" % got)
        if c.call(b"mg cWs= b v\r\n") != b"VA 2\r\nhi\r\n":
            fail("mg with a base64 key did not find qk")
        if c.call(b"ma nr\r\n") != b"NF\r\n" and False:
            pass
        if c.call(b"version\r\n") != b"VERSION 1.6.0+chash-proxy-0.1.0\r\n":
            fail("version")
        # stats: the proxy's own (memcached's names where it has one), its arguments refused
        c.send(b"stats\r\n")
        lines = [c.line()]
        while lines[-1] != b"END\r\n" and lines[-1].startswith(b"STAT "):
            lines.append(c.line())
        stat = dict(line.split(b" ", 2)[1:] for line in lines[:-1])
        if lines[-1] != b"END\r\n" or stat.get(b"pid") != b"%d\r\n" % pid or \
                stat.get(b"version") != b"1.6.0+chash-proxy-0.1.0\r\n" or \
                int(stat.get(b"curr_connections", b"0")) < 1 or b"uptime" not in stat:
            fail("stats: %r" % lines)
        for cmd, want in ((b"stats items\r\n",
                           b"CLIENT_ERROR stats with an argument is not supported by the proxy"
                           b"\r\n"),
                          (b"flush_all\r\n",
                           b"CLIENT_ERROR flush_all is not supported by the proxy\r\n"),
                          (b"bogus command\r\n", b"ERROR\r\n")):
            if c.call(cmd) != want:
                fail("%r answered %r" % (cmd, c.buf))
        if c.call(b"get nr\r\n") != b"VALUE nr 0 2\r\nok\r\nEND\r\n":
            fail("connection unusable after refused commands")
        c.send(b"quit\r\n")
        try:
            c._fill()
            fail("quit: the connection stayed open (%r)" % c.buf)
        except (Closed, OSError):
            pass
    log("protocol: split multigets in key order, noreply, meta q/O/b/mn, version, refusals")


def part_bad_input(proxy, addr, mcs):
    stop = threading.Event()
    errors = []
    done = [0]         # the good client's set+get pairs

    def good_client():
        with Mc(addr) as g:
            i = 0
            while not stop.is_set():
                k = b"good:%d" % (i % 50)
                r = g.call(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(k), k))
                r2 = g.call(b"get %s\r\n" % k)
                if r != b"STORED\r\n" or r2 != b"VALUE %s 0 %d\r\n%s\r\nEND\r\n" % (k, len(k), k):
                    errors.append((r, r2))
                i += 1
                done[0] = i

    t = threading.Thread(target=good_client, daemon=True)
    t.start()
    # Each case goes to a memcached directly and through the proxy, followed by "mn": the two
    # answers must be the same bytes, but where the proxy's documented words differ.
    cases = [
        ("garbage", b"\x00\x01\x02garbage\r\n", None),
        ("data block shorter than declared", b"set short 0 0 10\r\nabc\r\nget short\r\n", None),
        ("data block longer than declared", b"set long 0 0 2\r\nabcdef\r\nget long\r\n", None),
        ("300-byte key", b"get " + b"k" * 300 + b"\r\n",
         b"CLIENT_ERROR key too long\r\n"),  # memcached: "bad command line format"
        ("item over the item size", b"set big 0 0 1100000\r\n" + b"x" * 1100000 +
         b"\r\nget big\r\n", None),
        ("negative length", b"set neg 0 0 -1\r\nget neg\r\n", None),
        ("a meta flag memcached does not know", b"mg k v !\r\n", None),
    ]
    direct = mcs[3]
    for what, data, ours_differ in cases:
        replies = []
        for target in (direct.addr, addr):
            with Mc(target) as c:
                c.send(data + b"mn\r\n")
                got = b""
                while not got.endswith(b"MN\r\n"):
                    got += c.reply()
                replies.append(got)
        want = replies[0] if ours_differ is None else ours_differ + b"MN\r\n"
        if replies[1] != want:
            soft_fail("%s: the proxy answered %r, memcached %r" % (what, replies[1][:200],
                                                                   replies[0][:200]))
    with Mc(addr) as c:
        c.send(b"set huge 0 0 1099511627776\r\n")
        r = c.reply()
        if not r.startswith(b"CLIENT_ERROR "):
            soft_fail("2^40 length: %r" % r)
        try:
            c._fill()
            soft_fail("the connection stayed open after a 2^40 length")
        except (Closed, OSError):
            pass
    for m in mcs:
        for k in (b"short", b"long", b"big", b"huge", b"neg"):
            if m.keys_present([k]):
                soft_fail("%r reached memcached %s: half-applied" % (k, m.text))
    # A client that never reads: its replies pile up to max_client_buffer_bytes, then it is
    # closed (stats client_err); the good client goes on.
    before = proxy.stats_json()["main"]["client_err"]
    with Mc(addr) as s:
        s.call(b"set fat 0 0 60000\r\n" + b"f" * 60000 + b"\r\n")
        try:
            for _ in range(400):
                s.send(b"get fat fat fat fat\r\n")
        except OSError:
            pass
        if not poll_until(lambda: proxy.stats_json()["main"]["client_err"] != before, 10):
            soft_fail("a client that never reads was not closed")
    # The good client goes on after the never-reader's close: 20 more set+get.
    pairs = done[0]
    poll_until(lambda: done[0] >= pairs + 20 or errors, 15)
    stop.set()
    t.join(timeout=15)
    if done[0] < pairs + 20:
        fail("the well-behaved client did %d set+get after the never-reader's close, not 20" % (
            done[0] - pairs))
    if errors:
        fail("the well-behaved client saw %d failures during the bad input, e.g. %r" % (
            len(errors), errors[0]))
    log("bad input: %d cases answered as memcached answers them (or in the documented words), "
        "a 2^40 length closed, nothing half-stored, the good client unharmed" % len(cases))


def part_faults(proxy_exe, tmp, mcs):
    port = free_ports(1)[0]
    conf = write_file(os.path.join(tmp, "faults.yml"), mc_pool(
        "faults", port, [(m.text, 1, None) for m in mcs], hash="md5",
        distribution="ketama", auto_eject_hosts=True, server_failure_limit=1,
        server_retry_timeout=300, timeout=400))
    p = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)], label="faults").start()
    addr = ("127.0.0.1", port)
    keys = [b"f:%d" % i for i in range(400)]
    set_all(addr, keys)
    home = placement(mcs, keys)
    dead, hung = mcs[0], mcs[1]
    dead.kill()
    os.kill(hung.proc.pid, signal.SIGSTOP)
    try:
        worst = 0.0
        with Mc(addr, timeout=5) as c:
            for round_ in range(3):
                for k in keys:
                    t0 = time.monotonic()
                    r = c.call(b"get %s\r\n" % k)
                    worst = max(worst, time.monotonic() - t0)
                    on = home.get(k)
                    if on in (dead.text, hung.text):
                        if r.startswith(b"SERVER_ERROR") and round_ > 0:
                            soft_fail("a read of %r failed over to an error: %r" % (k, r))
                    elif r != b"VALUE %s 0 %d\r\n%s\r\nEND\r\n" % (k, len(k), k):
                        soft_fail("a key of a live memcached: %r" % r)
                t0 = time.monotonic()
                k = next(k for k in keys if home.get(k) == dead.text)
                r = c.call(b"set %s 0 0 1\r\nz\r\n" % k)
                if not (r.startswith(b"SERVER_ERROR") or r == b"STORED\r\n"):
                    soft_fail("a write to a dead memcached's key: %r" % r)
        log("faults: reads answered (slowest %.3f s), dead and hung servers ejected" % worst)
        js = p.stats_json()
        if js["faults"]["server_ejects"] < 2:
            soft_fail("stats: %d server_ejects after a kill and a hang" % js["faults"][
                "server_ejects"])
    finally:
        os.kill(hung.proc.pid, signal.SIGCONT)
    dead.start()
    k = next(k for k in keys if home.get(k) == dead.text)

    def lands():
        with Mc(addr) as c:
            c.call(b"set %s 0 0 4\r\nback\r\n" % k)
        return bool(dead.keys_present([k]))
    wait_until(lands, 10, "the restarted memcached readmitted (a set of its key on it)",
               poll=0.2)
    p.stop()
    log("faults: the restarted memcached readmitted after a probe")


def part_stats_metrics(proxy_exe, nutcracker, tmp, mcs):
    port = free_ports(1)[0]
    mport = free_ports(1)[0]
    conf = write_file(os.path.join(tmp, "stats.yml"), mc_pool(
        "st", port, [(m.text, 1, None) for m in mcs], hash="fnv1a_64", distribution="ketama"))
    fields = []
    for label, exe, nut, extra in (("nut-stats", nutcracker, True, ()),
                                   ("chp-stats", proxy_exe, False,
                                    ("--metrics-port", str(mport)))):
        p = Proxy(exe, tmp, conf, [("127.0.0.1", port)], label=label, nutcracker=nut,
                  extra_args=extra).start()
        keys = [b"s:%d" % i for i in range(100)]
        set_all(("127.0.0.1", port), keys)
        with Mc(("127.0.0.1", port)) as c:
            c.call(b"get " + b" ".join(keys[:30]) + b"\r\n")
        if nut:  # nutcracker aggregates every 30 s by default: read the field names only
            js = p.stats_json()
        else:    # every request answered: counted once the stats show it (judged below)
            js = p.poll_stats(lambda st: sum(v["requests"] for v in st["st"].values()
                                             if isinstance(v, dict)) >= 101)
        pool = js["st"]
        srv = {k: v for k, v in pool.items() if isinstance(v, dict)}
        fields.append((set(k for k, v in pool.items() if not isinstance(v, dict)),
                       set().union(*[set(v) for v in srv.values()]), set(srv)))
        if not nut:
            reqs = sum(v["requests"] for v in srv.values())
            if reqs < 100 + 1:
                soft_fail("stats: %d requests to the servers for 100 sets and a multiget" % reqs)
            def classes():
                fams = promtext.scrape(mport)
                return tuple(promtext.value(fams, "chash_proxy_requests_total", pool="st",
                                            **{"class": k}) for k in ("write", "multi"))
            poll_until(lambda: classes() == (100, 1), WAIT_TIMEOUT)
            w, m = classes()
            if w != 100 or m != 1:
                soft_fail("/metrics: %s writes and %s multi for 100 sets and a multiget" % (w, m))
        p.stop()
    (nut_pool, nut_srv, nut_names), (our_pool, our_srv, our_names) = fields
    if not nut_pool <= our_pool | {"membership_version"} or not nut_srv <= our_srv or \
            nut_names != our_names:
        fail("stats fields differ from nutcracker's: pool %s, server %s, names %s vs %s" % (
            nut_pool - our_pool, nut_srv - our_srv, nut_names, our_names))
    log("stats: nutcracker's fields for a memcached pool; /metrics counts the traffic")


PROGRAMS = ("memcached", "nutcracker", "memccp", "memccat", "memcrm", "memcexist")


def body(t):
    proxy_exe, tmp = t.proxy, t.tmp
    memcached, nutcracker, memccp, memccat, memcrm, memcexist = (t.programs[p] for p in PROGRAMS)
    mcs = start_memcacheds(memcached, tmp, 4)
    npools, nkeys = part_dropin(proxy_exe, nutcracker, tmp, mcs)
    port = free_ports(1)[0]
    conf = write_file(os.path.join(tmp, "main.yml"), mc_pool(
        "main", port, [(m.text, 1, None) for m in mcs], hash="md5", distribution="ketama",
        max_client_buffer_bytes=4194304))
    p = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)], label="main").start()
    part_clients(("127.0.0.1", port), mcs, (memccp, memccat, memcrm, memcexist))
    part_protocol(("127.0.0.1", port), mcs, p.proc.pid)
    part_bad_input(p, ("127.0.0.1", port), mcs)
    p.stop()
    part_stats_metrics(proxy_exe, nutcracker, tmp, mcs)
    part_faults(proxy_exe, tmp, mcs)
    return "%d pools x %d keys placed as nutcracker places them; clients, protocol, bad " \
           "input, faults, stats" % (npools, nkeys // npools)


if __name__ == "__main__":
    run_test(body, programs=PROGRAMS, modules=("pymemcache",))
