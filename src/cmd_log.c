/* txbox log: the audit log, newest first, one line per transaction. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cmds.h"

void cli_time(char out[32], double t)
{
    time_t s = (time_t)t;
    struct tm tm;
    if (t <= 0 || !localtime_r(&s, &tm) || !strftime(out, 32, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(out, 32, "-");
}

void cli_print_clean(FILE *f, const char *s, size_t max)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (max && n >= max) {
            fputs("...", f);
            return;
        }
        if (*p == '\n')
            fputs("\\n", f), n += 2;
        else if (*p == '\t')
            fputs("\\t", f), n += 2;
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p), n += 4;
        else
            fputc(*p, f), n++;
    }
}

int cli_open_ws(const char *dir, unsigned flags, bool json, txbox_ws **ws)
{
    txbox_error err = {0};
    if (txbox_ws_open(dir, flags, ws, &err) < 0)
        return json ? cli_fail_json(&err) : cli_fail(&err);
    return 0;
}

static long long jint(json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

/* "S" or "S.F", plain decimal seconds since the epoch. */
static bool parse_epoch(const char *s, double *out)
{
    size_t digits = strspn(s, "0123456789");
    if (!digits || digits > 12)
        return false;
    if (s[digits] == '.' && (!s[digits + 1] || s[digits + 1 + strspn(s + digits + 1, "0123456789")]))
        return false;
    if (s[digits] && s[digits] != '.')
        return false;
    *out = strtod(s, NULL);
    return true;
}

/* Drops from the array the transactions that neither started nor ended at
 * or after t. */
static void keep_since(json_t *a, double t)
{
    for (size_t i = json_array_size(a); i-- > 0;) {
        json_t *o = json_array_get(a, i);
        if (json_number_value(json_object_get(o, "started")) < t &&
            json_number_value(json_object_get(o, "finished")) < t)
            json_array_remove(a, i);
    }
}

static const char usage[] = "usage: txbox log [-C DIR] [--json] [-n N] [--since T]\n\n"
                            "The audit log, newest first: one line per transaction with its id, time,\n"
                            "outcome, number of files changed and command. --json prints an array of\n"
                            "objects. --since T keeps the transactions that started or ended at or\n"
                            "after T, in seconds since the epoch (with -n: of the newest N): to\n"
                            "gather a log piecewise, ask again from the last time seen and keep each\n"
                            "tx's newest row. See 'txbox show TX' for everything recorded about one.";

int cmd_log(int argc, char **argv)
{
    enum { O_SINCE = 256 };
    static const struct option opts[] = {
        CLI_LONG_JSON,
        {"since", required_argument, NULL, O_SINCE},
        CLI_LONG_HELP,
        {0},
    };
    long limit = 0;
    double since = -1;
    cli_opts cli = {
        .name = "log", .usage = usage, .shorts = "C:n:h", .longs = opts, .argc = argc, .argv = argv};
    int c;
    while ((c = cli_opt_next(&cli)) >= 0) {
        switch (c) {
        case 'n': {
            char *end;
            errno = 0;
            limit = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || limit <= 0)
                return cli_failf("log: -n wants a positive number, not '%s'", optarg);
            break;
        }
        case O_SINCE:
            if (!parse_epoch(optarg, &since))
                return cli_failf(
                    "log: --since wants seconds since the epoch (as 'date +%%s' prints), not '%s'", optarg);
            break;
        }
    }
    if (c == CLI_OPT_STOP)
        return cli.status;
    if (optind < argc)
        return cli_failf("log: unexpected argument '%s'", argv[optind]);
    txbox_ws *ws;
    int rc = cli_open_ws(cli.dir, TXBOX_WS_NO_RECOVER, cli.json, &ws);
    if (rc)
        return rc;
    txbox_error err = {0};
    char *s = NULL;
    rc = txbox_log_json(ws, limit, &s, &err);
    txbox_ws_close(ws);
    if (rc < 0)
        return cli.json ? cli_fail_json(&err) : cli_fail(&err);
    if (cli.json && since < 0) {
        printf("%s\n", s);
        free(s);
        return 0;
    }
    json_t *a = json_loads(s, 0, NULL);
    free(s);
    if (since >= 0)
        keep_since(a, since);
    if (cli.json) {
        char *out = json_dumps(a, JSON_COMPACT);
        json_decref(a);
        if (!out)
            return cli_failf("log: out of memory");
        printf("%s\n", out);
        free(out);
        return 0;
    }
    size_t i;
    json_t *o;
    json_array_foreach(a, i, o)
    {
        char t[32];
        cli_time(t, json_number_value(json_object_get(o, "started")) > 0
                        ? json_number_value(json_object_get(o, "started"))
                        : json_number_value(json_object_get(o, "finished")));
        long long files = jint(o, "n_added") + jint(o, "n_modified") + jint(o, "n_deleted");
        printf("%-6s %s  %-11s %5lld  ", json_string_value(json_object_get(o, "tx")), t,
               json_string_value(json_object_get(o, "outcome")), files);
        const char *cmd = json_string_value(json_object_get(o, "command"));
        cli_print_clean(stdout, cmd ? cmd : "(unknown)", 72);
        const char *uo = json_string_value(json_object_get(o, "undo_of"));
        const char *ub = json_string_value(json_object_get(o, "undone_by"));
        if (uo)
            printf("  [undo of %s]", uo);
        if (ub)
            printf("  [undone by %s]", ub);
        putchar('\n');
    }
    json_decref(a);
    return 0;
}
