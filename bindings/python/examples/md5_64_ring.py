#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Seed 004's case: a Python service that shards with the tutorial MD5 ring (hashlib + bisect),
moved onto libchash's md5_64_ring without moving a single key.

The ring below is the one copied into many services (positions: the first 8 bytes of
MD5("<node>#<i>") big-endian, a dict, bisect_left). chash.Table(nodes, "md5_64_ring",
vnodes=...) places every key on the same node, at C speed, with replicas and batches besides.

    python3 md5_64_ring.py
"""
import bisect
import hashlib

import chash

NODES = ["cache-a.internal:11211", "cache-b.internal:11211", "cache-c.internal:11211"]
VNODES = 100


class TutorialRing:  # what the service had
    def __init__(self, nodes, vnodes):
        self.ring, self.points = {}, []
        for node in nodes:
            for i in range(vnodes):
                p = self.hash("%s#%d" % (node, i))
                self.ring[p] = node
                self.points.append(p)
        self.points.sort()

    @staticmethod
    def hash(s):
        return int.from_bytes(hashlib.md5(s.encode()).digest()[:8], "big")

    def get_node(self, key):
        i = bisect.bisect_left(self.points, self.hash(key))
        return self.ring[self.points[i if i < len(self.points) else 0]]


old = TutorialRing(NODES, VNODES)
table = chash.Table(NODES, "md5_64_ring", vnodes=VNODES)  # what it has now

keys = ["user:%d" % i for i in range(20000)]
assert table.lookup_many(keys) == [old.get_node(k) for k in keys]
print("md5_64_ring: %d of %d keys on the same node as the tutorial ring" % (len(keys), len(keys)))
print("user:42 ->", table.lookup("user:42"), "then", table.replicas("user:42", 3)[1:])
