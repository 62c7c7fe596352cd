/* Rules on effects: judging what a transaction actually wrote.
 *
 * After scan_upper() has turned a transaction's upper into operations (the
 * exact write set) and before its commit point, effects_judge() walks that
 * write set as entries, each added, modified or deleted (a replaced or
 * deleted directory counts with everything in it), and feeds them to the
 * policy's judge (policy/effect_rules.c: the matchers, the limits and the
 * verdict), reading the first CONTENT_CAP bytes of the new and old content
 * of a file when a rule looks at content; the rules with `git:` are judged
 * from git's reading of the after state (gitcfg.c). effects_gate_run()
 * decides a single run: commit, reject, or hold (held.c). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "effects.h"
#include "fsops.h"
#include "gitcfg.h"
#include "losses.h"
#include "result.h"
#include "safepath.h"
#include "store.h"

#define CONTENT_CAP (1u << 20)      /* bytes of a file the content rules read */
#define CONTENT_BUDGET (256u << 20) /* bytes read per transaction at most */
#define BINARY_PROBE 8000           /* a NUL byte in these makes a file binary (as git) */

/* ---- the write set of a transaction, as entries ---- */

struct walk {
    txbox_ws *ws;
    struct effect_judge *j;
    struct gitwatch *gw; /* the rules with git: (NULL: none active) */
    int upperfd, wsfd;
    uint64_t budget; /* content bytes left to read */
    txbox_error *err;
    /* read_head's buffers (new content, old content), reused from file to
     * file: a fresh buffer for each file faulted its pages in every time
     * (12 us each on this project's VMs: a third of the judging) */
    char *buf[2];
    size_t cap[2];
    /* the workspace root's links into the workspace (find_aliases) */
    struct alias {
        char *target, *name; /* target: relative to the root ("" the root) */
        size_t tlen;
    } * al;
    size_t nal;
};

#define ALIASES_CAP 64 /* links at the root that lead inside, followed */

/* One entry to the judge, and to git's watch when rules with git: are on;
 * an entry under a place a root link leads to is judged under the link's
 * name too (the name a host program reads: the user's own `.claude ->
 * config/claude` makes config/claude/settings.json Claude Code's). */
static void feed(struct walk *w, const struct effect_entry *e)
{
    if (w->gw)
        gitwatch_note(w->gw, e->path, e->kind == EFF_DELETED);
    effect_judge_feed(w->j, e);
    for (size_t i = 0; i < w->nal; i++) {
        const struct alias *a = &w->al[i];
        const char *rest = e->path + a->tlen;
        if (strncmp(e->path, a->target, a->tlen) || (a->tlen && *rest && *rest != '/'))
            continue;
        _cleanup_free_ char *p = xasprintf("%s%s%s", a->name, a->tlen || !*rest ? "" : "/", rest);
        struct effect_entry c = *e;
        c.path = p;
        c.alias = true;
        effect_judge_feed(w->j, &c);
    }
}

/* The workspace root's symbolic links whose target, resolved, lies in the
 * workspace (ws: its resolved path): what the host reads under the link's
 * name is written under the target's. Links the transaction makes are
 * judged by their own name. */
