/* The write set of a commit as the audit log records it: every path with
 * its type, mode, size and SHA-256, before and after; hashed beside the
 * commit's sync (store_prep) or after the apply (recovery). */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include <nettle/sha2.h>

#include "safepath.h"
#include "store.h"
#include "store_int.h"

/* ---- hashing ---- */

/* A digest in lower-case hex, NUL-terminated (a commit formats one a
 * file: a table, not 32 snprintf calls). */
static void digest_hex(const uint8_t md[SHA256_DIGEST_SIZE], char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = 0;
}

/* Feeds n bytes of fd from off into ctx (pread: the data of a sparse
 * file's extents); buf: a buffer of bufsz. */
static int hash_range(int fd, off_t off, uint64_t n, struct sha256_ctx *ctx, uint8_t *buf, size_t bufsz)
{
    while (n) {
        ssize_t r = pread(fd, buf, n < bufsz ? (size_t)n : bufsz, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -1 : (errno = EIO, -1); /* shorter than it was */
        sha256_update(ctx, (size_t)r, buf);
        off += r;
        n -= (uint64_t)r;
    }
    return 0;
}

/* A hole's n zero bytes, fed without reading them. */
static void hash_zeros(uint64_t n, struct sha256_ctx *ctx)
{
    static const uint8_t zeros[1 << 16];
    for (; n; n -= n < sizeof zeros ? n : sizeof zeros)
        sha256_update(ctx, n < sizeof zeros ? (size_t)n : sizeof zeros, zeros);
}

/* A sparse file (fewer blocks than its size says): its extents of data
 * read (SEEK_DATA, SEEK_HOLE), its holes hashed as the zeros they read
 * as, unread: a 100 GiB file of a few data blocks is one pass of SHA-256
 * over zeros, not 100 GiB read from the page cache as well. The digest is
 * the one of its whole content. 1: not supported here (the caller reads
 * it all). */
static int hash_sparse(int fd, uint64_t size, struct sha256_ctx *ctx, uint8_t *buf, size_t bufsz)
{
    uint64_t pos = 0;
    while (pos < size) {
        off_t data = lseek(fd, (off_t)pos, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            data = (off_t)size; /* a hole to the end */
        else if (data < 0)
            return pos == 0 && (errno == EINVAL || errno == ENOTSUP) ? 1 : -1;
        if ((uint64_t)data > size)
            data = (off_t)size;
        hash_zeros((uint64_t)data - pos, ctx);
        if ((uint64_t)data >= size)
            break;
        off_t hole = lseek(fd, data, SEEK_HOLE);
        if (hole < 0)
            return -1;
        if ((uint64_t)hole > size)
            hole = (off_t)size;
        if (hash_range(fd, data, (uint64_t)(hole - data), ctx, buf, bufsz) < 0)
            return -1;
        pos = (uint64_t)hole;
    }
    return 0;
}

/* SHA-256 of the regular file open as fd (hex) and its size. */
static int hash_fd(int fd, char hex[65], uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        errno = EINVAL;
        return -1;
    }
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    /* on the stack: the write set may be hashed beside the commit, in a
     * thread (store_prep); a thread-local buffer would be in every thread's
     * static TLS, the proxy's small-stacked threads' too */
    uint8_t buf[1 << 17];
    uint64_t total = 0;
    int rc = 0;
    bool sparse = (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size;
    int s = sparse ? hash_sparse(fd, (uint64_t)st.st_size, &ctx, buf, sizeof buf) : 1;
    if (s < 0)
        rc = -1;
    else if (s == 0)
        total = (uint64_t)st.st_size;
    else
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    for (; s > 0;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -1;
            break;
        }
        if (r == 0)
            break;
        sha256_update(&ctx, (size_t)r, buf);
        total += (uint64_t)r;
    }
    if (rc == 0) {
        uint8_t md[SHA256_DIGEST_SIZE];
        sha256_digest(&ctx, sizeof md, md);
        digest_hex(md, hex);
        *size = total;
    }
    return rc;
}

int hash_file_at(int dirfd, const char *name, char hex[65], uint64_t *size)
{
    _cleanup_close_ int fd =
        openat_noatime(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    return fd < 0 ? -1 : hash_fd(fd, hex, size);
}

void hash_bytes_hex(const void *p, size_t n, char hex[65])
{
    struct sha256_ctx ctx;
    uint8_t md[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, n, p);
    sha256_digest(&ctx, sizeof md, md);
    digest_hex(md, hex);
}

/* ---- the write set of a commit ---- */

/* ---- hashes noted before the walk (store.h) ----
 *
 * An open-addressing table in one block (ws->hashes), keyed by device and
 * inode; its size and mtime must match too. At most NOTES_MAX files: past
 * that, the rest are hashed as before. */
#define NOTES_MAX (1u << 16)

struct hash_note {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    bool used;
    char hex[65];
};

struct ws_hashes {
    size_t n, cap; /* cap: a power of two */
    struct hash_note v[];
};

static size_t note_slot(const struct ws_hashes *h, dev_t dev, ino_t ino)
{
    uint64_t k = ((uint64_t)ino ^ ((uint64_t)dev << 32)) * 0x9e3779b97f4a7c15ull;
    size_t i = (size_t)(k >> 32) & (h->cap - 1);
    while (h->v[i].used && !(h->v[i].ino == ino && h->v[i].dev == dev))
        i = (i + 1) & (h->cap - 1);
    return i;
}

void store_hash_note(txbox_ws *ws, const struct stat *st, const void *data, size_t len)
{
    struct ws_hashes *h = ws ? ws->hashes : NULL;
    if (!ws || !S_ISREG(st->st_mode) || (uint64_t)st->st_size != len)
        return;
    if (!h || (h->n + 1) * 2 > h->cap) {
        size_t cap = h ? h->cap * 2 : 1024;
        if (cap > 2 * NOTES_MAX)
            return;
        struct ws_hashes *g = xcalloc(1, sizeof *g + cap * sizeof g->v[0]);
        g->cap = cap;
        for (size_t i = 0; h && i < h->cap; i++)
            if (h->v[i].used) {
                g->v[note_slot(g, h->v[i].dev, h->v[i].ino)] = h->v[i];
                g->n++;
            }
        free(h);
        ws->hashes = h = g;
    }
    struct hash_note *x = &h->v[note_slot(h, st->st_dev, st->st_ino)];
    if (!x->used)
        h->n++;
    *x = (struct hash_note){
        .dev = st->st_dev, .ino = st->st_ino, .size = st->st_size, .mtime = st->st_mtim, .used = true};
    hash_bytes_hex(data, len, x->hex);
}

void store_hash_forget(txbox_ws *ws)
{
    free(ws->hashes);
    ws->hashes = NULL;
}

static bool hash_noted(const struct ws_hashes *h, const struct stat *st, char hex[65])
{
    if (!h)
        return false;
    const struct hash_note *x = &h->v[note_slot(h, st->st_dev, st->st_ino)];
    if (!x->used || x->size != st->st_size || x->mtime.tv_sec != st->st_mtim.tv_sec ||
        x->mtime.tv_nsec != st->st_mtim.tv_nsec)
        return false;
    memcpy(hex, x->hex, 65);
    return true;
}

struct ent {
    char *sub;
    struct side s;
    bool deferred; /* a regular file, its hash left to hash_deferred */
};

struct ents {
    struct ent *v;
    size_t n, cap;
    uint64_t bytes; /* regular file and symlink bytes, all of the tree */
    bool truncated;
    /* the tree's root, base beneath root: where hash_deferred opens its
     * files again (root -1: hashed as the walk finds them) */
    int root;
    const char *base;
    const struct ws_hashes *noted; /* the upper's hashes already known (store_hash_note) */
};

static char type_of(mode_t m)
{
    return S_ISREG(m)    ? 'f'
           : S_ISDIR(m)  ? 'd'
           : S_ISLNK(m)  ? 'l'
           : S_ISFIFO(m) ? 'p'
           : S_ISSOCK(m) ? 's'
                         : '?';
}

static void describe(int dirfd, const char *name, const struct stat *st, struct side *s, bool defer)
{
    memset(s, 0, sizeof *s);
    s->type = type_of(st->st_mode);
    s->mode = st->st_mode & 07777;
    if (S_ISREG(st->st_mode)) {
        s->size = (uint64_t)st->st_size;
        if (!defer)
            s->hashed = hash_file_at(dirfd, name, s->hash, &s->size) == 0;
    } else if (S_ISLNK(st->st_mode)) {
        char t[PATH_MAX];
        ssize_t n = readlinkat(dirfd, name, t, sizeof t);
        if (n >= 0) {
            s->size = (uint64_t)n;
            hash_bytes_hex(t, (size_t)n, s->hash);
            s->hashed = true;
        }
    }
}

static char *join_sub(const char *a, const char *b) { return *a ? xasprintf("%s/%s", a, b) : xstrdup(b); }

/* One entry of a tree into e, sub its path in the tree, st its stat; at,
 * name: where it lies (a link's target is read there; -1: nowhere). */
static void ent_add(struct ents *e, const char *sub, const struct stat *st, int at, const char *name)
{
    if (S_ISREG(st->st_mode) || S_ISLNK(st->st_mode))
        e->bytes += (uint64_t)st->st_size;
    if (e->n >= ROWS_CAP) {
        e->truncated = true;
        return;
    }
    if (e->n == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 16;
        e->v = xrealloc(e->v, e->cap * sizeof *e->v);
    }
    struct ent *x = &e->v[e->n++];
    x->sub = xstrdup(sub);
    char hex[65];
    /* an empty file's hash is known without opening it */
    bool noted = S_ISREG(st->st_mode) &&
                 (st->st_size == 0 ? (hash_bytes_hex("", 0, hex), true) : hash_noted(e->noted, st, hex));
    /* a file's hash is left for later where its path can be opened
     * again from the tree's root (hash_deferred) */
    x->deferred =
        !noted && S_ISREG(st->st_mode) && e->root >= 0 && strlen(e->base) + strlen(sub) + 2 < PATH_MAX;
    describe(at, name, st, &x->s, x->deferred || noted || at < 0);
    if (noted) {
        x->s.hashed = true;
        memcpy(x->s.hash, hex, sizeof hex);
    }
}

/* Every entry of the tree dirfd/name into e (sub paths relative to it). */
static void walk(int at, const char *name, const char *sub, struct ents *e, unsigned depth)
{
    struct stat st;
    if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    ent_add(e, sub, &st, at, name);
    if (!S_ISDIR(st.st_mode) || depth > 4096)
        return;
    _cleanup_dir_ DIR *d = opendir_at(at, name);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        _cleanup_free_ char *s = join_sub(sub, de->d_name);
        walk(dirfd(d), de->d_name, s, e, depth + 1);
    }
}

static void ents_free(struct ents *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].sub);
    free(e->v);
    memset(e, 0, sizeof *e);
}

