/* Hard-link groups kept whole by a commit.
 *
 * The commit installs a changed file by renaming the upper's copy over the
 * workspace's name (journal.c): a new inode. A plain run that changes a
 * file in place (`echo >> a`, `chmod`) changes every name of its inode; the
 * rename would leave the group's other names with the old content and mode.
 *
 * So, before the commit point: for each regular file the command changed
 * whose old inode has other names, the workspace is walked once for those
 * names. The upper does not say whether the file was changed in place or
 * replaced by a new one (`sed -i`, an editor's save by rename): overlayfs
 * records the origin of a copy-up only for files with one link, and not at
 * all in a user namespace. Both are taken as a change of the group, which
 * is what the plain run does for the first and not for the second (there
 * the other names would keep the old content): README, Limits. When every name of the group is inside the workspace, each other
 * name Q gets a hard link upper/Q to the new file and a REPLACE operation
 * of its own: the journal then installs the new inode under every name
 * and keeps the old one under each as a pre-image, so rollback, recovery
 * and undo need nothing new. When a name lies outside the workspace (a
 * link to a host file: the command must not change that file) or cannot
 * be placed, the group is split as before and the result says so
 * (ops->split_links). */
#include <fcntl.h>
#include <sys/stat.h>

#include "fsops.h"
#include "tx.h"

struct group {
    size_t op; /* the REPLACE of the changed name */
    dev_t dev;
    ino_t ino;
    nlink_t nlink;
    char **names; /* found in the workspace, the changed one included */
    size_t n;
};

struct walk {
    struct group *g;
    size_t ng, missing; /* names not found yet, in all groups */
    dev_t dev;          /* the workspace's filesystem: mounts are not entered */
    unsigned depth;
    bool failed;
};

static void walk_dir(struct walk *w, int dfd, const char *path)
{
    if (++w->depth > 4096) {
        w->failed = true;
        return;
    }
    _cleanup_dir_ DIR *d = fdopendir(dup(dfd));
    if (!d) {
        w->failed = true;
        w->depth--;
        return;
    }
    struct dirent *de;
    while (w->missing && (errno = 0, de = readdir(d))) {
        const char *n = de->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, TXBOX_STATE_DIR))
            continue;
        if (de->d_type != DT_REG && de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
            continue;
        struct stat st;
        if (fstatat(dfd, n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            w->failed = true;
            continue;
        }
        if (st.st_dev != w->dev)
            continue;
        _cleanup_free_ char *p = *path ? xasprintf("%s/%s", path, n) : xstrdup(n);
        if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
            for (size_t i = 0; i < w->ng; i++) {
                struct group *g = &w->g[i];
                if (g->ino == st.st_ino && g->dev == st.st_dev && g->n < g->nlink) {
                    g->names = xrealloc(g->names, (g->n + 1) * sizeof *g->names);
                    g->names[g->n++] = xstrdup(p);
                    w->missing--;
                }
            }
        } else if (S_ISDIR(st.st_mode)) {
            _cleanup_close_ int c = openat(dfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (c < 0)
                w->failed = true;
            else
                walk_dir(w, c, p);
        }
    }
    if (errno)
        w->failed = true;
    w->depth--;
}

/* Is path inside (strictly below) dir? */
static bool below(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return !*dir || (!strncmp(path, dir, n) && path[n] == '/');
}

/* What the commit already does to name q: 0 nothing, 1 an operation on q
 * itself or on a directory above it (q goes or is replaced: the plain run
 * would leave that name alone too), 2 q is another changed name of the
 * same group (two copies, changed apart: no single new content). */
static int taken(const struct tx_ops *ops, size_t nops, const struct group *gs, size_t ng,
                 const struct group *g, const char *q)
{
    for (size_t i = 0; i < nops; i++) {
        const struct tx_op *o = &ops->v[i];
        if (o->kind == OP_META)
            continue;
        if (!strcmp(o->path, q)) {
            for (size_t k = 0; k < ng; k++)
                if (gs[k].op == i && gs[k].ino == g->ino && gs[k].dev == g->dev)
                    return 2;
            return 1;
        }
        if (below(q, o->path))
            return 1;
    }
    return 0;
}

/* mkdir -p of q's parent in the upper, each directory made as overlay's
 * copy-up would (the workspace's mode, owner and times: a later command of
 * a multi-command transaction sees the same directory): its fd, or -1. */
