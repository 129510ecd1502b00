#!/usr/bin/python3 -B
# SPDX-License-Identifier: Apache-2.0
"""chash fleet status|apply|abort against a real etcd (docs/FLEET.md).

usage: test_fleet.py CHASH

The instances are Python threads that follow docs/FLEET.md's instance protocol over etcd's
gateway: a lease granted and kept alive, the record put under it, K and K/pending read (polled
every 20 ms: a watch would do the same, sooner), `prepared: E` (or `prepare_failed: E` with a
reason) written for a pending change, the swap on the commit. One may be told to stall (never
prepare), to fail its prepare, or to freeze (never react at all).

What `chash fleet apply` did is read back from etcd's own revision history (a range at a
revision), not from what chash prints: the commit is one revision C at which K holds the
document with epoch E == K/pending's "epoch", K/pending is gone, and at C - 1 every instance
record already said prepared == E while K still held the old document. E is above every epoch
committed, served or seen, and above etcd's revision when proposed: after a document with an
explicit epoch far above the revisions (docs/FLEET.md's recovery for an etcd restarted empty),
apply still wins (issue 24). An instance whose record vanishes mid-apply (its lease revoked, as
a lapse would) is committed without once it has been gone LOST_MARGIN_MS: exit 3, the JSON's
committed_without names it, a K/lost/<id> note is in the commit, and status lists it as lost. Checked too: an abort on
a stalled instance within the timeout, on SIGINT, and on a failed prepare (naming the instance and its
error) leaves K untouched and K/pending gone; a second apply while one is pending is refused
with the pending epoch; `chash fleet abort`; status's instances and skew against the records;
bad input (a bad NEW.yml, an unreachable etcd, a pool without membership) exits 1 with a clear
message; an instance that refuses a commit is named (the change stays committed). Every chash
run is checked for sanitizer reports. A missing etcd skips (77), or fails
when CI is set.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "proxy"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from proxyharness import (SANITIZER_MARKS, fail, free_ports, log, run_test,  # noqa: E402
                          sanitizer_env, spawn, wait_until, write_file)
from etcd import EtcdClient, b64, start_etcd, unb64  # noqa: E402

KEY = "/chash/pools/alpha"
CHASH_TIMEOUT = 60


def now_ms():
    return int(time.time() * 1000)


class Instance(threading.Thread):
    """One fleet member (docs/FLEET.md, "The instance record", "The two-phase switch").

    mode: "ok" prepares after prepare_delay seconds; "stall" never prepares (it still swaps on
    a commit); "fail" reports prepare_failed with FAIL_REASON; "refuse" prepares but refuses
    the commit (seen_epoch, refused: REFUSE_REASON); "frozen" registers with epoch `epoch` and
    never reacts."""

    FAIL_REASON = "cannot resolve bad-host.invalid"
    REFUSE_REASON = "out of memory building the table"

    def __init__(self, url, iid, mode="ok", prepare_delay=0.0, epoch=0):
        super().__init__(daemon=True)
        self.etcd = EtcdClient(url, timeout=3.0)
        self.iid, self.mode, self.delay = iid, mode, prepare_delay
        self.stop_ev = threading.Event()
        self.error = None
        self.lease = 0
        t = now_ms()
        self.rec = {"id": iid, "kind": "chash-proxy", "pool": "alpha", "host": "test",
                    "pid": os.getpid(), "epoch": epoch, "since_unix_ms": t if epoch else 0,
                    "membership": "", "servers": 0, "seen_epoch": epoch, "refused": "",
                    "prepared": 0, "prepare_failed": 0, "prepare_error": "", "warm_up": "off",
                    "warm_up_until_unix_ms": 0, "swapped_unix_us": 0}
        self.pending_seen = None  # (revision, monotonic time first seen)

    def put_record(self):
        self.etcd.put(KEY + "/instances/" + self.iid, json.dumps(self.rec), lease=self.lease)

    def swap(self, doc, epoch):
        self.rec.update(epoch=epoch, since_unix_ms=now_ms(), seen_epoch=epoch, refused="",
                        servers=len(doc["servers"]), membership=doc.get("version", ""),
                        prepared=0, swapped_unix_us=int(time.time() * 1e6))
        self.put_record()

    def step(self):
        k, k_rev = self.etcd.get(KEY)
        p, p_rev = self.etcd.get(KEY + "/pending")
        if p is not None and self.mode != "frozen":
            # a pending change's epoch: its "epoch", else its revision (docs/FLEET.md)
            p_epoch = json.loads(p).get("epoch", p_rev)
            if self.pending_seen is None or self.pending_seen[0] != p_epoch:
                self.pending_seen = (p_epoch, time.monotonic())
            if self.mode == "fail" and self.rec["prepare_failed"] != p_epoch:
                self.rec.update(prepare_failed=p_epoch, prepare_error=self.FAIL_REASON)
                self.put_record()
            elif (self.mode in ("ok", "refuse") and self.rec["prepared"] != p_epoch and
                  time.monotonic() - self.pending_seen[1] >= self.delay):
                self.rec.update(prepared=p_epoch)
                self.put_record()
        if k is not None and self.mode != "frozen":
            doc = json.loads(k)
            epoch = doc.get("epoch", k_rev)
            if self.mode == "refuse" and epoch > self.rec["epoch"]:
                if self.rec["seen_epoch"] != epoch:
                    self.rec.update(seen_epoch=epoch, refused=self.REFUSE_REASON, prepared=0)
                    self.put_record()
            elif epoch > self.rec["epoch"]:
                self.swap(doc, epoch)
        if p is None and self.rec["prepared"]:
            self.rec["prepared"] = 0  # an aborted change: drop the prepared state
            self.put_record()

    def run(self):
        try:
            r = self.etcd.call("/v3/lease/grant", {"TTL": "10"})
            self.lease = int(r["ID"])
            self.put_record()
            last_ka = time.monotonic()
            while not self.stop_ev.is_set():
                if time.monotonic() - last_ka > 1.0:
                    self.etcd.call("/v3/lease/keepalive", {"ID": str(self.lease)})
                    last_ka = time.monotonic()
                self.step()
                self.stop_ev.wait(0.02)
        except Exception as e:  # reported by stop(): a broken fake must not pass silently
            self.error = "%s: %r" % (self.iid, e)

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=10)
        if self.is_alive():
            fail("instance %s did not stop" % self.iid)
        if self.lease:
            try:  # the record goes at once, not after the TTL
                self.etcd.call("/v3/lease/revoke", {"ID": str(self.lease)})
            except (OSError, urllib.error.URLError):
                pass
        if self.error:
            fail("fake instance failed: %s" % self.error)


def run(chash, args, expect):
    """Runs chash args; returns (stdout, stderr, seconds). Fails on a sanitizer report or an
    exit status other than expect."""
    t = time.monotonic()
    r = subprocess.run([chash] + args, capture_output=True, timeout=CHASH_TIMEOUT,
                       env=sanitizer_env())
    dt = time.monotonic() - t
    out, err = r.stdout.decode(), r.stderr.decode()
    for m in SANITIZER_MARKS:
        if m.decode() in err:
            fail("chash %s: sanitizer report:\n%s" % (" ".join(args), err[-3000:]))
    if r.returncode != expect:
        fail("chash %s exited %d, not %d\nstdout: %s\nstderr: %s" % (
            " ".join(args), r.returncode, expect, out[-2000:], err[-2000:]))
    return out, err, dt


def at(etcd, key, rev, prefix=False):
    """{key: (value, mod_revision)} of key (or its prefix) as etcd held it at revision rev."""
    body = {"key": b64(key), "revision": str(rev)}
    if prefix:
        k = key.encode()
        body["range_end"] = b64(k[:-1] + bytes([k[-1] + 1]))
    r = etcd.call("/v3/kv/range", body)
    return {unb64(kv["key"]).decode(): (unb64(kv.get("value")), int(kv["mod_revision"]))
            for kv in r.get("kvs", [])}


def pool_yaml(path, servers, membership, version=None):
    lines = ["alpha:", "  listen: 127.0.0.1:22121", "  redis: true", "  hash: fnv1a_64",
             "  distribution: ketama"]
    if membership:
        lines.append("  membership: " + membership)
    if version:
        lines.append("  version: " + version)
    lines.append("  servers:")
    lines += ["    - %s" % s for s in servers]
    return write_file(path, "\n".join(lines) + "\n")


def expected_doc(servers, version=None, epoch=None):
    d = {"servers": servers, "hash": "fnv1a_64", "distribution": "ketama"}
    if version:
        d["version"] = version
    if epoch is not None:
        d["epoch"] = epoch
    return d


def proposing(chash, etcd, args):
    """chash fleet apply ARGS started in the background; returns it once K/pending is there."""
    p = subprocess.Popen([chash, "fleet", "apply"] + args, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=sanitizer_env())
    try:
        wait_until(lambda: etcd.get(KEY + "/pending")[0] is not None or p.poll() is not None,
                   15, "apply proposing")
    except BaseException:
        p.kill()
        p.wait()
        raise
    if p.poll() is not None:
        fail("apply exited %r before it proposed" % p.poll())
    return p


def wait_all(etcd, pred, what, timeout=10):
    return etcd.wait_records(KEY, pred, timeout, what)


def body(t):
    chash, tmp = t.chash, t.tmp
    server = start_etcd(tmp, spawn)
    etcd = server.client
    url = "etcd://127.0.0.1:%d%s" % (server.port, KEY)
    dead = free_ports(1)[0]
    instances = []

    def start(iid, **kw):
        i = Instance(server.url, iid, **kw)
        i.start()
        instances.append(i)
        return i

    try:
        s1 = ["127.0.0.1:7001:1 s1", "127.0.0.1:7002:1 s2"]
        s2 = s1 + ["127.0.0.1:7003:2 s3"]
        s3 = s2 + ["127.0.0.1:7004:1 s4"]
        v1 = pool_yaml(os.path.join(tmp, "v1.yml"), s1, url, version="v1")
        v2 = pool_yaml(os.path.join(tmp, "v2.yml"), s2, url, version="v2")
        v3 = pool_yaml(os.path.join(tmp, "v3.yml"), s3, url)
        nomem = pool_yaml(os.path.join(tmp, "plain.yml"), s1, None)

        # ---- bad input: clear errors, exit 1 --------------------------------------------
        bad = write_file(os.path.join(tmp, "bad.yml"),
                         "alpha:\n  redis: true\n  servers:\n    - 127.0.0.1:7001:1\n  hash: nope\n")
        _, err, _ = run(chash, ["fleet", "apply", bad], 1)
        if "bad.yml:5:" not in err or "nope" not in err:
            fail("a bad NEW.yml: want file:line:column naming the bad hash, got %r" % err)
        _, err, _ = run(chash, ["fleet", "apply", nomem], 1)
        if "has no 'membership" not in err:
            fail("a pool without membership: got %r" % err)
        _, err, _ = run(chash, ["fleet", "status", nomem], 1)
        if "has no 'membership" not in err:
            fail("status of a pool without membership: got %r" % err)
        deadurl = "etcd://127.0.0.1:%d%s" % (dead, KEY)
        _, err, _ = run(chash, ["fleet", "status", "--etcd", deadurl], 1)
        if "http://127.0.0.1:%d/v3/kv/range" % dead not in err:
            fail("an unreachable etcd: want its URL in the message, got %r" % err)
        _, err, _ = run(chash, ["fleet", "apply", v1, "--etcd", "etcd://127.0.0.1:%d" % dead], 1)
        if "http://127.0.0.1:%d/v3/" % dead not in err:
            fail("apply to an unreachable etcd: want its URL in the message, got %r" % err)
        # the staged migration's options belong to apply --migrate: exit 2, nothing written
        for args, want in ((["fleet", "status", v1, "--migrate"], "--migrate applies to apply"),
                           (["fleet", "apply", v1, "--rate", "10"], "apply --migrate only"),
                           (["fleet", "apply", v1, "--match", "a*"], "apply --migrate only")):
            _, err, _ = run(chash, args, 2)
            if want not in err:
                fail("%s: want %r in the message, got %r" % (" ".join(args), want, err))
        if etcd.get(KEY)[0] is not None:
            fail("a failed command wrote K")
        log("bad input: clear errors, exit 1 (2 for options out of place)")

        # ---- no live instances: committed at once -----------------------------------------
        out, _, _ = run(chash, ["fleet", "apply", v1], 0)
        if "no live instances" not in out:
            fail("apply without instances should say so: %r" % out)
        val, c_rev = etcd.get(KEY)
        e1 = json.loads(val)["epoch"]
        hist = at(etcd, KEY + "/pending", c_rev - 1)
        if KEY + "/pending" not in hist:
            fail("no K/pending the revision before the commit: %r" % hist)
        p_val, p_rev = hist[KEY + "/pending"]
        if json.loads(val) != expected_doc(s1, "v1", e1):
            fail("committed document: %r" % val)
        if json.loads(p_val) != expected_doc(s1, "v1", e1):
            fail("proposed document: %r" % p_val)
        if not 0 < e1 <= p_rev:  # above the revision read before proposing: at most its own
            fail("epoch %d of a first apply on an empty key, proposed at revision %d" %
                 (e1, p_rev))
        log("no instances: epoch %d committed at once" % e1)

        # ---- three instances; the commit waits for the slowest prepare ----------------------
        start("a")
        start("b", prepare_delay=0.3)
        start("c", prepare_delay=0.8)
        wait_all(etcd, lambda r: len(r) == 3 and all(x["epoch"] == e1 for x in r.values()),
                 "instances on epoch %d" % e1)
        old_val, old_rev = etcd.get(KEY)
        out, _, _ = run(chash, ["fleet", "apply", v2, "--json"], 0)
        res = json.loads(out)
        val, c_rev = etcd.get(KEY)
        doc = json.loads(val)
        e2 = doc.get("epoch")
        if res.get("epoch") != e2 or not res.get("committed"):
            fail("apply's JSON %r against K's epoch %r" % (res, e2))
        if doc != expected_doc(s2, "v2", e2):
            fail("committed document: %r" % doc)
        before = at(etcd, KEY, c_rev - 1)
        if before.get(KEY) != (old_val, old_rev):
            fail("K changed before the commit revision %d: %r" % (c_rev, before))
        pend = at(etcd, KEY + "/pending", c_rev - 1)
        if KEY + "/pending" not in pend or \
                json.loads(pend[KEY + "/pending"][0]).get("epoch") != e2:
            fail("at %d K/pending was not epoch %d: %r" % (c_rev - 1, e2, pend))
        if e2 <= e1:
            fail("epoch %d proposed after %d" % (e2, e1))
        recs_before = at(etcd, KEY + "/instances/", c_rev - 1, prefix=True)
        prepared = {json.loads(v)["id"]: json.loads(v)["prepared"] for v, _ in recs_before.values()}
        if prepared != {"a": e2, "b": e2, "c": e2}:
            fail("committed before every instance prepared epoch %d: %r" % (e2, prepared))
        if at(etcd, KEY + "/pending", c_rev):
            fail("K/pending still there at the commit revision %d" % c_rev)
        recs = etcd.records(KEY)
        swaps = [recs[i]["swapped_unix_us"] for i in "abc"]
        if any(recs[i]["epoch"] != e2 for i in "abc"):
            fail("apply returned before every instance served %d: %r" % (e2, recs))
        want_window = (max(swaps) - min(swaps)) / 1000.0
        if res["instances"] != 3 or res["swapped"] != 3 or \
                abs(res["swap_window_ms"] - want_window) > 0.002:
            fail("apply's figures %r; the records' swap window is %.3f ms" % (res, want_window))
        if not 0 < res["commit_to_last_swap_ms"] < 10000:
            fail("commit to last swap: %r" % res["commit_to_last_swap_ms"])
        log("apply: epoch %d committed at revision %d after 3 prepares, window %.2f ms" % (
            e2, c_rev, res["swap_window_ms"]))

        # ---- a stalled instance: abort within the timeout, K untouched ------------------------
        st = start("stall", mode="stall")
        wait_all(etcd, lambda r: "stall" in r and r["stall"]["epoch"] == e2, "stall registered")
        k_before = etcd.get(KEY)
        _, err, dt = run(chash, ["fleet", "apply", v3, "--timeout", "1500"], 1)
        if "1 of 4 instances did not prepare" not in err or "within 1500 ms: stall (" not in err:
            fail("a stalled instance: want it (alone) named with the timeout, got %r" % err)
        if not 1.4 < dt < 1.5 + 8:
            fail("abort on a stalled instance took %.1f s with --timeout 1500" % dt)
        if etcd.get(KEY) != k_before or etcd.get(KEY + "/pending")[0] is not None:
            fail("after an abort K changed or K/pending is left")
        log("stalled instance: aborted after %.1f s, K untouched" % dt)

        # SIGINT while waiting for it: the change is withdrawn as on a timeout.
        p = proposing(chash, etcd, [v3, "--timeout", "30000"])
        try:
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=15)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        err = err.decode()
        if p.returncode != 1 or "interrupted (signal %d)" % signal.SIGINT not in err or \
                "withdrawn" not in err:
            fail("apply on SIGINT: exit %d, %r" % (p.returncode, err))
        if any(m.decode() in err for m in SANITIZER_MARKS):
            fail("apply on SIGINT: sanitizer report:\n%s" % err)
        if etcd.get(KEY) != k_before or etcd.get(KEY + "/pending")[0] is not None:
            fail("after SIGINT K changed or K/pending is left")
        st.stop()
        instances.remove(st)
        log("SIGINT during apply: withdrawn, K untouched")

        # ---- a failed prepare: abort at once, naming it and its error -------------------------
        fl = start("broken", mode="fail")
        wait_all(etcd, lambda r: "broken" in r and r["broken"]["epoch"] == e2, "broken registered")
        _, err, dt = run(chash, ["fleet", "apply", v3, "--timeout", "30000"], 1)
        if "broken" not in err or Instance.FAIL_REASON not in err:
            fail("a failed prepare: want the instance and its error, got %r" % err)
        if dt > 15:
            fail("abort on a failed prepare waited %.1f s (not at once)" % dt)
        if etcd.get(KEY) != k_before or etcd.get(KEY + "/pending")[0] is not None:
            fail("after a failed prepare K changed or K/pending is left")
        fl.stop()
        instances.remove(fl)
        log("failed prepare: aborted in %.1f s naming it" % dt)

        # ---- one change at a time; chash fleet abort ---------------------------------------
        p_rev = etcd.put(KEY + "/pending", json.dumps(expected_doc(s3)))
        out, _, _ = run(chash, ["fleet", "status", v1, "--json"], 0)
        st_json = json.loads(out)
        if (st_json["pending"] or {}).get("mod_revision") != p_rev or \
                st_json["pending"].get("epoch") != p_rev:
            fail("status does not show the pending change %d: %r" % (p_rev, st_json["pending"]))
        _, err, _ = run(chash, ["fleet", "apply", v3], 1)
        if "a change is pending (epoch %d)" % p_rev not in err or "chash fleet abort" not in err:
            fail("a second apply: got %r" % err)
        if etcd.get(KEY + "/pending")[1] != p_rev or etcd.get(KEY) != k_before:
            fail("a refused apply changed K or K/pending")
        out, _, _ = run(chash, ["fleet", "abort", v1], 0)
        if str(p_rev) not in out or etcd.get(KEY + "/pending")[0] is not None:
            fail("chash fleet abort: %r; K/pending %r" % (out, etcd.get(KEY + "/pending")))
        if etcd.get(KEY) != k_before:
            fail("abort changed K")
        out, _, _ = run(chash, ["fleet", "abort", "--etcd", url], 0)
        if "no change is pending" not in out:
            fail("abort with nothing pending: %r" % out)
        log("a pending change refuses apply; chash fleet abort removes it")

        # ---- status: the instances and the skew ----------------------------------------------
        start("zz-old", mode="frozen", epoch=e1)
        recs = wait_all(etcd, lambda r: "zz-old" in r and len(r) == 4, "frozen registered")
        # --etcd with a file overrides its endpoint: v1's is right, nomem's absent, so use a
        # copy of v1 pointing at a dead port.
        wrong = pool_yaml(os.path.join(tmp, "wrong.yml"), s1, deadurl)
        out, _, _ = run(chash, ["fleet", "status", wrong, "--etcd",
                                "etcd://127.0.0.1:%d" % server.port, "--json"], 0)
        s = json.loads(out)
        if s["committed"]["epoch"] != e2 or s["committed"]["servers"] != 3 or \
                s["committed"]["version"] != "v2" or s["pending"] is not None:
            fail("status's committed/pending: %r" % s)
        ids = [x["id"] for x in s["instances"]]
        if ids != ["a", "b", "c", "zz-old"]:
            fail("status's instances: %r" % ids)
        first = min(r["since_unix_ms"] for r in recs.values() if r["epoch"] == e2)
        if s["skew"]["behind"] != ["zz-old"] or s["skew"]["first_since_unix_ms"] != first:
            fail("status's skew %r; want behind [zz-old], first since %d" % (s["skew"], first))
        for x in s["instances"]:
            r = recs[x["id"]]
            for f in ("epoch", "servers", "prepared", "prepare_failed", "warm_up", "refused",
                      "since_unix_ms", "swapped_unix_us"):
                if x[f] != r[f]:
                    fail("status's %s of %s: %r, the record says %r" % (f, x["id"], x[f], r[f]))
        out, _, _ = run(chash, ["fleet", "status", "--etcd", url], 0)
        for want in ("committed  epoch %d" % e2, "1 of 4 instances behind epoch %d" % e2,
                     "zz-old (%d)" % e1, "the first began serving it"):
            if want not in out:
                fail("status's text lacks %r:\n%s" % (want, out))
        for i in "abc":
            if "\n  %s " % i not in out:
                fail("status's text does not list instance %s:\n%s" % (i, out))
        log("status: 4 instances, zz-old behind epoch %d" % e2)

        # ---- an instance that refuses the commit: exit 1 naming it; K holds the change ------
        for i in [x for x in instances if x.iid == "zz-old"]:
            i.stop()
            instances.remove(i)
        start("picky", mode="refuse", epoch=e2)
        wait_all(etcd, lambda r: set(r) == {"a", "b", "c", "picky"} and
                 all(x["epoch"] == e2 for x in r.values()), "picky registered")
        out, err, _ = run(chash, ["fleet", "apply", v3, "--json", "--timeout", "20000"], 1)
        val, _ = etcd.get(KEY)
        e3 = json.loads(val)["epoch"]
        res = json.loads(out)
        want = "committed epoch %d, but instance picky refused it: %s" % (e3, Instance.REFUSE_REASON)
        if want not in err or res.get("failed") != "swap" or res.get("committed") is not True \
                or res.get("epoch") != e3 or e3 <= e2:
            fail("a refused commit: want %r; got %r / %r" % (want, err, res))
        log("a refused commit: exit 1 naming the instance, epoch %d in K" % e3)
        for i in [x for x in instances if x.iid == "picky"]:
            i.stop()
            instances.remove(i)

        # ---- an explicit epoch far above the revisions: the next apply still wins -------------
        etcd.put(KEY, json.dumps(expected_doc(s2, "v2", 1000)))
        wait_all(etcd, lambda r: set(r) == {"a", "b", "c"} and
                 all(x["epoch"] == 1000 for x in r.values()), "instances on epoch 1000")
        if etcd.revision() >= 1000:
            fail("the test needs etcd's revision below 1000 (it is %d)" % etcd.revision())
        out, _, _ = run(chash, ["fleet", "apply", v3, "--json"], 0)
        res = json.loads(out)
        if res.get("epoch") != 1001 or json.loads(etcd.get(KEY)[0]).get("epoch") != 1001:
            fail("apply after an explicit epoch 1000: want epoch 1001, got %r" % res)
        log("an explicit epoch 1000, then apply: epoch 1001 committed")

        # ---- an instance lost mid-apply: committed without it, exit 3, noted and shown -------
        gone = start("gone", mode="stall")
        wait_all(etcd, lambda r: "gone" in r, "gone registered")
        p = proposing(chash, etcd, [v2, "--json", "--timeout", "30000"])
        try:
            wait_all(etcd, lambda r: all(r[i]["prepared"] > 1001 for i in "abc"),
                     "a, b, c prepared; gone stalls")
            if etcd.get(KEY + "/pending")[0] is None:
                fail("apply committed while a live instance had not prepared")
            gone.stop()      # its lease revoked: its record vanishes, as when the lease expires
            instances.remove(gone)
            out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        res = json.loads(out.decode() or "{}")
        val, c_rev = etcd.get(KEY)
        e4 = json.loads(val)["epoch"]
        if p.returncode != 3 or res.get("epoch") != e4 or \
                [x["id"] for x in res.get("committed_without", [])] != ["gone"] or \
                "lease expired" not in res["committed_without"][0]["reason"]:
            fail("apply with an instance lost: exit %d, %r %r" % (p.returncode, out, err))
        note, note_rev = etcd.get(KEY + "/lost/gone")
        if note is None or note_rev != c_rev or json.loads(note)["epoch"] != e4:
            fail("no K/lost/gone note in the commit (revision %d): %r at %d" %
                 (c_rev, note, note_rev))
        if "gone" in {json.loads(v)["id"] for v, _ in
                      at(etcd, KEY + "/instances/", c_rev - 1, prefix=True).values()}:
            fail("committed while gone's record was still there")
        out, _, _ = run(chash, ["fleet", "status", "--etcd", url, "--json"], 0)
        lost = json.loads(out)["lost"]
        if [(x["id"], x["epoch"], x["registered"]) for x in lost] != [("gone", e4, False)]:
            fail("status's lost instances: %r" % lost)
        out, _, _ = run(chash, ["fleet", "status", "--etcd", url], 0)
        if "lost       gone: epoch %d was committed without it" % e4 not in out:
            fail("status's text does not show the lost instance:\n%s" % out)
        log("an instance lost mid-apply: committed without it (exit 3), noted in K/lost/gone")
    finally:
        for i in instances:
            i.stop_ev.set()
        for i in instances:
            i.join(timeout=10)
        server.stop()
    return "apply, abort, status against a real etcd"


if __name__ == "__main__":
    run_test(body, programs=("etcd",), binaries=(("chash", "chash"),))
