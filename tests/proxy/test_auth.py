#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_auth: client passwords (chash's client_auth) and backend passwords (redis_auth).

2 real redis-servers started with --requirepass BACKEND_PW, and one chash-proxy serving two
pools on them, both with redis_auth: BACKEND_PW:
  - "guarded" also sets client_auth: CLIENT_PW. Before AUTH, GET answers -NOAUTH, PING is
    answered and QUIT closes; AUTH with a wrong password, and with the backends' password,
    answers Redis 7's -WRONGPASS and leaves the client unauthenticated; AUTH CLIENT_PW then
    SET/GET/MGET across both backends work (so the proxy AUTHs to the backends with redis_auth:
    they refuse everything else, as redis-cli without a password on a backend shows). The real
    redis-cli through the proxy: without -a NOAUTH, with -a CLIENT_PW served. In RESP3: HELLO 3
    before AUTH answers Redis's NOAUTH, HELLO 3 AUTH with a wrong password or another user than
    default WRONGPASS, with default and CLIENT_PW it switches, and MGET and HGETALL (a map) are
    served over the backends' RESP3 connections (AUTH redis_auth, then HELLO 3).
  - "legacy" has redis_auth only: twemproxy's behaviour, clients AUTH with redis_auth (PING
    too answers -NOAUTH before it).

Usage: test_auth.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server or redis-cli missing and CI unset).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Closed, Proxy, Resp, RespError, fail, free_ports, pool_yaml,  # noqa: E402
                          run_test, soft_fail, start_redises, write_file)

BACKEND_PW = "backend-pw-7"
CLIENT_PW = "client pw #1"     # a space and a '#': quoted in the YAML
CLI_TIMEOUT = 20
NOAUTH = RespError("NOAUTH Authentication required.")
INVALID = RespError("WRONGPASS invalid username-password pair or user is disabled.")


def expect(what, got, want):
    if got != want:
        soft_fail("%s: expected %r, got %r" % (what, want, got))