static int upper_parent(int upperfd, int wsfd, const char *q, const char **base)
{
    _cleanup_free_ char *dir = xstrdup(q);
    char *slash = strrchr(dir, '/');
    *base = strrchr(q, '/') ? strrchr(q, '/') + 1 : q;
    int fd = fcntl(upperfd, F_DUPFD_CLOEXEC, 3);
    int wfd = fcntl(wsfd, F_DUPFD_CLOEXEC, 3);
    if (slash)
        *slash = 0;
    for (char *c = slash ? dir : NULL, *next; fd >= 0 && wfd >= 0 && c; c = next) {
        next = strchr(c, '/');
        if (next)
            *next++ = 0;
        struct stat st;
        int nw = openat(wfd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(wfd);
        wfd = nw;
        if (wfd < 0 || fstat(wfd, &st) < 0)
            break;
        bool made = mkdirat(fd, c, 0700) == 0;
        int n = made || errno == EEXIST ? openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        close(fd);
        fd = n;
        if (made && fd >= 0) {
            struct timespec t[2] = {st.st_atim, st.st_mtim};
            if ((fchown(fd, st.st_uid, st.st_gid) < 0 && errno != EPERM) ||
                fchmod(fd, st.st_mode & 07777) < 0 || futimens(fd, t) < 0) {
                close(fd);
                fd = -1;
            }
        }
    }
    if (wfd >= 0)
        close(wfd);
    else if (fd >= 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void split(struct tx_ops *ops, const char *path)
{
    for (size_t i = 0; i < ops->n_split; i++)
        if (!strcmp(ops->split_links[i], path))
            return;
    ops->split_links = xrealloc(ops->split_links, (ops->n_split + 1) * sizeof *ops->split_links);
    ops->split_links[ops->n_split++] = xstrdup(path);
}

int links_complete(int upperfd, int wsfd, struct tx_ops *ops, struct fs_syncset *sync, txbox_error *err)
{
    /* the groups: a regular file replaced by a regular file, whose old
     * inode the scan saw with other names (no stat for any other file) */
    struct group *gs = NULL;
    size_t ng = 0, missing = 0;
    for (size_t i = 0; i < ops->n; i++) {
        const struct tx_op *o = &ops->v[i];
        if (o->kind != OP_REPLACE || !o->linked || o->new_dir || !S_ISREG(o->nw.mode))
            continue;
        struct stat st;
        if (fstatat(wsfd, o->path, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) || st.st_nlink < 2)
            continue;
        gs = xrealloc(gs, (ng + 1) * sizeof *gs);
        gs[ng++] = (struct group){.op = i, .dev = st.st_dev, .ino = st.st_ino, .nlink = st.st_nlink};
        missing += st.st_nlink;
    }
    if (!ng)
        return 0;
    struct stat wst;
    if (fstat(wsfd, &wst) < 0) {
        free(gs);
        return tx_errno(err, errno, "cannot stat the workspace");
    }
    struct walk w = {.g = gs, .ng = ng, .missing = missing, .dev = wst.st_dev};
    walk_dir(&w, wsfd, "");
    size_t nops = ops->n;
    int rc = 0;
    for (size_t k = 0; k < ng && rc == 0; k++) {
        struct group *g = &gs[k];
        const char *p = ops->v[g->op].path;
        if (g->n != g->nlink || w.failed) {
            split(ops, p); /* a name outside the workspace, or not found */
            continue;
        }
        for (size_t j = 0; j < g->n && rc == 0; j++) {
            const char *q = g->names[j];
            if (!strcmp(q, p))
                continue;
            int t = taken(ops, nops, gs, ng, g, q);
            if (t == 2)
                split(ops, p);
            if (t)
                continue;
            struct stat qst;
            const char *base;
            _cleanup_close_ int par = upper_parent(upperfd, wsfd, q, &base);
            if (fstatat(wsfd, q, &qst, AT_SYMLINK_NOFOLLOW) < 0 || par < 0 ||
                linkat(upperfd, p, par, base, 0) < 0) {
                rc = tx_errno(err, errno, "cannot keep %s linked to %s", q, p);
                break;
            }
            fs_syncset_add(sync, par);
            struct tx_meta nw = ops->v[g->op].nw;
            struct tx_op *o = op_add(ops, OP_REPLACE, q);
            p = ops->v[g->op].path; /* op_add may move the array */
            o->had_old = 1;
            o->nw = nw;
            meta_entry(&qst, &o->old);
        }
    }
    for (size_t k = 0; k < ng; k++) {
        for (size_t j = 0; j < gs[k].n; j++)
            free(gs[k].names[j]);
        free(gs[k].names);
    }
    free(gs);
    return rc ? -1 : 0;
}
