#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_admin_http: the admin port (--metrics-port) parses HTTP/1.1 strictly (RFC 9112) and
its JSON cannot be read as a page (issue 35, item 2).

chash-proxy with --metrics-port in front of one real redis-server; raw requests, each answered
with the status docs/PROXY.md ("The admin port's HTTP") names, and none of them reloads:
- 400: whitespace between a field name and its colon (`Host : evil`, before: taken as a request
  without Host, 200), obsolete line folding (a field line that starts with a space, before: 200),
  two Content-Length fields (equal or not) or a list or a signed one (before: 200), a bare CR
  in a field, a NUL, a field name with a separator, an empty field name, a field line without
  a colon, an HTTP/1.1 request without Host, Transfer-Encoding in HTTP/1.0 or beside
  Content-Length, a fragment or a byte RFC 3986 does not allow in the target, a request line
  without a version;
- 413: a body (Content-Length above 0; no endpoint takes one; before: the reload was run);
- 414: a request line over 2048 bytes (before: 404);
- 431: more than 64 field lines (before: 200), or a head over 8192 bytes;
- 501: Transfer-Encoding (no transfer coding is supported; before: POST /-/reload reloaded),
  a method longer than 32 bytes;
- 505: HTTP/2.0 (before: 400);
- 403: an absolute-form target naming a foreign authority (before: 404).
Still accepted (200): a plain HTTP/1.1 GET, HTTP/1.0 without Host, bare LF line ends, an empty
line before the request line, optional whitespace and obs-text around a field value,
Content-Length: 0 on POST /-/reload, an absolute-form target naming this proxy.
Every response carries X-Content-Type-Options: nosniff. GET /-/hotkeys with hot keys named
`</script><img src=x>` and `a&b`: Content-Type application/json, no '<', '>' or '&' byte in the
body (\\u003c, \\u003e, \\u0026 instead), and the JSON gives the key names back exactly (before:
the bytes as they are, no nosniff).

Usage: test_admin_http.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import promtext  # noqa: E402
from proxyharness import (Proxy, Resp, WAIT_TIMEOUT, encode, fail, free_ports, log,  # noqa: E402
                          poll_until, pool_yaml, run_test, start_redises, write_file)

SCRIPT = b"</script><img src=x>"
AMP = b"a&b"
HOT = 400


def ask(port, raw):
    """(status, {lower header: value}, body) of raw bytes sent to the admin port."""
    data = promtext.http(port, raw)
    if not data:
        fail("no response to %r" % raw[:120])
    return promtext.parse_response(data)


