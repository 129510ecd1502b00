/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_scan.h — SCAN over every server of a pool (route_scan.c). Stateless: one serves every
 * pool; the walk's state is in the cursor the client holds.
 */
#ifndef CHASH_PROXY_ROUTE_SCAN_H
#define CHASH_PROXY_ROUTE_SCAN_H

#include "route.h"

#include <stdbool.h>
#include <stdint.h>

extern px_route px_route_scan;

/* The proxy's cursor: 0 is the start and the end of a walk; any other is
 * [server index : 12 | membership tag : 12 | the server's own cursor : 40] (high to low bits).
 * Pure, for the route and the tests. */
#define PX_SCAN_CURSOR_BITS 40u
#define PX_SCAN_TAG_BITS 12u
#define PX_SCAN_INDEX_BITS 12u
uint64_t px_scan_cursor(size_t index, uint32_t tag, uint64_t server_cursor);
/* Splits a cursor that is not 0; false when it is not one of tag's for a pool of nservers. */
bool px_scan_split(uint64_t cursor, uint32_t tag, size_t nservers, size_t *index,
                   uint64_t *server_cursor);
/* The tag of a membership version: 12 bits of its FNV-1a hash. */
uint32_t px_scan_tag(const char *version);

#endif /* CHASH_PROXY_ROUTE_SCAN_H */
