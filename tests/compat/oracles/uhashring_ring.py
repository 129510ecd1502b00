#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""uhashring_ring.py -- the oracle for chash's uhashring@2 and uhashring_ketama@2: the real
uhashring package (python3-uhashring), HashRing(nodes) or HashRing(nodes, hash_fn="ketama").

    uhashring_ring.py {meta,ketama} < case

Reads the case format of clients_compat.py on stdin (vnodes V, node W HEXID, key HEX): nodes
become a dict {name: {"weight": W}} in list order (ids and keys are UTF-8 text: uhashring hashes
str(key)), with vnodes=V when the case gives it, else uhashring's default. Prints each key's
owner, from HashRing.get_node, as its index in the node list."""
import sys

from uhashring import HashRing


def main():
    mode = sys.argv[1]
    vnodes, nodes, ring, out = None, {}, None, []
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        if f[0] == "vnodes":
            vnodes = int(f[1])
        elif f[0] == "node":
            w = float(f[1])
            if w != int(w):
                sys.exit("uhashring_ring.py: uhashring's weights are whole numbers")
            nodes[bytes.fromhex(f[2]).decode("utf-8")] = {"weight": int(w)}
        elif f[0] == "key":
            if ring is None:
                kw = {"hash_fn": "ketama"} if mode == "ketama" else {}
                if vnodes is not None:
                    kw["vnodes"] = vnodes
                ring = HashRing(nodes, **kw)
                index = {name: i for i, name in enumerate(nodes)}
            key = "" if f[1] == "-" else bytes.fromhex(f[1]).decode("utf-8")
            out.append(str(index[ring.get_node(key)]))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