static void find_aliases(struct walk *w, const char *ws)
{
    int fd = ws ? openat(w->wsfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    size_t wl = strlen(ws);
    struct dirent *de;
    while ((de = readdir(d)) && w->nal < ALIASES_CAP) {
        struct stat st;
        if (de->d_type != DT_LNK &&
            (de->d_type != DT_UNKNOWN || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
             !S_ISLNK(st.st_mode)))
            continue;
        _cleanup_free_ char *full = xasprintf("%s/%s", ws, de->d_name);
        _cleanup_free_ char *r = realpath(full, NULL);
        if (!r || strncmp(r, ws, wl) || (r[wl] && r[wl] != '/'))
            continue;
        w->al = xrealloc(w->al, (w->nal + 1) * sizeof *w->al);
        w->al[w->nal].target = xstrdup(r[wl] ? r + wl + 1 : "");
        w->al[w->nal].tlen = strlen(w->al[w->nal].target);
        w->al[w->nal].name = xstrdup(de->d_name);
        w->nal++;
    }
    closedir(d);
}

/* Opens name under dfd for reading; an entry of the upper without owner
 * read (and search) permission is given it for the open, then has its mode
 * back (grant: true in the upper only, never in the workspace). */
static int open_read(int dfd, const char *name, bool dir, bool grant)
{
    int fl = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | (dir ? O_DIRECTORY : 0);
    int fd = openat_noatime(dfd, name, fl);
    if (fd >= 0 || errno != EACCES || !grant)
        return fd;
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -1;
    mode_t need = dir ? S_IRUSR | S_IXUSR : S_IRUSR;
    if (fchmodat(dfd, name, (st.st_mode & 07777) | need, 0) < 0)
        return -1;
    fd = openat_noatime(dfd, name, fl);
    int e = errno;
    if (fchmodat(dfd, name, st.st_mode & 07777, 0) < 0 && fd >= 0) {
        close(fd);
        fd = -1;
        e = errno;
    }
    errno = e;
    return fd;
}

/* The first bytes of fd (at most CONTENT_CAP, the budget left, and the
 * file's size, size: a buffer per file, no larger than it). */
static char *read_head(struct walk *w, int which, int fd, uint64_t size, size_t *len)
{
    size_t cap = CONTENT_CAP < w->budget ? CONTENT_CAP : (size_t)w->budget;
    if (size < cap)
        cap = (size_t)size;
    if (w->cap[which] < cap + 1) {
        free(w->buf[which]);
        w->cap[which] = cap + 1 > 65536 ? cap + 1 : 65536;
        w->buf[which] = xmalloc(w->cap[which]);
    }
    char *buf = w->buf[which];
    ssize_t n = cap ? read_all(fd, buf, cap) : 0;
    if (n < 0)
        n = 0;
    buf[n] = 0;
    *len = (size_t)n;
    w->budget -= (uint64_t)n;
    return buf;
}

/* e->from, e->to: the lines of a modified file's new content that differ
 * from its old one. The patterns are compiled with REG_NEWLINE, so a match
 * of a pattern without a newline in it lies within one line; one within
 * the lines both contents share before the first difference, or after the
 * last (when both were read whole), has its text in the old content at
 * the same place and never counts. Scanning only the lines in between
 * finds every match that can: an appended line or an edit costs a line's
 * regexec, not the file's (glibc's regexec runs at tens of MB/s). A rule
 * with a multiline pattern scans everything (search_range). */
static void content_window(struct effect_entry *e, bool whole)
{
    if (!e->old || !e->data)
        return;
    size_t n = e->len < e->oldlen ? e->len : e->oldlen, p = 0, q = 0;
    while (p < n && e->data[p] == e->old[p])
        p++;
    if (whole)
        while (q < n - p && e->data[e->len - 1 - q] == e->old[e->oldlen - 1 - q])
            q++;
    /* from the start of the line holding the first difference to the end
     * of the line holding the last (a deletion: the line it joined) */
    size_t a = p, b = e->len - q;
    while (a > 0 && e->data[a - 1] != '\n')
        a--;
    const char *nl = b < e->len ? memchr(e->data + b, '\n', e->len - b) : NULL;
    e->from = a;
    e->to = nl ? (size_t)(nl - e->data) : e->len;
    e->windowed = true;
}

static bool has_nul(const char *d, size_t n)
{
    return memchr(d, 0, n < BINARY_PROBE ? n : BINARY_PROBE) != NULL;
}

/* Is name the first component of the absolute path t, read lexically
 * (//, /./ and .. taken as the kernel takes them)? */
static bool first_component_is(const char *t, const char *name)
{
    const char *first = NULL;
    size_t fl = 0, depth = 0;
    for (const char *p = t; *p;) {
        p += strspn(p, "/");
        size_t n = strcspn(p, "/");
        if (!n)
            break;
        if (n == 2 && !strncmp(p, "..", 2)) {
            depth -= depth > 0;
        } else if (!(n == 1 && *p == '.')) {
            if (!depth)
                first = p, fl = n;
            depth++;
        }
        p += n;
    }
    return first && fl == strlen(name) && !strncmp(first, name, fl);
}

/* An absolute link target as the host resolves it (through the host's
 * own links: /proc/self/cwd, a link of the user's into the workspace), so
 * that a reader sees where it lands; "" when it cannot be resolved (the
 * reader then counts it), NULL for a relative target (read as it is). */
static char *host_target(const char *t)
{
    if (t[0] != '/')
        return NULL;
    /* /proc/self/cwd, /dev/fd/N: where they lead depends on the process
     * that follows them, which may run in the workspace */
    if (first_component_is(t, "proc") || first_component_is(t, "dev"))
        return xstrdup("");
    char *r = realpath(t, NULL);
    if (r || errno != ENOENT)
        return r ? r : xstrdup("");
    const char *slash = strrchr(t, '/');
    _cleanup_free_ char *dir = strndup(t, (size_t)(slash - t));
    _cleanup_free_ char *rd = dir ? realpath(*dir ? dir : "/", NULL) : NULL;
    if (!rd)
        return xstrdup("");
    return xasprintf("%s/%s", strcmp(rd, "/") ? rd : "", slash + 1);
}

/* One non-directory entry that was added or modified: its file under dfd
 * (the upper); old: the workspace's mode before (0: none). */
static void feed_file(struct walk *w, int dfd, const char *name, const char *path, int kind,
                      const struct stat *st, uint32_t oldmode)
{
    struct effect_entry e = {.path = path, .kind = kind, .reg = S_ISREG(st->st_mode)};
    const char *data = NULL, *old = NULL;
    char target[PATH_MAX];
    _cleanup_free_ char *resolved = NULL;
    if (S_ISLNK(st->st_mode)) {
        /* a reader tells a link to a host program from one into the tree */
        ssize_t n = readlinkat(dfd, name, target, sizeof target - 1);
        if (n >= 0) {
            target[n] = 0;
            resolved = host_target(target);
            e.link = resolved ? resolved : target;
        }
    }
    if (e.reg) {
        e.bytes = (uint64_t)st->st_size;
        e.made_exec = (st->st_mode & 0111) && !(S_ISREG(oldmode) && (oldmode & 0111));
        if (w->j->need_content && w->budget && st->st_size > 0) {
            _cleanup_close_ int fd = open_read(dfd, name, false, true);
            if (fd >= 0) {
                data = read_head(w, 0, fd, (uint64_t)st->st_size, &e.len);
                e.data = data;
                /* read whole: its hash for the audit log, which then need
                 * not read it again (store_prep) */
                store_hash_note(w->ws, st, data, e.len);
                e.binary = kind == EFF_ADDED && has_nul(data, e.len);
            }
            if (kind == EFF_MODIFIED && w->budget) {
                _cleanup_close_ int ofd = safe_openat_noatime(w->wsfd, path, O_RDONLY | O_NOCTTY);
                struct stat ost;
                if (ofd >= 0 && fstat(ofd, &ost) == 0) {
                    old = read_head(w, 1, ofd, (uint64_t)ost.st_size, &e.oldlen);
                    e.old = old;
                    content_window(&e, data && e.len == (uint64_t)st->st_size &&
                                           e.oldlen == (uint64_t)ost.st_size);
                }
            }
        }
    }
    feed(w, &e);
}

/* Every entry of the tree name under dfd, as kind (added: in the upper;
 * deleted: in the workspace). */
static void feed_tree(struct walk *w, int dfd, const char *name, const char *path, int kind, unsigned depth)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || depth > 4096)
        return;
    if (!S_ISDIR(st.st_mode)) {
        if (kind == EFF_DELETED) {
            struct effect_entry e = {.path = path, .kind = EFF_DELETED, .reg = S_ISREG(st.st_mode)};
            feed(w, &e);
        } else {
            feed_file(w, dfd, name, path, kind, &st, 0);
        }
        return;
    }
    struct effect_entry e = {.path = path, .kind = kind, .dir = true};
    feed(w, &e);
    bool upper = kind != EFF_DELETED;
    int fd = open_read(dfd, name, true, false);
    mode_t restore = 0;
    if (fd < 0 && errno == EACCES && upper) {
        /* a directory of the upper without owner read/search: given them
         * for the walk, its mode back after */
        restore = st.st_mode & 07777;
        if (fchmodat(dfd, name, restore | S_IRUSR | S_IXUSR, 0) == 0)
            fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0)
        close(fd);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        _cleanup_free_ char *cp = xasprintf("%s/%s", path, de->d_name);
        feed_tree(w, dirfd(d), de->d_name, cp, kind, depth + 1);
    }
    if (d)
        closedir(d);
    if (restore && fchmodat(dfd, name, restore, 0) < 0) {
        /* the mode the scan left stays recorded in the operation: the
         * journal sets it after its renames */
    }
}

