/* The commit sequence: the one path by which a write set reaches the
 * workspace, whoever commits it (a run, a multi-command transaction's
 * commit, an approve, an undo) and recovery's finish of a commit that a
 * crash interrupted after its commit point. See commit.c for the steps. */
#ifndef TXBOX_COMMIT_H
#define TXBOX_COMMIT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "fsops.h"
#include "tx.h"

/* How many paths a result's change list names at most (the counts are
 * always whole: changes.counts). */
#define TX_CHANGES_CAP 10000

/* How a commit ended when commit_run returned 0. */
enum commit_end {
    COMMIT_APPLIED = 1, /* committed: c->gen */
    COMMIT_EMPTY,       /* committed: nothing to apply (no journal; the caller logs it) */
    COMMIT_CONFLICT,    /* a later commit or a stuck one holds a path: c->clash, c->held_by */
    COMMIT_DECIDED,     /* a step hook (the rules on effects) decided: nothing applied */
    COMMIT_WRITE_LIMIT, /* a file reached the write limit: nothing applied */
    COMMIT_NO_SPACE,    /* it would leave less free space than the floor: c->space */
};

struct tx_commit;

/* What a caller adds to the sequence; every hook may be NULL. ctx is theirs. */
struct commit_hooks {
    /* Under the workspace lock, after the roll forward: makes the write set
     * (tx/ID/upper, and c->ops when the sequence does not scan; it may set
     * c->id, c->txfd, c->base_gen): a multi-command transaction renames its
     * layer, an undo plans and stages its pre-images. 0; 1: nothing to
     * commit, decided (c->end is COMMIT_DECIDED); <0: error. */
    int (*prepare)(struct tx_commit *c, txbox_error *err);
    /* The rules on effects, once the write set is known and no conflict
     * stops it: 0 commit; 1 decided (held or rejected: c->end is
     * COMMIT_DECIDED, nothing applied); <0 error. */
    int (*judge)(struct tx_commit *c, txbox_error *err);
    /* The audit log's record of the commit (a JSON object string, malloc'd;
     * NULL: none), asked for once c->changes is known. */
    char *(*info)(struct tx_commit *c);
    /* The commit ended (rc 0: as c->end; <0: an error, c->passed if after
     * its commit point), the workspace lock still held: the caller records
     * the end and, when it stopped before its commit point, gives back
     * what prepare took. */
    void (*finish)(struct tx_commit *c, int rc, txbox_error *err);
    void *ctx;
};

/* The free space a commit was measured against (COMMIT_NO_SPACE). */
struct commit_space {
    uint64_t free_bytes; /* free for unprivileged users now, the write set's data counted */
    uint64_t floor;      /* the floor (tx_space_floor) */
    uint64_t need;       /* what the commit writes after its commit point */
};

struct tx_commit {
    /* ---- the caller's ---- */
    txbox_ws *ws;
    uint64_t id;
    int txfd;            /* tx/ID */
    int upperfd;         /* the write set (tx/ID/upper); -1: opened after prepare */
    uint64_t base_gen;   /* what the write set was made against */
    bool scan;           /* the sequence scans the upper into ops (else ops is the caller's) */
    bool own;            /* no process owns the transaction (multi, held): registered meanwhile */
    bool all_clashes;    /* list every conflicting path in c->clashes, not only the first */
    bool keeps_no_data;  /* an undo: moves retained entries back, brings no new data */
    bool keep_upper;     /* after the commit the caller discards tx/ID/upper itself (run: the trash) */
    bool leave_open;     /* the journal left open once applied (JOURNAL_LEAVE_OPEN): recovery closes it */
    uint64_t file_limit; /* the file size limit the command ran under (0: none) */
    int64_t min_free;    /* the floor: <0 the default (tx_space_floor), 0 none, else bytes */
    const volatile int *cancel; /* a wait for the lock ends when it is set */
    struct tx_ops ops;
    struct fs_syncset durable; /* the scan's new data, durable with the journal (or a hold) */
    const struct commit_hooks *h;
    /* ---- the sequence's ---- */
    char ids[32];
    enum commit_end end;
    char *clash;      /* COMMIT_CONFLICT: the first path */
    json_t *clashes;  /* with all_clashes: every path */
    uint64_t held_by; /* COMMIT_CONFLICT: the stuck transaction that holds it (0: a later commit) */
    json_t *changes;  /* the paths added, modified, deleted (TX_CHANGES_CAP), with counts */
    struct commit_space space;
    uint64_t gen;   /* the generation read under the lock; after COMMIT_APPLIED, the commit's */
    bool passed;    /* commit_run failed after the commit point: recovery finishes it */
    bool prepared;  /* prepare ran */
    bool left_open; /* COMMIT_APPLIED with leave_open: journal/ID and tx/ID's scratch stay for recovery */
    int lockfd, activefd;
};

/* Runs the sequence (commit.c): lock, roll forward, prepare, scan, limit,
 * conflicts, effects, prechecks, floor, journal, apply, audit row. 0: it
 * ended as c->end; <0: an error (nothing applied unless c->passed). The
 * workspace lock is released before it returns. */
MUST_CHECK int commit_run(struct tx_commit *c, txbox_error *err);
/* What commit_run left in c (ops, changes, clashes, durable). */
void commit_free(struct tx_commit *c);

/* The free-space floor of a filesystem (bytes), as min_free says (<0: the
 * default, TXBOX_MIN_FREE or 5% of the filesystem within [256 MiB, 4 GiB]
 * and at most a quarter of it; 0: none). */
uint64_t tx_space_floor(int fd, int64_t min_free);
/* TXBOX_MIN_FREE read: bytes, or -1 when unset; -2 with err when it is not
 * a size ("512M", "2G", "0") or a percentage ("5%"). */
int64_t tx_min_free_env(uint64_t fs_bytes, txbox_error *err);

/* Recovery's finish (txbox_recover, and every commit under its lock before
 * it reads the generation): each journal whose owner died is rolled
 * forward, or back from its pre-images (I8), or held (I9). */
MUST_CHECK int commit_roll_forward(txbox_ws *ws, bool wait, bool retry, json_t *rolled_forward,
                                   json_t *rolled_back, json_t *failed, txbox_error *held, txbox_error *err);
/* A dead transaction without a journal ends (recovery): rolled back (0),
 * or, for one that outlives its processes and was only being committed (a
 * multi-command transaction still open, a held one), left as it was for
 * its next commit (1). */
MUST_CHECK int commit_end_dead(txbox_ws *ws, uint64_t id, int txfd, const char *outcome, txbox_error *err);
/* What a transaction keeps only until it ends: removed once it committed
 * (the sequence; recovery), with upper/ and work/ unless keep_upper. */
void commit_tidy(int txfd, bool keep_upper);
/* After a judge marked ops quiet (losses.c: an index only refreshed),
 * c->changes listed again without them; true when it was. */
bool commit_relist_changes(struct tx_commit *c);
/* commit_tidy of a transaction whose owner died, with what a session's
 * background processes had (live/, survivors.rec). */
void commit_tidy_dead(int txfd);
/* Committed transactions (a closed journal, tx/ID/journal) that still
 * hold a multi-command layer's copies as hard links of workspace files
 * (layer.keep, sp, lwork: a crash or a power loss after the journal closed,
 * before the transaction's own clean-up was durable, or a version that left
 * them): removed, under the workspace lock (taken unless locked). */
MUST_CHECK int commit_tidy_closed(txbox_ws *ws, bool locked, txbox_error *err);
/* Was a recovery's attempt on id held (tx/ID/stuck)? */
bool commit_is_stuck(txbox_ws *ws, uint64_t id);

#endif
