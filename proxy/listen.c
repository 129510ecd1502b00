/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listen.c — bound listening sockets (listen.h).
 */
#include "listen.h"
#include "resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* A bound, listening TCP socket for sa; reuseport: shared with the other workers' sockets.
 * Returns the fd or -1 with errno set. */
static int tcp_socket(const struct sockaddr_storage *sa, socklen_t salen, bool reuseport,
                      int backlog)
{
    int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) ||
        bind(fd, (const struct sockaddr *)sa, salen) != 0 || listen(fd, backlog) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int unix_sockets(px_log *log, const ch_conf_pool *pc, unsigned nworkers, int backlog,
                        int *fds)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(pc->listen_host) >= sizeof(sa.sun_path)) {
        PX_LOGL(log, PX_LOG_ERR, "pool %s: socket path too long: %s", pc->name,
               pc->listen);
        return -1;
    }
    strcpy(sa.sun_path, pc->listen_host);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0)
        close(fd);
    if (live) {
        PX_LOGL(log, PX_LOG_ERR, "pool %s: cannot listen on %s: %s", pc->name,
               pc->listen, strerror(EADDRINUSE));
        return -1;
    }
    unlink(pc->listen_host);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, backlog) != 0) {
        PX_LOGL(log, PX_LOG_ERR, "pool %s: cannot listen on %s: %s", pc->name,
               pc->listen, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (pc->listen_perm >= 0)
        chmod(pc->listen_host, (mode_t)pc->listen_perm);
    fds[0] = fd;
    for (unsigned w = 1; w < nworkers; w++) {
        fds[w] = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (fds[w] < 0) {
            PX_LOGL(log, PX_LOG_ERR, "pool %s: dup: %s", pc->name, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int px_listen_pool(px_log *log, const ch_conf_pool *pc, unsigned nworkers, int *fds)
{
    int backlog = pc->backlog > 0 ? pc->backlog : 512;
    for (unsigned w = 0; w < nworkers; w++)
        fds[w] = -1;
    if (pc->listen_port == 0)
        return unix_sockets(log, pc, nworkers, backlog, fds);
    struct sockaddr_storage sa;
    socklen_t salen = 0;
    char why[128];
    if (px_resolve(pc->listen_host, pc->listen_port, true, &sa, &salen, why, sizeof(why)) != 0) {
        PX_LOGL(log, PX_LOG_ERR, "pool %s: cannot resolve listen address '%s': %s",
               pc->name, pc->listen, why);
        return -1;
    }
    /* A plain bind first: it fails when anyone listens there, SO_REUSEPORT or not. */
    int probe = tcp_socket(&sa, salen, false, 1);
    if (probe >= 0)
        close(probe);
    for (unsigned w = 0; probe >= 0 && w < nworkers; w++)
        if ((fds[w] = tcp_socket(&sa, salen, true, backlog)) < 0)
            probe = -1;
    if (probe < 0) {
        PX_LOGL(log, PX_LOG_ERR, "pool %s: cannot listen on %s: %s", pc->name,
               pc->listen, strerror(errno));
        return -1;
    }
    return 0;
}
