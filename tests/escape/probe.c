/* probe: escape attempts at the system-call level, for tests/integration/escape_*.bats.
 *
 * usage: probe ATTEMPT ARGS...
 *
 * Each attempt makes a series of calls and prints one line per call:
 *     OK NAME            the call succeeded (inside txbox: an escape, unless
 *                        the test says the call is harmless)
 *     FAIL NAME ERRNO    the call failed with ERRNO (EPERM, EROFS, ...)
 * Lines starting with "INFO" carry values the test may check. The exit
 * status is 0 unless the arguments are wrong (2).
 *
 * Built at test time with `cc`; it must stay dependency-free (no
 * libseccomp, no liburing) so that it builds on any Debian with a compiler.
 * Every call is harmless if it succeeds on a test machine: invalid magic
 * numbers for reboot, epoch times, a probe xattr, files named after the
 * test's token; nothing that would damage the host if the sandbox failed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/io_uring.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/keyctl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

static const char *token = "txbox-probe";

static int num(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end) {
        fprintf(stderr, "probe: not a number: %s\n", s);
        exit(2);
    }
    return (int)v;
}

/* Print "WORD NAME" and, on failure, the errno's name; returns rc. */
static long say(const char *ok, const char *fail, const char *name, long rc)
{
    const char *e = rc < 0 && strerrorname_np(errno) ? strerrorname_np(errno) : "?";
    printf(rc >= 0 ? "%s %s\n" : "%s %s %s\n", rc >= 0 ? ok : fail, name, e);
    fflush(stdout);
    return rc;
}

/* report NAME RC: an attempt (OK is an escape unless the test says not). */
static long report(const char *name, long rc) { return say("OK", "FAIL", name, rc); }

/* info NAME RC: a preparatory call (its success is no escape). */
static long info(const char *name, long rc) { return say("INFO ok", "INFO failed", name, rc); }

static char *join(const char *a, const char *b)
{
    char *s;
    if (asprintf(&s, "%s/%s", a, b) < 0)
        exit(3);
    return s;
}

static char *tokname(const char *dir, const char *what)
{
    char *s;
    if (asprintf(&s, "%s/%s-%s", dir, token, what) < 0)
        exit(3);
    return s;
}

/* ---- file descriptors handed in by the caller, and fd-relative tricks ---- */

/* fdops FD...: metadata and data changes through each fd, and through the
 * /proc/self/fd magic link. A directory fd also gets *at() calls below it. */
