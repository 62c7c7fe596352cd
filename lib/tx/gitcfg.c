/* Git configuration and hooks, judged by git's own reading.
 *
 * A regular expression over .git/config cannot say what git will do: an
 * include (or a conditional one) pulls settings from another file, a key
 * need not start a line, config.worktree is read only when
 * extensions.worktreeConfig says so, every submodule and worktree has a
 * configuration of its own. So the git the host runs reads it: `git config
 * --list --null --includes --show-scope --show-origin`, inside the sandbox
 * (host read-only, secrets hidden, no network, a private /tmp, stdin
 * /dev/null, a deadline, capped output), with a scrubbed environment (no
 * system or global configuration, HOME pointing nowhere, no pager), once
 * for every repository of the workspace in the before state (the workspace
 * read-only) and in the after state (the transaction's scanned upper
 * mounted read-only over the workspace: what git reads after the commit).
 * Every setting that makes git run a program, or changes what git reads
 * (gitcfg_exec_key), is compared as key=value over every scope; one added,
 * removed or changed is a violation of the rule with `git: config`, named
 * in the reason. An after state git cannot read (a parse error, a fifo
 * named by an include: the deadline, too much output) is one too: fail
 * closed.
 *
 * Hooks: a write under the hooks directory of any repository git knows
 * (gitdir/hooks, and each core.hooksPath, resolved as git does) is a
 * violation of the rule with `git: hooks`.
 *
 * Cost. git runs only when the write set holds something git reads as
 * configuration: a file named config, config.worktree, commondir or gitdir
 * (of a directory with a HEAD), a .git entry itself, or a file the last
 * reading found included (or a HEAD an onbranch: include depends on).
 * What the last reading learned (the repositories, their command settings,
 * the files git read, the hooks directories) is kept in .txbox/gitcfg.json
 * with the identity (inode, size, mtime) of every file it depends on; at
 * every judging those are checked with a stat each, and only when one
 * changed (a commit of configuration, an edit on the host) is the before
 * state read again. An ordinary commit pays a small file read and a few
 * stats. */
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "gitcfg.h"
#include "safepath.h"
#include "sandbox.h"

#define GIT_TIMEOUT_S 5.0
#define GIT_OUTPUT_CAP (1u << 20)
#define CACHE_NAME "gitcfg.json"
#define CACHE_MAX (4u << 20)
#define REPOS_MAX 256      /* repositories read at most (more: the rest unjudged, held) */
#define ENUM_DIRS_MAX 4096 /* directories looked into for repositories */
#define MODULES_DEPTH 6
#define WHY_MAX 600

/* ---- the settings that make git run a program ---- */

/* Keys as git prints them (section and name in lower case; a subsection
 * as written, matched by '*'). Sources: git-config(1) and the pages it
 * points to (githooks, gitattributes, git-credential, git-send-email,
 * git-difftool, git-mergetool, git-web--browse, git-help, git-archive,
 * git-imap-send, git-instaweb, gitremote-helpers, git-lfs-config). */
static const char *const exec_keys[] = {
    /* what git reads, and which hooks */
    "include.*",
    "includeif.*",
    "extensions.worktreeconfig",
    "core.hookspath",
    "init.templatedir",
    /* programs git runs by itself or from ordinary commands */
    "core.fsmonitor",
    "core.sshcommand",
    "core.gitproxy",
    "core.askpass",
    "core.editor",
    "core.pager",
    "pager.*",
    "sequence.editor",
    "core.alternaterefscommand",
    "ssh.variant",
    "diff.external",
    "diff.*.command",
    "diff.*.textconv",
    "diff.tool",
    "diff.guitool",
    "difftool.*.cmd",
    "difftool.*.path",
    "merge.*.driver",
    "merge.tool",
    "merge.guitool",
    "mergetool.*.cmd",
    "mergetool.*.path",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "filter.*.required",
    "gpg.program",
    "gpg.*.program",
    "gpg.format",
    "gpg.ssh.defaultkeycommand",
    "commit.gpgsign",
    "tag.gpgsign",
    "tag.forcesignannotated",
    "rebase.gpgsign",
    "push.gpgsign",
    "credential.helper",
    "credential.*.helper",
    "interactive.difffilter",
    "alias.*",
    "uploadpack.packobjectshook",
    "uploadarchive.*",
    "remote.*.uploadpack",
    "remote.*.receivepack",
    "remote.*.vcs",
    "protocol.allow",
    "protocol.*.allow",
    "submodule.*.update",
    "sendemail.*",
    "web.browser",
    "browser.*.cmd",
    "browser.*.path",
    "help.browser",
    "instaweb.browser",
    "instaweb.httpd",
    "man.viewer",
    "man.*.cmd",
    "man.*.path",
    "tar.*.command",
    "imap.tunnel",
    "guitool.*.cmd",
    "lfs.customtransfer.*",
    "lfs.extension.*",
    "lfs.standalonetransferagent",
    "core.attributesfile",
    "fetch.fsck.*",
    "receive.fsck.*",
    "trace2.*",
    "maintenance.*",
};

/* Transports that run a command: ext:: and fd:: URLs (remote.*.url, and a
 * url.<base>.insteadOf whose base is one). */
static bool command_url(const char *s)
{
    return s && (!strncasecmp(s, "ext::", 5) || !strncasecmp(s, "fd::", 4));
}

