/* txbox: every shell command an agent runs, as a transaction.
 *
 * Public C API. All handles are opaque; every function that can fail returns
 * a negative value and fills a txbox_error (errno-like code + one-line
 * message). Ownership: objects returned through an out-pointer belong to the
 * caller and are released with the matching *_free / *_close function;
 * strings returned as `char *` are malloc'd and freed with free(3). */
#ifndef TXBOX_H
#define TXBOX_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TXBOX_API __attribute__((visibility("default")))
#define TXBOX_MUST_CHECK __attribute__((warn_unused_result))

/* Exit statuses of the CLI besides the command's own (see README). */
enum {
    TXBOX_EXIT_HELD = 121,      /* an effect rule holds the transaction for review: not applied */
    TXBOX_EXIT_BLOCKED = 122,   /* the policy judged the command unsafe (it never ran), or an
                                  effect rule rejected what it wrote (nothing applied) */
    TXBOX_EXIT_CONFLICT = 123,  /* succeeded, but its base changed: changes kept aside */
    TXBOX_EXIT_TIMEOUT = 124,   /* killed at the time limit; rolled back */
    TXBOX_EXIT_ERROR = 125,     /* txbox itself failed (bad input, I/O, setup) */
    TXBOX_EXIT_NO_SPACE = 119,  /* not applied: it would leave less free space than the floor */
    TXBOX_EXIT_ATTENTION = 120, /* undone, but an external effect needs attention: its
                                   compensation failed, was interrupted, or there is none */
};

/* What a person (or an agent) can do about an error or an outcome. The
 * library states the fact; the front chooses the words for the remedy
 * (the CLI names its commands and options, an MCP client or the agent
 * loop has neither) and puts them at `at` in the text. */
typedef enum txbox_remedy_kind {
    TXBOX_REMEDY_NONE = 0,
    TXBOX_REMEDY_RECOVER,        /* crash recovery finishes it (txbox_recover) */
    TXBOX_REMEDY_REVIEW,         /* the transactions held for review (txbox_review) */
    TXBOX_REMEDY_APPROVE,        /* review it, then approve or reject it */
    TXBOX_REMEDY_STATUS,         /* the open transactions and their effects */
    TXBOX_REMEDY_ABORT,          /* abort transaction `arg` again, to finish it */
    TXBOX_REMEDY_ALLOW_DEGRADED, /* txbox_run_opts.allow_degraded accepts `arg` ("" for what
                                    was refused) */
    TXBOX_REMEDY_GC,             /* what pruned it: pre-image retention (txbox_gc) */
    TXBOX_REMEDY_LOG,            /* where transaction ids come from (the audit log) */
    TXBOX_REMEDY_UNDO,           /* undoing transaction `arg` brings back what it destroyed */
} txbox_remedy_kind;

typedef struct txbox_remedy {
    txbox_remedy_kind kind;
    char arg[24];    /* its datum: a transaction id, what is accepted; "" when none */
    unsigned int at; /* where in the text its words go (a byte offset) */
} txbox_remedy;

typedef struct txbox_error {
    int code;            /* errno value (or EINVAL for bad input); 0 when no error */
    char msg[512];       /* one line, no trailing newline: the fact, without remedy words */
    txbox_remedy remedy; /* TXBOX_REMEDY_NONE, or what to do, for the front to word */
} txbox_error;

typedef enum txbox_backend {
    TXBOX_BACKEND_OVERLAY = 0, /* copy-on-write overlayfs upper per transaction (default) */
    TXBOX_BACKEND_COPY = 1,    /* the paper's method: copy the workspace, restore on failure */
} txbox_backend;

typedef enum txbox_outcome {
    TXBOX_OUTCOME_COMMITTED = 0,
    TXBOX_OUTCOME_ROLLED_BACK,
    TXBOX_OUTCOME_BLOCKED,
    TXBOX_OUTCOME_READ_ONLY,
    TXBOX_OUTCOME_CONFLICT,
    TXBOX_OUTCOME_TIMED_OUT,
    TXBOX_OUTCOME_STAGED,   /* multi-command transaction: kept in it, not yet applied */
    TXBOX_OUTCOME_REJECTED, /* an effect rule (action rollback) refused the write set */
    TXBOX_OUTCOME_HELD,     /* an effect rule (action hold): pending for txbox review */
    TXBOX_OUTCOME_NO_SPACE, /* committing would leave the workspace's filesystem below its
                               free-space floor (txbox_run_opts.min_free_bytes): not applied */
} txbox_outcome;

