/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resolve.h — the proxy's one name lookup (getaddrinfo), for backends, listeners and the
 * stats and metrics ports.
 */
#ifndef CHASH_PROXY_RESOLVE_H
#define CHASH_PROXY_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* The first address of host:port into *out (passive: for bind, host NULL meaning any). Returns
 * 0, or -1 with getaddrinfo's reason in why. Blocks while the resolver works: call it at start,
 * in a reload's prepare, never on the request path. */
int px_resolve(const char *host, int port, bool passive, struct sockaddr_storage *out,
               socklen_t *outlen, char *why, size_t whylen);

#endif /* CHASH_PROXY_RESOLVE_H */
