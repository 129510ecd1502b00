#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install_build (the fixture of install_smoke and install_packages): `make deb` with its build
# directory in WORK, kept between runs so that a rerun rebuilds only what changed: a plain
# (unsanitized) release build for /usr and CPack's Debian packages. The build's output goes to
# WORK/build.log, printed when the build fails.
set -euo pipefail
src=$1 work=$2
mkdir -p "$work"
rm -rf "$work/build/packages"
# The make that runs ctest (make test) exports its MAKEFLAGS; this make is not its child job.
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$src" deb DEB="$work/build" JOBS=2 >"$work/build.log" 2>&1; then
    cat "$work/build.log" >&2
    echo "install_build: make deb failed" >&2
    exit 1
fi
ls "$work/build/packages"/*.deb
