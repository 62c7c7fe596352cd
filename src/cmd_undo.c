/* txbox undo [TX]: revert a committed transaction, as a new transaction. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmds.h"

static const char usage[] = "usage: txbox undo [-C DIR] [--json] [--force] [TX]\n\n"
                            "Reverts committed transaction TX (default: the latest one that is not\n"
                            "undone yet) as a new transaction, crash-safe and logged. If a later\n"
                            "transaction changed the same paths, it refuses and names them (exit\n"
                            "status 123) unless --force. Exit status 125 on error.";

int cmd_undo(int argc, char **argv)
{
    enum { O_FORCE = 256 };
    static const struct option opts[] = {
        CLI_LONG_JSON,
        {"force", no_argument, NULL, O_FORCE},
        CLI_LONG_HELP,
        {0},
    };
    txbox_undo_opts uo = {0};
    cli_opts cli = {
        .name = "undo", .usage = usage, .shorts = "C:fh", .longs = opts, .argc = argc, .argv = argv};
    int c;
    while ((c = cli_opt_next(&cli)) >= 0) {
        switch (c) {
        case 'f':
        case O_FORCE:
            uo.force = 1;
            break;
        }
    }
    if (c == CLI_OPT_STOP)
        return cli.status;
    if (optind < argc - 1)
        return cli_failf("undo: give at most one transaction id");
    if (optind == argc - 1)
        uo.tx = argv[optind];
    txbox_ws *ws;
    int rc = cli_open_ws(cli.dir, 0, cli.json, &ws);
    if (rc)
        return rc;
    txbox_error err = {0};
    char *s = NULL;
    rc = txbox_undo(ws, &uo, &s, &err);
    txbox_ws_close(ws);
    if (rc < 0)
        return cli.json ? cli_fail_json(&err) : cli_fail(&err);
    json_t *o = json_loads(s, 0, NULL);
    if (cli.json)
        printf("%s\n", s);
    free(s);
    const char *id = json_string_value(json_object_get(o, "tx"));
    const char *of = json_string_value(json_object_get(o, "undo_of"));
    json_t *cl = json_object_get(o, "conflicts"), *sk = json_object_get(o, "skipped"), *v;
    size_t i;
    if (rc == 1) {
        fprintf(stderr,
                "txbox: cannot undo transaction %s: later transactions changed the same "
                "paths:",
                of);
        json_array_foreach(cl, i, v)
        {
            fprintf(stderr, "%s ", i ? "," : "");
            cli_print_clean(stderr, json_string_value(json_object_get(v, "path")), 0);
            const char *t = json_string_value(json_object_get(v, "tx"));
            fprintf(stderr, " (%s%s)", t ? "tx " : "", t ? t : json_string_value(json_object_get(v, "why")));
        }
        fprintf(stderr,
                "; nothing was changed (use --force to undo anyway; tx %s records the "
                "refusal)\n",
                id);
        json_decref(o);
        return TXBOX_EXIT_CONFLICT;
    }
    json_t *ch = json_object_get(o, "changes");
    fprintf(stderr, "txbox: tx %s undid transaction %s (%zu added, %zu modified, %zu deleted)", id, of,
            json_array_size(json_object_get(ch, "added")), json_array_size(json_object_get(ch, "modified")),
            json_array_size(json_object_get(ch, "deleted")));
    if (json_array_size(sk)) {
        fprintf(stderr, "; forced: skipped");
        json_array_foreach(sk, i, v)
        {
            fputc(' ', stderr);
            cli_print_clean(stderr, json_string_value(json_object_get(v, "path")), 0);
        }
    }
    fputc('\n', stderr);
    json_decref(o);
    return 0;
}
