/* txbox: dispatch to one subcommand. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cmds.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", cmd_run, "run a command as one transaction"},
    {"check", cmd_check, "classify a command with the policy; nothing runs"},
    {"recover", cmd_recover, "finish or undo a commit interrupted by a crash"},
    {"mcp", cmd_mcp, "Model Context Protocol server on stdin/stdout"},
    {"setup", cmd_setup, "write txbox's hook and MCP entries into an agent CLI's settings"},
    {"hook", cmd_hook, "pre-tool-use hook for agent CLIs (claude-code, gemini-cli)"},
    {"log", cmd_log, "the audit log, newest first"},
    {"show", cmd_show, "everything recorded about one transaction"},
    {"diff", cmd_diff, "what one transaction changed, as a unified diff"},
    {"undo", cmd_undo, "revert a committed transaction (as a new one), merging later changes"},
    {"restore", cmd_restore, "bring chosen paths back as they were before a transaction"},
    {"gc", cmd_gc, "prune retained pre-images (undo history), oldest first"},
    {"agent", cmd_agent, "headless agent loop against an OpenAI-compatible server"},
    {"begin", cmd_tx, "open a multi-command transaction (then: run --tx ID)"},
    {"savepoint", cmd_tx, "mark a savepoint in an open transaction"},
    {"rollback", cmd_tx, "roll an open transaction back to a savepoint or its start"},
    {"commit", cmd_tx, "apply an open transaction at once (optionally after --verify)"},
    {"abort", cmd_tx, "drop an open transaction"},
    {"status", cmd_tx, "list the open transactions"},
    {"review", cmd_review, "list held transactions, or show why one is held and its changes"},
    {"approve", cmd_review, "commit a held transaction"},
    {"reject", cmd_review, "drop a held transaction"},
    {"resolve", cmd_review, "mark external effects that need attention as dealt with"},
    {"session", cmd_session, "start, end, list sessions (run --session ID)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: txbox COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nRun 'txbox COMMAND --help' for the options of one command.\n");
}

void cli_sh_quote(dbuf *b, const char *s)
{
    dbuf_add(b, "'", 1);
    for (const char *p = s; *p; p++) {
        if (*p == '\'')
            dbuf_addstr(b, "'\\''");
        else
            dbuf_add(b, p, 1);
    }
    dbuf_add(b, "'", 1);
}

int cli_fail(const txbox_error *err)
{
    char t[REMEDY_TEXT_MAX];
    fprintf(stderr, "txbox: %s\n", remedy_error_text(err, t, sizeof t));
    return TXBOX_EXIT_ERROR;
}

int cli_failf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("txbox: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return TXBOX_EXIT_ERROR;
}

int cli_usage(int argc, char **argv, const char *fmt, ...)
{
    txbox_error e = {.code = EINVAL};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof e.msg, fmt, ap);
    va_end(ap);
    tx_err_fold(e.msg);
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--json"))
            return cli_fail_json(&e);
    return cli_fail(&e);
}

int cli_opt_next(cli_opts *o)
{
    if (!o->started) {
        o->started = true;
        o->dir = o->dir ? o->dir : ".";
        optind = 1;
        opterr = 0;
    }
    for (;;) {
        int c = getopt_long(o->argc, o->argv, o->shorts, o->longs, NULL);
        switch (c) {
        case -1:
            return CLI_OPT_END;
        case 'C':
            o->dir = optarg;
            continue;
        case CLI_O_JSON:
            o->json = true;
            continue;
        case 'h':
        case CLI_O_HELP:
            if (o->help)
                o->help(stdout, o->name);
            else
                puts(o->usage);
            o->status = 0;
            return CLI_OPT_STOP;
        case '?':
        case ':': {
            /* the option as typed: a long one is the argument getopt
             * passed; a short one may sit inside a group ("-xf") */
            char sh[3] = {'-', (char)optopt, 0};
            const char *arg = o->argv[optind - 1];
            if (strncmp(arg, "--", 2) && optopt > 0 && optopt < 128)
                arg = sh;
            o->status = cli_usage(o->argc, o->argv,
                                  "%s: unknown option or missing value '%s' (see 'txbox %s --help')", o->name,
                                  arg, o->name);
            return CLI_OPT_STOP;
        }
        default:
            return c;
        }
    }
}

int cli_fail_json(const txbox_error *err)
{
    char t[REMEDY_TEXT_MAX];
    remedy_error_text(err, t, sizeof t);
    json_t *o = json_pack("{s:{s:s,s:i}}", "error", "message", t, "code", err->code);
    char *s = json_dumps(o, JSON_COMPACT);
    if (s)
        printf("%s\n", s);
    free(s);
    json_decref(o);
    fprintf(stderr, "txbox: %s\n", t);
    return TXBOX_EXIT_ERROR;
}

/* What a long wait in the library waits for (a lock another txbox
 * holds), said once on stderr. */
static void notice(const char *fact) { fprintf(stderr, "txbox: %s\n", fact); }

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return TXBOX_EXIT_ERROR;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        puts("txbox " TXBOX_VERSION);
        return 0;
    }
    /* (the hook's stderr is the agent CLI's to show: it says nothing more) */
    if (strcmp(argv[1], "hook"))
        tx_set_notice(notice);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "txbox: unknown command '%s' (see 'txbox --help')\n", argv[1]);
    return TXBOX_EXIT_ERROR;
}
