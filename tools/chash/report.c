/* SPDX-License-Identifier: Apache-2.0 */
/*
 * report.c — `chash report`: placement measurements made through libchash, written as one
 * self-contained HTML page with inline CSS and inline SVG charts (no scripts, no external
 * resources of any kind).
 *
 * The page is first written to a memory stream and copied to the caller's stream only once every
 * measurement has succeeded, so a failure leaves nothing half-written. Everything that comes from
 * the caller (node ids) is HTML-escaped where it is written; all other text comes from the
 * registries and from numbers.
 */
#define _POSIX_C_SOURCE 200809L

#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF_LIKE(f, a)
#endif

#define KEY_LEN 17          /* "k" + 16 hex digits; keys are stored back to back, no NUL */
#define SVG_W 1000.0        /* every chart is this wide (viewBox units) */
#define MAX_BAR_NODES 16    /* the weights chart draws at most this many nodes */
#define MAX_STRIP_TICKS 2000 /* the ring-position strips draw at most this many points */
#define TIMING_PASSES 3     /* hash speed: the best of this many passes over the keys */
#define MAX_KEYS 100000000u /* sample keys take 25 bytes each */

static const uint32_t vnode_steps[] = {1, 10, 40, 100, 160, 500, 1000};
#define VNODE_STEPS (sizeof vnode_steps / sizeof vnode_steps[0])

typedef struct rep {
    const report_opts *o;
    FILE *f;        /* the memory stream the page is written to */
    char *keys;     /* o->keys sample keys, KEY_LEN bytes each */
    uint64_t *kh;   /* ch_hash64(o->hash, key i): what every table built with o->hash looks up */
    double total_w; /* the sum of o->nodes' weights */
    char *err;
    size_t errlen;
    volatile uint32_t sink; /* keeps the timed hash loops from being optimised away */
} rep;

static int fail(rep *r, const char *fmt, ...) PRINTF_LIKE(2, 3);
static int fail(rep *r, const char *fmt, ...)
{
    if (r->err != NULL && r->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- text ---------------------------------------------------------------------------------- */

/* Cuts a UTF-8 sequence that a bounded snprintf left incomplete at the end of s. */
static void utf8_trim(char *s)
{
    size_t n = strlen(s), i = n;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
        i--;
    if (i > 0 && (unsigned char)s[i - 1] >= 0xC0) {
        unsigned char lead = (unsigned char)s[i - 1];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        if (n - (i - 1) < need)
            s[i - 1] = '\0';
    }
}

/* Writes s escaped for HTML text and attribute values; control characters become '?'. */
static void put_esc(FILE *f, const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(c < 0x20 || c == 0x7F ? '?' : c, f);
        }
    }
}

/* Formats into a 2 KiB buffer and writes the result escaped. */
static void vput_fmt(FILE *f, const char *fmt, va_list ap)
{
    char buf[2048];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n >= 0 && (size_t)n >= sizeof buf)
        utf8_trim(buf);
    put_esc(f, buf);
}

static void put_fmt(FILE *f, const char *fmt, ...) PRINTF_LIKE(2, 3);
static void put_fmt(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vput_fmt(f, fmt, ap);
    va_end(ap);
}

/* Copies at most max characters (code points) of s into buf, ending with "…" when cut.
 * buf must hold 4 * max + 4 bytes. */
static const char *short_label(char *buf, const char *s, size_t max)
{
    size_t chars = 0, i = 0;
    for (; s[i] != '\0'; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80 && chars++ == max)
            break;
        buf[i] = s[i];
    }
    if (s[i] != '\0')
        strcpy(buf + i, "\xE2\x80\xA6"); /* … */
    else
        buf[i] = '\0';
    return buf;
}

/* ---- SVG ----------------------------------------------------------------------------------- */

/* A <text> element at (x, y). attrs is trusted markup; the formatted content is escaped. */
static void text(FILE *f, double x, double y, const char *attrs, const char *fmt, ...)
    PRINTF_LIKE(5, 6);
static void text(FILE *f, double x, double y, const char *attrs, const char *fmt, ...)
{
    va_list ap;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" %s>", x, y, attrs);
    va_start(ap, fmt);
    vput_fmt(f, fmt, ap);
    va_end(ap);
    fputs("</text>\n", f);
}

static void line(FILE *f, double x1, double y1, double x2, double y2, const char *attrs)
{
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" %s/>\n", x1, y1, x2, y2,
            attrs);
}

/* A plot area in SVG units and the value range of its y axis. */
typedef struct plot {
    double x, y, w, h;
    double lo, hi;
} plot;

static double py(const plot *p, double v)
{
    return p->y + p->h - (v - p->lo) / (p->hi - p->lo) * p->h;
}

/* A 1, 2 or 5 times a power of ten that cuts range into about parts steps; 1 for an empty or
 * unusable range (e.g. every value 0, as the balance of a one-node fleet). */
static double nice_step(double range, double parts)
{
    if (!(range > 0.0) || !isfinite(range))
        return 1.0;
    double raw = range / parts, mag = pow(10.0, floor(log10(raw))), m = raw / mag;
    return (m < 1.5 ? 1.0 : m < 3.0 ? 2.0 : m < 7.0 ? 5.0 : 10.0) * mag;
}

/* Sets p->hi to the first multiple of a nice step at or above top; returns the step. */
static double nice_top(plot *p, double top)
{
    double step = nice_step(top - p->lo, 5.0);
    p->hi = p->lo + ceil((top - p->lo) / step - 1e-9) * step;
    if (p->hi <= p->lo)
        p->hi = p->lo + step;
    return step;
}

/* Grid lines and labels every step (labels show value * scale followed by unit), the baseline,
 * and the axis title written upwards along the left edge. */
static void axis_y(FILE *f, const plot *p, double step, double scale, const char *unit,
                   const char *title)
{
    double s = step * scale;
    int decimals = s >= 1.0 ? 0 : s >= 0.1 ? 1 : 2;
    for (int i = 0; i <= 100; i++) { /* nice_top() makes it about five */
        double v = p->lo + i * step;
        if (v > p->hi + step * 1e-6)
            break;
        line(f, p->x, py(p, v), p->x + p->w, py(p, v), "class=\"grid\"");
        text(f, p->x - 6, py(p, v) + 4, "class=\"tick\" text-anchor=\"end\"", "%.*f%s", decimals,
             v * scale, unit);
    }
    line(f, p->x, p->y + p->h, p->x + p->w, p->y + p->h, "class=\"axis\"");
    if (title != NULL) {
        char attrs[160];
        snprintf(attrs, sizeof attrs,
                 "class=\"axt\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\"",
                 p->x - 48, p->y + p->h / 2);
        text(f, p->x - 48, p->y + p->h / 2, attrs, "%s", title);
    }
}

/* A bar from the baseline up to v, with its value as a hover tooltip. NaN draws nothing. */
static void bar(FILE *f, const plot *p, double x, double w, double v, const char *fill,
                const char *tip)
{
    if (isnan(v))
        return;
    double top = py(p, v), base = py(p, p->lo);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>",
            x, top, w, base - top, fill);
    put_esc(f, tip);
    fputs("</title></rect>\n", f);
}

