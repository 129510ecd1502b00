/* SPDX-License-Identifier: Apache-2.0 */
/*
 * address_fuzz.c — libFuzzer target for the config's address and number parsers
 * (src/config/address.c): "servers" entries, "listen" values, twemproxy's integers, and the
 * quoting used in error messages. Checks each parser's contract: on success the parts lie inside
 * the input and hold what the grammar allows (ports 1..65535 or 0 for a socket, weights > 0,
 * modes <= 0777); on failure a reason is given; a quote is printable and bounded.
 */
#include "config_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inside(const char *s, size_t len, const char *p, size_t plen)
{
    if (p != NULL && (p < s || p + plen > s + len))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    char why[160];
    ch__conf_addr a;

    why[0] = '\0';
    if (ch__conf_parse_server(s, size, &a, why, sizeof(why))) {
        inside(s, size, a.host, a.host_len);
        inside(s, size, a.name, a.name_len);
        if (a.addr_len > size || a.weight < 1 || a.port < 0 || a.port > 65535)
            abort();
    } else if (why[0] == '\0') {
        abort();
    }
    why[0] = '\0';
    if (ch__conf_parse_listen(s, size, &a, why, sizeof(why))) {
        inside(s, size, a.host, a.host_len);
        if (a.addr_len > size || a.port < 0 || a.port > 65535 || a.perm > 0777)
            abort();
    } else if (why[0] == '\0') {
        abort();
    }
    int n = 0;
    int rc = ch__conf_parse_int(s, size, &n);
    if (rc == CH__NUM_OK && n < 0)
        abort();
    char q[CH__QUOTE_MAX + 4];
    const char *out = ch__conf_quote(q, sizeof(q), s, size);
    size_t qlen = strlen(out);
    if (qlen >= sizeof(q))
        abort();
    for (size_t i = 0; i < qlen; i++)
        if ((unsigned char)out[i] < 0x20)
            abort(); /* control bytes become '?' */
    return 0;
}
