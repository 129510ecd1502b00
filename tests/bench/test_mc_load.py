#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""test_mc_load.py — bench/proxy/mc_load (the memcached load generator) against a REAL memcached.

    test_mc_load.py MC_LOAD

Functional only, no timing is asserted: mc_load's counts (requests, keys, hits, misses, errors)
and its result line, for set (sequential keys), get and 10-key multigets, unpipelined and
pipelined, a last batch shorter than -P, error replies counted rather than fatal (an item larger
than memcached's -I gets SERVER_ERROR), and a refused connection failing with status 1; then the
same counts with -b (the binary protocol: GETK, SET, GETKQ..NOOP; an item over -I is status 0x03)
and text and binary agreeing on the same seed. Starts memcached on free loopback ports and stops
it by pid. Without memcached: exit 77 (skip), or 1
with a clear message when CI is set.
"""
import os
import shutil
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_memcached(extra):
    port = free_port()
    user = ["-u", "root"] if os.geteuid() == 0 else []
    p = subprocess.Popen(["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "16"]
                         + user + extra, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p, port
        except OSError:
            time.sleep(0.05)
    p.kill()
    p.wait()
    sys.exit("memcached does not accept connections")


def run(mc_load, port, *args, rc=0):
    out = subprocess.run([mc_load, "-p", str(port), "-T", "30"] + list(args),
                         capture_output=True, text=True, timeout=60)
    if out.returncode != rc:
        sys.exit(f"mc_load {' '.join(args)}: status {out.returncode}, want {rc}: {out.stderr}")
    if rc != 0:
        return out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("mc_load ")]
    if len(lines) != 1:
        sys.exit(f"mc_load {' '.join(args)}: want one result line, got {out.stdout!r}")
    kv = dict(f.split("=", 1) for f in lines[0].split()[1:])
    for k in ("cmd", "proto", "pipeline", "conns", "requests", "keys", "seconds", "rps", "p50_us",
              "p99_us", "errors", "hits", "misses"):
        if k not in kv:
            sys.exit(f"mc_load {' '.join(args)}: no {k}= in {lines[0]!r}")
    return kv


def expect(kv, what, **want):
    for k, v in want.items():
        if kv[k] != str(v):
            sys.exit(f"{what}: {k}={kv[k]}, want {v} ({kv})")
    print(f"ok  {what}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    mc_load = sys.argv[1]
    if not shutil.which("memcached"):
        msg = "test_mc_load: memcached not installed (scripts/bootstrap installs it)"
        if os.environ.get("CI"):
            sys.exit(msg)
        print(msg + ": skipped")
        sys.exit(77)

    mc, port = start_memcached([])
    big, big_port = start_memcached(["-I", "1k", "-o", "slab_chunk_max=1024"])
    try:
        # Every key of a 1,000-key space once, in sequence: then every get hits.
        kv = run(mc_load, port, "-t", "set", "-s", "-r", "1000", "-n", "1000", "-P", "16",
                 "-c", "7")
        expect(kv, "set -s -P 16 (last batches short)", cmd="set", requests=1000, keys=1000,
               errors=0)
        kv = run(mc_load, port, "-t", "get", "-r", "1000", "-n", "500", "-c", "5")
        expect(kv, "get P1, all hits", requests=500, keys=500, hits=500, misses=0, errors=0)
        kv = run(mc_load, port, "-t", "mget", "-r", "1000", "-n", "160", "-P", "16", "-c", "3")
        expect(kv, "mget P16: 10 keys per request", requests=160, keys=1600, hits=1600, misses=0,
               errors=0)
        kv = run(mc_load, port, "-t", "get", "-r", "1000000", "-S", "7", "-n", "300", "-P", "3")
        if int(kv["misses"]) < 290 or int(kv["hits"]) + int(kv["misses"]) != 300:
            sys.exit(f"get over a 1e6 key space: want >= 290 misses of 300, got {kv}")
        print("ok  get P3 over an unfilled key space: misses counted")
        kv = run(mc_load, big_port, "-t", "set", "-d", "2000", "-n", "100", "-P", "4", "-c", "2")
        expect(kv, "set of an item over -I: SERVER_ERROR counted, run goes on", requests=100,
               errors=100)

        # The binary protocol, the same counts.
        kv = run(mc_load, port, "-b", "-t", "set", "-s", "-r", "2000", "-n", "2000", "-P", "16",
                 "-c", "7")
        expect(kv, "-b set -s -P 16", proto="binary", cmd="set", requests=2000, keys=2000,
               errors=0)
        kv = run(mc_load, port, "-b", "-t", "get", "-r", "2000", "-n", "500", "-c", "5")
        expect(kv, "-b get P1 (GETK), all hits", requests=500, keys=500, hits=500, misses=0,
               errors=0)
        kv = run(mc_load, port, "-b", "-t", "mget", "-r", "2000", "-n", "160", "-P", "16",
                 "-c", "3")
        expect(kv, "-b mget P16 (10 GETKQ + NOOP)", requests=160, keys=1600, hits=1600,
               misses=0, errors=0)
        for cmd, pipeline in (("get", "3"), ("mget", "16")):
            same = ("-t", cmd, "-r", "4000", "-S", "9", "-n", "320", "-P", pipeline, "-c", "4")
            text, binary = run(mc_load, port, *same), run(mc_load, port, "-b", *same)
            if (text["hits"], text["misses"]) != (binary["hits"], binary["misses"]) or \
                    int(binary["misses"]) == 0 or int(binary["hits"]) == 0:
                sys.exit(f"{cmd} -P {pipeline} over a half-filled key space: text {text}, "
                         f"binary {binary}: want the same hits and misses, both nonzero")
            print(f"ok  -b {cmd} -P {pipeline}: misses counted, as text counts them")
        kv = run(mc_load, big_port, "-b", "-t", "set", "-d", "2000", "-n", "100", "-P", "4",
                 "-c", "2")
        expect(kv, "-b set of an item over -I: status 0x03 counted, run goes on",
               requests=100, errors=100)
    finally:
        for p in (mc, big):
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    err = run(mc_load, free_port(), "-t", "get", "-n", "10", rc=1)
    if "connect" not in err:
        sys.exit(f"refused connection: want a connect error, got {err!r}")
    print("ok  a refused connection: status 1")


if __name__ == "__main__":
    main()
