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
    bool forced, cancelled;
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
/* Marks each un-forced undo and the transaction it undid, both in h. */
void history_cancel_pairs(struct history *h);

#endif
