#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_commands: the Redis commands users hit first, through chash-proxy in front of 4 real
redis-servers, with real clients (redis-cli and python3-redis).

Proves: SCAN walks every key of the pool exactly once, with and without MATCH, COUNT and TYPE
(redis-py's scan_iter and redis-cli --scan), and a forged or garbage cursor gets an error, never a
crash; SCRIPT LOAD puts a script on every server (checked on each server directly), SCRIPT EXISTS
is the AND over the servers, SCRIPT FLUSH empties them all, EVALSHA (and EVALSHA_RO, EVAL_RO:
read-only scripts) runs on the key's server and EVAL across servers is refused; a hash-tagged MULTI/EXEC commits atomically on its server, a
transaction whose keys span servers is refused with nothing applied and EXEC answers EXECABORT,
WATCH plus a concurrent change makes EXEC answer nil, EXEC/DISCARD without MULTI and nested
MULTI answer Redis's errors, a client closing with a MULTI open leaves no backend connection in
a transaction (CLIENT LIST) and the next client's commands are not inside it; MSETNX on one
server; pub/sub across the pool: SUBSCRIBE to channels on different servers (Redis's replies with
the running count), PSUBSCRIBE, PUBLISH through another client via the proxy, only the commands
Redis allows in subscribed mode, and the pinned connections released at close; HELLO 2
accepted, HELLO 3 refused.

Usage: test_commands.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server, redis-cli or python3-redis missing and CI unset).
"""
import os
import signal
import socket
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Closed, Proxy, Resp, RespError, chash_lookup, fail,  # noqa: E402
                          free_ports, poll_until, pool_yaml, run_test, soft_fail, start_redises,
                          write_file)

try:
    import redis
except ImportError:  # a missing client is a failure in CI, a skip elsewhere
    redis = None

CLI_TIMEOUT = 20
NKEYS = 2000


def check(cond, msg):
    if not cond:
        soft_fail(msg)


def body(t):
    proxy_exe, chash, tmp = t.proxy, t.chash, t.tmp
    redis_exe, cli_exe = t.programs["redis-server"], t.programs["redis-cli"]
    backends = start_redises(redis_exe, tmp, 4)
    port = free_ports(1)[0]
    config = write_file(os.path.join(tmp, "proxy.yml"), pool_yaml(
        "alpha", port, [(b.text, 1, "s%d" % i) for i, b in enumerate(backends)],
        hash="fnv1a_64", distribution="ketama", hash_tag='"{}"', timeout=3000,
        server_connections=1))
    proxy = Proxy(proxy_exe, tmp, config, [("127.0.0.1", port)]).start()
    paddr = ("127.0.0.1", port)
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)
    by_addr = {b.text: b for b in backends}

    owners = {}

    def owner(key):
        """The address of key's server, as `chash lookup` names it."""
        if key not in owners:
            owners[key] = chash_lookup(chash, config, "alpha", [key.encode()])[key.encode()]
        return owners[key]

    def cli(*args, stdin=None):
        try:
            out = subprocess.run([cli_exe, "-h", "127.0.0.1", "-p", str(port), *args], input=stdin,
                                 capture_output=True, timeout=CLI_TIMEOUT)
        except subprocess.TimeoutExpired:
            soft_fail("redis-cli %s: no answer within %ds" % (" ".join(args)[:80], CLI_TIMEOUT))
        return out.stdout.decode("utf-8", "replace")

    scan(r, backends, cli)
    scripts(r, backends, owner)
    transactions(r, port, paddr, backends, by_addr, owner)
    out = cli(stdin=b"MULTI\nSET {cli}a 1\nINCR {cli}a\nEXEC\n").split()
    check(out == ["OK", "QUEUED", "QUEUED", "OK", "2"], "redis-cli MULTI/EXEC: %r" % out)
    pubsub(r, port, paddr, owner)
    misc(r, paddr, owner, by_addr)
    reload_(r, paddr, proxy, backends, config, port, owner)
    check(proxy.alive(), "chash-proxy exited during the test")
    proxy.stop()
    return "4 backends: SCAN, SCRIPT, EVAL, MULTI/EXEC/WATCH, pub/sub, MSETNX, HELLO"


