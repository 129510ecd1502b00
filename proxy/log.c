/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.c — leveled log lines "[time] LEVEL message" to stderr or the -o file. Every thread logs to
 * the same stream; a line is written under the stream's lock, so lines never interleave.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <stdarg.h>

#include <time.h>

void px_log_write(px_log *lg, int level, const char *fmt, ...)
{
    static const char *const names[] = {"EMERG", "ALERT", "CRIT", "ERROR",
                                        "WARN",  "NOTICE", "INFO", "DEBUG"};
    FILE *fp = lg->fp != NULL ? lg->fp : stderr;
    char ts[64];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    localtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);
    flockfile(fp);
    fprintf(fp, "[%s.%03ld] %s ", ts, now.tv_nsec / 1000000L,
            names[level < 0 ? 0 : level > 7 ? 7 : level]);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(fp, fmt, ap);
    va_end(ap);
    fputc('\n', fp);
    fflush(fp);
    funlockfile(fp);
}

int px_log_reopen(px_log *lg, const char *path)
{
    FILE *fp = lg->fp != NULL ? lg->fp : stderr;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    flockfile(fp);
    fflush(fp);
    int rc = dup2(fd, fileno(fp));
    funlockfile(fp);
    int e = errno;
    close(fd);
    errno = e;
    return rc < 0 ? -1 : 0;
}
