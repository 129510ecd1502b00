#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_timeouts: idle and slow clients (issue 16, finding 4).

chash-proxy in front of a redis-server, two pools on the same backend: "timed" with
client_idle_timeout and client_read_timeout of 1000 ms, and "plain" with neither key (idle off,
as twemproxy; the read timeout's default, 30 s). Held at once:

- 200 slowloris connections to "timed", each sending a request one byte every 300 ms: each gets
  "-ERR request not complete within 1000 ms" and is closed (before: open for good);
- 100 idle connections to "timed": closed;
- an active client of "timed", one GET every 300 ms for 4 s: never closed, every reply right;
- 50 idle connections to "plain": still open after 4 s, and each answers a PING.
Every wait is bounded (a timeout of 1 s must have acted within 6 s); then SIGTERM, a clean exit.

Usage: test_timeouts.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, fail, free_ports, log, poll_until, run_test,  # noqa: E402
                          start_redises, write_file)

SLOW, IDLE, PLAIN_IDLE = 200, 100, 50
BOUND = 6.0
BYTE_EVERY = 0.3    # seconds between two bytes of a slowloris request: the fault's pace
KEEP_FOR = 4.0      # seconds the active client must stay served (past the 1 s timeouts)


RECEIVED = {}  # socket -> every byte it has received so far (a reply and its FIN may come apart)


def closed(s):
    """(closed?, every byte received so far) without blocking."""
    data = RECEIVED.get(s, b"")
    s.setblocking(False)
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return True, data
            data += chunk
    except BlockingIOError:
        return False, data
    except OSError:
        return True, data
    finally:
        RECEIVED[s] = data
        s.setblocking(True)


def body(t):
    proxy_exe, redis_server, tmp = t.proxy, t.programs["redis-server"], t.tmp
    (backend,) = start_redises(redis_server, tmp, 1)
    tport, pport = free_ports(2)
    conf = write_file(os.path.join(tmp, "timeouts.yml"),
                      "timed:\n  listen: 127.0.0.1:%d\n  redis: true\n"
                      "  client_idle_timeout: 1000\n  client_read_timeout: 1000\n"
                      "  servers:\n   - %s:1\n"
                      "plain:\n  listen: 127.0.0.1:%d\n  redis: true\n  servers:\n   - %s:1\n" % (
                          tport, backend.text, pport, backend.text))
    p = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", tport), ("127.0.0.1", pport)],
              label="timeouts").start()
    request = b"*2\r\n$3\r\nGET\r\n$4\r\nslow\r\n"
    slow = []
    for _ in range(SLOW):  # each starts its request at once: not idle, only slow
        s = socket.create_connection(("127.0.0.1", tport), timeout=5)
        s.sendall(request[:1])
        slow.append(s)
    idle = [socket.create_connection(("127.0.0.1", tport), timeout=5) for _ in range(IDLE)]
    plain = [socket.create_connection(("127.0.0.1", pport), timeout=5) for _ in range(PLAIN_IDLE)]
    active = Resp(("127.0.0.1", tport))
    active.call("SET", "live", "yes")
    t0 = time.monotonic()
    sent = 1
    done_slow, done_idle, errors = {}, set(), []

    def step():
        """One more byte of every slowloris request still open; true once every slowloris
        and idle connection is closed and the active client was served for KEEP_FOR s."""
        nonlocal sent
        for i, s in enumerate(slow):
            if i in done_slow:
                continue
            if sent < len(request) - 1:
                try:
                    s.send(request[sent:sent + 1])
                except OSError:
                    pass
            c, data = closed(s)
            if c:
                done_slow[i] = data
        sent += 1
        for i, s in enumerate(idle):
            if i not in done_idle and closed(s)[0]:
                done_idle.add(i)
        if time.monotonic() - t0 < KEEP_FOR and active.call("GET", "live") != b"yes":
            errors.append("the active client's GET")
        return len(done_slow) == SLOW and len(done_idle) == IDLE and \
            time.monotonic() - t0 >= KEEP_FOR
    poll_until(step, BOUND, poll=BYTE_EVERY)
    if errors:
        fail("the active client was disturbed: %s" % errors[:3])
    if len(done_slow) != SLOW:
        fail("%d of %d slowloris connections still open after %.0f s (client_read_timeout 1 s)"
             % (SLOW - len(done_slow), SLOW, BOUND))
    want = b"-ERR request not complete within 1000 ms\r\n"
    wrong = [d for d in done_slow.values() if d != want]
    if wrong:
        fail("%d slowloris connections closed without %r, e.g. %r" % (len(wrong), want, wrong[0]))
    if len(done_idle) != IDLE:
        fail("%d of %d idle connections still open after %.0f s (client_idle_timeout 1 s)" % (
            IDLE - len(done_idle), IDLE, BOUND))
    if active.call("PING") != b"PONG":
        fail("the active client was closed")
    for s in plain:
        if closed(s)[0]:
            fail("an idle client of a pool without client_idle_timeout was closed")
        s.sendall(b"*1\r\n$4\r\nPING\r\n")
        if s.recv(64) != b"+PONG\r\n":
            fail("an idle client of the plain pool does not answer")
    for s in slow + idle + plain:
        s.close()
    active.close()
    p.stop()
    log("slowloris answered and closed, idle closed, active and plain-pool clients kept")
    return "%d slowloris and %d idle connections closed within %.0f s; %d kept" % (
        SLOW, IDLE, BOUND, PLAIN_IDLE + 1)


if __name__ == "__main__":
    run_test(body)
