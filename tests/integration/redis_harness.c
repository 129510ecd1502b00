/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_harness.c — see redis_harness.h.
 */
#define _GNU_SOURCE /* mkdtemp, prctl */

#include "redis_harness.h"

#include <hiredis/hiredis.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READY_TIMEOUT_MS 10000.0 /* a server not answering PING by then failed to start */
#define START_TRIES 5            /* fresh ports tried when a port was taken meanwhile */

/* The fleet (one per process), and whether it is running: the cleanup handlers read them and
 * make async-signal-safe calls only. */
static rh_fleet g_storage;
static rh_fleet *volatile g_fleet;
static bool g_handlers_installed;

/* ---- time -------------------------------------------------------------------------------------- */

double rh_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void rh_sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* ---- redis-server on PATH ---------------------------------------------------------------------- */

static bool on_path(const char *name)
{
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
    char dir[4096];
    for (const char *p = path; *p != '\0';) {
        size_t len = strcspn(p, ":");
        if (len > 0 && len < sizeof(dir) - strlen(name) - 2) {
            snprintf(dir, sizeof(dir), "%.*s/%s", (int)len, p, name);
            if (access(dir, X_OK) == 0)
                return true;
        }
        p += len;
        if (*p == ':')
            p++;
    }
    return false;
}

bool rh_have_redis(void)
{
    return on_path("redis-server");
}

void rh_require_redis(const char *prog)
{
    if (rh_have_redis())
        return;
    const char *ci = getenv("CI");
    bool in_ci = ci != NULL && ci[0] != '\0';
    fprintf(stderr,
            "%s: redis-server not found on PATH (Debian: apt-get install redis-server; "
            "scripts/bootstrap installs it)%s\n",
            prog, in_ci ? ": CI is set, so this is a failure" : ": skipped");
    exit(in_ci ? 1 : 77);
}

/* ---- cleanup ----------------------------------------------------------------------------------- */

/* Async-signal-safe: kill, unlink and rmdir only. */
static void kill_and_remove(rh_fleet *f)
{
    for (size_t i = 0; i < f->n; i++) {
        if (f->servers[i].pid > 0)
            kill(f->servers[i].pid, SIGKILL);
        unlink(f->servers[i].log);
    }
    rmdir(f->dir);
}

static void on_signal(int sig)
{
    rh_fleet *f = g_fleet;
    if (f != NULL)
        kill_and_remove(f);
    /* SA_RESETHAND restored the default action; the signal is delivered again when the handler
     * returns, and the process ends as it would have. */
    raise(sig);
}

static void on_exit_cleanup(void)
{
    if (g_fleet != NULL)
        rh_fleet_stop(g_fleet);
}

static void install_handlers(void)
{
    if (g_handlers_installed)
        return;
    g_handlers_installed = true;
    atexit(on_exit_cleanup);
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGABRT};
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
        sigaction(sigs[k], &sa, NULL);
}

/* Removes whatever is left in dir (non-recursive: the servers write only files), then dir. */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

void rh_fleet_stop(rh_fleet *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->n; i++) {
        rh_server *s = &f->servers[i];
        if (s->pid > 0) {
            kill(s->pid, SIGKILL);
            while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
            }
            s->pid = 0;
        }
    }
    if (f->dir[0] != '\0') {
        remove_dir(f->dir);
        f->dir[0] = '\0';
    }
    f->n = 0;
    if (g_fleet == f)
        g_fleet = NULL;
}

/* Removes the temp dirs of harness processes that died without cleaning up (SIGKILL, e.g. a
 * ctest timeout: their servers died with them, by PR_SET_PDEATHSIG). A dir's name carries its
 * creator's pid. */
static void sweep_orphans(const char *tmp)
{
    DIR *d = opendir(tmp);
    if (d == NULL)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        long pid;
        char rest[16];
        if (sscanf(e->d_name, "chash-redis-%ld-%15s", &pid, rest) != 2 || pid <= 0)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive, or not ours to judge */
        snprintf(path, sizeof(path), "%s/%s", tmp, e->d_name);
        remove_dir(path);
    }
    closedir(d);
}

/* ---- servers ----------------------------------------------------------------------------------- */

/* A loopback port that was free a moment ago (the kernel's choice for port 0). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* In the child: die with the parent, then become redis-server with output to the log. */
static void exec_server(const rh_fleet *f, const rh_server *s, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127); /* the parent died before prctl() took effect */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int in = open("/dev/null", O_RDONLY);
    int out = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (in < 0 || out < 0)
        _exit(127);
    dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    char port[16];
    snprintf(port, sizeof(port), "%d", s->port);
    char *argv[] = {"redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", (char *)f->dir, "--daemonize", "no",
                    "--logfile", "", "--loglevel", "warning", NULL};
    execvp(argv[0], argv);
    _exit(127);
}

static bool answers_ping(int port)
{
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    bool ok = false;
    if (c != NULL && c->err == 0 && redisSetTimeout(c, tv) == REDIS_OK) {
        redisReply *r = redisCommand(c, "PING");
        ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
        if (r != NULL)
            freeReplyObject(r);
    }
    if (c != NULL)
        redisFree(c);
    return ok;
}