def scan(r, backends, cli):
    """Every key exactly once, over a walk of all 4 servers, with MATCH, COUNT and TYPE."""
    pipe = r.pipeline(transaction=False)
    names = []
    for i in range(NKEYS):
        k = "scan:%d" % i
        names.append(k)
        if i % 4 == 3:
            pipe.sadd(k, "m")
        else:
            pipe.set(k, i)
    pipe.execute()
    per_server = [len(b.call("KEYS", "scan:*")) for b in backends]
    check(all(n > 0 for n in per_server), "keys not spread over the 4 servers: %s" % per_server)

    def walk(**kw):
        seen, cursor, calls = [], 0, 0
        while True:
            cursor, keys = r.scan(cursor, **kw)
            seen.extend(k.decode() for k in keys)
            calls += 1
            check(calls < 100000, "SCAN never ended")
            if cursor == 0:
                return seen, calls

    seen, calls = walk(count=100)
    check(sorted(seen) == sorted(names), "SCAN COUNT 100 saw %d keys (%d distinct) of %d"
          % (len(seen), len(set(seen)), NKEYS))
    check(calls >= 4, "SCAN took %d calls over 4 servers" % calls)
    seen, _ = walk(match="scan:1*")
    want = sorted(k for k in names if k.startswith("scan:1"))
    check(sorted(seen) == want, "SCAN MATCH saw %d keys, %d expected" % (len(seen), len(want)))
    seen, _ = walk(match="scan:*", count=7, _type="set")
    want = sorted(k for i, k in enumerate(names) if i % 4 == 3)
    check(sorted(seen) == want, "SCAN TYPE set saw %d keys, %d expected" % (len(seen), len(want)))
    got = sorted(k.decode() for k in r.scan_iter(match="scan:*", count=500))
    check(got == sorted(names), "scan_iter saw %d keys" % len(got))
    out = cli("--scan", "--pattern", "scan:*").split()
    check(sorted(out) == sorted(names), "redis-cli --scan saw %d keys" % len(out))
    # Forged and garbage cursors: an error each, the connection kept.
    for bad in ("abc", "-1", "99999999999999999999999", str(1 << 63), str((4 << 52) | 1),
                str((1 << 52) | (1 << 40) * 4095 | 5)):
        try:
            r.execute_command("SCAN", bad)
            soft_fail("SCAN %s was answered" % bad)
        except redis.ResponseError as e:
            check("cursor" in str(e), "SCAN %s: %s" % (bad, e))
    check(r.ping(), "connection lost after forged cursors")
    r.delete(*names)


def scripts(r, backends, owner):
    """SCRIPT LOAD on every server, EXISTS as the AND, FLUSH everywhere, EVALSHA by key."""
    body = "return redis.call('GET', KEYS[1])"
    sha = r.script_load(body)
    for b in backends:
        check(b.call("SCRIPT", "EXISTS", sha) == [1], "server %s lacks the script" % b.text)
    check(r.script_exists(sha, "0" * 40) == [True, False], "SCRIPT EXISTS merge")
    backends[2].call("SCRIPT", "FLUSH")
    check(r.script_exists(sha) == [False], "SCRIPT EXISTS is not the AND over the servers")
    r.script_load(body)
    for i in range(20):
        k = "ev:%d" % i
        r.set(k, "v%d" % i)
        check(r.evalsha(sha, 1, k) == b"v%d" % i, "EVALSHA on %s" % k)
        check(r.execute_command("EVALSHA_RO", sha, 1, k) == b"v%d" % i, "EVALSHA_RO on %s" % k)
    check(r.execute_command("EVAL_RO", body, 1, "ev:3") == b"v3", "EVAL_RO")
    try:  # a read-only script that writes: Redis's own refusal, through the proxy
        r.execute_command("EVAL_RO", "return redis.call('SET', KEYS[1], 'x')", 1, "ev:3")
        soft_fail("EVAL_RO wrote")
    except redis.ResponseError as e:
        check("read-only" in str(e) and r.get("ev:3") == b"v3", "EVAL_RO that writes: %s" % e)
    check(r.eval("return redis.call('SET', KEYS[1], ARGV[1])", 2, "{t}a", "{t}b", "x") == b"OK",
          "EVAL with hash-tagged keys")
    # Two keys on different servers: refused.
    a = "ev:0"
    b = next(k for k in ("ev:%d" % i for i in range(1, 20)) if owner(k) != owner(a))
    try:
        r.eval("return 1", 2, a, b)
        soft_fail("EVAL across servers was answered")
    except redis.ResponseError as e:
        check("CROSSSLOT" in str(e), "EVAL across servers: %s" % e)
    r.script_flush()
    for b in backends:
        check(b.call("SCRIPT", "EXISTS", sha) == [0], "SCRIPT FLUSH missed %s" % b.text)
    try:
        r.execute_command("SCRIPT", "KILL")
        soft_fail("SCRIPT KILL answered")
    except redis.ResponseError as e:
        check("script kill" in str(e).lower(), "SCRIPT KILL: %s" % e)


