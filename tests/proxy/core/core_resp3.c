/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_resp3.c — the proxy's logic in process (core.h) for RESP3 clients: HELLO and AUTH as
 * Redis 7 answers them, the connection's dialect carried by its requests to the backend
 * connections of that dialect, replies passed on as the server wrote them, split commands
 * merged with the dialect's null, the proxy's own replies (CLIENT, INFO, subscriptions,
 * transactions) written in the dialect, pub/sub on the client's own connection, the handshake
 * and the gutter's script of a RESP3 backend connection.
 *
 * Expected bytes are Redis 7.0.15's own answers to the same requests, read off a redis-server
 * (the differential test, tests/proxy/test_resp3.py, compares them all again at every run).
 */
#include "core.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

static const char WRONGPASS[] =
    "-WRONGPASS invalid username-password pair or user is disabled.\r\n";

/* The request words as RESP, dispatched with ctx. */
static void say(fixture *fx, px_local *ctx, size_t n, char *const *words)
{
    px_buf b = {0};
    resp(&b, n, words);
    request(fx, ctx, b.p);
    px_buf_free(&b);
}

#define SAY(fx, ctx, ...)                                                                        \
    do {                                                                                         \
        char *w_[] = {__VA_ARGS__};                                                              \
        say(fx, ctx, sizeof(w_) / sizeof(w_[0]), w_);                                            \
    } while (0)

/* HELLO's protocol switch, its map, its errors in Redis's order (the version, the options, the
 * credentials, then a refusal while not authenticated), and the name it sets. */
void test_resp3_hello(void **state)
{
    fixture *fx = *state;
    px_local ctx = {.id = 42};
    SAY(fx, &ctx, "HELLO", "3");
    assert_int_equal(ctx.dialect, PX_DIALECT_RESP3);
    char want[512];
    snprintf(want, sizeof(want),
             "%%7\r\n$6\r\nserver\r\n$11\r\nchash-proxy\r\n$7\r\nversion\r\n$%zu\r\n%s\r\n"
             "$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:42\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n"
             "$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n",
             strlen(PX_VERSION), PX_VERSION);
    assert_string_equal(last_done(), want);
    SAY(fx, &ctx, "HELLO"); /* no argument: the properties in the protocol in force */
    assert_string_equal(last_done(), want);
    SAY(fx, &ctx, "HELLO", "2");
    assert_int_equal(ctx.dialect, PX_DIALECT_RESP2);
    assert_memory_equal(last_done(), "*14\r\n", 5);
    assert_non_null(strstr(last_done(), "$5\r\nproto\r\n:2\r\n"));

    const struct {
        size_t n;
        char *w[6];
        const char *reply;
    } errs[] = {
        {2, {"HELLO", "abc"}, "-ERR Protocol version is not an integer or out of range\r\n"},
        {2, {"HELLO", "4"}, "-NOPROTO unsupported protocol version\r\n"},
        {2, {"HELLO", "1"}, "-NOPROTO unsupported protocol version\r\n"},
        {3, {"HELLO", "3", "FOO"}, "-ERR Syntax error in HELLO option 'FOO'\r\n"},
        {4, {"HELLO", "3", "AUTH", "default"}, "-ERR Syntax error in HELLO option 'AUTH'\r\n"},
        {5, {"HELLO", "3", "AUTH", "bob", "x"}, WRONGPASS},
        {4, {"HELLO", "3", "SETNAME", "a b"},
         "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
    };
    for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
        px_local c = {0};
        say(fx, &c, errs[i].n, errs[i].w);
        assert_string_equal(last_done(), errs[i].reply);
        assert_int_equal(c.dialect, PX_DIALECT_RESP2); /* nothing switched */
        assert_false(c.set_name);
    }
    /* Without a password the default user takes any password, as Redis's without requirepass. */
    px_local c = {0};
    SAY(fx, &c, "HELLO", "3", "AUTH", "default", "x", "SETNAME", "app-1");
    assert_int_equal(c.dialect, PX_DIALECT_RESP3);
    assert_true(c.set_name);
    assert_int_equal(c.name_to.len, 5);
    /* A connection with a transaction or subscriptions open keeps its protocol. */
    px_local pinned = {.pinned = true};
    SAY(fx, &pinned, "HELLO", "3");
    assert_non_null(strstr(last_done(), "cannot change the protocol"));
    assert_int_equal(pinned.dialect, PX_DIALECT_RESP2);
    SAY(fx, &pinned, "HELLO", "2"); /* the same protocol: answered */
    assert_memory_equal(last_done(), "*14\r\n", 5);
    assert_int_equal(fake_nlog, 0);
}

