#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""test_migration_bench.py — bench/migration (issue 13) smoke test, behaviour only.

    test_migration_bench.py BUILD_DIR

1. bench/cache_aside against one real redis-server: a fill sets every key once; a run over the
   filled cache counts reads = hits + misses + errors (every second and in all), hits only; a run
   whose database starts one version ahead (-V 1) finds every hit stale, so the stale counter
   works; SIGUSR1 starts a phase and SIGUSR2 ends the run early, with its summary.
2. bench/migration/bench_migration.py --quick, the baseline only (no warm-up, no ramp), reload
   8 -> 12 on Redis and on memcached pools: the counts add up in every second, misses rise after
   the reload (the first second after it misses more than any second of the warm period, and more
   than a tenth of the moved share), the moved keys' counts are consistent, no read is stale and
   the proxy is still running.

No timing is asserted. Starts every server on free loopback ports and stops it by pid (the
proxy harness). Without redis-server or memcached: exit 77 (skip), or 1 when CI is set.
"""
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "proxy"))
import proxyharness as ph  # noqa: E402

BENCH = os.path.join(ROOT, "bench", "migration", "bench_migration.py")


def driver(drv, port, *args, timeout=60):
    r = subprocess.run([drv, "-p", str(port), "-P", "redis"] + list(args), capture_output=True,
                       text=True, timeout=timeout)
    if r.returncode != 0:
        ph.fail("cache_aside %s: status %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return parse(r.stdout, " ".join(args))


def parse(out, what):
    lines = out.strip().splitlines()
    if not lines or not lines[0].startswith("cache_aside start ") or \
            not lines[-1].startswith("{"):
        ph.fail("cache_aside %s: want a start line and a JSON summary, got %r" % (what, out[-500:]))
    s = json.loads(lines[-1])
    secs = [ln for ln in lines if ln.startswith("cache_aside sec=")]
    if len(secs) != len(s["per_second"]):
        ph.fail("%s: %d second lines, %d in the JSON" % (what, len(secs), len(s["per_second"])))
    return s


def check_sums(rows, what):
    for r in rows:
        if r["reads"] != r["hits"] + r["misses"] + r["errors"]:
            ph.fail("%s: reads %d != hits %d + misses %d + errors %d (%r)" % (
                what, r["reads"], r["hits"], r["misses"], r["errors"], r))
        if not (r["moved_misses"] <= r["moved_reads"] <= r["reads"]
                and r["moved_misses"] <= r["misses"] and r["stale"] <= r["hits"]):
            ph.fail("%s: inconsistent counts %r" % (what, r))


def total_of(rows, key):
    return sum(r[key] for r in rows)


def driver_checks(build, tmp):
    exe, = ph.require_programs("redis-server")
    drv = ph.require_binary(os.path.join(build, "bench", "cache_aside"), "cache_aside")
    r, = ph.start_redises(exe, tmp, 1)
    s = driver(drv, r.port, "-F", "-r", "2000")
    if s["totals"]["writes"] != 2000 or s["totals"]["write_errors"] != 0:
        ph.fail("fill: %r" % s["totals"])
    if r.call("DBSIZE") != 2000:
        ph.fail("fill: DBSIZE %r, want 2000" % r.call("DBSIZE"))
    ph.log("ok  fill: 2000 keys set")

    s = driver(drv, r.port, "-r", "2000", "-R", "2000", "-T", "2", "-w", "0")
    check_sums(s["per_second"] + [s["totals"]], "run over the filled cache")
    t = s["totals"]
    if t["reads"] == 0 or t["misses"] or t["errors"] or t["stale"] or t["hits"] != t["reads"]:
        ph.fail("run over the filled cache: want hits only, got %r" % t)
    if total_of(s["per_second"], "reads") != t["reads"]:
        ph.fail("the seconds' reads do not add up to the total: %r" % s)
    ph.log("ok  run over a filled cache: %d reads, all hits" % t["reads"])

    s = driver(drv, r.port, "-r", "2000", "-R", "1000", "-T", "1", "-w", "0", "-V", "1")
    t = s["totals"]
    check_sums([t], "-V 1")
    if t["hits"] == 0 or t["stale"] != t["hits"]:
        ph.fail("-V 1 over a cache of version 0: want every hit stale, got %r" % t)
    ph.log("ok  -V 1: %d of %d hits stale" % (t["stale"], t["hits"]))

    # A write share with DEL: misses appear (the deleted keys' next reads), none stale.
    moved = os.path.join(tmp, "moved")
    with open(moved, "w") as f:
        f.write("".join("%d\n" % k for k in range(0, 2000, 2)))
    p = subprocess.Popen([drv, "-p", str(r.port), "-r", "2000", "-R", "2000", "-T", "30",
                          "-w", "0.2", "-W", "del", "-m", moved],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.2)
    p.send_signal(signal.SIGUSR1)
    time.sleep(1.2)
    p.send_signal(signal.SIGUSR2)
    out, err = p.communicate(timeout=30)
    if p.returncode != 0:
        ph.fail("the SIGUSR1/SIGUSR2 run: status %d: %s" % (p.returncode, err))
    s = parse(out, "SIGUSR1/SIGUSR2 run")
    check_sums(s["per_second"] + s["phases"] + [s["totals"]], "SIGUSR1/SIGUSR2 run")
    t = s["totals"]
    if len(s["phases"]) != 2 or s["seconds"] > 20:
        ph.fail("SIGUSR1 should start phase 1 and SIGUSR2 end the run: %r" % s["phases"])
    if t["writes"] == 0 or t["moved_reads"] == 0 or t["misses"] == 0:
        ph.fail("-w 0.2 -W del -m: want writes, moved reads and misses: %r" % t)
    if total_of(s["phases"], "reads") != t["reads"]:
        ph.fail("the phases' reads do not add up to the total: %r" % s)
    ph.log("ok  phases (SIGUSR1), early end (SIGUSR2), moved keys and DEL writes counted")
    r.kill()


def bench_checks(build, tmp):
    out = os.path.join(tmp, "bench.json")
    for prog in ("redis-server", "memcached"):
        ph.require_programs(prog)
    r = subprocess.run([sys.executable, BENCH, "--build", build, "--quick", "--changes", "8-12",
                        "--modes", "none", "--json", out], capture_output=True, text=True,
                       timeout=240)
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        ph.fail("bench_migration.py --quick: status %d: %s" % (r.returncode, r.stderr[-3000:]))
    with open(out) as f:
        res = json.load(f)["results"]
    kinds = sorted(x["kind"] for x in res)
    if kinds != ["memcache", "redis"]:
        ph.fail("want one redis and one memcache row, got %r" % kinds)
    for x in res:
        what = "%s %s %s" % (x["kind"], x["change"], x["mode"])
        t = x["totals"]
        check_sums([t], what)
        reads, misses = x["reads_per_second"], x["misses_per_second"]
        warm = x["warm_s"]
        if len(reads) <= warm + 1:
            ph.fail("%s: %d seconds, want more than the warm period %d" % (what, len(reads), warm))
        after = misses[warm] / reads[warm] if reads[warm] else 0
        before = max(m / rd for m, rd in zip(misses[1:warm], reads[1:warm]) if rd)
        if not (after > before and after > x["plan_moved"] / 10):
            ph.fail("%s: misses should rise after the reload: %.3f after, %.3f at most before, "
                    "moved %.3f" % (what, after, before, x["plan_moved"]))
        if not 0.2 < x["plan_moved"] < 0.5 or x["moved_keys"] == 0:
            ph.fail("%s: 8 -> 12 should move about a third: %r" % (what, x["plan_moved"]))
        if t["moved_misses"] == 0 or x["extra_db_reads_after"] <= 0:
            ph.fail("%s: the moved keys should miss: %r" % (what, t))
        if t["stale"]:
            ph.fail("%s: %d stale reads" % (what, t["stale"]))
        if not x["proxy_alive"]:
            ph.fail("%s: the proxy exited" % what)
        ph.log("ok  %s: first second after the reload %.1f%% misses (before: %.1f%% at most)" % (
            what, 100 * after, 100 * before))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    tmp = ph.make_tmpdir()
    driver_checks(build, tmp)
    bench_checks(build, tmp)


if __name__ == "__main__":
    ph.run_main(main)