TXBOX_API const char *txbox_outcome_name(txbox_outcome o);

/* A workspace: an open directory plus its state in DIR/.txbox/. */
typedef struct txbox_ws txbox_ws;

enum {
    TXBOX_WS_CREATE = 1 << 0,     /* create DIR/.txbox/ when missing */
    TXBOX_WS_NO_RECOVER = 1 << 1, /* do not run crash recovery on open */
    /* with CREATE: where DIR/.txbox/ cannot be made or written (a read-only
     * filesystem, a directory the caller may not write), open without it:
     * then only read-only runs (txbox_run_opts.read_only), recorded nowhere */
    TXBOX_WS_READ_ONLY = 1 << 2
};

TXBOX_API TXBOX_MUST_CHECK int txbox_ws_open(const char *dir, unsigned flags, txbox_ws **out,
                                             txbox_error *err);
TXBOX_API void txbox_ws_close(txbox_ws *ws);
TXBOX_API const char *txbox_ws_path(const txbox_ws *ws);
/* Empties the workspace's trash (the scratch directories of ended
 * transactions: a rolled-back command's upper with everything it wrote)
 * in a detached process, at idle priority, and returns at once: for a
 * front that exits after one transaction (the CLI), so that the removal
 * is no part of the command's time. Nothing to do when the trash is
 * empty. A front that lives on needs none: each transaction empties the
 * trash while its command runs. */
TXBOX_API void txbox_ws_clean_detached(txbox_ws *ws);
/* The name of dir's filesystem when it is one that cannot hold an overlay's
 * upper directory (the overlay backend keeps the transaction's upper in
 * dir/.txbox/, on the workspace's filesystem): "overlayfs", "FUSE", "NFS"...
 * NULL when it can, or is not known to be unable. Nothing is created. */
TXBOX_API const char *txbox_fs_without_overlay(const char *dir);
/* What this place (a container, mostly) lacks that the sandbox needs, all
 * at once: 0 when nothing is known to be missing, else -1 with err naming
 * every missing setting and the options of podman, docker and Kubernetes
 * (remedy TXBOX_REMEDY_ALLOW_DEGRADED when root has no cgroup and
 * allow_degraded is 0). Tries new namespaces in a child process. */
TXBOX_API TXBOX_MUST_CHECK int txbox_sandbox_probe(int allow_degraded, txbox_error *err);

/* Crash recovery: rolls every half-applied commit forward and discards the
 * upper of every transaction whose process died. *report (may be NULL)
 * receives a JSON object describing what was found and done; when it is
 * asked for, the audit log's pending rows (runs that changed nothing,
 * appended to .txbox/log.pending) are also moved into the log. */
TXBOX_API TXBOX_MUST_CHECK int txbox_recover(txbox_ws *ws, char **report, txbox_error *err);

/* The network a command gets (txbox_run_opts.net). It always has its own
 * network namespace, except with TXBOX_NET_HOST. */
enum {
    TXBOX_NET_NONE = 0,  /* loopback only, unless a policy rule grants the proxy */
    TXBOX_NET_PROXY = 1, /* through the transaction's allowlisting proxy */
    TXBOX_NET_HOST = 2,  /* the host's network namespace (explicit opt-in) */
};

struct txbox_policy;                        /* txbox_policy.h */
typedef struct txbox_multi txbox_multi;     /* a multi-command transaction (below) */
typedef struct txbox_session txbox_session; /* an agent's session (below) */

