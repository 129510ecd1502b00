#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_warmup: a membership change without a miss storm (warm_up, ramp; docs/OPERATIONS.md).

Real redis-servers and memcacheds, chash-proxy reloaded by SIGHUP and by POST /-/reload. Owners
come from `chash lookup` on the old and the new file; what a server holds is read on the server
directly. Behaviour only, no timing asserts (windows are long enough that the test never races
their end).

Redis pool, 4 -> 6 servers with warm_up: 120000 in the new file (SIGHUP):
  1. Every key written before the change (strings with a PX lifetime, hashes, lists) reads back
     through the proxy after it: 0 misses. Each moved key's first read counts one warm-up hit;
     unmoved keys count none (one lookup tells them apart).
  2. Every moved key is copied to its new owner with its remaining lifetime (PTTL within 5 s of
     the original less the time elapsed); non-string types keep their type and content; the old
     owner still holds its copy (reads delete nothing).
  3. Writes and deletes of moved keys during the window: SET goes to the new owner and the old
     copy is deleted; after DEL a read answers nil (never the old owner's value).
  4. A graceful decommission by POST /-/reload?warm_up=120000 over a file whose pool has no
     warm_up: the removed server (alive) still answers its keys' reads: 0 misses.
  5. A removed server that is dead (killed after the reload): the keys only it held are plain
     misses (nil), no error.
Ramp (POST /-/reload?ramp=8000&ramp_start=<Unix ms 2 s ahead>&warm_up=0), 4 -> 6 on fresh
servers: a write of a moved key lands on its old owner when the key's switch time (ramp_start +
XXH3_64(key) mod ramp, computed here with libxxhash) is ahead, on its new owner when it is past
(keys within 600 ms of their switch are not judged).
memcached pool, 4 -> 6 with warm_up (SIGHUP): multi-key gets answer every key (0 misses), each
moved key is copied with its flags and a remaining exptime within 5 s, and a delete during the
window leaves nothing to read.
Then SIGTERM: clean exit, no sanitizer report.

