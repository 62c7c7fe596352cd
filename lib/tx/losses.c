/* What a commit destroys that exists nowhere else (losses.h).
 *
 * The write set is read as what it removes: every regular file deleted
 * (alone or in a deleted or replaced directory) and every one whose content
 * is replaced, in the workspace (the before state). Each is judged:
 *
 *   - nothing is lost when its old content is git's: the index's blob for
 *     that path (the stat data git cached, else the content's blob id),
 *     HEAD's, a commit this transaction made (a stash, a commit), or when
 *     git ignores it (a build product; not a file the policy's secrets:
 *     name, such as .env, which no build makes again), or it is a cache a
 *     tool regenerates (node_modules, __pycache__ ...), or it moved (the same
 *     content is written elsewhere by the same commit), or it is empty;
 *   - a replaced content is lost only when it was clobbered: reset to the
 *     index's or HEAD's version, or to an older version git holds when git
 *     holds the replaced content nowhere (a restore from history), emptied,
 *     or overwritten with little in common (less than half of its lines
 *     kept, whitespace aside); an ordinary edit loses nothing;
 *   - a database file (SQLite) is judged by its pages instead: rewritten
 *     (more than half of its pages changed), shrunk, or with fewer pages
 *     in use (tables dropped, rows deleted in bulk), or deleted; another
 *     database's file (by its header: DuckDB, LMDB, Berkeley DB, Redis,
 *     H2, Access, Realm; or by the directory its server keeps, PostgreSQL,
 *     MySQL, MariaDB, MongoDB, LevelDB/RocksDB) is lost when deleted or
 *     emptied, and git's ignoring it clears none of them (no build makes
 *     a database's rows again).
 *
 * What git keeps besides files is judged by git's own reading of both
 * states in losses_git.c: staged changes dropped, stash entries dropped,
 * commits no longer reachable from any ref, reflog or stash, branches
 * deleted with such commits; a repository whose .git the commit removes
 * is lost whole.
 *
 * A loss whose content a txbox transaction wrote last is noted with it
 * (written_by), and is the agent's own work when that chain of
 * transactions started from an absent file or from git's version of it:
 * the rules with `losses:` then let it through for an hour (a scratch
 * file made minutes ago), and still report it.
 *
 * Everything read is workspace content, untrusted: files are opened
 * beneath the workspace without following symlinks, reads are capped
 * (LOSS_*), and what cannot be read within the caps is counted as lost
 * and said to be unverified (fail closed). */
#include <ctype.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "fsops.h"
#include "losses_int.h"
#include "result.h"
#include "safepath.h"
#include "store.h"

/* ---- caches tools regenerate: never a loss ---- */

static const char *const cache_dirs[] = {
    "node_modules",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".nox",
    ".cache",
    ".next",
    ".nuxt",
    ".turbo",
    ".parcel-cache",
    ".gradle",
    ".venv",
    /* installed packages (a virtual environment of any name), providers */
    "site-packages",
    "dist-packages",
    ".terraform",
};

static bool cache_dir_name(const char *n, size_t len)
{
    for (size_t i = 0; i < ARRAY_SIZE(cache_dirs); i++)
        if (strlen(cache_dirs[i]) == len && !memcmp(cache_dirs[i], n, len))
            return true;
    return false;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Is path a cache, or inside one? */
static bool in_cache(const char *path)
{
    for (const char *p = path;;) {
        const char *e = strchrnul(p, '/');
        if (*e && cache_dir_name(p, (size_t)(e - p)))
            return true;
        if (!*e) {
            if (cache_dir_name(p, (size_t)(e - p)))
                return true;
            return ends_with(p, ".pyc") || ends_with(p, ".pyo") || !strcmp(p, ".DS_Store") ||
                   ends_with(p, "-shm");
        }
        p = e + 1;
    }
}

/* ---- collecting what the commit removes ---- */

static struct lfile *add_file(struct lctx *c, const char *path, uint64_t size, int what, size_t droot)
{
    if (c->nf == c->cf) {
        c->cf = c->cf ? c->cf * 2 : 64;
        c->f = xrealloc(c->f, c->cf * sizeof *c->f);
    }
    struct lfile *f = &c->f[c->nf++];
    *f = (struct lfile){
        .path = xstrdup(path), .repo = -1, .size = size, .what = (uint8_t)what, .droot = droot};
    return f;
}

/* The git directory a workspace path lies in, when one does: the prefix
 * up to a component .git that is a directory in the workspace. *rest:
 * what follows it (""). NULL: none. */
static bool is_bare_repo_dir(int dfd);

static char *gitdir_of(struct lctx *c, const char *path, const char **rest)
{
    for (const char *p = path;;) {
        const char *e = strchrnul(p, '/');
        size_t n = (size_t)(e - p);
        /* .git, or a bare repository (name.git with HEAD, objects, refs),
         * whose files are git's, judged by git's checks (a bare one's:
         * only when it is removed whole) */
        if (n >= 4 && !memcmp(e - 4, ".git", 4)) {
            _cleanup_free_ char *g = xasprintf("%.*s", (int)(e - path), path);
            _cleanup_close_ int fd = safe_openat(c->in->ws->fd, g, O_RDONLY | O_DIRECTORY, 0);
            if (fd >= 0 && (n == 4 || (*e && is_bare_repo_dir(fd)))) {
                *rest = *e ? e + 1 : e;
                return steal_pointer(&g);
            }
            if (n == 4)
                return NULL;
        }
        if (!*e)
            return NULL;
        p = e + 1;
    }
}

/* A repository's git directory that the commit removes (path: the .git
 * directory, or a bare repository's), counted whole. */
static void note_removed_repo(struct lctx *c, const char *gitdir, uint64_t bytes, uint64_t files);

static bool is_bare_repo_dir(int dfd)
{
    struct stat st;
    return fstatat(dfd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
           fstatat(dfd, "objects", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
           fstatat(dfd, "refs", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* Sums a tree's regular files (a removed git directory). */
static void tree_size(struct lctx *c, int dfd, uint64_t *bytes, uint64_t *files, unsigned depth)
{
    DIR *d = fdopendir(dup(dfd));
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (++c->walked > LOSS_WALK_MAX) {
            c->walk_capped = true;
            break;
        }
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISREG(st.st_mode)) {
            *bytes += (uint64_t)st.st_size;
            (*files)++;
        } else if (S_ISDIR(st.st_mode) && depth < 256) {
            _cleanup_close_ int sub =
                openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                tree_size(c, sub, bytes, files, depth + 1);
        }
    }
    if (d)
        closedir(d);
}

/* ---- databases a server keeps in a directory ---- */

/* The file a database server keeps at the top of its directory, and the
 * database's kind. LevelDB's and RocksDB's CURRENT is told by what it
 * holds (the manifest's name), not by its name alone. */
static const struct {
    const char *file, *kind;
} db_marks[] = {
    {"PG_VERSION", "PostgreSQL"}, {"ibdata1", "MySQL"},           {"aria_log_control", "MariaDB"},
    {"WiredTiger", "MongoDB"},    {"CURRENT", "LevelDB/RocksDB"},
};

/* Is name, in directory dfd (before the commit), such a file? Its index in
 * db_marks, or -1. */
static int db_marker(int dfd, const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(db_marks); i++) {
        if (strcmp(name, db_marks[i].file))
            continue;
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            return -1;
        if (strcmp(name, "CURRENT"))
            return (int)i;
        char buf[9];
        _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        return fd >= 0 && read_all(fd, buf, sizeof buf) == (ssize_t)sizeof buf && !memcmp(buf, "MANIFEST-", 9)
                   ? (int)i
                   : -1;
    }
    return -1;
}

/* Workspace directory dir (c->dir_up's probe): a database server's (its
 * db_marks index), or -2 to look further up; at the top, -1. */
static int db_dir_probe(struct lctx *c, const char *dir)
{
    _cleanup_close_ int own = *dir ? safe_openat(c->in->ws->fd, dir, O_PATH | O_DIRECTORY, 0) : -1;
    int fd = *dir ? own : c->in->ws->fd;
    for (size_t i = 0; fd >= 0 && i < ARRAY_SIZE(db_marks); i++)
        if (db_marker(fd, db_marks[i].file) >= 0)
            return (int)i;
    return *dir ? -2 : -1;
}

/* The kind of database whose server's directory holds workspace path p
 * (p itself aside), before the commit: its nearest such parent's. */
static const char *db_above(struct lctx *c, const char *p)
{
    int i = losses_dir_up(c, &c->dbm, p, db_dir_probe);
    return i >= 0 ? db_marks[i].kind : NULL;
}

static void set_db_dir(struct lfile *f, const char *kind)
{
    if (f && kind && !f->db_kind) {
        f->db_kind = kind;
        f->db_dir = true;
    }
}

/* Every regular file of the old tree dfd/name (workspace path path),
 * deleted, or replaced by the new tree's file of the same path (newdir). */
static void walk_old(struct lctx *c, int dfd, const char *name, const char *path, bool newdir, size_t droot,
                     const char *dbk, unsigned depth)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    if (++c->walked > LOSS_WALK_MAX) {
        c->walk_capped = true;
        return;
    }
    if (in_cache(path))
        return;
    if (S_ISREG(st.st_mode)) {
        if (!st.st_size || !strcmp(name, ".git"))
            return; /* empty; a gitfile (the repository lives elsewhere) */
        int what = LFR_DELETED;
        if (newdir) {
            struct stat nst;
            _cleanup_close_ int nfd = safe_openat(c->in->upperfd, path, O_PATH, 0);
            if (nfd >= 0 && fstat(nfd, &nst) == 0 && S_ISREG(nst.st_mode))
                what = LFR_MODIFIED;
        }
        set_db_dir(add_file(c, path, (uint64_t)st.st_size, what, droot), dbk);
        return;
    }
    if (!S_ISDIR(st.st_mode) || depth > 4096)
        return;
    _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        /* a directory txbox cannot read: what it held is unknown */
        struct lfile *f = add_file(c, path, 0, LFR_DELETED, droot);
        f->state = LF_LOST;
        f->unverified = true;
        f->why = xstrdup("a directory that could not be read was removed");
        return;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!strcmp(base, ".git") || is_bare_repo_dir(fd)) {
        uint64_t bytes = 0, files = 0;
        tree_size(c, fd, &bytes, &files, 0);
        note_removed_repo(c, path, bytes, files);
        return;
    }
    DIR *d = fdopendir(fd);
    if (!d)
        return;
    fd = -1;
    struct dirent *de;
    size_t first = c->nf;
    const char *here = dbk; /* a database server's directory: by a name read here */
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (!here) {
            int k = db_marker(dirfd(d), de->d_name);
            here = k >= 0 ? db_marks[k].kind : NULL;
        }
        _cleanup_free_ char *p = *path ? xasprintf("%s/%s", path, de->d_name) : xstrdup(de->d_name);
        walk_old(c, dirfd(d), de->d_name, p, newdir, droot, here, depth + 1);
        if (c->walk_capped)
            break;
    }
    closedir(d);
    /* the files walked before the name that told it */
    for (size_t i = first; here && i < c->nf; i++)
        set_db_dir(&c->f[i], here);
}

