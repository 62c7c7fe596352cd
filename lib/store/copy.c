/* The copy backend: the paper's prototype copies the whole workspace before
 * the command; so does this backend. Its cost grows with the workspace, not
 * with the change. It is the fallback where overlayfs cannot be mounted and
 * the baseline of the benchmarks.
 *
 * The paper's prototype then runs the command on the workspace and puts the
 * copy back if it fails. Here the roles are the other way round, for the
 * same cost: the command runs on the copy, tx/ID/view, which the sandbox
 * shows at the workspace's path (SB_VIEW_DIRECT), and the workspace itself
 * is not touched while the command runs.
 *   - Rollback removes the copy. The workspace keeps every inode, mtime and
 *     ctime.
 *   - Commit merges the copy into the workspace (merge_dir): what the
 *     command changed replaces the workspace's entry (a rename), what it
 *     deleted is deleted, what it did not touch stays the workspace's own
 *     inode, with its ctime and its hard links.
 *   - A file of the workspace that is hard-linked to a file outside it (its
 *     st_nlink counts names the walk never meets) is never written through
 *     the link: the command only has a copy of it. If the command leaves it
 *     alone, the link stays; if it changes it, the commit replaces the
 *     workspace's name, and the outside file keeps its content, mode and
 *     times, with one link fewer (as with the overlay backend). Names of one
 *     inode that the walk meets inside the workspace stay names of one inode
 *     in the copy (it maps (dev, ino) to the first copy and links the others
 *     to it), so writing through one shows through the others, and a commit
 *     keeps the link.
 *   - .txbox is not in the copy. The command neither sees it nor meets a
 *     mount point over it that it cannot remove: `find . -exec rm -rf {} +`
 *     empties its view and commits, as a user expects. (Hiding .txbox with
 *     a mount over it, as this backend did when the command ran on the
 *     workspace itself, made every such command fail with EBUSY and roll
 *     back.) A .txbox the command makes in its view is discarded, as with
 *     the overlay backend.
 *
 * "Untouched" (untouched()) is decided for each non-directory of the copy:
 * it is still the inode the walk made for that path (the index, tx/ID/index:
 * a hash of each path with the inode number, size, mtime and mode of its
 * copy), with that size, mtime and mode, and its ctime is not after the
 * moment the copy was complete. The command cannot set a ctime, and before
 * it starts txbox waits until the file system's clock has passed that
 * moment (ctime_barrier), so any change the command makes shows (the mtime
 * and size too, should the clock be stepped back meanwhile). Without a usable
 * index everything counts as changed: the commit is still exact, it just
 * replaces every entry by its copy.
 *
 * Something mounted inside the workspace is not the workspace's to change:
 * a change to it is refused before the commit (check_mounts).
 *
 * Entries other processes make, change or delete in the workspace while the
 * command runs are left as they are, unless the command changed or deleted
 * the same path (then the command's result wins).
 *
 * In tx/ID/ (recovery reads them; each marker and record is written under a
 * temporary name and renamed):
 *   view       the copy; view.trash while it is removed
 *   index      see above; mounts: entries on other mounts (if any)
 *   view.done  the copy is complete; the command may have run
 *   dirs       (written at commit) the copy's directories' modes and times
 *   decided    the command succeeded: merge the copy into the workspace
 *   merging    phase 1 of the merge (deletions) is done
 * After a crash: without "decided", the copy is removed (the workspace was
 * never changed); with it, the merge runs again (it is idempotent), then the
 * copy is removed. The copy is not fsync'd (the paper's prototype does not
 * sync either): the backend survives a crash of txbox, not a power loss
 * during a merge. Its file operations go through fsops (TXBOX_FAULT), so
 * the crash matrix (tests/crash/run) covers them.
 *
 * A transaction directory of the earlier layout (a snapshot in tx/ID/snap
 * of a workspace the command changed in place) is still recovered:
 * restore_snap. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "fsops.h"
#include "result.h"
#include "safepath.h"
#include "state.h"
#include "tx.h"

#define MAX_DEPTH 4096

static bool has(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A marker: an empty file made under a temporary name and renamed, so that
 * a crash or an injected fault leaves it either absent or complete. */
static int mark(int txfd, const char *name, txbox_error *err)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s.new", name);
    int fd = openat(txfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return tx_errno(err, errno, "cannot write marker %s", name);
    close(fd);
    if (fs_renameat(txfd, tmp, txfd, name, 0) < 0)
        return tx_errno(err, errno, "cannot write marker %s", name);
    return 0;
}

static char *join(const char *path, const char *name)
{
    return *path ? xasprintf("%s/%s", path, name) : xstrdup(name);
}

static bool ts_after(struct timespec a, struct timespec b)
{
    return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}

