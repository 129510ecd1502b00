/* SPDX-License-Identifier: Apache-2.0 */
/*
 * roster.h — a pool's client connections across its workers, as CLIENT LIST shows them: one
 * card per connection, with what the connection set on itself (CLIENT SETNAME, SETINFO, HELLO's
 * protocol) and when it last sent a command.
 *
 * Threads: the roster is the shared pool's, cards of every worker in one list under its mutex.
 * A card is written by its connection's worker alone: its name, library and protocol under the
 * mutex (so a listing on another worker reads them whole), its last command and activity as
 * relaxed atomics (one store each per request, no lock on the data path). Joining, leaving and
 * listing take the mutex: a connection's accept and close, and the rare CLIENT LIST.
 */
#ifndef CHASH_PROXY_ROSTER_H
#define CHASH_PROXY_ROSTER_H

#include "buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct px_roster px_roster;
typedef struct px_card px_card;

/* What a connection sets on itself. */
typedef enum px_card_field { PX_CARD_NAME, PX_CARD_LIB_NAME, PX_CARD_LIB_VER } px_card_field;

/* An empty roster; NULL when out of memory. */
px_roster *px_roster_new(void);
/* Frees it; every card must have left. NULL: nothing. */
void px_roster_free(px_roster *r);

/* A card for the accepted connection `stream` with this process-wide id, at loop time now_ms
 * (uv_now: one monotonic clock for every loop). NULL when out of memory. */
px_card *px_roster_join(px_roster *r, uint64_t id, uv_stream_t *stream, uint64_t now_ms);
/* The connection closed: its card leaves and is freed. NULL: nothing. */
void px_roster_leave(px_roster *r, px_card *c);

/* Sets a field (len 0: none), or the protocol (2 or 3). 0, or -1 when out of memory (the field
 * keeps its value). By the card's own worker only. */
int px_card_set(px_roster *r, px_card *c, px_card_field f, const char *p, size_t len);
void px_card_set_resp(px_roster *r, px_card *c, unsigned resp);
/* The card's name (NULL: none) and its length, for its own worker (no lock: only it writes). */
const char *px_card_name(const px_card *c, size_t *len);
/* A command from the connection arrived at now_ms: its name (a string that lives for the
 * process: the command table's). Two relaxed stores. */
void px_card_touch(px_card *c, const char *cmd, uint64_t now_ms);

/* CLIENT LIST's lines (self NULL: every card) or CLIENT INFO's (self's), at now_ms, appended to
 * out: "id=.. addr=.. laddr=.. fd=.. name=.. age=.. idle=.. db=0 cmd=.. user=default resp=..
 * lib-name=.. lib-ver=..\n" each, the fields Redis names that the proxy knows. 0, or -1 when out
 * of memory. Cost: O(cards) under the mutex. */
int px_roster_text(px_roster *r, const px_card *self, uint64_t now_ms, px_buf *out);

#endif /* CHASH_PROXY_ROSTER_H */
