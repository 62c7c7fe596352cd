/* The after state of a path, from a transaction's operations (scan.c's
 * reading of its upper): where the entry lives once the commit is applied,
 * and what a directory then holds. A DELETE removes the entry and
 * everything below; a REPLACE by a directory brings the upper's whole
 * subtree (opaque); a META directory merges the upper's entries (each its
 * own operation) with the workspace's. */
#include <fcntl.h>
#include <sys/stat.h>

#include "losses_int.h"
#include "safepath.h"

void lnames_push(struct lnames *l, char *s)
{
    if (l->n + 1 >= l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = s;
    l->v[l->n] = NULL;
}

void lnames_free(struct lnames *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int by_path(const void *a, const void *b, void *ops)
{
    const struct tx_ops *o = ops;
    return strcmp(o->v[*(const size_t *)a].path, o->v[*(const size_t *)b].path);
}

void lview_init(struct lview *v, const struct tx_ops *ops)
{
    v->ops = ops;
    v->n = ops->n;
    v->ord = xcalloc(ops->n ? ops->n : 1, sizeof *v->ord);
    for (size_t i = 0; i < ops->n; i++)
        v->ord[i] = i;
    qsort_r(v->ord, ops->n, sizeof *v->ord, by_path, (void *)ops);
}

void lview_free(struct lview *v)
{
    free(v->ord);
    memset(v, 0, sizeof *v);
}

size_t losses_lower(size_t n, const char *(*at)(const void *ctx, size_t i), const void *ctx, const char *key,
                    size_t kn)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *p = at(ctx, mid);
        size_t pl = strlen(p);
        int c = memcmp(p, key, pl < kn ? pl : kn);
        if (c < 0 || (c == 0 && pl < kn))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static const char *op_path_at(const void *ctx, size_t i)
{
    const struct lview *v = ctx;
    return v->ops->v[v->ord[i]].path;
}

static size_t lower(const struct lview *v, const char *key, size_t n)
{
    return losses_lower(v->n, op_path_at, v, key, n);
}

const struct tx_op *lview_op(const struct lview *v, const char *path, size_t n)
{
    size_t i = lower(v, path, n);
    if (i < v->n) {
        const struct tx_op *o = &v->ops->v[v->ord[i]];
        if (strlen(o->path) == n && !memcmp(o->path, path, n))
            return o;
    }
    return NULL;
}

int lview_where(const struct lview *v, const char *path)
{
    size_t len = strlen(path);
    for (size_t end = 0;; end++) {
        /* each prefix: "", then up to each '/', then the path */
        if (end == 0 || end == len || path[end] == '/') {
            size_t pl = end;
            const struct tx_op *o = lview_op(v, path, pl);
            if (o && o->kind == OP_DELETE)
                return LV_GONE;
            if (o && o->kind == OP_REPLACE) {
                if (pl == len)
                    return LV_UPPER;
                return o->new_dir ? LV_UPPER : LV_GONE;
            }
        }
        if (end >= len)
            break;
    }
    return LV_WS;
}

bool lview_under(const struct lview *v, const char *dir, unsigned *mask)
{
    size_t n = strlen(dir);
    *mask = 0;
    for (size_t i = lower(v, dir, n); i < v->n; i++) {
        const struct tx_op *o = &v->ops->v[v->ord[i]];
        if (strncmp(o->path, dir, n) || (n && o->path[n] && o->path[n] != '/'))
            break;
        *mask |= 1u << o->kind;
    }
    return *mask != 0;
}

static void list_dir(int at, const char *dir, struct lnames *out, size_t max, bool *more, bool upper)
{
    _cleanup_close_ int fd = *dir ? safe_openat(at, dir, O_RDONLY | O_DIRECTORY, 0)
                                  : openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    DIR *d = fdopendir(fd);
    if (!d)
        return;
    fd = -1;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (upper && de->d_type == DT_CHR)
            continue; /* a whiteout */
        if (out->n >= max) {
            *more = true;
            break;
        }
        lnames_push(out, xstrdup(de->d_name));
    }
    closedir(d);
}

void lview_list(const struct lview *v, int wsfd, int upperfd, const char *dir, struct lnames *out, size_t max,
                bool *more)
{
    int w = lview_where(v, dir);
    if (w == LV_GONE)
        return;
    if (w == LV_UPPER) {
        list_dir(upperfd, dir, out, max, more, true);
        return;
    }
    struct lnames ws = {0};
    list_dir(wsfd, dir, &ws, max, more, false);
    size_t dl = strlen(dir);
    for (size_t i = 0; i < ws.n; i++) {
        _cleanup_free_ char *p = dl ? xasprintf("%s/%s", dir, ws.v[i]) : xstrdup(ws.v[i]);
        const struct tx_op *o = lview_op(v, p, strlen(p));
        if (o && o->kind == OP_DELETE)
            continue;
        lnames_push(out, steal_pointer(&ws.v[i]));
    }
    lnames_free(&ws);
    /* the entries the commit adds here */
    _cleanup_free_ char *pre = dl ? xasprintf("%s/", dir) : xstrdup("");
    size_t pn = strlen(pre);
    for (size_t i = lower(v, pre, pn); i < v->n; i++) {
        const struct tx_op *o = &v->ops->v[v->ord[i]];
        if (strncmp(o->path, pre, pn))
            break;
        const char *rest = o->path + pn;
        if (!*rest || strchr(rest, '/') || o->kind != OP_REPLACE || o->had_old)
            continue;
        if (out->n >= max) {
            *more = true;
            break;
        }
        lnames_push(out, xstrdup(rest));
    }
}
