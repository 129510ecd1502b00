#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_descriptors: chash-proxy out of file descriptors (issue 16, findings 1 and 2).

chash-proxy (2 workers) runs with `ulimit -n 256` in front of 3 redis-servers whose pool ejects
a server after one failure. Flooding clients (4 threads, 3 rounds of 500 idle connections, held,
then dropped) use up every descriptor they can get; meanwhile, and after each round, a
well-behaved client that connected first sets and reads keys on every backend (backend
connections are opened lazily, so each needs a new descriptor in the middle of the flood).

Must hold: every request of the well-behaved client is answered correctly; no backend is
ejected (running out of local descriptors is not the server's failure: before, the failed
connects ejected healthy servers and answered errors); the log stays small (the accept path
used to spin on EMFILE, logging each turn: 22 MB in seconds); a client connecting after the
flood is served; SIGTERM ends the proxy cleanly (the harness checks the exit and the sanitizer
report).

Usage: test_descriptors.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import socket
import stat
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, fail, free_ports, log, poll_until, pool_yaml,  # noqa: E402
                          run_test, start_redises, write_file)

NOFILE = 256
FLOOD = 500
ROUNDS = 3
MAX_LOG = 200 * 1024
FLOOD_BACKOFF = 0.01   # seconds a flooding thread pauses after a refused connect (pacing)


def flood(port, held, stop):
    while not stop.is_set() and len(held) < FLOOD:
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            stop.wait(FLOOD_BACKOFF)


def body(t):
    proxy_exe, redis_server, tmp = t.proxy, t.programs["redis-server"], t.tmp
    backends = start_redises(redis_server, tmp, 3)
    port = free_ports(1)[0]
    conf = write_file(os.path.join(tmp, "fd.yml"), pool_yaml(
        "fd", port, [(r.text, 1, None) for r in backends], hash="murmur",
        distribution="ketama", auto_eject_hosts=True, server_failure_limit=1,
        server_retry_timeout=30000))
    wrapper = write_file(os.path.join(tmp, "low-nofile.sh"),
                         "#!/bin/sh\nulimit -n %d || exit 99\nexec %s \"$@\"\n" % (NOFILE,
                                                                                     proxy_exe))
    os.chmod(wrapper, stat.S_IRWXU)
    p = Proxy(wrapper, tmp, conf, [("127.0.0.1", port)], label="fd",
              extra_args=("--threads", "2")).start()
    good = Resp(("127.0.0.1", port))
    keys = [b"fd:key:%d" % i for i in range(60)]
    answered = 0
    for rnd in range(ROUNDS):
        held, stop = [], threading.Event()
        threads = [threading.Thread(target=flood, args=(port, held, stop), daemon=True)
                   for _ in range(4)]
        for t in threads:
            t.start()
        poll_until(lambda: len(held) >= FLOOD // 2, 20)
        # The well-behaved client, while the flood holds what it got.
        for k in keys:
            v = b"v%d:%s" % (rnd, k)
            r1 = good.call("SET", k, v)
            r2 = good.call("GET", k)
            if r1 != b"OK" or r2 != v:
                fail("round %d: the well-behaved client got %r / %r for %r while %d flooding "
                     "connections were open" % (rnd, r1, r2, k, len(held)))
            answered += 2
        stop.set()
        for t in threads:
            t.join(timeout=10)
        log("round %d: %d flooding connections opened; the well-behaved client served" % (
            rnd, len(held)))
        for s in held:
            s.close()
        # The proxy has seen every flooding connection go: only the well-behaved one is left.
        p.wait_stats(lambda st: st["fd"]["client_connections"] == 1,
                     "round %d: the flood's connections closed" % rnd, timeout=20)
    stats = p.stats_json()["fd"]
    if stats["server_ejects"] != 0:
        fail("%d backend ejections: running out of local descriptors was blamed on the servers"
             % stats["server_ejects"])
    for r in backends:
        have = set(r.keys())
        if not any(k in have for k in keys):
            fail("backend %s holds none of the keys: the test does not reach every backend" %
                 r.text)
    with Resp(("127.0.0.1", port)) as late:
        if late.call("PING") != b"PONG":
            fail("a client connecting after the flood is not served")
    size = os.path.getsize(p.log)
    if size > MAX_LOG:
        fail("the log grew to %d bytes during the flood (a line per failed accept?)" % size)
    good.close()
    p.stop()
    return "%d requests answered through %d rounds of %d flooding connections under ulimit " \
           "-n %d; 0 ejections; log %d bytes" % (answered, ROUNDS, FLOOD, NOFILE, size)


if __name__ == "__main__":
    run_test(body)