/* Forks server s and waits until it answers. Returns 0, or -1 when it exited or never answered
 * (then it is killed and reaped). */
static int spawn(rh_fleet *f, rh_server *s)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("redis_harness: fork");
        return -1;
    }
    if (pid == 0)
        exec_server(f, s, parent);
    s->pid = pid;
    s->paused = false;
    double deadline = rh_now_ms() + READY_TIMEOUT_MS;
    while (rh_now_ms() < deadline) {
        if (waitpid(pid, NULL, WNOHANG) == pid) { /* it exited: e.g. the port was taken */
            s->pid = 0;
            return -1;
        }
        if (answers_ping(s->port))
            return 0;
        rh_sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    s->pid = 0;
    return -1;
}

static void server_setup(rh_fleet *f, rh_server *s, int port)
{
    s->port = port;
    snprintf(s->addr, sizeof(s->addr), "127.0.0.1:%d", port);
    snprintf(s->log, sizeof(s->log), "%s/redis-%d.log", f->dir, port);
}

static void print_log_tail(const rh_server *s)
{
    FILE *in = fopen(s->log, "r");
    if (in == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof(line), in) != NULL)
        fprintf(stderr, "  redis %d: %s", s->port, line);
    fclose(in);
}

rh_fleet *rh_fleet_start(size_t n)
{
    if (g_fleet != NULL)
        rh_fleet_stop(g_fleet); /* left running by a test that failed half-way */
    rh_fleet *f = &g_storage;
    memset(f, 0, sizeof(*f));
    if (n == 0 || n > RH_MAX_SERVERS) {
        fprintf(stderr, "redis_harness: bad fleet size %zu\n", n);
        return NULL;
    }
    const char *tmp = getenv("TMPDIR");
    tmp = tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp";
    sweep_orphans(tmp);
    snprintf(f->dir, sizeof(f->dir), "%s/chash-redis-%ld-XXXXXX", tmp, (long)getpid());
    if (mkdtemp(f->dir) == NULL) {
        perror("redis_harness: mkdtemp");
        f->dir[0] = '\0';
        return NULL;
    }
    install_handlers();
    g_fleet = f;
    for (size_t i = 0; i < n; i++) {
        rh_server *s = &f->servers[i];
        f->n = i + 1;
        int ok = -1;
        for (int t = 0; t < START_TRIES && ok != 0; t++) {
            int port = free_port();
            if (port < 0)
                break;
            server_setup(f, s, port);
            ok = spawn(f, s);
        }
        if (ok != 0) {
            fprintf(stderr, "redis_harness: redis-server %zu did not start\n", i);
            print_log_tail(s);
            rh_fleet_stop(f);
            return NULL;
        }
    }
    return f;
}

int rh_kill(rh_fleet *f, size_t i)
{
    if (i >= f->n || f->servers[i].pid <= 0)
        return -1;
    rh_server *s = &f->servers[i];
    kill(s->pid, SIGKILL);
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    s->pid = 0;
    s->paused = false;
    return 0;
}

int rh_restart(rh_fleet *f, size_t i)
{
    if (i >= f->n)
        return -1;
    rh_server *s = &f->servers[i];
    if (s->pid > 0)
        rh_kill(f, i);
    /* The same port: a killed server's listening socket is gone at once (redis binds with
     * SO_REUSEADDR), but allow a few tries. */
    for (int t = 0; t < START_TRIES; t++) {
        if (spawn(f, s) == 0)
            return 0;
        rh_sleep_ms(50);
    }
    fprintf(stderr, "redis_harness: redis-server %zu did not restart on port %d\n", i, s->port);
    print_log_tail(s);
    return -1;
}

static int signal_and_wait(rh_server *s, int sig, int wait_flag)
{
    if (s->pid <= 0 || kill(s->pid, sig) != 0)
        return -1;
    int status;
    pid_t r;
    while ((r = waitpid(s->pid, &status, wait_flag)) < 0 && errno == EINTR) {
    }
    return r == s->pid ? 0 : -1;
}

int rh_pause(rh_fleet *f, size_t i)
{
    if (i >= f->n || signal_and_wait(&f->servers[i], SIGSTOP, WUNTRACED) != 0)
        return -1;
    f->servers[i].paused = true;
    return 0;
}

int rh_resume(rh_fleet *f, size_t i)
{
    if (i >= f->n || signal_and_wait(&f->servers[i], SIGCONT, WCONTINUED) != 0)
        return -1;
    f->servers[i].paused = false;
    return 0;
}

long long rh_dbsize(const rh_fleet *f, size_t i)
{
    if (i >= f->n || f->servers[i].pid <= 0)
        return -1;
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", f->servers[i].port, tv);
    long long n = -1;
    if (c != NULL && c->err == 0 && redisSetTimeout(c, tv) == REDIS_OK) {
        redisReply *r = redisCommand(c, "DBSIZE");
        if (r != NULL && r->type == REDIS_REPLY_INTEGER)
            n = r->integer;
        if (r != NULL)
            freeReplyObject(r);
    }
    if (c != NULL)
        redisFree(c);
    return n;
}