/* With a password: HELLO is refused until authenticated (NOAUTH, Redis's words), its AUTH
 * option authenticates and switches at once; AUTH's two forms answer WRONGPASS on a bad
 * password or user, and a wrong password unauthenticates. */
void test_resp3_auth(void **state)
{
    fixture *fx = *state;
    px_local ctx = {.password = fx->pool.client_password};
    SAY(fx, &ctx, "HELLO", "3");
    assert_non_null(strstr(last_done(), "-NOAUTH HELLO must be called with the client already "
                                         "authenticated, otherwise the HELLO AUTH <user> <pass>"));
    assert_int_equal(ctx.dialect, PX_DIALECT_RESP2);
    SAY(fx, &ctx, "HELLO", "3", "AUTH", "default", "wrong");
    assert_string_equal(last_done(), WRONGPASS);
    assert_true(ctx.auth_failed);
    assert_false(ctx.authed);
    ctx.auth_failed = false;
    SAY(fx, &ctx, "HELLO", "3", "AUTH", "default", "sesame");
    assert_true(ctx.authed);
    assert_int_equal(ctx.dialect, PX_DIALECT_RESP3);
    assert_memory_equal(last_done(), "%7\r\n", 4);
    SAY(fx, &ctx, "AUTH", "bob", "sesame");
    assert_string_equal(last_done(), WRONGPASS);
    assert_false(ctx.authed);
    SAY(fx, &ctx, "AUTH", "default", "sesame");
    assert_string_equal(last_done(), "+OK\r\n");
    assert_true(ctx.authed);
    SAY(fx, &ctx, "AUTH", "wrong");
    assert_string_equal(last_done(), WRONGPASS);
    assert_false(ctx.authed);
    SAY(fx, &ctx, "AUTH", "sesame");
    assert_string_equal(last_done(), "+OK\r\n");
    SAY(fx, &ctx, "AUTH", "a", "b", "c");
    assert_string_equal(last_done(), "-ERR wrong number of arguments for 'auth' command\r\n");
    /* No password: AUTH pass is twemproxy's refusal (its suite checks it), AUTH default any
     * is accepted as by Redis. */
    px_local open = {0};
    SAY(fx, &open, "AUTH", "x");
    assert_string_equal(last_done(), "-ERR Client sent AUTH, but no password is set\r\n");
    assert_int_equal(fake_nlog, 0);
}

/* A RESP3 client's requests go over backend connections of its dialect, and the server's RESP3
 * replies reach it as they are (a null, a map, a double, an attribute with its element). */
void test_resp3_forwarded(void **state)
{
    fixture *fx = *state;
    px_local v3 = {.dialect = PX_DIALECT_RESP3};
    SAY(fx, &v3, "HGETALL", "h");
    SAY(fx, &v3, "GET", "k");
    SAY(fx, &v3, "ZSCORE", "z", "m");
    SAY(fx, NULL, "GET", "k"); /* a RESP2 client's */
    assert_int_equal(fake_nlog, 4);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(fake_log[i].dialect, PX_DIALECT_RESP3);
    assert_int_equal(fake_log[3].dialect, PX_DIALECT_RESP2);
    const char *r[] = {"|1\r\n+ttl\r\n:3\r\n%1\r\n$1\r\nf\r\n$1\r\nv\r\n", "_\r\n", ",1.5\r\n",
                       "$-1\r\n"};
    for (size_t i = 0; i < 4; i++) {
        fake_reply(&fx->pool, &fake_log[i], r[i], strlen(r[i]));
        assert_string_equal(last_done(), r[i]);
    }
}

/* MGET split over servers: each part's elements as its server wrote them, a key no part
 * answered (a part's error aside) never; the merged array in the client's dialect. */
