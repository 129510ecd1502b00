/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c — chash-proxy's command line (twemproxy's flags), config test, daemonizing, the pid file
 * and the log file, the number of worker threads; then the proxy runs until SIGINT or SIGTERM.
 * main has twemproxy's shape (its nc.c): the options with their defaults, -t, the pre-run
 * (config, log, -d, pid file, signals), the run, the post-run.
 */

#include "ctl.h"
#include "file.h"
#include "dns_watch.h"
#include "fleet.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_CONF "conf/nutcracker.yml"
#define DEFAULT_STATS_PORT 22222
/* twemproxy binds its stats to 0.0.0.0; the proxy's stats are loopback-only unless -a says
 * otherwise (docs/PROXY.md, "Differences from twemproxy"). */
#define DEFAULT_STATS_ADDR "127.0.0.1"
#define DEFAULT_STATS_INTERVAL 30000
#define DEFAULT_LOG_LEVEL PX_LOG_NOTICE
#define DEFAULT_METRICS_ADDR "127.0.0.1"
#define MAX_THREADS 256
enum { OPT_METRICS_PORT = 256, OPT_METRICS_ADDR, OPT_THREADS, OPT_ADMIN_TOKEN_FILE,
       OPT_MAX_MEMORY, OPT_FLEET_ID, OPT_FLEET_TTL, OPT_ADMIN_ALLOW_HOST,
       OPT_NO_HOT_KEYS }; /* long options */
#define MAX_ADMIN_HOSTS 32

/* Half the machine's memory: a budget that refuses requests well before the kernel's OOM
 * killer would end the process (and every client's connection with it). */
static uint64_t default_memory_budget(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size / 2 : 0;
}

/* A byte count with an optional k, m or g suffix (powers of 1024). */
static bool parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno != 0 || s[0] == '-')
        return false;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end != '\0' || (shift > 0 && v > (UINT64_MAX >> shift)))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

static void usage(FILE *fp)
{
    fprintf(fp,
            "Usage: chash-proxy [-?hVdDt] [-v verbosity level] [-o output file]\n"
            "                   [-c conf file] [-s stats port] [-a stats addr]\n"
            "                   [-i stats interval] [-p pid file] [-m mbuf size]\n"
            "                   [--metrics-port port] [--metrics-addr addr] [--threads N]\n"
            "                   [--admin-token-file file] [--admin-allow-host name]...\n"
            "                   [--max-memory bytes] [--no-hot-keys]\n"
            "                   [--fleet-id id] [--fleet-ttl seconds]\n"
            "\n"
            "Options:\n"
            "  -h, --help             : this help\n"
            "  -V, --version          : show version and exit\n"
            "  -t, --test-conf        : test configuration for syntax errors and exit\n"
            "  -d, --daemonize        : run as a daemon\n"
            "  -D, --describe-stats   : print stats description and exit\n"
            "  -v, --verbose=N        : set logging level (default: %d, min: 0, max: 11)\n"
            "  -o, --output=S         : set logging file (default: stderr)\n"
            "  -c, --conf-file=S      : set configuration file (default: %s)\n"
            "  -s, --stats-port=N     : set stats monitoring port (default: %d)\n"
            "  -a, --stats-addr=S     : set stats monitoring ip (default: %s)\n"
            "  -i, --stats-interval=N : set stats aggregation interval in msec (default: %d "
            "msec; accepted, stats are live)\n"
            "  -p, --pid-file=S       : set pid file (default: off)\n"
            "  -m, --mbuf-size=N      : accepted for compatibility; ignored\n"
            "      --metrics-port=N   : serve Prometheus metrics on http://ADDR:N/metrics, "
            "reload on POST /-/reload "
            "(default: off)\n"
            "      --metrics-addr=S   : set metrics ip (default: %s)\n"
            "      --admin-token-file=S : POST /-/reload needs \"Authorization: Bearer <the "
            "file's first line>\"\n"
            "      --admin-allow-host=S : a Host the metrics port accepts besides IP addresses "
            "and\n"
            "                           localhost (a name scrapers use; repeatable)\n"
            "      --max-memory=N     : refuse requests while buffers and requests hold more than N "
            "bytes\n"
            "                           (k, m, g suffixes; 0: no budget; default: half the "
            "memory, here %llu MiB)\n"
            "      --no-hot-keys      : no hot-key detection (no GET /-/hotkeys, INFO section "
            "or\n"
            "                           hot-key metrics; docs/OPERATIONS.md, \"Hot keys\")\n"
            "      --threads=N        : worker threads, each with its own event loop, listener "
            "and\n"
            "                           backend connections (default: half the CPUs available, "
            "here %u; max %d)\n"
            "      --fleet-id=S       : this instance's id in etcd, for pools with a "
            "\"membership\" key\n"
            "                           (default: host:pid; docs/FLEET.md)\n"
            "      --fleet-ttl=N      : seconds its etcd record outlives it (lease TTL; "
            "default: %d)\n",
            DEFAULT_LOG_LEVEL, DEFAULT_CONF, DEFAULT_STATS_PORT, DEFAULT_STATS_ADDR,
            DEFAULT_STATS_INTERVAL, DEFAULT_METRICS_ADDR,
            (unsigned long long)(default_memory_budget() >> 20), px_default_threads(), MAX_THREADS,
            PX_FLEET_DEFAULT_TTL_S);
}