/* A horizontal dashed line across the plot at v. */
static void hline(FILE *f, const plot *p, double v, const char *color)
{
    char attrs[120];
    snprintf(attrs, sizeof attrs, "stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"6 4\"",
             color);
    line(f, p->x, py(p, v), p->x + p->w, py(p, v), attrs);
}

typedef struct legend_item {
    const char *label;
    const char *color;
    int dashed; /* 1: a dashed line, 0: a filled square */
} legend_item;

/* A row of legend items starting at (x, y), the baseline of the labels. */
static void legend(FILE *f, double x, double y, const legend_item *it, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (it[i].dashed) {
            char attrs[120];
            snprintf(attrs, sizeof attrs,
                     "stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"6 4\"", it[i].color);
            line(f, x, y - 4, x + 22, y - 4, attrs);
            x += 28;
        } else {
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n",
                    x, y - 10, it[i].color);
            x += 17;
        }
        text(f, x, y, "class=\"leg\"", "%s", it[i].label);
        x += 6.6 * (double)strlen(it[i].label) + 22;
    }
}

/* Opens a chart: <figure>, its heading and an <svg> of height h. */
static void fig_open(FILE *f, const char *id, const char *title, double h)
{
    fprintf(f, "<figure id=\"%s\">\n<h2>", id);
    put_esc(f, title);
    fprintf(f,
            "</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" "
            "width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"",
            SVG_W, h, SVG_W, h);
    put_esc(f, title);
    fputs("\">\n", f);
}

static void caption(FILE *f, const char *fmt, ...) PRINTF_LIKE(2, 3);
static void caption(FILE *f, const char *fmt, ...)
{
    va_list ap;
    fputs("<figcaption>", f);
    va_start(ap, fmt);
    vput_fmt(f, fmt, ap);
    va_end(ap);
    fputs("</figcaption>\n</figure>\n", f);
}

/* ---- horizontal rows ----------------------------------------------------------------------- */

/* The charts with a row per registry entry (every algorithm, every hash) draw horizontal bars:
 * one label per row, at the left, so the labels cannot crowd one another however long the
 * registries grow; the chart grows downwards instead. Rows come in families, each under a
 * heading, in the order of the family names. */

/* One row: a registry entry, the family it is drawn under and its place within the family. */
typedef struct row {
    unsigned id;    /* the registry value */
    unsigned group; /* index into the chart's family names */
    double key;     /* ascending within a family, NaN last, ties by id; 0 keeps registry order */
} row;

