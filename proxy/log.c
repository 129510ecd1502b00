/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.c — leveled log lines "[time] LEVEL message" to stderr or the -o file. Every thread logs to
 * the same stream; a line is written whole by one write(2) under the stream's lock, so lines
 * never interleave, neither with each other nor with the line a SIGTTIN or SIGTTOU handler
 * writes (px_log_level_signals), which can interrupt any thread at any point. A fatal signal's
 * handler (px_log_fatal_signals) writes its line the same way, without the lock (the thread it
 * interrupts may hold it).
 */
#include "log.h"

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = {"EMERG", "ALERT", "CRIT", "ERROR",
                                          "WARN",  "NOTICE", "INFO", "DEBUG"};

/* The local time's offset from UTC in seconds, as the last px_log_write found it: the signal
 * handler cannot call localtime_r (not async-signal-safe), so it adds this to the UTC clock.
 * Only a change of the offset (DST) since the last line makes its time an hour off. Atomic. */
static long utc_offset_s;

/* Writes all of buf to fd, retrying a short or interrupted write; async-signal-safe. */
static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        buf += w;
        len -= (size_t)w;
    }
}

void px_log_write(px_log *lg, int level, const char *fmt, ...)
{
    FILE *fp = lg->fp != NULL ? lg->fp : stderr;
    char ts[64];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    localtime_r(&now.tv_sec, &tm);
    __atomic_store_n(&utc_offset_s, tm.tm_gmtoff, __ATOMIC_RELAXED);
    strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);
    /* The whole line in one buffer (the stack's, or the heap's for a long one), for one write. */
    char stack[2048], *line = stack;
    int head = snprintf(stack, sizeof(stack), "[%s.%03ld] %s ", ts, now.tv_nsec / 1000000L,
                        level_names[level < 0 ? 0 : level > 7 ? 7 : level]);
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int body = vsnprintf(stack + head, sizeof(stack) - (size_t)head, fmt, ap);
    va_end(ap);
    size_t len = (size_t)head + (size_t)(body > 0 ? body : 0);
    if (len + 1 >= sizeof(stack)) {
        char *big = malloc(len + 2);
        if (big != NULL) {
            memcpy(big, stack, (size_t)head);
            vsnprintf(big + head, len + 1 - (size_t)head, fmt, again);
            line = big;
        } else {
            len = sizeof(stack) - 2; /* cut, rather than lost */
        }
    }
    va_end(again);
    line[len++] = '\n';
    flockfile(fp);
    fflush(fp); /* anything written through stdio first, in its order */
    write_all(fileno(fp), line, len);
    funlockfile(fp);
    if (line != stack)
        free(line);
}

int px_log_reopen(px_log *lg, const char *path)
{
    FILE *fp = lg->fp != NULL ? lg->fp : stderr;
    /* O_NONBLOCK: a FIFO put at the path without a reader fails (ENXIO) instead of blocking the
     * control thread; the descriptor is made blocking again before it takes the log's place. */
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
    if (fd < 0)
        return -1;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    flockfile(fp);
    fflush(fp);
    int rc = dup2(fd, fileno(fp));
    funlockfile(fp);
    int e = errno;
    close(fd);
    errno = e;
    return rc < 0 ? -1 : 0;
}

/* ---- SIGTTIN and SIGTTOU, handled in the handler ------------------------------------------------ */

/* What the handler changes and where it (and the fatal signals' handler) writes: set by
 * px_log_level_signals and px_log_fatal_signals, to the same value, before the handlers are
 * installed, never changed after. The descriptor's number stays when the file is
 * reopened (px_log_reopen puts the new file in its place). */
static int *sig_level;
static int sig_fd = -1;

/* The decimal digits of v (>= 0) at p, zero-padded to width; returns the end. */
static char *put_num(char *p, long v, int width)
{
    char d[24];
    int n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0 && n < (int)sizeof(d));
    while (n < width)
        d[n++] = '0';
    while (n > 0)
        *p++ = d[--n];
    return p;
}

