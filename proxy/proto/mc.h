/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mc.h — memcached text and meta protocol parsing for chash-proxy (memcached 1.6's
 * doc/protocol.txt): requests from clients, replies from backends, base64 keys, and two line
 * rebuilders for the codec (proxy/proto/mc_codec.c).
 *
 * Pure, like resp.h: fed bytes, hands back where a complete message is and what is in it, as
 * spans (offset, length) into the caller's buffer; no I/O, no allocation, no globals, never
 * aborts or prints, so it can be fuzzed (fuzz/mc_fuzz.c). Stateless: each call looks at
 * buf[0..len) from the start of a message. An incomplete message says how many bytes it needs at
 * least, so a caller receiving a large data block in pieces waits for them instead of re-parsing
 * on every read. Thread-safety: no state; safe from any thread.
 *
 * Lines: a command or reply line ends in "\r\n"; a request line may also end in a bare "\n"
 * (memcached accepts both). Tokens are separated by runs of spaces (only ' ', as memcached).
 * A data block is exactly <bytes> bytes followed by "\r\n".
 */
#ifndef CHASH_MC_H
#define CHASH_MC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ch_mc_status {
    CH_MC_OK = 0,         /* a complete message */
    CH_MC_INCOMPLETE = 1, /* more bytes are needed: *need says at least how many in all */
    /* The request is refused with "CLIENT_ERROR <err>\r\n" and the connection is KEPT: drop
     * *consumed bytes from buf[0] (this may be more than len: the rest of a data block still
     * to come, which memcached "swallows" too) and parse the next request after them. */
    CH_MC_ERROR = -1,
    /* The stream cannot be resynchronized (a line with no end within the limit, a declared data
     * length over lim->max_swallow): answer "CLIENT_ERROR <err>\r\n", then close. For replies
     * (ch_mc_scan_reply) every failure is CH_MC_CLOSE: a backend that breaks the protocol. */
    CH_MC_CLOSE = -2,
} ch_mc_status;

/* The connection rule of CH_MC_ERROR vs CH_MC_CLOSE, for requests:
 *   - kept (CH_MC_ERROR): any error found in a complete line: unknown flag, bad number, key too
 *     long or with control characters, too many keys or tokens, a base64 key that does not
 *     decode, a missing or extra argument. The line is skipped, and for a storage command whose
 *     <bytes> parsed (and is at most max_swallow) its data block too, as current memcached does
 *     (proto_text.c's conn_swallow after a failed update; 1.6.18 did so for ms, and for text
 *     storage lines only when the item was too large: a data block is never run as a command
 *     here). An item over max_item ("object too large for cache") is swallowed the same way. A data block not followed by "\r\n" ("bad data chunk") is skipped
 *     as declared (line + bytes + 2), as memcached does.
 *   - closed (CH_MC_CLOSE): no "\n" within max_line bytes ("line too long"; get/gets/gat/gats
 *     lines may run to max_get_line, as memcached lets only multigets grow past 2048), and a
 *     declared <bytes> over max_swallow or beyond 64 bits (a 2^40 length: an early verdict from
 *     the line alone, not INCOMPLETE waiting for a terabyte). A <bytes> that is not a number
 *     (or negative) is CH_MC_ERROR with only the line skipped, as memcached does. */

/* Every request error text, and what the connection does (E: CH_MC_ERROR, kept, skip
 * *consumed; C: CH_MC_CLOSE):
 *   E "bad command line format"            arguments missing or extra, a number that is not one
 *   E "bad command line format.  Usage: delete <key> [noreply]"   (memcached's words)
 *   E "key too long"  E "key contains control characters"  E "error decoding key" (b flag)
 *   E "too many keys" (get family, max_keys)  E "too many tokens" (meta, max_tokens)
 *   E "invalid exptime argument" (gat gats touch)  E "invalid numeric delta argument" (incr
 *     decr)  E "invalid flag"  E "bad token in command line format" (a numeric meta flag)
 *   E "invalid numeric delta value" (ma D)  E "invalid numeric initial value" (ma J)
 *   E "invalid mode for ms M token"  E "invalid mode for ma M token"  E "opaque token too long"
 *   E "bad data chunk"  E "object too large for cache" (over max_item, up to max_swallow)
 *   C "object too large for cache" (over max_swallow, or beyond 64 bits)  C "line too long"
 * Reply errors (all C): "reply line too long", "reply line not ended by CRLF", "unexpected
 * reply line to <cmd>", "bad data chunk", "value too large", "VA reply without a size", "ME
 * reply without a key", "no reply expected to <cmd>", "reply too large".
 *
 * Where the words differ from memcached 1.6.18's own answers: memcached says "SERVER_ERROR
 * object too large for cache" (a codec may use that prefix for that err), and "bad command line
 * format" for a key over 250 bytes (here "key too long") or with control characters (memcached
 * takes those; here "key contains control characters"). Extra tokens after a text command
 * ("set k 0 0 1 foo") are refused here; memcached ignores them. */