void test_resp3_mget(void **state)
{
    fixture *fx = *state;
    char a[16] = "k0", b[16] = "k1";
    for (int i = 1; owner(fx, a) == owner(fx, b); i++)
        snprintf(b, sizeof(b), "k%d", i);
    for (int v = 0; v < 2; v++) {
        px_local ctx = {.dialect = v == 0 ? PX_DIALECT_RESP2 : PX_DIALECT_RESP3};
        fake_reset();
        SAY(fx, &ctx, "MGET", a, b);
        assert_int_equal(fake_nlog, 2);
        assert_int_equal(fake_log[0].dialect, ctx.dialect);
        fake_sent *sa = sent_to(owner(fx, a)), *sb = sent_to(owner(fx, b));
        const char *ra = "*1\r\n$1\r\nx\r\n", *rb = v == 0 ? "*1\r\n$-1\r\n" : "*1\r\n_\r\n";
        fake_reply(&fx->pool, sa, ra, strlen(ra));
        fake_reply(&fx->pool, sb, rb, strlen(rb));
        assert_string_equal(last_done(), v == 0 ? "*2\r\n$1\r\nx\r\n$-1\r\n"
                                                : "*2\r\n$1\r\nx\r\n_\r\n");
    }
}

/* CLIENT's subcommands answered by the proxy, Redis's words for its errors. */
/* The one client id a REDIRECT may name in test_resp3_client. */
static bool exists_7(void *arg, uint64_t id)
{
    (void)arg;
    return id == 7;
}

