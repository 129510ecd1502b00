/* SPDX-License-Identifier: Apache-2.0 */
/*
 * table.c — what all placement tables share: the algorithm registry, option handling, node
 * validation, the allocator, and the lookup entry points that dispatch to one algorithm.
 */
#include "../internal.h"
#include "../table_view.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ch_strerror(int status)
{
    switch (status) {
#define CASE(name, value, msg) \
    case value:                \
        return msg;
        CH_STATUS_LIST(CASE)
#undef CASE
    }
    return "unknown status";
}

/* ---- why a build failed -------------------------------------------------------------------- */

/* The bytes of err's message a caller's struct has room for (0: none, err NULL or too small). */
static size_t message_room(const ch_error *err)
{
    if (err == NULL || err->size <= offsetof(ch_error, message))
        return 0;
    size_t room = err->size - offsetof(ch_error, message);
    return room < sizeof(err->message) ? room : sizeof(err->message);
}

static int error_vset(ch_error *err, int status, const char *fmt, va_list ap)
{
    size_t room = message_room(err);
    if (room == 0)
        return status;
    err->status = status;
    vsnprintf(err->message, room, fmt, ap);
    return status;
}

int ch__error_set(ch_error *err, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, status, fmt, ap);
    va_end(ap);
    return status;
}

int ch__error_end(ch_error *err, int rc)
{
    if (rc != CH_OK && message_room(err) > 0 && err->status == CH_OK)
        ch__error_set(err, rc, "%s", ch_strerror(rc));
    return rc;
}

int ch__fail(ch_table *t, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(t->err, status, fmt, ap);
    va_end(ap);
    return status;
}

int ch__fail_points(ch_table *t)
{
    return ch__fail(t, CH_ETOOBIG,
                    "%s: more than %u points (CH_MAX_POINTS) from %zu nodes at vnodes %u with "
                    "weights summing to %g: lower vnodes or the weights",
                    ch_algo_name(t->opt.algo), (unsigned)CH_MAX_POINTS, t->n, t->opt.vnodes,
                    t->weight_sum);
}

int ch__fail_no_points(ch_table *t)
{
    return ch__fail(t, CH_EINVAL, "%s: vnodes %u gives no node a point: raise vnodes",
                    ch_algo_name(t->opt.algo), t->opt.vnodes);
}

/* The first node whose weight differs from the first one's (t is not uniform). */
static size_t first_other_weight(const ch_table *t)
{
    size_t i = 1;
    while (i < t->n && t->weights[i] == t->weights[0])
        i++;
    return i < t->n ? i : 0;
}

int ch__fail_unweighted(ch_table *t)
{
    size_t i = first_other_weight(t);
    return ch__fail(t, CH_EUNSUPPORTED,
                    "%s has no weights: every node must weigh the same, but node %zu (\"%.40s\") "
                    "weighs %g and node 0 (\"%.40s\") %g",
                    ch_algo_name(t->opt.algo), i, t->ids[i], t->weights[i], t->ids[0],
                    t->weights[0]);
}

int ch__fail_unit_weights(ch_table *t)
{
    size_t i = 0;
    while (i < t->n && t->weights[i] == 1.0)
        i++;
    return ch__fail(t, CH_EUNSUPPORTED,
                    "%s takes weights of 1 only: node %zu (\"%.40s\") weighs %g",
                    ch_algo_name(t->opt.algo), i, t->ids[i < t->n ? i : 0],
                    i < t->n ? t->weights[i] : 1.0);
}

int ch__fail_library(ch_table *t, int status)
{
    size_t i = 1;
    while (i < t->n && t->weights[i] == t->weights[0])
        i++;
    if (status == CH_EUNSUPPORTED && i < t->n)
        return ch__fail(t, status,
                        "%s: %s; node %zu (\"%.40s\") weighs %g and node 0 (\"%.40s\") %g",
                        ch_algo_name(t->opt.algo), t->algo->limits, i, t->ids[i], t->weights[i],
                        t->ids[0], t->weights[0]);
    return ch__fail(t, status, "%s: %s", ch_algo_name(t->opt.algo), t->algo->limits);
}