typedef struct ch_mc_limits {
    size_t max_key;      /* key length in bytes (after base64 decoding); default 250, at most
                            4096 */
    size_t max_item;     /* data block bytes; default 1 MiB (memcached's -I); at most 1 GiB */
    size_t max_swallow;  /* largest declared data length skipped rather than closing; default
                            64 MiB; below max_item counts as max_item */
    size_t max_line;     /* bytes of a command line, terminator included; default 2048 */
    size_t max_get_line; /* same for get/gets/gat/gats; default 1 MiB */
    size_t max_keys;     /* keys per get-family request; default 4096 */
    size_t max_tokens;   /* tokens of a meta line, the command included; default 24 (as
                            memcached's tokenizer, MCMC_PARSER_MAX_TOKENS) */
} ch_mc_limits;

void ch_mc_limits_init(ch_mc_limits *lim);

/* A slice of the caller's buffer: bytes [off, off + len). len 0 with off 0: none. */
typedef struct ch_mc_span {
    uint32_t off, len;
} ch_mc_span;

/* Command ids. The X-macro gives name, id suffix, properties. */
#define CH_MC_COMMANDS(X)                                                                          \
    X(get, GET) X(gets, GETS) X(gat, GAT) X(gats, GATS)                                            \
    X(set, SET) X(add, ADD) X(replace, REPLACE) X(append, APPEND) X(prepend, PREPEND) X(cas, CAS)  \
    X(incr, INCR) X(decr, DECR) X(delete, DELETE) X(touch, TOUCH)                                  \
    X(version, VERSION) X(quit, QUIT)                                                              \
    X(mg, MG) X(ms, MS) X(md, MD) X(ma, MA) X(mn, MN) X(me, ME)                                    \
    X(stats, STATS) X(flush_all, FLUSH_ALL) X(verbosity, VERBOSITY) X(shutdown, SHUTDOWN)          \
    X(cache_memlimit, CACHE_MEMLIMIT) X(slabs, SLABS) X(lru, LRU) X(lru_crawler, LRU_CRAWLER)      \
    X(watch, WATCH) X(extstore, EXTSTORE) X(misbehave, MISBEHAVE) X(debugtime, DEBUGTIME)          \
    X(mcp, MCP)

typedef enum ch_mc_cmd {
    CH_MC_CMD_UNKNOWN = 0, /* not a memcached command (or an empty line): answer "ERROR" */
#define CH_MC_X_ENUM(name, id) CH_MC_CMD_##id,
    CH_MC_COMMANDS(CH_MC_X_ENUM)
#undef CH_MC_X_ENUM
    CH_MC_CMD_COUNT
} ch_mc_cmd;

/* What a command is (ch_mc_cmd_props). */
enum {
    CH_MC_P_GET = 1u << 0,      /* get gets gat gats: keys from key_first to the end; many */
    CH_MC_P_STORAGE = 1u << 1,  /* set add replace append prepend cas ms: a data block follows */
    CH_MC_P_META = 1u << 2,     /* mg ms md ma mn me: flag tokens, "q" quiet mode */
    CH_MC_P_NOREPLY = 1u << 3,  /* text commands that take a trailing "noreply" */
    CH_MC_P_LOCAL = 1u << 4,    /* version quit: the proxy answers itself */
    CH_MC_P_REFUSED = 1u << 5,  /* stats flush_all verbosity ...: recognised, parsed as a line
                                   of tokens, and refused by the proxy with an error */
    CH_MC_P_CAS_VALUE = 1u << 6 /* gets gats: each VALUE line of the reply carries a cas */
};

unsigned ch_mc_cmd_props(ch_mc_cmd cmd);
const char *ch_mc_cmd_name(ch_mc_cmd cmd); /* "get", ...; "" for UNKNOWN or out of range */

