#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_prefix_routes: one listener, several pools by key prefix (issue 40, item 1).

chash-proxy with a Redis listener "front" whose routes send "user:" to pool users (2
redis-servers, ketama), "sess:" to pool sessions (2 redis-servers, rendezvous) with the prefix
stripped, "user:vip:" (longer, so it wins over "user:") and everything else (the catch-all "")
to pool general (2 redis-servers, modula). Each target pool has its own listener too.

  - Placement: keys of every kind written through front (python3-redis) are each on the server
    `chash lookup --config` names (pool and owner), read directly there (a "sess:" key without
    its prefix), and nowhere else (KEYS on every server: the oracle is the real servers).
  - Split across pools: MGET, MSET, DEL, EXISTS, UNLINK whose keys span the three pools; values
    and counts checked against the servers read directly.
  - Strip: GET, SET EX, HSET/HGETALL, INCR on "sess:" keys reach the server as the key without
    "sess:"; redis-cli through front reads them back.
  - Refused, nothing applied: MULTI/EXEC whose keys span pools (EXECABORT), EVAL with keys in
    two pools, RPOPLPUSH across pools; a transaction within one pool, and EVAL of one pool's key,
    are served.
  - Reload: the config moves "user:" to pool sessions and SIGHUP reloads it; one client
    connection, open across the reload, then writes a user: key that lands on the server the
    new config's lookup names (sessions), and reads the older key as absent there (it stayed on
    users); the config moved back and POST /-/reload: the same connection reads the older key
    again and not the newer one.
  - memcached: a listener with two pools ("a:" to mc_a, the catch-all mc_b); set through it,
    each key on the memcached the lookup names; a multi-key get spanning both pools returns
    every value in key order.
  - Config errors (-t) with file:line:column: an unknown pool, another protocol, a duplicate
    prefix, a target with routes, routes with neither servers nor a catch-all, strip on a
    memcached pool.

