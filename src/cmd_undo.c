/* txbox undo [TX]: revert a committed transaction, as a new transaction. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmds.h"

int cmd_undo(int argc, char **argv)
{
    enum { O_JSON = 256, O_FORCE, O_HELP };
    static const struct option opts[] = {
        {"json", no_argument, NULL, O_JSON},
        {"force", no_argument, NULL, O_FORCE},
        {"help", no_argument, NULL, O_HELP},
        {0},
    };
    const char *dir = ".";
    bool json = false;
    txbox_undo_opts uo = {0};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "C:fh", opts, NULL)) != -1) {
        switch (c) {
        case 'C':
            dir = optarg;
            break;
        case O_JSON:
            json = true;
            break;
        case 'f':
        case O_FORCE:
            uo.force = 1;
            break;
        case 'h':
        case O_HELP:
            puts("usage: txbox undo [-C DIR] [--json] [--force] [TX]\n\n"
                 "Reverts committed transaction TX (default: the latest one that is not\n"
                 "undone yet) as a new transaction, crash-safe and logged. If a later\n"
                 "transaction changed the same paths, it refuses and names them (exit\n"
                 "status 123) unless --force. Exit status 125 on error.");
            return 0;
        default:
            return cli_failf("undo: unknown option (see 'txbox undo --help')");
        }
    }
    if (optind < argc - 1)
        return cli_failf("undo: give at most one transaction id");
    if (optind == argc - 1)
        uo.tx = argv[optind];
    txbox_ws *ws;
    int rc = cli_open_ws(dir, 0, json, &ws);
    if (rc)
        return rc;
    txbox_error err = {0};
    char *s = NULL;
    rc = txbox_undo(ws, &uo, &s, &err);
    txbox_ws_close(ws);
    if (rc < 0)
        return json ? cli_fail_json(&err) : cli_fail(&err);
    json_t *o = json_loads(s, 0, NULL);
    if (json)
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
