#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_fleet_nesting: a hostile membership document in etcd costs chash-proxy nothing (issue 35).

A real etcd (taking writes up to 32 MiB) and a real redis-server; one chash-proxy whose pool's
membership is in etcd (--fleet-ttl 6, --metrics-port). Before the limit on nesting, a 100 KB
document of '[' written to the pool's key stalled the proxy's control thread about 15 s (no
/metrics, no reloads, no fleet work), and 16 MiB would have taken hours. Checked, for 16 MiB of
'[' and 16 MiB of '{"servers": [[[...' (the size limit of a document), each under the key K and
under K/pending:

  1. the document is refused with a log line naming the key, the document's URL with line and
     column, and the limit ("nesting deeper than 64 levels, the limit (CH_CONFIG_MAX_DEPTH)");
     the instance record says the same (refused for K, prepare_error for K/pending), and the
     pool keeps serving its epoch (a key written before reads back);
  2. while the document is in etcd, /metrics answers every scrape (each bounded at 10 s, a
     stalled control thread fails it) and the instance keeps renewing its lease: its remaining
     TTL, polled in etcd, is seen to go back up twice after the refusal (two keepalives).

Then `chash-proxy -t` on the same file, with the hostile document in K, refuses it under a
bound, naming the limit; and a valid document written after all that is applied.

Usage: test_fleet_nesting.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (etcd or redis-server missing and CI unset).
"""
import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from proxyharness import (Proxy, Resp, fail, free_ports, log, read_text, run_test,  # noqa: E402
                          sanitizer_env, spawn, start_redises, tail, wait_until, write_file)
import etcd  # noqa: E402

POOL = "alpha"
KEY = "/chash/pools/alpha"
WAIT = 30.0          # a document's way through etcd and an ASan build on a loaded machine
SCRAPE_BOUND = 10.0  # one /metrics answer; the stalled thread took 15 s for 100 KB
DOC_BYTES = 16 << 20
# The lease's TTL (s). Its keeper renews it every TTL / 3 s; etcd reports the time left in whole
# seconds, so a renewal shows as the time left going back up only when TTL / 3 is 2 s or more.
TTL = 6
LIMIT = "nesting deeper than 64 levels, the limit (CH_CONFIG_MAX_DEPTH)"


class Scraper(threading.Thread):
    """Scrapes /metrics until stopped; counts answers and remembers the first failure."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.url = "http://127.0.0.1:%d/metrics" % port
        self.stop_ev = threading.Event()
        self.answers = 0
        self.error = None

    def run(self):
        while not self.stop_ev.is_set() and self.error is None:
            try:
                with urllib.request.urlopen(self.url, timeout=SCRAPE_BOUND) as r:
                    if r.status != 200 or b"chash_proxy_fleet_epoch" not in r.read():
                        self.error = "a scrape answered %d without the fleet's metrics" % r.status
                self.answers += 1
            except (OSError, urllib.error.URLError) as e:
                self.error = "a scrape failed: %s" % e
            self.stop_ev.wait(0.05)

    def finish(self, what):
        self.stop_ev.set()
        self.join(timeout=SCRAPE_BOUND + 5)
        if self.error is not None:
            fail("%s: /metrics: %s (after %d answers)" % (what, self.error, self.answers))
        return self.answers


def lease_of(client, record_key):
    r = client.call("/v3/kv/range", {"key": etcd.b64(record_key)})
    kvs = r.get("kvs", [])
    return int(kvs[0].get("lease", 0)) if kvs else 0


def ttl_of(client, lease):
    return int(client.call("/v3/lease/timetolive", {"ID": str(lease)}).get("TTL", -1))


def wait_renewals(client, lease, count, what):
    """Polls the lease's time left until it has gone back up count times (keepalives)."""
    seen = {"last": ttl_of(client, lease), "rises": 0}

    def renewed():
        ttl = ttl_of(client, lease)
        if ttl <= 0:
            fail("%s: lease %d expired (TTL %d)" % (what, lease, ttl))
        if ttl > seen["last"]:
            seen["rises"] += 1
        seen["last"] = ttl
        return seen["rises"] >= count

    wait_until(renewed, WAIT, "%s: %d renewals of lease %d" % (what, count, lease))


