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
  - every family scraped has a row in docs/PROXY.md's Metrics table, and every one there is
    scraped;
  - every scrape passes `promtool check metrics` (Prometheus' linter: base units, _total on
    counters and only on them; skipped, saying so, where promtool is absent and CI unset);
  - process_* as the client libraries define them, against /proc/PID of the proxy read here:
    open fds (/proc/PID/fd), max fds (its RLIMIT_NOFILE), start time (/proc/PID/stat's starttime
    + /proc/stat's btime), CPU seconds between two readings around the scrape, virtual memory
    between them within 64 MiB, RSS within 10%;
  - reloads: an unchanged file on SIGHUP (ok 0 -> 1), an invalid one on POST /-/reload (error
    0 -> 1, 400), the good one again (ok 2): chash_proxy_reloads_total by result,
    chash_proxy_last_reload_timestamp_seconds between the wall-clock times around each and
    moving forward, chash_proxy_last_reload_successful 1, 0, 1;
  - per server, request/response bytes and the four queue gauges equal the stats JSON's in a
    quiet state; 20 SETs of 1,000 bytes and 20 GETs of them to one key grow its owner's byte
    counters by at least their encoded size and no other server's; a GET to a SIGSTOPped
    backend shows in its out_queue_requests/_bytes (1, the request's bytes) until it answers;
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
import resource
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, RespError, chash_lookup, encode, fail,  # noqa: E402
                          free_ports, poll_until, pool_yaml, run_test, sigstop, soft_fail,
                          start_redises, write_file)
from promtext import (HTTP_TIMEOUT, PROCESS_FAMILIES, get, http, parse_response,  # noqa: E402
                      scrape, value)

BETA_VERSION = 'rel-7"blue"\\x'      # the YAML below holds it single-quoted, as is

# ---------------------------------------------------------------------------------------------


def documented_families(docs):
    with open(docs) as f:
        text = f.read()
    m = re.search(r"^## Metrics\n(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        fail("%s has no '## Metrics' section" % docs)
    # the table's rows (`name` | type | ...), not the names the prose mentions (renamed ones)
    return set(re.findall(r"^\| `((?:chash_proxy|process)_[a-z_]+)` \| (?:counter|gauge|"
                          r"histogram) \|", m.group(1), re.M))


# ---------------------------------------------------------------------------------------------
# The proxy's process as /proc shows it, read independently of the proxy.

def proc_stat(pid):
    """{field: value} of /proc/PID/stat (proc(5): utime 14, stime 15, starttime 22, vsize 23),
    read after the command name's last ')'."""
    with open("/proc/%d/stat" % pid) as f:
        text = f.read()
    rest = text[text.rindex(")") + 2:].split()      # field 3 (state) on
    return {"utime": int(rest[14 - 3]), "stime": int(rest[15 - 3]),
            "starttime": int(rest[22 - 3]), "vsize": int(rest[23 - 3])}


def vm_rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    fail("no VmRSS in /proc/%d/status" % pid)


def boot_time():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return int(line.split()[1])
    fail("no btime in /proc/stat")


def check_process(pid, mport):
    """process_* of a scrape against /proc/PID read around it (a quiet proxy)."""
    hz = os.sysconf("SC_CLK_TCK")
    st0, rss0 = proc_stat(pid), vm_rss_bytes(pid)
    fams = scrape(mport, lint="process")
    st1, rss1 = proc_stat(pid), vm_rss_bytes(pid)
    fds = len(os.listdir("/proc/%d/fd" % pid))      # after: the scrape's connection closed
    for name in PROCESS_FAMILIES:
        if name not in fams:
            fail("no %s in the scrape" % name)
    got = {name: value(fams, name) for name in PROCESS_FAMILIES}
    # the scrape's own connection was open while the proxy counted
    if not fds - 1 <= got["process_open_fds"] <= fds + 2:
        soft_fail("process_open_fds %r; /proc/%d/fd lists %d" % (got["process_open_fds"], pid,
                                                                  fds))
    soft_limit = resource.prlimit(pid, resource.RLIMIT_NOFILE)[0]
    if got["process_max_fds"] != soft_limit:
        soft_fail("process_max_fds %r; the proxy's RLIMIT_NOFILE soft limit is %d" % (
            got["process_max_fds"], soft_limit))
    start = boot_time() + st0["starttime"] / hz
    if abs(got["process_start_time_seconds"] - start) > 0.011:
        soft_fail("process_start_time_seconds %r; /proc says %.2f" % (
            got["process_start_time_seconds"], start))
    cpu0, cpu1 = (st0["utime"] + st0["stime"]) / hz, (st1["utime"] + st1["stime"]) / hz
    if not cpu0 - 0.001 <= got["process_cpu_seconds_total"] <= cpu1 + 0.001:
        soft_fail("process_cpu_seconds_total %r; /proc says %.2f before the scrape, %.2f after" % (
            got["process_cpu_seconds_total"], cpu0, cpu1))
    # (slack: an allocation mapped and unmapped while the proxy built the scrape)
    vlo, vhi = min(st0["vsize"], st1["vsize"]) - 2**26, max(st0["vsize"], st1["vsize"]) + 2**26
    if not vlo <= got["process_virtual_memory_bytes"] <= vhi:
        soft_fail("process_virtual_memory_bytes %r; /proc says %d before, %d after" % (
            got["process_virtual_memory_bytes"], st0["vsize"], st1["vsize"]))
    if not 0.9 * min(rss0, rss1) <= got["process_resident_memory_bytes"] <= 1.1 * max(rss0,
                                                                                     rss1):
        soft_fail("process_resident_memory_bytes %r; VmRSS %d before, %d after" % (
            got["process_resident_memory_bytes"], rss0, rss1))
    return got


# ---------------------------------------------------------------------------------------------
# Reloads.

def post_reload(mport):
    return parse_response(http(mport, b"POST /-/reload HTTP/1.0\r\nHost: 127.0.0.1\r\n"
                                      b"Content-Length: 0\r\n\r\n"))


def reload_state(fams):
    return (value(fams, "chash_proxy_reloads_total", result="ok"),
            value(fams, "chash_proxy_reloads_total", result="error"),
            value(fams, "chash_proxy_last_reload_timestamp_seconds"),
            value(fams, "chash_proxy_last_reload_successful"))


def check_reloads(proxy, mport, conf):
    """A good reload on SIGHUP, a bad one and a good one on POST /-/reload: the counters, the
    last one's wall-clock time and outcome after each."""
    fams = scrape(mport, lint="before any reload")
    if reload_state(fams) != (0, 0, 0, 1):
        soft_fail("before any reload: (ok, error, timestamp, successful) = %r, not (0, 0, 0, 1)"
                  % (reload_state(fams),))
    good = open(conf).read()
    last_ts = 0.0
    steps = (("SIGHUP, unchanged file", None, (1, 0, 1)),
             ("POST /-/reload, invalid file", "alpha:\n  listen: [oops\n", (1, 1, 0)),
             ("POST /-/reload, the good file again", good, (2, 1, 1)))
    for what, text, (ok, err, success) in steps:
        if text is not None:
            write_file(conf + ".tmp", text)
            os.rename(conf + ".tmp", conf)
        t0 = time.time()
        if text is None:
            proxy.proc.send_signal(signal.SIGHUP)
        else:
            code = post_reload(mport)[0]
            if code != (400 if success == 0 else 200):
                soft_fail("%s: answered %d" % (what, code))
        seen = {}

        def counted():
            seen["fams"] = scrape(mport)
            seen["st"] = reload_state(seen["fams"])
            return seen["st"][:2] == (ok, err)
        poll_until(counted, 15, poll=0.05)
        t1 = time.time()
        scrape(mport, lint="after " + what)
        got_ok, got_err, ts, got_success = seen["st"]
        if (got_ok, got_err, got_success) != (ok, err, success):
            soft_fail("%s: reloads ok %r, error %r, last successful %r; want %r, %r, %r" % (
                what, got_ok, got_err, got_success, ok, err, success))
        if not (t0 - 0.002 <= ts <= t1 + 0.002 and ts > last_ts):
            soft_fail("%s: last reload timestamp %r, not within [%.3f, %.3f] after %r" % (
                what, ts, t0, t1, last_ts))
        last_ts = ts
    return last_ts


# ---------------------------------------------------------------------------------------------
# Bytes and queues.

SERVER_JSON = {"chash_proxy_server_request_bytes_total": "request_bytes",
               "chash_proxy_server_response_bytes_total": "response_bytes",
               "chash_proxy_server_in_queue_requests": "in_queue",
               "chash_proxy_server_in_queue_bytes": "in_queue_bytes",
               "chash_proxy_server_out_queue_requests": "out_queue",
               "chash_proxy_server_out_queue_bytes": "out_queue_bytes"}


def server_values(fams, family):
    if family not in fams:
        fail("no %s in the scrape" % family)
    return {(lab["pool"], lab["server"]): v for n, lab, v in fams[family]["samples"]}


def check_against_json(fams, stats, what):
    """Every server's bytes and queues in the scrape equal the stats JSON's (same state)."""
    for family, field in SERVER_JSON.items():
        for (pool, server), v in server_values(fams, family).items():
            want = stats.get(pool, {}).get(server, {}).get(field)
            if v != want:
                soft_fail("%s: %s{pool=%s,server=%s} %r, the stats JSON's %s %r" % (
                    what, family, pool, server, v, field, want))


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

    fams = scrape(mport, lint="first")
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

    fams = scrape(mport, lint="after the traffic")
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
    check_against_json(fams, stats, "after the traffic")

    # --- bytes: 20 SETs of 1,000 bytes to one key, then 20 GETs of it: its owner's counters
    # grow by at least what was sent and answered, no other server's move.
    bkey, big = keys[5], "x" * 1000
    bowner = chash_lookup(chash, conf, "alpha", [bkey.encode()])[bkey.encode()]
    before = scrape(mport)
    if held.pipeline([("SET", bkey, big)] * 20) != [b"OK"] * 20:
        fail("20 SETs of 1,000 bytes through the proxy")
    mid = scrape(mport)
    # One at a time: identical GETs in flight together would share one backend request
    # (coalesce_reads, on by default).
    if [held.call("GET", bkey) for _ in range(20)] != [big.encode()] * 20:
        fail("20 GETs of 1,000 bytes through the proxy")
    after = scrape(mport, lint="after the byte traffic")
    sent = (20 * len(encode("SET", bkey, big)), 20 * len(b"+OK\r\n"),
            20 * len(encode("GET", bkey)), 20 * len(b"$1000\r\n%s\r\n" % big.encode()))
    req, resp = ("chash_proxy_server_request_bytes_total",
                 "chash_proxy_server_response_bytes_total")
    for (pool, server), v0 in server_values(before, req).items():
        grow = (server_values(mid, req)[pool, server] - v0,
                server_values(mid, resp)[pool, server] - server_values(before, resp)[pool, server],
                server_values(after, req)[pool, server] - server_values(mid, req)[pool, server],
                server_values(after, resp)[pool, server] - server_values(mid, resp)[pool, server])
        if pool == "alpha" and server == bowner:
            if any(g < w for g, w in zip(grow, sent)):
                soft_fail("owner %s: request/response bytes grew by %r over the SETs, then the "
                          "GETs; sent and answered at least %r" % (server, grow, sent))
        elif grow != (0, 0, 0, 0):
            soft_fail("server %s of %s, which owns no key sent: its bytes grew by %r" % (
                server, pool, grow))
    check_against_json(after, proxy.stats_json(), "after the byte traffic")

    # --- queues: a GET through beta (no timeout) to a SIGSTOPped backend is in its out queue
    # (written, its reply awaited) until the backend answers.
    qkey = "queued:1"
    qowner = chash_lookup(chash, conf, "beta", [qkey.encode()])[qkey.encode()]
    qname = dict(zip((b.text for b in backends), ("one", "two", "three")))[qowner]
    qback = next(b for b in backends if b.text == qowner)
    qc = Resp(("127.0.0.1", pb))
    qfam = "chash_proxy_server_out_queue_requests"
    sigstop(qback.proc.pid)
    try:
        qc.send(encode("GET", qkey))
        seen = {}

        def queued():
            seen["fams"] = scrape(mport)
            return server_values(seen["fams"], qfam)["beta", qname] == 1
        if not poll_until(queued, 15, poll=0.05):
            soft_fail("a GET to the stopped backend %s: out_queue_requests %r, not 1" % (
                qname, server_values(seen["fams"], qfam)["beta", qname]))
        qbytes = value(seen["fams"], "chash_proxy_server_out_queue_bytes", pool="beta",
                       server=qname)
        if qbytes != len(encode("GET", qkey)):
            soft_fail("out_queue_bytes %r for one GET of %d bytes" % (
                qbytes, len(encode("GET", qkey))))
        check_against_json(scrape(mport, lint="a request queued"), proxy.stats_json(),
                           "a request queued")
    finally:
        os.kill(qback.proc.pid, signal.SIGCONT)
    if qc.read() is not None:
        fail("GET %s through beta after the backend resumed" % qkey)
    qc.close()
    if not poll_until(lambda: server_values(scrape(mport), qfam)["beta", qname] == 0, 15):
        soft_fail("out_queue_requests of %s not back to 0 after its reply" % qname)

    # --- process_*: against /proc of the proxy's pid.
    procs = check_process(proxy.proc.pid, mport)

    # --- reloads: counters, last timestamp and outcome.
    check_reloads(proxy, mport, conf)

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
            if code not in (400, 431, 501):  # 501: a method longer than any (http_req.h)
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
    return "%d families, %d requests counted by class, %d fds open" % (
        len(fams), total, procs["process_open_fds"])


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "redis-cli"), options=lambda ap: ap.add_argument(
        "docs", metavar="PROXY_MD", help="docs/PROXY.md, whose Metrics section lists the families"))
