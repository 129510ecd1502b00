#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Route exactly like my chash-proxy fleet: the server chash-proxy (or nutcracker) sends a key
to, computed in the process from the same YAML file, so a service can talk to the right server
directly (or check where a key lives).

    python3 proxy_fleet.py [--config FILE] [--pool NAME] [KEY...]

CONFIG defaults to /etc/chash-proxy/chash-proxy.yml (the chash package's), else the source
tree's examples/chash-proxy.yml. The pool's distribution, hash and hash_tag apply, and the
servers are hashed under the names nutcracker uses, so the answer is chash-proxy's.
"""
import argparse
import os

import chash

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = "/etc/chash-proxy/chash-proxy.yml"
if not os.path.exists(DEFAULT):
    DEFAULT = os.path.join(HERE, "..", "..", "..", "examples", "chash-proxy.yml")
ap = argparse.ArgumentParser(description="where chash-proxy sends each key")
ap.add_argument("--config", default=DEFAULT)
ap.add_argument("--pool", help="the pool (needed when the file has several)")
ap.add_argument("keys", nargs="*", default=["user:42", "session:{abc}:cart", "session:{abc}:seen"])
a = ap.parse_args()

fleet = chash.Table.from_config(a.config, a.pool)  # chash.ConfigError names file:line:column
print("pool %s: %s over %s, %d servers" % (fleet.pool, fleet.algorithm, fleet.hash, len(fleet)))
for key in a.keys:
    i = fleet.index(key)
    print("%-22s -> %s %s" % (key, fleet.addresses[i], fleet.names[i] or ""))