static void describe_stats(void)
{
    printf("pool stats:\n"
           "  client_eof          \"# eof on client connections\"\n"
           "  client_err          \"# errors on client connections\"\n"
           "  client_connections  \"# active client connections\"\n"
           "  server_ejects       \"# times backend server was ejected\"\n"
           "  forward_error       \"# times we encountered a forwarding error\"\n"
           "  fragments           \"# fragments created from a multi-vector request\"\n"
           "  membership_version  \"the pool's membership version (chash)\"\n"
           "\n"
           "server stats:\n"
           "  server_eof          \"# eof on server connections\"\n"
           "  server_err          \"# errors on server connections\"\n"
           "  server_timedout     \"# timeouts on server connections\"\n"
           "  server_connections  \"# active server connections\"\n"
           "  server_ejected_at   \"timestamp when server was ejected in usec since epoch\"\n"
           "  requests            \"# requests\"\n"
           "  request_bytes       \"total request bytes\"\n"
           "  responses           \"# responses\"\n"
           "  response_bytes      \"total response bytes\"\n"
           "  in_queue            \"# requests in incoming queue\"\n"
           "  in_queue_bytes      \"current request bytes in incoming queue\"\n"
           "  out_queue           \"# requests in outgoing queue\"\n"
           "  out_queue_bytes     \"current request bytes in outgoing queue\"\n");
}

static bool parse_int(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* A DNS name as --admin-allow-host takes it: 1 to 253 letters, digits, '-' and '.'. */
static bool host_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '.'))
            return false;
    return true;
}

/* The admin token into buf: the file's first line, without its line end; never printed.
 * false (with a message) when it cannot be read or is empty. */
static bool read_token(const char *path, char *buf, size_t cap)
{
    char why[PATH_MAX + 128];
    int fd = px_file_open_regular(path, "admin token file", why, sizeof(why));
    FILE *fp = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (fp == NULL) {
        if (fd >= 0)
            snprintf(why, sizeof(why), "admin token file '%s': %s", path, strerror(errno));
        fprintf(stderr, "chash-proxy: cannot read the %s\n", why);
        if (fd >= 0)
            close(fd);
        return false;
    }
    char *line = fgets(buf, (int)cap, fp);
    fclose(fp);
    size_t n = line != NULL ? strcspn(buf, "\r\n") : 0;
    if (n == 0) {
        fprintf(stderr, "chash-proxy: admin token file '%s' has no token on its first line\n",
                path);
        return false;
    }
    buf[n] = '\0';
    return true;
}

/* A file the proxy writes (-o, -p), opened with O_NONBLOCK so that a FIFO without a reader
 * fails at once (ENXIO) instead of blocking the start; mode "a" appends, "w" truncates. The
 * log may be a FIFO with a reader or a terminal (-o /dev/stdout); the pid file must be a
 * regular file. The stream is in blocking mode again. NULL with errno, or with *why set. */