bool gitcfg_exec_key(const char *key, const char *value)
{
    size_t n = strlen(key);
    _cleanup_free_ char *low = xmalloc(n + 1);
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)(key[i] >= 'A' && key[i] <= 'Z' ? key[i] + 32 : key[i]);
    for (size_t i = 0; i < ARRAY_SIZE(exec_keys); i++)
        if (fnmatch(exec_keys[i], low, 0) == 0)
            return true;
    if (!strncmp(low, "remote.", 7) &&
        (fnmatch("remote.*.url", low, 0) == 0 || fnmatch("remote.*.pushurl", low, 0) == 0))
        return command_url(value);
    if (!strncmp(low, "url.", 4))
        return command_url(low + 4);
    return false;
}

/* ---- paths ---- */

/* The clean workspace-relative form of p ("" for the root), read
 * lexically (as git names the files it read); NULL outside the workspace. */
static char *ws_rel(const char *ws, const char *p)
{
    size_t wl = strlen(ws);
    if (p[0] == '/') {
        if (strncmp(p, ws, wl) || (p[wl] && p[wl] != '/'))
            return NULL;
        p += wl;
    }
    char *out = xmalloc(strlen(p) + 1);
    size_t o = 0;
    for (const char *c = p; *c;) {
        const char *e = strchrnul(c, '/');
        size_t l = (size_t)(e - c);
        if (l == 0 || (l == 1 && c[0] == '.')) {
            /* nothing */
        } else if (l == 2 && c[0] == '.' && c[1] == '.') {
            if (!o) {
                free(out);
                return NULL;
            }
            while (o && out[o - 1] != '/')
                o--;
            if (o)
                o--;
        } else {
            if (o)
                out[o++] = '/';
            memcpy(out + o, c, l);
            o += l;
        }
        c = *e ? e + 1 : e;
    }
    out[o] = 0;
    return out;
}

static char *path_join(const char *a, const char *b)
{
    return !*a || !strcmp(a, ".") ? xstrdup(b) : xasprintf("%s/%s", a, b);
}

/* Is path dir itself or below it? */
static bool under(const char *path, const char *dir)
{
    if (!*dir)
        return true;
    size_t l = strlen(dir);
    return !strncmp(path, dir, l) && (!path[l] || path[l] == '/');
}

static bool stat_rel(int dfd, const char *rel, struct stat *st)
{
    if (!*rel || !strcmp(rel, "."))
        return fstat(dfd, st) == 0;
    const char *base;
    _cleanup_close_ int p = safe_open_parent(dfd, rel, &base);
    return p >= 0 && fstatat(p, base, st, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool is_reg(int dfd, const char *rel)
{
    struct stat st;
    return stat_rel(dfd, rel, &st) && S_ISREG(st.st_mode);
}

/* ---- the repositories of the before state ---- */

static void add_repo(json_t *repos, const char *g)
{
    if (json_object_size(repos) < REPOS_MAX && !json_object_get(repos, g))
        json_object_set_new(repos, g, json_null());
}

/* Directories with a HEAD below dir (submodules, worktrees), depth-first. */
static void enum_nested(int wsfd, const char *dir, unsigned depth, json_t *repos, unsigned *budget)
{
    if (depth > MODULES_DEPTH || !*budget)
        return;
    (*budget)--;
    _cleanup_close_ int fd = safe_openat(wsfd, dir, O_RDONLY | O_DIRECTORY, 0);
    _cleanup_dir_ DIR *d = fd >= 0 ? fdopendir(take_fd(&fd)) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
            continue;
        if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
            continue;
        _cleanup_free_ char *sub = path_join(dir, de->d_name);
        _cleanup_free_ char *head = path_join(sub, "HEAD");
        if (is_reg(wsfd, head))
            add_repo(repos, sub);
        if (strcmp(de->d_name, "objects") && strcmp(de->d_name, "refs") && strcmp(de->d_name, "logs"))
            enum_nested(wsfd, sub, depth + 1, repos, budget);
    }
}

/* A git directory g found: it, and its submodules and worktrees. */
static void enum_gitdir(int wsfd, const char *g, json_t *repos, unsigned *budget)
{
    add_repo(repos, g);
    struct stat st;
    if (!stat_rel(wsfd, g, &st) || !S_ISDIR(st.st_mode))
        return;
    _cleanup_free_ char *m = path_join(g, "modules"), *w = path_join(g, "worktrees");
    enum_nested(wsfd, m, 0, repos, budget);
    enum_nested(wsfd, w, MODULES_DEPTH, repos, budget); /* one level: worktrees/NAME */
}

static bool is_bare(int wsfd, const char *d)
{
    _cleanup_free_ char *h = path_join(d, "HEAD"), *c = path_join(d, "config"), *o = path_join(d, "objects");
    struct stat st;
    return is_reg(wsfd, h) && is_reg(wsfd, c) && stat_rel(wsfd, o, &st) && S_ISDIR(st.st_mode);
}

/* Repositories in the workspace: at its root (a .git, or bare), and in
 * directories up to two levels down (a workspace of several clones). */
static void enum_dir(int wsfd, const char *dir, unsigned depth, json_t *repos, unsigned *budget)
{
    if (!*budget)
        return;
    (*budget)--;
    _cleanup_free_ char *dotgit = path_join(dir, ".git");
    struct stat st;
    if (stat_rel(wsfd, dotgit, &st))
        enum_gitdir(wsfd, dotgit, repos, budget);
    if (is_bare(wsfd, dir))
        enum_gitdir(wsfd, *dir ? dir : ".", repos, budget);
    if (depth >= 2)
        return;
    _cleanup_close_ int fd = *dir ? safe_openat(wsfd, dir, O_RDONLY | O_DIRECTORY, 0)
                                  : openat(wsfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_dir_ DIR *d = fd >= 0 ? fdopendir(take_fd(&fd)) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d)) && *budget) {
        const char *n = de->d_name;
        if (n[0] == '.' && (!n[1] || !strcmp(n, "..") || !strcmp(n, ".git") || !strcmp(n, TXBOX_STATE_DIR)))
            continue;
        if (!strcmp(n, "node_modules") || (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN))
            continue;
        _cleanup_free_ char *sub = path_join(dir, n);
        if (stat_rel(wsfd, sub, &st) && S_ISDIR(st.st_mode))
            enum_dir(wsfd, sub, depth + 1, repos, budget);
    }
}