static int ent_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ent *)a)->sub, ((const struct ent *)b)->sub);
}

static void row_add(struct rows *r, const char *path, const char *sub, const char *kind, size_t op,
                    const struct side *b, const struct side *a)
{
    if (r->n >= ROWS_CAP) {
        r->dropped++;
        return;
    }
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 32;
        r->v = xrealloc(r->v, r->cap * sizeof *r->v);
    }
    struct row *x = &r->v[r->n++];
    memset(x, 0, sizeof *x);
    x->path = *sub ? xasprintf("%s/%s", path, sub) : xstrdup(path);
    x->sub = xstrdup(sub);
    x->kind = kind;
    x->op = op;
    if (b)
        x->b = *b;
    if (a)
        x->a = *a;
}

void store_rows_free(struct rows *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].path);
        free(r->v[i].sub);
    }
    free(r->v);
    memset(r, 0, sizeof *r);
}

static bool side_differs(const struct side *a, const struct side *b)
{
    if (a->type != b->type || a->mode != b->mode)
        return true;
    if (a->type == 'f' || a->type == 'l')
        return a->size != b->size || a->hashed != b->hashed || strcmp(a->hash, b->hash);
    return false;
}

/* Old tree o and new tree n of one operation, merged by sub path. */
static void merge(struct rows *r, const char *path, size_t op, struct ents *o, struct ents *n)
{
    if (o->n)
        qsort(o->v, o->n, sizeof *o->v, ent_cmp);
    if (n->n)
        qsort(n->v, n->n, sizeof *n->v, ent_cmp);
    size_t i = 0, j = 0;
    while (i < o->n || j < n->n) {
        int c = i == o->n ? 1 : j == n->n ? -1 : strcmp(o->v[i].sub, n->v[j].sub);
        if (c < 0) {
            row_add(r, path, o->v[i].sub, "deleted", op, &o->v[i].s, NULL);
            i++;
        } else if (c > 0) {
            row_add(r, path, n->v[j].sub, "added", op, NULL, &n->v[j].s);
            j++;
        } else {
            struct side *b = &o->v[i].s, *a = &n->v[j].s;
            if (b->type != a->type) {
                row_add(r, path, o->v[i].sub, "deleted", op, b, NULL);
                row_add(r, path, n->v[j].sub, "added", op, NULL, a);
            } else if (side_differs(b, a)) {
                row_add(r, path, o->v[i].sub, "modified", op, b, a);
            }
            i++;
            j++;
        }
    }
    if (o->truncated || n->truncated)
        r->dropped++;
}