static FILE *open_output(const char *path, const char *mode, bool regular_only,
                         const char **why)
{
    int flags = O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY |
                (mode[0] == 'a' ? O_APPEND : 0);
    *why = NULL;
    int fd = open(path, flags, 0644);
    if (fd < 0) {
        if (errno == ENXIO)
            *why = "a FIFO that nobody reads (writing to it would block)";
        return NULL;
    }
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) != 0 || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    if (regular_only && !S_ISREG(st.st_mode)) {
        close(fd);
        *why = "not a regular file";
        return NULL;
    }
    if (mode[0] == 'w' && S_ISREG(st.st_mode) && ftruncate(fd, 0) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    FILE *fp = fdopen(fd, mode);
    if (fp == NULL) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return fp;
}

static int daemonize(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0)
        _exit(0);
    if (setsid() < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0)
        _exit(0);
    if (chdir("/") != 0)
        return -1;
    umask(0);
    int fd = open("/dev/null", O_RDWR);
    if (fd < 0)
        return -1;
    dup2(fd, STDIN_FILENO);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    if (fd > STDERR_FILENO)
        close(fd);
    return 0;
}

/* ---- the run, in twemproxy's shape (nc.c): options, -t, pre-run, run, post-run ----------- */

/* What the command line asks for, with its defaults; the strings are argv's. It lives as long
 * as main, which the px_ctl that points into it (admin token, hosts, paths) does not outlive. */
typedef struct px_opts {
    const char *conf, *log_file, *pid_file, *token_file, *stats_addr, *metrics_addr;
    long metrics_port, threads, stats_port, interval, level, mbuf, fleet_ttl;
    bool test, daemon_mode, no_hot_keys;
    uint64_t max_memory;
    px_fleet_options fleet;
    const char *admin_hosts[MAX_ADMIN_HOSTS];
    size_t nadmin_hosts;
    char token[512];               /* the admin token file's token */
    char log_abs[PATH_MAX];        /* -o and -c made absolute: -d changes the directory */
    char conf_abs[PATH_MAX];
    unsigned nworkers;
    bool wrote_pid;
} px_opts;

enum { OPTS_RUN = 0, OPTS_DONE = 1, OPTS_BAD = -1 }; /* what get_options says */

static void set_default_options(px_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->conf = DEFAULT_CONF;
    o->stats_addr = DEFAULT_STATS_ADDR;
    o->metrics_addr = DEFAULT_METRICS_ADDR;
    o->stats_port = DEFAULT_STATS_PORT;
    o->interval = DEFAULT_STATS_INTERVAL;
    o->level = DEFAULT_LOG_LEVEL;
    o->max_memory = default_memory_budget();
    o->fleet = (px_fleet_options){NULL, PX_FLEET_DEFAULT_TTL_S};
    o->fleet_ttl = PX_FLEET_DEFAULT_TTL_S;
}

/* Says why an option is refused, on stderr: OPTS_BAD. */
static int refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int refuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("chash-proxy: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return OPTS_BAD;
}

/* An option that takes a number. */
static int number_option(px_opts *o, int opt, const char *arg)
{
    switch (opt) {
    case 'v':
        return parse_int(arg, 0, 11, &o->level) ? OPTS_RUN
                                                : refuse("option -v requires a number from 0 "
                                                         "to 11");
    case 's':
        return parse_int(arg, 1, 65535, &o->stats_port) ? OPTS_RUN
                                                        : refuse("option -s requires a valid "
                                                                 "port");
    case 'i':
        return parse_int(arg, 1, 86400000, &o->interval)
                   ? OPTS_RUN
                   : refuse("option -i requires a number of milliseconds");
    case 'm':
        return parse_int(arg, 1, 1L << 30, &o->mbuf)
                   ? OPTS_RUN
                   : refuse("option -m requires a number of bytes");
    case OPT_METRICS_PORT:
        return parse_int(arg, 1, 65535, &o->metrics_port)
                   ? OPTS_RUN
                   : refuse("option --metrics-port requires a valid port");
    case OPT_THREADS:
        return parse_int(arg, 1, MAX_THREADS, &o->threads)
                   ? OPTS_RUN
                   : refuse("option --threads requires a number from 1 to %d", MAX_THREADS);
    case OPT_FLEET_TTL:
        if (!parse_int(arg, 2, 3600, &o->fleet_ttl))
            return refuse("option --fleet-ttl requires seconds from 2 to 3600");
        o->fleet.ttl_s = (int)o->fleet_ttl;
        return OPTS_RUN;
    case OPT_MAX_MEMORY:
        return parse_bytes(arg, &o->max_memory)
                   ? OPTS_RUN
                   : refuse("option --max-memory requires a number of bytes (with k, m or g), "
                            "or 0");
    default:
        usage(stderr);
        return OPTS_BAD;
    }
}

