/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conf_ref.h — a loaded config shared by the threads, freed when its last reference goes.
 */
#ifndef CHASH_PROXY_CONF_REF_H
#define CHASH_PROXY_CONF_REF_H

#include "chash_config.h"

/* The control thread holds one per pool whose conf points into it and one for the file's latest
 * version; a retired server (reload.c) holds one until it is freed. */
typedef struct px_conf {
    ch_config *cfg;
    unsigned refs; /* atomic */
} px_conf;

px_conf *px_conf_new(ch_config *cfg); /* one reference; NULL when out of memory (cfg not freed) */
void px_conf_ref(px_conf *c);
void px_conf_unref(px_conf *c); /* the last one frees cfg; NULL is a no-op */

#endif /* CHASH_PROXY_CONF_REF_H */
