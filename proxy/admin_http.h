/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admin_http.h — the HTTP/1.0 admin listener (--metrics-port): GET /metrics, GET /-/hotkeys,
 * POST /-/reload.
 */
#ifndef CHASH_PROXY_ADMIN_HTTP_H
#define CHASH_PROXY_ADMIN_HTTP_H

#include "ctl_state.h"

/* Starts the listener when m->metrics_port is set (0 otherwise); -1 logged. */
int px_admin_http_start(px_ctl *m);
/* Closes its listener and connections (shutdown). */
void px_admin_http_stop(px_ctl *m);

#endif /* CHASH_PROXY_ADMIN_HTTP_H */
