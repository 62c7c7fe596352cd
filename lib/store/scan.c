/* From an overlay upper to operations on the workspace.
 *
 * After the command and its pid namespace are gone, the upper directory is
 * the exact write set (redirect_dir, metacopy and index are off):
 *
 *   upper entry                               operation
 *   ----------------------------------------  ------------------------------
 *   whiteout (0/0 char device, or a 0-byte    DELETE path
 *     file with overlay.whiteout)
 *   directory, lower is a directory and the   META path (after its children),
 *     upper one is not opaque                   and recurse
 *   directory otherwise (new, opaque, or      REPLACE path by the whole subtree
 *     replacing a non-directory)
 *   file, symlink, FIFO, socket               REPLACE path
 *   any other device node                     error: the commit is refused
 *
 * Overlay's own xattrs (trusted.overlay.* as root, user.overlay.* with
 * userxattr) are understood, checked against the known set and stripped
 * from everything that will move into the workspace.
 *
 * No privilege outlives the transaction: the setuid and setgid bits of
 * regular files and security.capability are removed in the upper, before
 * the commit point, so that no such inode is ever visible in the workspace
 * (a directory's setgid bit only gives new entries its group, and stays).
 *
 * Entries without owner permissions (a read-only file, a directory of mode
 * 0 or 0555) are given what the work on them needs, which unprivileged is
 * the owner's bits: a new entry only for that time (its exact mode is set
 * back before the commit point), a merged directory of the upper until the
 * upper is discarded (its META operation records the mode it had). The
 * journal applies recorded modes after its renames (journal.c). */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "fsops.h"
#include "safepath.h"
#include "result.h"
#include "tx.h"

#define XATTR_LIST_MAX_BYTES 65536

struct scan {
    const char *pfx; /* "trusted.overlay." or "user.overlay." */
    size_t pfxlen;
    struct tx_ops *ops;
    txbox_error *err;
    unsigned depth;
    /* New data durable before the commit point: every entry the commit
     * moves into the workspace with data or an inode of its own (regular
     * files, directories) and every upper directory that recovery walks is
     * added as the scan finds it; scan_upper makes the set durable at its
     * end, or hands it to its caller to sync with the journal (fsops.h:
     * fs_sync_by_syncfs). A failure stops the commit before its commit
     * point. */
    struct fs_syncset sync;
    bool news_full; /* ops->news reached TX_NEWS_MAX */
    bool news_skip; /* the tree being noted has a path its readers could not open */
};

/* Notes an entry of a new tree in ops->news (tx.h); its index, or -1 past
 * TX_NEWS_MAX (then none more is noted, and the trees being noted are
 * left without: news_full), or for a path of PATH_MAX bytes or more,
 * which its readers could not open by name (its tree is left without:
 * news_skip; they walk it by directory descriptors, as the scan does). */
static long news_add(struct scan *s, const char *path, const struct stat *st)
{
    struct tx_ops *o = s->ops;
    if (strlen(path) >= PATH_MAX)
        s->news_skip = true;
    if (s->news_full || s->news_skip)
        return -1;
    if (o->n_news >= TX_NEWS_MAX) {
        s->news_full = true;
        return -1;
    }
    if (o->n_news == o->cap_news) {
        o->cap_news = o->cap_news ? o->cap_news * 2 : 256;
        o->news = xrealloc(o->news, o->cap_news * sizeof *o->news);
    }
    o->news[o->n_news] = (struct tx_new){.path = xstrdup(path), .st = *st};
    return (long)o->n_news++;
}

/* The committed mode of news entry i, set once the scan has set it. */
static void news_mode(struct scan *s, long i, mode_t m)
{
    if (i >= 0)
        s->ops->news[i].st.st_mode = (s->ops->news[i].st.st_mode & S_IFMT) | m;
}

static char *join(const char *dir, const char *name)
{
    return *dir ? xasprintf("%s/%s", dir, name) : xstrdup(name);
}

/* The permission bits a commit gives an entry the command made. */
static mode_t committed_mode(const struct stat *st)
{
    mode_t m = st->st_mode & 07777;
    return S_ISREG(st->st_mode) ? m & ~(mode_t)(S_ISUID | S_ISGID) : m;
}

static ssize_t get_xattr(int dirfd, const char *name, const char *key, char *buf, size_t n)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "/proc/self/fd/%d/%s", dirfd, name);
    return lgetxattr(p, key, buf, n);
}