/* One option of the command line (arg: its argument, if it takes one). */
static int take_option(px_opts *o, int opt, const char *arg)
{
    switch (opt) {
    case 'h': usage(stdout); return OPTS_DONE;
    case 'V': printf("This is chash-proxy-%s\n", PX_VERSION); return OPTS_DONE;
    case 'D': describe_stats(); return OPTS_DONE;
    case 't': o->test = true; return OPTS_RUN;
    case 'd': o->daemon_mode = true; return OPTS_RUN;
    case 'o': o->log_file = arg; return OPTS_RUN;
    case 'c': o->conf = arg; return OPTS_RUN;
    case 'a': o->stats_addr = arg; return OPTS_RUN;
    case 'p': o->pid_file = arg; return OPTS_RUN;
    case OPT_METRICS_ADDR: o->metrics_addr = arg; return OPTS_RUN;
    case OPT_ADMIN_TOKEN_FILE: o->token_file = arg; return OPTS_RUN;
    case OPT_NO_HOT_KEYS: o->no_hot_keys = true; return OPTS_RUN;
    case OPT_ADMIN_ALLOW_HOST:
        if (!host_name(arg) || o->nadmin_hosts == MAX_ADMIN_HOSTS)
            return refuse("option --admin-allow-host requires a host name (letters, digits, "
                          "'-' and '.', at most 253, without a port), at most %d times",
                          MAX_ADMIN_HOSTS);
        o->admin_hosts[o->nadmin_hosts++] = arg;
        return OPTS_RUN;
    case OPT_FLEET_ID:
        if (arg[0] == '\0' || strlen(arg) >= 100 || strchr(arg, '/') != NULL)
            return refuse("option --fleet-id requires 1 to 99 characters without '/'");
        o->fleet.id = arg;
        return OPTS_RUN;
    default:
        return number_option(o, opt, arg);
    }
}

/* twemproxy's flags and ours: OPTS_RUN, OPTS_DONE (-h, -V, -D: answered), or OPTS_BAD (told on
 * stderr). */
static int get_options(int argc, char **argv, px_opts *o)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},          {"version", no_argument, NULL, 'V'},
        {"test-conf", no_argument, NULL, 't'},     {"daemonize", no_argument, NULL, 'd'},
        {"describe-stats", no_argument, NULL, 'D'}, {"verbose", required_argument, NULL, 'v'},
        {"output", required_argument, NULL, 'o'},  {"conf-file", required_argument, NULL, 'c'},
        {"stats-port", required_argument, NULL, 's'},
        {"stats-addr", required_argument, NULL, 'a'},
        {"stats-interval", required_argument, NULL, 'i'},
        {"pid-file", required_argument, NULL, 'p'}, {"mbuf-size", required_argument, NULL, 'm'},
        {"metrics-port", required_argument, NULL, OPT_METRICS_PORT},
        {"metrics-addr", required_argument, NULL, OPT_METRICS_ADDR},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"admin-token-file", required_argument, NULL, OPT_ADMIN_TOKEN_FILE},
        {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
        {"fleet-id", required_argument, NULL, OPT_FLEET_ID},
        {"fleet-ttl", required_argument, NULL, OPT_FLEET_TTL},
        {"admin-allow-host", required_argument, NULL, OPT_ADMIN_ALLOW_HOST},
        {"no-hot-keys", no_argument, NULL, OPT_NO_HOT_KEYS},
        {NULL, 0, NULL, 0},
    };
    int opt, rc = OPTS_RUN;
    while (rc == OPTS_RUN &&
           (opt = getopt_long(argc, argv, "hVtdDv:o:c:s:a:i:p:m:", longopts, NULL)) != -1)
        rc = take_option(o, opt, optarg);
    if (rc == OPTS_RUN && optind < argc) {
        fprintf(stderr, "chash-proxy: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return OPTS_BAD;
    }
    return rc;
}

