/*
 * command.h — the Redis command table and how each kind of command becomes fragments.
 */
#ifndef CHASH_PROXY_COMMAND_H
#define CHASH_PROXY_COMMAND_H

#include "backend.h"
#include "client.h"

/* Handles one parsed request of client c (argv points into the client's buffer, valid only during
 * the call; raw is the request's bytes as received). */
void px_command_handle(px_client *c, const ch_resp_arg *argv, size_t argc, const char *raw,
                       size_t rawlen);
/* A fragment's reply arrived (bytes of one complete RESP reply). */
void px_frag_reply(px_frag *f, const char *reply, size_t len, const ch_resp_reply *info);
/* A fragment cannot be served any more (its last candidate failed): answer with this error. */
void px_frag_error(px_frag *f, const char *msg);
/* A retryable multi-key fragment failed on its server: re-issue each key on its next candidate.
 * Returns true when it did (f is then consumed). */
bool px_frag_resplit(px_frag *f, size_t failed_server);

/* Appends a RESP bulk string. */
int px_buf_bulk(px_buf *b, const void *data, size_t len);

#endif /* CHASH_PROXY_COMMAND_H */
