/* One command, one transaction: the path of txbox_run(). */
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <glob.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "txbox_policy.h"
#include "cgroup.h"
#include "commit.h"
#include "confine.h"
#include "effects.h"
#include "fsops.h"
#include "gitcfg.h"
#include "homes.h"
#include "losses.h"
#include "multi.h"
#include "result.h"
#include "run.h"
#include "safepath.h"
#include "saga.h"
#include "sandbox.h"
#include "sesslink.h"
#include "state.h"
#include "tmpsync.h"
#include "store.h"
#include "tx.h"
#include "uppercopy.h"

extern char **environ;

#define MAX_COMMAND_BYTES (1u << 20) /* 1 MiB: see README, limits */
#define DEFAULT_OUTPUT_CAP (1u << 20)
#define CHANGES_CAP TX_CHANGES_CAP
#define MIN_WRITE_BUDGET (1u << 20)

/* The floor as commit.c takes it (<0: the default) from the option (0: the
 * default; <0: none). */
static int64_t run_min_free(const txbox_run_opts *o)
{
    return o->min_free_bytes > 0 ? o->min_free_bytes : o->min_free_bytes < 0 ? 0 : -1;
}

static void pump(void *ctx, int stream, const char *data, size_t n)
{
    txbox_result *r = ctx;
    dbuf_add(stream == 1 ? &r->out : &r->err, data, n);
    if (r->tee && write_all(stream == 1 ? 1 : 2, data, n) < 0)
        r->tee = false; /* the caller closed its end: keep capturing */
    if (r->tee_fd > 0 && n) {
        /* best effort (a non-blocking descriptor): what does not fit now
         * is dropped, the command never waits for the reader */
        ssize_t w;
        while ((w = write(r->tee_fd, data, n)) < 0 && errno == EINTR)
            ;
        if (w < 0 && errno != EAGAIN)
            r->tee_fd = -1;
    }
}

/* ---- the shell ---- */

static bool executable_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