/* Can every entry of news be opened by its path from the upper's root
 * (every directory among them searchable by its owner as the scan left
 * it; root needs nothing)? Else feed_tree walks it, granting what it
 * lacks. */
static bool news_reachable(const struct tx_new *news, size_t n)
{
    if (geteuid() == 0)
        return true;
    for (size_t i = 0; i < n; i++)
        if (S_ISDIR(news[i].st.st_mode) && (news[i].st.st_mode & (S_IRUSR | S_IXUSR)) != (S_IRUSR | S_IXUSR))
            return false;
    return true;
}

/* The upper's directory that holds path, kept open while the paths that
 * follow share it (a tree's entries come directory by directory). */
struct parent_fd {
    char *dir;
    int fd;
};

static int parent_of(struct parent_fd *p, int upperfd, const char *path, const char **name)
{
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 0;
    *name = slash ? slash + 1 : path;
    if (p->fd >= 0 && strlen(p->dir) == dl && !strncmp(p->dir, path, dl))
        return p->fd;
    free(p->dir);
    p->dir = xmalloc(dl + 1);
    memcpy(p->dir, path, dl);
    p->dir[dl] = 0;
    if (p->fd >= 0)
        close(p->fd);
    const char *base;
    p->fd = safe_open_parent(upperfd, path, &base);
    return p->fd;
}