static int remove_xattr(int dirfd, const char *name, const char *key)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "/proc/self/fd/%d/%s", dirfd, name);
    return lremovexattr(p, key);
}

/* Gives the owner the permission bits an upper entry lacks of bits; *st
 * follows the mode (the caller sets the exact one back). */
static int grant(struct scan *s, int dirfd, const char *name, struct stat *st, mode_t bits, const char *path)
{
    if ((st->st_mode & bits) == bits)
        return 0;
    mode_t m = (st->st_mode & 07777) | bits;
    if (fchmodat(dirfd, name, m, 0) < 0)
        return tx_errno(s->err, errno, "cannot give the owner access to %s in the upper", path);
    st->st_mode = (st->st_mode & S_IFMT) | m;
    return 0;
}

/* Removes attribute key from an upper entry. Unprivileged, removing a
 * user.* attribute needs write permission: granted when the entry lacks it. */
static int strip_attr(struct scan *s, int dirfd, const char *name, const char *key, struct stat *st,
                      const char *path)
{
    if (remove_xattr(dirfd, name, key) == 0 || errno == ENODATA)
        return 0;
    if (errno == EACCES && (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) && !(st->st_mode & S_IWUSR)) {
        if (grant(s, dirfd, name, st, S_IWUSR, path) < 0)
            return -1;
        if (remove_xattr(dirfd, name, key) == 0 || errno == ENODATA)
            return 0;
    }
    if (!strcmp(key, "security.capability"))
        return tx_errno(s->err, errno,
                        "the command gave %s file capabilities, which cannot be "
                        "removed; commit refused",
                        path);
    return tx_errno(s->err, errno, "cannot strip %s from %s", key, path);
}

static const char *const known_ovl[] = {"opaque", "whiteout", "whiteouts", "origin",  "impure",
                                        "nlink",  "upper",    "uuid",      "protattr"};

struct ovl_attrs {
    bool opaque, xwhiteout, origin, any;
};

/* Reads and validates the overlay xattrs of one upper entry. With strip
 * (the entry's stat, which follows any permission granted), removes them
 * and security.capability. */
static int ovl_attrs(struct scan *s, int dirfd, const char *name, const char *path, struct stat *strip,
                     struct ovl_attrs *a)
{
    memset(a, 0, sizeof *a);
    char list[XATTR_LIST_MAX_BYTES];
    ssize_t n = xattr_list_at(dirfd, name, list, sizeof list);
    if (n < 0) {
        if (errno == ENOTSUP || errno == EOPNOTSUPP)
            return 0;
        return tx_errno(s->err, errno, "cannot list attributes of %s", path);
    }
    for (char *k = list; k < list + n; k += strlen(k) + 1) {
        if (strip && !strcmp(k, "security.capability")) {
            if (strip_attr(s, dirfd, name, k, strip, path) < 0)
                return -1;
            continue;
        }
        if (strncmp(k, s->pfx, s->pfxlen))
            continue;
        const char *suf = k + s->pfxlen;
        bool known = false;
        for (size_t i = 0; i < ARRAY_SIZE(known_ovl); i++)
            if (!strcmp(suf, known_ovl[i]))
                known = true;
        if (!known)
            return tx_err(s->err, EPROTO,
                          "unexpected overlay attribute %s on %s in the upper; commit refused", k, path);
        a->any = true;
        if (!strcmp(suf, "opaque")) {
            char v[8];
            ssize_t l = get_xattr(dirfd, name, k, v, sizeof v);
            if (l < 0 && errno != ENODATA)
                return tx_errno(s->err, errno, "cannot read %s of %s", k, path);
            a->opaque = l == 1 && v[0] == 'y';
        } else if (!strcmp(suf, "whiteout")) {
            a->xwhiteout = true;
        } else if (!strcmp(suf, "origin")) {
            a->origin = true; /* a copy-up: the old entry, changed */
        }
        if (strip && strip_attr(s, dirfd, name, k, strip, path) < 0)
            return -1;
    }
    return 0;
}

static bool is_whiteout(const struct stat *st, const struct ovl_attrs *a)
{
    if (S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0))
        return true;
    return S_ISREG(st->st_mode) && st->st_size == 0 && a->xwhiteout;
}