static const char *base_name(const char *p)
{
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

int txbox_shell_resolve(const char *spec, char **path, int *posix, txbox_error *err)
{
    static const char *const bashes[] = {"/bin/bash", "/usr/bin/bash"};
    *path = NULL;
    *posix = 1;
    if (!spec || !strcmp(spec, "bash")) {
        for (size_t i = 0; i < ARRAY_SIZE(bashes); i++)
            if (executable_file(bashes[i])) {
                *path = xstrdup(bashes[i]);
                *posix = 0;
                return 0;
            }
        if (spec)
            return tx_err(err, ENOENT, "the shell bash: no bash at /bin/bash or /usr/bin/bash (sh would do)");
        spec = "sh";
    }
    if (!strcmp(spec, "sh"))
        spec = "/bin/sh";
    if (spec[0] != '/')
        return tx_err(err, EINVAL, "the shell is bash, sh or an absolute path, not '%.200s'", spec);
    _cleanup_free_ char *real = realpath(spec, NULL);
    if (!real || !executable_file(real))
        return tx_errno(err, real ? EACCES : errno, "the shell %.200s: not an executable file", spec);
    /* what the program is decides how it reads (dash, busybox: as sh) */
    static const char *const known[] = {"bash", "dash", "sh", "ash", "busybox"};
    const char *rb = base_name(real);
    bool ok = false;
    for (size_t i = 0; i < ARRAY_SIZE(known) && !ok; i++)
        ok = !strcmp(rb, known[i]);
    if (!ok || (!strcmp(rb, "busybox") && strcmp(base_name(spec), "sh")))
        return tx_err(err, EINVAL,
                      "the shell %.200s: txbox reads commands as bash (and as POSIX sh where sh agrees): "
                      "use bash, sh or dash, not %.64s",
                      spec, rb);
    *path = xstrdup(spec);
    /* bash under the name sh runs in POSIX mode: judged as sh */
    *posix = !(strcmp(rb, "bash") == 0 && strcmp(base_name(spec), "bash") == 0);
    return 0;
}

/* Whether POSIX sh (dash) may read the command otherwise than bash, whose
 * reading the policy judged: other quote boundaries ($'..'), arithmetic
 * read as subshells ((..)), brace expansion, bash-only operators, aliases
 * (sh expands them in scripts, bash -c does not), echo's escapes. A
 * textual over-approximation: a false alarm only costs a transaction. */
bool sh_reads_differently(const char *s)
{
    static const char *const marks[] = {"$'", "[[", "<(", ">(", "&>", "|&", "<<<",      ";&",
                                        "=(", "?(", "*(", "+(", "@(", "!(", "function", "alias"};
    for (size_t i = 0; i < ARRAY_SIZE(marks); i++)
        if (strstr(s, marks[i]))
            return true;
    for (const char *p = strstr(s, "(("); p; p = strstr(p + 1, "(("))
        if (p == s || p[-1] != '$')
            return true;
    if (strstr(s, "echo") && strchr(s, '\\'))
        return true;
    for (const char *p = strchr(s, '{'); p; p = strchr(p + 1, '{')) {
        if (p > s && p[-1] == '$')
            continue;
        for (const char *q = p + 1; *q && *q != '}' && !strchr(" \t\n;&|", *q); q++)
            if (*q == ',' || (q[0] == '.' && q[1] == '.'))
                return true;
    }
    return false;
}

/* Variables that make bash or sh run or read something before or around
 * the command (a startup file, imported functions, options, a changed
 * word splitting): the policy judged the string alone. */
static void shell_env(char **envp, json_t *removed)
{
    static const char *const names[] = {"BASH_ENV",    "ENV",        "SHELLOPTS",     "BASHOPTS",
                                        "IFS",         "PS4",        "BASH_XTRACEFD", "POSIXLY_CORRECT",
                                        "BASH_COMPAT", "GLOBIGNORE", "CDPATH"};
    size_t k = 0;
    for (size_t i = 0; envp[i]; i++) {
        const char *eq = strchrnul(envp[i], '=');
        size_t nl = (size_t)(eq - envp[i]);
        bool drop = !strncmp(envp[i], "BASH_FUNC_", 10);
        for (size_t j = 0; j < ARRAY_SIZE(names) && !drop; j++)
            drop = strlen(names[j]) == nl && !strncmp(envp[i], names[j], nl);
        if (drop) {
            json_array_append_new(removed, json_stringn(envp[i], nl));
            continue;
        }
        envp[k++] = envp[i];
    }
    envp[k] = NULL;
}

/* Takes p: it, or each path its glob pattern matches. */
static void push_glob(strvec *sv, char *p)
{
    if (!p || !strpbrk(p, "*?[")) {
        strvec_add(sv, p);
        return;
    }
    glob_t g;
    if (glob(p, GLOB_NOSORT, NULL, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; i++)
            strvec_add(sv, xstrdup(g.gl_pathv[i]));
    globfree(&g);
    free(p);
}

static char *expand_home(const char *p, const char *home)
{
    if (p[0] == '~' && (p[1] == '/' || !p[1]))
        return home ? xasprintf("%s%s", home, p + 1) : NULL;
    return p[0] == '/' ? xstrdup(p) : NULL;
}

/* The secrets under a home: each ~/ entry of the policy's `hide:` list
 * (policy/default.yaml's, which the policy reads as secrets too; without a
 * policy, the built-in one's). */
static void push_home_secrets(strvec *sv, const char *home, const txbox_policy *pol)
{
    const char *e;
    for (size_t i = 0; (e = txbox_policy_hidden(pol, i)); i++)
        if (e[0] == '~' && e[1] == '/')
            push_glob(sv, xasprintf("%s%s", home, e + 1));
}

/* A home directory that is not the caller's (h, resolved): hidden whole,
 * unless it holds the workspace (then its secrets are). The caller's homes
 * (mine[]) keep their ordinary files. */
static void other_home(strvec *sv, const char *h, char *const *mine, const char *ws_path,
                       const txbox_policy *pol)
{
    for (size_t i = 0; mine[i]; i++)
        if (path_under(mine[i], h))
            return; /* the caller's own, or one of theirs lies in it */
    if (path_under(ws_path, h))
        push_home_secrets(sv, h, pol);
    else
        strvec_add(sv, xstrdup(h));
}

/* Everything hidden from the command: the policy's `hide:` list (~/
 * entries under the caller's homes and a home that holds the workspace;
 * the others as they are), every other home, and --hide. */
char **tx_hidden_paths(const char *const *extra, const txbox_policy *pol, const txbox_ws *ws)
{
    const char *ws_path = ws->path;
    const char *home = getenv("HOME");
    if (home && *home != '/')
        home = NULL;
    struct passwd *pw = getpwuid(getuid());
    char *mine[3] = {0};
    size_t nm = 0;
    if (home && (mine[nm] = realpath(home, NULL)))
        nm++;
    if (pw && pw->pw_dir && (mine[nm] = realpath(pw->pw_dir, NULL)))
        nm++;
    strvec sv = {.v = xcalloc(64, sizeof(char *)), .cap = 64};
    if (home)
        push_home_secrets(&sv, home, pol);
    for (size_t i = 0; i < nm; i++)
        push_home_secrets(&sv, mine[i], pol);
    strvec homes = {0};
    homes_all(&homes, ws->stateless ? -1 : ws->sfd);
    for (size_t i = 0; i < homes.n; i++)
        other_home(&sv, homes.v[i], mine, ws_path, pol);
    strvec_free(&homes);
    const char *p;
    for (size_t i = 0; (p = txbox_policy_hidden(pol, i)); i++)
        if (p[0] == '/')
            push_glob(&sv, xstrdup(p));
    for (size_t i = 0; extra && extra[i]; i++)
        push_glob(&sv, expand_home(extra[i], home));
    for (size_t i = 0; i < nm; i++)
        free(mine[i]);
    return sv.v;
}

void tx_free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* Where the command starts: the caller's cwd when it lies inside the
 * workspace, else the workspace root. */
static char *start_dir(const txbox_ws *ws, const char *cwd)
{
    _cleanup_free_ char *here = cwd ? realpath(cwd, NULL) : getcwd(NULL, 0);
    if (here) {
        size_t l = strlen(ws->path);
        if (!strncmp(here, ws->path, l) && (here[l] == 0 || here[l] == '/')) {
            const char *rest = here + l;
            /* Never start inside the hidden state directory. */
            if (strncmp(rest, "/" TXBOX_STATE_DIR, strlen(TXBOX_STATE_DIR) + 1) ||
                (rest[strlen(TXBOX_STATE_DIR) + 1] != 0 && rest[strlen(TXBOX_STATE_DIR) + 1] != '/'))
                return steal_pointer(&here);
        }
    }
    return xstrdup(ws->path);
}

/* A scratch directory of the transaction; like: a directory whose mode,
 * owner and times it takes (the upper's root is the merged root's). */
static int make_dir_fd(int at, const char *name, int like, txbox_error *err)
{
    if (mkdirat(at, name, 0700) < 0 && errno != EEXIST)
        return tx_errno(err, errno, "cannot create %s", name);
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return tx_errno(err, errno, "cannot open %s", name);
    struct stat st;
    if (like >= 0 && fstat(like, &st) == 0) {
        struct timespec ts[2] = {st.st_atim, st.st_mtim};
        if (fchown(fd, st.st_uid, st.st_gid) < 0 && errno != EPERM) {
            int e = errno;
            close(fd);
            return tx_errno(err, e, "cannot set the owner of %s", name);
        }
        if (fchmod(fd, st.st_mode & 07777) < 0 || futimens(fd, ts) < 0) {
            int e = errno;
            close(fd);
            return tx_errno(err, e, "cannot prepare %s", name);
        }
    }
    return fd;
}

/* The trash's cleaner: a thread that empties .txbox/trash/ while the
 * command runs (the parent only waits then), stopped as soon as the
 * command is gone. Its signals are blocked: they stay the main thread's. */
struct cleaner {
    txbox_ws *ws;
    atomic_bool stop;
    bool running;
    pthread_t th;
};

static void *cleaner_main(void *arg)
{
    struct cleaner *c = arg;
    ws_trash_clean(c->ws, &c->stop, 0);
    return NULL;
}

static void cleaner_start(void *arg)
{
    struct cleaner *c = arg;
    c->running = ws_trash_has_entries(c->ws) && thread_start(&c->th, cleaner_main, c) == 0;
}

static void cleaner_stop(struct cleaner *c)
{
    if (!c->running)
        return;
    atomic_store(&c->stop, true);
    pthread_join(c->th, NULL);
    c->running = false;
}

/* A transaction's scratch directory goes to the trash, or is removed here
 * when it cannot. Did it go to the trash? */
static bool discard_dir(txbox_ws *ws, int txfd, const char *name, const char *txs, unsigned grant)
{
    int t = ws_trash(ws, txfd, name, txs, grant);
    if (t < 0)
        (void)tree_remove(txfd, name);
    return t > 0;
}

static int validate(const txbox_run_opts *o, txbox_error *err)
{
    if (!!o->shell == !!o->argv)
        return tx_err(err, EINVAL, "give exactly one of a shell string (-c) or a program (--)");
    if (o->shell) {
        size_t n = strnlen(o->shell, MAX_COMMAND_BYTES + 1);
        if (n == 0 || !o->shell[strspn(o->shell, " \t\n")])
            return tx_err(err, EINVAL, "empty command");
        if (n > MAX_COMMAND_BYTES)
            return tx_err(err, E2BIG, "command longer than %u bytes", MAX_COMMAND_BYTES);
    } else {
        if (!o->argv[0] || !*o->argv[0])
            return tx_err(err, EINVAL, "empty command");
        size_t total = 0;
        for (size_t i = 0; o->argv[i]; i++)
            total += strlen(o->argv[i]) + 1;
        if (total > MAX_COMMAND_BYTES)
            return tx_err(err, E2BIG, "command longer than %u bytes", MAX_COMMAND_BYTES);
    }
    if (o->multi && multi_aborting(o->multi)) {
        tx_err(err, EINVAL, "the transaction is being aborted");
        return tx_remedy(err, TXBOX_REMEDY_ABORT, txbox_multi_id(o->multi));
    }
    if (o->multi && (o->backend == TXBOX_BACKEND_COPY || o->allow_copy_fallback))
        return tx_err(err, EINVAL, "a multi-command transaction runs on the overlay backend only");
    if (o->timeout_s < 0 || o->timeout_s > 7 * 86400.0)
        return tx_err(err, EINVAL, "timeout must be between 0 and 604800 seconds");
    if (o->net < TXBOX_NET_NONE || o->net > TXBOX_NET_HOST)
        return tx_err(err, EINVAL, "unknown network mode %d", o->net);
    size_t nd = 0;
    for (; o->allow_domains && o->allow_domains[nd]; nd++)
        if (!np_pattern_valid(o->allow_domains[nd]))
            return tx_err(err, EINVAL,
                          "'%s' is not a domain to allow: give a host name in lower case "
                          "(registry.example.org), *. and a name of two labels or more "
                          "(*.example.org), or an IP address",
                          o->allow_domains[nd]);
    size_t ndef = 0;
    while (np_default_domains[ndef])
        ndef++;
    if (nd + ndef > NP_MAX_DOMAINS)
        return tx_err(err, E2BIG, "more than %zu domains to allow", NP_MAX_DOMAINS - ndef);
    return 0;
}

/* The proxy's allowlist: the default registries when `defaults`, the
 * deciding rules' domains (rule_domains: space-separated, edited in place
 * into strings), then the caller's (validate checked them). Pointers into
 * all three; caller frees the array. */
static const char **proxy_allowlist(const txbox_run_opts *o, bool defaults, char *rule_domains, size_t *n)
{
    size_t nd = 0, ndef = 0, nr = 0, k = 0;
    while (o->allow_domains && o->allow_domains[nd])
        nd++;
    while (defaults && np_default_domains[ndef])
        ndef++;
    for (const char *c = rule_domains; *c; c++)
        nr += *c == ' ';
    const char **v = xcalloc(ndef + nr + 1 + nd + 1, sizeof *v);
    for (size_t i = 0; i < ndef; i++)
        v[k++] = np_default_domains[i];
    for (char *save = NULL, *t = strtok_r(rule_domains, " ", &save); t; t = strtok_r(NULL, " ", &save))
        v[k++] = t;
    for (size_t i = 0; i < nd; i++)
        v[k++] = o->allow_domains[i];
    *n = k;
    return v;
}

/* The command's environment with the proxy's variables, which replace the
 * caller's (a host proxy is not reachable from the sandbox): a new array of
 * the same strings (caller frees the array). NO_PROXY keeps the sandbox's
 * own loopback direct. */
static char **proxy_env(char **envp, char (*slots)[SB_PROXY_ENV_LEN])
{
    static char *const vars[] = {
        (char *)"HTTP_PROXY=http://127.0.0.1:" NP_PORT_STR,
        (char *)"HTTPS_PROXY=http://127.0.0.1:" NP_PORT_STR,
        (char *)"http_proxy=http://127.0.0.1:" NP_PORT_STR,
        (char *)"https_proxy=http://127.0.0.1:" NP_PORT_STR,
        (char *)"ALL_PROXY=http://127.0.0.1:" NP_PORT_STR,
        (char *)"all_proxy=http://127.0.0.1:" NP_PORT_STR,
        (char *)"NO_PROXY=localhost,127.0.0.1,::1",
        (char *)"no_proxy=localhost,127.0.0.1,::1",
    };
    size_t n = 0;
    while (envp[n])
        n++;
    char **out = xcalloc(n + ARRAY_SIZE(vars) + 1, sizeof *out);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool ours = false;
        for (size_t j = 0; j < ARRAY_SIZE(vars) && !ours; j++) {
            size_t nl = (size_t)(strchr(vars[j], '=') - vars[j]) + 1;
            ours = !strncmp(envp[i], vars[j], nl);
        }
        if (!ours)
            out[k++] = envp[i];
    }
    for (size_t j = 0; j < ARRAY_SIZE(vars); j++) {
        /* in a session, the proxy's port is the one init gets (it writes
         * these in place: sb_spec.proxy_env) */
        if (slots && j < SB_PROXY_ENV_N) {
            snprintf(slots[j], SB_PROXY_ENV_LEN, "%s", vars[j]);
            out[k++] = slots[j];
        } else {
            out[k++] = vars[j];
        }
    }
    return out;
}

/* Resolve a bare program name along PATH, as execvp would (the sandbox
 * uses execve). */
static char *resolve_program(const char *prog)
{
    if (strchr(prog, '/'))
        return xstrdup(prog);
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *e = strchrnul(p, ':');
        _cleanup_free_ char *cand = xasprintf("%.*s/%s", (int)(e - p), p, prog);
        if (access(cand, X_OK) == 0)
            return steal_pointer(&cand);
        if (!*e)
            break;
        p = e + 1;
    }
    return xstrdup(prog);
}

