#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_resp3_clients: the Redis clients people install today, with their defaults, through
chash-proxy, all at once against one proxy in front of 3 redis-servers.

  - node-redis 6 (npm redis@6.3.1: RESP3 by default), ioredis 6 with protocol 3 and with 2,
    valkey-glide 2.5 (its native core): tests/proxy/clients/resp3_clients.js runs each client's
    work (strings, a hash as the client's map, a sorted set with its scores as numbers, MGET
    with holes over the pool, a pipeline, a transaction, pub/sub, the connection's name, the
    protocol CLIENT LIST shows, a wrong-type error) and checks every result;
  - redis-cli -3 (Debian's redis-tools): its RESP3 rendering of a map, a double, a null, a set,
    and HELLO's proto;
  - Debian's python3-redis (RESP2) doing the same work beside them;
  - a RESP3 connection that subscribes and keeps using that connection for GET and PING while
    a message arrives as a push.
The npm clients are in scripts/bootstrap's prefix (/usr/local/lib/chash-oracles).

Usage: test_resp3_clients.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server, redis-cli, node, python3-redis or the npm clients
missing and CI unset).
"""
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Push, Resp, fail, free_ports, pool_yaml, run_test,  # noqa
                          skip, start_redises, write_file)

HERE = os.path.dirname(os.path.abspath(__file__))
NPM_MODULES = "/usr/local/lib/chash-oracles/node_modules"
NPM_CLIENTS = ("redis", "ioredis", "@valkey/valkey-glide")
NODE_CLIENTS = ("node-redis", "ioredis3", "ioredis2", "glide")
BOUND = 90  # seconds for everything a client does


def redis_cli_checks(cli, port, prefix):
    """redis-cli -3's own rendering of RESP3 replies through the proxy: [(what, error)]."""
    def run(*args):
        r = subprocess.run([cli, "-3", "--no-raw", "-h", "127.0.0.1", "-p", str(port)] +
                           list(args), capture_output=True, timeout=20)
        return r.stdout.decode("utf-8", "replace").strip()

    k = lambda name: "{%s}%s" % (prefix, name)  # noqa: E731
    errors = []

    def expect(what, got, want):
        if got != want:
            errors.append("redis-cli -3 %s: %r, expected %r" % (what, got, want))

    expect("HSET", run("HSET", k("h"), "f1", "v1", "f2", "v2"), "(integer) 2")
    expect("HGETALL (a map)", run("HGETALL", k("h")), '1# "f1" => "v1"\n2# "f2" => "v2"')
    expect("ZADD", run("ZADD", k("z"), "1.5", "a"), "(integer) 1")
    expect("ZSCORE (a double)", run("ZSCORE", k("z"), "a"), "(double) 1.5")
    expect("GET (a null)", run("GET", k("none")), "(nil)")
    expect("SADD", run("SADD", k("s"), "only"), "(integer) 1")
    expect("SMEMBERS (a set)", run("SMEMBERS", k("s")), '1~ "only"')
    expect("HELLO 3's proto", [line for line in run("HELLO", "3").splitlines()
                               if '"proto"' in line], ['3# "proto" => (integer) 3'])
    return errors


def python_redis_work(port, prefix):
    """Debian's python3-redis (RESP2) doing the clients' work: [error] or []."""
    import redis
    k = lambda name: "{%s}%s" % (prefix, name)  # noqa: E731
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=20, client_name=prefix + "-py")
    try:
        assert r.set(k("s"), "hello") is True
        assert r.get(k("s")) == b"hello"
        r.hset(k("h"), mapping={"f1": "v1", "f2": "v2"})
        assert r.hgetall(k("h")) == {b"f1": b"v1", b"f2": b"v2"}
        r.zadd(k("z"), {"a": 1.5, "b": 2.25})
        assert r.zrange(k("z"), 0, -1, withscores=True) == [(b"a", 1.5), (b"b", 2.25)]
        assert r.zscore(k("z"), "b") == 2.25
        keys = ["%s:m%d" % (prefix, i) for i in range(6)]
        r.mset({keys[i]: "v%d" % i for i in range(0, 6, 2)})
        assert r.mget(keys) == [b"v0", None, b"v2", None, b"v4", None]
        p = r.pipeline(transaction=False)
        p.set(k("p"), 1).incr(k("p")).get(k("p"))
        assert p.execute() == [True, 2, b"2"]
        t = r.pipeline(transaction=True)
        t.set(k("t"), 10).incrby(k("t"), 5).get(k("t"))
        assert t.execute() == [True, 15, b"15"]
        assert r.client_getname() == prefix + "-py"
        mine = [c for c in r.client_list() if c["name"] == prefix + "-py"]
        assert len(mine) == 1 and mine[0]["resp"] == "2", mine
        return []
    except AssertionError as e:
        return ["python3-redis: %r" % (e,)]
    finally:
        r.close()


