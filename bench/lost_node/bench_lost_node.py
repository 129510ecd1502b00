#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A lost cache node under a cache-aside load, through chash-proxy (issue 26): kill -9 of one of
8 redis-servers, without replicas, with `replicas: 2`, and with a gutter pool, side by side.

Per mode: 8 redis-servers on free loopback ports (no persistence), plus one for the gutter pool;
chash-proxy over the 8 (chash's defaults, auto_eject_hosts with 2 failures in 10 s, a first
probe after 1 s, then every 2 s at most); every key of the key space filled once through the proxy; then
bench/cache_aside (bench/migration/cache_aside.c) reads at a steady rate, every miss one
database read followed by a SET with a TTL, 1 % writes (a SET of the key's new version), values
carrying their version (stale reads counted). After a warm period one server is killed with
SIGKILL; after --down seconds it is started again, empty, on its port (readmitted by the
proxy's probe); the run goes on for --after seconds.

  none      the pool as it is: the lost node's keys go to the next server of the ring, and miss;
  replicas  `replicas: 2`: every key has two owners, a read goes to the first one up;
  gutter    `gutter: gutter` (a one-server pool) with `gutter_ttl`: while the node is out its
            keys' reads and fills go to the gutter pool, with their TTL capped.
  readmit   none's pool with `readmit_ramp: --readmit-ramp` (issue 40, item 3): when the node
            returns, each of its keys goes back to it at readmission + XXH3_64(key) mod the
            ramp, the server that held it meanwhile serving it until then.

Per mode: the lost node's keys (its share of the key space, from `chash lookup`), the extra
database reads from the kill to the end (misses above the warm period's rate) as a share of the
lost node's keys, the peak miss share of a second, client errors (error replies, timeouts,
closed connections) from the kill on, stale reads after the node returned, and the request rate
of the 7 healthy servers while the node was out against the warm period's (each server's
`total_commands_processed`, sampled once a second, directly), also per client operation (the
driver's reads and writes in the same spans), which a driver running late on a busy box does
not distort. Goals (issue 26): replicas 2:
extra database reads <= 1 % of the lost node's keys, 0 client errors, 0 stale after it returns;
gutter: the healthy servers' requests per client operation rise <= 2 % over their baseline, 0
stale after the return.
readmit: the database reads per second at the return (the peak from the node's restart on,
above the warm period's rate) fall at least 5x from none's (issue 40), with 0 stale reads after
the return. A key's misses cannot spread over more than the ramp: the peak falls by about
ramp x a key's reads per second (each returning key misses once, at its first read after its
switch), so the ramp must be several times the mean interval between two reads of a key
(docs/PERFORMANCE.md's run: 20,000 keys at 10,000 reads/s, a key read every 2 s, a 20 s ramp).
readmit is not among the default modes (`--modes none,readmit`): `make demo` stays as it was.
Goals are MET or MISSED, never fatal. A build whose chash-proxy refuses `replicas` or `gutter`
(`chash-proxy -t`) gets its row marked "not supported by this build".

usage: bench/lost_node/bench_lost_node.py [--build build/release] [--quick] [--modes M,..]
           [--keys K] [--rate R] [--warm S] [--down S] [--after S] [--gutter-ttl MS]
           [--readmit-ramp MS] [--json FILE] [--columns]
  --quick   20,000 keys at 3,000 reads/s, 4 s warm, 8 s down, 5 s after: about a minute for
            the three modes (`make demo`).
  --columns only the database reads per second of each mode, side by side (the demo's view).
Full run (defaults, the seed scenario): 200,000 keys at 10,000 reads/s, 20 connections, warm
10 s, down 30 s, after 15 s: about 4 minutes.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "proxy"))
import proxyharness as ph  # noqa: E402  (real servers on free loopback ports, stopped by pid)
sys.path.insert(0, os.path.join(ROOT, "bench"))
from benchutil import dier, loadavg, say  # noqa: E402

POOL = "lost"
NODES = 8
VICTIM = 3
MODES = ("none", "replicas", "gutter", "readmit")
DRIVER_SLACK = 30


die = dier("lost_node", ph.kill_all)


def config(listen, servers, mode, gutter_listen, gutter_server, gutter_ttl, readmit_ramp=20000):
    """The pool over servers (Redis), with the mode's keys; gutter mode adds the gutter pool."""
    settings = {"auto_eject_hosts": True, "server_failure_limit": 2,
                "server_retry_timeout": 1000, "server_retry_max": 2000, "timeout": 1000}
    if mode == "replicas":
        settings["replicas"] = 2
    elif mode == "readmit":
        settings["readmit_ramp"] = readmit_ramp
    elif mode == "gutter":
        settings["gutter"] = "gutter"
        settings["gutter_ttl"] = gutter_ttl
    text = ph.pool_yaml(POOL, listen, [(s.text, 1, "cache-%02d" % (i + 1))
                                       for i, s in enumerate(servers)], **settings)
    if mode == "gutter":
        text += ph.pool_yaml("gutter", gutter_listen, [(gutter_server.text, 1, "gutter-01")])
    return text


def supported(proxy_bin, tmp, mode, servers, gutter_server, gutter_ttl, readmit_ramp):
    """Whether this chash-proxy accepts the mode's config (chash-proxy -t), and why not."""
    path = os.path.join(tmp, "probe-%s.yml" % mode)
    l1, l2 = ph.free_ports(2)
    ph.write_file(path, config(l1, servers, mode, l2, gutter_server, gutter_ttl, readmit_ramp))
    r = subprocess.run([proxy_bin, "-t", "-c", path], capture_output=True, text=True, timeout=30)
    last = ((r.stdout + r.stderr).strip().splitlines() or [""])[-1]
    return r.returncode == 0, last.rsplit(": ", 1)[-1]


def victim_keys(chash, conf, keys, victim_text):
    """How many of ca:0 .. ca:keys-1 the victim owns first (`chash lookup` on the config)."""
    r = subprocess.run([chash, "lookup", "--config", conf, "--pool", POOL, "-"],
                       input="".join("ca:%d\n" % k for k in range(keys)), capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        die("chash lookup: %s" % r.stderr.strip())
    owners = [line.split("\t")[1] for line in r.stdout.splitlines() if "\t" in line]
    if len(owners) != keys:
        die("chash lookup placed %d of %d keys" % (len(owners), keys))
    return sum(1 for o in owners if o == victim_text or o.startswith(victim_text + " "))


def commands_processed(server):
    """INFO stats' total_commands_processed of a redis-server, or None when it does not answer."""
    try:
        with socket.create_connection(server.addr, timeout=0.5) as s:
            s.sendall(b"INFO stats\r\n")
            data = b""
            while b"\r\n" not in data or len(data) < int(data.split(b"\r\n", 1)[0][1:]) + 5:
                chunk = s.recv(65536)
                if not chunk:
                    return None
                data += chunk
    except (OSError, ValueError):
        return None
    for line in data.decode("utf-8", "replace").splitlines():
        if line.startswith("total_commands_processed:"):
            return int(line.split(":", 1)[1])
    return None


class Sampler(threading.Thread):
    """Each healthy server's total_commands_processed once a second, on the driver's clock
    (time.monotonic): [(t, [count per healthy server])]."""

    def __init__(self, servers):
        threading.Thread.__init__(self, daemon=True)
        self.servers, self.samples, self.stop = servers, [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            t = time.monotonic()
            self.samples.append((t, [commands_processed(s) for s in self.servers]))
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - t)))

    def rate(self, t0, t1):
        """The healthy servers' commands per second between the samples nearest t0 and t1
        (their sum), or None."""
        pts = [(t, c) for t, c in self.samples if t0 <= t <= t1 and None not in c]
        if len(pts) < 2 or pts[-1][0] - pts[0][0] < 0.5:
            return None
        return (sum(pts[-1][1]) - sum(pts[0][1])) / (pts[-1][0] - pts[0][0])


def run_mode(args, mode, servers, gutter_server, tmp, proxy_bin, chash):
    for s in servers + [gutter_server]:
        if s.call("FLUSHALL") != b"OK":
            die("%s: FLUSHALL failed" % s.text)
    listen, gutter_listen = ph.free_ports(2)
    conf = ph.write_file(os.path.join(tmp, "lost-%s.yml" % mode),
                         config(listen, servers, mode, gutter_listen, gutter_server,
                                args.gutter_ttl, args.readmit_ramp))
    lost_keys = victim_keys(chash, conf, args.keys, servers[VICTIM].text)
    listens = [("127.0.0.1", listen)] + ([("127.0.0.1", gutter_listen)] if mode == "gutter"
                                         else [])
    proxy = ph.Proxy(proxy_bin, tmp, conf, listens, label="proxy-lost-%s" % mode).start()
    fill = subprocess.run([args.driver, "-h", "127.0.0.1", "-p", str(listen), "-P", "redis",
                           "-r", str(args.keys), "-c", "20", "-e", "3600", "-F"],
                          capture_output=True, text=True, timeout=600)
    if fill.returncode != 0:
        die("fill failed: %s" % fill.stderr.strip())
    total = args.warm + args.down + args.after
    argv = [args.driver, "-h", "127.0.0.1", "-p", str(listen), "-P", "redis", "-r",
            str(args.keys), "-c", str(args.conns), "-e", "3600", "-R", str(args.rate), "-T",
            str(total), "-w", "0.01", "-W", "set"]
    healthy = [s for i, s in enumerate(servers) if i != VICTIM]
    sampler = Sampler(healthy)
    sampler.start()
    drv = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           bufsize=1, preexec_fn=ph._die_with_parent)
    ph._procs.append(drv)
    t0 = time.monotonic()
    t_kill = t_back = None
    summary = None
    t0_mono = t0
    for line in drv.stdout:
        if time.monotonic() - t0 > total + DRIVER_SLACK:
            break
        line = line.strip()
        if line.startswith("cache_aside start ") and "t0_mono=" in line:
            t0_mono = float(line.split("t0_mono=", 1)[1].split()[0])
        if line.startswith("{"):
            summary = json.loads(line)
            break
        if not line.startswith("cache_aside sec="):
            continue
        sec = int(line.split()[1].split("=", 1)[1])
        if sec == args.warm and t_kill is None:
            servers[VICTIM].kill()                   # SIGKILL, reaped
            t_kill = time.monotonic()
            drv.send_signal(signal.SIGUSR1)          # phase 1: the node is out
        elif sec == args.warm + args.down and t_back is None:
            servers[VICTIM].start()                  # empty, on its port
            t_back = time.monotonic()
            drv.send_signal(signal.SIGUSR1)          # phase 2: the node is back
    try:
        rest, err = drv.communicate(timeout=DRIVER_SLACK)
    except subprocess.TimeoutExpired:
        drv.kill()
        rest, err = drv.communicate()
        die("the driver did not finish; stderr: %s" % err[-2000:])
    sampler.stop.set()
    sampler.join()
    if summary is None:
        summary = next((json.loads(ln) for ln in rest.splitlines() if ln.startswith("{")), None)
    if drv.returncode != 0 or summary is None or t_kill is None or t_back is None:
        die("the driver failed (status %s): %s" % (drv.returncode, err.strip()[-2000:]))
    readmitted = proxy.alive()
    proxy.stop(check=False)
    if servers[VICTIM].proc is None or servers[VICTIM].proc.poll() is not None:
        servers[VICTIM].start()
    return analyse(args, mode, summary, lost_keys, sampler, t0_mono, t_kill, t_back, readmitted)