static const struct {
    const char *name;
    const ch__algo *ops;
} algos[CH_ALGO_COUNT_] = {
#define ENTRY(id, ident, name, value) [CH_ALGO_##id] = {name, &ch__algo_##ident},
    CH_ALGO_LIST(ENTRY)
#undef ENTRY
};

int ch_algo_from_name(const char *name, ch_algo_id *out)
{
    if (name == NULL || out == NULL)
        return CH_EINVAL;
    for (unsigned i = 0; i < CH_ALGO_COUNT_; i++) {
        if (strcmp(name, algos[i].name) == 0) {
            *out = (ch_algo_id)i;
            return CH_OK;
        }
    }
    return CH_EUNKNOWN;
}

const char *ch_algo_name(ch_algo_id id)
{
    return (unsigned)id < CH_ALGO_COUNT_ ? algos[id].name : NULL;
}

unsigned ch_algo_flags(ch_algo_id id)
{
    if ((unsigned)id >= CH_ALGO_COUNT_)
        return 0;
    const ch__algo *a = algos[id].ops;
    return (a->unweighted ? 0u : CH_ALGO_F_WEIGHTED) | (a->fixed_hash ? CH_ALGO_F_FIXED_HASH : 0u) |
           (a->addr_ids ? CH_ALGO_F_ADDR_IDS : 0u) | (a->lookup_key ? CH_ALGO_F_KEYED : 0u) |
           (a->remaps ? CH_ALGO_F_REMAPS : 0u) |
           (a->whole_weights ? CH_ALGO_F_WHOLE_WEIGHTS : 0u);
}

const char *ch_algo_limits(ch_algo_id id)
{
    return (unsigned)id < CH_ALGO_COUNT_ ? algos[id].ops->limits : NULL;
}

double ch_algo_max_weight(ch_algo_id id)
{
    return (unsigned)id < CH_ALGO_COUNT_ ? algos[id].ops->max_weight : 0.0;
}

int ch_algo_hash(ch_algo_id id, ch_hash_id *out)
{
    if ((unsigned)id >= CH_ALGO_COUNT_ || out == NULL)
        return CH_EINVAL;
    if (!algos[id].ops->fixed_hash)
        return CH_EUNSUPPORTED;
    *out = algos[id].ops->hash;
    return CH_OK;
}

void ch_options_init(ch_options *opt)
{
    *opt = (ch_options){
        .size = sizeof(ch_options),
        .algo = CH_ALGO_RING,
        .hash = CH_HASH_DEFAULT,
        .vnodes = CH_DEFAULT_VNODES,
        .table_size = CH_DEFAULT_MAGLEV_SIZE,
        .allocator = NULL,
    };
}

/* ---- allocation -------------------------------------------------------------------------- */

static void *default_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

static void default_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    free(p);
}

void *ch__alloc(ch_table *t, size_t size)
{
    void *p = t->alloc.alloc(t->alloc.ctx, size == 0 ? 1 : size);
    if (p != NULL)
        t->bytes += size;
    return p;
}

void ch__free(ch_table *t, void *p, size_t size)
{
    if (p == NULL)
        return;
    t->bytes -= size;
    t->alloc.free(t->alloc.ctx, p, size == 0 ? 1 : size);
}

/* ---- building ---------------------------------------------------------------------------- */

