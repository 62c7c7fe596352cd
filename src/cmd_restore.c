/* txbox restore TX -- PATH...: chosen paths back as they were before a
 * committed transaction, as a new transaction. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmds.h"

static const char usage[] = "usage: txbox restore [-C DIR] [--json] TX -- PATH...\n\n"
                            "Brings each PATH (a file, or a directory with everything in it) back as\n"
                            "it was before committed transaction TX, as a new transaction that is\n"
                            "crash-safe, logged and can itself be undone. Only what TX changed at or\n"
                            "below PATH changes; what later transactions changed there is replaced\n"
                            "by the old version, and named. PATH is relative to the workspace (or\n"
                            "absolute inside it; '.' is everything TX changed). A PATH that TX did\n"
                            "not change is refused, and then nothing is changed. Exit status 125 on\n"
                            "error (an unknown id, a path TX did not change, pruned pre-images).";

static int call_restore(txbox_ws *ws, const void *o, char **s, txbox_error *e)
{
    return txbox_restore(ws, o, s, e);
}

int cmd_restore(int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_LONG_JSON,
        CLI_LONG_HELP,
        {0},
    };
    cli_opts cli = {
        .name = "restore", .usage = usage, .shorts = "C:h", .longs = opts, .argc = argc, .argv = argv};
    int c;
    while ((c = cli_opt_next(&cli)) >= 0) {
    }
    if (c == CLI_OPT_STOP)
        return cli.status;
    if (optind >= argc)
        return cli_usage(argc, argv,
                         "restore: give a transaction id and the paths to restore (TX -- PATH...)");
    if (optind + 1 >= argc)
        return cli_usage(argc, argv,
                         "restore: give the paths to restore after the transaction id (TX -- PATH...)");
    txbox_restore_opts ro = {.tx = argv[optind],
                             .paths = (const char *const *)argv + optind + 1,
                             .npaths = (size_t)(argc - optind - 1)};
    json_t *o;
    int rc, st = cli_ws_call(cli.dir, cli.json, call_restore, &ro, &o, &rc);
    if (st)
        return st;
    fprintf(stderr, "txbox: tx %s restored", json_string_value(json_object_get(o, "tx")));
    json_t *v;
    size_t i;
    json_array_foreach(json_object_get(o, "paths"), i, v)
    {
        fputs(i ? ", " : " ", stderr);
        cli_print_clean(stderr, json_string_value(v), 0);
    }
    fprintf(stderr, " as before transaction %s", json_string_value(json_object_get(o, "restore_of")));
    cli_print_revert(stderr, o);
    json_decref(o);
    return 0;
}