static int do_fdops(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        int fd = num(argv[i]);
        char n[128], p[64];
        struct stat st;
        if (fstat(fd, &st) < 0) {
            snprintf(n, sizeof n, "fstat-%d", fd);
            report(n, -1);
            continue;
        }
        printf("INFO fd %d is a %s\n", fd,
               S_ISDIR(st.st_mode)   ? "directory"
               : S_ISREG(st.st_mode) ? "file"
                                     : "other");
        snprintf(n, sizeof n, "fchmod-%d", fd);
        report(n, fchmod(fd, (st.st_mode & 07777) ^ 0001));
        snprintf(n, sizeof n, "fchown-same-owner-%d", fd);
        report(n, fchown(fd, st.st_uid, st.st_gid));
        struct timespec ts[2] = {{0, 0}, {0, 0}};
        snprintf(n, sizeof n, "futimens-%d", fd);
        report(n, futimens(fd, ts));
        snprintf(n, sizeof n, "fsetxattr-%d", fd);
        report(n, fsetxattr(fd, "user.txbox-probe", "1", 1, 0));
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        if (S_ISREG(st.st_mode)) {
            snprintf(n, sizeof n, "ftruncate-%d", fd);
            report(n, ftruncate(fd, 0));
            int w = open(p, O_WRONLY | O_APPEND);
            snprintf(n, sizeof n, "reopen-for-write-%d", fd);
            if (report(n, w) >= 0) {
                snprintf(n, sizeof n, "write-via-reopen-%d", fd);
                report(n, write(w, "pwned\n", 6));
                close(w);
            }
            snprintf(n, sizeof n, "chmod-via-proc-fd-%d", fd);
            report(n, chmod(p, 0777));
        } else if (S_ISDIR(st.st_mode)) {
            char *t = tokname(".", "fd-new");
            snprintf(n, sizeof n, "openat-create-%d", fd);
            int w = openat(fd, t + 2, O_WRONLY | O_CREAT | O_EXCL, 0644);
            if (report(n, w) >= 0)
                close(w);
            snprintf(n, sizeof n, "openat-append-a.txt-%d", fd);
            w = openat(fd, "a.txt", O_WRONLY | O_APPEND);
            if (report(n, w) >= 0) {
                snprintf(n, sizeof n, "write-a.txt-%d", fd);
                report(n, write(w, "pwned\n", 6));
                close(w);
            }
            snprintf(n, sizeof n, "mkdirat-%d", fd);
            report(n, mkdirat(fd, t + 2, 0755));
            snprintf(n, sizeof n, "fchmodat-a.txt-%d", fd);
            report(n, fchmodat(fd, "a.txt", 0777, 0));
            snprintf(n, sizeof n, "utimensat-a.txt-%d", fd);
            report(n, utimensat(fd, "a.txt", ts, 0));
            snprintf(n, sizeof n, "renameat-a.txt-%d", fd);
            report(n, renameat(fd, "a.txt", fd, "a.txt.moved"));
            snprintf(n, sizeof n, "unlinkat-b.txt-%d", fd);
            report(n, unlinkat(fd, "b.txt", 0));
            snprintf(n, sizeof n, "symlinkat-%d", fd);
            report(n, symlinkat("/etc/passwd", fd, t + 2));
            char *q = join(p, "a.txt");
            snprintf(n, sizeof n, "chmod-via-proc-fd-%d", fd);
            report(n, chmod(q, 0777));
            snprintf(n, sizeof n, "setxattr-via-proc-fd-%d", fd);
            report(n, setxattr(q, "user.txbox-probe", "1", 1, 0));
            free(q);
            free(t);
        }
    }
    return 0;
}

/* Minimal io_uring, no liburing: one submission at a time. */
struct ring {
    int fd;
    unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
};

