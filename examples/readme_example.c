/* SPDX-License-Identifier: Apache-2.0 */
/* The README's API example, compiled against an installed libchash by the install test. */
#include <chash.h>

#include <stdio.h>

int main(void)
{
    ch_node nodes[] = {{"cache-01", 1.0}, {"cache-02", 1.0}, {"cache-03", 2.0}};
    ch_options opt;
    ch_options_init(&opt); /* ring, fnv1a32_fmix, 160 points per unit weight */
    ch_table *t;
    int rc = ch_table_build(nodes, 3, &opt, &t);
    if (rc != CH_OK) {
        fprintf(stderr, "%s\n", ch_strerror(rc));
        return 1;
    }

    size_t owner = ch_lookup(t, "user:42", 7);  /* index into nodes[] */
    size_t order[2], n;
    ch_replicas(t, "user:42", 7, 2, order, &n); /* owner, then its failover node */
    printf("%s -> %s (failover %s)\n", "user:42", ch_table_node_id(t, owner),
           ch_table_node_id(t, order[1]));
    ch_table_free(t);
    return 0;
}