static void parent_end(struct parent_fd *p)
{
    free(p->dir);
    if (p->fd >= 0)
        close(p->fd);
}

/* An operation's new tree as the scan recorded it (tx.h: ops->news): the
 * same entries in the same order as feed_tree finds them, without a stat
 * or a directory read each. Files are opened under their parent, opened
 * once for its run of entries. (Reading their contents ahead in a second
 * thread saved nothing on two CPUs: the commit's writeback has the other.) */
static int feed_news(struct walk *w, const struct tx_op *o, const struct tx_new *news, size_t n)
{
    struct parent_fd pf = {.fd = -1};
    bool mod = o->had_old && !o->old_dir && !o->new_dir; /* news[0], alone */
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tx_new *e = &news[i];
        if (S_ISDIR(e->st.st_mode)) {
            struct effect_entry d = {.path = e->path, .kind = EFF_ADDED, .dir = true};
            feed(w, &d);
            continue;
        }
        const char *name;
        int dfd = parent_of(&pf, w->upperfd, e->path, &name);
        if (dfd < 0) {
            rc = tx_errno(w->err, errno, "cannot open %s in the upper", e->path);
            break;
        }
        bool m = i == 0 && mod;
        feed_file(w, dfd, name, e->path, m ? EFF_MODIFIED : EFF_ADDED, &e->st, m ? o->old.mode : 0);
    }
    parent_end(&pf);
    return rc;
}

