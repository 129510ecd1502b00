#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# version_agree: one version source. The project() version of CMakeLists.txt, read here from the
# file itself, is what ch_version() returns, what chash_version.h's CH_VERSION_STRING and
# CH_VERSION_MAJOR/MINOR/PATCH say, what `chash --version`/`-V` and `chash-proxy --version`/`-V`
# print, and what chash-proxy reports to clients (memcached `version`, Redis INFO is checked by
# the proxy tests).
set -euo pipefail
src=$1 print_version=$2 chash=$3 proxy=$4
. "$src/tests/install/common.sh"
v=$(project_version "$src")
[[ "$v" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "project(chash VERSION ...) in CMakeLists.txt is '$v'"
[ "$("$print_version")" = "$v $v $v" ] || fail "ch_version() CH_VERSION_STRING CH_VERSION_*: $("$print_version"), project $v"
for flag in --version -V; do
    [ "$("$chash" $flag)" = "chash $v" ] || fail "chash $flag: $("$chash" $flag), project $v"
    [ "$("$proxy" $flag)" = "This is chash-proxy-$v" ] || fail "chash-proxy $flag: $("$proxy" $flag), project $v"
done
grep -q "^#define CH_VERSION_[A-Z]* [0-9]" "$src/include/chash.h" &&
    fail "include/chash.h defines a version of its own; chash_version.h is generated from CMakeLists.txt"
echo "version_agree: $v everywhere"
