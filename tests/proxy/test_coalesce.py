#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_coalesce: identical reads in flight together share one backend request
(coalesce_reads; docs/PROXY.md, "Coalescing").

chash-proxy (1 worker, so every client shares one group) with pools over real servers:
"on" and "off" (coalesce_reads: false) over one redis-server R, "fail" over a redis-server F
(timeout 1000 ms, no ejection), and "mc" over a memcached. The backend is SIGSTOPped while the
clients send, so their reads are in flight together, then resumed. Checked:
  - CLIENTS clients each GET one key, ROUNDS times, on "on" and on "off": R's INFO commandstats
    counts 1 GET a round for "on" against CLIENTS for "off" (a cut of >= 90%: 98% here); every
    client gets the value's exact bytes; chash_proxy_coalesced_reads_total{pool="on"} counts
    the other CLIENTS - 1 a round;
  - RESP2 and RESP3 clients reading one hash at once form a group each (CLIENTS - 2 joins),
    each client gets its own protocol's reply (a flat array, a map);
  - a write closes the group: a SET sent while a GET group waits, then a GET: the later GET
    has the SET's value and went to the backend itself (a second GET at R);
  - a failing backend: F stopped past the pool's timeout: every one of CLIENTS waiters gets the
    same error; then F killed (SIGKILL) under a new group: every waiter gets the same error;
  - memcached: CLIENTS gets of one key on a stopped memcached, then resumed: one get reaches it
    (its get_cmds), every client gets the exact VALUE block;
  - clean exit (no sanitizer report).

Usage: test_coalesce.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server or memcached missing and CI unset).
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Conn, Mc, Proxy, Resp, RespError, WAIT_TIMEOUT, encode,  # noqa: E402
                          fail, free_ports, pool_yaml, resp_call, run_test, sigstop,
                          start_memcacheds, start_redises, wait_until, write_file)
from promtext import scrape, value  # noqa: E402

CLIENTS = 50
ROUNDS = 3