static bool ts_eq(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* A directory under at, opened for listing. */
static int open_dir(int at, const char *name)
{
    return openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Names a walk passes over: . and .., and .txbox at any depth (a nested
 * workspace's state is neither copied nor changed by a merge). */
static bool skipped(const char *n, unsigned depth)
{
    (void)depth;
    return !strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, TXBOX_STATE_DIR);
}

/* After an operation in directory dfd failed with errno: if it was for want
 * of write or search permission on dfd (unprivileged, a directory of mode
 * 0555 say), give its owner rwx and say so, to try again. The merge sets the
 * directory's mode afterwards (dir_meta). */
static bool grant(int dfd)
{
    struct stat st;
    return errno == EACCES && fstat(dfd, &st) == 0 && (st.st_mode & S_IRWXU) != S_IRWXU &&
           fchmod(dfd, (st.st_mode & 07777) | S_IRWXU) == 0;
}

/* Gives to directory `to` the extended attributes, owner, mode and times of
 * `from` (mode and times: those in st, which may differ from from's own,
 * see struct dirs), changing only what differs (times: when the mtime
 * differs; listing a directory changes its atime). */
static int dir_meta(int from, const struct stat *st, int to, txbox_error *err)
{
    struct stat cur;
    if (fstat(to, &cur) < 0)
        return tx_errno(err, errno, "cannot stat a directory");
    if (dir_xattrs_differ(from, to) && dir_xattrs_copy(from, to, err) < 0)
        return -1;
    /* Unprivileged, an owner that cannot be given stays as it is. */
    if ((cur.st_uid != st->st_uid || cur.st_gid != st->st_gid) && fchown(to, st->st_uid, st->st_gid) < 0 &&
        errno != EPERM)
        return tx_errno(err, errno, "cannot set the owner of a directory");
    if ((cur.st_mode & 07777) != (st->st_mode & 07777) && fchmod(to, st->st_mode & 07777) < 0)
        return tx_errno(err, errno, "cannot set the mode of a directory");
    if (!ts_eq(cur.st_mtim, st->st_mtim)) {
        struct timespec ts[2] = {st->st_atim, st->st_mtim};
        if (futimens(to, ts) < 0)
            return tx_errno(err, errno, "cannot set the times of a directory");
    }
    return 0;
}

/* ---- the index: which inode of the copy was made for which path ---- */

/* One entry the walk made: its path's hash, and the copy as it was made. */
struct ixent {
    uint64_t h, ino, size;
    int64_t mt_sec;
    uint32_t mt_nsec, mode;
};

struct ixhdr {
    char magic[8];
    int64_t t_sec, t_nsec; /* the ctime barrier; 0: none */
    uint64_t n;
};

#define IX_MAGIC "txbxidx2"

struct ix {
    struct ixent *v;
    size_t n, cap;
    struct timespec t_end;
    bool valid;
};

/* FNV-1a, then a final mix (splitmix64). */
static uint64_t path_hash(const char *p)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

static void ix_add(struct ix *x, const char *path, const struct stat *st)
{
    if (x->n == x->cap) {
        x->cap = x->cap ? 2 * x->cap : 1024;
        x->v = xrealloc(x->v, x->cap * sizeof *x->v);
    }
    x->v[x->n++] = (struct ixent){path_hash(path),
                                  (uint64_t)st->st_ino,
                                  (uint64_t)st->st_size,
                                  (int64_t)st->st_mtim.tv_sec,
                                  (uint32_t)st->st_mtim.tv_nsec,
                                  (uint32_t)st->st_mode};
}

static int ix_cmp(const void *a, const void *b)
{
    const struct ixent *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* The entry the walk made at path (with inode number ino; NULL: any), or
 * NULL. */
static const struct ixent *ix_find(const struct ix *x, const char *path, const uint64_t *ino)
{
    uint64_t h = path_hash(path);
    size_t lo = 0, hi = x->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (x->v[mid].h < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < x->n && x->v[lo].h == h; lo++)
        if (!ino || x->v[lo].ino == *ino)
            return &x->v[lo];
    return NULL;
}

static int ix_write(int txfd, struct ix *x, txbox_error *err)
{
    if (x->n)
        qsort(x->v, x->n, sizeof *x->v, ix_cmp);
    struct ixhdr h = {.t_sec = x->t_end.tv_sec, .t_nsec = x->t_end.tv_nsec, .n = x->n};
    memcpy(h.magic, IX_MAGIC, sizeof h.magic);
    _cleanup_close_ int fd =
        openat(txfd, "index.new", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || fs_write(fd, &h, sizeof h) < 0 || (x->n && fs_write(fd, x->v, x->n * sizeof *x->v) < 0) ||
        fs_renameat(txfd, "index.new", txfd, "index", 0) < 0)
        return tx_errno(err, errno, "cannot write the index of the copy");
    return 0;
}

/* Loads the index; a missing or damaged one leaves x invalid (everything
 * then counts as changed). */
static void ix_read(int txfd, struct ix *x)
{
    *x = (struct ix){0};
    _cleanup_close_ int fd = openat(txfd, "index", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct ixhdr h;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || read_all(fd, &h, sizeof h) != (ssize_t)sizeof h ||
        memcmp(h.magic, IX_MAGIC, sizeof h.magic) ||
        (uint64_t)st.st_size != sizeof h + h.n * sizeof(struct ixent))
        return;
    x->v = xmalloc(h.n ? h.n * sizeof *x->v : 1);
    if (h.n && read_all(fd, x->v, h.n * sizeof *x->v) != (ssize_t)(h.n * sizeof *x->v)) {
        free(x->v);
        x->v = NULL;
        return;
    }
    x->n = x->cap = h.n;
    x->t_end = (struct timespec){(time_t)h.t_sec, (long)h.t_nsec};
    x->valid = true;
}

/* The ctime barrier: the moment the copy is complete is the ctime of a
 * file made now; then wait (a few ms; up to 4 s on a file system with
 * coarse timestamps) until a change to that file gets a later ctime. After
 * that every change the command makes has a ctime after the moment. Leaves
 * t_end zero (nothing counts as untouched) if the clock does not move. */
static void ctime_barrier(int txfd, struct timespec *t_end)
{
    *t_end = (struct timespec){0, 0};
    _cleanup_close_ int fd =
        openat(txfd, "clock", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    struct stat a, b;
    if (fd < 0 || fstat(fd, &a) < 0)
        return;
    for (int i = 0; i < 4000; i++) {
        if (futimens(fd, NULL) < 0 || fstat(fd, &b) < 0)
            return;
        if (ts_after(b.st_ctim, a.st_ctim)) {
            *t_end = a.st_ctim;
            return;
        }
        usleep(1000);
    }
}

/* ---- the copy's directories as the command left them ----
 * Before "decided", every directory of the copy is recorded in tx/ID/dirs
 * (path, mode, times), sorted by path: the merge gives the workspace's
 * directories these, also when it runs again after a crash, although
 * moving entries out of a directory of the copy changes its times.
 * Unprivileged, the merge must list every directory of the copy, move
 * entries out of it, and move a directory to another parent (which needs
 * write permission on the directory itself): a directory without owner rwx
 * (chmod 0555 or 0 by the command) is given it at the same time. */

struct drec {
    char *path;
    mode_t mode;
    struct timespec at, mt;
};

struct dirs {
    struct drec *v;
    size_t n, cap;
};

static void dirs_free(struct dirs *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i].path);
    free(m->v);
}

static void dirs_add(struct dirs *m, const char *path, const struct stat *st)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->v = xrealloc(m->v, m->cap * sizeof *m->v);
    }
    m->v[m->n++] = (struct drec){xstrdup(path), st->st_mode & 07777, st->st_atim, st->st_mtim};
}

