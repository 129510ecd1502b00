#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The direction of chash-proxy's includes (docs/PROXY.md, "Shape").

Each module of proxy/ (a file's name without .c or .h: a module's .c and .h count together) has
a rank; a module may include only headers of a lower rank or leaves, so nothing calls up except
through a function pointer it was given (px_frag.done, px_rq.on_done, px_flushable.flush,
px_route_ops, the control plane's callbacks):

    the data path:
    worker -> client -> dispatch -> session -> route_*, pubsub, track -> copy -> request, warm
    -> backend -> pool -> io
    leaves (include only leaves): proto/*, io, buf, log, counters, health_shared, conf_ref,
    resolve, route.h, window.h, tls, file, roster, fence, dns_answer, http_req, json, client_track

    the control plane, above the worker:
    main -> ctl -> admin_http -> metrics, stats -> fleet, dns_watch -> fleet_change, fleet_boot
    -> fleet_instance, fleet_member -> fleet_watch, fleet_damp, reload, lease -> etcd_http,
    dns_resolve;
    reload, snapshot, hotkeys -> ctl_state (struct px_ctl, data only) -> worker

The worker is the data path's top: it too includes nothing above it, and what it needs of the
control thread (the shared pools, counters, the INFO text) it is handed in px_worker_env. A
file of proxy/ that has no rank here fails the check, so a new module has to be placed. Then
the modules' include graph is searched for a circle (leaves may include each other, so the
ranks alone do not rule one out): there must be none. Run with --self-test to see the check
fail on a tree that breaks each rule, the control plane's old circle (fleet -> reload ->
metrics -> fleet) among them.

The same direction one floor down (--layers ROOT): the modules of include/, src/ and tools/
(DESIGN.md, "Layers"), each with a rank, a module including only what its layer may:

    0 core (include/chash.h, src/hash, src/place, src/hot)
    0 proto (proxy/proto's pure parsers, mc and resp)
    1 route   2 config   3 fleet   4 cache   5 tools/chash, proxy/

  - an include of another module's header points down: to a lower rank (so the pure core and
    the parsers include nothing of the others, and nothing includes tools/ or proxy/);
  - it is one of the headers that module offers: its installed header (include/) or a shared
    header written for the modules that use it (SHARED, which names them); every other file of
    a module (src/internal.h, a *_internal.h, a .c) is private to it;
  - the pure layers (core, proto, route) include no I/O, clock or thread header and no library
    of the edges (DESIGN.md: "no sockets, no clocks, no logging");
  - every file has a module, so a new directory has to be placed.
proxy/'s own includes are the data path's rule above. Run --self-test layers to see this check
fail on a tree that breaks each rule.
"""
import os
import re
import sys
import tempfile

LEAF = 0
RANKS = {
    "buf": LEAF, "log": LEAF, "counters": LEAF, "health_shared": LEAF,
    "conf_ref": LEAF, "resolve": LEAF, "route": LEAF, "window": LEAF, "tls": LEAF,
    "file": LEAF, "roster": LEAF, "fence": LEAF, "dns_answer": LEAF, "http_req": LEAF, "json": LEAF,
    "client_track": LEAF,  # the keys each tracking client read: a table, delivering by callback
    "redir": LEAF,  # client ids across workers and their inboxes: a registry under a mutex
    "io": LEAF,  # streams over buf, log and tls: what pool.h holds
    "pool": 1, "backend": 2, "request": 3, "warm": 3, "copy": 4, "route_pool": 4, "route_all": 4,
    "route_scan": 4, "route_replica": 5, "route_warm": 5, "route_shadow": 5, "route_stage": 5, "route_near": 5,
    "route_gutter": 5, "route_coalesce": 5, "route_prefix": 5, "route_build": 6,
    "pubsub": 4, "near_write": 4,
    "session": 5,
    "dispatch": 6, "client": 7,
    "track": 4,  # the near cache's invalidation links, beside pubsub
    "worker": 8,
    # the control plane, above the worker
    "info_name": 8,
    "ctl_state": 9, "listen": 9, "etcd_http": 9, "notify": 9, "dns_resolve": 9,
    "lease": 10, "snapshot": 10, "hotkeys": 10, "reload": 10, "fleet_watch": 10,
    "fleet_damp": 10,
    "fleet_instance": 11, "fleet_member": 11,
    "fleet_change": 12, "fleet_boot": 12,
    "fleet": 13, "dns_watch": 13,
    "metrics": 14, "stats": 14,
    "admin_http": 15,
    "ctl": 16,
    "main": 17,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module(path):
    """The module a proxy/ file belongs to, or None for proto/ (leaves)."""
    rel = path.replace(os.sep, "/")
    if rel.startswith("proto/"):
        return "proto"
    return os.path.splitext(os.path.basename(rel))[0]


def rank_of(mod):
    return LEAF if mod == "proto" else RANKS.get(mod)


def check(root):
    errors = []
    graph = {}  # module -> {module it includes: the first file that does, and the header}
    for dirpath, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.relpath(os.path.join(dirpath, name), root)
            mod = module(path)
            r = rank_of(mod)
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
                tr = rank_of(tmod)
                if tr is None:
                    errors.append("%s includes %s, which has no rank" % (path, inc))
                    continue
                if tmod == mod:
                    continue
                graph.setdefault(mod, {}).setdefault(tmod, (path, inc))
                if r == LEAF and tr != LEAF:
                    errors.append("%s (a leaf) includes %s" % (path, inc))
                elif r != LEAF and tr != LEAF and tr >= r:
                    errors.append("%s (rank %d) includes %s (rank %d): a call up must go "
                                  "through a callback it was given, or the data it needs "
                                  "into a lower header" % (path, r, inc, tr))
    errors += circles(graph)
    return errors


def circles(graph):
    """Every include circle among the modules (graph: module -> modules it includes), each
    once, as "a -> b -> ... -> a" from its least module, with the includes that make it.
    Tarjan's strongly connected components; each component of more than one module holds a
    circle, and the one reported is a shortest from its least module back to it."""
    index, low, on, stack, comps = {}, {}, set(), [], []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, {})):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(set(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    out = []
    for comp in sorted(comps, key=min):
        start = min(comp)
        prev, queue = {start: None}, [start]
        path = None
        while queue and path is None:
            v = queue.pop(0)
            for w in sorted(graph.get(v, {})):
                if w not in comp:
                    continue
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    path = list(reversed(path)) + [start]
                    break
                if w not in prev:
                    prev[w] = v
                    queue.append(w)
        hops = ["%s includes %s" % graph[a][b] for a, b in zip(path, path[1:])]
        more = sorted(comp - set(path))
        out.append("include circle: %s (%s)%s" % (
            " -> ".join(path), "; ".join(hops),
            "; in circles with them: " + ", ".join(more) if more else ""))
    return out


# ---- the layers of include/, src/ and tools/ ----------------------------------------------------

# (module, rank, the paths it owns: a directory ends in "/"). The first match wins, so the pure
# parsers of proxy/proto are placed before the rest of proxy/.
LAYERS = [
    ("core", 0, ["include/chash.h", "include/chash_version.h.in", "src/internal.h",
                 "src/table_view.h", "src/version.c", "src/hash/", "src/place/", "src/hot/"]),
    ("proto", 0, ["proxy/proto/mc.h", "proxy/proto/mc.c", "proxy/proto/resp.h",
                  "proxy/proto/resp.c"]),
    ("route", 1, ["include/chash_route.h", "src/route/"]),
    ("config", 2, ["include/chash_config.h", "src/config/"]),
    ("fleet", 3, ["src/fleet/"]),
    ("cache", 4, ["include/chash_cache.h", "src/cache/"]),
    ("tools", 5, ["tools/chash/"]),
    ("proxy", 5, ["proxy/"]),
]
# The files whose includes this check reads; proxy/ is the data path's (check above), but for
# the pure parsers, which tools/ and proxy/ both build on.
CHECKED = ["include/", "src/", "tools/", "proxy/proto/mc.", "proxy/proto/resp."]
ANYONE = "anyone above"
# What a module offers the modules above it. include/'s headers are installed: anyone above may
# include them. A header shared without being installed names the modules it was written for.
SHARED = {
    "include/chash.h": ANYONE, "include/chash_version.h.in": ANYONE,
    "include/chash_route.h": ANYONE, "include/chash_config.h": ANYONE,
    "include/chash_cache.h": ANYONE,
    "proxy/proto/mc.h": ANYONE, "proxy/proto/resp.h": ANYONE,
    "src/table_view.h": {"route"},
    "src/hot/topk.h": {"cache", "proxy"},
    "src/hot/near.h": {"cache", "proxy"},
    "src/fleet/fleet_record.h": {"cache", "tools", "proxy"},
    "src/fleet/etcd_msg.h": {"tools", "proxy"},
}
PURE = {"core", "proto", "route"}
# Headers a pure layer never includes: sockets, clocks, threads, processes, files, and the
# libraries of the edges.
IMPURE = re.compile(r"^(sys/(socket|un|time|stat|epoll|select|wait)\.h|netinet/.*|arpa/.*|"
                    r"netdb\.h|poll\.h|unistd\.h|fcntl\.h|pthread\.h|threads\.h|time\.h|"
                    r"signal\.h|dirent\.h|syslog\.h|uv\.h|yaml\.h|jansson\.h|hiredis/.*|"
                    r"curl/.*|openssl/.*)$")
ANY_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def layer_of(rel):
    """(module, rank) of a path relative to the root, or (None, None)."""
    for mod, r, paths in LAYERS:
        for p in paths:
            if rel == p or (p.endswith("/") and rel.startswith(p)):
                return mod, r
    return None, None


def project_headers(root):
    out = []
    for top in ("include", "src", "tools", "proxy"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if name.endswith((".h", ".h.in")):
                    out.append(os.path.relpath(os.path.join(dirpath, name), root)
                               .replace(os.sep, "/"))
    return sorted(out)


def resolve(root, headers, rel, inc, quoted):
    """The project file an include names (relative to root), None for a system or library
    header, or a list of the candidates when the name is ambiguous."""
    if quoted:
        near = os.path.normpath(os.path.join(os.path.dirname(rel), inc)).replace(os.sep, "/")
        if not near.startswith("..") and os.path.isfile(os.path.join(root, near)):
            return near
    if inc == "chash_version.h":  # configured from include/chash_version.h.in
        inc = "chash_version.h.in"
    found = [h for h in headers if h == "include/" + inc or h.endswith("/" + inc)]
    if len(found) > 1:
        return found
    return found[0] if found else None


def check_layers(root):
    errors = []
    headers = project_headers(root)
    for top in ("include", "src", "tools", "proxy/proto"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
                if not rel.endswith((".c", ".h", ".h.in")) or \
                        not any(rel.startswith(c) for c in CHECKED):
                    continue
                mod, r = layer_of(rel)
                if mod is None:
                    errors.append("%s: no layer in tests/lint/proxy_direction.py: place it" % rel)
                    continue
                with open(os.path.join(root, rel), encoding="utf-8") as fp:
                    text = fp.read()
                for quote, inc in ANY_INCLUDE.findall(text):
                    target = resolve(root, headers, rel, inc, quote == '"')
                    if target is None:
                        if mod in PURE and IMPURE.match(inc):
                            errors.append("%s (%s, pure) includes <%s>: no I/O, clock or thread "
                                          "in a pure layer" % (rel, mod, inc))
                        continue
                    if isinstance(target, list):
                        errors.append("%s includes %s, which names %s: ambiguous"
                                      % (rel, inc, " and ".join(target)))
                        continue
                    tmod, tr = layer_of(target)
                    if tmod == mod:
                        continue
                    if tmod is None:
                        errors.append("%s includes %s (%s), which has no layer" % (rel, inc, target))
                        continue
                    if tr >= r:
                        errors.append("%s (%s, rank %d) includes %s of %s (rank %d): a layer "
                                      "includes only layers below it" % (rel, mod, r, inc, tmod, tr))
                        continue
                    users = SHARED.get(target)
                    if users is None:
                        errors.append("%s (%s) includes %s, private to %s: include what %s "
                                      "offers (its include/ header, a shared header), or move "
                                      "the code" % (rel, mod, target, tmod, tmod))
                    elif users != ANYONE and mod not in users:
                        errors.append("%s (%s) includes %s, which %s shares only with %s"
                                      % (rel, mod, target, tmod, ", ".join(sorted(users))))
    return errors


def self_test_layers():
    """A tree that breaks each rule once, and the same tree mended, which must pass."""
    bad = {
        "include/chash.h": '#include "chash_route.h"\n',              # core includes route
        "include/chash_route.h": '#include "chash.h"\n',
        "include/chash_cache.h": "",
        "src/internal.h": '#include "chash.h"\n',
        "src/table_view.h": '#include "chash.h"\n',
        "src/place/ring.c": '#include "../internal.h"\n#include <time.h>\n',   # a clock
        "src/route/router.c": '#include "../internal.h"\n',          # core's private header
        "src/route/health.c": '#include "../table_view.h"\n',        # shared with route: fine
        "src/config/config.c": '#include "chash_cache.h"\n',         # config includes cache
        "src/fleet/fleet_internal.h": "",
        "src/fleet/fleet_record.h": "",
        "src/cache/fleet.c": '#include <fleet_internal.h>\n#include "../table_view.h"\n',
        "tools/chash/a/etcd_http.h": "", "tools/chash/b/etcd_http.h": "",
        "tools/chash/fleet.c": '#include <fleet_record.h>\n#include <etcd_http.h>\n'
                               '#include "../../proxy/route_pool.h"\n',
        "proxy/route_pool.h": "",
        "proxy/proto/mc.c": '#include "mc.h"\n#include "../route_pool.h"\n',  # proto: not pure
        "proxy/proto/mc.h": "",
        "src/novel/x.c": "",
    }
    want = ["include/chash.h (core, rank 0) includes chash_route.h of route",
            "src/place/ring.c (core, pure) includes <time.h>",
            "src/route/router.c (route) includes src/internal.h, private to core",
            "src/config/config.c (config, rank 2) includes chash_cache.h of cache",
            "src/cache/fleet.c (cache) includes src/fleet/fleet_internal.h, private to fleet",
            "src/cache/fleet.c (cache) includes src/table_view.h, which core shares only with route",
            "tools/chash/fleet.c includes etcd_http.h, which names",
            "tools/chash/fleet.c (tools, rank 5) includes ../../proxy/route_pool.h of proxy",
            "proxy/proto/mc.c (proto, rank 0) includes ../route_pool.h of proxy",
            "src/novel/x.c: no layer"]
    good = dict(bad)
    good.update({
        "include/chash.h": "",
        "src/place/ring.c": '#include "../internal.h"\n#include <string.h>\n',
        "src/route/router.c": '#include "../table_view.h"\n#include "chash_route.h"\n',
        "src/config/config.c": '#include "chash_config.h"\n#include <chash.h>\n',
        "include/chash_config.h": '#include "chash_route.h"\n',
        "src/cache/fleet.c": '#include <fleet_record.h>\n#include "chash_cache.h"\n',
        "tools/chash/fleet.c": '#include <fleet_record.h>\n#include <mc.h>\n#include <time.h>\n',
        "proxy/proto/mc.c": '#include "mc.h"\n#include <string.h>\n',
    })
    del good["src/novel/x.c"], good["tools/chash/a/etcd_http.h"], good["tools/chash/b/etcd_http.h"]
    for tree, expect in ((bad, want), (good, [])):
        with tempfile.TemporaryDirectory() as d:
            for name, text in tree.items():
                os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
                with open(os.path.join(d, name), "w") as fp:
                    fp.write(text)
            errs = check_layers(d)
        if not expect and errs:
            print("self-test: a tree that keeps the layers fails: %r" % errs)
            return 1
        missing = [w for w in expect if not any(e.startswith(w) for e in errs)]
        extra = [e for e in errs if not any(e.startswith(w) for w in expect)]
        if missing or extra:
            print("self-test: the check missed %r and said more: %r (all: %r)"
                  % (missing, extra, errs))
            return 1
    print("self-test: the layers check catches an include upward (core to route, config to "
          "cache, tools and proto to proxy), a module's private header (core's internal.h, "
          "fleet_internal.h), a shared header outside its users, a clock in the pure core, an "
          "ambiguous include, an unplaced file; the mended tree passes")
    return 0


def self_test():
    """Trees that break each rule of check(), and the same tree mended, which must pass."""
    bad = {
        # the data path
        "backend.c": '#include "backend.h"\n#include "request.h"\n',   # calls up
        "backend.h": '#include "pool.h"\n',
        "request.h": '#include "backend.h"\n',
        "pool.h": '#include "client.h"\n',                              # calls up
        "conf_ref.h": '#include "pool.h"\n',                            # a leaf that is not
        "client.h": "",
        "novel.c": "",                                                   # unplaced
        # two leaves including each other: the ranks allow it, the circle check does not
        "buf.h": '#include "log.h"\n',
        "log.c": '#include "log.h"\n#include "buf.h"\n',
        "log.h": "",
        # the control plane's old circle, closed by a setter in metrics.c that reload.c called
        "ctl_state.h": '#include "pool.h"\n',
        "fleet.h": '#include "ctl_state.h"\n',
        "fleet.c": '#include "fleet.h"\n#include "reload.h"\n',
        "reload.h": '#include "ctl_state.h"\n',
        "reload.c": '#include "reload.h"\n#include "metrics.h"\n',     # calls up
        "metrics.h": '#include "ctl_state.h"\n',
        "metrics.c": '#include "metrics.h"\n#include "fleet.h"\n',
        # and its other half: struct px_ctl in ctl.h, which ctl.c's own includes include
        "stats.h": '#include "ctl.h"\n',                              # calls up
        "ctl.h": '#include "ctl_state.h"\n',
        "ctl.c": '#include "ctl.h"\n#include "stats.h"\n',
    }
    want = ["backend.c (rank 2) includes request.h (rank 3)",
            "pool.h (rank 1) includes client.h (rank 7)",
            "conf_ref.h (a leaf) includes pool.h",
            "novel.c: no rank",
            "reload.c (rank 10) includes metrics.h (rank 14)",
            "stats.h (rank 14) includes ctl.h (rank 16)",
            "include circle: ctl -> stats -> ctl",
            "include circle: backend -> request -> backend",
            "include circle: buf -> log -> buf",
            "include circle: fleet -> reload -> metrics -> fleet"]
    good = dict(bad)
    good.update({
        "backend.c": '#include "backend.h"\n',
        "pool.h": "",
        "conf_ref.h": '#include "buf.h"\n',
        "log.c": '#include "log.h"\n',
        "reload.c": '#include "reload.h"\n',
        "stats.h": '#include "ctl_state.h"\n',
    })
    del good["novel.c"]
    for tree, expect in ((bad, want), (good, [])):
        with tempfile.TemporaryDirectory() as d:
            for name, text in tree.items():
                with open(os.path.join(d, name), "w") as fp:
                    fp.write(text)
            errs = check(d)
        missing = [w for w in expect if not any(e.startswith(w) for e in errs)]
        extra = [e for e in errs if not any(e.startswith(w) for w in expect)]
        if missing or extra:
            print("self-test: the check missed %r and said more: %r" % (missing, extra))
            return 1
    print("self-test: the check catches an upward include (data path and control plane), a "
          "leaf that is not, an unplaced file, and an include circle (of leaves, of the data "
          "path, the control plane's fleet -> reload -> metrics -> fleet and ctl -> stats -> "
          "ctl); the mended tree passes")
    return 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if sys.argv[1:] == ["--self-test", "layers"]:
        return self_test_layers()
    if len(sys.argv) == 3 and sys.argv[1] == "--layers":
        errors = check_layers(sys.argv[2])
        for e in errors:
            print("layers: " + e)
        if errors:
            return 1
        print("layers: every include of include/, src/ and tools/ points down, to what the "
              "module below offers")
        return 0
    if len(sys.argv) != 2:
        print("usage: proxy_direction.py PROXY_DIR | --layers ROOT | --self-test [layers]",
              file=sys.stderr)
        return 2
    errors = check(sys.argv[1])
    for e in errors:
        print("proxy direction: " + e)
    if errors:
        return 1
    print("proxy direction: every include of proxy/ points down, and no include circle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