def get_calls(redis):
    """R's count of GET commands served (INFO commandstats)."""
    info = redis.call("INFO", "commandstats").decode()
    for line in info.split("\r\n"):
        if line.startswith("cmdstat_get:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


def coalesced(mport, pool):
    return value(scrape(mport), "chash_proxy_coalesced_reads_total", pool=pool)


def in_flight(mport, pool):
    fams = scrape(mport)
    return sum(v for name in ("chash_proxy_server_in_queue_requests",
                              "chash_proxy_server_out_queue_requests")
               for _, lab, v in fams[name]["samples"] if lab["pool"] == pool)


def stopped_round(server, conns, request, arrived):
    """Stops server, sends request on every connection, waits until arrived() says the proxy
    holds them all, resumes the server. The connections' replies are then the caller's."""
    sigstop(server.proc.pid)
    try:
        for c in conns:
            c.send(request)
        wait_until(arrived, WAIT_TIMEOUT, "the proxy to hold every client's request")
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


def body(t):
    r, f = start_redises(t.programs["redis-server"], t.tmp, 2)
    (mc,) = start_memcacheds(t.programs["memcached"], t.tmp, 1)
    pon, poff, pfail, pmc, mport = free_ports(5)
    config = write_file(os.path.join(t.tmp, "proxy.yml"),
                        pool_yaml("on", pon, [(r.text, 1, None)], timeout=10000) +
                        pool_yaml("off", poff, [(r.text, 1, None)], timeout=10000,
                                  coalesce_reads=False) +
                        pool_yaml("fail", pfail, [(f.text, 1, None)], timeout=1000,
                                  auto_eject_hosts=False) +
                        pool_yaml("mc", pmc, [(mc.text, 1, None)], redis=False, timeout=10000))
    px = Proxy(t.proxy, t.tmp, config, [("127.0.0.1", p) for p in (pon, poff, pfail, pmc)],
               extra_args=["--metrics-port", str(mport), "--threads", "1"]).start()
    val = b"hot-value-" + b"x" * 100
    if resp_call(r.addr, "SET", "hot", val) != b"OK":
        fail("SET hot at R")

    # --- GET groups on "on" and "off".
    per = {}
    for pool, port in (("on", pon), ("off", poff)):
        conns = [Resp(("127.0.0.1", port)) for _ in range(CLIENTS)]
        base, cbase = get_calls(r), coalesced(mport, pool)
        for rnd in range(ROUNDS):
            if pool == "on":
                want = cbase + (rnd + 1) * (CLIENTS - 1)
                stopped_round(r, conns, encode("GET", "hot"),
                              lambda: coalesced(mport, "on") == want)
            else:
                stopped_round(r, conns, encode("GET", "hot"),
                              lambda: in_flight(mport, "off") == CLIENTS)
            for c in conns:
                got = c.read()
                if got != val:
                    fail("%s: a client got %r" % (pool, got))
        per[pool] = get_calls(r) - base
        for c in conns:
            c.close()
    if per["on"] != ROUNDS or per["off"] != ROUNDS * CLIENTS:
        fail("backend GETs: on %d, off %d (rounds %d, clients %d)" % (per["on"], per["off"],
                                                                       ROUNDS, CLIENTS))
    cut = 1 - per["on"] / per["off"]
    if coalesced(mport, "on") != ROUNDS * (CLIENTS - 1):
        fail("coalesced reads %r" % coalesced(mport, "on"))

    # --- RESP2 and RESP3 clients read one hash at once: a group per protocol (a waiter never
    # gets a reply written for the other's: HGETALL is a flat array in one, a map in the other).
    if resp_call(r.addr, "HSET", "hh", "f", "v") != 1:
        fail("HSET hh at R")
    half = CLIENTS // 2
    conns = [Resp(("127.0.0.1", pon)) for _ in range(CLIENTS)]
    for c in conns[half:]:
        if not isinstance(c.call("HELLO", "3"), dict):
            fail("HELLO 3 through the proxy")
    cbase = coalesced(mport, "on")
    stopped_round(r, conns, encode("HGETALL", "hh"),
                  lambda: coalesced(mport, "on") == cbase + CLIENTS - 2)
    got = [c.read() for c in conns]
    if got[:half] != [[b"f", b"v"]] * half or got[half:] != [{b"f": b"v"}] * (CLIENTS - half):
        fail("RESP2 and RESP3 clients' HGETALL: %r" % got)
    for c in conns:
        c.close()

    # --- A write closes the group: GET (leader), SET, GET; the second GET is sent itself.
    with Resp(("127.0.0.1", pon)) as a, Resp(("127.0.0.1", pon)) as b:
        base, cbase = get_calls(r), coalesced(mport, "on")
        sigstop(r.proc.pid)
        try:
            a.send(encode("GET", "hot"))
            b.send(encode("SET", "hot", "new") + encode("GET", "hot"))
            wait_until(lambda: in_flight(mport, "on") == 3, WAIT_TIMEOUT,
                       "GET, SET and GET in flight")
        finally:
            os.kill(r.proc.pid, signal.SIGCONT)
        first, ok, second = a.read(), b.read(), b.read()
        if first != val or ok != b"OK" or second != b"new":
            fail("GET / SET / GET: %r %r %r" % (first, ok, second))
        if get_calls(r) - base != 2 or coalesced(mport, "on") != cbase:
            fail("a GET after a SET joined the group before it")

    # --- A failing backend: every waiter gets the same error (a timeout, then a kill).
    for how in ("timeout", "kill"):
        conns = [Resp(("127.0.0.1", pfail)) for _ in range(CLIENTS)]
        cbase = coalesced(mport, "fail")
        sigstop(f.proc.pid)
        for c in conns:
            c.send(encode("GET", "k-%s" % how))
        wait_until(lambda: coalesced(mport, "fail") == cbase + CLIENTS - 1, WAIT_TIMEOUT,
                   "every GET joined")
        if how == "kill":
            f.kill()
        errors = set()
        for c in conns:
            got = c.read()
            if not isinstance(got, RespError):
                fail("%s: a waiter got %r, not an error" % (how, got))
            errors.add(str(got))
            c.close()
        if len(errors) != 1 or coalesced(mport, "fail") != cbase + CLIENTS - 1:
            fail("%s: errors %r, coalesced %r" % (how, errors, coalesced(mport, "fail")))
        if how == "timeout":
            os.kill(f.proc.pid, signal.SIGCONT)

    # --- memcached: one get reaches it, every client gets the exact VALUE block.
    with Mc(mc.addr) as c:
        c.send(b"set mk 5 0 3\r\nabc\r\n")
        if c.line() != b"STORED\r\n":
            fail("set mk at the memcached")
    block = b"VALUE mk 5 3\r\nabc\r\nEND\r\n"

    def mc_gets():
        with Mc(mc.addr) as c:
            c.send(b"stats\r\n")
            while True:
                line = c.line()
                if line.startswith(b"STAT cmd_get "):
                    n = int(line.split()[2])
                if line == b"END\r\n":
                    return n
    conns = [Conn(("127.0.0.1", pmc)) for _ in range(CLIENTS)]
    base, cbase = mc_gets(), coalesced(mport, "mc")
    stopped_round(mc, conns, b"get mk\r\n",
                  lambda: coalesced(mport, "mc") == cbase + CLIENTS - 1)
    for c in conns:
        got = b""
        while len(got) < len(block):
            chunk = c.sock.recv(len(block) - len(got))
            if not chunk:
                break
            got += chunk
        if got != block:
            fail("mc: a client got %r" % got)
        c.close()
    if mc_gets() - base != 1:
        fail("memcached served %d gets for one group" % (mc_gets() - base))
    px.stop()
    return "backend GETs %d vs %d (%.0f%% fewer), errors shared by every waiter" % (
        per["on"], per["off"], 100 * cut)


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "memcached"))
