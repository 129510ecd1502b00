#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_resp3_bad: hostile RESP3 from a backend and from clients, and everyone else served.

One chash-proxy with two pools: "fake" in front of a scripted backend (this script's own
RESP3 server: it answers HELLO 3 with a map, and each GET with what the key names), "real" in
front of a redis-server, where a bystander client (RESP3) keeps reading a value through the
whole test: every one of its replies must be right, and none may fail.

From the backend, each answered to a RESP3 client's GET:
  push     a push (">") before the reply: dropped, the client gets the reply after it;
  attr     an attribute before the reply: passed on with it, as Redis would send it;
  deep     10,000 nested arrays: refused as too deep (a protocol error for that server: the
           client gets an error naming it, the connection is dropped);
  deepmap  10,000 nested maps: the same;
  big      a blob error declaring 2^40 bytes: refused at once, not awaited;
  trunc    half a map, then the server closes: an error for that client;
  odd      a map with an odd count of elements before silence: the request times out (the
           pool's timeout), an error for that client.
From clients (RESP3 after HELLO 3): a truncated request then a close; a 2^40-byte bulk; a map
sent as a request (Redis reads it as an inline command, as the proxy does). After all of it,
the fake pool serves a good GET again (its connections were reopened), and the proxy's
resident memory grew by less than 64 MiB.

Usage: test_resp3_bad.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Closed, Proxy, Resp, RespError, fail, free_ports,  # noqa: E402
                          pool_yaml, run_test, start_redises, wait_until, write_file)

DEEP = 10000
HELLO_MAP = (b"%7\r\n$6\r\nserver\r\n$4\r\nfake\r\n$7\r\nversion\r\n$5\r\n7.0.0\r\n"
             b"$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:1\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n"
             b"$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n")
# What the fake backend answers to GET <key>; None: it closes the connection after it.
SCRIPT = {
    b"good": (b"$2\r\nok\r\n", False),
    b"push": (b">2\r\n$10\r\ninvalidate\r\n*1\r\n$4\r\npush\r\n$4\r\nreal\r\n", False),
    b"attr": (b"|1\r\n+ttl\r\n:9\r\n$5\r\nvalue\r\n", False),
    b"deep": (b"*1\r\n" * DEEP + b":1\r\n", False),
    b"deepmap": (b"%1\r\n+k\r\n" * DEEP + b":1\r\n", False),
    b"big": (b"!1099511627776\r\nERR", False),
    b"trunc": (b"%2\r\n+a\r\n", True),
    b"odd": (b"%2\r\n+k\r\n+v\r\n+k2\r\n", False),
}


