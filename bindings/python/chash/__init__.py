# SPDX-License-Identifier: Apache-2.0
"""chash: libchash's consistent-hashing placement tables for Python.

A :class:`Table` maps keys to nodes exactly as libchash (and so the ``chash`` CLI and
chash-proxy) does, for every scheme in its registry: chash's own (``ring``, ``rendezvous``,
``jump``, ``maglev``, ``modulo``), twemproxy's (``ketama``, ``modula``, ``random``),
libmemcached's, and client libraries' rings (``uhashring@2``, ``dalli@3``, ``hashring@3``,
``md5_64_ring``, ...)::

    import chash
    t = chash.Table(["cache-1", "cache-2", ("cache-3", 2.0)], "ring")
    t.lookup("user:42")            # 'cache-3'
    t.replicas(b"user:42", 2)      # ['cache-3', 'cache-1']
    fleet = chash.Table.from_config("/etc/chash-proxy/chash-proxy.yml", "cache")
    fleet.address("user:42")       # '10.0.1.13:11211': where chash-proxy sends it

Keys are ``str`` (hashed as UTF-8) or ``bytes``. Tables are immutable: share one between
threads without locks; build a new one for a membership change (the old one is freed when
the last reference to it goes). Errors are :class:`Error` (a ``ValueError``) with libchash's
message and status code, :class:`ConfigError` for YAML files and membership documents.
"""

from ._chash import (  # noqa: F401  (re-exported)
    MAX_NODES,
    ConfigError,
    Error,
    Table,
    algorithm_info,
    algorithms,
    hashes,
    library_version,
)

__version__ = library_version
__all__ = [
    "MAX_NODES",
    "ConfigError",
    "Error",
    "Table",
    "algorithm_info",
    "algorithms",
    "hashes",
    "library_version",
]