/* The bit of meta flag letter c (A-Z, a-z) in ch_mc_request.mflags. */
#define CH_MC_FLAG(c)                                                                              \
    ((c) >= 'a' && (c) <= 'z' ? (uint64_t)1 << ((c) - 'a' + 26)                                   \
     : (c) >= 'A' && (c) <= 'Z' ? (uint64_t)1 << ((c) - 'A')                                      \
                                : (uint64_t)0)

typedef struct ch_mc_request {
    /* Set by the caller before the call: room for the tokens of the line. */
    ch_mc_span *tok;
    size_t tok_cap;

    /* Filled on CH_MC_OK (and zero otherwise, but for tok/tok_cap). */
    ch_mc_cmd cmd;
    size_t ntokens;        /* every token of the line, the command name included; may exceed
                              tok_cap: tok[0..tok_cap) are then filled and the caller retries with
                              a larger array (every other field is complete regardless) */
    ch_mc_span line;       /* the command line without its terminator ("\r\n" or "\n") */
    uint32_t line_len;     /* the command line with its terminator */
    uint32_t key_first;    /* token index of the first key */
    uint32_t nkeys;        /* keys: tokens key_first .. key_first + nkeys - 1 (0: no key) */
    ch_mc_span key;        /* the first key token (as sent: base64 when b64) */
    ch_mc_span noreply;    /* text: the trailing "noreply" token, or none */
    ch_mc_span quiet;      /* meta: the "q" flag token, or none */
    ch_mc_span opaque;     /* meta: the whole "O<token>" flag token, or none */
    ch_mc_span data;       /* storage: the data block without its "\r\n" (len 0 for 0 bytes) */
    bool b64;              /* meta: the "b" flag: keys are base64 (ch_mc_b64_decode them) */
    char mode;             /* ms/ma: the M flag's character ('E','A','P','R','S' / 'I','+',
                              'D','-'), 0 when absent */
    uint64_t mflags;       /* meta: CH_MC_FLAG(letter) of each flag token present */
    uint32_t flags;        /* text storage: <flags>; ms: the F flag's value */
    int64_t exptime;       /* text storage, touch, gat/gats: <exptime>; meta: the T flag's */
    uint64_t bytes;        /* storage: declared data length */
    uint64_t cas;          /* cas: <cas unique>; meta: the C flag's value */
    uint64_t delta;        /* incr/decr: <value> */
} ch_mc_request;

/* Parses one request at the start of buf[0..len), under lim (NULL: defaults).
 * CH_MC_OK: *consumed is the request's length (line, and for a storage command its data block
 * and "\r\n"), out is filled. An unknown command is CH_MC_OK with cmd CH_MC_CMD_UNKNOWN and its
 * tokens (answer "ERROR"); a CH_MC_P_REFUSED command is CH_MC_OK with its tokens, checked no
 * further. CH_MC_INCOMPLETE: *need is the least total length buf must reach before a retry can
 * succeed (> len): len + 1 while the line has no end, then line + bytes + 2 exactly for a
 * storage command. (While the line has no end the answer can only change once a "\n" arrives
 * or len reaches max_line / max_get_line, so a caller fed in small pieces may search only the
 * new bytes for "\n" before calling again, keeping a long get line at O(n) in all.) CH_MC_ERROR / CH_MC_CLOSE: see above; err (may be NULL) receives a one-line
 * reason for "CLIENT_ERROR <err>\r\n", in memcached's words where memcached has them
 * ("bad command line format", "bad data chunk", "invalid flag", ...), printable ASCII only.
 * Keys must be 1..max_key bytes of no control characters (bytes <= 0x20 and 0x7f are refused).
 * Meta flags are checked against the flags protocol.txt lists for each command (P and L are
 * accepted by all), and numeric flag tokens (C E F J D N R T) must be numbers.
 * Cost: O(line length); a data block is skipped by its length, never scanned. */
ch_mc_status ch_mc_parse_request(const char *buf, size_t len, const ch_mc_limits *lim,
                                 ch_mc_request *out, size_t *consumed, size_t *need, char *err,
                                 size_t errlen);

/* Base64 (RFC 4648 standard alphabet, "=" padding, canonical: length a multiple of 4, unused
 * bits zero) decoding of src[0..srclen) into dst[0..dstcap). Returns the decoded length, or -1
 * when src is not canonical base64 or the result does not fit dstcap. Route a "b" key by its
 * decoded bytes: "get foo" and "mg Zm9v b" name the same item. */
