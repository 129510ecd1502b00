# SPDX-License-Identifier: Apache-2.0
"""django_redis_ring.py -- the oracle for chash's django_redis_shard@5: the real ShardClient and
HashRing of django-redis 5 (Debian python3-django-redis).

Each case of rings_compat.py's batch format on stdin ("case", node W HEXID with the server's
LOCATION string, key HEX with UTF-8 text) gets a ShardClient whose ring is
django_redis.hash_ring.HashRing(locations) as ShardClient.__init__ builds it (the client is
made without __init__, which would open connections and read Django's settings), and for each
key ShardClient.get_server_name(key) (its tag regular expression, then the ring) names the
server, printed as its index in the node list.
"""
import sys

from django.conf import settings

settings.configure()

from django_redis.client.sharded import ShardClient  # noqa: E402
from django_redis.hash_ring import HashRing  # noqa: E402


def main():
    names, client, index, out = [], None, {}, []
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        if f[0] == "case":
            names, client = [], None
        elif f[0] == "node":
            names.append(bytes.fromhex(f[2]).decode("utf-8"))
        elif f[0] == "key":
            if client is None:
                client = ShardClient.__new__(ShardClient)
                client._server = list(names)
                client._ring = HashRing(client._server)
                index = {n: i for i, n in enumerate(names)}
            key = "" if f[1] == "-" else bytes.fromhex(f[1]).decode("utf-8")
            out.append(str(index[client.get_server_name(key)]))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
