#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Membership changes under a cache-aside load: chash-proxy reloaded 8 -> 12 and 8 -> 7 (issue 13).

Per pool kind (Redis, memcached): 12 servers on free loopback ports (redis-server without
persistence, or memcached), chash-proxy over the first 8 (ketama, fnv1a_64: twemproxy's usual
pool), every key of the key space filled once through the proxy (so a steady hit rate exists),
then bench/cache_aside (bench/migration/cache_aside.c) drives the cache-aside load: GETs at a
target rate, every miss one database read and a SET with a TTL, 1 % writes (database version + 1,
then a SET of the new value; --writes del: a DEL), values carrying their version (stale reads
counted). After a
warm period the proxy is reloaded to the new membership (the config file rewritten, then SIGHUP,
or with --reload http POST /-/reload on --metrics-port) and the run goes on until the miss rate is
back within 1 point of the baseline for 3 seconds (and the window is over), or --max-after.

Scenarios: 8 -> 12 (4 servers added) and 8 -> 7 (cache-08 decommissioned), each
  none     the reload alone (today's behaviour: moved keys miss until refilled);
  warm_up  the pool's `warm_up: W` (a moved key that misses at its new owner is read from its old
           owner during W ms after the change, returned and copied to the new owner);
  ramp     the pool's `ramp: D` (each moved key switches owner at start + hash(key) mod D);
  ramp_warm_up  both (not in the default matrix: --modes none,warm_up,ramp,ramp_warm_up).
A build whose chash-proxy refuses `warm_up` / `ramp` (`chash-proxy -t` on a config with the key)
gets those rows marked "not supported by this build"; nothing fails.

