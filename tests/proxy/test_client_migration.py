#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_client_migration: the worked example of docs/COMPATIBILITY.md, "Moving a fleet that
shards in its clients", end to end with a real client library (issue 38).

A PHP application shards Redis in its client: Predis 1.1 (Debian php-predis), new
Predis\\Client([tcp://host:port?weight=W, ...], ['cluster' => 'predis']), over 3 real
redis-servers weighted 1:2:1. It writes 3,000 keys through its own ring (ASCII, UTF-8, hash
tags: "{user:N}:cart" goes where "user:N" goes). Then:
  1. chash-proxy with "distribution: predis@1" in front of the same servers (the config's
     servers as the application lists them): every key is read back through the proxy, on the
     server Predis put it on -- a cold cache avoided;
  2. the pool grows to 4 servers and changes placement to chash's ring, with warm_up: a
     SIGHUP reload, and every key still reads back (the ones that move are read from their
     old server and copied over), and afterwards lives on its new owner.

Usage: test_client_migration.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server or php-predis missing and CI unset).
"""
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, chash_lookup, fail, free_ports, log,  # noqa: E402
                          pool_yaml, run_test, skip, start_redises, wait_until, write_file)

POOL = "app"
WEIGHTS = [1, 2, 1]

# The application's writer: Predis' own client and ring, one SET per key (keys as hex lines).
PREDIS_WRITER = r"""<?php
require 'Predis/Autoloader.php';
Predis\Autoloader::register();
$servers = array_slice($argv, 1);
$client = new Predis\Client($servers, ['cluster' => 'predis']);
$n = 0;
while (($line = fgets(STDIN)) !== false) {
    $key = hex2bin(rtrim($line, "\n"));
    $client->set($key, 'v-' . bin2hex($key));
    $n++;
}
echo $n, "\n";
"""


def make_keys():
    keys = [b"user:%d" % i for i in range(1500)]
    keys += [b"{user:%d}:cart" % i for i in range(500)]
    keys += [("caf\u00e9:%d:\u4e2d\u6587" % i).encode() for i in range(500)]
    keys += [b"session:%06x" % (i * 7919) for i in range(500)]
    return keys


def read_all(addr, keys):
    """GETs every key through the proxy; returns the keys whose value is not the writer's."""
    bad = []
    with Resp(addr) as c:
        for i in range(0, len(keys), 500):
            batch = keys[i:i + 500]
            got = c.pipeline([("GET", k) for k in batch])
            bad += [k for k, v in zip(batch, got) if v != b"v-" + k.hex().encode()]
    return bad


def info_servers(addr):
    with Resp(addr) as c:
        text = c.call("INFO").decode()
    m = re.search(r"pool_%s_servers:(\d+)" % POOL, text)
    return int(m.group(1)) if m else None


def body(t):
    if subprocess.run(["php", "-r", "require 'Predis/Autoloader.php';"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
        skip("php-cli or php-predis missing (scripts/bootstrap installs them)")
    redis = start_redises(t.programs["redis-server"], t.tmp, 4)
    keys = make_keys()

    # The application writes through its own ring (Predis' HashRing, weights 1:2:1).
    writer = write_file(os.path.join(t.tmp, "writer.php"), PREDIS_WRITER)
    servers = ["tcp://%s?weight=%d" % (r.text, w) for r, w in zip(redis, WEIGHTS)]
    p = subprocess.run(["php", writer] + servers, input=b"".join(k.hex().encode() + b"\n"
                                                                  for k in keys),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if p.returncode != 0 or p.stdout.strip() != str(len(keys)).encode():
        fail("the Predis writer: exit %d, %r %r" % (p.returncode, p.stdout, p.stderr[-500:]))
    held = [int(r.call("DBSIZE")) for r in redis[:3]]
    if sum(held) != len(keys) or min(held) == 0:
        fail("Predis spread the keys %r over the 3 servers" % held)
    log("Predis wrote %d keys through its ring: %r per server" % (len(keys), held))

    # 1. chash-proxy with the application's placement: every key reads back.
    port = free_ports(1)[0]
    addr = ("127.0.0.1", port)
    same = pool_yaml(POOL, port, [(r.text, w, None) for r, w in zip(redis, WEIGHTS)],
                     distribution="predis@1", timeout=5000)
    f1 = write_file(os.path.join(t.tmp, "predis.yml"), same)
    live = write_file(os.path.join(t.tmp, "live.yml"), same)
    px = Proxy(t.proxy, t.tmp, live, [addr], label="proxy").start()
    bad = read_all(addr, keys)
    if bad:
        fail("distribution: predis@1: %d of %d keys not read back, e.g. %r" % (len(bad), len(keys),
                                                                              bad[0]))
    log("chash-proxy with distribution: predis@1 read back all %d keys" % len(keys))

    # 2. Four servers, chash's ring, warm_up: a reload moves keys, and none misses.
    better = pool_yaml(POOL, port, [(r.text, 1, None) for r in redis], distribution="ring",
                       hash="fnv1a32_fmix", timeout=5000, warm_up=120000)
    f2 = write_file(os.path.join(t.tmp, "ring.yml"), better)
    old = chash_lookup(t.chash, f1, POOL, keys)
    new = chash_lookup(t.chash, f2, POOL, keys)
    moved = [k for k in keys if old[k] != new[k]]
    write_file(live + ".tmp", better)
    os.rename(live + ".tmp", live)
    px.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: info_servers(addr) == 4, 20, "the reload to 4 servers")
    bad = read_all(addr, keys)
    if bad:
        fail("after the switch to ring with warm_up: %d of %d keys missed, e.g. %r"
             % (len(bad), len(keys), bad[0]))
    by_text = {r.text: r for r in redis}
    on_new = sum(1 for k in moved
                 if by_text[new[k]].call("GET", k) == b"v-" + k.hex().encode())
    if not moved or on_new != len(moved):
        fail("%d keys moved, %d of them on their new owner after the reads" % (len(moved),
                                                                              on_new))
    px.stop()
    return ("predis@1 behind chash-proxy: %d/%d keys read back; then ring over 4 servers with "
            "warm_up: %d keys moved, 0 missed, all copied to their new owner"
            % (len(keys), len(keys), len(moved)))


if __name__ == "__main__":
    run_test(body, programs=("redis-server",))
