/* SPDX-License-Identifier: Apache-2.0 */
/*
 * json.c — JSON strings safe to paste into a page (json.h).
 */
#include "json.h"

int px_json_string(px_buf *b, const char *s, size_t n, bool bytes)
{
    static const char hex[] = "0123456789abcdef";
    int rc = px_buf_append(b, "\"", 1);
    /* Runs of bytes that need no escape are appended whole: one append per run, not per byte. */
    size_t run = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        bool esc = ch == '"' || ch == '\\';
        bool code = ch < 0x20 || ch == 0x7f || ch == '<' || ch == '>' || ch == '&' ||
                    (bytes && ch >= 0x80);
        if (!esc && !code)
            continue;
        rc = px_buf_append(b, s + run, i - run);
        char e[6] = {'\\', (char)ch};
        if (code) {
            e[1] = 'u';
            e[2] = e[3] = '0';
            e[4] = hex[ch >> 4];
            e[5] = hex[ch & 15];
        }
        if (rc == 0)
            rc = px_buf_append(b, e, code ? 6 : 2);
        run = i + 1;
    }
    if (rc == 0)
        rc = px_buf_append(b, s + run, n - run);
    return rc == 0 ? px_buf_append(b, "\"", 1) : rc;
}