/* An unsafe command: never run, but recorded, with an id. */
static int blocked(txbox_ws *ws, const txbox_run_opts *opts, txbox_result *r, uint64_t t0, txbox_result **out,
                   txbox_error *err)
{
    int txfd = -1, activefd = -1;
    if (ws->stateless) { /* blocked all the same, recorded nowhere */
        r->outcome = TXBOX_OUTCOME_BLOCKED;
        r->backend = "none";
        r->changes = json_pack("{s:[],s:[],s:[],s:b}", "added", "modified", "deleted", "truncated", 0);
        r->log_error = xstrdup("not recorded: the workspace's state directory cannot be written there");
        *out = r;
        return 0;
    }
    if (ws_new_tx(ws, &r->id, &txfd, &activefd, NULL, err) < 0) {
        result_free(r);
        return -1;
    }
    snprintf(r->txs, sizeof r->txs, "%llu", (unsigned long long)r->id);
    r->outcome = TXBOX_OUTCOME_BLOCKED;
    r->backend = "none";
    r->changes = json_pack("{s:[],s:[],s:[],s:b}", "added", "modified", "deleted", "truncated", 0);
    r->duration_ms = r->overhead_ms = (double)(now_ns() - t0) / 1e6;
    txbox_error le = {0};
    /* logged with the same context as a command that ran: cwd, command text */
    _cleanup_free_ char *cwd = start_dir(ws, opts->cwd);
    _cleanup_free_ char *hctx = store_context(ws, opts, cwd, r->started);
    _cleanup_free_ char *info = store_info(r, hctx);
    if (store_log(ws, r->id, "blocked", info, NULL, txfd, &le) < 0)
        r->log_error = xstrdup(le.msg);
    tx_write_outcome(txfd, "blocked");
    close(txfd);
    ws_end_tx(ws, r->id, activefd);
    ws_compact_maybe(ws, r->id);
    *out = r;
    return 0;
}

/* The caller's temporary directory (TMPDIR, TMP, TEMP) is on the host,
 * read-only in the sandbox, or under the host's /tmp, which the sandbox
 * replaces with a private one: point it at the private /tmp unless it lies
 * in the workspace, where the command may write. */
static void private_tmpdir(char **envp, const char *ws_path)
{
    static char tmpdir[] = "TMPDIR=/tmp", tmp[] = "TMP=/tmp", temp[] = "TEMP=/tmp";
    static char *const fixed[] = {tmpdir, tmp, temp};
    for (size_t i = 0; envp[i]; i++)
        for (size_t k = 0; k < ARRAY_SIZE(fixed); k++) {
            size_t nl = (size_t)(strchr(fixed[k], '=') - fixed[k]) + 1;
            if (strncmp(envp[i], fixed[k], nl) != 0)
                continue;
            const char *v = envp[i] + nl;
            size_t wl = strlen(ws_path);
            bool in_ws = strncmp(v, ws_path, wl) == 0 && (v[wl] == 0 || v[wl] == '/');
            if (!in_ws)
                envp[i] = fixed[k];
        }
}

/* A transaction that got an id and ends without its row in the audit log
 * (txbox failed: a commit refused before its commit point, ENOSPC on its
 * journal, a sandbox that could not be set up) gets one saying so, with
 * the error: every id ends with a row. Best effort: the log itself may be
 * what failed. */
static void log_failed(txbox_ws *ws, const txbox_result *r, int txfd, const char *hctx,
                       const txbox_error *err)
{
    if (!r->id || r->logged)
        return;
    _cleanup_free_ char *info = store_info(r, hctx);
    json_t *o = info ? json_loads(info, 0, NULL) : NULL;
    if (!o)
        o = json_object();
    json_object_set_new(o, "outcome", json_string("failed"));
    json_object_set_new(o, "error", json_string(err && err->msg[0] ? err->msg : "txbox error"));
    _cleanup_free_ char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    txbox_error le = {0};
    if (s)
        (void)!store_log(ws, r->id, "failed", s, NULL, txfd, &le);
}

/* The shell that runs opts->shell (*shell_path, malloc'd; NULL for an
 * argv) and whether it reads POSIX sh (*posix): the caller's, which must be
 * an absolute path outside the workspace, else txbox_shell_resolve's. */
static int run_shell(txbox_ws *ws, const txbox_run_opts *opts, char **shell_path, int *posix,
                     txbox_error *err)
{
    *posix = opts->shell_posix;
    if (opts->shell && !opts->shell_path && txbox_shell_resolve(NULL, shell_path, posix, err) < 0)
        return -1;
    if (opts->shell && opts->shell_path) {
        *shell_path = xstrdup(opts->shell_path);
        _cleanup_free_ char *real = realpath(*shell_path, NULL);
        size_t wl = strlen(ws->path);
        if (!real || (*shell_path)[0] != '/')
            return tx_err(err, EINVAL, "shell '%.200s': not an absolute path to a program", *shell_path);
        if (!strncmp(real, ws->path, wl) && (real[wl] == 0 || real[wl] == '/'))
            return tx_err(err, EINVAL, "shell '%.200s' lies in the workspace: the command could change it",
                          *shell_path);
    }
    return 0;
}

/* Appends to rule_domains (n bytes, names separated by spaces) the domains
 * of the rules that declared the command's external effects (saga_plan). */
static void add_effect_domains(json_t *saga, char *rule_domains, size_t n)
{
    json_t *effs = json_object_get(saga, "effects"), *ef;
    size_t ei;
    json_array_foreach(effs, ei, ef)
    {
        json_t *dl = json_object_get(ef, "domains"), *d;
        size_t di;
        json_array_foreach(dl, di, d)
        {
            size_t have = strlen(rule_domains), dlen = strlen(json_string_value(d));
            if (have + dlen + 2 <= n)
                snprintf(rule_domains + have, n - have, "%s%s", have ? " " : "", json_string_value(d));
        }
    }
}

/* What the sandbox reported, into r: the limits it hit, the command's
 * time, its exit code or signal (and a hint for EOVERFLOW as an
 * unprivileged user). Returns whether the command succeeded: exited 0, in
 * time, not cancelled, and no limit stopped a process of it. */
static bool take_status(txbox_result *r, const struct sb_status *st, bool root)
{
    r->write_limit = st->write_limit;
    r->oom = st->oom;
    r->pids_limit = st->pids_limit;
    r->cmd_ms = (double)st->cmd_ns / 1e6;
    r->timed_out = st->timed_out;
    if (st->exited) {
        if (WIFEXITED(st->wstatus)) {
            r->exit_code = WEXITSTATUS(st->wstatus);
        } else if (WIFSIGNALED(st->wstatus)) {
            r->signal = WTERMSIG(st->wstatus);
            r->exit_code = 128 + r->signal;
        }
    } else {
        r->signal = SIGKILL;
        r->exit_code = 128 + SIGKILL;
    }
    bool ok = st->exited && WIFEXITED(st->wstatus) && WEXITSTATUS(st->wstatus) == 0 && !st->timed_out &&
              !st->cancelled;
    if (ok && (st->write_limit || st->oom)) {
        /* Stopped by a limit, yet the command says success: a process it
         * started was stopped (killed by the kernel's OOM killer, the write
         * budget) while the rest went on. Never committed; the status says
         * it failed. */
        ok = false;
        r->exit_code = 128 + (st->oom ? SIGKILL : SIGXFSZ);
    }
    if (ok && st->pids_limit) {
        /* A fork was refused at the process limit and the command went on
         * to succeed: what it did is not what it would have done. Never
         * committed; the status says it failed. */
        ok = false;
        r->exit_code = 1;
    }
    /* As an unprivileged user a file owned by another user (root, say) is
     * owned by an unmapped id in the sandbox's user namespace: overlayfs
     * cannot copy it up, so changing, moving or removing it fails with
     * EOVERFLOW where a plain run (a directory the user may write) would
     * not. No way around it without that id; the result says why. */
    if (!ok && !root && r->err.len &&
        memmem(r->err.p, r->err.len, "Value too large for defined data type", 37))
        r->hint =
            xstrdup("a file in the workspace owned by another user (root, say) cannot be changed, moved "
                    "or removed in the sandbox of an unprivileged user (EOVERFLOW: that owner has no id "
                    "in its user namespace); chown it to yourself, or run txbox as its owner");
    return ok;
}

/* What one txbox_run carries from step to step. */
struct run {
    txbox_ws *ws;
    const txbox_run_opts *opts;
    txbox_result *r;
    uint64_t t0;
    char *shell_path; /* the shell that runs a string (NULL for an argv) */
    bool differs;     /* that shell reads the string otherwise than bash */
    bool read_only;
    /* net: the proxy (a rule or the caller granted network); host_net: the
     * host's namespace, only when the caller asks for it */
    bool net, host_net;
    /* the proxy's allowlist: the defaults for --net, for an external
     * effect's rule and for a network rule that names no domains; the
     * domains of the rules that granted network */
    bool net_defaults;
    char rule_domains[sizeof((txbox_verdict *)0)->domains];
    json_t *saga; /* external effects (saga.c) */
    struct sb_early *early;
    char *cwd, *hctx; /* history: where it ran, its context */
    json_t *scrubbed;
    char **envp;
    const char **allow;
    size_t n_allow;
    struct np_config npc;
    char **hide, **state_hide;
    uint64_t max_write;
    char *prog;
    char dash_c[3];
    char *shell_argv[4];
    char **argv, **argv_copy;
    int txfd, activefd, upperfd, workfd;
    int pout[2], perr[2];
    uint64_t base_gen;
    bool use_copy;
    struct cleaner cleaner;
    struct sb_status st;
    struct fs_writeback *wb; /* the command's data on its way to the disk (run_commit) */
    bool ok;                 /* the command succeeded (take_status) */
    int effd;
    /* in a session: the link for this run (sesslink.h); the command's
     * processes left running are kept (kept), and with them its upper,
     * renamed live/ (live_upper), its commit taken from a copy (upper/) */
    struct sess_link link;
    bool kept, live_upper;
    /* committed with its journal left open (run_retire_later): the
     * session's steward retires it after the answer */
    bool left_open;
    char proxy_slots[SB_PROXY_ENV_N][SB_PROXY_ENV_LEN];
};

/* What a run holds that outlives none of its returns. */
static void run_release(struct run *c)
{
    sb_status_free(&c->st);
    sl_detach(&c->link);
    free(c->shell_path);
    saga_plan_freep(&c->saga);
    sb_early_cancel(c->early);
    free(c->cwd);
    free(c->hctx);
    free(c->envp);
    free(c->allow);
    free(c->prog);
    free(c->argv_copy);
}

