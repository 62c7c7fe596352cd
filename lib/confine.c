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

/* ---- seccomp ---- */

/* The filter's rules are in seccomp_rules.c; lib/gen_seccomp.c builds them
 * with libseccomp at build time into txbox_seccomp_bpf, and this installs
 * that program as seccomp_load() would with seccomp_init's attributes
 * (no flags: no TSYNC, no LOG; no_new_privs set first, as
 * SCMP_FLTATR_CTL_NNP does). */
int confine_seccomp(txbox_error *err)
{
    struct sock_fprog prog = {
        .len = (unsigned short)txbox_seccomp_bpf_len,
        .filter = (struct sock_filter *)txbox_seccomp_bpf,
    };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return tx_errno(err, errno, "seccomp: cannot install the filter");
    long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
    if (rc < 0 && errno == ENOSYS)
        rc = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
    if (rc < 0)
        return tx_errno(err, errno, "seccomp: cannot install the filter");
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
