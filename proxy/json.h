/* SPDX-License-Identifier: Apache-2.0 */
/*
 * json.h — JSON strings for the proxy's JSON outputs (GET /-/hotkeys, the stats port), written
 * so that a page which pastes them into its HTML or a <script> element takes them as text.
 */
#ifndef CHASH_PROXY_JSON_H
#define CHASH_PROXY_JSON_H

#include "buf.h"

#include <stdbool.h>
#include <stddef.h>

/* Appends s[0, n) to b as a JSON string: '"' and '\\' escaped with a backslash; control bytes,
 * DEL, '<', '>' and '&' as \u00XX, so the text cannot end a <script> element, open a tag or
 * start an entity (as Go's encoding/json does); bytes from 0x80 as they are (UTF-8 text: a
 * name from the config) or, when bytes is true, each as the code point of its value
 * (\u0080..\u00ff: any byte string, a client's key, is valid JSON and a reader gets its bytes
 * back as Latin-1). 0, or -1 when out of memory. O(n). */
int px_json_string(px_buf *b, const char *s, size_t n, bool bytes);

#endif /* CHASH_PROXY_JSON_H */
