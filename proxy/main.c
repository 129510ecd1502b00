/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c — chash-proxy's command line (twemproxy's flags), config test, daemonizing, the pid file
 * and the log file, the number of worker threads; then the proxy runs until SIGINT or SIGTERM.
 */

#include "ctl.h"
#include "file.h"
#include "fleet.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
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

int main(int argc, char **argv)
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
    const char *conf = DEFAULT_CONF, *log_file = NULL, *pid_file = NULL, *token_file = NULL;
    const char *stats_addr = DEFAULT_STATS_ADDR, *metrics_addr = DEFAULT_METRICS_ADDR;
    long metrics_port = 0, threads = 0;
    long stats_port = DEFAULT_STATS_PORT, interval = DEFAULT_STATS_INTERVAL;
    long level = DEFAULT_LOG_LEVEL, mbuf = 0;
    bool test = false, daemon_mode = false, no_hot_keys = false;
    uint64_t max_memory = default_memory_budget();
    px_fleet_options fleet = {NULL, PX_FLEET_DEFAULT_TTL_S};
    long fleet_ttl = PX_FLEET_DEFAULT_TTL_S;
    static const char *admin_hosts[MAX_ADMIN_HOSTS]; /* argv's strings */
    size_t nadmin_hosts = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "hVtdDv:o:c:s:a:i:p:m:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("This is chash-proxy-%s\n", PX_VERSION);
            return 0;
        case 't':
            test = true;
            break;
        case 'd':
            daemon_mode = true;
            break;
        case 'D':
            describe_stats();
            return 0;
        case 'v':
            if (!parse_int(optarg, 0, 11, &level)) {
                fprintf(stderr, "chash-proxy: option -v requires a number from 0 to 11\n");
                return 1;
            }
            break;
        case 'o':
            log_file = optarg;
            break;
        case 'c':
            conf = optarg;
            break;
        case 's':
            if (!parse_int(optarg, 1, 65535, &stats_port)) {
                fprintf(stderr, "chash-proxy: option -s requires a valid port\n");
                return 1;
            }
            break;
        case 'a':
            stats_addr = optarg;
            break;
        case 'i':
            if (!parse_int(optarg, 1, 86400000, &interval)) {
                fprintf(stderr, "chash-proxy: option -i requires a number of milliseconds\n");
                return 1;
            }
            break;
        case 'p':
            pid_file = optarg;
            break;
        case OPT_METRICS_PORT:
            if (!parse_int(optarg, 1, 65535, &metrics_port)) {
                fprintf(stderr, "chash-proxy: option --metrics-port requires a valid port\n");
                return 1;
            }
            break;
        case OPT_THREADS:
            if (!parse_int(optarg, 1, MAX_THREADS, &threads)) {
                fprintf(stderr, "chash-proxy: option --threads requires a number from 1 to %d\n",
                        MAX_THREADS);
                return 1;
            }
            break;
        case OPT_METRICS_ADDR:
            metrics_addr = optarg;
            break;
        case OPT_ADMIN_TOKEN_FILE:
            token_file = optarg;
            break;
        case OPT_NO_HOT_KEYS:
            no_hot_keys = true;
            break;
        case OPT_ADMIN_ALLOW_HOST:
            if (!host_name(optarg) || nadmin_hosts == MAX_ADMIN_HOSTS) {
                fprintf(stderr, "chash-proxy: option --admin-allow-host requires a host name "
                                "(letters, digits, '-' and '.', at most 253, without a port), "
                                "at most %d times\n", MAX_ADMIN_HOSTS);
                return 1;
            }
            admin_hosts[nadmin_hosts++] = optarg;
            break;
        case OPT_FLEET_ID:
            if (optarg[0] == '\0' || strlen(optarg) >= 100 || strchr(optarg, '/') != NULL) {
                fprintf(stderr, "chash-proxy: option --fleet-id requires 1 to 99 characters "
                                "without '/'\n");
                return 1;
            }
            fleet.id = optarg;
            break;
        case OPT_FLEET_TTL:
            if (!parse_int(optarg, 2, 3600, &fleet_ttl)) {
                fprintf(stderr, "chash-proxy: option --fleet-ttl requires seconds from 2 to "
                                "3600\n");
                return 1;
            }
            fleet.ttl_s = (int)fleet_ttl;
            break;
        case OPT_MAX_MEMORY:
            if (!parse_bytes(optarg, &max_memory)) {
                fprintf(stderr, "chash-proxy: option --max-memory requires a number of bytes "
                                "(with k, m or g), or 0\n");
                return 1;
            }
            break;
        case 'm':
            if (!parse_int(optarg, 1, 1L << 30, &mbuf)) {
                fprintf(stderr, "chash-proxy: option -m requires a number of bytes\n");
                return 1;
            }
            break;
        default:
            usage(stderr);
            return 1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "chash-proxy: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 1;
    }

    static char token[512]; /* lives as long as the process */
    if (token_file != NULL && !read_token(token_file, token, sizeof(token)))
        return 1;
    ch_config *cfg = NULL;
    ch_config_error err;
    int rc = ch_config_load(conf, &cfg, &err);
    if (test) {
        if (rc != 0) {
            char msg[600];
            fprintf(stderr, "chash-proxy: configuration file '%s' syntax is invalid\n", conf);
            fprintf(stderr, "chash-proxy: %s\n", ch_config_error_str(&err, msg, sizeof(msg)));
            return 1;
        }
        char why[1024];
        if (px_fleet_check(cfg, why, sizeof(why)) != 0 ||
            px_ctl_check(cfg, why, sizeof(why)) != 0) {
            fprintf(stderr, "chash-proxy: configuration file '%s' cannot be served\n", conf);
            fprintf(stderr, "chash-proxy: %s\n", why);
            ch_config_free(cfg);
            return 1;
        }
        fprintf(stderr, "chash-proxy: configuration file '%s' syntax is ok\n", conf);
        ch_config_free(cfg);
        return 0;
    }
    if (rc != 0) {
        char msg[600];
        fprintf(stderr, "chash-proxy: %s\n", ch_config_error_str(&err, msg, sizeof(msg)));
        return 1;
    }

    px_ctl px = {0};
    px.log_level = (int)level;
    px.log.level = &px.log_level;
    px.log.fp = stderr;
    /* SIGHUP and SIGUSR1 reopen the log file: keep its absolute path too (-d changes the directory). */
    char log_abs[PATH_MAX], cwd[PATH_MAX];
    if (log_file != NULL && log_file[0] != '/' && getcwd(cwd, sizeof(cwd)) != NULL &&
        (size_t)snprintf(log_abs, sizeof(log_abs), "%s/%s", cwd, log_file) < sizeof(log_abs))
        px.log_path = log_abs;
    else
        px.log_path = log_file;
    /* SIGHUP re-reads the file: keep its absolute path, since -d changes the directory. */
    char conf_abs[PATH_MAX];
    px.conf_path = realpath(conf, conf_abs) != NULL ? conf_abs : conf;
    if (log_file != NULL) {
        const char *why;
        px.log.fp = open_output(log_file, "a", false, &why);
        if (px.log.fp == NULL) {
            fprintf(stderr, "chash-proxy: cannot open log file '%s': %s\n", log_file,
                    why != NULL ? why : strerror(errno));
            ch_config_free(cfg);
            return 1;
        }
    }
    /* From here on the level changes at once, whatever the control thread is doing. */
    if (px_log_level_signals(&px.log) != 0) {
        fprintf(stderr, "chash-proxy: cannot handle SIGTTIN and SIGTTOU: %s\n", strerror(errno));
        ch_config_free(cfg);
        return 1;
    }
    if (daemon_mode && daemonize() != 0) {
        fprintf(stderr, "chash-proxy: cannot daemonize: %s\n", strerror(errno));
        return 1;
    }
    bool wrote_pid = false;
    if (pid_file != NULL) {
        const char *why;
        FILE *fp = open_output(pid_file, "w", true, &why);
        if (fp == NULL) {
            PX_LOG(&px, PX_LOG_ERR, "cannot write pid file '%s': %s", pid_file,
                   why != NULL ? why : strerror(errno));
            ch_config_free(cfg);
            return 1;
        }
        fprintf(fp, "%ld\n", (long)getpid());
        fclose(fp);
        wrote_pid = true;
    }
    signal(SIGPIPE, SIG_IGN);
    if (px_log_fatal_signals(&px.log) != 0) /* a crash would then leave no line: said now */
        PX_LOG(&px, PX_LOG_WARN, "cannot handle fatal signals: %s", strerror(errno));
    px.stats_addr = stats_addr;
    px.stats_port = (int)stats_port;
    px.stats_interval_ms = (uint64_t)interval;
    px.metrics_addr = metrics_addr;
    px.metrics_port = (int)metrics_port;
    px.admin_token = token_file != NULL ? token : NULL;
    px.admin_hosts = admin_hosts;
    px.nadmin_hosts = nadmin_hosts;
    px.no_hot_keys = no_hot_keys;

    unsigned nworkers = threads > 0 ? (unsigned)threads : px_default_threads();
    if (nworkers > MAX_THREADS)
        nworkers = MAX_THREADS;

    PX_LOG(&px, PX_LOG_NOTICE, "chash-proxy-%s starting, pid %ld, config '%s', %u worker%s",
           PX_VERSION, (long)getpid(), conf, nworkers, nworkers == 1 ? "" : "s");
    px_mem_budget = max_memory;
    if (max_memory > 0)
        PX_LOG(&px, PX_LOG_NOTICE, "memory budget %llu MiB (--max-memory): requests are refused "
               "while buffers and requests hold more", (unsigned long long)(max_memory >> 20));
    else
        PX_LOG(&px, PX_LOG_NOTICE, "no memory budget (--max-memory 0)");
    int status = 0;
    px_fleet_boot *boot = NULL;
    if (px_fleet_bootstrap(cfg, &px.log, &fleet, &boot) != 0) {
        PX_LOG(&px, PX_LOG_ERR, "cannot start: see the errors above");
        ch_config_free(cfg);
        status = 1;
    } else if (px_ctl_init(&px, cfg, nworkers) != 0) { /* takes cfg over */
        px_fleet_boot_free(boot);
        PX_LOG(&px, PX_LOG_ERR, "cannot start: see the errors above");
        status = 1;
    } else if (px_fleet_start(&px, boot) != 0) { /* takes boot over */
        PX_LOG(&px, PX_LOG_ERR, "cannot start: see the errors above");
        status = 1;
    } else {
        px_ctl_run(&px);
    }
    px_ctl_free(&px);
    if (wrote_pid)
        unlink(pid_file);
    PX_LOG(&px, PX_LOG_NOTICE, "exiting with status %d", status);
    /* The level handlers write to the log's descriptor: not once it is closed (and perhaps
     * reused). Ignored, not their default action, which would stop the process. */
    signal(SIGTTIN, SIG_IGN);
    signal(SIGTTOU, SIG_IGN);
    if (px.log.fp != stderr)
        fclose(px.log.fp);
    return status;
}