Usage: test_warmup.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip.
"""
import ctypes
import http.client
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Mc, Proxy, Resp, chash_lookup, fail, free_ports, log,  # noqa: E402
                          pool_yaml, run_test, start_memcacheds, start_redises, tail, wait_until,
                          write_file)

POOL = "warm"
NKEYS = 1200
TTL_MS = 600000
WAIT = 20.0
RAMP_GAP = 1.5     # seconds between two rounds of writes during a ramp: six rounds sample its
                   # 8 s at as many points (a parameter of the test, not a wait)


def replace_file(path, text):
    write_file(path + ".tmp", text)
    os.rename(path + ".tmp", path)


def wait_for(what, pred, timeout=WAIT):
    return wait_until(pred, timeout, what, poll=0.1)


def info_fields(addr):
    with Resp(addr) as c:
        text = c.call("INFO").decode()
    return dict(re.findall(r"pool_%s_(\w+):(\S+)" % POOL, text))


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics")
        body = c.getresponse().read().decode()
    finally:
        c.close()
    out = {}
    for m in re.finditer(r'^(chash_proxy_(?:warm_up|ramp)\w*)\{pool="%s"\} (\d+)$' % POOL, body,
                         re.M):
        out[m.group(1)] = int(m.group(2))
    return out


def post_reload(port, query):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("POST", "/-/reload" + query, body=b"")
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def moved_keys(chash, old_file, new_file, keys):
    old = chash_lookup(chash, old_file, POOL, keys)
    new = chash_lookup(chash, new_file, POOL, keys)
    return old, new, [k for k in keys if old[k] != new[k]]


def redis_phase(proxy_exe, chash, redis_exe, tmp):
    servers = start_redises(redis_exe, tmp, 8)
    port, mport = free_ports(2)
    addr = ("127.0.0.1", port)
    by_text = {s.text: s for s in servers}

    def conf(members, **extra):
        return pool_yaml(POOL, port, [(s.text, 1, None) for s in members], hash="md5",
                         distribution="ketama", timeout=5000, **extra)

    f4 = write_file(os.path.join(tmp, "r4.yml"), conf(servers[:4]))
    f6 = write_file(os.path.join(tmp, "r6.yml"), conf(servers[:6], warm_up=120000))
    f5 = write_file(os.path.join(tmp, "r5.yml"), conf(servers[:5]))
    live = write_file(os.path.join(tmp, "redis.yml"), conf(servers[:4]))
    px = Proxy(proxy_exe, tmp, live, [addr, ("127.0.0.1", mport)], label="redis-proxy",
               extra_args=["--metrics-port", str(mport)]).start()

    keys = [b"w:%d" % i for i in range(NKEYS)]
    hkeys = [b"h:%d" % i for i in range(100)]
    lkeys = [b"l:%d" % i for i in range(100)]
    wkeys = [b"wr:%d" % i for i in range(400)]
    with Resp(addr) as c:
        got = c.pipeline([("SET", k, b"v-" + k, "PX", TTL_MS) for k in keys + wkeys] +
                         [("HSET", k, "a", k, "b", "2") for k in hkeys] +
                         [("RPUSH", k, "x", k) for k in lkeys])
    if any(g not in (b"OK", 2) for g in got):
        fail("writes before the change: %r" % [g for g in got if g not in (b"OK", 2)][:3])
    t_written = time.time()

    # 1. 4 -> 6, warm_up in the file, SIGHUP.
    replace_file(live, open(f6).read())
    px.proc.send_signal(signal.SIGHUP)
    wait_for("the reload to 6 servers", lambda: info_fields(addr).get("servers") == "6")
    info = info_fields(addr)
    if info.get("warm_up") != "warm" or not 100000 < int(info.get("warm_up_left_ms", 0)) <= 120000:
        fail("INFO after the reload: warm_up %r, left %r ms" % (info.get("warm_up"),
                                                                info.get("warm_up_left_ms")))
    all_keys = keys + hkeys + lkeys
    old, new, moved = moved_keys(chash, f4, f6, all_keys + wkeys)
    moved_set = set(moved)
    n_moved_read = sum(1 for k in all_keys if k in moved_set)
    log("redis 4 -> 6: %d of %d keys moved" % (len(moved), len(all_keys + wkeys)))
    if not 0.15 < len(moved) / len(all_keys + wkeys) < 0.6:
        fail("moved share %.3f is not near 1/3" % (len(moved) / len(all_keys + wkeys)))
    with Resp(addr) as c:
        got = c.pipeline([("GET", k) for k in keys] + [("HGETALL", k) for k in hkeys] +
                         [("LRANGE", k, 0, -1) for k in lkeys])
    misses = [k for k, g in zip(keys, got) if g != b"v-" + k]
    misses += [k for k, g in zip(hkeys, got[len(keys):]) if g != [b"a", k, b"b", b"2"]]
    misses += [k for k, g in zip(lkeys, got[len(keys) + len(hkeys):]) if g != [b"x", k]]
    if misses:
        fail("%d of %d reads missed during the warm-up window, e.g. %r (moved: %s)" % (
            len(misses), len(all_keys), misses[0], misses[0] in moved_set))
    mt = wait_for("the fills", lambda: (lambda m: m if m.get("chash_proxy_warm_up_fills_total", 0)
                                        >= n_moved_read else None)(metrics(mport)))
    log("metrics after reading every key once: %r" % mt)
    if mt["chash_proxy_warm_up_hits_total"] != n_moved_read:
        fail("warm-up hits %d, want the %d moved keys read (unmoved keys must not count)" % (
            mt["chash_proxy_warm_up_hits_total"], n_moved_read))
    if mt["chash_proxy_warm_up_fills_total"] != n_moved_read or \
            mt["chash_proxy_warm_up_fill_errors_total"] != 0:
        fail("fills %r, want %d and no error" % (mt, n_moved_read))

    # 2. Copies at the new owners, with their lifetimes; the old copies stay.
    elapsed_ms = (time.time() - t_written) * 1000
    for k in [k for k in all_keys if k in moved_set]:
        dst, src = by_text[new[k]], by_text[old[k]]
        ttl = dst.call("PTTL", k)
        if k.startswith(b"w:"):
            if dst.call("GET", k) != b"v-" + k:
                fail("moved key %r not copied to its new owner %s" % (k, dst.text))
            if not TTL_MS - elapsed_ms - 5000 <= ttl <= TTL_MS:
                fail("moved key %r: PTTL %r at its new owner, want about %d" % (
                    k, ttl, TTL_MS - elapsed_ms))
        elif k.startswith(b"h:"):
            if dst.call("HGETALL", k) != [b"a", k, b"b", b"2"] or ttl != -1:
                fail("moved hash %r at its new owner: %r, PTTL %r" % (
                    k, dst.call("HGETALL", k), ttl))
        elif dst.call("LRANGE", k, 0, -1) != [b"x", k]:
            fail("moved list %r not copied" % k)
        if src.call("EXISTS", k) != 1:
            fail("a read deleted moved key %r at its old owner %s" % (k, src.text))
    unmoved = [k for k in keys if k not in moved_set][:50]
    for k in unmoved:
        if by_text[new[k]].call("GET", k) != b"v-" + k:
            fail("unmoved key %r not on its owner" % k)

    # 3. Writes and deletes of moved keys in the window.
    wm = [k for k in wkeys if k in moved_set]
    sets, dels = wm[::2], wm[1::2]
    with Resp(addr) as c:
        got = c.pipeline([("SET", k, b"new-" + k) for k in sets] + [("DEL", k) for k in dels])
        if got != [b"OK"] * len(sets) + [1] * len(dels):
            fail("writes in the window: %r" % [g for g in got if g not in (b"OK", 1)][:3])
        got = c.pipeline([("GET", k) for k in sets + dels])
    if got[:len(sets)] != [b"new-" + k for k in sets]:
        fail("a read after a SET in the window did not answer the new value")
    stale = [k for k, g in zip(dels, got[len(sets):]) if g is not None]
    if stale:
        fail("%d keys deleted in the window read back (stale, from the old owner): %r" % (
            len(stale), stale[:3]))
    for k in sets + dels:
        if by_text[old[k]].call("EXISTS", k) != 0:
            fail("a write of moved key %r left its old copy at %s" % (k, old[k]))
    for k in sets:
        if by_text[new[k]].call("GET", k) != b"new-" + k:
            fail("SET of moved key %r is not at its new owner" % k)
    log("writes in the window: %d SETs, %d DELs, 0 stale" % (len(sets), len(dels)))

    # 4. Decommission 6 -> 5, warm_up for this reload only (the file has none).
    replace_file(live, open(f5).read())
    code, text = post_reload(mport, "?warm_up=120000")
    if code != 200:
        fail("POST /-/reload?warm_up=120000: %d %r" % (code, text))
    code2, text2 = post_reload(mport, "?warm_up=abc")
    if code2 != 400 or "abc" in text2:
        fail("POST /-/reload?warm_up=abc: %d %r, want 400 without the value" % (code2, text2))
    removed = servers[5]
    theirs = [k for k in keys if new[k] == removed.text and
              by_text[new[k]].call("EXISTS", k) == 1]
    if not theirs:
        fail("no key of the removed server to read")
    with Resp(addr) as c:
        got = c.pipeline([("GET", k) for k in theirs])
    missed = [k for k, g in zip(theirs, got) if g != b"v-" + k and g != b"new-" + k]
    if missed:
        fail("decommission with warm_up: %d of %d keys of the removed (live) server missed" % (
            len(missed), len(theirs)))
    log("decommission 6 -> 5 with POST ?warm_up: the removed server's %d keys all read back" %
        len(theirs))

    # 5. 5 -> 4 and the removed server killed: keys only it holds are plain misses, no errors.
    dkeys = [b"d:%d" % i for i in range(600)]
    with Resp(addr) as c:
        if c.pipeline([("SET", k, b"d") for k in dkeys]) != [b"OK"] * len(dkeys):
            fail("writes before the 5 -> 4 change")
    gone = servers[4]
    theirs = [k for k in dkeys if gone.call("EXISTS", k) == 1]
    if not theirs:
        fail("no key written to %s" % gone.text)
    replace_file(live, open(f4).read())
    code, text = post_reload(mport, "?warm_up=120000")
    if code != 200:
        fail("POST /-/reload 5 -> 4: %d %r" % (code, text))
    gone.kill()
    with Resp(addr) as c:
        got = c.pipeline([("GET", k) for k in theirs] * 2)
    if got != [None] * (2 * len(theirs)):
        fail("reads of keys only a dead old owner held: %r, want nil and no error" % (
            [g for g in got if g is not None][:3]))
    log("dead old owner: its %d keys read twice, all nil, no error" % len(theirs))
    px.stop()
    for s in servers:
        s.kill()


def xxh3(key):
    lib = ctypes.CDLL("libxxhash.so.0")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib.XXH3_64bits(key, len(key))


def ramp_phase(proxy_exe, chash, redis_exe, tmp):
    servers = start_redises(redis_exe, tmp, 6)
    port, mport = free_ports(2)
    addr = ("127.0.0.1", port)
    by_text = {s.text: s for s in servers}

    def conf(members):
        return pool_yaml(POOL, port, [(s.text, 1, None) for s in members], hash="md5",
                         distribution="ketama", timeout=5000)

    f4 = write_file(os.path.join(tmp, "p4.yml"), conf(servers[:4]))
    f6 = write_file(os.path.join(tmp, "p6.yml"), conf(servers))
    live = write_file(os.path.join(tmp, "ramp.yml"), conf(servers[:4]))
    px = Proxy(proxy_exe, tmp, live, [addr, ("127.0.0.1", mport)], label="ramp-proxy",
               extra_args=["--metrics-port", str(mport)]).start()
    keys = [b"r:%d" % i for i in range(1500)]
    old, new, moved = moved_keys(chash, f4, f6, keys)
    ramp_ms = 8000
    start_ms = int(time.time() * 1000) + 2000
    replace_file(live, open(f6).read())
    code, text = post_reload(mport, "?ramp=%d&ramp_start=%d&warm_up=0" % (ramp_ms, start_ms))
    if code != 200:
        fail("POST /-/reload with a ramp: %d %r" % (code, text))
    switch = {k: start_ms + xxh3(k) % ramp_ms for k in moved}
    judged = {"old": 0, "new": 0}
    deadline = time.time() + (start_ms + ramp_ms) / 1000 - time.time() + 1
    rounds = 0
    while time.time() < deadline and rounds < 6:
        rounds += 1
        with Resp(addr) as c:
            now0 = time.time() * 1000
            got = c.pipeline([("SET", k, b"%d" % rounds) for k in moved])
            now1 = time.time() * 1000
        if any(g != b"OK" for g in got):
            fail("SETs during the ramp: %r" % [g for g in got if g != b"OK"][:3])
        for k in moved:
            if switch[k] > now1 + 600:
                want, other = old[k], new[k]
                judged["old"] += 1
            elif switch[k] < now0 - 600:
                want, other = new[k], old[k]
                judged["new"] += 1
            else:
                continue
            if by_text[want].call("GET", k) != b"%d" % rounds:
                fail("ramp round %d: moved key %r (switch %+d ms from now) not written to %s "
                     "(%s holds %r)" % (rounds, k, switch[k] - now1, want, other,
                                        by_text[other].call("GET", k)))
            by_text[want].call("DEL", k)
        time.sleep(RAMP_GAP)
    log("ramp: %d writes judged on the old owner (before their switch), %d on the new" % (
        judged["old"], judged["new"]))
    if judged["old"] < 100 or judged["new"] < 100:
        fail("the ramp test judged too few writes: %r" % judged)
    mt = metrics(mport)
    if mt.get("chash_proxy_ramp_old_owner_total", 0) < judged["old"]:
        fail("ramp_old_owner_total %r < %d" % (mt.get("chash_proxy_ramp_old_owner_total"),
                                               judged["old"]))
    px.stop()
    for s in servers:
        s.kill()


def mc_phase(proxy_exe, chash, mc_exe, tmp):
    servers = start_memcacheds(mc_exe, tmp, 6)
    port = free_ports(1)[0]
    addr = ("127.0.0.1", port)
    by_text = {s.text: s for s in servers}

    def conf(members, **extra):
        return pool_yaml(POOL, port, [(s.text, 1, None) for s in members], redis=False,
                         hash="md5", distribution="ketama", timeout=5000, **extra)

    f4 = write_file(os.path.join(tmp, "m4.yml"), conf(servers[:4]))
    f6 = write_file(os.path.join(tmp, "m6.yml"), conf(servers, warm_up=120000))
    live = write_file(os.path.join(tmp, "mc.yml"), conf(servers[:4]))
    px = Proxy(proxy_exe, tmp, live, [addr], label="mc-proxy").start()
    keys = [b"m:%d" % i for i in range(800)]
    exptime = 3600
    with Mc(addr) as c:
        for k in keys:
            v = b"val-" + k
            if c.call(b"set %s 7 %d %d\r\n%s\r\n" % (k, exptime, len(v), v)) != b"STORED\r\n":
                fail("set %r through the proxy" % k)
    t_written = time.time()
    old, new, moved = moved_keys(chash, f4, f6, keys)
    moved_set = set(moved)
    replace_file(live, open(f6).read())
    px.proc.send_signal(signal.SIGHUP)
    wait_for("the memcached reload", lambda: "reload done" in tail(px.log))
    with Mc(addr) as c:
        got = {}
        for i in range(0, len(keys), 50):
            got.update(c.get_many(keys[i:i + 50]))
    missing = [k for k in keys if got.get(k) != b"val-" + k]
    if missing:
        fail("memcached: %d of %d keys missed in a multi-get during the window, e.g. %r" % (
            len(missing), len(keys), missing[0]))

    def copied():
        for k in moved:
            with Mc(by_text[new[k]].addr) as c:
                r = c.call(b"mg %s v t f\r\n" % k)
            if not r.startswith(b"VA "):
                return None
        return True
    wait_for("the memcached fills", copied)
    elapsed = time.time() - t_written
    for k in moved[:200]:
        with Mc(by_text[new[k]].addr) as c:
            r = c.call(b"mg %s v t f\r\n" % k)
        head = r.split(b"\r\n")[0].split()
        flags = dict((t[:1], t[1:]) for t in head[2:])
        if flags.get(b"f") != b"7" or not exptime - elapsed - 5 <= int(flags.get(b"t", -9)) \
                <= exptime:
            fail("memcached copy of %r: %r (want flags 7, t about %d)" % (
                k, head, exptime - elapsed))
    dels = moved[:50]
    with Mc(addr) as c:
        for k in dels:
            if c.call(b"delete %s\r\n" % k) != b"DELETED\r\n":
                fail("delete of moved key %r in the window" % k)
        back = c.get_many(dels)
    if back:
        fail("memcached: %d deleted keys read back in the window: %r" % (len(back),
                                                                         list(back)[:3]))
    log("memcached 4 -> 6: %d moved keys, all read back, copied with flags and exptime; "
        "%d deletes, 0 stale" % (len(moved), len(dels)))
    px.stop()
    for s in servers:
        s.kill()


def body(t):
    proxy_exe, chash, tmp = t.proxy, t.chash, t.tmp
    redis_exe, mc_exe = t.programs["redis-server"], t.programs["memcached"]
    redis_phase(proxy_exe, chash, redis_exe, tmp)
    ramp_phase(proxy_exe, chash, redis_exe, tmp)
    mc_phase(proxy_exe, chash, mc_exe, tmp)


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "memcached"))
