/* SPDX-License-Identifier: Apache-2.0 */
/*
 * address.c — the strings inside a twemproxy config: integers, server entries, listen
 * addresses. Pure functions over (pointer, length); nothing here allocates.
 */
#include "config_internal.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define FORMAT_SERVER "expected \"host:port:weight [name]\" or \"/path/to/socket:weight [name]\""
#define FORMAT_LISTEN "expected \"host:port\" or \"/path/to/socket [permissions]\""

int ch__conf_parse_int(const char *s, size_t len, int *out)
{
    size_t i = 0;
    bool neg = false;
    if (len > 0 && s[0] == '-') {
        neg = true;
        i = 1;
    }
    if (i == len)
        return CH__NUM_BAD;
    for (size_t k = i; k < len; k++)
        if (s[k] < '0' || s[k] > '9')
            return CH__NUM_BAD;
    if (neg)
        return CH__NUM_NEG;
    long long v = 0;
    for (; i < len; i++) {
        v = v * 10 + (s[i] - '0');
        if (v > INT_MAX)
            return CH__NUM_RANGE;
    }
    *out = (int)v;
    return CH__NUM_OK;
}

const char *ch__conf_quote(char *buf, size_t cap, const char *s, size_t len)
{
    bool cut = false;
    if (len > CH__QUOTE_MAX) {
        len = CH__QUOTE_MAX;
        /* Do not end inside a UTF-8 sequence: back up over continuation bytes and the lead. */
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
            len--;
        cut = true;
    }
    size_t room = cap - 1;
    if (cut && room > 3)
        room -= 3;
    else
        cut = false;
    if (len > room)
        len = room;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (cut)
        memcpy(buf + len, "...", 3), len += 3;
    buf[len] = '\0';
    return buf;
}

static bool has_control(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return true;
    }
    return false;
}

/* Last occurrence of c in s[0..len), or NULL. */
static const char *find_last(const char *s, size_t len, char c)
{
    while (len > 0)
        if (s[--len] == c)
            return s + len;
    return NULL;
}

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* An IPv6 literal: hex digits, ':' and '.' (an embedded IPv4), with at least two colons, and an
 * optional "%zone" of letters, digits, '.', '-', '_'. */
static bool ipv6_ok(const char *s, size_t len)
{
    size_t colons = 0, i = 0;
    for (; i < len && s[i] != '%'; i++) {
        if (s[i] == ':')
            colons++;
        else if (!is_hex(s[i]) && s[i] != '.')
            return false;
    }
    if (colons < 2)
        return false;
    if (i < len) {
        if (++i == len)
            return false;
        for (; i < len; i++)
            if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '-' && s[i] != '_')
                return false;
    }
    return true;
}

/* A hostname or IPv4 address: letters, digits, '.', '-', '_'; not empty. */
static bool hostname_ok(const char *s, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '-' && s[i] != '_')
            return false;
    return true;
}

/* Validates the host part h[0..len) of "host:port" and sets out->host/host_len. */
static bool parse_host(const char *h, size_t len, ch__conf_addr *out, char *why, size_t whylen)
{
    char q[CH__QUOTE_MAX + 4];
    if (len == 0) {
        snprintf(why, whylen, "the host is empty");
        return false;
    }
    if (h[0] == '[') {
        if (len < 3 || h[len - 1] != ']' || !ipv6_ok(h + 1, len - 2)) {
            snprintf(why, whylen, "the host \"%s\" is not a valid [IPv6] address",
                     ch__conf_quote(q, sizeof q, h, len));
            return false;
        }
        out->host = h + 1;
        out->host_len = len - 2;
        return true;
    }
    if (memchr(h, ':', len) != NULL ? !ipv6_ok(h, len) : !hostname_ok(h, len)) {
        snprintf(why, whylen, "the host \"%s\" is not a hostname, IPv4 or IPv6 address",
                 ch__conf_quote(q, sizeof q, h, len));
        return false;
    }
    out->host = h;
    out->host_len = len;
    return true;
}

static bool parse_port(const char *p, size_t len, ch__conf_addr *out, char *why, size_t whylen)
{
    char q[CH__QUOTE_MAX + 4];
    int port;
    if (ch__conf_parse_int(p, len, &port) != CH__NUM_OK || port < 1 || port > 65535) {
        snprintf(why, whylen, "the port \"%s\" is not an integer in 1..65535",
                 ch__conf_quote(q, sizeof q, p, len));
        return false;
    }
    out->port = port;
    return true;
}

