/* Losses: what a commit destroys that exists nowhere else (docs/guarantees.md,
 * "Losses"). Given the workspace (the before state), a transaction's scanned
 * upper and its operations (the after state: the upper over the
 * workspace), losses_measure() says what the commit would destroy, by kind
 * (policy/effect_rules.h, EFF_LOSS_*): uncommitted and untracked work,
 * staged changes, stash entries, commits (history, branches), whole
 * repositories, databases. The rules on effects with `losses:` judge it
 * (effects.c); the result, the audit log and `txbox show` carry it.
 *
 * The parts: losses.c (the write set read as what it destroys, files,
 * databases, the report), losses_index.c (git's index, read directly),
 * losses_git.c (the history, stashes, trees, ignore rules: libgit2 in a
 * confined child process), losses_view.c (the after state of a path). */
#ifndef TXBOX_LOSSES_H
#define TXBOX_LOSSES_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "policy/effect_rules.h"
#include "policy/pol.h"
#include "tx.h"

/* One loss. */
struct loss_item {
    int kind;   /* EFF_LOSS_* */
    char *path; /* a workspace path; a ref, stash@{N} or git directory for git's kinds */
    uint64_t bytes;
    char *detail;     /* one line: what was lost, or why it could not be verified */
    bool unverified;  /* could not be checked within the caps: counted as lost (fail closed) */
    uint64_t commits; /* history, branch: how many commits */
    /* the destroyed content's last writer, when a txbox transaction wrote
     * it (0: unknown), and whether it is the agent's own work (struct
     * effect_loss) of age_s seconds ago */
    uint64_t written_by;
    bool own;
    double age_s;
};

#define LOSSES_ITEMS_KEPT 10000 /* items kept for the rules; the rest counted */
#define LOSSES_ITEMS_SHOWN 100  /* items in the JSON report */

struct losses {
    struct loss_item *v;
    size_t n, cap;
    uint64_t count, bytes;  /* over every item, kept or not */
    bool truncated;         /* items were counted but not kept */
    unsigned dropped_kinds; /* kinds of the items not kept (counted as a person's work) */
};

struct losses_in {
    txbox_ws *ws;
    int txfd; /* .txbox/tx/ID: scratch for git's view of the after state */
    const char *txs;
    int upperfd;        /* the scanned upper */
    struct tx_ops *ops; /* an index file whose rewrite changed no entry (git status
                           refreshing its stat cache) is marked quiet: no change */
    double now;         /* wall time, for the age of the agent's own work */
    /* the policy whose `secrets:` name files no build makes again (.env,
     * keys, terraform state): lost even where git ignores them (NULL:
     * none such) */
    const txbox_policy *pol;
    /* Called (when set) before git's reading forks its child: ends the
     * caller's other threads, so that none holds a lock the child's copy
     * of the process would wait on forever (an allocator's: a fork in a
     * threaded process copies only the forking thread). */
    void (*quiesce)(void *ctx);
    void *quiesce_ctx;
    /* Called (when set) first, for what needs no view of a change of git
     * (losses_git.c, "warm"): question q to a session's warm reader, its
     * answer in *ans (the caller's). 0: answered; -1: nobody to ask (a
     * child of its own instead); -2: no answer in timeout_ms. */
    int (*git_ask)(void *ctx, json_t *q, json_t **ans, int timeout_ms);
    void *git_ask_ctx;
};

/* Measures what the commit of in->ops destroys into *out (zeroed first).
 * Never fails the commit on what it cannot read: that is an unverified
 * item (fail closed); <0 only when txbox itself failed (then *out is
 * empty). The workspace lock is held. */
MUST_CHECK int losses_measure(const struct losses_in *in, struct losses *out, txbox_error *err);
/* The commit's step: losses_measure with the fault points off (they are
 * the protocol's; this only reads, the audit log too), its report in
 * r->losses. */
MUST_CHECK int losses_of_commit(const struct losses_in *in, struct txbox_result *r, struct losses *out,
                                txbox_error *err);
