#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_metrics: chash-proxy's Prometheus endpoint (--metrics-port) and its INFO reply.

chash-proxy in front of 3 real redis-servers, two pools: "alpha" (unnamed servers, ketama, a
server ejected at its first failure and not probed for 60 s) and "beta" (named servers, its own
`version` holding a double quote and a backslash, so label escaping shows). Known traffic on
alpha: 100 SET, 102 GET (2 with a wrong argument count), 10 MGET of 3 keys, 3 PING, 5 KEYS
(refused). Checked:
  - GET /metrics answers 200, Content-Type "text/plain; version=0.0.4", Content-Length right;
  - the body parses strictly as the text exposition format 0.0.4: every line a HELP/TYPE
    comment or `name{labels} value`; every family has one HELP and one TYPE before its samples,
    its samples contiguous; no series twice; label values escaped; histogram buckets ascending
    in le, cumulative, ending in +Inf equal to _count, with a _sum;
  - requests and errors per class equal the traffic exactly; the histogram's _count equals
    their sum; per-server requests sum to SET + GET + MGET fragments and agree with the stats
    JSON; client connection gauges;
  - chash_proxy_membership_info's version per pool equals `chash lookup --show-version`;
  - every family scraped is listed in docs/PROXY.md's Metrics section, and every one listed
    there is scraped;
  - redis-cli INFO shows chash_proxy_version and pool_<name>_membership_version;
  - other paths answer 404, another method 405; malformed, oversized and idle (slowloris)
    HTTP requests, and more idle connections than the endpoint holds, do not disturb the proxy
    or a scrape;
  - a backend SIGKILLed, then a request to it: its chash_proxy_server_up is 0, its ejections 1;
    the others stay up;
  - the proxy exits cleanly on SIGTERM with a metrics connection still open (no sanitizer
    report).

