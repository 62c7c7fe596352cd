/* Losses only git's objects can tell: is a file's old content HEAD's, a
 * new commit's or ignored; staged changes, stash entries and commits a
 * commit drops (losses.c says what each is).
 *
 * Read with libgit2, in-process, never by running git: libgit2 reads
 * indexes, trees, refs, reflogs, ignore rules and reachability without
 * running anything the repository's configuration names (no hooks, no
 * fsmonitor, no filter, textconv or credential program), which the
 * workspace's .git, attacker input, may set. Two costs decide where:
 * loading libgit2 (a shared library with a dozen of its own) costs a
 * process about 3.5 ms of CPU, and its initialisation parses the system's
 * CA certificates (about 5 ms more), so txbox does not link it: the check
 * loads it with dlopen only when a commit has something only git can
 * answer (a change of .git, or a file whose old content is neither the
 * index's nor ignorable without git), and does so in a child process:
 *
 *   - confined: Landlock lets it read the workspace and the repositories'
 *     own directories only, write nothing and run nothing (a symlink in
 *     .git, an include, an alternate pointing out of the workspace is
 *     refused), and hides the CA certificates from the initialisation;
 *   - bounded: a deadline (LOSS_GIT_TIMEOUT_S; a fifo named HEAD would
 *     block a read forever), caps on what it walks, libgit2's own caps on
 *     mapped and cached memory and object size;
 *   - isolated: whatever the input does to libgit2, the commit's process
 *     only reads a capped JSON answer; a child that fails, times out or
 *     answers nonsense makes every loss it was asked about count, as not
 *     verified (fail closed).
 *
 * The before state is the workspace's repository. The after state is a
 * mirror of its git directory in .txbox/tx/ID/losses-git/N: a symlink to
 * each file as the commit leaves it (the upper's, else the workspace's,
 * losses_view.c), objects through alternates to both object directories
 * (what the command wrote and what was there). */
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sched.h>
#include <sys/wait.h>

#include <git2.h>

#include "confine.h"
#include "losses_int.h"
#include "safepath.h"
#include "sesslink.h"
#include "tree.h"

/* ---- libgit2, loaded when needed ---- */

#define GITFNS(X)                  \
    X(git_libgit2_init)            \
    X(git_libgit2_opts)            \
    X(git_error_last)              \
    X(git_repository_open_ext)     \
    X(git_repository_open_bare)    \
    X(git_repository_free)         \
    X(git_repository_odb)          \
    X(git_repository_path)         \
    X(git_odb_add_disk_alternate)  \
    X(git_odb_read_header)         \
    X(git_odb_free)                \
    X(git_reference_name_to_id)    \
    X(git_reference_iterator_new)  \
    X(git_reference_next)          \
    X(git_reference_iterator_free) \
    X(git_reference_name)          \
    X(git_reference_peel)          \
    X(git_reference_free)          \
    X(git_object_id)               \
    X(git_object_free)             \
    X(git_commit_lookup)           \
    X(git_commit_tree_id)          \
    X(git_commit_free)             \
    X(git_commit_parent_id)        \
    X(git_commit_parentcount)      \
    X(git_commit_summary)          \
    X(git_tree_lookup)             \
    X(git_tree_free)               \
    X(git_tree_entry_bypath)       \
    X(git_tree_entry_id)           \
    X(git_tree_entry_free)         \
    X(git_tree_entry_type)         \
    X(git_revwalk_new)             \
    X(git_revwalk_push)            \
    X(git_revwalk_hide)            \
    X(git_revwalk_next)            \
    X(git_revwalk_free)            \
    X(git_revwalk_sorting)         \
    X(git_ignore_path_is_ignored)  \
    X(git_oid_tostr)               \
    X(git_diff_tree_to_tree)       \
    X(git_diff_num_deltas)         \
    X(git_diff_get_delta)          \
    X(git_diff_free)               \
    X(git_reflog_read)             \
    X(git_reflog_entrycount)       \
    X(git_reflog_entry_byindex)    \
    X(git_reflog_entry_id_old)     \
    X(git_reflog_entry_id_new)     \
    X(git_reflog_entry_message)    \
    X(git_reflog_free)

static struct {
#define F(n) __typeof__(&n) n;
    GITFNS(F)
#undef F
} gl;
#define G(n) (gl.n)

static const char *gitdl_load(void)
{
    void *h = dlopen("libgit2.so." LIBGIT2_SOVERSION, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return "libgit2 " LIBGIT2_SOVERSION " is not installed";
#define F(n)                                    \
    if (!(gl.n = (__typeof__(&n))dlsym(h, #n))) \
        return "libgit2 " LIBGIT2_SOVERSION " lacks " #n;
    GITFNS(F)
#undef F
    return NULL;
}

static const char *git_why(void)
{
    const git_error *e = G(git_error_last)();
    return e && e->message ? e->message : "unknown error";
}

/* ---- sets of object ids ---- */

struct oidset {
    git_oid *v;
    unsigned char *used;
    size_t cap, n;
};

static size_t oid_hash(const git_oid *o)
{
    size_t h;
    memcpy(&h, o->id, sizeof h);
    return h;
}

static bool oidset_has(const struct oidset *s, const git_oid *o)
{
    if (!s->cap)
        return false;
    for (size_t i = oid_hash(o) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (!s->used[i])
            return false;
        if (!memcmp(s->v[i].id, o->id, GIT_OID_RAWSZ))
            return true;
    }
}

static bool oidset_add(struct oidset *s, const git_oid *o)
{
    if ((s->n + 1) * 2 > s->cap) {
        struct oidset old = *s;
        s->cap = old.cap ? old.cap * 2 : 256;
        s->v = xcalloc(s->cap, sizeof *s->v);
        s->used = xcalloc(s->cap, 1);
        s->n = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.used[i])
                oidset_add(s, &old.v[i]);
        free(old.v);
        free(old.used);
    }
    for (size_t i = oid_hash(o) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (!s->used[i]) {
            s->used[i] = 1;
            s->v[i] = *o;
            s->n++;
            return true;
        }
        if (!memcmp(s->v[i].id, o->id, GIT_OID_RAWSZ))
            return false;
    }
}

static void oidset_free(struct oidset *s)
{
    free(s->v);
    free(s->used);
    memset(s, 0, sizeof *s);
}

static bool oid_zero(const git_oid *o)
{
    for (size_t i = 0; i < GIT_OID_RAWSZ; i++)
        if (o->id[i])
            return false;
    return true;
}

/* ---- what a repository keeps: refs, reflogs, stash ---- */

/* A branch or a tag: a name people keep commits by. */
struct branch {
    char *name; /* refs/heads/NAME or refs/tags/NAME */
    git_oid oid;
};

static bool is_tag(const char *ref) { return !strncmp(ref, "refs/tags/", 10); }

static int branch_cmp(const void *a, const void *b)
{
    return strcmp(((const struct branch *)a)->name, ((const struct branch *)b)->name);
}

/* The branch or tag of that name in br (sorted by name: read_tips), or
 * NULL: a repository may have thousands of tags. */
static const struct branch *branch_find(const struct branch *br, size_t n, const char *name)
{
    struct branch key = {.name = (char *)name};
    return n ? bsearch(&key, br, n, sizeof *br, branch_cmp) : NULL;
}

/* "branch NAME" or "tag NAME" */
static char *ref_words(const char *ref)
{
    return xasprintf("%s %s", is_tag(ref) ? "tag" : "branch", ref + (is_tag(ref) ? 10 : 11));
}

struct tips {
    struct oidset set; /* every commit a ref, reflog or stash entry names */
    git_oid *list;     /* the same, in order */
    size_t n, cap;
    size_t nrefs;      /* list[0, nrefs): HEAD's and the refs', before the reflogs' */
    bool head;         /* list[0] is HEAD's commit */
    struct branch *br; /* refs/heads/ and refs/tags/, by name */
    size_t nbr, cbr;
    git_oid *stash; /* stash@{0}, {1} ... */
    char **stash_msg;
    size_t nstash;
    bool overflow;
};

static void tips_add(struct tips *t, const git_oid *o)
{
    if (oid_zero(o) || t->overflow)
        return;
    if (t->n >= LOSS_TIPS_MAX) {
        t->overflow = true;
        return;
    }
    if (!oidset_add(&t->set, o))
        return;
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 256;
        t->list = xrealloc(t->list, t->cap * sizeof *t->list);
    }
    t->list[t->n++] = *o;
}

static void tips_free(struct tips *t)
{
    oidset_free(&t->set);
    free(t->list);
    for (size_t i = 0; i < t->nbr; i++)
        free(t->br[i].name);
    free(t->br);
    for (size_t i = 0; i < t->nstash; i++)
        free(t->stash_msg[i]);
    free(t->stash);
    free(t->stash_msg);
    memset(t, 0, sizeof *t);
}

static void reflog_tips(git_repository *repo, const char *name, struct tips *t, bool stash)
{
    git_reflog *rl = NULL;
    if (G(git_reflog_read)(&rl, repo, name) < 0)
        return;
    size_t n = G(git_reflog_entrycount)(rl);
    for (size_t i = 0; i < n && !t->overflow; i++) {
        const git_reflog_entry *e = G(git_reflog_entry_byindex)(rl, i);
        tips_add(t, G(git_reflog_entry_id_old)(e));
        tips_add(t, G(git_reflog_entry_id_new)(e));
        if (stash && t->nstash < 10000) {
            t->stash = xrealloc(t->stash, (t->nstash + 1) * sizeof *t->stash);
            t->stash_msg = xrealloc(t->stash_msg, (t->nstash + 1) * sizeof *t->stash_msg);
            t->stash[t->nstash] = *G(git_reflog_entry_id_new)(e);
            const char *m = G(git_reflog_entry_message)(e);
            t->stash_msg[t->nstash++] = xstrdup(m ? m : "");
        }
    }
    G(git_reflog_free)(rl);
}

/* The reflogs that have no ref (a deleted branch's, left behind): name
 * is a directory under logs/ (dfd). */
static void walk_logs(git_repository *repo, int dfd, const char *name, struct lnames *refs, struct tips *t,
                      unsigned depth, size_t *seen)
{
    _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d)
        return;
    fd = -1;
    struct dirent *de;
    while ((de = readdir(d)) && !t->overflow) {
        if (de->d_name[0] == '.' || ++*seen > LOSS_MIRROR_MAX)
            continue;
        _cleanup_free_ char *p = xasprintf("%s/%s", name, de->d_name);
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, 0) < 0)
            continue;
        if (S_ISDIR(st.st_mode) && depth < 32) {
            walk_logs(repo, dfd, p, refs, t, depth + 1, seen);
            continue;
        }
        bool known = false;
        for (size_t i = 0; i < refs->n && !known; i++)
            known = !strcmp(refs->v[i], p);
        if (!known && strcmp(p, "refs/stash"))
            reflog_tips(repo, p, t, false);
    }
    closedir(d);
}

