#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""pymemcache_hash.py -- the oracle for chash's pymemcache@3: the real pymemcache HashClient
(python3-pymemcache 3.x) with its default hasher, RendezvousHash.

Reads the case format of clients_compat.py on stdin (node W HEXID with the id "host:port", key
HEX; keys are UTF-8 text) and builds HashClient([(host, port), ...], allow_unicode_keys=True) in
list order (nothing connects); prints, for each key, the server of HashClient._get_client(key)
(which checks the key as every command does, then asks the hasher) as its index in the list."""
import sys

from pymemcache.client.hash import HashClient


def main():
    servers, index, client, out = [], {}, None, []
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        if f[0] == "node":
            if float(f[1]) != 1.0:
                sys.exit("pymemcache_hash.py: HashClient has no weights")
            host, port = bytes.fromhex(f[2]).decode().rsplit(":", 1)
            index[(host, int(port))] = len(servers)
            servers.append((host, int(port)))
        elif f[0] == "key":
            if client is None:
                client = HashClient(servers, allow_unicode_keys=True)
            key = "" if f[1] == "-" else bytes.fromhex(f[1]).decode("utf-8")
            out.append(str(index[tuple(client._get_client(key).server)]))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
