#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""
test_report_render.py -- renders `chash report` in headless Chromium and checks that its charts
can be read: no two text labels of a chart overlap, and no label is cut off at the chart's edge.

usage: test_report_render.py PATH/TO/chash

Two reports are laid out in one page and measured in one Chromium start:
  - the default fleet (`--nodes 8`): every registry algorithm and hash, as README shows it;
  - a weighted fleet of 12 nodes with long ids, which makes the weights chart turn its labels.
The test adds a small inline script to its own copy of the page (the report has none). The
script waits for the fonts, then writes, for every <text> of every <svg>, the four corners of its
bounding box (getBBox() through getScreenCTM(), so turned labels keep their true shape) into a
<pre> that `chromium --dump-dom` prints. The geometry is judged here: two labels overlap when
their boxes, as convex quadrilaterals, intersect deeper than TOLERANCE_PX on every separating
axis (the separating axis theorem); a label is cut off when a corner lies outside its <svg>.

Exits 77 (ctest's skip) when no Chromium is installed; scripts/bootstrap installs it.
"""
import html
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Text boxes include the font's ascent and descent, so two lines set a line apart touch; a
# tolerance of one CSS pixel keeps touching boxes apart from overlapping ones.
TOLERANCE_PX = 1.0
CHROMIUM_TIMEOUT_S = 180

MEASURE = r"""
<script>
document.fonts.ready.then(function () {
  var out = [];
  document.querySelectorAll("svg").forEach(function (svg, si) {
    var fig = svg.closest("figure");
    var r = svg.getBoundingClientRect();
    var texts = [];
    svg.querySelectorAll("text").forEach(function (t) {
      var b = t.getBBox(), m = t.getScreenCTM();
      if (b.width === 0 || b.height === 0) return;
      var pts = [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height],
                 [b.x, b.y + b.height]].map(function (p) {
        return [m.a * p[0] + m.c * p[1] + m.e, m.b * p[0] + m.d * p[1] + m.f];
      });
      texts.push({s: t.textContent, q: pts});
    });
    out.push({fig: (fig ? fig.id : "svg") + "/" + si, rect: [r.left, r.top, r.right, r.bottom],
              texts: texts});
  });
  var pre = document.createElement("pre");
  pre.id = "render-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def report(chash, tmp, name, args):
    path = os.path.join(tmp, name)
    p = subprocess.run([chash, "report", "--out", path] + args, capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        fail("chash report %s exited %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()))
    return open(path, encoding="utf-8").read()


def main_part(page):
    m = re.search(r"<main>(.*)</main>", page, re.S)
    if not m:
        fail("no <main> in the report")
    return m.group(1)


def project(quad, axis):
    dots = [p[0] * axis[0] + p[1] * axis[1] for p in quad]
    return min(dots), max(dots)


def overlap_depth(q1, q2):
    """How deep two convex quadrilaterals intersect: the smallest overlap of their projections
    over the edge normals of both (0 when an axis separates them)."""
    depth = math.inf
    for quad in (q1, q2):
        for i in range(4):
            (x1, y1), (x2, y2) = quad[i], quad[(i + 1) % 4]
            nx, ny = y1 - y2, x2 - x1
            norm = math.hypot(nx, ny)
            if norm == 0:
                continue
            axis = (nx / norm, ny / norm)
            a0, a1 = project(q1, axis)
            b0, b1 = project(q2, axis)
            depth = min(depth, min(a1, b1) - max(a0, b0))
            if depth <= 0:
                return 0.0
    return depth


def check_svg(svg, problems):
    texts, (left, top, right, bottom) = svg["texts"], svg["rect"]
    overlaps, cut = [], []
    for i, t in enumerate(texts):
        if any(x < left - TOLERANCE_PX or x > right + TOLERANCE_PX or
               y < top - TOLERANCE_PX or y > bottom + TOLERANCE_PX for x, y in t["q"]):
            cut.append(t["s"])
        for u in texts[i + 1:]:
            d = overlap_depth(t["q"], u["q"])
            if d > TOLERANCE_PX:
                overlaps.append((d, t["s"], u["s"]))
    if overlaps:
        overlaps.sort(reverse=True)
        shown = "; ".join("%r over %r (%.1f px)" % (a, b, d) for d, a, b in overlaps[:6])
        problems.append("%s: %d pairs of labels overlap, e.g. %s"
                        % (svg["fig"], len(overlaps), shown))
    if cut:
        problems.append("%s: %d labels cut off at the edge, e.g. %s"
                        % (svg["fig"], len(cut), ", ".join(repr(s) for s in cut[:6])))
    return len(texts)


def main():
    if len(sys.argv) != 2 or not os.access(sys.argv[1], os.X_OK):
        sys.exit("usage: %s PATH/TO/chash" % sys.argv[0])
    browser = chromium()
    if browser is None:
        print("SKIP: no chromium on PATH (scripts/bootstrap installs Debian's chromium)")
        sys.exit(77)
    chash = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="chash-render-") as tmp:
        # Fewer sample keys than the default keep the sanitizer build quick; the layout does
        # not depend on them.
        first = report(chash, tmp, "default.html", ["--nodes", "8", "--keys", "20000"])
        weighted = ",".join("cache-server-%02d.example.internal:%d" % (i, 1 + i % 4)
                            for i in range(1, 13))
        second = report(chash, tmp, "weighted.html", ["--nodes", weighted, "--keys", "20000"])
        page = first.replace("</main>", "</main>\n<main>%s</main>" % main_part(second), 1)
        page = page.replace("</body>", MEASURE + "</body>", 1)
        path = os.path.join(tmp, "both.html")
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--user-data-dir=" + os.path.join(tmp, "profile"), "--window-size=1400,4000",
               "--virtual-time-budget=10000", "--dump-dom", "file://" + path]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            fail("chromium did not finish in %d s" % CHROMIUM_TIMEOUT_S)
    m = re.search(r'<pre id="render-check">(.*?)</pre>', p.stdout, re.S)
    if p.returncode != 0 or not m:
        fail("chromium exited %d without the measurements; stderr: %s"
             % (p.returncode, p.stderr.strip()[-800:]))
    svgs = json.loads(html.unescape(m.group(1)))
    if len(svgs) < 8:
        fail("expected the charts of two reports (at least 8 <svg>), measured %d" % len(svgs))
    problems = []
    labels = sum(check_svg(svg, problems) for svg in svgs)
    if labels == 0:
        fail("no text labels were measured")
    if problems:
        for msg in problems:
            print("FAIL:", msg, file=sys.stderr)
        sys.exit(1)
    print("ok: %d charts, %d labels, none overlapping or cut off" % (len(svgs), labels))


if __name__ == "__main__":
    main()