/* The civil date of a day count since 1970-01-01 (proleptic Gregorian), by eras of 400 years
 * (146097 days): pure arithmetic, so a signal handler may call it. */
static void civil_from_days(long z, long *y, int *m, int *d)
{
    z += 719468; /* days from 0000-03-01, the start of an era's first year */
    long era = (z >= 0 ? z : z - 146096) / 146097;
    long doe = z - era * 146097;                                     /* [0, 146096] */
    long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
    long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);              /* [0, 365], from March */
    long mp = (5 * doy + 2) / 153;                                   /* [0, 11], March = 0 */
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* Copies the NUL-terminated s to p; returns the end. */
static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

/* "[YYYY-MM-DD HH:MM:SS.mmm] LEVEL ", as px_log_write begins a line, at p (at least 40 bytes);
 * returns the end. Async-signal-safe. */
static char *line_head(char *p, const char *level)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long t = (long)now.tv_sec + __atomic_load_n(&utc_offset_s, __ATOMIC_RELAXED);
    long days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400), secs = t - days * 86400;
    long y;
    int mo, d;
    civil_from_days(days, &y, &mo, &d);
    *p++ = '[';
    p = put_num(p, y, 4);
    *p++ = '-';
    p = put_num(p, mo, 2);
    *p++ = '-';
    p = put_num(p, d, 2);
    *p++ = ' ';
    p = put_num(p, secs / 3600, 2);
    *p++ = ':';
    p = put_num(p, secs / 60 % 60, 2);
    *p++ = ':';
    p = put_num(p, secs % 60, 2);
    *p++ = '.';
    p = put_num(p, now.tv_nsec / 1000000L, 3);
    p = put_str(p, "] ");
    p = put_str(p, level);
    *p++ = ' ';
    return p;
}

/* "[YYYY-MM-DD HH:MM:SS.mmm] NOTICE SIGTTIN: log level now N\n", as px_log_write formats it, at
 * buf (at least 96 bytes); returns its length. Async-signal-safe. */
static size_t level_line(char *buf, const char *signame, int level)
{
    char *p = line_head(buf, "NOTICE");
    p = put_str(p, signame);
    p = put_str(p, ": log level now ");
    p = put_num(p, level, 1);
    *p++ = '\n';
    return (size_t)(p - buf);
}

/* The level one up (SIGTTIN) or down (SIGTTOU) within 0..11, swapped in atomically (two
 * handlers may run at once on two threads), then the line. Only atomics, clock_gettime and
 * write(2): async-signal-safe. errno is the interrupted code's, so it is kept. */