def hostile_docs():
    yield "16 MiB of '['", "[" * DOC_BYTES, "1:65"
    head = '{"servers": '
    yield "16 MiB of '{\"servers\": [[[...'", head + "[" * (DOC_BYTES - len(head)), "1:76"


def body(t):
    tmp = t.tmp
    redis, = start_redises("redis-server", tmp, 1)
    server = etcd.EtcdServer(tmp, lambda argv, out: spawn(argv, out),
                             extra_args=["--max-request-bytes", str(32 << 20)]).start()
    client = etcd.EtcdClient(server.url, timeout=60.0)
    url = "etcd://127.0.0.1:%d%s" % (server.port, KEY)

    served = client.put(KEY, json.dumps({"servers": ["%s:1 s0" % redis.text]}))
    port, mport = free_ports(2)
    conf = write_file(os.path.join(tmp, "p.yml"), "\n".join([
        "%s:" % POOL, "  listen: 127.0.0.1:%d" % port, "  redis: true",
        "  membership: %s" % url]) + "\n")
    proxy = Proxy(t.proxy, tmp, conf, [("127.0.0.1", port)], label="px0",
                  extra_args=["--fleet-id", "px0", "--fleet-ttl", str(TTL),
                              "--metrics-port", str(mport)]).start()
    client.wait_records(KEY, lambda r: r.get("px0", {}).get("epoch") == served, WAIT,
                        "the proxy serves the first document")
    with Resp(proxy.listens[0]) as c:
        if c.call("SET", "k", "v") != b"OK":
            fail("SET through the proxy")
    lease = lease_of(client, KEY + "/instances/px0")
    if lease == 0:
        fail("the instance record has no lease")

    for what, doc, pos in hostile_docs():
        for key, field in ((KEY, "refused"), (KEY + "/pending", "prepare_error")):
            case = "%s under %s" % (what, key)
            log_at = len(read_text(proxy.log))
            scraper = Scraper(mport)
            scraper.start()
            rev = client.put(key, doc)
            want = "%s:%s: %s" % (url, pos, LIMIT)
            client.wait_records(KEY, lambda r: want in r.get("px0", {}).get(field, ""), WAIT,
                                "%s: the record's %s names the limit" % (case, field))
            pattern = (r"fleet: pool alpha: (%s refused, still serving epoch %d|cannot prepare "
                       r"pending epoch %d): %s" % (re.escape(KEY), served, rev, re.escape(want)))
            wait_until(lambda: re.search(pattern, read_text(proxy.log, log_at)), WAIT,
                       lambda: "%s: no log line matching %r; the log ends with:\n%s" % (
                           case, pattern, tail(proxy.log)))
            wait_renewals(client, lease, 2, case)
            answers = scraper.finish(case)
            if client.records(KEY)["px0"]["epoch"] != served:
                fail("%s: the refused document moved the proxy" % case)
            with Resp(proxy.listens[0]) as c:
                if c.call("GET", "k") != b"v":
                    fail("%s: the pool stopped serving" % case)
            if lease_of(client, KEY + "/instances/px0") != lease:
                fail("%s: the instance lost its lease and granted another" % case)
            log("%s: refused (%s), %d scrapes answered, the lease renewed" % (case, field,
                                                                              answers))
            if key.endswith("/pending"):
                client.delete(key)

    # -t reads the document as a start does: refused, naming the limit, under a bound.
    r = subprocess.run([t.proxy, "-t", "-c", conf], capture_output=True, timeout=WAIT,
                       stdin=subprocess.DEVNULL, env=sanitizer_env())
    text = r.stderr.decode("utf-8", "replace") + r.stdout.decode("utf-8", "replace")
    if r.returncode == 0 or LIMIT not in text:
        fail("-t with a hostile document in etcd: exit %d\n%s" % (r.returncode, text[-1500:]))

    served = client.put(KEY, json.dumps({"servers": ["%s:1 s1" % redis.text]}))
    client.wait_records(KEY, lambda r: r.get("px0", {}).get("epoch") == served, WAIT,
                        "a valid document after the hostile ones is applied")
    proxy.stop()
    return "16 MiB nested documents refused under K and K/pending; /metrics and the lease ran on"


if __name__ == "__main__":
    run_test(body, programs=("etcd", "redis-server"))
