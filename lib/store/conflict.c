/* The conflict checks of a commit: did a transaction committed since ours
 * began write one of our paths (ops_overlap over their journals)? The loop
 * over those journals (tx_each_later) serves both checks: the first clash
 * (tx_check_conflict: run.c, held.c) and every clashing path (multi.c's
 * commit). In a file of its own, below the files that commit. */
#include "store.h"
#include "tx.h"

int tx_each_later(txbox_ws *ws, uint64_t base_gen, uint64_t gen, tx_later_fn each, void *ctx,
                  txbox_error *err)
{
    for (uint64_t g = base_gen + 1; g <= gen; g++) {
        char idn[32];
        struct tx_journal j;
        int lr = journal_load_gen(ws, g, &j, idn, err);
        if (lr < 0)
            return -1;
        int rc = each(ctx, idn, lr > 0 ? NULL : &j);
        if (lr == 0)
            journal_free(&j);
        if (rc)
            return rc;
    }
    return 0;
}

struct first_clash {
    const struct tx_ops *ops;
    char **path;
};

static int first_clash(void *ctx, const char *idn, const struct tx_journal *j)
{
    struct first_clash *c = ctx;
    if (!j) {
        /* Its record is gone (pruned): assume the worst. */
        *c->path = xasprintf("(unknown: the record of transaction %s is gone)", idn);
        return 1;
    }
    const char *which = NULL;
    if (!ops_overlap(c->ops, &j->ops, &which))
        return 0;
    *c->path = xstrdup(*which ? which : ".");
    return 1;
}

/* Did the transactions committed since base_gen write any of our paths? */
int tx_check_conflict(txbox_ws *ws, uint64_t base_gen, uint64_t gen, const struct tx_ops *ops, char **path,
                      txbox_error *err)
{
    struct first_clash c = {ops, path};
    return tx_each_later(ws, base_gen, gen, first_clash, &c, err);
}
