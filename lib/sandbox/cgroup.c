/* Per-transaction control groups for the process-count and memory limits.
 *
 * cgroup v2 where it can be had (a writable unified hierarchy with the pids
 * and memory controllers), else the v1 pids and memory hierarchies; without
 * either (typically: not root) the caller falls back to rlimits and says so.
 * RLIMIT_NPROC does not bind host root, so as root a cgroup is what stops a
 * fork bomb. */
#include "cgroup.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <time.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>

static int write_text(const char *dir, const char *file, const char *text)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    _cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    return write_all(fd, text, strlen(text));
}

static bool has_controllers_v2(const char *root)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/cgroup.controllers", root);
    _cleanup_file_ FILE *f = fopen(p, "re");
    char line[512] = "";
    if (!f || !fgets(line, sizeof line, f))
        return false;
    return strstr(line, "pids") && strstr(line, "memory");
}

static bool is_fs(const char *p, long magic)
{
    struct statfs s;
    return statfs(p, &s) == 0 && s.f_type == magic;
}

/* Groups are named txbox-PID-NAME-RANDOM after the txbox process that
 * made them; the random part keeps two txboxes in different pid namespaces
 * (containers, `unshare --pid`) apart, whose pids may be the same. Each
 * holds an flock on its group's directory while it uses it, and the lock
 * goes with the process, however it ends. A txbox killed before it could
 * remove its group leaves it behind: the groups whose lock can be taken
 * are removed (a group's processes are dead by then: its pid namespace
 * died with its init; rmdir refuses a populated one). A pid cannot tell
 * that: txbox's pid means nothing in another pid namespace, where two
 * txboxes removed each other's fresh groups. A group younger than
 * SWEEP_AGE_S is left alone, since its maker locks it just after making
 * it. */
#define SWEEP_AGE_S 30
static void sweep(const char *dir)
{
    _cleanup_dir_ DIR *d = opendir(dir);
    struct dirent *de;
    time_t now = time(NULL);
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, "txbox-", 6) != 0)
            continue;
        _cleanup_close_ int fd =
            openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || now - st.st_ctime < SWEEP_AGE_S)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
            continue; /* in use */
        (void)unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
    }
}

/* Makes the group dir/name and takes its lock; false when it cannot. */
static bool make_locked(const char *path, int *lock_fd)
{
    if (mkdir(path, 0755) < 0)
        return false;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (fd >= 0)
            close(fd);
        rmdir(path);
        return false;
    }
    if (*lock_fd < 0)
        *lock_fd = fd;
    else
        close(fd); /* v1's second hierarchy: the first one's lock stands for both */
    return true;
}

int cg_create(struct cgroup *cg, const char *txname, uint64_t pids, uint64_t memory)
{
    memset(cg, 0, sizeof *cg);
    cg->lock_fd = -1;
    if (geteuid() != 0)
        return -1;
    char v[32], name[96];
    uint32_t nonce = 0;
    if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != sizeof nonce)
        nonce = (uint32_t)now_ns();
    snprintf(name, sizeof name, "txbox-%d-%s-%08x", getpid(), txname, nonce);
    /* v2 */
    if (is_fs("/sys/fs/cgroup", CGROUP2_SUPER_MAGIC) && has_controllers_v2("/sys/fs/cgroup")) {
        mkdir("/sys/fs/cgroup/txbox", 0755);
        if (write_text("/sys/fs/cgroup/txbox", "cgroup.subtree_control", "+pids +memory") == 0) {
            sweep("/sys/fs/cgroup/txbox");
            snprintf(cg->v2, sizeof cg->v2, "/sys/fs/cgroup/txbox/%s", name);
            if (make_locked(cg->v2, &cg->lock_fd)) {
                snprintf(v, sizeof v, "%llu", (unsigned long long)pids);
                bool ok = write_text(cg->v2, "pids.max", v) == 0;
                snprintf(v, sizeof v, "%llu", (unsigned long long)memory);
                ok = ok && write_text(cg->v2, "memory.max", v) == 0;
                (void)write_text(cg->v2, "memory.swap.max", "0");
                if (ok) {
                    cg->kind = "cgroup v2";
                    return 0;
                }
                rmdir(cg->v2);
                close(cg->lock_fd);
                cg->lock_fd = -1;
            }
            cg->v2[0] = 0;
        }
    }
    /* v1 */
    if (is_fs("/sys/fs/cgroup/pids", CGROUP_SUPER_MAGIC) &&
        is_fs("/sys/fs/cgroup/memory", CGROUP_SUPER_MAGIC)) {
        sweep("/sys/fs/cgroup/pids");
        sweep("/sys/fs/cgroup/memory");
        snprintf(cg->v1_pids, sizeof cg->v1_pids, "/sys/fs/cgroup/pids/%s", name);
        snprintf(cg->v1_mem, sizeof cg->v1_mem, "/sys/fs/cgroup/memory/%s", name);
        if (make_locked(cg->v1_pids, &cg->lock_fd) && make_locked(cg->v1_mem, &cg->lock_fd)) {
            snprintf(v, sizeof v, "%llu", (unsigned long long)pids);
            bool ok = write_text(cg->v1_pids, "pids.max", v) == 0;
            snprintf(v, sizeof v, "%llu", (unsigned long long)memory);
            ok = ok && write_text(cg->v1_mem, "memory.limit_in_bytes", v) == 0;
            (void)write_text(cg->v1_mem, "memory.memsw.limit_in_bytes", v);
            if (ok) {
                cg->kind = "cgroup v1";
                return 0;
            }
        }
        rmdir(cg->v1_pids);
        rmdir(cg->v1_mem);
        cg->v1_pids[0] = cg->v1_mem[0] = 0;
        if (cg->lock_fd >= 0)
            close(cg->lock_fd);
        cg->lock_fd = -1;
    }
    return -1;
}

