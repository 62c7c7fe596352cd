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

/* The filter's rules are in seccomp_rules.c; lib/gen_seccomp.c builds them
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
    long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (rc < 0)
        return tx_errno(err, errno, "seccomp: cannot install the filter with a supervisor (Linux 5.0 or later needed)");
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

/* A domain that only scopes abstract unix sockets (ABI 6): the sandbox's
 * init, which connects on the command's behalf (connguard.h), reaches no
 * abstract socket made outside the sandbox either. */
int confine_landlock_scope_abstract(int abi, txbox_error *err)
{
    if (!confine_landlock_scopes_abstract(abi))
        return tx_err(err, ENOTSUP, "Landlock: no scope for abstract unix sockets before ABI 6");
    struct ruleset_attr_v6 attr = {.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET};
    _cleanup_close_ int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (rs < 0)
        return tx_errno(err, errno, "Landlock: cannot create the scope");
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
 * An allowlist: the variables a build needs and that carry no credential
 * pass; every other one is removed (and named in protections.env_removed),
 * unless the caller keeps it with --keep-env. A name on the list whose value
 * embeds a credential (a URL with user info, a connection string with a
 * password) is removed too. */

/* Exact names. Sockets (SSH_AUTH_SOCK, DISPLAY, DBUS_SESSION_BUS_ADDRESS,
 * XDG_RUNTIME_DIR) are absent on purpose: the sandbox masks them. */
static const char *const env_names[] = {
    /* the shell and the terminal */
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR",
    "CLICOLOR", "CLICOLOR_FORCE", "COLUMNS", "LINES", "TZ", "LANG", "LANGUAGE", "PWD", "OLDPWD",
    "SHLVL", "HOSTNAME", "EDITOR", "VISUAL", "PAGER", "LESS", "MANPATH", "INFOPATH", "TMPDIR", "TMP",
    "TEMP", "CI", "DEBIAN_FRONTEND", "SOURCE_DATE_EPOCH",
    /* where a development server listens (the policy's harmless_env too) */
    "PORT", "HOST",
    /* trust anchors (files of certificates, no key) */
    "SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO", "PIP_CERT", "AWS_CA_BUNDLE", "NIX_SSL_CERT_FILE",
    /* proxies (txbox sets them when it gives the command a proxy) */
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
    "no_proxy",
    /* XDG directories (not XDG_RUNTIME_DIR: its sockets are masked) */
    "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_DATA_DIRS",
    "XDG_CONFIG_DIRS",
    /* C and C++ toolchains */
    "CC", "CXX", "CPP", "LD", "AR", "AS", "NM", "RANLIB", "STRIP", "OBJCOPY", "OBJDUMP", "CFLAGS",
    "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "LDLIBS", "ASFLAGS", "MAKEFLAGS", "MAKELEVEL", "MFLAGS",
    "MAKE", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
    "PKG_CONFIG", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "PKG_CONFIG_SYSROOT_DIR", "CCACHE_DIR",
    "SCCACHE_DIR", "CMAKE_PREFIX_PATH", "CMAKE_GENERATOR", "CMAKE_BUILD_TYPE", "NINJA_STATUS",
    /* Go */
    "GOPATH", "GOROOT", "GOBIN", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOOS", "GOARCH", "GO111MODULE",
    "GOPROXY", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GONOSUMCHECK", "GOSUMDB", "GOTOOLCHAIN",
    "GOTMPDIR", "GOWORK", "CGO_ENABLED", "CGO_CFLAGS", "CGO_CXXFLAGS", "CGO_LDFLAGS",
    /* Rust */
    "CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN", "RUSTFLAGS", "RUSTDOCFLAGS", "RUSTC_WRAPPER",
    "CARGO_TARGET_DIR", "CARGO_BUILD_JOBS", "CARGO_INCREMENTAL", "CARGO_TERM_COLOR", "RUST_BACKTRACE",
    "RUST_LOG",
    /* JVM, .NET */
    "JAVA_HOME", "MAVEN_HOME", "M2_HOME", "MAVEN_OPTS", "GRADLE_HOME", "GRADLE_USER_HOME",
    "GRADLE_OPTS", "ANDROID_HOME", "ANDROID_SDK_ROOT", "KOTLIN_HOME", "SCALA_HOME", "SBT_OPTS",
    "DOTNET_ROOT", "DOTNET_CLI_TELEMETRY_OPTOUT", "DOTNET_NOLOGO", "NUGET_PACKAGES",
    /* Python */
    "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "CONDA_EXE", "PYTHONPATH", "PYTHONHOME",
    "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONHASHSEED",
    "PYTHONUTF8", "PYTHONWARNINGS", "PYENV_ROOT", "PYENV_VERSION", "POETRY_HOME",
    "POETRY_VIRTUALENVS_IN_PROJECT", "PIPENV_VENV_IN_PROJECT", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL",
    "PIP_NO_CACHE_DIR", "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_DEFAULT_TIMEOUT", "PIP_CACHE_DIR", "UV_CACHE_DIR",
    "UV_PYTHON", "UV_INDEX_URL", "TOX_WORK_DIR",
    /* JavaScript */
    "NODE_ENV", "NODE_PATH", "NODE_OPTIONS", "NVM_DIR", "NVM_BIN", "YARN_CACHE_FOLDER",
    "PNPM_HOME", "BUN_INSTALL", "DENO_DIR", "COREPACK_HOME",
    /* Ruby, Perl, PHP */
    "GEM_HOME", "GEM_PATH", "BUNDLE_PATH", "BUNDLE_GEMFILE", "RBENV_ROOT", "RBENV_VERSION",
    "RUBYLIB", "PERL5LIB", "PERL_LOCAL_LIB_ROOT", "PERL_MB_OPT", "PERL_MM_OPT", "COMPOSER_HOME",
};

/* Name prefixes: the locale, and npm's settings other than its
 * credentials, which the words below keep out. */
static const char *const env_prefixes[] = {"LC_", "npm_config_", "NPM_CONFIG_"};

/* Words that make a name a credential even under an allowed prefix
 * (npm_config__authToken, npm_config_//registry/:_password). */
static const char *const secret_words[] = {
    "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD", "AUTH", "KEY", "CRED", "SESSION",
    "COOKIE", "SIGN", "PRIVATE", "CERT",
};

static bool upper_has(const char *s, size_t n, const char *word)
{
    size_t wl = strlen(word);
    for (size_t i = 0; i + wl <= n; i++) {
        size_t k = 0;
        while (k < wl && (s[i + k] >= 'a' && s[i + k] <= 'z' ? s[i + k] - 32 : s[i + k]) == word[k])
            k++;
        if (k == wl)
            return true;
    }
    return false;
}

/* Does a value embed a credential? A URL with user info
 * (scheme://user:pass@host, scheme://token@host), or a connection string
 * naming a password, key or signature (Password=..., AccountKey=...,
 * SharedAccessSignature=...). */
bool confine_env_value_secret(const char *v)
{
    for (const char *p = strstr(v, "://"); p; p = strstr(p + 1, "://")) {
        const char *h = p + 3;
        size_t n = strcspn(h, "/?#@ \t\n");
        if (h[n] == '@' && n > 0)
            return true;
    }
    static const char *const keys[] = {"PASSWORD=", "PASSWD=", "PWD=", "ACCOUNTKEY=",
                                       "SHAREDACCESSSIGNATURE=", "SHAREDACCESSKEY=", "SECRET=",
                                       "TOKEN=", "APIKEY=", "API_KEY="};
    size_t n = strlen(v);
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
        if (upper_has(v, n, keys[i]))
            return true;
    return false;
}

bool confine_env_passes(const char *entry, const char *const *allow)
{
    const char *eq = strchr(entry, '=');
    size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
    char name[256];
    if (n == 0 || n >= sizeof name)
        return false;
    memcpy(name, entry, n);
    name[n] = 0;
    for (size_t i = 0; allow && allow[i]; i++)
        if (!fnmatch(allow[i], name, 0))
            return true; /* the caller's choice */
    if (!eq || confine_env_value_secret(eq + 1))
        return false;
    for (size_t i = 0; i < ARRAY_SIZE(env_names); i++)
        if (!strcmp(name, env_names[i]))
            return true;
    for (size_t i = 0; i < ARRAY_SIZE(env_prefixes); i++) {
        size_t pl = strlen(env_prefixes[i]);
        if (n > pl && !strncmp(name, env_prefixes[i], pl)) {
            for (size_t w = 0; w < ARRAY_SIZE(secret_words); w++)
                if (upper_has(name + pl, n - pl, secret_words[w]))
                    return false;
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
        if (!confine_env_passes(env[i], allow)) {
            if (removed)
                json_array_append_new(removed, json_stringn(env[i], nl));
            continue;
        }
        out[k++] = env[i];
    }
    return out;
}
