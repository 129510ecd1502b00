#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""md5_64_ring.py -- the oracle for chash's md5_64_ring: the Python tutorial ring as issue 15
describes it, written from that description (not from chash's code).

    position = the first 8 bytes of MD5("<node>#<i>") read big-endian, i in range(vnodes);
    ring: a dict position -> node (a later node at an equal position replaces the owner);
    sorted_keys: the positions sorted; a key goes to bisect_left(sorted_keys, hash(key)),
    wrapping to index 0.

Reads the case format of clients_compat.py on stdin (vnodes, node W HEXID, key HEX) and prints
each key's owner as its index in the node list. Node ids and keys are bytes (the tutorial
encodes str keys to UTF-8 before hashing; bytes are what reach MD5)."""
import bisect
import hashlib
import sys


class Md5Ring:
    def __init__(self, nodes, vnodes):
        self.ring = {}
        self.sorted_keys = []
        for node in nodes:
            for i in range(vnodes):
                pos = self.hash(node + b"#" + str(i).encode())
                self.ring[pos] = node
                self.sorted_keys.append(pos)
        self.sorted_keys.sort()

    @staticmethod
    def hash(data):
        return int.from_bytes(hashlib.md5(data).digest()[:8], "big")

    def get_node(self, key):
        i = bisect.bisect_left(self.sorted_keys, self.hash(key))
        if i == len(self.sorted_keys):
            i = 0
        return self.ring[self.sorted_keys[i]]


def main():
    vnodes, nodes, ring, index, out = 100, [], None, {}, []
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        if f[0] == "vnodes":
            vnodes = int(f[1])
        elif f[0] == "node":
            if float(f[1]) != 1.0:
                sys.exit("md5_64_ring.py: the tutorial ring has no weights")
            nodes.append(bytes.fromhex(f[2]))
            index[nodes[-1]] = len(nodes) - 1
        elif f[0] == "key":
            if ring is None:
                ring = Md5Ring(nodes, vnodes)
            key = b"" if f[1] == "-" else bytes.fromhex(f[1])
            out.append(str(index[ring.get_node(key)]))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
