/* txbox show TX: everything the audit log recorded about one transaction. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmds.h"

static void field(const char *k, const char *v)
{
    printf("  %-12s ", k);
    cli_print_clean(stdout, v ? v : "-", 0);
    putchar('\n');
}

static const char *s_of(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static void print_side(json_t *r, const char *when)
{
    char k[32];
    snprintf(k, sizeof k, "type_%s", when);
    const char *t = s_of(r, k);
    if (!t) {
        printf("%-30s", "-");
        return;
    }
    snprintf(k, sizeof k, "size_%s", when);
    json_t *sz = json_object_get(r, k);
    snprintf(k, sizeof k, "hash_%s", when);
    const char *h = s_of(r, k);
    snprintf(k, sizeof k, "mode_%s", when);
    char b[64];
    int n =
        snprintf(b, sizeof b, "%s %04llo", t, (unsigned long long)json_integer_value(json_object_get(r, k)));
    if (json_is_integer(sz))
        n += snprintf(b + n, sizeof b - (size_t)n, " %lldB", (long long)json_integer_value(sz));
    if (h)
        snprintf(b + n, sizeof b - (size_t)n, " %.12s", h);
    printf("%-30s", b);
}

static void print_text(json_t *o)
{
    char t[32], num[64];
    printf("transaction %s\n", s_of(o, "tx"));
    const char *oc = s_of(o, "outcome");
    json_t *gen = json_object_get(o, "gen");
    if (json_is_integer(gen)) {
        snprintf(num, sizeof num, "%s (generation %lld)%s", oc, (long long)json_integer_value(gen),
                 json_is_true(json_object_get(o, "recovered")) ||
                         json_integer_value(json_object_get(o, "recovered"))
                     ? ", completed by recovery"
                     : "");
        field("outcome", num);
    } else {
        field("outcome", oc);
    }
    cli_time(t, json_number_value(json_object_get(o, "started")));
    field("started", t);
    cli_time(t, json_number_value(json_object_get(o, "finished")));
    field("finished", t);
    json_t *d = json_object_get(o, "duration_ms"), *ov = json_object_get(o, "overhead_ms");
    if (json_is_number(d)) {
        snprintf(num, sizeof num, "%.1f ms (overhead %.1f ms)", json_number_value(d), json_number_value(ov));
        field("duration", num);
    }
    field("workspace", s_of(o, "workspace"));
    field("cwd", s_of(o, "cwd"));
    field("command", s_of(o, "command"));
    snprintf(num, sizeof num, "%s%s%s", s_of(o, "verdict") ? s_of(o, "verdict") : "-",
             s_of(o, "rule") ? ", rule " : "", s_of(o, "rule") ? s_of(o, "rule") : "");
    field("verdict", num);
    json_t *info = json_object_get(o, "info");
    if (s_of(o, "reason"))
        field("reason", s_of(o, "reason"));
    json_t *ec = json_object_get(o, "exit_code");
    if (json_is_integer(ec)) {
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(ec));
        field("exit status", num);
    }
    field("backend", s_of(o, "backend"));
    char *p = json_dumps(json_object_get(o, "protections"), JSON_COMPACT | JSON_ENCODE_ANY);
    field("protections", p);
    free(p);
    json_t *net = json_object_get(info, "network"); /* the proxy's report (netproxy.c) */
    if (json_is_object(net)) {
        json_t *sub = json_pack("{s:O*,s:O*}", "contacted", json_object_get(net, "contacted"), "refused",
                                json_object_get(net, "refused"));
        char *nj = json_dumps(sub, JSON_COMPACT);
        snprintf(num, sizeof num, "%s", s_of(net, "mode") ? s_of(net, "mode") : "-");
        field("network", num);
        if (!strcmp(num, "proxy"))
            field("domains", nj);
        free(nj);
        json_decref(sub);
    }
    if (s_of(info, "conflict_path"))
        field("conflict", s_of(info, "conflict_path"));
    if (s_of(o, "undo_of")) {
        snprintf(num, sizeof num, "undo of %s%s", s_of(o, "undo_of"),
                 json_is_true(json_object_get(info, "forced")) ? " (forced)" : "");
        field("undo", num);
    }
    if (s_of(o, "undone_by")) {
        snprintf(num, sizeof num, "undone by %s", s_of(o, "undone_by"));
        field("undo", num);
    }
    json_t *rb = json_object_get(o, "retained_bytes");
    if (json_is_number(json_object_get(o, "pruned"))) {
        cli_time(t, json_number_value(json_object_get(o, "pruned")));
        snprintf(num, sizeof num, "pruned by gc at %s", t);
        field("pre-images", num);
    } else if (json_is_integer(rb)) {
        snprintf(num, sizeof num, "%lld bytes retained for undo", (long long)json_integer_value(rb));
        field("pre-images", num);
    }
    json_t *lo = json_object_get(o, "losses"); /* what the commit destroyed */
    if (json_integer_value(json_object_get(lo, "count")) > 0) {
        snprintf(num, sizeof num, "%lld, %lld bytes%s",
                 (long long)json_integer_value(json_object_get(lo, "count")),
                 (long long)json_integer_value(json_object_get(lo, "bytes")),
                 json_is_true(json_object_get(lo, "truncated")) ? " (list truncated)" : "");
        field("losses", num);
        size_t k;
        json_t *it;
        json_array_foreach(json_object_get(lo, "items"), k, it)
        {
            printf("  %-12s %s ", "", s_of(it, "kind") ?: "?");
            cli_print_clean(stdout, s_of(it, "path") ?: "", 0);
            printf(" (%lld bytes", (long long)json_integer_value(json_object_get(it, "bytes")));
            if (s_of(it, "written_by"))
                printf(", written by tx %s%s", s_of(it, "written_by"),
                       json_is_true(json_object_get(it, "own")) ? ", the agent's own" : "");
            printf("): ");
            cli_print_clean(stdout, s_of(it, "detail") ?: "", 0);
            putchar('\n');
        }
    }
    json_t *effs = json_object_get(info, "effects"); /* external effects (saga.c) */
    for (size_t k = 0; k < json_array_size(effs); k++) {
        json_t *e = json_array_get(effs, k);
        const char *comp = s_of(e, "compensate"), *st = s_of(e, "state");
        char what[160];
        snprintf(what, sizeof what, "%s%s, rule %s%s", st ? st : "?",
                 json_is_true(json_object_get(e, "irreversible")) ? " (irreversible)" : "",
                 s_of(e, "rule") ?: "?",
                 st && (!strcmp(st, "failed") || !strcmp(st, "interrupted") || !strcmp(st, "not_undone"))
                     ? " - NEEDS ATTENTION"
                     : "");
        field(k ? "" : "effects", what);
        printf("  %-12s ", "");
        cli_print_clean(stdout, s_of(e, "command") ?: "", 0);
        printf("\n  %-12s undo: ", "");
        cli_print_clean(stdout, comp ? comp : "(none)", 0);
        putchar('\n');
    }
    json_t *ws = json_object_get(o, "write_set");
    printf("write set (%zu%s):\n", json_array_size(ws),
           json_integer_value(json_object_get(o, "changes_truncated")) ? ", truncated" : "");
    size_t i;
    json_t *r;
    json_array_foreach(ws, i, r)
    {
        printf("  %-9s ", s_of(r, "kind"));
        print_side(r, "before");
        printf(" -> ");
        print_side(r, "after");
        printf(" ");
        cli_print_clean(stdout, s_of(r, "path"), 0);
        putchar('\n');
    }
    if (!json_array_size(ws)) {
        json_t *ch = json_object_get(info, "changes");
        const char *kinds[] = {"added", "modified", "deleted"};
        for (size_t k = 0; k < 3; k++) {
            json_t *v;
            size_t j;
            json_array_foreach(json_object_get(ch, kinds[k]), j, v)
            {
                printf("  %-9s (not applied) ", kinds[k]);
                cli_print_clean(stdout, json_string_value(v), 0);
                putchar('\n');
            }
        }
    }
    const char *streams[] = {"stdout", "stderr"};
    for (size_t k = 0; k < 2; k++) {
        const char *s = s_of(o, streams[k]);
        if (!s || !*s)
            continue;
        printf("%s (tail):\n", streams[k]);
        fputs(s, stdout);
        if (s[strlen(s) - 1] != '\n')
            putchar('\n');
    }
}