static int drec_cmp(const void *a, const void *b)
{
    return strcmp(((const struct drec *)a)->path, ((const struct drec *)b)->path);
}

static const struct drec *dirs_find(const struct dirs *m, const char *path)
{
    struct drec key = {.path = (char *)path};
    return m->n ? bsearch(&key, m->v, m->n, sizeof *m->v, drec_cmp) : NULL;
}

/* The recorded metadata of the copy's directory at path into st (mode and
 * times); st is left as it is if none was recorded. */
static void dirs_get(const struct dirs *m, const char *path, struct stat *st)
{
    const struct drec *r = dirs_find(m, path);
    if (r) {
        st->st_mode = (st->st_mode & S_IFMT) | r->mode;
        st->st_atim = r->at;
        st->st_mtim = r->mt;
    }
}

/* Writes the records, sorted, to tx/ID/name. */
static int dirs_write(int txfd, const char *name, struct dirs *m, txbox_error *err)
{
    qsort(m->v, m->n, sizeof *m->v, drec_cmp);
    dbuf b;
    dbuf_init(&b, 0);
    for (size_t i = 0; i < m->n; i++) {
        char num[128];
        const struct drec *r = &m->v[i];
        int l = snprintf(num, sizeof num, "%o %lld %ld %lld %ld ", (unsigned)r->mode, (long long)r->at.tv_sec,
                         r->at.tv_nsec, (long long)r->mt.tv_sec, r->mt.tv_nsec);
        dbuf_add(&b, num, (size_t)l);
        dbuf_add(&b, r->path, strlen(r->path) + 1);
    }
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s.new", name);
    _cleanup_close_ int fd = openat(txfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = fd < 0 || (b.len && fs_write(fd, b.p, b.len) < 0) || fs_renameat(txfd, tmp, txfd, name, 0) < 0
                 ? tx_errno(err, errno, "cannot write %s", name)
                 : 0;
    dbuf_free(&b);
    return rc;
}

/* Reads tx/ID/name (missing: no records if may_miss). */
static int dirs_read(int txfd, const char *name, bool may_miss, struct dirs *m, txbox_error *err)
{
    *m = (struct dirs){0};
    _cleanup_free_ char *s = NULL;
    size_t len = 0;
    if (may_miss && !has(txfd, name))
        return 0;
    if (read_file_at(txfd, name, 1u << 30, &s, &len, err) < 0)
        return -1;
    for (size_t i = 0; i < len;) {
        char *end = memchr(s + i, 0, len - i), *p = s + i;
        unsigned mode;
        long long as, ms;
        long an, mn;
        int used = 0;
        if (!end || sscanf(p, "%o %lld %ld %lld %ld %n", &mode, &as, &an, &ms, &mn, &used) != 5 || !used)
            return tx_err(err, EINVAL, "damaged record in %s", name);
        struct stat st = {.st_mode = mode, .st_atim = {(time_t)as, an}, .st_mtim = {(time_t)ms, mn}};
        dirs_add(m, p + used, &st);
        i = (size_t)(end - s) + 1;
    }
    return 0;
}

/* ---- mounts inside the workspace ----
 * A commit is renames and deletions within the workspace's mount. Where
 * something is mounted inside the workspace (a directory or a file bound
 * there), a change cannot be committed: a rename across mounts fails, and a
 * deletion would reach into what is mounted, which may lie outside the
 * workspace. The copy records such entries in tx/ID/mounts (a directory's
 * copy is empty, as the overlay view shows the directory under the mount
 * point); a commit that would change one is refused before "decided", with
 * nothing changed (as the overlay backend does); the merge never enters
 * them. */

static int mount_of(int at, const char *name, uint64_t *id)
{
    struct statx stx;
    if (statx(at, name, AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH), STATX_MNT_ID, &stx) < 0)
        return -1;
    if (!(stx.stx_mask & STATX_MNT_ID)) {
        errno = ENOTSUP;
        return -1;
    }
    *id = stx.stx_mnt_id;
    return 0;
}

/* ---- making the copy ---- */

/* Multiply linked inodes met so far: (dev, ino) -> the path of their copy. */
struct lnk {
    dev_t dev;
    ino_t ino;
    char *path;
};

struct links {
    struct lnk *v;
    size_t n, cap; /* cap: a power of two, or 0 */
};

static size_t lnk_hash(dev_t dev, ino_t ino)
{
    uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev;
    return (size_t)(h ^ (h >> 29));
}