/* ---- identities of the files a reading depends on ---- */

/* (A plain fstatat: a stat never blocks, and a symlink on the way only
 * changes which identity is recorded, which any change still alters.) */
static json_t *sig_of(int wsfd, const char *rel)
{
    struct stat st;
    if (fstatat(wsfd, *rel ? rel : ".", &st, AT_SYMLINK_NOFOLLOW) < 0)
        return json_pack("[s]", rel);
    /* a directory: that it is one (its times change with every file git
     * writes in it; what matters in it has a sig of its own) */
    if (S_ISDIR(st.st_mode))
        return json_pack("[s,s]", rel, "dir");
    return json_pack("[s,I,I,I,I]", rel, (json_int_t)st.st_ino, (json_int_t)st.st_size,
                     (json_int_t)st.st_mtim.tv_sec, (json_int_t)st.st_mtim.tv_nsec);
}

static bool sig_holds(int wsfd, json_t *s)
{
    const char *rel = json_string_value(json_array_get(s, 0));
    if (!rel)
        return false;
    json_t *now = sig_of(wsfd, rel);
    bool same = json_equal(now, s);
    json_decref(now);
    return same;
}

/* ---- running git ---- */

struct gitwatch {
    struct gitcfg_ctx c;
    bool config, hooks;
    json_t *cache;      /* {repos: {gitdir: state}, sig: [...], watch: [...], hookdirs: [...]} */
    json_t *candidates; /* {gitdir: null}: repositories the write set touches */
    bool triggered;
    json_t *hook_paths;
    size_t nhooks;
    char *fail; /* the before state could not be read: why */
};

static void pump(void *ctx, int stream, const char *data, size_t n)
{
    dbuf *b = ctx;
    dbuf_add(&b[stream == 1 ? 0 : 1], data, n);
}

static const char *git_program(void)
{
    static const char *const dirs[] = {"/usr/bin/git", "/usr/local/bin/git", "/bin/git"};
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
        if (access(dirs[i], X_OK) == 0)
            return dirs[i];
    return NULL;
}

/* One repository's state as read: {state: ok|absent|error, exec: [key=value...],
 * origins: [...], hookdirs: [...], onbranch: bool}. */
static json_t *state_new(const char *s)
{
    return json_pack("{s:s,s:[],s:[],s:[],s:b}", "state", s, "exec", "origins", "hookdirs", "onbranch", 0);
}

/* The worktree top of git directory g, where relative hooks paths start:
 * the directory holding a .git, else (bare, a submodule's or worktree's
 * git directory, whose worktree git finds elsewhere) g itself. */
static char *hooks_base(const char *g)
{
    const char *s = strrchr(g, '/');
    const char *last = s ? s + 1 : g;
    if (!strcmp(last, ".git"))
        return s ? xasprintf("%.*s", (int)(s - g), g) : xstrdup("");
    return xstrdup(g);
}

/* A path a setting names, as git resolves it against base (NULL: an
 * absolute one only), workspace-relative; NULL when it leads outside the
 * workspace or starts with ~ (the home). */
static char *setting_path(const char *ws, const char *base, const char *value)
{
    if (value[0] == '~' || (!base && value[0] != '/'))
        return NULL;
    _cleanup_free_ char *p = value[0] == '/' ? xstrdup(value) : path_join(base, value);
    return ws_rel(ws, p);
}

/* The directory of the file a setting came from (origin "file:PATH"),
 * NULL for another origin (the command line, a blob). */
static char *origin_dir(const char *origin)
{
    if (strncmp(origin, "file:", 5))
        return NULL;
    const char *of = origin + 5, *sl = strrchr(of, '/');
    return sl ? xasprintf("%.*s", (int)(sl - of), of) : xstrdup("");
}

