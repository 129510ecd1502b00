/* SPDX-License-Identifier: Apache-2.0 */
/*
 * report.h — `chash report`: one self-contained HTML file (no external JS, CSS or fonts) with
 * SVG charts computed through libchash.
 */
#ifndef CHASH_REPORT_H
#define CHASH_REPORT_H

#include <chash.h>

#include <stdint.h>
#include <stdio.h>

typedef struct report_opts {
    const ch_node *nodes; /* the fleet; weights honoured where the algorithm has them */
    size_t n;
    ch_hash_id hash;      /* the hash for the algorithm charts (default fnv1a32_fmix) */
    uint32_t vnodes;      /* points per unit weight for the ring (default 160) */
    uint64_t seed;        /* sample keys are derived from it */
    size_t keys;          /* sample keys per measurement (default 200000) */
} report_opts;

/* Writes the whole report to out. Returns 0, or -1 with a one-line message in err. */
int report_write(FILE *out, const report_opts *o, char *err, size_t errlen);

#endif
