#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/hotkeys: chash-proxy under hot keys, 8 redis-servers, 1M keys (issue 25).

Loads (bench/hotkeys/hot_load: 50 connections, one GET in flight each, keys key:<i>):
  hot30     key:0 at 30% of the reads, the rest uniform over 1M keys;
  late30    uniform for the first half of the run, then key:0 at 30% (a key that turns hot);
  hot100    key:0 alone: 50 clients reading one key (singleflight's own case);
  zipf1.1   zipf s = 1.1 over 1M keys;  zipf1.3   s = 1.3.
Only the hot keys exist at the servers (key:0, or key:0..9 for zipf: ranks 1 to 10, the true
top 10 of such a stream), every other GET misses: so each server's INFO keyspace_hits is
exactly the GETs of the hot keys that reached it, and cmdstat_get its GETs of all keys.

Modes, each a proxy of its own over the same servers, rounds alternating the modes (the median
of the rounds is kept per cell, so a busy phase of a shared box hits every mode alike):
  off        coalesce_reads: false, detection on (the default);
  coalesce   coalesce_reads: true (the default), detection on;
  near       coalesce_reads: false, hot_cache: 1000 (the near cache, 1 s TTL, threshold 200/s;
             the servers' invalidations on, near_tracking's default);
  near_ttl   the same with near_tracking: false (the TTL alone, as before issue 37);
  spread     coalesce_reads: false, replicas: 2, hot_spread: true (a hot key's reads over its
             two owners; every key written to both);
  nodetect   coalesce_reads: false, --no-hot-keys: detection's cost is nodetect against off.
Per load and mode: backend GETs of the hot keys (and as a share of the hot reads sent), each
server's share of the GETs (max / mean over the 8), the proxy's CPU per request (utime + stime
of its process over the run, /proc), the p99 latency hot_load saw, and the detector's recall:
of the true top 10 (top 100) keys the client sent, how many GET /-/hotkeys ranks in its top 10
(top 100) by 60 s rate, and by the last window's rate ("within one window").

usage: bench/hotkeys/bench_hotkeys.py [--build build/release] [--seconds 5] [--rounds 3]
                                      [--loads hot30,late30,hot100,zipf1.1,zipf1.3] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "proxy"))
import proxyharness as ph  # noqa: E402  (real servers on free loopback ports, stopped by pid)
sys.path.insert(0, os.path.join(ROOT, "bench"))
from benchutil import cpu_seconds, dier, loadavg, say  # noqa: E402

NODES = 8
KEYS = 1000000
CLIENTS = 50
LOADS = {"hot30": ("hot:0.3", 1), "late30": ("late:0.3", 1), "hot100": ("hot:1", 1),
         "zipf1.1": ("zipf:1.1", 10),
         "zipf1.3": ("zipf:1.3", 10)}
MODES = {"off": ({"coalesce_reads": False}, []),
         "coalesce": ({}, []),
         "near": ({"coalesce_reads": False, "hot_cache": 1000}, []),
         "near_ttl": ({"coalesce_reads": False, "hot_cache": 1000, "near_tracking": False}, []),
         "spread": ({"coalesce_reads": False, "replicas": 2, "hot_spread": True}, []),
         "nodetect": ({"coalesce_reads": False}, ["--no-hot-keys"])}


die = dier("hotkeys", ph.kill_all)


def redis_stats(server):
    """(GETs served, keyspace hits) since the last CONFIG RESETSTAT."""
    info = server.call("INFO", "all").decode()
    gets = hits = 0
    for line in info.split("\r\n"):
        if line.startswith("cmdstat_get:"):
            gets = int(line.split("calls=")[1].split(",")[0])
        elif line.startswith("keyspace_hits:"):
            hits = int(line.split(":")[1])
    return gets, hits


def recall(truth, ranked, n):
    return len(set(truth[:n]) & set(ranked[:n]))


def run(args, load, mode, servers, tmp):
    settings, flags = MODES[mode]
    listen, mport = ph.free_ports(2)
    conf = ph.write_file(os.path.join(tmp, "hot-%s.yml" % mode),
                         ph.pool_yaml("hot", listen, [(s.text, 1, None) for s in servers],
                                      timeout=5000, **settings))
    px = ph.Proxy(args.proxy, tmp, conf, [("127.0.0.1", listen)], label="proxy-" + mode,
                  extra_args=["--metrics-port", str(mport)] + flags).start()
    gen, nhot = LOADS[load]
    with ph.Resp(("127.0.0.1", listen)) as c:
        for k in range(nhot):
            if c.call("SET", "key:%d" % k, "v" * 64) != b"OK":
                die("SET key:%d through the proxy" % k)
    for s in servers:
        s.call("CONFIG", "RESETSTAT")
    cpu0 = cpu_seconds(px.proc.pid)
    r = subprocess.run([args.load, "-p", str(listen), "-c", str(CLIENTS), "-d",
                        str(args.seconds), "-m", gen, "-k", str(KEYS), "-t", "100",
                        "-s", str(args.seed)], capture_output=True, text=True,
                       timeout=args.seconds + 120)
    cpu1 = cpu_seconds(px.proc.pid)
    if r.returncode != 0:
        die("hot_load: %s" % r.stderr.strip())
    out = json.loads(r.stdout)
    stats = [redis_stats(s) for s in servers]
    detected = None
    if mode != "nodetect":
        time.sleep(1.2)  # the run's last window merged (a window is 1 s)
        with urllib.request.urlopen("http://127.0.0.1:%d/-/hotkeys" % mport, timeout=10) as f:
            doc = json.loads(f.read())
        keys = doc["pools"][0]["keys"]
        by60 = [int(e["key"].split(":")[1]) for e in keys]
        by1 = [int(e["key"].split(":")[1])
               for e in sorted(keys, key=lambda e: -e["rate"])]
        detected = (by60, by1)
    px.stop(check=False)
    truth = [k for k, _ in out["top"]]
    if nhot == 1:  # one hot key: the rest of the top is noise over uniform keys
        truth = truth[:1]
    hot_sent = sum(n for k, n in out["top"] if k < nhot)
    gets = [g for g, _ in stats]
    mean = statistics.mean(gets) if sum(gets) else 1
    row = {"load": load, "mode": mode, "requests": out["requests"], "rps": out["rps"],
           "p99_us": out["p99_us"], "cpu_us": 1e6 * (cpu1 - cpu0) / max(1, out["requests"]),
           "hot_sent": hot_sent, "hot_backend": sum(h for _, h in stats),
           "share": max(gets) / mean if mean else 0, "errors": out["errors"]}
    if detected is not None:
        row.update(r10=recall(truth, detected[0], 10), r100=recall(truth, detected[0], 100),
                   r10_1s=recall(truth, detected[1], 10), r100_1s=recall(truth, detected[1], 100))
    return row