def analyse(args, mode, s, lost_keys, sampler, t0, t_kill, t_back, alive):
    per = s["per_second"]
    if per and per[-1]["reads"] < 0.5 * args.rate:
        per = per[:-1]                               # the last, partial second
    warm = [p for p in per if 1 < p["sec"] <= args.warm]
    after = [p for p in per if p["sec"] > args.warm]
    b_reads = sum(p["reads"] for p in warm)
    base = sum(p["misses"] for p in warm) / b_reads if b_reads else 0.0
    extra = sum(p["misses"] for p in after) - base * sum(p["reads"] for p in after)
    peak = max([p["misses"] / p["reads"] for p in after if p["reads"]] or [0.0])
    # The return: database reads per second from the node's restart on (second N covers
    # [N - 1, N) of the run), their peak above the warm period's rate.
    back = [p for p in per if p["sec"] > args.warm + args.down]
    base_per_sec = sum(p["misses"] for p in warm) / len(warm) if warm else 0.0
    peak_back = max([p["misses"] for p in back] or [0])
    phases = s["phases"]
    out_ph = next((p for p in phases if p["phase"] == 1), None)
    back_ph = next((p for p in phases if p["phase"] == 2), None)
    errors = sum(p["errors"] + p["write_errors"] + p["timeouts"] for p in (out_ph, back_ph) if p)
    # the healthy servers' rate: the warm period (after its first second) against the time the
    # node was out, from 2 s after the kill (its ejection takes 2 failures) to the restart
    base_rate = sampler.rate(t0 + 2, t_kill)
    out_rate = sampler.rate(t_kill + 2, t_back)
    rise = (out_rate / base_rate - 1) if base_rate and out_rate else None

    # The same per client operation: the driver's reads and writes in the same spans (second
    # N of the driver covers [t0 + N - 1, t0 + N), t0 its CLOCK_MONOTONIC start), so a driver
    # that ran late on a loaded box does not pass for a lighter load on the healthy servers.
    def ops(ta, tb):
        return sum(p["reads"] + p["writes"] for p in per
                   if t0 + p["sec"] - 1 >= ta - 0.5 and t0 + p["sec"] <= tb + 0.5)
    base_ops, out_ops = ops(t0 + 2, t_kill) / max(t_kill - t0 - 2, 1e-9), \
        ops(t_kill + 2, t_back) / max(t_back - t_kill - 2, 1e-9)
    per_op = (out_rate / out_ops) / (base_rate / base_ops) - 1 \
        if base_rate and out_rate and base_ops and out_ops else None
    return {"mode": mode, "keys": args.keys, "rate": args.rate, "lost_keys": lost_keys,
            "lost_share": lost_keys / args.keys, "baseline_miss_rate": base,
            "extra_db_reads": extra, "extra_per_lost_key": extra / lost_keys if lost_keys else 0,
            "peak_miss_share": peak, "client_errors": errors,
            "db_reads_per_sec_base": base_per_sec, "db_reads_peak_back": peak_back,
            "db_reads_peak_back_above_base": peak_back - base_per_sec,
            "stale_out": out_ph["stale"] if out_ph else None,
            "stale_after_return": back_ph["stale"] if back_ph else None,
            "healthy_rate_base": base_rate, "healthy_rate_out": out_rate,
            "healthy_rise": rise, "healthy_rise_per_op": per_op, "proxy_alive": alive, "late": s["totals"]["late"],
            "misses_per_second": [p["misses"] for p in per],
            "kill_sec": args.warm, "back_sec": args.warm + args.down}