/* Options checked, the shell chosen, the result begun. */
static int run_begin(struct run *c, txbox_error *err)
{
    const txbox_run_opts *opts = c->opts;
    if (validate(opts, err) < 0)
        return -1;
    struct statvfs v; /* a floor the environment sets must be one */
    if (!opts->min_free_bytes && fstatvfs(c->ws->fd, &v) == 0 &&
        tx_min_free_env((uint64_t)v.f_blocks * v.f_frsize, err) == -2)
        return -1;
    /* the shell that runs a string, and whether it reads as bash does */
    int posix;
    if (run_shell(c->ws, opts, &c->shell_path, &posix, err) < 0)
        return -1;
    c->differs = opts->shell && posix && sh_reads_differently(opts->shell);
    txbox_result *r = c->r = result_new();
    r->started = wall_time();
    r->tee_fd = opts->capture ? opts->tee_fd : 0;
    if (r->tee_fd > 0) /* the command never waits for the reader */
        fcntl(r->tee_fd, F_SETFL, fcntl(r->tee_fd, F_GETFL) | O_NONBLOCK);
    if (c->shell_path)
        r->shell = xstrdup(c->shell_path);
    c->read_only = opts->read_only && !opts->multi; /* multi: its view */
    c->net = opts->net == TXBOX_NET_PROXY;
    c->host_net = opts->net == TXBOX_NET_HOST;
    c->net_defaults = c->net;
    return 0;
}

/* The policy's verdict, into the result and the run's view and network:
 * 1 when the command is unsafe (never run). */
static int run_judge(struct run *c, txbox_error *err)
{
    const txbox_run_opts *opts = c->opts;
    txbox_result *r = c->r;
    if (!opts->policy)
        return 0;
    txbox_verdict v;
    int pr = opts->shell ? txbox_policy_check(opts->policy, opts->shell, strlen(opts->shell), &v, err)
                         : txbox_policy_check_argv(opts->policy, opts->argv, &v, err);
    if (pr < 0)
        return tx_err_ctx(err, "policy");
    if (c->differs && v.verdict != TXBOX_VERDICT_UNSAFE) {
        /* judged as bash, run by sh: never read-only on that word,
         * never with a rule's network */
        v.verdict = TXBOX_VERDICT_UNCERTAIN;
        snprintf(v.rule, sizeof v.rule, "shell-sh");
        snprintf(v.reason, sizeof v.reason,
                 "%s reads this command otherwise than bash, as which the policy judged it", c->shell_path);
        v.needs_network = 0;
    }
    if (opts->session && v.verdict == TXBOX_VERDICT_UNSAFE &&
        (!strcmp(v.rule, "kill-other-processes") || !strcmp(v.rule, "kill-by-name"))) {
        /* in a session, the processes a command can signal are the
         * session's own (its pid namespace): the background processes its
         * earlier commands left, which a later one stops as without txbox */
        v.verdict = TXBOX_VERDICT_UNCERTAIN;
        snprintf(v.reason, sizeof v.reason, "in session %s it reaches only the session's own processes",
                 txbox_session_id(opts->session));
    }
    r->verdict = xstrdup(txbox_verdict_name(v.verdict));
    r->rule = xstrdup(v.rule);
    r->reason = xstrdup(v.reason);
    if (v.verdict == TXBOX_VERDICT_UNSAFE) {
        r->suggestion = xstrdup(v.suggestion);
        return 1;
    }
    if (v.verdict == TXBOX_VERDICT_SAFE && !opts->multi)
        c->read_only = true;
    if (v.needs_network) {
        c->net = true;
        c->net_defaults = c->net_defaults || v.default_domains;
        memcpy(c->rule_domains, v.domains, sizeof c->rule_domains);
    }
    bool saga_net = false;
    if (!c->read_only)
        c->saga = saga_plan(opts->policy, opts->shell, opts->argv, &saga_net);
    if (saga_net && !c->differs)
        c->net = c->net_defaults = true;
    /* and the domains of the rules that declared its external effects */
    add_effect_domains(c->saga, c->rule_domains, sizeof c->rule_domains);
    saga_plan_network(c->saga, opts->net, opts->allow_domains);
    return 0;
}

/* The sandbox's namespaces are made meanwhile, on the other CPU: by the
 * time the transaction's directories and the command's environment are
 * ready, init is waiting for them. Not before the verdict: a blocked
 * command would pay for it (1.1 ms), and the network choice is known
 * only now. On failure sb_run tries again and says why. */
static void run_prestart(struct run *c)
{
    txbox_error pe = {0};
    if (sb_prestart(c->host_net, c->opts->session != NULL, &c->early, &pe) < 0)
        c->early = NULL;
    txbox_result *r = c->r;
    r->backend = c->read_only ? "none" : c->opts->backend == TXBOX_BACKEND_COPY ? "copy" : "overlay";
    size_t cap = c->opts->output_cap ? c->opts->output_cap : DEFAULT_OUTPUT_CAP;
    dbuf_init(&r->out, cap);
    dbuf_init(&r->err, cap);
}

/* The command's world: its directory, environment, network allowlist,
 * hidden paths, write budget and argv. */
static void run_environment(struct run *c)
{
    txbox_ws *ws = c->ws;
    const txbox_run_opts *opts = c->opts;
    c->cwd = start_dir(ws, opts->cwd);
    c->hctx = store_context(ws, opts, c->cwd, c->r->started); /* history */
    c->scrubbed = json_array();
    c->envp = confine_env(environ, opts->env_allow, c->scrubbed);
    private_tmpdir(c->envp, ws->path);
    if (opts->shell)
        shell_env(c->envp, c->scrubbed);
    if (c->net && !c->host_net) {
        char **pe2 = proxy_env(c->envp, opts->session ? c->proxy_slots : NULL);
        free(c->envp);
        c->envp = pe2;
        c->allow = proxy_allowlist(opts, c->net_defaults, c->rule_domains, &c->n_allow);
        c->npc = (struct np_config){
            .allow = c->allow, .n_allow = c->n_allow, .refusal_words = opts->net_refusal_words};
    }
    c->hide = tx_hidden_paths(opts->deny_read, opts->policy, ws);
    /* txbox's state: this workspace known to those around it, theirs and
     * its own out of the command's reach, its own its owner's only */
    if (!ws->stateless) {
        state_register_nested(ws);
        state_tighten_modes(ws);
    }
    c->state_hide = state_hidden_paths(ws);
    /* The write budget: half of the free space above the floor (commit.c:
     * a run of commands each taking half of what is left stops there), at
     * least a little for a command that writes next to nothing. */
    struct statvfs vfs;
    c->max_write = opts->max_write_bytes;
    if (!c->max_write && fstatvfs(ws->fd, &vfs) == 0) {
        uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize,
                 floor = tx_space_floor(ws->fd, run_min_free(opts));
        c->max_write = avail > floor + 2 * MIN_WRITE_BUDGET ? (avail - floor) / 2 : MIN_WRITE_BUDGET;
    }
    memcpy(c->dash_c, "-c", 3);
    c->shell_argv[0] = c->shell_path;
    c->shell_argv[1] = c->dash_c;
    c->shell_argv[2] = (char *)opts->shell;
    c->shell_argv[3] = NULL;
    c->argv = c->shell_argv;
    if (!opts->shell) {
        size_t n = 0;
        while (opts->argv[n])
            n++;
        c->argv_copy = xcalloc(n + 1, sizeof *c->argv_copy);
        memcpy(c->argv_copy, opts->argv, n * sizeof *c->argv_copy);
        c->prog = resolve_program(opts->argv[0]);
        c->argv_copy[0] = c->prog;
        c->argv = c->argv_copy;
    }
}

/* In a session: the caller's own files of the host's /tmp into the
 * session's (tmpsync.c), but never a hidden path, the workspace or txbox's
 * state. */
static void run_tmpsync(struct run *c)
{
    size_t n = 0, m = 0;
    while (c->hide && c->hide[n])
        n++;
    while (c->state_hide && c->state_hide[m])
        m++;
    const char **skip = xcalloc(n + m + 2, sizeof *skip);
    memcpy(skip, c->hide, n * sizeof *skip);
    memcpy(skip + n, c->state_hide, m * sizeof *skip);
    skip[n + m] = c->ws->path;
    tmpsync_in(c->opts->session->dirfd, c->link.fds.fd[KP_TMP], skip, c->opts->shell, c->opts->argv);
    free(skip);
    tx_mark("tmpsync");
}

/* The transaction's id and directory. */
static int run_new_tx(struct run *c, txbox_error *err)
{
    if (c->ws->stateless) { /* a read-only run where .txbox cannot be: no id, no record */
        c->r->log_error = xstrdup("not recorded: the workspace's state directory cannot be written there");
        return 0;
    }
    c->use_copy = c->opts->backend == TXBOX_BACKEND_COPY && !c->read_only;
    if (ws_new_tx(c->ws, &c->r->id, &c->txfd, &c->activefd, &c->base_gen, err) < 0)
        return -1;
    snprintf(c->r->txs, sizeof c->r->txs, "%llu", (unsigned long long)c->r->id);
    return 0;
}

/* The command's view of the workspace: the copy backend's copy, or an
 * overlay upper and work directory. 1: overlay cannot be used here, and
 * the copy backend is allowed instead. */
