/* Whole-tree utilities, all relative to directory fds and never following
 * symlinks: removal and metadata-preserving copy. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "tree.h"

#include "safepath.h"

#define MAX_DEPTH 4096

static int remove_rec(int at, const char *name, unsigned depth, const atomic_bool *stop)
{
    if (stop && atomic_load(stop)) {
        errno = EINTR;
        return -1;
    }
    struct stat st;
    if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(at, name, 0) < 0 && errno != ENOENT ? -1 : 0;
    if (depth > MAX_DEPTH) {
        errno = ELOOP;
        return -1;
    }
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == EACCES && fchmodat(at, name, 0700, 0) == 0)
        fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    /* A directory we may list but not write (chmod 555 by the command). */
    if ((st.st_mode & 0700) != 0700)
        (void)fchmod(fd, 0700);
    _cleanup_dir_ DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (remove_rec(dirfd(d), de->d_name, depth + 1, stop) < 0) {
            rc = -1;
            if (errno == EINTR)
                break;
        }
    }
    if (rc < 0)
        return -1;
    return unlinkat(at, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -1 : 0;
}

int tree_remove(int dirfd, const char *name) { return remove_rec(dirfd, name, 0, NULL); }

static void grant_rec(int at, const char *name, unsigned depth, bool files)
{
    if (depth > MAX_DEPTH)
        return;
    struct stat st;
    if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    if (S_ISREG(st.st_mode)) {
        if (files && (st.st_mode & 0600) != 0600)
            (void)fchmodat(at, name, (st.st_mode & 07777) | 0600, 0);
        return;
    }
    if (!S_ISDIR(st.st_mode))
        return;
    if ((st.st_mode & 0700) != 0700 && fchmodat(at, name, (st.st_mode & 07777) | 0700, 0) < 0)
        return;
    _cleanup_dir_ DIR *d = opendir_at(at, name);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if ((de->d_type == DT_DIR || de->d_type == DT_UNKNOWN || (files && de->d_type == DT_REG)) &&
            strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            grant_rec(dirfd(d), de->d_name, depth + 1, files);
}

void tree_grant_owner(int dirfd, const char *name, bool files) { grant_rec(dirfd, name, 0, files); }

int tree_remove_until(int dirfd, const char *name, const atomic_bool *stop)
{
    return remove_rec(dirfd, name, 0, stop);
}

void tree_copy_xattrs(int sdir, const char *sname, int ddir, const char *dname)
{
    char sp[PATH_MAX], dp[PATH_MAX], list[65536], val[65536];
    snprintf(sp, sizeof sp, "/proc/self/fd/%d/%s", sdir, sname);
    snprintf(dp, sizeof dp, "/proc/self/fd/%d/%s", ddir, dname);
    ssize_t n = xattr_list_at(sdir, sname, list, sizeof list);
    for (char *k = list; n > 0 && k < list + n; k += strlen(k) + 1) {
        ssize_t vl = lgetxattr(sp, k, val, sizeof val);
        if (vl >= 0)
            (void)lsetxattr(dp, k, val, (size_t)vl, 0);
    }
}

static int copy_data(int in, int out)
{
    for (;;) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
        if (n == 0)
            return 0;
        if (n > 0)
            continue;
        if (errno == EINTR)
            continue;
        if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
            return -1;
        break;
    }
    char buf[1 << 16];
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        if (write_all(out, buf, (size_t)r) < 0)
            return -1;
    }
}

struct cp {
    const char *skip;
    txbox_error *err;
    bool grant; /* tree_copy_granting */
};

/* tree_copy_granting: the owner's read (and, for a directory, search)
 * permission given to a source entry of ours that lacks it, for the time
 * of its copy; *undo: it was (its mode is set back with that). Never to a
 * file with other links: they might be names outside the tree. */
static int grant_src(struct cp *c, int sdir, const char *src, const struct stat *st, bool *undo)
{
    mode_t need = S_ISDIR(st->st_mode) ? S_IRUSR | S_IXUSR : S_IRUSR;
    *undo = false;
    if (!c->grant || (st->st_mode & need) == need || st->st_uid != geteuid() ||
        !(S_ISDIR(st->st_mode) || (S_ISREG(st->st_mode) && st->st_nlink == 1)))
        return 0;
    if (fchmodat(sdir, src, (st->st_mode & 07777) | need, 0) < 0)
        return tx_errno(c->err, errno, "cannot read %s", src);
    *undo = true;
    return 0;
}

static int copy_rec(struct cp *c, int sdir, const char *src, int ddir, const char *dst, unsigned depth);