long ch_mc_b64_decode(const char *src, size_t srclen, unsigned char *dst, size_t dstcap);

/* ---- replies ------------------------------------------------------------------------------- */

/* The reply line's code. */
typedef enum ch_mc_code {
    CH_MC_R_NONE = 0,
    CH_MC_R_VALUES,       /* get family: one or more VALUE blocks, then END */
    CH_MC_R_END,          /* get family: END alone (every key missed) */
    CH_MC_R_STORED, CH_MC_R_NOT_STORED, CH_MC_R_EXISTS, CH_MC_R_NOT_FOUND,
    CH_MC_R_DELETED, CH_MC_R_TOUCHED,
    CH_MC_R_NUMBER,       /* incr/decr: the new value */
    CH_MC_R_VERSION,      /* VERSION <text> */
    CH_MC_R_OK,           /* OK (verbosity, flush_all; refused by the proxy, scanned anyway) */
    CH_MC_R_VA,           /* meta: VA <size> <flags>*, then a data block */
    CH_MC_R_HD, CH_MC_R_EN, CH_MC_R_NF, CH_MC_R_NS, CH_MC_R_EX,
    CH_MC_R_MN,           /* mn */
    CH_MC_R_ME,           /* me: ME <key> <k>=<v>* */
    CH_MC_R_ERROR,        /* ERROR */
    CH_MC_R_CLIENT_ERROR, /* CLIENT_ERROR <msg> */
    CH_MC_R_SERVER_ERROR, /* SERVER_ERROR <msg> */
} ch_mc_code;

/* What the reply means to the proxy (counting, miss vs hit, errors). */
typedef enum ch_mc_class {
    CH_MC_C_HIT,     /* values returned: VALUE.. END with >= 1 value, VA, mg's HD, ME */
    CH_MC_C_MISS,    /* END alone, EN, NOT_FOUND, NF */
    CH_MC_C_OK,      /* done: STORED, DELETED, TOUCHED, VERSION, OK, MN, HD (ms md ma) */
    CH_MC_C_NOT_STORED, /* a normal refusal: NOT_STORED, EXISTS, NS, EX */
    CH_MC_C_INTEGER, /* incr/decr's number (integer) */
    CH_MC_C_ERROR,   /* the server's own error: ERROR, CLIENT_ERROR, SERVER_ERROR */
} ch_mc_class;

typedef struct ch_mc_reply {
    ch_mc_code code;
    ch_mc_class cls;
    size_t len;        /* the whole reply's length */
    ch_mc_span line;   /* the first line without "\r\n" (VALUE replies: the first VALUE line) */
    ch_mc_span data;   /* VA: the data block without "\r\n" */
    ch_mc_span text;   /* CLIENT_ERROR/SERVER_ERROR message, VERSION text (may be empty) */
    uint64_t integer;  /* NUMBER: the value; VALUES: how many VALUE blocks; VA: size */
} ch_mc_reply;

/* Scans one complete reply to one request of command cmd (as sent to the backend: noreply and q
 * stripped) at the start of buf[0..len). Accepted, per command (and "ERROR", "CLIENT_ERROR
 * <msg>", "SERVER_ERROR <msg>" for every one):
 *   get gets gat gats: "VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n"* then "END\r\n"
 *     (<cas> present exactly for gets and gats; keys and numbers checked as in requests);
 *   set add replace append prepend cas: STORED NOT_STORED EXISTS NOT_FOUND;
 *   incr decr: a decimal number (uint64), NOT_FOUND;  delete: DELETED NOT_FOUND;
 *   touch: TOUCHED NOT_FOUND;  version: "VERSION <text>";  verbosity flush_all: OK;
 *   mg: VA (data block), HD, EN;  ms: HD NS EX NF;  md: HD NF EX;  ma: VA HD NF NS EX;
 *   mn: MN;  me: "ME <key> ..." or EN;  every meta code may carry flag tokens ("HD O1 k..").
 *   lru_crawler (the proxy's "lru_crawler metadump all", a rejoin's walk): "key=..." lines
 *     (ended by "\n" or "\r\n") then "END\r\n" (code END), or one line: BUSY (code
 *     SERVER_ERROR) or an error.
 *   Other commands (stats, ...): refused by the proxy, never sent; CH_MC_CLOSE.
 * CH_MC_OK fills *out (may be NULL); CH_MC_INCOMPLETE sets *need (> len; for a data block in
 * progress: its end + 2, plus 5 for the "END\r\n" a get reply still owes); anything else is
 * CH_MC_CLOSE with err. Lines are bounded by lim->max_line, data blocks by lim->max_item.
 * Cost: O(reply length) in lines; data blocks are skipped by their length. */
