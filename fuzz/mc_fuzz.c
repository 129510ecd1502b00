/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mc_fuzz.c — libFuzzer target for proxy/proto/mc.c (built and run by fuzz/run.sh mc).
 *
 * Each input is read as a stream of requests and, separately (from its second byte), as a stream
 * of replies to the command its first byte picks (19 of them: every command with replies and a
 * few with none), under the default limits and under tiny ones (so every limit is
 * reached with small inputs). Messages are consumed one after another while calls are OK (and,
 * for requests, past a CH_MC_ERROR whose skip lies inside the input). Every call checks the
 * contract and traps on a violation:
 *   - OK: 0 < consumed <= len; every span (tokens, line, key, noreply, quiet, opaque, data, a
 *     reply's line/text/data) lies inside the message; keys are a token range; a storage
 *     request ends with its data block and "\r\n"; the line rebuilt without noreply/q, and a
 *     get line rebuilt for a subset of its keys, parse again to the same command, without
 *     noreply/q, with the expected keys; a base64 key decodes.
 *   - A get reply's VALUE blocks, walked with ch_mc_value_next, are as many as it says, lie end
 *     to end from 0 and are followed by its last line.
 *   - INCOMPLETE: need > len.  ERROR: consumed > 0;  ERROR / CLOSE: a one-line reason.
 *   - For each OK message, the caller's loop is replayed on its prefixes: growing to *need each
 *     time (jumping, after 48 steps, to the last 16 bytes: skip_ahead), every prefix is
 *     INCOMPLETE with len < need <= the message's length, until the whole message parses to the
 *     same result. Prefixes are exact-size heap copies (ASan sees overreads).
 *   - A copy's reply (ch_mc_copy_read), on each mg reply framed and on the whole input after
 *     its first byte: a hit only for one whole VA reply, its data the scan's; a miss only for
 *     one whole EN; a hit's exptime (ch_mc_copy_exptime) is memcached's: 0 for t-1, t up to 30
 *     days, beyond it an absolute time up to CH_MC_EXPTIME_MAX. A copy's fetch
 *     (ch_mc_copy_fetch) for the input's first bytes as a key parses as mg with that key.
 */
#include "mc.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TOK_CAP 32

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static void check_err(const char *err, size_t errlen)
{
    const char *nul = memchr(err, '\0', errlen);
    check(nul != NULL);
    size_t n = (size_t)(nul - err);
    check(n > 0 && n < errlen);
    for (size_t i = 0; i < n; i++)
        check(err[i] >= 0x20 && err[i] < 0x7f);
}

static void check_span(ch_mc_span s, size_t len)
{
    check(s.off <= len && s.len <= len - s.off);
}

static char *dup_exact(const char *p, size_t n)
{
    char *b = malloc(n ? n : 1);
    if (!b)
        abort();
    if (n)
        memcpy(b, p, n);
    return b;
}

/* The next prefix of the caller's loop: need, except that inside a long line (where need grows
 * a byte at a time) the walk jumps, after 48 steps, to the last 16 bytes of the message, so a
 * message costs O(length), not O(length^2); every prefix walked is still checked. */
static size_t skip_ahead(size_t need, size_t total, size_t steps)
{
    if (steps == 48 && need + 16 < total)
        return total - 16;
    return need;
}

/* ---- requests ------------------------------------------------------------------------------ */

static ch_mc_status request(const char *buf, size_t len, const ch_mc_limits *lim,
                            ch_mc_request *r, ch_mc_span *tok, size_t *consumed)
{
    size_t need = 12345;
    char err[128];
    memset(r, 0, sizeof *r);
    r->tok = tok;
    r->tok_cap = TOK_CAP;
    *consumed = 12345;
    ch_mc_status st = ch_mc_parse_request(buf, len, lim, r, consumed, &need, err, sizeof err);
    switch (st) {
    case CH_MC_OK: {
        const size_t c = *consumed;
        check(c > 0 && c <= len && need == 0);
        check(r->cmd < CH_MC_CMD_COUNT && r->tok == tok && r->tok_cap == TOK_CAP);
        for (size_t i = 0; i < r->ntokens && i < TOK_CAP; i++) {
            check_span(r->tok[i], r->line.len);
            check(r->tok[i].len > 0);
        }
        check(r->line.off == 0 && r->line.len < r->line_len && r->line_len <= c);
        check(r->line_len - r->line.len <= 2);
        check((size_t)r->key_first + r->nkeys <= r->ntokens);
        if (r->nkeys) {
            check(r->key_first >= 1);
            check_span(r->key, r->line.len);
            if (r->key_first < TOK_CAP)
                check(r->tok[r->key_first].off == r->key.off &&
                      r->tok[r->key_first].len == r->key.len);
        }
        check_span(r->noreply, r->line.len);
        check_span(r->quiet, r->line.len);
        check_span(r->opaque, r->line.len);
        if (r->quiet.len)
            check(r->quiet.len == 1 && buf[r->quiet.off] == 'q');
        if (r->noreply.len)
            check(r->noreply.len == 7 && memcmp(buf + r->noreply.off, "noreply", 7) == 0);
        if (ch_mc_cmd_props(r->cmd) & CH_MC_P_STORAGE) {
            check(r->data.off == r->line_len && r->data.len == r->bytes);
            check((size_t)r->data.off + r->data.len + 2 == c);
            check(buf[c - 2] == '\r' && buf[c - 1] == '\n');
        } else {
            check(c == r->line_len && r->data.len == 0);
        }
        if (r->b64) {
            unsigned char key[4096];
            long n = ch_mc_b64_decode(buf + r->key.off, r->key.len, key, sizeof key);
            check(n > 0 && (size_t)n <= lim->max_key);
        }
        break;
    }
    case CH_MC_INCOMPLETE:
        check(need > len && *consumed == 0 && r->ntokens == 0);
        break;
    case CH_MC_ERROR:
        check(*consumed > 0 && need == 0);
        check_err(err, sizeof err);
        break;
    case CH_MC_CLOSE:
        check(*consumed == 0 && need == 0);
        check_err(err, sizeof err);
        break;
    default:
        check(0);
    }
    return st;
}

/* Replays the caller's wait-for-need loop on the prefixes of a request that parsed OK. */
static void request_prefixes(const char *msg, size_t total, const ch_mc_limits *lim,
                             const ch_mc_request *full)
{
    size_t p = 0, steps = 0;
    for (;;) {
        char *b = dup_exact(msg, p);
        ch_mc_span tok[TOK_CAP];
        ch_mc_request r = {.tok = tok, .tok_cap = TOK_CAP};
        size_t consumed = 0, need = 0;
        ch_mc_status st = ch_mc_parse_request(b, p, lim, &r, &consumed, &need, NULL, 0);
        free(b);
        if (p == total) {
            check(st == CH_MC_OK && consumed == total && r.cmd == full->cmd &&
                  r.ntokens == full->ntokens && r.nkeys == full->nkeys);
            return;
        }
        check(st == CH_MC_INCOMPLETE && need > p && need <= total);
        p = skip_ahead(need, total, ++steps);
    }
}

/* The line rebuilt without noreply and q (with the data block for a storage command) parses
 * to the same command; a get line for a subset of the keys parses with those keys. */
static void rebuilt(const char *buf, const ch_mc_limits *lim, const ch_mc_request *r)
{
    if (r->ntokens > TOK_CAP)
        return;
    const unsigned props = ch_mc_cmd_props(r->cmd);
    size_t n = ch_mc_line_strip(buf, r, NULL, 0);
    check(n >= 2 && n <= (size_t)r->line.len + 2);
    size_t total = n + ((props & CH_MC_P_STORAGE) ? (size_t)r->data.len + 2 : 0);
    char *b = malloc(total);
    if (!b)
        abort();
    check(ch_mc_line_strip(buf, r, b, n) == n);
    check(b[n - 2] == '\r' && b[n - 1] == '\n');
    if (props & CH_MC_P_STORAGE)
        memcpy(b + n, buf + r->data.off, (size_t)r->data.len + 2);
    ch_mc_span tok[TOK_CAP];
    ch_mc_request s = {.tok = tok, .tok_cap = TOK_CAP};
    size_t consumed = 0;
    ch_mc_status st = ch_mc_parse_request(b, total, lim, &s, &consumed, NULL, NULL, 0);
    /* (A line ended by a bare "\n" comes back one byte longer, possibly over max_line.) */
    if (r->cmd != CH_MC_CMD_UNKNOWN && !(props & CH_MC_P_REFUSED) && n <= r->line_len) {
        check(st == CH_MC_OK && consumed == total && s.cmd == r->cmd && s.nkeys == r->nkeys);
        check(s.noreply.len == 0 && s.quiet.len == 0);
        check(s.ntokens <= r->ntokens);
        if (r->noreply.len == 0 && r->quiet.len == 0)
            check(s.ntokens == r->ntokens);
    }
    free(b);

    if (!(props & CH_MC_P_GET) || r->nkeys == 0)
        return;
    /* Every other key, from the last backwards. */
    uint32_t keys[TOK_CAP];
    size_t nk = 0;
    for (size_t i = r->nkeys; i-- > 0;)
        if ((r->nkeys - 1 - i) % 2 == 0)
            keys[nk++] = (uint32_t)i;
    n = ch_mc_get_line_subset(buf, r, keys, nk, NULL, 0);
    check(n > 0);
    b = malloc(n);
    if (!b)
        abort();
    check(ch_mc_get_line_subset(buf, r, keys, nk, b, n) == n);
    memset(&s, 0, sizeof s);
    s.tok = tok;
    s.tok_cap = TOK_CAP;
    st = ch_mc_parse_request(b, n, lim, &s, &consumed, NULL, NULL, 0);
    check(st == CH_MC_OK && consumed == n && s.cmd == r->cmd && s.nkeys == nk);
    for (size_t i = 0; i < nk && s.key_first + i < TOK_CAP; i++) {
        ch_mc_span a = s.tok[s.key_first + i], o = r->tok[r->key_first + keys[i]];
        check(a.len == o.len && memcmp(b + a.off, buf + o.off, a.len) == 0);
    }
    free(b);
}

static void requests(const char *buf, size_t len, const ch_mc_limits *lim)
{
    size_t off = 0;
    for (int guard = 0; guard < 64; guard++) {
        ch_mc_span tok[TOK_CAP];
        ch_mc_request r;
        size_t consumed = 0;
        ch_mc_status st = request(buf + off, len - off, lim, &r, tok, &consumed);
        if (st == CH_MC_OK) {
            request_prefixes(buf + off, consumed, lim, &r);
            rebuilt(buf + off, lim, &r);
        } else if (st != CH_MC_ERROR || consumed > len - off) {
            return;
        }
        off += consumed;
    }
}

/* ---- replies ------------------------------------------------------------------------------- */

static const ch_mc_cmd REPLY_CMDS[] = {
    CH_MC_CMD_GET,   CH_MC_CMD_GETS,      CH_MC_CMD_GAT,     CH_MC_CMD_GATS,   CH_MC_CMD_SET,
    CH_MC_CMD_CAS,   CH_MC_CMD_INCR,      CH_MC_CMD_DELETE,  CH_MC_CMD_TOUCH,  CH_MC_CMD_VERSION,
    CH_MC_CMD_MG,    CH_MC_CMD_MS,        CH_MC_CMD_MD,      CH_MC_CMD_MA,     CH_MC_CMD_MN,
    CH_MC_CMD_ME,    CH_MC_CMD_FLUSH_ALL, CH_MC_CMD_UNKNOWN, CH_MC_CMD_STATS,
};

static void values(const char *buf, const ch_mc_reply *r)
{
    size_t pos = 0, count = 0;
    ch_mc_value v;
    while (ch_mc_value_next(buf, r->len, &pos, &v)) {
        check(v.block.off + v.block.len == pos && pos <= r->len);
        check_span(v.key, r->len);
        check_span(v.data, r->len);
        check(v.key.off > v.block.off && v.data.off > v.key.off);
        check(v.data.off + v.data.len + 2 == pos);
        count++;
    }
    if (r->code == CH_MC_R_VALUES || r->code == CH_MC_R_END)
        check(count == r->integer && r->len - pos == 5 && memcmp(buf + pos, "END\r\n", 5) == 0);
}

static ch_mc_status reply(const char *buf, size_t len, ch_mc_cmd cmd, const ch_mc_limits *lim,
                          ch_mc_reply *r)
{
    size_t need = 12345;
    char err[128];
    ch_mc_status st = ch_mc_scan_reply(buf, len, cmd, lim, r, &need, err, sizeof err);
    switch (st) {
    case CH_MC_OK:
        check(r->len > 0 && r->len <= len && need == 0);
        check_span(r->line, r->len);
        check_span(r->text, r->len);
        check_span(r->data, r->len);
        check(buf[r->len - 2] == '\r' && buf[r->len - 1] == '\n');
        if (ch_mc_cmd_props(cmd) & CH_MC_P_GET)
            values(buf, r);
        if (r->code == CH_MC_R_VA)
            check(r->data.len == r->integer && r->data.off + r->data.len + 2 == r->len);
        (void)ch_mc_quiet_suppresses(cmd, r);
        break;
    case CH_MC_INCOMPLETE:
        check(need > len);
        break;
    case CH_MC_CLOSE:
        check(need == 0);
        check_err(err, sizeof err);
        break;
    default:
        check(0);
    }
    return st;
}

static void reply_prefixes(const char *msg, size_t total, ch_mc_cmd cmd, const ch_mc_limits *lim,
                           const ch_mc_reply *full)
{
    size_t p = 0, steps = 0;
    for (;;) {
        char *b = dup_exact(msg, p);
        ch_mc_reply r;
        size_t need = 0;
        ch_mc_status st = ch_mc_scan_reply(b, p, cmd, lim, &r, &need, NULL, 0);
        free(b);
        if (p == total) {
            check(st == CH_MC_OK && r.len == total && r.code == full->code &&
                  r.cls == full->cls && r.integer == full->integer);
            return;
        }
        check(st == CH_MC_INCOMPLETE && need > p && need <= total);
        p = skip_ahead(need, total, ++steps);
    }
}

/* ---- copying an item ------------------------------------------------------------------------ */

/* ch_mc_copy_read on buf[0..len) (its end the end of a heap block); framed: the code of this
 * whole reply as ch_mc_scan_reply framed it for mg, or NONE when it is any bytes. */
static void copy_read_check(const char *buf, size_t len, ch_mc_code framed)
{
    ch_mc_copy c;
    const int rc = ch_mc_copy_read(buf, len, &c);
    check(rc >= -1 && rc <= 1);
    if (framed == CH_MC_R_EN)
        check(rc == 0);
    else if (framed != CH_MC_R_NONE && framed != CH_MC_R_VA)
        check(rc == -1);
    if (rc < 0)
        return;
    ch_mc_limits wide;
    ch_mc_limits_init(&wide);
    wide.max_item = wide.max_swallow = wide.max_line = wide.max_get_line = SIZE_MAX;
    ch_mc_reply r;
    check(ch_mc_scan_reply(buf, len, CH_MC_CMD_MG, &wide, &r, NULL, NULL, 0) == CH_MC_OK &&
          r.len == len);
    if (rc == 0) {
        check(r.code == CH_MC_R_EN);
        return;
    }
    check(r.code == CH_MC_R_VA && c.data.off == r.data.off && c.data.len == r.data.len);
    const int64_t now = 1700000000;
    int64_t e = -12345;
    const bool ok = ch_mc_copy_exptime(c.ttl, now, &e);
    check(ok == (c.ttl == -1 || c.ttl > 0));
    if (!ok)
        return;
    if (c.ttl == -1)
        check(e == 0);
    else if (c.ttl <= CH_MC_RELATIVE_MAX)
        check(e == c.ttl);
    else
        check(e > CH_MC_RELATIVE_MAX && e <= CH_MC_EXPTIME_MAX && e - now <= c.ttl);
}

/* The fetch for key[0..klen) is one mg request with the v, t and f flags whose key is key's
 * bytes, as they are or in base64 with the b flag. */
static void copy_fetch_check(const char *key, size_t klen, const ch_mc_limits *lim)
{
    const size_t n = ch_mc_copy_fetch(key, klen, NULL, 0);
    if (klen == 0) {
        check(n == 0);
        return;
    }
    char *line = malloc(n);
    if (!line)
        abort();
    check(ch_mc_copy_fetch(key, klen, line, n) == n);
    ch_mc_span tok[TOK_CAP];
    ch_mc_request r;
    size_t consumed = 0;
    check(request(line, n, lim, &r, tok, &consumed) == CH_MC_OK && consumed == n &&
          r.cmd == CH_MC_CMD_MG);
    const bool plain = ch_mc_key_plain(key, klen);
    check(r.b64 == !plain && r.mflags == (CH_MC_FLAG('v') | CH_MC_FLAG('t') | CH_MC_FLAG('f') |
                                          (plain ? 0 : CH_MC_FLAG('b'))));
    unsigned char k[256];
    if (plain)
        check(r.key.len == klen && memcmp(line + r.key.off, key, klen) == 0);
    else
        check(ch_mc_b64_decode(line + r.key.off, r.key.len, k, sizeof k) == (long)klen &&
              memcmp(k, key, klen) == 0);
    free(line);
}

static void replies(const char *buf, size_t len, ch_mc_cmd cmd, const ch_mc_limits *lim)
{
    size_t off = 0;
    for (int guard = 0; guard < 64; guard++) {
        ch_mc_reply r;
        if (reply(buf + off, len - off, cmd, lim, &r) != CH_MC_OK)
            return;
        reply_prefixes(buf + off, r.len, cmd, lim, &r);
        if (cmd == CH_MC_CMD_MG) {
            char *b = dup_exact(buf + off, r.len);
            copy_read_check(b, r.len, r.code);
            free(b);
        }
        off += r.len;
    }
}

/* A multi-key get's reply split key by key (ch_mc_scan_multi_part), each key being the next
 * block's own (a hit if the block is sound), or "a" when no VALUE line is next, and "a" once
 * first (a miss unless that block is a's): every part is a whole VALUE block of that key (the
 * scan moves on) or nothing (a miss, an error: the scan stays, and what is left is the last
 * key's ordinary reply). */
static void multi_parts(const char *buf, size_t len, ch_mc_cmd cmd, const ch_mc_limits *lim)
{
    if (!(ch_mc_cmd_props(cmd) & CH_MC_P_GET))
        return;
    size_t off = 0;
    for (int k = 0; k < 64; k++) {
        const char *key = "a";
        size_t klen = 1;
        if (k > 0 && len - off > 6 && memcmp(buf + off, "VALUE ", 6) == 0) {
            key = buf + off + 6; /* the next block's own key: a hit if the block is sound */
            klen = 0;
            while (off + 6 + klen < len && key[klen] != ' ' && klen < 250)
                klen++;
            if (klen == 0)
                return;
        }
        ch_mc_reply r;
        size_t need = 12345;
        char err[128];
        ch_mc_status st = ch_mc_scan_multi_part(buf + off, len - off, cmd, key, klen, lim, &r,
                                                &need, err, sizeof err);
        if (st == CH_MC_INCOMPLETE) {
            check(need > len - off);
            return;
        }
        if (st == CH_MC_CLOSE) {
            check(need == 0);
            check_err(err, sizeof err);
            return;
        }
        check(st == CH_MC_OK && need == 0 && r.len <= len - off);
        if (r.len == 0) {
            check(r.code == CH_MC_R_END || r.cls == CH_MC_C_ERROR);
            if (k > 0 || r.code != CH_MC_R_END)
                break; /* the same bytes are the next key's: an ordinary reply is left */
            continue;  /* "a" missed: the block's own key next */
        }
        check(r.code == CH_MC_R_VALUES && r.cls == CH_MC_C_HIT && r.integer == 1);
        /* One whole VALUE block, of that key (spaces between tokens as the line has them). */
        size_t pos = 0;
        ch_mc_value v;
        check(ch_mc_value_next(buf + off, r.len, &pos, &v) && pos == r.len &&
              v.block.off == 0 && v.block.len == r.len && v.key.len == klen &&
              memcmp(buf + off + v.key.off, key, klen) == 0);
        off += r.len;
    }
    ch_mc_reply r;
    (void)reply(buf + off, len - off, cmd, lim, &r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = dup_exact((const char *)data, size);
    ch_mc_limits dflt, tiny;
    ch_mc_limits_init(&dflt);
    tiny = (ch_mc_limits){.max_key = 8, .max_item = 16, .max_swallow = 40, .max_line = 32,
                          .max_get_line = 64, .max_keys = 3, .max_tokens = 6};
    requests(buf, size, &dflt);
    requests(buf, size, &tiny);
    /* Replies: the first byte picks the command they answer (the fuzzer learns which byte leads
     * where; each input costs one command's scans, not nineteen). */
    if (size > 0) {
        const ch_mc_cmd cmd = REPLY_CMDS[(unsigned char)buf[0] % (sizeof REPLY_CMDS /
                                                                  sizeof REPLY_CMDS[0])];
        replies(buf + 1, size - 1, cmd, &dflt);
        replies(buf + 1, size - 1, cmd, &tiny);
        multi_parts(buf + 1, size - 1, cmd, &dflt);
        multi_parts(buf + 1, size - 1, cmd, &tiny);
        copy_read_check(buf + 1, size - 1, CH_MC_R_NONE);
    }
    copy_fetch_check(buf, size < 64 ? size : 64, &dflt);
    unsigned char key[64];
    long n = ch_mc_b64_decode(buf, size < 88 ? size : 88, key, sizeof key);
    check(n >= -1 && n <= 64);
    free(buf);
    return 0;
}
