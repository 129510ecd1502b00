/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conf_ref.c — reference-counted configs (conf_ref.h).
 */
#include "conf_ref.h"

#include <stdlib.h>

px_conf *px_conf_new(ch_config *cfg)
{
    px_conf *c = malloc(sizeof(*c));
    if (c != NULL) {
        c->cfg = cfg;
        c->refs = 1;
    }
    return c;
}

void px_conf_ref(px_conf *c)
{
    __atomic_fetch_add(&c->refs, 1u, __ATOMIC_RELAXED);
}

void px_conf_unref(px_conf *c)
{
    if (c != NULL && __atomic_sub_fetch(&c->refs, 1u, __ATOMIC_ACQ_REL) == 0) {
        ch_config_free(c->cfg);
        free(c);
    }
}
