/* A session's keeper (keeper.h).
 *
 *   steward (host namespaces) ──clone(NEWUSER|NEWPID|NEWNET|NEWIPC|NEWUTS|NEWNS)──▶ keeper (pid 1)
 *        ▲   socket: the namespaces and mounts (SCM_RIGHTS), then one record    │
 *        └── per process it reaps ────────────────────────────────────────────────┘
 *
 * The keeper is a copy of its parent (a fork, not a thread: it outlives
 * the commands that use it). It brings the loopback up, makes the
 * session's /tmp, /var/tmp and /dev/shm (tmpfs) and a procfs of its pid
 * namespace as detached mounts (fsmount), which each command's init clones
 * into its own mount namespace (open_tree(OPEN_TREE_CLONE) of a detached
 * mount works from any mount namespace), and hands them, with its
 * namespaces, to its parent. Then it only reaps: a command's background
 * processes are reparented to it when their command's shell exits (it is
 * their pid namespace's init), and each exit status goes to the parent,
 * which decides what their late writes become (tx/session.c). As its
 * namespace's init it cannot be killed from inside (the kernel ignores the
 * signals they send it: it handles none); when it dies, every process of
 * the session dies with it, and it dies with its parent
 * (PR_SET_PDEATHSIG). It is not dumpable: the session's commands cannot
 * read its descriptors through /proc. */
#include "keeper.h"
#include "devfs.h"
#include "fdpass.h"
#include "written.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

void kp_fds_init(struct kp_fds *f)
{
    for (int i = 0; i < KP_NFDS; i++)
        f->fd[i] = -1;
}

void kp_fds_close(struct kp_fds *f)
{
    for (int i = 0; i < KP_NFDS; i++)
        if (f->fd[i] >= 0) {
            close(f->fd[i]);
            f->fd[i] = -1;
        }
}

struct kp_hello {
    int err; /* 0, or the errno of the step that failed */
    char what[256];
};

struct kp_exit {
    int32_t pid, status;
    uint64_t userns; /* the user namespace it was in (kp_userns_of), 0 if unknown */
};

/* ---- in the keeper ---- */

__attribute__((noreturn)) static void keeper_fail(int sock, const char *what)
{
    struct kp_hello h = {.err = errno ? errno : EIO};
    snprintf(h.what, sizeof h.what, "%s", what);
    (void)fd_send(sock, &h, sizeof h, NULL, 0);
    _exit(126);
}

const char *const kp_fd_names[KP_NFDS] = {"user", "net",    "ipc", "uts", "pid",
                                          "tmp",  "vartmp", "shm", "dev", "proc"};

static void keeper_loopback(int sock)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        keeper_fail(sock, "cannot query the session's loopback interface");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        keeper_fail(sock, "cannot bring up the session's loopback interface");
    close(s);
}

/* Tell the parent, then reap; until the parent is gone (the socket hangs
 * up: PR_SET_PDEATHSIG has killed this process by then, or will).
 *
 * Each child is reported while it is still a zombie (WNOWAIT), with the
 * user namespace that says whose it is, and reaped only once the report
 * is in the socket: whoever sees a process gone from the session's /proc
 * finds its report already queued, and a full socket delays the reaping
 * instead of losing the report (a lost one would read as success). */
