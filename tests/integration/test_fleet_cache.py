#!/usr/bin/python3 -B
# SPDX-License-Identifier: Apache-2.0
"""libchash-cache and a fleet's membership in etcd (docs/FLEET.md), with a real etcd and real
redis-servers.

usage: test_fleet_cache.py FLEET_CACHE_CLIENT CHASH

fleet_cache_client (tests/integration/fleet_cache_client.c) is a libchash-cache client in the
application's role: this script reads the pool key K from etcd and hands each document to it
(ch_cache_apply_membership_doc with K's mod_revision). Checked: documents applied in order, each
routing writes where `chash lookup` (nutcracker's placement of the same servers) says, the
value found on that redis-server; an older epoch, a replayed one, a document that does not
parse and one with an unknown key are refused with the last membership still serving; the
client's instance record parses (ch__fleet_record_parse, in the client) and, put under
K/instances/ with a lease, shows up in `chash fleet status`; and the client, driven by a
thread that reacts to K/pending (prepare) and K (commit), takes part in `chash fleet apply`.
"""
import json
import os
import select
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "proxy"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from proxyharness import (SANITIZER_MARKS, fail, log, run_test, sanitizer_env, spawn,  # noqa: E402
                          start_redises, write_file)
from etcd import start_etcd  # noqa: E402

KEY = "/chash/pools/cache"
NKEYS = 60


