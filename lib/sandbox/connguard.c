/* The connection guard: see connguard.h. */
#include "connguard.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <linux/openat2.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif

/* Room for the kernel's notification and response (their sizes grow with
 * new kernels: connguard_init refuses sizes larger than these). */
#define NOTIF_ROOM 256
#define RESP_ROOM 128

int connguard_init(struct connguard *g)
{
    memset(g, 0, sizeof *g);
    struct seccomp_notif_sizes sz;
    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) < 0)
        return -errno;
    if (sz.seccomp_notif > NOTIF_ROOM || sz.seccomp_notif_resp > RESP_ROOM ||
        sz.seccomp_notif < sizeof(struct seccomp_notif) ||
        sz.seccomp_notif_resp < sizeof(struct seccomp_notif_resp))
        return -EOVERFLOW;
    g->notif_size = sz.seccomp_notif;
    g->resp_size = sz.seccomp_notif_resp;
    g->rootfd = -1;
    return 0;
}

static int mount_id(int dirfd, const char *path, int flags, uint64_t *id, mode_t *mode)
{
    struct statx sx;
    if (statx(dirfd, path, flags | AT_STATX_SYNC_AS_STAT, STATX_TYPE | STATX_MNT_ID, &sx) < 0)
        return -errno;
    if (!(sx.stx_mask & STATX_MNT_ID))
        return -ENOSYS; /* before Linux 5.8 */
    *id = sx.stx_mnt_id;
    if (mode)
        *mode = sx.stx_mode;
    return 0;
}

int connguard_allow_mount(struct connguard *g, const char *path)
{
    uint64_t id;
    int r = mount_id(AT_FDCWD, path, 0, &id, NULL);
    if (r < 0)
        return r;
    for (size_t i = 0; i < g->n_mounts; i++)
        if (g->mounts[i] == id)
            return 0;
    if (g->n_mounts == CONNGUARD_MAX_MOUNTS)
        return -E2BIG;
    g->mounts[g->n_mounts++] = id;
    return 0;
}

int connguard_check_socket(const struct connguard *g, int fd)
{
    uint64_t id;
    mode_t mode;
    int r = mount_id(fd, "", AT_EMPTY_PATH, &id, &mode);
    if (r < 0)
        return -r;
    if (!S_ISSOCK(mode))
        return ECONNREFUSED; /* what connect() says of a file that is no socket */
    for (size_t i = 0; i < g->n_mounts; i++)
        if (g->mounts[i] == id)
            return 0;
    return EACCES; /* a socket the sandbox did not make: the host's */
}

