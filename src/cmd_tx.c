/* txbox begin, savepoint, rollback, commit, abort, status: multi-command
 * transactions (lib/tx/multi.c). `txbox run --tx ID` runs a command in one. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmds.h"
#include "txbox_policy.h"

static void usage(FILE *f, const char *cmd)
{
    if (!strcmp(cmd, "begin"))
        fprintf(f, "usage: txbox begin [-C DIR] [--json] [--name NAME]\n\n"
                   "Opens a multi-command transaction and prints its id. Run commands in it\n"
                   "with 'txbox run --tx ID ...'; nothing reaches the workspace before\n"
                   "'txbox commit ID'.\n");
    else if (!strcmp(cmd, "savepoint"))
        fprintf(f, "usage: txbox savepoint [-C DIR] [--json] ID NAME\n\n"
                   "Marks the transaction's current state; 'txbox rollback ID NAME' returns to it.\n");
    else if (!strcmp(cmd, "rollback"))
        fprintf(f, "usage: txbox rollback [-C DIR] [--json] ID [NAME]\n\n"
                   "Returns the open transaction to savepoint NAME (later savepoints are\n"
                   "dropped), or without NAME to its start. It stays open.\n");
    else if (!strcmp(cmd, "commit"))
        fprintf(f, "usage: txbox commit [-C DIR] [--json] [--verify 'CMD'] [--timeout S]\n"
                   "                    [--policy FILE] ID\n\n"
                   "Applies every change of the transaction at once, crash-safe. With --verify\n"
                   "CMD first runs in the transaction's final view (its own writes dropped;\n"
                   "--timeout limits it) and the commit happens only if it exits 0.\n"
                   "Exit status: 0 committed, 123 conflict (a commit since begin changed the\n"
                   "same paths; the changes stay in .txbox/tx/ID/upper), the verify command's\n"
                   "own when it failed (the transaction stays open), 125 txbox error.\n");
    else if (!strcmp(cmd, "abort"))
        fprintf(
            f,
            "usage: txbox abort [-C DIR] [--json] ID\n\nDrops the transaction. First runs the compensations of its external effects,\nnewest first; exit status 120 when one of them needs attention (failed,\ninterrupted, or irreversible). Aborting again finishes an abort cut short.\n");
    else
        fprintf(f, "usage: txbox status [-C DIR] [--json]\n\nLists the open multi-command transactions.\n");
}

struct txargs {
    const char *dir, *name, *verify, *policy;
    double timeout;
    bool json;
    char **pos;
    int npos;
};

/* Returns -1 to go on, else the exit status. */
static int parse(int argc, char **argv, const char *cmd, struct txargs *a)
{
    enum { O_NAME = 256, O_VERIFY, O_POLICY, O_TIMEOUT };
    static const struct option opts[] = {
        CLI_LONG_JSON,
        {"name", required_argument, NULL, O_NAME},
        {"verify", required_argument, NULL, O_VERIFY},
        {"policy", required_argument, NULL, O_POLICY},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        CLI_LONG_HELP,
        {0},
    };
    memset(a, 0, sizeof *a);
    /* options anywhere, as undo's and show's: `txbox commit ID --json` */
    cli_opts cli = {.name = cmd, .help = usage, .shorts = "C:h", .longs = opts, .argc = argc, .argv = argv};
    int c;
    bool is_begin = !strcmp(cmd, "begin"), is_commit = !strcmp(cmd, "commit");
    while ((c = cli_opt_next(&cli)) >= 0) {
        switch (c) {
        case O_NAME:
            if (!is_begin)
                return cli_usage(argc, argv, "%s: --name is an option of 'txbox begin'", cmd);
            a->name = optarg;
            break;
        case O_VERIFY:
        case O_POLICY:
        case O_TIMEOUT:
            if (!is_commit)
                return cli_usage(argc, argv, "%s: %s is an option of 'txbox commit'", cmd, argv[optind - 1]);
            if (c == O_VERIFY) {
                a->verify = optarg;
            } else if (c == O_POLICY) {
                a->policy = optarg;
            } else {
                char *end;
                a->timeout = strtod(optarg, &end);
                if (end == optarg || *end || !(a->timeout > 0 && a->timeout <= 604800))
                    return cli_usage(
                        argc, argv, "commit: --timeout wants a number of seconds (0 < S <= 604800), not '%s'",
                        optarg);
            }
            break;
        }
    }
    if (c == CLI_OPT_STOP)
        return cli.status;
    a->dir = cli.dir;
    a->json = cli.json;
    a->pos = argv + optind;
    a->npos = argc - optind;
    int min = 0, max = 0;
    if (!strcmp(cmd, "savepoint"))
        min = max = 2;
    else if (!strcmp(cmd, "rollback"))
        min = 1, max = 2;
    else if (is_commit || !strcmp(cmd, "abort"))
        min = max = 1;
    if (a->npos < min || a->npos > max)
        return cli_usage(argc, argv, "%s: wrong number of arguments (see 'txbox %s --help')", cmd, cmd);
    return -1;
}