/* Makes a new subtree ready to move into the workspace: validates every
 * entry, strips overlay xattrs and privileges, drops stray whiteouts, sets
 * the committed mode and fsyncs the data. For the subtree's root, st0: its
 * stat as the command left it (the scan may have given the owner access
 * since), top: its committed metadata, with the type bits (meta_entry).
 * now: the entry's stat just taken by the caller (NULL: taken here). */
static int prepare_subtree(struct scan *s, int dirfd, const char *name, const char *path,
                           const struct stat *st0, struct tx_meta *top, const struct stat *now)
{
    struct stat st;
    if (now)
        st = *now;
    else if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return tx_errno(s->err, errno, "cannot stat %s in the upper", path);
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
        return tx_err(s->err, EPERM, "the command created a device node %s; commit refused", path);
    mode_t want = committed_mode(st0 ? st0 : &st);
    if (top) {
        meta_entry(&st, top);
        top->mode = (st.st_mode & S_IFMT) | want;
    }
    long ni = news_add(s, path, &st);
    /* A directory is read, searched and written (stray whiteouts). */
    if (S_ISDIR(st.st_mode) && grant(s, dirfd, name, &st, S_IRWXU, path) < 0)
        return -1;
    struct ovl_attrs a;
    if (ovl_attrs(s, dirfd, name, path, &st, &a) < 0)
        return -1;
    if (S_ISREG(st.st_mode) && s->sync.all) {
        /* The set already syncs the whole filesystem (past FS_SYNC_MAX
         * entries): no descriptor to keep, only the mode to set (a
         * regular file, as just stat'ed: the command is gone). */
        if ((st.st_mode & 07777) != want && fchmodat(dirfd, name, want, 0) < 0)
            return tx_errno(s->err, errno, "cannot set the mode of %s in the upper", path);
        news_mode(s, ni, want);
        return 0;
    }
    if (S_ISREG(st.st_mode)) {
        int fl = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
        _cleanup_close_ int fd = openat(dirfd, name, fl);
        if (fd < 0 && errno == EACCES && !(st.st_mode & S_IRUSR)) {
            if (grant(s, dirfd, name, &st, S_IRUSR, path) < 0)
                return -1;
            fd = openat(dirfd, name, fl);
        }
        if (fd < 0)
            return tx_errno(s->err, errno, "cannot open %s in the upper", path);
        if ((st.st_mode & 07777) != want && fchmod(fd, want) < 0)
            return tx_errno(s->err, errno, "cannot set the mode of %s in the upper", path);
        news_mode(s, ni, want);
        fs_syncset_add(&s->sync, fd);
        return 0;
    }
    if (!S_ISDIR(st.st_mode))
        return 0; /* symlink, FIFO, socket: their inode goes with the parent's fsync */
    if (++s->depth > 4096)
        return tx_err(s->err, ELOOP, "directory tree too deep at %s", path);
    _cleanup_close_ int dfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return tx_errno(s->err, errno, "cannot open %s in the upper", path);
    _cleanup_dir_ DIR *d = fdopendir(dup(dfd));
    if (!d)
        return tx_errno(s->err, errno, "cannot read %s in the upper", path);
    struct dirent *de;
    while ((errno = 0, de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        _cleanup_free_ char *cp = join(path, de->d_name);
        struct stat cst;
        if (fstatat(dfd, de->d_name, &cst, AT_SYMLINK_NOFOLLOW) < 0)
            return tx_errno(s->err, errno, "cannot stat %s in the upper", cp);
        if (S_ISCHR(cst.st_mode) && cst.st_rdev == makedev(0, 0)) {
            /* A whiteout inside a new directory hides nothing: drop it. */
            if (unlinkat(dfd, de->d_name, 0) < 0)
                return tx_errno(s->err, errno, "cannot drop whiteout %s", cp);
            continue;
        }
        if (!strcmp(de->d_name, TXBOX_STATE_DIR)) {
            /* A state directory is never part of a transaction, at any
             * depth: one made inside a new directory is dropped. */
            if (tree_remove(dfd, de->d_name) < 0)
                return tx_errno(s->err, errno, "cannot drop %s", cp);
            continue;
        }
        if (prepare_subtree(s, dfd, de->d_name, cp, NULL, NULL, &cst) < 0)
            return -1;
    }
    if (errno)
        return tx_errno(s->err, errno, "cannot read %s in the upper", path);
    s->depth--;
    if ((st.st_mode & 07777) != want && fchmod(dfd, want) < 0)
        return tx_errno(s->err, errno, "cannot set the mode of %s in the upper", path);
    news_mode(s, ni, want);
    fs_syncset_add(&s->sync, dfd);
    return 0;
}

static bool xattr_skipped(const char *k)
{
    return !strncmp(k, "trusted.overlay.", 16) || !strncmp(k, "user.overlay.", 13) ||
           !strncmp(k, "security.", 9);
}

/* name -> value of fd's xattrs, one "name\0value-length:value" record each,
 * sorted by name (a canonical text to compare). */
static void xattr_text(int fd, dbuf *out)
{
    char list[XATTR_LIST_MAX_BYTES];
    ssize_t n = flistxattr(fd, list, sizeof list);
    const char *names[1024];
    size_t k = 0;
    for (char *p = list; n > 0 && p < list + n && k < ARRAY_SIZE(names); p += strlen(p) + 1)
        if (!xattr_skipped(p))
            names[k++] = p;
    for (size_t i = 1; i < k; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    static char val[65536];
    for (size_t i = 0; i < k; i++) {
        ssize_t vl = fgetxattr(fd, names[i], val, sizeof val);
        char len[32];
        snprintf(len, sizeof len, "%zd:", vl);
        dbuf_add(out, names[i], strlen(names[i]) + 1);
        dbuf_addstr(out, len);
        if (vl > 0)
            dbuf_add(out, val, (size_t)vl);
    }
}

bool dir_xattrs_differ(int a, int b)
{
    dbuf x, y;
    dbuf_init(&x, 0);
    dbuf_init(&y, 0);
    xattr_text(a, &x);
    xattr_text(b, &y);
    bool d = x.len != y.len || (x.len && memcmp(x.p, y.p, x.len));
    dbuf_free(&x);
    dbuf_free(&y);
    return d;
}

int dir_xattrs_copy(int a, int b, txbox_error *err)
{
    char list[XATTR_LIST_MAX_BYTES];
    static char val[65536];
    /* remove what a does not have */
    ssize_t n = flistxattr(b, list, sizeof list);
    for (char *p = list; n > 0 && p < list + n; p += strlen(p) + 1) {
        if (xattr_skipped(p))
            continue;
        if (fgetxattr(a, p, NULL, 0) < 0 && errno == ENODATA && fremovexattr(b, p) < 0 && errno != ENODATA)
            return tx_errno(err, errno, "cannot remove attribute %s", p);
    }
    n = flistxattr(a, list, sizeof list);
    for (char *p = list; n > 0 && p < list + n; p += strlen(p) + 1) {
        if (xattr_skipped(p))
            continue;
        ssize_t vl = fgetxattr(a, p, val, sizeof val);
        if (vl < 0)
            return tx_errno(err, errno, "cannot read attribute %s", p);
        if (fsetxattr(b, p, val, (size_t)vl, 0) < 0)
            return tx_errno(err, errno, "cannot set attribute %s", p);
    }
    return 0;
}

static bool meta_differs(const struct tx_meta *a, const struct tx_meta *b)
{
    return a->mode != b->mode || a->uid != b->uid || a->gid != b->gid || a->mtime_s != b->mtime_s ||
           a->mtime_ns != b->mtime_ns;
}

/* Scans the merged directory `path`: ufd in the upper, wfd in the
 * workspace; umode: the upper directory's mode as the command left it. */
static int scan_dir(struct scan *s, int ufd, int wfd, const char *path, mode_t umode)
{
    if (++s->depth > 4096)
        return tx_err(s->err, ELOOP, "directory tree too deep at %s", path);
    _cleanup_dir_ DIR *d = fdopendir(dup(ufd));
    if (!d)
        return tx_errno(s->err, errno, "cannot read %s in the upper", *path ? path : ".");
    rewinddir(d);       /* the dup shares ufd's offset, which an earlier scan moved */
    bool dirty = false; /* any entry of this directory was replaced here */
    struct dirent *de;
    while ((errno = 0, de = readdir(d))) {
        const char *name = de->d_name;
        if (!strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        if (!strcmp(name, TXBOX_STATE_DIR))
            continue; /* hidden from the command; never part of a transaction,
                         at any depth (a nested workspace's: state.c) */
        _cleanup_free_ char *p = join(path, name);
        struct stat ust, lst;
        if (fstatat(ufd, name, &ust, AT_SYMLINK_NOFOLLOW) < 0)
            return tx_errno(s->err, errno, "cannot stat %s in the upper", p);
        bool lower = fstatat(wfd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0;
        if (!lower && errno != ENOENT)
            return tx_errno(s->err, errno, "cannot stat %s in the workspace", p);
        /* A directory's attributes (opaque) are read, and it may be read
         * and searched: owner rwx, ust keeps the mode it had. */
        struct stat g = ust;
        if (S_ISDIR(ust.st_mode) && grant(s, ufd, name, &g, S_IRWXU, p) < 0)
            return -1;
        struct ovl_attrs a;
        if (ovl_attrs(s, ufd, name, p, NULL, &a) < 0)
            return -1;
        if (is_whiteout(&ust, &a)) {
            if (lower) {
                struct tx_op *o = op_add(s->ops, OP_DELETE, p);
                o->old_dir = S_ISDIR(lst.st_mode);
                meta_entry(&lst, &o->old);
                dirty = true;
            }
            continue;
        }
        if (S_ISDIR(ust.st_mode) && lower && S_ISDIR(lst.st_mode) && !a.opaque) {
            _cleanup_close_ int cu = openat(ufd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            _cleanup_close_ int cw = openat(wfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cu < 0 || cw < 0)
                return tx_errno(s->err, errno, "cannot open directory %s", p);
            if (scan_dir(s, cu, cw, p, ust.st_mode) < 0)
                return -1;
            continue;
        }
        if ((S_ISCHR(ust.st_mode) || S_ISBLK(ust.st_mode)) && lower && a.origin)
            return tx_err(s->err, EPERM,
                          "the command changed the device node %s (its mode, owner or "
                          "times); txbox commits no device node; commit refused",
                          p);
        if (S_ISCHR(ust.st_mode) || S_ISBLK(ust.st_mode))
            return tx_err(s->err, EPERM, "the command created a device node %s; commit refused", p);
        struct tx_meta nw;
        size_t first = s->ops->n_news;
        s->news_skip = false;
        if (prepare_subtree(s, ufd, name, p, &ust, &nw, NULL) < 0)
            return -1;
        struct tx_op *o = op_add(s->ops, OP_REPLACE, p);
        if (!s->news_full && !s->news_skip && s->ops->n_news > first) {
            o->news_first = (uint32_t)first;
            o->news_n = (uint32_t)(s->ops->n_news - first);
        }
        o->had_old = lower;
        o->old_dir = lower && S_ISDIR(lst.st_mode);
        o->new_dir = S_ISDIR(ust.st_mode);
        o->linked = lower && S_ISREG(lst.st_mode) && lst.st_nlink > 1;
        o->nw = nw;
        if (lower)
            meta_entry(&lst, &o->old);
        dirty = true;
    }
    if (errno)
        return tx_errno(s->err, errno, "cannot read %s in the upper", *path ? path : ".");
    s->depth--;
    /* The upper's directory is part of what recovery walks: durable with its
     * entries, and with any permission given to its owner. */
    struct stat ust, wst;
    if (fstat(ufd, &ust) < 0 || fstat(wfd, &wst) < 0)
        return tx_errno(s->err, errno, "cannot stat directory %s", *path ? path : ".");
    if (dirty || (ust.st_mode & 07777) != (umode & 07777))
        fs_syncset_add(&s->sync, ufd);
    /* The directory's own metadata, applied after its children. */
    struct tx_meta nw, old;
    meta_of(&ust, &nw);
    nw.mode = umode & 07777;
    meta_of(&wst, &old);
    /* Unprivileged, the upper's copy of another user's directory (a shared
     * 1777 workspace) is ours: its owner could not be given (make_dir_fd,
     * overlayfs's copy-up), and the command could not change it either. */
    if (geteuid() != 0 && wst.st_uid != geteuid() && ust.st_uid == geteuid()) {
        nw.uid = old.uid;
        nw.gid = old.gid;
    }
    bool xattrs = dir_xattrs_differ(ufd, wfd);
    if (dirty || xattrs || meta_differs(&nw, &old)) {
        struct tx_op *o = op_add(s->ops, OP_META, path);
        o->had_old = xattrs; /* META: the extended attributes changed */
        o->nw = nw;
        o->old = old;
        o->old_dir = o->new_dir = 1;
    }
    return 0;
}

int scan_upper(int upperfd, int wsfd, bool userxattr, struct tx_ops *ops, struct fs_syncset *durable,
               txbox_error *err)
{
    struct scan s = {
        .pfx = userxattr ? "user.overlay." : "trusted.overlay.",
        .ops = ops,
        .err = err,
    };
    s.pfxlen = strlen(s.pfx);
    struct stat st;
    if (fstat(upperfd, &st) < 0)
        return tx_errno(err, errno, "cannot stat the upper");
    mode_t umode = st.st_mode;
    if ((st.st_mode & S_IRWXU) != S_IRWXU && fchmod(upperfd, (st.st_mode & 07777) | S_IRWXU) < 0)
        return tx_errno(err, errno, "cannot give the owner access to the upper");
    int r = scan_dir(&s, upperfd, wsfd, "", umode);
    if (r == 0)
        r = links_complete(upperfd, wsfd, ops, &s.sync, err);
    if (r == 0 && durable) {
        *durable = s.sync; /* the caller's now */
        memset(&s.sync, 0, sizeof s.sync);
    } else if (r == 0 && fs_syncset_sync(&s.sync, upperfd) < 0) {
        r = tx_errno(err, errno, "cannot make the transaction's changes durable");
    }
    fs_syncset_free(&s.sync);
    if (r < 0)
        return r;
    /* A META alone on the root with nothing else changed is overlay's
     * copy-up of the root; keep it only if the metadata really differs. */
    if (ops->n == 1 && ops->v[0].kind == OP_META && !ops->v[0].had_old &&
        !meta_differs(&ops->v[0].nw, &ops->v[0].old))
        ops_free(ops);
    return 0;
}

/* ---- the change list reported to the user ---- */

struct chg {
    json_t *added, *modified, *deleted;
    size_t n, cap;
    bool truncated;
    size_t count[3]; /* added, modified, deleted: all of them, past the cap too */
};

static void chg_add(struct chg *c, json_t *arr, const char *path, bool dir)
{
    c->count[arr == c->added ? 0 : arr == c->modified ? 1 : 2]++;
    if (c->n >= c->cap) {
        c->truncated = true;
        return;
    }
    c->n++;
    _cleanup_free_ char *p = dir ? xasprintf("%s/", path) : xstrdup(path);
    json_array_append_new(arr, json_text(p, strlen(p), true));
}

/* Lists every entry of the tree name under dirfd into arr. type: its
 * d_type from the directory that lists it (DT_UNKNOWN: stat it; a
 * character device is stat'ed too, a whiteout being one). */
static void chg_tree(struct chg *c, json_t *arr, int at, const char *name, const char *path, unsigned depth,
                     unsigned char type)
{
    bool dir = type == DT_DIR;
    if (type == DT_UNKNOWN || type == DT_CHR) {
        struct stat st;
        if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return;
        if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0))
            return;
        dir = S_ISDIR(st.st_mode);
    }
    chg_add(c, arr, path, dir);
    if (!dir || depth > 4096)
        return;
    _cleanup_dir_ DIR *d = opendir_at(at, name);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        _cleanup_free_ char *p = join(path, de->d_name);
        chg_tree(c, arr, dirfd(d), de->d_name, p, depth + 1, de->d_type);
    }
}

/* chg_tree of the tree at path beneath root (none there: nothing). */
static void chg_path(struct chg *c, json_t *arr, int root, const char *path)
{
    const char *base;
    _cleanup_close_ int parent = safe_open_parent(root, path, &base);
    if (parent >= 0)
        chg_tree(c, arr, parent, base, path, 0, DT_UNKNOWN);
}

json_t *ops_changes(int upperfd, int wsfd, const struct tx_ops *ops, size_t cap)
{
    struct chg c = {json_array(), json_array(), json_array(), 0, cap, false, {0}};
    for (size_t i = 0; i < ops->n; i++) {
        const struct tx_op *o = &ops->v[i];
        if (o->quiet)
            continue;
        if (o->kind == OP_META) {
            /* the workspace root's own metadata is reported as "." */
            if (o->had_old || o->nw.mode != o->old.mode || o->nw.uid != o->old.uid || o->nw.gid != o->old.gid)
                chg_add(&c, c.modified, *o->path ? o->path : ".", *o->path != 0);
            continue;
        }
        if (o->kind == OP_DELETE) {
            chg_path(&c, c.deleted, wsfd, o->path);
            continue;
        }
        if (o->had_old && !o->old_dir && !o->new_dir) {
            chg_add(&c, c.modified, o->path, false);
            continue;
        }
        if (o->had_old)
            chg_path(&c, c.deleted, wsfd, o->path);
        size_t nn;
        const struct tx_new *news = ops_news(ops, o, &nn);
        for (size_t k = 0; news && k < nn; k++) /* the tree as the scan found it */
            chg_add(&c, c.added, news[k].path, S_ISDIR(news[k].st.st_mode));
        if (!news)
            chg_path(&c, c.added, upperfd, o->path);
    }
    json_t *r =
        json_pack("{s:o,s:o,s:o,s:b,s:{s:I,s:I,s:I}}", "added", c.added, "modified", c.modified, "deleted",
                  c.deleted, "truncated", c.truncated, "counts", "added", (json_int_t)c.count[0], "modified",
                  (json_int_t)c.count[1], "deleted", (json_int_t)c.count[2]);
    /* changed files whose hard links the commit could not keep (links.c) */
    if (ops->n_split) {
        json_t *sp = json_array();
        for (size_t i = 0; i < ops->n_split && i < cap; i++)
            json_array_append_new(sp, json_text(ops->split_links[i], strlen(ops->split_links[i]), true));
        json_object_set_new(r, "hard_links_split", sp);
    }
    return r;
}

/* Path order in which '/' sorts before every other byte, so that a
 * directory's descendants directly follow it. */
static int pathcmp(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned ca = (unsigned char)*a, cb = (unsigned char)*b;
        if (ca == cb) {
            if (!ca)
                return 0;
            continue;
        }
        if (!ca || !cb)
            return ca ? 1 : -1;
        if (ca == '/' || cb == '/')
            return ca == '/' ? -1 : 1;
        return ca < cb ? -1 : 1;
    }
}

static int pathcmp_p(const void *a, const void *b)
{
    return pathcmp(*(const char *const *)a, *(const char *const *)b);
}

struct pathset {
    const char **v;
    size_t n;
};

static void pathset_of(const struct tx_ops *ops, bool meta, struct pathset *s)
{
    s->v = xcalloc(ops->n + 1, sizeof *s->v);
    s->n = 0;
    for (size_t i = 0; i < ops->n; i++)
        if ((ops->v[i].kind == OP_META) == meta)
            s->v[s->n++] = ops->v[i].path;
    qsort(s->v, s->n, sizeof *s->v, pathcmp_p);
}

/* First index whose path is >= p. */
static size_t lower_bound(const struct pathset *s, const char *p)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pathcmp(s->v[mid], p) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool has_exact(const struct pathset *s, const char *p)
{
    size_t i = lower_bound(s, p);
    return i < s->n && !strcmp(s->v[i], p);
}

/* Is p, or something inside p, in s? */
static const char *has_self_or_below(const struct pathset *s, const char *p)
{
    size_t i = lower_bound(s, p), l = strlen(p);
    if (i < s->n && !strncmp(s->v[i], p, l) && (s->v[i][l] == 0 || s->v[i][l] == '/' || !l))
        return s->v[i];
    return NULL;
}

/* Is an ancestor of p (not p itself) in s? */
static const char *has_ancestor(const struct pathset *s, const char *p)
{
    _cleanup_free_ char *buf = xstrdup(p);
    for (char *slash = strrchr(buf, '/'); slash; slash = strrchr(buf, '/')) {
        *slash = 0;
        if (has_exact(s, buf))
            return p;
    }
    return NULL;
}

bool ops_overlap(const struct tx_ops *a, const struct tx_ops *b, const char **which)
{
    /* Content operations (REPLACE, DELETE) conflict when their paths are
     * equal or nested; a directory's metadata (META) conflicts with that
     * directory or an ancestor being replaced or deleted; two META never. */
    struct pathset bc, bm;
    pathset_of(b, false, &bc);
    pathset_of(b, true, &bm);
    bool hit = false;
    for (size_t i = 0; i < a->n && !hit; i++) {
        const char *p = a->v[i].path;
        if (a->v[i].kind == OP_META) {
            hit = (*p && has_exact(&bc, p)) || (*p && has_ancestor(&bc, p));
        } else {
            hit = has_self_or_below(&bc, p) || has_ancestor(&bc, p) || has_self_or_below(&bm, p);
        }
        if (hit)
            *which = p;
    }
    free(bc.v);
    free(bm.v);
    return hit;
}
