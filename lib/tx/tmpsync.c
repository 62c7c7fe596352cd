/* A session's /tmp and the host's (tmpsync.h).
 *
 * What an agent CLI's own tools write to the host's /tmp (a script its
 * Write tool put in /tmp/helper.py) is for the next command to read, and
 * the sandbox's /tmp is the session's own. So before each command, files
 * the caller owns in the host's /tmp are copied into the session's /tmp
 * when the host changed them since the last time (inode, size, mtime or
 * ctime), over what the session made of them: the host's newer write
 * wins. Which files: those under a /tmp path the command names (its
 * string or its arguments: "python3 /tmp/proj/main.py" brings /tmp/proj's
 * files, "cd /tmp/proj" too, "ls /tmp" the files at the top of /tmp
 * changed in the last hour; $TMPDIR reads as /tmp), and those copied
 * before. Never another user's entry, a
 * socket, a FIFO or a device, a hidden path, the workspace, txbox's state
 * or a workspace of txbox's, the private directories of services and
 * terminals, nor a file older than TS_RECENT seconds that was never copied.
 * What the host removed is removed from the session too, unless the
 * session changed it. What commands write stays in the session.
 *
 * Copies, not mounts: no inode of the host's is reachable from the sandbox
 * (and an overlay on the host's /tmp would go stale: a file the host
 * replaces by a rename keeps its old content through an overlay that has
 * it cached, checked on 6.18). Named paths and not the whole of /tmp: a
 * busy /tmp (a build's, a test suite's) holds thousands of the caller's
 * entries, and logs that grow, too many to look at and copy before every
 * command.
 *
 * Bounded: TS_LIST entries of a directory looked at, TS_DEPTH levels under
 * a named directory, files of TS_FILE bytes at most, TS_TOTAL bytes copied
 * per command.
 *
 * The record, dirfd/tmpsync: one entry per file copied, "f host-dev ino
 * size mtime ctime session-ino ctime path\0". */
#include "tmpsync.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/file.h>

#include "safepath.h"

#define TS_DEPTH 2
#define TS_LIST 256
#define TS_RECENT (24 * 3600)
#define TS_FILE (16u << 20)
#define TS_TOTAL (128u << 20)
/* /tmp itself named ("ls /tmp", "cd /tmp"): its files of the last hour, of
 * 1 MiB at most (a build's logs there are not the session's business) */
#define TS_TOP_RECENT 3600
#define TS_TOP_FILE (1u << 20)
#define TS_LOCK "tmpsync.lock"

struct tsent {
    char *path; /* under /tmp, without the leading "/tmp/" */
    char kind;  /* 'f': a file (or symbolic link) copied */
    uint64_t hdev, hino, hsize;
    int64_t hmtime, hctime;
    uint64_t sino;
    int64_t sctime;
    bool seen;
};

struct tmpsync {
    struct tsent *v; /* sorted by path */
    size_t n, cap;
};

static int64_t ns_of(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

static int ent_cmp(const void *a, const void *b)
{
    return strcmp(((const struct tsent *)a)->path, ((const struct tsent *)b)->path);
}

void tmpsync_free(struct tmpsync *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].path);
    free(t->v);
    free(t);
}

static struct tsent *find(const struct tmpsync *t, const char *path)
{
    if (!t || !t->n)
        return NULL;
    struct tsent key = {.path = (char *)path};
    return bsearch(&key, t->v, t->n, sizeof *t->v, ent_cmp);
}

/* path's entry, made in its sorted place when there is none. */
static struct tsent *record(struct tmpsync *t, const char *path)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t->v[mid].path, path);
        if (c == 0)
            return &t->v[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 32;
        t->v = xrealloc(t->v, t->cap * sizeof *t->v);
    }
    memmove(&t->v[lo + 1], &t->v[lo], (t->n - lo) * sizeof *t->v);
    t->v[lo] = (struct tsent){.path = xstrdup(path)};
    t->n++;
    return &t->v[lo];
}