static int ring_init(struct ring *r)
{
    struct io_uring_params pr = {0};
    r->fd = (int)syscall(__NR_io_uring_setup, 4, &pr);
    if (r->fd < 0)
        return -1;
    size_t sqsz = pr.sq_off.array + pr.sq_entries * sizeof(unsigned);
    size_t cqsz = pr.cq_off.cqes + pr.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(NULL, sqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    char *cq = mmap(NULL, cqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
    r->sqes = mmap(NULL, pr.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || r->sqes == MAP_FAILED)
        return -1;
    r->sq_tail = (unsigned *)(sq + pr.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + pr.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + pr.sq_off.array);
    r->cq_head = (unsigned *)(cq + pr.cq_off.head);
    r->cq_tail = (unsigned *)(cq + pr.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + pr.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + pr.cq_off.cqes);
    return 0;
}

/* Submit one SQE and return its result (negative errno as -1/errno). */
static long ring_do(struct ring *r, const struct io_uring_sqe *e)
{
    unsigned tail = *r->sq_tail, idx = tail & *r->sq_mask;
    r->sqes[idx] = *e;
    r->sq_array[idx] = idx;
    __atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
    if (syscall(__NR_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
        return -1;
    unsigned head = __atomic_load_n(r->cq_head, __ATOMIC_ACQUIRE);
    if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) {
        errno = EAGAIN;
        return -1;
    }
    int res = r->cqes[head & *r->cq_mask].res;
    __atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
    if (res < 0) {
        errno = -res;
        return -1;
    }
    return res;
}

/* openat WS OUT: path-resolution tricks relative to directory fds. */
static int do_openat(const char *ws, const char *out)
{
    int wsfd = open(ws, O_PATH | O_DIRECTORY);
    int outfd = open(out, O_PATH | O_DIRECTORY);
    int outrd = open(out, O_RDONLY | O_DIRECTORY);
    info("open-ws-O_PATH", wsfd);
    info("open-out-O_PATH", outfd);
    /* .. from the workspace's fd */
    const char *rel = strrchr(out, '/');
    char up[4096];
    snprintf(up, sizeof up, "..%s/a.txt", rel ? rel : "/outside");
    int fd = openat(wsfd, up, O_WRONLY | O_APPEND);
    if (report("openat-ws-dotdot-append", fd) >= 0) {
        report("write-ws-dotdot", write(fd, "pwned\n", 6));
        close(fd);
    }
    struct open_how how = {.flags = O_WRONLY | O_APPEND, .resolve = 0};
    fd = (int)syscall(SYS_openat2, wsfd, up, &how, sizeof how);
    if (report("openat2-ws-dotdot-append", fd) >= 0) {
        report("write-openat2", write(fd, "pwned\n", 6));
        close(fd);
    }
    how.resolve = RESOLVE_NO_MAGICLINKS;
    fd = (int)syscall(SYS_openat2, outfd, "a.txt", &how, sizeof how);
    if (report("openat2-out-append", fd) >= 0)
        close(fd);
    fd = openat(outfd, "a.txt", O_WRONLY | O_TRUNC);
    report("openat-out-truncate", fd);
    char *t = tokname(".", "openat");
    fd = openat(outfd, t + 2, O_WRONLY | O_CREAT | O_EXCL, 0644);
    report("openat-out-create", fd);
    /* an O_PATH fd of an outside file, reopened for writing */
    int pfd = openat(outfd, "a.txt", O_PATH);
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", pfd);
    fd = open(p, O_WRONLY | O_APPEND);
    report("reopen-O_PATH-for-write", fd);
    report("chmod-O_PATH-magic-link", chmod(p, 0777));
    report("fchownat-empty-path", fchownat(pfd, "", getuid(), getgid(), AT_EMPTY_PATH));
    report("fchmodat-out", fchmodat(outfd, "a.txt", 0777, 0));
    struct timespec ts[2] = {{0, 0}, {0, 0}};
    report("utimensat-out", utimensat(outfd, "a.txt", ts, 0));
    report("fsetxattr-O_RDONLY-dir", fsetxattr(outrd, "user.txbox-probe", "1", 1, 0));
    report("unlinkat-out", unlinkat(outfd, "b.txt", 0));
    report("renameat-out", renameat(outfd, "a.txt", outfd, "a.moved"));
    report("renameat2-exchange-ws-out",
           syscall(SYS_renameat2, wsfd, "README", outfd, "a.txt", RENAME_EXCHANGE));
    report("renameat-ws-to-out", renameat(wsfd, "README", outfd, "README.moved"));
    report("mkdirat-out", mkdirat(outfd, t + 2, 0755));
    report("symlinkat-out", symlinkat("x", outfd, t + 2));
    /* an anonymous file in the outside directory, then given a name */
    fd = openat(outfd, ".", O_TMPFILE | O_WRONLY, 0644);
    if (report("O_TMPFILE-in-out", fd) >= 0) {
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        report("linkat-tmpfile-into-out", linkat(AT_FDCWD, p, outfd, t + 2, AT_SYMLINK_FOLLOW));
    }
    /* a workspace file linked into the outside directory */
    fd = openat(wsfd, "README", O_PATH);
    report("linkat-empty-path-ws-to-out", linkat(fd, "", outfd, t + 2, AT_EMPTY_PATH));
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    report("linkat-follow-ws-to-out", linkat(AT_FDCWD, p, outfd, t + 2, AT_SYMLINK_FOLLOW));
    /* an outside file linked into the workspace (then written there) */
    report("linkat-out-to-ws", linkat(outfd, "a.txt", wsfd, "hardlink-to-out", 0));
    snprintf(p, sizeof p, "/proc/self/fd/%d", pfd);
    report("linkat-follow-out-to-ws", linkat(AT_FDCWD, p, wsfd, "hardlink-to-out2", AT_SYMLINK_FOLLOW));
    /* file handles (the "shocker" attack): open any inode of the filesystem */
    struct {
        struct file_handle fh;
        unsigned char buf[MAX_HANDLE_SZ];
    } h = {.fh.handle_bytes = MAX_HANDLE_SZ};
    int mnt;
    report("name_to_handle_at", syscall(SYS_name_to_handle_at, outfd, "a.txt", &h.fh, &mnt, 0));
    /* (a handle made up, if the call above was refused: the kernel checks
     * the capability before it looks at the handle) */
    fd = (int)syscall(SYS_open_by_handle_at, wsfd, &h.fh, O_WRONLY | O_APPEND);
    report("open_by_handle_at", fd);
    /* io_uring: file operations that do not go through the syscall filter */
    struct ring r;
    if (info("io_uring_setup", ring_init(&r)) >= 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/a.txt", out);
        struct io_uring_sqe e = {.opcode = IORING_OP_OPENAT,
                                 .fd = AT_FDCWD,
                                 .addr = (uint64_t)(uintptr_t)path,
                                 .open_flags = O_WRONLY | O_APPEND};
        long ufd = ring_do(&r, &e);
        if (report("io_uring-openat-out-append", ufd) >= 0) {
            struct io_uring_sqe w = {.opcode = IORING_OP_WRITE,
                                     .fd = (int)ufd,
                                     .addr = (uint64_t)(uintptr_t) "pwned\n",
                                     .len = 6,
                                     .off = (uint64_t)-1};
            report("io_uring-write-out", ring_do(&r, &w));
        }
        char *nn = tokname(out, "uring");
        e = (struct io_uring_sqe){.opcode = IORING_OP_OPENAT,
                                  .fd = AT_FDCWD,
                                  .addr = (uint64_t)(uintptr_t)nn,
                                  .open_flags = O_WRONLY | O_CREAT,
                                  .len = 0644};
        report("io_uring-openat-out-create", ring_do(&r, &e));
        snprintf(path, sizeof path, "%s/b.txt", out);
        e = (struct io_uring_sqe){
            .opcode = IORING_OP_UNLINKAT, .fd = AT_FDCWD, .addr = (uint64_t)(uintptr_t)path};
        report("io_uring-unlinkat-out", ring_do(&r, &e));
        e = (struct io_uring_sqe){
            .opcode = IORING_OP_MKDIRAT, .fd = AT_FDCWD, .addr = (uint64_t)(uintptr_t)nn, .len = 0755};
        report("io_uring-mkdirat-out", ring_do(&r, &e));
        char p2[4096];
        snprintf(path, sizeof path, "%s/a.txt", out);
        snprintf(p2, sizeof p2, "%s/a.moved", out);
        e = (struct io_uring_sqe){.opcode = IORING_OP_RENAMEAT,
                                  .fd = AT_FDCWD,
                                  .addr = (uint64_t)(uintptr_t)path,
                                  .len = AT_FDCWD,
                                  .addr2 = (uint64_t)(uintptr_t)p2};
        report("io_uring-renameat-out", ring_do(&r, &e));
        free(nn);
    }
    free(t);
    return 0;
}

/* ---- mounts ---- */

static int do_mount(const char *ws, const char *out)
{
    char *m = join(ws, "mnt-probe");
    mkdir(m, 0755);
    report("mount-tmpfs-in-ws", mount("tmpfs", m, "tmpfs", 0, NULL));
    report("mount-bind-out-in-ws", mount(out, m, NULL, MS_BIND, NULL));
    report("mount-rbind-root-in-ws", mount("/", m, NULL, MS_BIND | MS_REC, NULL));
    report("remount-root-rw", mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL));
    report("remount-out-rw", mount(NULL, out, NULL, MS_REMOUNT | MS_BIND, NULL));
    report("remount-root-rw-plain", mount(NULL, "/", NULL, MS_REMOUNT, NULL));
    report("mount-proc", mount("proc", m, "proc", 0, NULL));
    report("mount-cgroup-v1-pids", mount("cgroup", m, "cgroup", 0, "pids"));
    char *st = join(ws, ".txbox");
    report("umount-state-dir", umount2(st, MNT_DETACH));
    report("umount-workspace-view", umount2(ws, MNT_DETACH));
    report("umount-tmp", umount2("/tmp", MNT_DETACH));
    report("umount-proc", umount2("/proc", MNT_DETACH));
    report("umount-dev", umount2("/dev", MNT_DETACH));
    int fs = (int)syscall(SYS_fsopen, "tmpfs", 0);
    report("fsopen-tmpfs", fs);
    int fs2 = (int)syscall(SYS_fspick, AT_FDCWD, "/", 0);
    report("fspick-root", fs2);
    if (fs2 >= 0)
        report("fsconfig-reconfigure-rw",
               syscall(SYS_fsconfig, fs2, FSCONFIG_CMD_RECONFIGURE, NULL, NULL, 0));
    int t = (int)syscall(SYS_open_tree, AT_FDCWD, out, OPEN_TREE_CLONE);
    report("open_tree-clone-out", t);
    if (t >= 0)
        report("move_mount-out-into-ws",
               syscall(SYS_move_mount, t, "", AT_FDCWD, m, MOVE_MOUNT_F_EMPTY_PATH));
    struct mount_attr a = {.attr_clr = MOUNT_ATTR_RDONLY};
    report("mount_setattr-root-clear-rdonly", syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &a, sizeof a));
    report("mount_setattr-out-clear-rdonly", syscall(SYS_mount_setattr, AT_FDCWD, out, 0, &a, sizeof a));
    report("pivot_root", syscall(SYS_pivot_root, ws, m));
    report("chroot-ws", chroot(ws));
    free(st);
    free(m);
    return 0;
}

/* ---- namespaces ---- */

static int child_fn(void *arg)
{
    (void)arg;
    _exit(0);
}

static int do_userns(void)
{
    static const struct {
        const char *name;
        int flags;
    } u[] = {
        {"unshare-user", CLONE_NEWUSER},
        {"unshare-user-mount", CLONE_NEWUSER | CLONE_NEWNS},
        {"unshare-mount", CLONE_NEWNS},
        {"unshare-user-pid", CLONE_NEWUSER | CLONE_NEWPID},
        {"unshare-cgroup-mount", CLONE_NEWCGROUP | CLONE_NEWNS},
    };
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        pid_t p = fork();
        if (p == 0) {
            /* in a child: a success must not change the probe itself */
            if (unshare(u[i].flags) < 0) {
                report(u[i].name, -1);
                _exit(1);
            }
            report(u[i].name, 0);
            /* and what would the new namespace give? */
            if (u[i].flags & CLONE_NEWNS)
                report("mount-after-unshare", mount("tmpfs", "/tmp", "tmpfs", 0, NULL));
            _exit(0);
        }
        waitpid(p, NULL, 0);
    }
    static char stack[65536];
    pid_t c = clone(child_fn, stack + sizeof stack, CLONE_NEWUSER | SIGCHLD, NULL);
    if (report("clone-newuser", c) > 0)
        waitpid(c, NULL, 0);
    c = clone(child_fn, stack + sizeof stack, CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD, NULL);
    if (report("clone-newuser-newns", c) > 0)
        waitpid(c, NULL, 0);
    struct clone_args ca = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
    long r = syscall(SYS_clone3, &ca, sizeof ca);
    if (r == 0)
        _exit(0);
    if (report("clone3-newuser", r) > 0)
        waitpid((pid_t)r, NULL, 0);
    static const char *const ns[] = {"mnt", "user", "pid", "net", "uts", "ipc", "cgroup"};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        char p[64], n[64];
        snprintf(p, sizeof p, "/proc/1/ns/%s", ns[i]);
        int fd = open(p, O_RDONLY);
        snprintf(n, sizeof n, "open-init-ns-%s", ns[i]);
        if (report(n, fd) >= 0) {
            snprintf(n, sizeof n, "setns-init-%s", ns[i]);
            report(n, setns(fd, 0));
        }
    }
    return 0;
}