typedef struct txbox_run_opts {
    const char *shell;      /* handed unchanged to SHELL -c (shell_path); or NULL and argv */
    const char *shell_path; /* the shell that runs `shell`, from txbox_shell_resolve();
                                  NULL: txbox_shell_resolve(NULL) (bash where there is one) */
    int shell_posix;        /* shell_path reads POSIX sh, not bash (the policy reads bash):
                                  a command the two read differently is at best uncertain and
                                  gets no network from a rule */
    int tee_fd;             /* > 0, with capture: the output is also copied to this
                                  descriptor as it comes (made non-blocking: what does
                                  not fit at once is dropped) */
    char *const *argv;      /* program and arguments, executed as is */
    const char *cwd;        /* directory to start in; NULL: the caller's cwd */
    double timeout_s;       /* wall-clock limit; 0: none */
    txbox_backend backend;
    int allow_copy_fallback;           /* use the copy backend when overlay cannot be mounted */
    int capture;                       /* capture stdout/stderr into the result instead of streaming */
    size_t output_cap;                 /* bytes kept per stream when capturing (0: 1 MiB) */
    int net;                           /* TXBOX_NET_*: 0 none unless the policy grants it */
    const char *const *allow_domains;  /* more host names (or *.suffix) the network proxy
                                         lets through (NULL-terminated; NULL: none) */
    const char *net_refusal_words;     /* the front's words for how the reader can have a
                                          host the proxy refused allowed, "{host}" standing
                                          for its name (the proxy's 403 adds them to the
                                          fact); NULL: the fact alone */
    int read_only;                     /* run with the workspace read-only, no transaction */
    volatile int *cancel;              /* when set non-zero (e.g. from a signal handler), the
                                  command is killed and its transaction rolled back */
    int allow_degraded;                /* run even where Landlock or a cgroup cannot be had */
    uint64_t memory_bytes;             /* memory limit; 0: 8 GiB */
    uint64_t max_processes;            /* process limit; 0: 4096 */
    uint64_t cpu_seconds;              /* CPU time per process; 0: none */
    uint64_t max_write_bytes;          /* disk the command may take; 0: half the free space
                                          above the floor (min_free_bytes) */
    int64_t min_free_bytes;            /* the free-space floor: no commit leaves the workspace's
                                          filesystem with less free (0: TXBOX_MIN_FREE, else 5% of
                                          it within [256 MiB, 4 GiB]; <0: none) */
    const char *const *env_allow;      /* fnmatch patterns of secret-looking variables to keep */
    const char *const *deny_read;      /* more paths to hide (absolute, or ~/ for $HOME) */
    const struct txbox_policy *policy; /* classify first: unsafe is blocked, safe runs
                                          read-only, uncertain as a transaction; NULL:
                                          every command is a transaction */
    struct txbox_multi *multi;         /* run inside this open multi-command transaction (overlay
                                  only): the command sees its changes so far, and on
                                  success its own are added to it (outcome staged) */
    int interactive;                   /* a person can answer a hold now (the CLI: stdin and
                                  stderr are a terminal): a rule on effects with action
                                  `ask` (work the commit would destroy) holds the
                                  transaction; without one, it commits and the result
                                  reports what was lost. Never set it for an agent. */
    struct txbox_session *session;     /* run in this session (txbox_session_open): its /tmp,
                                          loopback, processes; NULL: the command alone */
} txbox_run_opts;

/* The shell that runs a shell string: spec "bash" (/bin/bash, else /usr/bin/bash),
 * "sh" (/bin/sh), an absolute path to one of bash, dash, sh, ash or busybox (as sh),
 * or NULL: bash where there is one, else /bin/sh. *path (malloc'd) is absolute; *posix
 * is 0 only for bash run under the name bash. Refuses other shells (EINVAL: the
 * policy reads bash, and sh as far as it agrees with bash) and missing ones. */
TXBOX_API TXBOX_MUST_CHECK int txbox_shell_resolve(const char *spec, char **path, int *posix,
                                                   txbox_error *err);

typedef struct txbox_result txbox_result;

/* Runs one command as one transaction. Returns 0 when the transaction
 * reached an outcome (whatever the command's status), <0 when txbox itself
 * failed, in which case the workspace is unchanged. */
TXBOX_API TXBOX_MUST_CHECK int txbox_run(txbox_ws *ws, const txbox_run_opts *opts, txbox_result **out,
                                         txbox_error *err);
/* Records a command that a front refused without running it (a hook's
 * denial): an audit-log row, outcome blocked, with an id, the verdict
 * ("unsafe", "uncertain", "safe"), rule and reason given, and the command
 * and directory of opts (nothing else of opts is used, nothing runs). */
TXBOX_API TXBOX_MUST_CHECK int txbox_run_refused(txbox_ws *ws, const txbox_run_opts *opts,
                                                 const char *verdict, const char *rule, const char *reason,
                                                 txbox_result **out, txbox_error *err);
TXBOX_API txbox_outcome txbox_result_outcome(const txbox_result *r);
/* The status a shell would report: the exit code, or 128+signal. */
TXBOX_API int txbox_result_exit_code(const txbox_result *r);
TXBOX_API const char *txbox_result_tx(const txbox_result *r);
/* The result as one JSON object (see README for the fields). */
TXBOX_API char *txbox_result_json(const txbox_result *r);
/* A short human status line (no newline); *remedy (may be NULL) receives
 * what to do, for the front to word at remedy->at. */
