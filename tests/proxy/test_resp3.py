#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_resp3: chash-proxy's replies against Redis's own, byte for byte, in RESP2 and RESP3.

The oracle is redis-server itself. Every command of tests/proxy/resp3_commands.txt (strings,
bitmaps, lifetimes, wrong types, hashes, lists, sets, sorted sets, HyperLogLog, geo, SORT,
streams, scripting, transactions, split commands, SCAN, the proxy's local commands, pub/sub) is
sent in order on one connection straight to a redis-server and on one connection through
chash-proxy, and the two replies compared: byte for byte, or as the line's marker allows (the
file's header says which markers exist and why). Four runs: a one-server pool and a four-server
pool (hash tags keep each command's keys on one server, the split commands spread theirs), each
in RESP2 and in RESP3 (HELLO 3 first). Between runs every server is emptied.

A difference that no marker allows fails the test; all of them are listed, not only the first.
Markers are the documented differences (docs/PROXY.md, "RESP3 and the commands"), and a line
marked ?refused must get an error from the proxy.

Usage: test_resp3.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Push, Resp, RespError, encode, fail, free_ports,  # noqa: E402
                          pool_yaml, run_test, start_redises, write_file)

COMMANDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resp3_commands.txt")
MARKERS = ("ttl", "shape", "unordered", "scan", "refused", "differs")


def parse_line(line):
    """(words as bytes, {marker: value}) of a line of the commands file, or None for none."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    words, marks = [], {}
    for w in shlex.split(line):
        if w.startswith("?") and w[1:].split("=")[0] in MARKERS:
            name, _, value = w[1:].partition("=")
            marks[name] = value
        else:
            words.append(w.encode("latin-1").decode("unicode_escape").encode("latin-1"))
    return words, marks


class Sub:
    """What the connection is subscribed to and its CLIENT REPLY mode, so that the replies a
    command gets (one per name of a pub/sub command, one per subscription left for an
    unsubscribe-all, none while replies are off) are counted, not waited for."""

    def __init__(self):
        self.chans, self.pats = set(), set()
        self.mode = b"on"  # CLIENT REPLY's: on, off, skip (the next command's reply dropped)

    def replies(self, words):
        cmd = words[0].lower()
        names = words[1:]
        if cmd == b"client" and len(words) == 3 and words[1].lower() == b"reply":
            self.mode = words[2].lower()
            return 1 if self.mode == b"on" else 0
        if self.mode != b"on":
            if self.mode == b"skip":
                self.mode = b"on"
            return 0
        if cmd in (b"subscribe", b"psubscribe"):
            (self.chans if cmd == b"subscribe" else self.pats).update(names)
            return len(names)
        if cmd in (b"unsubscribe", b"punsubscribe"):
            which = self.chans if cmd == b"unsubscribe" else self.pats
            n = len(names) if names else max(len(which), 1)
            if names:
                which.difference_update(names)
            else:
                which.clear()
            return n
        return 1


def shape(v):
    """A reply's shape: types and counts, values masked."""
    if isinstance(v, dict):
        return ("map", sorted(shape(k) + shape(x) for k, x in v.items()))
    if isinstance(v, (set, frozenset)):
        return ("set", sorted(shape(x) for x in v))
    if isinstance(v, Push):
        return ("push", [shape(x) for x in v])
    if isinstance(v, list):
        return ("array", [shape(x) for x in v])
    if isinstance(v, RespError):
        return ("error",)
    return (type(v).__name__,)


def multiset(v):
    if isinstance(v, dict):
        return sorted(repr(p) for p in v.items())
    if isinstance(v, (list, set)):
        return sorted(repr(x) for x in v)
    return [repr(v)]


def near(a, b, tol):
    """Equal but for integers within tol of each other, at any depth."""
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
        return abs(a - b) <= tol
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(near(x, y, tol) for x, y in zip(a, b))
    return a == b


class Side:
    """One connection (direct or through the proxy) with its pub/sub model."""

    def __init__(self, addr):
        self.conn = Resp(addr, timeout=10)
        self.sub = Sub()

    def send(self, words):
        n = self.sub.replies(words)
        self.conn.send(encode(*words))
        raws = [self.conn.read_raw() for _ in range(n)]
        return raws

    def value(self, raw):
        r = Resp.__new__(Resp)
        r.buf, r.pos, r.hold = raw, 0, None
        return r.read()

    def walk_scan(self, words):
        """SCAN from cursor 0 to its end with the line's other arguments: the keys seen."""
        keys, cursor = set(), b"0"
        for _ in range(100000):
            rep = self.conn.call(words[0], cursor, *words[2:])
            if not isinstance(rep, list) or len(rep) != 2:
                return ("not a cursor reply", rep)
            cursor = rep[0]
            keys.update(rep[1])
            if cursor == b"0":
                return sorted(keys)
        return ("a walk that never ended",)


def compare(words, marks, direct, proxied, d, p):
    """None when the replies agree as the marks allow, else why not."""
    if "differs" in marks:
        return None
    if "refused" in marks:
        return None if isinstance(p.value(proxied[0]), RespError) else "not refused"
    if "scan" in marks:
        a, b = d.walk_scan(words), p.walk_scan(words)
        return None if a == b else "keys %r != %r" % (a[:20], b[:20])
    if len(direct) != len(proxied):
        return "%d replies != %d" % (len(direct), len(proxied))
    for x, y in zip(direct, proxied):
        if "shape" in marks:
            ok = shape(d.value(x)) == shape(p.value(y))
        elif "unordered" in marks:
            ok = multiset(d.value(x)) == multiset(p.value(y)) and x[:1] == y[:1]
        elif "ttl" in marks:
            ok = x[:1] == y[:1] and near(d.value(x), p.value(y), int(marks["ttl"]))
        else:
            ok = x == y
        if not ok:
            return "%r != %r" % (x[:300], y[:300])
    return None


def run(label, direct_addr, proxy_addr, resp3, lines, flush):
    flush()
    d, p = Side(direct_addr), Side(proxy_addr)
    diffs, compared = [], 0
    try:
        if resp3:
            hd, hp = d.conn.call("HELLO", "3"), p.conn.call("HELLO", "3")
            if not isinstance(hd, dict) or shape(hd) != shape(hp) or hp.get(b"proto") != 3:
                fail("%s: HELLO 3: %r through the proxy, %r direct" % (label, hp, hd))
        for lineno, words, marks in lines:
            if os.environ.get("RESP3_TRACE"):
                print(label, lineno, words, flush=True)
            direct = d.send(words) if "scan" not in marks else []
            proxied = p.send(words) if "scan" not in marks else []
            why = compare(words, marks, direct, proxied, d, p)
            compared += 1
            if why is not None:
                diffs.append("%s, line %d %s: %s" % (label, lineno,
                                                     b" ".join(words)[:80].decode("latin-1"),
                                                     why))
    finally:
        d.conn.close()
        p.conn.close()
    return compared, diffs


def body(t):
    lines = []
    with open(COMMANDS, encoding="utf-8") as f:
        for i, text in enumerate(f, 1):
            parsed = parse_line(text)
            if parsed is not None:
                lines.append((i, parsed[0], parsed[1]))
    if len(lines) < 300:
        fail("only %d commands in %s" % (len(lines), COMMANDS))
    redis_exe = t.programs["redis-server"]
    direct, one, *four = start_redises(redis_exe, t.tmp, 6)
    one_port, four_port = free_ports(2)
    config = write_file(os.path.join(t.tmp, "proxy.yml"),
                        pool_yaml("one", one_port, [(one.text, 1, None)], hash="md5",
                                  distribution="ketama", hash_tag='"{}"', timeout=5000) +
                        pool_yaml("four", four_port, [(s.text, 1, None) for s in four],
                                  hash="md5", distribution="ketama", hash_tag='"{}"',
                                  timeout=5000))
    proxy = Proxy(t.proxy, t.tmp, config,
                  [("127.0.0.1", one_port), ("127.0.0.1", four_port)]).start()

    def flush():
        for s in [direct, one] + four:
            s.call("FLUSHALL")
            s.call("SCRIPT", "FLUSH")

    total, diffs = 0, []
    for pool, port in (("one-server pool", one_port), ("four-server pool", four_port)):
        for resp3 in (False, True):
            label = "%s, %s" % (pool, "RESP3" if resp3 else "RESP2")
            n, d = run(label, direct.addr, ("127.0.0.1", port), resp3, lines, flush)
            total += n
            diffs += d
    spread = [s.call("DBSIZE") for s in four]
    proxy.stop()
    if diffs:
        fail("%d of %d replies differ from Redis's:\n  %s" % (len(diffs), total,
                                                               "\n  ".join(diffs)))
    if sum(1 for n in spread if n > 0) < 3:
        fail("the four-server pool's keys were not spread: %r keys per server" % spread)
    marked = sum(1 for _, _, m in lines if m)
    return "%d commands x 4 runs: %d replies compared, 0 differences (%d lines marked)" % (
        len(lines), total, marked)


if __name__ == "__main__":
    run_test(body, programs=("redis-server",))
