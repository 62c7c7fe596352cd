/* The second walls, applied to the command right before exec: seccomp,
 * Landlock, resource limits; and the scrubbed environment.
 *
 * The namespaces and read-only mounts (sandbox.c) are the first wall. These
 * are defence in depth: even a kernel path that would let a process out of
 * its mount view still meets a syscall filter and a Landlock domain that
 * allow writes only below the workspace view, /tmp and /dev. */
#include "confine.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#endif

/* The ruleset attributes of ABI 6 (older headers know only the first). */
struct ruleset_attr_v6 {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

/* ---- seccomp ---- */

/* The filter's rules are in seccomp_rules.c; lib/sandbox/gen_seccomp.c builds them
 * with libseccomp at build time into txbox_seccomp_bpf, and this installs
 * that program as seccomp_load() would with seccomp_init's attributes
 * (no TSYNC, no LOG; no_new_privs set first, as SCMP_FLTATR_CTL_NNP does),
 * plus a listener for the calls it sends to a supervisor (connect(): see
 * connguard.h). There is no fallback without the listener: those calls
 * would fail with ENOSYS. */
int confine_seccomp(int *listener, txbox_error *err)
{
    struct sock_fprog prog = {
        .len = (unsigned short)txbox_seccomp_bpf_len,
        .filter = (struct sock_filter *)txbox_seccomp_bpf,
    };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return tx_errno(err, errno, "seccomp: cannot install the filter");
    /* WAIT_KILLABLE_RECV (Linux 5.19): once the supervisor has a call, the
     * caller waits for its answer through any signal but a fatal one, so a
     * connect() the supervisor made is never restarted (EISCONN) after a
     * signal (Go's runtime sends SIGURG often). Without it on older kernels. */
    long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                      SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &prog);
    if (rc < 0 && errno == EINVAL)
        rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (rc < 0)
        return tx_errno(err, errno,
                        "seccomp: cannot install the filter with a supervisor (Linux 5.0 or later needed)");
    *listener = (int)rc;
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
                 LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
                 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                 LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
    if (abi >= 2)
        r |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        r |= LANDLOCK_ACCESS_FS_TRUNCATE;
    return r;
}

/* A domain that only scopes abstract unix sockets (ABI 6): the sandbox's
 * init, which connects on the command's behalf (connguard.h), reaches no
 * abstract socket made outside the sandbox either.
 *
 * Every Landlock domain denies moving a file to another directory (a
 * rename or link: EXDEV) unless it allows LANDLOCK_ACCESS_FS_REFER there,
 * even one that handles no other access: so this one allows it everywhere,
 * and the command's own domain (confine_landlock) says where. Without
 * that rule, git mv, git branch -m and every rename(2) across two
 * directories of the workspace failed in the command. */
int confine_landlock_scope_abstract(int abi, txbox_error *err)
{
    if (!confine_landlock_scopes_abstract(abi))
        return tx_err(err, ENOTSUP, "Landlock: no scope for abstract unix sockets before ABI 6");
    struct ruleset_attr_v6 attr = {.handled_access_fs = LANDLOCK_ACCESS_FS_REFER,
                                   .scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET};
    _cleanup_close_ int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (rs < 0)
        return tx_errno(err, errno, "Landlock: cannot create the scope");
    _cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct landlock_path_beneath_attr pb = {.allowed_access = LANDLOCK_ACCESS_FS_REFER, .parent_fd = root};
    if (root < 0 || syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
        return tx_errno(err, errno, "Landlock: cannot allow moves between directories in the scope");
    if (syscall(SYS_landlock_restrict_self, rs, 0) < 0)
        return tx_errno(err, errno, "Landlock: cannot scope the sandbox's init");
    return 0;
}

int confine_landlock(const char *const *writable, int abi, txbox_error *err)
{
    if (abi < 1)
        return tx_err(err, ENOSYS, "Landlock is not available in this kernel");
    uint64_t rights = write_rights(abi);
    /* ABI 6: the command can connect to no abstract unix socket made
     * outside its domain (the host's, with the host's network) */
    struct ruleset_attr_v6 attr = {.handled_access_fs = rights,
                                   .scoped = abi >= 6 ? LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET : 0};
    size_t attr_size = abi >= 6 ? sizeof attr : sizeof attr.handled_access_fs;
    _cleanup_close_ int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
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

int confine_landlock_readonly(const char *const *readable, int abi, txbox_error *err)
{
    if (abi < 1)
        return tx_err(err, ENOSYS, "Landlock is not available in this kernel");
    uint64_t read = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
    struct ruleset_attr_v6 attr = {.handled_access_fs =
                                       write_rights(abi) | read | LANDLOCK_ACCESS_FS_EXECUTE};
    _cleanup_close_ int rs =
        (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr.handled_access_fs, 0);
    if (rs < 0)
        return tx_errno(err, errno, "Landlock: cannot create a ruleset");
    for (size_t i = 0; readable[i]; i++) {
        _cleanup_close_ int fd = open(readable[i], O_PATH | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        struct landlock_path_beneath_attr pb = {.allowed_access = read, .parent_fd = fd};
        if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
            pb.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE;
        if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
            return tx_errno(err, errno, "Landlock: cannot allow %s", readable[i]);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || syscall(SYS_landlock_restrict_self, rs, 0) < 0)
        return tx_errno(err, errno, "Landlock: cannot restrict the process");
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

/* ---- environment ---- *
 *
 * The allowlist itself is lib/base/envlist.c (a base file: the policy reads it
 * too); this applies it to the command's environment. */

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
        if (!confine_env_passes(env[i], allow)) {
            if (removed)
                json_array_append_new(removed, json_stringn(env[i], nl));
            continue;
        }
        out[k++] = env[i];
    }
    return out;
}
