#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_redis_cli: the real redis-cli through chash-proxy, in front of 3 real redis-servers.

Proves: the supported commands work from an ordinary client (strings, counters, expiry, hashes,
lists, sets, sorted sets); MSET/MGET/DEL/EXISTS/UNLINK/TOUCH across nodes return values in the
client's order and summed integers; a pipeline (redis-cli --pipe, and a raw socket sending 2,000
mixed requests in one write) is answered in order; PING/ECHO/SELECT 0/QUIT/COMMAND and inline
commands are handled; unsupported commands (KEYS, SCRIPT KILL, blocking, admin) get an
-ERR naming the command and the connection stays usable, and none reaches a backend; and every
key is stored on the backend `chash lookup --config` names (checked on the backends directly).

Usage: test_redis_cli.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server or redis-cli missing and CI unset).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Closed, Proxy, Resp, RespError, chash_lookup, encode, fail,  # noqa: E402
                          free_ports, pool_yaml, run_test, soft_fail, start_redises, write_file)

CLI_TIMEOUT = 20      # seconds per redis-cli run


def body(t):
    proxy_exe, chash, tmp = t.proxy, t.chash, t.tmp
    redis_exe, cli_exe = t.programs["redis-server"], t.programs["redis-cli"]
    backends = start_redises(redis_exe, tmp, 3)
    by_addr = {b.text: b for b in backends}
    port = free_ports(1)[0]
    config = write_file(os.path.join(tmp, "proxy.yml"), pool_yaml(
        "alpha", port, [(b.text, 1, n) for b, n in zip(backends, ("red", "green", "blue"))],
        hash="fnv1a_64", distribution="ketama", timeout=2000, server_connections=1))
    proxy = Proxy(proxy_exe, tmp, config, [("127.0.0.1", port)]).start()
    paddr = ("127.0.0.1", port)

    def cli(*args, stdin=None, extra=()):
        """redis-cli through the proxy, typed output (--no-raw); stdout as text."""
        try:
            r = subprocess.run([cli_exe, "-h", "127.0.0.1", "-p", str(port), "--no-raw",
                                *extra, *args],
                               input=stdin, capture_output=True, timeout=CLI_TIMEOUT)
        except subprocess.TimeoutExpired:
            soft_fail("redis-cli %s: no answer within %ds" % (" ".join(args)[:80], CLI_TIMEOUT))
        out = r.stdout.decode("utf-8", "replace")
        if r.returncode != 0:
            soft_fail("redis-cli %s exited %d: %s %s" % (" ".join(args)[:80], r.returncode, out,
                                                    r.stderr.decode("utf-8", "replace")))
        # Array indices are right-aligned (" 1)" above "10)"): compare lines without it.
        return "\n".join(line.strip() for line in out.rstrip("\n").split("\n"))

    def expect(args, want):
        got = cli(*args)
        if got != want:
            soft_fail("redis-cli %s: expected %r, got %r" % (" ".join(args), want, got))

    # Keys and where chash says they live; every check below spans all 3 backends.
    names = [b"user:%d" % i for i in range(400)]
    owner = chash_lookup(chash, config, "alpha", names)
    if set(owner.values()) != set(by_addr):
        fail("chash lookup placed 400 keys on %s only" % sorted(set(owner.values())))
    per = {a: [k for k in names if owner[k] == a] for a in by_addr}
    spread = [per[a][i] for i in range(12) for a in sorted(per)]    # 36 keys, 12 per backend

    def owned_by(key):
        if key not in owner:
            owner.update(chash_lookup(chash, config, "alpha", [key]))
        return by_addr[owner[key]]

    def check_stored(key, want_type=b"string"):
        """key is on its owner (of type want_type) and on no other backend."""
        o = owned_by(key)
        t = o.call("TYPE", key)
        if t != want_type:
            soft_fail("key %r: TYPE on its owner %s (chash lookup) is %r, expected %r" % (
                key, o.text, t, want_type))
        for b in backends:
            if b is not o and b.call("EXISTS", key) != 0:
                soft_fail("key %r: also on %s, not its owner %s" % (key, b.text, o.text))

    # --- strings, counters, expiry ------------------------------------------------------------
    for i, k in enumerate(spread):
        expect(["SET", k.decode(), "v%d" % i], "OK")
    for i, k in enumerate(spread):
        expect(["GET", k.decode()], '"v%d"' % i)
        if owned_by(k).call("GET", k) != b"v%d" % i:
            soft_fail("key %r: not on the backend chash lookup names (%s)" % (k, owner[k]))
        check_stored(k)
    k0, k1 = spread[0], spread[1]
    expect(["EXISTS", k0.decode()], "(integer) 1")
    expect(["DEL", k0.decode()], "(integer) 1")
    expect(["GET", k0.decode()], "(nil)")
    expect(["EXISTS", k0.decode()], "(integer) 0")
    if owned_by(k0).call("EXISTS", k0) != 0:
        soft_fail("DEL through the proxy left %r on %s" % (k0, owner[k0]))
    for want in (1, 2, 3):
        expect(["INCR", "counter:%s" % k1.decode()], "(integer) %d" % want)
    check_stored(b"counter:" + k1)
    expect(["EXPIRE", k1.decode(), "100"], "(integer) 1")
    ttl = cli("TTL", k1.decode())
    if not (ttl.startswith("(integer) ") and 90 <= int(ttl.split()[1]) <= 100):
        soft_fail("TTL after EXPIRE 100: %r" % ttl)
    if not 90 <= owned_by(k1).call("TTL", k1) <= 100:
        soft_fail("EXPIRE through the proxy did not reach the owner of %r" % k1)

    # --- hashes, lists, sets, sorted sets (one key per backend for each type) -------------------
    for a in sorted(per):
        h, lst, s, z = (per[a][20], per[a][21], per[a][22], per[a][23])
        expect(["HSET", h.decode(), "field", "value"], "(integer) 1")
        expect(["HGET", h.decode(), "field"], '"value"')
        expect(["HGET", h.decode(), "nofield"], "(nil)")
        check_stored(h, b"hash")
        expect(["LPUSH", lst.decode(), "a", "b", "c"], "(integer) 3")
        expect(["LRANGE", lst.decode(), "0", "-1"], '1) "c"\n2) "b"\n3) "a"')
        check_stored(lst, b"list")
        expect(["SADD", s.decode(), "x", "y"], "(integer) 2")
        got = cli("SMEMBERS", s.decode()).split("\n")
        if sorted(g.split(") ", 1)[-1] for g in got) != ['"x"', '"y"']:
            soft_fail("SMEMBERS: %r" % got)
        check_stored(s, b"set")
        expect(["ZADD", z.decode(), "1", "one", "2", "two"], "(integer) 2")
        expect(["ZRANGE", z.decode(), "0", "-1", "WITHSCORES"],
               '1) "one"\n2) "1"\n3) "two"\n4) "2"')
        check_stored(z, b"zset")
    # A wrong-type error from the backend is relayed, not turned into a proxy error.
    wt = cli("INCR", per[sorted(per)[0]][20].decode())
    if not wt.startswith("(error) WRONGTYPE"):
        soft_fail("INCR on a hash: expected the backend's WRONGTYPE error, got %r" % wt)

    # --- multi-key commands across the 3 backends ----------------------------------------------
    mkeys = [per[a][i] for i in range(30, 34) for a in sorted(per)]     # 12 keys, interleaved
    mset = []
    for i, k in enumerate(mkeys):
        mset += [k.decode(), "m%d" % i]
    expect(["MSET"] + mset, "OK")
    for k in mkeys:
        check_stored(k)
    missing = "missing:{nothing-here}"
    query = [k.decode() for k in mkeys[:6]] + [missing] + [k.decode() for k in mkeys[6:]]
    want = "\n".join("%d) %s" % (i + 1, '"m%d"' % (i if i < 6 else i - 1) if i != 6 else "(nil)")
                     for i in range(13))
    expect(["MGET"] + query, want)
    with Resp(paddr) as c:
        r = c.call("MGET", *([k for k in reversed(mkeys)] + [mkeys[0]]))
        exp = [b"m%d" % i for i in reversed(range(12))] + [b"m0"]
        if r != exp:
            soft_fail("MGET in reverse order with a repeated key: %r, expected %r" % (r, exp))
    expect(["EXISTS", mkeys[0].decode(), mkeys[1].decode(), missing, mkeys[2].decode(),
            mkeys[0].decode()], "(integer) 4")
    expect(["TOUCH", mkeys[3].decode(), mkeys[4].decode(), mkeys[5].decode(), missing],
           "(integer) 3")
    expect(["DEL", mkeys[0].decode(), mkeys[1].decode(), mkeys[2].decode(), missing],
           "(integer) 3")
    expect(["UNLINK", mkeys[3].decode(), mkeys[4].decode(), missing, mkeys[5].decode()],
           "(integer) 3")
    for k in mkeys[:6]:
        if owned_by(k).call("EXISTS", k) != 0:
            soft_fail("DEL/UNLINK across nodes left %r on %s" % (k, owner[k]))
    for k in mkeys[6:]:
        check_stored(k)

    # --- pipelines ---------------------------------------------------------------------------
    npipe = 3000
    blob = b"".join(encode("SET", "pipe:%d" % i, "p%d" % i) for i in range(npipe))
    out = cli(extra=("--pipe",), stdin=blob)
    if "errors: 0, replies: %d" % npipe not in out:
        soft_fail("redis-cli --pipe with %d SETs: %r" % (npipe, out[-300:]))
    pk = [b"pipe:%d" % i for i in range(npipe)]
    pown = chash_lookup(chash, config, "alpha", pk)
    held = {a: set(by_addr[a].keys()) for a in by_addr}
    for k in pk:
        if k not in held[pown[k]]:
            soft_fail("pipelined key %r not on %s (chash lookup)" % (k, pown[k]))
    if sum(len([k for k in held[a] if k.startswith(b"pipe:")]) for a in held) != npipe:
        soft_fail("pipelined keys stored more than once")
    with Resp(paddr, timeout=30) as c:
        cmds, want = [], []
        for i in range(500):
            k = b"pipe:%d" % (i * 7 % npipe)
            cmds += [("GET", k), ("SET", k, b"q%d" % i), ("GET", k), ("INCR", b"pc:%d" % (i % 5))]
            want += [None, b"OK", b"q%d" % i, i // 5 + 1]
        got = c.pipeline(cmds)
        for j, (g, w) in enumerate(zip(got, want)):
            if w is None:
                continue
            if g != w:
                soft_fail("pipeline of %d requests in one write: reply %d (%r) is %r, expected %r" % (
                    len(cmds), j, cmds[j], g, w))
        # Two MGETs spanning every backend, pipelined with single-key commands between them.
        got = c.pipeline([("MGET",) + tuple(mkeys[6:]), ("PING",), ("MGET", mkeys[11], mkeys[6]),
                          ("ECHO", "e")])
        if got != [[b"m%d" % i for i in range(6, 12)], b"PONG", [b"m11", b"m6"], b"e"]:
            soft_fail("pipelined MGETs out of order: %r" % got)

    # --- connection-level commands -------------------------------------------------------------
    expect(["PING"], "PONG")
    expect(["PING", "hello"], '"hello"')
    expect(["ECHO", "hi there"], '"hi there"')
    expect(["SELECT", "0"], "OK")
    with Resp(paddr) as c:
        if c.call("SELECT", "0") != b"OK":
            soft_fail("SELECT 0 on a raw socket")
        c.send(b"PING\r\n")
        if c.read() != b"PONG":
            soft_fail("inline PING")
        c.send(b"SET inline:key inline-value\r\nGET inline:key\r\n")
        r = [c.read(), c.read()]
        if r != [b"OK", b"inline-value"]:
            soft_fail("inline SET/GET: %r" % r)
        ik = b"inline:key"
        iown = chash_lookup(chash, config, "alpha", [ik])[ik]
        if by_addr[iown].call("GET", ik) != b"inline-value":
            soft_fail("inline SET not on its owner %s (chash lookup)" % iown)
        r = c.call("COMMAND")
        if not isinstance(r, list):
            soft_fail("COMMAND answered %r, expected an array" % (r,))
        if c.call("PING") != b"PONG":
            soft_fail("connection unusable after COMMAND")
        r = c.call("QUIT")
        if r != b"OK":
            soft_fail("QUIT answered %r" % (r,))
        try:
            extra = c.sock.recv(100)
        except OSError:
            extra = b""
        if extra:
            soft_fail("connection not closed after QUIT (got %r)" % extra)
    expect(["QUIT"], "OK")

    # --- binary keys and a large value ----------------------------------------------------------
    with Resp(paddr, timeout=30) as c:
        big = bytes(range(256)) * 4096                  # 1 MiB, every byte value
        bk = b"bin\r\nkey\x00\xff"
        if c.call("SET", bk, big) != b"OK" or c.call("GET", bk) != big:
            soft_fail("1 MiB binary value under a binary key did not round-trip")
        stored = [b for b in backends if b.call("EXISTS", bk) == 1]
        if len(stored) != 1:
            soft_fail("binary key stored on %d backends" % len(stored))

    # --- unsupported commands: an error naming the command, the connection stays usable --------
    before = {b.text: b.call("DBSIZE") for b in backends}
    refused = [("KEYS", "*"), ("BLPOP", "l", "0"), ("SCRIPT", "KILL"),
               ("CONFIG", "GET", "maxmemory"),
               ("FLUSHALL",), ("FLUSHDB",), ("SHUTDOWN",), ("DEBUG", "SLEEP", "0"),
               ("FOOBAR", "x"), ("RENAME", "a", "b")]
    with Resp(paddr) as c:
        for cmd in refused:
            try:
                r = c.call(*cmd)
            except (OSError, Closed) as e:
                soft_fail("%s: connection lost (%s); an -ERR was expected" % (cmd[0], e))
            if not isinstance(r, RespError) or cmd[0].lower() not in r.args[0].lower():
                soft_fail("%s: expected an -ERR naming the command, got %r" % (" ".join(cmd), r))
            if c.call("GET", mkeys[6]) != b"m6":
                soft_fail("connection unusable after the refused %s" % cmd[0])
    out = cli(stdin=b"KEYS *\nGET %s\nFOOBAR 1\nPING\n" % mkeys[7])
    lines = out.split("\n")
    if (len(lines) != 4 or not lines[0].startswith("(error)") or "keys" not in lines[0].lower()
            or lines[1] != '"m7"' or not lines[2].startswith("(error)")
            or "foobar" not in lines[2].lower() or lines[3] != "PONG"):
        soft_fail("redis-cli session with refused commands: %r" % out)
    after = {b.text: b.call("DBSIZE") for b in backends}
    if after != before or any(v == 0 for v in after.values()):
        soft_fail("a refused command reached a backend: DBSIZE %s before, %s after" % (before, after))

    if not proxy.alive():
        soft_fail("chash-proxy exited during the test")
    proxy.stop()
    return "%d backends, every command checked on the backend chash lookup names" % len(backends)


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "redis-cli"))
