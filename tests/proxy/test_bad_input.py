#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_bad_input: hostile and broken clients get an error or a close, and nobody else notices.

chash-proxy in front of 2 real redis-servers. Throughout the test a well-behaved client runs SET
then GET of its own keys in a loop; it must see every reply, right, within REPLY_BOUND. Meanwhile,
each on its own connection:
  - garbage bytes (binary noise, a bad argument count, a bulk length that is not a number);
  - a bulk length of 2^40 ("*1\\r\\n$1099511627776\\r\\n"), and an argument count of 2^31;
  - a truncated request, then close (and again with an abortive close, RST);
  - a truncated request, then a half-close (shutdown SHUT_WR): the proxy must close too;
  - a complete request, then a half-close: the proxy answers it, then closes (100 times);
  - an inline command line over 64 KiB with no end of line;
  - a request of exactly the pool's max_request_bytes (set to 1 MiB here: accepted, +OK), and
    one byte over it (an error or a close, never +OK);
  - a client that never reads its replies: GETs of a 1 MiB value sent until the proxy closes
    the connection (the pool's max_client_buffer_bytes, 8 MiB here), while the proxy's RSS
    stays bounded;
  - 200 connections opened and reset with half a request.
A second pool, "dflt", without those keys, on the same backends, checks the default request
limit without sending it: a 2 MiB SET is served there (the limits are per pool); a request whose
lengths announce the default limit plus one byte is refused from its header; one announcing
exactly the default is not (it is awaited: a half-close then gets a close, without an error).
Each bad client must get an error reply or a close within BAD_BOUND seconds; an error must not
be followed by a normal reply to the rest of the garbage. At the end the proxy is alive,
answers a fresh client, reports (stats) only the good client connected, and exits cleanly on
SIGTERM with no sanitizer report.

The defaults are read from include/chash_config.h (CH_CONF_DEFAULT_MAX_REQUEST_BYTES,
CH_CONF_DEFAULT_MAX_CLIENT_BUFFER_BYTES), given as the third argument.

Usage: test_bad_input.py CHASH_PROXY CHASH_CLI CHASH_CONFIG_H
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import random
import re
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, encode, fail, free_ports, log, poll_until,  # noqa: E402
                          pool_yaml, run_test, soft_fail, start_redises, tail, wait_until,
                          write_file)

T0 = time.monotonic()
REPLY_BOUND = 5.0     # seconds: the good client's every reply
BAD_BOUND = 10.0      # seconds: a bad client's error or close
PING_EVERY = 0.1      # seconds between the never-reading client's PINGs once its GETs are sent
RSS_BOUND_KIB = 1536 * 1024   # the proxy's resident memory, ASan included
MAX_REQUEST = 1 << 20         # the "bad" pool's max_request_bytes
MAX_BUFFER = 8 << 20          # the "bad" pool's max_client_buffer_bytes
DEFAULT_NAMES = ("CH_CONF_DEFAULT_MAX_REQUEST_BYTES", "CH_CONF_DEFAULT_MAX_CLIENT_BUFFER_BYTES")


def limits_from_header(path):
    """{name: value} of the default byte limits #defined in chash_config.h."""
    out = {}
    with open(path) as f:
        text = f.read()
    for name in DEFAULT_NAMES:
        m = re.search(r"#define\s+%s\s+([^/\n]*)" % name, text)
        if not m:
            fail("%s: no #define %s" % (path, name))
        expr = re.sub(r"(?<=[0-9])[uUlL]+", "", m.group(1)).strip()
        if not re.fullmatch(r"[0-9\s*()+-]+", expr):
            fail("%s: cannot read %s = %r" % (path, name, expr))
        out[name] = eval(expr)         # digits and * + - ( ) only, checked above
    return out