static int row_cmp(const void *pa, const void *pb)
{
    const row *a = pa, *b = pb;
    if (a->group != b->group)
        return a->group < b->group ? -1 : 1;
    int an = isnan(a->key), bn = isnan(b->key);
    if (an != bn)
        return an - bn;
    if (!an && a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Sorts rows into drawing order; returns the number of families among them. */
static size_t row_sort(row *rows, size_t n)
{
    qsort(rows, n, sizeof *rows, row_cmp);
    size_t groups = 0;
    for (size_t i = 0; i < n; i++)
        groups += i == 0 || rows[i].group != rows[i - 1].group;
    return groups;
}

/* The families of the placement algorithms: whose placement each one is. */
static const char *const algo_families[] = {"chash\xE2\x80\x99s placements", "twemproxy",
                                            "libmemcached", "client libraries", "proxies",
                                            "other schemes"};

static unsigned algo_family(ch_algo_id a)
{
    switch (a) {
    case CH_ALGO_MODULO: case CH_ALGO_RING: case CH_ALGO_RENDEZVOUS: case CH_ALGO_JUMP:
    case CH_ALGO_MAGLEV:
        return 0;
    case CH_ALGO_KETAMA: case CH_ALGO_MODULA: case CH_ALGO_RANDOM:
        return 1;
    case CH_ALGO_LIBMEMCACHED_KETAMA: case CH_ALGO_LIBMEMCACHED_KETAMA_SPY:
        return 2;
    case CH_ALGO_JAVA_HASHCODE_RING: case CH_ALGO_MD5_64_RING: case CH_ALGO_DALLI_3:
    case CH_ALGO_UHASHRING_2: case CH_ALGO_UHASHRING_KETAMA_2: case CH_ALGO_GROUPCACHE_0:
    case CH_ALGO_GUAVA_31: case CH_ALGO_SPYMEMCACHED_2: case CH_ALGO_SPYMEMCACHED_LIBMEMCACHED_2:
    case CH_ALGO_PECL_MEMCACHE_4: case CH_ALGO_HASHRING_3: case CH_ALGO_HASHRING_HASH_RING_3:
    case CH_ALGO_PYMEMCACHE_3: case CH_ALGO_PREDIS_1: case CH_ALGO_PREDIS_KETAMA_1:
    case CH_ALGO_PHPREDIS_ARRAY_5: case CH_ALGO_PHPREDIS_ARRAY_RANGE_5: case CH_ALGO_REDIS_RB_4:
    case CH_ALGO_REDIS_RB_5: case CH_ALGO_GO_REDIS_RING_5: case CH_ALGO_DJANGO_REDIS_SHARD_5:
    case CH_ALGO_CACHE_MEMCACHED_1: case CH_ALGO_CMFAST_0: case CH_ALGO_PYTHON_MEMCACHED_1:
    case CH_ALGO_GOMEMCACHE_0: case CH_ALGO_NODE_MEMCACHED_2: case CH_ALGO_MEMJS_1:
        return 3;
    case CH_ALGO_NGINX_1: case CH_ALGO_HAPROXY_2: case CH_ALGO_ENVOY_RING_HASH_1:
        return 4;
    default: /* a registry entry not sorted into a family yet is still drawn, under "other" */
        return 5;
    }
}

/* The families of the hash functions: whose hash each one is. */
static const char *const hash_families[] = {"chash\xE2\x80\x99s hashes", "twemproxy\xE2\x80\x99s",
                                            "client libraries\xE2\x80\x99 and proxies\xE2\x80\x99",
                                            "other hashes"};

static unsigned hash_family(ch_hash_id h)
{
    switch (h) {
    case CH_HASH_FNV1A32_FMIX: case CH_HASH_FNV1A32: case CH_HASH_MURMUR3_32: case CH_HASH_XXH3:
    case CH_HASH_MD5:
        return 0;
    case CH_HASH_TW_ONE_AT_A_TIME: case CH_HASH_TW_CRC16: case CH_HASH_TW_CRC32:
    case CH_HASH_TW_CRC32A: case CH_HASH_TW_FNV1_64: case CH_HASH_TW_FNV1A_64:
    case CH_HASH_TW_FNV1_32: case CH_HASH_TW_FNV1A_32: case CH_HASH_TW_HSIEH:
    case CH_HASH_TW_MURMUR: case CH_HASH_TW_JENKINS:
        return 1;
    case CH_HASH_JAVA_HASHCODE: case CH_HASH_MD5_64BE: case CH_HASH_SDBM:
    case CH_HASH_FNV1A32_FMIX_UTF16: case CH_HASH_MURMUR2_64: case CH_HASH_SHA256_64BE:
        return 2;
    default:
        return 3;
    }
}

/* A family's heading row at y (its top): the name at the left edge under a rule across. */
static void family_head(FILE *f, double y, const char *name)
{
    line(f, 8, y + 3, SVG_W - 8, y + 3, "class=\"sep\"");
    text(f, 8, y + 18, "class=\"grp\"", "%s", name);
}

/* The x extent of a horizontal bar chart: [x, x + w] shows the values [0, hi]. */
typedef struct hscale {
    double x, w, hi;
} hscale;

static double hx(const hscale *s, double v)
{
    return s->x + v / s->hi * s->w;
}

/* Sets s->hi to the first multiple of a nice step (about parts of them) at or above top;
 * returns the step. */
static double hnice(hscale *s, double top, double parts)
{
    double step = nice_step(top, parts);
    s->hi = ceil(top / step - 1e-9) * step;
    if (!(s->hi > 0.0))
        s->hi = step;
    return step;
}

/* Vertical grid lines from y0 down to y1 every step, labelled above y0 (and below y1 when
 * bottom is set) with value * scale followed by unit. */
static void axis_x(FILE *f, const hscale *s, double step, double scale, const char *unit,
                   double y0, double y1, int bottom)
{
    double v_step = step * scale;
    int decimals = v_step >= 1.0 ? 0 : v_step >= 0.1 ? 1 : 2;
    for (int i = 0; i <= 100; i++) { /* hnice() makes it a handful */
        double v = i * step;
        if (v > s->hi + step * 1e-6)
            break;
        double x = hx(s, v);
        line(f, x, y0, x, y1, i == 0 ? "class=\"axis\"" : "class=\"grid\"");
        text(f, x, y0 - 5, "class=\"tick\" text-anchor=\"middle\"", "%.*f%s", decimals,
             v * scale, unit);
        if (bottom)
            text(f, x, y1 + 14, "class=\"tick\" text-anchor=\"middle\"", "%.*f%s", decimals,
                 v * scale, unit);
    }
}

/* A bar from 0 to v, h high with its top at y, a tooltip, and value printed past its end and
 * at or right of value_x (so that it clears the chart's reference lines), its baseline a little
 * below the bar's middle. NaN draws nothing. */
static void hbar(FILE *f, const hscale *s, double y, double h, double v, const char *fill,
                 const char *tip, const char *value, double value_x)
{
    if (isnan(v))
        return;
    double end = hx(s, v);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>",
            s->x, y, end - s->x, h, fill);
    put_esc(f, tip);
    fputs("</title></rect>\n", f);
    text(f, fmax(end, value_x) + 5, y + h / 2 + 4, "class=\"val\"", "%s", value);
}

/* ---- measurements -------------------------------------------------------------------------- */

static int build(rep *r, const ch_node *nodes, size_t n, ch_algo_id algo, ch_hash_id hash,
                 uint32_t vnodes, ch_table **t, const char *chart)
{
    ch_options opt;
    ch_options_init(&opt);
    opt.algo = algo;
    opt.hash = hash;
    opt.vnodes = vnodes;
    ch_error err = {.size = sizeof(err)};
    int rc = ch_table_build_err(nodes, n, &opt, t, &err);
    if (rc != CH_OK)
        return fail(r, "%s: building a %s table of %zu nodes (hash %s, vnodes %" PRIu32 "): %s",
                    chart, ch_algo_name(algo), n, ch_hash_name(hash), vnodes, err.message);
    return 0;
}

static int shares(rep *r, const ch_table *t, double *s, const char *chart)
{
    int rc = ch_table_shares(t, s);
    return rc == CH_OK ? 0 : fail(r, "%s: ch_table_shares: %s", chart, ch_strerror(rc));
}

/* The load of each node as a multiple of its fair share w_i / W: the root mean square distance
 * from 1 (the standard deviation when weights are equal), the minimum and the maximum. */
static void load_stats(const double *s, const ch_node *nodes, size_t n, double total_w,
                       double *sd, double *mn, double *mx)
{
    double sq = 0.0;
    *mn = INFINITY;
    *mx = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double ratio = s[i] * total_w / nodes[i].weight;
        sq += (ratio - 1.0) * (ratio - 1.0);
        *mn = fmin(*mn, ratio);
        *mx = fmax(*mx, ratio);
    }
    *sd = sqrt(sq / (double)n);
}

static int has_id(const ch_node *nodes, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(nodes[i].id, id) == 0)
            return 1;
    return 0;
}

/* ---- chart 1: keys moved by one membership change ------------------------------------------ */

/* Measures, for every algorithm, the share of sample keys whose owner changes when nodes[n] is
 * appended to nodes[0..n) (into add[]) and when nodes[n-1] is removed (into rm[]; NaN when
 * n == 1). nodes holds n + 1 entries of weight 1. */