/* A session's warm reader of git (its steward's child, session.c, which
 * ties its life to the steward's before the call): libgit2
 * loaded and started ahead, confined to reading ws_path; it accepts
 * connections on lsock, each one question (losses_in.git_ask's), answered
 * there; exits 0 after a number of them, 4 when libgit2 cannot start. */
__attribute__((noreturn)) void losses_git_warm(int lsock, const char *ws_path);

/* The report: {"count", "bytes", "truncated", "items": [{"kind", "path",
 * "bytes", "detail", ...}]} (at most LOSSES_ITEMS_SHOWN items). NULL l:
 * nothing lost. */
json_t *losses_json(const struct losses *l);
/* Feeds every item to a judge (the rules with `losses:`). */
void losses_feed(const struct losses *l, struct effect_judge *j);
void losses_free(struct losses *l);

/* ---- internal: shared by the parts ---- */

/* Adds an item (path and detail copied; detail may be NULL). */
struct loss_item *losses_add(struct losses *l, int kind, const char *path, uint64_t bytes,
                             const char *detail);

/* git's index (losses_index.c): the entries of an index file, read
 * directly (no git, no libgit2): versions 2 to 4, SHA-1. */
struct gix_entry {
    const char *path; /* NUL-terminated */
    uint32_t ctime_s, ctime_ns, mtime_s, mtime_ns, dev, ino, mode, uid, gid, size;
    unsigned char oid[20];
    uint16_t flags;  /* stage in bits 12-13 */
    uint16_t xflags; /* skip-worktree, intent-to-add */
};
struct gix {
    struct gix_entry *v;
    size_t n;
    char *names; /* the paths' storage (version 4), or NULL */
    char *buf;   /* the file */
    size_t len;
    int64_t mtime_s, mtime_ns; /* the index file's own */
};
#define GIX_MAX_BYTES (256u << 20)
#define GIX_MAX_ENTRIES 2000000
/* Parses buf (len bytes; taken: freed by gix_free). 0, or -1 with *why (a
 * static string). */
int gix_parse(struct gix *x, char *buf, size_t len, const char **why);
/* Reads and parses the index at dfd/name: 0; 1: there is none; -1 with
 * *why. */
int gix_load(struct gix *x, int dfd, const char *name, const char **why);
/* The stage-0 entry of path (n bytes), or the first of its stages when it
 * has no stage 0; NULL: not in the index. */
const struct gix_entry *gix_find(const struct gix *x, const char *path, size_t n);
/* The index of the first entry at or after path prefix (n bytes). */
size_t gix_lower(const struct gix *x, const char *prefix, size_t n);
/* Same entries (paths, modes, blob ids, stages and flags)? */
bool gix_same_entries(const struct gix *a, const struct gix *b);
void gix_free(struct gix *x);
/* A digest of what gix_same_entries compares, as 40 hex digits: two indexes
 * with the same entries have the same digest. */
void gix_entries_digest(const struct gix *x, char hex[41]);
/* tx/ID/LOSSES_INDEX_RECORD: one line per git index the transaction left
 * ("DIGEST PATH"), so that an undo can tell a later rewrite that only
 * refreshed it (a `git status` on the host) from a change of what is
 * staged. */
#define LOSSES_INDEX_RECORD "gitindex"
/* git's blob id of n bytes: SHA-1 of "blob N\0" and them. */
void gix_blob_oid(const void *data, size_t n, unsigned char oid[20]);
/* Does a pack's index (gitformat-pack(5), version 2: buf, len bytes,
 * untrusted) list the object id? One too short for what it claims, or of
 * another version, lists none. */
bool gix_pack_has(const unsigned char *buf, size_t len, const unsigned char id[20]);

/* A database file other than SQLite's (whose pages are judged instead),
 * by the first n bytes of it (d; 100 are enough): its kind ("DuckDB",
 * "LMDB", "Berkeley DB", "Redis", "H2", "Microsoft Access", "Realm"), or
 * NULL. Workspace content: never read past n. Deleted or emptied, such a
 * file is a loss; any other rewrite is its engine's use. */
const char *losses_db_kind(const char *d, size_t n);

#endif