/* The repository removals noted while collecting: resolved to repositories
 * once those are known (note_repo_items). */
static void note_removed_repo(struct lctx *c, const char *gitdir, uint64_t bytes, uint64_t files)
{
    c->rm = xrealloc(c->rm, (c->nrm + 1) * sizeof *c->rm);
    c->rm[c->nrm++] = (struct lremoval){.gitdir = xstrdup(gitdir), .bytes = bytes, .files = files};
}

/* Changes inside a git directory, by what they touch. */
struct gitchange {
    char *gitdir;
    bool index, refs, other;
    char *index_path; /* the index file's workspace path */
};

static void note_git_change(struct gitchange **v, size_t *n, const char *gitdir, const char *rest)
{
    size_t i;
    for (i = 0; i < *n && strcmp((*v)[i].gitdir, gitdir); i++)
        ;
    if (i == *n) {
        *v = xrealloc(*v, (*n + 1) * sizeof **v);
        (*v)[(*n)++] = (struct gitchange){.gitdir = xstrdup(gitdir)};
    }
    struct gitchange *g = &(*v)[i];
    if (!strcmp(rest, "index")) {
        g->index = true;
        if (!g->index_path)
            g->index_path = xasprintf("%s/index", gitdir);
    } else if (!strcmp(rest, "HEAD") || !strcmp(rest, "packed-refs") || !strncmp(rest, "refs", 4) ||
               !strncmp(rest, "logs", 4) || !*rest) {
        g->refs = true;
    } else {
        g->other = true;
    }
}

/* The operations read as files removed or replaced, git directories
 * changed and repositories removed. */
static void collect(struct lctx *c, struct gitchange **gch, size_t *ngch)
{
    const struct tx_ops *ops = c->in->ops;
    int wsfd = c->in->ws->fd;
    for (size_t i = 0; i < ops->n && !c->walk_capped; i++) {
        const struct tx_op *o = &ops->v[i];
        if (o->kind == OP_META)
            continue;
        const char *rest = "";
        _cleanup_free_ char *g = gitdir_of(c, o->path, &rest);
        if (g) {
            if (!*rest && (o->kind == OP_DELETE || o->had_old)) {
                /* the .git directory itself goes */
                _cleanup_close_ int fd = safe_openat(wsfd, g, O_RDONLY | O_DIRECTORY, 0);
                uint64_t bytes = 0, files = 0;
                if (fd >= 0)
                    tree_size(c, fd, &bytes, &files, 0);
                note_removed_repo(c, g, bytes, files);
            }
            if (*rest)
                note_git_change(gch, ngch, g, rest);
            continue;
        }
        if (o->kind == OP_REPLACE && !o->had_old)
            continue; /* a new entry destroys nothing */
        bool old_dir = o->old_dir || (o->old.mode && S_ISDIR(o->old.mode));
        if (old_dir) {
            const char *base;
            _cleanup_close_ int pfd = safe_open_parent(wsfd, o->path, &base);
            if (pfd < 0)
                continue;
            lnames_push(&c->droots, xstrdup(o->path));
            walk_old(c, pfd, base, o->path, o->kind == OP_REPLACE && o->new_dir, c->droots.n,
                     db_above(c, o->path), 0);
            continue;
        }
        const char *bn = strrchr(o->path, '/');
        if (in_cache(o->path) || (o->old.mode && !S_ISREG(o->old.mode)) ||
            !strcmp(bn ? bn + 1 : o->path, ".git"))
            continue; /* a cache, not a file, a gitfile */
        /* its size, and whether it is a file at all when the journal did
         * not say: judge_file */
        bool new_reg = o->kind == OP_REPLACE && !o->new_dir && (!o->nw.mode || S_ISREG(o->nw.mode));
        set_db_dir(add_file(c, o->path, 0, new_reg ? LFR_MODIFIED : LFR_DELETED, 0), db_above(c, o->path));
    }
}

