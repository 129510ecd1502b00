/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config_internal.h — internals of the config loader, shared by its files and its tests.
 * Not installed. Names are ch__ (see DESIGN.md).
 */
#ifndef CHASH_CONFIG_INTERNAL_H
#define CHASH_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ch_config ch_config;
typedef struct ch_config_error ch_config_error;

/* ch_config_load() of text[0, len) instead of a file, named name in errors: for the fuzz
 * target (fuzz/config_fuzz.c) and tests. Same results and errors as the file would give. */
int ch__config_load_text(const char *name, const void *text, size_t len, ch_config **out,
                         ch_config_error *err);

/* ---- numbers ------------------------------------------------------------------------------ */

/* Outcomes of ch__conf_parse_int(). */
enum {
    CH__NUM_OK = 0,
    CH__NUM_BAD = -1,   /* empty, or not only decimal digits after an optional '-' */
    CH__NUM_NEG = -2,   /* '-' followed by digits: twemproxy accepts no sign */
    CH__NUM_RANGE = -3, /* digits only, but greater than INT_MAX */
};

/* Parses s[0..len) as twemproxy does: decimal digits only (leading zeros allowed, still
 * decimal), no sign, no spaces. Returns CH__NUM_OK and *out, or a CH__NUM_* failure.
 * Cost: O(len). */
int ch__conf_parse_int(const char *s, size_t len, int *out);

/* ---- addresses ---------------------------------------------------------------------------- */

/* The parts of a "servers" entry or of a "listen" value. Pointers point into the input. */
typedef struct ch__conf_addr {
    size_t addr_len;  /* bytes of "host:port" or "/path" at the start of the input */
    const char *host; /* the host without IPv6 brackets, or the socket path */
    size_t host_len;
    int port;         /* 1..65535; 0 for a unix socket */
    int weight;       /* servers: > 0; listen: 0 */
    const char *name; /* servers: the name after the weight, or NULL */
    size_t name_len;
    int perm;         /* listen on a unix socket: the mode, or -1 when not given */
} ch__conf_addr;

/* Parses "host:port:weight [name]" or "/path/to/socket:weight [name]", reading the colons from
 * the right as twemproxy does (so an unbracketed IPv6 host works too). The host must be a
 * hostname, an IPv4 address or an IPv6 address (optionally in brackets); the port 1..65535; the
 * weight an integer > 0; the optional name one word after one space.
 * Returns true and *out, or false with a reason (a clause, no location) in why.
 * Cost: O(len). */
bool ch__conf_parse_server(const char *s, size_t len, ch__conf_addr *out, char *why,
                           size_t whylen);

/* Parses a listen value: "host:port" or "/path/to/socket [permissions]", permissions an octal
 * mode <= 0777; an IPv6 host is written without brackets (twemproxy cannot resolve "[::1]").
 * Same contract as ch__conf_parse_server(). */
bool ch__conf_parse_listen(const char *s, size_t len, ch__conf_addr *out, char *why,
                           size_t whylen);

/* Writes a printable copy of s[0..len) to buf (cap > 0 bytes, terminated): control bytes become
 * '?', and text beyond CH__QUOTE_MAX bytes is cut at a UTF-8 boundary and ends in "...".
 * Returns buf. For quoting user text inside error messages. */
#define CH__QUOTE_MAX 48
const char *ch__conf_quote(char *buf, size_t cap, const char *s, size_t len);

/* ---- allocation failure injection (tests only) --------------------------------------------- */
#ifdef CH_CONFIG_FAILPOINTS
/* Defined by the test program, not by the library. Every allocation the loader itself makes
 * (libyaml's are not counted) increments ch__config_allocs; the one numbered ch__config_fail_at
 * (0-based) fails. ch__config_live counts allocations not yet freed. */
extern long ch__config_fail_at;
extern long ch__config_allocs;
extern long ch__config_live;
#endif

#endif
