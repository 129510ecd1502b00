#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Stale reads during a membership change across three chash-proxy processes (issue 14).

A real etcd and 6 redis-servers on loopback ports; three chash-proxy processes (this build's
Release binary) in front of the first 4. A load writes a key through one proxy and at once reads
it back through another (SET k v<n> via proxy i, GET k via proxy i+1 mod 3), each client thread
owning its keys, so the value it must read is known: a read of an older version is a stale read,
a nil a miss. Mid-run the pool grows 4 -> 6, by one of:

  sighup   today's way: each proxy's file rewritten and SIGHUPed, one after the other, --gap ms
           apart (a rolling rollout; the proxies disagree from the first SIGHUP to the last);
  etcd     the document written once to the pool's etcd key: every proxy applies it on its own
           when its watch delivers it (no coordination);
  apply    `chash fleet apply NEW.yml`: the two-phase change (docs/FLEET.md): every proxy
           prepares, then all swap on the commit.

Per mode: reads, stale reads and misses; the swap window (first to last swap, from the proxies'
records for etcd and apply, from their logs' reload times for sighup); stale reads outside it
(a write-read pair that ended before the first swap or began after the last); for etcd and
apply the time from the etcd write (the commit) to the last proxy serving it. Goals (issue 14):
apply: 0 stale reads outside the swap window, a swap window <= 50 ms, every proxy on the new
epoch within 1 s of the commit. MET or MISSED, never fatal.

usage: bench/fleet/bench_fleet.py [--build build/release] [--keys N] [--threads T]
           [--before S] [--after S] [--gap MS] [--modes sighup,etcd,apply] [--json FILE]
           [--quick]
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "proxy"))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
import proxyharness as ph  # noqa: E402
import etcd  # noqa: E402

POOL = "fleet"
KEY = "/chash/pools/fleet"
NPROXY = 3


class Loader(threading.Thread):
    """SET through proxy i, GET through proxy i+1, on its own keys; each anomaly with its
    wall-clock interval (us)."""

    def __init__(self, proxies, keys, tag, offset):
        super().__init__(daemon=True)
        self.proxies, self.keys, self.tag, self.offset = proxies, keys, tag, offset
        self.stop_flag = threading.Event()
        self.version = {k: 0 for k in keys}
        self.reads = 0
        self.stale, self.misses, self.errors = [], [], []

    def run(self):
        conns = [ph.Resp(p.listens[0]) for p in self.proxies]
        i = self.offset
        try:
            while not self.stop_flag.is_set():
                for k in self.keys:
                    if self.stop_flag.is_set():
                        break
                    a, b = i % NPROXY, (i + 1) % NPROXY
                    i += 1
                    self.version[k] += 1
                    want = ("v%d" % self.version[k]).encode()
                    t0 = time.time_ns() // 1000
                    try:
                        r = conns[a].call("SET", k, want)
                        got = conns[b].call("GET", k)
                    except Exception as e:  # noqa: BLE001 (counted, reported)
                        self.errors.append(repr(e))
                        return
                    t1 = time.time_ns() // 1000
                    self.reads += 1
                    if r != b"OK":
                        self.errors.append("SET: %r" % r)
                    elif got is None:
                        self.misses.append((t0, t1))
                    elif got != want:
                        self.stale.append((t0, t1))
        finally:
            for c in conns:
                c.close()


def conf_file(path, port, redises, n, etcd_port=None):
    lines = ["%s:" % POOL, "  listen: 127.0.0.1:%d" % port, "  redis: true",
             "  hash: md5", "  distribution: ketama"]
    if etcd_port:
        lines += ["  membership: etcd://127.0.0.1:%d%s" % (etcd_port, KEY),
                  "  membership_hold_down: 0"]
    else:
        lines.append("  servers:")
        lines += ["    - %s:1 r%d" % (r.text, i) for i, r in enumerate(redises[:n])]
    ph.write_file(path, "\n".join(lines) + "\n")
    return path


def doc(redises, n):
    return json.dumps({"servers": ["%s:1 r%d" % (r.text, i) for i, r in enumerate(redises[:n])],
                       "hash": "md5", "distribution": "ketama"})


def reload_times_us(proxy, after_us):
    """Wall-clock times (us) of the "reload done" lines the proxy logged after after_us."""
    out = []
    for line in open(proxy.log, errors="replace"):
        m = re.match(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.(\d{3})\] NOTICE reload done", line)
        if m:
            t = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"))
            us = int(t * 1e6) + int(m.group(2)) * 1000
            if us >= after_us - 1000:
                out.append(us)
    return out