def two_servers(owner, prefix):
    """Two keys with different owners."""
    a = prefix + "0"
    for i in range(1, 200):
        b = "%s%d" % (prefix, i)
        if owner(b) != owner(a):
            return a, b
    fail("no two keys on different servers")


def in_multi(backends):
    """The backend connections in a transaction (CLIENT LIST flags containing x)."""
    stuck = []
    for b in backends:
        for line in b.call("CLIENT", "LIST").decode().splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if "x" in fields.get("flags", ""):
                stuck.append((b.text, line))
    return stuck


def transactions(r, port, paddr, backends, by_addr, owner):
    """MULTI/EXEC on one server, refused across servers, WATCH, errors, a MULTI left open."""
    # A hash-tagged transaction commits on its server, atomically.
    pipe = r.pipeline(transaction=True)
    pipe.set("{acct:1}:a", 10).set("{acct:1}:b", 20).incrby("{acct:1}:a", 5).mget(
        "{acct:1}:a", "{acct:1}:b")
    res = pipe.execute()
    check(res == [True, True, 15, [b"15", b"20"]], "hash-tagged MULTI/EXEC: %r" % res)
    home = by_addr[owner("{acct:1}:a")]
    check(home.call("GET", "{acct:1}:a") == b"15", "transaction not applied on its server")
    # Keys on two servers: refused, nothing applied, EXEC answers EXECABORT.
    a, b = two_servers(owner, "tx:")
    pipe = r.pipeline(transaction=True)
    pipe.set(a, "1").set(b, "2")
    try:
        pipe.execute()
        soft_fail("a transaction across servers was executed")
    except redis.ResponseError as e:
        check("CROSSSLOT" in str(e) or "EXECABORT" in str(e), "cross-server transaction: %s" % e)
    check(r.exists(a, b) == 0, "a refused transaction left keys: %s" % r.exists(a, b))
    # The same by hand on one connection: the Redis errors and replies one by one.
    with Resp(paddr) as c:
        check(c.call("EXEC") == RespError("ERR EXEC without MULTI"), "EXEC without MULTI")
        check(c.call("DISCARD") == RespError("ERR DISCARD without MULTI"),
              "DISCARD without MULTI")
        check(c.call("MULTI") == b"OK", "MULTI")
        check(c.call("MULTI") == RespError("ERR MULTI calls can not be nested"), "nested MULTI")
        check(c.call("EXEC") == [], "EXEC of an empty transaction")
        check(c.call("MULTI") == b"OK", "MULTI")
        check(c.call("SET", a, "x") == b"QUEUED", "SET queued")
        got = c.call("SET", b, "y")
        check(isinstance(got, RespError) and "CROSSSLOT" in got.args[0], "CROSSSLOT: %r" % got)
        got = c.call("EXEC")
        check(isinstance(got, RespError) and "EXECABORT" in got.args[0], "EXECABORT: %r" % got)
        check(c.call("EXISTS", a) == 0, "an aborted transaction applied its SET")
        check(c.call("MULTI") == b"OK" and c.call("SET", a, "x") == b"QUEUED", "MULTI, SET")
        check(isinstance(c.call("FOOBAR"), RespError), "an unknown command inside MULTI")
        got = c.call("EXEC")
        check(isinstance(got, RespError) and "EXECABORT" in got.args[0],
              "EXEC after an unknown command: %r" % got)
        check(c.call("EXISTS", a) == 0, "a transaction with an unknown command applied its SET")
        check(c.call("MULTI") == b"OK" and c.call("INCR", "{n}c") == b"QUEUED" and
              c.call("DISCARD") == b"OK", "DISCARD")
        check(c.call("GET", "{n}c") is None, "a discarded INCR applied")
    # WATCH, and a change by another client: EXEC answers nil.
    r.set("{w}k", "1")
    p = r.pipeline(transaction=True)
    p.watch("{w}k")
    check(p.get("{w}k") == b"1", "GET after WATCH")
    r.set("{w}k", "2")  # another connection
    p.multi()
    p.set("{w}k", "3")
    try:
        p.execute()
        soft_fail("EXEC ran although a WATCHed key changed")
    except redis.WatchError:
        pass
    check(r.get("{w}k") == b"2", "the WATCHed key was overwritten")
    # And without a concurrent change it commits.
    with r.pipeline(transaction=True) as p:
        p.watch("{w}k")
        p.multi()
        p.set("{w}k", "4")
        check(p.execute() == [True], "WATCH + EXEC without a change")
    check(r.get("{w}k") == b"4", "WATCH + EXEC not applied")
    # A client closing with a MULTI open: no backend connection stays in it, and the next
    # client's commands are not inside it.
    s = socket.create_connection(paddr)
    s.sendall(b"MULTI\r\nSET {open}k leaked\r\n")
    buf = b""
    while buf.count(b"\r\n") < 2:
        buf += s.recv(4096)
    check(buf == b"+OK\r\n+QUEUED\r\n", "MULTI then SET: %r" % buf)
    check(in_multi(backends), "no backend connection in MULTI while the client has one open")
    s.close()
    poll_until(lambda: not in_multi(backends), 5)
    check(not in_multi(backends), "a backend connection is still in MULTI: %s" % in_multi(backends))
    check(r.set("{open}k", "mine") and r.get("{open}k") == b"mine",
          "the next client's SET was inside another's transaction")
    try:
        r.execute_command("EXEC")
        soft_fail("EXEC without MULTI answered")
    except redis.ResponseError as e:
        check("without MULTI" in str(e), "EXEC without MULTI: %s" % e)