TXBOX_API char *txbox_result_summary(const txbox_result *r, txbox_remedy *remedy);
/* The directory the command's shell ended in (an absolute path in the
 * workspace or in its session's /tmp), or NULL when it ended elsewhere or
 * is not known. Owned by r. */
TXBOX_API const char *txbox_result_cwd_after(const txbox_result *r);
TXBOX_API void txbox_result_free(txbox_result *r);

/* ---- sessions: what one command leaves for the next outside the
 * workspace ----
 *
 * A session (an MCP connection, a hook's CLI session, an agent run, or one
 * started by hand) gives the commands run in it (txbox_run_opts.session)
 * one /tmp, /var/tmp and /dev/shm that persist from command to command
 * (and see the caller's own files of the host's /tmp that the command
 * names, copied in before it; what commands write there stays in the
 * session),
 * one loopback network, one set of processes: a process a command leaves
 * running in the background lives on, as long as the session and no
 * longer, and later commands see it (ps, kill, pkill). Each command's
 * workspace changes are still its own transaction. What a background
 * process writes to the workspace after its command ended is a transaction
 * of its own, committed when the last of that command's background
 * processes has exited 0 of its own accord, else rolled back; it is
 * reported in the next result of the session (`late_transactions`) and in
 * txbox_session_end's report. Sessions are isolated from each other and
 * from the host as commands are.
 *
 * A session lives in a process of its own (it holds the namespaces and the
 * background processes) and ends when txbox_session_end ends it, after
 * idle_s seconds without a command, or when its owner process ends. The
 * handle may be closed and the session opened again by id from another
 * process (txbox run --session ID). One handle may serve commands run at
 * once from several threads. */

enum {
    TXBOX_SESSION_CREATE = 1 << 0, /* start the session when none of that id runs */
    TXBOX_SESSION_EXCL = 1 << 1,   /* with CREATE: EEXIST when it runs already */
};

typedef struct txbox_session_opts {
    const char *id;                    /* 1-64 of [A-Za-z0-9._-], not starting with '.' (a hook maps its
                        CLI's session id onto it); NULL with TXBOX_SESSION_CREATE: a new id */
    unsigned flags;                    /* TXBOX_SESSION_* */
    pid_t owner;                       /* when starting: the session ends when this process ends (0: none) */
    double idle_s;                     /* when starting: it ends after this long without a command
                        (0: 1800 seconds) */
    const struct txbox_policy *policy; /* judges the late transactions with its rules on
                                          effects (txbox_run's own policy when it commits
                                          them); NULL: none. Must outlive the handle. */
} txbox_session_opts;

/* Opens the session o->id: a running one, or one that has ended on its
 * own (idle, owner gone: txbox_session_end gives its report; a command run
 * in it fails), or starts it (TXBOX_SESSION_CREATE: also in place of one
 * that has ended). ENOENT: no such session. */
TXBOX_API TXBOX_MUST_CHECK int txbox_session_open(txbox_ws *ws, const txbox_session_opts *o,
                                                  txbox_session **out, txbox_error *err);
TXBOX_API const char *txbox_session_id(const txbox_session *s);
/* Did txbox_session_open start it? 0: it ran already (or was opened
 * without TXBOX_SESSION_CREATE); 1: started, none of that id had run; 2:
 * started in place of one of that id that had ended on its own (what that
 * one kept, its /tmp and background processes, is gone). The first
 * command run with the handle says it in its result (session_started). */
TXBOX_API int txbox_session_started(const txbox_session *s);
/* Ends the session: its background processes are killed, their late
 * writes rolled back (those of processes that had already exited 0 are
 * committed first), its /tmp discarded. *report (may be NULL; the
 * caller's): {"session", "ended_by", "processes_killed", "late_transactions":
 * [...], "discarded": {"count", "paths", "truncated"}}. The handle stays
 * to be closed. */
TXBOX_API TXBOX_MUST_CHECK int txbox_session_end(txbox_session *s, char **report, txbox_error *err);
/* Releases the handle; the session runs on. */
TXBOX_API void txbox_session_close(txbox_session *s);
/* The session now: {"session", "started", "owner", "idle_s", "last_command",
 * "processes": [{"pid", "tx", "command"}], "pending": N} (*json: the caller's). */
