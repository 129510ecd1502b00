#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_secrets: chash-proxy keeps secrets and its admin port (issue 16, finding 6).

Real redis-servers with a password. chash-proxy (1 worker, -v 7: every log line it has) serves
a pool whose redis_auth is wrong (the backend refuses the proxy's AUTH), a pool with the right
one and a client_auth, with --metrics-port and --admin-token-file. Checked:

- Nothing secret is logged or echoed: after clients AUTH wrongly and rightly, the backend
  refuses the proxy's AUTH, a reload is refused for a password typed into the wrong key, and the
  admin port answers refusals, no byte sequence of 2 or more from the start of any configured
  password or the token (each begins with "Q#", which nothing else prints) appears in the log,
  on stderr, or in any HTTP body. (Before: the refused-AUTH line carried the AUTH command's
  first bytes, and the 400 body echoed the misplaced value.)
- AUTH guessing: a connection is closed after 3 wrong passwords in a row; after 20 wrong ones
  from one address, even the right password is refused for a while (before: 67k guesses/s on
  one connection, none refused).
- The admin port refuses what a web page could send: an Origin header or a cross-site
  Sec-Fetch-Site is 403 on every path, a foreign Host (DNS rebinding) is 403 on every path
  too (a scraper's name must be listed with --admin-allow-host: proxy_admin_host), and none of
  them reloads; POST /-/reload needs the bearer
  token (401 without or with a wrong one).
- The stats port listens on 127.0.0.1 when -a is not given (twemproxy: 0.0.0.0).

Usage: test_secrets.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Closed, Proxy, Resp, RespError, fail, free_ports, log,  # noqa: E402
                          run_test, sanitizer_env, soft_fail, spawn, start_redises, wait_accepting,
                          write_file)
import promtext  # noqa: E402

BACKEND_PASS = "Q#backend-pass-7731"
WRONG_PASS = "Q#wrong-1"  # 9 bytes: "$9\r\n", so 20 bytes of AUTH reach its 2nd byte
CLIENT_PASS = "Q#client-pass-9920"
TOKEN = "Q#token-5521"
MISPLACED = "Q#misplaced-secret-3391"
SECRETS = (BACKEND_PASS, WRONG_PASS, CLIENT_PASS, TOKEN, MISPLACED)


def http(port, raw):
    """(status, body) of one raw request to the admin port."""
    head, _, body = promtext.http(port, raw).partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def config(ports, backend):
    return ("wrongauth:\n  listen: 127.0.0.1:%d\n  redis: true\n  redis_auth: \"%s\"\n"
            "  servers:\n   - %s:1\n"
            "guarded:\n  listen: 127.0.0.1:%d\n  redis: true\n  redis_auth: \"%s\"\n"
            "  client_auth: \"%s\"\n  servers:\n   - %s:1\n") % (
                ports[0], WRONG_PASS, backend.text, ports[1], BACKEND_PASS, CLIENT_PASS,
                backend.text)


def leaks(data):
    """The secrets whose 2-byte-or-longer prefixes appear in data (bytes)."""
    out = []
    for s in SECRETS:
        b = s.encode()
        for n in range(len(b), 1, -1):
            if b[:n] in data:
                out.append("%s... (%d bytes of it)" % (s[:2], n))
                break
    return out


def body(t):
    proxy_exe, redis_server, tmp = t.proxy, t.programs["redis-server"], t.tmp
    (backend,) = start_redises(redis_server, tmp, 1, password=BACKEND_PASS)
    ports = free_ports(3)
    conf = write_file(os.path.join(tmp, "secrets.yml"), config(ports, backend))
    token_file = write_file(os.path.join(tmp, "token"), TOKEN + "\n")
    mport = ports[2]
    p = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", ports[0]), ("127.0.0.1", ports[1])],
              label="secrets", verbosity=7,
              extra_args=("--threads", "1", "--metrics-port", str(mport), "--admin-token-file",
                          token_file)).start()
    bodies = []

    # Traffic: the wrong-auth pool's backend refuses the proxy's AUTH.
    with Resp(("127.0.0.1", ports[0])) as c:
        r = c.call("SET", "k", "v")
        if not isinstance(r, RespError):
            fail("a backend that refused AUTH still took a SET: %r" % r)
    # Clients: wrong then right passwords.
    with Resp(("127.0.0.1", ports[1])) as c:
        if not isinstance(c.call("AUTH", "Q#guess-one"), RespError):
            fail("a wrong client password was accepted")
        if c.call("AUTH", CLIENT_PASS) != b"OK" or c.call("SET", "k", "v") != b"OK":
            fail("the right client password did not work")

    # A connection is closed after 3 wrong passwords in a row.
    with Resp(("127.0.0.1", ports[1])) as c:
        c.send(b"".join(b"*2\r\n$4\r\nAUTH\r\n$7\r\nQ#bad-%d\r\n" % i for i in range(6)))
        answers, closed = 0, False
        try:
            for _ in range(6):
                c.read()
                answers += 1
        except (Closed, OSError):
            closed = True
        if not closed or answers != 3:
            fail("after wrong passwords: %d answers, connection %s (want 3, closed)" % (
                answers, "closed" if closed else "open"))

    # The admin port.
    checks = [
        ("GET /metrics with Origin", b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
         b"Origin: http://evil.example\r\n\r\n", 403),
        ("POST /-/reload with Origin", b"POST /-/reload HTTP/1.1\r\nHost: 127.0.0.1\r\n"
         b"Origin: http://evil.example"
         b"\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n\r\n", 403),
        ("POST /-/reload cross-site", b"POST /-/reload HTTP/1.1\r\nHost: 127.0.0.1\r\n"
         b"Sec-Fetch-Site: cross-site"
         b"\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n\r\n", 403),
        ("POST /-/reload, a foreign Host", b"POST /-/reload HTTP/1.1\r\nHost: rebound.example:%d"
         b"\r\nAuthorization: Bearer " % mport + TOKEN.encode() + b"\r\n\r\n", 403),
        ("GET /metrics, a host name not listed", b"GET /metrics HTTP/1.1\r\nHost: "
         b"scraped.example:%d\r\n\r\n" % mport, 403),
        ("POST /-/reload without the token", b"POST /-/reload HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
         401),
        ("POST /-/reload, a wrong token", b"POST /-/reload HTTP/1.1\r\nHost: 127.0.0.1\r\n"
         b"Authorization: Bearer "
         b"Q#nope\r\n\r\n", 401),
        ("GET /metrics, Host 127.0.0.1:port", b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n"
         % mport, 200),
        ("GET /metrics, HTTP/1.0 without Host", b"GET /metrics HTTP/1.0\r\n\r\n", 200),
    ]
    before = p.stats_json()["reloads"]
    for what, raw, want in checks:
        code, b = http(mport, raw)
        bodies.append(b)
        if code != want:
            soft_fail("%s: %d, expected %d" % (what, code, want))
    if p.stats_json()["reloads"] != before:
        fail("a refused POST /-/reload reloaded")
    # With the token: a reload; then one refused for a password typed into the wrong key.
    code, b = http(mport, b"POST /-/reload HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "
                   + TOKEN.encode() + b"\r\n\r\n")
    bodies.append(b)
    if code != 200:
        fail("POST /-/reload with the token: %d %r" % (code, b))
    write_file(conf, config(ports, backend).replace("  redis: true\n  redis_auth: \"%s\"" %
                                                    WRONG_PASS, "  redis: true\n  timeout: \"%s\""
                                                    % MISPLACED, 1))
    code, b = http(mport, b"POST /-/reload HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   b"Authorization: Bearer " + TOKEN.encode() + b"\r\n\r\n")
    bodies.append(b)
    if code != 400 or b"timeout" not in b or b"secrets.yml:" not in b:
        fail("a reload with a bad timeout: %d %r (want 400 naming the file and the key)" % (
            code, b))

    # 20 wrong passwords from one address: then even the right one is refused, for a while.
    for i in range(7):
        with Resp(("127.0.0.1", ports[1])) as c:
            for _ in range(3):
                try:
                    c.call("AUTH", "Q#brute-%d" % i)
                except (Closed, OSError):
                    break
    with Resp(("127.0.0.1", ports[1])) as c:
        r = c.call("AUTH", CLIENT_PASS)
        if not (isinstance(r, RespError) and "too many" in str(r.args[0])):
            soft_fail("after 21 wrong passwords from one address, the right one: %r" % (r,))

    p.stop()
    # Nothing secret anywhere it wrote or said.
    for what, path in (("log", p.log), ("stderr", p.stderr), ("stdout", p.stdout)):
        with open(path, "rb") as f:
            found = leaks(f.read())
        if found:
            soft_fail("the %s holds secrets: %s" % (what, ", ".join(found)))
    for b in bodies:
        found = leaks(b)
        if found:
            soft_fail("an HTTP body holds secrets: %s: %r" % (", ".join(found), b[:200]))

    # The stats port is loopback-only by default.
    sport = free_ports(1)[0]
    conf2 = write_file(os.path.join(tmp, "plain.yml"), "plain:\n  listen: 127.0.0.1:%d\n"
                       "  redis: true\n  servers:\n   - %s:1\n" % (free_ports(1)[0], backend.text))
    q = spawn([proxy_exe, "-c", conf2, "-s", str(sport)], os.path.join(tmp, "plain.out"),
              os.path.join(tmp, "plain.err"), env=sanitizer_env())
    try:
        wait_accepting(q, [("127.0.0.1", sport)], os.path.join(tmp, "plain.err"), "chash-proxy")
        with open("/proc/net/tcp") as f:
            rows = [line.split() for line in f.readlines()[1:]]
        local = [r[1] for r in rows if r[3] == "0A" and int(r[1].split(":")[1], 16) == sport]
        if local != ["0100007F:%04X" % sport]:
            fail("the stats port listens on %r without -a (want 127.0.0.1 only)" % local)
    finally:
        q.terminate()
        q.wait(timeout=15)
    log("no secret in the log, stderr or HTTP bodies; AUTH guessing closed and refused; the "
        "admin port refuses cross-origin, cross-site and foreign-Host requests and needs its "
        "token; stats on 127.0.0.1 by default")
    return "%d admin requests, %d secrets grepped for" % (len(bodies), len(SECRETS))


if __name__ == "__main__":
    run_test(body)
