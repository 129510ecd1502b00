/* SPDX-License-Identifier: Apache-2.0 */
/* The README's libchash-cache example as a program, compiled against an installed libchash-cache
 * by the install test: argv[1] is the nutcracker.yml of the README. It sets user:42 on its node
 * and reads it back. */
#include <chash_cache.h>

#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: readme_cache NUTCRACKER.YML\n");
        return 2;
    }
    ch_cache *c;
    ch_config_error err;
    if (ch_cache_open_config(argv[1], NULL, NULL, &c, &err) != CH_OK) {
        char msg[600];
        fprintf(stderr, "%s\n", ch_config_error_str(&err, msg, sizeof msg));
        return 1;
    }

    ch_cache_result r;
    ch_cache_set(c, "user:42", 7, "alice", 5, 60000, &r); /* PX 60000 on the key's node */
    int ok = r.status == CH_CACHE_OK;
    ch_cache_result_free(&r);
    ch_cache_get(c, "user:42", 7, &r); /* r.status: HIT, MISS or ERROR; r.node_id: who served */
    ok = ok && r.status == CH_CACHE_HIT;
    if (ok)
        printf("user:42 = %.*s (node %s)\n", (int)r.len, r.value, r.node_id);
    else
        fprintf(stderr, "readme_cache: %s\n", ch_cache_status_name(r.status));
    ch_cache_result_free(&r);
    ch_cache_close(c);
    return ok ? 0 : 1;
}
