/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h — leveled log lines to stderr or the -o file, from any thread.
 */
#ifndef CHASH_PROXY_LOG_H
#define CHASH_PROXY_LOG_H

#include <stdint.h>
#include <stdio.h>

/* twemproxy's levels: 0 emerg .. 3 error, 4 warn, 5 notice (default), 6 info, 7+ debug. */
enum { PX_LOG_EMERG = 0, PX_LOG_ERR = 3, PX_LOG_WARN = 4, PX_LOG_NOTICE = 5, PX_LOG_INFO = 6,
       PX_LOG_DEBUG = 7 };

typedef struct px_log {
    FILE *fp;   /* stderr or the -o file; its descriptor is replaced in place when the file is
                   reopened (SIGHUP, SIGUSR1), so every copy keeps writing to the new file */
    int *level; /* messages above it are dropped; shared by every copy of the px_log (the
                   control thread's), changed at run time by SIGTTIN/SIGTTOU: atomic */
} px_log;

/* Reopens the log file path onto lg->fp (logrotate: the old file was moved away): a new file
 * is opened, and its descriptor put in place of the old one's (dup2), so writers of any thread
 * never see a closed stream. 0, or -1 with errno (the old file is kept). */
int px_log_reopen(px_log *lg, const char *path);

/* One line "[time] LEVEL message", written by one write(2) under the stream's lock so lines
 * never interleave. */
void px_log_write(px_log *lg, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* SIGTTIN raises *lg->level by one, SIGTTOU lowers it (0..11), as nutcracker's do, in the
 * signal handler itself, which also writes the line "[time] NOTICE SIGTTIN: log level now N"
 * (px_log_write's format) with write(2): the change takes effect and is logged at once, even
 * while the control thread is busy (a reload, the first read from etcd at start) or when a
 * fatal signal follows. lg's stream and level are the process's for good; the descriptor may
 * be reopened (px_log_reopen). 0, or -1 with errno. */
int px_log_level_signals(px_log *lg);

/* SIGSEGV, SIGBUS, SIGABRT, SIGFPE and SIGILL, in every build (sanitizers' included): one line
 * "[time] EMERG signal 11 (SEGV) received[ from pid N], core dumping; backtrace:" and the
 * stack's frames go to lg's descriptor by write(2) (async-signal-safe, no lock), then the
 * signal's default action, so the process dies of it and dumps core (twemproxy logs the same
 * words). A real fault in a build whose sanitizer handles it goes on to the sanitizer's handler
 * instead (its report says where; the line then ends "passed to the sanitizer's handler").
 * Call once, after px_log_level_signals (the same descriptor). 0, or -1 with errno. */
int px_log_fatal_signals(px_log *lg);

/* lg is a px_log *; x is anything with a px_log field named log (px_ctl, px_io). */
#define PX_LOGL(lg, lvl, ...)                                                                     \
    do {                                                                                          \
        if ((lvl) <= __atomic_load_n((lg)->level, __ATOMIC_RELAXED))                              \
            px_log_write((lg), (lvl), __VA_ARGS__);                                               \
    } while (0)
#define PX_LOG(x, lvl, ...) PX_LOGL(&(x)->log, lvl, __VA_ARGS__)

/* For a line that an attack or a fault could repeat without end: true (and *last set) when the
 * previous one was at least period_ms before now_ms, so such a line is written at most once per
 * period; the caller counts what it did not log and says so in the next line. */
static inline int px_log_due(uint64_t *last, uint64_t now_ms, uint64_t period_ms)
{
    if (*last != 0 && now_ms - *last < period_ms)
        return 0;
    *last = now_ms != 0 ? now_ms : 1;
    return 1;
}

#endif /* CHASH_PROXY_LOG_H */