/* ---- other processes ---- */

static int do_ptrace(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        pid_t pid = num(argv[i]);
        char n[96], p[64];
        snprintf(n, sizeof n, "ptrace-attach-%d", pid);
        if (report(n, ptrace(PTRACE_ATTACH, pid, 0, 0)) >= 0)
            ptrace(PTRACE_DETACH, pid, 0, 0);
        snprintf(n, sizeof n, "ptrace-seize-%d", pid);
        if (report(n, ptrace(PTRACE_SEIZE, pid, 0, 0)) >= 0)
            ptrace(PTRACE_DETACH, pid, 0, 0);
        char buf[16];
        struct iovec l = {buf, sizeof buf}, rm = {(void *)0x400000, sizeof buf};
        snprintf(n, sizeof n, "process_vm_readv-%d", pid);
        report(n, process_vm_readv(pid, &l, 1, &rm, 1, 0));
        snprintf(n, sizeof n, "process_vm_writev-%d", pid);
        report(n, process_vm_writev(pid, &l, 1, &rm, 1, 0));
        snprintf(p, sizeof p, "/proc/%d/mem", pid);
        int fd = open(p, O_RDWR);
        snprintf(n, sizeof n, "open-mem-rw-%d", pid);
        report(n, fd);
        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        snprintf(n, sizeof n, "pidfd_open-%d", pid);
        if (info(n, pfd) >= 0) {
            snprintf(n, sizeof n, "pidfd_getfd-%d", pid);
            report(n, syscall(SYS_pidfd_getfd, pfd, 0, 0));
        }
        snprintf(n, sizeof n, "kcmp-%d", pid);
        report(n, syscall(SYS_kcmp, getpid(), pid, 0 /* KCMP_FILE */, 0, 0));
    }
    return 0;
}