/* Copies the caller's options over the defaults, as far as the caller's struct reaches. */
static int read_options(const ch_options *opt, ch_options *o, ch_error *err)
{
    ch_options_init(o);
    if (opt == NULL)
        return CH_OK;
    if (opt->size < offsetof(ch_options, algo) + sizeof(opt->algo) || opt->size > sizeof(*o))
        return ch__error_set(err, CH_EINVAL,
                             "opt->size %zu is not a ch_options size (%zu to %zu): start from "
                             "ch_options_init()",
                             opt->size, offsetof(ch_options, algo) + sizeof(opt->algo),
                             sizeof(*o));
    memcpy(o, opt, opt->size);
    o->size = sizeof(*o);
    if ((unsigned)o->algo >= CH_ALGO_COUNT_)
        return ch__error_set(err, CH_EINVAL, "opt->algo %d is not an algorithm (0 to %d)",
                             (int)o->algo, CH_ALGO_COUNT_ - 1);
    if ((unsigned)o->hash >= CH_HASH_COUNT_)
        return ch__error_set(err, CH_EINVAL, "opt->hash %d is not a hash (0 to %d)",
                             (int)o->hash, CH_HASH_COUNT_ - 1);
    if ((o->hash_tag[0] == '\0') != (o->hash_tag[1] == '\0'))
        return ch__error_set(err, CH_EINVAL,
                             "opt->hash_tag holds one NUL of two characters: give two (e.g. "
                             "\"{}\") or none");
    if (o->vnodes == 0) {
        uint32_t d = algos[o->algo].ops->default_vnodes;
        o->vnodes = d != 0 ? d : CH_DEFAULT_VNODES;
    }
    return CH_OK;
}

static int check_nodes(const ch_node *nodes, size_t n, ch_error *err)
{
    if (n == 0)
        return ch__error_set(err, CH_EEMPTY, "no nodes (n is 0)");
    if (nodes == NULL)
        return ch__error_set(err, CH_EINVAL, "nodes is NULL (n is %zu)", n);
    if (n > CH_MAX_NODES)
        return ch__error_set(err, CH_ETOOBIG, "%zu nodes: at most %u (CH_MAX_NODES)", n,
                             (unsigned)CH_MAX_NODES);
    for (size_t i = 0; i < n; i++) {
        if (nodes[i].id == NULL || nodes[i].id[0] == '\0')
            return ch__error_set(err, CH_EBADID, "node %zu: its id is %s", i,
                                 nodes[i].id == NULL ? "NULL" : "empty");
        if (!isfinite(nodes[i].weight) || !(nodes[i].weight > 0.0))
            return ch__error_set(err, CH_EWEIGHT,
                                 "node %zu (\"%.40s\"): weight %g is not finite and > 0", i,
                                 nodes[i].id, nodes[i].weight);
    }
    return CH_OK;
}

/* A stable merge sort of node indexes by id: C11's qsort takes no context argument, and
 * n log n strcmp calls are small next to any algorithm's build. */
static void merge_sort(uint32_t *a, uint32_t *tmp, size_t n, const char *const *ids)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    merge_sort(a, tmp, h, ids);
    merge_sort(a + h, tmp, n - h, ids);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = strcmp(ids[a[j]], ids[a[i]]) < 0 ? a[j++] : a[i++];
    while (i < h)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof(*a));
}

/* Copies ids and weights into the table, computes per-node hashes, sorts the nodes by id and
 * rejects duplicate ids (adjacent once sorted). */
