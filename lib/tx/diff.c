/* diff: what a committed transaction changed, read from its journal and
 * the retained pre-images (tx/ID/undo/N) of it and of the commits after
 * it. */
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <sqlite3.h>

#include "fsops.h"
#include "history.h"
#include "result.h"
#include "safepath.h"
#include "stage.h"
#include "store.h"

#define DIFF_MAX_BYTES (16u << 20)

extern char **environ;

struct image {
    bool found;
    char *data; /* file contents or symlink target */
    size_t len;
};

/* Reads the entry at dirfd/rel (no symlinks followed on the way) if its
 * type and hash are what the log says. */
static bool read_image(int dirfd, const char *rel, char type, const char *hash, struct image *im)
{
    const char *base = NULL;
    _cleanup_close_ int pd = *rel ? safe_open_parent(dirfd, rel, &base) : -1;
    if (pd < 0)
        return false;
    struct stat st;
    if (fstatat(pd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return false;
    if (type == 'l' && S_ISLNK(st.st_mode)) {
        char t[PATH_MAX];
        ssize_t n = readlinkat(pd, base, t, sizeof t);
        if (n < 0)
            return false;
        im->data = xmalloc((size_t)n + 1);
        memcpy(im->data, t, (size_t)n);
        im->data[n] = 0;
        im->len = (size_t)n;
    } else if (type == 'f' && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= DIFF_MAX_BYTES) {
        _cleanup_close_ int fd = openat(pd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
            return false;
        im->data = xmalloc((size_t)st.st_size + 1);
        ssize_t n = read_all(fd, im->data, (size_t)st.st_size + 1);
        if (n != st.st_size) {
            free(im->data);
            im->data = NULL;
            return false;
        }
        im->data[n] = 0;
        im->len = (size_t)n;
    } else {
        return false;
    }
    /* Verify against the log. */
    char hex[65];
    hash_bytes_hex(im->data, im->len, hex);
    if (hash && strcmp(hex, hash)) {
        free(im->data);
        im->data = NULL;
        return false;
    }
    im->found = true;
    return true;
}

struct dctx {
    txbox_ws *ws;
    int tundo;
    struct history later;
    FILE *out;
};

static char *after_prefix(const char *path, const char *q)
{
    size_t l = strlen(q);
    if (!*q)
        return xstrdup(path);
    if (strncmp(path, q, l) || (path[l] && path[l] != '/'))
        return NULL;
    return xstrdup(path[l] ? path + l + 1 : "");
}

/* Finds the content that path had with the given hash: in T's pre-images
 * (before_rel), then in the pre-images of each later commit that replaced
 * path or a directory above it, then in the workspace. */
static void locate(struct dctx *d, const char *path, char type, const char *hash, const char *before_rel,
                   struct image *im)
{
    memset(im, 0, sizeof *im);
    if (before_rel && d->tundo >= 0 && read_image(d->tundo, before_rel, type, hash, im))
        return;
    for (size_t i = 0; i < d->later.n; i++) {
        const struct commit *x = &d->later.v[i];
        char xn[32];
        idname(xn, x->id);
        _cleanup_close_ int xfd = open_dir_at(d->ws->txd, xn);
        _cleanup_close_ int xu = xfd >= 0 ? open_dir_at(xfd, "undo") : -1;
        if (xu < 0)
            continue;
        for (size_t m = 0; m < x->j.ops.n; m++) {
            const struct tx_op *o = &x->j.ops.v[m];
            if (o->kind == OP_META)
                continue;
            _cleanup_free_ char *rest = after_prefix(path, o->path);
            if (!rest)
                continue;
            _cleanup_free_ char *rel = *rest ? xasprintf("%zu/%s", m, rest) : xasprintf("%zu", m);
            if (read_image(xu, rel, type, hash, im))
                return;
        }
    }
    (void)read_image(d->ws->fd, path, type, hash, im);
}

static bool is_binary(const struct image *im)
{
    return memchr(im->data, 0, im->len < 8000 ? im->len : 8000) != NULL;
}

static int memfd_of(const struct image *im)
{
    int fd = memfd_create("txbox-diff", 0); /* inherited by diff(1) */
    if (fd < 0)
        return -1;
    if (write_all(fd, im->data, im->len) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* diff -u of two images (NULL: /dev/null) with the given labels. */
static int run_diff(FILE *out, const struct image *a, const struct image *b, const char *la, const char *lb,
                    txbox_error *err)
{
    int fa = a ? memfd_of(a) : -1, fb = b ? memfd_of(b) : -1;
    char pa[64] = "/dev/null", pb[64] = "/dev/null";
    if ((a && fa < 0) || (b && fb < 0)) {
        if (fa >= 0)
            close(fa);
        if (fb >= 0)
            close(fb);
        return tx_errno(err, errno, "cannot prepare the diff");
    }
    if (a)
        snprintf(pa, sizeof pa, "/proc/self/fd/%d", fa);
    if (b)
        snprintf(pb, sizeof pb, "/proc/self/fd/%d", fb);
    char *argv[] = {(char *)"diff",
                    (char *)"-u",
                    (char *)"--label",
                    (char *)la,
                    (char *)"--label",
                    (char *)lb,
                    pa,
                    pb,
                    NULL};
    fflush(out);
    posix_spawn_file_actions_t fa_;
    posix_spawn_file_actions_init(&fa_);
    if (fileno(out) != 1)
        posix_spawn_file_actions_adddup2(&fa_, fileno(out), 1);
    pid_t pid;
    int rc = posix_spawnp(&pid, "diff", &fa_, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa_);
    if (fa >= 0)
        close(fa);
    if (fb >= 0)
        close(fb);
    if (rc != 0)
        return tx_errno(err, rc, "cannot run diff(1) (Debian package diffutils)");
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return tx_errno(err, errno, "waitpid");
    if (!WIFEXITED(st) || WEXITSTATUS(st) > 1)
        return tx_err(err, EIO, "diff(1) failed");
    return 0;
}

int txbox_diff_text(FILE *out, const char *a, size_t alen, const char *b, size_t blen, const char *la,
                    const char *lb, txbox_error *err)
{
    struct image ia = {.found = true, .data = (char *)a, .len = alen};
    struct image ib = {.found = true, .data = (char *)b, .len = blen};
    return run_diff(out, a ? &ia : NULL, b ? &ib : NULL, a ? la : "/dev/null", b ? lb : "/dev/null", err);
}

static const char *type_word(char t)
{
    switch (t) {
    case 'f':
        return "file";
    case 'd':
        return "directory";
    case 'l':
        return "symlink";
    case 'p':
        return "fifo";
    case 's':
        return "socket";
    default:
        return "entry";
    }
}

struct drow {
    char *path, *kind, *before_rel, *hb, *ha;
    char tb, ta;
    long long sb, sa;
    int mb, ma;
};

static void short_hash(char out[16], const char *h) { snprintf(out, 16, "%.12s", h ? h : "-"); }

static int diff_row(struct dctx *d, const struct drow *r, txbox_error *err)
{
    FILE *out = d->out;
    json_t *pj = json_text(r->path, strlen(r->path), true);
    const char *p = json_string_value(pj);
    int rc = 0;
    _cleanup_free_ char *la = xasprintf("a/%s", p), *lb = xasprintf("b/%s", p);
    char t = r->ta ? r->ta : r->tb;
    fprintf(out, "diff --txbox a/%s b/%s\n", p, p); /* git's header; wording: not txbox's */
    if (r->tb && r->ta && r->mb != r->ma)
        fprintf(out, "old mode %04o\nnew mode %04o\n", (unsigned)r->mb, (unsigned)r->ma);
    if (!r->tb)
        fprintf(out, "new %s mode %04o\n", type_word(r->ta), (unsigned)r->ma);
    else if (!r->ta)
        fprintf(out, "deleted %s mode %04o\n", type_word(r->tb), (unsigned)r->mb);
    if (t != 'f' && t != 'l') {
        json_decref(pj);
        return 0;
    }
    struct image a = {0}, b = {0};
    if (r->tb)
        locate(d, r->path, r->tb, r->hb, r->before_rel, &a);
    if (r->ta)
        locate(d, r->path, r->ta, r->ha, NULL, &b);
    bool missing = (r->tb && !a.found) || (r->ta && !b.found);
    if (t == 'l' && !missing) {
        if (a.found)
            fprintf(out, "-> %s (before)\n", a.data);
        if (b.found)
            fprintf(out, "-> %s (after)\n", b.data);
    } else if (missing || (a.found && is_binary(&a)) || (b.found && is_binary(&b))) {
        char h1[16], h2[16];
        short_hash(h1, r->hb);
        short_hash(h2, r->ha);
        fprintf(out, "%s %s: %lld -> %lld bytes, sha256 %s -> %s", missing ? "contents of" : "binary", p,
                r->tb ? r->sb : 0, r->ta ? r->sa : 0, h1, h2);
        if (missing)
            fprintf(out, " (%s no longer retained: pruned by gc, or changed outside txbox)",
                    r->tb && !a.found ? "the before-image is" : "the after-image is");
        fputc('\n', out);
    } else {
        rc = run_diff(out, r->tb ? &a : NULL, r->ta ? &b : NULL, r->tb ? la : "/dev/null",
                      r->ta ? lb : "/dev/null", err);
    }
    free(a.data);
    free(b.data);
    json_decref(pj);
    return rc;
}

static char *col_dup(sqlite3_stmt *st, int i)
{
    const void *v = sqlite3_column_blob(st, i);
    int n = sqlite3_column_bytes(st, i);
    if (!v)
        return NULL;
    char *s = xmalloc((size_t)n + 1);
    memcpy(s, v, (size_t)n);
    s[n] = 0;
    return s;
}

static char col_type(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (char)t[0] : 0;
}

/* The commits from gen on, as far as they are complete (no lock: a commit
 * in progress ends the list). */
static void load_later(txbox_ws *ws, uint64_t from, struct history *h)
{
    memset(h, 0, sizeof *h);
    uint64_t gen = 0;
    if (ws_read_gen(ws, &gen, NULL) < 0)
        return;
    for (uint64_t g = from; g <= gen; g++) {
        struct commit c;
        if (history_load_commit(ws, g, &c, NULL) < 0)
            continue; /* its record archived (compact.c): it has no pre-images */
        h->v = xrealloc(h->v, (h->n + 1) * sizeof *h->v);
        h->v[h->n++] = c;
    }
}

int txbox_diff(txbox_ws *ws, const char *tx, FILE *out, txbox_error *err)
{
    uint64_t id;
    sqlite3 *db;
    if (store_open_for(ws, tx, &id, &db, err) < 0)
        return -1;
    sqlite3_stmt *st = NULL;
    int rc =
        sqlite3_prepare_v2(db, "SELECT outcome, gen, changes_truncated FROM tx WHERE id=?1", -1, &st, NULL);
    _cleanup_free_ char *outcome = NULL;
    sqlite3_int64 gen = 0;
    bool truncated = false;
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            outcome = col_dup(st, 0);
            gen = sqlite3_column_int64(st, 1);
            truncated = sqlite3_column_int(st, 2);
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_ROW) {
        store_close(db);
        if (rc == SQLITE_DONE)
            return tx_err(err, ENOENT, "transaction %s is not in the audit log", tx);
        return tx_err(err, EIO, "the audit log cannot be read");
    }
    if (!outcome || strcmp(outcome, "committed") || gen <= 0) {
        store_close(db);
        fprintf(out, "transaction %s: %s; it applied no change to the workspace\n", tx,
                outcome ? outcome : "?");
        return 0;
    }
    struct dctx d = {.ws = ws, .tundo = -1, .out = out};
    char tn[32];
    idname(tn, id);
    _cleanup_close_ int tfd = open_dir_at(ws->txd, tn);
    if (tfd >= 0)
        d.tundo = open_dir_at(tfd, "undo");
    load_later(ws, (uint64_t)gen + 1, &d.later);
    rc = sqlite3_prepare_v2(db,
                            "SELECT path, kind, op, sub, type_before, type_after, size_before,"
                            " size_after, mode_before, mode_after, hash_before, hash_after"
                            " FROM change WHERE tx=?1 ORDER BY seq",
                            -1, &st, NULL);
    int r = 0;
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
        while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            struct drow x = {0};
            x.path = col_dup(st, 0);
            x.kind = col_dup(st, 1);
            _cleanup_free_ char *sub = col_dup(st, 3);
            long long op = sqlite3_column_int64(st, 2);
            x.before_rel = sub && *sub ? xasprintf("%lld/%s", op, sub) : xasprintf("%lld", op);
            x.tb = col_type(st, 4);
            x.ta = col_type(st, 5);
            x.sb = sqlite3_column_int64(st, 6);
            x.sa = sqlite3_column_int64(st, 7);
            x.mb = sqlite3_column_int(st, 8);
            x.ma = sqlite3_column_int(st, 9);
            x.hb = col_dup(st, 10);
            x.ha = col_dup(st, 11);
            if (x.path && x.kind)
                r = diff_row(&d, &x, err);
            free(x.path);
            free(x.kind);
            free(x.before_rel);
            free(x.hb);
            free(x.ha);
        }
    }
    sqlite3_finalize(st);
    if (r == 0 && rc != SQLITE_DONE)
        r = tx_err(err, EIO, "the audit log cannot be read: %s", sqlite3_errmsg(db));
    if (r == 0 && truncated)
        fprintf(out, "(the write set was larger than the log keeps; the rest is not shown)\n");
    store_close(db);
    history_free(&d.later);
    if (d.tundo >= 0)
        close(d.tundo);
    return r;
}
