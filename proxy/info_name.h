/* SPDX-License-Identifier: Apache-2.0 */
/*
 * info_name.h — a name (a pool's) as part of an INFO field name, for the sections that INFO's
 * builders write (metrics.c, hotkeys.c): one rule, so every section names a pool alike.
 */
#ifndef CHASH_PROXY_INFO_NAME_H
#define CHASH_PROXY_INFO_NAME_H

#include "buf.h"

/* Appends s with bytes other than [A-Za-z0-9_.-] as '_'. 0, or -1 when out of memory. */
int px_info_name(px_buf *b, const char *s);

#endif /* CHASH_PROXY_INFO_NAME_H */
