#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_promtool: `promtool check metrics` (Prometheus' linter, Debian's prometheus package)
accepts chash-proxy's /metrics with every kind of pool exporting at once.

One chash-proxy, four pools: "alpha" (2 redis-servers, warm_up 60 s, a third server added by a
reload so its warm-up window is running), "mc" (2 memcacheds), "secure" (redis, clients over
TLS with a certificate made here by openssl) and "fleet" (its membership from a real etcd).
Traffic through each. Checked:
  - promtool check metrics on the scrape before and during the window: no problem reported
    (units in base units, _total on counters and only on them, a HELP per family);
  - the same scrape parses strictly (promtext.py), holds the fleet families of the etcd pool;
  - chash_proxy_warm_up_left_seconds of alpha is seconds: within the wall-clock bounds of the
    window (60 s from the reload, read before and after it), 0 for the pools without one.

Usage: test_promtool.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (a program missing and CI unset).
"""
import json
import os
import signal
import ssl
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from proxyharness import (Mc, Proxy, Resp, fail, free_ports, pool_yaml, run_test,  # noqa: E402
                          soft_fail, spawn, start_memcacheds, start_redises, wait_until,
                          write_file)
from promtext import scrape, value  # noqa: E402
from test_tls import Certs  # noqa: E402
import etcd  # noqa: E402

PROGRAMS = ("redis-server", "memcached", "openssl", "etcd", "promtool")
WARM_MS = 60000
KEY = "/chash/pools/fleet"


def tls_ping(port, certs):
    ctx = ssl.create_default_context(cafile=certs.p("ca.pem"))
    ctx.check_hostname = False
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            got = b""
            while not got.endswith(b"\r\n"):
                chunk = s.recv(100)
                if not chunk:
                    break
                got += chunk
    return got


def body(t):
    proxy_exe, tmp = t.proxy, t.tmp
    redises = start_redises(t.programs["redis-server"], tmp, 4)
    mcs = start_memcacheds(t.programs["memcached"], tmp, 2)
    certs = Certs(t.programs["openssl"], tmp)
    server = etcd.EtcdServer(tmp, lambda argv, out: spawn(argv, out)).start()
    server.client.put(KEY, json.dumps({"servers": ["%s:1 f0" % redises[3].text]}))

    pa, pm, ps, pf, mport = free_ports(5)

    def conf_text(alpha):
        return (pool_yaml("alpha", pa, [(r.text, 1, None) for r in alpha], warm_up=WARM_MS,
                          timeout=5000) +
                pool_yaml("mc", pm, [(m.text, 1, None) for m in mcs], redis=False) +
                pool_yaml("secure", ps, [(redises[2].text, 1, None)],
                          tls_cert_file=certs.p("server.pem"),
                          tls_key_file=certs.p("server.key")) +
                "fleet:\n  listen: 127.0.0.1:%d\n  redis: true\n"
                "  membership: etcd://127.0.0.1:%d%s\n" % (pf, server.port, KEY))

    conf = write_file(os.path.join(tmp, "promtool.yml"), conf_text(redises[:2]))
    proxy = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", p) for p in (pa, pm, ps, pf, mport)],
                  extra_args=["--metrics-port", str(mport), "--fleet-id", "px0"]).start()

    # traffic through every pool
    with Resp(("127.0.0.1", pa)) as c:
        if c.pipeline([("SET", "a:%d" % i, "v") for i in range(50)]) != [b"OK"] * 50:
            fail("SETs through alpha")
    with Mc(("127.0.0.1", pm)) as c:
        c.send(b"".join(b"set m:%d 0 0 1\r\nv\r\n" % i for i in range(20)))
        for i in range(20):
            if c.line() != b"STORED\r\n":
                fail("set m:%d through the memcached pool" % i)
    if tls_ping(ps, certs) != b"+PONG\r\n":
        fail("PING over TLS through the secure pool")

    def fleet_set():
        with Resp(("127.0.0.1", pf)) as c:
            return c.call("SET", "f", "1") == b"OK"
    wait_until(fleet_set, 20, "a SET through the etcd pool")

    fams = scrape(mport, lint="four pools, no window")
    if value(fams, "chash_proxy_fleet_epoch", pool="fleet") <= 0:
        soft_fail("the etcd pool serves no epoch")
    for pool in ("alpha", "mc", "secure", "fleet"):
        if value(fams, "chash_proxy_warm_up_left_seconds", pool=pool) != 0:
            soft_fail("warm_up_left_seconds of %s before any change is not 0" % pool)

    # a third server for alpha: its warm-up window runs for WARM_MS from the reload
    write_file(conf + ".tmp", conf_text(redises[:3]))
    os.rename(conf + ".tmp", conf)
    t0 = time.time()
    proxy.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: value(scrape(mport), "chash_proxy_servers", pool="alpha") == 3, 20,
               "alpha's third server after the reload")
    t1 = time.time()
    s0 = time.time()
    fams = scrape(mport, lint="a warm-up window running")
    s1 = time.time()
    left = value(fams, "chash_proxy_warm_up_left_seconds", pool="alpha")
    lo, hi = WARM_MS / 1000.0 - (s1 - t0) - 0.002, WARM_MS / 1000.0 - (s0 - t1) + 0.002
    if not lo <= left <= hi:
        soft_fail("warm_up_left_seconds %r; the window of %d ms from the reload leaves "
                  "[%.3f, %.3f] s" % (left, WARM_MS, lo, hi))
    for pool in ("mc", "secure", "fleet"):
        if value(fams, "chash_proxy_warm_up_left_seconds", pool=pool) != 0:
            soft_fail("warm_up_left_seconds of %s, which did not change, is not 0" % pool)
    proxy.stop()
    return "promtool clean on 4 pools; %.3f s of warm-up left" % left


if __name__ == "__main__":
    run_test(body, programs=PROGRAMS)
