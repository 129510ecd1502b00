#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# test_report.sh CHASH — checks `chash report`: it writes one self-contained HTML file whose
# markup parses, whose <svg> elements are all closed, that references nothing outside itself, that
# names every registry algorithm and hash, and whose four charts each have a caption.
# The algorithm and hash names are read from include/chash.h, so a new registry entry is checked
# without editing this test.
set -eu

if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 PATH-TO-chash (got '${1:-}')" >&2
    exit 2
fi
chash=$1
header="$(cd "$(dirname "$0")/../.." && pwd)/include/chash.h"
[ -r "$header" ] || { echo "FAIL: cannot read $header" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

if ! "$chash" report --nodes 8 --out "$tmp/report.html" >"$tmp/stdout" 2>"$tmp/stderr"; then
    echo "FAIL: chash report exited with an error" >&2
    cat "$tmp/stderr" >&2
    exit 1
fi
[ -s "$tmp/report.html" ] || { echo "FAIL: $tmp/report.html missing or empty" >&2; exit 1; }

exec /usr/bin/python3 - "$tmp/report.html" "$header" <<'EOF'
import re
import sys
from html.parser import HTMLParser

page_path, header_path = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def registry(list_name):
    """The names of an X-macro registry list in chash.h: X(ID, name, bits, value) for hashes,
    X(ID, ident, "name", value) for algorithms."""
    text = open(header_path, encoding="utf-8").read()
    m = re.search(r"#define " + list_name + r"\(X\)(.*?)\n\n", text, re.S)
    found = re.findall(r'X\(\s*\w+\s*,\s*(?:\w+\s*,\s*"([^"]+)"|(\w+))', m.group(1)) if m else []
    names = [a or b for a, b in found]
    if not names:
        sys.exit("FAIL: no entries found for %s in %s" % (list_name, header_path))
    return names


algos, hashes = registry("CH_ALGO_LIST"), registry("CH_HASH_LIST")
page = open(page_path, encoding="utf-8").read()


class Page(HTMLParser):
    """Keeps the open <svg> elements, the figures with their captions, and the visible text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.svg_depth = 0
        self.svgs = 0
        self.errors = []
        self.figures = []  # per <figure>: [caption text or None]
        self.in_caption = False
        self.text = []

    def handle_starttag(self, tag, attrs):
        if tag == "svg":
            self.svg_depth += 1
            self.svgs += 1
        elif tag == "figure":
            self.figures.append(None)
        elif tag == "figcaption":
            if not self.figures:
                self.errors.append("<figcaption> outside a <figure>")
            else:
                self.figures[-1] = ""
                self.in_caption = True

    def handle_endtag(self, tag):
        if tag == "svg":
            if self.svg_depth == 0:
                self.errors.append("</svg> without an open <svg>")
            else:
                self.svg_depth -= 1
        elif tag == "figure" and self.svg_depth:
            self.errors.append("</figure> inside an open <svg>")
        elif tag == "figcaption":
            self.in_caption = False

    def handle_data(self, data):
        self.text.append(data)
        if self.in_caption:
            self.figures[-1] += data


p = Page()
try:
    p.feed(page)
    p.close()
except Exception as e:  # html.parser raises only on badly broken input
    sys.exit("FAIL: html.parser could not parse the report: %s" % e)

check(page.lstrip().lower().startswith("<!doctype html>"), "the page starts with <!DOCTYPE html>")
check(page.rstrip().endswith("</html>"), "the page ends with </html>")
check(not p.errors, "well-formed: %s" % "; ".join(p.errors))
check(p.svgs >= 4, "at least one <svg> per chart (found %d)" % p.svgs)
check(page.count("<svg") == page.count("</svg>"), "every <svg> is closed")
check(p.svg_depth == 0, "no <svg> left open at the end")

# Self-contained: no URL but the SVG namespace, no script, no stylesheet or font loaded from
# elsewhere.
urls = set(re.findall(r"https?://[^\s\"'<>)]*", page, re.I))
check(urls <= {"http://www.w3.org/2000/svg"}, "no external references (found %s)" % sorted(urls))
for needle in ("<script", "<link", "<img", "<iframe", "@import", "url(", " src="):
    check(needle not in page.lower(), "no %r in the page" % needle)

visible = " ".join(p.text)
for name in algos:
    check(re.search(r"\b%s\b" % re.escape(name), visible), "algorithm %r is named" % name)
for name in hashes:
    check(re.search(r"\b%s\b" % re.escape(name), visible), "hash %r is named" % name)

check(len(p.figures) == 4, "four charts (found %d <figure>)" % len(p.figures))
for i, cap in enumerate(p.figures, 1):
    check(cap is not None and len(cap.strip()) >= 80, "chart %d has a caption" % i)
    if cap:
        check("N = " in cap, "chart %d's caption states N" % i)
        check(any(h in cap for h in hashes), "chart %d's caption names the hash" % i)
        check(("keys" in cap and "seed" in cap) or "do not enter" in cap,
              "chart %d's caption states the sample keys and seed" % i)

if failures:
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    sys.exit(1)
print("ok: report of %d bytes, %d charts, %d svg; %d algorithms and %d hashes named"
      % (len(page), len(p.figures), p.svgs, len(algos), len(hashes)))
EOF
