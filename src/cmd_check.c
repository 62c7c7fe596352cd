/* txbox check: classify a command with the policy; nothing runs.
 *
 *   txbox check [--json] [--policy FILE] [-C DIR] -c 'STRING'
 *   txbox check [--json] [--policy FILE] [-C DIR] -- PROG ARGS...
 *   txbox check --batch [--policy FILE] [-C DIR]   (stdin: one command a line)
 *
 * Exit status (docs/policy.md): plain mode 0 safe, 1 uncertain, 122 unsafe;
 * --json and --batch 0 for every classification; 125 on error. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmds.h"
#include "txbox_policy.h"

static void usage(FILE *f, const char *name)
{
    fprintf(f, "usage: txbox check [--json] [--policy FILE] [-C DIR] -c 'STRING'\n"
               "       txbox check [--json] [--policy FILE] [-C DIR] -- PROG ARGS...\n"
               "       txbox check --batch [--policy FILE] [-C DIR] < commands\n"
               "\nClassifies a command as safe, uncertain or unsafe; nothing runs.\n"
               "safe: reads only, runs no program the workspace controls, reads no\n"
               "secret. unsafe: never run. uncertain: runs in a transaction.\n"
               "Exit status: 0 safe, 1 uncertain, 122 unsafe (with --json/--batch: 0),\n"
               "125 on error (also when DIR/.txbox-policy.yaml is not a regular file or\n"
               "is over 1 MiB). The workspace's policy can only tighten yours unless your\n"
               "config.yaml or --policy trusts it; what it was refused is printed as\n"
               "'txbox: warning:' lines (--json: \"refused\"). See docs/policy.md.\n");
}

/* A valid UTF-8 copy (invalid bytes become U+FFFD) for JSON output. */
static char *utf8_clean(const char *s, size_t n, size_t *outlen)
{
    char *o = malloc(n * 3 + 1);
    if (!o)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++)
            ok = ((unsigned char)s[i + k] >> 6) == 2;
        if (ok && len == 2 && c < 0xC2)
            ok = false;
        if (ok && len == 3) {
            unsigned cp = ((c & 0x0Fu) << 12) | (((unsigned char)s[i + 1] & 0x3Fu) << 6) |
                          ((unsigned char)s[i + 2] & 0x3Fu);
            ok = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
        }
        if (ok && len == 4) {
            unsigned cp = ((c & 0x07u) << 18) | (((unsigned char)s[i + 1] & 0x3Fu) << 12) |
                          (((unsigned char)s[i + 2] & 0x3Fu) << 6) | ((unsigned char)s[i + 3] & 0x3Fu);
            ok = cp >= 0x10000 && cp <= 0x10FFFF;
        }
        if (ok) {
            memcpy(o + j, s + i, len);
            j += len;
            i += len;
        } else {
            memcpy(o + j, "\xEF\xBF\xBD", 3);
            j += 3;
            i++;
        }
    }
    o[j] = 0;
    *outlen = j;
    return o;
}

void cli_policy_notes(const txbox_policy *p)
{
    const char *n;
    for (size_t i = 0; (n = txbox_policy_note(p, i)); i++) {
        fputs("txbox: warning: ", stderr);
        cli_print_clean(stderr, n, 0);
        fputc('\n', stderr);
    }
}

/* "workspace_policy" (when the workspace has one) and "refused" (what it
 * was refused) in a check's JSON object. */
static void json_ws_policy(json_t *o, const txbox_policy *p)
{
    int m = txbox_policy_workspace_mode(p);
    if (m == TXBOX_WS_POLICY_NONE && !txbox_policy_note(p, 0))
        return;
    json_object_set_new(o, "workspace_policy",
                        json_string(m == TXBOX_WS_POLICY_TRUSTED   ? "trusted"
                                    : m == TXBOX_WS_POLICY_TIGHTEN ? "tighten"
                                                                   : "none"));
    json_t *a = json_array();
    const char *n;
    for (size_t i = 0; (n = txbox_policy_note(p, i)); i++)
        json_array_append_new(a, json_string(n));
    json_object_set_new(o, "refused", a);
}

static int print_json(const txbox_policy *p, const char *cmd, size_t len, bool truncated,
                      const txbox_verdict *v)
{
    size_t cl = 0;
    char *clean = utf8_clean(cmd, len, &cl);
    if (!clean)
        return -1;
    json_t *o = json_object();
    json_object_set_new(o, "command", json_stringn(clean, cl));
    free(clean);
    if (truncated)
        json_object_set_new(o, "truncated", json_true());
    json_object_set_new(o, "verdict", json_string(txbox_verdict_name(v->verdict)));
    json_object_set_new(o, "rule", json_string(v->rule));
    json_object_set_new(o, "reason", json_string(v->reason));
    if (v->verdict == TXBOX_VERDICT_UNSAFE)
        json_object_set_new(o, "suggestion", json_string(v->suggestion));
    json_object_set_new(o, "needs_network", json_boolean(v->needs_network));
    json_ws_policy(o, p);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s)
        return -1;
    puts(s);
    free(s);
    return 0;
}

