# SPDX-License-Identifier: Apache-2.0
# CPack settings of the Java binding's package (included by packaging/CMakeLists.txt).
set(CPACK_DEBIAN_JAVA_PACKAGE_NAME libchash-java)
set(CPACK_DEBIAN_JAVA_PACKAGE_SECTION java)
# The shim links libchash0 and libchash_config (dpkg-shlibdeps adds libchash0 and libc6); the
# version is pinned: the jar and the shim's native methods are one release.
set(CPACK_DEBIAN_JAVA_PACKAGE_DEPENDS "libchash${PROJECT_VERSION_MAJOR} (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_JAVA_DESCRIPTION "consistent hashing placement for Java (chash.jar, JNI)
The Java binding of libchash: placement tables (ring, rendezvous, jump,
maglev, twemproxy's ketama, and client libraries' rings such as
spymemcached's and the Java tutorial ring) built from nodes or from a
twemproxy YAML pool, with lookups, replicas and batch lookups that give the
same answer as the C library. /usr/share/java/chash.jar and its JNI library.")
