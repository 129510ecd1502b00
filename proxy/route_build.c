/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_build.c — a pool's tree of routes (route_build.h). The tree is data: its nodes, in
 * parent-before-child order, each knowing its parent and level, so a slot's answer finds its
 * way up (request.c, px_rq_return). A reload builds a new tree and the requests in flight keep
 * the one they started on (px_route_tree.refs), so a slot's state is never read by a route of
 * another shape.
 */
#include "route_build.h"
#include "pool.h"
#include "route_coalesce.h"
#include "route_near.h"
#include "route_gutter.h"
#include "route_pool.h"
#include "route_prefix.h"
#include "route_replica.h"
#include "route_shadow.h"
#include "route_stage.h"
#include "route_warm.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Where node() puts a node past PX_POOL_ROUTES (or past a parent's PX_ROUTE_CHILDREN): the
 * tree is then refused (px_route_build fails) instead of written past its arrays. */
static _Thread_local px_route overflow_node;

/* A node of t under parent (NULL: the root), with ops and conf. */
static px_route *node(px_route_tree *t, px_route *parent, const px_route_ops *ops,
                      const void *conf)
{
    /* At most near, coalesce, shadow, stage, gutter, warm, replica over its 8 owners' leaves,
     * and the current, previous and next leaves: 18 of PX_POOL_ROUTES. */
    if (t->n >= PX_POOL_ROUTES || (parent != NULL && parent->nchild >= PX_ROUTE_CHILDREN)) {
        t->n = PX_POOL_ROUTES + 1; /* refused */
        overflow_node = (px_route){0};
        return &overflow_node;
    }
    px_route *rt = &t->nodes[t->n++];
    rt->ops = ops;
    rt->conf = conf;
    rt->parent = parent;
    rt->level = parent != NULL ? parent->level + 1 : 0;
    if (parent != NULL)
        parent->child[parent->nchild++] = rt;
    return rt;
}

/* The route of tree t with these ops (each route with a state is at most once in a tree), or
 * NULL. */
static px_route *same_route(px_route_tree *t, const px_route_ops *ops)
{
    for (unsigned i = 0; t != NULL && i < t->n && i < PX_POOL_ROUTES; i++)
        if (t->nodes[i].ops == ops)
            return &t->nodes[i];
    return NULL;
}

/* The worker's pool named name, or NULL. */
static px_pool *pool_named(px_pool *pools, size_t npools, const char *name)
{
    for (size_t i = 0; name != NULL && i < npools; i++)
        if (pools[i].conf != NULL && strcmp(pools[i].conf->name, name) == 0)
            return &pools[i];
    return NULL;
}

int px_route_build(px_pool *pool, px_pool *pools, size_t npools)
{
    px_route_tree *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return -1;
    t->refs = 1;
    const ch_conf_pool *pc = pool->conf;
    bool prefix_err = false;
    t->prefix = px_prefix_build(pool, pools, npools, &prefix_err);
    if (prefix_err) {
        free(t);
        return -1;
    }
    px_pool *shadow = pool_named(pools, npools, pc->shadow_pool);
    px_route *root = NULL;
    unsigned workers = pool->shared->near_workers > 0 ? pool->shared->near_workers : 1;
    pool->hot_threshold = ((uint64_t)pc->hot_threshold + workers - 1) / workers;
    /* Coalescing over the near cache: a group's leader alone reaches the near cache, so what
     * the near cache keeps was read after its own request arrived (the TTL's bound holds), and
     * a hit answers the leader at once, before any read could join it. */
    if (pc->coalesce_reads)
        root = node(t, NULL, &px_route_coalesce_ops, NULL);
    if (px_route_near_wanted(pool))
        root = node(t, root, &px_route_near_ops, NULL);
    if (shadow != NULL && shadow != pool) {
        t->shadow = (px_shadow_conf){shadow, pc->shadow_fraction, pc->shadow_writes};
        root = node(t, root, &px_route_shadow_ops, &t->shadow);
    }
    px_route *stage = NULL;
    if (pool->stage.table != NULL)
        root = stage = node(t, root, &px_route_stage_ops, NULL);
    px_pool *gutter = pool_named(pools, npools, pc->gutter_pool);
    if (gutter != NULL && gutter != pool) {
        t->gutter = (px_gutter_conf){gutter, (uint64_t)pc->gutter_ttl_ms};
        root = node(t, root, &px_route_gutter_ops, &t->gutter);
    }
    px_route *warm = node(t, root, &px_route_warm_ops, NULL);
    if (pc->replicas > 1) { /* the current placement replicated: a leaf per owner, then the walk */
        px_route *rep = node(t, warm, &px_route_replica_ops, NULL);
        unsigned n = pc->replicas < (int)PX_MAX_REPLICAS ? (unsigned)pc->replicas
                                                          : PX_MAX_REPLICAS;
        for (unsigned i = 0; i < n; i++)
            node(t, rep, &px_route_pool_ops, &px_leaf_replica[i]);
        node(t, rep, &px_route_pool_ops, &px_leaf_current);
    } else {
        node(t, warm, &px_route_pool_ops, &px_leaf_current);
    }
    node(t, warm, &px_route_pool_ops, &px_leaf_previous);
    if (stage != NULL) /* child[1]: the staged placement's leaf, for its deletes */
        node(t, stage, &px_route_pool_ops, &px_leaf_next);
    /* A route with children keeps a state word per slot at its level (px_rq_state): a tree
     * deeper than PX_ROUTE_LEVELS, or with more than PX_POOL_ROUTES nodes, is a build error of
     * the proxy's, caught here (the worker does not start, a reload is refused). */
    bool fits = t->n <= PX_POOL_ROUTES;
    for (unsigned i = 0; fits && i < t->n; i++)
        fits = t->nodes[i].nchild == 0 || t->nodes[i].level < PX_ROUTE_LEVELS;
    if (!fits) {
        px_prefix_free(t->prefix);
        free(t);
        return -1;
    }
    /* Each route's state, taking over the replaced tree's same route's where it can. */
    for (unsigned i = 0; i < t->n; i++) {
        px_route *rt = &t->nodes[i];
        if (rt->ops->build != NULL && rt->ops->build(rt, pool, same_route(pool->tree, rt->ops)) != 0) {
            px_route_tree_release(t); /* frees the states built */
            return -1;
        }
    }
    px_route_drop(pool);
    pool->tree = t;
    pool->route = &t->nodes[0];
    return 0;
}

void px_route_drop(px_pool *pool)
{
    px_route_tree_release(pool->tree);
    pool->tree = NULL;
    pool->route = NULL;
}
