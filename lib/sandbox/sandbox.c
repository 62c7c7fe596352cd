/* The sandbox.
 *
 * Process layout:
 *
 *   txbox ──clone(VM|VFORK|FILES|NEWNS|NEWPID|NEWIPC|NEWUTS|NEWNET [|NEWUSER])──▶ init (pid 1)
 *        ▲  report pipe: setup error / started / exit status              │ sets up mounts
 *        │                                                                 ▼
 *        └────────── pidfd: timeout ⇒ SIGKILL init ⇒ the whole pid ns ── command
 *                                                     (clone NEWUSER, nested: mounts locked)
 *
 * 1. The parent clones init into new namespaces, sharing its memory, from a
 *    thread of its own that sleeps until init is gone (see "starting
 *    init"). When txbox is not root a user namespace is created too and the
 *    parent maps the caller's uid/gid to themselves, so files keep their
 *    owner. txbox_run does this as soon as the command's verdict is known
 *    (sb_prestart), so that the namespaces are made on the other CPU while
 *    it prepares the transaction: init waits, sharing the parent's table
 *    of descriptors (it has those made meanwhile), until sb_run lets it go;
 *    then it takes a copy of its own.
 * 2. init makes every mount private, prepares the workspace view as a
 *    detached mount (overlayfs through fsopen/fsconfig/fsmount, or with
 *    open_tree a clone of the workspace, read-only, or of the copy backend's
 *    copy), remounts every existing mount read-only, mounts a private /tmp, a
 *    minimal /dev and a read-only /proc for the new pid namespace, attaches
 *    the workspace view at the workspace's real path and, in the read-only
 *    view, hides .txbox/ under an empty read-only tmpfs (the overlay's upper
 *    has a whiteout there; the copy holds no .txbox).
 * 3. init clones the command into a nested user namespace. Mounts made in a
 *    more privileged namespace are locked there: the command cannot unmount
 *    or remount them, even as root, so the read-only host and the hidden
 *    .txbox/ hold. init maps the nested namespace (identity), lets the
 *    command exec, reaps every process, reports the command's status and
 *    exits; the kernel then kills whatever else lives in the pid namespace,
 *    so nothing the command started survives the transaction.
 *
 * Every step that fails is reported as a setup error and nothing runs (fail
 * closed). What was in force goes back to the parent as `protections`. */
#include "sandbox.h"
#include "cgroup.h"
#include "connguard.h"
#include "devfs.h"
#include "fdpass.h"
#include "netproxy.h"
#include "probe.h"
#include "safepath.h"
#include "written.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>

/* ---- messages from init to the parent ---- */
enum {
    MSG_SETUP_ERR = 1,
    MSG_STARTED,
    MSG_EXITED,
    MSG_OVERLAY_ERR,
    MSG_CWD,       /* text: a piece of the shell's last directory, at offset val */
    MSG_DISCARD,   /* text: a path written where nothing persists */
    MSG_DISCARDS,  /* val: how many there were in all (after the last MSG_DISCARD) */
    MSG_SURVIVORS, /* in a session: val of the command's processes left running (handed over) */
    MSG_XFSZ,      /* a write the file size limit refused */
};

/* In a session, with MSG_SURVIVORS: what serves the processes left (its
 * descriptors, SCM_RIGHTS: the connection guard's listener, if any, and
 * the command's root), on the handover socket. */
struct sb_handoff {
    uint64_t userns;
    uint32_t n_mounts;
    int has_listener;
    uint64_t mounts[CONNGUARD_MAX_MOUNTS];
};
struct sb_msg {
    int type;
    int val;
    uint64_t ts;
    char text[512];
};

static void send_msg(int fd, int type, int val, const char *text)
{
    struct sb_msg m = {.type = type, .val = val, .ts = now_ns()};
    if (text)
        snprintf(m.text, sizeof m.text, "%s", text);
    if (write_all(fd, &m, sizeof m) < 0)
        _exit(126);
}

/* Thread-local: init and the command run on the launcher thread's TLS
 * ("starting init"), one per sandbox, so sandboxes started at once by threads
 * of one process each have their own. */
static __thread int report_fd = -1;
static __thread int handoff_fd = -1;   /* in a session: init's end of the handover socket */
static __thread bool in_overlay_setup; /* a failure now means: overlayfs unavailable here */

/* The code the command runs before its execve, on the stack set aside for
 * it (command_main): not instrumented by AddressSanitizer, whose state for
 * the thread (the launcher's, see "starting init") is init's, and which would
 * warn, into the command's stderr, at calls of functions that do not
 * return. */
#define ON_COMMAND_STACK __attribute__((no_sanitize("address")))

/* init and the command before its execve share txbox's memory (see
 * "starting init") and must not allocate: a process killed (by the timeout)
 * inside malloc would leave its lock held in txbox's heap. Hence no stdio
 * and no strerror (which may allocate a message for an unknown errno, or
 * a translation) in either: these two instead. */
ON_COMMAND_STACK static const char *errstr(int e)
{
    const char *d = strerrordesc_np(e);
    return d ? d : "unknown error";
}

/* The command, before its execve: a line on its stderr. */
ON_COMMAND_STACK __attribute__((format(printf, 1, 2))) static void command_say(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        (void)!write_all(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* In init, and in the command before its execve: report a setup failure
 * and die. */
ON_COMMAND_STACK __attribute__((noreturn, format(printf, 1, 2))) static void setup_die(const char *fmt, ...)
{
    char buf[512];
    int e = errno;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t l = strlen(buf);
    if (e)
        snprintf(buf + l, sizeof buf - l, ": %s", errstr(e));
    send_msg(report_fd, in_overlay_setup ? MSG_OVERLAY_ERR : MSG_SETUP_ERR, e, buf);
    _exit(126);
}

static int write_file(int at, const char *path, const char *text)
{
    _cleanup_close_ int fd = openat(at, path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    return write_all(fd, text, strlen(text));
}

/* pid's id maps, through the procfs at procat (AT_FDCWD: /proc), where
 * pid names it. */
static int write_id_maps_at(int procat, pid_t pid, const char *uidmap, const char *gidmap,
                            bool deny_setgroups)
{
    char p[64];
    const char *root = procat == AT_FDCWD ? "/proc/" : "";
    if (deny_setgroups) {
        snprintf(p, sizeof p, "%s%d/setgroups", root, pid);
        if (write_file(procat, p, "deny") < 0 && errno != ENOENT)
            return -1;
    }
    snprintf(p, sizeof p, "%s%d/uid_map", root, pid);
    if (write_file(procat, p, uidmap) < 0)
        return -1;
    snprintf(p, sizeof p, "%s%d/gid_map", root, pid);
    return write_file(procat, p, gidmap);
}

static int write_id_maps(pid_t pid, const char *uidmap, const char *gidmap, bool deny_setgroups)
{
    return write_id_maps_at(AT_FDCWD, pid, uidmap, gidmap, deny_setgroups);
}

/* The identity map of the ids FILE (/proc/self/uid_map or gid_map) maps:
 * "first first count" for each of its ranges, into out. false if it
 * cannot be read or does not fit. No allocation: init calls it. */
static bool identity_of_at(int at, const char *file, char *out, size_t n)
{
    char buf[2048];
    int fd = openat(at, file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0 || (size_t)r == sizeof buf - 1)
        return false;
    buf[r] = 0;
    size_t len = 0;
    for (char *line = buf, *nl; *line; line = nl + 1) {
        char *end;
        if (!(nl = strchr(line, '\n')))
            return false;
        unsigned long first = strtoul(line, &end, 10);
        (void)strtoul(end, &end, 10); /* the ids outside */
        unsigned long count = strtoul(end, &end, 10);
        if (end != nl || !count)
            return false;
        int w = snprintf(out + len, n - len, "%lu %lu %lu\n", first, first, count);
        if (w < 0 || (size_t)w >= n - len)
            return false;
        len += (size_t)w;
    }
    return len > 0;
}

static bool identity_of(const char *file, char *out, size_t n)
{
    return identity_of_at(AT_FDCWD, file, out, n);
}

/* ---- mounts ---- */

static char *fdpath(int fd, char buf[static 32])
{
    snprintf(buf, 32, "/proc/self/fd/%d", fd);
    return buf;
}

/* A clone of one of the session's mounts (a detached mount: keeper.c),
 * attached at path. */
static void attach_clone_flags(int detached, const char *path, const char *what, unsigned flags)
{
    int m = open_tree(detached, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | flags);
    if (m < 0 || move_mount(m, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        setup_die("cannot mount the session's %s", what);
    close(m);
}

static void attach_clone(int detached, const char *path, const char *what)
{
    attach_clone_flags(detached, path, what, 0);
}

/* The same, with the mounts below it (the session's /dev: its nodes, its
 * devpts, its /dev/shm). */
static void attach_clone_tree(int detached, const char *path, const char *what)
{
    attach_clone_flags(detached, path, what, AT_RECURSIVE);
}

/* Every mount of this (private) namespace read-only, in one call: a
 * recursive mount_setattr only adds the flag, so it is allowed on mounts a
 * user namespace may not otherwise change. /proc, /dev and /tmp are covered
 * by fresh mounts afterwards. */
static void remount_all_readonly(void)
{
    struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY};
    if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &a, sizeof a) < 0)
        setup_die("cannot make the host read-only");
}

static void mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        setup_die("path too long: %s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            setup_die("cannot create %s", buf);
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        setup_die("cannot create %s", buf);
}

/* The RAM-backed filesystems the command may write (/tmp, /dev/shm): each
 * as large as the write budget, and never larger than the memory limit,
 * since their pages are memory. */
static void tmpfs_opts(const struct sb_spec *s, char *buf, size_t n)
{
    uint64_t cap = s->max_write;
    /* half the memory limit: a full /tmp must leave init room to report */
    uint64_t mem = (s->memory_max ? s->memory_max : s->limits.memory) / 2;
    if (mem && (!cap || mem < cap))
        cap = mem;
    if (cap)
        snprintf(buf, n, "mode=1777,size=%llu", (unsigned long long)cap);
    else
        snprintf(buf, n, "mode=1777");
}

/* /dev: in a session, a clone of the session's (its keeper made it, with
 * its /dev/shm: keeper.c), else one of the command's own (devfs.h) with a
 * /dev/shm as large as /tmp. */
static void mount_dev(const struct sb_spec *s, const int *host_dev_fds)
{
    if (s->session && s->session->fd[KP_DEV] >= 0) {
        attach_clone_tree(s->session->fd[KP_DEV], "/dev", "/dev");
        return;
    }
    const char *what;
    int d = devfs_make(host_dev_fds, s->session ? s->session->fd[KP_SHM] : -1, false, &what);
    if (d < 0)
        setup_die("%s", what);
    if (move_mount(d, "", AT_FDCWD, "/dev", MOVE_MOUNT_F_EMPTY_PATH) < 0)
        setup_die("cannot mount /dev");
    close(d);
    if (s->session)
        return; /* the session's /dev/shm in it */
    char o[64];
    tmpfs_opts(s, o, sizeof o);
    if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, o) < 0)
        setup_die("cannot mount /dev/shm");
}

/* An fd opened by the parent names a mount of the parent's namespace, which
 * mount calls here refuse: open the same directory again through this
 * namespace, and check that it is the same inode. */
static int reopen_here(int at, const char *rel, int orig, const char *what)
{
    int fd = at == AT_FDCWD ? open(rel, O_PATH | O_DIRECTORY | O_CLOEXEC)
                            : safe_openat(at, rel, O_PATH | O_DIRECTORY, 0);
    struct stat a, b;
    if (fd < 0 || fstat(fd, &a) < 0 || fstat(orig, &b) < 0)
        setup_die("cannot open the %s", what);
    if (a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        errno = 0;
        setup_die("the %s changed under txbox", what);
    }
    return fd;
}

/* An overlay mount (detached): lower, upper and work are paths. ro: a
 * read-only one (multi.c: the transaction so far over the workspace, the
 * lower layer of each of its commands). */
