/*
 * fleet_internal.h — the name src/fleet's interface had before it was split into the two
 * headers it shares (tests/lint/proxy_direction.py --layers): etcd_msg.h (etcd's gateway
 * messages) and fleet_record.h (what a fleet stores under a pool's key). Include those; this
 * one only forwards to both, for the files that still use the old name (proxy/fleet.c,
 * proxy/lease.c, tests/unit/test_etcd_txn.c). Nothing in src/ or tools/ may include it.
 */
#ifndef CHASH_FLEET_INTERNAL_H
#define CHASH_FLEET_INTERNAL_H

#include "etcd_msg.h"
#include "fleet_record.h"

#endif /* CHASH_FLEET_INTERNAL_H */