static int fail(const struct txargs *a, const txbox_error *err)
{
    return a->json ? cli_fail_json(err) : cli_fail(err);
}

/* The compensations an abort ran, one line each (saga.c). */
static void print_effects(const char *tx, json_t *eff)
{
    json_t *l = json_object_get(eff, "effects");
    for (size_t i = json_array_size(l); i-- > 0;) { /* in the order they ran: newest first */
        json_t *e = json_array_get(l, i);
        const char *st = json_string_value(json_object_get(e, "state")) ?: "?";
        const char *comp = json_string_value(json_object_get(e, "compensate"));
        bool bad = strcmp(st, "compensated") != 0;
        fprintf(stderr, "txbox: tx %s: effect %lld (%s) %s%s", tx,
                (long long)json_integer_value(json_object_get(e, "n")),
                json_string_value(json_object_get(e, "rule")) ?: "?", st, bad ? " - NEEDS ATTENTION" : "");
        if (json_is_integer(json_object_get(e, "exit_code")) && bad)
            fprintf(stderr, " (exit status %lld)",
                    (long long)json_integer_value(json_object_get(e, "exit_code")));
        fprintf(stderr, ": ");
        cli_print_clean(stderr, comp ? comp : json_string_value(json_object_get(e, "command")) ?: "", 0);
        const char *why = json_string_value(json_object_get(e, "why"));
        if (why && bad) {
            fprintf(stderr, " (");
            cli_print_clean(stderr, why, 0);
            fprintf(stderr, ")");
        }
        fputc('\n', stderr);
    }
}

/* savepoint, rollback, abort: open, act, say so. */
static int simple(const struct txargs *a, const char *cmd)
{
    txbox_ws *ws = NULL;
    txbox_multi *m = NULL;
    txbox_error err = {0};
    if (txbox_ws_open(a->dir, TXBOX_WS_CREATE, &ws, &err) < 0)
        return fail(a, &err);
    int rc = txbox_multi_open(ws, a->pos[0], &m, &err);
    const char *sp = a->npos > 1 ? a->pos[1] : NULL;
    char *report = NULL; /* abort: its external effects (saga.c) */
    if (rc == 0) {
        if (!strcmp(cmd, "savepoint"))
            rc = txbox_multi_savepoint(m, sp, &err);
        else if (!strcmp(cmd, "rollback"))
            rc = txbox_multi_rollback(m, sp, &err);
        else
            rc = txbox_multi_abort_report(m, &report, &err);
    }
    txbox_multi_close(m);
    txbox_ws_close(ws);
    if (rc < 0)
        return fail(a, &err);
    const char *done = !strcmp(cmd, "savepoint")  ? "savepoint"
                       : !strcmp(cmd, "rollback") ? "rolled_back"
                                                  : "aborted";
    json_t *eff = report ? json_loads(report, 0, NULL) : NULL;
    free(report);
    json_int_t attention = json_integer_value(json_object_get(eff, "needs_attention"));
    if (a->json) {
        json_t *o = json_pack("{s:s,s:s,s:s?}", "tx", a->pos[0], "outcome", done, "savepoint", sp);
        if (json_array_size(json_object_get(eff, "effects")))
            json_object_update(o, eff);
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s);
        free(s);
        json_decref(o);
    } else if (!strcmp(cmd, "savepoint")) {
        fprintf(stderr, "txbox: tx %s: savepoint %s\n", a->pos[0], sp);
    } else if (!strcmp(cmd, "rollback")) {
        fprintf(stderr, "txbox: tx %s rolled back to %s%s\n", a->pos[0], sp ? "savepoint " : "its start",
                sp ? sp : "");
    } else {
        fprintf(stderr, "txbox: tx %s aborted: nothing of it was applied\n", a->pos[0]);
        print_effects(a->pos[0], eff);
    }
    json_decref(eff);
    return attention ? TXBOX_EXIT_ATTENTION : 0;
}

static int do_begin(const struct txargs *a)
{
    txbox_ws *ws = NULL;
    txbox_error err = {0};
    if (txbox_ws_open(a->dir, TXBOX_WS_CREATE, &ws, &err) < 0)
        return fail(a, &err);
    char *id = NULL;
    int rc = txbox_multi_begin(ws, a->name, &id, &err);
    txbox_ws_close(ws);
    if (rc < 0)
        return fail(a, &err);
    if (a->json) {
        json_t *o = json_pack("{s:s,s:s?}", "tx", id, "name", a->name);
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s);
        free(s);
        json_decref(o);
    } else {
        printf("%s\n", id);
    }
    free(id);
    return 0;
}