static void state_entry(const char *ws, const char *g, json_t *st, const char *origin, const char *kv)
{
    const char *nl = strchr(kv, '\n');
    _cleanup_free_ char *key = nl ? xasprintf("%.*s", (int)(nl - kv), kv) : xstrdup(kv);
    const char *value = nl ? nl + 1 : NULL;
    if (!strncmp(origin, "file:", 5)) {
        _cleanup_free_ char *rel = ws_rel(ws, origin + 5);
        if (rel) {
            json_t *o = json_object_get(st, "origins");
            bool dup = false;
            size_t i;
            json_t *x;
            json_array_foreach(o, i, x) dup = dup || !strcmp(json_string_value(x), rel);
            if (!dup && json_array_size(o) < 256)
                json_array_append_new(o, json_string(rel));
        }
    }
    if (!strncasecmp(key, "includeif.onbranch:", 19))
        json_object_set_new(st, "onbranch", json_true());
    /* a file an include names, read or not (its condition may hold later,
     * or it may not exist yet): written, it changes the configuration */
    size_t kl = strlen(key);
    _cleanup_free_ char *dir = origin_dir(origin);
    if (value && *value && dir &&
        (!strcasecmp(key, "include.path") ||
         (!strncasecmp(key, "includeif.", 10) && kl > 5 && !strcasecmp(key + kl - 5, ".path")))) {
        _cleanup_free_ char *rel = setting_path(ws, dir, value);
        json_t *o = json_object_get(st, "origins");
        if (rel && *rel && json_array_size(o) < 256)
            json_array_append_new(o, json_string(rel));
    }
    if (!strcasecmp(key, "core.hookspath") && value && *value) {
        _cleanup_free_ char *base = hooks_base(g);
        _cleanup_free_ char *rel = setting_path(ws, base, value);
        if (rel)
            json_array_append_new(json_object_get(st, "hookdirs"), json_string(rel));
    }
    /* core.worktree decides where the person's next git checkout writes
     * and git clean deletes: judged by its value, one that leads outside
     * the workspace counts (relative: to the git directory, as git reads
     * it, which holds the file that sets it; ~: the home). A submodule's,
     * which git writes, stays inside. */
    bool outside_worktree = false;
    if (!strcasecmp(key, "core.worktree") && value && *value) {
        _cleanup_free_ char *rel = setting_path(ws, dir, value);
        outside_worktree = rel == NULL;
    }
    if (outside_worktree || gitcfg_exec_key(key, value)) {
        _cleanup_free_ char *e = value ? xasprintf("%s=%s", key, value) : xstrdup(key);
        json_array_append_new(json_object_get(st, "exec"), json_string(e));
    }
}

/* Parses the script's output into {gitdir: state}; NULL when it is not
 * what the script writes. */
static json_t *parse_output(const char *ws, const char *d, size_t n)
{
    json_t *res = json_object();
    json_t *st = NULL;
    const char *g = NULL;
    const char *end = d + n;
    while (d < end) {
        const char *f = d;
        const char *z = memchr(d, 0, (size_t)(end - d));
        if (!z)
            break;
        d = z + 1;
        if (f[0] == '\036') { /* a repository starts */
            g = f + 1;
            st = state_new("ok");
            json_object_set_new(res, g, st);
            _cleanup_free_ char *h = path_join(strcmp(g, ".") ? g : "", "hooks");
            json_array_append_new(json_object_get(st, "hookdirs"), json_string(h));
            continue;
        }
        if (!st)
            goto bad;
        if (f[0] == '\035') {
            json_object_set_new(st, "state", json_string("absent"));
            json_array_clear(json_object_get(st, "hookdirs"));
            continue;
        }
        if (f[0] == '\037') {
            json_object_set_new(st, "state", json_string("error"));
            continue;
        }
        /* scope \0 origin \0 key[\nvalue] \0 */
        const char *z2 = memchr(d, 0, (size_t)(end - d));
        if (!z2)
            goto bad;
        const char *origin = d;
        d = z2 + 1;
        const char *z3 = memchr(d, 0, (size_t)(end - d));
        if (!z3)
            goto bad;
        const char *kv = d;
        d = z3 + 1;
        state_entry(ws, g, st, origin, kv);
    }
    if (d == end)
        return res;
bad:
    json_decref(res);
    return NULL;
}

/* The script run in the sandbox: for each git directory, a marker and
 * git's listing (or a marker for none, or for git's failure). GIT_DIR
 * names the repository: nothing is discovered, and a .git file
 * (gitdir: ...) is followed as git follows it. GIT_WORK_TREE stands for
 * the work tree, which listing the configuration never reads: git would
 * otherwise enter core.worktree, and fail where it is gone (a submodule's
 * directory removed or moved: its git directory stays, and so does what
 * its configuration says). */
static const char script[] =
    "g=$1; shift\n"
    "for d do\n"
    "  printf '\\036%s\\0' \"$d\"\n"
    "  if [ -f \"$d/HEAD\" ] || { [ -f \"$d\" ] && [ ! -d \"$d\" ]; }; then\n"
    "    GIT_DIR=$d GIT_WORK_TREE=/ \"$g\" --no-pager config --list --null --includes --show-scope --show-origin"
    " </dev/null || printf '\\037%s\\0' \"$?\"\n"
    "  else printf '\\035\\0'; fi\n"
    "done\n";