static int overlay_mount(const char *lower, const char *upper, const char *work, bool userns, bool ro)
{
    int fs = fsopen("overlay", FSOPEN_CLOEXEC);
    if (fs < 0)
        setup_die("overlayfs is not available");
    struct {
        const char *k, *v;
    } opts[] = {
        {"lowerdir", lower},
        {"upperdir", upper},
        {"workdir", work},
        /* no redirects: a rename of a lower directory is a copy (EXDEV),
         * so the upper is a plain picture of the change */
        {"redirect_dir", userns ? "nofollow" : "off"},
        {"metacopy", "off"},
        {"index", "off"},
        {"xino", "off"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(opts); i++)
        if (fsconfig(fs, FSCONFIG_SET_STRING, opts[i].k, opts[i].v, 0) < 0)
            setup_die("overlay option %s", opts[i].k);
    if (userns && fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0)
        setup_die("overlay option userxattr");
    if (ro && fsconfig(fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0)
        setup_die("overlay option ro");
    /* No sync of the whole upper filesystem at unmount, and the
     * command's own fsyncs are free: the commit makes exactly the
     * transaction's data durable itself (scan.c), and a crash before
     * that discards the upper anyway. */
    if (!ro && fsconfig(fs, FSCONFIG_SET_FLAG, "volatile", NULL, 0) < 0)
        setup_die("overlay option volatile");
    if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        setup_die(
            ro ? "cannot mount the transaction's layer over the workspace (overlayfs)"
               : "cannot mount overlayfs on the workspace (is its filesystem supported as an overlay upper?)");
    int m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (ro ? MOUNT_ATTR_RDONLY : 0));
    if (m < 0)
        setup_die("cannot create the overlay mount");
    close(fs);
    return m;
}

/* The workspace view, made before the host is remounted read-only (the
 * overlay's upper must be writable when it is created) and attached after. */
static int make_view(const struct sb_spec *s, bool userns)
{
    char l[32], u[32], w[32];
    int wsfd = reopen_here(AT_FDCWD, s->ws_path, s->ws_fd, "workspace");
    if (s->view == SB_VIEW_OVERLAY) {
        int upfd = reopen_here(wsfd, s->upper_rel, s->upper_fd, "transaction's upper");
        int wkfd = reopen_here(wsfd, s->work_rel, s->work_fd, "transaction's work directory");
        in_overlay_setup = true;
        /* multi.c: the transaction so far is an overlay of its layer over
         * the workspace, and the command's lower layer. (A layer beneath
         * the workspace cannot be a second lower layer: overlayfs refuses
         * nested lower layers.) */
        int lower = -1;
        if (s->lower_rel) {
            char a[32], b[32];
            int lofd = reopen_here(wsfd, s->lower_rel, s->lower_fd, "transaction's layer");
            int lwfd =
                reopen_here(wsfd, s->lower_work_rel, s->lower_work_fd, "transaction's layer work directory");
            lower = overlay_mount(fdpath(wsfd, l), fdpath(lofd, a), fdpath(lwfd, b), userns, true);
            close(lofd);
            close(lwfd);
        }
        int m = overlay_mount(fdpath(lower >= 0 ? lower : wsfd, l), fdpath(upfd, u), fdpath(wkfd, w), userns,
                              false);
        if (lower >= 0)
            close(lower);
        close(upfd);
        close(wkfd);
        close(wsfd);
        in_overlay_setup = false;
        return m;
    }
    if (s->view == SB_VIEW_DIRECT) {
        /* the copy backend's copy of the workspace (it holds no .txbox) */
        int cfd = reopen_here(wsfd, s->upper_rel, s->upper_fd, "transaction's copy of the workspace");
        close(wsfd);
        wsfd = cfd;
    }
    int m = open_tree(wsfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    close(wsfd);
    if (m < 0)
        setup_die("cannot clone the workspace mount");
    struct mount_attr a = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                       (s->view == SB_VIEW_READONLY ? MOUNT_ATTR_RDONLY : 0)};
    if (mount_setattr(m, "", AT_EMPTY_PATH, &a, sizeof a) < 0)
        setup_die("cannot set workspace mount flags");
    return m;
}

static void attach_view(const struct sb_spec *s, int view_fd)
{
    mkdir_p(s->ws_path, 0755); /* exists already unless it lies under the new /tmp */
    if (move_mount(view_fd, "", AT_FDCWD, s->ws_path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        setup_die("cannot attach the workspace view");
    close(view_fd);
    if (s->view != SB_VIEW_READONLY)
        return; /* hidden in the upper itself (run.c), not in the copy */
    /* Hide the state directory: an empty read-only tmpfs over it. */
    _cleanup_close_ int wfd = open(s->ws_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (wfd < 0)
        setup_die("cannot open the workspace view");
    int sfd = openat(wfd, ".txbox", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0 && errno == ENOENT)
        return; /* none (a read-only workspace where it cannot be made): the view is read-only */
    if (sfd < 0)
        setup_die("cannot find .txbox in the workspace view");
    char p[32];
    if (mount("tmpfs", fdpath(sfd, p), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=4k,nr_inodes=1,mode=0") < 0)
        setup_die("cannot hide .txbox");
    close(sfd);
}

static void loopback_up(void)
{
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        setup_die("cannot query the loopback interface");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        setup_die("cannot bring up the loopback interface");
}

/* The network proxy's listening socket (netproxy.c), on 127.0.0.1:NP_PORT
 * in the sandbox's network namespace: made by init while it still shares
 * txbox's table of descriptors, so txbox has it too and serves it from its
 * own namespace. No socket file, no port on the host. */
static int proxy_listen(const struct sb_spec *s)
{
    if (!s->session)
        loopback_up();
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* in a session's shared loopback, a port of the kernel's choice, which
     * the command's environment is then told */
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = s->session ? 0 : htons(NP_PORT),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, NP_MAX_CONNS) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) < 0)
        setup_die("cannot make the network proxy's socket");
    for (int i = 0; s->proxy_env && i < SB_PROXY_ENV_N; i++) {
        char *v = s->proxy_env[i], *eq = strchr(v, '=');
        if (eq)
            snprintf(eq + 1, SB_PROXY_ENV_LEN - (size_t)(eq + 1 - v), "http://127.0.0.1:%u",
                     ntohs(a.sin_port));
    }
    return fd;
}

/* Deny-read: an empty read-only tmpfs over each secret directory, the null
 * device over each secret file, on the view as the command sees it: a secret
 * inside the workspace (the workspace is $HOME) is hidden in the view, and
 * the command cannot change or remove it (a mount point). Only a path that
 * holds the workspace itself cannot be hidden. */
static void hide_list(const struct sb_spec *s, const char *const *list, int nullfd)
{
    for (size_t i = 0; list && list[i]; i++) {
        const char *p = list[i];
        if (path_under(s->ws_path, p))
            continue;
        struct stat st;
        if (stat(p, &st) < 0)
            continue; /* nothing there to hide */
        if (S_ISDIR(st.st_mode)) {
            if (mount("tmpfs", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      "size=4k,nr_inodes=1,mode=0") < 0)
                setup_die("cannot hide %s", p);
        } else {
            char src[32];
            if (nullfd < 0 || mount(fdpath(nullfd, src), p, NULL, MS_BIND, NULL) < 0)
                setup_die("cannot hide %s", p);
        }
    }
}

/* The secrets, and txbox's state directories other than the workspace's
 * own (nested workspaces', and the workspace's through other mounts). */
static void hide_paths(const struct sb_spec *s, int nullfd)
{
    hide_list(s, s->hide, nullfd);
    hide_list(s, s->state_hide, nullfd);
}

/* Is dir one of the socket directories masked whole (mask_socket_dirs)
 * here, that is, a real directory that does not hold the workspace? */
static bool sock_dir_masked(const struct sb_spec *s, const char *dir)
{
    struct stat st;
    return !path_under(s->ws_path, dir) && lstat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The directories where host services keep their sockets (/run with
 * docker.sock, D-Bus, systemd, the user runtime directories; the caller's
 * XDG_RUNTIME_DIR wherever it is) get an empty read-only tmpfs over them:
 * a socket there is unreachable whatever network namespace bound it and
 * whenever (the connection guard refuses the rest; this also keeps the
 * host's runtime files out of sight). Not a directory that holds the
 * workspace. A /etc/resolv.conf that lives there (systemd-resolved's) is
 * bound back in, so that name resolution works where there is network. */
static void mask_socket_dirs(const struct sb_spec *s)
{
    char rpath[PATH_MAX] = "", fp[32];
    int rfd = open("/etc/resolv.conf", O_PATH | O_CLOEXEC);
    if (rfd >= 0) {
        ssize_t n = readlink(fdpath(rfd, fp), rpath, sizeof rpath - 1);
        rpath[n > 0 ? n : 0] = 0;
    }
    for (size_t i = 0; i < ARRAY_SIZE(s->sock_dirs) && s->sock_dirs[i]; i++) {
        const char *d = s->sock_dirs[i];
        if (!sock_dir_masked(s, d))
            continue;
        if (mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755") <
            0)
            setup_die("cannot mask %s", d);
        if (rfd >= 0 && rpath[0] && path_under(rpath, d) && strcmp(rpath, d) != 0) {
            char parent[PATH_MAX];
            snprintf(parent, sizeof parent, "%s", rpath);
            *strrchr(parent, '/') = 0;
            if (strcmp(parent, d) != 0)
                mkdir_p(parent, 0755);
            int f = open(rpath, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
            if (f < 0 || mount(fdpath(rfd, fp), rpath, NULL, MS_BIND, NULL) < 0)
                setup_die("cannot keep %s in the masked %s", rpath, d);
            close(f);
        }
        if (mount(NULL, d, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) <
            0)
            setup_die("cannot make the masked %s read-only", d);
    }
    if (rfd >= 0)
        close(rfd);
}

/* /var/tmp private like /tmp (a real directory only: a link to /tmp is
 * private already). Before the workspace view is attached: a workspace
 * under /var/tmp is attached inside it. */
static bool has_var_tmp(void)
{
    struct stat st;
    return lstat("/var/tmp", &st) == 0 && S_ISDIR(st.st_mode);
}

static void private_var_tmp(const struct sb_spec *s)
{
    char o[64];
    tmpfs_opts(s, o, sizeof o);
    if (has_var_tmp() && mount("tmpfs", "/var/tmp", "tmpfs", MS_NOSUID | MS_NODEV, o) < 0)
        setup_die("cannot mount a private /var/tmp");
}

/* ---- the command, in the nested user namespace ---- */

struct child_args {
    const struct sb_spec *spec;
    int go_fd;       /* init writes one byte once the id maps are in place */
    int go_other;    /* init's end of that pipe: closed in the command */
    int exec_fd;     /* closed by the execve (O_CLOEXEC): init then knows it happened */
    int exec_other;  /* init's end of that pipe */
    int guard_fd;    /* the command sends its seccomp listener to init on it */
    int guard_other; /* init's end */
    int landlock_abi;
};

/* In the command: pass the filter's listener to init (SCM_RIGHTS; the
 * message holds it once sent, so the command closes its own at once). */
ON_COMMAND_STACK static void send_listener(int sock, int fd)
{
    char c = 'L';
    struct iovec iov = {.iov_base = &c, .iov_len = 1};
    union {
        struct cmsghdr h;
        char room[CMSG_SPACE(sizeof(int))];
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.room, .msg_controllen = sizeof u.room};
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &fd, sizeof fd);
    if (sendmsg(sock, &m, MSG_NOSIGNAL) != 1)
        setup_die("cannot hand the connection guard to init");
    close(fd);
    close(sock);
}

/* In init: the listener the command sent, or -1 if it sent none (it died
 * before its execve). */
static int recv_listener(int sock)
{
    char c;
    struct iovec iov = {.iov_base = &c, .iov_len = 1};
    union {
        struct cmsghdr h;
        char room[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.room, .msg_controllen = sizeof u.room};
    if (recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != 1)
        return -1;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    if (!h || h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS ||
        h->cmsg_len != CMSG_LEN(sizeof(int)))
        return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(h), sizeof fd);
    return fd;
}

/* The command, until its execve: cloned by init with CLONE_VM (see
 * init_main), so it runs in init's memory on a stack of its own, and
 * neither allocates nor returns. */
ON_COMMAND_STACK __attribute__((noreturn)) static void command_main(const struct child_args *a)
{
    const struct sb_spec *s = a->spec;
    char c;
    close(a->go_other);
    close(a->exec_other);
    close(a->guard_other);
    if (read_all(a->go_fd, &c, 1) != 1)
        _exit(126);
    close(a->go_fd);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (s->in_fd >= 0 && dup2(s->in_fd, 0) < 0)
        _exit(126);
    if (s->out_fd >= 0 && dup2(s->out_fd, 1) < 0)
        _exit(126);
    if (s->err_fd >= 0 && dup2(s->err_fd, 2) < 0)
        _exit(126);
    /* A session of its own: without the caller's controlling terminal the
     * command cannot take the terminal's foreground (tcsetpgrp) and stop
     * the caller with SIGTTIN/SIGTTOU, and kill(0, ...) reaches its own
     * process group only, not the caller's (the process group spans pid
     * namespaces). */
    if (setsid() < 0)
        setup_die("cannot start a new session");
    /* its own terminal (pty_open), if it has one, as controlling terminal */
    for (int k = 0; k <= 2; k++)
        if (isatty(k)) {
            (void)ioctl(k, TIOCSCTTY, 0);
            break;
        }
    if (chdir(s->cwd) < 0) {
        command_say("txbox: cannot enter %s: %s\n", s->cwd, errstr(errno));
        _exit(126);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        setup_die("cannot set no_new_privs");
    txbox_error ce = {0};
    if (a->landlock_abi > 0) {
        const char *writable[] = {s->ws_path, "/tmp", "/dev", "/var/tmp", NULL};
        if (confine_landlock(writable, a->landlock_abi, &ce) < 0) {
            errno = 0;
            setup_die("%s", ce.msg);
        }
    }
    int listener;
    if (confine_seccomp(&listener, &ce) < 0) {
        errno = 0;
        setup_die("%s", ce.msg);
    }
    send_listener(a->guard_fd, listener);
    /* Limits last: txbox itself (its allocator, and ASan's when built with
     * it) must not run under the command's memory limit. Nothing below
     * allocates. */
    /* From the filter on, an end of this process waits for init (exit() is
     * sent to it: connguard.h), and init waits for exec_fd's end: each way
     * out below closes it first. */
    if (confine_rlimits(&s->limits, &ce) < 0) {
        close(a->exec_fd);
        errno = 0;
        setup_die("%s", ce.msg);
    }
    signal(SIGPIPE, SIG_DFL);
    /* A write past the file size limit fails (EFBIG) and leaves SIGXFSZ
     * pending, which init sees when the process ends (connguard.h), instead
     * of killing it unseen; blocked signals stay so across execve. */
    sigset_t xfsz;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    sigprocmask(SIG_BLOCK, &xfsz, NULL);
    /* No descriptor of the caller but stdio reaches the command: an open
     * directory fd would be a way out of the view (found by the escape
     * suite). The one left, exec_fd, is O_CLOEXEC: the execve closes it. */
    if (a->exec_fd > 3)
        close_range(3, (unsigned)a->exec_fd - 1, 0);
    close_range((unsigned)a->exec_fd + 1, ~0U, 0);
    execve(s->argv[0], s->argv, s->envp);
    int e = errno;
    command_say("txbox: cannot execute %s: %s\n", s->argv[0], errstr(e));
    close(a->exec_fd);
    _exit(e == ENOENT ? 127 : 126);
}

ON_COMMAND_STACK static int command_entry(void *arg) { command_main(arg); }

/* Where init finds the command in a /proc: at procfd (AT_FDCWD: /proc,
 * the fresh one of the command's pid namespace; else the session's) as
 * pid; in a session also in the host's /proc (hostproc, -1 otherwise) as
 * host_pid, the pid init knows it by. userns: its user namespace (a
 * session's mark of its processes, keeper.h). */
struct cmd_proc {
    int hostproc, procfd;
    pid_t host_pid, pid;
    uint64_t userns;
};

/* The command's pid in the session's pid namespace: the last field of
 * NSpid in its status, read through the host's /proc. */
static pid_t pid_in_session(int hostproc, pid_t host_pid)
{
    char p[48], buf[4096];
    snprintf(p, sizeof p, "%d/status", (int)host_pid);
    int fd = openat(hostproc, p, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *l = strstr(buf, "\nNSpid:");
    if (!l)
        return -1;
    char *nl = strchr(l + 1, '\n');
    if (nl)
        *nl = 0;
    char *last = strrchr(l, '\t');
    return last ? (pid_t)strtol(last + 1, NULL, 10) : -1;
}

/* The directory the command's shell is in as it exits (ptrace's exit
 * event, PTRACE_O_TRACEEXIT, on the shell alone: /proc/PID/cwd is gone
 * once it has exited), sent in pieces of a message each. */
static void send_cwd(const struct cmd_proc *cp)
{
    char p[48], dir[PATH_MAX];
    int at = cp->hostproc >= 0 ? cp->hostproc : AT_FDCWD;
    snprintf(p, sizeof p, "%s%d/cwd", at == AT_FDCWD ? "/proc/" : "", (int)cp->host_pid);
    struct stat st;
    ssize_t n = readlinkat(at, p, dir, sizeof dir - 1);
    if (n <= 0 || dir[0] != '/' || fstatat(at, p, &st, 0) < 0 || st.st_nlink == 0)
        return; /* unreachable from here, or removed: not reported */
    dir[n] = 0;
    struct sb_msg m = {.type = MSG_CWD};
    for (ssize_t off = 0; off < n; off += (ssize_t)sizeof m.text - 1) {
        m.val = (int)off;
        m.ts = now_ns();
        snprintf(m.text, sizeof m.text, "%.*s", (int)sizeof m.text - 1, dir + off);
        if (write_all(report_fd, &m, sizeof m) < 0)
            _exit(126);
    }
}

/* A ptrace stop of the traced shell: its exit event (its directory is
 * read, then it goes on to exit), a signal on its way to it (delivered,
 * as without the tracer), or the group stop that signal began (kept
 * stopped until a SIGCONT, as without the tracer). */
static void traced_stop(const struct cmd_proc *cp, int ws)
{
    pid_t cmd = cp->host_pid;
    int event = ws >> 16, sig = WSTOPSIG(ws);
    if (sig == SIGTRAP && event == PTRACE_EVENT_EXIT) {
        send_cwd(cp);
        ptrace(PTRACE_CONT, cmd, 0, 0);
    } else if (event == PTRACE_EVENT_STOP) {
        if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
            ptrace(PTRACE_LISTEN, cmd, 0, 0);
        else
            ptrace(PTRACE_CONT, cmd, 0, 0);
    } else {
        ptrace(PTRACE_CONT, cmd, 0, (void *)(uintptr_t)sig);
    }
}

static bool send_discard(const char *path, void *ctx)
{
    size_t *sent = ctx;
    if (*sent >= SB_DISCARD_PATHS)
        return false; /* counted, no more named */
    (*sent)++;
    send_msg(report_fd, MSG_DISCARD, 0, path);
    return true;
}

/* After the command: every process left in the namespace is killed and
 * reaped, then what was written to the private /tmp, /var/tmp and
 * /dev/shm, which end with init, is reported (the result's `discarded`). */
static void report_discarded(void)
{
    kill(-1, SIGKILL);
    while (waitpid(-1, NULL, __WALL) > 0 || errno == EINTR)
        ;
    static const char *const dirs[] = {"/tmp", "/var/tmp", "/dev/shm"};
    size_t sent = 0, total = 0;
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
        struct stat st;
        if (i == 1 && (!has_var_tmp() || lstat("/var/tmp", &st) < 0))
            continue;
        total += written_walk(AT_FDCWD, dirs[i], dirs[i], send_discard, &sent);
    }
    send_msg(report_fd, MSG_DISCARDS, (int)(total > INT32_MAX ? INT32_MAX : total), NULL);
}

/* init's last job: reap every process of the namespace, answer the
 * command's connect() calls (connguard.h), and report the command's status
 * when it exits. SIGCHLD through a signalfd, so that neither waits on the
 * other. */
/* In a session, once the shell has exited: the command's processes still
 * running (its user namespace's, keeper.h) live on when session_keep,
 * handed over with what serves them (sb_handoff); else they are killed,
 * until none is left. Nothing of the session's /tmp is discarded. */
static void session_after(const struct sb_spec *s, const struct cmd_proc *cp, int listener,
                          const struct connguard *guard)
{
    size_t n = kp_members(cp->procfd, cp->userns, NULL, NULL);
    for (int i = 0; n && !s->session_keep && i < 5000; i++) {
        kp_signal(cp->procfd, cp->userns, SIGKILL);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        n = kp_members(cp->procfd, cp->userns, NULL, NULL);
    }
    send_msg(report_fd, MSG_DISCARDS, 0, NULL);
    send_msg(report_fd, MSG_SURVIVORS, (int)(n > INT32_MAX ? INT32_MAX : n), NULL);
    if (!n || !s->session_keep)
        return;
    struct sb_handoff h = {
        .userns = cp->userns, .n_mounts = (uint32_t)guard->n_mounts, .has_listener = listener >= 0};
    memcpy(h.mounts, guard->mounts, sizeof h.mounts);
    int fds[2], k = 0;
    int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        _exit(126);
    fds[k++] = root;
    if (listener >= 0)
        fds[k++] = listener;
    if (fd_send(handoff_fd, &h, sizeof h, fds, k) < 0)
        _exit(126);
}

__attribute__((noreturn)) static void supervise(const struct sb_spec *s, const struct cmd_proc *cp,
                                                int listener, struct connguard *guard)
{
    pid_t cmd = cp->host_pid;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sfd = -1;
    if (listener >= 0 && (sigprocmask(SIG_BLOCK, &chld, NULL) < 0 ||
                          (sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) < 0))
        setup_die("cannot watch the sandbox's processes");
    bool xfsz = false; /* said (MSG_XFSZ): the write limit refused a write */
    for (;;) {
        int ws;
        pid_t p = waitpid(-1, &ws, __WALL | (listener >= 0 ? WNOHANG : 0));
        if (p == cmd && WIFSTOPPED(ws)) {
            traced_stop(cp, ws);
            continue;
        }
        if (p > 0 && !xfsz &&
            ((WIFSIGNALED(ws) && WTERMSIG(ws) == SIGXFSZ) || guard->xfsz ||
             (p == cmd && connguard_xfsz_scan()))) {
            /* a process ended by it or with it pending, or one that is
             * still running (killed now, with the command) */
            send_msg(report_fd, MSG_XFSZ, 0, NULL);
            xfsz = true;
        }
        if (p == cmd) {
            send_msg(report_fd, MSG_EXITED, ws, NULL);
            if (s->session) {
                session_after(s, cp, listener, guard);
                _exit(0); /* the session's processes are not init's to end */
            }
            if (s->report_after) {
                if (listener >= 0)
                    close(listener); /* the rest are killed: none to answer */
                report_discarded();
            }
            /* Returning from pid 1 kills everything left in the namespace. */
            _exit(0);
        }
        if (p > 0 || (p < 0 && errno == EINTR))
            continue;
        if (p < 0)
            _exit(126); /* no child at all: the command is gone unreaped */
        /* p == 0: children, none ended (WNOHANG, with a listener only) */
        struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN}, {.fd = listener, .events = POLLIN}};
        if (poll(pf, 2, -1) < 0)
            continue;
        if (pf[0].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) > 0)
                ;
        }
        if (pf[1].revents & POLLIN) {
            if (connguard_serve(guard, listener) < 0)
                _exit(126);
            if (guard->xfsz && !xfsz) {
                send_msg(report_fd, MSG_XFSZ, 0, NULL);
                xfsz = true;
            }
        } else if (pf[1].revents & (POLLHUP | POLLERR | POLLNVAL)) {
            close(listener); /* no process is left to call it */
            listener = -1;
        }
    }
}

/* Until the command's execve (end of file on exec_fd: done, or it died
 * before). A traced command (report_after) that dies first stops at its
 * exit event, before its descriptors are closed: that stop is answered
 * meanwhile (SIGCHLD through a signalfd), else both would wait. */
static void wait_exec(const struct sb_spec *s, const struct cmd_proc *cp, int exec_fd)
{
    pid_t cmd = cp->host_pid;
    char c;
    if (!s->report_after) {
        if (read(exec_fd, &c, 1) < 0)
            setup_die("cannot wait for the command's execve");
        return;
    }
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sfd;
    if (sigprocmask(SIG_BLOCK, &chld, NULL) < 0 ||
        (sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
        setup_die("cannot watch the command");
    for (;;) {
        struct pollfd pf[2] = {{.fd = exec_fd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            setup_die("cannot wait for the command's execve");
        if (pf[0].revents)
            break;
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) > 0)
            ;
        siginfo_t info = {0};
        if (waitid(P_PID, (id_t)cmd, &info, WSTOPPED | WNOHANG | __WALL) == 0 && info.si_pid == cmd)
            traced_stop(cp, (info.si_status << 8) | 0x7f);
    }
    close(sfd);
    if (read(exec_fd, &c, 1) < 0)
        setup_die("cannot wait for the command's execve");
}

__attribute__((noreturn)) static void init_main(const struct sb_spec *s, bool userns, int landlock_abi,
                                                char *cmd_stack_top)
{
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        setup_die("cannot make mounts private");

    /* Host device nodes, opened before /dev is covered. */
    int devfd[DEVFS_NODES];
    devfs_open_nodes(devfd);
    int view = make_view(s, userns);
    /* in a session, the host's /proc stays reachable to init (the command's
     * pid there, its directory, its user namespace) */
    struct cmd_proc cp = {.hostproc = -1, .procfd = AT_FDCWD};
    if (s->session && (cp.hostproc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        setup_die("cannot open /proc");
    remount_all_readonly();
    if (s->session) {
        attach_clone(s->session->fd[KP_TMP], "/tmp", "/tmp");
        if (has_var_tmp())
            attach_clone(s->session->fd[KP_VARTMP], "/var/tmp", "/var/tmp");
    } else {
        char tmpo[64];
        tmpfs_opts(s, tmpo, sizeof tmpo);
        if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmpo) < 0)
            setup_die("cannot mount a private /tmp");
        private_var_tmp(s);
    }
    mount_dev(s, devfd);
    int devfd_null = devfd[0];
    for (size_t i = 1; i < ARRAY_SIZE(devfd); i++)
        if (devfd[i] >= 0)
            close(devfd[i]);
    /* A fresh /proc for the new pid namespace (in a session, the session's
     * own); made read-only below, once the command's id maps are written. */
    if (s->session)
        ; /* the session's, once nothing more needs /proc/self (below) */
    else if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        int e = errno;
        bool masked = e == EPERM && sb_proc_masked();
        errno = e;
        setup_die("cannot mount /proc%s",
                  masked ? " (the container runtime masks parts of /proc: podman --security-opt "
                           "unmask=/proc/*, docker --security-opt systempaths=unconfined, "
                           "Kubernetes procMount: Unmasked)"
                         : "");
    }
    attach_view(s, view);
    if (!s->net && !s->session)
        loopback_up();

    hide_paths(s, devfd_null);
    mask_socket_dirs(s);
    /* The session's /proc, where init has no pid (its /proc/self, which
     * the steps above use, is gone from here on) */
    if (s->session) {
        attach_clone(s->session->fd[KP_PROC], "/proc", "/proc");
        if ((cp.procfd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
            setup_die("cannot open the session's /proc");
    }

    /* Nothing in /proc can be written from now on (sysctls, sysrq-trigger),
     * whatever the command's uid: before init's Landlock domain (below),
     * which allows no change to its mounts. init keeps a clone of the
     * mount, which only it holds, for the command's id maps and OOM score
     * (a file open for writing on /proc itself would forbid the remount). */
    int procw = open_tree(AT_FDCWD, "/proc", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (procw < 0)
        setup_die("cannot clone /proc's mount");
    if (mount(NULL, "/proc", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              NULL) < 0)
        setup_die("cannot make /proc read-only");

    /* The connection guard (connguard.h): sockets on the mounts made for
     * the command may be reached, no other. init is scoped like the
     * command for abstract sockets, before the command is made so that the
     * command's domain nests in its own (and init reaches the command's
     * abstract sockets). */
    struct connguard guard;
    if (connguard_init(&guard) < 0)
        setup_die("the kernel cannot supervise the command's connections (seccomp user notification)");
    const char *own[] = {"/tmp", "/dev/shm", has_var_tmp() ? "/var/tmp" : NULL,
                         s->view != SB_VIEW_READONLY ? s->ws_path : NULL};
    for (size_t i = 0; i < ARRAY_SIZE(own); i++)
        if (own[i] && connguard_allow_mount(&guard, own[i]) < 0)
            setup_die("cannot find the mount of %s", own[i]);
    if (confine_landlock_scopes_abstract(landlock_abi)) {
        txbox_error le = {0};
        if (confine_landlock_scope_abstract(landlock_abi, &le) < 0) {
            errno = 0;
            setup_die("%s", le.msg);
        }
    }

    /* The command, in a nested user namespace. */
    int go[2], exec_fd[2]; /* exec_fd: end of file once the command has exec'd (or died) */
    int gsock[2];          /* the command hands init its seccomp listener */
    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(exec_fd, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, gsock) < 0)
        setup_die("pipe");
    if (exec_fd[1] < 3) { /* above stdio, which the command replaces */
        int w = fcntl(exec_fd[1], F_DUPFD_CLOEXEC, 3);
        if (w < 0)
            setup_die("dup");
        close(exec_fd[1]);
        exec_fd[1] = w;
    }
    struct child_args ca = {.spec = s,
                            .go_fd = go[0],
                            .go_other = go[1],
                            .exec_fd = exec_fd[1],
                            .exec_other = exec_fd[0],
                            .guard_fd = gsock[1],
                            .guard_other = gsock[0],
                            .landlock_abi = landlock_abi};
    /* CLONE_VM: the command shares init's memory (which is txbox's, see
     * "starting init") until its execve, instead of a copy of it, on a
     * stack set aside in the launcher's (init_entry). Safe because neither
     * side allocates meanwhile: init writes the id maps and then only
     * waits, and command_main makes system calls. */
    pid_t cmd = clone(command_entry, cmd_stack_top, CLONE_VM | CLONE_NEWUSER | SIGCHLD, &ca);
    if (cmd < 0)
        setup_die("cannot create the command's user namespace");
    /* The shell alone is traced, for the directory it ends in (its exit
     * event: traced_stop); where the kernel refuses, that is not known. */
    cp.host_pid = cp.pid = cmd;
    if (s->session) {
        cp.pid = pid_in_session(cp.hostproc, cmd);
        cp.userns = kp_userns_of(cp.hostproc, cmd);
        if (cp.pid <= 0 || !cp.userns)
            setup_die("cannot find the command in the session's /proc");
    }
    if (s->report_after)
        (void)ptrace(PTRACE_SEIZE, cmd, 0, (void *)(uintptr_t)(PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL));
    close(go[0]);
    close(exec_fd[1]);
    close(gsock[1]);
    char map[64];
    if (userns) {
        /* Identity for the ids init's namespace maps: the caller's one uid
         * and gid, or, for root in a container, the ranges it had there */
        char umap[512], gmap[512];
        int selfat = cp.hostproc >= 0 ? cp.hostproc : AT_FDCWD;
        const char *us = selfat == AT_FDCWD ? "/proc/self/uid_map" : "self/uid_map";
        const char *gs = selfat == AT_FDCWD ? "/proc/self/gid_map" : "self/gid_map";
        if (!identity_of_at(selfat, us, umap, sizeof umap) ||
            !identity_of_at(selfat, gs, gmap, sizeof gmap)) {
            errno = EINVAL;
            setup_die("cannot read the sandbox's id maps");
        }
        if (write_id_maps_at(procw, cp.pid, umap, gmap, false) < 0)
            setup_die("cannot map ids in the command's namespace");
    } else {
        snprintf(map, sizeof map, "0 0 4294967295\n");
        if (write_id_maps_at(procw, cp.pid, map, map, false) < 0)
            setup_die("cannot map ids in the command's namespace");
    }
    /* The command's OOM score, written after its execve (below). */
    char oomp[32];
    snprintf(oomp, sizeof oomp, "%d/oom_score_adj", (int)cp.pid);
    int oomfd = openat(procw, oomp, O_WRONLY | O_CLOEXEC);
    if (oomfd < 0)
        setup_die("cannot reach the command's OOM score");
    close(procw);
    char uns[32] = "";
    if (s->session)
        snprintf(uns, sizeof uns, "%llu", (unsigned long long)cp.userns);
    send_msg(report_fd, MSG_STARTED, 0, uns);
    if (write_all(go[1], "g", 1) < 0)
        setup_die("cannot start the command");
    close(go[1]);
    /* The OOM killer's first choice is the command, of the memory limit's
     * and of the whole machine's: a score raised, which needs no privilege
     * and is inherited by its children. Only after its execve: a score is
     * set for every process that shares the memory, which before the
     * execve is txbox's. (init itself is never a candidate: see
     * "starting init".) The command cannot lower it again: /proc is read-only
     * for it. */
    wait_exec(s, &cp, exec_fd[0]);
    close(exec_fd[0]);
    if (write_all(oomfd, "1000", 4) < 0 && errno != ESRCH)
        setup_die("cannot make the command the OOM killer's first choice");
    close(oomfd);
    /* Sent before the execve, so here by now (none: the command died). */
    int listener = recv_listener(gsock[0]);
    close(gsock[0]);
    connguard_fast_wakeup(listener);
    supervise(s, &cp, listener, &guard);
}

/* In a session (spec->session), init joins its namespaces instead of
 * having new ones (sb_prestart made it in txbox's): its user namespace
 * first (unless root), for the rights over the others, then ipc, uts,
 * pid (for its children: the command is one of the session's processes)
 * and the network (not with the host's), and a new mount namespace, copied
 * from txbox's as for a command alone. */
static void join_session(const struct sb_spec *s, bool userns)
{
    const struct kp_fds *f = s->session;
    if (userns && setns(f->fd[KP_USER], CLONE_NEWUSER) < 0)
        setup_die("cannot join the session's user namespace");
    if (setns(f->fd[KP_IPC], CLONE_NEWIPC) < 0 || setns(f->fd[KP_UTS], CLONE_NEWUTS) < 0 ||
        setns(f->fd[KP_PID], CLONE_NEWPID) < 0)
        setup_die("cannot join the session's namespaces");
    if (!s->net && setns(f->fd[KP_NET], CLONE_NEWNET) < 0)
        setup_die("cannot join the session's network namespace");
    if (unshare(CLONE_NEWNS) < 0)
        setup_die("cannot create the command's mount namespace");
}

/* ---- starting init ----
 *
 * init does not get a copy of txbox's memory: it shares it (CLONE_VM), as
 * the command does until its execve. A fork copies the page tables of all
 * of txbox's memory and makes every page copy-on-write, so that the first
 * write to a page on either side, and on this project's VMs (which shadow
 * page tables) even the child's first read of one, is a fault of 5-12 us:
 * 2.3 ms of a transaction (27.3 -> 25.0 ms; go->started 2.5 -> 1.0;
 * 250M, ten-file change, 25 interleaved runs).
 *
 * Sharing is safe because init and the command, until its execve, write
 * nothing of txbox's but their stacks and their thread's TLS (errno,
 * report_fd), and neither belongs to a thread that runs meanwhile: both are
 * the launcher's, a thread made for one sandbox, which clones init onto
 * stacks set aside in its own (so that AddressSanitizer knows them as that
 * thread's) with CLONE_VFORK: it sleeps in the clone until init is gone.
 * Neither init nor the command allocates, so nothing of theirs is left in
 * txbox's memory afterwards. CLONE_VFORK also keeps init out of the OOM
 * killer's choice (the kernel never picks a vfork child, which would take
 * every process sharing its memory, txbox, with it), and the launcher,
 * alive as long as init, is its parent for PR_SET_PDEATHSIG. */
#define LAUNCH_GAP (64u << 10)    /* the launcher's own frames in the clone */
#define INIT_STACK (1u << 20)     /* generous: init's frames under ASan */
#define LAUNCHER_STACK (2u << 20) /* these, the command's, glibc's TLS */

struct launcher {
    pthread_t th;
    sem_t ready, done;
    const struct sb_spec *s; /* these three: set by sb_run before it lets init go */
    int abi;
    int close_fds[8]; /* the parent's ends, closed in init's own table (-1: none) */
    int proxy_fd;     /* spec->proxy: the proxy's socket, made by init in the shared table */
    int hand_fd;      /* spec->session: init's end of the handover socket (sb_handoff) */
    int cg_fds[2];    /* cgroup v1: the group's tasks files, init moves itself in (-1: none) */
    bool userns, posted;
    int flags, sync_fd, report_fd;
    int parent_fd;  /* a pidfd of txbox: readable once it is gone (-1: none) */
    sigset_t mask;  /* the caller's signal mask, init's */
    cpu_set_t cpus; /* the caller's CPUs, init's (the launcher's: another one) */
    bool placed;    /* the launcher runs on another CPU than its creator */
    pid_t pid;      /* set by the kernel before init runs */
    int err;
};

__attribute__((noreturn)) static int init_entry(void *arg)
{
    struct launcher *L = arg;
    pthread_sigmask(SIG_SETMASK, &L->mask, NULL); /* the launcher's has all blocked */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    L->posted = true;
    sem_post(&L->ready); /* L->pid is set */
    report_fd = L->report_fd;
    /* The command's CPUs are the caller's, not the launcher's one. */
    if (L->placed && sched_setaffinity(0, sizeof L->cpus, &L->cpus) < 0)
        setup_die("cannot give the sandbox the caller's CPUs");
    /* Wait for the go. Were txbox killed before the line above, no signal
     * would come, and the go pipe would stay open (this process holds the
     * table it shares): its pidfd says so instead. */
    struct pollfd w[2] = {{.fd = L->sync_fd, .events = POLLIN}, {.fd = L->parent_fd, .events = POLLIN}};
    while (poll(w, L->parent_fd >= 0 ? 2 : 1, -1) < 0)
        ;
    char c;
    if (w[1].revents || read_all(L->sync_fd, &c, 1) != 1)
        _exit(126); /* the parent is gone, or gave up (maps or cgroup failed, or it ran nothing) */
    /* into the transaction's control group, before anything it limits runs
     * (cgroup.c: cg_self_fds) */
    if (L->cg_fds[0] >= 0 && cg_attach_self(L->cg_fds) < 0)
        setup_die("cannot place the sandbox in its cgroup");
    /* Until now init shared txbox's table of descriptors (CLONE_FILES), so
     * that it has those made after it started (sb_prestart): from now on a
     * copy of its own, where the parent's ends are closed. The parent keeps
     * its own ends open until init's first message. */
    handoff_fd = L->hand_fd;
    if (L->s->session)
        join_session(L->s, L->userns);
    if (L->s->proxy)
        L->proxy_fd = proxy_listen(L->s);
    if (unshare(CLONE_FILES) < 0)
        setup_die("cannot copy the table of descriptors");
    close(L->sync_fd);
    if (L->proxy_fd >= 0)
        close(L->proxy_fd); /* txbox's now */
    for (size_t i = 0; i < ARRAY_SIZE(L->close_fds); i++)
        if (L->close_fds[i] >= 0)
            close(L->close_fds[i]);
    for (size_t i = 0; i < ARRAY_SIZE(L->cg_fds); i++)
        if (L->cg_fds[i] >= 0)
            close(L->cg_fds[i]);
    char *here = __builtin_frame_address(0);
    char *cmd_top = (char *)(((uintptr_t)here - INIT_STACK) & ~(uintptr_t)63);
    init_main(L->s, L->userns, L->abi, cmd_top);
}

static void *launcher_main(void *arg)
{
    struct launcher *L = arg;
    char *here = __builtin_frame_address(0);
    char *top = (char *)(((uintptr_t)here - LAUNCH_GAP) & ~(uintptr_t)63);
    pid_t r =
        clone(init_entry, top, L->flags | CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | SIGCHLD, L, &L->pid);
    /* Here init is gone, or was never made (errno: nothing else wrote it). */
    if (r < 0)
        L->err = errno;
    if (!L->posted)
        sem_post(&L->ready);
    while (sem_wait(&L->done) != 0)
        ;
    return NULL;
}

/* After init is reaped, or was never made. */
static void stop_launcher(struct launcher *L)
{
    sem_post(&L->done);
    pthread_join(L->th, NULL);
    sem_destroy(&L->ready);
    sem_destroy(&L->done);
}

/* The number of tasks running or ready to run on the whole machine, this
 * thread included (/proc/loadavg's fourth field, "R/T"); ~0UL if unknown. */
static unsigned long runnable_tasks(void)
{
    char b[128];
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, b, sizeof b - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return ~0UL;
    b[n] = 0;
    char *p = b;
    for (int field = 0; field < 3 && p; field++)
        if ((p = strchr(p, ' ')))
            p++;
    if (!p || *p < '0' || *p > '9')
        return ~0UL;
    char *end;
    unsigned long r = strtoul(p, &end, 10);
    return *end == '/' ? r : ~0UL;
}

/* Start the launcher, which starts init (await_init waits for that).
 * -1 with errno set when it could not be started. */
static int launch_init(struct launcher *L)
{
    pthread_attr_t attr;
    sigset_t all;
    L->pid = 0;
    L->err = 0;
    L->posted = false;
    if (sem_init(&L->ready, 0, 0) < 0 || sem_init(&L->done, 0, 0) < 0)
        return -1;
    int e = pthread_attr_init(&attr);
    if (e == 0)
        e = pthread_attr_setstacksize(&attr, LAUNCHER_STACK);
    /* On another CPU than this thread's, when one is idle: left to the
     * scheduler, the launcher is made on this thread's CPU and runs only
     * once this thread waits for it (in early_await), so that the
     * namespaces are not made meanwhile at all (seen in every run; 250M
     * ten-file change, 80 interleaved runs: clone->go 0.71 -> 0.12 ms, the
     * whole 31.3 -> 30.3 ms). Not when every CPU is busy: the launcher would
     * wait for a busy CPU, and init and the command would start there,
     * while this one idles (beside a CPU-bound process, 40 interleaved runs:
     * 38.2 -> 39.8 ms placed always; placed only with a CPU idle, 80 runs:
     * 40.2 -> 39.0, and idle 28.9 -> 26.5). init takes the caller's CPUs
     * back first thing. */
    L->placed = false;
    int cpu = sched_getcpu();
    if (e == 0 && cpu >= 0 && sched_getaffinity(0, sizeof L->cpus, &L->cpus) == 0 &&
        CPU_ISSET(cpu, &L->cpus) && CPU_COUNT(&L->cpus) > 1 &&
        runnable_tasks() < (unsigned long)CPU_COUNT(&L->cpus)) {
        cpu_set_t other = L->cpus;
        CPU_CLR(cpu, &other);
        L->placed = pthread_attr_setaffinity_np(&attr, sizeof other, &other) == 0;
    }
    /* The launcher runs with every signal blocked: signals are the other
     * threads' to handle (one sent to txbox must not wait, pending on a
     * thread asleep in a vfork, until init is gone). */
    sigfillset(&all);
    if (e == 0)
        e = pthread_sigmask(SIG_SETMASK, &all, &L->mask);
    if (e == 0) {
        e = pthread_create(&L->th, &attr, launcher_main, L);
        pthread_sigmask(SIG_SETMASK, &L->mask, NULL);
    }
    pthread_attr_destroy(&attr);
    if (e) {
        errno = e;
        return -1;
    }
    return 0;
}

/* After launch_init: init's pid, and a pidfd for it in *pidfd. -1 with
 * errno set when it could not be started (the launcher is then gone). */
static pid_t await_init(struct launcher *L, int *pidfd)
{
    int e;
    while (sem_wait(&L->ready) != 0)
        ;
    if (L->pid <= 0) {
        e = L->err ? L->err : ECHILD;
        stop_launcher(L);
        errno = e;
        return -1;
    }
    /* init cannot have been reaped: only this thread reaps it */
    *pidfd = (int)syscall(SYS_pidfd_open, L->pid, 0);
    if (*pidfd < 0) {
        e = errno;
        kill(L->pid, SIGKILL);
        while (waitpid(L->pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
        stop_launcher(L);
        errno = e;
        return -1;
    }
    return L->pid;
}

/* ---- a sandbox started ahead ---- */

struct sb_early {
    struct launcher L;
    int rep[2], sync[2]; /* init's report pipe, and the one that lets it go */
    int self;            /* a pidfd of this process, for init (parent_fd) */
    int pidfd;
    pid_t pid; /* 0 until early_await */
    bool net, session, launched;
};

/* Wait until init runs (sb_prestart does not: the namespaces are made
 * meanwhile); its pid, pidfd and, in a user namespace, its id maps. */
static int early_await(struct sb_early *e, txbox_error *err)
{
    if (e->pid > 0)
        return 0;
    e->launched = false; /* whatever happens: init runs, or the launcher is gone */
    e->pid = await_init(&e->L, &e->pidfd);
    if (e->pid < 0) {
        e->pid = 0;
        int en = errno;
        return tx_errno(err, en, "cannot create the sandbox namespaces%s",
                        !e->L.userns ? ""
                        : en == EPERM && sb_under_seccomp()
                            ? " (a seccomp filter refuses them, as container runtimes' default "
                              "profiles do: run the container with txbox's containers/seccomp.json)"
                            : " (are unprivileged user namespaces enabled?)");
    }
    if (e->L.userns && !e->session) {
        char um[512], gm[512];
        /* Root without CAP_SYS_ADMIN (a container's) keeps every id its
         * namespace has, as root's own sandbox does: files of other uids
         * in the workspace stay its to change. Anyone else: its own. */
        bool all = geteuid() == 0 && tx_cap_effective(CAP_SETUID) && tx_cap_effective(CAP_SETGID) &&
                   identity_of("/proc/self/uid_map", um, sizeof um) &&
                   identity_of("/proc/self/gid_map", gm, sizeof gm);
        if (!all) {
            snprintf(um, sizeof um, "%u %u 1\n", getuid(), getuid());
            snprintf(gm, sizeof gm, "%u %u 1\n", getgid(), getgid());
        }
        if (write_id_maps(e->pid, um, gm, !all) < 0)
            return tx_errno(err, errno, "cannot map ids in the sandbox user namespace");
    }
    return 0;
}

int sb_prestart(bool net, bool session, struct sb_early **out, txbox_error *err)
{
    *out = NULL;
    struct sb_early *e = xcalloc(1, sizeof *e);
    e->rep[0] = e->rep[1] = e->sync[0] = e->sync[1] = e->pidfd = -1;
    e->self = (int)syscall(SYS_pidfd_open, getpid(), 0);
    e->net = net;
    e->session = session;
    bool userns = !sb_is_root();
    /* in a session, init joins the session's namespaces once let go
     * (join_session) */
    unsigned flags = CLONE_FILES;
    if (!session)
        flags |= CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
    if (!net && !session)
        flags |= CLONE_NEWNET;
    if (userns && !session)
        flags |= CLONE_NEWUSER;
    if (pipe2(e->rep, O_CLOEXEC) < 0 || pipe2(e->sync, O_CLOEXEC) < 0) {
        tx_errno(err, errno, "pipe");
        sb_early_cancel(e);
        return -1;
    }
    e->L = (struct launcher){.userns = userns,
                             .flags = (int)flags,
                             .sync_fd = e->sync[0],
                             .report_fd = e->rep[1],
                             .parent_fd = e->self,
                             .close_fds = {-1, -1, -1, -1, -1, -1, -1, -1},
                             .proxy_fd = -1,
                             .hand_fd = -1,
                             .cg_fds = {-1, -1}};
    fflush(NULL);
    if (launch_init(&e->L) < 0) {
        tx_errno(err, errno, "cannot start the sandbox's launcher thread");
        sb_early_cancel(e);
        return -1;
    }
    e->launched = true;
    *out = e;
    return 0;
}

void sb_early_cancel(struct sb_early *e)
{
    if (!e)
        return;
    if (e->launched)
        (void)early_await(e, NULL); /* its pid, to reap it */
    int fds[] = {e->rep[0], e->rep[1], e->sync[0], e->sync[1], e->self};
    /* init reads end of file where it waits for the go, and exits */
    for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (e->pid > 0) {
        while (waitpid(e->pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
        close(e->pidfd);
        stop_launcher(&e->L);
    }
    free(e);
}

bool sb_is_root(void) { return tx_privileged(); }

/* Does the caller's descriptor fd have to be relayed rather than handed to
 * the command? An inherited descriptor names a host file through a host
 * mount, beyond the sandbox's read-only remount: with a regular file, a
 * directory or a device (even /dev/null) as stdin or stdout the command
 * could fchmod, fchown, fsetxattr or reopen it through /proc/self/fd. Pipes
 * and sockets carry data only. A closed descriptor stays closed. */
static bool needs_relay(int fd)
{
    if (isatty(fd))
        return false; /* a terminal: the command gets a pseudo-terminal (pty_open) */
    struct stat st;
    if (fstat(fd, &st) < 0)
        return false;
    return !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode);
}

/* A pseudo-terminal for the command, set up like the caller's terminal
 * `like` (modes, window size). */
static int pty_open(int like, int *ptm, int *pts)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0)
        return -1;
    int sl = -1;
    char name[64];
    if (grantpt(m) == 0 && unlockpt(m) == 0) {
        sl = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (sl < 0 && ptsname_r(m, name, sizeof name) == 0)
            sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    }
    if (sl < 0) {
        int e = errno;
        close(m);
        errno = e;
        return -1;
    }
    struct termios t;
    struct winsize w;
    if (tcgetattr(like, &t) == 0)
        (void)tcsetattr(sl, TCSANOW, &t);
    if (ioctl(like, TIOCGWINSZ, &w) == 0)
        (void)ioctl(sl, TIOCSWINSZ, &w);
    *ptm = m;
    *pts = sl;
    return 0;
}

/* The relay pipes sb_run made itself (the caller's own pipes are the
 * caller's), on a path where the command never ran. */
static void close_relays(int relay_in, int own_in_fd, const struct sb_spec *spec, int out_pipe, int err_pipe,
                         const bool relay_out[3])
{
    if (relay_in >= 0)
        close(relay_in);
    if (own_in_fd >= 0)
        close(own_in_fd);
    if (relay_out[1]) {
        close(out_pipe);
        close(spec->out_fd);
    }
    if (relay_out[2]) {
        close(err_pipe);
        close(spec->err_fd);
    }
}

/* write() to a pipe whose reader may be gone, without a SIGPIPE for the
 * whole process: block it, and take back one that arrived. */
static ssize_t write_nosigpipe(int fd, const void *buf, size_t n)
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    ssize_t r = write(fd, buf, n);
    int e = errno;
    if (r < 0 && e == EPIPE) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return r;
}

/* The directories masked whole in the sandbox for their sockets: /run
 * (/var/run, when it is a directory of its own), and the caller's
 * XDG_RUNTIME_DIR wherever it is. */
static void fill_sock_dirs(struct sb_spec *s)
{
    size_t n = 0;
    s->sock_dirs[n++] = "/run";
    s->sock_dirs[n++] = "/var/run";
    const char *x = getenv("XDG_RUNTIME_DIR");
    if (x && x[0] == '/' && !path_under(x, "/run") && !path_under(x, "/var/run"))
        s->sock_dirs[n++] = x;
    s->sock_dirs[n] = NULL;
}

/* protections.host_sockets: which mechanism keeps each kind of host
 * socket out of reach. */
static json_t *socket_protections(const struct sb_spec *s, int abi)
{
    json_t *dirs = json_array();
    for (size_t i = 0; i < ARRAY_SIZE(s->sock_dirs) && s->sock_dirs[i]; i++)
        if (sock_dir_masked(s, s->sock_dirs[i]))
            json_array_append_new(dirs, json_string(s->sock_dirs[i]));
    bool scoped = abi > 0 && confine_landlock_scopes_abstract(abi);
    const char *abstract = s->net
                               ? (scoped ? "Landlock scope" : "reachable (the host's network namespace)")
                               : (scoped ? "own network namespace, Landlock scope" : "own network namespace");
    const char *own = s->view == SB_VIEW_READONLY
                          ? "the private /tmp, /var/tmp and /dev/shm"
                          : "the private /tmp, /var/tmp and /dev/shm, and the workspace view";
    return json_pack("{s:o,s:s,s:s,s:s,s:s}", "masked_dirs", dirs, "abstract", abstract, "elsewhere",
                     "refused (EACCES): every connect() is made by the sandbox's init (seccomp user "
                     "notification), to a socket by path only when it lives on a mount made for the command",
                     "connect_allowed_on", own, "datagram", "unix datagram sockets refused (EPERM)");
}

/* What is in force, as the result's `protections` object. */
static json_t *protections(const struct sb_spec *s, bool userns, pid_t pid, int abi, const struct cgroup *cg)
{
    json_t *ns = json_pack("[s,s,s,s]", "mount", "pid", "ipc", "uts");
    if (!s->net)
        json_array_append_new(ns, json_string("net"));
    json_array_append_new(ns, json_string("user"));
    json_t *hidden = json_array();
    for (size_t i = 0; s->hide && s->hide[i]; i++) {
        struct stat st;
        if (!path_under(s->ws_path, s->hide[i]) && stat(s->hide[i], &st) == 0)
            json_array_append_new(hidden, json_string(s->hide[i]));
    }
    json_t *lim = json_object();
    json_object_set_new(lim, "via", json_string(cg->kind ? cg->kind : "rlimits"));
    json_object_set_new(lim, "processes",
                        json_integer((json_int_t)(cg->kind ? s->pids_max : s->limits.nproc)));
    json_object_set_new(lim, "memory_bytes",
                        json_integer((json_int_t)(cg->kind ? s->memory_max : s->limits.memory)));
    /* rlimits bound each process alone: four processes under the limit, or
     * a shared mapping, hold more than it together */
    json_object_set_new(lim, "memory_scope", json_string(cg->kind ? "per transaction" : "per process"));
    json_object_set_new(lim, "cpu_seconds",
                        s->limits.cpu_s ? json_integer((json_int_t)s->limits.cpu_s) : json_null());
    json_object_set_new(lim, "write_bytes", json_integer((json_int_t)s->max_write));
    json_object_set_new(lim, "timeout_seconds", s->timeout_s > 0 ? json_real(s->timeout_s) : json_null());
    const char *view = s->view == SB_VIEW_OVERLAY  ? "overlay"
                       : s->view == SB_VIEW_DIRECT ? "direct"
                                                   : "read-only";
    json_t *o = json_object();
    json_object_set_new(o, "namespaces", ns);
    char map[320] = "nested, identity-mapped (mounts locked)";
    /* In a session, init joins the session's user namespace only once let
     * go: read the map of the keeper (pid 1 of the session's /proc), which
     * made it, not init's, which may still be txbox's own. */
    _cleanup_close_ int procfd = s->session ? -1 : open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (userns)
        sb_map_text(s->session ? s->session->fd[KP_PROC] : procfd, s->session ? 1 : pid, map, sizeof map);
    json_object_set_new(o, "user_namespace", json_string(map));
    json_object_set_new(o, "workspace", json_string(view));
    json_object_set_new(o, "readonly_root", json_true());
    json_object_set_new(o, "private_tmp", json_true());
    json_object_set_new(o, "private_var_tmp", json_boolean(has_var_tmp()));
    json_object_set_new(o, "minimal_dev", json_true());
    json_object_set_new(o, "proc", json_string("private, read-only"));
    json_object_set_new(o, "network", json_string(s->net ? "host" : s->proxy ? "proxy" : "loopback only"));
    json_t *state = json_array();
    json_array_append_new(state, json_sprintf("%s/.txbox", s->ws_path));
    for (size_t i = 0; s->state_hide && s->state_hide[i]; i++) {
        struct stat st;
        if (!path_under(s->ws_path, s->state_hide[i]) && stat(s->state_hide[i], &st) == 0)
            json_array_append_new(state, json_string(s->state_hide[i]));
    }
    json_object_set_new(o, "state_hidden", state);
    json_object_set_new(o, "secrets_hidden", hidden);
    json_object_set_new(o, "host_sockets", socket_protections(s, abi));
    json_object_set_new(o, "no_new_privs", json_true());
    json_object_set_new(o, "seccomp", json_true());
    json_object_set_new(o, "landlock", abi > 0 ? json_integer(abi) : json_false());
    json_object_set_new(o, "limits", lim);
    return o;
}

static void sb_early_cancelp(struct sb_early **e) { sb_early_cancel(*e); }

/* Serve the proxy's socket (proxy_listen) once init says the command is
 * about to start: what the command sends before waits in the backlog. */
static int start_proxy(const struct sb_spec *s, struct launcher *L, struct netproxy **np, txbox_error *err)
{
    if (!s->proxy || *np)
        return 0;
    if (L->proxy_fd < 0)
        return tx_err(err, EIO, "sandbox: the network proxy's socket is missing");
    if (np_start(take_fd(&L->proxy_fd), s->proxy, np, err) < 0)
        return tx_err_ctx(err, "sandbox");
    return 0;
}

static void close_ours(int *fds, int *n)
{
    for (int i = 0; i < *n; i++)
        close(fds[i]);
    *n = 0;
}

/* The command's stdio as sb_run made it (setup_stdio). */
struct sb_io {
    int relay_in;      /* the caller's stdin goes in here (-1: no relay) */
    bool relay_out[3]; /* [1], [2]: stdout, stderr relayed through a pipe of ours */
    bool own_in;       /* spec.in_fd is a pipe made here */
    int ptm, pts;      /* the command's terminal (pty_open), -1: none */
    int tty_out;       /* the caller's stream the terminal is copied to */
    struct termios tty_saved;
    bool tty_raw; /* the caller's terminal is in raw mode (tty_saved: as it was) */
};

/* The command's stdio, made before the clone: a pipe of txbox's own for
 * each stream that needs a relay, or a terminal of its own (spec's
 * in_fd, out_fd, err_fd, *out_pipe and *err_pipe are filled in; io says
 * what was made, for the relays and for close_stdio). */
static int setup_stdio(struct sb_spec *spec, int *out_pipe, int *err_pipe, struct sb_io *io, txbox_error *err)
{
    /* stdio that is not a pipe or socket goes through pipes of txbox's own
     * (needs_relay). A terminal is read only by a foreground txbox: in the
     * background the command gets an empty stdin rather than txbox being
     * stopped for reading it. */
    if (spec->in_fd < 0 && needs_relay(0)) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
            return tx_errno(err, errno, "pipe");
        io->own_in = true;
        spec->in_fd = p[0];
        io->relay_in = p[1];
        if (isatty(0) && tcgetpgrp(0) != getpgrp()) {
            close(io->relay_in);
            io->relay_in = -1;
        } else {
            fcntl(io->relay_in, F_SETFL, O_NONBLOCK);
        }
    }
    for (int k = 1; k <= 2; k++) {
        int *pipe_rd = k == 1 ? out_pipe : err_pipe;
        int *cfd = k == 1 ? &spec->out_fd : &spec->err_fd;
        int p[2];
        /* in a session, processes the command leaves running hold its
         * stdout and stderr: a pipe of the caller's would never end for
         * its reader, so these are relayed too (their end is the
         * session's, sb_status.output_rest) */
        bool kept_pipe = spec->session && spec->session_keep && !isatty(k);
        if (*pipe_rd >= 0 || *cfd >= 0 || !(needs_relay(k) || kept_pipe))
            continue;
        if (pipe2(p, O_CLOEXEC) < 0)
            return tx_errno(err, errno, "pipe");
        *pipe_rd = p[0];
        *cfd = p[1];
        io->relay_out[k] = true;
    }
    /* A terminal among the caller's stdio: the command gets a terminal of
     * its own, a new pseudo-terminal that is its controlling terminal in its
     * own session, and txbox relays between it and the caller's, as ssh and
     * script(1) do. The command reads and writes "the terminal", runs stty,
     * takes its foreground, without ever holding the caller's terminal. The
     * caller's is put in raw mode meanwhile (the inner one edits lines),
     * and read only while txbox is in its foreground: in the background the
     * command's stdin is empty rather than txbox stopped for reading. */
    for (int k = 0; k <= 2 && io->ptm < 0; k++) {
        int cfd = k == 0 ? spec->in_fd : k == 1 ? spec->out_fd : spec->err_fd;
        if (cfd >= 0 || !isatty(k))
            continue;
        if (pty_open(k, &io->ptm, &io->pts) < 0)
            return tx_errno(err, errno, "cannot create a terminal for the command");
    }
    if (io->ptm >= 0) {
        bool fg = isatty(0) && tcgetpgrp(0) == getpgrp();
        if (spec->in_fd < 0 && isatty(0) && !fg) {
            int p[2];
            if (pipe2(p, O_CLOEXEC) < 0)
                return tx_errno(err, errno, "pipe");
            close(p[1]);
            io->own_in = true;
            spec->in_fd = p[0];
        }
        if (spec->in_fd < 0 && isatty(0)) {
            spec->in_fd = io->pts;
            io->relay_in = fcntl(io->ptm, F_DUPFD_CLOEXEC, 3);
            if (io->relay_in < 0)
                return tx_errno(err, errno, "dup");
            fcntl(io->relay_in, F_SETFL, O_NONBLOCK);
            struct termios r;
            if (tcgetattr(0, &io->tty_saved) == 0) {
                r = io->tty_saved;
                cfmakeraw(&r);
                io->tty_raw = tcsetattr(0, TCSANOW, &r) == 0;
            }
        }
        for (int k = 2; k >= 1; k--) {
            int *cfd = k == 1 ? &spec->out_fd : &spec->err_fd;
            if (*cfd < 0 && isatty(k)) {
                *cfd = io->pts;
                io->tty_out = k;
            }
        }
    }
    return 0;
}

#define PUMP_BUF 65536

/* One run between init's go and its end (sb_run): init's reports, the
 * command's output, the stdin and terminal relays, the limits. */
struct pump {
    const struct sb_spec *s;
    struct sb_status *st;
    struct sb_io *io;
    struct sb_early *E;
    sb_output_fn fn;
    void *ctx;
    int pidfd;
    int fds[3];         /* init's reports, the command's stdout and stderr */
    int *ours, *n_ours; /* our copies of init's ends (close_ours) */
    uint64_t free0;     /* the workspace's free bytes before the run */
    uint64_t deadline, started;
    bool init_done, killed;
    bool survivors_said; /* in a session: MSG_SURVIVORS came, init's last report */
    struct netproxy *proxy;
    struct sb_msg msg;
    size_t msg_have;
    /* stdin relay: read the caller's stdin when the buffer is empty, write
     * it to the command's pipe when not */
    char *inbuf;
    size_t in_len, in_off;
    char *buf; /* PUMP_BUF bytes: the command's output on its way */
    int rc;
    txbox_error *err;
};

static void pump_kill(struct pump *p)
{
    /* in a session, init is not its pid namespace's init: the command's
     * processes are killed themselves (and again once init is gone) */
    if (p->s->session && p->st->userns)
        kp_signal(p->s->session->fd[KP_PROC], p->st->userns, SIGKILL);
    syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
    p->killed = true;
}

/* In a session, once init is gone: a command that was killed leaves none
 * of its processes (they keep forking while being killed: again, until
 * none is left, for a second at most). */
static void session_kill_rest(struct pump *p)
{
    int procfd = p->s->session->fd[KP_PROC];
    for (int i = 0; i < 1000 && kp_signal(procfd, p->st->userns, SIGKILL); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Test builds only: TXBOX_TEST_PUMP_HOLD=1 leaves the command's output in
 * its pipes until init's last report, so that tests see what the end of
 * the pump reads then (pump_quiet_end); fine for output that fits in the
 * pipes, which the command would otherwise wait on forever. */
static bool pump_hold_output(const struct pump *p)
{
#ifdef TXBOX_TEST_HOOKS
    static int hold = -1;
    if (hold < 0)
        hold = getenv("TXBOX_TEST_PUMP_HOLD") && !strcmp(getenv("TXBOX_TEST_PUMP_HOLD"), "1");
    return hold && !p->st->discarded.known;
#else
    (void)p;
    return false;
#endif
}

/* What to wait for: pf[i] is source map[i] (0 init's reports, 1 and 2
 * the command's stdout and stderr, 3 init's pidfd, 4 the stdin relay, 5
 * the terminal). Returns how many. */
static int pump_pollset(const struct pump *p, struct pollfd pf[6], int map[6])
{
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (p->fds[i] >= 0 && !(i && pump_hold_output(p))) {
            pf[n] = (struct pollfd){.fd = p->fds[i], .events = POLLIN};
            map[n++] = i;
        }
    if (!p->init_done) {
        pf[n] = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
        map[n++] = 3;
    }
    if (p->io->ptm >= 0) {
        pf[n] = (struct pollfd){.fd = p->io->ptm, .events = POLLIN};
        map[n++] = 5;
    }
    if (p->io->relay_in >= 0) {
        pf[n] = p->in_off < p->in_len ? (struct pollfd){.fd = p->io->relay_in, .events = POLLOUT}
                                      : (struct pollfd){.fd = 0, .events = POLLIN};
        map[n++] = 4;
    }
    return n;
}

/* The time limit, the write budget and a cancel: each kills the
 * sandbox. Returns the poll timeout (ms), no later than the deadline. */
static int pump_watch(struct pump *p)
{
    const struct sb_spec *s = p->s;
    int tmo = s->max_write ? 50 : 200;
    if (p->deadline && !p->killed) {
        uint64_t now = now_ns();
        if (now >= p->deadline) {
            p->st->timed_out = true;
            pump_kill(p);
        } else if ((p->deadline - now) / 1000000 < (uint64_t)tmo) {
            tmo = (int)((p->deadline - now) / 1000000) + 1;
        }
    }
    if (!p->killed && s->max_write) {
        struct statvfs v;
        if (fstatvfs(s->ws_fd, &v) == 0) {
            uint64_t now_free = (uint64_t)v.f_bavail * v.f_frsize;
            if (p->free0 > now_free && p->free0 - now_free > s->max_write) {
                p->st->write_limit = true;
                pump_kill(p);
            }
        }
    }
    if (s->cancel && *s->cancel && !p->killed) {
        p->st->cancelled = true;
        pump_kill(p);
    }
    return tmo;
}

/* The terminal's master: what the command wrote to its terminal goes to
 * the caller's. */
static void pump_tty(struct pump *p)
{
    struct sb_io *io = p->io;
    ssize_t g = read(io->ptm, p->buf, PUMP_BUF);
    if (g > 0)
        (void)!write_all(io->tty_out, p->buf, (size_t)g);
    else if (g == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(io->ptm); /* EIO: no process holds the terminal any more */
        io->ptm = -1;
    }
}

/* The stdin relay: the caller's stdin into the command's pipe. */
static void pump_stdin(struct pump *p)
{
    struct sb_io *io = p->io;
    if (io->relay_in < 0)
        return;
    ssize_t r2;
    if (p->in_off < p->in_len) {
        r2 = write_nosigpipe(io->relay_in, p->inbuf + p->in_off, p->in_len - p->in_off);
        if (r2 > 0)
            p->in_off += (size_t)r2;
        else if (r2 < 0 && (errno == EAGAIN || errno == EINTR))
            return;
    } else {
        r2 = read(0, p->inbuf, 65536);
        if (r2 > 0) {
            p->in_len = (size_t)r2;
            p->in_off = 0;
        } else if (r2 < 0 && (errno == EAGAIN || errno == EINTR)) {
            return;
        }
    }
    if (r2 <= 0) { /* end of the caller's stdin, or the command closed its own */
        close(io->relay_in);
        io->relay_in = -1;
    }
}

/* A piece of the shell's last directory (MSG_CWD), in order. */
static void pump_cwd(struct pump *p, const struct sb_msg *msg)
{
    size_t have = p->st->cwd_after ? strlen(p->st->cwd_after) : 0;
    if (msg->val < 0 || (size_t)msg->val != have || have + strlen(msg->text) >= PATH_MAX)
        return;
    char *c = xasprintf("%s%s", p->st->cwd_after ? p->st->cwd_after : "", msg->text);
    free(p->st->cwd_after);
    p->st->cwd_after = c;
}

/* What was written where nothing persists (MSG_DISCARD: one path;
 * MSG_DISCARDS: how many in all). */
static void pump_discard(struct pump *p, const struct sb_msg *msg)
{
    typeof(p->st->discarded) *d = &p->st->discarded;
    if (msg->type == MSG_DISCARD) {
        if (d->n < SB_DISCARD_PATHS)
            d->paths[d->n++] = xstrdup(msg->text);
        return;
    }
    d->known = true;
    d->count = msg->val > 0 ? (size_t)msg->val : 0;
}

/* An init left ending (sb_spec.reap_later), awaited by a thread; its
 * cgroup, removed by sb_reap after the wait. */
struct sb_reaper {
    pthread_t th;
    pid_t pid;
    struct cgroup cg;
};

static void *reaper_main(void *arg)
{
    struct sb_reaper *r = arg;
    int ws;
    while (waitpid(r->pid, &ws, 0) < 0 && errno == EINTR)
        ;
    return NULL;
}

void sb_reap(struct sb_status *st)
{
    struct sb_reaper *r = st->reaper;
    if (!r)
        return;
    pthread_join(r->th, NULL);
    cg_destroy(&r->cg);
    free(r);
    st->reaper = NULL;
}

void sb_status_init(struct sb_status *st)
{
    memset(st, 0, sizeof *st);
    st->guard_listener = st->rootfd = st->output_rest[0] = st->output_rest[1] = st->output_rest[2] = -1;
}

void sb_status_free(struct sb_status *st)
{
    sb_reap(st);
    free(st->cwd_after);
    st->cwd_after = NULL;
    for (size_t i = 0; i < st->discarded.n; i++)
        free(st->discarded.paths[i]);
    st->discarded.n = 0;
    int *fds[] = {&st->guard_listener, &st->rootfd, &st->output_rest[1], &st->output_rest[2]};
    for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
        if (*fds[i] >= 0) {
            close(*fds[i]);
            *fds[i] = -1;
        }
}

/* A report of init's (struct sb_msg, once read whole): a setup error, the
 * command started (the proxy is served from then on), or its status. */
static void pump_report(struct pump *p)
{
    struct sb_msg *msg = &p->msg;
    ssize_t got = read(p->fds[0], (char *)msg + p->msg_have, sizeof *msg - p->msg_have);
    if (got <= 0) {
        if (got < 0 && errno == EINTR)
            return;
        close(p->fds[0]);
        p->fds[0] = -1;
        return;
    }
    p->msg_have += (size_t)got;
    if (p->msg_have < sizeof *msg)
        return;
    p->msg_have = 0;
    msg->text[sizeof msg->text - 1] = 0;
    close_ours(p->ours, p->n_ours);
    if ((msg->type == MSG_SETUP_ERR || msg->type == MSG_OVERLAY_ERR) && p->rc == 0) {
        p->rc = tx_err(p->err, msg->val ? msg->val : EPERM, "sandbox: %s", msg->text);
        p->st->overlay_failed = msg->type == MSG_OVERLAY_ERR;
    } else if (msg->type == MSG_STARTED) {
        if (p->rc == 0 && start_proxy(p->s, &p->E->L, &p->proxy, p->err) < 0) {
            p->rc = -1;
            pump_kill(p);
        }
        p->st->ran = true;
        p->started = msg->ts;
        p->st->t_started = msg->ts;
        p->st->userns = strtoull(msg->text, NULL, 10);
    } else if (msg->type == MSG_XFSZ) {
        p->st->write_limit = true; /* a write the file size limit refused */
    } else if (msg->type == MSG_EXITED) {
        p->st->exited = true;
        p->st->wstatus = msg->val;
        p->st->cmd_ns = msg->ts - p->started;
        p->st->t_exited = msg->ts;
    } else if (msg->type == MSG_CWD) {
        pump_cwd(p, msg);
    } else if (msg->type == MSG_DISCARD || msg->type == MSG_DISCARDS) {
        pump_discard(p, msg);
    } else if (msg->type == MSG_SURVIVORS) {
        p->st->survivors = msg->val > 0 ? (size_t)msg->val : 0;
        p->survivors_said = true;
    }
}

/* The command's stdout (k = 1) or stderr (2): to the caller's own stream
 * when relayed, else to the caller's function. */
static void pump_output(struct pump *p, int k)
{
    ssize_t got = read(p->fds[k], p->buf, PUMP_BUF);
    if (got <= 0) {
        if (got < 0 && errno == EINTR)
            return;
        /* a relay pipe is ours; the caller's pipe stays open for it to
         * close (closed here too, the caller's close could hit a
         * descriptor another thread of its process has opened since) */
        if (p->io->relay_out[k])
            close(p->fds[k]);
        p->fds[k] = -1;
        return;
    }
    if (p->io->relay_out[k])
        (void)!write_all(k, p->buf, (size_t)got); /* the caller's stdout/stderr, as it is */
    else if (p->fn)
        p->fn(p->ctx, k, p->buf, (size_t)got);
}

/* In a session, once init is gone and has said that processes of the
 * command live on: they hold the output pipes, which will not end. What
 * is there now is read; the rest is theirs (the caller hands the pipes
 * over). */
static void pump_leave_outputs(struct pump *p)
{
    for (int k = 1; k <= 2; k++) {
        if (p->fds[k] < 0)
            continue;
        fcntl(p->fds[k], F_SETFL, fcntl(p->fds[k], F_GETFL) | O_NONBLOCK);
        int before = p->fds[k];
        for (int i = 0; i < 64 && p->fds[k] == before; i++) {
            struct pollfd pf = {.fd = before, .events = POLLIN};
            if (poll(&pf, 1, 0) <= 0)
                break;
            pump_output(p, k);
        }
        if (p->fds[k] >= 0)
            p->st->output_rest[k] = fcntl(p->fds[k], F_DUPFD_CLOEXEC, 3);
        p->fds[k] = -1; /* not closed here: the caller's */
    }
}

/* May pump_run end before init does (spec.reap_later)? Once init has
 * killed and reaped every other process and said so (MSG_DISCARDS, its
 * last report, after report_discarded), nothing of the sandbox writes any
 * more; what is left of init's end is the kernel's teardown of its
 * namespaces, which even closes init's descriptors last (the unmount and
 * the final close are both deferred work of the exit, run in reverse).
 * In a session the same holds once init said that none of the command's
 * processes is left (MSG_SURVIVORS 0, after which it only exits): with
 * some left, their handover comes first. */
static bool pump_init_quiet(const struct pump *p)
{
    bool said = p->s->session ? p->survivors_said && !p->st->survivors : p->st->discarded.known;
    return p->s->reap_later && p->s->report_after && said && p->io->ptm < 0 && !p->killed;
}

/* The end of the pump once init is quiet: its reports end, and the
 * output the command's processes left in the pipes is read (the pipes'
 * write ends that init still holds would end only with it). */
static void pump_quiet_end(struct pump *p)
{
    if (p->fds[0] >= 0)
        close(p->fds[0]);
    p->fds[0] = -1;
    for (int k = 1; k <= 2; k++) {
        if (p->fds[k] < 0)
            continue;
        fcntl(p->fds[k], F_SETFL, fcntl(p->fds[k], F_GETFL) | O_NONBLOCK);
        struct pollfd pf = {.fd = p->fds[k], .events = POLLIN};
        while (p->fds[k] >= 0 && poll(&pf, 1, 0) > 0)
            pump_output(p, k); /* ends the pipe at end of file or EAGAIN */
        if (p->fds[k] >= 0 && p->io->relay_out[k])
            close(p->fds[k]);
        p->fds[k] = -1;
    }
}

/* Pump output and messages until init is gone (or quiet, pump_init_quiet). */
static void pump_run(struct pump *p)
{
    struct sb_io *io = p->io;
    while (p->fds[0] >= 0 || p->fds[1] >= 0 || p->fds[2] >= 0 || !p->init_done || io->ptm >= 0) {
        if (!p->init_done && pump_init_quiet(p)) {
            pump_quiet_end(p);
            break;
        }
        if (p->init_done && p->fds[0] < 0 && p->st->survivors && p->s->session_keep) {
            pump_leave_outputs(p);
            if (io->ptm < 0)
                break;
        }
        if (p->init_done && io->relay_in >= 0) {
            close(io->relay_in);
            io->relay_in = -1;
        }
        if (p->init_done && io->ptm >= 0) {
            /* every process that held the terminal is gone: what it wrote
             * is in the master's buffer */
            ssize_t g;
            while ((g = read(io->ptm, p->buf, PUMP_BUF)) > 0)
                (void)!write_all(io->tty_out, p->buf, (size_t)g);
            close(io->ptm);
            io->ptm = -1;
            continue;
        }
        struct pollfd pf[6];
        int map[6];
        int n = pump_pollset(p, pf, map);
        int tmo = pump_watch(p);
        int r = poll(pf, (nfds_t)n, tmo);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            p->rc = tx_errno(p->err, errno, "poll");
            pump_kill(p);
            continue;
        }
        for (int i = 0; i < n; i++) {
            if (!pf[i].revents)
                continue;
            int k = map[i];
            if (k == 3) {
                p->init_done = true;
                close_ours(p->ours, p->n_ours);
            } else if (k == 5) {
                pump_tty(p);
            } else if (k == 4) {
                pump_stdin(p);
            } else if (k == 0) {
                pump_report(p);
            } else {
                pump_output(p, k);
            }
        }
    }
}

/* In a session: what init handed over for the processes left (sb_handoff),
 * into st. */
static int take_handoff(int sock, struct sb_status *st)
{
    struct sb_handoff h;
    int fds[2] = {-1, -1}, n = 0;
    bool trunc;
    ssize_t r = fd_recv(sock, &h, sizeof h, MSG_DONTWAIT, fds, 2, &n, &trunc);
    if (r != (ssize_t)sizeof h || trunc || n != 1 + !!h.has_listener || h.n_mounts > CONNGUARD_MAX_MOUNTS) {
        for (int i = 0; i < n; i++)
            close(fds[i]);
        return -1;
    }
    st->rootfd = fds[0];
    st->guard_listener = h.has_listener ? fds[1] : -1;
    st->n_guard_mounts = h.n_mounts;
    memcpy(st->guard_mounts, h.mounts, sizeof st->guard_mounts);
    return 0;
}

static int run_once(const struct sb_spec *s, int out_pipe, int err_pipe, sb_output_fn fn, void *ctx,
                    struct sb_status *st, txbox_error *err)
{
    sb_status_init(st);
    bool userns = !sb_is_root();
    /* init started ahead, if it was, with the namespaces this needs */
    __attribute__((cleanup(sb_early_cancelp))) struct sb_early *early = s->early;
    if (early && (early->net != s->net || early->session != (s->session != NULL))) {
        sb_early_cancel(early);
        early = NULL;
    }
    /* Fail closed: a protection that cannot be had here stops the run,
     * unless the caller accepts less (and the result says what held). */
    int abi = confine_landlock_abi();
    if (abi < 1 && !s->allow_degraded) {
        tx_err(err, ENOSYS, "Landlock is not available in this kernel; refusing to run with less isolation");
        return tx_remedy(err, TXBOX_REMEDY_ALLOW_DEGRADED, NULL);
    }
    struct cgroup cg;
    /* root, also without CAP_SYS_ADMIN: RLIMIT_NPROC never binds the host's uid 0 */
    if (cg_create(&cg, s->name ? s->name : "tx", s->pids_max, s->memory_max) < 0 && geteuid() == 0 &&
        !s->allow_degraded) {
        tx_err(err, ENOTSUP,
               "no usable cgroup for the process and memory limits; refusing to run as root without them");
        return tx_remedy(err, TXBOX_REMEDY_ALLOW_DEGRADED, "rlimits");
    }
    struct sb_spec spec = *s;
    fill_sock_dirs(&spec);
    if (!cg.kind) {
        /* rlimits instead: per process for memory, per user for processes */
        if (!spec.limits.nproc)
            spec.limits.nproc = s->pids_max;
        if (!spec.limits.memory)
            spec.limits.memory = s->memory_max;
    }
    s = &spec;
    struct statvfs vfs0;
    if (fstatvfs(s->ws_fd, &vfs0) < 0) {
        cg_destroy(&cg);
        return tx_errno(err, errno, "cannot measure the workspace's filesystem");
    }
    uint64_t free0 = (uint64_t)vfs0.f_bavail * vfs0.f_frsize;
    /* Everything made before the clone, undone in one place on failure. */
    int rep[2] = {-1, -1}, sync[2] = {-1, -1};
    struct sb_io io = {.relay_in = -1, .ptm = -1, .pts = -1};
    int rc = setup_stdio(&spec, &out_pipe, &err_pipe, &io, err);
    if (rc < 0)
        goto fail_setup;
    int pidfd = -1;
    st->t_clone = now_ns();
    if (!early && sb_prestart(s->net, s->session != NULL, &early, err) < 0) {
        rc = -1;
        goto fail_setup;
    }
    if (early_await(early, err) < 0) {
        rc = -1;
        goto fail_setup;
    }
    struct sb_early *E = early; /* ended below, once init is reaped */
    early = NULL;
    pid_t pid = E->pid;
    pidfd = E->pidfd;
    rep[0] = E->rep[0];
    rep[1] = E->rep[1];
    sync[0] = E->sync[0];
    sync[1] = E->sync[1];
    /* What init reads once let go; and our ends it closes in its own
     * table. Ours of its ends stay open in the table it shares until its
     * first message says it has a copy (close_ours). */
    E->L.s = s;
    E->L.abi = abi;
    int hand[2] = {-1, -1}; /* in a session: what serves the processes left (sb_handoff) */
    if (rc == 0 && s->session && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, hand) < 0)
        rc = tx_errno(err, errno, "socketpair");
    E->L.hand_fd = hand[1];
    int ends[] = {rep[0], sync[1], out_pipe, err_pipe, io.relay_in, io.ptm, E->self, hand[0]};
    memcpy(E->L.close_fds, ends, sizeof ends);
    int ours[10], n_ours = 0;
    if (hand[1] >= 0)
        ours[n_ours++] = hand[1];
    ours[n_ours++] = rep[1];
    ours[n_ours++] = sync[0];
    if (E->self >= 0)
        ours[n_ours++] = E->self;
    if (out_pipe >= 0 && s->out_fd >= 0)
        ours[n_ours++] = s->out_fd;
    if (err_pipe >= 0 && s->err_fd >= 0)
        ours[n_ours++] = s->err_fd;
    if (io.own_in && s->in_fd >= 0)
        ours[n_ours++] = s->in_fd;
    if (io.pts >= 0)
        ours[n_ours++] = io.pts;
    if (io.ptm >= 0)
        fcntl(io.ptm, F_SETFL, O_NONBLOCK);
    /* v1: init moves itself in once let go (cg_self_fds); v2: moved here */
    if (rc == 0 && cg.kind && cg_self_fds(&cg, E->L.cg_fds) == 0) {
        ours[n_ours++] = E->L.cg_fds[0];
        ours[n_ours++] = E->L.cg_fds[1];
    } else if (rc == 0 && cg.kind && cg_attach(&cg, pid) < 0) {
        rc = tx_errno(err, errno, "cannot place the sandbox in its cgroup");
    }
    /* noted before init is let go: its own marks (started) come after */
    st->t_go = now_ns();
    if (rc == 0 && write_all(sync[1], "g", 1) < 0)
        rc = tx_errno(err, errno, "cannot start the sandbox");
    if (rc < 0)
        kill(pid, SIGKILL);
    close(sync[1]);
    st->protections = protections(s, userns, pid, abi, &cg);
    if (rc == 0 && s->started)
        s->started(s->started_arg);

    char buf[PUMP_BUF];
    struct pump p = {.s = s,
                     .st = st,
                     .io = &io,
                     .E = E,
                     .fn = fn,
                     .ctx = ctx,
                     .pidfd = pidfd,
                     .fds = {rep[0], out_pipe, err_pipe},
                     .ours = ours,
                     .n_ours = &n_ours,
                     .free0 = free0,
                     .buf = buf,
                     .rc = rc,
                     .err = err};
    if (s->timeout_s > 0)
        p.deadline = now_ns() + (uint64_t)(s->timeout_s * 1e9);
    p.inbuf = io.relay_in >= 0 ? malloc(65536) : NULL;
    if (io.relay_in >= 0 && !p.inbuf) {
        close(io.relay_in);
        io.relay_in = -1;
    }
    pump_run(&p);
    rc = p.rc;
    if (io.relay_in >= 0)
        close(io.relay_in);
    if (io.ptm >= 0)
        close(io.ptm);
    if (io.tty_raw)
        (void)tcsetattr(0, TCSANOW, &io.tty_saved);
    free(p.inbuf);
    bool later = !p.init_done && pump_init_quiet(&p);
    struct sb_reaper *reaper = later ? xcalloc(1, sizeof *reaper) : NULL;
    if (reaper) {
        reaper->pid = pid;
        if (thread_start(&reaper->th, reaper_main, reaper) != 0) {
            free(reaper);
            reaper = NULL;
        }
    }
    int ws;
    while (!reaper && waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    close_ours(ours, &n_ours);
    if (s->session && p.killed && st->userns)
        session_kill_rest(&p);
    if (hand[0] >= 0) {
        if (st->survivors && s->session_keep && !p.killed && take_handoff(hand[0], st) < 0) {
            /* what would serve them is gone: they are not kept */
            kp_signal(s->session->fd[KP_PROC], st->userns, SIGKILL);
            st->survivors = 0;
        }
        close(hand[0]);
    }
    if (st->survivors)
        cg_paths(&cg, st->cgroups); /* still theirs: removed when they end */
    close(pidfd);
    st->network = np_stop(p.proxy);
    if (E->L.proxy_fd >= 0)
        close(E->L.proxy_fd); /* made, but init failed before it was served */
    stop_launcher(&E->L);
    free(E);
    st->t_reaped = now_ns();
    st->oom = cg_oom(&cg);
    st->pids_limit = cg_pids_hit(&cg);
    if (reaper) {
        reaper->cg = cg; /* removed once init has left it (sb_reap) */
        st->reaper = reaper;
    } else {
        cg_destroy(&cg);
    }
    /* The write budget once more, now that everything has ended: a command
     * that wrote past it between two looks above is stopped all the same
     * (run.c never commits it). */
    struct statvfs vend;
    if (!st->write_limit && s->max_write && fstatvfs(s->ws_fd, &vend) == 0) {
        uint64_t now_free = (uint64_t)vend.f_bavail * vend.f_frsize;
        st->write_limit = free0 > now_free && free0 - now_free > s->max_write;
    }
    if (st->ran && !st->exited && !p.killed && !st->oom && rc == 0)
        rc = tx_err(err, EIO, "sandbox: init ended without reporting the command's status");
    if (st->ran && !st->exited && p.killed)
        st->cmd_ns = now_ns() - p.started;
    return rc;

fail_setup:
    close_relays(io.relay_in, io.own_in ? spec.in_fd : -1, &spec, out_pipe, err_pipe, io.relay_out);
    if (io.ptm >= 0)
        close(io.ptm);
    if (io.pts >= 0)
        close(io.pts);
    if (io.tty_raw)
        (void)tcsetattr(0, TCSANOW, &io.tty_saved);
    for (int i = 0; i < 2; i++) {
        if (rep[i] >= 0)
            close(rep[i]);
        if (sync[i] >= 0)
            close(sync[i]);
    }
    cg_destroy(&cg);
    return rc;
}

int sb_run(const struct sb_spec *s, int out_pipe, int err_pipe, sb_output_fn fn, void *ctx,
           struct sb_status *st, txbox_error *err)
{
    int rc = run_once(s, out_pipe, err_pipe, fn, ctx, st, err);
    /* A sandbox that could not be set up: everything this place lacks
     * named at once (probe.h), not only what failed first. (Not when the
     * overlay could not be mounted: the copy backend may take over.) */
    if (rc < 0 && !st->ran && !st->overlay_failed) {
        unsigned miss = sb_probe(s->allow_degraded);
        if (miss)
            sb_probe_error(miss, err);
    }
    return rc;
}