static int copy_nodes(ch_table *t, const ch_node *nodes)
{
    size_t n = t->n, block = 0;
    for (size_t i = 0; i < n; i++)
        block += strlen(nodes[i].id) + 1;

    /* n <= CH_MAX_NODES, so the array sizes cannot overflow. free_nodes() releases what was
     * allocated, so id_block_len is set before anything can fail after it. */
    t->id_block_len = block;
    if ((t->ids = ch__alloc(t, n * sizeof(*t->ids))) == NULL ||
        (t->id_block = ch__alloc(t, block)) == NULL ||
        (t->weights = ch__alloc(t, n * sizeof(*t->weights))) == NULL ||
        (t->id_hash = ch__alloc(t, n * sizeof(*t->id_hash))) == NULL)
        return CH_ENOMEM;

    char *p = t->id_block;
    t->weight_sum = 0.0;
    t->uniform = true;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(nodes[i].id);
        memcpy(p, nodes[i].id, len + 1);
        t->ids[i] = p;
        p += len + 1;
        t->weights[i] = nodes[i].weight;
        t->weight_sum += nodes[i].weight;
        if (nodes[i].weight != nodes[0].weight)
            t->uniform = false;
        t->id_hash[i] = ch__fmix64(t->hash(nodes[i].id, len));
    }

    uint32_t *tmp = ch__alloc(t, n * sizeof(*tmp));
    if (tmp == NULL || (t->by_id = ch__alloc(t, n * sizeof(*t->by_id))) == NULL) {
        ch__free(t, tmp, n * sizeof(*tmp));
        return CH_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        t->by_id[i] = (uint32_t)i;
    merge_sort(t->by_id, tmp, n, t->ids);
    ch__free(t, tmp, n * sizeof(*tmp));
    for (size_t i = 1; i < n; i++) {
        uint32_t a = t->by_id[i - 1], b = t->by_id[i]; /* a < b: the sort is stable */
        if (strcmp(t->ids[a], t->ids[b]) == 0)
            return ch__fail(t, CH_EDUPID, "nodes %u and %u have the same id \"%.40s\"",
                            (unsigned)a, (unsigned)b, t->ids[a]);
    }
    return CH_OK;
}

static void free_nodes(ch_table *t)
{
    ch__free(t, t->ids, t->n * sizeof(*t->ids));
    ch__free(t, t->id_block, t->id_block_len);
    ch__free(t, t->weights, t->n * sizeof(*t->weights));
    ch__free(t, t->id_hash, t->n * sizeof(*t->id_hash));
    ch__free(t, t->by_id, t->n * sizeof(*t->by_id));
}

int ch_table_build(const ch_node *nodes, size_t n, const ch_options *opt, ch_table **out)
{
    return ch_table_build_err(nodes, n, opt, out, NULL);
}

/* Builds the table once the arguments are read; every failure is recorded in err. */
static int build(const ch_node *nodes, size_t n, const ch_options *opt, ch_table **out,
                 ch_error *err)
{
    ch_options o;
    int rc;
    if (out == NULL)
        return ch__error_set(err, CH_EINVAL, "out is NULL");
    if ((rc = read_options(opt, &o, err)) != CH_OK || (rc = check_nodes(nodes, n, err)) != CH_OK)
        return rc;

    /* A peer whose weights are whole numbers (up to its largest): a weight it would refuse, or
     * read as another, is refused here with the peer's rule (ch_algo_limits). */
    const ch__algo *ops = algos[o.algo].ops;
    for (size_t i = 0; ops->whole_weights && i < n; i++) {
        double w = nodes[i].weight;
        if (w < 1.0 || w != floor(w) || (ops->max_weight > 0 && w > ops->max_weight))
            return ch__error_set(err, CH_EWEIGHT, "%s: node %zu (\"%.40s\") weighs %g: %s",
                                 ch_algo_name(o.algo), i, nodes[i].id, w,
                                 ops->limits != NULL ? ops->limits
                                                     : "the peer takes whole weights >= 1");
    }

    ch_allocator alloc = {default_alloc, default_free, NULL};
    if (o.allocator != NULL) {
        if (o.allocator->alloc == NULL || o.allocator->free == NULL)
            return ch__error_set(err, CH_EINVAL, "opt->allocator must set both alloc and free");
        alloc = *o.allocator;
    }
    ch_table *t = alloc.alloc(alloc.ctx, sizeof(*t));
    if (t == NULL)
        return CH_ENOMEM;
    memset(t, 0, sizeof(*t));
    t->err = err;
    t->alloc = alloc;
    t->opt = o;
    t->opt.allocator = &t->alloc;
    t->algo = algos[o.algo].ops;
    if (t->algo->fixed_hash)
        t->opt.hash = t->algo->hash;
    t->hash = ch__hash_fn_of(t->opt.hash);
    t->n = n;

    if ((rc = copy_nodes(t, nodes)) == CH_OK && (rc = t->algo->build(t)) == CH_OK) {
        t->err = NULL;
        *out = t;
        return CH_OK;
    }
    free_nodes(t);
    alloc.free(alloc.ctx, t, sizeof(*t));
    return rc;
}

