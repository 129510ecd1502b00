/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify.h — the service manager told of the proxy's state (sd_notify(3), for systemd's
 * Type=notify and Type=notify-reload units): ready once it serves, reloading and ready again
 * around a reload, stopping at shutdown. Each call is a no-op without $NOTIFY_SOCKET (any other
 * start), and a failure to send is ignored: the proxy's work never depends on it. Control
 * thread only.
 */
#ifndef CHASH_PROXY_NOTIFY_H
#define CHASH_PROXY_NOTIFY_H

/* READY=1, MAINPID= (this process: after -d's forks) and STATUS=status. */
void px_notify_ready(const char *status);

/* RELOADING=1 with MONOTONIC_USEC= (CLOCK_MONOTONIC now, which systemd >= 253 requires of a
 * notify-reload service; older ones ignore it), before a reload is read. */
void px_notify_reloading(const char *trigger);

/* READY=1 again after a reload, applied or not (the proxy serves either way), STATUS=status. */
void px_notify_reloaded(const char *status);

/* STOPPING=1, when shutdown begins. */
void px_notify_stopping(void);

#endif /* CHASH_PROXY_NOTIFY_H */