static void print_human(const txbox_verdict *v)
{
    if (v->verdict == TXBOX_VERDICT_UNSAFE && v->suggestion[0])
        printf("%s [%s] %s; instead: %s\n", txbox_verdict_name(v->verdict), v->rule, v->reason,
               v->suggestion);
    else
        printf("%s [%s] %s\n", txbox_verdict_name(v->verdict), v->rule, v->reason);
}

static int exit_for(const txbox_verdict *v)
{
    switch (v->verdict) {
    case TXBOX_VERDICT_SAFE:
        return 0;
    case TXBOX_VERDICT_UNSAFE:
        return TXBOX_EXIT_BLOCKED;
    default:
        return 1;
    }
}

/* One line of stdin, at most TXBOX_POLICY_MAX_COMMAND bytes kept (the rest
 * is read and dropped). Returns 0 at EOF, 1 with a line. */
static int read_line(FILE *in, char *buf, size_t cap, size_t *len, bool *truncated)
{
    size_t n = 0;
    int c;
    bool any = false;
    *truncated = false;
    while ((c = getc(in)) != EOF) {
        any = true;
        if (c == '\n')
            break;
        if (n < cap)
            buf[n++] = (char)c;
        else
            *truncated = true;
    }
    if (n && buf[n - 1] == '\r' && c == '\n')
        n--;
    *len = n;
    return any ? 1 : 0;
}

static int batch(const txbox_policy *p)
{
    size_t cap = TXBOX_POLICY_MAX_COMMAND + 1;
    char *buf = malloc(cap);
    if (!buf)
        return cli_failf("out of memory");
    size_t len;
    bool trunc;
    int rc = 0;
    while (read_line(stdin, buf, cap, &len, &trunc) == 1) {
        txbox_verdict v;
        txbox_error err = {0};
        if (txbox_policy_check(p, buf, len, &v, &err) < 0) {
            rc = cli_fail_json(&err);
            break;
        }
        if (trunc) {
            /* the engine saw only a prefix: never safe */
            if (v.verdict == TXBOX_VERDICT_SAFE) {
                v.verdict = TXBOX_VERDICT_UNCERTAIN;
                snprintf(v.rule, sizeof v.rule, "too-large");
                snprintf(v.reason, sizeof v.reason, "command longer than %u bytes", TXBOX_POLICY_MAX_COMMAND);
            }
        }
        if (print_json(p, buf, len > 4096 && trunc ? 4096 : len, trunc, &v) < 0) {
            rc = cli_failf("cannot write JSON");
            break;
        }
        fflush(stdout);
    }
    free(buf);
    return rc;
}

int cmd_check(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"batch", no_argument, NULL, 'b'},
        {"policy", required_argument, NULL, 'p'},
        CLI_LONG_HELP,
        {0},
    };
    bool json = false, is_batch = false;
    const char *policy = NULL, *str = NULL;
    cli_opts cli = {
        .name = "check", .help = usage, .shorts = "+jbp:C:c:h", .longs = opts, .argc = argc, .argv = argv};
    int c;
    while ((c = cli_opt_next(&cli)) >= 0) {
        switch (c) {
        case 'j':
            json = true;
            break;
        case 'b':
            is_batch = true;
            break;
        case 'p':
            policy = optarg;
            break;
        case 'c':
            str = optarg;
            break;
        }
    }
    if (c == CLI_OPT_STOP)
        return cli.status;
    const char *dir = cli.dir;
    int rest = argc - optind;
    if (is_batch && (str || rest > 0))
        return cli_failf("check: --batch reads commands from stdin; no -c or PROG");
    if (!is_batch && !str && rest <= 0)
        return cli_failf("check: nothing to check (use -c 'STRING', -- PROG ARGS or --batch)");
    if (str && rest > 0)
        return cli_failf("check: give either -c 'STRING' or PROG ARGS, not both");

    txbox_policy *p = NULL;
    txbox_error err = {0};
    if (txbox_policy_load(policy, dir, &p, &err) < 0)
        return (json || is_batch) ? cli_fail_json(&err) : cli_fail(&err);
    cli_policy_notes(p);

    int rc;
    if (is_batch) {
        rc = batch(p);
    } else {
        txbox_verdict v;
        int r = str ? txbox_policy_check(p, str, strlen(str), &v, &err)
                    : txbox_policy_check_argv(p, argv + optind, &v, &err);
        if (r < 0) {
            rc = json ? cli_fail_json(&err) : cli_fail(&err);
        } else if (json) {
            size_t n = 0;
            char *joined = NULL;
            if (!str) {
                size_t tot = 1;
                for (int i = optind; i < argc; i++)
                    tot += strlen(argv[i]) + 1;
                joined = calloc(1, tot);
                for (int i = optind; joined && i < argc; i++) {
                    if (i > optind)
                        joined[n++] = ' ';
                    memcpy(joined + n, argv[i], strlen(argv[i]));
                    n += strlen(argv[i]);
                }
            }
            rc = print_json(p,
                            str      ? str
                            : joined ? joined
                                     : "",
                            str ? strlen(str) : n, false, &v) < 0
                     ? cli_failf("cannot write JSON")
                     : 0;
            free(joined);
        } else {
            print_human(&v);
            rc = exit_for(&v);
        }
    }
    txbox_policy_free(p);
    return rc;
}