__attribute__((noreturn)) static void keeper_loop(int sock, int procfd)
{
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        _exit(126);
    for (;;) {
        bool full = false;
        for (;;) {
            siginfo_t si = {0};
            if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT | __WALL) < 0 || si.si_pid <= 0)
                break;
            int status = si.si_code == CLD_EXITED   ? W_EXITCODE(si.si_status, 0)
                         : si.si_code == CLD_DUMPED ? si.si_status | WCOREFLAG
                                                    : si.si_status;
            struct kp_exit e = {
                .pid = si.si_pid, .status = status, .userns = kp_userns_of(procfd, si.si_pid)};
            if (send(sock, &e, sizeof e, MSG_NOSIGNAL) < 0) {
                if (errno != EAGAIN && errno != EINTR)
                    _exit(0);
                full = true; /* reaped once the parent has read some */
                break;
            }
            while (waitid(P_PID, (id_t)si.si_pid, &si, WEXITED | __WALL) < 0 && errno == EINTR)
                ;
        }
        struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN},
                               {.fd = sock, .events = POLLIN | (full ? POLLOUT : 0)}};
        if (poll(pf, 2, -1) < 0)
            continue;
        if (pf[1].revents & (POLLHUP | POLLERR | POLLIN))
            _exit(0); /* the parent is gone, or says so */
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) > 0)
            ;
    }
}

__attribute__((noreturn)) static void keeper_main(int sock, int go, uint64_t tmp_bytes)
{
    char c;
    /* none of its parent's descriptors but these two (a pipe held open
     * here would never end for whoever reads it) */
    int keep[2] = {sock, go};
    if (fd_keep_only(keep, 2) < 0)
        _exit(126);
    sock = keep[0];
    go = keep[1];
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || read(go, &c, 1) != 1)
        _exit(126); /* the parent gave up (its id maps failed) */
    close(go);
    prctl(PR_SET_DUMPABLE, 0);
    /* Every signal the session's processes could send: ignored, or (SIGCHLD)
     * read from a signalfd. */
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP && s != SIGCHLD)
            signal(s, SIG_IGN);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        keeper_fail(sock, "cannot make the session's mounts private");
    keeper_loopback(sock);
    char size[32];
    snprintf(size, sizeof size, "%llu", (unsigned long long)tmp_bytes);
    int fds[KP_NFDS];
    static const char *const ns[] = {"user", "net", "ipc", "uts", "pid"};
    for (int i = 0; i < KP_TMP; i++) {
        char p[48];
        snprintf(p, sizeof p, "/proc/self/ns/%s", ns[i]);
        if ((fds[i] = open(p, O_RDONLY | O_CLOEXEC)) < 0)
            keeper_fail(sock, "cannot open the session's namespaces");
    }
    const char *tmp_opts[] = {"mode", "1777", tmp_bytes ? "size" : NULL, size, NULL};
    for (int i = KP_TMP; i <= KP_SHM; i++)
        if ((fds[i] = devfs_detached("tmpfs", tmp_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) < 0)
            keeper_fail(sock, "cannot make the session's /tmp (tmpfs)");
    /* /dev, made once here for every command (each clones it) */
    int nodes[DEVFS_NODES];
    const char *what;
    devfs_open_nodes(nodes);
    fds[KP_DEV] = devfs_make(nodes, fds[KP_SHM], true, &what);
    devfs_close_nodes(nodes);
    if (fds[KP_DEV] < 0)
        keeper_fail(sock, what);
    if ((fds[KP_PROC] =
             devfs_detached("proc", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0)
        keeper_fail(sock, "cannot make the session's /proc");
    struct kp_hello h = {0};
    if (fd_send(sock, &h, sizeof h, fds, KP_NFDS) < 0)
        _exit(126);
    for (int i = 0; i < KP_NFDS; i++)
        if (i != KP_PROC)
            close(fds[i]);
    fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) | O_NONBLOCK);
    keeper_loop(sock, fds[KP_PROC]);
}

/* ---- in the parent ---- */

static int map_ids(pid_t pid, txbox_error *err)
{
    char p[64], m[64];
    struct {
        const char *file, *text;
    } w[3];
    snprintf(m, sizeof m, "%u %u 1\n", getuid(), getuid());
    w[0] = (typeof(w[0])){"setgroups", "deny"};
    w[1] = (typeof(w[0])){"uid_map", m};
    char g[64];
    snprintf(g, sizeof g, "%u %u 1\n", getgid(), getgid());
    w[2] = (typeof(w[0])){"gid_map", g};
    for (size_t i = 0; i < ARRAY_SIZE(w); i++) {
        snprintf(p, sizeof p, "/proc/%d/%s", (int)pid, w[i].file);
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write_all(fd, w[i].text, strlen(w[i].text)) < 0)
            return tx_errno(err, errno, "cannot map ids in the session's user namespace");
    }
    return 0;
}

