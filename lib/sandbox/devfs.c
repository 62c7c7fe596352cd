/* The minimal /dev (devfs.h). Built detached (fsmount, then each mount
 * moved into it), so that a session's keeper can hand it out for every
 * command to clone: a mount tree open_tree cloned cannot be cloned again
 * from another mount namespace, one made by fsmount can. */
#include "devfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const nodes[DEVFS_NODES] = {"null", "zero", "full", "random", "urandom", "tty"};

void devfs_open_nodes(int fds[DEVFS_NODES])
{
    for (int i = 0; i < DEVFS_NODES; i++) {
        char p[32];
        snprintf(p, sizeof p, "/dev/%s", nodes[i]);
        fds[i] = open(p, O_PATH | O_CLOEXEC);
    }
}

void devfs_close_nodes(int fds[DEVFS_NODES])
{
    for (int i = 0; i < DEVFS_NODES; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

int devfs_detached(const char *type, const char *const *opts, unsigned attr)
{
    int fs = fsopen(type, FSOPEN_CLOEXEC);
    if (fs < 0)
        return -1;
    for (; opts && opts[0]; opts += 2)
        if (fsconfig(fs, FSCONFIG_SET_STRING, opts[0], opts[1], 0) < 0)
            goto fail;
    if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        goto fail;
    int m = fsmount(fs, FSMOUNT_CLOEXEC, attr);
    int e = errno;
    close(fs);
    errno = e;
    return m;
fail:
    e = errno;
    close(fs);
    errno = e;
    return -1;
}

/* A clone of src (a detached mount or a path's), moved onto dir/name. */
static int graft(int dir, const char *name, int src_at, const char *src)
{
    int m = open_tree(src_at, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (*src ? 0 : AT_EMPTY_PATH));
    if (m < 0)
        return -1;
    int rc = move_mount(m, "", dir, name, MOVE_MOUNT_F_EMPTY_PATH);
    int e = errno;
    close(m);
    errno = e;
    return rc;
}

static int fail(int d, const char *step, const char **what)
{
    int e = errno;
    if (d >= 0)
        close(d);
    *what = step;
    errno = e;
    return -1;
}

int devfs_make(const int fds[DEVFS_NODES], int shm, bool ro, const char **what)
{
    static const char *const topts[] = {"mode", "0755", "size", "64k", NULL};
    int d = devfs_detached("tmpfs", topts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
    if (d < 0)
        return fail(d, "cannot mount /dev", what);
    for (int i = 0; i < DEVFS_NODES; i++) {
        if (fds[i] < 0)
            continue;
        int f = openat(d, nodes[i], O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
        if (f < 0)
            return fail(d, "cannot create a device node's place in /dev", what);
        close(f);
        if (graft(d, nodes[i], fds[i], "") < 0)
            return fail(d, "cannot bind a device node into /dev", what);
    }
    if (mkdirat(d, "pts", 0755) < 0 || mkdirat(d, "shm", 01777) < 0 || fchmodat(d, "shm", 01777, 0) < 0)
        return fail(d, "cannot make /dev/pts and /dev/shm", what);
    static const char *const popts[] = {"ptmxmode", "0666", "mode", "620", NULL};
    int pts = devfs_detached("devpts", popts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
    if (pts >= 0) {
        if (move_mount(pts, "", d, "pts", MOVE_MOUNT_F_EMPTY_PATH) == 0)
            (void)symlinkat("pts/ptmx", d, "ptmx");
        close(pts);
    }
    if (shm >= 0 && graft(d, "shm", shm, "") < 0)
        return fail(d, "cannot mount /dev/shm", what);
    (void)symlinkat("/proc/self/fd", d, "fd");
    (void)symlinkat("/proc/self/fd/0", d, "stdin");
    (void)symlinkat("/proc/self/fd/1", d, "stdout");
    (void)symlinkat("/proc/self/fd/2", d, "stderr");
    struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY};
    if (ro && mount_setattr(d, "", AT_EMPTY_PATH, &a, sizeof a) < 0)
        return fail(d, "cannot make /dev read-only", what);
    return d;
}