void test_resp3_client(void **state)
{
    fixture *fx = *state;
    px_local ctx = {.id = 7, .dialect = PX_DIALECT_RESP3};
    SAY(fx, &ctx, "CLIENT", "ID");
    assert_string_equal(last_done(), ":7\r\n");
    SAY(fx, &ctx, "CLIENT", "GETNAME");
    assert_string_equal(last_done(), "_\r\n");
    ctx.dialect = PX_DIALECT_RESP2;
    SAY(fx, &ctx, "client", "getname");
    assert_string_equal(last_done(), "$-1\r\n");
    ctx.name = "app";
    ctx.name_len = 3;
    SAY(fx, &ctx, "CLIENT", "GETNAME");
    assert_string_equal(last_done(), "$3\r\napp\r\n");
    SAY(fx, &ctx, "CLIENT", "SETNAME", "web-1");
    assert_string_equal(last_done(), "+OK\r\n");
    assert_true(ctx.set_name);
    assert_int_equal(ctx.name_to.len, 5);
    ctx.set_name = false;
    SAY(fx, &ctx, "CLIENT", "SETNAME", "a\nb");
    assert_string_equal(last_done(),
                        "-ERR Client names cannot contain spaces, newlines or special "
                        "characters.\r\n");
    assert_false(ctx.set_name);
    SAY(fx, &ctx, "CLIENT", "SETNAME");
    assert_string_equal(last_done(),
                        "-ERR wrong number of arguments for 'client|setname' command\r\n");
    SAY(fx, &ctx, "CLIENT", "SETINFO", "LIB-NAME", "node-redis");
    assert_string_equal(last_done(), "+OK\r\n");
    assert_true(ctx.set_lib_name);
    SAY(fx, &ctx, "CLIENT", "SETINFO", "lib-ver", "6.3.1");
    assert_true(ctx.set_lib_ver);
    SAY(fx, &ctx, "CLIENT", "SETINFO", "LIB-FOO", "x");
    assert_string_equal(last_done(), "-ERR Unrecognized option 'lib-foo'\r\n");
    SAY(fx, &ctx, "CLIENT", "NO-EVICT", "on");
    assert_string_equal(last_done(), "+OK\r\n");
    SAY(fx, &ctx, "CLIENT", "NO-TOUCH", "maybe");
    assert_string_equal(last_done(), "-ERR syntax error\r\n");
    /* Client-side caching (issue 37, item 4): RESP3 in-band, default mode, NOLOOP; the pool's
     * refusal as given; RESP2, REDIRECT, BCAST, PREFIX, OPTIN, OPTOUT refused; GETREDIR and
     * TRACKINGINFO as Redis answers them; CACHING refused outside OPTIN/OPTOUT. */
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on");
    assert_non_null(strstr(last_done(), "-ERR chash-proxy serves client-side caching to RESP3"));
    assert_false(ctx.track_set);
    ctx.dialect = PX_DIALECT_RESP3;
    ctx.track_refused = "no links here";
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on");
    assert_string_equal(last_done(), "-ERR no links here\r\n");
    assert_false(ctx.track_set);
    ctx.track_refused = NULL;
    SAY(fx, &ctx, "CLIENT", "TRACKING", "ON");
    assert_string_equal(last_done(), "+OK\r\n");
    assert_true(ctx.track_set);
    assert_int_equal(ctx.track_to, PX_TRACKING_ON);
    ctx.track_set = false;
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "noloop");
    assert_true(ctx.track_set);
    assert_int_equal(ctx.track_to, PX_TRACKING_ON | PX_TRACKING_NOLOOP);
    ctx.track_set = false;
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "optin");
    assert_int_equal(ctx.track_to, PX_TRACKING_ON | PX_TRACKING_OPTIN);
    ctx.track_set = false;
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "optin", "optout");
    assert_string_equal(last_done(), "-ERR You can't use both OPTIN and OPTOUT\r\n");
    ctx.tracking = PX_TRACKING_ON | PX_TRACKING_OPTIN;
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "optout");
    assert_non_null(strstr(last_done(), "-ERR You can't switch OPTIN/OPTOUT mode"));
    assert_false(ctx.track_set);
    SAY(fx, &ctx, "CLIENT", "CACHING", "no");
    assert_non_null(strstr(last_done(), "-ERR CLIENT CACHING NO is only valid"));
    assert_false(ctx.caching_set);
    SAY(fx, &ctx, "CLIENT", "CACHING", "yes");
    assert_string_equal(last_done(), "+OK\r\n");
    assert_true(ctx.caching_set);
    ctx.caching_set = false;
    ctx.caching = true;
    SAY(fx, &ctx, "CLIENT", "TRACKINGINFO");
    assert_string_equal(last_done(), "%3\r\n$5\r\nflags\r\n~3\r\n$2\r\non\r\n$5\r\noptin\r\n"
                                     "$11\r\ncaching-yes\r\n$8\r\nredirect\r\n:0\r\n"
                                     "$8\r\nprefixes\r\n*0\r\n");
    ctx.caching = false;
    ctx.tracking = PX_TRACKING_OFF;
    /* REDIRECT (redir.h): to a client of the pool now, as Redis checks it */
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "REDIRECT", "1");
    assert_string_equal(last_done(),
                        "-ERR The client ID you want redirect to does not exist\r\n");
    assert_false(ctx.track_set);
    ctx.client_exists = exists_7;
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "REDIRECT", "8");
    assert_non_null(strstr(last_done(), "does not exist"));
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "REDIRECT", "x7");
    assert_string_equal(last_done(), "-ERR value is not an integer or out of range\r\n");
    ctx.dialect = PX_DIALECT_RESP2; /* RESP2: with REDIRECT only */
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on");
    assert_non_null(strstr(last_done(), "RESP2 clients with REDIRECT"));
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "REDIRECT", "7", "NOLOOP");
    assert_string_equal(last_done(), "+OK\r\n");
    assert_true(ctx.track_set);
    assert_int_equal(ctx.redirect_to, 7);
    assert_int_equal(ctx.track_to, PX_TRACKING_ON | PX_TRACKING_NOLOOP);
    ctx.track_set = false;
    ctx.tracking = ctx.track_to;
    ctx.redirect = 7;
    ctx.redirect_broken = true;
    SAY(fx, &ctx, "CLIENT", "TRACKINGINFO");
    assert_string_equal(last_done(), "*6\r\n$5\r\nflags\r\n*3\r\n$2\r\non\r\n$6\r\nnoloop\r\n"
                                     "$15\r\nbroken_redirect\r\n$8\r\nredirect\r\n:7\r\n"
                                     "$8\r\nprefixes\r\n*0\r\n");
    SAY(fx, &ctx, "CLIENT", "TRACKING", "off");
    assert_int_equal(ctx.redirect_to, 0);
    ctx = (px_local){.id = 7, .dialect = PX_DIALECT_RESP3};
    /* BCAST: its prefixes as spans, Redis's errors */
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:", "PREFIX", "b:");
    assert_string_equal(last_done(), "+OK\r\n");
    assert_int_equal(ctx.track_to, PX_TRACKING_ON | PX_TRACKING_BCAST);
    assert_int_equal(ctx.nprefix_to, 2);
    assert_int_equal(ctx.prefix_to[1].len, 2);
    ctx.track_set = false;
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "PREFIX", "a:");
    assert_string_equal(last_done(), "-ERR PREFIX option requires BCAST mode to be enabled\r\n");
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "BCAST", "OPTIN");
    assert_string_equal(last_done(), "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n");
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "ab");
    assert_non_null(strstr(last_done(), "-ERR Prefix 'a' overlaps with another provided prefix"));
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "BCAST", "NOLOOP");
    assert_non_null(strstr(last_done(), "NOLOOP with BCAST"));
    assert_false(ctx.track_set);
    ctx.tracking = PX_TRACKING_ON;
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "BCAST");
    assert_non_null(strstr(last_done(), "-ERR You can't switch BCAST mode"));
    ctx.tracking = PX_TRACKING_ON | PX_TRACKING_BCAST;
    const char *pfx[] = {"a:"};
    uint32_t pfx_len[] = {2};
    ctx.prefixes = pfx;
    ctx.prefix_lens = pfx_len;
    ctx.nprefixes = 1;
    SAY(fx, &ctx, "CLIENT", "TRACKINGINFO");
    assert_string_equal(last_done(), "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$5\r\nbcast\r\n"
                                     "$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*1\r\n"
                                     "$2\r\na:\r\n");
    ctx.nprefixes = 0;
    ctx.tracking = PX_TRACKING_OFF;
    SAY(fx, &ctx, "CLIENT", "TRACKING", "on", "FOO");
    assert_string_equal(last_done(), "-ERR syntax error\r\n");
    SAY(fx, &ctx, "CLIENT", "TRACKING", "off");
    assert_true(ctx.track_set);
    assert_int_equal(ctx.track_to, PX_TRACKING_OFF);
    ctx.track_set = false;
    ctx.tracking = PX_TRACKING_OFF;
    SAY(fx, &ctx, "CLIENT", "GETREDIR");
    assert_string_equal(last_done(), ":-1\r\n");
    ctx.tracking = PX_TRACKING_ON | PX_TRACKING_NOLOOP;
    SAY(fx, &ctx, "CLIENT", "GETREDIR");
    assert_string_equal(last_done(), ":0\r\n");
    SAY(fx, &ctx, "CLIENT", "TRACKINGINFO");
    assert_string_equal(last_done(), "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$6\r\nnoloop\r\n"
                                     "$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n");
    ctx.tracking = PX_TRACKING_OFF;
    SAY(fx, &ctx, "CLIENT", "CACHING", "yes");
    assert_non_null(strstr(last_done(), "-ERR CLIENT CACHING can be called only"));
    ctx.dialect = PX_DIALECT_RESP2;
    px_buf inv = {0};
    assert_int_equal(px_codec_redis.encode_invalidation(&inv, "k\0x", 3), 0);
    assert_int_equal(px_codec_redis.encode_invalidation(&inv, NULL, 0), 0);
    assert_memory_equal(inv.p, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nk\0x\r\n"
                               ">2\r\n$10\r\ninvalidate\r\n_\r\n", inv.len);
    assert_int_equal(inv.len, 34 + 24);
    px_buf_free(&inv);
    SAY(fx, &ctx, "CLIENT", "KILL", "127.0.0.1:1");
    assert_non_null(strstr(last_done(), "-ERR unsupported command 'client kill'"));
    SAY(fx, &ctx, "CLIENT", "FOO");
    assert_string_equal(last_done(), "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n");
    SAY(fx, &ctx, "CLIENT");
    assert_string_equal(last_done(), "-ERR wrong number of arguments for 'client' command\r\n");
    SAY(fx, &ctx, "CLIENT", "HELP");
    assert_memory_equal(last_done(), "*21\r\n+CLIENT <subcommand>", 25);
    /* REPLY: OFF and SKIP answer nothing, ON answers OK and clears the silence. */
    ctx.silent = true;
    SAY(fx, &ctx, "CLIENT", "REPLY", "ON");
    assert_string_equal(last_done(), "+OK\r\n");
    assert_false(ctx.silent);
    assert_int_equal(ctx.reply_mode, PX_REPLIES_ON);
    SAY(fx, &ctx, "CLIENT", "REPLY", "OFF");
    assert_string_equal(last_done(), "");
    assert_int_equal(ctx.reply_mode, PX_REPLIES_OFF);
    SAY(fx, &ctx, "CLIENT", "REPLY", "SKIP");
    assert_int_equal(ctx.reply_mode, PX_REPLIES_SKIP);
    SAY(fx, &ctx, "CLIENT", "REPLY", "MAYBE");
    assert_string_equal(last_done(), "-ERR syntax error\r\n");
    assert_int_equal(fake_nlog, 0);
}

