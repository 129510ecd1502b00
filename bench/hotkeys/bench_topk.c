/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_topk.c — what hot-key detection costs a worker per key: XXH3 of the key and one
 * ch__topk_add (src/hot/topk.c, k = 128, 250 key bytes kept, as chash-proxy's), timed over
 * streams of "key:<i>" drawn in advance (zipf 1.1 and 1.3 over 1M keys, one key at 30%, uniform),
 * against XXH3 alone over the same keys; and one window's merge of 2 workers' summaries and the
 * decayed view's update, as the control thread does once a second. Prints ns per key.
 *
 * usage: bench_topk [N keys per stream, default 4000000]
 */
#define _POSIX_C_SOURCE 200809L
#define LOAD_PROG "bench_topk"
#include "hot/topk.h"
#include "load_util.h"

#include <xxhash.h>

#define KEYS 1000000u

static uint64_t rng = 88172645463325252ULL;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

/* n key indexes: zipf(s) when s > 0, one key at 30% when s == 0, uniform when s < 0. */
static uint32_t *stream(size_t n, double s)
{
    uint32_t *out = xrealloc(NULL, n * sizeof(*out));
    double *cdf = s > 0 ? zipf_cdf(KEYS, s) : NULL;
    for (size_t j = 0; j < n; j++) {
        double u = uniform();
        if (s > 0) {
            out[j] = zipf_index(cdf, KEYS, u);
        } else if (s == 0 && u < 0.3) {
            out[j] = 0;
        } else {
            out[j] = (uint32_t)(uniform() * KEYS);
        }
    }
    free(cdf);
    return out;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 4000000;
    static const struct {
        const char *name;
        double s;
    } loads[] = {{"zipf1.1", 1.1}, {"zipf1.3", 1.3}, {"hot30", 0}, {"uniform", -1}};
    printf("bench_topk: %zu keys per stream, k 128, 250 key bytes kept\n", n);
    printf("%-8s %14s %14s %14s\n", "stream", "xxh3 ns/key", "+add ns/key", "add alone");
    char (*names)[16] = malloc(KEYS * sizeof(*names));
    uint8_t *lens = malloc(KEYS);
    if (names == NULL || lens == NULL)
        return 1;
    for (uint32_t i = 0; i < KEYS; i++)
        lens[i] = (uint8_t)snprintf(names[i], sizeof(names[i]), "key:%u", i);
    for (size_t l = 0; l < sizeof(loads) / sizeof(loads[0]); l++) {
        uint32_t *keys = stream(n, loads[l].s);
        ch__topk *t = ch__topk_new(128, 250);
        uint64_t sink = 0;
        double t0 = now();
        for (size_t j = 0; j < n; j++)
            sink += XXH3_64bits(names[keys[j]], lens[keys[j]]);
        double t1 = now();
        for (size_t j = 0; j < n; j++)
            ch__topk_add(t, XXH3_64bits(names[keys[j]], lens[keys[j]]), names[keys[j]],
                         lens[keys[j]], 1);
        double t2 = now();
        double hash_ns = (t1 - t0) * 1e9 / (double)n, both_ns = (t2 - t1) * 1e9 / (double)n;
        printf("%-8s %14.1f %14.1f %14.1f%s\n", loads[l].name, hash_ns, both_ns,
               both_ns - hash_ns, sink == 42 ? " " : "");
        ch__topk_free(t);
        free(keys);
    }
    /* The control thread's second: 2 workers' full summaries merged, the minute decayed and
     * merged, the total merged. */
    uint32_t *keys = stream(n, 1.1);
    ch__topk *w[2] = {ch__topk_new(128, 250), ch__topk_new(128, 250)};
    for (size_t j = 0; j < n; j++)
        ch__topk_add(w[j & 1], XXH3_64bits(names[keys[j]], lens[keys[j]]), names[keys[j]],
                     lens[keys[j]], 1);
    ch__topk *last = ch__topk_new(128, 250), *minute = ch__topk_new(128, 250),
             *total = ch__topk_new(128, 250);
    int reps = 1000;
    double t0 = now();
    for (int r = 0; r < reps; r++) {
        ch__topk_clear(last);
        ch__topk_merge(last, w[0]);
        ch__topk_merge(last, w[1]);
        ch__topk_decay(minute, 59.0 / 60.0);
        ch__topk_merge(minute, last);
        ch__topk_merge(total, last);
    }
    printf("a window on the control thread (2 workers' merges, decay, the views): %.1f us\n",
           (now() - t0) * 1e6 / reps);
    return 0;
}
