# SPDX-License-Identifier: Apache-2.0
# compat_libmemcached: libchash's libmemcached_ketama and libmemcached_ketama_spy against the real
# libmemcached (libmemcached-dev), linked in as an oracle; no memcached server or network is used
# (test_libmemcached.c). Without libmemcached the test skips (exit 77), or fails when CI is set.
pkg_check_modules(LIBMEMCACHED QUIET IMPORTED_TARGET libmemcached)
if(LIBMEMCACHED_FOUND)
  chash_test(compat_libmemcached ${CMAKE_CURRENT_LIST_DIR}/test_libmemcached.c)
  target_link_libraries(compat_libmemcached PRIVATE PkgConfig::LIBMEMCACHED)
else()
  set(_msg "libmemcached (libmemcached-dev) missing: run scripts/bootstrap")
  add_test(NAME compat_libmemcached
    COMMAND sh -c "echo '${_msg}'; if [ -n \"\$CI\" ]; then exit 1; fi; exit 77")
  unset(_msg)
endif()
set_tests_properties(compat_libmemcached PROPERTIES SKIP_RETURN_CODE 77)