static int run_make_view(struct run *c, txbox_error *err)
{
    if (c->use_copy) {
        c->r->backend = "copy";
        return copy_begin(c->ws, c->txfd, &c->upperfd, err) < 0 ? -1 : 0;
    }
    if (c->read_only)
        return 0;
    if ((c->upperfd = make_dir_fd(c->txfd, "upper", c->ws->fd, err)) < 0 ||
        (c->workfd = make_dir_fd(c->txfd, "work", -1, err)) < 0)
        return -1;
    /* .txbox/ is not part of the view: a whiteout over it (a 0/0
     * character device, which the kernel lets any user make since 5.8).
     * The command cannot see or reach the real one, and the scan ignores
     * whatever it does at that name. */
    if (mknodat(c->upperfd, TXBOX_STATE_DIR, S_IFCHR, 0) < 0) {
        tx_errno(err, errno, "cannot hide %s from the command", TXBOX_STATE_DIR);
        /* A filesystem that refuses whiteouts (overlayfs itself) cannot
         * hold an overlay upper either. */
        return c->opts->allow_copy_fallback ? 1 : -1;
    }
    return 0;
}

/* The command, run in the sandbox; its status in c->st. 1: the overlay
 * could not be mounted, and the copy backend is allowed instead. */
static int run_sandbox(struct run *c, txbox_error *err)
{
    const txbox_run_opts *opts = c->opts;
    txbox_result *r = c->r;
    char upper_rel[64], work_rel[64];
    snprintf(upper_rel, sizeof upper_rel, "%s/tx/%s/%s", TXBOX_STATE_DIR, r->txs,
             c->use_copy ? "view" : "upper"); /* the copy backend's: its copy */
    snprintf(work_rel, sizeof work_rel, "%s/tx/%s/work", TXBOX_STATE_DIR, r->txs);
    /* a compensation that captures from the output needs it: captured and passed through */
    r->tee = !opts->capture && c->saga && saga_plan_needs_output(c->saga);
    if ((opts->capture || r->tee) && (pipe2(c->pout, O_CLOEXEC) < 0 || pipe2(c->perr, O_CLOEXEC) < 0))
        return tx_errno(err, errno, "pipe");
    c->cleaner = (struct cleaner){.ws = c->ws};
    struct sb_spec spec = {
        .ws_path = c->ws->path,
        .ws_fd = c->ws->fd,
        .view = c->read_only  ? SB_VIEW_READONLY
                : c->use_copy ? SB_VIEW_DIRECT
                              : SB_VIEW_OVERLAY,
        .upper_fd = c->upperfd,
        .work_fd = c->workfd,
        .upper_rel = upper_rel,
        .work_rel = work_rel,
        .lower_fd = opts->multi ? multi_layer_fd(opts->multi) : -1,
        .lower_rel = opts->multi ? multi_layer_rel(opts->multi) : NULL,
        .lower_work_fd = opts->multi ? multi_layer_work_fd(opts->multi) : -1,
        .lower_work_rel = opts->multi ? multi_layer_work_rel(opts->multi) : NULL,
        .cwd = c->cwd,
        .argv = c->argv,
        .envp = c->envp,
        .net = c->host_net,
        .proxy = c->net && !c->host_net ? &c->npc : NULL,
        .proxy_env = c->net && !c->host_net && opts->session ? c->proxy_slots : NULL,
        .in_fd = -1,
        .out_fd = c->pout[1],
        .err_fd = c->perr[1],
        .timeout_s = opts->timeout_s,
        .cancel = opts->cancel,
        .limits = {.cpu_s = opts->cpu_seconds, .file_size = c->max_write},
        .pids_max = opts->max_processes ? opts->max_processes : 4096,
        .memory_max = opts->memory_bytes ? opts->memory_bytes : 8ull << 30,
        .max_write = c->max_write,
        .hide = (const char *const *)c->hide,
        .state_hide = (const char *const *)c->state_hide,
        .allow_degraded = opts->allow_degraded,
        .name = r->txs,
        .report_after = true,
        .reap_later = true, /* init's end overlaps the scan; awaited in run_finish */
        .session = opts->session ? &c->link.fds : NULL,
        /* the copy backend's copy and a multi-command transaction's layers
         * are no upper that a process could keep writing */
        .session_keep = !c->use_copy && !opts->multi,
        .started = cleaner_start,
        .started_arg = &c->cleaner,
        .early = c->early, /* taken by sb_run */
    };
    c->early = NULL;
    c->effd = opts->multi ? multi_txfd(opts->multi) : c->txfd; /* where its effects are recorded */
    if (c->saga && saga_started(c->effd, c->saga, r->txs, err) < 0)
        return -1;
    struct sb_status *st = &c->st;
    int rc = sb_run(&spec, c->pout[0], c->perr[0], pump, r, st, err);
    cleaner_stop(&c->cleaner);
    tx_mark_at("prepare", st->t_clone);
    tx_mark_at("clone->go", st->t_go);
    tx_mark_at("go->started", st->t_started);
    tx_mark_at("command", st->t_exited);
    tx_mark_at("exited->reaped", st->t_reaped);
    /* sb_run closed the write ends; the read ends are ours. */
    if (c->pout[0] >= 0)
        close(c->pout[0]);
    if (c->perr[0] >= 0)
        close(c->perr[0]);
    c->pout[0] = c->pout[1] = c->perr[0] = c->perr[1] = -1;
    if (rc < 0) {
        json_decref(st->protections);
        st->protections = NULL;
        json_decref(st->network);
        st->network = NULL;
        if (!st->ran && st->overlay_failed && opts->allow_copy_fallback && !c->use_copy)
            return 1;
        return -1;
    }
    return 0;
}

/* What the sandbox says of where the command wrote outside the workspace
 * and where its shell ended: the result's `discarded` and `cwd_after` (a
 * directory in the workspace only: elsewhere the caller's shell could not
 * follow it). */
static void take_session_facts(struct run *c)
{
    txbox_result *r = c->r;
    const struct sb_status *st = &c->st;
    if (st->discarded.known) {
        json_t *paths = json_array();
        for (size_t i = 0; i < st->discarded.n; i++)
            json_array_append_new(paths,
                                  json_text(st->discarded.paths[i], strlen(st->discarded.paths[i]), true));
        r->discarded = json_pack("{s:I,s:o,s:b}", "count", (json_int_t)st->discarded.count, "paths", paths,
                                 "truncated", st->discarded.count > st->discarded.n);
    }
    bool in_tmp = c->opts->session && path_under(st->cwd_after ? st->cwd_after : "", "/tmp");
    /* only of a shell that exited: one killed (the time limit, a signal)
     * may or may not have stopped at its exit to say it (SIGKILL skips
     * the stop at times), and where it was when killed is no place to go
     * on from */
    bool exited = st->exited && WIFEXITED(st->wstatus) && !st->timed_out && !st->cancelled;
    if (exited && st->cwd_after && (path_under(st->cwd_after, c->ws->path) || in_tmp) &&
        !strstr(st->cwd_after, "\n"))
        r->cwd_after = xstrdup(st->cwd_after);
    if (c->opts->session) {
        json_object_set_new(r->protections, "session",
                            json_pack("{s:s,s:[s,s,s,s,s,s,s,s]}", "id", txbox_session_id(c->opts->session),
                                      "shared", "user namespace", "network", "ipc", "uts", "pid", "/tmp",
                                      "/var/tmp", "/dev/shm"));
        json_object_set_new(r->protections, "private_tmp", json_false());
    }
}

/* What the sandbox reported, into the result; external effects recorded,
 * and undone now if the command failed. */
static int run_take_status(struct run *c, txbox_error *err)
{
    txbox_result *r = c->r;
    struct sb_status *st = &c->st;
    r->protections = st->protections;
    st->protections = NULL;
    r->network = st->network ? st->network : json_pack("{s:s}", "mode", c->host_net ? "host" : "none");
    st->network = NULL;
    json_object_set(r->protections, "env_removed", c->scrubbed);
    /* rules on effects judge the scanned write set of an overlay commit;
     * the copy backend (chosen, or allowed as a fallback) has none */
    json_object_set_new(r->protections, "effect_rules",
                        json_string(c->read_only       ? "not needed (read-only)"
                                    : !c->opts->policy ? "none (no policy)"
                                    : c->use_copy      ? "not enforced (copy backend)"
                                                       : "enforced at commit"));
    c->ok = take_status(r, st, c->ws->root);
    take_session_facts(c);
    if (c->saga && saga_after(c->ws, c->effd, c->saga, r, c->ok, c->opts->multi != NULL, txbox_run, err) < 0)
        return -1;
    return 0;
}

/* In a session, the command's processes left running (kept by init): the
 * steward (session.c) stops them, and what the command wrote is copied out
 * of its upper, which stays theirs (renamed live/, recorded in
 * survivors.rec as it was copied); the commit takes the copy (upper/),
 * and they go on once it is decided (run_keep_after). Where that cannot
 * be done they are killed, and the commit is as without them. */
