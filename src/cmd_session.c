/* txbox session start|end|list|status: sessions by hand (the fronts open
 * theirs through the library). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmds.h"
#include "txbox_policy.h"

static const char usage[] =
    "usage: txbox session start [-C DIR] [--json] [--id ID] [--idle S] [--owner PID] [--policy FILE]\n"
    "       txbox session end [-C DIR] [--json] ID\n"
    "       txbox session status [-C DIR] [--json] ID\n"
    "       txbox session list [-C DIR] [--json]\n"
    "\n"
    "A session keeps what one command leaves for the next outside the workspace:\n"
    "run commands in it with 'txbox run --session ID'. Its commands share a /tmp,\n"
    "/var/tmp and /dev/shm (which also show your files of the host's /tmp that a\n"
    "command names, copied in before it; what they write there stays in the\n"
    "session), a loopback network, and their processes: one left running in the\n"
    "background lives on, and later commands see it (ps, kill, pkill). Each\n"
    "command's changes to the workspace are still a transaction of their own; what\n"
    "a background process writes there later is one too, committed when the\n"
    "processes its command left have all exited 0, else rolled back, and reported\n"
    "with the next command's result and by 'session end'.\n"
    "\n"
    "start prints the new session's id (--id: that id; it must not run already).\n"
    "It ends after S seconds without a command (--idle, default 1800), when process\n"
    "PID ends (--owner), or with 'session end', which kills what still runs in it,\n"
    "rolls back their late writes and says what its /tmp held (discarded).\n"
    "--policy FILE: the rules on effects that judge the late writes (as for run).\n"
    "Exit status 125 on error.";

static int do_start(cli_opts *cli, const char *id, double idle, long owner, const char *policy_file)
{
    txbox_ws *ws;
    int rc = cli_open_ws(cli->dir, TXBOX_WS_CREATE, cli->json, &ws);
    if (rc)
        return rc;
    txbox_error err = {0};
    txbox_policy *pol = NULL;
    if (txbox_policy_load(policy_file, txbox_ws_path(ws), &pol, &err) < 0) {
        txbox_ws_close(ws);
        return cli->json ? cli_fail_json(&err) : cli_fail(&err);
    }
    txbox_session_opts o = {.id = id,
                            .flags = TXBOX_SESSION_CREATE | TXBOX_SESSION_EXCL,
                            .owner = (pid_t)owner,
                            .idle_s = idle,
                            .policy = pol};
    txbox_session *s = NULL;
    rc = txbox_session_open(ws, &o, &s, &err);
    if (rc == 0) {
        if (cli->json)
            printf("{\"session\":\"%s\"}\n", txbox_session_id(s));
        else
            printf("%s\n", txbox_session_id(s));
    }
    txbox_session_close(s);
    txbox_policy_free(pol);
    txbox_ws_close(ws);
    if (rc < 0)
        return cli->json ? cli_fail_json(&err) : cli_fail(&err);
    return 0;
}

/* The end report, in words: what was killed, committed, rolled back and
 * discarded. */
static void print_report(const char *id, json_t *r)
{
    fprintf(stderr, "txbox: session %s ended", id);
    json_int_t k = json_integer_value(json_object_get(r, "processes_killed"));
    if (k)
        fprintf(stderr, "; %lld background process%s killed", (long long)k, k == 1 ? "" : "es");
    json_t *late = json_object_get(r, "late_transactions"), *l;
    size_t i;
    json_array_foreach(late, i, l)
    {
        json_t *ch = json_object_get(l, "changes");
        fprintf(stderr, "; background processes of tx %s: tx %s %s (%zu added, %zu modified, %zu deleted)",
                json_string_value(json_object_get(l, "from_tx")) ?: "?",
                json_string_value(json_object_get(l, "tx")) ?: "-",
                json_string_value(json_object_get(l, "outcome")) ?: "?",
                json_array_size(json_object_get(ch, "added")),
                json_array_size(json_object_get(ch, "modified")),
                json_array_size(json_object_get(ch, "deleted")));
        const char *why = json_string_value(json_object_get(l, "reason"));
        if (why)
            fprintf(stderr, ": %s", why);
    }
    json_t *d = json_object_get(r, "discarded");
    json_int_t n = json_integer_value(json_object_get(d, "count"));
    if (n) {
        fprintf(stderr, "; discarded: %lld file%s written outside the workspace:", (long long)n,
                n == 1 ? "" : "s");
        json_t *p;
        json_array_foreach(json_object_get(d, "paths"), i, p)
        {
            if (i == 3)
                break;
            fprintf(stderr, "%s ", i ? "," : "");
            cli_print_clean(stderr, json_string_value(p), 200);
        }
        if (n > 3)
            fprintf(stderr, ", and %lld more", (long long)(n - 3));
    }
    fputc('\n', stderr);
}

