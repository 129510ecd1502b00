/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify.c — sd_notify(3) messages for the service manager (notify.h). libsystemd's
 * sd_notifyf returns 0 at once when $NOTIFY_SOCKET is unset, so outside a Type=notify unit
 * nothing is sent and nothing fails.
 */
#include "notify.h"

#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

void px_notify_ready(const char *status)
{
    (void)sd_notifyf(0, "READY=1\nMAINPID=%ld\nSTATUS=%s", (long)getpid(), status);
}

void px_notify_reloading(const char *trigger)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    unsigned long long usec =
        (unsigned long long)now.tv_sec * 1000000ull + (unsigned long long)now.tv_nsec / 1000ull;
    (void)sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading (%s)", usec, trigger);
}

void px_notify_reloaded(const char *status)
{
    (void)sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void px_notify_stopping(void)
{
    (void)sd_notify(0, "STOPPING=1\nSTATUS=shutting down");
}
