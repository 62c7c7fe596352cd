/* See probe.h: what the sandbox lacks here, all at once. */
#include "probe.h"
#include "cgroup.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>

bool sb_under_seccomp(void)
{
    _cleanup_file_ FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Seccomp:", 8) == 0) {
            const char *v = line + 8 + strspn(line + 8, " \t");
            return v[0] == '2' && (v[1] == '\n' || v[1] == 0);
        }
    return false;
}

/* One line of mountinfo: is it a mount below /proc of a type that hides
 * something? ("id parent maj:min root MOUNTPOINT opts... - TYPE src opts") */
static bool masks_proc(const char *line)
{
    const char *p = line;
    for (int f = 0; f < 4 && p; f++)
        if ((p = strchr(p, ' ')))
            p++;
    if (!p || strncmp(p, "/proc/", 6) != 0)
        return false;
    const char *t = strstr(p, " - ");
    if (!t)
        return true;
    t += 3;
    size_t n = strcspn(t, " ");
    /* made on an empty directory of procfs: reveals nothing hidden */
    return !((n == 11 && !strncmp(t, "binfmt_misc", n)) || (n == 6 && !strncmp(t, "autofs", n)));
}

bool sb_proc_masked(void)
{
    int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[4096];
    size_t have = 0;
    bool found = false;
    ssize_t r;
    while (!found && (r = read(fd, buf + have, sizeof buf - 1 - have)) > 0) {
        have += (size_t)r;
        buf[have] = 0;
        char *line = buf, *nl;
        while (!found && (nl = strchr(line, '\n'))) {
            *nl = 0;
            found = masks_proc(line);
            line = nl + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
        if (have == sizeof buf - 1)
            have = 0; /* one line longer than the buffer: not a mount below /proc */
    }
    close(fd);
    return found;
}

/* The errno a child process ends with after fn (0: it worked). */
static int in_child(int (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return errno;
    if (pid == 0)
        _exit(fn());
    int ws;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR)
            return ECHILD;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : ECHILD;
}

static int try_userns(void) { return syscall(SYS_unshare, CLONE_NEWUSER) < 0 ? errno : 0; }

/* A fresh procfs in a new user and pid namespace, as the sandbox's init
 * mounts it (a child of this one is the pid namespace's first process). */
static int try_proc(void)
{
    if (syscall(SYS_unshare, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) < 0)
        return errno;
    pid_t pid = fork();
    if (pid < 0)
        return errno;
    if (pid == 0) {
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
            _exit(errno);
        _exit(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ? errno : 0);
    }
    int ws;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR)
            return ECHILD;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : ECHILD;
}

unsigned sb_probe(bool allow_degraded)
{
    unsigned miss = 0;
    bool root = geteuid() == 0;
    if (!tx_privileged()) { /* (sb_is_root) */
        /* txbox's own user namespace, and a fresh /proc in it */
        if (in_child(try_userns) != 0) {
            miss |= sb_under_seccomp() ? SB_MISS_SECCOMP : SB_MISS_USERNS;
            if (sb_proc_masked())
                miss |= SB_MISS_PROC;
        } else if (in_child(try_proc) != 0) {
            miss |= SB_MISS_PROC;
        }
        /* Mapping uid 0 of the parent namespace into a child one needs
         * CAP_SETFCAP (Linux 5.12, user_namespaces(7)). */
        if (root && !tx_cap_effective(CAP_SETFCAP))
            miss |= SB_MISS_SETFCAP;
    }
    if (root && !allow_degraded) {
        struct cgroup cg;
        if (cg_create(&cg, "probe", 1, 0) < 0)
            miss |= SB_MISS_CGROUP;
        else
            cg_destroy(&cg);
    }
    return miss;
}

/* Short: the whole list fits one error message (txbox_error.msg) beside
 * the workspace's own refusal (cmd_run.c). */
static const struct {
    unsigned bit;
    const char *text;
} clauses[] = {
    {SB_MISS_SECCOMP,
     "seccomp refuses namespaces (podman, docker: --security-opt "
     "seccomp=containers/seccomp.json; Kubernetes: seccompProfile Localhost txbox/seccomp.json)"},
    {SB_MISS_USERNS, "user namespaces are disabled (sysctl user.max_user_namespaces)"},
    {SB_MISS_PROC, "/proc is masked (podman: --security-opt unmask=/proc/*; docker: --security-opt "
                   "systempaths=unconfined; Kubernetes: procMount: Unmasked)"},
    {SB_MISS_SETFCAP, "root lacks CAP_SETFCAP to map its uid (podman, docker: --cap-add SETFCAP; "
                      "Kubernetes: capabilities add SETFCAP; or a non-root user)"},
    {SB_MISS_CGROUP, "root has no cgroup for its limits"},
};

int sb_probe_error(unsigned miss, txbox_error *err)
{
    int code = err && err->code ? err->code : EPERM;
    unsigned n = 0, k = 0;
    for (size_t i = 0; i < ARRAY_SIZE(clauses); i++)
        n += !!(miss & clauses[i].bit);
    tx_err(err, code, "the sandbox lacks %u setting%s:", n, n == 1 ? "" : "s");
    for (size_t i = 0; i < ARRAY_SIZE(clauses); i++)
        if (miss & clauses[i].bit) {
            if (n > 1)
                tx_err_more(err, "%s (%u) %s", k ? ";" : "", k + 1, clauses[i].text);
            else
                tx_err_more(err, " %s", clauses[i].text);
            k++;
        }
    if (miss & SB_MISS_CGROUP)
        tx_remedy(err, TXBOX_REMEDY_ALLOW_DEGRADED, "rlimits");
    return -1;
}

int txbox_sandbox_probe(int allow_degraded, txbox_error *err)
{
    unsigned miss = sb_probe(allow_degraded != 0);
    return miss ? sb_probe_error(miss, err) : 0;
}

/* "uid 1000" / "uids 0-65535" / "uids 0-999 and 1001-..." from a map
 * file's ranges (their ids inside; the sandbox maps each to itself). */
static void ranges_text(int dirfd, const char *file, const char *what, char *out, size_t n)
{
    char buf[2048], list[256];
    int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
    ssize_t r = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    size_t len = 0;
    list[0] = 0;
    unsigned nr = 0;
    for (char *line = buf, *nl; r > 0 && (buf[r] = 0, (nl = strchr(line, '\n'))); line = nl + 1) {
        unsigned long first, outside, count;
        if (sscanf(line, "%lu %lu %lu", &first, &outside, &count) != 3 || !count)
            continue;
        int w = count == 1 ? snprintf(list + len, sizeof list - len, "%s%lu", nr ? ", " : "", first)
                           : snprintf(list + len, sizeof list - len, "%s%lu-%lu", nr ? ", " : "", first,
                                      first + count - 1);
        if (w < 0 || (size_t)w >= sizeof list - len)
            break;
        len += (size_t)w;
        nr++;
    }
    bool plural = nr > 1 || strchr(list, '-');
    if ((nr ? snprintf(out, n, "%s%s %s", what, plural ? "s" : "", list)
            : snprintf(out, n, "no %ss", what)) >= (int)n)
        out[n - 1] = 0;
}

void sb_map_text(int procfd, pid_t pid, char *out, size_t n)
{
    char f[64], u[128], g[128];
    snprintf(f, sizeof f, "%d/uid_map", (int)pid);
    ranges_text(procfd, f, "uid", u, sizeof u);
    snprintf(f, sizeof f, "%d/gid_map", (int)pid);
    ranges_text(procfd, f, "gid", g, sizeof g);
    snprintf(out, n, "unprivileged, %s and %s mapped to themselves", u, g);
}
