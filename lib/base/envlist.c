/* The environment's allowlist: which variables pass into the command
 * (confine.c applies it) and which variable reads are harmless (the
 * policy's shell walk asks). Base layer: data and string tests only. */
#include "envlist.h"

#include <fnmatch.h>

/* An allowlist: the variables a build needs and that carry no credential
 * pass; every other one is removed (and named in protections.env_removed),
 * unless the caller keeps it with --keep-env. A name on the list whose value
 * embeds a credential (a URL with user info, a connection string with a
 * password) is removed too. */

/* Exact names. Sockets (SSH_AUTH_SOCK, DISPLAY, DBUS_SESSION_BUS_ADDRESS,
 * XDG_RUNTIME_DIR) are absent on purpose: the sandbox masks them. */
static const char *const env_names[] = {
    /* the shell and the terminal */
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "COLUMNS",
    "LINES",
    "TZ",
    "LANG",
    "LANGUAGE",
    "PWD",
    "OLDPWD",
    "SHLVL",
    "HOSTNAME",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "LESS",
    "MANPATH",
    "INFOPATH",
    "TMPDIR",
    "TMP",
    "TEMP",
    "CI",
    "DEBIAN_FRONTEND",
    "SOURCE_DATE_EPOCH",
    /* where a development server listens (the policy's harmless_env too) */
    "PORT",
    "HOST",
    /* trust anchors (files of certificates, no key) */
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
    "AWS_CA_BUNDLE",
    "NIX_SSL_CERT_FILE",
    /* proxies (txbox sets them when it gives the command a proxy) */
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    /* XDG directories (not XDG_RUNTIME_DIR: its sockets are masked) */
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_DATA_DIRS",
    "XDG_CONFIG_DIRS",
    /* C and C++ toolchains */
    "CC",
    "CXX",
    "CPP",
    "LD",
    "AR",
    "AS",
    "NM",
    "RANLIB",
    "STRIP",
    "OBJCOPY",
    "OBJDUMP",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "LDLIBS",
    "ASFLAGS",
    "MAKEFLAGS",
    "MAKELEVEL",
    "MFLAGS",
    "MAKE",
    "LD_LIBRARY_PATH",
    "LIBRARY_PATH",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "PKG_CONFIG",
    "PKG_CONFIG_PATH",
    "PKG_CONFIG_LIBDIR",
    "PKG_CONFIG_SYSROOT_DIR",
    "CCACHE_DIR",
    "SCCACHE_DIR",
    "CMAKE_PREFIX_PATH",
    "CMAKE_GENERATOR",
    "CMAKE_BUILD_TYPE",
    "NINJA_STATUS",
    /* Go */
    "GOPATH",
    "GOROOT",
    "GOBIN",
    "GOCACHE",
    "GOMODCACHE",
    "GOFLAGS",
    "GOOS",
    "GOARCH",
    "GO111MODULE",
    "GOPROXY",
    "GOPRIVATE",
    "GONOPROXY",
    "GONOSUMDB",
    "GONOSUMCHECK",
    "GOSUMDB",
    "GOTOOLCHAIN",
    "GOTMPDIR",
    "GOWORK",
    "CGO_ENABLED",
    "CGO_CFLAGS",
    "CGO_CXXFLAGS",
    "CGO_LDFLAGS",
    /* Rust */
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "RUSTC_WRAPPER",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_JOBS",
    "CARGO_INCREMENTAL",
    "CARGO_TERM_COLOR",
    "RUST_BACKTRACE",
    "RUST_LOG",
    /* JVM, .NET */
    "JAVA_HOME",
    "MAVEN_HOME",
    "M2_HOME",
    "MAVEN_OPTS",
    "GRADLE_HOME",
    "GRADLE_USER_HOME",
    "GRADLE_OPTS",
    "ANDROID_HOME",
    "ANDROID_SDK_ROOT",
    "KOTLIN_HOME",
    "SCALA_HOME",
    "SBT_OPTS",
    "DOTNET_ROOT",
    "DOTNET_CLI_TELEMETRY_OPTOUT",
    "DOTNET_NOLOGO",
    "NUGET_PACKAGES",
    /* Python */
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "CONDA_EXE",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONUNBUFFERED",
    "PYTHONIOENCODING",
    "PYTHONHASHSEED",
    "PYTHONUTF8",
    "PYTHONWARNINGS",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "POETRY_HOME",
    "POETRY_VIRTUALENVS_IN_PROJECT",
    "PIPENV_VENV_IN_PROJECT",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_NO_CACHE_DIR",
    "PIP_DISABLE_PIP_VERSION_CHECK",
    "PIP_DEFAULT_TIMEOUT",
    "PIP_CACHE_DIR",
    "UV_CACHE_DIR",
    "UV_PYTHON",
    "UV_INDEX_URL",
    "TOX_WORK_DIR",
    /* JavaScript */
    "NODE_ENV",
    "NODE_PATH",
    "NODE_OPTIONS",
    "NVM_DIR",
    "NVM_BIN",
    "YARN_CACHE_FOLDER",
    "PNPM_HOME",
    "BUN_INSTALL",
    "DENO_DIR",
    "COREPACK_HOME",
    /* Ruby, Perl, PHP */
    "GEM_HOME",
    "GEM_PATH",
    "BUNDLE_PATH",
    "BUNDLE_GEMFILE",
    "RBENV_ROOT",
    "RBENV_VERSION",
    "RUBYLIB",
    "PERL5LIB",
    "PERL_LOCAL_LIB_ROOT",
    "PERL_MB_OPT",
    "PERL_MM_OPT",
    "COMPOSER_HOME",
};

/* Name prefixes: the locale, and npm's settings other than its
 * credentials, which the words below keep out. */
static const char *const env_prefixes[] = {"LC_", "npm_config_", "NPM_CONFIG_"};

/* Words that make a name a credential even under an allowed prefix
 * (npm_config__authToken, npm_config_//registry/:_password). */
static const char *const secret_words[] = {
    "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD",     "AUTH",
    "KEY",   "CRED",   "SESSION",  "COOKIE", "SIGN", "PRIVATE", "CERT",
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
    static const char *const keys[] = {
        "PASSWORD=",        "PASSWD=", "PWD=",   "ACCOUNTKEY=", "SHAREDACCESSSIGNATURE=",
        "SHAREDACCESSKEY=", "SECRET=", "TOKEN=", "APIKEY=",     "API_KEY="};
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
