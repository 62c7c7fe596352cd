/* The agent's tools, carried out as txbox command lines: run_command is
 * `run --json -C WS -c CMD` (argv, never a re-joined string), run in this
 * process through the library (loop.c's run_txbox, resident.h); undo is `undo
 * --json -C WS [TX]`, and the multi-command transaction's steps, run by
 * child txbox processes (`/proc/self/exe`). The agent process never enters
 * the sandbox itself: the library forks it. Results are turned into the
 * compact summaries the model reads. */
#ifndef TXBOX_AGENT_TOOLS_H
#define TXBOX_AGENT_TOOLS_H

#include <jansson.h>
#include <signal.h>

#include "util.h"

typedef struct child_result {
    int status;    /* exit code, or 128+signal */
    bool killed;   /* we killed it (deadline or cancel) */
    dbuf out, err; /* captured, capped */
} child_result;

/* Runs the txbox binary itself with argv (argv[0] is its name) and the
 * environment envp, stdin from /dev/null, in dir, capturing stdout and
 * stderr. After deadline_s (0: none)
 * or once *cancel is set it is sent SIGTERM (txbox rolls back), then SIGKILL
 * 5 s later. Returns 0 when the child ran (whatever its status). */
MUST_CHECK int run_self(char *const argv[], char *const envp[], const char *dir, double deadline_s,
                        volatile sig_atomic_t *cancel, child_result *res, txbox_error *err);
/* Empty, with the caps run_self uses. */
void child_result_init(child_result *r);
void child_result_free(child_result *r);

/* A copy of environ without the variable `drop` (NULL: none), for the
 * children: the API key's variable must not reach the commands the model
 * runs. Free with free() (one allocation for the array; the strings are
 * environ's own). */
char **env_without(const char *drop);

/* The command with leading/trailing blanks and a trailing ';' removed and
 * every run of blanks made one space: two spellings of the same command
 * compare equal. */
char *normalize_command(const char *cmd);

/* A compact summary of a `txbox run --json` object for the model: `line`
 * (what happened and what to do next, words.h; sent first, before the
 * rest as JSON: result_text), outcome, exit code, tx (not in the task's
 * transaction mtx), rule/reason/suggestion when blocked, losses and
 * discarded writes, changed paths (at most max_paths per kind), the tail of
 * stdout and stderr, all within about max_bytes. */
json_t *compact_run_result(json_t *run, size_t max_bytes, size_t max_paths, const char *mtx);
/* The text the model reads for a result: its `line`, a newline, the rest
 * as compact JSON; just the JSON when it has no line (malloc'd). */
char *result_text(json_t *result);

/* At most max bytes from the end of s (a UTF-8 string), cut on a
 * character boundary. */
const char *utf8_tail(const char *s, size_t len, size_t max, bool *cut);

#endif