static int run_keep(struct run *c)
{
    struct sb_status *st = &c->st;
    txbox_result *r = c->r;
    if (!c->opts->session || !st->survivors)
        return 0;
    struct sl_group g = {.tx = r->id,
                         .userns = st->userns,
                         .rootfd = st->rootfd,
                         .listener = st->guard_listener,
                         .out = st->output_rest[1],
                         .err = st->output_rest[2],
                         .mounts = st->guard_mounts,
                         .n_mounts = st->n_guard_mounts,
                         .command = c->opts->shell ? c->opts->shell : c->argv[0],
                         .cgroups = (const char(*)[128])st->cgroups};
    char cgroups[3][128];
    memcpy(cgroups, st->cgroups, sizeof cgroups);
    size_t stopped = 0;
    txbox_error ke = {0};
    int rc = sl_group_begin(&c->link, &g, &stopped, &ke);
    bool steward_has = rc == 0;
    sb_status_free(st); /* the steward has them now */
    bool has_upper = !c->read_only && !c->use_copy && c->upperfd >= 0;
    int commitfd = -1;
    if (rc == 0 && has_upper) {
        struct urec rec = {0};
        size_t n = 0;
        commitfd = make_dir_fd(c->txfd, "upper.commit", c->ws->fd, &ke);
        rc = commitfd < 0
                 ? -1
                 : upper_copy(c->upperfd, commitfd, NULL, &rec,
                              c->ws->root ? "trusted.overlay.opaque" : "user.overlay.opaque", &n, &ke);
        if (rc == 0)
            rc = urec_write(c->txfd, SURVIVORS_REC, &rec, &ke);
        urec_free(&rec);
        if (rc == 0 && renameat(c->txfd, "upper", c->txfd, "live") < 0)
            rc = tx_errno(&ke, errno, "cannot keep the command's upper");
        if (rc == 0 && renameat(c->txfd, "upper.commit", c->txfd, "upper") < 0) {
            rc = tx_errno(&ke, errno, "cannot keep the command's upper");
            (void)renameat(c->txfd, "live", c->txfd, "upper");
        }
    }
    if (rc < 0) {
        /* not kept: killed (the steward, or here if it never had them) */
        txbox_error ie = {0};
        if (!steward_has || sl_group_keep(&c->link, r->id, false, false, 0, -1, &ie) < 0) {
            for (int i = 0; i < 1000 && kp_signal(c->link.fds.fd[KP_PROC], g.userns, SIGKILL); i++)
                usleep(1000);
            for (size_t i = 0; i < 3; i++)
                cg_remove(cgroups[i]); /* the steward never had them */
        }
        if (commitfd >= 0)
            close(commitfd);
        (void)tree_remove(c->txfd, "upper.commit");
        r->background =
            json_pack("{s:I,s:b,s:s}", "processes", (json_int_t)(stopped ? stopped : st->survivors), "kept",
                      0, "reason", ke.msg);
        return 0;
    }
    if (has_upper) {
        close(c->upperfd);
        c->upperfd = commitfd;
        c->live_upper = true;
    }
    c->kept = true;
    r->background = json_pack("{s:I,s:b}", "processes", (json_int_t)stopped, "kept", 1);
    return 0;
}

/* The kept processes go on: what they write later to the workspace is a
 * transaction of its own, from the generation this one left (its commit's,
 * else its base). The steward holds the transaction's owner lock from now
 * on (its upper stays while they run). */
static void run_keep_after(struct run *c, bool keep)
{
    if (!c->kept)
        return;
    txbox_result *r = c->r;
    uint64_t base = r->outcome == TXBOX_OUTCOME_COMMITTED && r->gen ? r->gen : c->base_gen;
    txbox_error ke = {0};
    if (sl_group_keep(&c->link, r->id, keep, c->live_upper, base, keep ? c->activefd : -1, &ke) < 0 ||
        !keep) {
        c->kept = false; /* killed: the steward is gone or said no */
        json_object_set_new(r->background, "kept", json_false());
        if (ke.msg[0])
            json_object_set_new(r->background, "reason", json_string(ke.msg));
    }
}

/* The overlay commit: the sequence (commit.c) on the command's upper, with
 * the rules on effects as its judge and the result as its record. */
struct run_commit {
    txbox_ws *ws;
    txbox_result *r;
    const txbox_policy *pol;
    const char *hctx;
    const struct gitcfg_ctx *gc;
    bool interactive; /* a person can answer a hold (txbox_run_opts.interactive) */
    struct run *run;  /* its threads, which losses_in.quiesce ends */
};

/* Before git's reading forks (losses_in.quiesce): init's end awaited
 * (spec.reap_later) and the early writeback ended, so that the child is
 * the copy of a process with one thread. */
static void run_quiesce(void *arg)
{
    struct run *c = arg;
    sb_reap(&c->st);
    fs_writeback_end(c->wb);
    c->wb = NULL;
}

/* losses_in.git_ask: the session's warm reader of git, asked straight on
 * a connection of its own (sesslink.h, SL_GIT). None listening: the
 * steward is told to start one for the next commit, on a connection of
 * its own too, not waited for (it may be waiting for the workspace's
 * lock, which this commit holds; and a steward of an older txbox answers
 * an error no one should read as another request's answer). */
static int run_git_ask(void *arg, json_t *q, json_t **ans, int timeout_ms)
{
    struct run *c = arg;
    *ans = NULL;
    txbox_error e = {0};
    int dirfd = c->opts->session->dirfd;
    int sock = sl_connect_to(dirfd, SL_GIT, &e);
    if (sock < 0) {
        _cleanup_close_ int ctl = sl_connect(dirfd, &e);
        json_t *req = json_pack("{s:s}", "op", "gitreader");
        if (ctl < 0 || sl_send(ctl, req, NULL, 0, &e) < 0) {
            /* the steward is gone: the commit's own child answers */
        }
        json_decref(req);
        return -1;
    }
    int rc = sl_send(sock, q, NULL, 0, &e);
    if (rc == 0)
        rc = sl_recv(sock, ans, NULL, 0, NULL, timeout_ms, &e);
    close(sock);
    if (rc < 0)
        return e.code == ETIMEDOUT ? -2 : -1;
    return 0;
}

/* The judge: what the commit would destroy that exists nowhere else
 * (losses.h), reported, then the rules on effects (those on losses too). */
static int run_judge_effects(struct tx_commit *c, txbox_error *err)
{
    struct run_commit *rc = c->h->ctx;
    if (!rc->r->changes)
        rc->r->changes = json_incref(c->changes);
    struct losses ls = {0};
    int e = losses_of_commit(
        &(struct losses_in){.ws = c->ws,
                            .txfd = c->txfd,
                            .txs = rc->r->txs,
                            .upperfd = c->upperfd,
                            .ops = &c->ops,
                            .now = wall_time(),
                            .pol = rc->pol,
                            .quiesce = rc->run ? run_quiesce : NULL,
                            .quiesce_ctx = rc->run,
                            .git_ask = rc->run && rc->run->opts->session ? run_git_ask : NULL,
                            .git_ask_ctx = rc->run},
        rc->r, &ls, err);
    /* an index that was only refreshed (losses.c) is no change to report */
    if (e == 0 && commit_relist_changes(c)) {
        json_decref(rc->r->changes);
        rc->r->changes = json_incref(c->changes);
    }
    if (e == 0 && rc->pol)
        e = effects_gate_run(c->ws, rc->pol, rc->r, c->txfd, c->upperfd, c->base_gen, &c->ops, &c->durable,
                             rc->hctx, rc->gc, &ls, rc->interactive, err);
    losses_free(&ls);
    return e;
}

static char *run_commit_info(struct tx_commit *c)
{
    struct run_commit *rc = c->h->ctx;
    json_decref(rc->r->changes);
    rc->r->changes = json_incref(c->changes);
    return store_info(rc->r, rc->hctx); /* history: + command, cwd */
}

/* What an overlay commit is given: the command's (run_decide), or the late
 * writes of a session's background processes (run_late). */
struct overlay_in {
    txbox_ws *ws;
    txbox_result *r;
    int txfd, upperfd;
    uint64_t base_gen;
    const char *hctx;
    const txbox_policy *pol;
    uint64_t file_limit;
    int64_t min_free; /* run_min_free's */
    volatile int *cancel;
    bool interactive;
    bool leave_open; /* the journal left open once applied (commit.h) */
    bool *left_open; /* set when it was */
    struct run *run; /* NULL: no threads of its own to end before a fork */
};

static int overlay_commit(const struct overlay_in *in, const struct gitcfg_ctx *gc, txbox_error *err)
{
    txbox_result *r = in->r;
    struct run_commit rc = {in->ws, r, in->pol, in->hctx, gc, in->interactive, in->run};
    const struct commit_hooks hooks = {.judge = run_judge_effects, .info = run_commit_info, .ctx = &rc};
    struct tx_commit cm = {.ws = in->ws,
                           .id = r->id,
                           .txfd = in->txfd,
                           .upperfd = in->upperfd,
                           .base_gen = in->base_gen,
                           .scan = true,
                           .keep_upper = true,
                           .file_limit = in->file_limit,
                           .min_free = in->min_free,
                           .cancel = in->cancel,
                           .leave_open = in->leave_open,
                           .h = &hooks};
    int ret = commit_run(&cm, err);
    if (in->left_open)
        *in->left_open = ret == 0 && cm.left_open;
    if (ret == 0) {
        switch (cm.end) {
        case COMMIT_APPLIED:
            r->logged = true;
            /* fall through */
        case COMMIT_EMPTY:
            r->outcome = TXBOX_OUTCOME_COMMITTED;
            break;
        case COMMIT_WRITE_LIMIT:
            r->write_limit = true;
            r->exit_code = 128 + SIGXFSZ;
            r->outcome = TXBOX_OUTCOME_ROLLED_BACK;
            break;
        case COMMIT_CONFLICT:
            r->outcome = TXBOX_OUTCOME_CONFLICT;
            r->conflict_path = steal_pointer(&cm.clash);
            r->held_by = cm.held_by;
            break;
        case COMMIT_NO_SPACE:
            r->outcome = TXBOX_OUTCOME_NO_SPACE;
            r->space_free = cm.space.free_bytes;
            r->space_floor = cm.space.floor;
            break;
        case COMMIT_DECIDED: /* effects_gate_run set the outcome */
            break;
        }
        if (cm.end != COMMIT_WRITE_LIMIT && cm.changes) {
            json_decref(r->changes);
            r->changes = json_incref(cm.changes);
        }
    } else {
        r->commit_point_passed = cm.passed;
    }
    commit_free(&cm);
    return ret;
}

/* In a session, the journal's retirement (the sync of what the apply
 * touched, the journal's close, the write set's removal, the bounds on
 * history) is the steward's, after the answer: the answer waits only for
 * the commit point and the apply. What the command left running (kept),
 * or an external effect's record (saga), is this run's to finish. In test
 * builds TXBOX_TEST_NO_RETIRE leaves it to the next recovery instead, as
 * a steward killed before it retired it would. */