static int measure_moved(rep *r, const ch_node *nodes, double *add, double *rm)
{
    const report_opts *o = r->o;
    const size_t n = o->n;
    const char *chart = "moved-keys chart";
    for (unsigned a = 0; a < CH_ALGO_COUNT_; a++) {
        ch_table *before = NULL, *grown = NULL, *shrunk = NULL;
        int rc = build(r, nodes, n, (ch_algo_id)a, o->hash, o->vnodes, &before, chart) ||
                 build(r, nodes, n + 1, (ch_algo_id)a, o->hash, o->vnodes, &grown, chart) ||
                 (n >= 2 &&
                  build(r, nodes, n - 1, (ch_algo_id)a, o->hash, o->vnodes, &shrunk, chart));
        if (rc == 0) {
            /* Node i is index i in all three tables, so an index change is an owner change. A
             * client library's scheme hashes the keys its own way. */
            ch_table_info info = {.size = sizeof(info)};
            ch_table_info_get(before, &info);
            int own = info.hash != o->hash;
            int keyed = (ch_algo_flags((ch_algo_id)a) & CH_ALGO_F_KEYED) != 0;
            size_t moved_add = 0, moved_rm = 0;
            for (size_t i = 0; i < o->keys; i++) {
                const char *k = r->keys + i * KEY_LEN;
                if (keyed) { /* pymemcache@3 places by the key itself */
                    size_t owner = ch_lookup(before, k, KEY_LEN);
                    moved_add += ch_lookup(grown, k, KEY_LEN) != owner;
                    if (shrunk != NULL)
                        moved_rm += ch_lookup(shrunk, k, KEY_LEN) != owner;
                    continue;
                }
                uint64_t kh = own ? ch_key_hash(before, k, KEY_LEN) : r->kh[i];
                size_t owner = ch_lookup_hash(before, kh);
                moved_add += ch_lookup_hash(grown, kh) != owner;
                if (shrunk != NULL)
                    moved_rm += ch_lookup_hash(shrunk, kh) != owner;
            }
            add[a] = (double)moved_add / (double)o->keys;
            rm[a] = shrunk != NULL ? (double)moved_rm / (double)o->keys : NAN;
        }
        ch_table_free(before);
        ch_table_free(grown);
        ch_table_free(shrunk);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* Layout of the moved-keys chart, in SVG units. A scheme's row holds two bars, node added
 * above node removed, each with its value past its end; the rows' labels sit left of
 * MOVED_LABEL_X. */
#define MOVED_LABEL_X 215.0 /* the right edge of the row labels */
#define MOVED_TOP 66.0   /* the top of the first row; the x axis is labelled above it */
#define MOVED_ROW 32.0   /* one scheme */
#define MOVED_HEAD 26.0  /* one family heading */
#define MOVED_BAR 11.0   /* each of a row's two bars; they sit at +4 and +17 */

/* Draws the chart: a row per algorithm, grouped by family, sorted within a family by the keys
 * moved when a node is added, the two minimum shares as dashed lines. */
static void draw_moved(rep *r, const double *add, const double *rm, const char *added)
{
    const report_opts *o = r->o;
    const size_t n = o->n;
    FILE *f = r->f;
    const double min_add = 1.0 / (double)(n + 1), min_rm = 1.0 / (double)n;
    const char *c_add = "#4e79a7", *c_rm = "#f28e2b", *c_add_min = "#1d3f66",
               *c_rm_min = "#a04d00";
    char lbl_add[64], lbl_rm[64], lbl_add_min[64], lbl_rm_min[64];
    snprintf(lbl_add, sizeof lbl_add, "one node added (%zu \xE2\x86\x92 %zu)", n, n + 1);
    snprintf(lbl_rm, sizeof lbl_rm, "last node removed (%zu \xE2\x86\x92 %zu)", n, n - 1);
    snprintf(lbl_add_min, sizeof lbl_add_min, "minimum 1/(N+1) = %.2f%%", 100 * min_add);
    snprintf(lbl_rm_min, sizeof lbl_rm_min, "minimum 1/N = %.2f%%", 100 * min_rm);
    const legend_item items[] = {{lbl_add, c_add, 0},
                                 {lbl_add_min, c_add_min, 1},
                                 {lbl_rm, c_rm, 0},
                                 {lbl_rm_min, c_rm_min, 1}};

    row rows[CH_ALGO_COUNT_];
    for (unsigned a = 0; a < CH_ALGO_COUNT_; a++)
        rows[a] = (row){a, algo_family((ch_algo_id)a), add[a]};
    const double bottom = MOVED_TOP + MOVED_ROW * CH_ALGO_COUNT_ +
                          MOVED_HEAD * (double)row_sort(rows, CH_ALGO_COUNT_);

    fig_open(f, "moved", "Keys moved when one node is added or removed", bottom + 26);
    legend(f, 8, 22, items, n >= 2 ? 4 : 2);
    hscale s = {MOVED_LABEL_X + 10, 600, 1.0};
    axis_x(f, &s, 0.1, 100, "%", MOVED_TOP - 8, bottom, 1);
    const double clear = hx(&s, n >= 2 ? min_rm : min_add) + 2; /* values start past the lines */

    double y = MOVED_TOP;
    for (unsigned i = 0; i < CH_ALGO_COUNT_; i++) {
        const unsigned a = rows[i].id;
        if (i == 0 || rows[i].group != rows[i - 1].group) {
            family_head(f, y, algo_families[rows[i].group]);
            y += MOVED_HEAD;
        }
        const char *name = ch_algo_name((ch_algo_id)a);
        char tip[128], val[64];
        text(f, MOVED_LABEL_X, y + 20, "class=\"lbl\" text-anchor=\"end\"", "%s", name);
        snprintf(tip, sizeof tip, "%s, node added: %.3f%% of keys moved", name, 100 * add[a]);
        snprintf(val, sizeof val, "%.1f%% \xC2\xB7 %.2f\xC3\x97 min", 100 * add[a],
                 add[a] / min_add);
        hbar(f, &s, y + 4, MOVED_BAR, add[a], c_add, tip, val, clear);
        if (n >= 2) {
            snprintf(tip, sizeof tip, "%s, last node removed: %.3f%% of keys moved", name,
                     100 * rm[a]);
            snprintf(val, sizeof val, "%.1f%% \xC2\xB7 %.2f\xC3\x97 min", 100 * rm[a],
                     rm[a] / min_rm);
            hbar(f, &s, y + 17, MOVED_BAR, rm[a], c_rm, tip, val, clear);
        }
        y += MOVED_ROW;
    }
    char attrs[120];
    snprintf(attrs, sizeof attrs, "stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"",
             c_add_min);
    line(f, hx(&s, min_add), MOVED_TOP - 4, hx(&s, min_add), bottom, attrs);
    if (n >= 2) {
        snprintf(attrs, sizeof attrs,
                 "stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"", c_rm_min);
        line(f, hx(&s, min_rm), MOVED_TOP - 4, hx(&s, min_rm), bottom, attrs);
    }
    fputs("</svg>\n", f);
    caption(f,
            "The share of sample keys whose owner changes when one node (\"%s\") is appended to "
            "the fleet (N = %zu \xE2\x86\x92 %zu) and when the last node of the list is removed "
            "(N = %zu \xE2\x86\x92 %zu; the last one, so that jump, which can only lose its last "
            "bucket, is measured fairly), for every placement algorithm, grouped by whose "
            "placement it is and sorted within a group by the keys moved on the addition. Each "
            "value is followed by its multiple of the minimum. Measured by building "
            "libchash tables before and after the change and looking up the same %zu sample keys "
            "(seed %" PRIu64 ") in both; hash %s (a client library's scheme uses its own), ring "
            "at %" PRIu32 " points per node, maglev M = %u. Every node has weight 1 here because "
            "modulo and jump have no weights. The dashed lines are what a perfectly balanced "
            "scheme must move: the new node's fair share 1/(N+1), and the removed node's share "
            "1/N; a ring can land a little under them when the node that comes or goes owns "
            "less than its fair share.%s",
            added, n, n + 1, n, n - 1, o->keys, o->seed, ch_hash_name(o->hash), o->vnodes,
            CH_DEFAULT_MAGLEV_SIZE, n >= 2 ? "" : " With one node there is nothing to remove.");
}

static int chart_moved(rep *r)
{
    const report_opts *o = r->o;
    const size_t n = o->n;
    double add[CH_ALGO_COUNT_], rm[CH_ALGO_COUNT_];
    char added[48] = "added-node";

    /* Equal weights (modulo and jump have none), and a new id that is not in the fleet. */
    for (unsigned k = 2; has_id(o->nodes, n, added); k++)
        snprintf(added, sizeof added, "added-node-%u", k);
    ch_node *nodes = malloc((n + 1) * sizeof *nodes);
    if (nodes == NULL)
        return fail(r, "moved-keys chart: out of memory");
    for (size_t i = 0; i < n; i++)
        nodes[i] = (ch_node){o->nodes[i].id, 1.0};
    nodes[n] = (ch_node){added, 1.0};
    int rc = measure_moved(r, nodes, add, rm);
    free(nodes);
    if (rc == 0)
        draw_moved(r, add, rm, added);
    return rc;
}

/* ---- chart 2: ring balance against virtual nodes --------------------------------------------- */

static int chart_vnodes(rep *r)
{
    const report_opts *o = r->o;
    const char *chart = "vnodes chart";
    double sd[VNODE_STEPS], mn[VNODE_STEPS], mx[VNODE_STEPS];
    double *s = malloc(o->n * sizeof *s);
    if (s == NULL)
        return fail(r, "%s: out of memory", chart);
    for (size_t k = 0; k < VNODE_STEPS; k++) {
        ch_table *t = NULL;
        int rc = build(r, o->nodes, o->n, CH_ALGO_RING, o->hash, vnode_steps[k], &t, chart) ||
                 shares(r, t, s, chart);
        ch_table_free(t);
        if (rc != 0) {
            free(s);
            return -1;
        }
        load_stats(s, o->nodes, o->n, r->total_w, &sd[k], &mn[k], &mx[k]);
    }
    free(s);

    FILE *f = r->f;
    const char *c_max = "#e15759", *c_min = "#4e79a7", *c_sd = "#59a14f";
    const legend_item items[] = {{"max load", c_max, 0},
                                 {"min load", c_min, 0},
                                 {"standard deviation", c_sd, 0},
                                 {"fair share", "#333333", 1}};
    fig_open(f, "vnodes", "Ring balance against virtual nodes", 370);
    legend(f, 70, 22, items, 4);
    plot p = {70, 40, 880, 260, 0.0, 1.0};
    double top = 1.2;
    for (size_t k = 0; k < VNODE_STEPS; k++)
        top = fmax(top, mx[k]);
    double step = nice_top(&p, top * 1.05);
    axis_y(f, &p, step, 1, "\xC3\x97", "load \xC3\xB7 fair share");
    hline(f, &p, 1.0, "#333333");

    /* x: log10 of vnodes, from the first step to the last. */
    const double lx0 = log10(vnode_steps[0]), lx1 = log10(vnode_steps[VNODE_STEPS - 1]);
#define PX(v) (p.x + (log10(v) - lx0) / (lx1 - lx0) * p.w)
    for (size_t k = 0; k < VNODE_STEPS; k++) {
        double x = PX(vnode_steps[k]);
        line(f, x, p.y + p.h, x, p.y + p.h + 5, "class=\"axis\"");
        text(f, x, p.y + p.h + 19, "class=\"tick\" text-anchor=\"middle\"", "%" PRIu32,
             vnode_steps[k]);
    }
    text(f, p.x + p.w / 2, p.y + p.h + 42, "class=\"axt\" text-anchor=\"middle\"",
         "virtual nodes per unit weight (log scale)");
    if (o->vnodes >= vnode_steps[0] && o->vnodes <= vnode_steps[VNODE_STEPS - 1]) {
        double x = PX(o->vnodes);
        line(f, x, p.y, x, p.y + p.h, "stroke=\"#999\" stroke-dasharray=\"2 3\"");
        text(f, x + 4, p.y + 12, "class=\"sub\"", "configured: %" PRIu32, o->vnodes);
    }
    const struct {
        const double *v;
        const char *color, *name;
    } series[] = {{mx, c_max, "max"}, {mn, c_min, "min"}, {sd, c_sd, "stddev"}};
    for (size_t j = 0; j < sizeof series / sizeof series[0]; j++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
                series[j].color);
        for (size_t k = 0; k < VNODE_STEPS; k++)
            fprintf(f, "%.1f,%.1f ", PX(vnode_steps[k]), py(&p, series[j].v[k]));
        fputs("\"/>\n", f);
        for (size_t k = 0; k < VNODE_STEPS; k++)
            fprintf(f,
                    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>%s at %" PRIu32
                    " vnodes: %.3f</title></circle>\n",
                    PX(vnode_steps[k]), py(&p, series[j].v[k]), series[j].color, series[j].name,
                    vnode_steps[k], series[j].v[k]);
    }
#undef PX
    fputs("</svg>\n<table class=\"data\"><tr><th>vnodes</th>", f);
    for (size_t k = 0; k < VNODE_STEPS; k++)
        fprintf(f, "<td>%" PRIu32 "</td>", vnode_steps[k]);
    fputs("</tr>\n<tr><th>standard deviation</th>", f);
    for (size_t k = 0; k < VNODE_STEPS; k++)
        fprintf(f, "<td>%.3f</td>", sd[k]);
    fputs("</tr>\n<tr><th>min load</th>", f);
    for (size_t k = 0; k < VNODE_STEPS; k++)
        fprintf(f, "<td>%.2f\xC3\x97</td>", mn[k]);
    fputs("</tr>\n<tr><th>max load</th>", f);
    for (size_t k = 0; k < VNODE_STEPS; k++)
        fprintf(f, "<td>%.2f\xC3\x97</td>", mx[k]);
    fputs("</tr></table>\n", f);
    caption(f,
            "How evenly the ring spreads load as the number of virtual nodes per unit weight "
            "grows (x axis on a log scale): the standard deviation, minimum and maximum of the "
            "nodes' loads, each load a multiple of the node's fair share w/W (1.0 is perfectly "
            "fair). Loads are the exact fractions of the 32-bit hash circle owned by each node's "
            "points (ch_table_shares), not a key sample, so the sample keys and seed do not "
            "enter. N = %zu nodes as given (total weight %g), hash %s.",
            o->n, r->total_w, ch_hash_name(o->hash));
    return 0;
}

/* ---- chart 3: weights intended against achieved ---------------------------------------------- */

static int chart_weights(rep *r)
{
    const report_opts *o = r->o;
    const char *chart = "weights chart";
    static const ch_node demo[] = {{"big-1", 4}, {"big-2", 4}, {"small-1", 1}, {"small-2", 1}};
    static const ch_algo_id algos[] = {CH_ALGO_RING, CH_ALGO_RENDEZVOUS, CH_ALGO_MAGLEV};
    enum { NALGO = sizeof algos / sizeof algos[0] };

    int unequal = 0;
    for (size_t i = 1; i < o->n; i++)
        unequal |= o->nodes[i].weight != o->nodes[0].weight;
    const ch_node *nodes = unequal ? o->nodes : demo;
    const size_t n = unequal ? o->n : sizeof demo / sizeof demo[0];
    double total_w = 0.0;
    for (size_t i = 0; i < n; i++)
        total_w += nodes[i].weight;

    /* got[a * n + i]: node i's achieved share under algos[a]. */
    double *got = calloc(NALGO * n, sizeof *got);
    if (got == NULL)
        return fail(r, "%s: out of memory", chart);
    double worst[NALGO];
    for (size_t a = 0; a < NALGO; a++) {
        ch_table *t = NULL;
        double *g = got + a * n;
        int rc = build(r, nodes, n, algos[a], o->hash, o->vnodes, &t, chart);
        if (rc == 0 && algos[a] == CH_ALGO_RENDEZVOUS) {
            /* Its ch_table_shares() is w/W by construction; what it achieves shows on keys. */
            for (size_t k = 0; k < o->keys; k++)
                g[ch_lookup_hash(t, r->kh[k])] += 1.0;
            for (size_t i = 0; i < n; i++)
                g[i] /= (double)o->keys;
        } else if (rc == 0) {
            rc = shares(r, t, g, chart);
        }
        ch_table_free(t);
        if (rc != 0) {
            free(got);
            return -1;
        }
        worst[a] = 0.0;
        for (size_t i = 0; i < n; i++)
            worst[a] = fmax(worst[a], fabs(g[i] - nodes[i].weight / total_w));
    }

    const size_t shown = n < MAX_BAR_NODES ? n : MAX_BAR_NODES;
    double top = 0.0;
    for (size_t i = 0; i < shown; i++) {
        top = fmax(top, nodes[i].weight / total_w);
        for (size_t a = 0; a < NALGO; a++)
            top = fmax(top, got[a * n + i]);
    }

    FILE *f = r->f;
    const char *c_want = "#bab0ac", *c_got = "#4e79a7";
    const legend_item items[] = {{"intended share w/W", c_want, 0}, {"achieved share", c_got, 0}};
    const int rotate = shown > 6;
    fig_open(f, "weights", "Weights: intended against achieved shares", rotate ? 390 : 340);
    legend(f, 70, 22, items, 2);
    for (size_t a = 0; a < NALGO; a++) {
        plot p = {70 + 320.0 * (double)a, 64, 270, 220, 0.0, 1.0};
        double step = nice_top(&p, top * 1.12);
        axis_y(f, &p, step, 100, "%", a == 0 ? "share of keys" : NULL);
        text(f, p.x + p.w / 2, p.y - 10, "class=\"cat\" text-anchor=\"middle\"",
             "%s \xE2\x80\x94 worst error %.2f pts", ch_algo_name(algos[a]), 100 * worst[a]);
        const double gw = p.w / (double)shown, bw = gw * 0.38;
        for (size_t i = 0; i < shown; i++) {
            const double want = nodes[i].weight / total_w, have = got[a * n + i];
            const double cx = p.x + gw * ((double)i + 0.5);
            char tip[256], id[4 * 16 + 4];
            short_label(id, nodes[i].id, rotate ? 14 : (size_t)fmin(16, fmax(4, gw / 7)));
            snprintf(tip, sizeof tip, "%s, %s: intended %.2f%%", ch_algo_name(algos[a]), id,
                     100 * want);
            bar(f, &p, cx - bw - 1, bw, want, c_want, tip);
            snprintf(tip, sizeof tip, "%s, %s: achieved %.2f%%", ch_algo_name(algos[a]), id,
                     100 * have);
            bar(f, &p, cx + 1, bw, have, c_got, tip);
            if (!rotate)
                text(f, cx, py(&p, fmax(want, have)) - 4, "class=\"val\" text-anchor=\"middle\"",
                     "%.1f%%", 100 * have);
            if (rotate) {
                char attrs[128];
                snprintf(attrs, sizeof attrs,
                         "class=\"sub\" text-anchor=\"end\" transform=\"rotate(-60 %.1f %.1f)\"",
                         cx, p.y + p.h + 12);
                text(f, cx, p.y + p.h + 12, attrs, "%s", id);
            } else {
                text(f, cx, p.y + p.h + 16, "class=\"sub\" text-anchor=\"middle\"", "%s", id);
            }
        }
    }
    fputs("</svg>\n", f);
    char fleet[160], shown_note[96] = "";
    if (unequal)
        snprintf(fleet, sizeof fleet, "the given fleet (N = %zu, total weight %g)", n, total_w);
    else
        snprintf(fleet, sizeof fleet, "a demo fleet of N = 4 weighted 4:4:1:1 (big-1, big-2, "
                 "small-1, small-2), because the given nodes all have the same weight");
    if (shown < n)
        snprintf(shown_note, sizeof shown_note,
                 " Only the first %zu of the %zu nodes are drawn; the worst error is over all.",
                 shown, n);
    caption(f,
            "Each node's intended share w/W (grey) against the share it achieves (blue) for the "
            "weighted algorithms, with %s. Ring and maglev: the "
            "exact fraction of the hash space each node owns (ch_table_shares; ring at %" PRIu32
            " points per unit weight, maglev M = %u). Rendezvous: the fraction of %zu sample "
            "keys (seed %" PRIu64 ") each node receives, since its exact share is w/W by "
            "construction. Hash %s. Worst error: the largest |achieved \xE2\x88\x92 intended| "
            "over the nodes, in percentage points.%s",
            fleet, o->vnodes, CH_DEFAULT_MAGLEV_SIZE,
            o->keys, o->seed, ch_hash_name(o->hash), shown_note);
    free(got);
    return 0;
}

/* ---- chart 4: hash functions --------------------------------------------------------------- */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Nanoseconds per ch_hash32() call on the sample keys: the best of TIMING_PASSES passes. */
static double ns_per_hash(rep *r, ch_hash_id h)
{
    double best = INFINITY;
    for (int pass = 0; pass < TIMING_PASSES; pass++) {
        uint32_t acc = 0, v = 0;
        double t0 = now_ns();
        for (size_t i = 0; i < r->o->keys; i++) {
            ch_hash32(h, r->keys + i * KEY_LEN, KEY_LEN, &v);
            acc ^= v;
        }
        best = fmin(best, (now_ns() - t0) / (double)r->o->keys);
        r->sink ^= acc;
    }
    return best;
}

/* What the hash chart measures, per registry hash h: the ring's load spread and speed, and
 * where the first node's ring points fall (pos[h * npts + j], point j). */
typedef struct hash_stats {
    double sd[CH_HASH_COUNT_], mx[CH_HASH_COUNT_], ns[CH_HASH_COUNT_];
    uint32_t *pos;
    size_t npts;
} hash_stats;

static int measure_hashes(rep *r, hash_stats *hs)
{
    const report_opts *o = r->o;
    const char *chart = "hash chart";
    const char *id0 = o->nodes[0].id;
    double mn;
    double *s = malloc(o->n * sizeof *s);
    double pts = round(o->vnodes * o->nodes[0].weight);
    hs->npts = pts < 1 ? 1 : pts > MAX_STRIP_TICKS ? MAX_STRIP_TICKS : (size_t)pts;
    hs->pos = malloc(CH_HASH_COUNT_ * hs->npts * sizeof *hs->pos);
    size_t namelen = strlen(id0) + 24;
    char *name = malloc(namelen);
    int rc = s == NULL || hs->pos == NULL || name == NULL ? fail(r, "%s: out of memory", chart)
                                                           : 0;
    for (unsigned h = 0; rc == 0 && h < CH_HASH_COUNT_; h++) {
        ch_table *t = NULL;
        rc = build(r, o->nodes, o->n, CH_ALGO_RING, (ch_hash_id)h, o->vnodes, &t, chart) ||
             shares(r, t, s, chart);
        ch_table_free(t);
        if (rc != 0)
            break;
        load_stats(s, o->nodes, o->n, r->total_w, &hs->sd[h], &mn, &hs->mx[h]);
        hs->ns[h] = ns_per_hash(r, (ch_hash_id)h);
        /* The ring's point names, as libchash builds them: "<id>#<j>", j from 0. */
        for (size_t j = 0; j < hs->npts; j++) {
            int len = snprintf(name, namelen, "%s#%zu", id0, j);
            ch_hash32((ch_hash_id)h, name, (size_t)len, &hs->pos[h * hs->npts + j]);
        }
    }
    free(s);
    free(name);
    return rc ? -1 : 0;
}

/* Layout of the hash chart, in SVG units: a row per hash holding its label, its balance bar,
 * its speed bar and the strip of its ring points, each in its own column. */
#define HASH_TOP 50.0     /* the top of the first row; the columns are titled above it */
#define HASH_ROW 22.0     /* one hash */
#define HASH_HEAD 24.0    /* one family heading */
#define HASH_LABEL_X 140.0
#define STRIP_X 635.0
#define STRIP_W 355.0

/* One hash's row with its top at y. */
static void hash_row(FILE *f, const hash_stats *hs, unsigned h, double y, const hscale *sb,
                     const hscale *ss)
{
    const char *hn = ch_hash_name((ch_hash_id)h);
    const char *color = h == CH_HASH_FNV1A32 ? "#e15759" : "#4e79a7";
    char tip[160], val[32];
    text(f, HASH_LABEL_X, y + 15, "class=\"lbl\" text-anchor=\"end\"", "%s", hn);
    snprintf(tip, sizeof tip, "%s: standard deviation %.2f%%, max load %.2fx", hn,
             100 * hs->sd[h], hs->mx[h]);
    snprintf(val, sizeof val, "%.1f%%", 100 * hs->sd[h]);
    hbar(f, sb, y + 5, 12, hs->sd[h], color, tip, val, sb->x);
    snprintf(tip, sizeof tip, "%s: %.2f ns per hash", hn, hs->ns[h]);
    snprintf(val, sizeof val, hs->ns[h] < 100 ? "%.1f ns" : "%.0f ns", hs->ns[h]);
    hbar(f, ss, y + 5, 12, hs->ns[h], color, tip, val, ss->x);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"18\" fill=\"#f3f3f3\"/>\n",
            STRIP_X, y + 2, STRIP_W);
    fprintf(f, "<path stroke=\"%s\" stroke-opacity=\"0.7\" d=\"", color);
    for (size_t j = 0; j < hs->npts; j++)
        fprintf(f, "M%.1f %.1fv18", STRIP_X + STRIP_W * (hs->pos[h * hs->npts + j] / 4294967296.0),
                y + 2);
    fputs("\"/>\n", f);
}

/* Draws the chart: a row per hash, grouped by family in registry order, three columns. */
static void draw_hashes(rep *r, const hash_stats *hs)
{
    const report_opts *o = r->o;
    FILE *f = r->f;
    row rows[CH_HASH_COUNT_];
    double top_b = 0.0, top_s = 0.0;
    for (unsigned h = 0; h < CH_HASH_COUNT_; h++) {
        rows[h] = (row){h, hash_family((ch_hash_id)h), 0.0};
        top_b = fmax(top_b, hs->sd[h]);
        top_s = fmax(top_s, hs->ns[h]);
    }
    const double bottom = HASH_TOP + HASH_ROW * CH_HASH_COUNT_ +
                          HASH_HEAD * (double)row_sort(rows, CH_HASH_COUNT_);
    fig_open(f, "hashes", "Hash functions: ring balance, speed and point spread", bottom + 10);

    hscale sb = {HASH_LABEL_X + 10, 180, 1.0}, ss = {400, 160, 1.0};
    double step_b = hnice(&sb, top_b * 1.1, 3), step_s = hnice(&ss, top_s * 1.1, 3);
    text(f, sb.x + 100, 20, "class=\"cat\" text-anchor=\"middle\"", "ring balance: stddev of load");
    text(f, ss.x + 80, 20, "class=\"cat\" text-anchor=\"middle\"", "speed: ns per hash");
    char id[4 * 12 + 4];
    text(f, STRIP_X, 20, "class=\"cat\"", "the %zu points of \"%s\" on the ring", hs->npts,
         short_label(id, o->nodes[0].id, 12));
    axis_x(f, &sb, step_b, 100, "%", HASH_TOP - 4, bottom, 0);
    axis_x(f, &ss, step_s, 1, "", HASH_TOP - 4, bottom, 0);
    static const char *const quarter[] = {"0", "2\xC2\xB3\xE2\x81\xB0", "2\xC2\xB3\xC2\xB9",
                                          "3\302\2672\302\263\342\201\260", /* 3·2³⁰ */
                                          "2\xC2\xB3\xC2\xB2"};
    for (int q = 0; q <= 4; q++)
        text(f, STRIP_X + STRIP_W * q / 4.0, HASH_TOP - 9, "class=\"tick\" text-anchor=\"middle\"",
             "%s", quarter[q]);

    double y = HASH_TOP;
    for (unsigned i = 0; i < CH_HASH_COUNT_; i++) {
        if (i == 0 || rows[i].group != rows[i - 1].group) {
            family_head(f, y, hash_families[rows[i].group]);
            y += HASH_HEAD;
        }
        hash_row(f, hs, rows[i].id, y, &sb, &ss);
        y += HASH_ROW;
    }
    fputs("</svg>\n", f);
    caption(f,
            "Every registry hash as the ring's hash, for N = %zu nodes at %" PRIu32 " points per "
            "unit weight, a row per hash, grouped by whose hash it is. Left: the standard "
            "deviation of node load as a percentage of fair share, from the exact arc lengths "
            "(ch_table_shares). Middle: nanoseconds per ch_hash32() call over the %zu sample keys "
            "(%d bytes each, seed %" PRIu64 "), the best of %d passes timed with CLOCK_MONOTONIC "
            "on the machine that wrote this report; timings vary from run to run. Right: each "
            "tick is one ring point of the first node, at hash32(\"<id>#<j>\"), on the circle "
            "from 0 to 2\xC2\xB3\xC2\xB2. Raw FNV-1a (red) maps names that differ only in their "
            "last characters close together, so its points clump into a few arcs and the ring "
            "is uneven; the fmix32 finalizer of the default, fnv1a32_fmix, spreads them out. The "
            "other charts use %s.",
            o->n, o->vnodes, o->keys, KEY_LEN, o->seed, TIMING_PASSES, ch_hash_name(o->hash));
}

static int chart_hashes(rep *r)
{
    hash_stats hs = {.pos = NULL};
    int rc = measure_hashes(r, &hs);
    if (rc == 0)
        draw_hashes(r, &hs);
    free(hs.pos);
    return rc;
}

/* ---- the page ------------------------------------------------------------------------------ */

static const char css[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;"
    "color:#222;background:#fff;margin:0}\n"
    "main{max-width:1020px;margin:0 auto;padding:20px}\n"
    "h1{font-size:26px;margin:0 0 6px}h2{font-size:18px;margin:0 0 6px}\n"
    "p.meta{color:#444;margin:0 0 6px}p.fleet{color:#555;font-size:13px;margin:0 0 18px}\n"
    "figure{margin:0 0 28px;padding:14px 0 0;border-top:1px solid #ddd}\n"
    "figcaption{color:#444;font-size:13.5px;line-height:1.45;max-width:980px}\n"
    "svg{display:block;max-width:100%;height:auto;margin:4px 0 8px}\n"
    "svg text{font-family:inherit;font-size:12px;fill:#333}\n"
    "svg .tick{font-size:11px;fill:#555}\n"
    "svg .val{font-size:11px;fill:#222;paint-order:stroke;stroke:#fff;stroke-width:3px;"
    "stroke-linejoin:round}\n"
    "svg .cat{font-size:13px;font-weight:600}svg .sub{font-size:11.5px;fill:#444}\n"
    "svg .axt{font-size:12px;fill:#444}svg .leg{font-size:12px}\n"
    "svg .grid{stroke:#e6e6e6}svg .axis{stroke:#888}svg .sep{stroke:#ccc}\n"
    "svg .lbl{font-size:12px;fill:#222}svg .grp{font-size:13px;font-weight:700;fill:#555}\n"
    "table.data{border-collapse:collapse;font-size:12.5px;margin:0 0 8px 70px}\n"
    "table.data th{text-align:left;font-weight:600;padding:2px 12px 2px 0}\n"
    "table.data td{text-align:right;padding:2px 10px;font-variant-numeric:tabular-nums}\n";

static void page_head(rep *r)
{
    const report_opts *o = r->o;
    FILE *f = r->f;
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
               "<title>chash report</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n"
               "<h1>chash report</h1>\n<p class=\"meta\">",
            css);
    put_fmt(f,
            "N = %zu nodes (total weight %g) \xC2\xB7 hash %s \xC2\xB7 ring vnodes %" PRIu32
            " \xC2\xB7 %zu sample keys, seed %" PRIu64 " \xC2\xB7 libchash %d.%d.%d",
            o->n, r->total_w, ch_hash_name(o->hash), o->vnodes, o->keys, o->seed,
            CH_VERSION_MAJOR, CH_VERSION_MINOR, CH_VERSION_PATCH);
    fputs("</p>\n<p class=\"fleet\">Nodes: ", f);
    const size_t listed = o->n < 40 ? o->n : 40;
    for (size_t i = 0; i < listed; i++) {
        put_esc(f, o->nodes[i].id);
        if (o->nodes[i].weight != 1.0)
            fprintf(f, " (weight %g)", o->nodes[i].weight);
        fputs(i + 1 < o->n ? ", " : "", f);
    }
    if (listed < o->n)
        fprintf(f, "and %zu more", o->n - listed);
    fputs("</p>\n", f);
}

/* Checks what the library itself would reject later with a less precise message. */
static int check_opts(rep *r)
{
    const report_opts *o = r->o;
    if (o->nodes == NULL || o->n == 0)
        return fail(r, "report: the node list is empty");
    if (o->keys == 0 || o->keys > MAX_KEYS)
        return fail(r, "report: the number of sample keys must be between 1 and %u", MAX_KEYS);
    if (o->vnodes == 0)
        return fail(r, "report: vnodes must be > 0");
    if (ch_hash_name(o->hash) == NULL)
        return fail(r, "report: unknown hash id %d", (int)o->hash);
    r->total_w = 0.0;
    for (size_t i = 0; i < o->n; i++) {
        if (o->nodes[i].id == NULL || o->nodes[i].id[0] == '\0')
            return fail(r, "report: node %zu has an empty id", i);
        if (!isfinite(o->nodes[i].weight) || !(o->nodes[i].weight > 0))
            return fail(r, "report: node %zu has a weight that is not a finite number > 0", i);
        r->total_w += o->nodes[i].weight;
    }
    return 0;
}

/* The sample keys: "k" followed by 16 lowercase hex digits of splitmix64 outputs seeded with
 * o->seed, and their hashes under o->hash. */
static int make_keys(rep *r)
{
    static const char hex[] = "0123456789abcdef";
    const report_opts *o = r->o;
    r->keys = malloc(o->keys * KEY_LEN);
    r->kh = malloc(o->keys * sizeof *r->kh);
    if (r->keys == NULL || r->kh == NULL)
        return fail(r, "report: out of memory for %zu sample keys", o->keys);
    uint64_t state = o->seed;
    for (size_t i = 0; i < o->keys; i++) {
        uint64_t z = (state += UINT64_C(0x9E3779B97F4A7C15));
        z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
        z ^= z >> 31;
        char *k = r->keys + i * KEY_LEN;
        k[0] = 'k';
        for (int d = 0; d < 16; d++)
            k[1 + d] = hex[(z >> (60 - 4 * d)) & 0xF];
        int rc = ch_hash64(o->hash, k, KEY_LEN, &r->kh[i]);
        if (rc != CH_OK)
            return fail(r, "report: hashing the sample keys: %s", ch_strerror(rc));
    }
    return 0;
}

int report_write(FILE *out, const report_opts *o, char *err, size_t errlen)
{
    rep r = {.o = o, .err = err, .errlen = errlen};
    if (out == NULL || o == NULL)
        return fail(&r, "report: no output stream or no options");
    if (check_opts(&r) != 0)
        return -1;

    char *page = NULL;
    size_t len = 0;
    r.f = open_memstream(&page, &len);
    if (r.f == NULL)
        return fail(&r, "report: open_memstream: %s", strerror(errno));

    int rc = make_keys(&r);
    if (rc == 0) {
        page_head(&r);
        rc = chart_moved(&r) || chart_vnodes(&r) || chart_weights(&r) || chart_hashes(&r);
        rc = rc ? -1 : 0;
    }
    if (rc == 0)
        fputs("</main>\n</body>\n</html>\n", r.f);
    int stream_bad = ferror(r.f);
    if (fclose(r.f) != 0 || stream_bad) {
        if (rc == 0)
            rc = fail(&r, "report: out of memory while formatting the page");
    }
    free(r.keys);
    free(r.kh);
    if (rc == 0 && (fwrite(page, 1, len, out) != len || fflush(out) != 0 || ferror(out)))
        rc = fail(&r, "report: writing the page: %s", strerror(errno));
    free(page);
    return rc;
}
