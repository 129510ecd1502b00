/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_stage.h — staging as a route (route_stage.c): while a membership change is prepared and
 * not yet committed (px_pool.stage), a write of a key whose owner changes goes to its owner as
 * usual (child[0], the pool's tree) and is then invalidated at its next owner, and only then
 * answered. Reads and keys that do not move pass to child[0] as they are.
 */
#ifndef CHASH_PROXY_ROUTE_STAGE_H
#define CHASH_PROXY_ROUTE_STAGE_H

#include "route.h"

extern const px_route_ops px_route_stage_ops;

#endif /* CHASH_PROXY_ROUTE_STAGE_H */
