#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""test_mc_real.py — the memcached reply scanner (proxy/proto/mc.h) against a REAL memcached.

    test_mc_real.py MC_FRAME

Starts `memcached` on a free loopback port, sends it a scripted session of text and meta
commands (pipelined, one write), collects every byte it answers, stops it by pid, and runs the
MC_FRAME driver (tests/unit/mc_frame.c) on the bytes sent and received. The driver parses the
requests and cuts the server's stream into one reply per request; this script checks that the
framing and classification are exactly the expected ones, written here from memcached's
doc/protocol.txt (so the expected values do not come from the parser), and that no byte is left
over. Without memcached: exit 77 (skip), or 1 with a clear message when CI is set.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

# (request bytes, expected driver line). Keys and values are chosen so that each answer follows
# from protocol.txt and the session's own history on a fresh server. Every quiet ("q") request
# is followed by "mn", as clients end a quiet pipeline: MN is no reply to mg/ms/md/ma, so the
# driver can tell a reply the server left out from one it sent.
SESSION = [
    (b"set foo 5 0 3\r\nbar\r\n", "set STORED ok"),
    (b"get foo\r\n", "get VALUES hit keys=foo"),
    (b"get nope\r\n", "get END miss"),
    (b"get foo nope foo\r\n", "get VALUES hit keys=foo,foo"),
    (b"gets foo\r\n", "gets VALUES hit keys=foo"),
    (b"add foo 0 0 1\r\nx\r\n", "add NOT_STORED not_stored"),
    (b"replace nope 0 0 1\r\nx\r\n", "replace NOT_STORED not_stored"),
    (b"append foo 0 0 2\r\n!!\r\n", "append STORED ok"),
    (b"prepend foo 0 0 1\r\n<\r\n", "prepend STORED ok"),
    (b"cas foo 0 0 1 1\r\nx\r\n", "cas EXISTS not_stored"),       # foo changed since cas 1
    (b"cas nope 0 0 1 1\r\nx\r\n", "cas NOT_FOUND miss"),
    (b"set n 0 0 2\r\n10\r\n", "set STORED ok"),
    (b"incr n 5\r\n", "incr NUMBER integer"),
    (b"decr n 100\r\n", "decr NUMBER integer"),
    (b"incr nope 1\r\n", "incr NOT_FOUND miss"),
    (b"incr foo 1\r\n", "incr CLIENT_ERROR error"),                # non-numeric value
    (b"touch foo 100\r\n", "touch TOUCHED ok"),
    (b"touch nope 10\r\n", "touch NOT_FOUND miss"),
    (b"gat 100 foo nope\r\n", "gat VALUES hit keys=foo"),
    (b"gats 100 nope\r\n", "gats END miss"),
    (b"delete n\r\n", "delete DELETED ok"),
    (b"delete n\r\n", "delete NOT_FOUND miss"),
    (b"set q 0 0 1 noreply\r\nz\r\n", "set noreply"),
    (b"get q\r\n", "get VALUES hit keys=q"),
    (b"delete q noreply\r\n", "delete noreply"),
    (b"get q foo\r\n", "get VALUES hit keys=foo"),
    (b"version\r\n", "version VERSION ok"),
    (b"verbosity 1\r\n", "verbosity OK ok"),
    (b"ms mk 2 T0 F7\r\nhi\r\n", "ms HD ok"),
    (b"mg mk v f k O9\r\n", "mg VA hit"),
    (b"mg mk\r\n", "mg HD hit"),
    (b"mg nope v\r\n", "mg EN miss"),
    (b"mg nope v q\r\n", "mg suppressed"),                         # q hides EN
    (b"mn\r\n", "mn MN ok"),
    (b"mg mk v q\r\n", "mg VA hit"),                               # a hit is sent
    (b"mn\r\n", "mn MN ok"),
    (b"mg mk q k\r\n", "mg HD hit"),
    (b"mn\r\n", "mn MN ok"),
    (b"mn\r\n", "mn MN ok"),
    (b"ms mk 1 q\r\nz\r\n", "ms suppressed"),                      # q hides HD
    (b"mn\r\n", "mn MN ok"),
    (b"ms mk 1 ME q\r\nz\r\n", "ms NS not_stored"),                # add mode, item exists
    (b"mn\r\n", "mn MN ok"),
    (b"ms mk 1 C1 q\r\nz\r\n", "ms EX not_stored"),                # stale cas
    (b"mn\r\n", "mn MN ok"),
    (b"ms nope 1 MR\r\nz\r\n", "ms NS not_stored"),                # replace mode, no item
    (b"md nope q\r\n", "md NF miss"),                              # NF is sent
    (b"mn\r\n", "mn MN ok"),
    (b"md mk q\r\n", "md suppressed"),                             # q hides HD
    (b"mn\r\n", "mn MN ok"),
    (b"md mk\r\n", "md NF miss"),
    (b"mn\r\n", "mn MN ok"),
    (b"ms cnt 1\r\n5\r\n", "ms HD ok"),
    (b"ma cnt\r\n", "ma HD ok"),
    (b"ma cnt v MD D2\r\n", "ma VA hit"),
    (b"ma cnt q\r\n", "ma suppressed"),                            # q hides HD
    (b"mn\r\n", "mn MN ok"),
    (b"ma cnt q v\r\n", "ma suppressed"),                          # ... and the VA of a success
    (b"mn\r\n", "mn MN ok"),
    (b"ma nope\r\n", "ma NF miss"),
    (b"ma nope q\r\n", "ma NF miss"),
    (b"mn\r\n", "mn MN ok"),
    (b"ma nope2 N0 J7 v\r\n", "ma VA hit"),                        # created on a miss
    (b"ma foo\r\n", "ma CLIENT_ERROR error"),                      # non-numeric value
    (b"mn\r\n", "mn MN ok"),
    (b"me foo\r\n", "me ME hit"),
    (b"me nope\r\n", "me EN miss"),
    (b"ms Zm9v 3 b\r\nbaz\r\n", "ms HD ok"),                       # base64 of "foo"
    (b"get foo\r\n", "get VALUES hit keys=foo"),                   # the same item
    (b"mg Zm9v b v\r\n", "mg VA hit"),
    (b"mg Zm9vYmFy b v\r\n", "mg EN miss"),                        # "foobar": absent
    (b"set big 0 0 2000\r\n" + b"x" * 2000 + b"\r\n", "set STORED ok"),
    (b"get big foo big\r\n", "get VALUES hit keys=big,foo,big"),
    (b"mn\r\n", "mn MN ok"),
    # Requests the parser refuses (the proxy answers CLIENT_ERROR and keeps the connection): the
    # server too answers each with one error line, and the stream stays in step, so the parser
    # skips exactly what memcached skips. The server's words are memcached 1.6's. Left out,
    # where memcached 1.6.18 itself differs from its later proto_text.c and from the parser: a
    # malformed text storage line (1.6.18 reads the data block as a command line; the parser
    # skips it, as current memcached does) and "set k 0 0 -1" (1.6.18 then loses the next line).
    (b"set k 0 0 2\r\nabc\r\n", "refused[bad data chunk] CLIENT_ERROR bad data chunk"),
    (b"", "unknown ERROR error"),  # the "\n" left of "abc\r\n" after 2 + 2 bytes: a line
    (b"set k 0 0 2000000\r\n" + b"y" * 2000000 + b"\r\n",
     "refused[object too large for cache] SERVER_ERROR object too large for cache"),
    (b"get " + b"a" * 251 + b"\r\n", "refused[key too long] CLIENT_ERROR bad command line format"),
    (b"incr n abc\r\n",
     "refused[invalid numeric delta argument] CLIENT_ERROR invalid numeric delta argument"),
    (b"touch k abc\r\n", "refused[invalid exptime argument] CLIENT_ERROR invalid exptime argument"),
    (b"delete k 5\r\n", "refused[bad command line format.  Usage: delete <key> [noreply]] "
     "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]"),
    (b"mg k zz\r\n", "refused[invalid flag] CLIENT_ERROR invalid flag"),
    (b"mg k Tx\r\n", "refused[bad token in command line format] "
     "CLIENT_ERROR bad token in command line format"),
    (b"mg k O" + b"1" * 33 + b"\r\n", "refused[opaque token too long] CLIENT_ERROR opaque token too long"),
    (b"ms k 1 Fx\r\nz\r\n", "refused[bad token in command line format] "
     "CLIENT_ERROR bad command line format"),
    (b"ms k 1 MX\r\nz\r\n", "refused[invalid mode for ms M token] "
     "CLIENT_ERROR invalid mode for ms M token"),
    (b"mg Zm9 b\r\n", "refused[error decoding key] CLIENT_ERROR error decoding key"),
    (b"bogus a b\r\n", "unknown ERROR error"),
    (b"get foo\r\n", "get VALUES hit keys=foo"),
    (b"mn\r\n", "mn MN ok"),
]


