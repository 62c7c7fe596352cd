/* txbox diff TX: what transaction TX changed, as a unified diff. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"

static const char usage[] = "usage: txbox diff [-C DIR] TX\n\n"
                            "A unified diff of the text files transaction TX changed (before -> after),\n"
                            "a summary (sizes, sha256) for binary ones, and the added, deleted and\n"
                            "re-moded directories, symlinks and special files. Contents come from the\n"
                            "retained pre-images and are checked against the hashes in the audit log.";

int cmd_diff(int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_LONG_HELP,
        {0},
    };
    cli_opts cli = {
        .name = "diff", .usage = usage, .shorts = "C:h", .longs = opts, .argc = argc, .argv = argv};
    if (cli_opt_next(&cli) == CLI_OPT_STOP)
        return cli.status;
    if (optind != argc - 1)
        return cli_failf("diff: give exactly one transaction id (see 'txbox log')");
    txbox_ws *ws;
    int rc = cli_open_ws(cli.dir, TXBOX_WS_NO_RECOVER, false, &ws);
    if (rc)
        return rc;
    txbox_error err = {0};
    rc = txbox_diff(ws, argv[optind], stdout, &err);
    txbox_ws_close(ws);
    fflush(stdout);
    return rc < 0 ? cli_fail(&err) : 0;
}
