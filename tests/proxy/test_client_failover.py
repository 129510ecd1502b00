#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_client_failover: chash-proxy with a client library's distribution fails over as the
library does, proven against the library itself.

For dalli@3 (Ruby Dalli's ring, its retry rehash "#{try}#{key}") and pecl_memcache@4 with
hash crc32a (PHP's PECL memcache, its retry rehash "<key>-<i>"): chash-proxy in front of 5 real
memcacheds (weights 1:2:1:1:3), `distribution:` the scheme, auto_eject_hosts with
server_failure_limit 1 and a retry timeout longer than the test. 5,000 keys are SET through
the proxy and every memcached is asked which keys it holds; the library's own ring, run by the
compat oracle (tests/compat/oracles/dalli_ring.rb, pecl_memcache.php) with the same servers in
the same order, must name the same memcached for every key:
  1. every server up;
  2. the middle memcached SIGKILLed (and ejected by the proxy): the library's retries pick the
     server, with the oracle told that server is down;
  3. the first one killed too: two down.
Where the library would find no server (all its retries on down servers) the key must be on a
live one (chash's walk goes on); such keys are counted, not compared.

Usage: test_client_failover.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (memcached, ruby-dalli or php-memcache missing and CI unset).
"""
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "compat"))
from proxyharness import (Mc, Proxy, fail, free_ports, log, run_test, skip,  # noqa: E402
                          start_memcacheds, wait_until, write_file)
import clients_compat as cc  # noqa: E402

NKEYS = 5000
WEIGHTS = [1, 2, 1, 1, 3]
ORACLES = os.path.join(HERE, "..", "compat", "oracles")


def oracles():
    if subprocess.run(["ruby", "-e", "require 'dalli'"], stderr=subprocess.DEVNULL,
                      stdout=subprocess.DEVNULL).returncode:
        skip("ruby-dalli missing (scripts/bootstrap installs it)")
    if subprocess.run(["php", "-r", "exit(extension_loaded('memcache') ? 0 : 1);"],
                      stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL).returncode:
        skip("php-memcache missing (scripts/bootstrap installs it)")
    return [("dalli@3", {}, ["ruby", os.path.join(ORACLES, "dalli_ring.rb")]),
            ("pecl_memcache@4", {"hash": "crc32a"},
             ["php", os.path.join(ORACLES, "pecl_memcache.php"), "crc32"])]


def make_keys(rng):
    """Keys memcached takes (printable, no space), 1..200 bytes: user:<n> and random."""
    alphabet = bytes(range(0x21, 0x7f))
    keys = dict.fromkeys(b"user:%d" % i for i in range(NKEYS // 2))
    while len(keys) < NKEYS:
        keys[bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 200)))] = None
    return list(keys)


def set_all(addr, keys):
    with Mc(addr, timeout=30) as c:
        for i in range(0, len(keys), 500):
            batch = keys[i:i + 500]
            c.send(b"".join(b"set %s 0 0 1\r\nv\r\n" % k for k in batch))
            for k in batch:
                r = c.reply()
                if r != b"STORED\r\n":
                    fail("set %r through the proxy: %r" % (k[:40], r))


def placement(mcs, live, keys):
    """Index in mcs of the memcached holding each key (the live ones asked)."""
    where = {}
    for i in live:
        for k in mcs[i].keys_present(keys):
            if k in where:
                fail("key %r on two memcacheds" % k)
            where[k] = i
    missing = [k for k in keys if k not in where]
    if missing:
        fail("%d keys on no live memcached, e.g. %r" % (len(missing), missing[0][:40]))
    return [where[k] for k in keys]


def eject(proxy, pool, addr, dead_key, ejects):
    """GETs of a key the killed memcached owned until the proxy has counted one more
    ejection (server_failure_limit 1: the first failed request ejects)."""
    with Mc(addr, timeout=10) as c:
        def ejected():
            if proxy.stats_json()[pool]["server_ejects"] > ejects:
                return True
            c.call(b"get %s\r\n" % dead_key)
            return False
        wait_until(ejected, 15, "the proxy ejecting the killed memcached")
    return ejects + 1


def one_scheme(proxy_exe, memcached, tmp, rng, scheme, settings, oracle):
    mcs = start_memcacheds(memcached, tmp, len(WEIGHTS))
    servers = [(m.text, w) for m, w in zip(mcs, WEIGHTS)]
    port = free_ports(1)[0]
    pool = "p" + scheme.split("@")[0]
    lines = ["%s:" % pool, "  listen: 127.0.0.1:%d" % port, "  redis: false",
             "  distribution: %s" % scheme, "  auto_eject_hosts: true",
             "  server_failure_limit: 1", "  server_retry_timeout: 600000", "  timeout: 400"]
    lines += ["  %s: %s" % kv for kv in settings.items()]
    lines += ["  servers:"] + ["   - %s:%d" % s for s in servers]
    conf = write_file(os.path.join(tmp, pool + ".yml"), "\n".join(lines) + "\n")
    proxy = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)], label=pool).start()
    addr = ("127.0.0.1", port)
    nodes = [(t.encode(), w) for t, w in servers]
    down, ejects, out = [], 0, []
    keys = got = None
    for kill in (None, 2, 0):
        if kill is not None:
            mcs[kill].kill()
            down.append(kill)
            ejects = eject(proxy, pool, addr, next(k for k, o in zip(keys, got) if o == kill),
                           ejects)
        live = [i for i in range(len(mcs)) if i not in down]
        for i in live:
            mcs[i].flush()
        keys = make_keys(rng)
        set_all(addr, keys)
        got = placement(mcs, live, keys)
        want = cc.run_owners(oracle, cc.case_text(nodes, keys, down=sorted(down)),
                             "oracle for " + scheme)
        bad = [i for i in range(len(keys)) if want[i] >= 0 and want[i] != got[i]]
        if bad:
            i = bad[0]
            fail("%s, down %s: %d of %d keys elsewhere than the library puts them; key %r: "
                 "library -> %s, chash-proxy -> %s" % (scheme, down, len(bad), len(keys),
                                                       keys[i], servers[want[i]][0],
                                                       servers[got[i]][0]))
        none = want.count(-1)
        out.append("%d down: %d keys equal%s" % (len(down), len(keys) - none,
                                                 ", %d the library finds no server for" % none
                                                 if none else ""))
        log("%s, %d down %s: %d keys on the memcached the library picks%s"
            % (scheme, len(down), sorted(down), len(keys) - none,
               " (%d it finds none for, on a live one here)" % none if none else ""))
    proxy.stop()
    for m in mcs:
        m.kill()
    return "%s: %s" % (scheme, "; ".join(out))


def body(t):
    proxy_exe, memcached, tmp = t.proxy, t.programs["memcached"], t.tmp
    schemes = oracles()
    rng = random.Random("proxy_client_failover")
    return " | ".join(one_scheme(proxy_exe, memcached, tmp, rng, *s) for s in schemes)


if __name__ == "__main__":
    run_test(body, programs=("memcached",))