/* -t: the configuration loaded and checked as a start would check it. true when it is ok. */
static bool test_conf(const px_opts *o)
{
    ch_config *cfg = NULL;
    ch_config_error err;
    if (ch_config_load(o->conf, &cfg, &err) != 0) {
        char msg[600];
        fprintf(stderr, "chash-proxy: configuration file '%s' syntax is invalid\n", o->conf);
        fprintf(stderr, "chash-proxy: %s\n", ch_config_error_str(&err, msg, sizeof(msg)));
        return false;
    }
    char why[1024];
    bool ok = px_fleet_check(cfg, why, sizeof(why)) == 0 &&
              px_dns_check(cfg, why, sizeof(why)) == 0 &&
              px_ctl_check(cfg, why, sizeof(why)) == 0;
    if (ok) {
        fprintf(stderr, "chash-proxy: configuration file '%s' syntax is ok\n", o->conf);
    } else {
        fprintf(stderr, "chash-proxy: configuration file '%s' cannot be served\n", o->conf);
        fprintf(stderr, "chash-proxy: %s\n", why);
    }
    ch_config_free(cfg);
    return ok;
}

/* The log: its level, its file opened (-o, kept by its absolute path, which SIGHUP and SIGUSR1
 * reopen), and the level signals handled from here on. 0, or -1 (told on stderr). */
