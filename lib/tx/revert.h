/* The revert of a committed transaction as a three-way merge (revert.c):
 * what undo (undo.c) and restore build, before the commit protocol applies
 * it. */
#ifndef TXBOX_REVERT_H
#define TXBOX_REVERT_H

#include <stdbool.h>
#include <stdint.h>

#include "fsops.h"
#include "history.h"
#include "store.h"
#include "tx.h"

enum revert_mode {
    REVERT_MERGE, /* undo: later changes merged where they can be; otherwise a conflict */
    REVERT_FORCE, /* undo --force: a conflict takes T's before-state (said in overwritten) */
    REVERT_EXACT, /* restore: what T changed, exactly as before T (later changes said) */
};

struct revert_req {
    txbox_ws *ws;
    const struct tx_journal *t;  /* the transaction reverted */
    int tundo;                   /* its pre-images, tx/T/undo */
    const struct history *later; /* every commit after it, in generation order */
    enum revert_mode mode;
    const char *const *paths; /* restore: only these (clean relative paths; "" = all) */
    size_t npaths;
};

struct revert;

/* Works out the revert against the workspace as it is now (the workspace
 * lock held): what comes back, what is merged, what conflicts. Nothing is
 * written. *out: the plan (revert_free), also when it has conflicts. */
MUST_CHECK int revert_plan(const struct revert_req *rq, struct revert **out, txbox_error *err);
/* Its report: conflicts [{path, why, tx, by}], merged [path], overwritten
 * [{path, why, by}], skipped [{path, why}] (borrowed: valid until
 * revert_free). */
json_t *revert_conflicts(const struct revert *r);
json_t *revert_merged(const struct revert *r);
json_t *revert_overwritten(const struct revert *r);
json_t *revert_skipped(const struct revert *r);
/* Does the plan change anything? */
bool revert_empty(const struct revert *r);
/* Writes what the plan brings back into upper (tx/U/upper: copies of the
 * pre-images, the merged files, the directories to create) and lists the
 * operations that apply it; the new data is added to pre (made durable with
 * the journal, before the commit point). The pre-images themselves are
 * copied, never moved: every commit's tx/ID/undo stays whole until gc
 * prunes it, the merge base of later reverts. */
MUST_CHECK int revert_build(struct revert *r, int upper, struct tx_ops *ops, struct fs_syncset *pre,
                            txbox_error *err);
void revert_free(struct revert *r);

#endif
