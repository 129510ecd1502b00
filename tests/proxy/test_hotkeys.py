#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_hotkeys: hot-key detection (docs/OPERATIONS.md, "Hot keys").

chash-proxy (2 workers) in front of 3 real redis-servers (pool "alpha", hot_key_names: true,
hot_key_share: 0.3) and 2 real memcacheds (pool "beta", names not allowed). A skewed load with
known counts: on alpha, three planted hot keys (GETs and SETs, HOT counts each) among COLD keys
read once each; on beta, one planted key among cold ones. Checked:
  - GET /-/hotkeys is JSON; once its per-pool total equals the keys sent (polled), every planted
    key is listed, the planted keys first in order, each with count - count_error <= sent <=
    count (the summary's guarantee against the counts this test sent), a positive 60 s rate,
    and as its server the owner `chash lookup` names;
  - INFO (through the proxy) has a "# Hotkeys" section: alpha's planted keys by name, beta's
    as h:<key_hash>;
  - /metrics (parsed strictly by promtext.py): chash_proxy_hot_key_rate for alpha's planted
    keys by name with their server; beta's only as h:<key_hash>, its key name nowhere;
  - the log line: alpha's hottest key named, with its server, as over hot_key_share;
  - `chash hotkeys --admin`: its table lists the planted keys; --json gives the same keys as the
    endpoint;
  - a SIGHUP reload that removes one of alpha's servers: the planted keys' servers are the new
    file's owners (`chash lookup`), and the keys sent after it are counted;
  - clean exit (no sanitizer report).

Usage: test_hotkeys.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server or memcached missing and CI unset).
"""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Mc, Proxy, Resp, WAIT_TIMEOUT, chash_lookup, encode, fail,  # noqa: E402
                          free_ports, poll_until, pool_yaml, run_test, start_memcacheds,
                          start_redises, wait_log, write_file)
from promtext import get, scrape  # noqa: E402

HOT = {b"hot:celebrity": 3000, b"hot:flash-sale": 1500, b"hot:config": 800}
COLD = [b"cold:%d" % i for i in range(3000)]
MC_HOT = (b"mc:hot-item", 1200)
MC_COLD = [b"mc:cold:%d" % i for i in range(1500)]
PIPELINE = 500


def alpha_traffic(addr):
    """The alpha stream: each hot key's count split between SET (a tenth) and GET, interleaved
    with the cold keys; {key: count} sent."""
    cmds, sent = [], {}
    cold = iter(COLD)
    for k, n in HOT.items():
        for i in range(n):
            cmds.append(encode("SET", k, "v") if i % 10 == 0 else encode("GET", k))
            c = next(cold, None)
            if c is not None:
                cmds.append(encode("GET", c))
                sent[c] = 1
        sent[k] = n
    for c in cold:
        cmds.append(encode("GET", c))
        sent[c] = 1
    with Resp(addr, timeout=30) as r:
        for i in range(0, len(cmds), PIPELINE):
            batch = cmds[i:i + PIPELINE]
            r.send(b"".join(batch))
            for _ in batch:
                r.read()
    return sent


def beta_traffic(addr):
    k, n = MC_HOT
    lines = [b"get %s\r\n" % k] * n + [b"get %s\r\n" % c for c in MC_COLD]
    with Mc(addr, timeout=30) as c:
        for i in range(0, len(lines), PIPELINE):
            batch = lines[i:i + PIPELINE]
            c.send(b"".join(batch))
            for _ in batch:
                while c.line() != b"END\r\n":
                    pass
    return n + len(MC_COLD)


def hotkeys(mport):
    code, headers, body = get(mport, "/-/hotkeys")
    if code != 200 or headers.get("content-type") != "application/json":
        fail("GET /-/hotkeys: %d %r" % (code, headers.get("content-type")))
    return json.loads(body.decode("utf-8"))


def pool_of(doc, name):
    for p in doc["pools"]:
        if p["pool"] == name:
            return p
    fail("no pool %s in /-/hotkeys" % name)


def body(t):
    redises = start_redises(t.programs["redis-server"], t.tmp, 3)
    mcs = start_memcacheds(t.programs["memcached"], t.tmp, 2)
    aport, bport, mport = free_ports(3)
    names = ["a", "b", "c"]
    config = write_file(os.path.join(t.tmp, "proxy.yml"),
                        pool_yaml("alpha", aport, [(r.text, 1, n) for r, n in zip(redises, names)],
                                  hot_key_names=True, hot_key_share=0.3) +
                        pool_yaml("beta", bport, [(m.text, 1, None) for m in mcs], redis=False))
    px = Proxy(t.proxy, t.tmp, config, [("127.0.0.1", aport), ("127.0.0.1", bport)],
               extra_args=["--metrics-port", str(mport), "--threads", "2"]).start()
    sent = alpha_traffic(("127.0.0.1", aport))
    beta_sent = beta_traffic(("127.0.0.1", bport))
    alpha_total = sum(sent.values())

    # The endpoint, once every key sent is merged in.
    def merged():
        d = hotkeys(mport)
        return d if (pool_of(d, "alpha")["total"] == alpha_total and
                     pool_of(d, "beta")["total"] == beta_sent) else None
    doc = poll_until(merged, WAIT_TIMEOUT)
    if doc is None:
        d = hotkeys(mport)
        fail("totals %d, %d; sent %d, %d" % (pool_of(d, "alpha")["total"],
                                             pool_of(d, "beta")["total"], alpha_total, beta_sent))
    owners = chash_lookup(t.chash, config, "alpha", list(HOT))
    name_of = {r.text: n for r, n in zip(redises, names)}
    alpha = pool_of(doc, "alpha")
    listed = [e["key"].encode("latin-1") for e in alpha["keys"]]
    if listed[:3] != list(HOT):
        fail("alpha's first keys %r, planted %r" % (listed[:3], list(HOT)))
    for e in alpha["keys"][:3]:
        k = e["key"].encode("latin-1")
        if not e["count"] - e["count_error"] <= sent[k] <= e["count"]:
            fail("%s: sent %d, count %d error %d" % (k, sent[k], e["count"], e["count_error"]))
        if not e["rate_60s"] > 0 or e["truncated"]:
            fail("%s: %r" % (k, e))
        if e["server"] != name_of[owners[k]]:
            fail("%s: server %s, chash lookup says %s" % (k, e["server"], name_of[owners[k]]))
    beta = pool_of(doc, "beta")
    top = beta["keys"][0]
    if top["key"].encode("latin-1") != MC_HOT[0] or \
            not top["count"] - top["count_error"] <= MC_HOT[1] <= top["count"]:
        fail("beta's first key %r, planted %r" % (top, MC_HOT))
    beta_hash = top["key_hash"]

    # INFO: names for alpha, the hash for beta.
    with Resp(("127.0.0.1", aport)) as r:
        info = r.call("INFO").decode()
    if "# Hotkeys" not in info or "pool_alpha_hot_key_0:key=hot:celebrity," not in info or \
            "pool_beta_hot_key_0:key=h:%s," % beta_hash not in info or "mc:hot-item" in info:
        fail("INFO's hot keys:\n%s" % info[info.find("# Hotkeys"):])

    # /metrics.
    fams = scrape(mport)
    rates = {(lab["pool"], lab["key"]): (v, lab["server"])
             for n, lab, v in fams["chash_proxy_hot_key_rate"]["samples"]}
    for k in HOT:
        v, server = rates.get(("alpha", k.decode()), (None, None))
        if v is None or not v > 0 or server != name_of[owners[k]]:
            fail("chash_proxy_hot_key_rate of %s: %r %r" % (k, v, server))
    if ("beta", "h:" + beta_hash) not in rates:
        fail("beta's hot key not as h:%s in %r" % (beta_hash, sorted(rates)))
    _, _, text = get(mport, "/metrics")
    if b"mc:hot-item" in text:
        fail("beta's key name in /metrics without hot_key_names")
    if "chash_proxy_hot_key_rate_error" not in fams:
        fail("no chash_proxy_hot_key_rate_error")

    # The log line of the key over hot_key_share.
    wait_log(px.log, r"pool alpha: hot key hot:celebrity \(hash [0-9a-f]{16}\) is \d+%% of "
             r"server %s's requests" % name_of[owners[b"hot:celebrity"]], "the hot-key log line")

    # The CLI.
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    admin = "127.0.0.1:%d" % mport
    r = subprocess.run([t.chash, "hotkeys", "--admin", admin], capture_output=True, timeout=60,
                       env=env)
    if r.returncode != 0:
        fail("chash hotkeys exited %d: %s" % (r.returncode, r.stderr.decode()))
    table = r.stdout.decode()
    for k in HOT:
        if k.decode() not in table:
            fail("chash hotkeys' table lacks %s:\n%s" % (k, table))
    r = subprocess.run([t.chash, "hotkeys", "--admin", admin, "--json", "--pool", "alpha"],
                       capture_output=True, timeout=60, env=env)
    if r.returncode != 0:
        fail("chash hotkeys --json exited %d: %s" % (r.returncode, r.stderr.decode()))
    cli = json.loads(r.stdout)
    cli_keys = [e["key"] for e in cli["pools"][0]["keys"]]
    if len(cli["pools"]) != 1 or cli["pools"][0]["pool"] != "alpha" or \
            cli_keys[:3] != [k.decode() for k in HOT]:
        fail("chash hotkeys --json: %r" % cli_keys[:5])
    # A reload that removes alpha's server c: every planted key is owned as `chash lookup` says
    # under the new file, and counting goes on (the endpoint's total grows by what is sent).
    write_file(config, pool_yaml("alpha", aport, [(r.text, 1, n) for r, n in
                                                  list(zip(redises, names))[:2]],
                                 hot_key_names=True, hot_key_share=0.3) +
               pool_yaml("beta", bport, [(m.text, 1, None) for m in mcs], redis=False))
    px.proc.send_signal(signal.SIGHUP)
    px.wait_stats(lambda s: s.get("reloads") == 1, "the reload")
    owners = chash_lookup(t.chash, config, "alpha", list(HOT))
    with Resp(("127.0.0.1", aport)) as r:
        r.pipeline([("GET", k) for k in HOT for _ in range(10)])
    want = alpha_total + 10 * len(HOT)

    def reloaded():
        d = pool_of(hotkeys(mport), "alpha")
        return d if d["total"] == want else None
    alpha = poll_until(reloaded, WAIT_TIMEOUT)
    if alpha is None:
        fail("after the reload: total %d, want %d" % (pool_of(hotkeys(mport), "alpha")["total"],
                                                      want))
    for e in alpha["keys"][:3]:
        k = e["key"].encode("latin-1")
        if e["server"] != name_of[owners[k]]:
            fail("after the reload, %s: server %s, chash lookup says %s" % (
                k, e["server"], name_of[owners[k]]))
    px.stop()
    return "3 planted keys of %d requests found within their bounds" % alpha_total


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "memcached"))