def fail(msg):
    print("test_mc_real: " + msg, file=sys.stderr)
    sys.exit(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    if len(sys.argv) != 2:
        fail("usage: test_mc_real.py MC_FRAME")
    driver = sys.argv[1]
    binary = shutil.which("memcached") or ("/usr/bin/memcached" if os.path.exists("/usr/bin/memcached") else None)
    if not binary:
        msg = "memcached not found (Debian: apt-get install memcached, or scripts/bootstrap)"
        if os.environ.get("CI"):
            fail(msg)
        print("test_mc_real: skipped: " + msg, file=sys.stderr)
        sys.exit(77)

    port = free_port()
    args = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "1", "-m", "16"]
    if os.geteuid() == 0:
        args += ["-u", "nobody"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        sock = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                fail("memcached exited: " + proc.stderr.read().decode(errors="replace"))
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        if sock is None:
            fail("memcached did not accept connections on port %d within 10 s" % port)

        sent = b"".join(req for req, _ in SESSION)
        sock.sendall(sent)
        # The session ends with "mn": its "MN\r\n" is the last thing the server sends.
        got = b""
        sock.settimeout(0.5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                if got.endswith(b"MN\r\n"):
                    break
                continue
            if not chunk:
                break
            got += chunk
        sock.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    with tempfile.TemporaryDirectory() as tmp:
        qpath = os.path.join(tmp, "requests")
        rpath = os.path.join(tmp, "replies")
        with open(qpath, "wb") as f:
            f.write(sent)
        with open(rpath, "wb") as f:
            f.write(got)
        res = subprocess.run([driver, qpath, rpath], capture_output=True, text=True, timeout=30)
    lines = res.stdout.splitlines()
    want = [line for _, line in SESSION] + ["end %d %d" % (len(got), len(got))]
    bad = 0
    for i in range(max(len(lines), len(want))):
        a = lines[i] if i < len(lines) else "(none)"
        b = want[i] if i < len(want) else "(none)"
        if a != b:
            req = SESSION[i][0][:60] if i < len(SESSION) else b""
            print("request %d %r: framed as %r, expected %r" % (i, req, a, b), file=sys.stderr)
            bad += 1
    if res.returncode != 0 or bad:
        print("server bytes: %r" % got[:4000], file=sys.stderr)
        print("driver stderr: " + res.stderr, file=sys.stderr)
        fail("%d of %d requests framed wrongly (driver exit %d)" % (bad, len(SESSION), res.returncode))
    print("test_mc_real: %d requests, %d reply bytes framed as expected" % (len(SESSION), len(got)))
    print("%d passed, 0 failed" % len(SESSION))


if __name__ == "__main__":
    main()
