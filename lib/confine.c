/* The second walls, applied to the command right before exec: seccomp,
 * Landlock, resource limits; and the scrubbed environment.
 *
 * The namespaces and read-only mounts (sandbox.c) are the first wall. These
 * are defence in depth: even a kernel path that would let a process out of
 * its mount view still meets a syscall filter and a Landlock domain that
 * allow writes only below the workspace view, /tmp and /dev. */
#include "confine.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <linux/landlock.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

/* ---- seccomp ---- */

/* Calls a build or a test never needs, and those that reach past the
 * sandbox: they fail with EPERM (a clear error, not a kill). */
static const char *const denied_calls[] = {
    /* mounts and namespaces */
    "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr", "setns", "chroot",
    /* other processes' memory */
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    /* the kernel itself */
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "bpf",
    "perf_event_open", "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
    "syslog", "lookup_dcookie", "iopl", "ioperm", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "vhangup", "userfaultfd", "open_by_handle_at",
    "name_to_handle_at", "nfsservctl",
    /* the kernel keyring */
    "keyctl", "add_key", "request_key",
};

/* Calls refused only for some argument values: arg & mask == value. */
static const struct arg_rule {
    int nr;
    unsigned arg;
    uint64_t mask, value;
    int err;
} arg_rules[] = {
    /* new user or mount namespaces (to regain capabilities) */
    {SCMP_SYS(unshare), 0, CLONE_NEWUSER, CLONE_NEWUSER, EPERM},
    {SCMP_SYS(unshare), 0, CLONE_NEWNS, CLONE_NEWNS, EPERM},
    {SCMP_SYS(clone), 0, CLONE_NEWUSER, CLONE_NEWUSER, EPERM},
    /* terminal injection */
    {SCMP_SYS(ioctl), 1, 0xffffffffu, TIOCSTI, EPERM},
    {SCMP_SYS(ioctl), 1, 0xffffffffu, TIOCLINUX, EPERM},
    /* device nodes (a FIFO or a socket is fine) */
    {SCMP_SYS(mknod), 1, S_IFMT, S_IFCHR, EPERM},
    {SCMP_SYS(mknod), 1, S_IFMT, S_IFBLK, EPERM},
    {SCMP_SYS(mknodat), 2, S_IFMT, S_IFCHR, EPERM},
    {SCMP_SYS(mknodat), 2, S_IFMT, S_IFBLK, EPERM},
};

int confine_seccomp(txbox_error *err)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return tx_err(err, ENOMEM, "seccomp: cannot create a filter");
    int rc = 0;
    for (size_t i = 0; i < ARRAY_SIZE(denied_calls) && rc == 0; i++) {
        int nr = seccomp_syscall_resolve_name(denied_calls[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    }
    for (size_t i = 0; i < ARRAY_SIZE(arg_rules) && rc == 0; i++) {
        const struct arg_rule *a = &arg_rules[i];
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(a->err), a->nr, 1,
                              SCMP_CMP64(a->arg, SCMP_CMP_MASKED_EQ, a->mask, a->value));
    }
    /* clone3 passes its flags in memory a filter cannot read: make libc fall
     * back to clone, which a rule above sees. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    if (rc == 0)
        rc = seccomp_load(ctx);
    seccomp_release(ctx);
    if (rc < 0)
        return tx_errno(err, -rc, "seccomp: cannot install the filter");
    return 0;
}

/* ---- Landlock ---- */

int confine_landlock_abi(void)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi < 0 ? 0 : (int)abi;
}

static uint64_t write_rights(int abi)
{
    uint64_t r = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                 LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
                 LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                 LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                 LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
    if (abi >= 2)
        r |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        r |= LANDLOCK_ACCESS_FS_TRUNCATE;
    return r;
}

int confine_landlock(const char *const *writable, int abi, txbox_error *err)
{
    if (abi < 1)
        return tx_err(err, ENOSYS, "Landlock is not available in this kernel");
    uint64_t rights = write_rights(abi);
    struct landlock_ruleset_attr attr = {.handled_access_fs = rights};
    _cleanup_close_ int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (rs < 0)
        return tx_errno(err, errno, "Landlock: cannot create a ruleset");
    for (size_t i = 0; writable[i]; i++) {
        _cleanup_close_ int fd = open(writable[i], O_PATH | O_CLOEXEC);
        if (fd < 0)
            continue; /* nothing there to allow */
        struct stat st;
        struct landlock_path_beneath_attr pb = {.allowed_access = rights, .parent_fd = fd};
        if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
            pb.allowed_access &= LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE;
        if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
            return tx_errno(err, errno, "Landlock: cannot allow %s", writable[i]);
    }
    if (syscall(SYS_landlock_restrict_self, rs, 0) < 0)
        return tx_errno(err, errno, "Landlock: cannot restrict the command");
    return 0;
}