static void close_if(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* Is the notification still pending (its process alive, not a reused
 * pid)? */
static bool still_valid(int listener, uint64_t id)
{
    return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* connect(2) for the process of notification n: 0 or the errno it gets. */
static int guard_connect(struct connguard *g, int listener, const struct seccomp_notif *n)
{
    if (n->data.nr != SYS_connect)
        return ENOSYS; /* the filter sends nothing else */
    int tfd = (int)n->data.args[0];
    uint64_t uaddr = n->data.args[1];
    uint32_t len = (uint32_t)n->data.args[2];
    struct sockaddr_storage ss;
    if (len > sizeof ss)
        return EINVAL; /* as the kernel says of a longer address */
    memset(&ss, 0, sizeof ss);
    int pidfd = (int)syscall(SYS_pidfd_open, n->pid, 0);
    if (pidfd < 0)
        return ESRCH;
    int sock = -1, base = -1, file = -1, e = 0;
    if (!still_valid(listener, n->id)) {
        e = ESRCH; /* the pid may be another process's now */
        goto out;
    }
    sock = (int)syscall(SYS_pidfd_getfd, pidfd, tfd, 0);
    if (sock < 0) {
        e = errno;
        goto out;
    }
    if (len) {
        struct iovec local = {.iov_base = &ss, .iov_len = len};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)uaddr, .iov_len = len};
        if (process_vm_readv(n->pid, &local, 1, &remote, 1, 0) != (ssize_t)len) {
            e = EFAULT;
            goto out;
        }
    }
    int domain = 0;
    socklen_t dl = sizeof domain;
    if (getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &dl) < 0) {
        e = errno; /* ENOTSOCK, as connect() would say */
        goto out;
    }
    struct sockaddr_un *un = (struct sockaddr_un *)&ss;
    size_t off = offsetof(struct sockaddr_un, sun_path);
    if (domain == AF_UNIX && ss.ss_family == AF_UNIX && len > off && un->sun_path[0]) {
        /* A path: resolved as the command would, from its working
         * directory (same mounts and root as init's: the command cannot
         * change either). */
        char path[sizeof un->sun_path + 1];
        if (len > sizeof *un) {
            e = EINVAL; /* as unix_validate_addr says */
            goto out;
        }
        size_t pl = len - off;
        memcpy(path, un->sun_path, pl);
        path[pl] = 0;
        if (path[0] != '/') {
            char cwd[48];
            snprintf(cwd, sizeof cwd, "/proc/%d/cwd", (int)n->pid);
            base = open(cwd, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (base < 0 || !still_valid(listener, n->id)) {
                e = ESRCH;
                goto out;
            }
        }
        if (path[0] == '/' && g->rootfd >= 0) {
            struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                                   .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
            file = (int)syscall(SYS_openat2, g->rootfd, path, &how, sizeof how);
        } else {
            file = openat(base >= 0 ? base : AT_FDCWD, path, O_PATH | O_CLOEXEC);
        }
        if (file < 0) {
            e = errno;
            goto out;
        }
        if ((e = connguard_check_socket(g, file))) {
            if (e == EACCES)
                g->refused++;
            goto out;
        }
        struct sockaddr_un via = {.sun_family = AF_UNIX};
        snprintf(via.sun_path, sizeof via.sun_path, "/proc/self/fd/%d", file);
        if (connect(sock, (struct sockaddr *)&via, sizeof via) < 0)
            e = errno;
    } else if (connect(sock, (struct sockaddr *)&ss, len) < 0) {
        /* another family, an abstract or an unnamed address: the socket's
         * own network namespace and (init's) Landlock scope decide */
        e = errno;
    }
out:
    close_if(file);
    close_if(base);
    close_if(sock);
    close(pidfd);
    return e;
}

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

void connguard_fast_wakeup(int listener)
{
    if (listener >= 0)
        (void)ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
}

/* SigPnd (the thread's) and ShdPnd (its process's) in /proc/PID/status:
 * is SIGXFSZ in either? Allocation-free. */
bool connguard_xfsz_pending(int pid)
{
    char path[48], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    unsigned long long bit = 1ull << (SIGXFSZ - 1);
    static const char *const keys[] = {"\nSigPnd:", "\nShdPnd:"};
    for (size_t i = 0; i < 2; i++) {
        const char *p = strstr(buf, keys[i]);
        if (p && strtoull(p + strlen(keys[i]), NULL, 16) & bit)
            return true;
    }
    return false;
}

unsigned connguard_xfsz_scan(void)
{
    int d = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        return 0;
    unsigned found = 0;
    char buf[4096];
    long n;
    while ((n = syscall(SYS_getdents64, d, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            struct linux_dirent64 {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *e = (void *)(buf + off);
            off += e->reclen;
            char *end;
            long pid = strtol(e->name, &end, 10);
            if (pid > 1 && !*end && connguard_xfsz_pending((int)pid))
                found++;
        }
    }
    close(d);
    return found;
}

#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif

int connguard_serve(struct connguard *g, int listener)
{
    union {
        struct seccomp_notif n;
        char room[NOTIF_ROOM];
    } req;
    union {
        struct seccomp_notif_resp r;
        char room[RESP_ROOM];
    } resp;
    memset(&req, 0, sizeof req);
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
        return errno == EINTR || errno == ENOENT ? 0 : -errno;
    memset(&resp, 0, sizeof resp);
    resp.r.id = req.n.id;
    if (req.n.data.nr == SYS_exit || req.n.data.nr == SYS_exit_group) {
        /* a thread or process ends: counted if the write limit refused
         * it a write; then it goes on ending (nothing is decided here) */
        if (connguard_xfsz_pending((int)req.n.pid))
            g->xfsz++;
        resp.r.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    } else {
        int e = guard_connect(g, listener, &req.n);
        resp.r.error = e ? -e : 0;
        resp.r.val = 0;
    }
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT && errno != EINTR)
        return -errno;
    return 0;
}
