/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listen.h — a pool's listening sockets, bound by the control thread before a worker starts, so
 * an address in use fails the start with one clear error.
 */
#ifndef CHASH_PROXY_LISTEN_H
#define CHASH_PROXY_LISTEN_H

#include "chash_config.h"
#include "log.h"

/* Binds pc's listen address for nworkers workers: fds[w] for worker w. TCP: one socket per
 * worker with SO_REUSEPORT (first checked free by a plain bind, so a second proxy cannot
 * silently share the port), the kernel spreading new connections over them. A unix socket: one
 * socket, each worker polling a dup of it; a socket file left by an earlier run is removed (as
 * twemproxy does), but not one a live process accepts on. Returns 0, or -1 (logged to log; the
 * fds opened so far are in fds[], the others -1). */
int px_listen_pool(px_log *log, const ch_conf_pool *pc, unsigned nworkers, int *fds);

#endif /* CHASH_PROXY_LISTEN_H */
