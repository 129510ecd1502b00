#!/usr/bin/env python3
"""The direction of chash-proxy's data path (docs/PROXY.md, "Shape").

Each file of proxy/ has a rank; a data-path file may include only headers of a lower rank or
leaves, so nothing calls up except through a function pointer it was given (px_frag.done,
px_rq.on_done, px_flushable.flush, px_route_ops):

    worker -> client -> dispatch -> session -> route_*, pubsub -> request, warm -> backend
    -> pool, io
    leaves (include only leaves): proto/*, buf, log, counters, health_shared, conf_ref,
    resolve, route.h, window.h, tls

The worker is the boundary: it may also include the control plane (ctl, metrics), which may
include anything. A file of proxy/ that has no rank here fails the check, so a new module has to
be placed. Run with --self-test to see the check fail on a tree that breaks the rule.
"""
import os
import re
import sys
import tempfile

LEAF = 0
RANKS = {
    "buf": LEAF, "log": LEAF, "counters": LEAF, "health_shared": LEAF,
    "conf_ref": LEAF, "resolve": LEAF, "route": LEAF, "window": LEAF, "tls": LEAF,
    "io": 1, "pool": 1, "backend": 2, "request": 3, "warm": 3, "route_pool": 4, "route_all": 4,
    "route_scan": 4, "pubsub": 4, "session": 5, "dispatch": 6, "client": 7,
    "worker": 8,
    # the control plane: unchecked above the worker
    "listen": 9, "snapshot": 9, "metrics": 9, "stats": 9, "reload": 9, "etcd_http": 9,
    "lease": 9,
    "fleet": 10, "admin_http": 10,
    "ctl": 11, "main": 12,
}
DATA_PATH = {"io", "backend", "request", "warm", "route_pool", "route_all", "route_scan",
             "pubsub", "session", "dispatch", "client"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module(path):
    """The module a proxy/ file belongs to, or None for proto/ (leaves)."""
    rel = path.replace(os.sep, "/")
    if rel.startswith("proto/"):
        return "proto"
    return os.path.splitext(os.path.basename(rel))[0]


def rank(mod):
    return LEAF if mod == "proto" else RANKS.get(mod)


def check(root):
    errors = []
    for dirpath, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.relpath(os.path.join(dirpath, name), root)
            mod = module(path)
            r = rank(mod)
            if r is None:
                errors.append("%s: no rank in tests/lint/proxy_direction.py: place it" % path)
                continue
            with open(os.path.join(root, path), encoding="utf-8") as fp:
                text = fp.read()
            for inc in INCLUDE.findall(text):
                target = os.path.normpath(os.path.join(os.path.dirname(path), inc))
                if target.startswith("..") or not os.path.exists(os.path.join(root, target)):
                    continue  # outside proxy/: the library, config, system
                tmod = module(target)
                tr = rank(tmod)
                if tr is None:
                    errors.append("%s includes %s, which has no rank" % (path, inc))
                elif tmod == mod:
                    continue
                elif r == LEAF and tr != LEAF:
                    errors.append("%s (a leaf) includes %s" % (path, inc))
                elif mod in DATA_PATH and tr != LEAF and tr >= r:
                    errors.append("%s (data path, rank %d) includes %s (rank %d): a call up "
                                  "must go through a callback" % (path, r, inc, tr))
    return errors


def self_test():
    with tempfile.TemporaryDirectory() as d:
        def put(name, text):
            with open(os.path.join(d, name), "w") as fp:
                fp.write(text)
        put("backend.c", '#include "backend.h"\n#include "request.h"\n')
        put("backend.h", '#include "pool.h"\n')
        put("request.h", '#include "backend.h"\n')
        put("pool.h", '#include "client.h"\n')
        put("conf_ref.h", '#include "pool.h"\n')
        put("client.h", "")
        put("novel.c", "")
        errs = check(d)
        want = ["backend.c (data path", "conf_ref.h (a leaf)", "novel.c: no rank"]
        missing = [w for w in want if not any(w in e for e in errs)]
        if missing:
            print("self-test: the check missed: %s (it said %r)" % (missing, errs))
            return 1
    print("self-test: the check catches an upward include, a leaf that is not, an unplaced file")
    return 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) != 2:
        print("usage: proxy_direction.py PROXY_DIR | --self-test", file=sys.stderr)
        return 2
    errors = check(sys.argv[1])
    for e in errors:
        print("proxy direction: " + e)
    if errors:
        return 1
    print("proxy direction: every include of the data path points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