def pubsub(r, port, paddr, owner):
    """Channels on different servers, a pattern, PUBLISH from another client, subscribed mode."""
    chans = []
    for i in range(40):  # names that spread (fnv1a_64 keeps a common prefix on one server)
        ch = "%x:news" % (i * 2654435761 % 2 ** 32)
        if owner(ch) not in [owner(c) for c in chans]:
            chans.append(ch)
    check(len(chans) >= 3, "channels on %d servers only" % len(chans))
    with Resp(paddr) as c:
        c.send(b"*%d\r\n$9\r\nSUBSCRIBE\r\n" % (len(chans) + 1) +
               b"".join(b"$%d\r\n%s\r\n" % (len(x), x.encode()) for x in chans))
        for i, ch in enumerate(chans):
            got = c.read()
            check(got == [b"subscribe", ch.encode(), i + 1], "SUBSCRIBE reply %d: %r" % (i, got))
        got = c.call("PSUBSCRIBE", "alert:*")
        check(got == [b"psubscribe", b"alert:*", len(chans) + 1], "PSUBSCRIBE: %r" % got)
        got = c.call("GET", "x")
        check(isinstance(got, RespError) and "only" in got.args[0],
              "GET in subscribed mode: %r" % got)
        check(c.call("PING") == [b"pong", b""], "PING in subscribed mode")
        for ch in chans:
            check(r.publish(ch, "hello " + ch) == 1, "PUBLISH %s reached no subscriber" % ch)
        for ch in chans:
            got = c.read()
            check(got == [b"message", ch.encode(), b"hello " + ch.encode()],
                  "message on %s: %r" % (ch, got))
        for i in range(8):  # patterns: every server, whatever the channel's owner
            check(r.publish("alert:%d" % i, "a%d" % i) == 1, "PUBLISH alert:%d" % i)
            got = c.read()
            check(got == [b"pmessage", b"alert:*", b"alert:%d" % i, b"a%d" % i],
                  "pmessage %d: %r" % (i, got))
        got = c.call("UNSUBSCRIBE", chans[0])
        check(got == [b"unsubscribe", chans[0].encode(), len(chans)], "UNSUBSCRIBE: %r" % got)
        check(r.publish(chans[0], "gone") == 0, "PUBLISH after UNSUBSCRIBE delivered")
        c.send(b"*1\r\n$11\r\nUNSUBSCRIBE\r\n")
        counts = [c.read() for _ in chans[1:]]
        check(sorted(x[2] for x in counts) == list(range(1, len(chans))),
              "UNSUBSCRIBE all: %r" % counts)
        got = c.call("PUNSUBSCRIBE")
        check(got == [b"punsubscribe", b"alert:*", 0], "PUNSUBSCRIBE all: %r" % got)
        check(c.call("PING") == b"PONG", "PING after leaving subscribed mode")
        check(c.call("SET", "after", "sub") == b"OK", "SET after leaving subscribed mode")
    # redis-py's PubSub with a listener thread, across the pool.
    ps = r.pubsub()
    ps.subscribe(*chans)
    ps.psubscribe("p:*")
    for _ in range(len(chans) + 1):
        m = ps.get_message(timeout=5)
        check(m is not None and m["type"] in ("subscribe", "psubscribe"), "confirmation %r" % m)
    got = []
    done = threading.Event()

    def listen():
        for m in ps.listen():
            if m["type"] in ("message", "pmessage"):
                got.append(m["data"])
                if len(got) == len(chans) + 2:
                    done.set()
                    return

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    publisher = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)
    for ch in chans:
        publisher.publish(ch, ch)
    publisher.publish("p:1", "p1")
    publisher.publish("p:2", "p2")
    check(done.wait(10), "redis-py listener got %d of %d messages" % (len(got), len(chans) + 2))
    check(sorted(got) == sorted([c.encode() for c in chans] + [b"p1", b"p2"]),
          "listener messages: %r" % got)
    ps.close()
    # Closed: the pinned connections go; publishing reaches nobody.
    poll_until(lambda: publisher.publish(chans[0], "x") == 0, 5)
    check(publisher.publish(chans[0], "x") == 0, "a closed subscriber still subscribed")