/* ---- resource limits ---- */

int confine_rlimits(const struct confine_limits *l, txbox_error *err)
{
    struct {
        int res;
        uint64_t v;
        const char *name;
    } lim[] = {
        {RLIMIT_NPROC, l->nproc, "process count"},
        {RLIMIT_DATA, l->memory, "memory"},
        {RLIMIT_CPU, l->cpu_s, "CPU time"},
        {RLIMIT_FSIZE, l->file_size, "file size"},
        {RLIMIT_CORE, 0, "core size"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(lim); i++) {
        if (!lim[i].v && lim[i].res != RLIMIT_CORE)
            continue;
        struct rlimit rl;
        if (getrlimit(lim[i].res, &rl) < 0)
            return tx_errno(err, errno, "cannot read the %s limit", lim[i].name);
        rlim_t v = (rlim_t)lim[i].v;
        if (rl.rlim_max != RLIM_INFINITY && v > rl.rlim_max)
            v = rl.rlim_max;
        rl.rlim_cur = v;
        rl.rlim_max = v;
        if (setrlimit(lim[i].res, &rl) < 0)
            return tx_errno(err, errno, "cannot set the %s limit", lim[i].name);
    }
    return 0;
}

/* ---- environment ---- */

static const char *const secret_words[] = {
    "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "API_KEY", "APIKEY", "ACCESS_KEY",
    "PRIVATE_KEY", "CREDENTIAL", "SESSION_KEY", "AUTH_KEY", "CLIENT_KEY",
};
static const char *const keep_always[] = {"HOME", "PATH", "TERM", "LANG", "LANGUAGE", "USER",
                                          "LOGNAME", "SHELL", "TZ", "COLORTERM", "NO_COLOR"};

bool confine_env_is_secret(const char *name, size_t n, const char *const *allow)
{
    char up[256];
    if (n >= sizeof up)
        n = sizeof up - 1;
    for (size_t i = 0; i < n; i++)
        up[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32 : name[i]);
    up[n] = 0;
    char exact[256];
    memcpy(exact, name, n);
    exact[n] = 0;
    for (size_t i = 0; i < ARRAY_SIZE(keep_always); i++)
        if (!strcmp(exact, keep_always[i]))
            return false;
    if (!strncmp(exact, "LC_", 3))
        return false;
    for (size_t i = 0; allow && allow[i]; i++)
        if (!fnmatch(allow[i], exact, 0))
            return false;
    for (size_t i = 0; i < ARRAY_SIZE(secret_words); i++)
        if (strstr(up, secret_words[i]))
            return true;
    /* KEY and PAT (personal access token) as whole words: AWS_KEY, GH_PAT,
     * but not KEYBOARD, MONKEY or LIBRARY_PATH. */
    static const char *const words[] = {"KEY", "PAT"};
    for (size_t w = 0; w < ARRAY_SIZE(words); w++) {
        size_t wl = strlen(words[w]);
        for (const char *p = strstr(up, words[w]); p; p = strstr(p + 1, words[w])) {
            bool start = p == up || p[-1] == '_';
            bool end = p[wl] == 0 || p[wl] == '_' || (p[wl] == 'S' && (p[wl + 1] == 0 || p[wl + 1] == '_'));
            if (start && end)
                return true;
        }
    }
    return false;
}

char **confine_env(char *const *env, const char *const *allow, json_t *removed)
{
    size_t n = 0;
    while (env[n])
        n++;
    char **out = xcalloc(n + 1, sizeof *out);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(env[i], '=');
        size_t nl = eq ? (size_t)(eq - env[i]) : strlen(env[i]);
        if (!strncmp(env[i], "TXBOX_FAULT=", 12))
            continue; /* txbox's own test hook */
        if (confine_env_is_secret(env[i], nl, allow)) {
            if (removed)
                json_array_append_new(removed, json_stringn(env[i], nl));
            continue;
        }
        out[k++] = env[i];
    }
    return out;
}