static int mkdir_in(int at, const char *name)
{
    if (mkdirat(at, name, 0700) < 0 && errno != EEXIST)
        return -1;
    return openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Reads the git directories of repos (an object's keys) in the before
 * (after: false) or after state. *out: {gitdir: state}; *why: why it
 * could not (then *out is NULL). */
static int read_states(const struct gitcfg_ctx *c, bool after, json_t *repos, json_t **out, char **why,
                       txbox_error *err)
{
    *out = NULL;
    *why = NULL;
    const char *git = git_program();
    if (!git) {
        *why = xstrdup("git was not found to read the configuration");
        return 0;
    }
    size_t n = json_object_size(repos), k = 0;
    if (!n) {
        *out = json_object();
        return 0;
    }
    _cleanup_free_ char **argv = xcalloc(n + 6, sizeof *argv);
    char sh[] = "/bin/sh", dc[] = "-c", zero[] = "sh";
    argv[k++] = sh;
    argv[k++] = dc;
    argv[k++] = (char *)script;
    argv[k++] = zero;
    argv[k++] = (char *)git;
    const char *g;
    json_t *v;
    json_object_foreach(repos, g, v) argv[k++] = (char *)g;
    static char e0[] = "PATH=/usr/bin:/bin", e1[] = "HOME=/nonexistent/txbox-git-judge", e2[] = "LC_ALL=C",
                e3[] = "GIT_CONFIG_NOSYSTEM=1", e4[] = "GIT_CONFIG_GLOBAL=/dev/null", e5[] = "GIT_PAGER=cat",
                e6[] = "PAGER=cat", e7[] = "GIT_TERMINAL_PROMPT=0", e8[] = "GIT_OPTIONAL_LOCKS=0";
    char *envp[] = {e0, e1, e2, e3, e4, e5, e6, e7, e8, NULL};
    char lower_rel[96], lw_rel[96], u_rel[96], w_rel[96], name[48];
    snprintf(lower_rel, sizeof lower_rel, "%s/tx/%s/upper", TXBOX_STATE_DIR, c->txs);
    snprintf(lw_rel, sizeof lw_rel, "%s/tx/%s/gitcfg/lw", TXBOX_STATE_DIR, c->txs);
    snprintf(u_rel, sizeof u_rel, "%s/tx/%s/gitcfg/u", TXBOX_STATE_DIR, c->txs);
    snprintf(w_rel, sizeof w_rel, "%s/tx/%s/gitcfg/w", TXBOX_STATE_DIR, c->txs);
    snprintf(name, sizeof name, "%s-git%s", c->txs, after ? "a" : "b");
    _cleanup_close_ int lower = -1, gd = -1, lw = -1, u = -1, w = -1, devnull = -1;
    if (after) {
        lower = openat(c->txfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        gd = mkdir_in(c->txfd, "gitcfg");
        if (lower < 0 || gd < 0 || (lw = mkdir_in(gd, "lw")) < 0 || (u = mkdir_in(gd, "u")) < 0 ||
            (w = mkdir_in(gd, "w")) < 0)
            return tx_errno(err, errno, "cannot prepare git's view of the changes");
    }
    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    if (devnull < 0 || pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0)
                close(po[i]);
            if (pe[i] >= 0)
                close(pe[i]);
        }
        return tx_errno(err, e, "cannot prepare git's run");
    }
    struct sb_spec spec = {
        .ws_path = c->ws->path,
        .ws_fd = c->ws->fd,
        .view = after ? SB_VIEW_OVERLAY : SB_VIEW_READONLY,
        .upper_fd = u,
        .work_fd = w,
        .upper_rel = u_rel,
        .work_rel = w_rel,
        .lower_fd = after ? lower : -1,
        .lower_rel = after ? lower_rel : NULL,
        .lower_work_fd = lw,
        .lower_work_rel = after ? lw_rel : NULL,
        .cwd = c->ws->path,
        .argv = argv,
        .envp = envp,
        .in_fd = devnull,
        .out_fd = po[1],
        .err_fd = pe[1],
        .timeout_s = GIT_TIMEOUT_S,
        .limits = {.cpu_s = 10, .file_size = 1u << 20},
        .pids_max = 64,
        .memory_max = 512ull << 20,
        /* no cap on the filesystem's free space: it is shared, and a
         * concurrent writer would stop git (git writes nothing; file_size
         * caps any file anyway) */
        .max_write = 0,
        .hide = c->hide,
        .allow_degraded = c->allow_degraded,
        .name = name,
    };
    dbuf b[2];
    dbuf_init(&b[0], GIT_OUTPUT_CAP);
    dbuf_init(&b[1], 4096);
    struct sb_status st = {0};
    int rc = sb_run(&spec, po[0], pe[0], pump, b, &st, err);
    close(po[0]);
    close(pe[0]);
    json_decref(st.protections);
    if (after) {
        if (ws_trash(c->ws, c->txfd, "gitcfg", c->txs, WS_TRASH_GRANT_DIRS | WS_TRASH_GRANT_FILES) < 0)
            (void)tree_remove(c->txfd, "gitcfg");
    }
    if (rc < 0) {
        *why = xasprintf("git could not be run to read the configuration (%s)", err->msg);
        memset(err, 0, sizeof *err);
    } else if (st.timed_out) {
        *why = xasprintf(
            "git did not finish reading the configuration in %.0f s (an include naming a fifo or a device?)",
            GIT_TIMEOUT_S);
    } else if (b[0].dropped) {
        *why = xasprintf("git's listing of the configuration exceeds %u bytes", GIT_OUTPUT_CAP);
    } else if (!st.exited || !WIFEXITED(st.wstatus) || WEXITSTATUS(st.wstatus) != 0) {
        const char *e = dbuf_str(&b[1]);
        *why = xasprintf("git could not list the configuration (%s %d)%s%.*s",
                         !st.exited              ? "not exited"
                         : WIFEXITED(st.wstatus) ? "status"
                                                 : "signal",
                         !st.exited              ? 0
                         : WIFEXITED(st.wstatus) ? WEXITSTATUS(st.wstatus)
                                                 : WTERMSIG(st.wstatus),
                         *e ? ": " : "", (int)strcspn(e, "\n"), e);
    } else if (!(*out = parse_output(c->ws->path, b[0].p ? b[0].p : "", b[0].len))) {
        *why = xstrdup("git's listing of the configuration could not be read");
    }
    dbuf_free(&b[0]);
    dbuf_free(&b[1]);
    return 0;
}

/* ---- the cache ---- */

static json_t *cache_load(txbox_ws *ws)
{
    _cleanup_free_ char *s = NULL;
    size_t len = 0;
    txbox_error e = {0};
    if (read_file_at(ws->sfd, CACHE_NAME, CACHE_MAX, &s, &len, &e) < 0)
        return NULL;
    json_t *c = json_loadb(s, len, 0, NULL);
    json_t *sig = json_object_get(c, "sig");
    if (!json_is_object(json_object_get(c, "repos")) || !json_is_array(sig) ||
        json_integer_value(json_object_get(c, "v")) != 1) {
        json_decref(c);
        return NULL;
    }
    size_t i;
    json_t *x;
    json_array_foreach(sig, i, x) if (!sig_holds(ws->fd, x))
    {
        json_decref(c);
        return NULL;
    }
    return c;
}

static void cache_save(txbox_ws *ws, json_t *c)
{
    _cleanup_free_ char *s = json_dumps(c, JSON_COMPACT);
    if (!s)
        return;
    _cleanup_close_ int fd =
        openat(ws->sfd, CACHE_NAME ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    /* a cache: not fsync'd; a torn one fails to load and is read again */
    if (fd < 0 || write_all(fd, s, strlen(s)) < 0 ||
        renameat(ws->sfd, CACHE_NAME ".tmp", ws->sfd, CACHE_NAME) < 0)
        (void)unlinkat(ws->sfd, CACHE_NAME ".tmp", 0);
}

static void add_unique(json_t *arr, const char *s)
{
    size_t i;
    json_t *x;
    json_array_foreach(arr, i, x) if (!strcmp(json_string_value(x), s)) return;
    json_array_append_new(arr, json_string(s));
}

/* A file git read through a symlink (its name as git printed it): the
 * files the links lead to inside the workspace are watched too, or a
 * write to the target would go unseen. */
static void watch_link_targets(int wsfd, const char *ws, const char *o, json_t *watch, json_t *sig,
                               json_t *seen)
{
    _cleanup_free_ char *cur = xstrdup(o);
    for (int hop = 0; hop < 8; hop++) {
        const char *base;
        _cleanup_close_ int pfd = safe_open_parent(wsfd, cur, &base);
        char t[4096];
        ssize_t n = pfd >= 0 ? readlinkat(pfd, base, t, sizeof t - 1) : -1;
        if (n <= 0)
            return;
        t[n] = 0;
        const char *sl = strrchr(cur, '/');
        _cleanup_free_ char *dir = sl ? xasprintf("%.*s", (int)(sl - cur), cur) : xstrdup("");
        _cleanup_free_ char *p = t[0] == '/' ? xstrdup(t) : path_join(dir, t);
        char *rel = ws_rel(ws, p);
        if (!rel || !*rel) {
            free(rel);
            return;
        }
        add_unique(watch, rel);
        if (!json_object_get(seen, rel)) {
            json_object_set_new(seen, rel, json_true());
            json_array_append_new(sig, sig_of(wsfd, rel));
        }
        free(cur);
        cur = rel;
    }
}

/* The cache of states (the before state of every repository in repos). */
static json_t *cache_build(txbox_ws *ws, json_t *repos, json_t *states)
{
    json_t *sig = json_array(), *watch = json_array(), *hookdirs = json_array();
    json_t *seen = json_object();
    static const char *const files[] = {"", "config", "config.worktree", "commondir"};
    const char *g;
    json_t *v;
    json_array_append_new(sig, sig_of(ws->fd, ".git"));
    json_object_set_new(seen, ".git", json_true());
    json_object_foreach(repos, g, v)
    {
        json_t *st = json_object_get(states, g);
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
            _cleanup_free_ char *p = *files[i] ? path_join(strcmp(g, ".") ? g : "", files[i]) : xstrdup(g);
            if (!json_object_get(seen, p)) {
                json_object_set_new(seen, p, json_true());
                json_array_append_new(sig, sig_of(ws->fd, p));
            }
        }
        size_t i;
        json_t *x;
        json_array_foreach(json_object_get(st, "origins"), i, x)
        {
            const char *o = json_string_value(x);
            if (!json_object_get(seen, o)) {
                json_object_set_new(seen, o, json_true());
                json_array_append_new(sig, sig_of(ws->fd, o));
            }
            add_unique(watch, o);
            watch_link_targets(ws->fd, ws->path, o, watch, sig, seen);
        }
        json_array_foreach(json_object_get(st, "hookdirs"), i, x) add_unique(hookdirs, json_string_value(x));
        if (json_is_true(json_object_get(st, "onbranch"))) {
            _cleanup_free_ char *h = path_join(strcmp(g, ".") ? g : "", "HEAD");
            add_unique(watch, h);
        }
    }
    json_decref(seen);
    return json_pack("{s:i,s:O,s:o,s:o,s:o}", "v", 1, "repos", states, "sig", sig, "watch", watch, "hookdirs",
                     hookdirs);
}

/* ---- one judging ---- */

struct gitwatch *gitwatch_begin(const struct gitcfg_ctx *c, bool config, bool hooks)
{
    struct gitwatch *w = xcalloc(1, sizeof *w);
    w->c = *c;
    w->config = config;
    w->hooks = hooks;
    w->candidates = json_object();
    w->hook_paths = json_array();
    w->cache = cache_load(c->ws);
    if (w->cache)
        return w;
    /* read the before state again: the repositories, then git */
    json_t *repos = json_object();
    unsigned budget = ENUM_DIRS_MAX;
    enum_dir(c->ws->fd, "", 0, repos, &budget);
    json_t *states = NULL;
    char *why = NULL;
    txbox_error e = {0};
    if (read_states(c, false, repos, &states, &why, &e) < 0)
        why = xstrdup(e.msg);
    if (!states) {
        w->fail = why ? why : xstrdup("the configuration could not be read");
        json_decref(repos);
        return w;
    }
    free(why);
    w->cache = cache_build(c->ws, repos, states);
    json_decref(repos);
    json_decref(states);
    cache_save(c->ws, w->cache);
    return w;
}

/* A hooks directory at the workspace root (core.hooksPath = .): only
 * files named as hooks count there. githooks(5). */
static bool is_hook_name(const char *name)
{
    static const char *const hooks[] = {
        "applypatch-msg",
        "pre-applypatch",
        "post-applypatch",
        "pre-commit",
        "pre-merge-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "pre-rebase",
        "post-checkout",
        "post-merge",
        "pre-push",
        "pre-receive",
        "update",
        "proc-receive",
        "post-receive",
        "post-update",
        "reference-transaction",
        "push-to-checkout",
        "pre-auto-gc",
        "post-rewrite",
        "sendemail-validate",
        "fsmonitor-watchman",
        "p4-changelist",
        "p4-prepare-changelist",
        "p4-post-changelist",
        "p4-pre-submit",
        "post-index-change",
    };
    for (size_t i = 0; i < ARRAY_SIZE(hooks); i++)
        if (!strcmp(name, hooks[i]))
            return true;
    return false;
}

/* A file name git reads as configuration (or that says where it is). */
static bool config_name(const char *base)
{
    return !strcmp(base, "config") || !strcmp(base, "config.worktree") || !strcmp(base, "commondir") ||
           !strcmp(base, "gitdir") || !strcmp(base, ".git");
}

void gitwatch_note(struct gitwatch *w, const char *path, bool deleted)
{
    (void)deleted;
    if (!w)
        return;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (w->config && config_name(base)) {
        _cleanup_free_ char *dir = !strcmp(base, ".git") ? xstrdup(path)
                                   : slash               ? xasprintf("%.*s", (int)(slash - path), path)
                                                         : xstrdup(".");
        if (json_object_size(w->candidates) < REPOS_MAX)
            json_object_set_new(w->candidates, dir, json_null());
        else
            w->triggered = true; /* more than can be read: held below */
    }
    json_t *c = w->cache;
    if (w->config && !strcmp(base, "HEAD")) {
        /* a HEAD makes a directory a repository: one the last reading did
         * not know as one is read (a known one's HEAD counts only for an
         * onbranch: include, in watch) */
        _cleanup_free_ char *dir = slash ? xasprintf("%.*s", (int)(slash - path), path) : xstrdup(".");
        json_t *st = json_object_get(json_object_get(c, "repos"), dir);
        const char *s = json_string_value(json_object_get(st, "state"));
        if ((!s || strcmp(s, "ok")) && json_object_size(w->candidates) < REPOS_MAX)
            json_object_set_new(w->candidates, dir, json_null());
    }
    size_t i;
    json_t *x;
    if (w->config)
        json_array_foreach(json_object_get(c, "watch"), i, x) if (!strcmp(json_string_value(x), path))
            w->triggered = true;
    if (w->hooks)
        json_array_foreach(json_object_get(c, "hookdirs"), i, x)
        {
            const char *d = json_string_value(x);
            if (*d ? under(path, d) && strcmp(path, d) : is_hook_name(path)) {
                if (w->nhooks++ < 50)
                    json_array_append_new(w->hook_paths, json_string(path));
                break;
            }
        }
}

/* A candidate git directory that can be one in either state: a .git, or
 * a directory with a HEAD. */
static bool may_be_repo(const struct gitwatch *w, int upperfd, const char *g)
{
    const char *s = strrchr(g, '/');
    if (!strcmp(s ? s + 1 : g, ".git") || json_object_get(json_object_get(w->cache, "repos"), g))
        return true;
    _cleanup_free_ char *h = path_join(strcmp(g, ".") ? g : "", "HEAD");
    struct stat st;
    return stat_rel(upperfd, h, &st) || stat_rel(w->c.ws->fd, h, &st);
}

/* key=value strings of a in no place of b (a multiset difference). */
static void diff_into(json_t *a, json_t *b, json_t *out)
{
    json_t *left = json_deep_copy(b);
    size_t i, k;
    json_t *x, *y;
    json_array_foreach(a, i, x)
    {
        bool found = false;
        json_array_foreach(left, k, y) if (json_equal(x, y))
        {
            json_array_remove(left, k);
            found = true;
            break;
        }
        if (!found)
            json_array_append(out, x);
    }
    json_decref(left);
}

static void why_add(dbuf *b, const char *s)
{
    if (b->len)
        dbuf_addstr(b, "; ");
    dbuf_addstr(b, s);
}

/* The key of a key=value string, shown (never the value: it may hold a
 * secret, such as a URL with a password). */
static char *key_of(const char *kv)
{
    const char *eq = strchr(kv, '=');
    return eq ? xasprintf("%.*s", (int)(eq - kv), kv) : xstrdup(kv);
}

int gitwatch_end(struct gitwatch *w, struct gitwatch_out *out, txbox_error *err)
{
    memset(out, 0, sizeof *out);
    if (w->nhooks) {
        out->hooks_why = xasprintf("writes %zu file%s in a hooks directory git runs from", w->nhooks,
                                   w->nhooks > 1 ? "s" : "");
        out->hook_paths = json_incref(w->hook_paths);
    }
    if (!w->config)
        return 0;
    _cleanup_close_ int upperfd = openat(w->c.txfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    json_t *known = json_object_get(w->cache, "repos");
    json_t *repos = json_object(), *newrepos = json_object();
    const char *g;
    json_t *v;
    json_object_foreach(w->candidates, g, v) if (may_be_repo(w, upperfd, g))
    {
        json_object_set_new(repos, g, json_null());
        if (!json_object_get(known, g))
            json_object_set_new(newrepos, g, json_null());
    }
    if (!json_object_size(repos) && !w->triggered) {
        json_decref(repos);
        json_decref(newrepos);
        return 0;
    }
    if (w->fail) { /* the before state could not be read: nothing to compare with */
        out->config_why = xasprintf("%s (before this change)", w->fail);
        out->config_paths = json_array();
        json_decref(repos);
        json_decref(newrepos);
        return 0;
    }
    json_object_foreach(known, g, v) json_object_set_new(repos, g, json_null());
    /* before: the cache, and any repository it does not know (read now) */
    json_t *before = json_deep_copy(known);
    char *why = NULL;
    if (json_object_size(newrepos)) {
        json_t *more = NULL;
        if (read_states(&w->c, false, newrepos, &more, &why, err) < 0)
            goto fail;
        json_object_update(before, more);
        json_decref(more);
    }
    json_t *after = NULL;
    if (!why && read_states(&w->c, true, repos, &after, &why, err) < 0)
        goto fail;
    dbuf b;
    dbuf_init(&b, WHY_MAX);
    out->config_paths = json_array();
    if (why) {
        why_add(&b, why);
    } else {
        json_object_foreach(repos, g, v)
        {
            json_t *a = json_object_get(after, g), *bf = json_object_get(before, g);
            const char *as = json_string_value(json_object_get(a, "state"));
            const char *bs = json_string_value(json_object_get(bf, "state"));
            if (!as || !strcmp(as, "absent"))
                continue;
            if (!strcmp(as, "error")) {
                if (!bs || strcmp(bs, "error")) {
                    _cleanup_free_ char *m =
                        xasprintf("git cannot read the configuration of %s after this change", g);
                    why_add(&b, m);
                    json_array_append_new(out->config_paths, json_string(g));
                }
                continue;
            }
            json_t *added = json_array(), *removed = json_array();
            json_t *empty = json_array();
            json_t *bx = bs && !strcmp(bs, "ok") ? json_object_get(bf, "exec") : empty;
            diff_into(json_object_get(a, "exec"), bx, added);
            diff_into(bx, json_object_get(a, "exec"), removed);
            size_t i;
            json_t *x;
            json_array_foreach(added, i, x)
            {
                _cleanup_free_ char *k = key_of(json_string_value(x));
                _cleanup_free_ char *m = xasprintf("%s set in %s", k, g);
                why_add(&b, m);
            }
            json_array_foreach(removed, i, x)
            {
                _cleanup_free_ char *k = key_of(json_string_value(x));
                _cleanup_free_ char *m = xasprintf("%s removed in %s", k, g);
                why_add(&b, m);
            }
            if (json_array_size(added) || json_array_size(removed))
                json_array_append_new(out->config_paths, json_string(g));
            json_decref(added);
            json_decref(removed);
            json_decref(empty);
        }
    }
    if (b.len || b.dropped)
        out->config_why = b.dropped ? xasprintf("%s ...", dbuf_str(&b)) : xstrdup(dbuf_str(&b));
    dbuf_free(&b);
    free(why);
    json_decref(after);
    json_decref(before);
    json_decref(repos);
    json_decref(newrepos);
    return 0;
fail:
    free(why);
    json_decref(before);
    json_decref(repos);
    json_decref(newrepos);
    gitwatch_out_free(out);
    return -1;
}

void gitwatch_free(struct gitwatch *w)
{
    if (!w)
        return;
    json_decref(w->cache);
    json_decref(w->candidates);
    json_decref(w->hook_paths);
    free(w->fail);
    free(w);
}

void gitwatch_out_free(struct gitwatch_out *o)
{
    free(o->config_why);
    free(o->hooks_why);
    json_decref(o->config_paths);
    json_decref(o->hook_paths);
    memset(o, 0, sizeof *o);
}
