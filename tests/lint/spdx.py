#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every source file of chash carries its license: an SPDX line at its top (LICENSE, NOTICE).

A source file is one of these, found by walking ROOT (the build trees, .git and __pycache__ left
out, so a new file is checked before it is committed), and its line is:

    C sources and headers (.c, .h, .h.in), the linker version script (.map)
        line 1: /* SPDX-License-Identifier: Apache-2.0 */
    Python, shell, Ruby, CMake (CMakeLists.txt, .cmake), Makefile, and any file without an
    extension whose first line is a shebang (scripts/bootstrap, .ci/run, the .deb maintainer
    scripts)
        # SPDX-License-Identifier: Apache-2.0   line 1, or line 2 after a shebang
    Java, JavaScript, Go
        // SPDX-License-Identifier: Apache-2.0  line 1
    PHP
        // SPDX-License-Identifier: Apache-2.0  line 2, after <?php

Everything else is data or documentation and is not checked: YAML configs and fixtures, the
fuzz corpora and dictionary, Markdown, the man page sources (.scd), the templates of installed
data files (packaging/*.in: a unit, pkg-config files, conffiles), images.
tests/kat/hash_vectors.h is generated: its generator (tests/kat/gen_vectors.py) writes the line.

  spdx.py ROOT          list the source files without the line; exit 1 if there is one
  spdx.py --fix ROOT    add the line where it is missing (nothing else in the file changes)
  spdx.py --self-test   the check fails on a tree that lacks the line and passes once mended
"""
import os
import sys
import tempfile

IDENT = "SPDX-License-Identifier: Apache-2.0"
C_LINE = "/* %s */" % IDENT
HASH_LINE = "# %s" % IDENT
SLASH_LINE = "// %s" % IDENT

C_EXT = (".c", ".h", ".h.in", ".map")
HASH_EXT = (".py", ".sh", ".rb", ".cmake")
HASH_NAMES = ("CMakeLists.txt", "Makefile")
SLASH_EXT = (".java", ".js", ".go")

SKIP_DIRS = (".git", "__pycache__")


def first_line(path):
    with open(path, "rb") as fp:
        return fp.readline().decode("utf-8", "replace").rstrip("\r\n")


def style(path):
    """(line, after) for a source file: its SPDX line, and the first line that must stay above
    it (a shebang, <?php), or None; None for a file that is not a source file."""
    name = os.path.basename(path)
    if name.endswith(C_EXT):
        return C_LINE, None
    if name.endswith(SLASH_EXT):
        return SLASH_LINE, None
    if name.endswith(".php"):
        return SLASH_LINE, "<?php"
    first = None
    if name.endswith(HASH_EXT) or name in HASH_NAMES or "." not in name:
        first = first_line(path)
        if "." not in name and name not in HASH_NAMES and not first.startswith("#!"):
            return None  # data without an extension: a fuzz corpus entry
        return HASH_LINE, ("#!" if first.startswith("#!") else None)
    return None


def sources(root):
    """The source files under root, as paths relative to it, sorted."""
    out = []
    for d, dirs, files in os.walk(root):
        rel_d = os.path.relpath(d, root)
        keep = []
        for sub in dirs:
            full = os.path.join(d, sub)
            if sub in SKIP_DIRS or (rel_d == "." and sub == "build"):
                continue
            if os.path.exists(os.path.join(full, "CMakeCache.txt")):
                continue  # a build tree anywhere
            keep.append(sub)
        dirs[:] = keep
        for f in files:
            path = os.path.join(d, f)
            if os.path.isfile(path) and not os.path.islink(path) and style(path):
                out.append(os.path.normpath(os.path.relpath(path, root)))
    return sorted(out)


def has_line(path):
    line, after = style(path)
    with open(path, "rb") as fp:
        lines = fp.read().decode("utf-8", "replace").splitlines()
    if line == HASH_LINE and lines[:1] == [line] and lines[1:2] and lines[1].startswith("#!"):
        return False  # above a shebang, which then no longer works
    at = 1 if after and lines and lines[0].startswith(after) else 0
    return len(lines) > at and lines[at] == line


def check(root):
    errors = []
    for rel in sources(root):
        if not has_line(os.path.join(root, rel)):
            line, after = style(os.path.join(root, rel))
            where = "line 2, after the %s line" % after if after else "line 1"
            errors.append("%s: no '%s' at %s" % (rel, line, where))
    return errors


def fix(root):
    """Adds the line to every source file that lacks it; returns the files changed."""
    changed = []
    for rel in sources(root):
        path = os.path.join(root, rel)
        if has_line(path):
            continue
        line, after = style(path)
        with open(path, "rb") as fp:
            data = fp.read()
        nl = b"\r\n" if b"\r\n" in data.split(b"\n", 1)[0] + b"\n" else b"\n"
        ins = line.encode() + nl
        if data.startswith(ins + b"#!"):  # the line above the shebang: swap the two
            rest = data[len(ins):]
            cut = rest.find(b"\n") + 1 or len(rest)
            data = rest[:cut] + (b"" if rest[:cut].endswith(b"\n") else nl) + ins + rest[cut:]
        elif after and data.startswith(after.encode()):
            cut = data.find(b"\n") + 1
            if cut == 0:  # a file that is one line without a newline
                data, cut = data + nl, len(data) + len(nl)
            data = data[:cut] + ins + data[cut:]
        else:
            data = ins + data
        st = os.stat(path)
        with open(path, "wb") as fp:
            fp.write(data)
        os.chmod(path, st.st_mode)
        changed.append(rel)
    return changed


def self_test():
    """A tree whose sources lack the line (or carry it in the wrong place) must fail, naming
    each; the tree mended by --fix must pass, and --fix must keep shebangs and <?php first."""
    bad = {
        "src/a.c": "/*\n * a.c\n */\nint a;\n",
        "include/b.h": "#ifndef B_H\n#define B_H\n#endif\n",
        "include/v.h.in": "/* @VERSION@ */\n",
        "tests/t.py": "#!/usr/bin/python3\n\"\"\"doc\"\"\"\n",
        "tests/late.py": "#!/usr/bin/python3\nimport os\n# %s\n" % IDENT,  # not line 2
        "tests/above.py": "# %s\n#!/usr/bin/python3\n" % IDENT,  # above the shebang
        "tests/lib.py": "\"\"\"no shebang\"\"\"\n",
        "tools/run.sh": "#!/bin/sh\necho hi\n",
        "scripts/boot": "#!/usr/bin/env bash\ntrue\n",
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\n",
        "tests/x.cmake": "set(X 1)\n",
        "Makefile": "all:\n\ttrue\n",
        "o/R.java": "class R {}\n",
        "o/r.js": "// r.js\n",
        "o/r.go": "package main\n",
        "o/r.rb": "# r.rb\n",
        "o/r.php": "<?php\necho 1;\n",
        "src/x.map": "{ global: ch_*; local: *; };\n",
        "src/crlf.c": "int c;\r\n",
    }
    data = {  # not source: never flagged
        "fuzz/corpus/mc/req_get": "get a\r\n",
        "tests/fixtures/a.yml": "pool:\n",
        "docs/A.md": "# A\n",
        "packaging/x.service.in": "[Unit]\n",
        "build/gen.c": "int g;\n",
        "out/CMakeCache.txt": "", "out/gen.c": "int g;\n",
        "src/__pycache__/m.py": "",
    }
    good_ok = {"src/ok.c": C_LINE + "\nint ok;\n",
               "tests/ok.py": "#!/usr/bin/python3\n" + HASH_LINE + "\n",
               "tests/ok2.py": HASH_LINE + "\n\"\"\"doc\"\"\"\n"}
    with tempfile.TemporaryDirectory() as d:
        for name, text in {**bad, **data, **good_ok}.items():
            os.makedirs(os.path.dirname(os.path.join(d, name)) or d, exist_ok=True)
            with open(os.path.join(d, name), "w", newline="") as fp:
                fp.write(text)
        errs = check(d)
        flagged = sorted(e.split(":", 1)[0] for e in errs)
        if flagged != sorted(bad):
            print("self-test: flagged %r, expected %r" % (flagged, sorted(bad)))
            return 1
        changed = fix(d)
        if sorted(changed) != sorted(bad):
            print("self-test: --fix changed %r, expected %r" % (sorted(changed), sorted(bad)))
            return 1
        errs = check(d)
        if errs:
            print("self-test: the mended tree fails: %r" % errs)
            return 1

        def read(name):
            with open(os.path.join(d, name), newline="") as fp:
                return fp.read()
        want = {
            "src/a.c": C_LINE + "\n" + bad["src/a.c"],
            "tests/t.py": "#!/usr/bin/python3\n" + HASH_LINE + "\n\"\"\"doc\"\"\"\n",
            "tests/above.py": "#!/usr/bin/python3\n" + HASH_LINE + "\n",
            "o/r.php": "<?php\n" + SLASH_LINE + "\necho 1;\n",
            "src/crlf.c": C_LINE + "\r\nint c;\r\n",
            "fuzz/corpus/mc/req_get": data["fuzz/corpus/mc/req_get"],
        }
        for name, text in want.items():
            if read(name) != text:
                print("self-test: --fix wrote %s as %r, expected %r" % (name, read(name), text))
                return 1
    print("self-test: the check names every source file without the line (C, headers, a "
          "template, the map, Python with and without a shebang, shell, CMake, Makefile, Java, "
          "JavaScript, Go, Ruby, PHP), the line misplaced below or above a shebang, and no data "
          "file or build tree; --fix mends them and the mended tree passes")
    return 0


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        return self_test()
    if len(args) == 2 and args[0] == "--fix":
        for rel in fix(args[1]):
            print("spdx: added the line to " + rel)
        return 0
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: spdx.py ROOT | --fix ROOT | --self-test", file=sys.stderr)
        return 2
    errors = check(args[0])
    for e in errors:
        print("spdx: " + e)
    if errors:
        print("spdx: %d of %d source files lack their license line; add it (tests/lint/spdx.py "
              "--fix ROOT does)" % (len(errors), len(sources(args[0]))))
        return 1
    print("spdx: every one of the %d source files carries '%s'" % (len(sources(args[0])), IDENT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
