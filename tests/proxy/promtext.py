# SPDX-License-Identifier: Apache-2.0
"""The metrics endpoint of chash-proxy, read strictly: raw HTTP/1.0 to the port, and
Prometheus' text exposition format (0.0.4) parsed with a failure on any departure from it
(HELP/TYPE per family, contiguous samples, escapes, histograms cumulative to +Inf, chash_proxy_
prefixes but for the client libraries' process_* families, counters ending in _total); and
Prometheus' own linter, `promtool check metrics`, on the same text. Shared by test_metrics.py,
test_promtool.py and test_threads.py.
"""
import math
import os
import re
import socket
import subprocess

from proxyharness import fail, find_program, log, soft_fail

# The families Prometheus' client libraries export for the process (client_golang's process
# collector), which the proxy exports under the same names, unprefixed.
PROCESS_FAMILIES = {"process_cpu_seconds_total": "counter", "process_open_fds": "gauge",
                    "process_max_fds": "gauge", "process_virtual_memory_bytes": "gauge",
                    "process_resident_memory_bytes": "gauge",
                    "process_start_time_seconds": "gauge"}

HTTP_TIMEOUT = 10.0

# ---------------------------------------------------------------------------------------------
# HTTP.


def http(port, raw):
    """Sends raw bytes to the metrics port; returns everything read until the server closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=HTTP_TIMEOUT)
    s.settimeout(HTTP_TIMEOUT)
    data = b""
    try:
        s.sendall(raw)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
    except (ConnectionResetError, BrokenPipeError):
        return data
    finally:
        s.close()


def parse_response(data, head=False):
    """(status code, {lower header: value}, body); fails on a malformed response. A response to
    HEAD has the Content-Length of the GET's body and no body."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        fail("HTTP response without an end of headers: %r" % data[:300])
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"^HTTP/1\.[01] (\d{3}) [^\r\n]+$", lines[0])
    if not m:
        fail("bad HTTP status line %r" % lines[0])
    headers = {}
    for line in lines[1:]:
        k, colon, v = line.partition(":")
        if not colon:
            fail("bad HTTP header line %r" % line)
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers and not head and int(headers["content-length"]) != len(body):
        fail("Content-Length %s, body of %d bytes" % (headers["content-length"], len(body)))
    return int(m.group(1)), headers, body


def get(port, path, method="GET", host=None):
    """One request; Host is the address scraped (127.0.0.1:PORT) unless given."""
    host = host or "127.0.0.1:%d" % port
    return parse_response(http(port, ("%s %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: t\r\n\r\n" %
                                      (method, path, host)).encode()), head=method == "HEAD")


# ---------------------------------------------------------------------------------------------
# The text exposition format, strictly.

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
SAMPLE = re.compile(r"^(%s)(\{(.*)\})? (\S+)( -?\d+)?$" % NAME)
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


def parse_labels(text, line):
    """{name: value} of a label set's inside, unescaping \\\\ \\" \\n; fails on anything else."""
    out, i = {}, 0
    while i < len(text):
        m = re.compile(LABEL_NAME).match(text, i)
        if not m or text[m.end():m.end() + 2] != '="':
            fail("bad label at %r in line %r" % (text[i:], line))
        name, i = m.group(0), m.end() + 2
        val = []
        while True:
            if i >= len(text):
                fail("unterminated label value in line %r" % line)
            ch = text[i]
            if ch == "\\":
                esc = text[i + 1:i + 2]
                if esc not in ("\\", '"', "n"):
                    fail("bad escape \\%s in line %r" % (esc, line))
                val.append("\n" if esc == "n" else esc)
                i += 2
            elif ch == '"':
                i += 1
                break
            elif ch == "\n":
                fail("raw line feed in a label value: %r" % line)
            else:
                val.append(ch)
                i += 1
        if name in out:
            fail("label %s twice in line %r" % (name, line))
        out[name] = "".join(val)
        if i < len(text):
            if text[i] != ",":
                fail("expected ',' at %r in line %r" % (text[i:], line))
            i += 1
    return out