ch_mc_status ch_mc_scan_reply(const char *buf, size_t len, ch_mc_cmd cmd, const ch_mc_limits *lim,
                              ch_mc_reply *out, size_t *need, char *err, size_t errlen);

/* One key's part of the reply to a multi-key get-family request sent for several single-key
 * ones (the proxy joins gets queued on one connection: "get k1 .. kn"), for any key but the
 * last (whose part, what is left, is an ordinary reply: ch_mc_scan_reply). The reply has the
 * VALUE blocks of the keys found, in key order, then END; memcached answers an error in place
 * of the whole reply (nothing before it or after it). At the start of buf[0..len), for the key
 * key[0..klen):
 *   - its VALUE block: CH_MC_OK, out->code CH_MC_R_VALUES, out->len the block's length, out->line
 *     its VALUE line, out->integer 1;
 *   - a VALUE line of another key, or END: a miss, CH_MC_OK, out->code CH_MC_R_END, out->len 0
 *     (nothing is this key's: the next key's part starts at the same place);
 *   - an error line: CH_MC_OK, out->code its code, out->len 0 (the error is every remaining
 *     key's answer; the last key's ch_mc_scan_reply takes it off the stream);
 * and CH_MC_INCOMPLETE (*need) and CH_MC_CLOSE as ch_mc_scan_reply does. A decision waits for a
 * whole line; a VALUE line is checked as there (<cas> exactly for gets and gats). out->cls is
 * set as ch_mc_scan_reply sets it. Cost: O(the line) plus the block's data, skipped by length. */
ch_mc_status ch_mc_scan_multi_part(const char *buf, size_t len, ch_mc_cmd cmd, const char *key,
                                   size_t klen, const ch_mc_limits *lim, ch_mc_reply *out,
                                   size_t *need, char *err, size_t errlen);

/* Quiet mode: true when memcached does not send reply r to a meta request cmd that carried the
 * "q" flag (protocol.txt "q: use noreply semantics for return codes", and proto_parser.c):
 *   mg: EN (a miss) is suppressed; VA and HD (hits) are sent;
 *   ms: HD (stored) is suppressed; NS EX NF are sent;
 *   md: HD (deleted) is suppressed; NF EX are sent;
 *   ma: HD, and VA (success with the v flag), are suppressed; NF NS EX are sent;
 *   mn, me: q does not apply (false).
 * Errors (ERROR, CLIENT_ERROR, SERVER_ERROR) are always sent. */
bool ch_mc_quiet_suppresses(ch_mc_cmd cmd, const ch_mc_reply *r);

/* One VALUE block of a get-family reply. */
typedef struct ch_mc_value {
    ch_mc_span block;  /* "VALUE ...\r\n<data>\r\n", whole */
    ch_mc_span key;
    ch_mc_span data;   /* without "\r\n" */
    uint32_t flags;
    uint64_t cas;      /* 0 when absent */
    bool has_cas;
} ch_mc_value;

/* Iterates the VALUE blocks of a get reply buf[0..len) (len = ch_mc_reply.len of a CH_MC_OK
 * scan). Start with *pos = 0; each call that returns true fills *v and advances *pos; false at
 * "END\r\n" or at anything that is not a well-formed VALUE block inside len. Offsets are from
 * buf. */
bool ch_mc_value_next(const char *buf, size_t len, size_t *pos, ch_mc_value *v);

/* ---- keys ---------------------------------------------------------------------------------- */

/* Whether key[0..len) can go in a command line as it is: 1 byte or more, none <= 0x20 (space,
 * control) and no 0x7f. A key that cannot goes in base64 with the meta "b" flag. */
bool ch_mc_key_plain(const char *key, size_t len);

/* Base64 (the alphabet and padding ch_mc_b64_decode reads) of src[0..srclen) into
 * dst[0..dstcap). Returns the length it needs, 4 * ceil(srclen / 3); when that exceeds dstcap,
 * dst is left unspecified. */
size_t ch_mc_b64_encode(const void *src, size_t srclen, char *dst, size_t dstcap);