def median_rows(rows):
    out = {}
    for r in rows:
        out.setdefault((r["load"], r["mode"]), []).append(r)
    med = []
    for (load, mode), rs in out.items():
        m = {"load": load, "mode": mode, "rounds": len(rs)}
        for k in rs[0]:
            if k not in ("load", "mode"):
                m[k] = statistics.median(r[k] for r in rs)
        med.append(m)
    return med


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loads", default=",".join(LOADS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    args.proxy = os.path.join(args.build, "proxy", "chash-proxy")
    args.load = os.path.join(args.build, "bench", "hot_load")
    for p in (args.proxy, args.load):
        if not os.access(p, os.X_OK):
            die("%s is not built (make build)" % p)
    loads = [x for x in args.loads.split(",") if x]
    if any(x not in LOADS for x in loads):
        die("--loads: of %s" % ", ".join(LOADS))
    exe, = ph.require_programs("redis-server")
    tmp = ph.make_tmpdir()
    servers = ph.start_redises(exe, tmp, NODES)
    say("bench hotkeys: %d redis-servers, %d keys, %d connections, %g s a run, %d rounds; "
        "load average %s" % (NODES, KEYS, CLIENTS, args.seconds, args.rounds,
                             loadavg()))
    rows = []
    modes = [x for x in args.modes.split(",") if x]
    if any(x not in MODES for x in modes):
        die("--modes: of %s" % ", ".join(MODES))
    for rnd in range(args.rounds):
        for load in loads:
            order = modes[rnd % len(modes):] + modes[:rnd % len(modes)]
            for mode in order:
                for s in servers:
                    s.call("FLUSHALL")
                rows.append(run(args, load, mode, servers, tmp))
    med = median_rows(rows)
    say("%-8s %-9s %9s %8s %8s %11s %10s %7s %7s %7s %9s" % (
        "load", "mode", "rps", "p99 us", "cpu us", "hot sent", "hot GETs", "share", "top10",
        "top100", "1s 10/100"))
    for load in loads:
        for mode in modes:
            m = next(r for r in med if r["load"] == load and r["mode"] == mode)
            top = (10, 100) if LOADS[load][1] > 1 else (1, 1)
            rec = ("%d/%d" % (m["r10"], top[0]), "%d/%d" % (m["r100"], top[1]),
                   "%d/%d" % (m["r10_1s"], m["r100_1s"])) if "r10" in m else ("-", "-", "-")
            say("%-8s %-9s %9.0f %8.0f %8.2f %11.0f %10.0f %7.2f %7s %7s %9s" % (
                load, mode, m["rps"], m["p99_us"], m["cpu_us"], m["hot_sent"],
                m["hot_backend"], m["share"], rec[0], rec[1], rec[2]))
        by = {r["mode"]: r for r in med if r["load"] == load}
        if "coalesce" in by and "off" in by:
            cut = 1 - by["coalesce"]["hot_backend"] / max(1, by["off"]["hot_backend"])
            say("%-8s coalescing cuts the hot keys' backend GETs by %.1f%%" % (load, 100 * cut))
        if "near" in by and "off" in by:
            cut = 1 - by["near"]["hot_backend"] / max(1, by["off"]["hot_backend"])
            say("%-8s the near cache cuts the hot keys' backend GETs by %.2f%%; the busiest "
                "server carries %.2fx the mean (off: %.2fx)" % (
                    load, 100 * cut, by["near"]["share"], by["off"]["share"]))
        if "spread" in by and "off" in by:
            say("%-8s spreading: the busiest server carries %.2fx the mean (off: %.2fx)" % (
                load, by["spread"]["share"], by["off"]["share"]))
        if "nodetect" in by and "off" in by:
            cost = by["off"]["cpu_us"] / by["nodetect"]["cpu_us"] - 1
            say("%-8s detection costs %+.1f%% CPU per request (off / nodetect)" % (
                load, 100 * cost))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "median": med}, f, indent=1)
    ph.kill_all()


if __name__ == "__main__":
    main()
