/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mc_frame.c — frames a real memcached byte stream with the parser (proxy/proto/mc.h), for
 * test_mc_real.py.
 *
 *   mc_frame REQUESTS REPLIES
 *
 * REQUESTS holds the bytes a client sent, REPLIES the bytes the server answered. Each request is
 * parsed with ch_mc_parse_request, then the reply stream is cut with ch_mc_scan_reply, one reply
 * per request, and one line per request is printed:
 *   refused[<err>] <CODE> <text>               the parser refused it (CH_MC_ERROR: skipped as
 *                                              it says); the server's error reply and its text
 *   unknown <CODE> <class>                     an unknown command; the server's reply
 *   <cmd> <CODE> <class>[ keys=<k1>,<k2>...]   a reply (get family: the VALUE keys, in order,
 *                                              from ch_mc_value_next)
 *   <cmd> noreply                              a text request with "noreply": no reply expected
 *   <cmd> suppressed                           a meta request with "q" whose reply the server
 *                                              left out (the next bytes are no reply to it, or
 *                                              one ch_mc_quiet_suppresses says is left out);
 *                                              the session must follow each quiet request with
 *                                              "mn", whose MN is no reply to mg/ms/md/ma
 * then "end <offset> <length>". Exit status 0, or 2 with a message on stderr when a request does
 * not parse, a reply does not scan, or bytes are left over.
 */
#include "mc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    size_t k;
    while (b && (k = fread(b + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap)
            b = realloc(b, cap *= 2);
    }
    fclose(f);
    if (!b) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    *len = n;
    return b;
}

static const char *code_name(ch_mc_code c)
{
    static const char *const N[] = {
        [CH_MC_R_NONE] = "NONE",
        [CH_MC_R_VALUES] = "VALUES",
        [CH_MC_R_END] = "END",
        [CH_MC_R_STORED] = "STORED",
        [CH_MC_R_NOT_STORED] = "NOT_STORED",
        [CH_MC_R_EXISTS] = "EXISTS",
        [CH_MC_R_NOT_FOUND] = "NOT_FOUND",
        [CH_MC_R_DELETED] = "DELETED",
        [CH_MC_R_TOUCHED] = "TOUCHED",
        [CH_MC_R_NUMBER] = "NUMBER",
        [CH_MC_R_VERSION] = "VERSION",
        [CH_MC_R_OK] = "OK",
        [CH_MC_R_VA] = "VA",
        [CH_MC_R_HD] = "HD",
        [CH_MC_R_EN] = "EN",
        [CH_MC_R_NF] = "NF",
        [CH_MC_R_NS] = "NS",
        [CH_MC_R_EX] = "EX",
        [CH_MC_R_MN] = "MN",
        [CH_MC_R_ME] = "ME",
        [CH_MC_R_ERROR] = "ERROR",
        [CH_MC_R_CLIENT_ERROR] = "CLIENT_ERROR",
        [CH_MC_R_SERVER_ERROR] = "SERVER_ERROR",
    };
    return (unsigned)c < sizeof N / sizeof N[0] && N[c] ? N[c] : "?";
}

static const char *class_name(ch_mc_class c)
{
    switch (c) {
    case CH_MC_C_HIT:
        return "hit";
    case CH_MC_C_MISS:
        return "miss";
    case CH_MC_C_OK:
        return "ok";
    case CH_MC_C_NOT_STORED:
        return "not_stored";
    case CH_MC_C_INTEGER:
        return "integer";
    case CH_MC_C_ERROR:
        return "error";
    }
    return "?";
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: mc_frame REQUESTS REPLIES\n");
        return 2;
    }
    size_t qlen, rlen;
    char *q = slurp(argv[1], &qlen);
    char *r = slurp(argv[2], &rlen);
    ch_mc_limits lim;
    ch_mc_limits_init(&lim);
    size_t qoff = 0, roff = 0;
    char err[160];
    int status = 0;
    while (status == 0 && qoff < qlen) {
        ch_mc_span tok[64];
        ch_mc_request req = {.tok = tok, .tok_cap = 64};
        size_t consumed = 0, need = 0;
        ch_mc_status st = ch_mc_parse_request(q + qoff, qlen - qoff, &lim, &req, &consumed, &need,
                                              err, sizeof err);
        ch_mc_reply rep;
        if (st == CH_MC_ERROR || (st == CH_MC_OK && req.cmd == CH_MC_CMD_UNKNOWN)) {
            /* Refused by the parser (the proxy would answer CLIENT_ERROR) or unknown (ERROR):
             * the server must answer it with exactly one error line too. "mn" scans error
             * lines and nothing else but MN. */
            if (consumed > qlen - qoff) {
                fprintf(stderr, "request at %zu: skip %zu past the end\n", qoff, consumed);
                status = 2;
                break;
            }
            qoff += consumed;
            st = ch_mc_scan_reply(r + roff, rlen - roff, CH_MC_CMD_MN, &lim, &rep, &need, err + 80,
                                  sizeof err - 80);
            if (st != CH_MC_OK || rep.cls != CH_MC_C_ERROR) {
                fprintf(stderr, "reply at %zu to a refused request: status %d, not an error\n",
                        roff, (int)st);
                status = 2;
                break;
            }
            if (req.cmd == CH_MC_CMD_UNKNOWN && err[0] == '\0')
                printf("unknown %s %s\n", code_name(rep.code), class_name(rep.cls));
            else
                printf("refused[%s] %s %.*s\n", err, code_name(rep.code), (int)rep.text.len,
                       r + roff + rep.text.off);
            roff += rep.len;
            continue;
        }
        if (st != CH_MC_OK) {
            fprintf(stderr, "request at %zu: status %d: %s\n", qoff, (int)st, err);
            status = 2;
            break;
        }
        const char *name = ch_mc_cmd_name(req.cmd);
        qoff += consumed;
        if (req.noreply.len) {
            printf("%s noreply\n", name);
            continue;
        }
        st = ch_mc_scan_reply(r + roff, rlen - roff, req.cmd, &lim, &rep, &need, err, sizeof err);
        if (req.quiet.len && (st != CH_MC_OK || ch_mc_quiet_suppresses(req.cmd, &rep))) {
            printf("%s suppressed\n", name);
            continue;
        }
        if (st != CH_MC_OK) {
            fprintf(stderr, "reply at %zu to %s: status %d: %s\n", roff, name, (int)st,
                    st == CH_MC_INCOMPLETE ? "incomplete" : err);
            status = 2;
            break;
        }
        printf("%s %s %s", name, code_name(rep.code), class_name(rep.cls));
        if (rep.code == CH_MC_R_VALUES) {
            size_t pos = 0, count = 0;
            ch_mc_value v;
            printf(" keys=");
            while (ch_mc_value_next(r + roff, rep.len, &pos, &v)) {
                printf("%s%.*s", count ? "," : "", (int)v.key.len, r + roff + v.key.off);
                count++;
            }
            if (count != rep.integer) {
                fprintf(stderr, "\nreply at %zu: %zu values iterated, %llu scanned\n", roff,
                        count, (unsigned long long)rep.integer);
                status = 2;
                break;
            }
        }
        printf("\n");
        roff += rep.len;
    }
    if (status == 0) {
        printf("end %zu %zu\n", roff, rlen);
        if (roff != rlen)
            status = 2;
    }
    free(q);
    free(r);
    return status;
}
