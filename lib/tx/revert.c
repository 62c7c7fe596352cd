/* Reverting a committed transaction T as a three-way merge, like
 * `git revert`: what undo and restore (undo.c) bring back.
 *
 * For every path T changed there are three states:
 *
 *   theirs  T's before-state: its pre-image, tx/T/undo/N (absent when T
 *           created the path)
 *   base    T's after-state: what T left there
 *   ours    the workspace now
 *
 * and the result, as git merges trees, path by path:
 *
 *   ours == base            theirs (no later change: the plain revert)
 *   theirs == base          ours (T did not change it after all)
 *   ours == theirs          ours (reverted already)
 *   otherwise               regular files of text on all three sides are
 *                           merged line by line (libgit2's git_merge_file,
 *                           on buffers: no repository, no configuration);
 *                           anything else is a conflict, said with the
 *                           transactions that changed the path since.
 *
 * A node's leaf (file, symlink, FIFO) and its directory are merged apart,
 * as git keeps a file and a tree apart: T deleted a directory and a later
 * transaction made a new one there -> each entry merged on its own; a file
 * and a directory left at one path is a conflict. A directory stays while
 * any entry in it stays. A regular file's permission bits merge like any
 * scalar (both changed them otherwise: a conflict); a directory's keep the
 * later ones when both changed them.
 *
 * The base is found, never stored: the first commit after T to change a
 * path (the same path, one above it, one below it) kept, as its pre-image,
 * exactly what T left there. No later commit: the workspace is the base
 * (for T's own operation paths checked against what T's journal recorded:
 * type, mode and mtime; another value means a change made outside txbox,
 * and then the base is unknown). The later commits' operations are indexed
 * by path (struct lindex: sorted, binary search). A pair of an old undo
 * (one that moved the pre-images) and the transaction it undid cancels out
 * (history_cancel_pairs) and is left out. Every pre-image this needs must
 * still be there: gc keeps them (gc.c); a pruned one leaves the base
 * unknown, which is a conflict unless ours == theirs.
 *
 * Modes: REVERT_MERGE refuses the whole revert on any conflict (nothing
 * written); REVERT_FORCE takes theirs where it conflicts and says what of
 * the later changes it overwrote; REVERT_EXACT (restore) takes theirs
 * wherever T changed something, merging nothing, and says the same.
 *
 * The plan is a result tree per operation of T (struct rnode), then a list
 * of actions (struct act) against the workspace: put a copy of an entry,
 * write a merged file, make a directory, delete, set a directory's
 * metadata. revert_build writes them into the new transaction's upper and
 * lists its operations (REPLACE, DELETE, META), for the commit protocol. A
 * path whose directory is gone is a conflict; forced or restored, the
 * directories are made again (the base's, or new ones). */
#include <fcntl.h>
#include <sys/stat.h>

#include "fsops.h"
#include "losses.h"
#include "merge3.h"
#include "result.h"
#include "revert.h"
#include "safepath.h"
#include "stage.h"

#define MERGE_MAX (16u << 20)   /* a text merged: each side at most */
#define MERGED_MAX (256u << 20) /* the merged texts one revert holds, in all */
#define BINARY_PROBE 8000       /* git's test: a NUL in the first 8000 bytes */
#define MAX_DEPTH 4096

/* ---- the later commits' operations, by path ---- */

struct lop {
    const char *path; /* borrowed from the history */
    size_t c;         /* the commit: its index in later */
    size_t op;        /* its operation */
};

struct lindex {
    struct lop *v; /* REPLACE and DELETE, sorted by path, then commit */
    size_t n;
    struct lop *m; /* META, the same way */
    size_t nm;
};

static int lop_cmp(const void *a, const void *b)
{
    const struct lop *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    return c ? c : (x->c > y->c) - (x->c < y->c);
}

static void lindex_build(struct lindex *ix, const struct history *h)
{
    memset(ix, 0, sizeof *ix);
    size_t total = 0;
    for (size_t c = 0; c < h->n; c++)
        total += h->v[c].j.ops.n;
    ix->v = xcalloc(total + 1, sizeof *ix->v);
    ix->m = xcalloc(total + 1, sizeof *ix->m);
    for (size_t c = 0; c < h->n; c++) {
        if (h->v[c].cancelled)
            continue; /* an old undo and what it undid: no change in all */
        for (size_t k = 0; k < h->v[c].j.ops.n; k++) {
            const struct tx_op *o = &h->v[c].j.ops.v[k];
            struct lop l = {o->path, c, k};
            if (o->kind == OP_META)
                ix->m[ix->nm++] = l;
            else
                ix->v[ix->n++] = l;
        }
    }
    qsort(ix->v, ix->n, sizeof *ix->v, lop_cmp);
    qsort(ix->m, ix->nm, sizeof *ix->m, lop_cmp);
}

