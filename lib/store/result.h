/* The result of one transaction (the object behind txbox_result). */
#ifndef TXBOX_RESULT_H
#define TXBOX_RESULT_H

#include <jansson.h>

#include "util.h"

struct txbox_result {
    uint64_t id;
    char txs[32];
    txbox_outcome outcome;
    int exit_code, signal;
    bool timed_out;
    bool write_limit, oom; /* stopped by the write-set cap / memory limit */
    bool pids_limit;       /* a fork refused at the process limit: never committed */
    bool commit_point_passed;
    uint64_t gen;    /* committed: the generation this commit made */
    bool logged;     /* the commit protocol wrote the audit log row */
    char *log_error; /* the audit log could not be written (the outcome stands) */
    const char *backend;
    char *fallback;                   /* why another backend was used, or NULL */
    char *conflict_path;              /* a path a concurrent commit also wrote, */
    uint64_t held_by;                 /* or that this stuck transaction holds (journal.c, I9) */
    uint64_t space_free, space_floor; /* no_space: the free space it would have left, the floor */
    json_t *changes;                  /* {added, modified, deleted, truncated} */
    json_t *protections;
    dbuf out, err; /* captured output (capped) */
    double started, duration_ms, cmd_ms, overhead_ms;
    /* policy */
    char *verdict, *rule, *reason, *suggestion;
    char *hint; /* why a command failed where it would not plainly (a sandbox limit) */
    /* external effects (saga.c): {effects: [...], needs_attention: N}, or NULL */
    json_t *effects;
    bool tee;    /* captured output is also written through to stdout/stderr */
    int tee_fd;  /* > 0: captured output is also copied there (txbox_run_opts.tee_fd) */
    char *shell; /* the shell that ran a shell string, or NULL */
    /* rules on effects (effects.c): the verdict that rejected or held it */
    json_t *effect_verdict;
    /* the network in force: {"mode": "none"|"host"} or the proxy's report
     * (np_stop: mode, allowed, contacted, refused) */
    json_t *network;
    /* attention rules on effects: [{effect_rule, reason, paths}], or NULL */
    json_t *attention;
    /* what the commit destroys that exists nowhere else (lib/tx/losses.h):
     * {count, bytes, truncated, items: [{kind, path, bytes, detail}]}, or
     * NULL: nothing judged, nothing lost */
    json_t *losses;
    /* sessions: the session's id (or NULL), what was written outside the
     * workspace that does not persist ({count, paths, truncated}, or NULL:
     * not known), the directory the shell ended in (or NULL), and the late
     * transactions of the session's background processes committed or
     * rolled back before this command (an array, or NULL) */
    char *session;
    int session_started; /* txbox_session_started: 1 new, 2 in place of one that had ended */
    json_t *discarded;
    char *cwd_after;
    json_t *late;
    json_t *background; /* in a session: the processes the command left running, or NULL */
};

/* The result as the JSON object txbox_result_json prints (a new reference). */
json_t *result_obj(const txbox_result *r);

txbox_result *result_new(void);
/* A JSON string of n bytes: valid UTF-8 is kept; any other byte becomes
 * U+FFFD, or with hex the four characters \xNN (for file names; a backslash
 * then becomes \x5c as well, so that no two names read the same). */
json_t *json_text(const char *s, size_t n, bool hex);
/* The bytes json_text(..., true) encoded as the n characters s: a new
 * NUL-terminated string, or NULL for text it cannot have made (a
 * backslash not starting \xNN, a NUL). */
char *json_text_bytes(const char *s, size_t n);
void result_free(txbox_result *r);
/* How many paths a change list (ops_changes) says were added, modified,
 * deleted: its counts, or (a list without them: older records) its
 * arrays' lengths. */
void changes_counts(const json_t *changes, size_t *added, size_t *modified, size_t *deleted);

/* "; destroyed uncommitted changes to 3 files (4.2 KiB): a.py, b.py, c.py",
 * one phrase per kind of what a commit destroyed (losses: the `losses`
 * object), appended to o: the status lines' facts. */
void result_losses_phrase(const json_t *losses, dbuf *o);

#endif