static int do_commit(const struct txargs *a)
{
    txbox_ws *ws = NULL;
    txbox_multi *m = NULL;
    txbox_policy *pol = NULL;
    txbox_error err = {0};
    if (txbox_ws_open(a->dir, TXBOX_WS_CREATE, &ws, &err) < 0)
        return fail(a, &err);
    int rc = 0;
    txbox_run_opts vo = {.shell = a->verify, .timeout_s = a->timeout};
    rc = txbox_policy_load(a->policy, txbox_ws_path(ws), &pol, &err); /* + rules on effects */
    if (rc == 0)
        cli_policy_notes(pol);
    vo.policy = pol;
    if (rc == 0)
        rc = txbox_multi_open(ws, a->pos[0], &m, &err);
    if (rc == 0)
        txbox_multi_set_policy(m, pol);
    char *json = NULL, *summary = NULL;
    txbox_remedy rem = {0};
    int status = 0;
    if (rc == 0)
        rc = txbox_multi_commit(m, a->verify ? &vo : NULL, &json, &status, &summary, &rem, &err);
    txbox_multi_close(m);
    txbox_ws_close(ws);
    txbox_policy_free(pol);
    if (rc < 0)
        return fail(a, &err);
    if (a->json) {
        printf("%s\n", json);
    } else {
        /* the verify command's output, as it was captured */
        json_t *o = json_loads(json, 0, NULL);
        json_t *v = json_object_get(o, "verify");
        if (v) {
            fputs(json_string_value(json_object_get(v, "stdout")) ?: "", stdout);
            fflush(stdout);
            fputs(json_string_value(json_object_get(v, "stderr")) ?: "", stderr);
        }
        json_decref(o);
        _cleanup_free_ char *line = summary ? remedy_apply(summary, &rem) : NULL;
        fprintf(stderr, "%s\n", line ? line : "txbox: done");
    }
    free(json);
    free(summary);
    fflush(stdout);
    return status;
}

static int do_status(const struct txargs *a)
{
    txbox_ws *ws = NULL;
    txbox_error err = {0};
    if (txbox_ws_open(a->dir, TXBOX_WS_CREATE, &ws, &err) < 0)
        return fail(a, &err);
    char *json = NULL;
    int rc = txbox_multi_status(ws, &json, &err);
    txbox_ws_close(ws);
    if (rc < 0)
        return fail(a, &err);
    if (a->json) {
        printf("%s\n", json);
    } else {
        json_t *all = json_loads(json, 0, NULL), *arr = json_object_get(all, "transactions");
        size_t i;
        json_t *t;
        if (!json_array_size(arr))
            printf("no open transactions\n");
        json_t *att = json_object_get(all, "attention"), *e;
        json_array_foreach(json_object_get(all, "stuck"), i, e)
        {
            printf("STUCK: tx %s could be neither finished nor rolled back; it holds its paths "
                   "until you fix this and run 'txbox recover': ",
                   json_string_value(json_object_get(e, "tx")));
            cli_print_clean(stdout, json_string_value(json_object_get(e, "error")) ?: "", 0);
            putchar('\n');
        }
        json_array_foreach(att, i, e)
        {
            printf(
                "NEEDS ATTENTION: tx %s effect %lld (%s) %s: ", json_string_value(json_object_get(e, "tx")),
                (long long)json_integer_value(json_object_get(e, "n")),
                json_string_value(json_object_get(e, "rule")) ?: "?",
                json_string_value(json_object_get(e, "state")) ?: "?");
            const char *c = json_string_value(json_object_get(e, "compensate"));
            cli_print_clean(stdout, c ? c : json_string_value(json_object_get(e, "command")) ?: "", 0);
            putchar('\n');
        }
        json_array_foreach(arr, i, t)
        {
            char when[32];
            cli_time(when, json_number_value(json_object_get(t, "started")));
            printf("tx %s  %s  started %s  %lld command(s) staged",
                   json_string_value(json_object_get(t, "tx")),
                   json_string_value(json_object_get(t, "name")) ?: "-", when,
                   (long long)json_integer_value(json_object_get(t, "commands")));
            json_t *sp = json_object_get(t, "savepoints");
            size_t k;
            json_t *s;
            json_array_foreach(sp, k, s) printf("%s%s", k ? ", " : "  savepoints: ", json_string_value(s));
            printf("%s%s\n", json_is_true(json_object_get(t, "busy")) ? "  (busy)" : "",
                   json_is_true(json_object_get(t, "aborting"))
                       ? "  (abort cut short: finish it with txbox abort)"
                       : "");
        }
        json_decref(all);
    }
    free(json);
    return 0;
}

int cmd_tx(int argc, char **argv)
{
    const char *cmd = argv[0];
    struct txargs a;
    int r = parse(argc, argv, cmd, &a);
    if (r >= 0)
        return r;
    if (!strcmp(cmd, "begin"))
        return do_begin(&a);
    if (!strcmp(cmd, "commit"))
        return do_commit(&a);
    if (!strcmp(cmd, "status"))
        return do_status(&a);
    return simple(&a, cmd);
}
