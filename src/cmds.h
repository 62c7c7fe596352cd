/* The CLI: one file per subcommand; each parses its own options with
 * getopt_long and returns the process exit status. */
#ifndef TXBOX_CMDS_H
#define TXBOX_CMDS_H

#include <stdbool.h>
#include <stdio.h>

#include "txbox.h"
#include "util.h"

int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_recover(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_hook(int argc, char **argv);
int cmd_setup(int argc, char **argv);
/* history (cmd_log.c, cmd_show.c, cmd_diff.c, cmd_undo.c, cmd_gc.c) */
int cmd_log(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_undo(int argc, char **argv);
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

/* Print what the workspace's policy was refused (txbox_policy_note), one
 * "txbox: warning: ..." line each on stderr (cmd_check.c). */
struct txbox_policy;
void cli_policy_notes(const struct txbox_policy *p);

/* 'text' for sh, with ' written as '\'' (the text stays byte for byte). */
void cli_sh_quote(dbuf *b, const char *s);

/* Print "txbox: MSG" on stderr (one line) and return TXBOX_EXIT_ERROR. */
int cli_fail(const txbox_error *err);
int cli_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A usage error: like cli_failf, plus the JSON error object on stdout when
 * argv asks for --json (looked for before any "--"). */
int cli_usage(int argc, char **argv, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same as a JSON error object on stdout, for --json modes. */
int cli_fail_json(const txbox_error *err);

#endif
