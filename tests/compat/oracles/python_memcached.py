# SPDX-License-Identifier: Apache-2.0
"""python_memcached.py -- the oracle for chash's python_memcached@1: the real memcache.Client of
python-memcached 1.59 (Debian python3-memcache; OpenStack's oslo.cache uses it).

Each case of rings_compat.py's batch format on stdin ("case", node W HEXID with the server
"host:port", down I, key HEX) makes memcache.Client([("host:port", weight), ...]) in list order
and, for each key, checks it as every command does (Client.check_key: a refused key fails the
oracle) and asks Client._get_server(key): the bucket of cmemcache_hash(key), and past a dead
server its own 10 retries. Nothing connects: a server that is up is given an open-socket
stand-in (what _get_socket returns once connected), and one the case marks down is marked dead
(deaduntil in the future, as after a failed connection). Prints each key's server as its index
in the node list, -1 where _get_server finds none.
"""
import sys
import time

import memcache


class Connected:
    """Stands for a connected socket: _Host._get_socket returns an existing one as is."""

    def close(self):
        pass


def main():
    servers, down, client, out = [], set(), None, []
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        if f[0] == "case":
            servers, down, client = [], set(), None
        elif f[0] == "node":
            w = float(f[1])
            if w != int(w):
                sys.exit("python-memcached weights are whole: %s" % f[1])
            servers.append((bytes.fromhex(f[2]).decode(), int(w)))
        elif f[0] == "down":
            down.add(int(f[1]))
        elif f[0] == "key":
            if client is None:
                client = memcache.Client(servers)
                for i, s in enumerate(client.servers):
                    if i in down:
                        s.deaduntil = time.time() + 10 ** 9
                    else:
                        s.socket = Connected()
                index = {id(s): i for i, s in enumerate(client.servers)}
            key = b"" if f[1] == "-" else bytes.fromhex(f[1])
            client.check_key(key)
            server, _ = client._get_server(key)
            out.append(str(index[id(server)] if server is not None else -1))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