int ch_table_build_err(const ch_node *nodes, size_t n, const ch_options *opt, ch_table **out,
                       ch_error *err)
{
    ch__error_set(err, CH_OK, "%s", "");
    return ch__error_end(err, build(nodes, n, opt, out, err));
}

void ch_table_free(ch_table *t)
{
    if (t == NULL)
        return;
    t->algo->destroy(t);
    free_nodes(t);
    ch_allocator alloc = t->alloc;
    alloc.free(alloc.ctx, t, sizeof(*t));
}

int ch_table_info_get(const ch_table *t, ch_table_info *info)
{
    if (t == NULL || info == NULL || info->size < offsetof(ch_table_info, algo))
        return CH_EINVAL;
    ch_table_info full = {
        .size = info->size,
        .algo = t->opt.algo,
        .hash = t->opt.hash,
        .nodes = t->n,
        .points = t->algo->points != NULL              ? t->algo->points(t)
                  : t->algo->lookup == ch__ring_lookup ? t->u.ring.npoints
                  : t->opt.algo == CH_ALGO_MAGLEV || t->opt.algo == CH_ALGO_MODULA
                      ? t->u.maglev.m
                                                  : t->n,
        .bytes = t->bytes + sizeof(*t),
        .vnodes = t->opt.vnodes,
        .table_size = t->opt.table_size,
    };
    size_t len = info->size < sizeof(full) ? info->size : sizeof(full);
    memcpy(info, &full, len);
    return CH_OK;
}

const char *ch_table_node_id(const ch_table *t, size_t i)
{
    return i < t->n ? t->ids[i] : NULL;
}

double ch_table_node_weight(const ch_table *t, size_t i)
{
    return i < t->n ? t->weights[i] : 0.0;
}

int ch_table_shares(const ch_table *t, double *shares)
{
    if (t == NULL || shares == NULL)
        return CH_EINVAL;
    t->algo->shares(t, shares);
    return CH_OK;
}

/* ---- lookups ----------------------------------------------------------------------------- */

/* twemproxy's hash tag: the text between the first tag[0] and the next tag[1] after it, when
 * that text is non-empty; else the whole key. */
static void hash_tag_span(const char tag[2], const unsigned char **key, size_t *len)
{
    const unsigned char *k = *key, *end = k + *len;
    const unsigned char *open = memchr(k, (unsigned char)tag[0], *len);
    if (open == NULL)
        return;
    const unsigned char *close = memchr(open + 1, (unsigned char)tag[1], (size_t)(end - open - 1));
    if (close == NULL || close - open < 2)
        return;
    *key = open + 1;
    *len = (size_t)(close - open - 1);
}

uint64_t ch_key_hash(const ch_table *t, const void *key, size_t len)
{
    const unsigned char *k = key;
    if (t->opt.hash_tag[0] != '\0' && len > 0)
        hash_tag_span(t->opt.hash_tag, &k, &len);
    if (len == 0 && t->algo->empty_key_zero)
        return 0;
    uint64_t h = t->algo->key_hash != NULL ? t->algo->key_hash(t, k, len) : t->hash(k, len);
    if (t->algo->len_in_key_hash)
        h |= (uint64_t)(len < UINT32_MAX ? len : UINT32_MAX) << 32;
    return h;
}

size_t ch_lookup_hash(const ch_table *t, uint64_t h)
{
    return t->algo->lookup(t, h);
}

size_t ch_lookup(const ch_table *t, const void *key, size_t len)
{
    const ch__algo *a = t->algo;
    if (a->lookup_key != NULL)
        return a->lookup_key(t, key, len);
    return a->lookup(t, ch_key_hash(t, key, len));
}

static bool listed(const size_t *out, size_t count, size_t node)
{
    for (size_t i = 0; i < count; i++)
        if (out[i] == node)
            return true;
    return false;
}

