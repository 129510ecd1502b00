/* SPDX-License-Identifier: Apache-2.0 */
/*
 * version.c — ch_version(): the version this library was built as, from chash_version.h, which
 * CMake generates from the project version.
 */
#include "chash.h"

const char *ch_version(void)
{
    return CH_VERSION_STRING;
}