static int copy_granted(struct cp *c, int sdir, const char *src, int ddir, const char *dst, unsigned depth)
{
    struct stat st;
    bool undo;
    if (fstatat(sdir, src, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return tx_errno(c->err, errno, "cannot stat %s", src);
    if (grant_src(c, sdir, src, &st, &undo) < 0)
        return -1;
    int rc = copy_rec(c, sdir, src, ddir, dst, depth);
    if (undo && fchmodat(sdir, src, st.st_mode & 07777, 0) < 0 && rc == 0)
        rc = tx_errno(c->err, errno, "cannot set the mode of %s back", src);
    if (undo && rc == 0 && fchmodat(ddir, dst, st.st_mode & 07777, 0) < 0)
        rc = tx_errno(c->err, errno, "cannot set mode of %s", dst);
    return rc;
}

static int copy_rec(struct cp *c, int sdir, const char *src, int ddir, const char *dst, unsigned depth)
{
    struct stat st;
    if (fstatat(sdir, src, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return tx_errno(c->err, errno, "cannot stat %s", src);
    struct timespec ts[2] = {st.st_atim, st.st_mtim};
    if (S_ISDIR(st.st_mode)) {
        if (depth > MAX_DEPTH)
            return tx_err(c->err, ELOOP, "tree too deep at %s", src);
        if (mkdirat(ddir, dst, 0700) < 0)
            return tx_errno(c->err, errno, "cannot create %s", dst);
        int sfd = openat(sdir, src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sfd < 0)
            return tx_errno(c->err, errno, "cannot open %s", src);
        _cleanup_close_ int dfd = openat(ddir, dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_dir_ DIR *d = fdopendir(sfd);
        if (!d || dfd < 0) {
            if (!d)
                close(sfd);
            return tx_errno(c->err, errno, "cannot copy %s", src);
        }
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            if (depth == 0 && c->skip && !strcmp(de->d_name, c->skip))
                continue;
            if ((c->grant ? copy_granted : copy_rec)(c, dirfd(d), de->d_name, dfd, de->d_name, depth + 1) < 0)
                return -1;
        }
        tree_copy_xattrs(sdir, src, ddir, dst);
        (void)fchown(dfd, st.st_uid, st.st_gid);
        if (fchmod(dfd, st.st_mode & 07777) < 0)
            return tx_errno(c->err, errno, "cannot set mode of %s", dst);
        (void)futimens(dfd, ts);
        return 0;
    }
    if (S_ISREG(st.st_mode)) {
        _cleanup_close_ int in = openat(sdir, src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (in < 0)
            return tx_errno(c->err, errno, "cannot open %s", src);
        _cleanup_close_ int out =
            openat(ddir, dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
            return tx_errno(c->err, errno, "cannot create %s", dst);
        if (copy_data(in, out) < 0)
            return tx_errno(c->err, errno, "cannot copy %s", src);
        tree_copy_xattrs(sdir, src, ddir, dst);
        (void)fchown(out, st.st_uid, st.st_gid);
        if (fchmod(out, st.st_mode & 07777) < 0)
            return tx_errno(c->err, errno, "cannot set mode of %s", dst);
        (void)futimens(out, ts);
        return 0;
    }
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX + 1];
        ssize_t n = readlinkat(sdir, src, target, PATH_MAX);
        if (n < 0)
            return tx_errno(c->err, errno, "cannot read link %s", src);
        target[n] = 0;
        if (symlinkat(target, ddir, dst) < 0)
            return tx_errno(c->err, errno, "cannot create link %s", dst);
    } else if (S_ISFIFO(st.st_mode)) {
        if (mkfifoat(ddir, dst, st.st_mode & 07777) < 0)
            return tx_errno(c->err, errno, "cannot create fifo %s", dst);
    } else if (S_ISSOCK(st.st_mode)) {
        return 0; /* a socket's inode means nothing without its listener */
    } else {
        if (mknodat(ddir, dst, st.st_mode, st.st_rdev) < 0)
            return tx_errno(c->err, errno, "cannot copy device node %s", src);
    }
    tree_copy_xattrs(sdir, src, ddir, dst);
    (void)fchownat(ddir, dst, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
    if (!S_ISLNK(st.st_mode))
        (void)fchmodat(ddir, dst, st.st_mode & 07777, 0);
    (void)utimensat(ddir, dst, ts, AT_SYMLINK_NOFOLLOW);
    return 0;
}

int tree_copy(int sdir, const char *src, int ddir, const char *dst, const char *skip, txbox_error *err)
{
    struct cp c = {skip, err, false};
    return copy_rec(&c, sdir, src, ddir, dst, 0);
}

int tree_copy_granting(int sdir, const char *src, int ddir, const char *dst, txbox_error *err)
{
    struct cp c = {NULL, err, true};
    return copy_granted(&c, sdir, src, ddir, dst, 0);
}