Usage: test_prefix_routes.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server, memcached, redis-cli or python3-redis missing and
CI unset).
"""
import http.client
import os
import re
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Mc, Proxy, Resp, fail, free_ports, log, read_text,  # noqa: E402
                          run_test, start_memcacheds, start_redises, wait_until, write_file)

import redis  # noqa: E402

WAIT = 20.0


def servers_yaml(servers):
    return "".join("   - %s:1\n" % s.text for s in servers)


def redis_config(ports, users, sessions, general, user_pool="users"):
    front, pu, ps, pg = ports
    return ("front:\n"
            "  listen: 127.0.0.1:%d\n"
            "  redis: true\n"
            "  routes:\n"
            "    - {prefix: \"user:\", pool: %s}\n"
            "    - {prefix: \"user:vip:\", pool: general}\n"
            "    - prefix: \"sess:\"\n"
            "      pool: sessions\n"
            "      strip: true\n"
            "    - {prefix: \"\", pool: general}\n"
            "users:\n  listen: 127.0.0.1:%d\n  redis: true\n  hash: fnv1a_64\n"
            "  distribution: ketama\n  servers:\n%s"
            "sessions:\n  listen: 127.0.0.1:%d\n  redis: true\n  distribution: rendezvous\n"
            "  servers:\n%s"
            "general:\n  listen: 127.0.0.1:%d\n  redis: true\n  distribution: modula\n"
            "  servers:\n%s") % (front, user_pool, pu, servers_yaml(users), ps,
                                 servers_yaml(sessions), pg, servers_yaml(general))


def lookup(chash, config, keys, listener="front"):
    """{key: (pool, owner)} from `chash lookup --config CONFIG --pool LISTENER -` (its routes
    followed)."""
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    r = subprocess.run([chash, "lookup", "--config", config, "--pool", listener, "-"],
                       input=b"".join(k + b"\n" for k in keys), capture_output=True,
                       timeout=120, env=env)
    if r.returncode != 0:
        fail("chash lookup exited %d: %s" % (r.returncode, r.stderr.decode("utf-8", "replace")))
    out = {}
    lines = r.stdout.split(b"\n")
    if len(lines) - 1 != len(keys):
        fail("chash lookup printed %d lines for %d keys" % (len(lines) - 1, len(keys)))
    for k, line in zip(keys, lines):
        parts = line.split(b"\t")
        if parts[0] != k or len(parts) < 3:
            fail("unexpected chash lookup line %r" % line[:200])
        out[k] = (parts[1].decode(), parts[2].decode())
    return out


def placed_key(key):
    """The key as the server holds it: "sess:" is stripped."""
    return key[5:] if key.startswith(b"sess:") else key


def check_placement(chash, config, servers, keys, values, what):
    """Each key of keys (bytes) is on the server lookup names, with values[key], and on no
    other server."""
    where = lookup(chash, config, keys)
    by_addr = {s.text: s for s in servers}
    expected = {s.text: set() for s in servers}
    for k in keys:
        pool, owner = where[k]
        if owner not in by_addr:
            fail("%s: lookup names %s (pool %s) for %r, not one of the servers" % (
                what, owner, pool, k))
        expected[owner].add(placed_key(k))
        got = by_addr[owner].call("GET", placed_key(k))
        if got != values[k]:
            fail("%s: %r: server %s (pool %s) holds %r for %r, expected %r" % (
                what, k, owner, pool, got, placed_key(k), values[k]))
    for s in servers:
        have = set(s.call("KEYS", "*"))
        stray = {k for k in have if k in {placed_key(x) for x in keys}} - expected[s.text]
        if stray:
            fail("%s: %s holds keys lookup places elsewhere: %r" % (what, s.text,
                                                                   sorted(stray)[:5]))
    return where


def check_config_errors(t, tmp, ports, users, sessions, general, mcs):
    base = redis_config(ports, users, sessions, general)
    cases = [
        ("unknown pool", base.replace("pool: users}", "pool: nosuch}"), 5, 31, "is not a pool"),
        ("other protocol", base + "mc:\n  listen: 127.0.0.1:%d\n  servers:\n   - %s:1\n" % (
            free_ports(1)[0], mcs[0].text), None, None, None),
        ("duplicate prefix", base.replace("    - {prefix: \"user:vip:\", pool: general}\n",
                                          "    - {prefix: \"user:\", pool: general}\n"),
         6, 7, "duplicate route prefix"),
        ("no catch-all", base.replace("    - {prefix: \"\", pool: general}\n", ""),
         1, 1, "no catch-all"),
        ("chain", base.replace("users:\n  listen", "users:\n  routes:\n    - {prefix: \"x\", "
                               "pool: general}\n  listen"), 5, 31, "has routes of its own"),
    ]
    # another protocol: front's catch-all names the memcached pool
    cases[1] = ("other protocol", cases[1][1].replace("{prefix: \"\", pool: general}",
                                                      "{prefix: \"\", pool: mc}"),
                10, 26, "speaks another protocol")
    mc_strip = ("mfront:\n  listen: 127.0.0.1:%d\n  routes:\n"
                "    - {prefix: \"a:\", pool: mb, strip: true}\n  servers:\n   - %s:1\n"
                "mb:\n  listen: 127.0.0.1:%d\n  servers:\n   - %s:1\n") % (
                    free_ports(1)[0], mcs[0].text, free_ports(1)[0], mcs[1].text)
    cases.append(("strip on memcached", mc_strip, 4, 28, "strip"))
    for name, text, line, col, words in cases:
        path = write_file(os.path.join(tmp, "bad.yml"), text)
        r = subprocess.run([t.proxy, "-t", "-c", path], capture_output=True, timeout=60)
        err = r.stderr.decode("utf-8", "replace")
        if r.returncode == 0:
            fail("config error %s: -t accepted it" % name)
        m = re.search(re.escape(path) + r":(\d+):(\d+): (.*)", err)
        if m is None or words not in m.group(3) or (int(m.group(1)), int(m.group(2))) != (
                line, col):
            fail("config error %s: expected %s:%d:%d: ...%s..., got:\n%s" % (
                name, path, line, col, words, err))
    log("config errors: %d cases named at file:line:column" % len(cases))


def body(t):
    tmp = t.tmp
    rs = start_redises(t.programs["redis-server"], tmp, 6)
    users, sessions, general = rs[0:2], rs[2:4], rs[4:6]
    mcs = start_memcacheds(t.programs["memcached"], tmp, 3)
    ports = free_ports(4)
    conf = write_file(os.path.join(tmp, "routes.yml"),
                      redis_config(ports, users, sessions, general))
    check_config_errors(t, tmp, ports, users, sessions, general, mcs)

    mports = free_ports(4)
    metrics_port = mports.pop()
    mconf_text = ("mfront:\n  listen: 127.0.0.1:%d\n  routes:\n"
                  "    - {prefix: \"a:\", pool: mc_a}\n    - {prefix: \"\", pool: mc_b}\n"
                  "mc_a:\n  listen: 127.0.0.1:%d\n  distribution: ketama\n  servers:\n%s"
                  "mc_b:\n  listen: 127.0.0.1:%d\n  distribution: modula\n  servers:\n%s") % (
                      mports[0], mports[1], servers_yaml(mcs[0:2]), mports[2],
                      servers_yaml(mcs[2:3]))
    # one proxy for both: a memcached listener beside the Redis one
    full = write_file(os.path.join(tmp, "all.yml"), read_text(conf) + mconf_text)
    px = Proxy(t.proxy, tmp, full, [("127.0.0.1", p) for p in ports + mports + [metrics_port]],
               extra_args=["--metrics-port", str(metrics_port)]).start()

    r = redis.Redis(host="127.0.0.1", port=ports[0], socket_timeout=10)
    # ---- placement of single-key writes, each key by its route
    keys = ([b"user:%d" % i for i in range(60)] + [b"user:vip:%d" % i for i in range(30)] +
            [b"sess:%d" % i for i in range(60)] + [b"other:%d" % i for i in range(60)] +
            [b"user", b"sess:", b"u"])
    values = {k: b"v-" + k for k in keys}
    for k in keys:
        if r.set(k, values[k]) is not True:
            fail("SET %r through front did not answer OK" % k)
    where = check_placement(t.chash, full, rs, keys, values, "SET")
    pools = {p for p, _ in where.values()}
    if pools != {"users", "sessions", "general"}:
        fail("the keys reached pools %r, expected users, sessions and general" % pools)
    if where[b"user:vip:1"][0] != "general" or where[b"user:1"][0] != "users":
        fail("longest prefix: user:vip:1 -> %s, user:1 -> %s" % (where[b"user:vip:1"][0],
                                                               where[b"user:1"][0]))
    for k in keys:
        if r.get(k) != values[k]:
            fail("GET %r through front: %r" % (k, r.get(k)))
    log("placement: %d keys, each on its pool's server by chash lookup" % len(keys))

    # ---- split across pools
    mixed = [b"user:3", b"sess:4", b"other:5", b"user:vip:6", b"nokey:1", b"sess:7", b"user:8"]
    got = r.mget(mixed)
    want = [values.get(k) for k in mixed]
    if got != want:
        fail("MGET across pools: %r, expected %r" % (got, want))
    newv = {b"user:m%d" % i: b"mv%d" % i for i in range(10)}
    newv.update({b"sess:m%d" % i: b"ms%d" % i for i in range(10)})
    newv.update({b"zz:m%d" % i: b"mz%d" % i for i in range(10)})
    if r.mset(newv) is not True:
        fail("MSET across pools did not answer OK")
    check_placement(t.chash, full, rs, list(newv), newv, "MSET")
    ex = [b"user:m1", b"sess:m2", b"zz:m3", b"nope:1", b"sess:nope"]
    if r.exists(*ex) != 3:
        fail("EXISTS across pools: %r, expected 3" % r.exists(*ex))
    dels = [b"user:m1", b"sess:m2", b"zz:m3", b"nope:1"]
    if r.delete(*dels) != 3:
        fail("DEL across pools answered a count other than 3")
    if r.unlink(b"user:m4", b"sess:m5", b"nope:2") != 2:
        fail("UNLINK across pools answered a count other than 2")
    gone = lookup(t.chash, full, dels + [b"user:m4", b"sess:m5"])
    by_addr = {s.text: s for s in rs}
    for k, (_pool, owner) in gone.items():
        if by_addr[owner].call("EXISTS", placed_key(k)) != 0:
            fail("%r still on %s after DEL/UNLINK across pools" % (k, owner))
    log("MGET, MSET, EXISTS, DEL, UNLINK across pools merged")

    # ---- strip on commands that are not split
    if r.set(b"sess:x", b"1", ex=1000) is not True or r.incr(b"sess:x") != 2:
        fail("SET EX / INCR on a stripped key")
    r.hset(b"sess:h", mapping={b"f1": b"a", b"f2": b"b"})
    w = lookup(t.chash, full, [b"sess:x", b"sess:h"])
    sx, sh = by_addr[w[b"sess:x"][1]], by_addr[w[b"sess:h"][1]]
    if sx.call("GET", "x") != b"2" or not 0 < sx.call("TTL", "x") <= 1000:
        fail("sess:x is not x on %s with its TTL" % sx.text)
    if sh.call("HGET", "h", "f2") != b"b" or r.hgetall(b"sess:h") != {b"f1": b"a", b"f2": b"b"}:
        fail("sess:h is not h on %s" % sh.text)
    cli = subprocess.run([t.programs["redis-cli"], "-p", str(ports[0]), "GET", "sess:x"],
                         capture_output=True, timeout=30)
    if cli.stdout.strip() != b"2":
        fail("redis-cli GET sess:x through front: %r" % cli.stdout)
    log("strip: SET EX, INCR, HSET, HGETALL reach the server without the prefix")

    # ---- refused across pools, nothing applied
    p = r.pipeline(transaction=True)
    p.set(b"user:t1", b"1")
    p.set(b"other:t2", b"2")
    try:
        p.execute()
        fail("MULTI/EXEC across pools was not refused")
    except redis.exceptions.ResponseError as e:
        if "transaction stays in one pool" not in str(e) and "EXECABORT" not in str(e):
            fail("MULTI/EXEC across pools: unexpected error %s" % e)
    if r.exists(b"user:t1", b"other:t2") != 0:
        fail("a refused transaction across pools wrote keys")
    p = r.pipeline(transaction=True)
    p.set(b"user:t3", b"3")
    p.get(b"user:t3")
    if p.execute() != [True, b"3"]:
        fail("MULTI/EXEC within one pool was not served")
    if r.eval("return redis.call('GET', KEYS[1])", 1, b"user:t3") != b"3":
        fail("EVAL of one pool's key was not served")
    r.rpush(b"user:l", b"x")
    for args in ((b"EVAL", b"return 1", 2, b"user:3", b"other:3"),
                 (b"RPOPLPUSH", b"user:l", b"other:l")):
        try:
            r.execute_command(*args)
            fail("%r across pools was not refused" % (args,))
        except redis.exceptions.ResponseError as e:
            if "different pools" not in str(e):
                fail("%r across pools: unexpected error %s" % (args[0], e))
    if r.llen(b"user:l") != 1 or r.exists(b"other:l"):
        fail("a refused RPOPLPUSH across pools changed keys")
    log("MULTI/EXEC, EVAL and RPOPLPUSH across pools refused, nothing applied")

    # ---- memcached: two pools behind one listener, multi-get across them
    mkeys = [b"a:%d" % i for i in range(40)] + [b"b:%d" % i for i in range(40)]
    with Mc(("127.0.0.1", mports[0])) as mc:
        for k in mkeys:
            if mc.call(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(b"m" + k), b"m" + k)) != \
                    b"STORED\r\n":
                fail("memcached set %r through mfront" % k)
        mw = lookup(t.chash, full, mkeys, "mfront")
        m_by_addr = {s.text: s for s in mcs}
        for k in mkeys:
            pool, owner = mw[k]
            if pool != ("mc_a" if k.startswith(b"a:") else "mc_b"):
                fail("lookup puts %r in pool %s" % (k, pool))
            if k not in m_by_addr[owner].keys_present([k]):
                fail("%r is not on %s (pool %s)" % (k, owner, pool))
        sample = [b"b:1", b"a:2", b"a:3", b"b:4", b"nothere", b"a:39"]
        got = mc.get_many(sample)
        if got != {k: b"m" + k for k in sample if k in mkeys}:
            fail("memcached multi-get across pools: %r" % got)
        rep = mc.call(b"get b:1 a:2 b:4\r\n")
        if rep.index(b"VALUE b:1") > rep.index(b"VALUE a:2") or \
                rep.index(b"VALUE a:2") > rep.index(b"VALUE b:4"):
            fail("memcached multi-get across pools: values out of key order: %r" % rep)
    log("memcached: keys on their pool's server, multi-get across pools merged in order")

    # ---- reload: user: moves to pool sessions, one connection open across it
    c = Resp(("127.0.0.1", ports[0]))
    if c.call("SET", "user:before", "1") != b"OK":
        fail("SET user:before")
    was = lookup(t.chash, full, [b"user:before"])[b"user:before"]
    write_file(full, redis_config(ports, users, sessions, general, user_pool="sessions") +
               mconf_text)
    start = len(read_text(px.log))
    px.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "reload done" in read_text(px.log, start), WAIT, "the SIGHUP's reload")
    now = lookup(t.chash, full, [b"user:after", b"user:before"])
    if now[b"user:after"][0] != "sessions" or was[0] != "users":
        fail("lookup: user: keys before %s, after %s" % (was[0], now[b"user:after"][0]))
    if c.call("SET", "user:after", "2") != b"OK":
        fail("SET user:after on the connection kept across the reload")
    if by_addr[now[b"user:after"][1]].call("GET", "user:after") != b"2":
        fail("user:after is not on %s (pool sessions) after the reload" % now[b"user:after"][1])
    if c.call("GET", "user:before") is not None:
        fail("user:before read through the new route: expected absent in pool sessions")
    if by_addr[was[1]].call("GET", "user:before") != b"1":
        fail("user:before left its users server")
    # and back by the admin reload (POST /-/reload), the same connection still open
    write_file(full, redis_config(ports, users, sessions, general) + mconf_text)
    h = http.client.HTTPConnection("127.0.0.1", metrics_port, timeout=30)
    h.request("POST", "/-/reload", body=b"")
    resp = h.getresponse()
    body = resp.read()
    h.close()
    if resp.status != 200:
        fail("POST /-/reload: %d %r" % (resp.status, body))
    if c.call("GET", "user:before") != b"1" or c.call("GET", "user:after") is not None:
        fail("after POST /-/reload, user: keys are not read from pool users again")
    c.close()
    log("reload: user: moved to pool sessions by SIGHUP and back by POST /-/reload; the "
        "client's connection served across both")

    px.stop()
    return "prefix routes: placement, split, strip, refusals, memcached, reload"


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "memcached", "redis-cli"), modules=("redis",))
