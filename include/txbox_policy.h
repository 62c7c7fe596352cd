/* txbox policy engine: classifies a shell command (or an argv) as safe,
 * uncertain or unsafe, reading it the way bash would execute it.
 *
 * The built-in default policy (policy/default.yaml, compiled into the
 * library) is always loaded first; a workspace policy and a user policy can
 * add rules and override rules by id. See docs/policy.md.
 *
 * Thread safety: a loaded txbox_policy is immutable; any number of threads
 * may call txbox_policy_check*() on it at once. */
#ifndef TXBOX_POLICY_H
#define TXBOX_POLICY_H

#include <stddef.h>

#include "txbox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Commands longer than this are not parsed: their verdict is `uncertain`
 * (rule `too-large`). */
#define TXBOX_POLICY_MAX_COMMAND (256u * 1024u)
/* Nested shells, eval, substitutions and wrappers deeper than this are not
 * followed: the verdict is at best `uncertain` (rule `too-deep`). */
#define TXBOX_POLICY_MAX_DEPTH 16

typedef enum {
    TXBOX_VERDICT_SAFE = 0,
    TXBOX_VERDICT_UNCERTAIN = 1,
    TXBOX_VERDICT_UNSAFE = 2
} txbox_verdict_kind;

typedef struct txbox_policy txbox_policy;

typedef struct txbox_verdict {
    txbox_verdict_kind verdict;
    char rule[96];        /* id of the deciding rule */
    char reason[512];     /* one line */
    char suggestion[512]; /* for unsafe: what the agent can do instead; "" otherwise */
    int needs_network;    /* a rule allowed network for this command (0/1) */
} txbox_verdict;

/* Loads the built-in default policy, then (if workspace_dir is non-NULL) the
 * policy file found in the workspace (workspace_dir/.txbox-policy.yaml, when
 * it exists) and then user_file (if non-NULL), each adding and overriding
 * rules by id. Paths under workspace_dir count as inside the workspace
 * (NULL: only relative paths do). Examples in every rule are checked at
 * load: a failing example refuses the policy, naming file, line, rule and
 * example. On success *out belongs to the caller (txbox_policy_free). */
TXBOX_API TXBOX_MUST_CHECK int txbox_policy_load(const char *user_file, const char *workspace_dir,
                                                 txbox_policy **out, txbox_error *err);
TXBOX_API void txbox_policy_free(txbox_policy *p);

/* Classifies a shell string as /bin/sh -c would get it (len bytes; NUL
 * bytes inside make the verdict `uncertain`). Returns 0 and fills *out, or
 * <0 with err filled (bad arguments only: any input string gets a verdict). */
TXBOX_API TXBOX_MUST_CHECK int txbox_policy_check(const txbox_policy *p, const char *cmd,
                                                  size_t len, txbox_verdict *out,
                                                  txbox_error *err);
/* Classifies an argv executed directly (no shell); argv is NULL-terminated. */
TXBOX_API TXBOX_MUST_CHECK int txbox_policy_check_argv(const txbox_policy *p, char *const *argv,
                                                       txbox_verdict *out, txbox_error *err);
/* The i-th path of the policy's `hide:` list (absolute, or ~/ for $HOME),
 * hidden from every command besides txbox's defaults; NULL past the end.
 * The string belongs to p. */
TXBOX_API const char *txbox_policy_hidden(const txbox_policy *p, size_t i);
/* "safe" | "uncertain" | "unsafe" */
TXBOX_API const char *txbox_verdict_name(txbox_verdict_kind v);

#ifdef __cplusplus
}
#endif
#endif