/* ptrace-child: attach to a child of our own (the control: ptrace works
 * where nothing forbids it). */
static int do_ptrace_child(void)
{
    pid_t c = fork();
    if (c == 0) {
        pause();
        _exit(0);
    }
    usleep(100000);
    long r = report("ptrace-attach-own-child", ptrace(PTRACE_ATTACH, c, 0, 0));
    if (r >= 0) {
        waitpid(c, NULL, 0);
        ptrace(PTRACE_DETACH, c, 0, 0);
    }
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    return 0;
}

/* signals PID PGID: harmless signals (ignored by default) sent every way a
 * process outside could be named. */
static int do_signals(pid_t pid, pid_t pgid)
{
    char n[64];
    snprintf(n, sizeof n, "kill-pid-%d", pid);
    report(n, kill(pid, SIGWINCH));
    snprintf(n, sizeof n, "kill-pgid-%d", pgid);
    report(n, kill(-pgid, SIGWINCH));
    report("kill-minus-1", kill(-1, SIGWINCH));
    report("kill-minus-1-cont", kill(-1, SIGCONT));
    report("sigqueue-pid",
           (long)syscall(SYS_rt_sigqueueinfo, pid, SIGURG, &(siginfo_t){.si_code = SI_QUEUE}));
    report("tgkill-pid", syscall(SYS_tgkill, pid, pid, SIGWINCH));
    return 0;
}