def parse_value(s, line):
    if s in ("+Inf", "-Inf", "NaN"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.match(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$", s):
        fail("bad sample value %r in line %r" % (s, line))
    return float(s)


def parse_exposition(text):
    """{family: {"type", "help", "samples": [(name, labels dict, value)]}}; fails on any
    departure from the format."""
    if not text.endswith("\n"):
        fail("exposition does not end with a line feed")
    fams, order, seen_series = {}, [], set()
    current = None
    for line in text[:-1].split("\n"):
        if line.startswith("#"):
            m = re.match(r"^# (HELP|TYPE) (%s) (.*)$" % NAME, line)
            if not m:
                if re.match(r"^# (HELP|TYPE)", line):
                    fail("bad HELP/TYPE line %r" % line)
                continue                           # a plain comment
            kind, name, rest = m.groups()
            f = fams.setdefault(name, {"type": None, "help": None, "samples": []})
            if f["samples"]:
                fail("%s after samples of %s" % (kind, name))
            if kind == "HELP":
                if f["help"] is not None:
                    fail("two HELP lines for %s" % name)
                if not rest:
                    fail("empty HELP for %s" % name)
                f["help"] = rest
            else:
                if f["type"] is not None:
                    fail("two TYPE lines for %s" % name)
                if rest not in TYPES:
                    fail("bad TYPE %r for %s" % (rest, name))
                f["type"] = rest
            if name not in order:
                order.append(name)
            current = name
            continue
        if not line:
            fail("empty line in the exposition")
        m = SAMPLE.match(line)
        if not m:
            fail("line is neither a comment nor a sample: %r" % line)
        sname, _, ltext, vtext, _ts = m.groups()
        labels = parse_labels(ltext, line) if ltext else {}
        value = parse_value(vtext, line)
        fam = sname
        if sname not in fams:
            for suffix in ("_bucket", "_sum", "_count"):
                base = sname[:-len(suffix)]
                if sname.endswith(suffix) and fams.get(base, {}).get("type") == "histogram":
                    fam = base
        if fam not in fams:
            fail("sample %s without HELP/TYPE" % sname)
        if fam != current:
            fail("samples of %s are not contiguous (after %s)" % (fam, current))
        f = fams[fam]
        if f["type"] is None or f["help"] is None:
            fail("family %s lacks HELP or TYPE" % fam)
        if f["type"] == "histogram" and sname == fam:
            fail("histogram %s has a bare sample" % fam)
        key = (sname, tuple(sorted(labels.items())))
        if key in seen_series:
            fail("series twice: %r" % line)
        seen_series.add(key)
        f["samples"].append((sname, labels, value))
    for name, f in fams.items():
        if f["type"] is None or f["help"] is None:
            fail("family %s lacks HELP or TYPE" % name)
        if name in PROCESS_FAMILIES:
            if f["type"] != PROCESS_FAMILIES[name]:
                fail("family %s is a %s, the client libraries' is a %s" % (
                    name, f["type"], PROCESS_FAMILIES[name]))
        elif not name.startswith("chash_proxy_"):
            fail("family %s is not prefixed chash_proxy_" % name)
        if f["type"] == "counter" and not name.endswith("_total"):
            fail("counter %s does not end in _total" % name)
        if f["type"] == "histogram":
            check_histogram(name, f["samples"])
    return fams


def check_histogram(name, samples):
    groups = {}
    for sname, labels, value in samples:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        g = groups.setdefault(rest, {"buckets": [], "sum": None, "count": None})
        if sname == name + "_bucket":
            if "le" not in labels:
                fail("%s bucket without le" % name)
            g["buckets"].append((parse_value(labels["le"], labels["le"]), value))
        elif sname == name + "_sum":
            g["sum"] = value
        elif sname == name + "_count":
            g["count"] = value
    for rest, g in groups.items():
        b = g["buckets"]
        if not b or g["sum"] is None or g["count"] is None:
            fail("histogram %s%r lacks buckets, _sum or _count" % (name, rest))
        les = [le for le, _ in b]
        if les != sorted(les) or len(set(les)) != len(les) or les[-1] != math.inf:
            fail("histogram %s%r: le not ascending to +Inf: %r" % (name, rest, les))
        counts = [c for _, c in b]
        if any(x > y for x, y in zip(counts, counts[1:])):
            fail("histogram %s%r buckets not cumulative: %r" % (name, rest, counts))
        if counts[-1] != g["count"]:
            fail("histogram %s%r: +Inf bucket %r, _count %r" % (name, rest, counts[-1],
                                                                 g["count"]))
        if g["sum"] < 0:
            fail("histogram %s%r: negative _sum" % (name, rest))


def value(fams, family, sample=None, **labels):
    """The value of the one sample of family (or its sample name) with these labels."""
    f = fams.get(family)
    if f is None:
        fail("no family %s in the scrape" % family)
    sample = sample or family
    hits = [v for n, lab, v in f["samples"]
            if n == sample and all(lab.get(k) == str(x) for k, x in labels.items())]
    if len(hits) != 1:
        fail("%d samples of %s%r" % (len(hits), sample, labels))
    return hits[0]


def scrape(port, lint=None):
    """The families of one scrape, parsed strictly. lint: a name for the scrape, which is then
    also checked with promtool (promtool_check)."""
    code, headers, body = get(port, "/metrics")
    if code != 200:
        fail("GET /metrics answered %d" % code)
    if headers.get("content-type") != "text/plain; version=0.0.4":
        soft_fail("Content-Type %r" % headers.get("content-type"))
    text = body.decode("utf-8")
    if lint is not None:
        promtool_check(text, lint)
    return parse_exposition(text)


def promtool():
    """promtool's path (Debian's prometheus package), or None: then the caller skips its checks
    saying so, or fails where CI is set (scripts/bootstrap installs it)."""
    path = find_program("promtool")
    if path is None and os.environ.get("CI"):
        fail("promtool not found (Debian: apt-get install prometheus; scripts/bootstrap "
             "installs it)")
    return path


_promtool_skip_said = []


def promtool_check(text, what):
    """`promtool check metrics` on an exposition: a soft failure with each problem it names
    (a unit not in base units, a counter not named _total, a non-counter named _total, ...)."""
    exe = promtool()
    if exe is None:
        if not _promtool_skip_said:
            log("promtool checks skipped: promtool not found (Debian: prometheus)")
            _promtool_skip_said.append(True)
        return
    r = subprocess.run([exe, "check", "metrics"], input=text.encode(), capture_output=True,
                       timeout=60)
    out = (r.stdout + r.stderr).decode("utf-8", "replace").strip()
    if r.returncode != 0 or out:
        soft_fail("promtool check metrics on the %s scrape: exit %d: %s" % (what, r.returncode,
                                                                          out[:2000]))


def total(fams, family, **labels):
    """The sum of family's samples (its own name) whose labels include these."""
    f = fams.get(family)
    if f is None:
        fail("no family %s in the scrape" % family)
    return sum(v for n, lab, v in f["samples"]
               if n == family and all(lab.get(k) == str(x) for k, x in labels.items()))