Usage: test_metrics.py CHASH_PROXY CHASH_CLI DOCS/PROXY.md
Exit: 0 pass, 1 fail, 77 skip (redis-server or redis-cli missing and CI unset).
"""
import os
import re
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, RespError, chash_lookup, fail, free_ports,  # noqa: E402
                          poll_until, pool_yaml, run_test, soft_fail, start_redises, write_file)
from promtext import HTTP_TIMEOUT, get, http, parse_response, scrape, value  # noqa: E402

BETA_VERSION = 'rel-7"blue"\\x'      # the YAML below holds it single-quoted, as is

# ---------------------------------------------------------------------------------------------


def documented_families(docs):
    with open(docs) as f:
        text = f.read()
    m = re.search(r"^## Metrics\n(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        fail("%s has no '## Metrics' section" % docs)
    return set(re.findall(r"`(chash_proxy_[a-z_]+)", m.group(1)))


def body(t):
    proxy_exe, chash, docs, tmp = t.proxy, t.chash, t.docs, t.tmp
    redis_exe, cli_exe = t.programs["redis-server"], t.programs["redis-cli"]
    backends = start_redises(redis_exe, tmp, 3)
    pa, pb, mport = free_ports(3)
    conf = write_file(os.path.join(tmp, "metrics.yml"),
                      pool_yaml("alpha", pa, [(b.text, 1, None) for b in backends],
                                hash="fnv1a_64", distribution="ketama", timeout=1000,
                                auto_eject_hosts=True, server_failure_limit=1,
                                server_retry_timeout=60000, server_retry_max=60000) +
                      pool_yaml("beta", pb, [(b.text, 1, n) for b, n in
                                             zip(backends, ("one", "two", "three"))],
                                version="'%s'" % BETA_VERSION))
    proxy = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", pa), ("127.0.0.1", pb),
                                         ("127.0.0.1", mport)],
                  extra_args=["--metrics-port", str(mport)]).start()

    # --- versions, before any traffic: what chash lookup --show-version says.
    want_version = {}
    for pool in ("alpha", "beta"):
        r = subprocess.run([chash, "lookup", "--config", conf, "--pool", pool, "--show-version",
                            "x"], capture_output=True, timeout=60)
        first = r.stdout.decode().split("\n")[0]
        if r.returncode != 0 or not first.startswith("# version "):
            fail("chash lookup --show-version: %r %r" % (first, r.stderr[:200]))
        want_version[pool] = first[len("# version "):]
    if want_version["beta"] != BETA_VERSION:
        fail("chash lookup reports beta's version as %r, the config says %r" % (
            want_version["beta"], BETA_VERSION))

    fams = scrape(mport)
    for pool in ("alpha", "beta"):
        got = [lab.get("version") for _, lab, _ in fams["chash_proxy_membership_info"]["samples"]
               if lab.get("pool") == pool]
        if got != [want_version[pool]]:
            soft_fail("membership_info of %s: %r, chash lookup says %r" % (
                pool, got, want_version[pool]))
        if value(fams, "chash_proxy_membership_info", pool=pool) != 1:
            soft_fail("membership_info of %s is not 1" % pool)
    docs_fams = documented_families(docs)
    if set(fams) != docs_fams:
        soft_fail("families scraped but not in docs/PROXY.md's Metrics: %s; listed there but "
                  "not scraped: %s" % (sorted(set(fams) - docs_fams),
                                       sorted(docs_fams - set(fams))))

    # --- known traffic on alpha, one connection, pipelined.
    keys = ["key:%d" % i for i in range(100)]
    held = Resp(("127.0.0.1", pa))
    cmds = [("SET", k, "v" + k) for k in keys] + [("GET", k) for k in keys]
    cmds += [("MGET", keys[3 * i], keys[3 * i + 1], keys[3 * i + 2]) for i in range(10)]
    cmds += [("PING",)] * 3 + [("KEYS", "*")] * 5 + [("GET",), ("GET", "a", "b")]
    got = held.pipeline(cmds)
    if got[:200] != [b"OK"] * 100 + [("v" + k).encode() for k in keys]:
        fail("SET/GET through the proxy: %r" % got[:3])
    if got[200:210] != [[("v" + k).encode() for k in keys[3 * i:3 * i + 3]] for i in range(10)]:
        fail("MGET through the proxy: %r" % got[200:202])
    if got[210:213] != [b"PONG"] * 3 or not all(isinstance(x, RespError) for x in got[213:]):
        fail("PING/KEYS/bad GET through the proxy: %r" % got[210:])

    fams = scrape(mport)
    want = {"read": (102, 2), "write": (100, 0), "multi": (10, 0), "local": (3, 0),
            "refused": (5, 5)}
    for cls, (nreq, nerr) in want.items():
        r = value(fams, "chash_proxy_requests_total", pool="alpha", **{"class": cls})
        e = value(fams, "chash_proxy_request_errors_total", pool="alpha", **{"class": cls})
        if (r, e) != (nreq, nerr):
            soft_fail("class %s: %r requests, %r errors; sent %d, %d" % (cls, r, e, nreq, nerr))
        if value(fams, "chash_proxy_requests_total", pool="beta", **{"class": cls}) != 0:
            soft_fail("pool beta counts %s requests it never received" % cls)
    total = sum(n for n, _ in want.values())
    hcount = value(fams, "chash_proxy_request_duration_seconds",
                   "chash_proxy_request_duration_seconds_count", pool="alpha")
    if hcount != total:
        soft_fail("latency histogram _count %r, requests %d" % (hcount, total))
    hsum = value(fams, "chash_proxy_request_duration_seconds",
                 "chash_proxy_request_duration_seconds_sum", pool="alpha")
    if not 0 < hsum < total * 10:
        soft_fail("latency histogram _sum %r for %d requests" % (hsum, total))
    frags = value(fams, "chash_proxy_fragments_total", pool="alpha")
    if not 10 <= frags <= 30:
        soft_fail("fragments_total %r for 10 MGETs of 3 keys" % frags)
    srv = {lab["server"]: v for n, lab, v in fams["chash_proxy_server_requests_total"]["samples"]
           if lab["pool"] == "alpha"}
    if set(srv) != {b.text for b in backends}:
        soft_fail("alpha's servers in the scrape: %r" % sorted(srv))
    # SET, GET and "GET a b" (Redis itself refuses its argument count) are forwarded.
    if sum(srv.values()) != 201 + frags:
        soft_fail("server requests sum to %r; sent 201 + %r fragments" % (sum(srv.values()),
                                                                           frags))
    stats = proxy.stats_json()
    for name, v in srv.items():
        if stats["alpha"].get(name, {}).get("requests") != v:
            soft_fail("server %s: %r requests in /metrics, %r in the stats JSON" % (
                name, v, stats["alpha"].get(name, {}).get("requests")))
        resp = value(fams, "chash_proxy_server_responses_total", pool="alpha", server=name)
        if resp != v:
            soft_fail("server %s: %r requests, %r responses" % (name, v, resp))
        if value(fams, "chash_proxy_server_up", pool="alpha", server=name) != 1:
            soft_fail("server %s not up before any failure" % name)
    if value(fams, "chash_proxy_client_connections", pool="alpha") != 1:
        soft_fail("client_connections of alpha: %r, 1 held" % value(
            fams, "chash_proxy_client_connections", pool="alpha"))
    if value(fams, "chash_proxy_client_connections_accepted_total", pool="alpha") < 2:
        soft_fail("client_connections_accepted_total of alpha below 2 (start-up probe + held)")

    # --- INFO through redis-cli.
    r = subprocess.run([cli_exe, "-h", "127.0.0.1", "-p", str(pa), "INFO"], capture_output=True,
                       timeout=20)
    info = r.stdout.decode("utf-8", "replace")
    if r.returncode != 0 or not re.search(r"^chash_proxy_version:\S+\r?$", info, re.M):
        soft_fail("redis-cli INFO: %r %r" % (info[:300], r.stderr[:200]))
    for pool in ("alpha", "beta"):
        line = "pool_%s_membership_version:%s" % (pool, want_version[pool])
        if line not in info.replace("\r", "").split("\n"):
            soft_fail("redis-cli INFO lacks %r: %r" % (line, info[:400]))

    # --- HTTP edge cases: none of them disturbs the proxy.
    for path in ("/", "/metricsx", "/metrics/x", "/foo"):
        code = get(mport, path)[0]
        if code != 404:
            soft_fail("GET %s answered %d, not 404" % (path, code))
    if get(mport, "/metrics?x=1")[0] != 200:
        soft_fail("GET /metrics?x=1 is not 200")
    if get(mport, "/metrics", method="POST")[0] != 405:
        soft_fail("POST /metrics is not 405")
    code, headers, body = get(mport, "/metrics", method="HEAD")
    if code != 200 or body != b"":
        soft_fail("HEAD /metrics: %d with %d body bytes" % (code, len(body)))
    idle = []
    for raw in (b"\x00\xff\xfe garbage\r\n\r\n", b"GET\r\n\r\n", b"GET /metrics HTTP/9\r\n\r\n",
                b"GET  /metrics HTTP/1.0\r\n\r\n", b"G" * 20000):
        data = http(mport, raw)
        if data:
            code = parse_response(data)[0]
            if code not in (400, 431):
                soft_fail("malformed request %r answered %d" % (raw[:30], code))
    for _ in range(40):          # idle (slowloris) connections, more than the endpoint holds
        s = socket.create_connection(("127.0.0.1", mport), timeout=HTTP_TIMEOUT)
        s.sendall(b"GET /metrics HTTP/1.0\r\nX: ")
        idle.append(s)
    fams = scrape(mport)          # still served, the oldest idle one made room
    if held.call("GET", keys[0]) != ("v" + keys[0]).encode():
        fail("the proxy stopped serving after the malformed HTTP requests")
    if not proxy.alive():
        fail("the proxy died on malformed HTTP requests")

    # --- a backend killed: its server_up goes to 0 once a request finds it down.
    owners = chash_lookup(chash, conf, "alpha", [k.encode() for k in keys])
    vkey = keys[0]                     # (fnv1a_64 on keys this alike can skip a backend)
    victim = next(b for b in backends if b.text == owners[vkey.encode()])
    victim.kill()
    seen = {}

    def down():
        held.call("GET", vkey)         # a read: fails over; the failure ejects (limit 1)
        seen["fams"] = scrape(mport)
        seen["up"] = value(seen["fams"], "chash_proxy_server_up", pool="alpha",
                           server=victim.text)
        return seen["up"] == 0
    if not poll_until(down, 15, poll=0.2):
        soft_fail("server_up of the killed backend still %r" % seen["up"])
    fams = seen["fams"]
    ej = value(fams, "chash_proxy_server_ejections_total", pool="alpha", server=victim.text)
    if ej != 1:
        soft_fail("ejections of the killed backend: %r" % ej)
    if value(fams, "chash_proxy_server_errors_total", pool="alpha", server=victim.text) < 1:
        soft_fail("no connection error counted for the killed backend")
    for b in backends:
        if b is not victim and value(fams, "chash_proxy_server_up", pool="alpha",
                                     server=b.text) != 1:
            soft_fail("server %s is down after another was killed" % b.text)
    for pool in ("alpha", "beta"):
        scrape_info = [lab.get("version") for _, lab, _ in
                       fams["chash_proxy_membership_info"]["samples"] if lab.get("pool") == pool]
        if scrape_info != [want_version[pool]]:
            soft_fail("membership_info of %s changed to %r" % (pool, scrape_info))

    held.close()
    proxy.stop()                  # with idle metrics connections open: a clean exit
    for s in idle:
        s.close()
    return "%d families, %d requests counted by class" % (len(fams), total)


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "redis-cli"), options=lambda ap: ap.add_argument(
        "docs", metavar="PROXY_MD", help="docs/PROXY.md, whose Metrics section lists the families"))