/* ---- the kernel ---- */

static int do_kernel(void)
{
    /* arguments chosen to be harmless if a call got through */
    report("init_module", syscall(SYS_init_module, NULL, 0, ""));
    report("finit_module", syscall(SYS_finit_module, -1, "", 0));
    report("delete_module", syscall(SYS_delete_module, "txbox_probe_none", O_NONBLOCK));
    report("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0xdead0000UL));
    report("bpf-map-create", syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, NULL, 0));
    struct perf_event_attr pa = {
        .type = PERF_TYPE_SOFTWARE, .size = sizeof pa, .config = PERF_COUNT_SW_CPU_CLOCK};
    report("perf_event_open", syscall(SYS_perf_event_open, &pa, -1, 0, -1, 0));
    report("reboot-bad-magic", syscall(SYS_reboot, 0, 0, LINUX_REBOOT_CMD_CAD_ON, NULL));
    report("swapon", syscall(SYS_swapon, "/nonexistent-txbox-probe", 0));
    report("swapoff", syscall(SYS_swapoff, "/nonexistent-txbox-probe"));
    report("acct", syscall(SYS_acct, NULL));
    char buf[64];
    report("syslog-read-all", syscall(SYS_syslog, 3 /* READ_ALL */, buf, sizeof buf));
    report("keyctl-user-keyring", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0));
    report("keyctl-session-keyring", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
    report("add_key", syscall(SYS_add_key, "user", "txbox-probe", "x", 1, KEY_SPEC_USER_KEYRING));
    report("request_key", syscall(SYS_request_key, "user", "txbox-probe", NULL, KEY_SPEC_USER_KEYRING));
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    report("clock_settime-now", syscall(SYS_clock_settime, CLOCK_REALTIME, &now));
    struct timeval tv;
    gettimeofday(&tv, NULL);
    report("settimeofday-now", syscall(SYS_settimeofday, &tv, NULL));
    struct timex tx = {.modes = ADJ_OFFSET_SS_READ};
    report("adjtimex-read-only-offset", syscall(SYS_adjtimex, &tx));
    struct timex tx2 = {.modes = ADJ_TICK, .tick = 10000};
    report("clock_adjtime-tick", syscall(SYS_clock_adjtime, CLOCK_REALTIME, &tx2));
    report("iopl", syscall(SYS_iopl, 3));
    report("ioperm", syscall(SYS_ioperm, 0x80, 1, 1));
    report("quotactl", syscall(SYS_quotactl, 0, "/", 0, NULL));
    report("userfaultfd", syscall(SYS_userfaultfd, 0));
    report("vhangup", syscall(SYS_vhangup));
    report("lookup_dcookie", syscall(SYS_lookup_dcookie, 0, buf, sizeof buf));
    return 0;
}