static void level_cb(int signum)
{
    int saved = errno;
    int l = __atomic_load_n(sig_level, __ATOMIC_RELAXED), next;
    do
        next = signum == SIGTTIN ? (l < 11 ? l + 1 : 11) : (l > 0 ? l - 1 : 0);
    while (!__atomic_compare_exchange_n(sig_level, &l, next, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
    char line[128];
    write_all(sig_fd, line, level_line(line, signum == SIGTTIN ? "SIGTTIN" : "SIGTTOU", next));
    errno = saved;
}

int px_log_level_signals(px_log *lg)
{
    struct tm tm;
    time_t now = time(NULL);
    if (localtime_r(&now, &tm) != NULL)
        __atomic_store_n(&utc_offset_s, tm.tm_gmtoff, __ATOMIC_RELAXED);
    sig_level = lg->level;
    sig_fd = fileno(lg->fp != NULL ? lg->fp : stderr);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = level_cb;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGTTIN); /* one at a time per thread: no nested line */
    sigaddset(&sa.sa_mask, SIGTTOU);
    if (sigaction(SIGTTIN, &sa, NULL) != 0 || sigaction(SIGTTOU, &sa, NULL) != 0)
        return -1;
    return 0;
}

/* ---- fatal signals: a line, then the default action --------------------------------------------- */

static const struct {
    int sig;
    const char *name;
} fatal_sigs[] = {{SIGSEGV, "SEGV"}, {SIGBUS, "BUS"}, {SIGABRT, "ABRT"}, {SIGFPE, "FPE"},
                  {SIGILL, "ILL"}};
#define NFATAL (sizeof(fatal_sigs) / sizeof(fatal_sigs[0]))

/* The actions installed before ours (a sanitizer's, in its builds), by fatal_sigs' order: set
 * by px_log_fatal_signals before our handlers are, never changed after. */
static struct sigaction fatal_prev[NFATAL];

/* Whether a is a handler (not SIG_DFL or SIG_IGN). */
static bool is_handler(const struct sigaction *a)
{
    if ((a->sa_flags & SA_SIGINFO) != 0)
        return a->sa_sigaction != NULL;
    return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

/* The line (nutcracker's words: "signal 11 (SEGV) received, core dumping"; the sender's pid
 * when another process sent it), the stack of the thread it came to, then what the signal would
 * have done without us:
 *   - a fault (the kernel's si_code > 0: a bad address, an illegal instruction) in a build whose
 *     sanitizer handles it: its handler is put back and the handler returns, so the instruction
 *     faults again into it and its report says where (it then ends the process its own way, exit
 *     1 by default);
 *   - any other (a kill, abort(), a fault without such a handler): the default action, so the
 *     process dies of the signal and dumps core (a fault by faulting again; a sent signal by
 *     raising it, delivered once this handler returns and unblocks it).
 * Only write(2), backtrace_symbols_fd, sigaction, getpid and raise: async-signal-safe
 * (backtrace, too, once px_log_fatal_signals has called it: its first call loads libgcc). */
static void fatal_cb(int signum, siginfo_t *si, void *uc)
{
    (void)uc;
    size_t i = 0;
    while (i < NFATAL - 1 && fatal_sigs[i].sig != signum)
        i++;
    bool fault = si != NULL && si->si_code > 0 && signum != SIGABRT;
    bool chain = fault && is_handler(&fatal_prev[i]);
    char line[160];
    char *p = line_head(line, "EMERG");
    p = put_str(p, "signal ");
    p = put_num(p, signum, 1);
    p = put_str(p, " (");
    p = put_str(p, fatal_sigs[i].name);
    p = put_str(p, ") received");
    if (si != NULL && si->si_code <= 0 && si->si_pid != getpid()) {
        p = put_str(p, " from pid ");
        p = put_num(p, (long)si->si_pid, 1);
    }
    p = put_str(p, chain ? ", passed to the sanitizer's handler" : ", core dumping");
    p = put_str(p, "; backtrace:\n");
    write_all(sig_fd, line, (size_t)(p - line));
    void *frames[64];
    backtrace_symbols_fd(frames, backtrace(frames, 64), sig_fd);
    if (chain) {
        sigaction(signum, &fatal_prev[i], NULL);
        return;
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(signum, &dfl, NULL);
    if (!fault)
        raise(signum);
}

/* The calling thread's alternate signal stack, when it has none (a sanitizer's runtime sets its
 * own): a stack overflow's SIGSEGV cannot run a handler on the stack that overflowed. Other
 * threads have none of ours; there an overflow kills the process without the line. */
static char fatal_stack[64 * 1024];

int px_log_fatal_signals(px_log *lg)
{
    sig_fd = fileno(lg->fp != NULL ? lg->fp : stderr);
    void *warm[1];
    (void)backtrace(warm, 1);
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && (cur.ss_flags & SS_DISABLE) != 0) {
        stack_t ss = {.ss_sp = fatal_stack, .ss_size = sizeof(fatal_stack), .ss_flags = 0};
        (void)sigaltstack(&ss, NULL);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = fatal_cb;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NFATAL; i++)
        if (sigaction(fatal_sigs[i].sig, &sa, &fatal_prev[i]) != 0)
            return -1;
    return 0;
}