/* ---- copying an item with the lifetime it has left ----------------------------------------------
 * The proxy's warm-up fills (mc_codec.c) and `chash migrate` (tools/chash/mig_mc.c) copy an item
 * from one memcached to another the same way: ch_mc_copy_fetch's request at the source, what
 * ch_mc_copy_read finds in its reply, and a store at the other server with the client flags and
 * the exptime ch_mc_copy_exptime gives. */

/* memcached reads an exptime above 30 days (in seconds) as an absolute Unix time. */
#define CH_MC_RELATIVE_MAX 2592000

/* The latest exptime memcached keeps: it reads an exptime into 32 bits (proto_text.c's
 * safe_strtol into an int32_t), so 1.6.18 stores "set k 0 2147483648 1" expired at once and
 * "set k 0 4294967296 1" as never expiring. 2^31 - 1 is 2038-01-19. */
#define CH_MC_EXPTIME_MAX INT64_C(2147483647)

/* A key as `lru_crawler metadump` writes it (URL-encoded, "%XX" escapes) decoded from
 * s[0, n) into out[0, cap): its length; -1 for a bad escape, an empty key or one longer than
 * cap. No terminating NUL. */
long ch_mc_url_decode(const char *s, size_t n, char *out, size_t cap);

/* Writes "mg <key> v t f\r\n" (the value, its seconds left, its client flags) into
 * dst[0..dstcap), or "mg <base64> b v t f\r\n" for a key that is not ch_mc_key_plain. Returns the
 * length it needs (dst unspecified when that exceeds dstcap); 0 for an empty key. */
size_t ch_mc_copy_fetch(const char *key, size_t klen, char *dst, size_t dstcap);

/* What a copy needs of the item. */
typedef struct ch_mc_copy {
    ch_mc_span data; /* the value, without its "\r\n" */
    int64_t ttl;     /* seconds left: -1 never expires, 0 expires within the second */
    uint32_t flags;  /* the client flags */
} ch_mc_copy;

/* Reads buf[0..len), exactly one whole reply to ch_mc_copy_fetch's request (as
 * ch_mc_scan_reply frames it for CH_MC_CMD_MG): 1 and *out for "VA <size> ..." with a t and an f
 * token, 0 for EN (the key is not there), -1 for anything else (an error line, HD, a VA without
 * t or f or with one that is not a number, bytes that are not one reply). Cost: O(len) at most;
 * the data is not scanned. */
int ch_mc_copy_read(const char *buf, size_t len, ch_mc_copy *out);

/* The exptime that stores a copy with ttl seconds left (ch_mc_copy.ttl), now_unix the wall clock
 * in seconds: true and *exptime, 0 (never) for -1, ttl itself up to CH_MC_RELATIVE_MAX, and
 * beyond it now_unix + ttl (memcached's rule; the clocks of the copier and the server are taken
 * to agree), saturating at CH_MC_EXPTIME_MAX (a source's t is any int64, and a sum past 32 bits
 * would be stored wrapped); false when nothing is worth copying: ttl 0 (the item expires within
 * the second) or below -1. memcached counts lifetimes in whole seconds, so a copy may outlive its original by up
 * to one second. */
bool ch_mc_copy_exptime(int64_t ttl, int64_t now_unix, int64_t *exptime);

/* ---- rebuilding lines (pure helpers for the codec) ----------------------------------------- */

/* Writes r's command line (buf is the request's buffer) with its "noreply" token and every
 * meta "q" flag token left out, tokens joined by one space, ended by "\r\n", into dst[0..dstcap). Returns the length it
 * needs; when that exceeds dstcap, dst is left unspecified. Requires r->ntokens <= r->tok_cap
 * (else returns 0). A storage command's data block is not included. */
size_t ch_mc_line_strip(const char *buf, const ch_mc_request *r, char *dst, size_t dstcap);

/* Writes a get-family line for a subset of r's keys: the command, for gat/gats its exptime,
 * then keys[0..nkeys) (indexes into the request's keys, 0 .. r->nkeys - 1, in the order given),
 * "\r\n". Returns the length needed (as above), or 0 when r is not get-family, nkeys is 0, a
 * key index is out of range or r->ntokens > r->tok_cap. */
size_t ch_mc_get_line_subset(const char *buf, const ch_mc_request *r, const uint32_t *keys,
                             size_t nkeys, char *dst, size_t dstcap);

#ifdef __cplusplus
}
#endif

#endif /* CHASH_MC_H */
