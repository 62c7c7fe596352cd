/* The operations of a transaction (tx.h: struct tx_ops) and the metadata
 * they record: made by the scan (scan.c) and the hard-link pass (links.c),
 * read by the journal, the audit log and undo. */
#include <sys/stat.h>

#include "tx.h"

void ops_free(struct tx_ops *ops)
{
    for (size_t i = 0; i < ops->n; i++)
        free(ops->v[i].path);
    free(ops->v);
    for (size_t i = 0; i < ops->n_split; i++)
        free(ops->split_links[i]);
    free(ops->split_links);
    for (size_t i = 0; i < ops->n_news; i++)
        free(ops->news[i].path);
    free(ops->news);
    memset(ops, 0, sizeof *ops);
}

const struct tx_new *ops_news(const struct tx_ops *ops, const struct tx_op *o, size_t *n)
{
    *n = 0;
    if (o->kind != OP_REPLACE || !o->news_n || (size_t)o->news_first + o->news_n > ops->n_news ||
        strcmp(ops->news[o->news_first].path, o->path))
        return NULL;
    *n = o->news_n;
    return &ops->news[o->news_first];
}

struct tx_op *op_add(struct tx_ops *ops, uint8_t kind, const char *path)
{
    if (ops->n == ops->cap) {
        ops->cap = ops->cap ? ops->cap * 2 : 32;
        ops->v = xrealloc(ops->v, ops->cap * sizeof *ops->v);
    }
    struct tx_op *o = &ops->v[ops->n++];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->path = xstrdup(path);
    return o;
}

void meta_of(const struct stat *st, struct tx_meta *m)
{
    m->mode = st->st_mode & 07777;
    m->uid = st->st_uid;
    m->gid = st->st_gid;
    m->atime_s = st->st_atim.tv_sec;
    m->atime_ns = st->st_atim.tv_nsec;
    m->mtime_s = st->st_mtim.tv_sec;
    m->mtime_ns = st->st_mtim.tv_nsec;
}

void meta_entry(const struct stat *st, struct tx_meta *m)
{
    meta_of(st, m);
    m->mode |= st->st_mode & S_IFMT;
}
