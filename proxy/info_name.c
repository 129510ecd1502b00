/* SPDX-License-Identifier: Apache-2.0 */
/* info_name.c — info_name.h. */
#include "info_name.h"

#include <stdbool.h>

int px_info_name(px_buf *b, const char *s)
{
    int rc = 0;
    for (; rc == 0 && *s != '\0'; s++) {
        char ch = *s;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
        rc = px_buf_append(b, ok ? &ch : "_", 1);
    }
    return rc != 0 ? -1 : 0;
}