static void print_list(const char *out)
{
    json_t *o = json_loads(out, 0, NULL), *v;
    size_t i;
    json_array_foreach(json_object_get(o, "sessions"), i, v)
    {
        bool run = json_is_true(json_object_get(v, "running"));
        printf("%s\t%s", json_string_value(json_object_get(v, "session")), run ? "running" : "ended");
        if (run)
            printf("\t%zu background command(s)", json_array_size(json_object_get(v, "background")));
        else if (json_is_string(json_object_get(v, "ended_by")))
            printf(" (%s)", json_string_value(json_object_get(v, "ended_by")));
        printf("\n");
    }
    json_decref(o);
}

/* end, status (of session id) and list: the library's JSON, printed as is
 * with --json, else in words. */
static int do_query(cli_opts *cli, const char *what, const char *id)
{
    txbox_ws *ws;
    int rc = cli_open_ws(cli->dir, 0, cli->json, &ws);
    if (rc)
        return rc;
    txbox_error err = {0};
    txbox_session *s = NULL;
    txbox_session_opts o = {.id = id};
    char *out = NULL;
    if (!strcmp(what, "list"))
        rc = txbox_session_list(ws, &out, &err);
    else
        rc = txbox_session_open(ws, &o, &s, &err);
    if (rc == 0 && s)
        rc = !strcmp(what, "end") ? txbox_session_end(s, &out, &err) : txbox_session_status(s, &out, &err);
    txbox_session_close(s);
    txbox_ws_close(ws);
    if (rc < 0)
        return cli->json ? cli_fail_json(&err) : cli_fail(&err);
    if (cli->json || !strcmp(what, "status")) {
        printf("%s\n", out ? out : "{}");
    } else if (!strcmp(what, "list")) {
        print_list(out);
    } else {
        json_t *j = out ? json_loads(out, 0, NULL) : NULL;
        print_report(id, j);
        json_decref(j);
    }
    free(out);
    return 0;
}

int cmd_session(int argc, char **argv)
{
    enum { O_ID = 256, O_IDLE, O_OWNER, O_POLICY };
    static const struct option opts[] = {
        CLI_LONG_JSON,
        CLI_LONG_HELP,
        {"id", required_argument, NULL, O_ID},
        {"idle", required_argument, NULL, O_IDLE},
        {"owner", required_argument, NULL, O_OWNER},
        {"policy", required_argument, NULL, O_POLICY},
        {0},
    };
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            puts(usage);
            return 0;
        }
        return cli_usage(argc, argv, "session: start, end, status or list (see 'txbox session --help')");
    }
    const char *what = argv[1];
    if (strcmp(what, "start") && strcmp(what, "end") && strcmp(what, "status") && strcmp(what, "list"))
        return cli_usage(argc, argv, "session: start, end, status or list, not '%s'", what);
    cli_opts cli = {.name = "session",
                    .usage = usage,
                    .shorts = "C:h", /* options anywhere: `session end ID -C DIR` */
                    .longs = opts,
                    .argc = argc - 1,
                    .argv = argv + 1};
    const char *id = NULL, *policy = NULL;
    double idle = 0;
    long owner = 0;
    int c;
    while ((c = cli_opt_next(&cli)) >= 0) {
        char *end;
        switch (c) {
        case O_ID:
            id = optarg;
            break;
        case O_IDLE:
            errno = 0;
            idle = strtod(optarg, &end);
            if (errno || *end || !isfinite(idle) || idle <= 0 || idle > 2592000)
                return cli_usage(argc, argv, "session: --idle wants seconds (0 < S <= 2592000), not '%s'",
                                 optarg);
            break;
        case O_OWNER:
            errno = 0;
            owner = strtol(optarg, &end, 10);
            if (errno || *end || owner <= 0 || owner > 4194304)
                return cli_usage(argc, argv, "session: --owner wants a process id, not '%s'", optarg);
            break;
        case O_POLICY:
            policy = optarg;
            break;
        }
    }
    if (c == CLI_OPT_STOP)
        return cli.status;
    int rest = cli.argc - optind;
    if (!strcmp(what, "start") || !strcmp(what, "list")) {
        if (rest)
            return cli_usage(argc, argv, "session %s: no operand expected", what);
        if (strcmp(what, "start") && (id || idle || owner || policy))
            return cli_usage(argc, argv, "session list: --id, --idle, --owner and --policy go with start");
        return !strcmp(what, "start") ? do_start(&cli, id, idle, owner, policy) : do_query(&cli, what, NULL);
    }
    if (rest != 1)
        return cli_usage(argc, argv, "session %s: give one session id", what);
    if (id || idle || owner || policy)
        return cli_usage(argc, argv, "session %s: --id, --idle, --owner and --policy go with start", what);
    return do_query(&cli, what, cli.argv[optind]);
}
