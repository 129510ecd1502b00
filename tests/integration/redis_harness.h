/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_harness.h — real redis-server processes for the integration tests and the lost-node
 * demo: started on free loopback ports in a temp dir, without persistence (--save '',
 * --appendonly no), then killed (SIGKILL), hung (SIGSTOP) and resumed (SIGCONT), or restarted on
 * the same port.
 *
 * Cleanup is unconditional: every server the harness started is killed, and its temp dir
 * removed, at exit (atexit), on SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGABRT (the handler
 * cleans up, then the signal takes its default course), and if the parent dies any other way
 * the kernel kills the servers (PR_SET_PDEATHSIG). One fleet per process at a time, kept in
 * the harness's own static storage, so a test that fails half-way (cmocka jumps out of it)
 * leaves nothing the cleanup cannot find; the next rh_fleet_start() stops it first.
 */
#ifndef CHASH_REDIS_HARNESS_H
#define CHASH_REDIS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define RH_MAX_SERVERS 16

typedef struct rh_server {
    pid_t pid;       /* > 0 while running (or stopped) */
    int port;        /* its loopback port, kept across restarts */
    bool paused;     /* SIGSTOPped */
    char addr[32];   /* "127.0.0.1:<port>" */
    char log[320];   /* its stdout and stderr */
} rh_server;

typedef struct rh_fleet {
    char dir[256];   /* the temp dir */
    size_t n;
    rh_server servers[RH_MAX_SERVERS];
} rh_fleet;

/* Whether redis-server is on PATH. */
bool rh_have_redis(void);

/* When redis-server is not on PATH: prints why to stderr and exits 77 (ctest's skip) when the
 * environment variable CI is empty or unset, 1 when it is set. prog names the caller. */
void rh_require_redis(const char *prog);

/* Starts n (1..RH_MAX_SERVERS) servers and waits until each answers PING (stopping first a
 * fleet still running). Returns the fleet (the harness's static storage), or NULL after
 * printing why (everything started is stopped again). */
rh_fleet *rh_fleet_start(size_t n);

/* Kills server i with SIGKILL and reaps it. Returns 0, or -1 when it was not running. */
int rh_kill(rh_fleet *f, size_t i);

/* Starts server i again on its port (empty: no persistence) and waits until it answers PING.
 * Returns 0, or -1 after printing why. */
int rh_restart(rh_fleet *f, size_t i);

/* SIGSTOP / SIGCONT server i, and wait until the kernel reports it stopped / continued. */
int rh_pause(rh_fleet *f, size_t i);
int rh_resume(rh_fleet *f, size_t i);

/* Kills every server of the fleet and removes its temp dir. Idempotent. */
void rh_fleet_stop(rh_fleet *f);

/* Number of keys in server i (DBSIZE over a direct connection), or -1. */
long long rh_dbsize(const rh_fleet *f, size_t i);

/* Sleeps ms milliseconds (restarting after signals). */
void rh_sleep_ms(long ms);

/* CLOCK_MONOTONIC in milliseconds. */
double rh_now_ms(void);

#endif /* CHASH_REDIS_HARNESS_H */
