/* txbox policy engine: classifies a shell command (or an argv) as safe,
 * uncertain or unsafe, reading it the way bash would execute it.
 *
 * The built-in default policy (policy/default.yaml, compiled into the
 * library) is always loaded first; a user policy can add rules and override
 * rules by id; the workspace's own policy can only tighten, unless the user
 * trusts it (txbox_policy_load). See docs/policy.md.
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
    /* needs_network: the hosts those rules let the proxy reach (their
     * `domains`), space-separated; default_domains: one of them named none,
     * so the default registries apply too */
    char domains[1024];
    int default_domains;
} txbox_verdict;

/* Loads the built-in default policy, then user_file (if non-NULL; the
 * user's: trusted), adding and overriding rules by id, then (if
 * workspace_dir is non-NULL) the policy file found in the workspace
 * (workspace_dir/.txbox-policy.yaml, when it exists). The workspace's file
 * is written by the commands txbox judges: it can only tighten (see
 * txbox_policy_note and docs/policy.md, "The workspace's policy"), unless
 * user_file says `workspace_policy: trusted` or the user's configuration
 * ($XDG_CONFIG_HOME/txbox/config.yaml, default ~/.config/txbox/) lists the
 * workspace under trusted_workspaces; then it adds and overrides like
 * user_file. It is read only when it is a regular file (no symlink, fifo,
 * directory or device) of at most TXBOX_POLICY_MAX_WS_FILE bytes: anything
 * else is an error, never a wait. user_file must be a regular file too
 * (symlinks followed), of at most 4 MiB. Paths under workspace_dir count
 * as inside the workspace (NULL: only relative paths do). Examples in
 * every rule are checked at load: a failing example refuses the policy,
 * naming file, line, rule and example. On success *out belongs to the
 * caller (txbox_policy_free). */
#define TXBOX_POLICY_MAX_WS_FILE (1u << 20)
TXBOX_API TXBOX_MUST_CHECK int txbox_policy_load(const char *user_file, const char *workspace_dir,
                                                 txbox_policy **out, txbox_error *err);
TXBOX_API void txbox_policy_free(txbox_policy *p);

/* How the workspace's own policy file was read. */
enum {
    TXBOX_WS_POLICY_NONE = 0,    /* there is none (or no workspace was given) */
    TXBOX_WS_POLICY_TIGHTEN = 1, /* untrusted: it can only make verdicts worse and hold more */
    TXBOX_WS_POLICY_TRUSTED = 2, /* trusted by the user: read like user_file */
};
TXBOX_API int txbox_policy_workspace_mode(const txbox_policy *p);
/* The i-th thing the workspace's policy tried and was refused (or another
 * warning of the load), one line: "policy FILE:LINE: ..."; NULL past the
 * last. The CLI prints each on stderr. */
TXBOX_API const char *txbox_policy_note(const txbox_policy *p, size_t i);

/* Classifies a shell string as /bin/sh -c would get it (len bytes; NUL
 * bytes inside make the verdict `uncertain`). Returns 0 and fills *out, or
 * <0 with err filled (bad arguments only: any input string gets a verdict). */
TXBOX_API TXBOX_MUST_CHECK int txbox_policy_check(const txbox_policy *p, const char *cmd, size_t len,
                                                  txbox_verdict *out, txbox_error *err);
/* Classifies an argv executed directly (no shell); argv is NULL-terminated. */
TXBOX_API TXBOX_MUST_CHECK int txbox_policy_check_argv(const txbox_policy *p, char *const *argv,
                                                       txbox_verdict *out, txbox_error *err);
/* An agent CLI's own file tool (Claude Code's Write or Edit, Gemini CLI's
 * write_file...) about to write path (absolute, resolved by the caller)
 * on the host, outside any transaction: would a rule on effects that
 * holds or rolls back a change (the agent's settings, the scripts they
 * and the workspace's hook runners run, files programs on the host run
 * without a person asking) take it, as if a transaction wrote it? The
 * path is read relative to the workspace ws (absolute), or to the home
 * directory when it lies there instead; elsewhere, never. content (len
 * bytes) is the whole new content, or NULL when only part of it is known
 * (a rule that reads content then takes it: fail closed). 1 and *out
 * (verdict unsafe, the rule, its reason and suggestion) when one would,
 * else 0. */
TXBOX_API int txbox_policy_check_file_write(const txbox_policy *p, const char *ws, const char *path,
                                            const char *content, size_t len, txbox_verdict *out);
/* The i-th path of the policy's `hide:` list (absolute, or ~/ for every
 * home the command sees), hidden from every command and a secret to the
 * policy; with p NULL, the built-in policy's list. NULL past the end. The
 * string belongs to p (or is static). */
TXBOX_API const char *txbox_policy_hidden(const txbox_policy *p, size_t i);
/* "safe" | "uncertain" | "unsafe" */
TXBOX_API const char *txbox_verdict_name(txbox_verdict_kind v);

#ifdef __cplusplus
}
#endif
#endif
