# SPDX-License-Identifier: Apache-2.0
# compat_hashkit: libchash's twemproxy key hashes (and md5) against libmemcached's libhashkit
# (libhashkit-dev, pulled in by libmemcached-dev), linked in as an oracle (test_hashkit.c).
# libhashkit has no pkg-config module of its own, so its header and library are looked up
# directly. Without them the test skips (exit 77), or fails when CI is set.
find_path(HASHKIT_INCLUDE_DIR libhashkit-1.0/hashkit.h)
find_library(HASHKIT_LIBRARY hashkit)
if(HASHKIT_INCLUDE_DIR AND HASHKIT_LIBRARY)
  chash_test(compat_hashkit ${CMAKE_CURRENT_LIST_DIR}/test_hashkit.c)
  target_include_directories(compat_hashkit SYSTEM PRIVATE ${HASHKIT_INCLUDE_DIR})
  target_link_libraries(compat_hashkit PRIVATE ${HASHKIT_LIBRARY})
else()
  add_test(NAME compat_hashkit
    COMMAND sh -c "echo 'libhashkit (libhashkit-dev) missing: run scripts/bootstrap'; if [ -n \"\$CI\" ]; then exit 1; fi; exit 77")
endif()
set_tests_properties(compat_hashkit PROPERTIES SKIP_RETURN_CODE 77)
