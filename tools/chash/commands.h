/* SPDX-License-Identifier: Apache-2.0 */
/*
 * commands.h — the subcommands of `chash`, one .c file each. Each takes the parsed command line
 * and returns the process exit status (0), or exits itself through cli_usage() / cli_fail().
 */
#ifndef CHASH_COMMANDS_H
#define CHASH_COMMANDS_H

#include "cli.h"

int cmd_lookup(cli *c);
int cmd_simulate(cli *c);
int cmd_sweep(cli *c);
int cmd_hashcheck(cli *c);
int cmd_bench(cli *c);
int cmd_plan(cli *c);
int cmd_report(cli *c);
int cmd_migrate(cli *c);
int cmd_fleet(cli *c);
int cmd_algorithms(cli *c);
int cmd_hashes(cli *c);
int cmd_hotkeys(cli *c);

#endif
