/* SPDX-License-Identifier: Apache-2.0 */
/*
 * file.h — the one check of every file the proxy reads (the TLS certificates, keys and CAs,
 * the admin token; the config's own is libchash-config's, the same rule): it must be a regular
 * file. A FIFO, a device or a directory is refused with the file's name, never read: opening a
 * FIFO blocks until a writer comes, and reading a device may never end, which would hang -t,
 * the start, or the control thread in a reload (and with it /metrics and every signal's work).
 */
#ifndef CHASH_PROXY_FILE_H
#define CHASH_PROXY_FILE_H

#include <stddef.h>

/* Opens path read-only without blocking (O_NONBLOCK, so a FIFO cannot block the open), checks
 * with fstat that it is a regular file, and returns the descriptor in blocking mode again
 * (O_CLOEXEC). -1 otherwise, with why: "WHAT 'PATH': not a regular file (a FIFO)", or the
 * open's error. what names the file for the operator (a config key, an option). */
int px_file_open_regular(const char *path, const char *what, char *why, size_t whylen);

/* The same check for a file another library then opens by name (OpenSSL's *_file calls): 0,
 * or -1 with why. A file replaced between this check and that open is not caught: whoever can
 * do that can already write the proxy's configuration. */
int px_file_check_regular(const char *path, const char *what, char *why, size_t whylen);

#endif /* CHASH_PROXY_FILE_H */
