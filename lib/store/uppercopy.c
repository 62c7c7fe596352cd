/* A copy of a live overlay upper: see uppercopy.h. */
#include "uppercopy.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/xattr.h>

#include "fsops.h"
#include "safepath.h"
#include "tree.h"

#define UPPER_DEPTH 256

void urec_free(struct urec *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->v[i].path);
    free(r->v);
    *r = (struct urec){0};
}

static void urec_add(struct urec *r, const char *path, const struct stat *st)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->v = xrealloc(r->v, r->cap * sizeof *r->v);
    }
    r->v[r->n++] = (struct urec_ent){.path = xstrdup(path),
                                     .ino = st->st_ino,
                                     .ctime = st->st_ctim,
                                     .mode = st->st_mode,
                                     .uid = st->st_uid,
                                     .gid = st->st_gid};
}

static int ent_cmp(const void *a, const void *b)
{
    return strcmp(((const struct urec_ent *)a)->path, ((const struct urec_ent *)b)->path);
}

static const struct urec_ent *urec_find(const struct urec *r, const char *path)
{
    if (!r || !r->n)
        return NULL;
    struct urec_ent key = {.path = (char *)path};
    return bsearch(&key, r->v, r->n, sizeof *r->v, ent_cmp);
}

/* Records: "ino ctime.sec ctime.nsec mode uid gid path" ending in a NUL
 * (a path may hold a newline). */
int urec_write(int dirfd, const char *name, const struct urec *r, txbox_error *err)
{
    dbuf b;
    dbuf_init(&b, 0);
    for (size_t i = 0; i < r->n; i++) {
        const struct urec_ent *e = &r->v[i];
        char head[160];
        snprintf(head, sizeof head, "%llu %lld %ld %o %u %u ", (unsigned long long)e->ino,
                 (long long)e->ctime.tv_sec, (long)e->ctime.tv_nsec, (unsigned)e->mode, (unsigned)e->uid,
                 (unsigned)e->gid);
        dbuf_addstr(&b, head);
        dbuf_add(&b, e->path, strlen(e->path) + 1);
    }
    char tmp[96];
    snprintf(tmp, sizeof tmp, ".%s.new", name);
    int rc = 0;
    _cleanup_close_ int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write_all(fd, b.p ? b.p : "", b.len) < 0 || renameat(dirfd, tmp, dirfd, name) < 0)
        rc = tx_errno(err, errno, "cannot write %s", name);
    dbuf_free(&b);
    return rc;
}

int urec_read(int dirfd, const char *name, struct urec *r, txbox_error *err)
{
    *r = (struct urec){0};
    _cleanup_free_ char *s = NULL;
    size_t len = 0;
    if (read_file_at(dirfd, name, 1u << 30, &s, &len, err) < 0)
        return -1;
    for (size_t off = 0; off < len;) {
        const char *rec = s + off;
        size_t l = strnlen(rec, len - off);
        if (l == len - off)
            break; /* not ended: a torn record */
        unsigned long long ino;
        long long sec;
        long nsec;
        unsigned mode, uid, gid;
        int used = 0;
        if (sscanf(rec, "%llu %lld %ld %o %u %u %n", &ino, &sec, &nsec, &mode, &uid, &gid, &used) != 6 ||
            !used) {
            urec_free(r);
            return tx_err(err, EINVAL, "%s: not a record of an upper", name);
        }
        struct stat st = {.st_ino = ino, .st_mode = mode, .st_uid = uid, .st_gid = gid};
        st.st_ctim = (struct timespec){.tv_sec = sec, .tv_nsec = nsec};
        urec_add(r, rec + used, &st);
        off += l + 1;
    }
    qsort(r->v, r->n, sizeof *r->v, ent_cmp);
    return 0;
}

struct ucopy {
    const struct urec *since;
    struct urec *now;
    const char *opaque_key;
    size_t copied;
    bool root;
    txbox_error *err;
};

static char *join(const char *dir, const char *name)
{
    return *dir ? xasprintf("%s/%s", dir, name) : xstrdup(name);
}

/* The owner's bits an entry lacks to be read (and, for a directory,
 * searched), given for the time of the copy: *had its mode, to put back
 * (0: nothing was changed). Root needs none. */