int kp_start(uint64_t tmp_bytes, struct keeper *k, struct kp_fds *fds, txbox_error *err)
{
    *k = (struct keeper){.pid = -1, .pidfd = -1, .sock = -1};
    kp_fds_init(fds);
    bool userns = !tx_privileged();
    int sp[2], go[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return tx_errno(err, errno, "socketpair");
    if (pipe2(go, O_CLOEXEC) < 0) {
        close(sp[0]);
        close(sp[1]);
        return tx_errno(err, errno, "pipe");
    }
    unsigned long flags = CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNS | SIGCHLD;
    if (userns)
        flags |= CLONE_NEWUSER;
    fflush(NULL);
    pid_t pid = (pid_t)syscall(SYS_clone, flags, 0, NULL, NULL, 0);
    if (pid == 0) {
        close(sp[0]);
        close(go[1]);
        keeper_main(sp[1], go[0], tmp_bytes);
    }
    int e = errno;
    close(sp[1]);
    close(go[0]);
    if (pid < 0) {
        close(sp[0]);
        close(go[1]);
        return tx_errno(err, e, "cannot create the session's namespaces%s",
                        userns ? " (are unprivileged user namespaces enabled?)" : "");
    }
    k->pid = pid;
    k->sock = sp[0];
    k->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int rc = userns ? map_ids(pid, err) : 0;
    if (rc == 0 && write_all(go[1], "g", 1) < 0)
        rc = tx_errno(err, errno, "cannot start the session's keeper");
    close(go[1]);
    struct kp_hello h = {0};
    int n = 0;
    if (rc == 0) {
        bool trunc;
        ssize_t r = fd_recv(k->sock, &h, sizeof h, 0, fds->fd, KP_NFDS, &n, &trunc);
        if (r != (ssize_t)sizeof h || trunc)
            rc = tx_err(err, EIO, "the session's keeper ended before it was ready");
        else if (h.err)
            rc = tx_err(err, h.err, "%s: %s", h.what, strerror(h.err));
        else if (n != KP_NFDS)
            rc = tx_err(err, EIO, "the session's keeper sent %d of its %d descriptors", n, KP_NFDS);
    }
    if (rc < 0) {
        kp_fds_close(fds);
        kp_stop(k);
        return -1;
    }
    fcntl(k->sock, F_SETFL, fcntl(k->sock, F_GETFL) | O_NONBLOCK);
    return 0;
}

int kp_next_exit(struct keeper *k, pid_t *pid, int *status, uint64_t *userns)
{
    struct kp_exit e;
    ssize_t r = recv(k->sock, &e, sizeof e, MSG_DONTWAIT);
    if (r == (ssize_t)sizeof e) {
        *pid = e.pid;
        *status = e.status;
        *userns = e.userns;
        return 1;
    }
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    return -1;
}

void kp_stop(struct keeper *k)
{
    if (k->pid > 0) {
        if (k->pidfd >= 0)
            syscall(SYS_pidfd_send_signal, k->pidfd, SIGKILL, NULL, 0);
        else
            kill(k->pid, SIGKILL);
        while (waitpid(k->pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
    }
    if (k->pidfd >= 0)
        close(k->pidfd);
    if (k->sock >= 0)
        close(k->sock);
    *k = (struct keeper){.pid = -1, .pidfd = -1, .sock = -1};
}

/* ---- a command's processes ---- */

uint64_t kp_userns_of(int procfd, pid_t pid)
{
    char p[48];
    struct stat st;
    snprintf(p, sizeof p, "%d/ns/user", (int)pid);
    return fstatat(procfd, p, &st, 0) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Without allocating: the sandbox's init calls it (sandbox.c). */
size_t kp_members(int procfd, uint64_t userns, void (*fn)(int procfd, pid_t pid, void *ctx), void *ctx)
{
    int dfd = openat(procfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    size_t n = 0;
    char buf[4096] __attribute__((aligned(8)));
    long got;
    while ((got = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < got;) {
            struct written_dent *d = (struct written_dent *)(buf + off);
            off += d->d_reclen;
            char *end;
            long pid = strtol(d->d_name, &end, 10);
            if (*end || pid <= 1) /* not a process, or the keeper itself */
                continue;
            if (kp_userns_of(procfd, (pid_t)pid) != userns)
                continue;
            n++;
            if (fn)
                fn(procfd, (pid_t)pid, ctx);
        }
    }
    close(dfd);
    return n;
}

/* A pidfd-like handle on pid: its /proc directory (pidfd_send_signal takes
 * one), so that a signal never reaches a process that took its pid. */
static void signal_one(int procfd, pid_t pid, int sig)
{
    char p[24];
    snprintf(p, sizeof p, "%d", (int)pid);
    _cleanup_close_ int fd = openat(procfd, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
        syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
}

struct sigctx {
    int sig;
};

static void signal_member(int procfd, pid_t pid, void *ctx)
{
    signal_one(procfd, pid, ((struct sigctx *)ctx)->sig);
}

size_t kp_signal(int procfd, uint64_t userns, int sig)
{
    struct sigctx c = {sig};
    return kp_members(procfd, userns, signal_member, &c);
}

/* The state letter of /proc/PID/stat (R, S, D, T, t, Z...), 0 if gone. */
static char state_of(int procfd, pid_t pid)
{
    char p[32], buf[512];
    snprintf(p, sizeof p, "%d/stat", (int)pid);
    _cleanup_close_ int fd = openat(procfd, p, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *rp = strrchr(buf, ')'); /* after the command's name, which may hold anything */
    return rp && rp[1] == ' ' ? rp[2] : 0;
}

struct freeze {
    pid_t *stopped;
    size_t cap, n;
    size_t running; /* members seen not stopped in this pass */
};

static bool already(const struct freeze *f, pid_t pid)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->stopped[i] == pid)
            return true;
    return false;
}

static void freeze_member(int procfd, pid_t pid, void *ctx)
{
    struct freeze *f = ctx;
    char s = state_of(procfd, pid);
    if (s == 'T' || s == 't' || s == 'Z' || s == 'X' || s == 0)
        return; /* stopped (by us, or by itself before: not ours to continue), or gone */
    f->running++;
    if (!already(f, pid)) {
        if (f->n == f->cap)
            return; /* more than fit: the caller is told (ETIMEDOUT) */
        f->stopped[f->n++] = pid;
    }
    signal_one(procfd, pid, SIGSTOP);
}

int kp_freeze(int procfd, uint64_t userns, pid_t *stopped, size_t cap, size_t *n, int timeout_ms)
{
    struct freeze f = {.stopped = stopped, .cap = cap};
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        f.running = 0;
        kp_members(procfd, userns, freeze_member, &f);
        *n = f.n;
        if (f.running == 0)
            return 0;
        if (now_ns() >= deadline || f.n == f.cap) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

struct thaw {
    const pid_t *stopped;
    size_t n;
};

static void thaw_member(int procfd, pid_t pid, void *ctx)
{
    const struct thaw *t = ctx;
    for (size_t i = 0; i < t->n; i++)
        if (t->stopped[i] == pid)
            signal_one(procfd, pid, SIGCONT);
}

void kp_thaw(int procfd, uint64_t userns, const pid_t *stopped, size_t n)
{
    struct thaw t = {stopped, n};
    kp_members(procfd, userns, thaw_member, &t);
}
