/* txbox diff TX: what transaction TX changed, as a unified diff. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"

int cmd_diff(int argc, char **argv)
{
    enum { O_HELP = 256 };
    static const struct option opts[] = {
        {"help", no_argument, NULL, O_HELP},
        {0},
    };
    const char *dir = ".";
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "C:h", opts, NULL)) != -1) {
        switch (c) {
        case 'C':
            dir = optarg;
            break;
        case 'h':
        case O_HELP:
            puts("usage: txbox diff [-C DIR] TX\n\n"
                 "A unified diff of the text files transaction TX changed (before -> after),\n"
                 "a summary (sizes, sha256) for binary ones, and the added, deleted and\n"
                 "re-moded directories, symlinks and special files. Contents come from the\n"
                 "retained pre-images and are checked against the hashes in the audit log.");
            return 0;
        default:
            return cli_failf("diff: unknown option (see 'txbox diff --help')");
        }
    }
    if (optind != argc - 1)
        return cli_failf("diff: give exactly one transaction id (see 'txbox log')");
    txbox_ws *ws;
    int rc = cli_open_ws(dir, TXBOX_WS_NO_RECOVER, false, &ws);
    if (rc)
        return rc;
    txbox_error err = {0};
    rc = txbox_diff(ws, argv[optind], stdout, &err);
    txbox_ws_close(ws);
    fflush(stdout);
    return rc < 0 ? cli_fail(&err) : 0;
}