/* An operation's new tree from the scan's record of it (tx.h: ops->news),
 * as walk would find it in the upper (root) without a stat each: only a
 * link is read, under its parent. */
static void walk_news(int root, const char *path, const struct tx_new *news, size_t n, struct ents *e)
{
    e->root = root;
    e->base = path;
    size_t pl = strlen(path);
    for (size_t i = 0; i < n; i++) {
        const char *sub = news[i].path[pl] == '/' ? news[i].path + pl + 1 : "";
        const char *base = "";
        _cleanup_close_ int pfd =
            S_ISLNK(news[i].st.st_mode) ? safe_open_parent(root, news[i].path, &base) : -1;
        ent_add(e, sub, &news[i].st, pfd, base);
    }
}

/* Every entry of the tree at path (beneath root) into e. */
static void walk_path(int root, const char *path, struct ents *e)
{
    const char *base = NULL;
    e->root = root;
    e->base = path;
    _cleanup_close_ int parent = safe_open_parent(root, path, &base);
    if (parent >= 0)
        walk(parent, base, "", e, 0);
}

/* ---- the files' hashes, in two threads ----
 *
 * The walks leave the hash of each regular file for later (ent.deferred);
 * then the files are hashed by this thread and one more, each taking the
 * next file in turn: a write set of many files is mostly system calls
 * (open, read, close), which the two CPUs of a small machine do side by
 * side while the commit's main thread waits for its sync. A file is
 * opened again by its path beneath its tree's root (safe_openat: no
 * symlink, no escape), as the walk found it: nothing else writes the
 * upper, and the workspace is under the workspace lock. A file that
 * cannot be opened so has no hash, as one the walk could not read. */