/* ---- what src/route reads (table_view.h) ------------------------------------------------ */

const ch_options *ch__table_options(const ch_table *t)
{
    return &t->opt;
}

size_t ch__table_nodes(const ch_table *t)
{
    return t->n;
}

/* The one walk of a key's candidates, for ch_replicas_hash() and ch_route_hash() (src/route):
 * the walk state lives on the stack and repeats are found by scanning the candidates written so
 * far (depth is small), so nothing is allocated. The walk ends after one turn, so the loop is
 * bounded even when a node has no point or slot. */
int ch__table_walk(const ch_table *t, uint64_t kh, ch__node_keep_fn keep, const void *ctx,
                   size_t depth, size_t limit, size_t *out, size_t *count)
{
    if (depth == 0) {
        if (count != NULL)
            *count = 0;
        return CH_OK;
    }
    if (t->algo->walk_start == NULL) {
        /* jump: the owner is the only candidate it knows. */
        if (depth > 1)
            return CH_EUNSUPPORTED;
        size_t owner = t->algo->lookup(t, kh);
        size_t c = 0;
        if (keep == NULL || keep(ctx, owner))
            out[c++] = owner;
        *count = c;
        return CH_OK;
    }
    if (depth < limit)
        limit = depth;
    if (t->n < limit)
        limit = t->n;
    size_t c = 0, node;
    ch__walk w;
    if (limit > 0) {
        t->algo->walk_start(t, kh, &w);
        while (c < limit && (node = t->algo->walk_next(t, &w)) != CH__WALK_END)
            if ((keep == NULL || keep(ctx, node)) && !listed(out, c, node))
                out[c++] = node;
    }
    *count = c;
    return CH_OK;
}

int ch_replicas_hash(const ch_table *t, uint64_t h, size_t r, size_t *out, size_t *count)
{
    if (t == NULL || (r > 0 && out == NULL) || count == NULL)
        return CH_EINVAL;
    /* Clamped first, so that a one-node jump table answers r = 2 with its one node. */
    if (r > t->n)
        r = t->n;
    return ch__table_walk(t, h, NULL, NULL, r, SIZE_MAX, out, count);
}

int ch_replicas(const ch_table *t, const void *key, size_t len, size_t r, size_t *out,
                size_t *count)
{
    if (t == NULL || (key == NULL && len > 0))
        return CH_EINVAL;
    return ch_replicas_hash(t, ch_key_hash(t, key, len), r, out, count);
}

int ch_lookup_bounded_hash(const ch_table *t, uint64_t h, const uint64_t *loads, uint64_t total,
                           double c, size_t *out)
{
    if (t == NULL || loads == NULL || out == NULL || !isfinite(c) || c < 1.0)
        return CH_EINVAL;
    if (t->algo->walk_start == NULL)
        return CH_EUNSUPPORTED;
    /* cap_i = ceil(c * (total + 1) * w_i / W). Some node is under its cap: if every node had
     * loads[i] >= cap_i, the loads would sum to >= c * (total + 1) > total. */
    double scale = c * ((double)total + 1.0) / t->weight_sum;
    ch__walk w;
    size_t node;
    t->algo->walk_start(t, h, &w);
    while ((node = t->algo->walk_next(t, &w)) != CH__WALK_END) {
        if ((double)loads[node] < ceil(scale * t->weights[node])) {
            *out = node;
            return CH_OK;
        }
    }
    /* Reached only when loads[] disagrees with total (the caller's bug) or, for maglev, when
     * every node under its cap owns no slot. Fall back to the owner rather than fail. */
    *out = t->algo->lookup(t, h);
    return CH_OK;
}

int ch_lookup_bounded(const ch_table *t, const void *key, size_t len, const uint64_t *loads,
                      uint64_t total, double c, size_t *out)
{
    if (t == NULL || (key == NULL && len > 0))
        return CH_EINVAL;
    return ch_lookup_bounded_hash(t, ch_key_hash(t, key, len), loads, total, c, out);
}