static struct lnk *links_slot(struct links *l, dev_t dev, ino_t ino)
{
    if (2 * (l->n + 1) > l->cap) {
        struct links g = {xcalloc(l->cap ? 2 * l->cap : 256, sizeof *g.v), l->n, l->cap ? 2 * l->cap : 256};
        for (size_t i = 0; i < l->cap; i++) {
            if (!l->v[i].path)
                continue;
            size_t j = lnk_hash(l->v[i].dev, l->v[i].ino) & (g.cap - 1);
            while (g.v[j].path)
                j = (j + 1) & (g.cap - 1);
            g.v[j] = l->v[i];
        }
        free(l->v);
        *l = g;
    }
    size_t j = lnk_hash(dev, ino) & (l->cap - 1);
    while (l->v[j].path && (l->v[j].dev != dev || l->v[j].ino != ino))
        j = (j + 1) & (l->cap - 1);
    return &l->v[j];
}

static void links_free(struct links *l)
{
    for (size_t i = 0; i < l->cap; i++)
        free(l->v[i].path);
    free(l->v);
}

struct walk {
    int viewfd; /* the copy's root */
    struct ix ix;
    struct links links;
    uint64_t mnt;       /* the workspace's mount */
    struct dirs mounts; /* entries on other mounts */
    txbox_error *err;
};

static int copy_dir(struct walk *w, int sd, int dd, const char *path, unsigned depth);

