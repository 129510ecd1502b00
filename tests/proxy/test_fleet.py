#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_fleet: one membership for three chash-proxy processes, kept in a real etcd
(docs/FLEET.md).

A real etcd (tests/lib/etcd.py) and 4 real redis-servers on loopback ports; three chash-proxy
processes on the same file, whose pool names "membership: etcd://.../chash/pools/alpha" and has
no servers. Checked:

  1. Start: every proxy reads the document (servers s0-s2), serves it, and registers its record
     under K/instances/<id> with epoch = the key's revision.
  2. A document written to etcd (s0-s3) is applied by every proxy with the same epoch (the
     write's revision); keys SET through proxy 0 read back through proxies 1 and 2 with the same
     values, and each key sits on the server `chash lookup` names for an equivalent file.
  3. A document with an older explicit epoch is refused by all (record says why, stats:
     refused_stale); invalid YAML/JSON and an unknown key are refused; the membership keeps
     serving (every key still reads back).
  4. Two-phase by hand: K/pending is prepared by every proxy (records say prepared: E) without
     anything changing; withdrawing it drops it; a second pending committed (K with epoch E,
     pending deleted, in one txn) swaps every proxy to E. Then `chash fleet apply` with one
     proxy SIGSTOPped aborts within its --timeout naming it, K untouched and every proxy's
     prepared change dropped (the stalled one after SIGCONT); with all three it swaps them,
     each opening its warm-up window at its swap: every key written before reads back through
     every proxy after (no miss for the moved quarter).
  5. Flap damping (membership_hold_down 3000 ms): a document removing s3 followed within the
     hold-down by one bringing it back changes nothing (no "membership ... ->" line, same
     version, damped counted); a removal (of s2 and s3) not withdrawn is held down first and
     applied when its hold-down is over, which proves the flap's is over too (each step waits
     on the proxies' stats and log lines, not on the clock).
  6. etcd SIGKILLed and restarted on the same data dir: a change written at once is applied by
     every proxy (the watch resumed from its revision, nothing replayed), and every proxy
     serves again.
  7. etcd SIGSTOPped past the lease (a partition that leaves the socket open): every proxy
     fences itself, refusing requests with the documented error; after SIGCONT each registers
     again, reads K, unfences (counted) and applies the change written then (docs/FLEET.md,
     "Fencing"; tests/proxy/test_fencing.py has the faults one proxy at a time).
  8. A proxy SIGKILLed: its record vanishes (lease TTL 3 s) while the others' stay, and
     `chash fleet status` lists the two left, none behind.
  9. Start with etcd down: a pool with file servers refuses its requests (they are not known
     to be current) and takes etcd's document once etcd answers; a pool without servers refuses
     to start, naming the URL; a bad --fleet-ttl or --fleet-id is refused with what it must be. Then etcd comes
     back without its data (revisions from 1 again): every proxy registers again, refuses the
     new low-revision document as stale, and applies one with an explicit higher epoch.
 10. SIGTERM: clean exit (no sanitizer report); the records go at once (lease revoked).

Usage: test_fleet.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (etcd or redis-server missing and CI unset).
"""
import json
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from proxyharness import (Proxy, Resp, RespError, chash_lookup, fail, free_ports, log,  # noqa: E402
                          resp_call, run_test, sigstop, spawn, start_redises, tail, wait_until,
                          write_file)
import etcd  # noqa: E402

POOL = "alpha"
KEY = "/chash/pools/alpha"
WAIT = 15.0   # seconds for every proxy to show a change (ASan, a loaded machine)
NKEYS = 400
HOLD_MS = 3000  # membership_hold_down: well over a watch delivery on a loaded machine


def servers_doc(redises, names, epoch=None, extra=None):
    # md5: fnv1a_64 (twemproxy's default) clusters sequential short keys like these on a few
    # servers; md5 spreads them, so every server owns some of the test's keys
    doc = {"servers": ["%s:1 %s" % (redises[i].text, "s%d" % i) for i in names], "hash": "md5"}
    if epoch is not None:
        doc["epoch"] = epoch
    if extra:
        doc.update(extra)
    return json.dumps(doc)


def proxy_conf(tmp, name, port, etcd_port, hold_ms, servers=None):
    lines = ["%s:" % POOL, "  listen: 127.0.0.1:%d" % port, "  redis: true",
             "  membership: etcd://127.0.0.1:%d%s" % (etcd_port, KEY),
             "  membership_hold_down: %d" % hold_ms, "  warm_up: 60000"]
    if servers:
        lines.append("  servers:")
        lines += ["    - %s" % s for s in servers]
    return write_file(os.path.join(tmp, name), "\n".join(lines) + "\n")


def equivalent_file(tmp, redises, names):
    """A plain config with the document's servers, for `chash lookup`."""
    lines = ["%s:" % POOL, "  listen: 127.0.0.1:1", "  redis: true", "  hash: md5", "  servers:"]
    lines += ["    - %s:1 s%d" % (redises[i].text, i) for i in names]
    return write_file(os.path.join(tmp, "equiv-%s.yml" % "".join(map(str, names))),
                      "\n".join(lines) + "\n")


def wait_epoch(client, ids, epoch, what, timeout=WAIT):
    return client.wait_records(
        KEY, lambda r: all(i in r and r[i]["epoch"] == epoch for i in ids), timeout, what)


def check_keys(tmp, chash, proxies, redises, names, values, what):
    """Every key written through proxy 0 reads back through every proxy, and sits on the
    server chash lookup names for the document's servers."""
    for p in proxies:
        with Resp(p.listens[0]) as c:
            got = c.pipeline([("GET", k) for k in values])
        for k, g in zip(values, got):
            if g != values[k]:
                fail("%s: GET %s through %s: %r, expected %r" % (what, k, p.label, g, values[k]))
    owners = chash_lookup(chash, equivalent_file(tmp, redises, names), POOL,
                          [k.encode() for k in values])
    by_addr = {r.text: r for r in redises}
    for k in list(values)[:100]:
        if by_addr[owners[k.encode()]].call("GET", k) != values[k]:
            fail("%s: key %s is not on %s, its owner" % (what, k, owners[k.encode()]))


def write_keys(proxy, tag):
    values = {"fk:%s:%d" % (tag, i): ("v%s%d" % (tag, i)).encode() for i in range(NKEYS)}
    with Resp(proxy.listens[0]) as c:
        for r in c.pipeline([("SET", k, v) for k, v in values.items()]):
            if r != b"OK":
                fail("SET through %s: %r" % (proxy.label, r))
    return values


def fleet(chash, *args):
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    return subprocess.run([chash, "fleet"] + list(args), capture_output=True, text=True,
                          timeout=60, env=env)


def stats_field(proxy, name):
    return proxy.stats_json()[POOL].get(name)


def membership_changes(proxy):
    """The membership changes proxy logged, in order: (from version, to version) each."""
    return re.findall(r"membership (m-\S+) -> (m-\S+),", open(proxy.log).read())


def fence_error(why):
    return RespError("ERR chash-proxy: %s; not serving pool %s" % (why, POOL))


LEASE_LOST = "membership lease lost (etcd unreachable)"
NOT_READ = "membership not read from etcd yet (etcd unreachable)"


def wait_fenced(proxies, fenced, what, timeout=WAIT):
    """Polls the proxies' stats until each one's fleet_fenced is fenced (bool)."""
    wait_until(lambda: all(stats_field(p, "fleet_fenced") == int(fenced) for p in proxies),
               timeout, "%s (fleet_fenced: %s)" % (
                   what, [stats_field(p, "fleet_fenced") for p in proxies]))


def body(t):
    proxy_exe, chash, tmp = t.proxy, t.chash, t.tmp
    redises = start_redises("redis-server", tmp, 4)
    server = etcd.EtcdServer(tmp, lambda argv, out: spawn(argv, out)).start()
    client = server.client

    # 1. start
    rev = client.put(KEY, servers_doc(redises, [0, 1, 2]))
    ports = free_ports(3)
    proxies = []
    for i, port in enumerate(ports):
        conf = proxy_conf(tmp, "p%d.yml" % i, port, server.port, HOLD_MS)
        proxies.append(Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)], label="px%d" % i,
                             extra_args=["--fleet-id", "px%d" % i, "--fleet-ttl", "3"]).start())
    ids = ["px%d" % i for i in range(3)]
    recs = wait_epoch(client, ids, rev, "1. every proxy registered on the first epoch")
    if {r["servers"] for r in recs.values()} != {3}:
        fail("1. servers in the records: %s" % recs)
    values = write_keys(proxies[0], "a")
    check_keys(tmp, chash, proxies, redises, [0, 1, 2], values, "1")
    log("1. three proxies serve epoch %d from etcd" % rev)

    # 2. a change written to etcd
    rev = client.put(KEY, servers_doc(redises, [0, 1, 2, 3]))
    recs = wait_epoch(client, ids, rev, "2. every proxy on the new epoch")
    versions = {r["membership"] for r in recs.values()}
    if len(versions) != 1 or {r["servers"] for r in recs.values()} != {4}:
        fail("2. the proxies disagree: %s" % recs)
    values = write_keys(proxies[0], "b")
    check_keys(tmp, chash, proxies, redises, [0, 1, 2, 3], values, "2")
    log("2. a document written to etcd: every proxy on epoch %d, version %s" %
        (rev, versions.pop()))

    # 3. refused documents
    served = rev
    for text, want in ((servers_doc(redises, [0], epoch=2), "is not newer than"),
                       ("servers: [oops", "YAML syntax error"),
                       ('{"servers": ["x:1:1"], "listen": "127.0.0.1:1"}',
                        "cannot be set by a membership document")):
        bad = client.put(KEY, text)
        client.wait_records(KEY, lambda r: all(want in r[i]["refused"] for i in ids), WAIT,
                            "3. every proxy refuses revision %d (%s)" % (bad, want))
        recs = client.records(KEY)
        if any(r["epoch"] != served for r in recs.values()):
            fail("3. a refused document moved a proxy: %s" % recs)
    check_keys(tmp, chash, proxies, redises, [0, 1, 2, 3], values, "3")
    if not stats_field(proxies[1], "fleet_refused_stale") or \
            stats_field(proxies[1], "fleet_refused_invalid") != 2:
        fail("3. stats: %s" % json.dumps(proxies[1].stats_json()[POOL]))
    # the last valid document is still what the key should say: write it back (a new epoch)
    served = client.put(KEY, servers_doc(redises, [0, 1, 2, 3]))
    wait_epoch(client, ids, served, "3. the valid document written back")
    log("3. an older epoch, bad YAML and an unknown key refused by every proxy; serving on")

    # 4. two-phase by hand
    pend = client.put(KEY + "/pending", servers_doc(redises, [0, 1, 2]))
    client.wait_records(KEY, lambda r: all(r[i]["prepared"] == pend for i in ids), WAIT,
                        "4. every proxy prepared the pending epoch")
    if any(r["epoch"] != served for r in client.records(KEY).values()):
        fail("4. a prepared epoch was applied before its commit")
    client.delete(KEY + "/pending")
    client.wait_records(KEY, lambda r: all(r[i]["prepared"] == 0 for i in ids), WAIT,
                        "4. every proxy dropped the withdrawn pending epoch")
    pend = client.put(KEY + "/pending", servers_doc(redises, [0, 1, 2]))
    client.wait_records(KEY, lambda r: all(r[i]["prepared"] == pend for i in ids), WAIT,
                        "4. every proxy prepared the second pending epoch")
    client.call("/v3/kv/txn", {
        "compare": [{"key": etcd.b64(KEY + "/pending"), "target": "MOD", "result": "EQUAL",
                     "mod_revision": str(pend)}],
        "success": [{"request_put": {"key": etcd.b64(KEY), "value":
                                     etcd.b64(servers_doc(redises, [0, 1, 2], epoch=pend))}},
                    {"request_delete_range": {"key": etcd.b64(KEY + "/pending")}}]})
    recs = wait_epoch(client, ids, pend, "4. every proxy swapped to the committed epoch")
    swaps = [r["swapped_unix_us"] for r in recs.values()]
    values_c = values = write_keys(proxies[2], "c")
    check_keys(tmp, chash, proxies, redises, [0, 1, 2], values, "4")
    log("4. pending prepared by all, withdrawn, then committed: swapped within %.1f ms" %
        ((max(swaps) - min(swaps)) / 1000.0))
    served = pend

    # 4b. chash fleet apply, with one proxy stalled, then with all
    new = equivalent_file(tmp, redises, [0, 1, 2, 3])
    url = "etcd://127.0.0.1:%d%s" % (server.port, KEY)
    k_before = client.get(KEY)
    os.kill(proxies[1].proc.pid, signal.SIGSTOP)
    try:
        r = fleet(chash, "apply", new, "--pool", POOL, "--etcd", url, "--timeout", "1500",
                  "--json")
    finally:
        os.kill(proxies[1].proc.pid, signal.SIGCONT)
    rep = json.loads(r.stdout or "{}")
    if r.returncode != 1 or rep.get("committed") is not False or "px1" not in rep.get("error", ""):
        fail("4b. apply with px1 stalled: exit %d, %s %s" % (r.returncode, r.stdout, r.stderr))
    if client.get(KEY + "/pending")[0] is not None or client.get(KEY) != k_before:
        fail("4b. an aborted apply left %s/pending or changed %s" % (KEY, KEY))
    client.wait_records(KEY, lambda rr: all(rr[i]["prepared"] == 0 and rr[i]["epoch"] == served
                                            for i in ids), WAIT,
                        "4b. every proxy dropped the aborted change (px1 after SIGCONT)")
    # px1 may have passed its lease's deadline while stopped: its record then goes with the
    # lease and comes back under a new one, which the next apply must find. Current again, it
    # has a lease alive by its own clock, whose record is in etcd.
    wait_fenced([proxies[1]], False, "4b. px1 current again after SIGCONT")
    r = fleet(chash, "apply", new, "--pool", POOL, "--etcd", url, "--json")
    rep = json.loads(r.stdout or "{}")
    if r.returncode != 0 or rep.get("swapped") != 3:
        fail("4b. apply: exit %d, %s %s" % (r.returncode, r.stdout, r.stderr))
    served = rep["epoch"]
    recs = wait_epoch(client, ids, served, "4b. every proxy on the applied epoch")
    if any(r["warm_up"] != "warm" for r in recs.values()):
        fail("4b. no warm-up window after the commit: %s" % recs)
    # the keys written before the commit, a quarter of them moved to s3: every one still reads
    # back through every proxy (warm_up: read from the old owner and copied), no miss storm
    owners = chash_lookup(chash, new, POOL, [k.encode() for k in values_c])
    moved = [k for k in values_c if owners[k.encode()] == redises[3].text]
    if len(moved) < NKEYS // 8 or any(redises[3].call("GET", k) is not None for k in moved):
        fail("4b. %d of the keys written before the commit moved to s3 (or s3 had them)" %
             len(moved))
    for p in proxies:
        with Resp(p.listens[0]) as c:
            got = c.pipeline([("GET", k) for k in values_c])
        missed = [k for k, g in zip(values_c, got) if g != values_c[k]]
        if missed:
            fail("4b. %d of %d keys written before the commit missed through %s after it "
                 "(warm_up 60 s)" % (len(missed), len(values_c), p.label))
    values = write_keys(proxies[1], "c2")
    check_keys(tmp, chash, proxies, redises, [0, 1, 2, 3], values, "4b")
    log("4b. chash fleet apply: aborted with px1 stalled (K untouched), then swapped 3 "
        "proxies within %.2f ms, the last %.2f ms after the commit" %
        (rep["swap_window_ms"], rep["commit_to_last_swap_ms"]))

    # 5. flap damping; each step waits on what the proxies show (stats, log lines), never on
    # the clock
    changes_before = membership_changes(proxies[0])
    version = client.records(KEY)["px0"]["membership"]
    flap = client.put(KEY, servers_doc(redises, [0, 1, 2]))   # s3 leaves the registry ...
    wait_until(lambda: all(stats_field(p, "fleet_held_down") == 1 for p in proxies), WAIT,
               "5. every proxy holds the removal of s3 down")
    back = client.put(KEY, servers_doc(redises, [0, 1, 2, 3]))  # ... and comes back
    recs = wait_epoch(client, ids, back, "5. the flap's second document")
    if {r["membership"] for r in recs.values()} != {version}:
        fail("5. a server that came back within the hold-down changed the membership: %s" % recs)
    if any(stats_field(p, "fleet_held_down") != 0 or stats_field(p, "fleet_damped") != 1
           for p in proxies):
        fail("5. the removal was not withdrawn: %s" % [p.stats_json()[POOL] for p in proxies])
    # a removal not withdrawn: every proxy holds it down first (seen holding it before it
    # serves it), then applies it when its hold-down is over (its log says so)
    gone = client.put(KEY, servers_doc(redises, [0, 1]))
    holding = set()

    def held_first():
        for p in proxies:
            st = p.stats_json()[POOL]
            if st["fleet_held_down"] == 1:
                holding.add(p.label)
            elif st["fleet_epoch"] == gone and p.label not in holding:
                fail("5. %s applied a removal before its hold-down (%d ms)" % (p.label, HOLD_MS))
        return len(holding) == len(proxies)
    wait_until(held_first, WAIT, "5. every proxy holds the removal of s2 and s3 down")
    recs = wait_epoch(client, ids, gone, "5. a removal applied after its hold-down")
    over = "the hold-down (%d ms) is over and the servers did not come back: applying " \
           "revision %%d" % HOLD_MS
    for p in proxies:
        text = open(p.log).read()
        if over % gone not in text or over % flap in text:
            fail("5. %s: the removal not applied by its hold-down's end, or the flap's "
                 "applied late:\n%s" % (p.label, tail(p.log)))
    # The flap's hold-down began before this removal's and was as long: it is over too, and
    # it changed nothing: the one membership change since is the removal's, from the version
    # served before the flap.
    changes = membership_changes(proxies[0])[len(changes_before):]
    if changes != [(version, recs["px0"]["membership"])] or \
            any(stats_field(p, "fleet_damped") != 1 for p in proxies):
        fail("5. the flap changed something: changes %s; stats %s" % (
            changes, json.dumps(proxies[0].stats_json()[POOL])))
    served = gone
    log("5. a flap within the hold-down changed nothing; a removal waited its hold-down")

    # 6. etcd killed and restarted
    stale0 = stats_field(proxies[1], "fleet_refused_stale")
    restarts0 = stats_field(proxies[1], "fleet_watch_restarts")
    server.proc.kill()
    server.proc.wait(timeout=10)
    server.start()
    after = client.put(KEY, servers_doc(redises, [0, 1, 2]))
    wait_epoch(client, ids, after, "6. after etcd's restart, every proxy on the change", 30)
    wait_fenced(proxies, False, "6. every proxy current again after etcd's restart")
    values = write_keys(proxies[1], "e")
    check_keys(tmp, chash, proxies, redises, [0, 1, 2], values, "6")
    # resumed, not replayed: a watch from an older revision would deliver the old documents
    # again (each refused as stale); the change was written before the proxies reconnected
    if stats_field(proxies[1], "fleet_refused_stale") != stale0 or \
            stats_field(proxies[1], "fleet_watch_restarts") <= restarts0:
        fail("6. the watch was not resumed from its revision: %s" %
             json.dumps(proxies[1].stats_json()[POOL]))
    log("6. etcd killed and restarted: the change written at once applied by all")

    # 7. etcd stopped past the lease (a partition that leaves the socket open): fenced
    fences0 = [stats_field(p, "fleet_fences") for p in proxies]
    sigstop(server.proc.pid)
    try:
        wait_fenced(proxies, True, "7. every proxy fenced while etcd is stopped")
        for p in proxies:
            r = resp_call(p.listens[0], "GET", "fk:e:0")
            if r != fence_error(LEASE_LOST):
                fail("7. GET through fenced %s: %r, want %r" % (p.label, r,
                                                                fence_error(LEASE_LOST)))
            if resp_call(p.listens[0], "PING") != b"PONG":
                fail("7. PING (answered by the proxy) refused by fenced %s" % p.label)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    after = client.put(KEY, servers_doc(redises, [0, 1, 2, 3]))
    wait_epoch(client, ids, after, "7. after SIGCONT, every proxy on the change", 30)
    wait_fenced(proxies, False, "7. every proxy unfenced after SIGCONT")
    if any(stats_field(p, "fleet_fences") <= f0 for p, f0 in zip(proxies, fences0)):
        fail("7. fences not counted: %s" % [stats_field(p, "fleet_fences") for p in proxies])
    values = write_keys(proxies[2], "f")
    check_keys(tmp, chash, proxies, redises, [0, 1, 2, 3], values, "7. after SIGCONT")
    log("7. etcd SIGSTOPped past the lease: every proxy fenced (errors, no answer from its "
        "membership); after SIGCONT unfenced on the change written meanwhile")

    # 8. a proxy killed
    proxies[2].proc.kill()
    proxies[2].proc.wait(timeout=10)
    client.wait_records(KEY, lambda r: "px2" not in r and "px0" in r and "px1" in r, 10,
                        "8. the killed proxy's record gone within its lease")
    st = json.loads(fleet(chash, "status", "--etcd", "etcd://127.0.0.1:%d%s" % (server.port, KEY),
                          "--json").stdout)
    if sorted(i["id"] for i in st["instances"]) != ["px0", "px1"] or st["skew"]["behind"]:
        fail("8. chash fleet status after the kill: %s" % json.dumps(st))
    log("8. a killed proxy's record vanished with its lease")

    # 9. start with etcd down
    server.proc.kill()
    server.proc.wait(timeout=10)
    port = free_ports(1)[0]
    conf = proxy_conf(tmp, "late.yml", port, server.port, 0, servers=[
        "%s:1 s0" % redises[0].text])
    late = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)], label="late",
                 extra_args=["--fleet-id", "late", "--fleet-ttl", "3"]).start()
    if "refusing its requests until etcd answers" not in open(late.log).read():
        fail("9. no log line for the refused requests:\n" + tail(late.log))
    r = resp_call(late.listens[0], "GET", "fk:e:0")
    if r != fence_error(NOT_READ):
        fail("9. GET through a proxy started with etcd down: %r, want %r" % (
            r, fence_error(NOT_READ)))
    port2 = free_ports(1)[0]
    conf2 = proxy_conf(tmp, "none.yml", port2, server.port, 0)
    r = subprocess.run([proxy_exe, "-c", conf2, "-s", str(free_ports(1)[0])], capture_output=True,
                       timeout=30)
    if r.returncode != 1 or b"cannot read its membership" not in r.stderr or \
            ("etcd://127.0.0.1:%d" % server.port).encode() not in r.stderr:
        fail("9. a pool without servers and etcd down: exit %d, %r" % (r.returncode, r.stderr))
    for bad, want in ((["--fleet-ttl", "1"], b"--fleet-ttl requires seconds from 2 to 3600"),
                      (["--fleet-id", "a/b"], b"--fleet-id requires 1 to 99 characters")):
        r = subprocess.run([proxy_exe, "-c", conf2] + bad, capture_output=True, timeout=30)
        if r.returncode != 1 or want not in r.stderr:
            fail("9. chash-proxy %s: exit %d, %r" % (" ".join(bad), r.returncode, r.stderr))
    server.start()
    wait_epoch(client, ["late"], after, "9. the late proxy takes etcd's document", 30)
    wait_fenced([late], False, "9. the late proxy unfenced once etcd answers")
    wait_fenced(proxies[:2], False, "9. the others unfenced once etcd answers")
    if resp_call(late.listens[0], "GET", "fk:f:0") != values["fk:f:0"]:
        fail("9. the late proxy does not serve etcd's membership")
    log("9. etcd down at start: requests refused until etcd answers, then etcd's document "
        "served; no servers: a clear refusal")

    # 9b. etcd back without its data (a new cluster: revisions from 1 again)
    ids2 = ["px0", "px1", "late"]
    served = client.records(KEY)["px0"]["epoch"]
    server.proc.kill()
    server.proc.wait(timeout=10)
    subprocess.run(["rm", "-rf", server.dir], check=True)
    server.start()
    client.wait_records(KEY, lambda r: all(i in r for i in ids2), 30,
                        "9b. every proxy registered again in the new etcd")
    low = client.put(KEY, servers_doc(redises, [0, 1]))
    client.wait_records(KEY, lambda r: all("is not newer than" in r[i]["refused"] for i in ids2),
                        WAIT, "9b. a document at revision %d refused as stale by all" % low)
    client.put(KEY, servers_doc(redises, [0, 1, 2], epoch=served + 100))
    wait_epoch(client, ids2, served + 100, "9b. a document with an explicit epoch applied by all")
    wait_fenced([proxies[0], proxies[1], late], False, "9b. every proxy current in the new etcd")
    values = write_keys(proxies[0], "g")
    check_keys(tmp, chash, [proxies[0], proxies[1], late], redises, [0, 1, 2], values, "9b")
    log("9b. etcd back empty: its low revisions refused, an explicit epoch applied by all")

    # 10. clean exit, records revoked
    for p in (proxies[0], proxies[1], late):
        p.stop()
    client.wait_records(KEY, lambda r: len(r) == 0, 3, "10. records revoked at exit")
    server.stop()
    return "3 proxies on one etcd membership"


run_test(body, programs=("redis-server", "etcd"))