int cg_attach(const struct cgroup *cg, pid_t pid)
{
    char v[32];
    snprintf(v, sizeof v, "%d", pid);
    if (cg->v2[0])
        return write_text(cg->v2, "cgroup.procs", v);
    if (cg->v1_pids[0])
        return write_text(cg->v1_pids, "cgroup.procs", v) == 0 &&
                       write_text(cg->v1_mem, "cgroup.procs", v) == 0
                   ? 0
                   : -1;
    return -1;
}

/* Why a process moves itself in, on v1: a write of a pid to cgroup.procs
 * takes the global threadgroup lock for writing, which waits for an RCU
 * grace period whenever the lock was not taken lately: 5-27 ms of every
 * command as root on an otherwise idle machine (strace: the write alone),
 * more than the rest of the sandbox's start. A thread that writes "0" to
 * `tasks` moves itself alone, which the kernel does without that lock
 * (cgroup_procs_write_start: 0.02 ms). The fds are opened here, by the
 * caller, whose credentials the kernel checks. */
int cg_self_fds(const struct cgroup *cg, int fds[2])
{
    fds[0] = fds[1] = -1;
    if (!cg->v1_pids[0] || !cg->v1_mem[0])
        return -1;
    const char *dirs[2] = {cg->v1_pids, cg->v1_mem};
    for (int i = 0; i < 2; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/tasks", dirs[i]);
        if ((fds[i] = open(p, O_WRONLY | O_CLOEXEC)) < 0) {
            if (i)
                close(fds[0]);
            fds[0] = fds[1] = -1;
            return -1;
        }
    }
    return 0;
}

int cg_attach_self(const int fds[2])
{
    for (int i = 0; i < 2; i++)
        if (write(fds[i], "0", 1) != 1)
            return -1;
    return 0;
}

bool cg_oom(const struct cgroup *cg)
{
    char p[PATH_MAX];
    _cleanup_free_ char *s = NULL;
    if (cg->v2[0]) {
        snprintf(p, sizeof p, "%s/memory.events", cg->v2);
        if (read_file_at(AT_FDCWD, p, 4096, &s, NULL, NULL) == 0) {
            const char *k = strstr(s, "oom_kill ");
            return k && strtoull(k + 9, NULL, 10) > 0;
        }
    } else if (cg->v1_mem[0]) {
        /* The kill itself (oom_control's oom_kill, Linux 4.13+); else a
         * charge refused, of memory or, with swap accounting, of
         * memory+swap, which is checked first and so counts the failure
         * alone when both limits are the same. */
        static const char *const files[] = {"memory.oom_control", "memory.failcnt", "memory.memsw.failcnt"};
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
            _cleanup_free_ char *t = NULL;
            snprintf(p, sizeof p, "%s/%s", cg->v1_mem, files[i]);
            if (read_file_at(AT_FDCWD, p, 4096, &t, NULL, NULL) < 0)
                continue;
            const char *k = i == 0 ? strstr(t, "oom_kill ") : t;
            if (k && strtoull(k + (i == 0 ? 9 : 0), NULL, 10) > 0)
                return true;
        }
    }
    return false;
}

bool cg_pids_hit(const struct cgroup *cg)
{
    /* pids.events counts the forks refused at pids.max (v1 and v2) */
    const char *dir = cg->v2[0] ? cg->v2 : cg->v1_pids[0] ? cg->v1_pids : NULL;
    if (!dir)
        return false;
    char p[PATH_MAX];
    _cleanup_free_ char *s = NULL;
    snprintf(p, sizeof p, "%s/pids.events", dir);
    if (read_file_at(AT_FDCWD, p, 4096, &s, NULL, NULL) < 0)
        return false;
    const char *k = strstr(s, "max ");
    return k && (k == s || k[-1] == '\n') && strtoull(k + 4, NULL, 10) > 0;
}

void cg_paths(const struct cgroup *cg, char out[3][128])
{
    snprintf(out[0], 128, "%s", cg->v2);
    snprintf(out[1], 128, "%s", cg->v1_pids);
    snprintf(out[2], 128, "%s", cg->v1_mem);
}

void cg_remove(const char *path)
{
    const char *base = strrchr(path, '/');
    if (strncmp(path, "/sys/fs/cgroup/", 15) || strstr(path, "/..") || !base ||
        strncmp(base + 1, "txbox-", 6))
        return;
    (void)rmdir(path);
}

void cg_destroy(struct cgroup *cg)
{
    /* The pid namespace is gone when this runs, so the groups are empty. */
    if (cg->v2[0])
        rmdir(cg->v2);
    if (cg->v1_pids[0])
        rmdir(cg->v1_pids);
    if (cg->v1_mem[0])
        rmdir(cg->v1_mem);
    if (cg->lock_fd >= 0)
        close(cg->lock_fd);
    memset(cg, 0, sizeof *cg);
    cg->lock_fd = -1;
}