static int log_init(px_opts *o, px_ctl *px)
{
    px->log_level = (int)o->level;
    px->log.level = &px->log_level;
    px->log.fp = stderr;
    char cwd[PATH_MAX];
    if (o->log_file != NULL && o->log_file[0] != '/' && getcwd(cwd, sizeof(cwd)) != NULL &&
        (size_t)snprintf(o->log_abs, sizeof(o->log_abs), "%s/%s", cwd, o->log_file) <
            sizeof(o->log_abs))
        px->log_path = o->log_abs;
    else
        px->log_path = o->log_file;
    if (o->log_file != NULL) {
        const char *why;
        px->log.fp = open_output(o->log_file, "a", false, &why);
        if (px->log.fp == NULL) {
            fprintf(stderr, "chash-proxy: cannot open log file '%s': %s\n", o->log_file,
                    why != NULL ? why : strerror(errno));
            return -1;
        }
    }
    /* From here on the level changes at once, whatever the control thread is doing. */
    if (px_log_level_signals(&px->log) != 0) {
        fprintf(stderr, "chash-proxy: cannot handle SIGTTIN and SIGTTOU: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

/* -p: the pid file written (a regular file). 0, or -1 (logged). */
static int pidfile_create(px_opts *o, px_ctl *px)
{
    if (o->pid_file == NULL)
        return 0;
    const char *why;
    FILE *fp = open_output(o->pid_file, "w", true, &why);
    if (fp == NULL) {
        PX_LOG(px, PX_LOG_ERR, "cannot write pid file '%s': %s", o->pid_file,
               why != NULL ? why : strerror(errno));
        return -1;
    }
    fprintf(fp, "%ld\n", (long)getpid());
    fclose(fp);
    o->wrote_pid = true;
    return 0;
}

/* Everything before the proxy starts: the configuration loaded into *cfg, the log, -d, the pid
 * file, the signals of the process, px's settings from the options. 0, or -1 (told; nothing to
 * free but the log file, which the exit closes). */
static int pre_run(px_opts *o, px_ctl *px, ch_config **cfg)
{
    ch_config_error err;
    if (ch_config_load(o->conf, cfg, &err) != 0) {
        char msg[600];
        fprintf(stderr, "chash-proxy: %s\n", ch_config_error_str(&err, msg, sizeof(msg)));
        return -1;
    }
    /* SIGHUP re-reads the file: keep its absolute path, since -d changes the directory. */
    px->conf_path = realpath(o->conf, o->conf_abs) != NULL ? o->conf_abs : o->conf;
    if (log_init(o, px) != 0)
        goto fail;
    if (o->daemon_mode && daemonize() != 0) {
        fprintf(stderr, "chash-proxy: cannot daemonize: %s\n", strerror(errno));
        goto fail;
    }
    if (pidfile_create(o, px) != 0)
        goto fail;
    signal(SIGPIPE, SIG_IGN);
    if (px_log_fatal_signals(&px->log) != 0) /* a crash would then leave no line: said now */
        PX_LOG(px, PX_LOG_WARN, "cannot handle fatal signals: %s", strerror(errno));
    px->stats_addr = o->stats_addr;
    px->stats_port = (int)o->stats_port;
    px->stats_interval_ms = (uint64_t)o->interval;
    px->metrics_addr = o->metrics_addr;
    px->metrics_port = (int)o->metrics_port;
    px->admin_token = o->token_file != NULL ? o->token : NULL;
    px->admin_hosts = o->admin_hosts;
    px->nadmin_hosts = o->nadmin_hosts;
    px->no_hot_keys = o->no_hot_keys;
    o->nworkers = o->threads > 0 ? (unsigned)o->threads : px_default_threads();
    if (o->nworkers > MAX_THREADS)
        o->nworkers = MAX_THREADS;
    PX_LOG(px, PX_LOG_NOTICE, "chash-proxy-%s starting, pid %ld, config '%s', %u worker%s",
           PX_VERSION, (long)getpid(), o->conf, o->nworkers, o->nworkers == 1 ? "" : "s");
    px_mem_budget = o->max_memory;
    if (o->max_memory > 0)
        PX_LOG(px, PX_LOG_NOTICE, "memory budget %llu MiB (--max-memory): requests are refused "
               "while buffers and requests hold more", (unsigned long long)(o->max_memory >> 20));
    else
        PX_LOG(px, PX_LOG_NOTICE, "no memory budget (--max-memory 0)");
    return 0;
fail:
    ch_config_free(*cfg);
    *cfg = NULL;
    return -1;
}

/* The proxy, from the first read of etcd until SIGINT or SIGTERM; takes cfg over. Its exit
 * status. */
static int run(px_opts *o, px_ctl *px, ch_config *cfg)
{
    int status = 0;
    px_fleet_boot *boot = NULL;
    px_dns_boot *dboot = NULL;
    if (px_fleet_bootstrap(cfg, &px->log, &o->fleet, &boot) != 0 ||
        px_dns_bootstrap(cfg, &px->log, &dboot) != 0) {
        PX_LOG(px, PX_LOG_ERR, "cannot start: see the errors above");
        px_fleet_boot_free(boot);
        ch_config_free(cfg);
        status = 1;
    } else if (px_ctl_init(px, cfg, o->nworkers) != 0) { /* takes cfg over */
        px_fleet_boot_free(boot);
        px_dns_boot_free(dboot);
        PX_LOG(px, PX_LOG_ERR, "cannot start: see the errors above");
        status = 1;
    } else if (px_fleet_start(px, boot) != 0) { /* takes boot over */
        px_dns_boot_free(dboot);
        PX_LOG(px, PX_LOG_ERR, "cannot start: see the errors above");
        status = 1;
    } else if (px_dns_start(px, dboot) != 0) { /* takes dboot over */
        px_dns_stop(px);
        PX_LOG(px, PX_LOG_ERR, "cannot start: see the errors above");
        status = 1;
    } else {
        px_ctl_run(px);
    }
    px_ctl_free(px);
    return status;
}

static void post_run(const px_opts *o, px_ctl *px, int status)
{
    if (o->wrote_pid)
        unlink(o->pid_file);
    PX_LOG(px, PX_LOG_NOTICE, "exiting with status %d", status);
    /* The level handlers write to the log's descriptor: not once it is closed (and perhaps
     * reused). Ignored, not their default action, which would stop the process. */
    signal(SIGTTIN, SIG_IGN);
    signal(SIGTTOU, SIG_IGN);
    if (px->log.fp != stderr)
        fclose(px->log.fp);
}

int main(int argc, char **argv)
{
    px_opts o;
    set_default_options(&o);
    int rc = get_options(argc, argv, &o);
    if (rc != OPTS_RUN)
        return rc == OPTS_DONE ? 0 : 1;
    if (o.token_file != NULL && !read_token(o.token_file, o.token, sizeof(o.token)))
        return 1;
    if (o.test)
        return test_conf(&o) ? 0 : 1;
    px_ctl px = {0};
    ch_config *cfg = NULL;
    if (pre_run(&o, &px, &cfg) != 0)
        return 1;
    int status = run(&o, &px, cfg);
    post_run(&o, &px, status);
    return status;
}