static void read_tips(git_repository *repo, struct tips *t)
{
    git_oid o;
    if (G(git_reference_name_to_id)(&o, repo, "HEAD") == 0) {
        tips_add(t, &o);
        t->head = t->n == 1;
    }
    git_reference_iterator *it = NULL;
    struct lnames names = {0};
    if (G(git_reference_iterator_new)(&it, repo) == 0) {
        git_reference *ref;
        while (!t->overflow && G(git_reference_next)(&ref, it) == 0) {
            const char *name = G(git_reference_name)(ref);
            git_object *obj = NULL;
            if (G(git_reference_peel)(&obj, ref, GIT_OBJECT_COMMIT) == 0) {
                const git_oid *id = G(git_object_id)(obj);
                tips_add(t, id);
                if (!strncmp(name, "refs/heads/", 11) || is_tag(name)) {
                    if (t->nbr == t->cbr) {
                        t->cbr = t->cbr ? t->cbr * 2 : 16;
                        t->br = xrealloc(t->br, t->cbr * sizeof *t->br);
                    }
                    t->br[t->nbr++] = (struct branch){.name = xstrdup(name), .oid = *id};
                }
                G(git_object_free)(obj);
            }
            if (names.n < LOSS_TIPS_MAX)
                lnames_push(&names, xstrdup(name));
            G(git_reference_free)(ref);
        }
        G(git_reference_iterator_free)(it);
    }
    t->nrefs = t->n;
    if (t->nbr)
        qsort(t->br, t->nbr, sizeof *t->br, branch_cmp);
    reflog_tips(repo, "HEAD", t, false);
    for (size_t i = 0; i < names.n && !t->overflow; i++)
        if (strcmp(names.v[i], "refs/stash"))
            reflog_tips(repo, names.v[i], t, false);
    reflog_tips(repo, "refs/stash", t, true);
    if (!t->nstash && G(git_reference_name_to_id)(&o, repo, "refs/stash") == 0) {
        t->stash = xcalloc(1, sizeof *t->stash);
        t->stash_msg = xcalloc(1, sizeof *t->stash_msg);
        t->stash[0] = o;
        t->stash_msg[0] = xstrdup("");
        t->nstash = 1;
    }
    _cleanup_free_ char *logs = xasprintf("%slogs", G(git_repository_path)(repo));
    _cleanup_close_ int ld = open(logs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    size_t seen = 0;
    if (ld >= 0)
        walk_logs(repo, ld, "refs", &names, t, 0, &seen);
    lnames_free(&names);
}

/* ---- one repository's check ---- */

struct gctx {
    struct lctx *c;
    struct lrepo *r;
    size_t ri;
    git_repository *rb, *ra;
    git_odb *odb; /* the after state's (both object directories), else the before's */
    git_tree *hb, *ha;
    struct tips tb, ta;
    bool tips_read;
    git_tree **newt; /* the trees of the commits this one made */
    size_t nnew;
    bool new_read;
    git_tree **brt; /* the after state's branches' trees */
    size_t nbrt;
    bool brt_read;
    json_t *safe, *reset, *items;
    double deadline;
};

static git_tree *head_tree(git_repository *repo)
{
    git_oid o;
    git_commit *cm = NULL;
    git_tree *t = NULL;
    if (G(git_reference_name_to_id)(&o, repo, "HEAD") < 0 || G(git_commit_lookup)(&cm, repo, &o) < 0)
        return NULL;
    if (G(git_tree_lookup)(&t, repo, G(git_commit_tree_id)(cm)) < 0)
        t = NULL;
    G(git_commit_free)(cm);
    return t;
}

static git_tree *commit_tree(git_repository *repo, const git_oid *c)
{
    git_commit *cm = NULL;
    git_tree *t = NULL;
    if (G(git_commit_lookup)(&cm, repo, c) < 0)
        return NULL;
    if (G(git_tree_lookup)(&t, repo, G(git_commit_tree_id)(cm)) < 0)
        t = NULL;
    G(git_commit_free)(cm);
    return t;
}

/* Is blob oid at path in tree? */
static bool blob_at(git_tree *tree, const char *path, const unsigned char *oid)
{
    git_tree_entry *e = NULL;
    if (!tree || G(git_tree_entry_bypath)(&e, tree, path) < 0)
        return false;
    bool same = G(git_tree_entry_type)(e) == GIT_OBJECT_BLOB && !memcmp(G(git_tree_entry_id)(e)->id, oid, 20);
    G(git_tree_entry_free)(e);
    return same;
}

static void need_tips(struct gctx *g)
{
    if (g->tips_read || !g->ra)
        return;
    g->tips_read = true;
    read_tips(g->rb, &g->tb);
    read_tips(g->ra, &g->ta);
}

/* The commits the transaction made (reachable after, not before). */
static void need_new(struct gctx *g)
{
    if (g->new_read || !g->ra || !g->r->refs_changed)
        return;
    g->new_read = true;
    need_tips(g);
    git_revwalk *w = NULL;
    if (G(git_revwalk_new)(&w, g->ra) < 0)
        return;
    for (size_t i = 0; i < g->ta.n; i++)
        if (!oidset_has(&g->tb.set, &g->ta.list[i]))
            (void)G(git_revwalk_push)(w, &g->ta.list[i]);
    for (size_t i = 0; i < g->tb.n; i++)
        (void)G(git_revwalk_hide)(w, &g->tb.list[i]);
    git_oid o;
    while (g->nnew < LOSS_NEW_COMMITS && G(git_revwalk_next)(&o, w) == 0) {
        git_tree *t = commit_tree(g->ra, &o);
        if (!t)
            continue;
        g->newt = xrealloc(g->newt, (g->nnew + 1) * sizeof *g->newt);
        g->newt[g->nnew++] = t;
        /* a stash's index and untracked files are its parents' trees */
        git_commit *cm = NULL;
        if (G(git_commit_lookup)(&cm, g->ra, &o) == 0) {
            for (unsigned p = 1; p < G(git_commit_parentcount)(cm) && p < 3; p++) {
                git_tree *pt = commit_tree(g->ra, G(git_commit_parent_id)(cm, p));
                if (pt) {
                    g->newt = xrealloc(g->newt, (g->nnew + 1) * sizeof *g->newt);
                    g->newt[g->nnew++] = pt;
                }
            }
            G(git_commit_free)(cm);
        }
    }
    G(git_revwalk_free)(w);
}

static bool in_new(struct gctx *g, const char *path, const unsigned char *oid)
{
    need_new(g);
    for (size_t i = 0; i < g->nnew; i++)
        if (blob_at(g->newt[i], path, oid))
            return true;
    return false;
}

static bool in_branches(struct gctx *g, const char *path, const unsigned char *oid)
{
    if (!g->brt_read && g->ra) {
        g->brt_read = true;
        need_tips(g);
        for (size_t i = 0; i < g->ta.nbr && g->nbrt < 64; i++) {
            git_tree *t = commit_tree(g->ra, &g->ta.br[i].oid);
            if (t) {
                g->brt = xrealloc(g->brt, (g->nbrt + 1) * sizeof *g->brt);
                g->brt[g->nbrt++] = t;
            }
        }
    }
    for (size_t i = 0; i < g->nbrt; i++)
        if (blob_at(g->brt[i], path, oid))
            return true;
    return false;
}

/* The work tree's file at index path ip after the commit: its blob id. */
static bool worktree_after(struct gctx *g, const char *ip, unsigned char oid[20])
{
    struct lrepo *r = g->r;
    size_t pl = strlen(r->prefix);
    _cleanup_close_ int fd = -1;
    if (pl && strncmp(ip, r->prefix, pl)) {
        /* outside the workspace: the command could not change it */
        _cleanup_free_ char *abs = xasprintf("%s/%s", r->wt_abs, ip);
        fd = open(abs, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    } else {
        _cleanup_free_ char *p = r->wt && *r->wt ? xasprintf("%s/%s", r->wt, ip + pl) : xstrdup(ip + pl);
        int w = lview_where(&g->c->view, p);
        if (w == LV_GONE)
            return false;
        fd = safe_openat_noatime(w == LV_UPPER ? g->c->in->upperfd : g->c->in->ws->fd, p,
                                 O_RDONLY | O_NOCTTY | O_NONBLOCK);
    }
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > LOSS_FILE_CAP)
        return false;
    char *buf = xmalloc((size_t)st.st_size + 1);
    ssize_t n = read_all(fd, buf, (size_t)st.st_size);
    if (n >= 0)
        gix_blob_oid(buf, (size_t)n, oid);
    free(buf);
    return n >= 0;
}

static bool worktree_has(struct gctx *g, const char *ip, const unsigned char *oid)
{
    unsigned char w[20];
    return worktree_after(g, ip, w) && !memcmp(w, oid, 20);
}

static uint64_t object_size(struct gctx *g, const git_oid *o)
{
    size_t len = 0;
    git_object_t type;
    if (!g->odb || G(git_odb_read_header)(&len, &type, g->odb, o) < 0)
        return 0;
    return len;
}

static json_t *add_item(struct gctx *g, int kind, const char *path, uint64_t bytes, const char *detail,
                        bool unverified)
{
    if (json_array_size(g->items) >= 1000)
        return NULL;
    json_t *o = json_pack("{s:i,s:s,s:I,s:s}", "kind", kind, "path", path, "bytes", (json_int_t)bytes,
                          "detail", detail);
    if (unverified)
        json_object_set_new(o, "unverified", json_true());
    json_array_append_new(g->items, o);
    return o;
}

/* The workspace path of index path ip (or ip when outside it). */
static char *ws_path_of(const struct lrepo *r, const char *ip)
{
    size_t pl = strlen(r->prefix);
    if (pl && strncmp(ip, r->prefix, pl))
        return xstrdup(ip);
    return r->wt && *r->wt ? xasprintf("%s/%s", r->wt, ip + pl) : xstrdup(ip + pl);
}

/* A line of untrusted text for a detail: printable, capped. */
static void clean_line(char *s, size_t max)
{
    size_t n = strlen(s);
    if (n > max)
        s[max] = 0;
    for (unsigned char *p = (unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = ' ';
}

static void describe_commit(struct gctx *g, const git_oid *o, char *buf, size_t n)
{
    char hex[12];
    G(git_oid_tostr)(hex, sizeof hex, o);
    git_commit *cm = NULL;
    const char *s = NULL;
    if (G(git_commit_lookup)(&cm, g->ra, o) == 0)
        s = G(git_commit_summary)(cm);
    _cleanup_free_ char *t = xstrdup(s ? s : "");
    clean_line(t, 60);
    snprintf(buf, n, "%s %s", hex, t);
    if (cm)
        G(git_commit_free)(cm);
}

/* ---- the checks ---- */

/* A file whose old content is lost unless git keeps it (LF_LOST): is it
 * HEAD's (or, after a change of git, the after state's or a new commit's),
 * or ignored (may_ignore: neither tracked, a database nor a secret)? ip:
 * its path in the index; oid: its old content's blob id (NULL: not
 * known); droot_ip: the deleted tree it came from, asked first (one
 * question for a build directory's files; answers kept in roots). */
static bool lost_is_safe(struct gctx *g, const char *ip, const unsigned char *oid, bool may_ignore,
                         const char *droot_ip, json_t *roots)
{
    if (oid && (blob_at(g->hb, ip, oid) || (g->ra && (blob_at(g->ha, ip, oid) || in_new(g, ip, oid)))))
        return true;
    if (!may_ignore)
        return false;
    int ign = 0;
    if (droot_ip) {
        json_t *known = json_object_get(roots, droot_ip);
        if (known) {
            ign = json_is_true(known);
        } else {
            _cleanup_free_ char *dir = xasprintf("%s/", droot_ip);
            if (G(git_ignore_path_is_ignored)(&ign, g->rb, dir) < 0)
                ign = 0;
            json_object_set_new(roots, droot_ip, json_boolean(ign));
        }
    }
    if (!ign && G(git_ignore_path_is_ignored)(&ign, g->rb, ip) < 0)
        ign = 0;
    return ign;
}

/* May git's ignore rules make f's loss a build product's? */
static bool may_ignore(const struct lfile *f) { return !(f->tracked || f->db || f->db_kind || f->secret); }

/* The deleted tree f came from, as r's index names it, when the ignore
 * rules are asked of it (NULL otherwise): made once a tree, in roots
 * (c->droots.n entries, the caller's to free), not once a file of it. */
static const char *droot_ip(const struct lctx *c, const struct lrepo *r, char **roots, const struct lfile *f)
{
    if (!f->droot || !may_ignore(f))
        return NULL;
    char **rp = &roots[f->droot - 1];
    if (!*rp)
        *rp = losses_index_path(r, c->droots.v[f->droot - 1]);
    return *rp;
}

static void roots_free(const struct lctx *c, char **roots)
{
    for (size_t i = 0; i < c->droots.n; i++)
        free(roots[i]);
    free(roots);
}

/* The files losses.c could not clear without git. */
static void check_files(struct gctx *g)
{
    struct lctx *c = g->c;
    json_t *ignored_roots = json_object();
    char **rips = xcalloc(c->droots.n + 1, sizeof *rips);
    for (size_t i = 0; i < c->nf; i++) {
        struct lfile *f = &c->f[i];
        if (f->repo != (int)g->ri || f->folded || f->unverified ||
            !(f->state == LF_LOST || (f->state == LF_EDITED && g->ra)))
            continue;
        _cleanup_free_ char *ip = losses_index_path(g->r, f->path);
        if (f->state == LF_EDITED) {
            if (f->have_noid && (blob_at(g->hb, ip, f->noid) || blob_at(g->ha, ip, f->noid)))
                json_array_append_new(g->reset, json_integer((json_int_t)i));
            continue;
        }
        if (lost_is_safe(g, ip, f->have_oid ? f->oid : NULL, may_ignore(f), droot_ip(c, g->r, rips, f),
                         ignored_roots))
            json_array_append_new(g->safe, json_integer((json_int_t)i));
    }
    roots_free(c, rips);
    json_decref(ignored_roots);
}

/* Staged changes the index no longer has and nothing else keeps. */
static void check_staged(struct gctx *g)
{
    struct lrepo *r = g->r;
    if (r->ib_state != 0)
        return;
    const struct gix *ia = r->ia_state == 0 ? &r->ia : NULL;
    size_t looked = 0;
    for (size_t i = 0; i < r->ib.n; i++) {
        const struct gix_entry *e = &r->ib.v[i];
        if ((e->flags & 0x3000) || (e->xflags & 0x2000) || (e->mode & 0170000) == 0160000)
            continue; /* a conflict's stages, an intent to add, a submodule */
        const struct gix_entry *ea = ia ? gix_find(ia, e->path, strlen(e->path)) : NULL;
        if (ea && !memcmp(ea->oid, e->oid, 20))
            continue;
        if (++looked > LOSS_STAGED_MAX) {
            add_item(g, EFF_LOSS_STAGED, r->gitdir ? r->gitdir : ".git", 0,
                     "not verified: more staged entries changed than txbox checks", true);
            return;
        }
        if (blob_at(g->hb, e->path, e->oid))
            continue; /* HEAD's: nothing was staged there */
        if (blob_at(g->ha, e->path, e->oid) || worktree_has(g, e->path, e->oid) ||
            in_new(g, e->path, e->oid) || in_branches(g, e->path, e->oid))
            continue;
        git_oid o;
        memcpy(o.id, e->oid, 20);
        char hex[12];
        G(git_oid_tostr)(hex, sizeof hex, &o);
        _cleanup_free_ char *p = ws_path_of(r, e->path);
        _cleanup_free_ char *d = xasprintf("a staged change dropped from the index (blob %s)", hex);
        add_item(g, EFF_LOSS_STAGED, p, object_size(g, &o), d, false);
    }
}

/* The changes stash entry s holds, each still somewhere after the commit?
 * *lost: the bytes of those that are not. */
static bool stash_applied(struct gctx *g, const git_oid *s, uint64_t *lost)
{
    *lost = 0;
    git_commit *cm = NULL;
    git_repository *repo = g->ra; /* both object directories */
    if (G(git_commit_lookup)(&cm, repo, s) < 0)
        return false;
    unsigned np = G(git_commit_parentcount)(cm);
    git_tree *ts = commit_tree(repo, s),
             *base = np ? commit_tree(repo, G(git_commit_parent_id)(cm, 0)) : NULL;
    git_tree *from[3] = {base, base, NULL}, *to[3] = {ts, NULL, NULL};
    if (np > 1)
        to[1] = commit_tree(repo, G(git_commit_parent_id)(cm, 1));
    if (np > 2)
        to[2] = commit_tree(repo, G(git_commit_parent_id)(cm, 2));
    G(git_commit_free)(cm);
    bool all = true;
    size_t seen = 0;
    for (int k = 0; k < 3; k++) {
        if (!to[k])
            continue;
        git_diff *d = NULL;
        if (G(git_diff_tree_to_tree)(&d, repo, from[k], to[k], NULL) < 0) {
            all = false;
            continue;
        }
        for (size_t i = 0; i < G(git_diff_num_deltas)(d) && seen < 10000; i++, seen++) {
            const git_diff_delta *dl = G(git_diff_get_delta)(d, i);
            const git_diff_file *nf = &dl->new_file;
            if (dl->status == GIT_DELTA_DELETED || oid_zero(&nf->id))
                continue;
            const struct gix_entry *ea =
                g->r->ia_state == 0 ? gix_find(&g->r->ia, nf->path, strlen(nf->path)) : NULL;
            if (!g->r->index_changed && g->r->ib_state == 0)
                ea = gix_find(&g->r->ib, nf->path, strlen(nf->path));
            if ((ea && !memcmp(ea->oid, nf->id.id, 20)) || blob_at(g->ha, nf->path, nf->id.id) ||
                worktree_has(g, nf->path, nf->id.id))
                continue;
            all = false;
            *lost += object_size(g, &nf->id);
        }
        G(git_diff_free)(d);
    }
    for (int k = 0; k < 3; k++)
        if (to[k])
            G(git_tree_free)(to[k]);
    if (base)
        G(git_tree_free)(base);
    return all;
}

static void check_stash(struct gctx *g)
{
    struct oidset after = {0};
    for (size_t i = 0; i < g->ta.nstash; i++)
        oidset_add(&after, &g->ta.stash[i]);
    for (size_t i = 0; i < g->tb.nstash; i++) {
        const git_oid *s = &g->tb.stash[i];
        if (oidset_has(&after, s) || oidset_has(&g->ta.set, s))
            continue;
        uint64_t lost;
        if (stash_applied(g, s, &lost))
            continue; /* popped: its changes are in the work tree or the index */
        _cleanup_free_ char *msg = xstrdup(g->tb.stash_msg[i]);
        clean_line(msg, 80);
        char path[40];
        snprintf(path, sizeof path, "stash@{%zu}", i);
        _cleanup_free_ char *d = xasprintf("a stash entry dropped%s%s", *msg ? ": " : "", msg);
        add_item(g, EFF_LOSS_STASH, path, lost ? lost : object_size(g, s), d, false);
    }
    oidset_free(&after);
}

/* Commits from push[0..n) that none of the after state's first nhide tips
 * reaches (g->ta.n: no ref, reflog or stash entry; g->ta.nrefs: no ref),
 * nor, with branches, a branch before: into *lost (when not NULL),
 * counted, their objects' bytes, the newest. */
static int walk_lost(struct gctx *g, const git_oid *push, size_t n, size_t nhide, bool branches,
                     struct oidset *lost, size_t *count, uint64_t *bytes, git_oid *newest, bool *capped)
{
    *count = 0;
    *bytes = 0;
    *capped = false;
    git_revwalk *w = NULL;
    if (G(git_revwalk_new)(&w, g->ra) < 0)
        return -1;
    G(git_revwalk_sorting)(w, GIT_SORT_TIME);
    size_t pushed = 0;
    for (size_t i = 0; i < n; i++)
        pushed += G(git_revwalk_push)(w, &push[i]) == 0;
    for (size_t i = 0; i < nhide && i < g->ta.n; i++)
        (void)G(git_revwalk_hide)(w, &g->ta.list[i]);
    for (size_t i = 0; branches && i < g->tb.nbr; i++)
        (void)G(git_revwalk_hide)(w, &g->tb.br[i].oid);
    git_oid o;
    while (pushed && G(git_revwalk_next)(&o, w) == 0) {
        if (!*count)
            *newest = o;
        if (lost)
            oidset_add(lost, &o);
        (*count)++;
        *bytes += object_size(g, &o);
        if (*count >= LOSS_WALK_COMMITS || ((*count & 255) == 0 && wall_time() > g->deadline)) {
            *capped = true;
            break;
        }
    }
    G(git_revwalk_free)(w);
    return 0;
}

static void check_history(struct gctx *g)
{
    need_tips(g);
    const char *gd = g->r->gitdir ? g->r->gitdir : ".git";
    if (g->tb.overflow || g->ta.overflow) {
        add_item(g, EFF_LOSS_HISTORY, gd, 0, "not verified: more refs and reflog entries than txbox reads",
                 true);
        return;
    }
    struct oidset stash = {0}; /* judged by check_stash */
    for (size_t i = 0; i < g->tb.nstash; i++)
        oidset_add(&stash, &g->tb.stash[i]);
    git_oid *removed = NULL;
    size_t nr = 0;
    for (size_t i = 0; i < g->tb.n; i++)
        if (!oidset_has(&g->ta.set, &g->tb.list[i]) && !oidset_has(&stash, &g->tb.list[i])) {
            removed = xrealloc(removed, (nr + 1) * sizeof *removed);
            removed[nr++] = g->tb.list[i];
        }
    if (!nr)
        return;
    struct oidset lost = {0}, told = {0};
    size_t count;
    uint64_t bytes;
    git_oid newest;
    bool capped;
    if (walk_lost(g, removed, nr, g->ta.n, false, &lost, &count, &bytes, &newest, &capped) < 0 || capped) {
        add_item(g, EFF_LOSS_HISTORY, gd, bytes,
                 "not verified: the commits refs and reflogs no longer name could not be walked within "
                 "txbox's caps",
                 true);
        goto out;
    }
    if (!count)
        goto out;
    /* branches deleted with commits of their own */
    size_t branch_commits = 0;
    for (size_t i = 0; i < g->tb.nbr; i++) {
        const struct branch *b = &g->tb.br[i];
        bool still = branch_find(g->ta.br, g->ta.nbr, b->name) != NULL;
        if (still || !oidset_has(&lost, &b->oid) || oidset_has(&told, &b->oid))
            continue;
        size_t bc;
        uint64_t bb;
        git_oid bn;
        bool bcap;
        struct oidset mine = {0};
        if (walk_lost(g, &b->oid, 1, g->ta.n, false, &mine, &bc, &bb, &bn, &bcap) == 0 && bc) {
            for (size_t k = 0; k < mine.cap; k++)
                if (mine.used[k] && oidset_add(&told, &mine.v[k]))
                    branch_commits++;
            char nc[96];
            describe_commit(g, &bn, nc, sizeof nc);
            _cleanup_free_ char *bw = ref_words(b->name);
            _cleanup_free_ char *d =
                xasprintf("%s deleted with %zu commit%s no other ref, reflog or stash has (newest: %s)", bw,
                          bc, bc == 1 ? "" : "s", nc);
            json_t *o = add_item(g, EFF_LOSS_BRANCH, b->name, bb, d, false);
            if (o)
                json_object_set_new(o, "commits", json_integer((json_int_t)bc));
        }
        oidset_free(&mine);
    }
    if (count > branch_commits) {
        char nc[96];
        describe_commit(g, &newest, nc, sizeof nc);
        size_t rest = count - branch_commits;
        _cleanup_free_ char *d =
            xasprintf("%zu commit%s no ref, reflog or stash reaches any more (newest: %s)", rest,
                      rest == 1 ? "" : "s", nc);
        json_t *o = add_item(g, EFF_LOSS_HISTORY, gd, bytes, d, false);
        if (o)
            json_object_set_new(o, "commits", json_integer((json_int_t)rest));
    }
out:
    oidset_free(&lost);
    oidset_free(&told);
    oidset_free(&stash);
    free(removed);
}

/* Did the repository have commit o before the transaction? */
static bool existed_before(struct gctx *g, const git_oid *o)
{
    git_odb *odb = NULL;
    if (G(git_repository_odb)(&odb, g->rb) < 0)
        return true; /* unknown: as if it had, which reports more, never less */
    size_t len;
    git_object_t type;
    bool had = G(git_odb_read_header)(&len, &type, odb, o) == 0;
    G(git_odb_free)(odb);
    return had;
}

/* A loss of commits that only a reflog names now (check_branches): those
 * from tip that no ref after has (nor, with branches, a branch before),
 * when every one of them is still in a reflog; what, for the detail
 * ("branch feature deleted with", ...), and the item's path. */
static void reflog_only(struct gctx *g, const git_oid *tip, bool branches, const char *what, const char *path)
{
    size_t n;
    uint64_t bytes;
    git_oid newest;
    bool capped;
    if (walk_lost(g, tip, 1, g->ta.n, branches, NULL, &n, &bytes, &newest, &capped) < 0 || n > 0 ||
        walk_lost(g, tip, 1, g->ta.nrefs, branches, NULL, &n, &bytes, &newest, &capped) < 0 || !n)
        return; /* none, or some in no reflog either: check_history's */
    char nc[96];
    describe_commit(g, &newest, nc, sizeof nc);
    _cleanup_free_ char *d =
        xasprintf("%s %s%zu commit%s no other branch or tag has (newest: %s); only a reflog still names %s",
                  what, capped ? "at least " : "", n, n == 1 ? "" : "s", nc, n == 1 ? "it" : "them");
    json_t *o = add_item(g, EFF_LOSS_BRANCH, path, bytes, d, false);
    if (o)
        json_object_set_new(o, "commits", json_integer((json_int_t)n));
}

/* A branch or a tag deleted, or moved to a commit it did not make (git
 * reset --hard HEAD~2, git branch -f, git tag -f, git update-ref), with
 * commits that no branch, tag or other ref has any more while a reflog still names them
 * (HEAD's, when the branch was checked out): git's own "not fully merged";
 * and a detached HEAD moved off commits no branch had ("leaving N commits
 * behind"). Lost for those who would have to dig them out of a reflog
 * that expires; those no reflog names either are check_history's. A move
 * to a commit the transaction made (commit --amend, rebase) is a rewrite. */
static void check_branches(struct gctx *g)
{
    need_tips(g);
    if (g->tb.overflow || g->ta.overflow)
        return; /* check_history says: not verified */
    for (size_t i = 0; i < g->tb.nbr; i++) {
        const struct branch *b = &g->tb.br[i];
        const struct branch *a = branch_find(g->ta.br, g->ta.nbr, b->name);
        if (a && (!memcmp(a->oid.id, b->oid.id, 20) || !existed_before(g, &a->oid)))
            continue;
        _cleanup_free_ char *bw = ref_words(b->name);
        _cleanup_free_ char *what = xasprintf("%s %s", bw, a ? "moved off" : "deleted with");
        reflog_only(g, &b->oid, false, what, b->name);
    }
    /* HEAD detached on commits no branch had, moved off them to a commit
     * that existed before (git: "you are leaving N commits behind") */
    if (g->tb.head && g->ta.head && memcmp(g->tb.list[0].id, g->ta.list[0].id, 20) &&
        existed_before(g, &g->ta.list[0]))
        reflog_only(g, &g->tb.list[0], true, "HEAD, detached, left", "HEAD");
}

static void gctx_free(struct gctx *g)
{
    if (g->hb)
        G(git_tree_free)(g->hb);
    if (g->ha)
        G(git_tree_free)(g->ha);
    for (size_t i = 0; i < g->nnew; i++)
        G(git_tree_free)(g->newt[i]);
    free(g->newt);
    for (size_t i = 0; i < g->nbrt; i++)
        G(git_tree_free)(g->brt[i]);
    free(g->brt);
    tips_free(&g->tb);
    tips_free(&g->ta);
    if (g->odb)
        G(git_odb_free)(g->odb);
    if (g->ra)
        G(git_repository_free)(g->ra);
    if (g->rb)
        G(git_repository_free)(g->rb);
}

static json_t *check_repo(struct lctx *c, size_t ri, double deadline)
{
    struct lrepo *r = &c->r[ri];
    struct gctx g = {.c = c,
                     .r = r,
                     .ri = ri,
                     .safe = json_array(),
                     .reset = json_array(),
                     .items = json_array(),
                     .deadline = deadline};
    json_t *out = json_pack("{s:I,s:o,s:o,s:o}", "i", (json_int_t)ri, "safe", g.safe, "reset", g.reset,
                            "items", g.items);
    if (G(git_repository_open_ext)(&g.rb, r->wt_abs, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
        json_object_set_new(out, "error", json_sprintf("git cannot open it: %s", git_why()));
        return out;
    }
    g.hb = head_tree(g.rb);
    if (r->git_changed) {
        if (!r->mirror_abs) {
            json_object_set_new(out, "error",
                                json_string(r->linked ? "a linked worktree's repository changed"
                                                      : "no view of the "
                                                        "change"));
            gctx_free(&g);
            return out;
        }
        if (G(git_repository_open_bare)(&g.ra, r->mirror_abs) < 0 ||
            G(git_repository_odb)(&g.odb, g.ra) < 0) {
            json_object_set_new(
                out, "error", json_sprintf("git cannot read the repository after the change: %s", git_why()));
            gctx_free(&g);
            return out;
        }
        g.ha = head_tree(g.ra);
    } else if (G(git_repository_odb)(&g.odb, g.rb) < 0) {
        g.odb = NULL;
    }
    check_files(&g);
    if (g.ra && r->index_changed)
        check_staged(&g);
    if (g.ra && r->refs_changed) {
        need_tips(&g);
        check_stash(&g);
        check_history(&g);
        check_branches(&g);
    }
    gctx_free(&g);
    return out;
}

/* ---- the child ---- */

static void build_mirrors(struct lctx *c, char **topabs);

/* libgit2 started for reading: confined to read rd (NULL-terminated) and
 * below only, no configuration but the repositories' own, its caps set.
 * NULL, or why not (static, or in *buf). */
static const char *git_start(const char *const *rd, char *buf, size_t bufsz)
{
    const char *why = gitdl_load();
    if (why)
        return why;
    txbox_error le = {0};
    int abi = confine_landlock_abi();
    /* without Landlock in the kernel at all, as the sandbox runs when
     * allowed to (--allow-degraded): the deadline and caps still hold */
    if (abi >= 1 && confine_landlock_readonly(rd, abi, &le) < 0) {
        snprintf(buf, bufsz, "git's reading could not be confined (%s)", le.msg);
        return buf;
    }
    setenv("HOME", "/nonexistent/txbox-losses", 1);
    unsetenv("XDG_CONFIG_HOME");
    if (G(git_libgit2_init)() < 0)
        return "libgit2 could not start";
    static const int levels[] = {GIT_CONFIG_LEVEL_SYSTEM, GIT_CONFIG_LEVEL_XDG, GIT_CONFIG_LEVEL_GLOBAL,
                                 GIT_CONFIG_LEVEL_PROGRAMDATA};
    for (size_t i = 0; i < ARRAY_SIZE(levels); i++)
        G(git_libgit2_opts)(GIT_OPT_SET_SEARCH_PATH, levels[i], "");
    G(git_libgit2_opts)(GIT_OPT_SET_OWNER_VALIDATION, 0);
    G(git_libgit2_opts)(GIT_OPT_SET_MWINDOW_MAPPED_LIMIT, (size_t)256 << 20);
    G(git_libgit2_opts)(GIT_OPT_SET_CACHE_MAX_SIZE, (ssize_t)64 << 20);
    G(git_libgit2_opts)(GIT_OPT_SET_PACK_MAX_OBJECT_SIZE, (size_t)256 << 20);
    return NULL;
}

static void child_main(struct lctx *c, int wfd)
{
    json_t *out = json_object();
    /* what libgit2 may read: the workspace, the repositories' own
     * directories outside it; nothing else (the CA certificates its
     * initialisation would parse included) */
    _cleanup_free_ char *scratch = NULL;
    build_mirrors(c, &scratch);
    const char **rd = xcalloc(4 * c->nr + 3, sizeof *rd);
    size_t k = 0;
    rd[k++] = c->in->ws->path;
    if (scratch)
        rd[k++] = scratch;
    for (size_t i = 0; i < c->nr; i++) {
        if (!c->r[i].need_git)
            continue;
        if (!c->r[i].wt)
            rd[k++] = c->r[i].wt_abs;
        if (!c->r[i].gitdir && c->r[i].gitdir_abs)
            rd[k++] = c->r[i].gitdir_abs;
        if (c->r[i].common_abs)
            rd[k++] = c->r[i].common_abs;
    }
    char buf[sizeof((txbox_error *)0)->msg + 64];
    const char *why = git_start(rd, buf, sizeof buf);
    free(rd);
    if (why) {
        json_object_set_new(out, "error", json_string(why));
    } else {
        json_t *repos = json_array();
        double deadline = wall_time() + LOSS_GIT_TIMEOUT_S * 0.7;
        for (size_t i = 0; i < c->nr; i++)
            if (c->r[i].need_git)
                json_array_append_new(repos, check_repo(c, i, deadline));
        json_object_set_new(out, "repos", repos);
    }
    char *s = json_dumps(out, JSON_COMPACT);
    if (s && write_all(wfd, s, strlen(s)) < 0)
        _exit(3);
    _exit(0);
}

/* ---- a session's warm reader ----
 *
 * Loading and starting libgit2 is most of a child's cost (about 3 ms of a
 * commit's time). A session's steward keeps one reader started ahead, in
 * the same confinement (reading the workspace only), listening on the
 * session's socket (sesslink.h, SL_GIT); the committing process asks it
 * straight, one question per connection, answered in the child's form,
 * each from the repository opened again (nothing of one kept for the next
 * but libgit2's start); after WARM_QUESTIONS, a new reader (libgit2's
 * memory stays bounded). Asked only for what needs no view of a change of git
 * (repositories whose git the commit leaves alone, in the workspace:
 * HEAD's blobs and the ignore rules), else the child of its own. */

#define WARM_FILES_MAX 4096 /* files per question (more: a child of its own) */
#define WARM_QUESTIONS 256  /* a reader's (then a new one: libgit2's memory bounded) */
#define WARM_ASK_MS 2000    /* from a connection to its question */

static bool hex_oid(const char *h, unsigned char oid[20])
{
    if (!h || strlen(h) != 40)
        return false;
    for (size_t i = 0; i < 20; i++) {
        int v = 0;
        for (int k = 0; k < 2; k++) {
            char ch = h[2 * i + (size_t)k];
            int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
            if (d < 0)
                return false;
            v = v * 16 + d;
        }
        oid[i] = (unsigned char)v;
    }
    return true;
}

/* One repository of the question: {"i", "wt", "files": [{"i", "ip",
 * "oid"?, "ign"?, "droot"?}]}, answered as check_repo would. */
static json_t *warm_repo(json_t *rq, double deadline)
{
    json_int_t ri = json_integer_value(json_object_get(rq, "i"));
    const char *wt = json_string_value(json_object_get(rq, "wt"));
    struct gctx g = {
        .safe = json_array(), .reset = json_array(), .items = json_array(), .deadline = deadline};
    json_t *out = json_pack("{s:I,s:o,s:o,s:o}", "i", ri, "safe", g.safe, "reset", g.reset, "items", g.items);
    if (!wt || *wt != '/') {
        json_object_set_new(out, "error", json_string("a question without its worktree"));
        return out;
    }
    if (G(git_repository_open_ext)(&g.rb, wt, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
        json_object_set_new(out, "error", json_sprintf("git cannot open it: %s", git_why()));
        return out;
    }
    g.hb = head_tree(g.rb);
    json_t *roots = json_object(), *fj;
    size_t k;
    json_array_foreach(json_object_get(rq, "files"), k, fj)
    {
        if (wall_time() > deadline) {
            json_object_set_new(out, "error", json_string("git's reading did not finish in time"));
            break;
        }
        json_int_t fi = json_integer_value(json_object_get(fj, "i"));
        const char *ip = json_string_value(json_object_get(fj, "ip"));
        const char *hx = json_string_value(json_object_get(fj, "oid"));
        unsigned char oid[20];
        if (!ip || (hx && !hex_oid(hx, oid)))
            continue; /* not answered: lost, as asked */
        if (lost_is_safe(&g, ip, hx ? oid : NULL, json_is_true(json_object_get(fj, "ign")),
                         json_string_value(json_object_get(fj, "droot")), roots))
            json_array_append_new(g.safe, json_integer(fi));
    }
    json_decref(roots);
    gctx_free(&g);
    return out;
}

void losses_git_warm(int lsock, const char *ws_path)
{
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGALRM, SIG_DFL);
    if (lsock != 3) {
        if (dup2(lsock, 3) < 0)
            _exit(2);
        lsock = 3;
    }
    close_range(4, ~0u, 0); /* the steward's own: the session's namespaces, its clients */
    const char *rd[] = {ws_path, NULL};
    char buf[sizeof((txbox_error *)0)->msg + 64];
    if (git_start(rd, buf, sizeof buf))
        _exit(4);
    for (unsigned n = 0; n < WARM_QUESTIONS;) {
        int sock = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
        if (sock < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            _exit(3);
        }
        json_t *req = NULL;
        txbox_error e = {0};
        /* its own user's, and a question soon: an asker never stalls it */
        if (!sl_peer_ok(sock) || sl_recv(sock, &req, NULL, 0, NULL, WARM_ASK_MS, &e) < 0) {
            close(sock);
            continue;
        }
        n++;
        alarm((unsigned)LOSS_GIT_TIMEOUT_S + 1); /* its asker has stopped waiting by then */
        json_t *repos = json_array(), *rq;
        double deadline = wall_time() + LOSS_GIT_TIMEOUT_S * 0.7;
        size_t i;
        json_array_foreach(json_object_get(req, "repos"), i, rq)
            json_array_append_new(repos, warm_repo(rq, deadline));
        json_t *out = json_pack("{s:o}", "repos", repos);
        if (sl_send(sock, out, NULL, 0, &e) < 0) {
            /* its asker is gone: the answer with it */
        }
        json_decref(out);
        json_decref(req);
        close(sock);
        alarm(0);
    }
    _exit(0);
}

/* ---- the parent ---- */

/* The after state's git directory of r as a tree of symlinks. */
static int mirror_dir(struct lctx *c, int mfd, const char *gitdir, const char *sub, size_t *count,
                      unsigned depth)
{
    _cleanup_free_ char *dir = *sub ? xasprintf("%s/%s", gitdir, sub) : xstrdup(gitdir);
    struct lnames names = {0};
    bool more = false;
    lview_list(&c->view, c->in->ws->fd, c->in->upperfd, dir, &names, LOSS_MIRROR_MAX, &more);
    int rc = more ? -1 : 0;
    for (size_t i = 0; i < names.n && rc == 0; i++) {
        const char *n = names.v[i];
        if (!*sub && (!strcmp(n, "objects") || !strcmp(n, "hooks") || !strcmp(n, "lfs") ||
                      !strcmp(n, "modules") || !strcmp(n, "worktrees") || !strcmp(n, "index")))
            continue;
        if (++*count > LOSS_MIRROR_MAX) {
            rc = -1;
            break;
        }
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, n);
        int w = lview_where(&c->view, p);
        int from = w == LV_UPPER ? c->in->upperfd : c->in->ws->fd;
        struct stat st;
        _cleanup_close_ int fd = safe_openat(from, p, O_PATH, 0);
        if (fd < 0 || fstat(fd, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            if (depth > 64 || mkdirat(mfd, n, 0700) < 0) {
                rc = -1;
                break;
            }
            _cleanup_close_ int sfd = openat(mfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            _cleanup_free_ char *ss = *sub ? xasprintf("%s/%s", sub, n) : xstrdup(n);
            rc = sfd < 0 ? -1 : mirror_dir(c, sfd, gitdir, ss, count, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            _cleanup_free_ char *target = w == LV_UPPER ? xasprintf("%s/%s/tx/%s/upper/%s", c->in->ws->path,
                                                                    TXBOX_STATE_DIR, c->in->txs, p)
                                                        : xasprintf("%s/%s", c->in->ws->path, p);
            if (symlinkat(target, mfd, n) < 0)
                rc = -1;
        }
    }
    lnames_free(&names);
    return rc;
}

/* The after state's git directory of repository ri, mirrored under top
 * (topabs its absolute path): r->mirror_abs, or NULL when it cannot be. */
static void build_mirror(struct lctx *c, struct lrepo *r, size_t ri, int top, const char *topabs)
{
    if (!r->gitdir || r->linked)
        return;
    char name[32];
    snprintf(name, sizeof name, "%zu", ri);
    if (mkdirat(top, name, 0700) < 0)
        return;
    _cleanup_close_ int mfd = openat(top, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    size_t count = 0;
    if (mfd < 0 || mirror_dir(c, mfd, r->gitdir, "", &count, 0) < 0)
        return;
    /* the objects: what the command wrote, then what was there */
    if (mkdirat(mfd, "objects", 0700) < 0 || mkdirat(mfd, "objects/info", 0700) < 0)
        return;
    dbuf alt;
    dbuf_init(&alt, 0);
    _cleanup_free_ char *uobj = xasprintf("%s/objects", r->gitdir);
    struct stat st;
    _cleanup_close_ int ufd = safe_openat(c->in->upperfd, uobj, O_PATH | O_DIRECTORY, 0);
    if (ufd >= 0 && fstat(ufd, &st) == 0) {
        _cleanup_free_ char *u =
            xasprintf("%s/%s/tx/%s/upper/%s\n", c->in->ws->path, TXBOX_STATE_DIR, c->in->txs, uobj);
        dbuf_addstr(&alt, u);
    }
    _cleanup_free_ char *w = xasprintf("%s/%s\n", c->in->ws->path, uobj);
    dbuf_addstr(&alt, w);
    _cleanup_close_ int afd =
        openat(mfd, "objects/info/alternates", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int ok = afd >= 0 && write_all(afd, alt.p, alt.len) == 0;
    dbuf_free(&alt);
    if (ok)
        r->mirror_abs = xasprintf("%s/%s", topabs, name);
}

/* Is dir (absolute) where path is, or above it? */
static bool covers(const char *dir, const char *path)
{
    size_t n = strlen(dir);
    return path && !strncmp(path, dir, n) && (path[n] == '/' || !path[n]);
}

/* Scratch for the mirrors, in the child: a tmpfs in a mount namespace of
 * its own (and a user namespace, unprivileged), gone with the child; its
 * creation and removal never wait for the workspace filesystem's journal,
 * which a directory created and removed there did (tens of ms, on a busy
 * disk). It is mounted on the first of a few directories that hold
 * nothing the check reads (*at). -1: none (the caller uses tx/ID). */
static int child_scratch(struct lctx *c, const char **at)
{
    static const char *const spots[] = {"/tmp", "/var/tmp", "/dev/shm", "/mnt", "/srv", "/opt"};
    *at = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(spots) && !*at; i++) {
        struct stat st;
        bool ok = lstat(spots[i], &st) == 0 && S_ISDIR(st.st_mode) && !covers(spots[i], c->in->ws->path);
        for (size_t k = 0; ok && k < c->nr; k++)
            ok = !covers(spots[i], c->r[k].wt_abs) && !covers(spots[i], c->r[k].gitdir_abs) &&
                 !covers(spots[i], c->r[k].common_abs);
        if (ok)
            *at = spots[i];
    }
    if (!*at)
        return -1;
    if (!tx_privileged()) {
        uid_t u = getuid();
        gid_t g = getgid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
            return -1;
        char m[64];
        int n;
        _cleanup_close_ int sg = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
        _cleanup_close_ int um = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
        _cleanup_close_ int gm = open("/proc/self/gid_map", O_WRONLY | O_CLOEXEC);
        if (sg < 0 || um < 0 || gm < 0 || write_all(sg, "deny", 4) < 0)
            return -1;
        n = snprintf(m, sizeof m, "%u %u 1", (unsigned)u, (unsigned)u);
        if (write_all(um, m, (size_t)n) < 0)
            return -1;
        n = snprintf(m, sizeof m, "%u %u 1", (unsigned)g, (unsigned)g);
        if (write_all(gm, m, (size_t)n) < 0)
            return -1;
    } else if (unshare(CLONE_NEWNS) < 0) {
        return -1;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("txbox-losses", *at, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64m,mode=0700") < 0)
        return -1;
    return open(*at, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* The mirrors of the repositories whose git changed (in the child): under
 * *topabs (its scratch, else tx/ID/losses-git). */
static void build_mirrors(struct lctx *c, char **topabs)
{
    bool any = false;
    for (size_t i = 0; i < c->nr; i++)
        any |= c->r[i].need_git && c->r[i].git_changed;
    if (!any)
        return;
    const char *at;
    _cleanup_close_ int top = child_scratch(c, &at);
    if (top >= 0) {
        *topabs = xstrdup(at);
    } else {
        if (mkdirat(c->in->txfd, "losses-git", 0700) < 0 && errno != EEXIST)
            return;
        top = openat(c->in->txfd, "losses-git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0)
            return;
        *topabs = xasprintf("%s/%s/tx/%s/losses-git", c->in->ws->path, TXBOX_STATE_DIR, c->in->txs);
    }
    for (size_t i = 0; i < c->nr; i++)
        if (c->r[i].need_git && c->r[i].git_changed)
            build_mirror(c, &c->r[i], i, top, *topabs);
}

void losses_git_cleanup(struct lctx *c)
{
    /* the mirrors when the child could not have a scratch of its own */
    if (faccessat(c->in->txfd, "losses-git", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        (void)tree_remove(c->in->txfd, "losses-git");
}

/* Every loss the child was asked about counts, unverified (fail closed). */
static void repo_failed(struct lctx *c, size_t ri, const char *why)
{
    struct lrepo *r = &c->r[ri];
    for (size_t i = 0; i < c->nf; i++) {
        struct lfile *f = &c->f[i];
        if (f->repo != (int)ri || f->folded || f->state != LF_LOST || f->unverified)
            continue;
        f->unverified = true;
        free(f->why);
        f->why = xasprintf("not verified: %s", why);
    }
    if (r->git_changed) {
        _cleanup_free_ char *d =
            xasprintf("not verified: its staged changes, stashes and history after the change (%s)", why);
        struct loss_item *it = losses_add(c->out, EFF_LOSS_HISTORY, r->gitdir ? r->gitdir : ".git", 0, d);
        if (it)
            it->unverified = true;
    }
}

static void apply_answer(struct lctx *c, json_t *ans)
{
    json_t *repos = json_object_get(ans, "repos"), *rj;
    size_t k;
    json_array_foreach(repos, k, rj)
    {
        json_int_t ri = json_integer_value(json_object_get(rj, "i"));
        if (ri < 0 || (size_t)ri >= c->nr || !c->r[ri].need_git)
            continue;
        c->r[ri].need_git = false; /* answered */
        const char *err = json_string_value(json_object_get(rj, "error"));
        json_t *v;
        size_t i;
        json_array_foreach(json_object_get(rj, "safe"), i, v)
        {
            json_int_t fi = json_integer_value(v);
            if (fi >= 0 && (size_t)fi < c->nf && c->f[fi].repo == ri)
                c->f[fi].state = LF_SAFE;
        }
        json_array_foreach(json_object_get(rj, "reset"), i, v)
        {
            json_int_t fi = json_integer_value(v);
            if (fi >= 0 && (size_t)fi < c->nf && c->f[fi].repo == ri && c->f[fi].state == LF_EDITED) {
                c->f[fi].state = LF_LOST;
                free(c->f[fi].why);
                c->f[fi].why = xstrdup("reset to HEAD's version: its changes discarded");
            }
        }
        if (err)
            repo_failed(c, (size_t)ri, err);
        json_array_foreach(json_object_get(rj, "items"), i, v)
        {
            json_int_t kind = json_integer_value(json_object_get(v, "kind"));
            const char *path = json_string_value(json_object_get(v, "path"));
            const char *detail = json_string_value(json_object_get(v, "detail"));
            if (kind < 0 || kind >= EFF_LOSS_KINDS || !path)
                continue;
            struct loss_item *it = losses_add(
                c->out, (int)kind, path, (uint64_t)json_integer_value(json_object_get(v, "bytes")), detail);
            if (it) {
                it->unverified = json_is_true(json_object_get(v, "unverified"));
                json_int_t cm = json_integer_value(json_object_get(v, "commits"));
                it->commits = cm > 0 ? (uint64_t)cm : 0;
            }
        }
    }
    for (size_t i = 0; i < c->nr; i++) /* asked, and not answered */
        if (c->r[i].need_git) {
            c->r[i].need_git = false;
            repo_failed(c, i, "git's reading gave no answer for it");
        }
}

/* The question for the warm reader; NULL when it cannot answer all of it. */
static json_t *warm_question(struct lctx *c)
{
    json_t *repos = json_array();
    size_t nq = 0;
    bool ok = true;
    for (size_t i = 0; ok && i < c->nr; i++) {
        struct lrepo *r = &c->r[i];
        if (!r->need_git)
            continue;
        char **rips = xcalloc(c->droots.n + 1, sizeof *rips);
        json_t *files = json_array(), *wt = json_string(r->wt_abs); /* NULL: not UTF-8 */
        ok = !r->git_changed && r->wt && r->gitdir && !r->linked && !r->common_abs && wt;
        json_array_append_new(repos,
                              json_pack("{s:I,s:o?,s:o}", "i", (json_int_t)i, "wt", wt, "files", files));
        for (size_t k = 0; ok && k < c->nf; k++) {
            struct lfile *f = &c->f[k];
            if (f->repo != (int)i || f->folded || f->unverified || f->state != LF_LOST)
                continue;
            _cleanup_free_ char *ip = losses_index_path(r, f->path);
            const char *rip = droot_ip(c, r, rips, f);
            json_t *ipj = json_string(ip), *ripj = rip ? json_string(rip) : NULL;
            ok = ++nq <= WARM_FILES_MAX && ipj && (!rip || ripj);
            json_t *fj = json_pack("{s:I,s:o?,s:o?}", "i", (json_int_t)k, "ip", ipj, "droot", ripj);
            if (f->have_oid) {
                char hx[41];
                for (size_t b = 0; b < 20; b++)
                    snprintf(hx + 2 * b, 3, "%02x", f->oid[b]);
                json_object_set_new(fj, "oid", json_string(hx));
            }
            if (may_ignore(f))
                json_object_set_new(fj, "ign", json_true());
            json_array_append_new(files, fj);
        }
        roots_free(c, rips);
    }
    if (!ok) { /* a name that is not UTF-8, too many, git changed: the child */
        json_decref(repos);
        return NULL;
    }
    return json_pack("{s:o}", "repos", repos);
}

/* Asks the warm reader. true: answered (or it failed as the child would,
 * counted the same); false: the child of its own instead. */
static bool warm_ask(struct lctx *c)
{
    if (!c->in->git_ask)
        return false;
    json_t *q = warm_question(c);
    if (!q)
        return false;
    json_t *ans = NULL;
    int rc = c->in->git_ask(c->in->git_ask_ctx, q, &ans, (int)(LOSS_GIT_TIMEOUT_S * 1000));
    json_decref(q);
    if (rc == -2) {
        for (size_t i = 0; i < c->nr; i++)
            if (c->r[i].need_git) {
                c->r[i].need_git = false;
                repo_failed(c, i, "git's reading did not finish in time");
            }
        return true;
    }
    /* whole, or not at all: every repository asked answered, none with an
     * error (the child of its own says why, as it does alone) */
    bool whole = rc == 0 && json_is_array(json_object_get(ans, "repos"));
    for (size_t i = 0; whole && i < c->nr; i++) {
        if (!c->r[i].need_git)
            continue;
        bool found = false;
        json_t *rj;
        size_t k;
        json_array_foreach(json_object_get(ans, "repos"), k, rj) found |=
            json_integer_value(json_object_get(rj, "i")) == (json_int_t)i && !json_object_get(rj, "error");
        whole = found;
    }
    if (whole)
        apply_answer(c, ans);
    json_decref(ans);
    return whole;
}

void losses_git(struct lctx *c)
{
    bool any = false;
    for (size_t i = 0; i < c->nr; i++)
        any |= c->r[i].need_git;
    if (!any)
        return;
    tx_mark("losses:prepare");
    if (warm_ask(c)) {
        tx_mark("losses:warm");
        return;
    }
    if (c->in->quiesce)
        c->in->quiesce(c->in->quiesce_ctx);
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        for (size_t i = 0; i < c->nr; i++)
            if (c->r[i].need_git) {
                c->r[i].need_git = false;
                repo_failed(c, i, "git's reading could not start");
            }
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the commit */
        close(p[0]);
        child_main(c, p[1]);
        _exit(2);
    }
    close(p[1]);
    dbuf b;
    dbuf_init(&b, LOSS_GIT_OUT_MAX);
    const char *why = NULL;
    char late[160];
    if (pid < 0) {
        why = "git's reading could not start";
    } else {
        double deadline = wall_time() + LOSS_GIT_TIMEOUT_S;
        for (;;) {
            double left = deadline - wall_time();
            if (left <= 0) {
                /* where it waits, for whoever reads why (a lock: "futex") */
                char wp[64], wc[64] = "";
                snprintf(wp, sizeof wp, "/proc/%d/wchan", (int)pid);
                _cleanup_close_ int wfd = open(wp, O_RDONLY | O_CLOEXEC);
                ssize_t wn = wfd >= 0 ? read(wfd, wc, sizeof wc - 1) : -1;
                wc[wn > 0 ? wn : 0] = 0;
                if (wc[0] && strcmp(wc, "0"))
                    snprintf(late, sizeof late, "git's reading did not finish in time (it waited in %s)", wc);
                else
                    snprintf(late, sizeof late, "git's reading did not finish in time");
                why = late;
                break;
            }
            struct pollfd pf = {.fd = p[0], .events = POLLIN};
            int pr = poll(&pf, 1, (int)(left * 1000) + 1);
            if (pr < 0 && errno == EINTR)
                continue;
            if (pr <= 0)
                continue;
            char buf[65536];
            ssize_t n = read(p[0], buf, sizeof buf);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            dbuf_add(&b, buf, (size_t)n);
        }
        if (why)
            kill(pid, SIGKILL);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        if (!why && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
            why = "git's reading failed";
    }
    close(p[0]);
    json_t *ans = NULL;
    if (!why && b.dropped)
        why = "git's reading answered more than txbox reads";
    if (!why && !(ans = json_loadb(b.p ? b.p : "", b.len, 0, NULL)))
        why = "git's reading gave an answer txbox cannot read";
    const char *aerr = ans ? json_string_value(json_object_get(ans, "error")) : NULL;
    _cleanup_free_ char *whyc = aerr ? xstrdup(aerr) : NULL;
    if (!why && whyc)
        why = whyc;
    if (!why)
        apply_answer(c, ans);
    else
        for (size_t i = 0; i < c->nr; i++)
            if (c->r[i].need_git) {
                c->r[i].need_git = false;
                repo_failed(c, i, why);
            }
    json_decref(ans);
    dbuf_free(&b);
    tx_mark("losses:git");
}