def cases(host):
    """(what, raw request, status): what the strict parser refuses, and what it still takes."""
    h = b"Host: " + host + b"\r\n"
    get = b"GET /metrics HTTP/1.1\r\n"
    post = b"POST /-/reload HTTP/1.1\r\n"
    return [
        ("a space before the colon (Host : evil)", get + b"Host : evil\r\n\r\n", 400),
        ("a tab before the colon", get + h + b"X-A\t: 1\r\n\r\n", 400),
        ("Host : evil beside a good Host", get + h + b"Host : evil\r\n\r\n", 400),
        ("obsolete line folding", get + h + b"X-A: a\r\n b\r\n\r\n", 400),
        ("a folded Host", get + h[:-2] + b"\r\n evil.example\r\n\r\n", 400),
        ("whitespace before the first field", get + b" \r\n" + h + b"\r\n", 400),
        ("two equal Content-Length", post + h + b"Content-Length: 0\r\nContent-Length: 0\r\n\r\n",
         400),
        ("conflicting Content-Length", post + h + b"Content-Length: 0\r\nContent-Length: 5"
         b"\r\n\r\nhello", 400),
        ("a Content-Length list", post + h + b"Content-Length: 0, 0\r\n\r\n", 400),
        ("a signed Content-Length", post + h + b"Content-Length: +0\r\n\r\n", 400),
        ("a bare CR in a field", get + h + b"X-A: a\rb\r\n\r\n", 400),
        ("a NUL in a field", get + h + b"X-A: a\x00b\r\n\r\n", 400),
        ("a separator in a field name", get + h + b"X(A): 1\r\n\r\n", 400),
        ("an empty field name", get + h + b": 1\r\n\r\n", 400),
        ("a field line without a colon", get + h + b"X-A\r\n\r\n", 400),
        ("HTTP/1.1 without Host", get + b"User-Agent: t\r\n\r\n", 400),
        ("an empty Host", get + b"Host:\r\n\r\n", 400),
        ("Transfer-Encoding in HTTP/1.0", b"POST /-/reload HTTP/1.0\r\n" + h +
         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        ("Transfer-Encoding beside Content-Length", post + h + b"Transfer-Encoding: chunked\r\n"
         b"Content-Length: 5\r\n\r\n0\r\n\r\n", 400),
        ("a fragment in the target", b"GET /metrics#x HTTP/1.1\r\n" + h + b"\r\n", 400),
        ("a byte RFC 3986 refuses in the target", b"GET /metrics|x HTTP/1.1\r\n" + h + b"\r\n",
         400),
        ("a bad percent-encoding", b"GET /metrics%zz HTTP/1.1\r\n" + h + b"\r\n", 400),
        ("no version (HTTP/0.9)", b"GET /metrics\r\n\r\n", 400),
        ("a body on POST /-/reload", post + h + b"Content-Length: 5\r\n\r\nhello", 413),
        ("a request line over 2048 bytes", b"GET /metrics?" + b"x" * 2100 + b" HTTP/1.1\r\n" +
         h + b"\r\n", 414),
        ("65 field lines", get + h + b"".join(b"X-%d: 1\r\n" % i for i in range(64)) + b"\r\n",
         431),
        ("a head over 8192 bytes", get + h + b"X-A: " + b"a" * 8300 + b"\r\n\r\n", 431),
        ("Transfer-Encoding: chunked", post + h + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
         501),
        ("Transfer-Encoding: gzip", get + h + b"Transfer-Encoding: gzip\r\n\r\n", 501),
        ("a method over 32 bytes", b"G" * 40 + b" /metrics HTTP/1.1\r\n" + h + b"\r\n", 501),
        ("HTTP/2.0", b"GET /metrics HTTP/2.0\r\n" + h + b"\r\n", 505),
        ("an absolute-form target naming another host", b"GET http://evil.example/metrics "
         b"HTTP/1.1\r\n" + h + b"\r\n", 403),
        # Still accepted.
        ("a plain HTTP/1.1 GET", get + h + b"User-Agent: t\r\n\r\n", 200),
        ("HTTP/1.0 without Host", b"GET /metrics HTTP/1.0\r\n\r\n", 200),
        ("bare LF line ends", b"GET /metrics HTTP/1.1\nHost: " + host + b"\n\n", 200),
        ("an empty line before the request line", b"\r\n" + get + h + b"\r\n", 200),
        ("whitespace and obs-text around a value", get + b"Host: \t" + host + b" \r\n"
         b"X-A: \xe9t\xe9 \t\r\n\r\n", 200),
        ("a field name of every tchar", get + h + b"!#$%&'*+-.^_`|~0aZ: 1\r\n\r\n", 200),
        ("an absolute-form target naming this proxy", b"GET http://" + host + b"/metrics "
         b"HTTP/1.1\r\n" + h + b"\r\n", 200),
    ]


def hot_keys(addr):
    """Reads each of the two keys HOT times through the proxy."""
    with Resp(addr, timeout=30) as r:
        r.call("SET", SCRIPT, "v")
        r.call("SET", AMP, "v")
        batch = [encode("GET", k) for k in (SCRIPT, AMP)] * 100
        for _ in range(HOT // 100):
            r.send(b"".join(batch))
            for _ in batch:
                r.read()


def body(t):
    redis = start_redises(t.programs["redis-server"], t.tmp, 1)[0]
    port, mport = free_ports(2)
    conf = write_file(os.path.join(t.tmp, "a.yml"), pool_yaml("a", port, [(redis.text, 1, None)],
                                                            hot_key_names=True))
    p = Proxy(t.proxy, t.tmp, conf, [("127.0.0.1", port)], label="admin",
              extra_args=["--metrics-port", str(mport)]).start()
    host = b"127.0.0.1:%d" % mport
    reloads = p.stats_json()["reloads"]
    wrong = []
    for what, raw, want in cases(host):
        code, headers, b = ask(mport, raw)
        if code != want:
            wrong.append("%s: %d %r (want %d)" % (what, code, b[:200], want))
        elif headers.get("x-content-type-options") != "nosniff":
            wrong.append("%s: no X-Content-Type-Options: nosniff (%r)" % (what, headers))
        elif want == 200 and b"chash_proxy_" not in b:
            wrong.append("%s: 200 without the metrics" % what)
        elif want != 200 and b"chash_proxy_" in b:
            wrong.append("%s: %d with the metrics" % (what, code))
    if wrong:
        fail("%d of %d requests answered wrongly:\n  %s" % (len(wrong), len(cases(host)),
                                                          "\n  ".join(wrong)))
    if p.stats_json()["reloads"] != reloads:
        fail("a refused POST /-/reload reloaded")
    code, _, b = ask(mport, b"POST /-/reload HTTP/1.1\r\nHost: " + host +
                     b"\r\nContent-Length: 0\r\n\r\n")
    if code != 200 or p.stats_json()["reloads"] != reloads + 1:
        fail("POST /-/reload with Content-Length: 0: %d %r" % (code, b))
    log("%d requests: each refused with its status or served, nosniff on all; "
        "Content-Length: 0 reloads" % len(cases(host)))

    hot_keys(("127.0.0.1", port))

    def listed():
        code, headers, b = ask(mport, b"GET /-/hotkeys HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
        if code != 200:
            fail("GET /-/hotkeys: %d %r" % (code, b[:300]))
        doc = json.loads(b.decode("utf-8"))
        keys = {e["key"].encode("latin-1") for pool in doc["pools"] for e in pool["keys"]}
        return (headers, b, keys) if {SCRIPT, AMP} <= keys else None
    got = poll_until(listed, WAIT_TIMEOUT)
    if got is None:
        fail("the hot keys %r and %r never listed by /-/hotkeys" % (SCRIPT, AMP))
    headers, b, _ = got
    if headers.get("content-type") != "application/json" or \
            headers.get("x-content-type-options") != "nosniff":
        fail("GET /-/hotkeys headers: %r" % headers)
    for ch in (b"<", b">", b"&"):
        if ch in b:
            fail("%r unescaped in /-/hotkeys: %r" % (ch, b[:400]))
    if b"\\u003c/script\\u003e\\u003cimg src=x\\u003e" not in b or b"a\\u0026b" not in b:
        fail("the keys not escaped as \\u003c, \\u003e, \\u0026: %r" % b[:400])
    p.stop()
    return "strict HTTP/1.1 on the admin port; /-/hotkeys escapes <, > and & with nosniff"


if __name__ == "__main__":
    run_test(body)