static int walk_ops(struct walk *w, const struct tx_ops *ops)
{
    for (size_t i = 0; i < ops->n; i++) {
        const struct tx_op *o = &ops->v[i];
        if (o->kind == OP_META) {
            if (o->had_old || o->nw.mode != o->old.mode || o->nw.uid != o->old.uid ||
                o->nw.gid != o->old.gid) {
                struct effect_entry e = {.path = o->path, .kind = EFF_MODIFIED, .dir = true};
                feed(w, &e);
            }
            continue;
        }
        const char *base;
        if (o->kind == OP_DELETE || (o->had_old && (o->old_dir || o->new_dir))) {
            /* the old entry goes, with everything in it */
            _cleanup_close_ int wp = safe_open_parent(w->wsfd, o->path, &base);
            if (wp >= 0)
                feed_tree(w, wp, base, o->path, EFF_DELETED, 0);
            if (o->kind == OP_DELETE)
                continue;
        }
        size_t nn;
        const struct tx_new *news = ops_news(ops, o, &nn);
        if (news && news_reachable(news, nn)) {
            if (feed_news(w, o, news, nn) < 0)
                return -1;
            continue;
        }
        _cleanup_close_ int up = safe_open_parent(w->upperfd, o->path, &base);
        if (up < 0)
            return tx_errno(w->err, errno, "cannot open %s in the upper", o->path);
        struct stat st;
        if (fstatat(up, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return tx_errno(w->err, errno, "cannot stat %s in the upper", o->path);
        if (o->had_old && !o->old_dir && !o->new_dir)
            feed_file(w, up, base, o->path, EFF_MODIFIED, &st, o->old.mode);
        else
            feed_tree(w, up, base, o->path, EFF_ADDED, 0);
    }
    return 0;
}

/* The rules with git: after the walk, from git's reading. */
static int judge_git(struct effect_judge *j, struct gitwatch *gw, txbox_error *err)
{
    struct gitwatch_out o;
    if (gitwatch_end(gw, &o, err) < 0)
        return -1;
    for (size_t i = 0; i < j->p->neffects; i++) {
        const effect_rule *r = &j->p->effects[i];
        struct effect_acc *a = &j->acc[i];
        const char *why = r->git == EFF_GIT_CONFIG  ? o.config_why
                          : r->git == EFF_GIT_HOOKS ? o.hooks_why
                                                    : NULL;
        json_t *paths = r->git == EFF_GIT_CONFIG ? o.config_paths : o.hook_paths;
        if (r->action == EFF_OFF || !why)
            continue;
        a->hit = true;
        a->detail = xstrdup(why);
        json_array_extend(a->paths, paths);
    }
    gitwatch_out_free(&o);
    return 0;
}

#define RUNNER_FILE_CAP (1u << 20) /* bytes of a runner's configuration read */
#define HUSKY_CAP 64               /* husky's scripts read */

/* The runner configuration rel of the workspace (wsfd), read whole into
 * *out: a regular file of at most RUNNER_FILE_CAP bytes, opened without
 * following a link or waiting on a fifo; 0 when it is none of that. */
static size_t read_runner_file(int wsfd, const char *rel, char **out)
{
    *out = NULL;
    _cleanup_close_ int fd = safe_openat_noatime(wsfd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        (uint64_t)st.st_size > RUNNER_FILE_CAP)
        return 0;
    char *b = xmalloc((size_t)st.st_size + 1);
    ssize_t n = read_all(fd, b, (size_t)st.st_size);
    if (n <= 0) {
        free(b);
        return 0;
    }
    b[n] = 0;
    *out = b;
    return (size_t)n;
}

/* d (n bytes) with each "WS/" (the workspace's absolute path) that starts
 * a word as "./": a runner's path to a file in the workspace, however it
 * is written (not the middle of another path: tools/w/x.sh with the
 * workspace /w stays itself). */
static void ws_relative(char *d, size_t *n, const char *ws)
{
    size_t wl = ws ? strlen(ws) : 0;
    if (wl < 2 || !d)
        return;
    size_t m = 0;
    for (size_t i = 0; i < *n;) {
        bool starts = i == 0 || strchr(" \t\r\n;|&()<>`'\"=:,[{", d[i - 1]);
        if (starts && i + wl < *n && !memcmp(d + i, ws, wl) && d[i + wl] == '/') {
            d[m++] = '.';
            i += wl;
            continue;
        }
        d[m++] = d[i++];
    }
    d[m] = 0;
    *n = m;
}

/* The files the workspace's git hook runners, VS Code's folder-open
 * tasks and the agent CLIs' settings name as programs, as they stand
 * before the transaction (a change of the configurations themselves is
 * held by path): the pre-commit framework's and lefthook's configuration,
 * husky's hook scripts, the tasks file, each agent CLI's hooks, status
 * line, credential helpers and MCP servers (run on the host, outside
 * txbox, at the CLI's next tool call or start). ws: the workspace's
 * absolute path (NULL: unknown). */
static void runner_scripts(int wsfd, const char *ws, strlist *out)
{
    static const struct {
        const char *path;
        int kind;
    } files[] = {
        {".pre-commit-config.yaml", EFF_RUNNER_YAML},
        {".pre-commit-config.yml", EFF_RUNNER_YAML},
        {"lefthook.yml", EFF_RUNNER_YAML},
        {"lefthook.yaml", EFF_RUNNER_YAML},
        {".lefthook.yml", EFF_RUNNER_YAML},
        {".lefthook.yaml", EFF_RUNNER_YAML},
        {"lefthook-local.yml", EFF_RUNNER_YAML},
        {".lefthook-local.yml", EFF_RUNNER_YAML},
        {".vscode/tasks.json", EFF_RUNNER_TASKS},
        {".claude/settings.json", EFF_RUNNER_AGENT},
        {".claude/settings.local.json", EFF_RUNNER_AGENT},
        {".mcp.json", EFF_RUNNER_AGENT},
        {".gemini/settings.json", EFF_RUNNER_AGENT},
        {".qwen/settings.json", EFF_RUNNER_AGENT},
        {".cursor/hooks.json", EFF_RUNNER_AGENT},
        {".cursor/mcp.json", EFF_RUNNER_AGENT},
        {".windsurf/hooks.json", EFF_RUNNER_AGENT},
        {".vscode/mcp.json", EFF_RUNNER_AGENT},
        {".roo/mcp.json", EFF_RUNNER_AGENT},
        {"opencode.json", EFF_RUNNER_AGENT},
        {"opencode.jsonc", EFF_RUNNER_AGENT},
    };
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        _cleanup_free_ char *d = NULL;
        size_t n = read_runner_file(wsfd, files[i].path, &d);
        ws_relative(d, &n, ws);
        if (n)
            effect_runner_paths(files[i].kind, d, n, out);
    }
    int hfd = safe_openat(wsfd, ".husky", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    DIR *dir = hfd >= 0 ? fdopendir(hfd) : NULL;
    if (!dir && hfd >= 0)
        close(hfd);
    struct dirent *de;
    for (unsigned k = 0; dir && k < HUSKY_CAP && (de = readdir(dir));) {
        if (de->d_name[0] == '.' || de->d_name[0] == '_')
            continue;
        k++;
        _cleanup_free_ char *rel = xasprintf(".husky/%s", de->d_name), *d = NULL;
        size_t n = read_runner_file(wsfd, rel, &d);
        ws_relative(d, &n, ws);
        if (n)
            effect_runner_paths(EFF_RUNNER_SHELL, d, n, out);
    }
    if (dir)
        closedir(dir);
}

/* The user's home directory, resolved (the trusted environment's HOME,
 * else the password database's), or NULL: home_written's anchor. */
static char *home_dir(void)
{
    const char *h = getenv("HOME");
    if (!h || *h != '/') {
        struct passwd *pw = getpwuid(getuid());
        h = pw && pw->pw_dir && *pw->pw_dir == '/' ? pw->pw_dir : NULL;
    }
    return h ? realpath(h, NULL) : NULL;
}

int txbox_policy_check_file_write(const txbox_policy *p, const char *ws, const char *path,
                                  const char *content, size_t len, txbox_verdict *out)
{
    memset(out, 0, sizeof *out);
    if (!p || !p->neffects || !path || *path != '/')
        return 0;
    _cleanup_free_ char *home = home_dir();
    const char *base = ws, *rel = ws ? path_below(path, ws) : NULL;
    if (!rel || !*rel) {
        base = home;
        rel = home ? path_below(path, home) : NULL;
    }
    if (!rel || !*rel)
        return 0;
    effects_compile(p);
    struct effect_judge j;
    effect_judge_init(&j, p);
    effect_judge_places(&j, base, home);
    strlist scripts = {0};
    _cleanup_close_ int bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (bfd >= 0) {
        runner_scripts(bfd, base, &scripts);
        j.scripts = &scripts;
    }
    struct stat st;
    bool exists = lstat(path, &st) == 0;
    struct effect_entry e = {.path = rel,
                             .kind = exists ? EFF_MODIFIED : EFF_ADDED,
                             .reg = true,
                             .bytes = content ? len : 0,
                             .data = content,
                             .len = content ? len : 0,
                             .binary = content && !exists && memchr(content, 0, len) != NULL};
    effect_judge_feed(&j, &e);
    json_t *v = effect_judge_end(&j);
    json_decref(j.attention);
    strlist_free(&scripts);
    const char *action = json_string_value(json_object_get(v, "action"));
    int held = v && action && strcmp(action, "attention") ? 1 : 0;
    if (held) {
        out->verdict = TXBOX_VERDICT_UNSAFE;
        snprintf(out->rule, sizeof out->rule, "%s",
                 json_string_value(json_object_get(v, "effect_rule")) ?: "?");
        snprintf(out->reason, sizeof out->reason, "%s",
                 json_string_value(json_object_get(v, "reason")) ?: "a rule on effects holds it");
        snprintf(out->suggestion, sizeof out->suggestion, "%s",
                 json_string_value(json_object_get(v, "suggestion")) ?: "");
    }
    json_decref(v);
    return held;
}

/* effects_judge; ws: where the walk notes the hashes of the new files it
 * reads whole (store_hash_note; NULL: nowhere). */
static int judge(txbox_ws *ws, const txbox_policy *p, int upperfd, int wsfd, const struct tx_ops *ops,
                 const struct gitcfg_ctx *gc, const struct losses *ls, json_t **verdict, json_t **attention,
                 txbox_error *err)
{
    *verdict = NULL;
    if (attention)
        *attention = NULL;
    if (!p || !p->neffects || (!ops->n && !(ls && ls->n)))
        return 0;
    effects_compile(p);
    struct effect_judge j;
    effect_judge_init(&j, p);
    txbox_ws *where = ws ? ws : gc ? gc->ws : NULL;
    _cleanup_free_ char *home = home_dir();
    effect_judge_places(&j, where ? txbox_ws_path(where) : NULL, home);
    bool gconfig = false, ghooks = false, runners = false;
    for (size_t i = 0; i < p->neffects; i++) {
        runners |= p->effects[i].action != EFF_OFF && p->effects[i].runner_scripts;
        gconfig |= p->effects[i].action != EFF_OFF && p->effects[i].git == EFF_GIT_CONFIG;
        ghooks |= p->effects[i].action != EFF_OFF && p->effects[i].git == EFF_GIT_HOOKS;
    }
    if ((gconfig || ghooks) && !gc) {
        effect_judge_end_free(&j);
        return tx_err(err, EINVAL, "rules on git configuration need a view of the transaction");
    }
    struct gitwatch *gw = NULL;
    if (gconfig || ghooks) {
        gw = gitwatch_begin(gc, gconfig, ghooks);
        tx_mark("effects:git-begin");
    }
    struct walk w = {
        .ws = ws, .j = &j, .gw = gw, .upperfd = upperfd, .wsfd = wsfd, .budget = CONTENT_BUDGET, .err = err};
    find_aliases(&w, where ? txbox_ws_path(where) : NULL);
    strlist scripts = {0};
    if (runners) {
        runner_scripts(wsfd, where ? txbox_ws_path(where) : NULL, &scripts);
        j.scripts = &scripts;
    }
    int rc = walk_ops(&w, ops);
    free(w.buf[0]);
    free(w.buf[1]);
    for (size_t i = 0; i < w.nal; i++) {
        free(w.al[i].target);
        free(w.al[i].name);
    }
    free(w.al);
    strlist_free(&scripts);
    j.scripts = NULL;
    losses_feed(ls, &j); /* the rules with losses: */
    if (rc == 0 && gw) {
        tx_mark("effects:walk");
        rc = judge_git(&j, gw, err);
    }
    gitwatch_free(gw);
    json_t *v = effect_judge_end(&j);
    if (rc < 0) {
        json_decref(v);
        json_decref(j.attention);
        return -1;
    }
    *verdict = v;
    if (attention)
        *attention = j.attention;
    else
        json_decref(j.attention);
    return 0;
}

int effects_judge(const txbox_policy *p, int upperfd, int wsfd, const struct tx_ops *ops,
                  const struct gitcfg_ctx *gc, const struct losses *ls, json_t **verdict, json_t **attention,
                  txbox_error *err)
{
    return judge(NULL, p, upperfd, wsfd, ops, gc, ls, verdict, attention, err);
}

bool effects_ask_unanswered(json_t *v, json_t **attention)
{
    if (strcmp(json_string_value(json_object_get(v, "action")) ?: "", "ask"))
        return false;
    /* no one to ask: committed, and the rule named beside the losses */
    if (!*attention)
        *attention = json_array();
    json_array_append_new(*attention,
                          json_pack("{s:O,s:O,s:O,s:s}", "effect_rule", json_object_get(v, "effect_rule"),
                                    "reason", json_object_get(v, "reason"), "paths",
                                    json_object_get(v, "paths"), "action", "ask"));
    json_decref(v);
    return true;
}

int effects_gate_run(txbox_ws *ws, const txbox_policy *p, txbox_result *r, int txfd, int upperfd,
                     uint64_t base_gen, const struct tx_ops *ops, struct fs_syncset *durable,
                     const char *hctx, const struct gitcfg_ctx *gc, const struct losses *ls, bool interactive,
                     txbox_error *err)
{
    json_t *v = NULL, *att = NULL;
    if (judge(ws, p, upperfd, ws->fd, ops, gc, ls, &v, &att, err) < 0)
        return -1;
    r->attention = att; /* reported and logged, whatever the outcome */
    if (!v)
        return 0;
    if (!interactive && effects_ask_unanswered(v, &r->attention))
        return 0;
    const char *action = json_string_value(json_object_get(v, "action"));
    bool hold = strcmp(action, "rollback") != 0; /* hold, or ask with a person to answer */
    if (!r->changes)
        r->changes = ops_changes(upperfd, ws->fd, ops, 10000);
    if (hold) {
        /* the scan's new data, durable before the hold as before a commit */
        if (durable && fs_syncset_sync(durable, ws->fd) < 0) {
            json_decref(v);
            return tx_errno(err, errno, "cannot make the transaction's changes durable");
        }
        /* what approve logs: this run as it would have committed */
        _cleanup_free_ char *info = store_info(r, hctx);
        if (effects_hold(ws, r->id, txfd, base_gen, ops, info, v, err) < 0) {
            json_decref(v);
            return -1;
        }
    }
    r->outcome = hold ? TXBOX_OUTCOME_HELD : TXBOX_OUTCOME_REJECTED;
    r->effect_verdict = v;
    return 1;
}