/* The first entry whose path is >= key (byte order). */
static size_t lower_bound(const struct lop *v, size_t n, const char *key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(v[mid].path, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The entry with path key from the earliest commit, or n. */
static size_t first_at(const struct lop *v, size_t n, const char *key)
{
    size_t i = lower_bound(v, n, key);
    return i < n && !strcmp(v[i].path, key) ? i : n;
}

static bool under(const char *path, const char *dir, size_t dlen)
{
    return !dlen || (!strncmp(path, dir, dlen) && path[dlen] == '/');
}

/* ---- the three sides ---- */

enum sk {
    SK_ABSENT,
    SK_REAL,    /* an entry: root/rel */
    SK_SAME,    /* base only: what ours is */
    SK_VIRT,    /* base only: a directory, its entries found one by one */
    SK_UNKNOWN, /* base only: not known (why) */
    SK_UNREAD,  /* ours only: a directory on its way has no search permission for us */
};

struct side {
    enum sk k;
    int root;        /* SK_REAL: the tree (borrowed) */
    char *rel;       /* SK_REAL: the entry under it */
    struct stat st;  /* SK_REAL */
    const char *why; /* SK_UNKNOWN (borrowed from the plan) */
};

static void side_free(struct side *s)
{
    free(s->rel);
    s->rel = NULL;
}

static struct side side_copy(const struct side *s)
{
    struct side c = *s;
    c.rel = s->rel ? xstrdup(s->rel) : NULL;
    return c;
}

static bool is_dir(const struct side *s)
{
    return (s->k == SK_REAL && S_ISDIR(s->st.st_mode)) || s->k == SK_VIRT;
}

static bool is_leaf(const struct side *s) { return s->k == SK_REAL && !S_ISDIR(s->st.st_mode); }

/* ---- the plan ---- */

enum rk { R_KEEP, R_ABSENT, R_TAKE, R_WRITE, R_DIR };

/* The result at one path. */
struct rnode {
    enum rk k;
    bool present;    /* something is there in the result */
    struct side o;   /* ours, as the merge saw it */
    struct side src; /* R_TAKE: the entry copied (theirs, or ours with another mode) */
    mode_t mode;     /* R_TAKE, R_WRITE: the permission bits; (mode_t)-1: the source's */
    char *data;      /* R_WRITE: the merged text */
    size_t len;
    struct stat meta; /* R_DIR: the directory's owner, mode, times */
    char **names;     /* R_DIR: its entries' results */
    struct rnode **kids;
    size_t nk;
};

enum ak { A_PUT, A_WRITE, A_MKDIR, A_DELETE, A_META };

/* One step against the workspace. top: an operation of its own; else
 * inside a directory an A_MKDIR makes. */
struct act {
    enum ak k;
    bool top;
    char *path;
    struct side src;  /* A_PUT */
    mode_t mode;      /* A_PUT, A_WRITE */
    const char *data; /* A_WRITE (borrowed from its rnode) */
    size_t len;
    struct stat meta;  /* A_MKDIR, A_WRITE (owner) */
    bool had_old;      /* the workspace has an entry at path now */
    struct stat old;   /* ... this one */
    struct tx_meta nw; /* A_META */
    bool xattrs;       /* A_META: T's old extended attributes come back */
};

struct revert {
    txbox_ws *ws;
    const struct tx_journal *t;
    int tundo;
    const struct history *later;
    enum revert_mode mode;
    const char *const *paths;
    size_t npaths;
    struct lindex ix;
    int *cundo; /* tx/C/undo of each later commit: -2 not opened yet, -1 none */
    json_t *conflicts, *merged, *overwritten, *skipped;
    struct rnode **roots; /* the results, freed with the plan (acts borrow them) */
    size_t nroots;
    struct act *acts;
    size_t nacts;
    char **strs; /* the texts sides borrow (why) */
    size_t nstrs;
    char **built; /* directories a forced revert makes again */
    size_t nbuilt;
    uint64_t merged_bytes; /* the merged texts held (MERGED_MAX) */
    txbox_error *err;
    bool failed;
};

static const char *keep_str(struct revert *r, char *s)
{
    r->strs = xrealloc(r->strs, (r->nstrs + 1) * sizeof *r->strs);
    return r->strs[r->nstrs++] = s;
}

static void fail_errno(struct revert *r, int e, const char *what, const char *path)
{
    if (!r->failed)
        tx_errno(r->err, e, "%s %s", what, *path ? path : ".");
    r->failed = true;
}

static char *join(const char *dir, const char *name)
{
    return *dir ? xasprintf("%s/%s", dir, name) : xstrdup(name);
}

/* The entry rel under root, not following symlinks on the way: absent
 * when something on the way is missing or no directory. */
static void side_at(struct revert *r, int root, const char *rel, struct side *s)
{
    memset(s, 0, sizeof *s);
    const char *base;
    _cleanup_close_ int p = safe_open_parent(root, rel, &base);
    if (p >= 0 && fstatat(p, base, &s->st, AT_SYMLINK_NOFOLLOW) == 0) {
        s->k = SK_REAL;
        s->root = root;
        s->rel = xstrdup(rel);
        return;
    }
    s->k = SK_ABSENT;
    if (errno == EACCES && root == r->ws->fd)
        s->k = SK_UNREAD; /* T (or a later command) took the search permission away */
    else if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
        fail_errno(r, errno, "cannot read", rel);
}

/* The transactions after T that changed path (at, above or below it, or
 * its directory's metadata), as a JSON array of ids. */
static json_t *changed_by(struct revert *r, const char *path)
{
    bool *hit = xcalloc(r->later->n + 1, sizeof *hit);
    _cleanup_free_ char *pfx = *path ? xasprintf("%s/", path) : xstrdup("");
    size_t pl = strlen(pfx);
    for (size_t i = lower_bound(r->ix.v, r->ix.n, pfx); i < r->ix.n && !strncmp(r->ix.v[i].path, pfx, pl);
         i++)
        hit[r->ix.v[i].c] = true;
    for (size_t i = first_at(r->ix.m, r->ix.nm, path); i < r->ix.nm && !strcmp(r->ix.m[i].path, path); i++)
        hit[r->ix.m[i].c] = true;
    _cleanup_free_ char *a = xstrdup(path);
    for (bool more = *a; more;) { /* path and each directory above it */
        for (size_t i = first_at(r->ix.v, r->ix.n, a); i < r->ix.n && !strcmp(r->ix.v[i].path, a); i++)
            hit[r->ix.v[i].c] = true;
        char *s = strrchr(a, '/');
        if (s)
            *s = 0;
        more = s != NULL;
    }
    json_t *by = json_array();
    for (size_t c = 0; c < r->later->n; c++)
        if (hit[c]) {
            char n[32];
            idname(n, r->later->v[c].id);
            json_array_append_new(by, json_string(n));
        }
    free(hit);
    return by;
}

static json_t *path_json(const char *path)
{
    return json_text(*path ? path : ".", *path ? strlen(path) : 1, true);
}

static void report(struct revert *r, json_t *list, const char *path, const char *why, bool by)
{
    json_t *e = json_pack("{s:o,s:s}", "path", path_json(path), "why", why);
    if (by) {
        json_t *b = changed_by(r, path);
        if (json_array_size(b))
            json_object_set(e, "tx", json_array_get(b, json_array_size(b) - 1));
        json_object_set_new(e, "by", b);
    }
    json_array_append_new(list, e);
}

/* ---- the base ---- */

/* tx/C/undo of later commit c, opened once (-1: pruned). */
static int commit_undo(struct revert *r, size_t c)
{
    if (r->cundo[c] == -2) {
        char n[32];
        idname(n, r->later->v[c].id);
        _cleanup_close_ int tfd = open_dir_at(r->ws->txd, n);
        r->cundo[c] = tfd >= 0 ? open_dir_at(tfd, "undo") : -1;
    }
    return r->cundo[c];
}

static void unknown(struct revert *r, struct side *s, char *why)
{
    memset(s, 0, sizeof *s);
    s->k = SK_UNKNOWN;
    s->why = keep_str(r, why);
}

/* The base at q from the pre-image of operation l, which covers q (its
 * path is q or above it: rel, the rest of q). */
static void base_from(struct revert *r, const struct lop *l, const char *rest, struct side *s)
{
    const struct commit *c = &r->later->v[l->c];
    const struct tx_op *o = &c->j.ops.v[l->op];
    char id[32];
    idname(id, c->id);
    int u = commit_undo(r, l->c);
    if (u < 0) {
        unknown(r, s, xasprintf("changed since by transaction %s, whose pre-images were pruned", id));
        return;
    }
    char n[32];
    idname(n, l->op);
    if (!exists_at(u, n)) {
        memset(s, 0, sizeof *s);
        s->k = SK_ABSENT; /* nothing was there */
        if (o->kind == OP_DELETE || o->had_old)
            unknown(r, s, xasprintf("changed since by transaction %s, whose pre-image of it is gone", id));
        return;
    }
    _cleanup_free_ char *rel = *rest ? xasprintf("%s/%s", n, rest) : xstrdup(n);
    side_at(r, u, rel, s);
}

/* The earliest later operation at q or above it: its index in ix.v, or
 * ix.n. */
static size_t first_cover(struct revert *r, const char *q)
{
    size_t best = r->ix.n;
    _cleanup_free_ char *a = xstrdup(q);
    for (;;) {
        size_t i = first_at(r->ix.v, r->ix.n, a);
        if (i < r->ix.n && (best == r->ix.n || r->ix.v[i].c < r->ix.v[best].c))
            best = i;
        char *sl = strrchr(a, '/');
        if (!sl)
            return best;
        *sl = 0;
    }
}

/* The earliest later commit with an operation below q (SIZE_MAX: none). */
static size_t first_inside(struct revert *r, const char *q)
{
    size_t best = SIZE_MAX;
    _cleanup_free_ char *pfx = *q ? xasprintf("%s/", q) : xstrdup("");
    size_t pl = strlen(pfx);
    for (size_t i = lower_bound(r->ix.v, r->ix.n, pfx); i < r->ix.n && !strncmp(r->ix.v[i].path, pfx, pl);
         i++)
        if (r->ix.v[i].c < best)
            best = r->ix.v[i].c;
    return best;
}

/* The state right after T at q (see the top of the file). */
static void base_at(struct revert *r, const char *q, struct side *s)
{
    size_t ci = first_cover(r, q), in = first_inside(r, q);
    size_t cc = ci < r->ix.n ? r->ix.v[ci].c : SIZE_MAX;
    memset(s, 0, sizeof *s);
    if (cc == SIZE_MAX && in == SIZE_MAX) {
        s->k = SK_SAME;
    } else if (in < cc) {
        s->k = SK_VIRT;
    } else {
        size_t pl = strlen(r->ix.v[ci].path);
        base_from(r, &r->ix.v[ci], q[pl] == '/' ? q + pl + 1 : "", s);
    }
}

/* Is rel a git index (a repository's or a linked worktree's)? */
static bool git_index(const char *rel)
{
    const char *b = strrchr(rel, '/');
    if (!b || strcmp(b, "/index"))
        return false;
    size_t n = (size_t)(b - rel);
    if (n >= 4 && !memcmp(b - 4, ".git", 4) && (n == 4 || b[-5] == '/'))
        return true;
    /* .git/worktrees/NAME/index */
    const char *w = memmem(rel, n, ".git/worktrees/", 15);
    return w && (w == rel || w[-1] == '/') && !memchr(w + 15, '/', (size_t)(b - (w + 15)));
}

/* Two git indexes that list the same entries (paths, modes, blobs, stages,
 * flags) are the same to a revert: a `git status` on the host rewrites the
 * index's stat cache, which is not a change of what is staged. */
static bool index_eq(const struct side *a, const struct side *b)
{
    const char *ba, *bb, *why;
    _cleanup_close_ int pa = safe_open_parent(a->root, a->rel, &ba);
    _cleanup_close_ int pb = safe_open_parent(b->root, b->rel, &bb);
    if (pa < 0 || pb < 0)
        return false;
    struct gix xa = {0}, xb = {0};
    bool same =
        gix_load(&xa, pa, ba, &why) == 0 && gix_load(&xb, pb, bb, &why) == 0 && gix_same_entries(&xa, &xb);
    gix_free(&xa);
    gix_free(&xb);
    return same;
}

/* Does the git index at path (ours) list the entries that T left there
 * (T's LOSSES_INDEX_RECORD, losses.c)? Then a later rewrite only refreshed
 * it, and what T left is what is there. */
static bool index_as_left(struct revert *r, const char *path, const struct side *ours)
{
    _cleanup_close_ int tfd = openat(r->tundo, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_free_ char *rec = NULL;
    size_t len = 0;
    if (tfd < 0 || read_file_at(tfd, LOSSES_INDEX_RECORD, 1 << 20, &rec, &len, NULL) < 0)
        return false;
    const char *b;
    _cleanup_close_ int p = safe_open_parent(ours->root, ours->rel, &b);
    struct gix x = {0};
    const char *why;
    char hex[41] = "";
    if (p < 0 || gix_load(&x, p, b, &why) != 0) {
        gix_free(&x);
        return false;
    }
    gix_entries_digest(&x, hex);
    gix_free(&x);
    size_t pl = strlen(path);
    for (char *l = rec, *nl; l && *l; l = nl ? nl + 1 : NULL) {
        nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        if (n == 41 + pl && !memcmp(l, hex, 40) && l[40] == ' ' && !memcmp(l + 41, path, pl))
            return true;
    }
    return false;
}

/* The base at T's own operation o (no later commit changed it: checked
 * against what T recorded of its new entry). */
static void base_top(struct revert *r, const struct tx_op *o, const struct side *ours, struct side *s)
{
    base_at(r, o->path, s);
    if (s->k != SK_SAME)
        return;
    if (ours->k == SK_UNREAD)
        return; /* not to be checked: T left it so (its META gives access back) */
    if (o->kind == OP_DELETE) {
        if (ours->k != SK_ABSENT)
            s->k = SK_ABSENT; /* made since, outside any recorded transaction */
        return;
    }
    const struct tx_meta *m = &o->nw;
    if (!(m->mode & S_IFMT))
        return; /* not recorded (an older journal) */
    bool same = ours->k == SK_REAL && (ours->st.st_mode & S_IFMT) == (m->mode & S_IFMT) &&
                (ours->st.st_mode & 07777) == (m->mode & 07777) && ours->st.st_mtim.tv_sec == m->mtime_s &&
                ours->st.st_mtim.tv_nsec == m->mtime_ns;
    if (!same && ours->k == SK_REAL && S_ISREG(ours->st.st_mode) && git_index(o->path))
        same = index_as_left(r, o->path, ours); /* only refreshed since (a git status) */
    if (!same)
        unknown(r, s, xstrdup("changed since outside txbox (by no recorded transaction)"));
}

/* The metadata the base gives directory q (VIRT): the old metadata of
 * the first later commit's META on it, or the pre-image of the first one
 * that replaced it, whichever came first; else ours. */
static bool base_dir_meta(struct revert *r, const char *q, const struct side *ours, struct stat *st)
{
    size_t ci = first_cover(r, q), mi = first_at(r->ix.m, r->ix.nm, q);
    size_t cc = ci < r->ix.n ? r->ix.v[ci].c : SIZE_MAX, mc = mi < r->ix.nm ? r->ix.m[mi].c : SIZE_MAX;
    if (cc < mc) {
        struct side c;
        size_t pl = strlen(r->ix.v[ci].path);
        base_from(r, &r->ix.v[ci], q[pl] == '/' ? q + pl + 1 : "", &c);
        bool have = c.k == SK_REAL && S_ISDIR(c.st.st_mode);
        if (have)
            *st = c.st;
        side_free(&c);
        return have;
    }
    if (mc < SIZE_MAX) {
        const struct tx_meta *m = &r->later->v[mc].j.ops.v[r->ix.m[mi].op].old;
        *st = ours->st;
        st->st_mode = S_IFDIR | (m->mode & 07777);
        st->st_uid = m->uid;
        st->st_gid = m->gid;
        return true;
    }
    if (is_dir(ours))
        *st = ours->st;
    return is_dir(ours);
}

/* ---- comparing entries ---- */

/* A regular file of a side, opened for reading: never blocking on one
 * replaced by a FIFO since its stat (the workspace is the command's). */
static int open_side(const struct side *s)
{
    int fd = safe_openat_noatime(s->root, s->rel, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        errno = EAGAIN; /* changed under us */
        return -1;
    }
    return fd;
}

static bool content_eq(struct revert *r, const struct side *a, const struct side *b)
{
    if (a->st.st_size != b->st.st_size)
        return false;
    if (a->root == b->root && !strcmp(a->rel, b->rel))
        return true;
    _cleanup_close_ int fa = open_side(a);
    _cleanup_close_ int fb = open_side(b);
    if (fa < 0 || fb < 0) {
        fail_errno(r, errno, "cannot read", fa < 0 ? a->rel : b->rel);
        return false;
    }
    static char ba[65536], bb[65536];
    for (;;) {
        ssize_t na = read_all(fa, ba, sizeof ba), nb = read_all(fb, bb, sizeof bb);
        if (na < 0 || nb < 0) {
            fail_errno(r, errno, "cannot read", na < 0 ? a->rel : b->rel);
            return false;
        }
        if (na != nb || memcmp(ba, bb, (size_t)na))
            return false;
        if (na == 0)
            return true;
    }
}

static char *link_of(const struct side *s)
{
    const char *base;
    _cleanup_close_ int p = safe_open_parent(s->root, s->rel, &base);
    char t[PATH_MAX + 1];
    ssize_t n = p >= 0 ? readlinkat(p, base, t, PATH_MAX) : -1;
    if (n < 0)
        return NULL;
    t[n] = 0;
    return xstrdup(t);
}

/* Are the leaves of a and b the same (a directory or nothing: no leaf)? */
static bool leaf_eq(struct revert *r, const struct side *a, const struct side *b)
{
    bool la = is_leaf(a), lb = is_leaf(b);
    if (!la || !lb)
        return la == lb;
    mode_t ta = a->st.st_mode & S_IFMT;
    if (ta != (b->st.st_mode & S_IFMT))
        return false;
    if (ta == S_IFLNK) {
        _cleanup_free_ char *x = link_of(a);
        _cleanup_free_ char *y = link_of(b);
        return x && y && !strcmp(x, y);
    }
    if ((a->st.st_mode & 07777) != (b->st.st_mode & 07777))
        return false;
    if (ta == S_IFREG)
        return content_eq(r, a, b) || (git_index(a->rel) && index_eq(a, b));
    return ta != S_IFCHR && ta != S_IFBLK ? true : a->st.st_rdev == b->st.st_rdev;
}

/* ---- results ---- */

static struct rnode *node(enum rk k, const struct side *ours)
{
    struct rnode *n = xcalloc(1, sizeof *n);
    n->k = k;
    n->o = side_copy(ours);
    n->mode = (mode_t)-1;
    n->present = k == R_KEEP ? ours->k == SK_REAL : k != R_ABSENT;
    return n;
}

static void node_free(struct rnode *n)
{
    if (!n)
        return;
    side_free(&n->o);
    side_free(&n->src);
    free(n->data);
    for (size_t i = 0; i < n->nk; i++) {
        free(n->names[i]);
        node_free(n->kids[i]);
    }
    free(n->names);
    free(n->kids);
    free(n);
}

/* The result is src, whole (absent: nothing). */
static struct rnode *take(const struct side *ours, const struct side *src, mode_t mode)
{
    if (src->k != SK_REAL)
        return node(R_ABSENT, ours);
    struct rnode *n = node(R_TAKE, ours);
    n->src = side_copy(src);
    n->mode = mode;
    return n;
}

/* A conflict at q: refused (merge), or theirs taken and said (force). */
static struct rnode *settle(struct revert *r, const char *q, const struct side *ours,
                            const struct side *theirs, const char *why)
{
    if (r->mode == REVERT_MERGE) {
        report(r, r->conflicts, q, why, true);
        return node(R_KEEP, ours);
    }
    report(r, r->overwritten, q, why, true);
    return take(ours, theirs, (mode_t)-1);
}

/* settle for a node's leaf: a directory of theirs is no leaf (its entries
 * are merged apart). */
static struct rnode *settle_leaf(struct revert *r, const char *q, const struct side *ours,
                                 const struct side *theirs, const char *why)
{
    struct rnode *n = settle(r, q, ours, theirs, why);
    if (n->k == R_TAKE && !is_leaf(theirs)) {
        node_free(n);
        n = node(R_ABSENT, ours);
    }
    return n;
}

static const char *why_leaf(const struct side *b, const struct side *o, const struct side *th)
{
    if (!is_leaf(th))
        return "changed since, and the undone transaction had created it";
    if (!is_leaf(o))
        return o->k == SK_ABSENT ? "deleted since" : "replaced by a directory since";
    if (!is_leaf(b))
        return "created again since, with other content";
    if ((o->st.st_mode & S_IFMT) != (b->st.st_mode & S_IFMT))
        return "replaced since by an entry of another type";
    if (S_ISLNK(o->st.st_mode))
        return "the link was changed since";
    return "changed since";
}

static int read_side(struct revert *r, const struct side *s, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    _cleanup_close_ int fd = open_side(s);
    if (fd < 0) {
        fail_errno(r, errno, "cannot read", s->rel);
        return -1;
    }
    size_t n = (size_t)s->st.st_size;
    *buf = xmalloc(n + 1);
    ssize_t got = read_all(fd, *buf, n);
    if (got < 0) {
        fail_errno(r, errno, "cannot read", s->rel);
        return -1;
    }
    *len = (size_t)got;
    return 0;
}

static bool binary(const char *p, size_t n) { return memchr(p, 0, n < BINARY_PROBE ? n : BINARY_PROBE); }

/* Three regular files, all different: content and mode merged apart. */
static struct rnode *file_merge(struct revert *r, const char *q, const struct side *b, const struct side *o,
                                const struct side *th)
{
    mode_t mb = b->st.st_mode & 07777, mo = o->st.st_mode & 07777, mt = th->st.st_mode & 07777;
    mode_t m = mo == mb ? mt : mt == mb || mo == mt ? mo : (mode_t)-1;
    if (m == (mode_t)-1)
        return settle(r, q, o, th, "its permissions were changed since");
    if (content_eq(r, o, b))
        return take(o, th, m);
    if (content_eq(r, th, b) || content_eq(r, o, th))
        return m == mo ? node(R_KEEP, o) : take(o, o, m);
    if (r->failed)
        return node(R_KEEP, o);
    if ((uint64_t)b->st.st_size > MERGE_MAX || (uint64_t)o->st.st_size > MERGE_MAX ||
        (uint64_t)th->st.st_size > MERGE_MAX || r->merged_bytes > MERGED_MAX)
        return settle(r, q, o, th, "changed since, and too large to merge");
    _cleanup_free_ char *bb = NULL;
    _cleanup_free_ char *ob = NULL;
    _cleanup_free_ char *tb = NULL;
    size_t bl, ol, tl;
    if (read_side(r, b, &bb, &bl) < 0 || read_side(r, o, &ob, &ol) < 0 || read_side(r, th, &tb, &tl) < 0)
        return node(R_KEEP, o);
    if (binary(bb, bl) || binary(ob, ol) || binary(tb, tl))
        return settle(r, q, o, th, "changed since, and binary: no merge");
    char *out = NULL;
    size_t outlen = 0;
    txbox_error me = {0};
    int c = merge3_text(bb, bl, ob, ol, tb, tl, &out, &outlen, &me);
    if (c < 0 && me.code == ENOENT) /* no libgit2: no merge, said */
        return settle(r, q, o, th, keep_str(r, xasprintf("changed since, and %s", me.msg)));
    if (c < 0) {
        if (r->err)
            *r->err = me;
        r->failed = true;
        return node(R_KEEP, o);
    }
    if (c == 0)
        return settle(r, q, o, th, "changed since on the same lines");
    json_array_append_new(r->merged, path_json(q));
    r->merged_bytes += outlen;
    struct rnode *n = node(R_WRITE, o);
    n->data = out;
    n->len = outlen;
    n->mode = m;
    return n;
}

/* The leaf aspect at q (directories count as no leaf). */
static struct rnode *leaf_merge(struct revert *r, const char *q, const struct side *b, const struct side *o,
                                const struct side *th)
{
    if (b->k == SK_UNKNOWN) {
        if (leaf_eq(r, o, th))
            return node(R_KEEP, o);
        return settle_leaf(r, q, o, th, b->why);
    }
    if (r->mode == REVERT_EXACT) {
        if (leaf_eq(r, th, b) || leaf_eq(r, o, th))
            return node(R_KEEP, o);
        if (!leaf_eq(r, o, b))
            report(r, r->overwritten, q, why_leaf(b, o, th), true);
        return is_leaf(th) ? take(o, th, (mode_t)-1) : node(R_ABSENT, o);
    }
    if (leaf_eq(r, o, b))
        return is_leaf(th) ? take(o, th, (mode_t)-1) : node(R_ABSENT, o);
    if (leaf_eq(r, th, b) || leaf_eq(r, o, th))
        return node(R_KEEP, o);
    if (is_leaf(b) && is_leaf(o) && is_leaf(th) && S_ISREG(b->st.st_mode) && S_ISREG(o->st.st_mode) &&
        S_ISREG(th->st.st_mode))
        return file_merge(r, q, b, o, th);
    return settle_leaf(r, q, o, th, why_leaf(b, o, th));
}

/* ---- the tree merge ---- */

enum scope { SC_NONE, SC_PARTIAL, SC_FULL };

/* Restore's paths: q is in one (full), above one (partial), or neither. */
static enum scope scope_of(const struct revert *r, const char *q)
{
    if (!r->npaths)
        return SC_FULL;
    enum scope s = SC_NONE;
    size_t ql = strlen(q);
    for (size_t i = 0; i < r->npaths; i++) {
        const char *p = r->paths[i];
        size_t pl = strlen(p);
        if (!pl || !strcmp(p, q) || (ql > pl && under(q, p, pl)))
            return SC_FULL;
        if (pl > ql && under(p, q, ql))
            s = SC_PARTIAL;
    }
    return s;
}

struct names {
    char **v;
    size_t n;
};

static void names_add(struct names *nm, const char *s, size_t len)
{
    if ((nm->n & (nm->n - 1)) == 0) /* 0, 1, 2, 4...: grown by doubling */
        nm->v = xrealloc(nm->v, (nm->n ? 2 * nm->n : 1) * sizeof *nm->v);
    char *c = xmalloc(len + 1);
    memcpy(c, s, len);
    c[len] = 0;
    nm->v[nm->n++] = c;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted, each name once. */
static void names_unique(struct names *nm)
{
    if (!nm->n)
        return;
    qsort(nm->v, nm->n, sizeof *nm->v, name_cmp);
    size_t k = 1;
    for (size_t i = 1; i < nm->n; i++) {
        if (strcmp(nm->v[i], nm->v[k - 1]))
            nm->v[k++] = nm->v[i];
        else
            free(nm->v[i]);
    }
    nm->n = k;
}

static void names_of_dir(struct revert *r, const struct side *s, struct names *nm)
{
    if (s->k != SK_REAL || !S_ISDIR(s->st.st_mode))
        return;
    int fd = safe_openat(s->root, s->rel, O_RDONLY | O_DIRECTORY, 0);
    _cleanup_dir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        fail_errno(r, errno, "cannot list", s->rel);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            names_add(nm, de->d_name, strlen(de->d_name));
}

/* The names a VIRT base may hold at q: what later commits changed below
 * it, and what the pre-images of those that replaced it held. */
static void names_of_base(struct revert *r, const char *q, struct names *nm)
{
    size_t ql = strlen(q);
    _cleanup_free_ char *pfx = xasprintf("%s/", q);
    for (size_t i = lower_bound(r->ix.v, r->ix.n, pfx); i < r->ix.n && !strncmp(r->ix.v[i].path, pfx, ql + 1);
         i++) {
        const char *c = r->ix.v[i].path + ql + 1, *sl = strchr(c, '/');
        names_add(nm, c, sl ? (size_t)(sl - c) : strlen(c));
    }
    _cleanup_free_ char *a = xstrdup(q);
    for (size_t len = ql;;) {
        a[len] = 0;
        for (size_t i = first_at(r->ix.v, r->ix.n, a); i < r->ix.n && !strcmp(r->ix.v[i].path, a); i++) {
            struct side s;
            base_from(r, &r->ix.v[i], q[len] == '/' ? q + len + 1 : "", &s);
            names_of_dir(r, &s, nm);
            side_free(&s);
        }
        char *sl = strrchr(a, '/');
        if (!sl)
            break;
        len = (size_t)(sl - a);
    }
}

static void kid(struct revert *r, const struct side *s, const struct side *ours, const char *name,
                const char *kq, struct side *out)
{
    memset(out, 0, sizeof *out);
    switch (s->k) {
    case SK_REAL:
        if (S_ISDIR(s->st.st_mode)) {
            _cleanup_free_ char *rel = join(s->rel, name);
            side_at(r, s->root, rel, out);
            return;
        }
        out->k = SK_ABSENT;
        return;
    case SK_VIRT:
        base_at(r, kq, out);
        return;
    case SK_UNKNOWN:
        *out = *s;
        return;
    case SK_SAME:
        out->k = SK_SAME;
        (void)ours;
        return;
    case SK_UNREAD:
        out->k = SK_UNREAD;
        return;
    case SK_ABSENT:
        out->k = SK_ABSENT;
        return;
    }
}

static struct rnode *merge(struct revert *r, const char *q, const struct side *b, const struct side *o,
                           const struct side *th, unsigned depth);

static void add_kid(struct rnode *n, const char *name, struct rnode *k)
{
    n->names = xrealloc(n->names, (n->nk + 1) * sizeof *n->names);
    n->kids = xrealloc(n->kids, (n->nk + 1) * sizeof *n->kids);
    n->names[n->nk] = xstrdup(name);
    n->kids[n->nk++] = k;
}

/* The entries of q merged one by one into dir (R_DIR); *present: one of
 * them is there in the result. */
static void merge_kids(struct revert *r, const char *q, const struct side *b, const struct side *o,
                       const struct side *th, struct rnode *dir, bool *present, unsigned depth)
{
    struct names nm = {0};
    names_of_dir(r, o, &nm);
    names_of_dir(r, th, &nm);
    if (b->k == SK_VIRT)
        names_of_base(r, q, &nm);
    else
        names_of_dir(r, b, &nm);
    names_unique(&nm);
    *present = false;
    for (size_t i = 0; i < nm.n && !r->failed; i++) {
        _cleanup_free_ char *kq = join(q, nm.v[i]);
        if (scope_of(r, kq) == SC_NONE)
            continue;
        struct side cb, co, ct;
        kid(r, o, o, nm.v[i], kq, &co);
        kid(r, th, o, nm.v[i], kq, &ct);
        kid(r, b, o, nm.v[i], kq, &cb);
        struct rnode *k = merge(r, kq, &cb, &co, &ct, depth + 1);
        *present = *present || k->present;
        add_kid(dir, nm.v[i], k);
        side_free(&co);
        side_free(&ct);
        side_free(&cb);
    }
    for (size_t i = 0; i < nm.n; i++)
        free(nm.v[i]);
    free(nm.v);
}

static void dir_meta(struct revert *r, const char *q, const struct side *b, const struct side *o,
                     const struct side *th, struct stat *m)
{
    struct stat bm;
    bool hb = false;
    if (b->k == SK_REAL && S_ISDIR(b->st.st_mode)) {
        bm = b->st;
        hb = true;
    } else if (b->k == SK_VIRT) {
        hb = base_dir_meta(r, q, o, &bm);
    }
    if (is_dir(o)) {
        *m = o->st;
        bool same = hb && (bm.st_mode & 07777) == (o->st.st_mode & 07777) && bm.st_uid == o->st.st_uid &&
                    bm.st_gid == o->st.st_gid;
        bool changed = hb && th->k == SK_REAL && ((bm.st_mode ^ th->st.st_mode) & 07777);
        if (is_dir(th) && (same || (r->mode == REVERT_EXACT && changed))) {
            m->st_mode = S_IFDIR | (th->st.st_mode & 07777);
            m->st_uid = th->st.st_uid;
            m->st_gid = th->st.st_gid;
        }
    } else if (is_dir(th)) {
        *m = th->st;
    } else if (hb) {
        *m = bm;
    } else {
        memset(m, 0, sizeof *m);
        m->st_mode = S_IFDIR | 0755;
        m->st_uid = geteuid();
        m->st_gid = getegid();
        clock_gettime(CLOCK_REALTIME, &m->st_mtim);
        m->st_atim = m->st_mtim;
    }
}

/* restore below q only: q itself stays as it is */
static struct rnode *merge_partial(struct revert *r, const char *q, const struct side *b,
                                   const struct side *o, const struct side *th, unsigned depth)
{
    struct rnode *d = node(R_DIR, o);
    bool present;
    merge_kids(r, q, b, o, th, d, &present, depth);
    if (is_dir(o)) {
        d->meta = o->st;
        d->present = true;
        return d;
    }
    if (!present) {
        node_free(d);
        return node(R_KEEP, o);
    }
    if (is_leaf(o)) { /* the paths restored are below a file now */
        node_free(d);
        report(r, r->skipped, q, "no longer a directory", true);
        return node(R_KEEP, o);
    }
    dir_meta(r, q, b, o, th, &d->meta);
    return d;
}

/* Is there a directory at the node, its entries aside? The scalar merge
 * of "a directory is there" (restore: theirs where T changed it). */
static bool dir_stays(const struct revert *r, const struct side *b, bool db, bool dO, bool dt)
{
    if (b->k == SK_UNKNOWN)
        return r->mode == REVERT_EXACT ? dt : dO && dt;
    if (r->mode == REVERT_EXACT)
        return db != dt ? dt : dO;
    return dO == db ? dt : dO;
}

static struct rnode *merge(struct revert *r, const char *q, const struct side *b, const struct side *o,
                           const struct side *th, unsigned depth)
{
    if (depth > MAX_DEPTH) {
        if (!r->failed)
            tx_err(r->err, ELOOP, "the tree is too deep at %s", q);
        r->failed = true;
        return node(R_KEEP, o);
    }
    enum scope sc = scope_of(r, q);
    if (b->k == SK_SAME && sc == SC_FULL)
        return take(o, th, (mode_t)-1); /* no later change: the plain revert */
    if (o->k == SK_UNREAD)              /* ours cannot be compared */
        return settle_leaf(r, q, o, th, "changed since, and a directory on its way has no search permission");
    if (sc == SC_PARTIAL)
        return merge_partial(r, q, b, o, th, depth);
    bool db = is_dir(b), dO = is_dir(o), dt = is_dir(th);
    if (!db && !dO && !dt)
        return leaf_merge(r, q, b, o, th);
    struct rnode *d = node(R_DIR, o), *leaf = leaf_merge(r, q, b, o, th);
    bool kids;
    merge_kids(r, q, b, o, th, d, &kids, depth);
    bool dirs = kids || dir_stays(r, b, db, dO, dt);
    if (b->k == SK_UNKNOWN && dO != dt && !kids && !r->failed) {
        node_free(leaf);
        leaf = settle(r, q, o, th, b->why);
        dirs = leaf->k == R_TAKE && dt;
        if (dirs) {
            node_free(leaf);
            leaf = node(R_ABSENT, o);
        }
    }
    bool lp = leaf->k == R_TAKE || leaf->k == R_WRITE || (leaf->k == R_KEEP && is_leaf(o));
    if (lp && dirs) {
        const char *why = "a file and a directory: one side made a file there, the other a directory";
        if (r->mode == REVERT_MERGE)
            report(r, r->conflicts, q, why, true);
        else
            report(r, r->overwritten, q, why, true);
        if (!dt) { /* theirs is the file */
            dirs = false;
        }
    }
    if (dirs) {
        node_free(leaf);
        dir_meta(r, q, b, o, th, &d->meta);
        d->present = true;
        return d;
    }
    node_free(d);
    if (leaf->k == R_KEEP && dO) { /* no directory left: ours goes */
        node_free(leaf);
        return node(R_ABSENT, o);
    }
    return leaf;
}

/* ---- actions ---- */

static struct act *act_add(struct revert *r, enum ak k, const char *path, bool top, const struct side *ours)
{
    r->acts = xrealloc(r->acts, (r->nacts + 1) * sizeof *r->acts);
    struct act *a = &r->acts[r->nacts++];
    memset(a, 0, sizeof *a);
    a->k = k;
    a->top = top;
    a->path = xstrdup(path);
    a->mode = (mode_t)-1;
    if (top && ours && ours->k == SK_REAL) {
        a->had_old = true;
        a->old = ours->st;
    }
    return a;
}

static bool same_meta(const struct stat *a, const struct stat *b)
{
    return (a->st_mode & 07777) == (b->st_mode & 07777) && a->st_uid == b->st_uid && a->st_gid == b->st_gid;
}

static void emit(struct revert *r, const char *q, struct rnode *n, bool top)
{
    const struct side *o = &n->o;
    switch (n->k) {
    case R_KEEP:
        return;
    case R_ABSENT: /* over an entry not known (SK_UNREAD) the apply deletes what is there */
        if (top && (o->k == SK_REAL || o->k == SK_UNREAD))
            act_add(r, A_DELETE, q, true, o);
        return;
    case R_TAKE: {
        if (o->k == SK_REAL && n->src.root == o->root && !strcmp(n->src.rel, o->rel) &&
            (n->mode == (mode_t)-1 || n->mode == (o->st.st_mode & 07777)))
            return;
        struct act *a = act_add(r, A_PUT, q, top, o);
        a->src = side_copy(&n->src);
        a->mode = n->mode;
        return;
    }
    case R_WRITE: {
        struct act *a = act_add(r, A_WRITE, q, top, o);
        a->data = n->data;
        a->len = n->len;
        a->mode = n->mode;
        a->meta = o->k == SK_REAL ? o->st : (struct stat){.st_uid = geteuid(), .st_gid = getegid()};
        return;
    }
    case R_DIR:
        break;
    }
    bool keep = top && is_dir(o);
    if (!keep) {
        struct act *a = act_add(r, A_MKDIR, q, top, o);
        a->meta = n->meta;
    }
    for (size_t i = 0; i < n->nk; i++) {
        _cleanup_free_ char *kq = join(q, n->names[i]);
        emit(r, kq, n->kids[i], keep);
    }
    if (keep && !same_meta(&n->meta, &o->st)) {
        struct act *a = act_add(r, A_META, q, true, o);
        meta_of(&o->st, &a->nw);
        a->nw.mode = n->meta.st_mode & 07777;
        a->nw.uid = n->meta.st_uid;
        a->nw.gid = n->meta.st_gid;
    }
}

/* ---- T's operations ---- */

/* Where T's path p stands in the workspace: its directories there
 * (0), one missing (1) or one no directory (2); *at: which. */
static int dirs_of(struct revert *r, const char *p, char **at)
{
    *at = NULL;
    _cleanup_free_ char *a = xstrdup(p);
    for (char *s = strchr(a, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        struct side d;
        side_at(r, r->ws->fd, a, &d);
        int st = d.k == SK_ABSENT ? 1 : d.k == SK_REAL && !S_ISDIR(d.st.st_mode) ? 2 : 0;
        side_free(&d);
        if (st) {
            *at = xstrdup(a);
            return st;
        }
        *s = '/';
    }
    return 0;
}

static bool was_built(const struct revert *r, const char *d)
{
    for (size_t i = 0; i < r->nbuilt; i++)
        if (!strcmp(r->built[i], d))
            return true;
    return false;
}

/* Forced: the directories from missing (the first one gone) down to p's
 * own made again, each as the base had it (else a new one). */
static void build_dirs(struct revert *r, const char *missing, const char *p)
{
    size_t ml = strlen(missing);
    for (size_t end = ml;;) {
        _cleanup_free_ char *a = xmalloc(end + 1);
        memcpy(a, p, end);
        a[end] = 0;
        if (!was_built(r, a)) {
            struct side b, none = {.k = SK_ABSENT};
            base_at(r, a, &b);
            struct act *m = act_add(r, A_MKDIR, a, end == ml, NULL);
            dir_meta(r, a, &b, &none, &none, &m->meta);
            side_free(&b);
            r->built = xrealloc(r->built, (r->nbuilt + 1) * sizeof *r->built);
            r->built[r->nbuilt++] = xstrdup(a);
        }
        const char *s = strchr(p + end + 1, '/');
        if (!s)
            return;
        end = (size_t)(s - p);
    }
}

/* theirs for T's operation i (REPLACE, DELETE). */
static int theirs_of(struct revert *r, size_t i, struct side *th)
{
    const struct tx_op *o = &r->t->ops.v[i];
    char n[32];
    idname(n, i);
    if (exists_at(r->tundo, n)) {
        side_at(r, r->tundo, n, th);
        return r->failed ? -1 : 0;
    }
    memset(th, 0, sizeof *th);
    th->k = SK_ABSENT;
    if (o->kind == OP_DELETE || o->had_old) {
        char t[32];
        idname(t, r->t->id);
        r->failed = true;
        return tx_err(r->err, ENOENT, "the pre-image of %s kept by transaction %s is gone", o->path, t);
    }
    return 0;
}

static void revert_op(struct revert *r, size_t i)
{
    const struct tx_op *op = &r->t->ops.v[i];
    if (scope_of(r, op->path) == SC_NONE)
        return;
    struct side th, o, b;
    if (theirs_of(r, i, &th) < 0)
        return;
    _cleanup_free_ char *at = NULL;
    int ds = dirs_of(r, op->path, &at);
    if (ds == 0)
        side_at(r, r->ws->fd, op->path, &o);
    else
        o = (struct side){.k = SK_ABSENT};
    base_top(r, op, &o, &b);
    struct rnode *n = merge(r, op->path, &b, &o, &th, 0);
    r->roots = xrealloc(r->roots, (r->nroots + 1) * sizeof *r->roots);
    r->roots[r->nroots++] = n;
    if (!r->failed && ds && n->present) {
        _cleanup_free_ char *why = xasprintf(
            ds == 1 ? "its directory %s was deleted since" : "its directory %s is no longer a directory", at);
        if (r->mode == REVERT_MERGE)
            report(r, r->conflicts, op->path, why, true);
        else if (ds == 2)
            report(r, r->skipped, op->path, why, true);
        else {
            report(r, r->overwritten, op->path, why, true);
            build_dirs(r, at, op->path);
            emit(r, op->path, n, false);
        }
    } else if (!r->failed) {
        emit(r, op->path, n, true);
    }
    side_free(&th);
    side_free(&o);
    side_free(&b);
}

static bool changes_owner_or_mode(const struct tx_op *o)
{
    return o->nw.mode != o->old.mode || o->nw.uid != o->old.uid || o->nw.gid != o->old.gid;
}

static bool later_meta(const struct revert *r, const char *path, bool xattrs)
{
    for (size_t i = first_at(r->ix.m, r->ix.nm, path); i < r->ix.nm && !strcmp(r->ix.m[i].path, path); i++)
        if (!xattrs || r->later->v[r->ix.m[i].c].j.ops.v[r->ix.m[i].op].had_old)
            return true;
    return false;
}

/* T's META on a directory: its owner and mode merged as a scalar, its
 * times back unless a later commit set them, its extended attributes back
 * unless a later commit changed them too. */
static void revert_meta(struct revert *r, size_t i)
{
    const struct tx_op *o = &r->t->ops.v[i];
    if (scope_of(r, o->path) != SC_FULL)
        return;
    bool force = r->mode != REVERT_MERGE;
    _cleanup_close_ int d = safe_openat(r->ws->fd, o->path, O_PATH | O_DIRECTORY, 0);
    struct stat st;
    if (d < 0 || fstat(d, &st) < 0) {
        if (changes_owner_or_mode(o) || o->had_old) /* else only its times: nothing to give back */
            report(r, force ? r->skipped : r->conflicts, o->path, "the directory is gone", true);
        return;
    }
    struct tx_meta cur;
    meta_of(&st, &cur);
    struct tx_meta nw = cur;
    bool change = false;
    if (changes_owner_or_mode(o)) {
        bool at_new = cur.mode == o->nw.mode && cur.uid == o->nw.uid && cur.gid == o->nw.gid;
        bool at_old = cur.mode == o->old.mode && cur.uid == o->old.uid && cur.gid == o->old.gid;
        if (!at_new && !at_old) {
            if (!force) {
                report(r, r->conflicts, o->path, "its mode or owner was changed since", true);
                return;
            }
            report(r, r->overwritten, o->path, "its mode or owner was changed since", true);
        }
        nw.mode = o->old.mode;
        nw.uid = o->old.uid;
        nw.gid = o->old.gid;
        change = !at_old;
    }
    if (!later_meta(r, o->path, false)) {
        nw.atime_s = o->old.atime_s;
        nw.atime_ns = o->old.atime_ns;
        nw.mtime_s = o->old.mtime_s;
        nw.mtime_ns = o->old.mtime_ns;
        change = change || nw.mtime_s != cur.mtime_s || nw.mtime_ns != cur.mtime_ns;
    }
    bool xattrs = false;
    if (o->had_old) {
        char un[32];
        idname(un, i);
        struct stat xs;
        bool kept = fstatat(r->tundo, un, &xs, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(xs.st_mode);
        const char *why = !kept                          ? "its old extended attributes were not kept"
                          : later_meta(r, o->path, true) ? "its extended attributes were changed since"
                                                         : NULL;
        if (why && !force) {
            report(r, r->conflicts, o->path, why, true);
            return;
        }
        if (why)
            report(r, kept ? r->overwritten : r->skipped, o->path, why, true);
        xattrs = kept;
        change = change || kept;
    }
    if (!change)
        return;
    struct act *a = act_add(r, A_META, o->path, true, NULL);
    a->nw = nw;
    a->xattrs = xattrs;
    a->old = st;
    a->had_old = true;
}

/* Renames in a directory need its owner's write and search permission:
 * the commit protocol gives them to the directories its META operations
 * name (journal.c, I3), so one that lacks them gets a META that changes
 * nothing. */
static void grant_parents(struct revert *r)
{
    size_t n = r->nacts;
    for (size_t i = 0; i < n; i++) {
        if (!r->acts[i].top || r->acts[i].k == A_META)
            continue;
        _cleanup_free_ char *p = xstrdup(r->acts[i].path);
        char *s = strrchr(p, '/');
        if (s)
            *s = 0;
        else
            *p = 0;
        bool have = false;
        for (size_t k = 0; k < r->nacts && !have; k++)
            have = r->acts[k].k == A_META && !strcmp(r->acts[k].path, p);
        struct stat st;
        _cleanup_close_ int d = have ? -1 : safe_openat(r->ws->fd, p, O_PATH | O_DIRECTORY, 0);
        if (d < 0 || fstat(d, &st) < 0 || (st.st_mode & S_IRWXU) == S_IRWXU)
            continue;
        struct act *a = act_add(r, A_META, p, true, NULL);
        meta_of(&st, &a->nw);
        a->old = st;
        a->had_old = true;
    }
}

/* A restore's path must be one T changed. */
static int check_path(struct revert *r, const char *p)
{
    size_t pl = strlen(p);
    for (size_t i = 0; i < r->t->ops.n; i++) {
        const struct tx_op *o = &r->t->ops.v[i];
        size_t ol = strlen(o->path);
        if (!pl || !strcmp(o->path, p) || (ol > pl && under(o->path, p, pl)))
            return 0;
        if (o->kind == OP_META || !(pl > ol && under(p, o->path, ol)))
            continue;
        char n[32];
        idname(n, i);
        _cleanup_free_ char *rel = xasprintf("%s/%s", n, p + ol + 1);
        struct side th, b;
        side_at(r, r->tundo, rel, &th);
        base_at(r, p, &b);
        if (b.k == SK_SAME) { /* no later change: the base is the workspace */
            side_free(&b);
            side_at(r, r->ws->fd, p, &b);
        }
        bool changed = th.k == SK_REAL || (b.k != SK_ABSENT && b.k != SK_SAME);
        side_free(&th);
        side_free(&b);
        if (changed)
            return 0;
    }
    char t[32];
    idname(t, r->t->id);
    return tx_err(r->err, EINVAL, "transaction %s did not change %s", t, pl ? p : ".");
}

int revert_plan(const struct revert_req *rq, struct revert **out, txbox_error *err)
{
    struct revert *r = xcalloc(1, sizeof *r);
    *out = r;
    r->ws = rq->ws;
    r->t = rq->t;
    r->tundo = rq->tundo;
    r->later = rq->later;
    r->mode = rq->mode;
    r->paths = rq->paths;
    r->npaths = rq->npaths;
    r->err = err;
    r->conflicts = json_array();
    r->merged = json_array();
    r->overwritten = json_array();
    r->skipped = json_array();
    lindex_build(&r->ix, rq->later);
    r->cundo = xmalloc((rq->later->n + 1) * sizeof *r->cundo);
    for (size_t c = 0; c <= rq->later->n; c++)
        r->cundo[c] = -2;
    for (size_t i = 0; i < r->npaths; i++)
        if (check_path(r, r->paths[i]) < 0)
            return -1;
    for (size_t i = 0; i < r->t->ops.n && !r->failed; i++)
        if (r->t->ops.v[i].kind != OP_META)
            revert_op(r, i);
    for (size_t i = 0; i < r->t->ops.n && !r->failed; i++)
        if (r->t->ops.v[i].kind == OP_META)
            revert_meta(r, i);
    if (r->failed)
        return -1;
    grant_parents(r);
    return 0;
}

json_t *revert_conflicts(const struct revert *r) { return r->conflicts; }
json_t *revert_merged(const struct revert *r) { return r->merged; }
json_t *revert_overwritten(const struct revert *r) { return r->overwritten; }
json_t *revert_skipped(const struct revert *r) { return r->skipped; }
bool revert_empty(const struct revert *r) { return r->nacts == 0; }

/* ---- writing the upper ---- */

/* A regular file with other names copied already (a hard-link group the
 * commit kept whole, links.c): another name of that copy, so that the
 * group comes back one inode. */
static int put_link(struct revert *r, const struct act *a, int upper, int up, const char *base, bool *done)
{
    *done = false;
    if (!S_ISREG(a->src.st.st_mode) || a->src.st.st_nlink < 2)
        return 0;
    for (size_t i = 0; i < r->nacts; i++) {
        const struct act *b = &r->acts[i];
        if (b == a)
            break;
        if (b->k != A_PUT || b->src.st.st_dev != a->src.st.st_dev || b->src.st.st_ino != a->src.st.st_ino)
            continue;
        const char *fb;
        _cleanup_close_ int fp = safe_open_parent(upper, b->path, &fb);
        if (fp < 0 || linkat(fp, fb, up, base, 0) < 0)
            return -1;
        *done = true;
        return 0;
    }
    return 0;
}

static int put_copy(struct revert *r, const struct act *a, int upper, int up, const char *base,
                    txbox_error *err)
{
    bool linked;
    if (put_link(r, a, upper, up, base, &linked) < 0)
        return tx_errno(err, errno, "cannot link the old version of %s", a->path);
    if (linked)
        return 0;
    const char *sb;
    _cleanup_close_ int sp = safe_open_parent(a->src.root, a->src.rel, &sb);
    if (sp < 0)
        return tx_errno(err, errno, "cannot open the old version of %s", a->path);
    /* a pre-image (ours, in .txbox) may lack our read permission; the
     * workspace's entries are never touched before the commit point */
    if ((a->src.root == r->tundo ? tree_copy_granting(sp, sb, up, base, err)
                                 : tree_copy(sp, sb, up, base, NULL, err)) < 0)
        return tx_err_ctx(err, "cannot copy the old version of %s", a->path);
    if (a->mode != (mode_t)-1 && !S_ISLNK(a->src.st.st_mode) && fchmodat(up, base, a->mode, 0) < 0)
        return tx_errno(err, errno, "cannot set the mode of %s", a->path);
    return 0;
}

static int put_write(const struct act *a, int up, const char *base, txbox_error *err)
{
    _cleanup_close_ int fd = openat(up, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write_all(fd, a->data, a->len) < 0)
        return tx_errno(err, errno, "cannot write the merged %s", a->path);
    (void)fchown(fd, a->meta.st_uid, a->meta.st_gid);
    if (fchmod(fd, a->mode & 07777) < 0)
        return tx_errno(err, errno, "cannot set the mode of %s", a->path);
    return 0;
}

static int write_act(struct revert *r, const struct act *a, int upper, struct fs_syncset *sync,
                     txbox_error *err)
{
    if (a->k == A_DELETE)
        return 0;
    if (a->k == A_META)
        return a->xattrs ? undo_stage_xattrs(upper, r->tundo, r->t, a->path, sync, err) : 0;
    const char *base = NULL;
    _cleanup_close_ int up =
        a->top ? stage_parent(upper, a->path, &base, sync, err) : safe_open_parent(upper, a->path, &base);
    if (up < 0)
        return a->top ? -1 : tx_errno(err, errno, "cannot stage %s", a->path);
    if (a->k == A_PUT)
        return put_copy(r, a, upper, up, base, err);
    if (a->k == A_WRITE)
        return put_write(a, up, base, err);
    if (mkdirat(up, base, 0700) < 0)
        return tx_errno(err, errno, "cannot stage the directory %s", a->path);
    return 0;
}

/* The directories made, once filled: their owner, mode and times. */
static int finish_dirs(struct revert *r, int upper, txbox_error *err)
{
    for (size_t i = r->nacts; i-- > 0;) {
        const struct act *a = &r->acts[i];
        if (a->k != A_MKDIR)
            continue;
        const char *base;
        _cleanup_close_ int up = safe_open_parent(upper, a->path, &base);
        struct timespec ts[2] = {a->meta.st_atim, a->meta.st_mtim};
        if (up < 0)
            return tx_errno(err, errno, "cannot stage the directory %s", a->path);
        (void)fchownat(up, base, a->meta.st_uid, a->meta.st_gid, AT_SYMLINK_NOFOLLOW);
        if (fchmodat(up, base, a->meta.st_mode & 07777, 0) < 0)
            return tx_errno(err, errno, "cannot set the mode of %s", a->path);
        (void)utimensat(up, base, ts, AT_SYMLINK_NOFOLLOW);
    }
    return 0;
}

static size_t depth_of(const char *p)
{
    size_t d = *p ? 1 : 0;
    for (; *p; p++)
        d += *p == '/';
    return d;
}

static int by_depth(const void *a, const void *b)
{
    const struct act *x = *(struct act *const *)a, *y = *(struct act *const *)b;
    size_t dx = depth_of(x->path), dy = depth_of(y->path);
    return (dx < dy) - (dx > dy);
}

static int list_ops(struct revert *r, int upper, struct tx_ops *ops, txbox_error *err)
{
    struct act **metas = xcalloc(r->nacts + 1, sizeof *metas);
    size_t nm = 0;
    for (size_t i = 0; i < r->nacts; i++) {
        const struct act *a = &r->acts[i];
        if (!a->top)
            continue;
        if (a->k == A_META) {
            metas[nm++] = &r->acts[i];
            continue;
        }
        struct tx_op *o = op_add(ops, a->k == A_DELETE ? OP_DELETE : OP_REPLACE, a->path);
        o->had_old = a->had_old;
        o->old_dir = a->had_old && S_ISDIR(a->old.st_mode);
        if (a->had_old)
            meta_entry(&a->old, &o->old);
        if (a->k == A_DELETE)
            continue;
        struct stat st;
        const char *base;
        _cleanup_close_ int up = safe_open_parent(upper, a->path, &base);
        if (up < 0 || fstatat(up, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            free(metas);
            return tx_errno(err, errno, "cannot stage %s", a->path);
        }
        meta_entry(&st, &o->nw);
        o->new_dir = S_ISDIR(st.st_mode);
    }
    qsort(metas, nm, sizeof *metas, by_depth); /* deepest first (journal.c, I4) */
    for (size_t i = 0; i < nm; i++) {
        struct tx_op *o = op_add(ops, OP_META, metas[i]->path);
        o->nw = metas[i]->nw;
        meta_of(&metas[i]->old, &o->old);
        o->had_old = metas[i]->xattrs;
        o->old_dir = o->new_dir = 1;
    }
    free(metas);
    return 0;
}

int revert_build(struct revert *r, int upper, struct tx_ops *ops, struct fs_syncset *pre, txbox_error *err)
{
    for (size_t i = 0; i < r->nacts; i++)
        if (write_act(r, &r->acts[i], upper, pre, err) < 0)
            return -1;
    if (finish_dirs(r, upper, err) < 0)
        return -1;
    pre->all = true; /* the copies' data and directories: one syncfs with the journal */
    fs_syncset_add(pre, upper);
    return list_ops(r, upper, ops, err);
}

void revert_free(struct revert *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nroots; i++)
        node_free(r->roots[i]);
    free(r->roots);
    for (size_t i = 0; i < r->nacts; i++) {
        free(r->acts[i].path);
        side_free(&r->acts[i].src);
    }
    free(r->acts);
    for (size_t i = 0; i < r->nstrs; i++)
        free(r->strs[i]);
    free(r->strs);
    for (size_t i = 0; i < r->nbuilt; i++)
        free(r->built[i]);
    free(r->built);
    if (r->cundo)
        for (size_t c = 0; c < r->later->n; c++)
            if (r->cundo[c] >= 0)
                close(r->cundo[c]);
    free(r->cundo);
    free(r->ix.v);
    free(r->ix.m);
    json_decref(r->conflicts);
    json_decref(r->merged);
    json_decref(r->overwritten);
    json_decref(r->skipped);
    free(r);
}
