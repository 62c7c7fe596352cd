/* The copy backend: what the paper's prototype does. Before the command the
 * whole workspace is copied to tx/ID/snap; the command then runs on the
 * workspace itself; on failure the snapshot is put back.
 *
 * It is the fallback where overlayfs cannot be mounted and the baseline of
 * the benchmarks. Its cost grows with the workspace, not with the change.
 *
 * Markers in tx/ID/ (recovery reads them):
 *   snap.done   the snapshot is complete; the command may have run
 *   decided     the command succeeded: keep the workspace, drop the snapshot
 *   restoring   phase 1 of a restore is done (stray entries removed)
 * The snapshot is not fsync'd (the paper's prototype does not either): the
 * backend survives a crash of txbox, not a power loss during a command. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "result.h"
#include "tx.h"

static bool has(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int mark(int txfd, const char *name, txbox_error *err)
{
    int fd = openat(txfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return tx_errno(err, errno, "cannot write marker %s", name);
    close(fd);
    return 0;
}

int copy_begin(txbox_ws *ws, int txfd, txbox_error *err)
{
    if (tree_copy(ws->fd, ".", txfd, "snap", TXBOX_STATE_DIR, err) < 0) {
        (void)tree_remove(txfd, "snap");
        return tx_err_ctx(err, "cannot snapshot the workspace");
    }
    return mark(txfd, "snap.done", err);
}

/* ---- the change list: snapshot (before) against workspace (after) ---- */

struct cmp {
    json_t *added, *modified, *deleted;
    size_t n, cap;
    bool truncated;
};

static void cmp_add(struct cmp *c, json_t *arr, const char *path, bool dir)
{
    if (c->n >= c->cap) {
        c->truncated = true;
        return;
    }
    c->n++;
    _cleanup_free_ char *p = dir ? xasprintf("%s/", path) : xstrdup(path);
    json_array_append_new(arr, json_text(p, strlen(p), true));
}

static void cmp_all(struct cmp *c, json_t *arr, int at, const char *name, const char *path)
{
    struct stat st;
    if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    cmp_add(c, arr, path, S_ISDIR(st.st_mode));
    if (!S_ISDIR(st.st_mode) || c->truncated)
        return;
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_dir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d)) && !c->truncated) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        _cleanup_free_ char *p = xasprintf("%s/%s", path, de->d_name);
        cmp_all(c, arr, dirfd(d), de->d_name, p);
    }
}

/* The entry's extended attributes as one comparable text. */
static void xattrs_of(int dirfd, const char *name, dbuf *out)
{
    char p[PATH_MAX], list[65536], val[65536];
    snprintf(p, sizeof p, "/proc/self/fd/%d/%s", dirfd, name);
    ssize_t n = llistxattr(p, list, sizeof list);
    for (char *k = list; n > 0 && k < list + n; k += strlen(k) + 1) {
        ssize_t vl = lgetxattr(p, k, val, sizeof val);
        dbuf_add(out, k, strlen(k) + 1);
        if (vl > 0)
            dbuf_add(out, val, (size_t)vl);
        dbuf_add(out, "", 1);
    }
}

static bool same_xattrs(int bd, int ad, const char *name)
{
    dbuf x, y;
    dbuf_init(&x, 0);
    dbuf_init(&y, 0);
    xattrs_of(bd, name, &x);
    xattrs_of(ad, name, &y);
    bool same = x.len == y.len && (!x.len || !memcmp(x.p, y.p, x.len));
    dbuf_free(&x);
    dbuf_free(&y);
    return same;
}

static bool same_entry(int bd, int ad, const char *name, const struct stat *b, const struct stat *a)
{
    if (!same_xattrs(bd, ad, name))
        return false;
    if ((b->st_mode & S_IFMT) != (a->st_mode & S_IFMT) || b->st_mode != a->st_mode ||
        b->st_uid != a->st_uid || b->st_gid != a->st_gid)
        return false;
    if (S_ISREG(a->st_mode))
        return b->st_size == a->st_size && b->st_mtim.tv_sec == a->st_mtim.tv_sec &&
               b->st_mtim.tv_nsec == a->st_mtim.tv_nsec;
    if (S_ISLNK(a->st_mode)) {
        char x[PATH_MAX], y[PATH_MAX];
        ssize_t n = readlinkat(bd, name, x, sizeof x), m = readlinkat(ad, name, y, sizeof y);
        return n == m && n >= 0 && !memcmp(x, y, (size_t)n);
    }
    return b->st_mtim.tv_sec == a->st_mtim.tv_sec && b->st_mtim.tv_nsec == a->st_mtim.tv_nsec;
}