static int list_text(void *arg, bool self, px_buf *out)
{
    (void)arg;
    return px_buf_printf(out, "%s\n", self ? "id=7 me" : "id=7 me\nid=8 other");
}

static int info_text(void *arg, px_buf *out)
{
    (void)arg;
    static const char text[] = "# Server\r\nx:1\r\n";
    return px_buf_append(out, text, sizeof(text) - 1);
}

/* Reports as Redis frames them: a bulk in RESP2, a verbatim "txt" string in RESP3. */
void test_resp3_reports(void **state)
{
    fixture *fx = *state;
    px_local ctx = {.clients = list_text, .info = info_text};
    SAY(fx, &ctx, "CLIENT", "INFO");
    assert_string_equal(last_done(), "$8\r\nid=7 me\n\r\n");
    SAY(fx, &ctx, "INFO");
    assert_string_equal(last_done(), "$15\r\n# Server\r\nx:1\r\n\r\n");
    ctx.dialect = PX_DIALECT_RESP3;
    SAY(fx, &ctx, "CLIENT", "INFO");
    assert_string_equal(last_done(), "=12\r\ntxt:id=7 me\n\r\n");
    SAY(fx, &ctx, "CLIENT", "LIST");
    assert_string_equal(last_done(), "=23\r\ntxt:id=7 me\nid=8 other\n\r\n");
    SAY(fx, &ctx, "INFO");
    assert_string_equal(last_done(), "=19\r\ntxt:# Server\r\nx:1\r\n\r\n");
    SAY(fx, &ctx, "CLIENT", "LIST", "TYPE", "normal");
    assert_non_null(strstr(last_done(), "without options"));
}