TXBOX_API TXBOX_MUST_CHECK int txbox_session_status(txbox_session *s, char **json, txbox_error *err);
/* The workspace's sessions: {"sessions": [{"session", "started", "running", ...}]}. */
TXBOX_API TXBOX_MUST_CHECK int txbox_session_list(txbox_ws *ws, char **json, txbox_error *err);

/* ---- multi-command transactions: begin, run in it, savepoint, rollback,
 * commit, abort, status ---- */

/* An open multi-command transaction, locked by this process (the handle of
 * txbox_run_opts.multi); txbox_multi_close releases it (the transaction
 * stays open in the workspace until committed or aborted). Strings
 * returned (ids, JSON, summaries) are the caller's, freed with free(3). */

/* Opens a new multi-command transaction on ws; *id: its id (caller frees).
 * name: a label shown by status (may be NULL). */
TXBOX_API TXBOX_MUST_CHECK int txbox_multi_begin(txbox_ws *ws, const char *name, char **id, txbox_error *err);
/* Opens the open transaction id and locks it for this process (a second
 * process on the same transaction waits). Finishes any step a crash cut
 * short (a merge, a rollback). */
TXBOX_API TXBOX_MUST_CHECK int txbox_multi_open(txbox_ws *ws, const char *id, txbox_multi **out,
                                                txbox_error *err);
TXBOX_API void txbox_multi_close(txbox_multi *m);
TXBOX_API const char *txbox_multi_id(const txbox_multi *m);

/* Marks the current state as savepoint name (an existing one of that name
 * is replaced). */
TXBOX_API TXBOX_MUST_CHECK int txbox_multi_savepoint(txbox_multi *m, const char *name, txbox_error *err);
/* Back to savepoint name (kept; later ones are dropped), or with name NULL
 * to the start (every savepoint dropped). The transaction stays open. */
TXBOX_API TXBOX_MUST_CHECK int txbox_multi_rollback(txbox_multi *m, const char *name, txbox_error *err);
/* Drops the transaction: nothing of it is ever applied. */
TXBOX_API TXBOX_MUST_CHECK int txbox_multi_abort(txbox_multi *m, txbox_error *err);
/* The same; first runs the compensations of its external effects, newest
 * first. *report (may be NULL): {"effects": [...],
 * "needs_attention": N}. Cut short by a crash, it is finished by aborting
 * again (the transaction stays open, refusing everything but abort). */
TXBOX_API TXBOX_MUST_CHECK int txbox_multi_abort_report(txbox_multi *m, char **report, txbox_error *err);

/* Commits: with verify (a command, run in the transaction's final view,
 * its own writes dropped) only if it succeeds. *json: the result object;
 * *status: the exit status (0 committed, 123 conflict, the verify
 * command's own when it failed); *summary: one status line, and
 * *summary_remedy (may be NULL) what to do, for the front to word. Returns
 * <0 when txbox itself failed (nothing applied unless the commit point was
 * passed, which recovery then completes). */
TXBOX_API TXBOX_MUST_CHECK int txbox_multi_commit(txbox_multi *m, const txbox_run_opts *verify, char **json,
                                                  int *status, char **summary, txbox_remedy *summary_remedy,
                                                  txbox_error *err);

/* The policy whose rules on effects judge the commit (NULL: the
 * verify command's, if any). p must outlive m. */
TXBOX_API void txbox_multi_set_policy(txbox_multi *m, const struct txbox_policy *p);

/* The open multi-command transactions: a JSON object {"transactions": [...]}. */
TXBOX_API TXBOX_MUST_CHECK int txbox_multi_status(txbox_ws *ws, char **json, txbox_error *err);

/* ---- review: transactions held by a rule on effects, effects that need
 * attention ---- */

/* The held transaction id (NULL: every held transaction): *json, the
 * caller's (free(3)), describes the write set and the rule that held it. */
TXBOX_API TXBOX_MUST_CHECK int txbox_review(txbox_ws *ws, const char *id, char **json, txbox_error *err);
/* Commits held transaction id, unless a commit since its base touched the
 * same paths (then it stays held: *status is TXBOX_EXIT_CONFLICT). *json:
 * the result object (caller frees); *status: the CLI's exit status. */
TXBOX_API TXBOX_MUST_CHECK int txbox_approve(txbox_ws *ws, const char *id, char **json, int *status,
                                             txbox_error *err);