/* mknod DIR...: device nodes (each opened for reading if it was made). */
static int do_mknod(int argc, char **argv)
{
    struct stat root;
    stat("/", &root);
    for (int i = 0; i < argc; i++) {
        struct {
            const char *what;
            mode_t mode;
            dev_t dev;
        } d[] = {
            {"chr-mem", S_IFCHR | 0666, makedev(1, 1)},
            {"chr-null", S_IFCHR | 0666, makedev(1, 3)},
            {"chr-whiteout", S_IFCHR | 0000, makedev(0, 0)},
            {"blk-rootdisk", S_IFBLK | 0666, root.st_dev},
            {"chr-suid", S_IFCHR | S_ISUID | 0666, makedev(1, 1)},
        };
        for (size_t k = 0; k < sizeof d / sizeof d[0]; k++) {
            char *p = tokname(argv[i], d[k].what);
            char n[256];
            snprintf(n, sizeof n, "mknod-%s-in-%s", d[k].what, argv[i]);
            long r = report(n, mknod(p, d[k].mode, d[k].dev));
            if (r < 0) {
                snprintf(n, sizeof n, "mknodat-%s-in-%s", d[k].what, argv[i]);
                r = report(n, mknodat(AT_FDCWD, p, d[k].mode, d[k].dev));
            }
            if (r >= 0 && d[k].dev) {
                int fd = open(p, O_RDONLY);
                snprintf(n, sizeof n, "open-new-%s-in-%s", d[k].what, argv[i]);
                if (report(n, fd) >= 0) {
                    snprintf(n, sizeof n, "read-new-%s-in-%s", d[k].what, argv[i]);
                    report(n, read(fd, n, 1));
                    close(fd);
                }
            }
            free(p);
        }
    }
    return 0;
}

/* devread PATH...: open existing device nodes for reading and writing. */
static int do_devread(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        char n[256], c;
        int fd = open(argv[i], O_RDONLY);
        snprintf(n, sizeof n, "open-read-%s", argv[i]);
        if (report(n, fd) >= 0) {
            snprintf(n, sizeof n, "read-%s", argv[i]);
            report(n, read(fd, &c, 1));
            close(fd);
        }
        fd = open(argv[i], O_WRONLY);
        snprintf(n, sizeof n, "open-write-%s", argv[i]);
        if (report(n, fd) >= 0)
            close(fd);
    }
    return 0;
}

/* ---- the terminal ---- */

/* tty FD TEXT: push TEXT into the terminal's input queue, by every form of
 * the request. */
static int do_tty(int fd, const char *text)
{
    long ok = 0;
    for (const char *c = text; *c; c++)
        ok |= ioctl(fd, TIOCSTI, c) < 0 ? 1 : 0;
    errno = ok ? errno : 0;
    report("TIOCSTI", ok ? -1 : 0);
    /* the request number with high bits set: the kernel ignores them */
    unsigned long hi = (unsigned long)TIOCSTI | (1UL << 32);
    ok = 0;
    for (const char *c = text; *c; c++)
        ok |= syscall(SYS_ioctl, fd, hi, c) < 0 ? 1 : 0;
    report("TIOCSTI-high-bits", ok ? -1 : 0);
    int t = open("/dev/tty", O_RDWR);
    if (info("open-dev-tty", t) >= 0) {
        ok = 0;
        for (const char *c = text; *c; c++)
            ok |= ioctl(t, TIOCSTI, c) < 0 ? 1 : 0;
        report("TIOCSTI-dev-tty", ok ? -1 : 0);
    }
    char sub = 6; /* TIOCL_GETSHIFTSTATE: harmless */
    report("TIOCLINUX", ioctl(fd, TIOCLINUX, &sub));
    return 0;
}

