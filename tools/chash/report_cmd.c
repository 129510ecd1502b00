/* SPDX-License-Identifier: Apache-2.0 */
/*
 * report_cmd.c — `chash report`: the command line around report_write() (report.c).
 */
#include "commands.h"
#include "report.h"

#include <errno.h>
#include <string.h>

int cmd_report(cli *c)
{
    if (c->argc)
        cli_usage(c, "unexpected argument '%s'", c->argv[0]);
    fleet f;
    fleet_from_cli(c, &f);
    uint32_t vnodes = 0;
    cli_vnodes(c, c->vnodes ? c->vnodes : "160", &vnodes, 1);
    ch_hash_id hash = fleet_hash(c, &f);
    const char *path = c->out ? c->out : "report.html";
    bool to_stdout = strcmp(path, "-") == 0;
    FILE *out = to_stdout ? stdout : fopen(path, "w");
    if (out == NULL)
        cli_fail(c, "cannot write %s: %s", path, strerror(errno));
    report_opts o = {
        .nodes = f.nodes,
        .n = f.n,
        .hash = hash,
        .vnodes = vnodes,
        .seed = c->seed,
        .keys = c->keys ? c->keys : 200000,
    };
    char err[256] = "";
    int rc = report_write(out, &o, err, sizeof(err));
    bool written = to_stdout ? fflush(out) == 0 : fclose(out) == 0;
    if (rc == 0 && !written)
        cli_fail(c, "cannot write %s: %s", path, strerror(errno));
    if (rc != 0) {
        if (!to_stdout)
            remove(path);
        cli_fail(c, "%s", err[0] ? err : "the report failed");
    }
    if (!to_stdout)
        fprintf(stderr, "chash report: wrote %s\n", path);
    fleet_free(&f);
    return 0;
}