def misc(r, paddr, owner, by_addr):
    """MSETNX on one server, HELLO 2, 3 and 4."""
    check(r.msetnx({"{m}a": 1, "{m}b": 2}) is True, "MSETNX on one server")
    check(r.msetnx({"{m}a": 1, "{m}c": 2}) is False, "MSETNX with an existing key")
    a, b = two_servers(owner, "mx:")
    try:
        r.msetnx({a: 1, b: 2})
        soft_fail("MSETNX across servers answered")
    except redis.ResponseError as e:
        check("CROSSSLOT" in str(e), "MSETNX across servers: %s" % e)
    check(r.exists(a, b) == 0, "a refused MSETNX set keys")
    with Resp(paddr) as c:
        got = c.call("HELLO", "2")
        check(isinstance(got, list) and b"proto" in got, "HELLO 2: %r" % got)
        got = c.call("HELLO", "4")
        check(isinstance(got, RespError) and "NOPROTO" in got.args[0], "HELLO 4: %r" % got)
        got = c.call("HELLO", "3")
        check(isinstance(got, dict) and got.get(b"proto") == 3, "HELLO 3: %r" % got)


def reload_(r, paddr, proxy, backends, config, port, owner):
    """A reload that removes a server: a cursor from before is refused, a walk from 0 covers the
    servers left; a MULTI open on the removed server is aborted, its subscriber closed."""
    gone = backends[3]
    names = ["%x:rl" % (i * 2654435761 % 2 ** 32) for i in range(400)]
    r.mset({k: "v" for k in names})
    cursor, _ = r.scan(0, count=10)
    check(cursor != 0, "a 400-key walk ended after one call")
    key = next(k for k in names if owner(k) == gone.text)
    ch = next("%x:ch" % (i * 2654435761 % 2 ** 32) for i in range(400)
              if owner("%x:ch" % (i * 2654435761 % 2 ** 32)) == gone.text)
    tx = Resp(paddr)
    check(tx.call("MULTI") == b"OK" and tx.call("SET", key, "tx") == b"QUEUED", "MULTI before reload")
    sub = Resp(paddr)
    check(sub.call("SUBSCRIBE", ch) == [b"subscribe", ch.encode(), 1], "SUBSCRIBE before reload")
    write_file(config, pool_yaml(
        "alpha", port, [(b.text, 1, "s%d" % i) for i, b in enumerate(backends[:3])],
        hash="fnv1a_64", distribution="ketama", hash_tag='"{}"', timeout=3000,
        server_connections=1))
    proxy.proc.send_signal(signal.SIGHUP)
    def refused():
        try:
            r.scan(cursor, count=10)
        except redis.ResponseError as e:
            return e
        return None
    e = poll_until(refused, 10)
    check(e is not None, "a cursor from before the reload is still accepted")
    check(e is None or "invalid cursor" in str(e), "an old cursor after the reload: %s" % e)
    left = set()
    for b in backends[:3]:
        left.update(k.decode() for k in b.call("KEYS", "*:rl"))
    got = [k.decode() for k in r.scan_iter(match="*:rl", count=50)]
    check(sorted(got) == sorted(left), "a walk after the reload saw %d keys of %d on the servers "
          "left" % (len(got), len(left)))
    got = tx.call("EXEC")
    check(isinstance(got, RespError) and "EXECABORT" in got.args[0],
          "EXEC of a transaction on a removed server: %r" % got)
    check(gone.call("GET", key) == b"v", "a transaction on a removed server was applied")
    tx.close()
    sub.sock.settimeout(5)
    try:
        soft_fail("the subscriber of a removed server got %r; closed expected" % (sub.read(),))
    except Closed:
        pass  # closed, as documented: it subscribes again when it reconnects
    except socket.timeout:
        soft_fail("the subscriber of a removed server was not closed")
    except OSError:
        pass  # reset: closed too
    sub.close()
    check(r.ping(), "the proxy does not answer after the reload")


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "redis-cli"), modules=("redis",))