static const char usage[] = "usage: txbox show [-C DIR] [--json] TX\n\n"
                            "Everything the audit log recorded about transaction TX: time, command,\n"
                            "cwd, verdict and rule, protections, exit status, outcome, duration and\n"
                            "overhead, the write set (kind, type, mode, size, sha256 before and after),\n"
                            "what it destroyed that existed nowhere else (losses) and the tail of its\n"
                            "output.";

int cmd_show(int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_LONG_JSON,
        CLI_LONG_HELP,
        {0},
    };
    cli_opts cli = {
        .name = "show", .usage = usage, .shorts = "C:h", .longs = opts, .argc = argc, .argv = argv};
    if (cli_opt_next(&cli) == CLI_OPT_STOP)
        return cli.status;
    if (optind != argc - 1)
        return cli_failf("show: give exactly one transaction id (see 'txbox log')");
    txbox_ws *ws;
    int rc = cli_open_ws(cli.dir, TXBOX_WS_NO_RECOVER, cli.json, &ws);
    if (rc)
        return rc;
    txbox_error err = {0};
    char *s = NULL;
    rc = txbox_show_json(ws, argv[optind], &s, &err);
    txbox_ws_close(ws);
    if (rc < 0)
        return cli.json ? cli_fail_json(&err) : cli_fail(&err);
    if (cli.json) {
        printf("%s\n", s);
    } else {
        json_t *o = json_loads(s, 0, NULL);
        print_text(o);
        json_decref(o);
    }
    free(s);
    return 0;
}
