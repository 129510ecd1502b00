#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_admin_host: the admin port (--metrics-port) checks Host on every endpoint, so a
DNS-rebinding page cannot read /metrics (every server's address) nor reload (issue 28).

chash-proxy with --metrics-port and --admin-allow-host scrape.example; raw HTTP requests:
- GET /metrics (and HEAD) with a foreign Host (rebound.example, with and without a port; a
  name that only ends like a listed one): 403 with a short text body, no metric in it (before:
  200 and the metrics). A malformed port (127.0.0.1:x) is not host[:port]: 400 (RFC 9112
  section 3.2; issue 35).
- Two Host headers: 400 on /metrics and on POST /-/reload, whichever comes first, the foreign
  or the local one, and two equal local ones too (before: /metrics 200, the reload judged by
  the first: 200 when it was local).
- Accepted: 127.0.0.1:PORT, [::1]:PORT, localhost, scrape.example:PORT, SCRAPE.EXAMPLE (any
  case), no Host at all (HTTP/1.0): 200 with the metrics; POST /-/reload with a listed name:
  200, reloads one up. A refused request never reloads.
- --admin-allow-host with a port or a bad character: refused at start, exit 1.

Usage: test_admin_host.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import promtext  # noqa: E402
from proxyharness import Proxy, fail, free_ports, log, run_test, write_file  # noqa: E402

NAME = "scrape.example"


def ask(port, method, path, hosts, version="HTTP/1.1"):
    """(status, body) of one request carrying a Host header per entry of hosts."""
    raw = "%s %s %s\r\n" % (method, path, version)
    raw += "".join("Host: %s\r\n" % h for h in hosts) + "User-Agent: t\r\n\r\n"
    code, _, body = promtext.parse_response(promtext.http(port, raw.encode()),
                                            head=method == "HEAD")
    return code, body


def body(t):
    port, mport = free_ports(2)
    conf = write_file(os.path.join(t.tmp, "h.yml"), "\n".join([
        "h:", "  listen: 127.0.0.1:%d" % port, "  redis: true", "  servers:",
        "   - 127.0.0.1:1:1", ""]))
    p = Proxy(t.proxy, t.tmp, conf, [("127.0.0.1", port)], label="host",
              extra_args=["--metrics-port", str(mport), "--admin-allow-host", NAME,
                          "--admin-allow-host", "other.example"]).start()
    local = "127.0.0.1:%d" % mport
    reloads = p.stats_json()["reloads"]

    for host in ["rebound.example:%d" % mport, "rebound.example", "evil" + NAME,
                 NAME + ".evil", "localhost.evil"]:
        for method in ("GET", "HEAD"):
            code, b = ask(mport, method, "/metrics", [host])
            if code != 403 or b"chash_proxy" in b or len(b) > 200:
                fail("%s /metrics, Host %r: %d %r (want 403, a short body)" % (
                    method, host, code, b[:300]))
    code, b = ask(mport, "POST", "/-/reload", ["rebound.example"])
    if code != 403:
        fail("POST /-/reload, a foreign Host: %d %r" % (code, b))
    for method in ("GET", "HEAD"):
        code, b = ask(mport, method, "/metrics", ["127.0.0.1:x"])
        if code != 400 or b"chash_proxy" in b:
            fail("%s /metrics, Host 127.0.0.1:x: %d %r (want 400)" % (method, code, b[:300]))
    log("a foreign Host: 403 on /metrics (GET, HEAD; 5 forms) and /-/reload; a malformed one 400")

    for hosts in ([local, "rebound.example"], ["rebound.example", local], [local, local]):
        for method, path in (("GET", "/metrics"), ("POST", "/-/reload")):
            code, b = ask(mport, method, path, hosts)
            if code != 400 or b"chash_proxy" in b:
                fail("%s %s with Host headers %r: %d %r (want 400)" % (method, path, hosts, code,
                                                                      b[:300]))
    log("two Host headers: 400 on /metrics and /-/reload, whatever the first says")
    if p.stats_json()["reloads"] != reloads:
        fail("a refused POST /-/reload reloaded")

    for host in [local, "[::1]:%d" % mport, "localhost", "LOCALHOST:%d" % mport,
                 "%s:%d" % (NAME, mport), NAME.upper(), "other.example"]:
        code, b = ask(mport, "GET", "/metrics", [host])
        if code != 200 or b"chash_proxy_" not in b:
            fail("GET /metrics, Host %r: %d %r (want 200 with the metrics)" % (host, code,
                                                                              b[:300]))
    code, b = ask(mport, "GET", "/metrics", [], version="HTTP/1.0")
    if code != 200:
        fail("GET /metrics over HTTP/1.0 without Host: %d" % code)
    code, b = ask(mport, "POST", "/-/reload", ["%s:%d" % (NAME, mport)])
    if code != 200 or p.stats_json()["reloads"] != reloads + 1:
        fail("POST /-/reload with a listed Host: %d %r, reloads %s (want 200, %d)" % (
            code, b, p.stats_json()["reloads"], reloads + 1))
    log("accepted: IPv4 and IPv6 literals, localhost, listed names in any case, no Host")
    p.stop()

    for bad in ("scrape.example:9121", "bad_name", ""):
        r = subprocess.run([t.proxy, "-c", conf, "--admin-allow-host", bad], capture_output=True,
                           timeout=30, stdin=subprocess.DEVNULL)
        if r.returncode != 1 or b"--admin-allow-host" not in r.stderr:
            fail("--admin-allow-host %r: exit %d, %r" % (bad, r.returncode, r.stderr[-300:]))
    return "Host checked on every admin path; duplicates 400; listed names accepted"


if __name__ == "__main__":
    run_test(body, programs=())
