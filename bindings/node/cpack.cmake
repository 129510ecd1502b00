# SPDX-License-Identifier: Apache-2.0
# CPack settings of the Node.js binding's package (included by packaging/CMakeLists.txt).
set(CPACK_DEBIAN_NODE_PACKAGE_NAME node-chash)
set(CPACK_DEBIAN_NODE_PACKAGE_SECTION javascript)
# chash.node links libchash.so.0 and libchash_config.so.0 of the same build: libchash0 of this
# version (dpkg-shlibdeps adds libc6).
set(CPACK_DEBIAN_NODE_PACKAGE_DEPENDS "libchash${PROJECT_VERSION_MAJOR} (= ${PROJECT_VERSION}), nodejs")
set(CPACK_DEBIAN_NODE_DESCRIPTION "consistent hashing placement for Node.js (libchash binding)
The module chash: libchash's placement tables (chash's ring, rendezvous,
jump, maglev, twemproxy's ketama, client libraries' rings) from Node.js,
built from nodes or from a twemproxy YAML pool, key for key as the C
library and chash-proxy place them.")