/* Subscriptions of a RESP3 client: its connections speak RESP3, confirmations are pushes (the
 * servers' and the proxy's), messages go on as they came, and any command is served while
 * subscribed (PING answers +PONG, not RESP2's pub/sub array). */
void test_resp3_pubsub(void **state)
{
    fixture *fx = *state;
    px_session *ss = NULL;
    px_local ctx = {.dialect = PX_DIALECT_RESP3};
    px_buf req = {0};
    char *sub[] = {"SUBSCRIBE", "ch"};
    resp(&req, 2, sub);
    request_in(fx, &ctx, req.p, &ss);
    assert_int_equal(fake_nconns, 1);
    assert_int_equal(fake_conns[0]->dialect, PX_DIALECT_RESP3);
    assert_true(px_session_pinned(ss));
    const char *conf = ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n";
    fake_push(&fx->pool, fake_conns[0], conf, strlen(conf));
    assert_string_equal(last_done(), conf);
    const char *msg = ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n";
    fake_push(&fx->pool, fake_conns[0], msg, strlen(msg));
    assert_int_equal(emitted.len, strlen(msg));
    assert_memory_equal(emitted.p, msg, strlen(msg));
    size_t n = ndone;
    request_in(fx, &ctx, "*2\r\n$3\r\nGET\r\n$1\r\nx\r\n", &ss); /* served: sent to a server */
    assert_int_equal(ndone, n);
    assert_non_null(sent_to(owner(fx, "x")));
    assert_int_equal(sent_to(owner(fx, "x"))->dialect, PX_DIALECT_RESP3);
    fake_reply(&fx->pool, sent_to(owner(fx, "x")), "_\r\n", 3);
    assert_string_equal(last_done(), "_\r\n");
    ctx.subscribed = true;
    request_in(fx, &ctx, "*1\r\n$4\r\nPING\r\n", &ss);
    assert_string_equal(last_done(), "+PONG\r\n");
    char *unsub[] = {"UNSUBSCRIBE"};
    resp(&req, 1, unsub);
    request_in(fx, &ctx, req.p, &ss);
    const char *uc = ">3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n";
    fake_push(&fx->pool, fake_conns[0], uc, strlen(uc));
    assert_string_equal(last_done(), uc);
    /* Unsubscribed from nothing: the proxy's own confirmation, RESP3's null. */
    request_in(fx, &ctx, req.p, &ss);
    assert_string_equal(last_done(), ">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n");
    assert_int_equal(closes, 0);
    px_session_free(ss);
    px_buf_free(&req);
    px_buf_free(&emitted);
}

