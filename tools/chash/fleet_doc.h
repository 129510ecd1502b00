/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_doc.h — a pool's membership document (docs/FLEET.md), as `chash fleet apply` writes it.
 * Apart from fleet.c because jansson's names (json_null, ...) collide with cli.h's JSON writer.
 */
#ifndef CHASH_FLEET_DOC_H
#define CHASH_FLEET_DOC_H

#include <chash_config.h>

#include <stdint.h>

/* The membership document of pool p: its servers as "addr:weight [name]" in file order, its
 * hash, distribution, hash_tag (when set) and version (when set), and "epoch" when epoch > 0.
 * Compact JSON, malloc'd; NULL when out of memory. O(servers). */
char *fleet_doc_json(const ch_conf_pool *p, int64_t epoch);

#endif
