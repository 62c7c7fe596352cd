/* Git configuration and hooks judged the way git reads them (issue 20,
 * part 3): rules on effects with `match: {git: config}` or `{git: hooks}`.
 * See gitcfg.c and docs/policy.md ("Git configuration and hooks"). */
#ifndef TXBOX_GITCFG_H
#define TXBOX_GITCFG_H

#include <stdbool.h>

#include <jansson.h>

#include "tx.h"

/* Where git can read a transaction's after state: its scanned upper,
 * txfd/upper, over the workspace. */
struct gitcfg_ctx {
    txbox_ws *ws;
    int txfd;                /* .txbox/tx/ID */
    const char *txs;         /* ID */
    const char *const *hide; /* paths the sandbox hides (NULL-terminated, or NULL) */
    bool allow_degraded;
};

/* Is key (as `git config --list` prints it) a setting that makes git run a
 * program, or changes which configuration or hooks git reads? value: its
 * value (NULL: none). */
bool gitcfg_exec_key(const char *key, const char *value);

/* One judging: begin (loads what the last one learned of the workspace's
 * repositories, .txbox/gitcfg.json, if it is still true), note every
 * entry of the write set, end (runs git, in the sandbox, only when the
 * write set holds something git reads as configuration). */
struct gitwatch;
struct gitwatch *gitwatch_begin(const struct gitcfg_ctx *c, bool config, bool hooks);
void gitwatch_note(struct gitwatch *w, const char *path, bool deleted);

struct gitwatch_out {
    char *config_why;     /* the settings changed (NULL: none) */
    json_t *config_paths; /* the repositories (git directories) */
    char *hooks_why;      /* a hook written (NULL: none) */
    json_t *hook_paths;
};
/* 0, or <0 with err (nothing could be judged). */
MUST_CHECK int gitwatch_end(struct gitwatch *w, struct gitwatch_out *out, txbox_error *err);
void gitwatch_free(struct gitwatch *w);
void gitwatch_out_free(struct gitwatch_out *o);

#endif