/* The backend handshake of each kind of connection: RESP2's AUTH and SELECT as before, RESP3's
 * with HELLO 3 last. */
void test_resp3_handshake(void **state)
{
    (void)state;
    ch_conf_pool pc = {.redis_auth = "pw", .redis_db = 3};
    const char *want[2][4] = {
        {"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n", "*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n", NULL},
        {"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n", "*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n",
         "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n", NULL},
    };
    for (uint8_t d = 0; d < 2; d++) {
        for (size_t i = 0;; i++) {
            px_buf b = {0};
            uint8_t expect;
            const char *what = NULL;
            int rc = px_codec_redis.encode_handshake(&b, &pc, d, i, &expect, &what);
            if (want[d][i] == NULL) {
                assert_int_equal(rc, 0);
                px_buf_free(&b);
                break;
            }
            assert_int_equal(rc, 1);
            assert_int_equal(b.len, strlen(want[d][i]));
            assert_memory_equal(b.p, want[d][i], b.len);
            px_buf_free(&b);
        }
    }
    ch_conf_pool bare = {0};
    px_buf b = {0};
    uint8_t expect;
    const char *what = NULL;
    assert_int_equal(px_codec_redis.encode_handshake(&b, &bare, PX_DIALECT_RESP3, 0, &expect,
                                                     &what),
                     1);
    assert_string_equal(what, "HELLO 3");
    assert_int_equal(px_codec_redis.encode_handshake(&b, &bare, PX_DIALECT_RESP2, 0, &expect,
                                                     &what),
                     0);
    px_buf_free(&b);
    assert_int_equal(px_codec_redis.backend_dialects, 2);
    assert_int_equal(px_codec_memcache.backend_dialects, 1);
}

/* RESP3's misses for warm-up and the near cache: its null, a one-key MGET part's null, and the
 * empty map and set of a missing hash and set; its values are not misses. */
void test_resp3_misses(void **state)
{
    (void)state;
    const char *miss[] = {"_\r\n", "*1\r\n_\r\n", "%0\r\n", "~0\r\n", "$-1\r\n", "*0\r\n"};
    const char *hit[] = {"$1\r\nx\r\n", "%1\r\n+a\r\n+b\r\n", ",0\r\n", "#f\r\n", ":0\r\n"};
    for (size_t i = 0; i < sizeof(miss) / sizeof(miss[0]); i++) {
        px_reply r = {.p = miss[i], .len = strlen(miss[i])};
        assert_true(px_codec_redis.is_miss(NULL, &r));
    }
    for (size_t i = 0; i < sizeof(hit) / sizeof(hit[0]); i++) {
        px_reply r = {.p = hit[i], .len = strlen(hit[i])};
        assert_false(px_codec_redis.is_miss(NULL, &r));
    }
    /* The reply kinds scan_reply gives RESP3's types. */
    const struct {
        const char *p;
        px_reply_kind kind;
    } kinds[] = {{"_\r\n", PX_REPLY_MISS},     {"!3\r\nERR\r\n", PX_REPLY_ERROR},
                 {">1\r\n+x\r\n", PX_REPLY_PUSH}, {"%0\r\n", PX_REPLY_VALUE},
                 {"#t\r\n", PX_REPLY_VALUE},      {"|1\r\n+a\r\n+b\r\n-ERR x\r\n", PX_REPLY_ERROR}};
    px_limits lim = {.max_request = SIZE_MAX, .max_args = 1024, .max_value = 1 << 20,
                     .max_line = 1 << 16, .max_key = 1 << 20, .max_depth = 64};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        px_reply r;
        size_t consumed, need;
        char err[64];
        assert_int_equal(px_codec_redis.scan_reply(&lim, 0, kinds[i].p, strlen(kinds[i].p), &r,
                                                   &consumed, &need, err, sizeof(err)),
                         PX_PARSE_OK);
        assert_int_equal(r.kind, kinds[i].kind);
        assert_int_equal(consumed, strlen(kinds[i].p));
    }
}
