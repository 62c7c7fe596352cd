/* txbox review, approve, reject: transactions held by a rule on effects
 * (lib/tx/held.c); txbox resolve: external effects that needed attention
 * (lib/tx/saga.c), dealt with by a person. Headless: nothing prompts. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmds.h"

static void usage(FILE *f, const char *cmd)
{
    if (!strcmp(cmd, "review"))
        fprintf(f, "usage: txbox review [-C DIR] [--json] [ID]\n\n"
                   "Without ID, lists the transactions held by a rule on effects (not applied).\n"
                   "With ID, shows why it is held and its changes; 'txbox diff ID' does not\n"
                   "apply to it, but its new files are in .txbox/tx/ID/upper.\n");
    else if (!strcmp(cmd, "approve"))
        fprintf(f, "usage: txbox approve [-C DIR] [--json] ID\n\n"
                   "Commits held transaction ID, crash-safe. Exit status: 0 committed, 123\n"
                   "conflict (a commit since it ran changed the same paths; it stays held),\n"
                   "125 txbox error.\n");
    else if (!strcmp(cmd, "reject"))
        fprintf(f, "usage: txbox reject [-C DIR] [--json] ID\n\n"
                   "Drops held transaction ID: nothing of it is applied (logged as rejected).\n");
    else
        fprintf(f, "usage: txbox resolve [-C DIR] [--json] [--note TEXT] ID [N]\n\n"
                   "Marks the external effects of transaction ID that need attention (a\n"
                   "compensation that failed or was interrupted, an irreversible effect whose\n"
                   "work was undone; 'txbox status' lists them), or only its effect N, as\n"
                   "resolved: dealt with by hand. Recorded with the time and the note in\n"
                   ".txbox/tx/ID/effects; 'txbox status' lists them no more. Exit status 125\n"
                   "when none needs attention.\n");
}

static void print_paths(json_t *paths)
{
    size_t i;
    json_t *p;
    json_array_foreach(paths, i, p)
    {
        fputs(i ? ", " : "", stdout);
        cli_print_clean(stdout, json_string_value(p), 200);
    }
}

static void print_review(json_t *o)
{
    json_t *held = json_object_get(o, "held");
    if (held) {
        if (!json_array_size(held))
            printf("no held transactions\n");
        size_t i;
        json_t *h;
        json_array_foreach(held, i, h)
        {
            char when[32];
            cli_time(when, json_real_value(json_object_get(h, "held_at")));
            printf("tx %s  held %s  rule %s: ", json_string_value(json_object_get(h, "tx")), when,
                   json_string_value(json_object_get(h, "effect_rule")) ?: "?");
            print_paths(json_object_get(h, "paths"));
            printf("\n    ");
            cli_print_clean(stdout, json_string_value(json_object_get(h, "command")) ?: "", 200);
            printf("\n");
        }
        return;
    }
    printf("tx %s is held by effect rule %s\n", json_string_value(json_object_get(o, "tx")),
           json_string_value(json_object_get(o, "effect_rule")) ?: "?");
    printf("command:    ");
    cli_print_clean(stdout, json_string_value(json_object_get(o, "command")) ?: "", 0);
    printf("\nreason:     %s\n", json_string_value(json_object_get(o, "reason")) ?: "");
    printf("suggestion: %s\n", json_string_value(json_object_get(o, "suggestion")) ?: "");
    printf("paths:      ");
    print_paths(json_object_get(o, "paths"));
    printf("\n");
    json_t *c = json_object_get(o, "changes");
    const char *kinds[] = {"added", "modified", "deleted"};
    const char mark[] = {'A', 'M', 'D'};
    for (size_t k = 0; k < 3; k++) {
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(c, kinds[k]), i, p)
        {
            printf("  %c ", mark[k]);
            cli_print_clean(stdout, json_string_value(p), 0);
            printf("\n");
        }
    }
    printf("approve: txbox approve %s    reject: txbox reject %s\n",
           json_string_value(json_object_get(o, "tx")), json_string_value(json_object_get(o, "tx")));
}

int cmd_review(int argc, char **argv)
{
    const char *cmd = argv[0], *note = NULL;
    enum { O_NOTE = 256 };
    static const struct option opts[] = {
        CLI_LONG_JSON, CLI_LONG_HELP, {"note", required_argument, NULL, O_NOTE}, {0}};
    cli_opts cli = {.name = cmd, .help = usage, .shorts = "C:", .longs = opts, .argc = argc, .argv = argv};
    int c;
    while ((c = cli_opt_next(&cli)) >= 0) {
        if (c == O_NOTE && strcmp(cmd, "resolve"))
            return cli_usage(argc, argv, "%s: --note is an option of resolve only", cmd);
        note = optarg;
    }
    if (c == CLI_OPT_STOP)
        return cli.status;
    const char *dir = cli.dir;
    bool json = cli.json;
    int npos = argc - optind;
    bool is_review = !strcmp(cmd, "review"), is_resolve = !strcmp(cmd, "resolve");
    if (is_resolve ? npos < 1 || npos > 2 : npos > 1 || (!is_review && npos != 1))
        return cli_usage(argc, argv, "%s: %s (see 'txbox %s --help')", cmd,
                         is_review    ? "at most one transaction id"
                         : is_resolve ? "a transaction id and at most one effect number"
                                      : "one transaction id",
                         cmd);
    const char *id = npos ? argv[optind] : NULL;
    long which = -1;
    if (is_resolve && npos == 2) {
        uint64_t v;
        if (!parse_u64(argv[optind + 1], &v) || v > 1000000)
            return cli_usage(argc, argv,
                             "resolve: '%.32s' is not an effect number (as 'txbox status' "
                             "shows)",
                             argv[optind + 1]);
        which = (long)v;
    }
    txbox_ws *ws = NULL;
    int st = cli_open_ws(dir, 0, json, &ws);
    if (st)
        return st;
    txbox_error err = {0};
    char *out = NULL;
    int status = 0, rc;
    if (is_review)
        rc = txbox_review(ws, id, &out, &err);
    else if (is_resolve)
        rc = txbox_resolve(ws, id, which, note, &out, &err);
    else if (!strcmp(cmd, "approve"))
        rc = txbox_approve(ws, id, &out, &status, &err);
    else
        rc = txbox_reject(ws, id, &out, &err);
    txbox_ws_close(ws);
    if (rc < 0)
        return json ? cli_fail_json(&err) : cli_fail(&err);
    json_t *o = json_loads(out, 0, NULL);
    if (json) {
        printf("%s\n", out);
    } else if (is_review) {
        print_review(o);
    } else if (is_resolve) {
        size_t n = json_array_size(json_object_get(o, "resolved"));
        fprintf(stderr, "txbox: tx %s: %zu effect%s marked resolved\n", id, n, n == 1 ? "" : "s");
    } else {
        const char *oc = json_string_value(json_object_get(o, "outcome")) ?: "?";
        if (!strcmp(oc, "conflict"))
            fprintf(stderr,
                    "txbox: tx %s conflict: %s was changed by another transaction since it "
                    "ran; it stays held (reject it, or run the command again)\n",
                    id, json_string_value(json_object_get(o, "conflict_path")) ?: "a path");
        else
            fprintf(stderr, "txbox: tx %s %s\n", json_string_value(json_object_get(o, "tx")),
                    !strcmp(oc, "committed") ? "approved and committed"
                                             : "rejected: nothing of it was applied");
    }
    json_decref(o);
    free(out);
    fflush(stdout);
    return status;
}