Per scenario: the moved share (`chash plan OLD NEW --pool mig`, and the share of this key space,
from `chash plan --key-file`), the baseline miss rate (the warm period), extra database reads
over the window W after the reload relative to the moved keys' reads in it ((misses - baseline
rate x reads) / moved reads), extra database reads over the whole run after the reload per moved
key, the peak miss rate of a second, the seconds until the miss rate is back within 1 point of the
baseline, client errors (error replies, closed connections, timeouts), p99 of the GETs before the
reload and during the window, stale reads. Goals (issue 13): warm_up: extra <= 1 % of the moved
keys' reads, 0 client errors, p99 during <= 2x before; ramp: "peak extra miss rate <= 2 x (moved
share / D) per second", read as: no second has more extra database reads than twice the ramp's
even share, moved keys / D (the miss share of that second's reads is printed beside it); every
scenario: 0 stale reads, and the reload applied. Goals are MET or MISSED, never fatal.

Then, per kind and change, the misses per second of each mode side by side (what `make demo`
shows, with --quick --only redis --changes 8-12).

usage: bench/migration/bench_migration.py [--build build/release] [--quick]
           [--only redis|memcache] [--changes 8-12,8-7] [--modes none,warm_up,ramp]
           [--keys K] [--rate R] [--conns C] [--warm S] [--window S] [--ramp-s S]
           [--max-after S] [--reload sighup|http] [--writes set|del] [--parallel]
           [--threads1] [--json FILE] [--columns] [--markdown] [--verbose]
  --quick    15,000 keys at 5,000 reads/s, 4 s warm, 6 s window, ramp 4 s, at most 16 s after,
             8 -> 12 only (unless --changes), both kinds in parallel (unless --only): about
             60-70 s for the three default modes.
  --writes   set (default): a write SETs the new version (write-through), so the baseline miss
             rate is ~0 and steady; del: a write deletes (the next read refills), a baseline of
             about the write share that builds up over K / R seconds.
  --columns  print only the side-by-side misses per second (the demo's view).
  --parallel the Redis and memcached parts at the same time, each in a child process: about
             half the time, but the two loads share the cores (p99 and late= suffer first).
Full run (defaults): 200,000 keys at 10,000 reads/s (the issue's), 20 connections, warm 10 s,
window 30 s, ramp 20 s, at most 90 s after the reload: 5 minutes for the baseline rows alone,
16-17 minutes for the whole matrix, 8-10 with --parallel (`make bench` uses it). Most of it is the
issue's own time constant: a moved key waits K / R = 20 s on average for its first read.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "proxy"))
import proxyharness as ph  # noqa: E402  (real servers on free loopback ports, stopped by pid)
sys.path.insert(0, os.path.join(ROOT, "bench"))
from benchutil import dier, loadavg, say  # noqa: E402

POOL = "mig"
CHANGES = {"8-12": (8, 12), "8-7": (8, 7)}
MODES = ("none", "warm_up", "ramp", "ramp_warm_up")
DEFAULT_MODES = ("none", "warm_up", "ramp")
RECOVER_SECONDS = 3      # consecutive seconds within 1 point of the baseline
DRIVER_SLACK = 30        # seconds past its -T before a driver is killed


die = dier("migration", ph.kill_all)


def pool_config(listen, servers, redis, extra):
    """The twemproxy pool over servers [(addr text, name)], with chash's keys in extra."""
    settings = {"hash": "fnv1a_64", "distribution": "ketama", "auto_eject_hosts": False,
                "timeout": 2000}
    settings.update(extra)
    return ph.pool_yaml(POOL, listen, [(a, 1, n) for a, n in servers], redis=redis, **settings)


def supported(proxy_bin, tmp, key, value):
    """Whether this chash-proxy accepts the pool key (chash-proxy -t on a config with it)."""
    path = os.path.join(tmp, "probe-%s.yml" % key)
    ph.write_file(path, pool_config(ph.free_ports(1)[0], [("127.0.0.1:1", "probe-1")], True,
                                    {key: value}))
    r = subprocess.run([proxy_bin, "-t", "-c", path], capture_output=True, text=True, timeout=30)
    last = ((r.stdout + r.stderr).strip().splitlines() or [""])[-1]
    # "chash-proxy: FILE:LINE:COL: unknown key ..." -> the message alone (the path is a temp one)
    return r.returncode == 0, last.rsplit(": ", 1)[-1]


def plan(chash, old, new, keyfile):
    """(moved fraction of the key space from chash plan, its method, indices of the moved keys
    among ca:0 .. ca:K-1)."""
    r = subprocess.run([chash, "plan", old, new, "--pool", POOL, "--json"], capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        die("chash plan failed: %s" % r.stderr.strip())
    j = json.loads(r.stdout)
    r = subprocess.run([chash, "plan", old, new, "--pool", POOL, "--key-file", keyfile],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        die("chash plan --key-file failed: %s" % r.stderr.strip())
    moved = [int(line.split("\t", 1)[0][3:]) for line in r.stdout.splitlines() if line]
    return j["moved_fraction"], j["method"], moved


class Kind:
    """The 12 servers of one pool kind, kept through its scenarios (flushed between them)."""

    def __init__(self, name, tmp):
        self.name, self.redis = name, name == "redis"
        if self.redis:
            exe, = ph.require_programs("redis-server")
            self.servers = ph.start_redises(exe, tmp, 12)
        else:
            exe, = ph.require_programs("memcached")
            self.servers = ph.start_memcacheds(exe, tmp, 12)
        self.addrs = [(s.text, "cache-%02d" % (i + 1)) for i, s in enumerate(self.servers)]

    def flush(self):
        for s in self.servers:
            if self.redis:
                if s.call("FLUSHALL") != b"OK":
                    die("%s: FLUSHALL failed" % s.text)
            else:
                s.flush()

    def members(self, n):
        # 8 -> 7 decommissions cache-08: the first 7 of the 8.
        return self.addrs[:n]


def driver_cmd(args, port, proto, keys, extra):
    return [args.driver, "-h", "127.0.0.1", "-p", str(port), "-P", proto, "-r", str(keys),
            "-c", str(args.conns), "-e", "3600"] + extra


def fill(args, port, proto):
    r = subprocess.run(driver_cmd(args, port, proto, args.keys, ["-F", "-c", "20"]),
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        die("fill failed: %s" % r.stderr.strip())
    j = json.loads(r.stdout.strip().splitlines()[-1])
    if j["totals"]["writes"] != args.keys or j["totals"]["write_errors"]:
        die("fill: %d of %d keys set, %d errors" % (j["totals"]["writes"], args.keys,
                                                    j["totals"]["write_errors"]))
    return j["seconds"]


def reload_proxy(args, proxy, conf_path, new_text, mode_params):
    """Rewrites the config and reloads (SIGHUP, or POST /-/reload with the mode's parameters);
    returns (seconds the reload took, outcome text)."""
    ph.write_file(conf_path, new_text)
    t0 = time.monotonic()
    if args.reload == "http":
        q = "&".join("%s=%d" % kv for kv in mode_params.items())
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", proxy.metrics_port, timeout=10)
        c.request("POST", "/-/reload" + ("?" + q if q else ""))
        resp = c.getresponse()
        body = resp.read().decode("utf-8", "replace").strip()
        c.close()
        if resp.status != 200 or not body.startswith("reloaded"):
            return time.monotonic() - t0, "FAILED: POST /-/reload: %d %s" % (resp.status, body)
        return time.monotonic() - t0, body
    with open(proxy.log, "rb") as f:
        before = f.read().count(b"reload done")
    proxy.proc.send_signal(signal.SIGHUP)
    deadline = t0 + 10
    while time.monotonic() < deadline:
        with open(proxy.log, "rb") as f:
            log = f.read()
        if log.count(b"reload done") > before:
            lines = [ln for ln in log.decode("utf-8", "replace").splitlines()
                     if "membership" in ln and "reload: pool" in ln]
            if not lines or "unchanged" in lines[-1]:
                return time.monotonic() - t0, "FAILED: no membership change logged"
            return time.monotonic() - t0, lines[-1].split("reload: ", 1)[-1]
        if b"reload failed" in log:
            return time.monotonic() - t0, "FAILED: " + ph.tail(proxy.log)
        time.sleep(0.01)
    return time.monotonic() - t0, "FAILED: no 'reload done' within 10 s"


def mode_window(args, mode):
    """The proxy's window after the change, in seconds: warm-up and ramp alone, W (the ramp's D is
    shorter); both, D + W (docs/PROXY.md: the window ends at start + ramp + warm_up). The run
    goes on at least that long; the figures "in the window" are those of the first W seconds, in
    which every moved key is either not switched yet or within its own warm-up (a key switched at
    s is warm until s + W: from W on, the first keys' cold tail begins)."""
    return args.window + (args.ramp_s if mode == "ramp_warm_up" else 0)


def run_scenario(args, kind, change, mode, tmp, proxy_bin, chash, keyfile):
    old_n, new_n = CHANGES[change]
    proto = "redis" if kind.redis else "memcache"
    extra = {}
    params = {}
    if mode == "warm_up":
        params = {"warm_up": args.window * 1000}
    elif mode == "ramp":
        params = {"ramp": args.ramp_s * 1000}
    elif mode == "ramp_warm_up":
        params = {"ramp": args.ramp_s * 1000, "warm_up": args.window * 1000}
    if args.reload == "sighup":
        extra = params
    kind.flush()
    listen = ph.free_ports(1)[0]
    conf = os.path.join(tmp, "%s-%s-%s.yml" % (kind.name, change, mode))
    old_text = pool_config(listen, kind.members(old_n), kind.redis, extra)
    new_text = pool_config(listen, kind.members(new_n), kind.redis, extra)
    old_path, new_path = conf + ".old", conf + ".new"
    ph.write_file(old_path, old_text)
    ph.write_file(new_path, new_text)
    share, method, moved = plan(chash, old_path, new_path, keyfile)
    moved_file = conf + ".moved"
    with open(moved_file, "w") as f:
        f.write("".join("%d\n" % k for k in moved))
    ph.write_file(conf, old_text)
    proxy_args = ["--threads", "1"] if args.threads1 else []
    if args.reload == "http":
        mport = ph.free_ports(1)[0]
        proxy_args += ["--metrics-port", str(mport), "--metrics-addr", "127.0.0.1"]
    proxy = ph.Proxy(proxy_bin, tmp, conf, [("127.0.0.1", listen)],
                     label="proxy-%s-%s-%s" % (kind.name, change, mode), extra_args=proxy_args)
    if args.reload == "http":
        proxy.metrics_port = mport
        proxy.listens.append(("127.0.0.1", mport))
    proxy.start()
    fill_s = fill(args, listen, proto)

    total = args.warm + args.max_after + mode_window(args, mode) - args.window
    argv = driver_cmd(args, listen, proto, args.keys,
                      ["-R", str(args.rate), "-T", str(total), "-w", str(args.write_share),
                       "-W", args.writes, "-m", moved_file])
    # stdout is read line by line (the reload follows the warm period's last line); the process
    # dies with this script (PR_SET_PDEATHSIG) and is killed on the way out like the servers.
    drv = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           bufsize=1, preexec_fn=ph._die_with_parent)
    ph._procs.append(drv)
    t_start = time.monotonic()
    reload_s, outcome = None, None
    warm_reads = warm_misses = 0
    recovered_run = 0
    summary = None
    window_end = args.warm + args.window            # the measured window: phase 1
    proxy_window_end = args.warm + mode_window(args, mode)
    for line in drv.stdout:
        if time.monotonic() - t_start > total + DRIVER_SLACK:
            break
        line = line.strip()
        if line.startswith("{"):
            summary = json.loads(line)
            break
        if not line.startswith("cache_aside sec="):
            continue
        kv = dict(f.split("=", 1) for f in line.split()[1:])
        sec, reads, misses = int(kv["sec"]), int(kv["reads"]), int(kv["misses"])
        rate = misses / reads if reads else 0.0
        if args.verbose:
            say("      %s" % line)
        if sec == args.warm and reload_s is None:
            drv.send_signal(signal.SIGUSR1)      # phase 1: the window
            reload_s, outcome = reload_proxy(args, proxy, conf, new_text, params)
        elif sec == window_end:
            drv.send_signal(signal.SIGUSR1)      # phase 2: after the window
        if 1 < sec <= args.warm:
            warm_reads, warm_misses = warm_reads + reads, warm_misses + misses
        if reload_s is not None and sec > proxy_window_end:
            # Only seconds after the window count: a warm-up's cold tail starts when it ends.
            base = warm_misses / warm_reads if warm_reads else 0.0
            recovered_run = recovered_run + 1 if rate <= base + 0.01 else 0
            if sec >= proxy_window_end + 1 and recovered_run >= RECOVER_SECONDS:
                drv.send_signal(signal.SIGUSR2)   # back to baseline: end the run early
    try:
        rest, err = drv.communicate(timeout=DRIVER_SLACK)
    except subprocess.TimeoutExpired:
        drv.kill()
        rest, err = drv.communicate()
        die("the driver did not finish; stderr: %s" % err[-2000:])
    if summary is None:
        for line in rest.splitlines():
            if line.startswith("{"):
                summary = json.loads(line)
    if drv.returncode != 0 or summary is None:
        die("the driver failed (status %s): %s" % (drv.returncode, err.strip()[-2000:]))
    alive = proxy.alive()
    proxy.stop(check=False)
    r = analyse(args, kind.name, change, mode, share, method, len(moved), summary, reload_s,
                outcome, fill_s, alive)
    r["driver_notes"] = [ln for ln in err.splitlines() if ln.startswith("cache_aside: ")]
    return r


def analyse(args, kind, change, mode, share, method, moved_keys, s, reload_s, outcome, fill_s,
            alive):
    per = s["per_second"]
    if per and per[-1]["reads"] < 0.5 * args.rate:
        per = per[:-1]      # the last, partial second (the run stopped within it)
    phases = s["phases"]
    warm = [p for p in per if 1 < p["sec"] <= args.warm]
    after = [p for p in per if p["sec"] > args.warm]
    win = args.window
    window = [p for p in after if p["sec"] <= args.warm + win]
    b_reads = sum(p["reads"] for p in warm)
    base = sum(p["misses"] for p in warm) / b_reads if b_reads else 0.0

    def extra(rows):
        reads = sum(p["reads"] for p in rows)
        return sum(p["misses"] for p in rows) - base * reads, sum(p["moved_reads"] for p in rows)

    ex_w, moved_reads_w = extra(window)
    ex_all, _ = extra(after)
    rates = [(p["misses"] / p["reads"] if p["reads"] else 0.0) for p in after]
    peak = max(rates) if rates else 0.0
    # Back within 1 point: from the second after the last one above baseline + 1 point, if at
    # least RECOVER_SECONDS seconds were observed from there on (a warm-up's window can be within
    # 1 point and its cold tail, after the window, above again).
    above = [i for i, r in enumerate(rates) if r > base + 0.01]
    recover = above[-1] + 1 if above else 0
    if len(rates) - recover < RECOVER_SECONDS:
        recover = None
    # The ramp's even share: its moved keys over D seconds; the peak second's extra database
    # reads against it (every mode, so that the rows compare).
    extra_s = [p["misses"] - base * p["reads"] for p in after]
    peak_extra = max(extra_s) if extra_s else 0.0
    p_before = phases[0] if phases else None
    p_during = phases[1] if len(phases) > 1 else None
    tot = s["totals"]
    r = {
        "kind": kind, "change": change, "mode": mode, "supported": True,
        "plan_moved": share, "plan_method": method, "moved_keys": moved_keys,
        "moved_key_share": moved_keys / args.keys,
        "keys": args.keys, "rate": args.rate, "conns": args.conns, "warm_s": args.warm,
        "window_s": win, "fill_s": round(fill_s, 3),
        "reload_s": round(reload_s, 4) if reload_s is not None else None,
        "reload_outcome": outcome,
        "baseline_miss_rate": base, "peak_miss_rate": peak,
        "extra_db_reads_window": round(ex_w), "moved_reads_window": moved_reads_w,
        "extra_per_moved_read_window": ex_w / moved_reads_w if moved_reads_w else None,
        "extra_db_reads_after": round(ex_all),
        "extra_per_moved_key_after": ex_all / moved_keys if moved_keys else None,
        "recover_s": recover, "observed_after_s": len(after),
        "peak_extra_db_reads_s": round(peak_extra),
        "peak_extra_per_moved_key_s": peak_extra / moved_keys if moved_keys else None,
        "client_errors": tot["errors"] + tot["write_errors"],
        "timeouts": tot.get("timeouts", 0), "closed": tot.get("closed", 0),
        "stale": tot["stale"], "late": tot["late"], "stale_lost": tot.get("stale_lost", 0),
        "p99_before_us": p_before["p99_us"] if p_before else None,
        "p99_during_us": p_during["p99_us"] if p_during else None,
        "p50_before_us": p_before["p50_us"] if p_before else None,
        "p50_during_us": p_during["p50_us"] if p_during else None,
        "totals": tot, "proxy_alive": alive,
        "misses_per_second": [p["misses"] for p in per],
        "moved_reads_per_second": [p["moved_reads"] for p in per],
        "reads_per_second": [p["reads"] for p in per],
    }
    goals = []
    if mode in ("warm_up", "ramp_warm_up"):
        e = r["extra_per_moved_read_window"] or 0.0
        goals.append(("extra db reads <= 1%% of moved reads: %.2f%%" % (100 * e), e <= 0.01))
        goals.append(("0 client errors: %d" % r["client_errors"], r["client_errors"] == 0))
        pb, pd = r["p99_before_us"] or 0, r["p99_during_us"] or 0
        goals.append(("p99 during <= 2x before: %.2f vs %.2f ms" % (pd / 1000, pb / 1000),
                      pd <= 2 * pb))
    if mode in ("ramp", "ramp_warm_up"):
        # "peak extra miss rate <= 2 x (moved share / D) per second": read as database reads of
        # a second against the ramp's even share, moved keys / D (the share of the key space
        # that switches each second); the miss share of reads is printed beside it.
        lim = 2 * moved_keys / args.ramp_s
        goals.append(("peak extra db reads of a second <= 2 x moved keys / D = %d: %d (%.2f%% "
                      "of the moved keys; %.2f%% of that second's reads)" % (
                          lim, peak_extra, 100 * r["peak_extra_per_moved_key_s"],
                          100 * (peak - base)), peak_extra <= lim))
    goals.append(("0 stale reads: %d" % r["stale"], r["stale"] == 0))
    if outcome is None or outcome.startswith("FAILED"):
        goals.append(("the reload applied: %s" % outcome, False))
    if not alive:
        goals.append(("proxy still running", False))
    r["goals"] = [{"goal": g, "met": ok} for g, ok in goals]
    return r


def pct(x):
    return "-" if x is None else "%.2f%%" % (100 * x)


def ms(us):
    return "-" if us is None else "%.2f" % (us / 1000)


def print_row(r):
    if not r["supported"]:
        say("  %-8s %-5s %-8s not supported by this build (%s)" % (
            r["kind"], r["change"], r["mode"], r["why"]))
        return
    rec = ("%d s" % r["recover_s"]) if r["recover_s"] is not None else \
        ("> %d s" % r["observed_after_s"])
    say("  %-8s %-5s %-8s moved %s (keys %s)  base miss %s  peak %s  extra/moved reads (%d s) "
        "%s  extra/moved key %s  back in %s" % (
            r["kind"], r["change"], r["mode"], pct(r["plan_moved"]), pct(r["moved_key_share"]),
            pct(r["baseline_miss_rate"]), pct(r["peak_miss_rate"]), r["window_s"],
            pct(r["extra_per_moved_read_window"]), pct(r["extra_per_moved_key_after"]), rec))
    say("  %-23s peak second: %d extra db reads (%s of the moved keys)" % (
        "", r["peak_extra_db_reads_s"], pct(r["peak_extra_per_moved_key_s"])))
    say("  %-23s errors %d  stale %d  late %d  p99 before %s ms, during %s ms (p50 %s, %s)  "
        "reload %.0f ms: %s" % (
            "", r["client_errors"], r["stale"], r["late"], ms(r["p99_before_us"]),
            ms(r["p99_during_us"]), ms(r["p50_before_us"]), ms(r["p50_during_us"]),
            1000 * (r["reload_s"] or 0), r["reload_outcome"]))
    if r["client_errors"]:
        say("  %-23s of the errors: %d timeouts (no reply within 2 s), %d connections closed; %d "
            "stale reads of keys whose own write or refill was lost (not counted as stale)" % (
                "", r["timeouts"], r["closed"], r["stale_lost"]))
    for n in r.get("driver_notes", []):
        say("  %-23s %s" % ("", n))
    for g in r["goals"]:
        say("  %-23s goal: %s  %s" % ("", g["goal"], "MET" if g["met"] else "MISSED"))


def print_columns(results, args):
    """Misses per second, the modes of one kind and change side by side."""
    groups = {}
    for r in results:
        groups.setdefault((r["kind"], r["change"]), []).append(r)
    for (kind, change), rows in groups.items():
        run = [r for r in rows if r["supported"]]
        skipped = [r for r in rows if not r["supported"]]
        if not run:
            continue
        say()
        say("misses per second (= database reads), %s, reload %s after second %d%s:" % (
            kind, change.replace("-", " -> "), args.warm,
            "; reads per second ~%d" % args.rate))
        say("  %4s  " % "sec" + "".join("%14s" % r["mode"] for r in run))
        n = max(len(r["misses_per_second"]) for r in run)
        for i in range(n):
            cells = []
            for r in run:
                m = r["misses_per_second"]
                if i < len(m):
                    rd = r["reads_per_second"][i]
                    cells.append("%7d %5.1f%%" % (m[i], 100 * m[i] / rd if rd else 0))
                else:
                    cells.append("%14s" % "")
            mark = "  <- the first second after the reload" if i + 1 == args.warm + 1 else ""
            say("  %4d  " % (i + 1) + "".join("%14s" % c for c in cells) + mark)
        for r in run:
            rec = ("%d s" % r["recover_s"]) if r["recover_s"] is not None else \
                ("more than %d s" % r["observed_after_s"])
            say("  %s: %s of the keys moved; %s of the moved keys read from the database "
                "again; back within 1 point of the baseline after %s; %d client errors, %d stale "
                "reads" % (r["mode"], pct(r["moved_key_share"]), pct(r["extra_per_moved_key_after"]),
                           rec, r["client_errors"], r["stale"]))
        for r in skipped:
            say("  %s: not supported by this build (%s), so only the other column" % (
                r["mode"], r["why"]))


def run_parallel(args, kinds, tmp):
    """Each kind in a child process of this script (--only KIND) at the same time; their rows
    printed kind by kind once both are done. Returns the rows of both."""
    children = []
    for k in kinds:
        out = os.path.join(tmp, "parallel-%s.json" % k)
        argv = [sys.executable, os.path.abspath(__file__), "--only", k, "--json", out]
        for a in sys.argv[1:]:
            if a in ("--parallel", "--columns"):
                continue
            argv.append(a)
        # --json FILE and --only given by the user are overridden: argparse keeps the last.
        argv += ["--only", k, "--json", out]
        log = os.path.join(tmp, "parallel-%s.log" % k)
        children.append((k, out, log, ph.spawn(argv, log)))
    results = []
    for k, out, log, p in children:
        try:
            p.wait(timeout=3600)
        except subprocess.TimeoutExpired:
            die("--parallel: the %s part did not finish in an hour" % k)
        if p.returncode != 0:
            die("--parallel: the %s part failed (status %d):\n%s" % (k, p.returncode,
                                                                     ph.tail(log)))
        with open(out) as f:
            rows = json.load(f)["results"]
        if not args.columns:
            with open(log) as f:
                lines = f.read().splitlines()
            # its rows (two-space indented, before the columns) under a heading of its own
            say("  -- %s (in parallel with the other kind)" % k)
            for ln in lines:
                if ln.startswith("misses per second"):
                    break
                if ln.startswith("  ") and not ln.startswith("   "):
                    say(ln)
                elif ln.startswith("                          "):
                    say(ln)
        results += rows
    return results


def print_markdown(results):
    """The rows as the Markdown table of docs/PERFORMANCE.md."""
    say()
    say("| pool | change | mode | peak miss share of a second | extra db reads / moved keys' "
        "reads, window | extra db reads / moved keys, whole run | peak second's extra db reads "
        "(/ moved keys) | back within 1 point | client errors | p99 ms before -> window | "
        "stale | late |")
    say("|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for r in results:
        pool = "Redis" if r["kind"] == "redis" else "memcached"
        if not r["supported"]:
            say("| %s | %s | %s | not supported by this build (%s) |||||||||" % (
                pool, r["change"].replace("-", " -> "), r["mode"], r["why"]))
            continue
        rec = ("%d s" % r["recover_s"]) if r["recover_s"] is not None else \
            ("> %d s" % r["observed_after_s"])
        say("| %s | %s | %s | %s | %s | %s | %d (%s) | %s | %d | %s -> %s | %d | %d |" % (
            pool, r["change"].replace("-", " -> "), r["mode"], pct(r["peak_miss_rate"]),
            pct(r["extra_per_moved_read_window"]), pct(r["extra_per_moved_key_after"]),
            r["peak_extra_db_reads_s"], pct(r["peak_extra_per_moved_key_s"]), rec,
            r["client_errors"], ms(r["p99_before_us"]), ms(r["p99_during_us"]), r["stale"],
            r["late"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=("redis", "memcache"))
    ap.add_argument("--changes", help="default 8-12,8-7 (--quick: 8-12)")
    ap.add_argument("--modes", default=",".join(DEFAULT_MODES))
    ap.add_argument("--keys", type=int)
    ap.add_argument("--rate", type=int)
    ap.add_argument("--conns", type=int, default=20)
    ap.add_argument("--warm", type=int)
    ap.add_argument("--window", type=int)
    ap.add_argument("--ramp-s", type=int)
    ap.add_argument("--max-after", type=int)
    ap.add_argument("--reload", choices=("sighup", "http"), default="sighup")
    ap.add_argument("--threads1", action="store_true", help="chash-proxy --threads 1")
    ap.add_argument("--parallel", action="store_true",
                    help="run the Redis and the memcached part at the same time (half the time; "
                    "they share the cores)")
    ap.add_argument("--writes", choices=("set", "del"), default="set",
                    help="how a write updates the cache: SET of the new value (default) or DEL")
    ap.add_argument("--write-share", type=float, default=0.01)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--columns", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="also the rows as a Markdown table")
    ap.add_argument("--verbose", action="store_true", help="print the driver's lines")
    args = ap.parse_args()
    q = args.quick
    defaults = {"keys": (200000, 15000), "rate": (10000, 5000), "warm": (10, 4),
                "window": (30, 6), "ramp_s": (20, 4), "max_after": (90, 16)}
    for k, (full, quick) in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, quick if q else full)
    if args.changes is None:
        args.changes = "8-12" if q else "8-12,8-7"
    if q and not args.only:
        args.parallel = True
    changes = [c for c in args.changes.split(",") if c]
    modes = [m for m in args.modes.split(",") if m]
    for c in changes:
        if c not in CHANGES:
            die("--changes: %s is not one of %s" % (c, ", ".join(CHANGES)))
    for m in modes:
        if m not in MODES:
            die("--modes: %s is not one of %s" % (m, ", ".join(MODES)))
    if args.warm < 3 or args.window < 1 or args.max_after < args.window + 1:
        die("need --warm >= 3, --window >= 1, --max-after > --window")

    build = os.path.abspath(args.build)
    proxy_bin = ph.require_binary(os.path.join(build, "proxy", "chash-proxy"))
    chash = ph.require_binary(os.path.join(build, "tools", "chash"), "chash")
    args.driver = ph.require_binary(os.path.join(build, "bench", "cache_aside"), "cache_aside")
    kinds = [args.only] if args.only else ["redis", "memcache"]
    tmp = ph.make_tmpdir()
    t0 = time.monotonic()
    keyfile = os.path.join(tmp, "keys")
    with open(keyfile, "w") as f:
        f.write("".join("ca:%d\n" % k for k in range(args.keys)))

    support = {"none": (True, "")}
    for m, v in (("warm_up", args.window * 1000), ("ramp", args.ramp_s * 1000)):
        ok, why = supported(proxy_bin, tmp, m, v)
        support[m] = (ok, why)
    support["ramp_warm_up"] = support["ramp"] if not support["ramp"][0] else support["warm_up"]

    if not args.columns:
        say("== membership changes under a cache-aside load (bench/migration/bench_migration.py)")
        say("   %d cores, load average %s at start; %s" % (
            os.cpu_count(), loadavg(), "quick" if q else "full"))
        say("   %d keys ca:<k> (uniform), %d reads/s + %g%% writes (%s), %d connections, TTL "
            "3600 s; chash-proxy (%s) over 8 of 12 servers, ketama + fnv1a_64" % (
                args.keys, args.rate, 100 * args.write_share,
                "SET of the new version" if args.writes == "set" else "DEL", args.conns,
                "--threads 1" if args.threads1 else "default threads"))
        say("   warm %d s, then the reload (%s); window %d s; warm_up %d ms; ramp %d ms; until "
            "back within 1 point for %d s (at most %d s after)" % (
                args.warm, "SIGHUP" if args.reload == "sighup" else "POST /-/reload",
                args.window, args.window * 1000, args.ramp_s * 1000, RECOVER_SECONDS,
                args.max_after))
        for m in ("warm_up", "ramp"):
            if not support[m][0]:
                say("   %s: not supported by this build (chash-proxy -t: %s)" % (m, support[m][1]))

    results = []
    if args.parallel and len(kinds) > 1:
        results = run_parallel(args, kinds, tmp)
        kinds = []
    for kname in kinds:
        kind = Kind(kname, tmp)
        for change in changes:
            for mode in modes:
                if not support[mode][0]:
                    r = {"kind": kname, "change": change, "mode": mode, "supported": False,
                         "why": support[mode][1]}
                else:
                    r = run_scenario(args, kind, change, mode, tmp, proxy_bin, chash, keyfile)
                results.append(r)
                if not args.columns:
                    print_row(r)
        for s in kind.servers:
            s.kill()
    print_columns(results, args)
    if args.markdown:
        print_markdown(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": {k: v for k, v in vars(args).items()
                                if isinstance(v, (int, str, bool, type(None)))},
                       "results": results}, f, indent=1)
    if not args.columns:
        say("\nbench migration: %.0f s, load average %s at end" % (time.monotonic() - t0,
                                                                   loadavg()))


if __name__ == "__main__":
    try:
        main()
    except ph.TestFailure as e:
        die(str(e))
    ph.kill_all()