static bool run_retire_later(const struct run *c)
{
    return c->opts->session && c->link.sock >= 0 && !c->kept && !c->saga;
}

/* Commit or roll back, by backend. -2: failed past the commit point. */
static int run_decide(struct run *c, txbox_error *err)
{
    txbox_ws *ws = c->ws;
    txbox_result *r = c->r;
    if (c->read_only) {
        /* killed at its deadline: a timeout like any other (status 124) */
        r->outcome = c->st.timed_out ? TXBOX_OUTCOME_TIMED_OUT : TXBOX_OUTCOME_READ_ONLY;
    } else if (c->use_copy) {
        int rc;
        if (c->ok) {
            rc = copy_commit(ws, c->txfd, &r->changes, CHANGES_CAP, err);
            r->outcome = TXBOX_OUTCOME_COMMITTED;
        } else {
            rc = copy_rollback(ws, c->txfd, err);
            r->outcome = c->st.timed_out ? TXBOX_OUTCOME_TIMED_OUT : TXBOX_OUTCOME_ROLLED_BACK;
        }
        if (rc < 0)
            return -1;
    } else if (c->ok && c->opts->multi) {
        if (multi_absorb(c->opts->multi, c->txfd, r, err) < 0)
            return -1;
    } else if (c->ok) {
        /* the command's data on its way to the disk while the scan and
         * the rules work out what to commit (fsops.h) */
        c->wb = fs_writeback_start(c->upperfd);
        struct gitcfg_ctx gc = {.ws = ws,
                                .txfd = c->txfd,
                                .txs = r->txs,
                                .hide = (const char *const *)c->hide,
                                .allow_degraded = c->opts->allow_degraded};
        struct overlay_in in = {.ws = ws,
                                .r = r,
                                .txfd = c->txfd,
                                .upperfd = c->upperfd,
                                .base_gen = c->base_gen,
                                .hctx = c->hctx,
                                .pol = c->opts->policy,
                                .file_limit = c->max_write,
                                .min_free = run_min_free(c->opts),
                                .cancel = c->opts->cancel,
                                .interactive = c->opts->interactive != 0,
                                .leave_open = run_retire_later(c),
                                .left_open = &c->left_open,
                                .run = c};
        int rc = overlay_commit(&in, &gc, err);
        fs_writeback_end(c->wb);
        c->wb = NULL;
        if (rc < 0)
            return r->commit_point_passed ? -2 : -1;
    } else {
        r->outcome = c->st.timed_out ? TXBOX_OUTCOME_TIMED_OUT : TXBOX_OUTCOME_ROLLED_BACK;
    }
    return 0;
}

/* Past the commit point: leave the journal to recovery (invariant I6);
 * release the owner lock so that the next txbox command on this workspace
 * finishes the job. */
static int run_leave_to_recovery(struct run *c)
{
    run_keep_after(c, false);
    close(c->activefd);
    close(c->txfd);
    close(c->upperfd);
    close(c->workfd);
    tx_free_strv(c->hide);
    tx_free_strv(c->state_hide);
    json_decref(c->scrubbed);
    result_free(c->r);
    run_release(c);
    return -1;
}

/* The scratch directories discarded, the outcome recorded and logged, the
 * transaction ended; retention, the trash and compaction kept bounded. */
static void run_finish(struct run *c)
{
    txbox_ws *ws = c->ws;
    txbox_result *r = c->r;
    tx_mark("decided");
    sb_reap(&c->st); /* init's end (spec.reap_later), before its upper goes */
    tx_mark("reaped");
    if (ws->stateless) { /* read-only: no scratch, no record */
        if (!r->changes)
            r->changes = json_pack("{s:[],s:[],s:[],s:b}", "added", "modified", "deleted", "truncated", 0);
        r->duration_ms = (double)(now_ns() - c->t0) / 1e6;
        r->overhead_ms = r->duration_ms - r->cmd_ms;
        tx_free_strv(c->hide);
        tx_free_strv(c->state_hide);
        json_decref(c->scrubbed);
        return;
    }
    bool trashed = false;
    if (c->left_open)
        ; /* upper/ and work/: recovery's (commit_tidy_dead), once the journal is closed */
    else if (r->write_limit ||
             r->outcome == TXBOX_OUTCOME_NO_SPACE) /* its space back at once, not after the next command */
        (void)tree_remove(c->txfd, "upper");
    else if (r->outcome != TXBOX_OUTCOME_CONFLICT && r->outcome != TXBOX_OUTCOME_HELD)
        trashed =
            discard_dir(ws, c->txfd, "upper", r->txs,
                        r->outcome == TXBOX_OUTCOME_COMMITTED && !c->opts->multi ? 0 : WS_TRASH_GRANT_DIRS);
    /* a conflict's or held upper stays, kept aside; the work directory of
     * an upper that processes kept in the session still write (live/)
     * stays theirs */
    if (!(c->kept && c->live_upper) && !c->left_open)
        trashed |= discard_dir(ws, c->txfd, "work", r->txs, WS_TRASH_GRANT_DIRS | WS_TRASH_GRANT_FILES);
    tx_mark("rm-upper");
    tx_write_outcome(c->txfd, txbox_outcome_name(r->outcome));
    if (!r->changes)
        r->changes = json_pack("{s:[],s:[],s:[],s:b}", "added", "modified", "deleted", "truncated", 0);
    r->duration_ms = (double)(now_ns() - c->t0) / 1e6;
    r->overhead_ms = r->duration_ms - r->cmd_ms;
    if (!r->logged) {
        txbox_error le = {0};
        _cleanup_free_ char *info = store_info(r, c->hctx); /* history: + command, cwd */
        if (store_log(ws, r->id, txbox_outcome_name(r->outcome), info, NULL, c->txfd, &le) < 0)
            r->log_error = xstrdup(le.msg);
        tx_mark("log");
    }
    if (c->upperfd >= 0)
        close(c->upperfd);
    if (c->workfd >= 0)
        close(c->workfd);
    close(c->txfd);
    if (c->kept)
        close(c->activefd); /* the steward's lock now: active/ID stays */
    else if (c->left_open)
        close(c->activefd); /* its owner gone; active/ID goes with the journal's close (recovery) */
    else
        ws_end_tx(ws, r->id, c->activefd);
    tx_free_strv(c->hide);
    tx_free_strv(c->state_hide);
    json_decref(c->scrubbed);
    if (c->left_open) {
        /* the rest is the steward's (run_retire_later) */
        bool tell = true;
#ifdef TXBOX_TEST_HOOKS
        tell = !getenv("TXBOX_TEST_NO_RETIRE"); /* test builds only */
#endif
        if (tell)
            sl_retire(&c->link, r->id);
    } else {
        if (r->outcome == TXBOX_OUTCOME_COMMITTED && r->logged)
            history_autogc(ws); /* history: retention bounds */
        /* Bounded: when commands end too soon for the cleaner to keep up. */
        if (trashed)
            ws_trash_clean(ws, NULL, TXBOX_TRASH_KEEP);
        tx_mark("gc");
        ws_compact_maybe(ws, r->id); /* every 64th: .txbox/tx/ stays bounded */
    }
    tx_mark("end");
    tx_marks_print(stderr);
}

/* Overlay cannot be used on this workspace: the copy backend instead. */
static void run_fall_back(struct run *c, txbox_error *err)
{
    c->r->fallback = xasprintf("overlay unavailable (%s); used the copy backend", err->msg);
    (void)tree_remove(c->txfd, "upper");
    (void)tree_remove(c->txfd, "work");
    close(c->upperfd);
    close(c->workfd);
    c->upperfd = c->workfd = -1;
    c->use_copy = true;
}

/* Nothing was applied: discard this transaction's scratch space. */
static int run_fail(struct run *c, txbox_error *err)
{
    txbox_ws *ws = c->ws;
    txbox_result *r = c->r;
    run_keep_after(c, false);
    if (c->live_upper)
        (void)tree_remove(c->txfd, "live");
    if (c->txfd >= 0) {
        if (c->use_copy && copy_recover_one(ws, c->txfd, NULL) < 0) {
            tx_err_ctx(err, "and the snapshot could not be restored");
            tx_remedy(err, TXBOX_REMEDY_RECOVER, NULL);
        }
        (void)tree_remove(c->txfd, "upper");
        (void)tree_remove(c->txfd, "work");
        tx_write_outcome(c->txfd, "failed");
        log_failed(ws, r, c->txfd, c->hctx, err);
        close(c->txfd);
    }
    for (int i = 0; i < 2; i++) {
        if (c->pout[i] >= 0)
            close(c->pout[i]);
        if (c->perr[i] >= 0)
            close(c->perr[i]);
    }
    if (c->upperfd >= 0)
        close(c->upperfd);
    if (c->workfd >= 0)
        close(c->workfd);
    if (r->id)
        ws_end_tx(ws, r->id, c->activefd);
    tx_free_strv(c->hide);
    tx_free_strv(c->state_hide);
    json_decref(c->scrubbed);
    result_free(r);
    run_release(c);
    return -1;
}

int txbox_run_refused(txbox_ws *ws, const txbox_run_opts *opts, const char *verdict, const char *rule_id,
                      const char *reason, txbox_result **out, txbox_error *err)
{
    *out = NULL;
    struct run c = {.ws = ws, .opts = opts, .t0 = now_ns()};
    if (run_begin(&c, err) < 0) {
        run_release(&c);
        return -1;
    }
    run_release(&c);
    c.r->verdict = xstrdup(verdict);
    c.r->rule = xstrdup(rule_id);
    c.r->reason = xstrdup(reason);
    return blocked(ws, opts, c.r, c.t0, out, err);
}

/* ---- late transactions (run.h) ---- */

/* A late transaction's report: at most LATE_PATHS paths of each kind. */
#define LATE_PATHS 100

