#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Java binding's benchmark (make bench): Bench.java against spymemcached's KetamaNodeLocator
# with the jar and the JNI shim of BUILD (default build/release). Skipped, with the reason, without
# a JDK or libspymemcached-java.
#   bindings/java/bench/bench_java.sh [BUILD] [KEYS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build/release}" && pwd)
spy=/usr/share/java/spymemcached.jar
if ! command -v javac >/dev/null || [ ! -f "$spy" ]; then
    echo "bench_java: skipped: javac (default-jdk-headless) or $spy (libspymemcached-java) missing"
    exit 0
fi
jar=$build/bindings/java/chash.jar
jni=$build/bindings/java/libchash_jni.so
[ -f "$jar" ] && [ -f "$jni" ] || { echo "bench_java: $jar or $jni missing (build $build first)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
javac -Xlint:all -Werror -cp "$jar:$spy" -d "$tmp" "$here/Bench.java"
java -Dchash.jni="$jni" -cp "$jar:$spy:$tmp" Bench "${2:-200000}"
# JNA, when installed (Debian libjna-java): the same lookups through it, the measurement that
# chose JNI (README.md).
jna=/usr/share/java/jna.jar
if [ -f "$jna" ]; then
    javac -Xlint:all -Werror -cp "$jar:$jna" -d "$tmp" "$here/BenchJna.java"
    java -Dchash.jni="$jni" -Djna.library.path="$build" -cp "$jar:$jna:$tmp" BenchJna "${2:-200000}"
fi