/* tty-pgrp FD: make the terminal's foreground process group one of ours. */
static int do_tty_pgrp(int fd)
{
    signal(SIGTTOU, SIG_IGN);
    report("setpgid-own-group", setpgid(0, 0));
    report("TIOCSPGRP-own-group", tcsetpgrp(fd, getpgrp()));
    report("TIOCNOTTY", ioctl(fd, TIOCNOTTY));
    report("setsid", setsid());
    report("TIOCSCTTY-steal", ioctl(fd, TIOCSCTTY, 1));
    return 0;
}

/* forkbomb MARK: every process forks for ever; a failed fork is retried
 * after 20 ms, so the pressure stays on the limit. (MARK only
 * names the processes for the test's pgrep.) */
__attribute__((noreturn)) static void do_forkbomb(void)
{
    for (;;)
        if (fork() < 0)
            usleep(20000);
}

/* euid: the effective uid (run as a setuid program). */
static int do_euid(void)
{
    printf("INFO euid=%d uid=%d\n", geteuid(), getuid());
    return 0;
}

/* uring-connect PATH: connect to a unix socket by path with io_uring
 * (IORING_OP_CONNECT), past any filter on connect(2), and send a line. */
static int do_uring_connect(const char *path)
{
    struct ring r;
    if (info("io_uring_setup", ring_init(&r)) < 0)
        return 0;
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    struct io_uring_sqe e = {
        .opcode = IORING_OP_CONNECT, .fd = s, .addr = (uint64_t)(uintptr_t)&a, .off = sizeof a};
    if (report("io_uring-connect-unix", ring_do(&r, &e)) >= 0)
        report("io_uring-connect-send", write(s, "via-uring\n", 10));
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("ESC_MARK"))
        token = getenv("ESC_MARK");
    if (argc < 2)
        goto usage;
    const char *a = argv[1];
    if (!strcmp(a, "fdops"))
        return do_fdops(argc - 2, argv + 2);
    if (!strcmp(a, "openat") && argc == 4)
        return do_openat(argv[2], argv[3]);
    if (!strcmp(a, "mount") && argc == 4)
        return do_mount(argv[2], argv[3]);
    if (!strcmp(a, "userns"))
        return do_userns();
    if (!strcmp(a, "ptrace"))
        return do_ptrace(argc - 2, argv + 2);
    if (!strcmp(a, "ptrace-child"))
        return do_ptrace_child();
    if (!strcmp(a, "signals") && argc == 4)
        return do_signals(num(argv[2]), num(argv[3]));
    if (!strcmp(a, "kernel"))
        return do_kernel();
    if (!strcmp(a, "mknod"))
        return do_mknod(argc - 2, argv + 2);
    if (!strcmp(a, "devread"))
        return do_devread(argc - 2, argv + 2);
    if (!strcmp(a, "tty") && argc == 4)
        return do_tty(num(argv[2]), argv[3]);
    if (!strcmp(a, "tty-pgrp") && argc == 3)
        return do_tty_pgrp(num(argv[2]));
    if (!strcmp(a, "euid"))
        return do_euid();
    if (!strcmp(a, "uring-connect") && argc == 3)
        return do_uring_connect(argv[2]);
    if (!strcmp(a, "forkbomb") && argc == 3)
        do_forkbomb();
usage:
    fprintf(stderr, "usage: probe fdops FD... | openat WS OUT | mount WS OUT | userns | ptrace PID... |\n"
                    "       ptrace-child | signals PID PGID | kernel | mknod DIR... | devread DEV... |\n"
                    "       tty FD TEXT | tty-pgrp FD | euid | forkbomb MARK | uring-connect PATH\n");
    return 2;
}