/* Discards held transaction id (outcome rejected). *json: the caller's. */
TXBOX_API TXBOX_MUST_CHECK int txbox_reject(txbox_ws *ws, const char *id, char **json, txbox_error *err);
/* A person says that the external effects of transaction id that need
 * attention (all, or the one numbered which >= 0) are dealt with: each is
 * marked `resolved` (`resolved_from`, `resolved_at`, `note`), durably, and
 * `txbox status` lists it no more. *json (the caller's): {"tx",
 * "resolved": [the entries]}. An error when none needs attention. */
TXBOX_API TXBOX_MUST_CHECK int txbox_resolve(txbox_ws *ws, const char *id, long which, const char *note,
                                             char **json, txbox_error *err);

/* ---- history: log, show, diff, undo, gc ---- */

/* The newest `limit` transactions (0: all), newest first: a JSON array. */
TXBOX_API TXBOX_MUST_CHECK int txbox_log_json(txbox_ws *ws, long limit, char **json, txbox_error *err);
/* Everything recorded about transaction tx: a JSON object. */
TXBOX_API TXBOX_MUST_CHECK int txbox_show_json(txbox_ws *ws, const char *tx, char **json, txbox_error *err);
/* diff -u of two texts (NULL: absent, shown as /dev/null) labelled la and
 * lb, written to out (txbox setup --dry-run). */
TXBOX_API TXBOX_MUST_CHECK int txbox_diff_text(FILE *out, const char *a, size_t alen, const char *b,
                                               size_t blen, const char *la, const char *lb, txbox_error *err);
/* A unified diff of transaction tx's text files (a summary for others) on
 * out. */
TXBOX_API TXBOX_MUST_CHECK int txbox_diff(txbox_ws *ws, const char *tx, FILE *out, txbox_error *err);

typedef struct txbox_undo_opts {
    const char *tx; /* NULL: the latest committed transaction not undone */
    int force;      /* undo although later transactions changed the same paths */
} txbox_undo_opts;

/* Undoes a committed transaction as a new transaction, as `git revert`
 * does: what no later transaction changed comes back; what one did is
 * merged (text files, line by line) where it can be. Returns 0 (undone;
 * *json describes the undo: "changes", "merged" paths, and with force the
 * later changes it "overwritten"), 1 (refused: a conflict; *json's
 * "conflicts" names each path, why, and the transactions that changed it
 * since; nothing changed), or -1 (error; nothing changed). */
TXBOX_API TXBOX_MUST_CHECK int txbox_undo(txbox_ws *ws, const txbox_undo_opts *o, char **json,
                                          txbox_error *err);

typedef struct txbox_restore_opts {
    const char *tx;           /* the committed transaction whose before-state comes back */
    const char *const *paths; /* relative to the workspace, or absolute inside it; "." for all */
    size_t npaths;
} txbox_restore_opts;

/* Brings paths back as they were before committed transaction tx (files,
 * or whole directory trees: what tx changed at or below each path), as a
 * new transaction, which can be undone in turn. Later changes to them are
 * replaced, and said ("overwritten": path, why, the transactions). A path
 * tx did not change is refused (EINVAL), and then nothing is changed.
 * Returns 0 (*json: the result) or -1 (error; nothing changed). */
TXBOX_API TXBOX_MUST_CHECK int txbox_restore(txbox_ws *ws, const txbox_restore_opts *o, char **json,
                                             txbox_error *err);

#define TXBOX_GC_KEEP_ALL 0x7fffffffL /* txbox_gc_opts.keep: no bound on the count */
typedef struct txbox_gc_opts {
    long keep;           /* keep the pre-images of at most this many newest commits; <0: setting */
    long long max_bytes; /* and at most this many bytes of them; <0: setting */
    long long max_age;   /* seconds a commit's pre-images are kept; <0: setting */
    long long loss_age;  /* ... those of a commit that destroyed work; <0: setting */
    int dry_run;         /* say what would be freed, free nothing */
    int save;            /* store the bounds as the workspace's settings */
} txbox_gc_opts;

/* Prunes retained pre-images down to the bounds: those of commits older
 * than max_age (loss_age for a commit that destroyed work), then, newest
 * kept first and those that destroyed work before the others, what exceeds
 * keep or max_bytes; a later commit's pre-images that a kept older one
 * needs as its merge base stay with it. *json: what was freed (and kept). */
TXBOX_API TXBOX_MUST_CHECK int txbox_gc(txbox_ws *ws, const txbox_gc_opts *o, char **json, txbox_error *err);

#ifdef __cplusplus
}
#endif
#endif