bool ch__conf_parse_server(const char *s, size_t len, ch__conf_addr *out, char *why,
                           size_t whylen)
{
    char q[CH__QUOTE_MAX + 4];
    ch__conf_addr a = {.perm = -1};
    if (has_control(s, len)) {
        snprintf(why, whylen, "it contains a control character (tab, newline, ...)");
        return false;
    }
    /* The name: everything after the first space, one word. */
    size_t main_len = len;
    const char *sp = memchr(s, ' ', len);
    if (sp != NULL) {
        main_len = (size_t)(sp - s);
        a.name = sp + 1;
        a.name_len = len - main_len - 1;
        if (a.name_len == 0) {
            snprintf(why, whylen, "the name after the space is empty");
            return false;
        }
        if (memchr(a.name, ' ', a.name_len) != NULL) {
            snprintf(why, whylen, "only one name may follow the weight, after a single space");
            return false;
        }
    }
    /* The weight: after the last colon of the address part. */
    const char *wc = find_last(s, main_len, ':');
    if (wc == NULL) {
        snprintf(why, whylen, FORMAT_SERVER);
        return false;
    }
    const char *w = wc + 1;
    size_t wlen = (size_t)(s + main_len - w);
    a.addr_len = (size_t)(wc - s);
    if (s[0] == '/') {
        a.host = s;
        a.host_len = a.addr_len;
        a.port = 0;
    } else {
        const char *pc = find_last(s, a.addr_len, ':');
        if (pc == NULL) {
            snprintf(why, whylen, FORMAT_SERVER);
            return false;
        }
        if (!parse_host(s, (size_t)(pc - s), &a, why, whylen) ||
            !parse_port(pc + 1, (size_t)(wc - pc - 1), &a, why, whylen))
            return false;
    }
    int rc = ch__conf_parse_int(w, wlen, &a.weight);
    if (rc == CH__NUM_RANGE) {
        snprintf(why, whylen, "the weight \"%s\" is out of range (maximum %d)",
                 ch__conf_quote(q, sizeof q, w, wlen), INT_MAX);
        return false;
    }
    if (rc != CH__NUM_OK || a.weight == 0) {
        snprintf(why, whylen, "the weight \"%s\" is not an integer > 0",
                 ch__conf_quote(q, sizeof q, w, wlen));
        return false;
    }
    *out = a;
    return true;
}

bool ch__conf_parse_listen(const char *s, size_t len, ch__conf_addr *out, char *why,
                           size_t whylen)
{
    char q[CH__QUOTE_MAX + 4];
    ch__conf_addr a = {.perm = -1};
    if (has_control(s, len)) {
        snprintf(why, whylen, "it contains a control character (tab, newline, ...)");
        return false;
    }
    if (len > 0 && s[0] == '/') {
        /* "/path [permissions]": the permissions after the last space, as twemproxy reads it. */
        a.addr_len = len;
        const char *sp = find_last(s, len, ' ');
        if (sp != NULL) {
            const char *p = sp + 1;
            size_t plen = (size_t)(s + len - p);
            unsigned mode = 0;
            bool ok = plen >= 1 && plen <= 4;
            for (size_t i = 0; ok && i < plen; i++) {
                ok = p[i] >= '0' && p[i] <= '7';
                mode = mode * 8 + (unsigned)(p[i] - '0');
            }
            if (!ok || mode > 0777) {
                snprintf(why, whylen, "the permissions \"%s\" are not an octal mode <= 0777",
                         ch__conf_quote(q, sizeof q, p, plen));
                return false;
            }
            a.perm = (int)mode;
            a.addr_len = (size_t)(sp - s);
        }
        a.host = s;
        a.host_len = a.addr_len;
        *out = a;
        return true;
    }
    const char *pc = find_last(s, len, ':');
    if (pc == NULL) {
        snprintf(why, whylen, FORMAT_LISTEN);
        return false;
    }
    /* twemproxy resolves the listen host as written, and "[::1]" does not resolve. */
    if (s[0] == '[') {
        snprintf(why, whylen,
                 "twemproxy takes no brackets here; write the IPv6 address bare, e.g. "
                 "\"::1:22121\"");
        return false;
    }
    if (!parse_host(s, (size_t)(pc - s), &a, why, whylen) ||
        !parse_port(pc + 1, (size_t)(s + len - pc - 1), &a, why, whylen))
        return false;
    a.addr_len = len;
    *out = a;
    return true;
}