/* ---- repositories ---- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int *dmap_slot(struct ldmap *m, const char *k, bool add)
{
    if (add && (m->n + 1) * 2 > m->cap) {
        struct ldmap old = *m;
        m->cap = old.cap ? old.cap * 2 : 64;
        m->keys = xcalloc(m->cap, sizeof *m->keys);
        m->vals = xcalloc(m->cap, sizeof *m->vals);
        m->n = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.keys[i]) {
                *dmap_slot(m, old.keys[i], true) = old.vals[i];
                free(old.keys[i]);
            }
        free(old.keys);
        free(old.vals);
    }
    if (!m->cap)
        return NULL;
    for (size_t i = hash_str(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) {
            if (!add)
                return NULL;
            m->keys[i] = xstrdup(k);
            m->n++;
            return &m->vals[i];
        }
        if (!strcmp(m->keys[i], k))
            return &m->vals[i];
    }
}

static void dmap_free(struct ldmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* Lexically joins a relative gitdir pointer to base and removes "." and
 * ".." (no symlink is followed: the result is only compared and opened
 * beneath the workspace, or read outside it as git would). */
static char *join_clean(const char *base, const char *rel)
{
    _cleanup_free_ char *j = rel[0] == '/' ? xstrdup(rel) : xasprintf("%s/%s", base, rel);
    char *out = xmalloc(strlen(j) + 2), *w = out;
    for (char *save = NULL, *t = strtok_r(j, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (!strcmp(t, "."))
            continue;
        if (!strcmp(t, "..")) {
            while (w > out && *--w != '/')
                ;
            continue;
        }
        w += sprintf(w, "/%s", t);
    }
    if (w == out)
        *w++ = '/';
    *w = 0;
    return out;
}

static int add_repo(struct lctx *c, const char *wt, const char *wt_abs, const char *prefix)
{
    c->r = xrealloc(c->r, (c->nr + 1) * sizeof *c->r);
    struct lrepo *r = &c->r[c->nr];
    *r = (struct lrepo){.wt = wt ? xstrdup(wt) : NULL,
                        .wt_abs = xstrdup(wt_abs),
                        .prefix = xstrdup(prefix),
                        .ib_state = 1,
                        .ia_state = 1};
    if (c->nr >= LOSS_REPOS_MAX) {
        r->why = "more repositories changed at once than txbox checks";
        return (int)c->nr++;
    }
    const char *ws_path = c->in->ws->path;
    size_t wl = strlen(ws_path);
    _cleanup_free_ char *dotgit = xasprintf("%s/.git", wt_abs);
    struct stat st;
    bool in_ws = wt != NULL;
    _cleanup_free_ char *dg_rel = in_ws ? (*wt ? xasprintf("%s/.git", wt) : xstrdup(".git")) : NULL;
    _cleanup_close_ int dfd =
        in_ws ? safe_openat(c->in->ws->fd, dg_rel, O_PATH, 0) : open(dotgit, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || fstat(dfd, &st) < 0) {
        r->why = "its .git cannot be opened";
        return (int)c->nr++;
    }
    if (S_ISDIR(st.st_mode)) {
        r->gitdir_abs = steal_pointer(&dotgit);
        r->gitdir = steal_pointer(&dg_rel);
    } else {
        /* a gitfile: "gitdir: PATH" (a submodule's, a linked worktree's) */
        char buf[4096];
        _cleanup_close_ int ffd = in_ws ? safe_openat(c->in->ws->fd, dg_rel, O_RDONLY | O_NONBLOCK, 0)
                                        : open(dotgit, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        ssize_t n = ffd >= 0 && S_ISREG(st.st_mode) ? read(ffd, buf, sizeof buf - 1) : -1;
        if (n < 8 || strncmp(buf, "gitdir: ", 8)) {
            r->why = "its .git is neither a directory nor a gitdir file";
            return (int)c->nr++;
        }
        buf[n] = 0;
        buf[strcspn(buf, "\r\n")] = 0;
        r->gitdir_abs = join_clean(wt_abs, buf + 8);
        if (!strncmp(r->gitdir_abs, ws_path, wl) && r->gitdir_abs[wl] == '/')
            r->gitdir = xstrdup(r->gitdir_abs + wl + 1);
    }
    struct stat cst;
    _cleanup_close_ int gfd = r->gitdir ? safe_openat(c->in->ws->fd, r->gitdir, O_PATH | O_DIRECTORY, 0)
                                        : open(r->gitdir_abs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (gfd < 0) {
        r->why = "its git directory cannot be opened";
        return (int)c->nr++;
    }
    r->linked = fstatat(gfd, "commondir", &cst, AT_SYMLINK_NOFOLLOW) == 0;
    if (r->linked && S_ISREG(cst.st_mode)) {
        /* a linked worktree's: the refs and objects are in the common
         * directory (libgit2 reads them there) */
        char buf[4096];
        _cleanup_close_ int cfd = openat(gfd, "commondir", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        ssize_t n = cfd >= 0 ? read(cfd, buf, sizeof buf - 1) : -1;
        if (n > 0) {
            buf[n] = 0;
            buf[strcspn(buf, "\r\n")] = 0;
            r->common_abs = join_clean(r->gitdir_abs, buf);
        }
    }
    return (int)c->nr++;
}

/* The repository holding the workspace itself, above it (the workspace is
 * a directory of a larger worktree), as git finds it: up to a filesystem
 * boundary. -1: none. */
static int repo_above(struct lctx *c)
{
    _cleanup_free_ char *p = xstrdup(c->in->ws->path);
    struct stat top;
    if (stat(p, &top) < 0)
        return -1;
    for (char *slash; (slash = strrchr(p, '/')) && slash != p + 0 + (p[0] != '/');) {
        *slash = 0;
        const char *dir = *p ? p : "/";
        struct stat st;
        if (stat(dir, &st) < 0 || st.st_dev != top.st_dev)
            return -1;
        _cleanup_free_ char *g = xasprintf("%s/.git", strcmp(dir, "/") ? dir : "");
        if (lstat(g, &st) == 0) {
            size_t dl = strcmp(dir, "/") ? strlen(dir) : 0;
            _cleanup_free_ char *prefix = xasprintf("%s/", c->in->ws->path + dl + 1);
            return add_repo(c, NULL, dir, prefix);
        }
        if (slash == p)
            break;
    }
    return -1;
}

int losses_dir_up(struct lctx *c, struct ldmap *m, const char *path,
                  int (*probe)(struct lctx *, const char *))
{
    _cleanup_free_ char *d = xstrdup(path);
    struct lnames seen = {0};
    int found;
    for (;;) {
        char *slash = strrchr(d, '/');
        if (slash)
            *slash = 0;
        else
            d[0] = 0;
        int *v = dmap_slot(m, d, false);
        if (v) {
            found = *v;
            break;
        }
        lnames_push(&seen, xstrdup(d));
        if ((found = probe(c, d)) != -2)
            break;
    }
    for (size_t i = 0; i < seen.n; i++)
        *dmap_slot(m, seen.v[i], true) = found;
    lnames_free(&seen);
    return found;
}

/* Workspace directory d (losses_dir_up's probe): a repository's worktree
 * (its index in c->r), or -2 to look further up; at the top, the
 * repository above the workspace's, or -1. */
static int repo_probe(struct lctx *c, const char *d)
{
    struct stat st;
    _cleanup_free_ char *g = *d ? xasprintf("%s/.git", d) : xstrdup(".git");
    _cleanup_close_ int fd = safe_openat(c->in->ws->fd, g, O_PATH, 0);
    if (fd >= 0 && fstat(fd, &st) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
        _cleanup_free_ char *abs = *d ? xasprintf("%s/%s", c->in->ws->path, d) : xstrdup(c->in->ws->path);
        return add_repo(c, d, abs, "");
    }
    return *d ? -2 : repo_above(c);
}

int losses_repo_of(struct lctx *c, const char *path) { return losses_dir_up(c, &c->dm, path, repo_probe); }

/* The repository whose git directory is gitdir (a workspace path); -1. */
static int repo_by_gitdir(struct lctx *c, const char *gitdir)
{
    for (size_t i = 0; i < c->nr; i++)
        if (c->r[i].gitdir && !strcmp(c->r[i].gitdir, gitdir))
            return (int)i;
    /* a repository no removed or changed file led to: its worktree is the
     * git directory's parent (a .git directory) */
    if (!ends_with(gitdir, "/.git") && strcmp(gitdir, ".git"))
        return -1;
    _cleanup_free_ char *wt =
        xasprintf("%.*s", (int)(strlen(gitdir) - (strcmp(gitdir, ".git") ? 5 : 4)), gitdir);
    _cleanup_free_ char *probe = *wt ? xasprintf("%s/x", wt) : xstrdup("x");
    int i = losses_repo_of(c, probe);
    return i >= 0 && c->r[i].gitdir && !strcmp(c->r[i].gitdir, gitdir) ? i : -1;
}

/* ---- reading files ---- */

struct blob {
    char *p;
    size_t n;
};

/* The whole of fd (a regular file of st's size), within the caps: 0; -1
 * with *why. */
static int read_fd(struct lctx *c, int fd, const struct stat *st, struct blob *b, const char **why)
{
    b->p = NULL;
    b->n = 0;
    if ((uint64_t)st->st_size > LOSS_FILE_CAP || (uint64_t)st->st_size > c->budget) {
        *why = "it is larger than txbox compares";
        return -1;
    }
    b->p = xmalloc((size_t)st->st_size + 1);
    ssize_t r = read_all(fd, b->p, (size_t)st->st_size);
    if (r < 0) {
        free(b->p);
        b->p = NULL;
        *why = "it could not be read";
        return -1;
    }
    b->n = (size_t)r;
    c->budget -= (uint64_t)r;
    return 0;
}

/* The whole regular file path under dfd, within the caps: 0; -1 with *why. */
static int read_capped(struct lctx *c, int dfd, const char *path, struct stat *st, struct blob *b,
                       const char **why)
{
    b->p = NULL;
    b->n = 0;
    _cleanup_close_ int fd = safe_openat_noatime(dfd, path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0 || fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        *why = "it could not be read";
        return -1;
    }
    return read_fd(c, fd, st, b, why);
}

/* ---- databases ---- */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

struct sqlite_hdr {
    uint32_t page, pages, freelist;
};

static bool sqlite_of(const char *d, size_t n, struct sqlite_hdr *h)
{
    const unsigned char *u = (const unsigned char *)d;
    if (n < 100 || memcmp(d, "SQLite format 3", 16))
        return false;
    uint32_t ps = (uint32_t)(u[16] << 8 | u[17]);
    h->page = ps == 1 ? 65536 : ps;
    if (h->page < 512 || (h->page & (h->page - 1)))
        return false;
    h->pages = be32(u + 28);
    if (!h->pages || be32(u + 92) != be32(u + 24))
        h->pages = (uint32_t)(n / h->page);
    h->freelist = be32(u + 36);
    return true;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

const char *losses_db_kind(const char *d, size_t n)
{
    const unsigned char *u = (const unsigned char *)d;
    if (n >= 12 && !memcmp(d + 8, "DUCK", 4))
        return "DuckDB";
    if (n >= 20 && le32(u + 16) == 0xBEEFC0DEu) /* the first meta page's magic */
        return "LMDB";
    if (n >= 16) {
        static const uint32_t bdb[] = {0x053162, 0x061561, 0x042253, 0x074582}; /* btree hash queue heap */
        for (size_t i = 0; i < ARRAY_SIZE(bdb); i++)
            if (le32(u + 12) == bdb[i] || be32(u + 12) == bdb[i])
                return "Berkeley DB";
    }
    if (n >= 9 && !memcmp(d, "REDIS", 5) && isdigit(u[5]) && isdigit(u[6]) && isdigit(u[7]) && isdigit(u[8]))
        return "Redis";
    if (n >= 10 && !memcmp(d, "H:2,block:", 10))
        return "H2";
    if (n >= 19 && (!memcmp(d + 4, "Standard Jet DB", 15) || !memcmp(d + 4, "Standard ACE DB", 15)))
        return "Microsoft Access";
    if (n >= 20 && !memcmp(d + 16, "T-DB", 4))
        return "Realm";
    return NULL;
}

/* A file too large to read whole, by its first bytes: SQLite's header
 * (true, *h), or another database's kind (*kind); *size, its size (0 when
 * it cannot be opened). */
static bool db_header_at(int dfd, const char *path, struct sqlite_hdr *h, uint64_t *size, const char **kind)
{
    char buf[100];
    _cleanup_close_ int fd = safe_openat_noatime(dfd, path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return false;
    *size = (uint64_t)st.st_size;
    if (read_all(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
        return false;
    if (sqlite_of(buf, sizeof buf, h))
        return true;
    if (kind && !*kind)
        *kind = losses_db_kind(buf, sizeof buf);
    return false;
}

/* What the deletion of a database's file is called. */
static char *db_deleted_why(const struct lfile *f)
{
    if (!f->db_kind)
        return xstrdup("a database deleted");
    return f->db_dir ? xasprintf("a file of a %s database deleted", f->db_kind)
                     : xasprintf("a %s database deleted", f->db_kind);
}

/* A database rewritten or shrunk (a loss: *why) or used as databases are
 * (false). a, b: the old and new content when read whole (NULL: too
 * large; then the headers alone judge). */
static bool db_destroyed(const struct sqlite_hdr *ha, uint64_t sa, const struct blob *a, bool nb_db,
                         const struct sqlite_hdr *hb, uint64_t sb, const struct blob *b, char **why)
{
    if (!nb_db) {
        *why = xstrdup(sb ? "a database overwritten by something that is not one" : "a database emptied");
        return true;
    }
    uint32_t live_a = ha->pages > ha->freelist ? ha->pages - ha->freelist : 0;
    uint32_t live_b = hb->pages > hb->freelist ? hb->pages - hb->freelist : 0;
    if (live_a >= 2 && (uint64_t)live_b * 10 < (uint64_t)live_a * 9) {
        *why = xasprintf("a database's pages in use fell from %u to %u (tables dropped or rows deleted)",
                         live_a, live_b);
        return true;
    }
    if (sb < sa) {
        *why = xasprintf("a database shrank from %llu to %llu bytes", (unsigned long long)sa,
                         (unsigned long long)sb);
        return true;
    }
    if (!a->p || !b->p || ha->page != hb->page)
        return false;
    /* the pages after the first (whose header counts every change) */
    uint64_t n = ha->pages, changed = 0, total = 0;
    for (uint64_t i = 1; i < n; i++) {
        uint64_t off = i * ha->page;
        if (off + ha->page > a->n)
            break;
        total++;
        changed += off + hb->page > b->n || memcmp(a->p + off, b->p + off, ha->page);
    }
    if (total >= 2 && changed * 2 > total) {
        *why = xasprintf("a database rewritten: %llu of its %llu pages changed", (unsigned long long)changed,
                         (unsigned long long)total);
        return true;
    }
    return false;
}

/* ---- an ordinary edit, or a clobber ---- */

/* The share of a's lines (whitespace aside) that b still holds, by bytes;
 * for binary content, of its 4 KiB blocks at the same place. */
static double kept_share(const struct blob *a, const struct blob *b)
{
    if (!a->n)
        return 1.0;
    bool bin = memchr(a->p, 0, a->n < 8000 ? a->n : 8000) || memchr(b->p, 0, b->n < 8000 ? b->n : 8000);
    if (bin) {
        uint64_t same = 0;
        for (size_t off = 0; off < a->n; off += 4096) {
            size_t l = a->n - off < 4096 ? a->n - off : 4096;
            if (off + l <= b->n && !memcmp(a->p + off, b->p + off, l))
                same += l;
        }
        return (double)same / (double)a->n;
    }
    /* b's lines, hashed without their whitespace, in an open-addressing set */
    size_t lines = 1;
    for (size_t i = 0; i < b->n; i++)
        lines += b->p[i] == '\n';
    size_t cap = 64;
    while (cap < lines * 2)
        cap *= 2;
    uint64_t *set = xcalloc(cap, sizeof *set);
    for (int pass = 0; pass < 2; pass++) {
        const struct blob *x = pass ? a : b;
        uint64_t kept = 0;
        for (size_t s = 0; s < x->n;) {
            const char *nl = memchr(x->p + s, '\n', x->n - s);
            size_t e = nl ? (size_t)(nl - x->p) : x->n;
            uint64_t h = 1469598103934665603ull;
            bool any = false;
            for (size_t i = s; i < e; i++)
                if (!strchr(" \t\r\f\v", x->p[i])) {
                    h = (h ^ (unsigned char)x->p[i]) * 1099511628211ull;
                    any = true;
                }
            h |= 1; /* never 0, the empty slot */
            if (any) {
                size_t k = h & (cap - 1);
                while (set[k] && set[k] != h)
                    k = (k + 1) & (cap - 1);
                if (!pass)
                    set[k] = h;
                else if (set[k] == h)
                    kept += e - s + 1;
            } else if (pass) {
                kept += e - s + 1; /* a blank line loses nothing */
            }
            s = e + 1;
        }
        if (pass) {
            free(set);
            return kept >= a->n ? 1.0 : (double)kept / (double)a->n;
        }
    }
    free(set);
    return 1.0;
}

static bool stat_matches(const struct gix_entry *e, const struct stat *st, const struct gix *x)
{
    if (!S_ISREG(st->st_mode) || (e->mode & 0170000) != 0100000 || e->size != (uint32_t)st->st_size ||
        e->mtime_s != (uint32_t)st->st_mtim.tv_sec || e->mtime_ns != (uint32_t)st->st_mtim.tv_nsec ||
        e->ctime_s != (uint32_t)st->st_ctim.tv_sec || e->ctime_ns != (uint32_t)st->st_ctim.tv_nsec ||
        e->ino != (uint32_t)st->st_ino)
        return false;
    /* racy: changed in the index's own second (git hashes it then too) */
    return st->st_mtim.tv_sec < x->mtime_s ||
           (st->st_mtim.tv_sec == x->mtime_s && st->st_mtim.tv_nsec < x->mtime_ns);
}

static const char *kind_default_why(const struct lfile *f)
{
    if (f->what == LFR_DELETED)
        return f->repo < 0  ? "deleted; it is in no git repository"
               : f->tracked ? "deleted with changes that are in neither HEAD nor the index"
               : f->secret
                   ? "deleted; git does not track it, and it holds secrets, which no build makes again"
                   : "deleted; git does not track it and does not ignore it";
    return f->secret ? "overwritten; it holds secrets, which no build makes again" : "overwritten";
}

/* The index of a repository, read once: before, and after when the
 * commit changes it. */
static void load_indexes(struct lctx *c, struct lrepo *r, const struct gitchange *g)
{
    if (r->why || r->ib_state != 1 || !r->gitdir_abs)
        return;
    const char *why = NULL;
    _cleanup_close_ int gfd = r->gitdir ? safe_openat(c->in->ws->fd, r->gitdir, O_PATH | O_DIRECTORY, 0)
                                        : open(r->gitdir_abs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    r->ib_state = gfd < 0 ? -1 : gix_load(&r->ib, gfd, "index", &why);
    if (r->ib_state < 0)
        r->why = why ? why : "its git directory cannot be opened";
    if (!g || !g->index || !r->gitdir)
        return;
    int where = lview_where(&c->view, g->index_path);
    why = NULL;
    if (where == LV_GONE)
        r->ia_state = 1;
    else
        r->ia_state =
            gix_load(&r->ia, where == LV_UPPER ? c->in->upperfd : c->in->ws->fd, g->index_path, &why);
    if (r->ia_state < 0)
        r->why = why ? why : "its index cannot be read after the change";
}

/* Opens the file path (for reading, never through a symlink) under root,
 * by way of its directory, kept open in dc for the next file. */
static int open_file_in(struct ldircache *dc, int root, const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 0;
    if (!dc->dir || strlen(dc->dir) != dl || memcmp(dc->dir, path, dl)) {
        if (dc->dir && dc->fd >= 0)
            close(dc->fd);
        free(dc->dir);
        dc->dir = xasprintf("%.*s", (int)dl, path);
        dc->fd = dl ? safe_openat(root, dc->dir, O_PATH | O_DIRECTORY, 0)
                    : openat(root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
    if (dc->fd < 0)
        return -1;
    return openat_noatime(dc->fd, slash ? slash + 1 : path,
                          O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
}

static void dircache_free(struct ldircache *dc)
{
    if (dc->dir && dc->fd >= 0)
        close(dc->fd);
    free(dc->dir);
    dc->dir = NULL;
}

/* Could content of size n be the blob of index entry e? (git records the
 * work tree's size; a filter aside, a blob of another size differs) */
static bool size_may_be(const struct gix_entry *e, uint64_t n) { return e && e->size == (uint32_t)n; }

/* The old content's ids, for what only a lost file needs: git's checks
 * of it (HEAD, new commits) and the audit log's (moved, who wrote it). */
static void hash_old(struct lfile *f, const struct blob *a)
{
    if (!f->have_oid) {
        gix_blob_oid(a->p, a->n, f->oid);
        f->have_oid = true;
    }
    hash_bytes_hex(a->p, a->n, f->sha);
    f->have_sha = true;
}

/* A tracked file's edit that put back an older version of git's (git
 * restore --source, git show REV:F >F, git cat-file): lost when git holds
 * the new content and not the old one, whatever wrote it. */
static void judge_restore(struct lctx *c, struct lrepo *r, struct lfile *f, const struct blob *a,
                          const struct blob *b)
{
    if (!f->have_noid) {
        gix_blob_oid(b->p, b->n, f->noid);
        f->have_noid = true;
    }
    if (!losses_object_known(c, r, f->noid))
        return; /* an edit's usual case: its new content is git's nowhere */
    if (!f->have_oid) {
        gix_blob_oid(a->p, a->n, f->oid);
        f->have_oid = true;
    }
    if (!losses_object_known(c, r, f->oid)) {
        f->state = LF_LOST;
        f->why = xstrdup("an older version from git's history put back: its changes discarded");
    }
}

/* One file: is its old content lost? */
static void judge_file(struct lctx *c, struct lfile *f)
{
    struct lrepo *r = f->repo >= 0 ? &c->r[f->repo] : NULL;
    int wsfd = c->in->ws->fd;
    _cleanup_free_ char *ip = r ? losses_index_path(r, f->path) : NULL;
    const struct gix_entry *eb = NULL, *ea = NULL;
    if (r && r->ib_state == 0)
        eb = gix_find(&r->ib, ip, strlen(ip));
    if (r && r->ia_state == 0)
        ea = gix_find(&r->ia, ip, strlen(ip));
    f->tracked = eb != NULL;
    /* a file that holds secrets is lost even where git ignores it (the
     * only files git's ignore rules clear: untracked ones, in a
     * repository; about 1 us a file) */
    f->secret = r && !f->tracked && c->in->pol && policy_secret_text(c->in->pol, f->path);
    struct stat st;
    _cleanup_close_ int fd = open_file_in(&c->dws, wsfd, f->path);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        f->state = LF_LOST;
        f->unverified = true;
        f->why = xstrdup("it could not be read");
        return;
    }
    f->size = (uint64_t)st.st_size;
    if (!st.st_size) {
        f->state = LF_SAFE; /* nothing to lose */
        return;
    }
    if (eb && stat_matches(eb, &st, &r->ib)) {
        memcpy(f->oid, eb->oid, 20);
        f->have_oid = true;
        f->state = LF_SAFE; /* the index's blob, as git knows without reading it */
        return;
    }
    const char *why = NULL;
    struct blob a = {0}, b = {0};
    struct sqlite_hdr ha, hb;
    uint64_t sa = (uint64_t)st.st_size, sb = 0;
    if (read_fd(c, fd, &st, &a, &why) < 0) {
        f->db = db_header_at(wsfd, f->path, &ha, &sa, &f->db_kind);
        bool anydb = f->db || f->db_kind;
        if (f->what == LFR_DELETED || !anydb) {
            f->state = LF_LOST;
            f->unverified = !anydb || f->what != LFR_DELETED;
            f->why = anydb ? db_deleted_why(f) : xasprintf("not verified: %s", why);
            return;
        }
    } else {
        f->db = sqlite_of(a.p, a.n, &ha);
        if (!f->db && !f->db_kind)
            f->db_kind = losses_db_kind(a.p, a.n);
        if (size_may_be(eb, a.n) || size_may_be(ea, a.n)) {
            gix_blob_oid(a.p, a.n, f->oid);
            f->have_oid = true;
            if ((eb && !memcmp(eb->oid, f->oid, 20)) || (ea && !memcmp(ea->oid, f->oid, 20))) {
                f->state = LF_SAFE; /* in the index (before, or staged now) */
                free(a.p);
                return;
            }
        }
    }
    if (f->what == LFR_DELETED) {
        f->state = LF_LOST;
        f->why = f->db || f->db_kind ? db_deleted_why(f) : xstrdup(kind_default_why(f));
        if (a.p)
            hash_old(f, &a);
        free(a.p);
        return;
    }
    /* replaced: read the new content */
    struct stat nst = {0};
    const char *nwhy = NULL;
    _cleanup_close_ int nfd = open_file_in(&c->dup, c->in->upperfd, f->path);
    bool have_b =
        nfd >= 0 && fstat(nfd, &nst) == 0 && S_ISREG(nst.st_mode) && read_fd(c, nfd, &nst, &b, &nwhy) == 0;
    if (!nwhy && !have_b)
        nwhy = "it could not be read";
    bool b_db;
    if (have_b) {
        b_db = sqlite_of(b.p, b.n, &hb);
        sb = b.n;
        /* the new content's blob id: to tell a reset to git's version */
        if (size_may_be(eb, b.n) || size_may_be(ea, b.n) || (r && r->git_changed)) {
            gix_blob_oid(b.p, b.n, f->noid);
            f->have_noid = true;
        }
    } else {
        b_db = db_header_at(c->in->upperfd, f->path, &hb, &sb, NULL);
    }
    if (a.p && have_b && a.n == b.n && !memcmp(a.p, b.p, a.n)) {
        f->state = LF_SAFE;
    } else if (f->db) {
        char *dwhy = NULL;
        if (db_destroyed(&ha, sa, &a, b_db, &hb, sb, &b, &dwhy)) {
            f->state = LF_LOST;
            f->why = dwhy;
        } else {
            f->state = LF_SAFE; /* a database in use */
        }
    } else if (f->db_kind && (have_b || (nfd >= 0 && S_ISREG(nst.st_mode)))) {
        if (have_b ? !b.n : !nst.st_size) {
            f->state = LF_LOST;
            f->why = f->db_dir ? xasprintf("a file of a %s database emptied", f->db_kind)
                               : xasprintf("a %s database emptied", f->db_kind);
        } else {
            f->state = LF_SAFE; /* a database in use */
        }
    } else if (!a.p || !have_b) {
        f->state = LF_LOST;
        f->unverified = true;
        f->why = xasprintf("overwritten; not compared: %s", a.p ? nwhy : why);
    } else if (f->have_noid &&
               ((eb && !memcmp(eb->oid, f->noid, 20)) || (ea && !memcmp(ea->oid, f->noid, 20)))) {
        f->state = LF_LOST;
        f->why = xstrdup("reset to the index's version: its changes discarded");
    } else if (!b.n) {
        f->state = LF_LOST;
        f->why = xstrdup("emptied");
    } else {
        double k = kept_share(&a, &b);
        if (k < 0.5) {
            f->state = LF_LOST;
            f->why = xasprintf("overwritten: %.0f%% of its content kept", k * 100);
        } else {
            f->state = LF_EDITED; /* an edit, unless git says it went back to HEAD's */
            if (f->tracked)
                judge_restore(c, r, f, &a, &b);
        }
    }
    if (f->state == LF_LOST && a.p)
        hash_old(f, &a);
    free(a.p);
    free(b.p);
}

/* ---- moved, and the agent's own ---- */

/* Lost contents written elsewhere by the same commit: moved, not lost. */
struct moves {
    struct lctx *c;
    uint64_t *sizes; /* of the lost contents, sorted */
    size_t n;
    size_t looked;
};

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A new file of the commit (fd, open for reading): the content of lost
 * files? */
static void move_target(struct moves *m, int fd)
{
    struct lctx *c = m->c;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    uint64_t sz = (uint64_t)st.st_size;
    if (!bsearch(&sz, m->sizes, m->n, sizeof *m->sizes, by_u64) || sz > c->budget || sz > LOSS_FILE_CAP)
        return;
    char *buf = xmalloc((size_t)sz + 1);
    ssize_t n = read_all(fd, buf, (size_t)sz);
    if (n == (ssize_t)sz) {
        c->budget -= sz;
        char sha[65];
        hash_bytes_hex(buf, (size_t)n, sha);
        for (size_t k = 0; k < c->nf; k++) {
            struct lfile *f = &c->f[k];
            if (f->state == LF_LOST && f->have_sha && !f->folded && !strcmp(f->sha, sha))
                f->state = LF_SAFE; /* moved or copied */
        }
    }
    free(buf);
}

static void move_walk(struct moves *m, int dfd, const char *name, unsigned depth)
{
    if (++m->looked > LOSS_WALK_MAX || depth > 256)
        return;
    _cleanup_close_ int fd =
        openat_noatime(dfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return;
    if (S_ISREG(st.st_mode)) {
        move_target(m, fd);
        return;
    }
    if (!S_ISDIR(st.st_mode))
        return;
    DIR *d = fdopendir(fd);
    if (!d)
        return;
    fd = -1;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            move_walk(m, dirfd(d), de->d_name, depth + 1);
    closedir(d);
}

static void find_moves(struct lctx *c)
{
    struct moves m = {.c = c};
    for (size_t i = 0; i < c->nf; i++) {
        struct lfile *f = &c->f[i];
        if (f->state != LF_LOST || !f->have_sha || f->folded)
            continue;
        m.sizes = xrealloc(m.sizes, (m.n + 1) * sizeof *m.sizes);
        m.sizes[m.n++] = f->size;
    }
    if (!m.n)
        return;
    qsort(m.sizes, m.n, sizeof *m.sizes, by_u64);
    const struct tx_ops *ops = c->in->ops;
    for (size_t i = 0; i < ops->n && m.looked < LOSS_WALK_MAX; i++) {
        const struct tx_op *o = &ops->v[i];
        if (o->kind != OP_REPLACE)
            continue;
        const char *base;
        _cleanup_close_ int pfd = safe_open_parent(c->in->upperfd, o->path, &base);
        if (pfd >= 0)
            move_walk(&m, pfd, base, 0);
    }
    free(m.sizes);
}

/* Is the pre-image a transaction kept of path git's version of it (the
 * index's blob before this commit)? */
static bool preimage_is_git(struct lctx *c, const struct lfile *f, const struct store_origin *o)
{
    struct lrepo *r = f->repo >= 0 ? &c->r[f->repo] : NULL;
    if (!r || r->ib_state != 0 || o->pruned)
        return false;
    _cleanup_free_ char *ip = losses_index_path(r, f->path);
    const struct gix_entry *e = gix_find(&r->ib, ip, strlen(ip));
    if (!e)
        return false;
    _cleanup_free_ char *pre =
        *o->sub
            ? xasprintf("tx/%llu/undo/%llu/%s", (unsigned long long)o->tx, (unsigned long long)o->op, o->sub)
            : xasprintf("tx/%llu/undo/%llu", (unsigned long long)o->tx, (unsigned long long)o->op);
    struct stat st;
    struct blob b;
    const char *why;
    if (read_capped(c, c->in->ws->sfd, pre, &st, &b, &why) < 0)
        return false;
    unsigned char oid[20];
    gix_blob_oid(b.p, b.n, oid);
    free(b.p);
    return !memcmp(oid, e->oid, 20);
}

/* The last writer of a lost content, and whether it is the agent's own
 * work: a chain of txbox transactions from an absent file, or from git's
 * version. */
static void find_origin(struct lctx *c, struct lfile *f, struct loss_item *it)
{
    struct store_origin o;
    txbox_error e = {0};
    if (store_origin(c->in->ws, f->path, f->sha, 0, &o, &e) != 1)
        return;
    it->written_by = o.tx;
    it->age_s = c->in->now > o.finished ? c->in->now - o.finished : 0;
    bool own = false;
    for (int depth = 0; depth < 8; depth++) {
        if (o.added || preimage_is_git(c, f, &o)) {
            own = true;
            break;
        }
        if (!o.hash_before[0])
            break;
        char before[65];
        memcpy(before, o.hash_before, sizeof before);
        uint64_t t = o.tx;
        store_origin_free(&o);
        if (store_origin(c->in->ws, f->path, before, t, &o, &e) != 1)
            return;
    }
    store_origin_free(&o);
    it->own = own;
}

/* ---- the items ---- */

static void note_repo_items(struct lctx *c)
{
    for (size_t i = 0; i < c->nrm; i++) {
        struct lremoval *m = &c->rm[i];
        /* the work tree's files deleted with it: lost with it */
        int ri = repo_by_gitdir(c, m->gitdir);
        uint64_t bytes = m->bytes, files = 0;
        for (size_t k = 0; ri >= 0 && k < c->nf; k++) {
            struct lfile *f = &c->f[k];
            if (f->repo == ri && f->what == LFR_DELETED && !f->folded) {
                f->folded = true;
                bytes += f->size;
                files++;
            }
        }
        if (ri >= 0)
            c->r[ri].removed = true;
        _cleanup_free_ char *d =
            files ? xasprintf("the repository removed with its history, %llu files of git data and %llu "
                              "of its work tree",
                              (unsigned long long)m->files, (unsigned long long)files)
                  : xasprintf("the repository removed with its history (%llu files of git data)",
                              (unsigned long long)m->files);
        struct loss_item *it = losses_add(c->out, EFF_LOSS_REPOSITORY, m->gitdir, bytes, d);
        if (it) {
            /* a repository a recent transaction made (git init) */
            _cleanup_free_ char *head = xasprintf("%s/HEAD", m->gitdir);
            struct lfile hf = {.path = head, .repo = -1};
            struct blob b;
            struct stat st;
            const char *why;
            if (read_capped(c, c->in->ws->fd, head, &st, &b, &why) == 0) {
                hash_bytes_hex(b.p, b.n, hf.sha);
                free(b.p);
                find_origin(c, &hf, it);
            }
        }
        free(m->gitdir);
    }
    free(c->rm);
    c->rm = NULL;
    c->nrm = 0;
}

static void note_file_items(struct lctx *c)
{
    size_t origins = 0;
    for (size_t i = 0; i < c->nf; i++) {
        struct lfile *f = &c->f[i];
        if (f->state != LF_LOST || f->folded)
            continue;
        struct lrepo *r = f->repo >= 0 ? &c->r[f->repo] : NULL;
        int kind = f->db || f->db_kind ? EFF_LOSS_DATABASE
                   : r && f->tracked   ? EFF_LOSS_UNCOMMITTED
                                       : EFF_LOSS_UNTRACKED;
        const char *why = f->why ? f->why : kind_default_why(f);
        struct loss_item *it = losses_add(c->out, kind, f->path, f->size, why);
        if (!it)
            continue;
        it->unverified = f->unverified;
        if (f->have_sha && origins++ < LOSS_ORIGIN_MAX)
            find_origin(c, f, it);
    }
}

/* Index files whose rewrite changed no entry (a refresh); and the record
 * of the entries of each index the transaction leaves (LOSSES_INDEX_RECORD,
 * best effort: without it an undo takes a later refresh for a change). */
static void note_refreshed(struct lctx *c, struct gitchange *g, size_t ng)
{
    dbuf rec;
    dbuf_init(&rec, 0);
    for (size_t i = 0; i < ng; i++) {
        int ri = repo_by_gitdir(c, g[i].gitdir);
        if (ri < 0 || !g[i].index)
            continue;
        struct lrepo *r = &c->r[ri];
        load_indexes(c, r, &g[i]);
        if (r->ia_state == 0 && g[i].index_path && !strchr(g[i].index_path, '\n')) {
            char hex[41];
            gix_entries_digest(&r->ia, hex);
            dbuf_addstr(&rec, hex);
            dbuf_addstr(&rec, " ");
            dbuf_addstr(&rec, g[i].index_path);
            dbuf_addstr(&rec, "\n");
        }
        if (r->ib_state == 0 && r->ia_state == 0 && gix_same_entries(&r->ib, &r->ia)) {
            struct tx_ops *ops = c->in->ops;
            for (size_t k = 0; k < ops->n; k++) {
                struct tx_op *o = &ops->v[k];
                if (o->kind == OP_REPLACE && o->had_old && !o->old_dir && !o->new_dir &&
                    !strcmp(o->path, g[i].index_path))
                    o->quiet = 1; /* not reported as a change */
            }
            g[i].index = false; /* no entry changed: nothing to judge */
        }
    }
    if (rec.len && c->in->txfd >= 0) {
        int fd = openat(c->in->txfd, LOSSES_INDEX_RECORD,
                        O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            if (write_all(fd, dbuf_str(&rec), rec.len) < 0) {
                /* best effort: an undo then calls a later refresh a change */
            }
            close(fd);
        }
    }
    dbuf_free(&rec);
}

int losses_measure(const struct losses_in *in, struct losses *out, txbox_error *err)
{
    memset(out, 0, sizeof *out);
    struct lctx c = {.in = in, .out = out, .budget = LOSS_READ_BUDGET};
    struct gitchange *g = NULL;
    size_t ng = 0;
    collect(&c, &g, &ng);
    if (ng) /* the after state of git's files is read only then */
        lview_init(&c.view, in->ops);
    for (size_t i = 0; i < c.nf; i++)
        c.f[i].repo = losses_repo_of(&c, c.f[i].path);
    note_refreshed(&c, g, ng);
    for (size_t i = 0; i < ng; i++) {
        int ri = repo_by_gitdir(&c, g[i].gitdir);
        if (ri < 0)
            continue;
        struct lrepo *r = &c.r[ri];
        r->index_changed |= g[i].index;
        r->refs_changed |= g[i].refs;
        r->git_changed = r->index_changed || r->refs_changed;
        if (r->git_changed)
            load_indexes(&c, r, &g[i]);
    }
    note_repo_items(&c);
    for (size_t i = 0; i < c.nf; i++) {
        struct lfile *f = &c.f[i];
        if (f->folded || f->state != LF_PENDING)
            continue;
        struct lrepo *r = f->repo >= 0 ? &c.r[f->repo] : NULL;
        if (r && !r->why)
            load_indexes(&c, r, NULL);
        if (r && r->why) {
            f->state = LF_LOST;
            f->unverified = true;
            f->tracked = true; /* unknown: counted as the worse of the two */
            f->why = xasprintf("not verified: %s", r->why);
            continue;
        }
        judge_file(&c, f);
    }
    if (c.walk_capped)
        losses_add(out, EFF_LOSS_UNTRACKED, "...", 0,
                   "more files removed than txbox checks: the rest not verified")
            ->unverified = true;
    for (size_t i = 0; i < c.nr; i++) {
        struct lrepo *r = &c.r[i];
        bool cand = false;
        for (size_t k = 0; k < c.nf && !cand; k++)
            cand = c.f[k].repo == (int)i && !c.f[k].folded && !c.f[k].unverified &&
                   (c.f[k].state == LF_LOST || (c.f[k].state == LF_EDITED && r->git_changed));
        r->need_git = !r->removed && !r->why && (cand || r->git_changed);
    }
    losses_git(&c);
    for (size_t i = 0; i < c.nf; i++)
        if (c.f[i].state == LF_EDITED)
            c.f[i].state = LF_SAFE;
    find_moves(&c);
    tx_mark("losses:moves");
    note_file_items(&c);
    tx_mark("losses:items");
    losses_git_cleanup(&c);
    for (size_t i = 0; i < c.nf; i++) {
        free(c.f[i].path);
        free(c.f[i].why);
    }
    free(c.f);
    for (size_t i = 0; i < c.nr; i++) {
        struct lrepo *r = &c.r[i];
        free(r->wt);
        free(r->wt_abs);
        free(r->prefix);
        free(r->gitdir);
        free(r->gitdir_abs);
        free(r->common_abs);
        free(r->mirror_abs);
        gix_free(&r->ib);
        gix_free(&r->ia);
        losses_packs_free(r);
    }
    free(c.r);
    for (size_t i = 0; i < ng; i++) {
        free(g[i].gitdir);
        free(g[i].index_path);
    }
    free(g);
    lnames_free(&c.droots);
    dmap_free(&c.dbm);
    lview_free(&c.view);
    dmap_free(&c.dm);
    dircache_free(&c.dws);
    dircache_free(&c.dup);
    (void)err;
    return 0;
}

int losses_of_commit(const struct losses_in *in, txbox_result *r, struct losses *out, txbox_error *err)
{
    fs_fault_disarm();
    int rc = losses_measure(in, out, err);
    fs_fault_arm();
    r->losses = losses_json(out);
    tx_mark("losses");
    return rc;
}
