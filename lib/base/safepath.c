#include "safepath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <sys/xattr.h>

#if !defined(__NR_listxattrat) && !defined(__alpha__)
#define __NR_listxattrat 465 /* one number on every architecture since 5.1 but alpha */
#endif

static int openat2_state; /* 0 unknown, 1 works, -1 unavailable */
#ifdef __NR_listxattrat
static int listxattrat_ok = 1; /* 0: ENOSYS seen, or the fallback forced */
#else
static int listxattrat_ok;
#endif

void safepath_force_fallback(bool on)
{
    openat2_state = on ? -1 : 1;
#ifdef __NR_listxattrat
    listxattrat_ok = !on;
#endif
}

ssize_t xattr_list_at(int dirfd, const char *name, char *buf, size_t n)
{
#ifdef __NR_listxattrat
    if (listxattrat_ok) {
        long r = syscall(__NR_listxattrat, dirfd, name, AT_SYMLINK_NOFOLLOW, buf, n);
        if (r >= 0 || errno != ENOSYS)
            return (ssize_t)r;
        listxattrat_ok = 0;
    }
#endif
    char p[PATH_MAX];
    if ((size_t)snprintf(p, sizeof p, "/proc/self/fd/%d/%s", dirfd, name) >= sizeof p) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return llistxattr(p, buf, n);
}

bool safe_relpath_ok(const char *rel)
{
    if (!rel || rel[0] == '/')
        return false;
    if (!*rel)
        return true;
    const char *p = rel;
    for (;;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (!e)
            return true;
        p = e + 1;
    }
}

static int walk_fallback(int dirfd, const char *rel, int flags, mode_t mode)
{
    _cleanup_close_ int cur = openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0)
        return -1;
    const char *p = rel;
    for (;;) {
        const char *e = strchr(p, '/');
        if (!e)
            break;
        size_t n = (size_t)(e - p);
        char comp[NAME_MAX + 1];
        if (n > NAME_MAX) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(comp, p, n);
        comp[n] = 0;
        int next = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            if (errno == ENOTDIR) {
                /* A symlink in the middle reads as ENOTDIR with O_NOFOLLOW|O_DIRECTORY. */
                struct stat st;
                if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
                    errno = ELOOP;
            }
            return -1;
        }
        close(cur);
        cur = next;
        p = e + 1;
    }
    return openat(cur, p, flags | O_NOFOLLOW | O_CLOEXEC, mode);
}

int safe_openat(int dirfd, const char *rel, int flags, mode_t mode)
{
    if (!safe_relpath_ok(rel)) {
        errno = EINVAL;
        return -1;
    }
    if (!*rel)
        return openat(dirfd, ".", (flags & ~(O_CREAT | O_EXCL)) | O_CLOEXEC);
    if (openat2_state == 0)
        openat2_state = getenv("TXBOX_NO_OPENAT2") && !strcmp(getenv("TXBOX_NO_OPENAT2"), "1") ? -1 : 1;
    if (openat2_state > 0) {
        struct open_how how = {
            .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
            .mode = (flags & (O_CREAT | __O_TMPFILE)) ? mode : 0,
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        /* O_PATH with O_NOFOLLOW opens a final symlink itself: keep that
         * meaning (callers lstat through it), as the fallback does. */
        long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
        if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
            return (int)fd;
        openat2_state = -1; /* seccomp'd or old kernel: fall back for good */
    }
    return walk_fallback(dirfd, rel, flags, mode);
}

int safe_openat_noatime(int dirfd, const char *rel, int flags)
{
    /* Not O_NOATIME in the open: a file the caller does not own makes
     * openat2 fail with EPERM, which safe_openat takes for a seccomp'd
     * openat2 (and falls back for good). Set on the open file instead,
     * where EPERM only leaves the flag off. */
    int fd = safe_openat(dirfd, rel, flags, 0);
    if (fd >= 0) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            (void)fcntl(fd, F_SETFL, fl | O_NOATIME);
    }
    return fd;
}

static int open_parent(int dirfd, const char *rel, const char **base, int how)
{
    const char *slash = strrchr(rel, '/');
    if (!slash) {
        *base = rel;
        return openat(dirfd, ".", how | O_DIRECTORY | O_CLOEXEC);
    }
    *base = slash + 1;
    size_t n = (size_t)(slash - rel);
    _cleanup_free_ char *dir = xmalloc(n + 1);
    memcpy(dir, rel, n);
    dir[n] = 0;
    return safe_openat(dirfd, dir, how | O_DIRECTORY, 0);
}

int safe_open_parent(int dirfd, const char *rel, const char **base)
{
    return open_parent(dirfd, rel, base, O_PATH);
}

int safe_open_parent_rd(int dirfd, const char *rel, const char **base)
{
    return open_parent(dirfd, rel, base, O_RDONLY);
}

int exists_at(int dfd, const char *name)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return 1;
    return errno == ENOENT ? 0 : -1;
}