class Client:
    """fleet_cache_client over pipes: one command, one answer line (bounded wait)."""

    def __init__(self, exe, config, tmp):
        self.err_path = os.path.join(tmp, "client.err")
        self.err = open(self.err_path, "wb")
        self.p = subprocess.Popen([exe, config, "cache"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.err, env=sanitizer_env())
        self.lock = threading.Lock()
        self.tmp = tmp
        self.n = 0

    def cmd(self, line, timeout=20.0):
        with self.lock:
            self.p.stdin.write((line + "\n").encode())
            self.p.stdin.flush()
            r, _, _ = select.select([self.p.stdout], [], [], timeout)
            if not r:
                fail("client: no answer to %r within %.0f s" % (line, timeout))
            out = self.p.stdout.readline().decode().rstrip("\n")
            if not out:
                fail("client exited on %r; stderr: %s" % (line, open(self.err_path).read()[-2000:]))
            return out

    def doc(self, verb, rev, text):
        self.n += 1
        path = write_file(os.path.join(self.tmp, "doc-%d" % self.n), text)
        return self.cmd("%s %d %s" % (verb, rev, path))

    def close(self):
        self.p.stdin.close()
        try:
            rc = self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            fail("client did not exit")
        self.err.close()
        err = open(self.err_path, "rb").read()
        for m in SANITIZER_MARKS:
            if m in err:
                fail("client: sanitizer report:\n%s" % err.decode()[-3000:])
        if rc != 0:
            fail("client exited %d: %s" % (rc, err.decode()[-2000:]))


def owners(chash, tmp, servers, keys):
    """{key: addr} by `chash lookup` on a pool of these servers (nutcracker's placement)."""
    cfg = write_file(os.path.join(tmp, "oracle.yml"),
                     "cache:\n  redis: true\n  hash: fnv1a_64\n  distribution: ketama\n"
                     "  servers:\n" + "".join("    - %s\n" % s for s in servers))
    r = subprocess.run([chash, "lookup", "--config", cfg] + keys, capture_output=True,
                       timeout=60, env=sanitizer_env())
    if r.returncode != 0:
        fail("chash lookup: %s" % r.stderr.decode())
    return dict(line.split("\t")[:2] for line in r.stdout.decode().splitlines())


def check_routing(client, chash, tmp, redises, servers, tag):
    """Writes NKEYS keys through the client; each must go to (and be found on) the server
    `chash lookup` names for this membership."""
    keys = ["%s:%d" % (tag, i) for i in range(NKEYS)]
    want = owners(chash, tmp, servers, keys)
    by_addr = {r.addr: r for r in redises}
    used = set()
    for k in keys:
        out = client.cmd("set %s v-%s" % (k, k))
        if out != "ok " + want[k]:
            fail("%s: %s went to %r, chash lookup says %s" % (tag, k, out, want[k]))
        host, port = want[k].rsplit(":", 1)
        if by_addr[(host, int(port))].call("GET", k) != ("v-%s" % k).encode():
            fail("%s: %s is not on %s" % (tag, k, want[k]))
        used.add(want[k])
    return used


def body(t):
    exe, chash, redis_exe, tmp = t.client, t.chash, t.programs["redis-server"], t.tmp
    server = start_etcd(tmp, spawn)
    etcd = server.client
    url = "etcd://127.0.0.1:%d%s" % (server.port, KEY)
    redises = start_redises(redis_exe, tmp, 3)
    srv = ["%s:%d:1 r%d" % (r.addr[0], r.addr[1], i) for i, r in enumerate(redises)]
    config = write_file(os.path.join(tmp, "cache.yml"),
                        "cache:\n  redis: true\n  hash: fnv1a_64\n  distribution: ketama\n"
                        "  timeout: 2000\n  membership: %s\n  servers:\n    - %s\n" % (url, srv[0]))
    client = Client(exe, config, tmp)
    stop = threading.Event()
    driver = None
    try:
        if client.cmd("epoch") != "ok 0":
            fail("a fresh client's epoch is not 0")
        check_routing(client, chash, tmp, redises, srv[:1], "file")

        # ---- documents from K, in order --------------------------------------------------
        def from_k():
            val, rev = etcd.get(KEY)
            return val.decode(), rev
        etcd.put(KEY, json.dumps({"servers": srv[:2], "hash": "fnv1a_64",
                                  "distribution": "ketama"}))
        text, rev1 = from_k()
        if client.doc("apply", rev1, text) != "ok %d" % rev1:
            fail("doc 1 (no epoch: its mod_revision %d) not applied" % rev1)
        if check_routing(client, chash, tmp, redises, srv[:2], "d1") != {"%s:%d" % r.addr for r in redises[:2]}:
            fail("doc 1 does not use both its servers")
        etcd.put(KEY, "servers:\n  - %s\n  - %s\n  - %s\nhash: fnv1a_64\n" % tuple(srv))  # YAML
        text, rev2 = from_k()
        if client.doc("apply", rev2, text) != "ok %d" % rev2:
            fail("doc 2 not applied")
        check_routing(client, chash, tmp, redises, srv, "d2")
        log("documents applied in order: epochs %d, %d" % (rev1, rev2))

        # ---- refused: an older epoch, a replay, a bad document; doc 2 keeps serving --------
        etcd.put(KEY, json.dumps({"epoch": rev1, "servers": srv[:1]}))
        text, rev = from_k()
        out = client.doc("apply", rev, text)
        if not out.startswith("err") or "epoch %d is not newer" % rev1 not in out:
            fail("an older epoch: %r" % out)
        out = client.doc("apply", rev2, "servers: [%s, %s, %s]\nhash: fnv1a_64\n" % tuple(srv))
        if not out.startswith("err") or "not newer" not in out:
            fail("a replay of epoch %d: %r" % (rev2, out))
        etcd.put(KEY, '{"servers": ["%s",' % srv[0])
        text, rev = from_k()
        out = client.doc("apply", rev, text)
        if not out.startswith("err -1 %s:" % url):
            fail("a document that does not parse: want its URL, line and column, got %r" % out)
        out = client.doc("apply", rev, json.dumps({"servers": srv[:1], "colour": "red"}))
        if not out.startswith("err") or "colour" not in out:
            fail("an unknown key: %r" % out)
        if client.cmd("epoch") != "ok %d" % rev2:
            fail("a refused document changed the epoch")
        check_routing(client, chash, tmp, redises, srv, "after-refusals")
        log("older, replayed, unparsable and unknown-key documents refused; epoch %d serves" % rev2)

        # ---- fenced (ch_cache_fence_until): nothing sent until the application proves it again
        if client.cmd("fence 0") != "ok":
            fail("fence 0")
        out = client.cmd("set fenced:k v")
        if not out.startswith("err 0 7 ") or "not proven current" not in out:
            fail("a request while fenced: want CH_CACHE_FAIL_FENCED (7), got %r" % out)
        if any(r.call("GET", "fenced:k") is not None for r in redises):
            fail("a fenced request reached a server")
        rec = json.loads(client.cmd("record app-1")[3:])
        if rec["fenced"] != 1 or rec["on_fence"] != "error":
            fail("the record of a fenced client: %r" % rec)
        if client.cmd("fence 60000") != "ok" or not client.cmd("set fenced:k v").startswith("ok "):
            fail("a request within the fence's time refused")
        if json.loads(client.cmd("record app-1")[3:])["fenced"] != 0:
            fail("the record of a client within its fence's time says fenced")
        log("fenced: requests refused (CH_CACHE_FAIL_FENCED) and sent nowhere; served again once "
            "the fence moves")

        # ---- the instance record, in chash fleet status --------------------------------------
        out = client.cmd("record app-1")
        if not out.startswith("ok "):
            fail("record: %r" % out)
        rec = json.loads(out[3:])
        if rec["epoch"] != rev2 or rec["servers"] != 3 or rec["pool"] != "cache" or \
                rec["seen_epoch"] != rev or "colour" not in rec["refused"] or \
                rec["prepared"] != 0 or rec["pid"] != client.p.pid:
            fail("record: %r" % rec)
        lease = int(etcd.call("/v3/lease/grant", {"TTL": "30"})["ID"])

        def put_record():
            out = client.cmd("record app-1")
            if not out.startswith("ok "):
                raise RuntimeError("record: %r" % out)
            etcd.put(KEY + "/instances/app-1", out[3:], lease=lease)
        put_record()
        r = subprocess.run([chash, "fleet", "status", "--etcd", url, "--json"],
                           capture_output=True, timeout=60, env=sanitizer_env())
        if r.returncode != 0:
            fail("status: %s" % r.stderr.decode())
        st = json.loads(r.stdout)
        inst = st["instances"]
        if len(inst) != 1 or inst[0]["id"] != "app-1" or inst[0]["kind"] != "libchash-cache" or \
                inst[0]["epoch"] != rev2 or inst[0]["servers"] != 3:
            fail("status's instances: %r" % inst)
        if st["committed"]["valid"]:
            fail("status: K holds the unparsable document, not %r" % st["committed"])
        log("the record parses and shows in chash fleet status")

        # ---- chash fleet apply with the client as an instance -------------------------------
        errors = []

        def drive():
            seen_k, prepared = rev, 0
            try:
                while not stop.is_set():
                    pv, prev = etcd.get(KEY + "/pending")
                    if pv is not None and prev != prepared:
                        client.doc("prepare", prev, pv.decode())
                        prepared = prev
                        put_record()
                    kv, krev = etcd.get(KEY)
                    if krev != seen_k:
                        seen_k = krev
                        client.doc("apply", krev, kv.decode())
                        prepared = 0
                        put_record()
                    elif pv is None and prepared:
                        client.cmd("clear")
                        prepared = 0
                        put_record()
                    stop.wait(0.02)
            except Exception as e:  # noqa: BLE001 (reported by the main thread)
                errors.append(repr(e))
        driver = threading.Thread(target=drive, daemon=True)
        driver.start()
        # an explicit epoch far above the revisions: apply's epoch is then the document's, not
        # K/pending's revision, and the client must prepare that one
        etcd.put(KEY, json.dumps({"servers": srv, "hash": "fnv1a_64", "distribution": "ketama",
                                  "epoch": 500}))
        deadline = time.monotonic() + 20
        while client.cmd("epoch") != "ok 500":
            if time.monotonic() > deadline:
                fail("the client did not apply the document with epoch 500")
            time.sleep(0.02)
        new = write_file(os.path.join(tmp, "new.yml"),
                         "cache:\n  redis: true\n  hash: fnv1a_64\n  distribution: ketama\n"
                         "  membership: %s\n  servers:\n    - %s\n    - %s\n" % (url, srv[0], srv[2]))
        r = subprocess.run([chash, "fleet", "apply", new, "--json", "--timeout", "20000"],
                           capture_output=True, timeout=90, env=sanitizer_env())
        if errors:
            fail("driver: %s" % errors[0])
        if r.returncode != 0:
            fail("apply: %s %s" % (r.stdout.decode(), r.stderr.decode()))
        res = json.loads(r.stdout)
        val, _ = etcd.get(KEY)
        e = json.loads(val)["epoch"]
        if res["epoch"] != e or e != 501 or res["instances"] != 1 or res["swapped"] != 1:
            fail("apply with the client: %r (K's epoch %d)" % (res, e))
        if client.cmd("epoch") != "ok %d" % e:
            fail("the client does not serve epoch %d" % e)
        stop.set()
        driver.join(timeout=10)
        check_routing(client, chash, tmp, redises, [srv[0], srv[2]], "applied")
        log("chash fleet apply through the client: epoch %d, swap at +%.1f ms" % (
            e, res["commit_to_last_swap_ms"]))
    finally:
        stop.set()
        if driver is not None:
            driver.join(timeout=10)
        client.close()
        server.stop()
    return "libchash-cache follows etcd's documents"


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "etcd"),
             binaries=(("client", "fleet_cache_client"), ("chash", "chash")))