struct tmpsync *tmpsync_load(int dirfd)
{
    struct tmpsync *t = xcalloc(1, sizeof *t);
    _cleanup_free_ char *s = NULL;
    size_t len = 0;
    if (read_file_at(dirfd, TMPSYNC_STATE, 64u << 20, &s, &len, NULL) < 0)
        return t;
    for (size_t off = 0; off < len;) {
        const char *rec = s + off;
        size_t l = strnlen(rec, len - off);
        if (l == len - off)
            break;
        unsigned long long d, i, z, si;
        long long m, c, sc;
        char kind;
        int used = 0;
        if (sscanf(rec, "%c %llu %llu %llu %lld %lld %llu %lld %n", &kind, &d, &i, &z, &m, &c, &si, &sc,
                   &used) == 8 &&
            used && rec[used] && kind == 'f') {
            struct tsent *e = record(t, rec + used);
            *e = (struct tsent){.path = e->path,
                                .kind = kind,
                                .hdev = d,
                                .hino = i,
                                .hsize = z,
                                .hmtime = m,
                                .hctime = c,
                                .sino = si,
                                .sctime = sc};
        }
        off += l + 1;
    }
    return t;
}

bool tmpsync_is_copy(const struct tmpsync *t, const char *path, const struct stat *st)
{
    if (strncmp(path, "/tmp/", 5) != 0)
        return false;
    const struct tsent *e = find(t, path + 5);
    return e && e->kind == 'f' && e->sino == st->st_ino && e->sctime == ns_of(st->st_ctim);
}

static void save(int dirfd, struct tmpsync *t)
{
    dbuf b;
    dbuf_init(&b, 0);
    for (size_t i = 0; i < t->n; i++) {
        const struct tsent *e = &t->v[i];
        char head[220];
        snprintf(head, sizeof head, "%c %llu %llu %llu %lld %lld %llu %lld ", e->kind,
                 (unsigned long long)e->hdev, (unsigned long long)e->hino, (unsigned long long)e->hsize,
                 (long long)e->hmtime, (long long)e->hctime, (unsigned long long)e->sino,
                 (long long)e->sctime);
        dbuf_addstr(&b, head);
        dbuf_add(&b, e->path, strlen(e->path) + 1);
    }
    _cleanup_close_ int fd =
        openat(dirfd, TMPSYNC_STATE ".new", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 && write_all(fd, b.p ? b.p : "", b.len) == 0)
        (void)renameat(dirfd, TMPSYNC_STATE ".new", dirfd, TMPSYNC_STATE);
    dbuf_free(&b);
}

struct walk {
    struct tmpsync *t;
    int host, stmp;
    const char *const *skip;
    uint64_t copied;
    time_t recent; /* files changed before this, never copied, are not brought in */
    bool top;      /* taking the files at the top of /tmp (TS_TOP_*) */
};

/* Never brought in: the private directories of services and terminals,
 * credential caches, txbox's own; a skipped path, what lies under one, and
 * what holds one (the workspace under /tmp). */
static bool skipped(const struct walk *w, const char *rel)
{
    static const char *const private[] = {
        "systemd-private-*", "snap-private-tmp", ".X*-unix", ".ICE-unix", ".XIM-unix", ".font-unix",
        ".Test-unix",        "krb5cc*",          "tmux-*",   "ssh-*",     ".txbox*"};
    const char *slash = strchr(rel, '/');
    _cleanup_free_ char *top = slash ? xasprintf("%.*s", (int)(slash - rel), rel) : xstrdup(rel);
    for (size_t i = 0; i < ARRAY_SIZE(private); i++)
        if (fnmatch(private[i], top, 0) == 0)
            return true;
    _cleanup_free_ char *full = xasprintf("/tmp/%s", rel);
    size_t fl = strlen(full);
    for (size_t i = 0; w->skip && w->skip[i]; i++) {
        const char *s = w->skip[i];
        size_t sl = strlen(s);
        if ((!strncmp(full, s, sl) && (full[sl] == '/' || !full[sl])) ||
            (!strncmp(s, full, fl) && s[fl] == '/'))
            return true;
    }
    return false;
}

/* Each directory from /tmp down to rel's parent is the caller's, and no
 * workspace of txbox's: rel may come from there. */