def verdicts(r, rows=()):
    out = []
    if "unsupported" in r:
        return out
    none = next((x for x in rows if x["mode"] == "none" and "unsupported" not in x), None)
    if r["mode"] == "readmit" and none is not None:
        fall = none["db_reads_peak_back_above_base"] / max(r["db_reads_peak_back_above_base"], 1)
        out.append(("DB reads' peak at the return falls >= 5x (%.1fx)" % fall, fall >= 5))
    if r["mode"] == "replicas":
        out.append(("extra DB reads <= 1% of the lost node's keys",
                    r["extra_per_lost_key"] <= 0.01))
        out.append(("0 client errors", r["client_errors"] == 0))
    if r["mode"] == "gutter" and r["healthy_rise_per_op"] is not None:
        out.append(("healthy servers' rise per client op <= 2%",
                    r["healthy_rise_per_op"] <= 0.02))
    if r["mode"] in ("replicas", "gutter", "readmit"):
        out.append(("0 stale after the return", r["stale_after_return"] == 0))
    return out


def report(rows, columns):
    if not columns:
        say("%-9s %9s %13s %11s %10s %7s %11s %11s %11s" % (
            "mode", "lost keys", "extra DB rds", "per lost k", "peak miss", "errors",
            "stale back", "healthy +%", "per op +%"))
        for r in rows:
            if "unsupported" in r:
                say("%-9s not supported by this build (%s)" % (r["mode"], r["unsupported"]))
                continue
            def pct(x):
                return "%+.1f%%" % (100 * x) if x is not None else "-"
            say("%-9s %9d %13.0f %10.1f%% %9.1f%% %7d %11d %11s %11s" % (
                r["mode"], r["lost_keys"], r["extra_db_reads"], 100 * r["extra_per_lost_key"],
                100 * r["peak_miss_share"], r["client_errors"], r["stale_after_return"],
                pct(r["healthy_rise"]), pct(r["healthy_rise_per_op"])))
        say()
        for r in rows:
            for what, ok in verdicts(r, rows):
                say("  %-9s %-46s %s" % (r["mode"], what, "MET" if ok else "MISSED"))
        say()
        for r in rows:
            if "unsupported" not in r:
                say("  %-9s database reads/s at the return: peak %d (warm period %.0f/s)" % (
                    r["mode"], r["db_reads_peak_back"], r["db_reads_per_sec_base"]))
        say()
    ok = [r for r in rows if "unsupported" not in r]
    if not ok:
        return
    say("database reads per second (node killed at %d s, back at %d s):" % (
        ok[0]["kill_sec"], ok[0]["back_sec"]))
    say("  sec " + "".join("%10s" % r["mode"] for r in ok))
    for i in range(max(len(r["misses_per_second"]) for r in ok)):
        mark = " <- killed" if i + 1 == ok[0]["kill_sec"] + 1 else (
            " <- back" if i + 1 == ok[0]["back_sec"] + 1 else "")
        say("  %3d " % (i + 1) + "".join(
            "%10s" % (r["misses_per_second"][i] if i < len(r["misses_per_second"]) else "")
            for r in ok) + mark)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--modes", default="none,replicas,gutter")
    ap.add_argument("--keys", type=int, default=None)
    ap.add_argument("--rate", type=int, default=None)
    ap.add_argument("--conns", type=int, default=20)
    ap.add_argument("--warm", type=int, default=None)
    ap.add_argument("--down", type=int, default=None)
    ap.add_argument("--after", type=int, default=None)
    ap.add_argument("--gutter-ttl", type=int, default=10000, help="ms")
    ap.add_argument("--readmit-ramp", type=int, default=20000, help="ms (mode readmit)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--columns", action="store_true")
    args = ap.parse_args()
    quick = dict(keys=20000, rate=3000, warm=4, down=8, after=5)
    full = dict(keys=200000, rate=10000, warm=10, down=30, after=15)
    for k, v in (quick if args.quick else full).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    modes = [m for m in args.modes.split(",") if m]
    if any(m not in MODES for m in modes):
        die("--modes: one of %s" % ", ".join(MODES))
    proxy_bin = os.path.join(args.build, "proxy", "chash-proxy")
    chash = os.path.join(args.build, "tools", "chash")
    args.driver = os.path.join(args.build, "bench", "cache_aside")
    for p in (proxy_bin, chash, args.driver):
        if not os.access(p, os.X_OK):
            die("%s is not built (make build)" % p)
    exe, = ph.require_programs("redis-server")
    tmp = ph.make_tmpdir()
    servers = ph.start_redises(exe, tmp, NODES)
    gutter_server, = ph.start_redises(exe, tmp, 1)
    say("bench lost_node: %d redis-servers (+1 gutter), %d keys at %d reads/s, kill -9 of one "
        "at %d s for %d s, then %d s; load average %s" % (
            NODES, args.keys, args.rate, args.warm, args.down, args.after, loadavg()))
    rows = []
    for mode in modes:
        ok, why = supported(proxy_bin, tmp, mode, servers, gutter_server, args.gutter_ttl,
                            args.readmit_ramp)
        if not ok:
            rows.append({"mode": mode, "unsupported": why})
            continue
        if not args.columns:
            say("  %s ..." % mode)
        rows.append(run_mode(args, mode, servers, gutter_server, tmp, proxy_bin, chash))
    report(rows, args.columns)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load": loadavg(), "rows": rows}, f, indent=1)
    ph.kill_all()


if __name__ == "__main__":
    main()
