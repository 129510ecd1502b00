#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Builds the chash package (the C extension chash._chash) against an installed libchash-dev.

    pip install bindings/python

needs no package index: setuptools (python3-setuptools) builds the extension with the compiler
and the flags pkg-config gives for chash_config (libchash-dev's chash_config.pc; a staged tree
works with PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR). There is deliberately no pyproject.toml:
with one, pip would build in an isolated environment whose setuptools it downloads from PyPI.
The source is the one CMake builds for the python3-chash package (src/_chash.c).
"""
import os
import re
import shlex
import subprocess
import sys

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def pkg_config(*args):
    """pkg-config's words for chash_config, or None when it or the module is missing."""
    try:
        out = subprocess.run(["pkg-config", *args, "chash_config"], check=True, text=True,
                             capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        msg = getattr(e, "stderr", None) or str(e)
        print("setup.py: pkg-config %s chash_config: %s" % (" ".join(args), msg.strip()), file=sys.stderr)
        return None
    return shlex.split(out)


def version():
    """libchash's version (the binding is versioned with it): pkg-config's, else the source tree's."""
    v = pkg_config("--modversion")
    if v:
        return v[0]
    top = os.path.join(HERE, "..", "..", "CMakeLists.txt")
    if os.path.exists(top):
        with open(top) as f:
            m = re.search(r"project\(\s*chash\s+VERSION\s+([0-9.]+)", f.read())
        if m:
            return m.group(1)
    return "0"


cflags = pkg_config("--cflags")
libs = pkg_config("--libs")
if libs is None:
    # No pkg-config file: the library where the compiler finds it by default (/usr, /usr/local).
    print("setup.py: building against -lchash_config -lchash from the default paths "
          "(install libchash-dev, or set PKG_CONFIG_PATH)", file=sys.stderr)
    cflags, libs = [], ["-lchash_config", "-lchash"]

ext = Extension(
    "chash._chash",
    sources=["src/_chash.c"],
    include_dirs=[w[2:] for w in cflags if w.startswith("-I")],
    define_macros=[tuple(w[2:].split("=", 1)) if "=" in w else (w[2:], None)
                   for w in cflags if w.startswith("-D")],
    library_dirs=[w[2:] for w in libs if w.startswith("-L")],
    libraries=[w[2:] for w in libs if w.startswith("-l")],
    extra_link_args=[w for w in libs if not w.startswith(("-L", "-l"))],
)

with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
    long_description = f.read()

setup(
    name="chash",
    version=version(),
    description="Consistent hashing placement tables (libchash): ring, maglev, ketama, "
                "client libraries' rings, twemproxy pools",
    long_description=long_description,
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    packages=["chash"],
    package_data={"chash": ["py.typed", "_chash.pyi"]},
    ext_modules=[ext],
    python_requires=">=3.10",
    zip_safe=False,
)