#define HASH_THREAD_MIN 64 /* files; fewer are hashed by this thread alone */

struct hash_job {
    struct ent *e;
    const struct ents *tree;
};

struct hash_jobs {
    struct hash_job *v;
    size_t n;
    atomic_size_t next;
};

static void hash_job(const struct hash_job *j)
{
    struct ent *e = j->e;
    char path[PATH_MAX];
    snprintf(path, sizeof path, *e->sub ? "%s/%s" : "%s", j->tree->base, e->sub);
    _cleanup_close_ int fd = safe_openat_noatime(j->tree->root, path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    e->s.hashed = fd >= 0 && hash_fd(fd, e->s.hash, &e->s.size) == 0;
}

static void *hash_worker(void *arg)
{
    struct hash_jobs *q = arg;
    for (size_t i; (i = atomic_fetch_add(&q->next, 1)) < q->n;)
        hash_job(&q->v[i]);
    return NULL;
}

static void hash_deferred(struct ents *trees, size_t ntrees)
{
    struct hash_jobs q = {0};
    size_t cap = 0;
    for (size_t t = 0; t < ntrees; t++)
        for (size_t k = 0; k < trees[t].n; k++) {
            if (!trees[t].v[k].deferred)
                continue;
            if (q.n == cap)
                q.v = xrealloc(q.v, (cap = cap ? cap * 2 : 64) * sizeof *q.v);
            q.v[q.n++] = (struct hash_job){.e = &trees[t].v[k], .tree = &trees[t]};
        }
    atomic_init(&q.next, 0);
    pthread_t th;
    bool two = q.n >= HASH_THREAD_MIN && thread_start(&th, hash_worker, &q) == 0;
    hash_worker(&q);
    if (two)
        pthread_join(th, NULL);
    free(q.v);
}

/* The write set's rows. Before the apply (ahead): the old entries are at
 * their paths in the workspace, the new ones at theirs in the upper
 * (newfd). After it: the old ones in tx/ID/undo/N (undofd), the new ones
 * in the workspace (newfd = ws->fd). The same files either way. Every
 * operation's trees are walked first, their files hashed together
 * (hash_deferred), then merged into rows in the operations' order. */
static void collect_rows(const struct tx_ops *ops, int wsfd, int undofd, bool ahead, int newfd,
                         const struct ws_hashes *noted, struct rows *r)
{
    /* trees[2i]: operation i's old tree, trees[2i+1]: its new one */
    struct ents *trees = xcalloc(2 * ops->n + 1, sizeof *trees);
    char(*un)[32] = xcalloc(ops->n + 1, sizeof *un);
    for (size_t i = 0; i < ops->n; i++) {
        const struct tx_op *o = &ops->v[i];
        struct ents *old = &trees[2 * i], *nw = &trees[2 * i + 1];
        old->root = nw->root = -1;
        if (o->kind == OP_META)
            continue;
        snprintf(un[i], sizeof un[i], "%zu", i);
        if (!ahead && undofd >= 0) {
            old->root = undofd;
            old->base = un[i];
            walk(undofd, un[i], "", old, 0);
        } else if (ahead && (o->kind == OP_DELETE || o->had_old)) {
            walk_path(wsfd, o->path, old);
        }
        nw->noted = ahead ? noted : NULL; /* the upper's files */
        size_t nn;
        const struct tx_new *news = ahead ? ops_news(ops, o, &nn) : NULL;
        if (news)
            walk_news(newfd, o->path, news, nn, nw);
        else if (o->kind == OP_REPLACE)
            walk_path(newfd, o->path, nw);
    }
    hash_deferred(trees, 2 * ops->n);
    for (size_t i = 0; i < ops->n; i++) {
        const struct tx_op *o = &ops->v[i];
        if (o->kind == OP_META) {
            if (o->nw.mode != o->old.mode || o->nw.uid != o->old.uid || o->nw.gid != o->old.gid) {
                struct side b = {.type = 'd', .mode = o->old.mode}, a = {.type = 'd', .mode = o->nw.mode};
                row_add(r, o->path, "", "modified", i, &b, &a);
            }
            continue;
        }
        r->retained += trees[2 * i].bytes;
        merge(r, o->path, i, &trees[2 * i], &trees[2 * i + 1]);
        ents_free(&trees[2 * i]);
        ents_free(&trees[2 * i + 1]);
    }
    free(trees);
    free(un);
}

void store_collect(txbox_ws *ws, int txfd, const struct tx_ops *ops, struct rows *r)
{
    _cleanup_close_ int undo = openat(txfd, "undo", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    collect_rows(ops, ws->fd, undo, false, ws->fd, NULL, r);
}

/* ---- the write set, hashed beside the commit ---- */

struct store_prep {
    pthread_t th;
    bool running, done;
    int wsfd, upper;
    const struct tx_ops *ops;
    const struct ws_hashes *noted;
    struct rows rows;
};

static void *prep_main(void *arg)
{
    struct store_prep *p = arg;
    collect_rows(p->ops, p->wsfd, -1, true, p->upper, p->noted, &p->rows);
    return NULL;
}

struct store_prep *store_prep_begin(txbox_ws *ws, int txfd, const struct tx_ops *ops)
{
    struct store_prep *p = xcalloc(1, sizeof *p);
    p->wsfd = ws->fd;
    p->ops = ops;
    p->noted = ws->hashes;
    p->upper = openat(txfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (p->upper < 0) { /* no upper (nothing new): the rows after the apply */
        free(p);
        return NULL;
    }
    p->running = thread_start(&p->th, prep_main, p) == 0;
    return p;
}

void store_prep_wait(struct store_prep *p)
{
    if (!p || p->done)
        return;
    if (p->running)
        pthread_join(p->th, NULL);
    else /* no thread could be made: here, now */
        collect_rows(p->ops, p->wsfd, -1, true, p->upper, p->noted, &p->rows);
    p->running = false;
    p->done = true;
}

bool store_prep_take(struct store_prep *p, const struct tx_ops *ops, struct rows *rows)
{
    if (!p || !p->done || p->ops != ops)
        return false;
    *rows = p->rows;
    memset(&p->rows, 0, sizeof p->rows);
    return true;
}

void store_prep_free(struct store_prep *p)
{
    if (!p)
        return;
    store_prep_wait(p); /* a thread is never left reading */
    store_rows_free(&p->rows);
    close(p->upper);
    free(p);
}
