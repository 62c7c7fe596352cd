/* txbox undo [TX]: revert a committed transaction, as a new transaction. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmds.h"

static const char usage[] = "usage: txbox undo [-C DIR] [--json] [--force] [TX]\n\n"
                            "Reverts committed transaction TX (default: the latest one that is not\n"
                            "undone yet) as a new transaction, crash-safe and logged, as git revert\n"
                            "does: what no later transaction changed comes back as it was before TX;\n"
                            "a text file changed since is merged line by line where the changes do\n"
                            "not touch the same lines. Anything else (the same lines changed, a\n"
                            "binary file, a path deleted or replaced since) is a conflict: undo then\n"
                            "names each path, why, and the transactions that changed it, changes\n"
                            "nothing, and exits with status 123. --force takes TX's old version\n"
                            "where they conflict and names the later changes it replaced (the undo\n"
                            "can be undone in turn). To bring back chosen paths only, see\n"
                            "'txbox restore'. Exit status 125 on error (an unknown id, a transaction\n"
                            "whose pre-images were pruned, one undone already).";

/* "path (tx N: why)" for each entry of list, comma-separated, at most max. */
void cli_print_paths(FILE *f, json_t *list, size_t max)
{
    json_t *v;
    size_t i;
    json_array_foreach(list, i, v)
    {
        if (i == max) {
            fprintf(f, ", and %zu more", json_array_size(list) - max);
            break;
        }
        fprintf(f, "%s", i ? ", " : " ");
        cli_print_clean(f, json_string_value(json_object_get(v, "path")), 0);
        json_t *by = json_object_get(v, "by");
        const char *why = json_string_value(json_object_get(v, "why"));
        fprintf(f, " (");
        if (json_array_size(by)) {
            fprintf(f, "tx");
            json_t *t;
            size_t k;
            json_array_foreach(by, k, t) fprintf(f, "%s %s", k ? "," : "", json_string_value(t));
            fprintf(f, ": ");
        }
        fprintf(f, "%s)", why ? why : "changed since");
    }
}

static int refused(json_t *o)
{
    fprintf(stderr, "txbox: cannot undo transaction %s: later changes conflict:",
            json_string_value(json_object_get(o, "undo_of")));
    cli_print_paths(stderr, json_object_get(o, "conflicts"), 20);
    fprintf(stderr,
            "; nothing was changed (--force takes the old versions anyway; tx %s records the "
            "refusal)\n",
            json_string_value(json_object_get(o, "tx")));
    return TXBOX_EXIT_CONFLICT;
}

/* The status line's tail: what was merged, replaced, skipped. */
void cli_print_revert(FILE *f, json_t *o)
{
    json_t *ch = json_object_get(o, "changes"), *mg = json_object_get(o, "merged"), *v;
    fprintf(f, " (%zu added, %zu modified, %zu deleted)", json_array_size(json_object_get(ch, "added")),
            json_array_size(json_object_get(ch, "modified")),
            json_array_size(json_object_get(ch, "deleted")));
    size_t i;
    if (json_array_size(mg)) {
        fprintf(f, "; merged with later changes:");
        json_array_foreach(mg, i, v)
        {
            fputc(i ? ',' : ' ', f);
            cli_print_clean(f, json_string_value(v), 0);
        }
    }
    if (json_array_size(json_object_get(o, "overwritten"))) {
        fprintf(f, "; replaced later changes to");
        cli_print_paths(f, json_object_get(o, "overwritten"), 20);
    }
    if (json_array_size(json_object_get(o, "skipped"))) {
        fprintf(f, "; skipped");
        cli_print_paths(f, json_object_get(o, "skipped"), 20);
    }
    fputc('\n', f);
}

static int call_undo(txbox_ws *ws, const void *o, char **s, txbox_error *e)
{
    return txbox_undo(ws, o, s, e);
}

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
    json_t *o;
    int rc, st = cli_ws_call(cli.dir, cli.json, call_undo, &uo, &o, &rc);
    if (st)
        return st;
    if (rc == 1) {
        rc = refused(o);
        json_decref(o);
        return rc;
    }
    fprintf(stderr, "txbox: tx %s undid transaction %s", json_string_value(json_object_get(o, "tx")),
            json_string_value(json_object_get(o, "undo_of")));
    cli_print_revert(stderr, o);
    json_decref(o);
    return 0;
}
