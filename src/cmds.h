/* The CLI: one file per subcommand; each parses its own options with
 * getopt_long and returns the process exit status. */
#ifndef TXBOX_CMDS_H
#define TXBOX_CMDS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "txbox.h"
#include "remedy.h"
#include "util.h"

int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_recover(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_hook(int argc, char **argv);
int cmd_setup(int argc, char **argv);
int cmd_session(int argc, char **argv);
/* history (cmd_log.c, cmd_show.c, cmd_diff.c, cmd_undo.c, cmd_restore.c, cmd_gc.c) */
int cmd_log(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_undo(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_gc(int argc, char **argv);
/* begin, savepoint, rollback, commit, abort, status (cmd_tx.c; argv[0] says which) */
int cmd_tx(int argc, char **argv);
/* review, approve, reject: transactions held by a rule on effects (cmd_review.c) */
int cmd_review(int argc, char **argv);
/* Helpers of the history commands (cmd_log.c): a local time, a string
 * with control characters escaped (at most max characters, 0: all), and
 * opening a workspace with the error printed (returns the exit status). */
void cli_time(char out[32], double t);
void cli_print_clean(FILE *f, const char *s, size_t max);
int cli_open_ws(const char *dir, unsigned flags, bool json, txbox_ws **ws);
/* A call of the library that answers in JSON (undo, restore, gc): the
 * workspace dir opened, fn(ws, opts, &json, &err) called (*api_rc: its
 * return), the workspace closed; on an error, the error printed and the
 * exit status returned; else 0, the answer printed on stdout under --json
 * (json) and parsed into *out. fn: an adapter of the call's typed opts. */
struct json_t;
typedef int (*cli_ws_fn)(txbox_ws *ws, const void *opts, char **json, txbox_error *err);
int cli_ws_call(const char *dir, bool json, cli_ws_fn fn, const void *opts, struct json_t **out, int *api_rc);
/* Of undo and restore (cmd_undo.c): the entries of a list of paths
 * ({path, why, by}) as "path (tx N: why)", at most max; the tail of their
 * status line (counts, merged, replaced, skipped) and its newline. */
struct json_t;
void cli_print_paths(FILE *f, struct json_t *list, size_t max);
void cli_print_revert(FILE *f, struct json_t *o);

/* Print what the workspace's policy was refused (txbox_policy_note), one
 * "txbox: warning: ..." line each on stderr (cmd_check.c). */
struct txbox_policy;
void cli_policy_notes(const struct txbox_policy *p);

/* 'text' for sh, with ' written as '\'' (the text stays byte for byte). */
void cli_sh_quote(dbuf *b, const char *s);

/* The option loop every subcommand shares: getopt_long over the
 * subcommand's own tables, answering the options they all have so that
 * each parses only its own. -h and --help print the usage text (stdout,
 * exit 0); -C DIR sets dir; --json sets json; an unknown option or a
 * missing value is one line, "NAME: unknown option or missing value 'ARG'
 * (see 'txbox NAME --help')", with the JSON error object on stdout when
 * the command line asks for --json (cli_usage). A subcommand lists -C, -h
 * in shorts and CLI_O_JSON, CLI_O_HELP in longs where it has them. */
enum { CLI_O_JSON = 0x1000, CLI_O_HELP };
#define CLI_LONG_JSON                         \
    {                                         \
        "json", no_argument, NULL, CLI_O_JSON \
    }
#define CLI_LONG_HELP                         \
    {                                         \
        "help", no_argument, NULL, CLI_O_HELP \
    }
typedef struct cli_opts {
    const char *name;                        /* "show", as the messages name it */
    const char *usage;                       /* the --help text, without its last newline */
    void (*help)(FILE *f, const char *name); /* or this prints it */
    const char *shorts;                      /* getopt_long's short options ("+C:fh") */
    const struct option *longs;              /* its long options, {0}-terminated */
    int argc;
    char **argv;
    const char *dir; /* -C: "." unless given */
    bool json;       /* --json */
    int status;      /* after CLI_OPT_STOP: the exit status to return */
    bool started;    /* set by the first call (which resets getopt) */
} cli_opts;
enum { CLI_OPT_END = -1, CLI_OPT_STOP = -2 };
/* The next of the subcommand's own options (getopt_long's value, optarg
 * set), CLI_OPT_END after the last (optind: the first operand), or
 * CLI_OPT_STOP when the subcommand should return o->status (help printed,
 * or a usage error reported). */
int cli_opt_next(cli_opts *o);

/* Print "txbox: MSG" on stderr (one line) and return TXBOX_EXIT_ERROR. */
int cli_fail(const txbox_error *err);
int cli_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A usage error: like cli_failf, plus the JSON error object on stdout when
 * argv asks for --json (looked for before any "--"). */
int cli_usage(int argc, char **argv, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same as a JSON error object on stdout, for --json modes. */
int cli_fail_json(const txbox_error *err);

#endif
