/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_doc.c — a pool's membership document as JSON (fleet_doc.h), built with jansson.
 */
#include "fleet_doc.h"

#include <jansson.h>

#include <stdio.h>

char *fleet_doc_json(const ch_conf_pool *p, int64_t epoch)
{
    json_t *o = json_object(), *servers = json_array();
    bool ok = o != NULL && servers != NULL;
    for (size_t i = 0; ok && i < p->nservers; i++) {
        const ch_conf_server *s = &p->servers[i];
        char e[600];
        /* Weights in a file are integers (twemproxy's), so %.0f writes them exactly. */
        snprintf(e, sizeof(e), "%s:%.0f%s%s", s->addr, s->weight, s->name ? " " : "",
                 s->name ? s->name : "");
        ok = json_array_append_new(servers, json_string(e)) == 0;
    }
    if (ok && epoch > 0)
        ok = json_object_set_new(o, "epoch", json_integer(epoch)) == 0;
    if (ok) {
        ok = json_object_set_new(o, "servers", servers) == 0;
        servers = NULL;
    }
    ok = ok && json_object_set_new(o, "hash", json_string(p->hash)) == 0 &&
         json_object_set_new(o, "distribution", json_string(p->distribution)) == 0;
    if (ok && p->hash_tag != NULL)
        ok = json_object_set_new(o, "hash_tag", json_string(p->hash_tag)) == 0;
    if (ok && p->version != NULL)
        ok = json_object_set_new(o, "version", json_string(p->version)) == 0;
    char *s = ok ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(servers);
    json_decref(o);
    return s;
}
