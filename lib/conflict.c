/* The conflict check of a commit: did a transaction committed since ours
 * began write one of our paths (ops_overlap over their journals)? In a
 * file of its own, below the files that commit (run.c, held.c), which all
 * ask it. */
#include "store.h"
#include "tx.h"

/* Did the transactions committed since base_gen write any of our paths? */
int tx_check_conflict(txbox_ws *ws, uint64_t base_gen, uint64_t gen, const struct tx_ops *ops,
                      char **path, txbox_error *err)
{
    for (uint64_t g = base_gen + 1; g <= gen; g++) {
        char idn[32];
        struct tx_journal j;
        int lr = journal_load_gen(ws, g, &j, idn, err);
        if (lr < 0)
            return -1;
        if (lr > 0) {
            /* Its record is gone (pruned): assume the worst. */
            *path = xasprintf("(unknown: the record of transaction %s is gone)", idn);
            return 1;
        }
        const char *which = NULL;
        bool clash = ops_overlap(ops, &j.ops, &which);
        if (clash)
            *path = xstrdup(*which ? which : ".");
        journal_free(&j);
        if (clash)
            return 1;
    }
    return 0;
}