def resp3_subscriber(port, prefix):
    """A RESP3 connection that subscribes, then keeps using the same connection for other
    commands, as RESP3 allows: its replies and the pushes interleave, each told apart by type."""
    addr = ("127.0.0.1", port)
    errors = []
    with Resp(addr, timeout=20) as c, Resp(addr, timeout=20) as pub:
        if not isinstance(c.call("HELLO", "3"), dict):
            return ["RESP3 subscriber: HELLO 3 refused"]
        chan = "{%s}ch" % prefix
        got = c.call("SUBSCRIBE", chan)
        if got != Push([b"subscribe", chan.encode(), 1]):
            errors.append("SUBSCRIBE's confirmation: %r" % (got,))
        pub.call("SET", "{%s}k" % prefix, "v")
        if c.call("GET", "{%s}k" % prefix) != b"v" or c.call("PING") != b"PONG":
            errors.append("a subscribed RESP3 connection's GET and PING")
        if pub.call("PUBLISH", chan, "hello") != 1:
            errors.append("PUBLISH reached no subscriber")
        got = c.read()
        if got != Push([b"message", chan.encode(), b"hello"]):
            errors.append("the message: %r" % (got,))
        if c.call("GET", "{%s}k" % prefix) != b"v":
            errors.append("GET after the message")
    return errors


def body(t):
    node = t.programs["node"]
    for m in NPM_CLIENTS:
        if not os.path.exists(os.path.join(NPM_MODULES, m, "package.json")):
            skip("npm client %s not in %s (scripts/bootstrap installs it)" % (m, NPM_MODULES))
    backends = start_redises(t.programs["redis-server"], t.tmp, 3)
    port = free_ports(1)[0]
    config = write_file(os.path.join(t.tmp, "proxy.yml"),
                        pool_yaml("alpha", port, [(b.text, 1, None) for b in backends],
                                  hash="md5", distribution="ketama", hash_tag='"{}"',
                                  timeout=5000))
    # Two workers: the clients land on both, and CLIENT LIST reads every worker's cards.
    proxy = Proxy(t.proxy, t.tmp, config, [("127.0.0.1", port)],
                  extra_args=["--threads", "2"]).start()

    env = dict(os.environ, NODE_PATH=NPM_MODULES)
    script = os.path.join(HERE, "clients", "resp3_clients.js")
    procs = {c: subprocess.Popen([node, script, c, "127.0.0.1", str(port), "n-" + c],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for c in NODE_CLIENTS}
    errors, lock = [], threading.Lock()

    def in_thread(fn, *args):
        def run():
            try:
                got = fn(*args)
            except Exception as e:  # a lost connection, a timeout: the client failed
                got = ["%s: %r" % (fn.__name__, e)]
            with lock:
                errors.extend(got)
        th = threading.Thread(target=run)
        th.start()
        return th

    threads = [in_thread(redis_cli_checks, t.programs["redis-cli"], port, "cli"),
               in_thread(python_redis_work, port, "py"),
               in_thread(resp3_subscriber, port, "sub")]
    lines = []
    for c, p in procs.items():
        try:
            out, err = p.communicate(timeout=BOUND)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            errors.append("%s: no result within %d s" % (c, BOUND))
        # The last line is the script's (valkey-glide's core logs its warnings to stdout).
        text = (out.decode("utf-8", "replace").strip().splitlines() or [""])[-1]
        if p.returncode != 0 or not text.startswith("ok "):
            errors.append("%s: exit %s: %s %s" % (c, p.returncode, text,
                                                  err.decode("utf-8", "replace")[-2000:]))
        else:
            lines.append(text)
    for th in threads:
        th.join(BOUND)
        if th.is_alive():
            errors.append("a client thread did not finish within %d s" % BOUND)
    proxy.stop()
    if errors:
        fail("through chash-proxy:\n  " + "\n  ".join(errors))
    return "; ".join(lines) + "; redis-cli -3, python3-redis and a RESP3 subscriber ok"


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "redis-cli", "node"), modules=("redis",))