static int copy_entry(struct walk *w, int sd, int dd, const char *n, const char *path, unsigned depth)
{
    struct stat st;
    uint64_t mnt;
    if (fstatat(sd, n, &st, AT_SYMLINK_NOFOLLOW) < 0 || mount_of(sd, n, &mnt) < 0)
        return tx_errno(w->err, errno, "cannot stat %s", path);
    bool other_mount = mnt != w->mnt;
    if (other_mount)
        dirs_add(&w->mounts, path, &st);
    if (S_ISDIR(st.st_mode)) {
        if (depth >= MAX_DEPTH)
            return tx_err(w->err, ELOOP, "tree too deep at %s", path);
        if (fs_mkdirat(dd, n, 0700) < 0)
            return tx_errno(w->err, errno, "cannot create %s", path);
        _cleanup_close_ int s = open_dir(sd, n);
        _cleanup_close_ int d = open_dir(dd, n);
        if (s < 0 || d < 0)
            return tx_errno(w->err, errno, "cannot open %s", path);
        if ((!other_mount && copy_dir(w, s, d, path, depth + 1) < 0) || dir_meta(s, &st, d, w->err) < 0)
            return -1;
    } else {
        struct lnk *l = st.st_nlink > 1 ? links_slot(&w->links, st.st_dev, st.st_ino) : NULL;
        /* Another name of an inode copied already: the same copy. (Should
         * the first name lie below a directory we may not search, a copy of
         * its own.) */
        if (!l || !l->path || linkat(w->viewfd, l->path, dd, n, 0) < 0) {
            if (S_ISSOCK(st.st_mode)) {
                /* tree_copy leaves sockets out; the merge must not take
                 * their absence for a deletion */
                struct timespec ts[2] = {st.st_atim, st.st_mtim};
                if (mknodat(dd, n, S_IFSOCK | 0600, 0) < 0)
                    return tx_errno(w->err, errno, "cannot copy socket %s", path);
                (void)fchownat(dd, n, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
                (void)fchmodat(dd, n, st.st_mode & 07777, 0);
                (void)utimensat(dd, n, ts, AT_SYMLINK_NOFOLLOW);
            } else if (tree_copy(sd, n, dd, n, NULL, w->err) < 0) {
                return -1;
            }
            if (l && !l->path) {
                *l = (struct lnk){st.st_dev, st.st_ino, xstrdup(path)};
                w->links.n++;
            }
        }
    }
    if (fstatat(dd, n, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return tx_errno(w->err, errno, "cannot stat the copy of %s", path);
    ix_add(&w->ix, path, &st);
    return 0;
}

static int copy_dir(struct walk *w, int sd, int dd, const char *path, unsigned depth)
{
    _cleanup_dir_ DIR *d = opendir_at(sd, ".");
    if (!d)
        return tx_errno(w->err, errno, "cannot list %s", *path ? path : ".");
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (skipped(n, depth))
            continue;
        _cleanup_free_ char *p = join(path, n);
        if (copy_entry(w, dirfd(d), dd, n, p, depth) < 0)
            return -1;
    }
    return 0;
}

static int make_copy(txbox_ws *ws, int txfd, int *viewfd, txbox_error *err)
{
    if (fs_mkdirat(txfd, "view", 0700) < 0)
        return tx_errno(err, errno, "cannot create the copy");
    _cleanup_close_ int vfd = open_dir(txfd, "view");
    struct stat st;
    if (vfd < 0 || fstat(ws->fd, &st) < 0)
        return tx_errno(err, errno, "cannot open the copy");
    struct walk w = {.viewfd = vfd, .err = err};
    if (mount_of(ws->fd, "", &w.mnt) < 0)
        return tx_errno(err, errno, "cannot identify the workspace's mount");
    int rc = copy_dir(&w, ws->fd, vfd, "", 0);
    if (rc == 0)
        rc = dir_meta(ws->fd, &st, vfd, err);
    if (rc == 0 && w.mounts.n)
        rc = dirs_write(txfd, "mounts", &w.mounts, err);
    links_free(&w.links);
    dirs_free(&w.mounts);
    if (rc == 0) {
        ctime_barrier(txfd, &w.ix.t_end);
        rc = ix_write(txfd, &w.ix, err);
    }
    free(w.ix.v);
    if (rc == 0)
        rc = mark(txfd, "view.done", err);
    if (rc < 0)
        return -1;
    *viewfd = take_fd(&vfd);
    return 0;
}

int copy_begin(txbox_ws *ws, int txfd, int *viewfd, txbox_error *err)
{
    *viewfd = -1;
    fs_fault_arm();
    int rc = make_copy(ws, txfd, viewfd, err);
    fs_fault_disarm();
    return rc < 0 ? tx_err_ctx(err, "cannot copy the workspace") : 0;
}

/* ---- the change list: workspace (before) against the copy (after) ---- */

struct cmp {
    json_t *added, *modified, *deleted;
    size_t n, cap;
    bool truncated;
    const struct dirs *dirs;   /* the copy's directories as the command left them */
    const struct dirs *mounts; /* entries on other mounts: not compared */
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
    _cleanup_close_ int fd = open_dir(at, name);
    _cleanup_dir_ DIR *d = fd >= 0 ? opendir_at(fd, ".") : NULL;
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
    ssize_t n = xattr_list_at(dirfd, name, list, sizeof list);
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
        return b->st_size == a->st_size && ts_eq(b->st_mtim, a->st_mtim);
    if (S_ISLNK(a->st_mode)) {
        char x[PATH_MAX], y[PATH_MAX];
        ssize_t n = readlinkat(bd, name, x, sizeof x), m = readlinkat(ad, name, y, sizeof y);
        return n == m && n >= 0 && !memcmp(x, y, (size_t)n);
    }
    return ts_eq(b->st_mtim, a->st_mtim);
}

/* Did the directory's own metadata change (b: the workspace's, a: the
 * copy's; as the merge applies it, see dir_meta)? */
static bool dir_changed(const struct cmp *c, const char *path, int bfd, const struct stat *b, int afd,
                        const struct stat *a)
{
    struct stat x = *a;
    dirs_get(c->dirs, path, &x);
    return x.st_mode != b->st_mode || x.st_uid != b->st_uid || x.st_gid != b->st_gid ||
           dir_xattrs_differ(bfd, afd);
}

static void cmp_dir(struct cmp *c, int bd, int ad, const char *path, bool top)
{
    _cleanup_dir_ DIR *d = opendir_at(ad, ".");
    struct dirent *de;
    while (d && (de = readdir(d)) && !c->truncated) {
        const char *n = de->d_name;
        if (skipped(n, top ? 0 : 1))
            continue;
        _cleanup_free_ char *p = join(path, n);
        struct stat a, b;
        if (dirs_find(c->mounts, p) || fstatat(ad, n, &a, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (fstatat(bd, n, &b, AT_SYMLINK_NOFOLLOW) < 0) {
            cmp_all(c, c->added, ad, n, p);
            continue;
        }
        if (S_ISDIR(a.st_mode) && S_ISDIR(b.st_mode)) {
            _cleanup_close_ int sb = open_dir(bd, n);
            _cleanup_close_ int sa = open_dir(ad, n);
            if (sb < 0 || sa < 0)
                continue;
            if (dir_changed(c, p, sb, &b, sa, &a))
                cmp_add(c, c->modified, p, true);
            cmp_dir(c, sb, sa, p, false);
        } else if (S_ISDIR(a.st_mode) != S_ISDIR(b.st_mode)) {
            cmp_all(c, c->deleted, bd, n, p);
            cmp_all(c, c->added, ad, n, p);
        } else if (!same_entry(bd, ad, n, &b, &a)) {
            cmp_add(c, c->modified, p, false);
        }
    }
    /* What only the workspace has was deleted. */
    _cleanup_dir_ DIR *e = opendir_at(bd, ".");
    while (e && (de = readdir(e)) && !c->truncated) {
        const char *n = de->d_name;
        struct stat a;
        if (skipped(n, !top) || fstatat(ad, n, &a, AT_SYMLINK_NOFOLLOW) == 0)
            continue;
        _cleanup_free_ char *p = join(path, n);
        if (!dirs_find(c->mounts, p))
            cmp_all(c, c->deleted, bd, n, p);
    }
}

/* ---- the merge of the copy into the workspace ---- */

struct mg {
    struct ix ix;
    struct dirs dirs;   /* the copy's directories (tx/ID/dirs) */
    struct dirs mounts; /* entries on other mounts (tx/ID/mounts) */
    txbox_error *err;
};

static void mg_free(struct mg *m)
{
    free(m->ix.v);
    dirs_free(&m->dirs);
    dirs_free(&m->mounts);
}

/* The merge's state, as commit() left it in tx/ID/. */
static int mg_load(struct mg *m, int txfd, txbox_error *err)
{
    *m = (struct mg){.err = err};
    ix_read(txfd, &m->ix);
    return dirs_read(txfd, "dirs", false, &m->dirs, err) < 0 ||
                   dirs_read(txfd, "mounts", true, &m->mounts, err) < 0
               ? -1
               : 0;
}

/* Did the command leave the copy's non-directory at path (v) as the walk
 * made it? (See the top of the file.) */
static bool untouched(const struct mg *m, const char *path, const struct stat *v)
{
    uint64_t ino = (uint64_t)v->st_ino;
    const struct ixent *e;
    return m->ix.valid && m->ix.t_end.tv_sec && !S_ISDIR(v->st_mode) && !ts_after(v->st_ctim, m->ix.t_end) &&
           (e = ix_find(&m->ix, path, &ino)) && e->mode == (uint32_t)v->st_mode &&
           e->size == (uint64_t)v->st_size && e->mt_sec == (int64_t)v->st_mtim.tv_sec &&
           e->mt_nsec == (uint32_t)v->st_mtim.tv_nsec;
}

/* No privilege outlives the transaction (as with the overlay backend,
 * scan.c): an entry the command changed loses the setuid and setgid bits of
 * a regular file and security.capability; a device node it made or changed
 * refuses the commit. n under dfd, stat st, path p. */
static int sanitize(struct mg *m, int dfd, const char *n, const struct stat *st, const char *p)
{
    if (untouched(m, p, st))
        return 0;
    if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
        return tx_err(m->err, EPERM, "the command made or changed device node %s; commit refused", p);
    if (!S_ISREG(st->st_mode))
        return 0;
    if ((st->st_mode & (S_ISUID | S_ISGID)) &&
        fchmodat(dfd, n, st->st_mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID), 0) < 0)
        return tx_errno(m->err, errno, "cannot clear the setuid and setgid bits of %s", p);
    char fp[PATH_MAX];
    snprintf(fp, sizeof fp, "/proc/self/fd/%d/%s", dfd, n);
    if (lgetxattr(fp, "security.capability", NULL, 0) >= 0 && lremovexattr(fp, "security.capability") < 0 &&
        errno != ENODATA)
        return tx_errno(m->err, errno,
                        "the command gave %s file capabilities, which cannot be removed; commit refused", p);
    return 0;
}

/* Before "decided", over the whole copy (the directory name under at; path
 * "" for its root): records each directory (see struct dirs) and gives it
 * owner rwx; sanitizes each other entry. */
static int prepare(struct mg *m, int at, const char *name, const char *path, unsigned depth)
{
    const char *shown = *path ? path : ".";
    struct stat st;
    if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return tx_errno(m->err, errno, "cannot stat %s in the copy", shown);
    dirs_add(&m->dirs, path, &st);
    if ((st.st_mode & S_IRWXU) != S_IRWXU && fchmodat(at, name, (st.st_mode & 07777) | S_IRWXU, 0) < 0)
        return tx_errno(m->err, errno, "cannot open %s in the copy", shown);
    if (depth > MAX_DEPTH)
        return tx_err(m->err, ELOOP, "tree too deep at %s", shown);
    _cleanup_close_ int fd = open_dir(at, name);
    _cleanup_dir_ DIR *d = fd >= 0 ? opendir_at(fd, ".") : NULL;
    if (!d)
        return tx_errno(m->err, errno, "cannot list %s in the copy", shown);
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (!strcmp(n, ".") || !strcmp(n, ".."))
            continue;
        _cleanup_free_ char *p = join(path, n);
        if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return tx_errno(m->err, errno, "cannot stat %s in the copy", p);
        if (S_ISDIR(st.st_mode) ? prepare(m, dirfd(d), n, p, depth + 1) < 0
                                : sanitize(m, dirfd(d), n, &st, p) < 0)
            return -1;
    }
    return 0;
}

/* Deletes the workspace's entry n (stat w) in wd. */
static int remove_entry(int wd, const char *n, const struct stat *w)
{
    for (int tries = 0;; tries++) {
        int r = S_ISDIR(w->st_mode) ? tree_remove(wd, n) : fs_unlinkat(wd, n, 0);
        if (r == 0 || errno == ENOENT)
            return 0;
        if (tries || !grant(wd))
            return -1;
    }
}

/* Moves the copy's entry n (stat v) from vd into wd. */
static int move_in(int vd, const char *n, int wd)
{
    for (int tries = 0;; tries++) {
        if (fs_renameat(vd, n, wd, n, 0) == 0)
            return 0;
        if (tries || !grant(wd))
            return -1;
    }
}

/* A directory moved in whole (at rel under wd; path in the copy) keeps the
 * owner rwx dirs_walk gave it and the directories below it: their recorded
 * modes, deepest first (a parent's 0 must not bar the way to a child). */
static int restore_modes(struct mg *m, int wd, const char *rel, const char *path)
{
    size_t pl = strlen(path), lo = 0, hi = m->dirs.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(m->dirs.v[mid].path, path) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (hi = lo; hi < m->dirs.n && !strncmp(m->dirs.v[hi].path, path, pl); hi++)
        ;
    while (hi-- > lo) {
        const struct drec *r = &m->dirs.v[hi];
        if ((r->mode & S_IRWXU) == S_IRWXU || (r->path[pl] && r->path[pl] != '/'))
            continue;
        _cleanup_free_ char *p = xasprintf("%s%s", rel, r->path + pl);
        const char *base;
        _cleanup_close_ int dir = safe_open_parent(wd, p, &base);
        if (dir < 0 || fchmodat(dir, base, r->mode, 0) < 0)
            return tx_errno(m->err, errno, "cannot set the mode of %s", r->path);
    }
    return 0;
}

/* The workspace's directory n (stat w) under wd, opened; one its owner may
 * not read or search is given owner rwx (its mode is set again from the
 * copy's afterwards). */
static int open_wdir(int wd, const char *n, const struct stat *w)
{
    int fd = open_dir(wd, n);
    if (fd < 0 && errno == EACCES && fchmodat(wd, n, (w->st_mode & 07777) | S_IRWXU, 0) == 0)
        fd = open_dir(wd, n);
    return fd;
}

/* Phase 1: delete from the workspace what the command deleted: the entries
 * of wd that the copy vd no longer has, if the walk made them (others were
 * made by someone else meanwhile; without the index, all of them), down the
 * directories both have. */
static int prune(struct mg *m, int vd, int wd, const char *path, unsigned depth)
{
    DIR *l = opendir_at(wd, ".");
    if (!l && grant(wd))
        l = opendir_at(wd, ".");
    _cleanup_dir_ DIR *d = l;
    if (!d)
        return tx_errno(m->err, errno, "cannot list %s", *path ? path : ".");
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (skipped(n, depth))
            continue;
        _cleanup_free_ char *p = join(path, n);
        struct stat v, w;
        if (dirs_find(&m->mounts, p) || fstatat(wd, n, &w, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (fstatat(vd, n, &v, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                return tx_errno(m->err, errno, "cannot stat %s in the copy", p);
            if (S_ISDIR(w.st_mode) && state_tree_holds_state(wd, n))
                continue; /* a nested workspace's state is never deleted */
            if ((!m->ix.valid || ix_find(&m->ix, p, NULL)) && remove_entry(wd, n, &w) < 0)
                return tx_errno(m->err, errno, "cannot delete %s", p);
            continue;
        }
        if (!S_ISDIR(v.st_mode) || !S_ISDIR(w.st_mode))
            continue;
        _cleanup_close_ int vs = open_dir(vd, n);
        _cleanup_close_ int wsub = open_wdir(wd, n, &w);
        if (vs < 0 || wsub < 0)
            return tx_errno(m->err, errno, "cannot open %s", p);
        if (depth >= MAX_DEPTH)
            return tx_err(m->err, ELOOP, "tree too deep at %s", p);
        if (prune(m, vs, wsub, p, depth + 1) < 0)
            return -1;
    }
    return 0;
}

/* Phase 2: every entry of the copy vd goes to the workspace's wd, unless
 * the command left it untouched; directories both have are merged, and
 * take the copy's metadata. Idempotent: what was moved is gone from the
 * copy. */
static int merge_dir(struct mg *m, int vd, int wd, const char *path, unsigned depth)
{
    _cleanup_dir_ DIR *d = opendir_at(vd, ".");
    if (!d)
        return tx_errno(m->err, errno, "cannot list %s in the copy", *path ? path : ".");
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        /* a .txbox the command made in its view goes with the copy */
        if (skipped(n, depth))
            continue;
        _cleanup_free_ char *p = join(path, n);
        struct stat v, w;
        if (dirs_find(&m->mounts, p))
            continue; /* unchanged: check_mounts */
        if (fstatat(vd, n, &v, AT_SYMLINK_NOFOLLOW) < 0)
            return tx_errno(m->err, errno, "cannot stat %s in the copy", p);
        bool hw = fstatat(wd, n, &w, AT_SYMLINK_NOFOLLOW) == 0;
        if (!hw && errno != ENOENT)
            return tx_errno(m->err, errno, "cannot stat %s", p);
        if (hw && S_ISDIR(v.st_mode) && S_ISDIR(w.st_mode)) {
            _cleanup_close_ int vs = open_dir(vd, n);
            _cleanup_close_ int wsub = open_wdir(wd, n, &w);
            if (vs < 0 || wsub < 0)
                return tx_errno(m->err, errno, "cannot open %s", p);
            if (depth >= MAX_DEPTH)
                return tx_err(m->err, ELOOP, "tree too deep at %s", p);
            if (merge_dir(m, vs, wsub, p, depth + 1) < 0)
                return -1;
            dirs_get(&m->dirs, p, &v);
            if (dir_meta(vs, &v, wsub, m->err) < 0)
                return tx_err_ctx(m->err, "%s", p);
            continue;
        }
        if (hw && untouched(m, p, &v))
            continue;
        if (hw && S_ISDIR(w.st_mode) && state_tree_holds_state(wd, n))
            continue; /* a nested workspace's state is never replaced */
        if (hw && remove_entry(wd, n, &w) < 0)
            return tx_errno(m->err, errno, "cannot replace %s", p);
        if (S_ISDIR(v.st_mode))
            state_strip(vd, n); /* a .txbox the command made there stays out */
        if (move_in(vd, n, wd) < 0)
            return tx_errno(m->err, errno, "cannot move %s into the workspace", p);
        if (S_ISDIR(v.st_mode) && restore_modes(m, wd, n, p) < 0)
            return -1;
    }
    return 0;
}

static bool dir_empty(int dfd)
{
    _cleanup_dir_ DIR *d = opendir_at(dfd, ".");
    if (!d)
        return false;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            return false;
    return true;
}

/* Refuses (before "decided") a commit that would change an entry on
 * another mount: its copy must be as the walk made it (a directory: still
 * empty, same mode, times and attributes). */
static int check_mounts(struct mg *m, int wsfd, int vfd)
{
    for (size_t i = 0; i < m->mounts.n; i++) {
        const struct drec *r = &m->mounts.v[i];
        const char *vb, *wb;
        _cleanup_close_ int vp = safe_open_parent(vfd, r->path, &vb);
        _cleanup_close_ int wp = safe_open_parent(wsfd, r->path, &wb);
        struct stat v, w;
        bool same = vp >= 0 && wp >= 0 && fstatat(vp, vb, &v, AT_SYMLINK_NOFOLLOW) == 0 &&
                    fstatat(wp, wb, &w, AT_SYMLINK_NOFOLLOW) == 0 &&
                    (v.st_mode & S_IFMT) == (w.st_mode & S_IFMT);
        if (same && S_ISDIR(v.st_mode)) {
            dirs_get(&m->dirs, r->path, &v);
            _cleanup_close_ int vs = open_dir(vp, vb);
            _cleanup_close_ int ws = open_dir(wp, wb);
            same = vs >= 0 && dir_empty(vs) && ws >= 0 && (v.st_mode & 07777) == r->mode &&
                   ts_eq(v.st_mtim, r->mt) && !dir_xattrs_differ(vs, ws);
        } else if (same) {
            same = (v.st_mode & 07777) == r->mode && untouched(m, r->path, &v);
        }
        if (!same)
            return tx_err(
                m->err, EXDEV,
                "%s lies on another mount inside the workspace: the copy backend cannot commit a change there; nothing was changed",
                r->path);
    }
    return 0;
}

static int cleanup(int txfd, txbox_error *err)
{
    if (tree_remove(txfd, "view.trash") < 0)
        return tx_errno(err, errno, "cannot remove the copy of the workspace");
    const char *const files[] = {"index",  "index.new",  "dirs",  "dirs.new",
                                 "mounts", "mounts.new", "clock", "merging"};
    for (size_t i = 0; i < ARRAY_SIZE(files); i++)
        (void)unlinkat(txfd, files[i], 0);
    return 0;
}

/* The merge, from "decided" on; also what recovery runs again. */
static int merge(txbox_ws *ws, int txfd, txbox_error *err)
{
    if (has(txfd, "view")) {
        _cleanup_close_ int vfd = open_dir(txfd, "view");
        struct stat vst;
        if (vfd < 0 || fstat(vfd, &vst) < 0)
            return tx_errno(err, errno, "cannot open the copy of the workspace");
        struct mg m;
        if (mg_load(&m, txfd, err) < 0) {
            mg_free(&m);
            return -1;
        }
        int rc = 0;
        if (!has(txfd, "merging")) {
            rc = prune(&m, vfd, ws->fd, "", 0);
            if (rc == 0)
                rc = mark(txfd, "merging", err);
        }
        if (rc == 0)
            rc = merge_dir(&m, vfd, ws->fd, "", 0);
        if (rc == 0) {
            dirs_get(&m.dirs, "", &vst);
            rc = dir_meta(vfd, &vst, ws->fd, err);
        }
        mg_free(&m);
        if (rc < 0)
            return -1;
        if (fs_renameat(txfd, "view", txfd, "view.trash", 0) < 0)
            return tx_errno(err, errno, "cannot remove the copy of the workspace");
    }
    return cleanup(txfd, err);
}

static int commit(txbox_ws *ws, int txfd, json_t **changes, size_t cap, txbox_error *err)
{
    _cleanup_close_ int vfd = open_dir(txfd, "view");
    if (vfd < 0)
        return tx_errno(err, errno, "the copy of the workspace is missing");
    struct mg m = {.err = err};
    ix_read(txfd, &m.ix);
    int rc = dirs_read(txfd, "mounts", true, &m.mounts, err);
    if (rc == 0)
        rc = prepare(&m, txfd, "view", "", 0);
    if (rc == 0)
        rc = dirs_write(txfd, "dirs", &m.dirs, err); /* (sorts them) */
    if (rc == 0)
        rc = check_mounts(&m, ws->fd, vfd);
    if (rc < 0) {
        mg_free(&m);
        return -1;
    }
    struct cmp c = {json_array(), json_array(), json_array(), 0, cap, false, &m.dirs, &m.mounts};
    struct stat a, b;
    /* the workspace root's own metadata is reported as "." */
    if (fstat(vfd, &a) == 0 && fstat(ws->fd, &b) == 0 && dir_changed(&c, "", ws->fd, &b, vfd, &a))
        cmp_add(&c, c.modified, ".", false);
    cmp_dir(&c, ws->fd, vfd, "", true);
    mg_free(&m);
    *changes = json_pack("{s:o,s:o,s:o,s:b}", "added", c.added, "modified", c.modified, "deleted", c.deleted,
                         "truncated", c.truncated);
    if (mark(txfd, "decided", err) < 0)
        return -1;
    return merge(ws, txfd, err);
}

int copy_commit(txbox_ws *ws, int txfd, json_t **changes, size_t cap, txbox_error *err)
{
    fs_fault_arm();
    int rc = commit(ws, txfd, changes, cap, err);
    fs_fault_disarm();
    return rc;
}

/* The command failed, or never ran: the copy goes, the workspace was never
 * changed. */
static int discard(int txfd, txbox_error *err)
{
    if (has(txfd, "view")) {
        if (tree_remove(txfd, "view.trash") < 0 || fs_renameat(txfd, "view", txfd, "view.trash", 0) < 0)
            return tx_errno(err, errno, "cannot remove the copy of the workspace");
    }
    return cleanup(txfd, err);
}

/* ---- the earlier layout: a snapshot in tx/ID/snap, the workspace changed
 * in place; put the snapshot back (phase 1 removes what the snapshot does
 * not have, marked by "restoring"; phase 2 moves each entry back) ---- */
static int restore_snap(txbox_ws *ws, int txfd, txbox_error *err)
{
    _cleanup_close_ int snap = open_dir(txfd, "snap");
    if (snap < 0)
        return tx_errno(err, errno, "the snapshot is missing; cannot roll back");
    if (!has(txfd, "restoring")) {
        _cleanup_dir_ DIR *d = opendir_at(ws->fd, ".");
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
    _cleanup_dir_ DIR *d = opendir_at(snap, ".");
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

int copy_rollback(txbox_ws *ws, int txfd, txbox_error *err)
{
    (void)ws;
    fs_fault_arm();
    int rc = discard(txfd, err);
    fs_fault_disarm();
    return rc;
}

int copy_recover_one(txbox_ws *ws, int txfd, txbox_error *err)
{
    if (has(txfd, "snap")) {
        /* the earlier layout */
        if (!has(txfd, "snap.done") || has(txfd, "decided"))
            return tree_remove(txfd, "snap") < 0 ? tx_errno(err, errno, "cannot remove a snapshot") : 0;
        return restore_snap(ws, txfd, err);
    }
    if (!has(txfd, "view") && !has(txfd, "view.trash"))
        return 0; /* overlay transaction, or nothing to undo */
    return has(txfd, "decided") ? merge(ws, txfd, err) : discard(txfd, err);
}