class GoodClient(threading.Thread):
    """SET k v, GET k (expects v) in a loop on one connection; every failure recorded."""

    def __init__(self, addr):
        super().__init__(daemon=True)
        self.addr = addr
        self.stop_flag = threading.Event()
        self.errors = []
        self.ops = 0
        self.worst = 0.0
        self.phase = "start"
        self.worst_at = ""

    def run(self):
        try:
            c = Resp(self.addr, timeout=REPLY_BOUND)
        except OSError as e:
            self.errors.append("connect: %s" % e)
            return
        i = 0
        while not self.stop_flag.is_set():
            k, v = b"good:%d" % (i % 50), b"value-%d" % i
            t0, phase = time.monotonic(), self.phase
            try:
                r1 = c.call(b"SET", k, v)
                r2 = c.call(b"GET", k)
            except (OSError, RuntimeError) as e:
                self.errors.append("op %d (during %s): %s: %s" % (i, phase,
                                                                  type(e).__name__, e))
                try:
                    c.close()
                    c = Resp(self.addr, timeout=REPLY_BOUND)
                except OSError:
                    return
                continue
            dt = time.monotonic() - t0
            if dt > self.worst:
                self.worst, self.worst_at = dt, "%s, t=%.2fs" % (phase, t0 - T0)
            if r1 != b"OK" or r2 != v:
                self.errors.append("op %d (started during %s, t=%.2fs, took %.2fs): SET answered %r, GET %r "
                                   "(expected %r)" % (i, phase, t0 - T0, dt, r1, r2, v))
            if dt > REPLY_BOUND:
                self.errors.append("op %d (started during %s, t=%.2fs): SET+GET took %.2fs" % (
                    i, phase, t0 - T0, dt))
            self.ops += 2
            i += 1
        c.close()


def raw(addr, timeout=BAD_BOUND):
    s = socket.create_connection(addr, timeout=timeout)
    s.settimeout(timeout)
    return s


def outcome(s, bound=BAD_BOUND, allow_ok=0):
    """Reads until the proxy closes or an error reply arrives; returns ("close", data) or
    ("error", data); fails on a timeout. allow_ok: normal replies accepted before that."""
    deadline = time.monotonic() + bound
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return ("timeout", data)
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return ("timeout", data)
        except ConnectionResetError:
            return ("close", data)
        if not chunk:
            return ("close", data)
        data += chunk
        if b"-" in data[:1] or b"\r\n-" in data:
            return ("error", data)


def check_bad(name, s, bound=BAD_BOUND, send=None):
    """Sends `send` (if any) and checks the proxy answers an error or closes. The outcome."""
    try:
        if send is not None:
            s.sendall(send)
    except (BrokenPipeError, ConnectionResetError):
        s.close()
        return "close"
    kind, data = outcome(s, bound)
    s.close()
    if kind == "timeout":
        soft_fail("%s: neither an error reply nor a close within %gs (got %r)" % (
            name, bound, data[:200]))
    elif kind == "error" and not data.startswith(b"-"):
        soft_fail("%s: normal replies before the error: %r" % (name, data[:200]))
    return kind