static void grant_read(struct ucopy *c, int dfd, const char *name, const struct stat *st, mode_t *had)
{
    *had = 0;
    mode_t need = S_ISDIR(st->st_mode) ? S_IRUSR | S_IXUSR : S_ISREG(st->st_mode) ? S_IRUSR : 0;
    if (c->root || !need || (st->st_mode & need) == need)
        return;
    if (fchmodat(dfd, name, (st->st_mode & 07777) | need, 0) == 0)
        *had = st->st_mode & 07777;
}

static void restore_mode(int dfd, const char *name, mode_t had, struct stat *st)
{
    if (!had)
        return;
    (void)fchmodat(dfd, name, had, 0);
    (void)fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW); /* the record's change time is this one */
}

/* A directory of dst, made when the first entry under it is copied (its
 * parents first), mode 0700 until its own attributes are set at the end
 * of its walk. The top one is dst itself. */
struct lazydir {
    const char *name;
    int fd; /* -1 until made */
    struct lazydir *up;
};

static int lazy_open(struct ucopy *c, struct lazydir *l)
{
    if (l->fd >= 0)
        return l->fd;
    if (lazy_open(c, l->up) < 0)
        return -1;
    if (mkdirat(l->up->fd, l->name, 0700) < 0 && errno != EEXIST)
        return tx_errno(c->err, errno, "cannot create %s", l->name);
    l->fd = openat(l->up->fd, l->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (l->fd < 0)
        return tx_errno(c->err, errno, "cannot open %s", l->name);
    return l->fd;
}

/* A whiteout at name under dfd: the recorded entry is gone. */
static int whiteout(struct ucopy *c, int dfd, const char *name, const char *path)
{
    if (mknodat(dfd, name, S_IFCHR | 0000, 0) < 0)
        return tx_errno(c->err, errno, "cannot record the removal of %s", path);
    c->copied++;
    return 0;
}

/* The directory's own attributes onto its copy dfd (named name under
 * dparent), after its entries. */
static void dir_attrs(int sfd_parent, const char *name, int dparent, int dfd, const struct stat *st)
{
    tree_copy_xattrs(sfd_parent, name, dparent, name);
    (void)fchown(dfd, st->st_uid, st->st_gid);
    (void)fchmod(dfd, st->st_mode & 07777);
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    (void)futimens(dfd, ts);
}

static int walk(struct ucopy *c, int sfd, struct lazydir *dl, const char *path, unsigned depth, bool all);

/* A directory entry: the same directory as recorded is merged (only what
 * changed in it, and it is made only when something is); a new or
 * replaced one is copied whole, and opaque over what is there. */
static int copy_subdir(struct ucopy *c, int sfd, struct lazydir *dl, const char *name, const char *path,
                       unsigned depth, bool all, bool same, const struct urec_ent *was, struct stat *st)
{
    if (depth >= UPPER_DEPTH)
        return tx_err(c->err, ELOOP, "%s: deeper than %d directories", path, UPPER_DEPTH);
    mode_t had;
    grant_read(c, sfd, name, st, &had);
    size_t idx = c->now ? c->now->n : 0;
    if (c->now)
        urec_add(c->now, path, st);
    int sub = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc = sub < 0 ? tx_errno(c->err, errno, "cannot open %s", path) : 0;
    bool whole = !c->since || all || !same;
    bool merged = c->since && !whole;
    struct lazydir l = {.name = name, .fd = -1, .up = dl};
    if (rc == 0 && (whole || was->mode != st->st_mode || was->uid != st->st_uid || was->gid != st->st_gid))
        rc = lazy_open(c, &l) < 0 ? -1 : 0;
    if (rc == 0)
        rc = walk(c, sub, &l, path, depth + 1, c->since && whole);
    if (rc == 0 && l.fd >= 0) {
        dir_attrs(sfd, name, dl->fd, l.fd, st);
        if (merged)
            (void)fremovexattr(l.fd, c->opaque_key); /* merged with what is there */
        else if (c->since)
            (void)fsetxattr(l.fd, c->opaque_key, "y", 1, 0); /* replaces what is there */
        c->copied++;
    }
    if (l.fd >= 0)
        close(l.fd);
    if (sub >= 0)
        close(sub);
    restore_mode(sfd, name, had, st);
    if (c->now && had)
        c->now->v[idx].ctime = st->st_ctim; /* after the mode was put back */
    return rc;
}

/* One entry of the directory sfd (path: its path in the upper). all: copy
 * it whatever the record says (under a directory copied whole). */
static int copy_entry(struct ucopy *c, int sfd, struct lazydir *dl, const char *name, const char *path,
                      unsigned depth, bool all)
{
    struct stat st;
    if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : tx_errno(c->err, errno, "cannot stat %s", path);
    const struct urec_ent *was = all ? NULL : urec_find(c->since, path);
    bool same = was && was->ino == st.st_ino && (was->mode & S_IFMT) == (st.st_mode & S_IFMT);
    if (S_ISDIR(st.st_mode))
        return copy_subdir(c, sfd, dl, name, path, depth, all, same, was, &st);
    size_t idx = c->now ? c->now->n : 0;
    if (c->now)
        urec_add(c->now, path, &st);
    bool changed = all || !c->since || !same || was->ctime.tv_sec != st.st_ctim.tv_sec ||
                   was->ctime.tv_nsec != st.st_ctim.tv_nsec;
    if (!changed)
        return 0;
    int dfd = lazy_open(c, dl);
    if (dfd < 0)
        return -1;
    mode_t had;
    grant_read(c, sfd, name, &st, &had);
    int rc = tree_copy(sfd, name, dfd, name, NULL, c->err);
    restore_mode(sfd, name, had, &st);
    if (c->now && had)
        c->now->v[idx].ctime = st.st_ctim;
    if (rc == 0)
        c->copied++;
    return rc;
}

/* The first recorded entry not before key (the record is sorted: the
 * entries under "dir/" follow one another). */
static size_t lower_bound(const struct urec *r, const char *key)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(r->v[mid].path, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Entries recorded directly under path that are gone now: a whiteout
 * each (a removed directory once, not its entries). */
static int vanished(struct ucopy *c, struct lazydir *dl, int sfd, const char *path)
{
    if (!c->since)
        return 0;
    _cleanup_free_ char *pfx = *path ? xasprintf("%s/", path) : xstrdup("");
    size_t pl = strlen(pfx);
    for (size_t i = lower_bound(c->since, pfx); i < c->since->n; i++) {
        const char *p = c->since->v[i].path;
        if (strncmp(p, pfx, pl) != 0)
            break;
        const char *rest = p + pl;
        if (!*rest || strchr(rest, '/'))
            continue; /* not a direct entry of this directory */
        struct stat st;
        if (fstatat(sfd, rest, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
            continue;
        int dfd = lazy_open(c, dl);
        if (dfd < 0 || whiteout(c, dfd, rest, p) < 0)
            return -1;
    }
    return 0;
}

/* The entries of sfd (path: its path in the upper) into the directory dl
 * (made when the first of them is copied). */
static int walk(struct ucopy *c, int sfd, struct lazydir *dl, const char *path, unsigned depth, bool all)
{
    /* a descriptor of its own: a dup would share sfd's offset, at the end
     * after an earlier walk */
    int dup_fd = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return tx_errno(c->err, errno, "cannot list %s", *path ? path : "the upper");
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        _cleanup_free_ char *p = join(path, de->d_name);
        rc = copy_entry(c, sfd, dl, de->d_name, p, depth, all);
    }
    closedir(d);
    if (rc == 0 && !all)
        rc = vanished(c, dl, sfd, path);
    return rc;
}

int upper_copy(int src, int dst, const struct urec *since, struct urec *now, const char *opaque_key,
               size_t *copied, txbox_error *err)
{
    struct ucopy c = {
        .since = since, .now = now, .opaque_key = opaque_key, .root = tx_privileged(), .err = err};
    if (now)
        *now = (struct urec){0};
    struct lazydir top = {.name = "", .fd = dst};
    int rc = walk(&c, src, &top, "", 0, false);
    if (now) {
        if (rc < 0)
            urec_free(now);
        else
            qsort(now->v, now->n, sizeof *now->v, ent_cmp);
    }
    *copied = c.copied;
    return rc;
}
