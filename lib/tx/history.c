/* The committed history: the commit that made each generation (its id,
 * journal, and whether it undid another), read by undo and restore (undo.c,
 * revert.c: what came after the transaction they revert) and diff
 * (diff.c). */
#include "history.h"
#include "stage.h"

void history_free(struct history *h)
{
    for (size_t i = 0; i < h->n; i++)
        journal_free(&h->v[i].j);
    free(h->v);
    memset(h, 0, sizeof *h);
}

/* The commit that made generation gen: its id and journal. */
int history_load_commit(txbox_ws *ws, uint64_t gen, struct commit *c, txbox_error *err)
{
    memset(c, 0, sizeof *c);
    char gn[32], t[32];
    idname(gn, gen);
    ssize_t l = readlinkat(ws->cmtd, gn, t, sizeof t - 1);
    if (l < 0)
        return tx_errno(err, errno, "cannot read the record of generation %s", gn);
    t[l] = 0;
    if (!parse_u64(t, &c->id))
        return tx_err(err, EBADMSG, "the record of generation %s is damaged", gn);
    c->gen = gen;
    _cleanup_close_ int tfd = open_dir_at(ws->txd, t);
    if (tfd < 0)
        return tx_errno(err, errno, "transaction %s (generation %s) is gone", t, gn);
    if (journal_load(tfd, "journal", &c->j, err) < 0)
        return tx_err_ctx(err, "transaction %s", t);
    json_t *in = c->j.info ? json_loads(c->j.info, 0, NULL) : NULL;
    const char *uo = json_string_value(json_object_get(in, "undo_of"));
    if (uo && !parse_u64(uo, &c->undo_of))
        c->undo_of = 0;
    c->forced = json_is_true(json_object_get(in, "forced"));
    c->copied = json_object_get(in, "revert") != NULL;
    json_decref(in);
    return 0;
}

/* The commits of generations from..to (inclusive). */
int history_load(txbox_ws *ws, uint64_t from, uint64_t to, struct history *h, txbox_error *err)
{
    memset(h, 0, sizeof *h);
    if (to < from)
        return 0;
    h->v = xcalloc((size_t)(to - from + 1), sizeof *h->v);
    for (uint64_t g = from; g <= to; g++) {
        if (history_load_commit(ws, g, &h->v[h->n], err) < 0) {
            history_free(h);
            return -1;
        }
        h->n++;
    }
    return 0;
}

/* Marks each old un-forced undo and the transaction it undid, both in h. */
void history_cancel_pairs(struct history *h)
{
    for (size_t i = h->n; i-- > 0;) {
        struct commit *u = &h->v[i];
        if (!u->undo_of || u->forced || u->copied || u->cancelled)
            continue;
        for (size_t k = 0; k < i; k++)
            if (h->v[k].id == u->undo_of && !h->v[k].cancelled) {
                h->v[k].cancelled = u->cancelled = true;
                break;
            }
    }
}

bool history_undone(const struct history *h, size_t from, uint64_t id)
{
    for (size_t i = from; i < h->n; i++)
        if (h->v[i].undo_of == id && !history_undone(h, i + 1, h->v[i].id))
            return true;
    return false;
}