static json_t *late_report(const txbox_result *r, uint64_t from, const char *why)
{
    json_t *ch = json_object();
    static const char *const kinds[] = {"added", "modified", "deleted"};
    bool trunc = json_is_true(json_object_get(r->changes, "truncated"));
    for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
        json_t *all = json_object_get(r->changes, kinds[k]), *a = json_array();
        for (size_t i = 0; i < json_array_size(all) && i < LATE_PATHS; i++)
            json_array_append(a, json_array_get(all, i));
        trunc = trunc || json_array_size(all) > LATE_PATHS;
        json_object_set_new(ch, kinds[k], a);
    }
    json_object_set_new(ch, "truncated", json_boolean(trunc));
    const char *reason = why;
    if (!reason && r->effect_verdict)
        reason = json_string_value(json_object_get(r->effect_verdict, "reason"));
    char buf[600];
    if (!reason && r->outcome == TXBOX_OUTCOME_CONFLICT) {
        snprintf(buf, sizeof buf,
                 "%s was changed by another transaction meanwhile; kept in .txbox/tx/%s/upper",
                 r->conflict_path ? r->conflict_path : "a path", r->txs);
        reason = buf;
    }
    json_t *o = json_pack("{s:s,s:I,s:s,s:o}", "tx", r->txs, "from_tx", (json_int_t)from, "outcome",
                          txbox_outcome_name(r->outcome), "changes", ch);
    json_object_set_new(o, "from_tx", json_sprintf("%llu", (unsigned long long)from));
    if (reason)
        json_object_set_new(o, "reason", json_string(reason));
    return o;
}

/* The late set, as a transaction of its own (its upper: tx/ID/upper). */
static int late_tx(txbox_ws *ws, txbox_result *r, int ftx, uint64_t base_gen, bool ok, const char *command,
                   const struct txbox_policy *pol, txbox_error *err)
{
    int txfd = -1, activefd = -1, rc;
    if (ws_new_tx(ws, &r->id, &txfd, &activefd, NULL, err) < 0)
        return -1;
    snprintf(r->txs, sizeof r->txs, "%llu", (unsigned long long)r->id);
    txbox_run_opts o = {.shell = command};
    _cleanup_free_ char *hctx = store_context(ws, &o, ws->path, r->started);
    char **hide = tx_hidden_paths(NULL, pol, ws);
    _cleanup_close_ int upperfd = -1;
    rc = renameat(ftx, "late", txfd, "upper") < 0 ? tx_errno(err, errno, "cannot take the late writes") : 0;
    if (rc == 0 && (upperfd = openat(txfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        rc = tx_errno(err, errno, "cannot open the late writes");
    if (rc == 0 && ok) {
        struct gitcfg_ctx gc = {.ws = ws,
                                .txfd = txfd,
                                .txs = r->txs,
                                .hide = (const char *const *)hide,
                                .allow_degraded = false};
        /* no person answers for background processes; the default floor */
        struct overlay_in in = {.ws = ws,
                                .r = r,
                                .txfd = txfd,
                                .upperfd = upperfd,
                                .base_gen = base_gen,
                                .hctx = hctx,
                                .pol = pol,
                                .min_free = -1};
        rc = overlay_commit(&in, &gc, err);
    } else if (rc == 0) {
        struct tx_ops ops = {0};
        rc = scan_upper(upperfd, ws->fd, !ws->root, &ops, NULL, err);
        if (rc == 0)
            r->changes = ops_changes(upperfd, ws->fd, &ops, CHANGES_CAP);
        ops_free(&ops);
        r->outcome = TXBOX_OUTCOME_ROLLED_BACK;
    }
    tx_free_strv(hide);
    if (rc < 0 && r->commit_point_passed) { /* recovery's now (journal.c, I6) */
        close(activefd);
        close(txfd);
        return -1;
    }
    if (rc < 0)
        r->outcome = TXBOX_OUTCOME_ROLLED_BACK;
    if (!r->changes)
        r->changes = json_pack("{s:[],s:[],s:[],s:b}", "added", "modified", "deleted", "truncated", 0);
    if (!r->logged) {
        txbox_error le = {0};
        _cleanup_free_ char *info = store_info(r, hctx);
        if (store_log(ws, r->id, txbox_outcome_name(r->outcome), info, NULL, txfd, &le) < 0)
            r->log_error = xstrdup(le.msg);
    }
    tx_write_outcome(txfd, txbox_outcome_name(r->outcome));
    if (r->outcome != TXBOX_OUTCOME_CONFLICT && r->outcome != TXBOX_OUTCOME_HELD)
        (void)discard_dir(ws, txfd, "upper", r->txs, WS_TRASH_GRANT_DIRS | WS_TRASH_GRANT_FILES);
    close(txfd);
    ws_end_tx(ws, r->id, activefd);
    return rc;
}

int run_late(txbox_ws *ws, uint64_t from, uint64_t base_gen, bool ok, const char *why,
             const txbox_policy *pol, const char *session, const char *command, json_t **out,
             txbox_error *err)
{
    *out = NULL;
    char fromn[32];
    snprintf(fromn, sizeof fromn, "%llu", (unsigned long long)from);
    _cleanup_close_ int ftx = openat(ws->txd, fromn, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ftx < 0)
        return tx_errno(err, errno, "cannot open transaction %s", fromn);
    struct urec rec = {0};
    size_t n = 0;
    int rc = urec_read(ftx, SURVIVORS_REC, &rec, err);
    _cleanup_close_ int live =
        rc < 0 ? -1 : openat(ftx, "live", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rc == 0 && live < 0)
        rc = tx_errno(err, errno, "cannot open the background processes' upper");
    (void)tree_remove(ftx, "late");
    _cleanup_close_ int latefd = rc < 0 ? -1 : make_dir_fd(ftx, "late", ws->fd, err);
    if (rc == 0 && latefd < 0)
        rc = -1;
    if (rc == 0)
        rc = upper_copy(live, latefd, &rec, NULL, ws->root ? "trusted.overlay.opaque" : "user.overlay.opaque",
                        &n, err);
    urec_free(&rec);
    if (rc == 0 && n > 0) {
        txbox_result *r = result_new();
        r->started = wall_time();
        r->backend = "overlay";
        r->session = session ? xstrdup(session) : NULL;
        uint64_t t0 = now_ns();
        rc = late_tx(ws, r, ftx, base_gen, ok, command, pol, err);
        r->duration_ms = (double)(now_ns() - t0) / 1e6;
        if (rc == 0 || !r->commit_point_passed)
            *out = late_report(r, from, rc < 0 ? err->msg : ok ? NULL : why);
        if (rc < 0 && !r->commit_point_passed)
            rc = 0; /* reported: rolled back */
        result_free(r);
    }
    (void)discard_dir(ws, ftx, "late", fromn, WS_TRASH_GRANT_DIRS | WS_TRASH_GRANT_FILES);
    (void)discard_dir(ws, ftx, "live", fromn, WS_TRASH_GRANT_DIRS | WS_TRASH_GRANT_FILES);
    (void)discard_dir(ws, ftx, "work", fromn, WS_TRASH_GRANT_DIRS | WS_TRASH_GRANT_FILES);
    (void)unlinkat(ftx, SURVIVORS_REC, 0);
    ws_end_tx(ws, from, -1);
    return rc;
}

int txbox_run(txbox_ws *ws, const txbox_run_opts *opts, txbox_result **out, txbox_error *err)
{
    *out = NULL;
    struct run c = {.ws = ws,
                    .opts = opts,
                    .t0 = now_ns(),
                    .txfd = -1,
                    .activefd = -1,
                    .upperfd = -1,
                    .workfd = -1,
                    .pout = {-1, -1},
                    .perr = {-1, -1}};
    tx_marks_begin(c.t0);
    sb_status_init(&c.st);
    kp_fds_init(&c.link.fds);
    c.link.sock = -1;
    if (run_begin(&c, err) < 0) {
        run_release(&c);
        return -1;
    }
    /* in a session: linked to it for the run (the late transactions of its
     * background processes come with the answer, blocked or not) */
    if (opts->session) {
        if (sl_attach(opts->session, &c.link, err) < 0) {
            result_free(c.r);
            run_release(&c);
            return -1;
        }
        c.r->session = xstrdup(txbox_session_id(opts->session));
        c.r->session_started = sl_take_started(opts->session);
        c.r->late = c.link.late;
        c.link.late = NULL;
        tx_mark("attach");
    }
    int j = run_judge(&c, err);
    tx_mark("judge");
    if (j == 0 && ws->stateless && !c.read_only)
        j = tx_err(err, EROFS,
                   "the workspace %s takes no writes (its state directory %s cannot be made or written "
                   "there): only a command run read-only can run in it",
                   ws->path, TXBOX_STATE_DIR);
    if (j != 0) {
        run_release(&c);
        if (j > 0)
            return blocked(ws, opts, c.r, c.t0, out, err);
        result_free(c.r);
        return -1;
    }
    run_prestart(&c);
    tx_mark("prestart");
    run_environment(&c);
    tx_mark("environment");
    if (run_new_tx(&c, err) < 0)
        return run_fail(&c, err);
    tx_mark("new-tx");
    if (opts->session)
        run_tmpsync(&c);
    for (;;) {
        int v = run_make_view(&c, err);
        if (v == 0)
            v = run_sandbox(&c, err);
        if (v < 0)
            return run_fail(&c, err);
        if (v == 0)
            break;
        run_fall_back(&c, err);
    }
    if (run_take_status(&c, err) < 0)
        return run_fail(&c, err);
    run_keep(&c);
    int d = run_decide(&c, err);
    if (d == -2)
        return run_leave_to_recovery(&c);
    if (d < 0)
        return run_fail(&c, err);
    run_keep_after(&c, true);
    run_finish(&c);
    run_release(&c);
    *out = c.r;
    return 0;
}