def body(t):
    default_request = limits_from_header(t.header)[DEFAULT_NAMES[0]]
    max_request, max_pending = MAX_REQUEST, MAX_BUFFER
    tmp = t.tmp
    backends = start_redises(t.programs["redis-server"], tmp, 2)
    port, dflt_port = free_ports(2)
    servers = [(b.text, 1, None) for b in backends]
    config = write_file(os.path.join(tmp, "proxy.yml"), pool_yaml(
        "bad", port, servers, hash="fnv1a_64", distribution="ketama", timeout=5000,
        max_request_bytes=MAX_REQUEST, max_client_buffer_bytes=MAX_BUFFER) + pool_yaml(
        "dflt", dflt_port, servers, timeout=5000))
    addr, dflt_addr = ("127.0.0.1", port), ("127.0.0.1", dflt_port)
    proxy = Proxy(t.proxy, tmp, config, [addr, dflt_addr], stats_interval_ms=100).start()
    results = {}

    good = GoodClient(addr)
    good.start()
    wait_until(lambda: good.ops >= 20 or good.errors, BAD_BOUND,
               "the good client's first 10 SET+GET answered")

    def case(name, send, **kw):
        good.phase = name
        results[name] = check_bad(name, raw(addr), send=send, **kw)

    # --- garbage ---------------------------------------------------------------------------------
    rng = random.Random(3)
    case("binary noise", b"\x00\xff" + bytes(rng.randrange(256) for _ in range(4096)))
    case("bad argument count", b"*abc\r\n$3\r\nGET\r\n")
    case("bad bulk length", b"*2\r\n$3\r\nGET\r\n$xyz\r\nk\r\n")
    case("bulk header without an array", b"*1\r\n+OK\r\n")
    case("bulk length 2^40", b"*1\r\n$1099511627776\r\n")
    case("bulk length 2^40 in a GET", b"*2\r\n$3\r\nGET\r\n$1099511627776\r\n")
    case("argument count 2^31", b"*2147483648\r\n")
    case("negative bulk length", b"*2\r\n$3\r\nGET\r\n$-5\r\n")
    case("inline line over 64 KiB", b"GET " + b"x" * (70 * 1024))

    good.phase = "truncated requests"
    # --- truncated requests ---------------------------------------------------------------------
    s = raw(addr)
    s.sendall(b"*3\r\n$3\r\nSET\r\n$5\r\ntrunc\r\n$10\r\nabc")
    s.close()
    s = raw(addr)
    s.sendall(b"*3\r\n$3\r\nSET\r\n$5\r\ntrunc\r\n$10\r\nabc")
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()                                                          # RST
    s = raw(addr)
    s.sendall(b"*3\r\n$3\r\nSET\r\n$5\r\ntrunc\r\n$10\r\nabc")
    s.shutdown(socket.SHUT_WR)
    kind, data = outcome(s)
    s.close()
    results["truncated, then half-close"] = kind
    if kind != "close" and kind != "error":
        soft_fail("truncated request then SHUT_WR: the proxy did not close within %gs (%r)" % (
            BAD_BOUND, data[:100]))
    if backends[0].call("EXISTS", "trunc") or backends[1].call("EXISTS", "trunc"):
        soft_fail("a truncated SET reached a backend")
    # A complete request then half-close: answered, then closed. 100 times (while the good
    # client keeps the proxy busy): a reply lost to a race between the client's EOF and the
    # flush of its replies shows up in a few percent of the tries.
    lost = []
    for i in range(100):
        s = raw(addr)
        s.sendall(encode("SET", "halfclose", "hc") + encode("GET", "halfclose"))
        s.shutdown(socket.SHUT_WR)
        kind, data = outcome(s)
        s.close()
        if kind != "close" or data != b"+OK\r\n$2\r\nhc\r\n":
            lost.append((kind, data[:100]))
    results["complete, then half-close"] = "%d/100 answered" % (100 - len(lost))
    if lost:
        soft_fail("SET+GET then SHUT_WR: expected both replies then a close; %d of 100 tries "
                  "got otherwise, e.g. %s after %r" % (len(lost), lost[0][0], lost[0][1]))

    # --- size limit -----------------------------------------------------------------------------
    def set_of_size(key, total):
        """A SET of key whose whole request is `total` bytes."""
        head = b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n" % (len(key), key)
        n = total - len(head) - 2
        for _ in range(3):      # the length's digit count depends on n
            hdr = b"$%d\r\n" % n
            n = total - len(head) - len(hdr) - 2
        hdr = b"$%d\r\n" % n
        req = head + hdr + b"v" * n + b"\r\n"
        assert len(req) == total, (len(req), total)
        return req

    good.phase = "a request at the size limit"
    with Resp(addr, timeout=60) as c:
        c.send(set_of_size(b"at-limit", max_request))
        r = c.read()
        if r != b"OK":
            soft_fail("a SET of exactly the maximum request size (%d bytes) answered %r" % (
                max_request, r))
        elif c.call("STRLEN", "at-limit") < max_request - 100:
            soft_fail("the SET at the size limit stored a short value")
        c.call("DEL", "at-limit")
    good.phase = "a request over the size limit"
    s = raw(addr, timeout=60)
    over = set_of_size(b"over-limit", max_request + 1)
    got = check_bad("request of max+1 bytes", s, send=over)
    results["request of max+1 bytes"] = got
    for b in backends:
        if b.call("EXISTS", "over-limit"):
            soft_fail("the SET over the size limit reached %s" % b.text)
    del over

    good.phase = "the default size limit, another pool"
    with Resp(dflt_addr, timeout=60) as c:
        r = c.call("SET", "dflt-2mib", b"d" * (2 * MAX_REQUEST))
        if r != b"OK":
            soft_fail("pool dflt: a SET of 2 MiB (over the other pool's limit) answered %r" % (r,))
        c.call("DEL", "dflt-2mib")
    # Only the headers: the parser knows the whole size from the lengths.
    head = b"*3\r\n$3\r\nSET\r\n$4\r\ndflt\r\n"
    n = default_request - len(head) - len(b"$%d\r\n" % default_request) - 2
    at_limit = head + b"$%d\r\n" % n
    assert len(at_limit) + n + 2 == default_request
    s = raw(dflt_addr)
    s.sendall(at_limit + b"d" * 1000)
    s.shutdown(socket.SHUT_WR)
    kind, data = outcome(s)
    s.close()
    results["default limit, announced"] = kind
    if kind != "close" or data:
        soft_fail("pool dflt: a request announcing exactly the default limit (%d bytes), then a "
                  "half-close: expected a close without a reply, got %s %r" % (
                      default_request, kind, data[:100]))
    over_head = head + b"$%d\r\n" % (n + 1)
    got = check_bad("pool dflt: announced default+1 bytes", raw(dflt_addr), send=over_head)
    results["default limit + 1, announced"] = got
    if got != "error":
        soft_fail("pool dflt: a request announcing the default limit + 1 byte got %s, not an "
                  "error reply from its header alone" % got)

    good.phase = "a client that never reads"
    # --- a client that never reads ----------------------------------------------------------------
    value = b"z" * (1 << 20)
    # SET through pool dflt: this request is over the "bad" pool's limit. Both pools place keys
    # alike (same servers, hash and distribution).
    with Resp(dflt_addr, timeout=30) as c:
        if c.call("SET", "bigvalue", value) != b"OK":
            fail("SET of a 1 MiB value failed")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)    # before connect: small window
    s.settimeout(BAD_BOUND)
    s.connect(addr)
    sent, closed, peak, pinged = 0, False, 0, 0.0
    # Enough replies to exceed the pending limit 4 times over, plus the kernel's buffers.
    max_gets = 4 * (max_pending >> 20) + 64

    def sent_until_closed():
        """One step: 8 more GETs (then a PING every PING_EVERY s, to learn whether the
        connection was closed) and a look at the proxy's RSS; true once there is no more to
        do (closed, or a failure recorded)."""
        nonlocal sent, closed, peak, pinged
        try:
            if sent < max_gets:
                s.sendall(encode("GET", "bigvalue") * 8)
                sent += 8
            elif time.monotonic() - pinged >= PING_EVERY:
                s.sendall(encode("PING"))
                pinged = time.monotonic()
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            return True
        except socket.timeout:
            soft_fail("slow reader: a send blocked for %gs (the proxy stopped reading?)" % BAD_BOUND)
            return True
        rss = proxy.rss_kib() or 0
        peak = max(peak, rss)
        if rss > RSS_BOUND_KIB:
            soft_fail("slow reader: proxy RSS %d MiB after %d GETs of 1 MiB unread" % (
                rss >> 10, sent))
            return True
        return False
    poll_until(sent_until_closed, 60, poll=0.01)
    s.close()
    results["never reads"] = ("close after %d GETs" % sent) if closed else "open"
    if not closed:
        soft_fail("slow reader: not closed after %d GETs of a 1 MiB value (%d MiB of replies, "
                  "limit %d MiB) within 60s; proxy RSS peak %d MiB" % (
                      sent, sent, max_pending >> 20, peak >> 10))

    good.phase = "abrupt connections"
    # --- many abrupt connections ---------------------------------------------------------------------
    for i in range(200):
        s = raw(addr)
        s.sendall(b"*2\r\n$3\r\nGET\r\n$%d\r\nkey" % (10 + i))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()

    good.phase = "the end"
    log("the end phase starts at t=%.2fs" % (time.monotonic() - T0))
    # --- the good client, the proxy, at the end -------------------------------------------------
    # 50 more SET+GET of the good client after the abrupt connections (checked below).
    ops = good.ops
    poll_until(lambda: good.ops >= ops + 100 or good.errors, 2 * REPLY_BOUND)
    good.stop_flag.set()
    good.join(timeout=2 * REPLY_BOUND)
    if good.is_alive():
        soft_fail("the good client is stuck in a request")
    if good.errors:
        soft_fail("the good client saw %d failures, e.g. %s" % (len(good.errors), good.errors[:3]))
    if good.ops < 100 or good.ops < ops + 100:
        soft_fail("the good client did only %d operations (%d at the end phase)" % (
            good.ops, good.ops - ops))
    if not proxy.alive():
        fail("chash-proxy died; stderr:\n%s" % tail(proxy.stderr))
    with Resp(addr) as c:
        if c.call("PING") != b"PONG" or c.call("GET", "halfclose") != b"hc":
            soft_fail("a fresh client is not served at the end")
    # Only the good client (gone now) and none of the bad ones may remain connected.
    def connected():
        return proxy.stats_json().get("bad", {}).get("client_connections")
    if not poll_until(lambda: connected() == 0, 5):
        n = connected()
        soft_fail("stats: pool client_connections is %r after every client left (leaked "
                  "connections?)" % (n,))
    proxy.stop()
    log("outcomes: " + "; ".join("%s: %s" % kv for kv in results.items()))
    return "good client: %d operations, worst SET+GET %.3fs (during %s)" % (
        good.ops, good.worst, good.worst_at)


if __name__ == "__main__":
    run_test(body, options=lambda ap: ap.add_argument(
        "header", metavar="CHASH_CONFIG_H", help="include/chash_config.h, for the defaults"))