def run_mode(mode, args, tmp, redises, server, chash, proxy_exe):
    client = server.client if server else None
    ports = ph.free_ports(NPROXY)
    proxies = []
    for i, port in enumerate(ports):
        path = os.path.join(tmp, "%s-%d.yml" % (mode, i))
        conf_file(path, port, redises, 4, server.port if mode != "sighup" else None)
        proxies.append(ph.Proxy(proxy_exe, tmp, path, [("127.0.0.1", port)],
                                label="%s-px%d" % (mode, i),
                                extra_args=["--fleet-id", "%s-px%d" % (mode, i),
                                            "--fleet-ttl", "5", "--threads", "1"]).start())
    ids = ["%s-px%d" % (mode, i) for i in range(NPROXY)]
    if mode != "sighup":
        client.wait_records(KEY, lambda r: all(i in r for i in ids), 15, "%s: registered" % mode)
    per = args.keys // args.threads
    loaders = [Loader(proxies, ["bf:%s:%d:%d" % (mode, t, k) for k in range(per)], t, t)
               for t in range(args.threads)]
    for ld in loaders:
        ld.start()
    time.sleep(args.before)
    start_us = time.time_ns() // 1000
    commit_us = None
    to_last_ms = None   # from the etcd write (the commit) to the last proxy's swap
    swaps = []
    if mode == "sighup":
        for i, p in enumerate(proxies):
            conf_file(p.config, p.listens[0][1], redises, 6)
            p.proc.send_signal(signal.SIGHUP)
            if i + 1 < NPROXY:
                time.sleep(args.gap / 1000.0)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            swaps = [reload_times_us(p, start_us) for p in proxies]
            if all(swaps):
                break
            time.sleep(0.05)
        swaps = [s[0] for s in swaps if s]
    else:
        if mode == "etcd":
            commit_us = time.time_ns() // 1000
            epoch = client.put(KEY, doc(redises, 6))
        else:
            new = conf_file(os.path.join(tmp, "apply-new.yml"), 1, redises, 6)
            r = subprocess.run([chash, "fleet", "apply", new, "--pool", POOL, "--etcd",
                                "etcd://127.0.0.1:%d%s" % (server.port, KEY), "--json"],
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                raise RuntimeError("chash fleet apply: %s%s" % (r.stdout, r.stderr))
            rep = json.loads(r.stdout)
            epoch = rep["epoch"]
            to_last_ms = rep["commit_to_last_swap_ms"]   # apply's own clock, before the commit
        recs = client.wait_records(KEY, lambda rr: all(rr.get(i, {}).get("epoch") == epoch
                                                       for i in ids), 15, "%s: swapped" % mode)
        swaps = [recs[i]["swapped_unix_us"] for i in ids]
        if commit_us is not None:
            to_last_ms = (max(swaps) - commit_us) / 1000.0
    time.sleep(args.after)
    for ld in loaders:
        ld.stop_flag.set()
    for ld in loaders:
        ld.join(timeout=10)
    for p in proxies:
        p.stop(check=False)
    first, last = min(swaps), max(swaps)
    stale = [s for ld in loaders for s in ld.stale]
    outside = [s for s in stale if s[1] < first or s[0] > last]
    row = {
        "mode": mode,
        "reads": sum(ld.reads for ld in loaders),
        "stale": len(stale),
        "stale_outside_window": len(outside),
        "misses": sum(len(ld.misses) for ld in loaders),
        "errors": sum(len(ld.errors) for ld in loaders),
        "swap_window_ms": (last - first) / 1000.0,
        "write_to_last_swap_ms": to_last_ms,
    }
    if mode != "sighup":   # back to 4 servers for the next mode, without proxies watching
        client.put(KEY, doc(redises, 4))
    for r in redises:
        r.call("FLUSHALL")
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--keys", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--before", type=float, default=2.0)
    ap.add_argument("--after", type=float, default=3.0)
    ap.add_argument("--gap", type=float, default=1000.0)
    ap.add_argument("--modes", default="sighup,etcd,apply")
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.keys, args.before, args.after, args.gap = 600, 1.0, 1.5, 500.0
    proxy_exe = os.path.join(args.build, "proxy", "chash-proxy")
    chash = os.path.join(args.build, "tools", "chash")
    tmp = ph.make_tmpdir()
    redises = ph.start_redises("redis-server", tmp, 6)
    server = etcd.EtcdServer(tmp, lambda argv, out: ph.spawn(argv, out)).start()
    server.client.put(KEY, doc(redises, 4))
    rows = []
    for mode in args.modes.split(","):
        rows.append(run_mode(mode, args, tmp, redises, server, chash, proxy_exe))
    server.stop()
    print("membership change 4 -> 6 redis-servers under three chash-proxy processes; a write "
          "through one proxy read back at once through the next (%d keys, %d threads)" %
          (args.keys, args.threads))
    print("%-7s %8s %7s %9s %7s %7s %11s %14s" % ("mode", "reads", "stale", "outside", "misses",
                                                  "errors", "window ms", "write->last ms"))
    for r in rows:
        print("%-7s %8d %7d %9d %7d %7d %11.1f %14s" % (
            r["mode"], r["reads"], r["stale"], r["stale_outside_window"], r["misses"],
            r["errors"], r["swap_window_ms"],
            "%.1f" % r["write_to_last_swap_ms"] if r["write_to_last_swap_ms"] is not None
            else "-"))
    for r in rows:
        if r["mode"] != "apply":
            continue
        goals = [("0 stale reads outside the swap window", r["stale_outside_window"] == 0),
                 ("swap window <= 50 ms", r["swap_window_ms"] <= 50),
                 ("every proxy on the new epoch within 1 s of the commit",
                  r["write_to_last_swap_ms"] is not None and r["write_to_last_swap_ms"] <= 1000)]
        for what, ok in goals:
            print("goal (apply): %s: %s" % (what, "MET" if ok else "MISSED"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    ph.kill_all()


if __name__ == "__main__":
    main()