class FakeBackend:
    """A RESP server on a kernel-assigned loopback port answering from SCRIPT."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        r = Resp.__new__(Resp)
        r.sock, r.buf, r.pos = c, b"", 0
        try:
            while True:
                words = r.read()  # a request is an array of bulk strings
                cmd = words[0].lower()
                if cmd == b"hello":
                    c.sendall(HELLO_MAP)
                elif cmd == b"ping":
                    c.sendall(b"+PONG\r\n")
                elif cmd == b"get" and words[1] in SCRIPT:
                    reply, close = SCRIPT[words[1]]
                    c.sendall(reply)
                    if close:
                        c.close()
                        return
                else:
                    c.sendall(b"+OK\r\n")
        except (Closed, OSError, IndexError, AttributeError):
            c.close()


def resp3(c):
    """HELLO 3 on c: whether the connection speaks RESP3 now."""
    got = c.call("HELLO", "3")
    return isinstance(got, dict) and got.get(b"proto") == 3


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def body(t):
    fake = FakeBackend()
    (real,) = start_redises(t.programs["redis-server"], t.tmp, 1)
    fake_port, real_port = free_ports(2)
    config = write_file(os.path.join(t.tmp, "proxy.yml"),
                        pool_yaml("fake", fake_port, [("127.0.0.1:%d" % fake.port, 1, None)],
                                  timeout=1000, server_failure_limit=1000,
                                  auto_eject_hosts=False) +
                        pool_yaml("real", real_port, [(real.text, 1, None)], timeout=5000))
    proxy = Proxy(t.proxy, t.tmp, config,
                  [("127.0.0.1", fake_port), ("127.0.0.1", real_port)]).start()
    fake_addr, real_addr = ("127.0.0.1", fake_port), ("127.0.0.1", real_port)
    real.call("SET", "bystander", "steady")

    # The bystander: RESP3, reading all the time; any wrong or failed reply fails the test.
    stop, bystander = threading.Event(), {"reads": 0, "bad": []}

    def read_steadily():
        with Resp(real_addr) as c:
            if not resp3(c):
                bystander["bad"].append("HELLO 3 refused")
                return
            while not stop.is_set():
                got = c.call("GET", "bystander")
                if got != b"steady":
                    bystander["bad"].append(repr(got))
                bystander["reads"] += 1

    reader = threading.Thread(target=read_steadily)
    reader.start()
    rss0 = rss_kib(proxy.proc.pid)

    def get3(key, addr=fake_addr):
        with Resp(addr, timeout=15) as c:
            if not resp3(c):
                fail("HELLO 3 through the proxy")
            return c.call_raw("GET", key)

    checks = []
    for _ in range(20):  # each case many times: nothing accumulates
        checks = [
            ("push", get3(b"push") == b"$4\r\nreal\r\n"),
            ("attr", get3(b"attr") == b"|1\r\n+ttl\r\n:9\r\n$5\r\nvalue\r\n"),
            ("deep", get3(b"deep").startswith(b"-ERR backend") and b"too deep" in get3(b"deep")),
            ("deepmap", b"too deep" in get3(b"deepmap")),
            ("big", get3(b"big").startswith(b"-ERR backend")),
            ("trunc", get3(b"trunc").startswith(b"-ERR backend")),
            ("good", get3(b"good") == b"$2\r\nok\r\n"),
        ]
        if not all(ok for _, ok in checks):
            break
    bad = [what for what, ok in checks if not ok]
    if bad:
        fail("a hostile backend's replies were not handled: %s" % bad)
    odd = get3(b"odd")
    if not (odd.startswith(b"-ERR backend") and b"timed out" in odd):
        fail("a map with an odd count: %r" % odd)
    if get3(b"good") != b"$2\r\nok\r\n":
        fail("the fake pool does not serve a good reply after the bad ones")

    # Hostile clients of the real pool, in RESP3.
    for payload, what in ((b"*3\r\n$3\r\nSET\r\n$1\r\nk", "a truncated request"),
                          (b"*2\r\n$3\r\nGET\r\n$1099511627776\r\n", "a 2^40-byte bulk")):
        with Resp(real_addr) as c:
            c.call("HELLO", "3")
            c.send(payload)
            if what != "a truncated request":
                got = c.read()
                if not (isinstance(got, RespError) and "Protocol error" in got.args[0]):
                    fail("%s: %r" % (what, got))
    with Resp(real_addr) as c:
        c.call("HELLO", "3")
        c.send(b"%1\r\n$1\r\na\r\n$1\r\nb\r\n")  # a map as a request: inline words, as Redis
        got = [c.read() for _ in range(5)]
        if not all(isinstance(g, RespError) for g in got):
            fail("a map sent as a request: %r" % got)
        if c.call("GET", "bystander") != b"steady":
            fail("the connection that sent a map is not served after its errors")

    wait_until(lambda: bystander["reads"] > 100, 30, "the bystander's reads")
    stop.set()
    reader.join(30)
    grew = rss_kib(proxy.proc.pid) - rss0
    proxy.stop()
    if bystander["bad"]:
        fail("the bystander got %d wrong replies: %s" % (len(bystander["bad"]),
                                                          bystander["bad"][:5]))
    if grew > 64 * 1024:
        fail("the proxy's resident memory grew by %d KiB" % grew)
    return "7 hostile replies x 20, an odd map, 3 hostile clients; the bystander's %d reads " \
           "all right; memory +%d KiB" % (bystander["reads"], grew)


if __name__ == "__main__":
    run_test(body, programs=("redis-server",))