static bool path_ours(const struct walk *w, const char *rel)
{
    _cleanup_free_ char *p = xstrdup(rel);
    for (char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        struct stat st;
        _cleanup_free_ char *state = xasprintf("%s/.txbox", p);
        if (fstatat(w->host, p, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != getuid() || fstatat(w->host, state, &st, AT_SYMLINK_NOFOLLOW) == 0)
            return false;
        *s = '/';
    }
    return true;
}

/* The session's directories down to rel's parent, made as the host's
 * (mode), the first time a file under them is copied. */
static int make_parents(struct walk *w, const char *rel)
{
    _cleanup_free_ char *p = xstrdup(rel);
    for (char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        struct stat st;
        mode_t m = fstatat(w->host, p, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_mode & 0777 : 0755;
        if (mkdirat(w->stmp, p, m | S_IRWXU) < 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return 0;
}

/* The host's file hfd (opened; st) into the session at rel: written
 * beside, then renamed over what is there. *out: the copy as it is. */
static int copy_in(struct walk *w, int hfd, const struct stat *st, const char *rel, struct stat *out)
{
    _cleanup_free_ char *tmp = xasprintf("%s.txbox-sync", rel);
    _cleanup_close_ int ofd =
        openat(w->stmp, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (ofd < 0)
        return -1;
    char buf[65536];
    int rc = 0;
    for (;;) {
        ssize_t n = read(hfd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            break;
        }
        if (write_all(ofd, buf, (size_t)n) < 0) {
            rc = -1;
            break;
        }
    }
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    if (rc == 0 && (fchmod(ofd, st->st_mode & 0777) < 0 || futimens(ofd, ts) < 0 ||
                    renameat(w->stmp, tmp, w->stmp, rel) < 0 || fstat(ofd, out) < 0))
        rc = -1;
    if (rc < 0)
        (void)unlinkat(w->stmp, tmp, 0);
    return rc;
}

/* The host's file (or symbolic link) rel, into the session when the host
 * changed it since the last copy. */
static void take_file(struct walk *w, const char *rel)
{
    struct stat st;
    struct tsent *e = find(w->t, rel);
    if (e)
        e->seen = true;
    if (fstatat(w->host, rel, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_uid != getuid() ||
        (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) || skipped(w, rel) || !path_ours(w, rel))
        return; /* a socket, a FIFO, a device, another's: the host's */
    if (e && e->hdev == st.st_dev && e->hino == st.st_ino && e->hsize == (uint64_t)st.st_size &&
        e->hmtime == ns_of(st.st_mtim) && e->hctime == ns_of(st.st_ctim))
        return; /* unchanged on the host since it was copied */
    bool top = w->top && !strchr(rel, '/');
    if (!e && st.st_ctim.tv_sec < (top ? time(NULL) - TS_TOP_RECENT : w->recent))
        return;
    if (S_ISREG(st.st_mode) &&
        (st.st_size > (top ? TS_TOP_FILE : TS_FILE) || w->copied + (uint64_t)st.st_size > TS_TOTAL))
        return;
    struct stat out;
    if (make_parents(w, rel) < 0)
        return;
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(w->host, rel, target, sizeof target - 1);
        if (n < 0)
            return;
        target[n] = 0;
        (void)unlinkat(w->stmp, rel, 0);
        if (symlinkat(target, w->stmp, rel) < 0 || fstatat(w->stmp, rel, &out, AT_SYMLINK_NOFOLLOW) < 0)
            return;
    } else {
        _cleanup_close_ int hfd = safe_openat(w->host, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
        struct stat again;
        if (hfd < 0 || fstat(hfd, &again) < 0 || again.st_ino != st.st_ino ||
            copy_in(w, hfd, &st, rel, &out) < 0)
            return;
        w->copied += (uint64_t)st.st_size;
    }
    e = record(w->t, rel);
    *e = (struct tsent){.path = e->path,
                        .kind = 'f',
                        .hdev = st.st_dev,
                        .hino = st.st_ino,
                        .hsize = (uint64_t)st.st_size,
                        .hmtime = ns_of(st.st_mtim),
                        .hctime = ns_of(st.st_ctim),
                        .sino = out.st_ino,
                        .sctime = ns_of(out.st_ctim),
                        .seen = true};
}

/* The files of the host's directory rel ("": /tmp), and below it down to
 * depth more levels. */
static void take_dir(struct walk *w, const char *rel, unsigned depth)
{
    if ((*rel && (skipped(w, rel) || !path_ours(w, rel))))
        return;
    _cleanup_close_ int dfd = *rel ? safe_openat(w->host, rel, O_RDONLY | O_DIRECTORY, 0)
                                   : openat(w->host, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (dfd < 0 || fstat(dfd, &st) < 0 || st.st_uid != (*rel ? getuid() : st.st_uid) ||
        (*rel && fstatat(dfd, ".txbox", &st, AT_SYMLINK_NOFOLLOW) == 0))
        return; /* another's, or a workspace of txbox's */
    DIR *dd = fdopendir(dfd);
    if (!dd)
        return;
    dfd = -1; /* the DIR's */
    struct dirent *de;
    size_t n = 0;
    while ((de = readdir(dd)) && n++ < TS_LIST) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || strstr(de->d_name, ".txbox-sync"))
            continue;
        _cleanup_free_ char *r = *rel ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
        if (de->d_type == DT_DIR) {
            if (depth)
                take_dir(w, r, depth - 1);
        } else if (de->d_type == DT_REG || de->d_type == DT_LNK || de->d_type == DT_UNKNOWN) {
            take_file(w, r);
        }
    }
    closedir(dd);
}

/* A /tmp path the command names (rel: after "/tmp/"): a file, or a
 * directory whose files are taken; a file's directory too (what a script
 * there imports). */
static void take_named(struct walk *w, const char *rel)
{
    struct stat st;
    while (*rel == '/')
        rel++;
    if (!*rel || strstr(rel, "/../") || !strncmp(rel, "../", 3) || !strcmp(rel, ".."))
        return;
    if (fstatat(w->host, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        take_dir(w, rel, TS_DEPTH);
        return;
    }
    const char *slash = strrchr(rel, '/');
    if (slash) {
        _cleanup_free_ char *dir = xasprintf("%.*s", (int)(slash - rel), rel);
        take_dir(w, dir, 0);
    }
    take_file(w, rel);
}

/* Where in s "/tmp/..." (or $TMPDIR/..., ${TMPDIR}/...) stands, each
 * path taken. */
static void named_in(struct walk *w, const char *s)
{
    static const char *const starts[] = {"/tmp/", "$TMPDIR/", "${TMPDIR}/", "/tmp"};
    for (const char *p = s; p && *p; p++) {
        for (size_t k = 0; k < ARRAY_SIZE(starts); k++) {
            size_t l = strlen(starts[k]);
            if (strncmp(p, starts[k], l) != 0)
                continue;
            if (p > s && !strchr(" \t\n'\"=:;|&(<>`", p[-1]))
                break; /* inside another word: /var/tmp/..., x/tmp/... */
            const char *q = p + l;
            size_t n = strcspn(q, " \t\n'\"`;|&()<>$\\*?[]{}");
            if (k == 3 && n) /* "/tmp" then a word character: /tmpfoo */
                break;
            _cleanup_free_ char *rel = xasprintf("%.*s", (int)n, q);
            if (*rel) {
                take_named(w, rel);
            } else if (k == 3) {
                w->top = true;
                take_dir(w, "", 0);
                w->top = false;
            }
            p = q + n - 1;
            break;
        }
    }
}

/* Does s name a /tmp path? (what named_in looks at, roughly: a false yes
 * only costs a look) */
static bool names_tmp(const char *s) { return s && (strstr(s, "/tmp") || strstr(s, "TMPDIR")); }

void tmpsync_in(int dirfd, int stmp, const char *const *skip, const char *command, char *const *argv)
{
    /* nothing named and nothing copied before: nothing to look at */
    bool named = names_tmp(command);
    for (size_t i = 0; argv && argv[i] && !named; i++)
        named = names_tmp(argv[i]);
    struct stat sst;
    if (!named && (fstatat(dirfd, TMPSYNC_STATE, &sst, 0) < 0 || sst.st_size == 0))
        return;
    _cleanup_close_ int lk = openat(dirfd, TS_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    _cleanup_close_ int host = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lk < 0 || host < 0 || flock(lk, LOCK_EX) < 0)
        return;
    struct walk w = {.t = tmpsync_load(dirfd), .host = host, .stmp = stmp, .skip = skip};
    w.recent = time(NULL) - TS_RECENT;
    if (command)
        named_in(&w, command);
    for (size_t i = 0; argv && argv[i]; i++)
        named_in(&w, argv[i]);
    /* those copied before, wherever they are */
    for (size_t i = 0; i < w.t->n; i++)
        if (!w.t->v[i].seen) {
            _cleanup_free_ char *rel = xstrdup(w.t->v[i].path);
            take_file(&w, rel);
        }
    /* gone from the host: gone from the session, unless the session
     * changed it (then it is the session's own) */
    size_t k = 0;
    for (size_t i = 0; i < w.t->n; i++) {
        struct tsent *e = &w.t->v[i];
        struct stat hs, ss;
        if (fstatat(host, e->path, &hs, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
            if (fstatat(stmp, e->path, &ss, AT_SYMLINK_NOFOLLOW) == 0 && ss.st_ino == e->sino &&
                ns_of(ss.st_ctim) == e->sctime)
                (void)unlinkat(stmp, e->path, 0);
            free(e->path);
            continue;
        }
        w.t->v[k++] = *e;
    }
    w.t->n = k;
    save(dirfd, w.t);
    tmpsync_free(w.t);
}