def body(t):
    proxy_exe, tmp = t.proxy, t.tmp
    redis_exe, cli_exe = t.programs["redis-server"], t.programs["redis-cli"]
    backends = start_redises(redis_exe, tmp, 2, password=BACKEND_PW)
    guarded_port, legacy_port = free_ports(2)
    servers = [(b.text, 1, None) for b in backends]
    config = write_file(os.path.join(tmp, "proxy.yml"),
                        pool_yaml("guarded", guarded_port, servers, redis_auth=BACKEND_PW,
                                  client_auth='"%s"' % CLIENT_PW, timeout=2000, hash="md5") +
                        pool_yaml("legacy", legacy_port, servers, redis_auth=BACKEND_PW,
                                  timeout=2000, hash="md5"))
    guarded, legacy = ("127.0.0.1", guarded_port), ("127.0.0.1", legacy_port)
    proxy = Proxy(proxy_exe, tmp, config, [guarded, legacy]).start()

    def cli(port, *args, password=None):
        argv = [cli_exe, "-h", "127.0.0.1", "-p", str(port), "--no-raw"]
        if password is not None:
            argv += ["-a", password, "--no-auth-warning"]
        try:
            r = subprocess.run(argv + list(args), capture_output=True, timeout=CLI_TIMEOUT)
        except subprocess.TimeoutExpired:
            fail("redis-cli -p %d %s: no answer within %ds" % (port, " ".join(args), CLI_TIMEOUT))
        return r.stdout.decode("utf-8", "replace").strip()

    # The backends really require their password: so whatever the proxy gets from them below,
    # it got after sending redis_auth.
    for b in backends:
        expect("redis-cli GET on backend %s without a password" % b.text,
               cli(b.port, "GET", "x"), "(error) NOAUTH Authentication required.")
        expect("redis-cli PING on backend %s with its password" % b.text,
               cli(b.port, "PING", password=BACKEND_PW), "PONG")

    # --- client_auth ---------------------------------------------------------------------------
    # md5 spreads these keys over both backends (nutcracker's fnv1a_64, the default, hashes such
    # close names close together: they may all land on one).
    keys = ["auth:%d" % i for i in range(40)]
    with Resp(guarded) as c:
        expect("GET before AUTH", c.call("GET", "k"), NOAUTH)
        expect("SET before AUTH", c.call("SET", "k", "v"), NOAUTH)
        expect("MGET before AUTH", c.call("MGET", "a", "b"), NOAUTH)
        expect("PING before AUTH", c.call("PING"), b"PONG")
        expect("AUTH wrong", c.call("AUTH", "nope"), INVALID)
        expect("GET after a wrong AUTH", c.call("GET", "k"), NOAUTH)
        expect("AUTH with the backends' password (redis_auth)", c.call("AUTH", BACKEND_PW),
               INVALID)
        expect("GET after AUTH with redis_auth", c.call("GET", "k"), NOAUTH)
        expect("AUTH client_auth", c.call("AUTH", CLIENT_PW), b"OK")
        for i, k in enumerate(keys):
            expect("SET %s" % k, c.call("SET", k, "v%d" % i), b"OK")
        for i, k in enumerate(keys):
            expect("GET %s" % k, c.call("GET", k), b"v%d" % i)
        expect("MGET across backends", c.call("MGET", *keys),
               [b"v%d" % i for i in range(len(keys))])
        expect("AUTH wrong after a right one", c.call("AUTH", "nope"), INVALID)
        expect("GET after a wrong AUTH again", c.call("GET", keys[0]), NOAUTH)
    held = [len(b.keys()) for b in backends]
    if sum(held) != len(keys) or min(held) == 0:
        soft_fail("the %d keys are not spread over both backends: %r" % (len(keys), held))

    with Resp(guarded) as c:
        expect("QUIT before AUTH", c.call("QUIT"), b"OK")
        try:
            extra = c.read()
            soft_fail("after QUIT the connection stayed open (read %r)" % (extra,))
        except (Closed, ConnectionError):
            pass

    expect("redis-cli GET through the proxy without -a", cli(guarded_port, "GET", keys[0]),
           "(error) NOAUTH Authentication required.")
    expect("redis-cli SET through the proxy with -a client_auth",
           cli(guarded_port, "SET", "auth:cli", "from-cli", password=CLIENT_PW), "OK")
    expect("redis-cli GET through the proxy with -a client_auth",
           cli(guarded_port, "GET", "auth:cli", password=CLIENT_PW), '"from-cli"')

    # --- RESP3: HELLO 3 AUTH authenticates and switches at once; the backends' RESP3
    # connections open with AUTH redis_auth, then HELLO 3 (they refuse everything before it).
    with Resp(guarded) as c:
        got = c.call("HELLO", "3")
        expect("HELLO 3 before AUTH", isinstance(got, RespError) and
               got.args[0].startswith("NOAUTH HELLO must be called"), True)
        expect("HELLO 3 AUTH with a wrong password", c.call("HELLO", "3", "AUTH", "default",
                                                           "nope"), INVALID)
        expect("HELLO 3 AUTH as another user", c.call("HELLO", "3", "AUTH", "app", CLIENT_PW),
               INVALID)
        got = c.call("HELLO", "3", "AUTH", "default", CLIENT_PW)
        expect("HELLO 3 AUTH default client_auth", isinstance(got, dict) and got.get(b"proto"),
               3)
        expect("RESP3 MGET across the backends", c.call("MGET", *keys, "auth:none"),
               [b"v%d" % i for i in range(len(keys))] + [None])
        expect("RESP3 HSET", c.call("HSET", "auth:h", "f", "v"), 1)
        expect("RESP3 HGETALL (a map)", c.call("HGETALL", "auth:h"), {b"f": b"v"})
        expect("AUTH default client_auth", c.call("AUTH", "default", CLIENT_PW), b"OK")

    # --- redis_auth only: twemproxy's behaviour ------------------------------------------------
    with Resp(legacy) as c:
        expect("legacy: GET before AUTH", c.call("GET", keys[0]), NOAUTH)
        expect("legacy: PING before AUTH", c.call("PING"), NOAUTH)
        expect("legacy: AUTH with client_auth", c.call("AUTH", CLIENT_PW), INVALID)
        expect("legacy: AUTH redis_auth", c.call("AUTH", BACKEND_PW), b"OK")
        expect("legacy: GET", c.call("GET", keys[1]), b"v1")

    proxy.stop()
    return "client_auth and redis_auth checked on 2 pools over 2 password-protected backends"


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "redis-cli"))