static void cmp_dir(struct cmp *c, int bd, int ad, const char *path, bool top)
{
    int fd = openat(ad, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_dir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d)) && !c->truncated) {
        const char *n = de->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || (top && !strcmp(n, TXBOX_STATE_DIR)))
            continue;
        _cleanup_free_ char *p = *path ? xasprintf("%s/%s", path, n) : xstrdup(n);
        struct stat a, b;
        if (fstatat(ad, n, &a, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (fstatat(bd, n, &b, AT_SYMLINK_NOFOLLOW) < 0) {
            cmp_all(c, c->added, ad, n, p);
            continue;
        }
        if (S_ISDIR(a.st_mode) && S_ISDIR(b.st_mode)) {
            if (a.st_mode != b.st_mode || a.st_uid != b.st_uid || a.st_gid != b.st_gid ||
                !same_xattrs(bd, ad, n))
                cmp_add(c, c->modified, p, true);
            _cleanup_close_ int sb = openat(bd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            _cleanup_close_ int sa = openat(ad, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sb >= 0 && sa >= 0)
                cmp_dir(c, sb, sa, p, false);
        } else if (S_ISDIR(a.st_mode) != S_ISDIR(b.st_mode)) {
            cmp_all(c, c->deleted, bd, n, p);
            cmp_all(c, c->added, ad, n, p);
        } else if (!same_entry(bd, ad, n, &b, &a)) {
            cmp_add(c, c->modified, p, false);
        }
    }
    /* What only the snapshot has was deleted. */
    fd = openat(bd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_dir_ DIR *e = fd >= 0 ? fdopendir(fd) : NULL;
    while (e && (de = readdir(e)) && !c->truncated) {
        const char *n = de->d_name;
        struct stat a;
        if (!strcmp(n, ".") || !strcmp(n, "..") || fstatat(ad, n, &a, AT_SYMLINK_NOFOLLOW) == 0)
            continue;
        _cleanup_free_ char *p = *path ? xasprintf("%s/%s", path, n) : xstrdup(n);
        cmp_all(c, c->deleted, bd, n, p);
    }
}

int copy_commit(txbox_ws *ws, int txfd, json_t **changes, size_t cap, txbox_error *err)
{
    if (mark(txfd, "decided", err) < 0)
        return -1;
    _cleanup_close_ int snap = openat(txfd, "snap", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (snap < 0)
        return tx_errno(err, errno, "the snapshot is missing");
    struct cmp c = {json_array(), json_array(), json_array(), 0, cap, false};
    cmp_dir(&c, snap, ws->fd, "", true);
    *changes = json_pack("{s:o,s:o,s:o,s:b}", "added", c.added, "modified", c.modified, "deleted",
                         c.deleted, "truncated", c.truncated);
    if (tree_remove(txfd, "snap") < 0)
        return tx_errno(err, errno, "cannot remove the snapshot");
    return 0;
}

int copy_rollback(txbox_ws *ws, int txfd, txbox_error *err)
{
    _cleanup_close_ int snap = openat(txfd, "snap", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (snap < 0)
        return tx_errno(err, errno, "the snapshot is missing; cannot roll back");
    /* Phase 1: remove what the snapshot does not have (skipped once done:
     * after phase 2 has begun, restored entries are no longer in it). */
    if (!has(txfd, "restoring")) {
        int fd = openat(ws->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_dir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        while (d && (de = readdir(d))) {
            const char *n = de->d_name;
            if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, TXBOX_STATE_DIR) || has(snap, n))
                continue;
            if (tree_remove(ws->fd, n) < 0)
                return tx_errno(err, errno, "cannot remove %s", n);
        }
        if (mark(txfd, "restoring", err) < 0)
            return -1;
    }
    /* Phase 2: each entry of the snapshot replaces the workspace's. */
    int fd = openat(snap, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_dir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        const char *n = de->d_name;
        if (!strcmp(n, ".") || !strcmp(n, ".."))
            continue;
        if (tree_remove(ws->fd, n) < 0 || renameat(snap, n, ws->fd, n) < 0)
            return tx_errno(err, errno, "cannot restore %s", n);
    }
    struct stat st;
    if (fstat(snap, &st) == 0) {
        struct timespec ts[2] = {st.st_atim, st.st_mtim};
        (void)fchmod(ws->fd, st.st_mode & 07777);
        (void)futimens(ws->fd, ts);
    }
    if (tree_remove(txfd, "snap") < 0)
        return tx_errno(err, errno, "cannot remove the snapshot");
    (void)unlinkat(txfd, "restoring", 0);
    return 0;
}

int copy_recover_one(txbox_ws *ws, int txfd, txbox_error *err)
{
    if (!has(txfd, "snap"))
        return 0; /* overlay transaction, or nothing to undo */
    if (!has(txfd, "snap.done") || has(txfd, "decided"))
        return tree_remove(txfd, "snap") < 0 ? tx_errno(err, errno, "cannot remove a snapshot") : 0;
    return copy_rollback(ws, txfd, err);
}
