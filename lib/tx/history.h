/* The committed history (history.c): the commits of a range of
 * generations, as undo (undo.c) and diff (diff.c) read it. */
#ifndef TXBOX_HISTORY_H
#define TXBOX_HISTORY_H

#include <stdbool.h>
#include <stdint.h>

#include "store.h"
#include "tx.h"

struct commit {
    uint64_t id, gen;
    struct tx_journal j;
    uint64_t undo_of; /* 0: not an undo */
    bool forced;      /* undone with --force */
    bool copied;      /* an undo or restore that copied the pre-images (and may have merged) */
    bool cancelled;   /* history_cancel_pairs */
};

struct history {
    struct commit *v;
    size_t n;
};

void history_free(struct history *h);
/* The commit that made generation gen: its id and journal. */
MUST_CHECK int history_load_commit(txbox_ws *ws, uint64_t gen, struct commit *c, txbox_error *err);
/* The commits of generations from..to (inclusive). */
MUST_CHECK int history_load(txbox_ws *ws, uint64_t from, uint64_t to, struct history *h, txbox_error *err);
/* Marks each undo that reversed the transaction it undid exactly, and that
 * transaction, both in h: an older txbox's un-forced undo, which moved the
 * pre-images back (the pair is no change at all). */
void history_cancel_pairs(struct history *h);
/* Is transaction id undone by a commit of h from index from on: undone by
 * one that is not undone itself in turn? */
bool history_undone(const struct history *h, size_t from, uint64_t id);

#endif
