/* txbox's own state in the command's view.
 *
 * The workspace's .txbox is hidden in the view itself (a whiteout in the
 * overlay's upper, a tmpfs over it in the read-only view; the copy holds
 * none). Two other ways to it are closed here, by giving the sandbox more
 * paths to cover with an empty read-only tmpfs (sb_spec.state_hide):
 *
 * - Nested workspaces. sub/.txbox of a workspace inside this one is part
 *   of the view. Every txbox run records its workspace in .txbox/nested of
 *   each workspace that encloses it (state_register_nested), and a
 *   workspace walks its tree once, the first time it needs the list, for
 *   those made before it was (nested.scanned marks that done).
 * - Other mounts of the workspace's filesystem. A bind mount of a parent
 *   of the workspace shows the real .txbox (with the audit log) under
 *   another path; a bind of the state directory itself, or of a directory
 *   holding a nested workspace, likewise. /proc/self/mountinfo names every
 *   mount of the same filesystem and the directory of it each shows.
 *
 * The commit side (scan.c, multi.c, copy.c) never takes a change under a
 * .txbox at any depth. */
#include "state.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "safepath.h"

#define NESTED_FILE "nested"
#define SCANNED_FILE "nested.scanned"
#define NESTED_MAX 256           /* workspaces recorded in one */
#define NESTED_BYTES (64u << 10) /* the record's size */
#define WALK_MAX_DIRS 200000     /* the one-time walk's budget */
#define WALK_MAX_DEPTH 128
#define MOUNTINFO_LINE 16384

/* a/b, with a possibly "/" or "" and b possibly "" */
static char *pjoin(const char *a, const char *b)
{
    if (!*b)
        return xstrdup(a);
    if (!*a)
        return xstrdup(b);
    size_t l = strlen(a);
    return xasprintf("%s%s%s", a, l && a[l - 1] == '/' ? "" : "/", b);
}

/* p below dir, without the leading '/' ("" for dir itself) */
static const char *rest_of(const char *p, const char *dir)
{
    const char *r = p + strlen(dir);
    return *r == '/' ? r + 1 : r;
}

bool state_path_is_state(const char *rel)
{
    for (const char *p = rel; p;) {
        size_t n = strcspn(p, "/");
        if (n == strlen(TXBOX_STATE_DIR) && !strncmp(p, TXBOX_STATE_DIR, n))
            return true;
        p = p[n] ? p + n + 1 : NULL;
    }
    return false;
}

/* The workspaces recorded in .txbox/nested (relative paths, checked). */
static void nested_read(int sfd, strvec *out)
{
    _cleanup_free_ char *buf = NULL;
    if (read_file_at(sfd, NESTED_FILE, NESTED_BYTES, &buf, NULL, NULL) < 0)
        return;
    for (char *line = buf, *nl; *line && out->n < NESTED_MAX; line = nl + 1) {
        nl = strchrnul(line, '\n');
        bool last = !*nl;
        *nl = 0;
        if (safe_relpath_ok(line) && !state_path_is_state(line))
            strvec_add(out, xstrdup(line));
        if (last)
            break;
    }
}

/* Appends rel to the record in sfd unless it is there (or full). */
static void nested_add(int sfd, const char *rel)
{
    if (!safe_relpath_ok(rel) || strchr(rel, '\n'))
        return;
    strvec have = {0};
    nested_read(sfd, &have);
    bool known = have.n >= NESTED_MAX;
    for (size_t i = 0; i < have.n && !known; i++)
        known = !strcmp(have.v[i], rel);
    strvec_free(&have);
    if (known)
        return;
    _cleanup_close_ int fd =
        openat(sfd, NESTED_FILE, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    _cleanup_free_ char *line = xasprintf("%s\n", rel);
    if (fd >= 0)
        (void)!write_all(fd, line, strlen(line)); /* one write: appends do not interleave */
}

/* The state directory of the workspace at dir, if there is one. */
static int open_state(const char *dir)
{
    _cleanup_close_ int d = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        return -1;
    int s = openat(d, TXBOX_STATE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s >= 0 && faccessat(s, "format", F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
        close(s); /* a directory of that name, not a workspace's */
        return -1;
    }
    return s;
}

void state_register_nested(const txbox_ws *ws)
{
    _cleanup_free_ char *anc = xstrdup(ws->path);
    for (char *slash; (slash = strrchr(anc, '/'));) {
        if (slash == anc)
            slash[1] = 0; /* "/" */
        else
            *slash = 0;
        _cleanup_close_ int sfd = open_state(anc);
        if (sfd >= 0)
            nested_add(sfd, rest_of(ws->path, anc));
        if (slash == anc)
            break;
    }
}

/* The one-time walk: every directory below dfd (rel) that holds a .txbox,
 * on the workspace's filesystem, without following links. */
static void walk(int dfd, const char *rel, unsigned depth, dev_t dev, strvec *found, size_t *budget)
{
    _cleanup_dir_ DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) && *budget > 0) {
        const char *n = de->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN))
            continue;
        if (!strcmp(n, TXBOX_STATE_DIR)) {
            if (depth > 0 && found->n < NESTED_MAX)
                strvec_add(found, xstrdup(rel));
            continue; /* never into a state directory */
        }
        if (depth >= WALK_MAX_DEPTH)
            continue;
        int c = openat(dirfd(d), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (c < 0)
            continue;
        if (fstat(c, &st) < 0 || st.st_dev != dev) {
            close(c); /* another mount: not part of the view */
            continue;
        }
        (*budget)--;
        _cleanup_free_ char *p = pjoin(rel, n);
        walk(c, p, depth + 1, dev, found, budget);
    }
}

/* The nested workspaces, recorded or found by the one-time walk, that
 * exist now. */
static void nested_list(const txbox_ws *ws, strvec *out)
{
    strvec rec = {0};
    nested_read(ws->sfd, &rec);
    if (faccessat(ws->sfd, SCANNED_FILE, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
        strvec found = {0};
        size_t budget = WALK_MAX_DIRS;
        int top = openat(ws->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (top >= 0)
            walk(top, "", 0, ws->dev, &found, &budget);
        for (size_t i = 0; i < found.n; i++) {
            nested_add(ws->sfd, found.v[i]);
            strvec_add(&rec, xstrdup(found.v[i]));
        }
        strvec_free(&found);
        int m = openat(ws->sfd, SCANNED_FILE, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (m >= 0)
            close(m);
    }
    for (size_t i = 0; i < rec.n; i++) {
        _cleanup_free_ char *s = pjoin(rec.v[i], TXBOX_STATE_DIR);
        _cleanup_close_ int fd = safe_openat(ws->fd, s, O_PATH | O_DIRECTORY, 0);
        if (fd >= 0)
            strvec_add(out, xstrdup(rec.v[i]));
    }
    strvec_free(&rec);
}

/* mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
            r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = 0;
}

struct mnt {
    unsigned long long id;
    char dev[32];
    char *root, *point; /* into the line */
};

/* Fields 1, 3, 4 and 5 of a mountinfo line (which it changes). */
static bool parse_mnt(char *line, struct mnt *m)
{
    char *f[5];
    char *save = NULL, *p = line;
    for (int i = 0; i < 5; i++, p = NULL)
        if (!(f[i] = strtok_r(p, " ", &save)))
            return false;
    char *end;
    m->id = strtoull(f[0], &end, 10);
    if (*end || snprintf(m->dev, sizeof m->dev, "%s", f[2]) >= (int)sizeof m->dev)
        return false;
    unescape(f[3]);
    unescape(f[4]);
    m->root = f[3];
    m->point = f[4];
    return m->root[0] == '/' && m->point[0] == '/';
}

/* What another mount (m) of the workspace's filesystem shows of the state
 * directories: fs is the workspace's directory in that filesystem. */
static void alias_paths(const txbox_ws *ws, const struct mnt *m, const char *fs, const strvec *nested,
                        strvec *out)
{
    _cleanup_free_ char *st = pjoin(fs, TXBOX_STATE_DIR);
    if (path_under(fs, m->root)) { /* the workspace itself, at another path */
        _cleanup_free_ char *alias = pjoin(m->point, rest_of(fs, m->root));
        if (strcmp(alias, ws->path) != 0)
            strvec_add(out, pjoin(alias, TXBOX_STATE_DIR));
        for (size_t i = 0; i < nested->n; i++) {
            _cleanup_free_ char *sub = pjoin(alias, nested->v[i]);
            strvec_add(out, pjoin(sub, TXBOX_STATE_DIR));
        }
        return;
    }
    if (path_under(m->root, st)) { /* the state directory, or part of it */
        strvec_add(out, xstrdup(m->point));
        return;
    }
    if (!path_under(m->root, fs))
        return;
    for (size_t i = 0; i < nested->n; i++) { /* a directory of the workspace */
        _cleanup_free_ char *full = pjoin(fs, nested->v[i]);
        _cleanup_free_ char *nst = pjoin(full, TXBOX_STATE_DIR);
        if (path_under(m->root, nst)) {
            strvec_add(out, xstrdup(m->point));
        } else if (path_under(full, m->root)) {
            _cleanup_free_ char *at = pjoin(m->point, rest_of(full, m->root));
            strvec_add(out, pjoin(at, TXBOX_STATE_DIR));
        }
    }
}

static void mount_aliases(const txbox_ws *ws, const strvec *nested, strvec *out)
{
    struct statx stx;
    if (statx(ws->fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID))
        return;
    _cleanup_file_ FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return;
    char *line = xmalloc(MOUNTINFO_LINE);
    struct mnt self = {0};
    _cleanup_free_ char *fs = NULL;
    while (!fs && fgets(line, MOUNTINFO_LINE, f)) {
        struct mnt m;
        if (parse_mnt(line, &m) && m.id == stx.stx_mnt_id && path_under(ws->path, m.point)) {
            self = m;
            fs = pjoin(m.root, rest_of(ws->path, m.point));
        }
    }
    if (fs) {
        rewind(f);
        while (fgets(line, MOUNTINFO_LINE, f)) {
            struct mnt m;
            if (parse_mnt(line, &m) && m.id != self.id && !strcmp(m.dev, self.dev))
                alias_paths(ws, &m, fs, nested, out);
        }
    }
    free(line);
}

char **state_hidden_paths(const txbox_ws *ws)
{
    strvec out = {.v = xcalloc(16, sizeof(char *)), .cap = 16};
    strvec nested = {0};
    nested_list(ws, &nested);
    for (size_t i = 0; i < nested.n; i++) {
        _cleanup_free_ char *sub = pjoin(ws->path, nested.v[i]);
        strvec_add(&out, pjoin(sub, TXBOX_STATE_DIR));
    }
    mount_aliases(ws, &nested, &out);
    strvec_free(&nested);
    return out.v;
}

bool state_tree_holds_state(int dfd, const char *name)
{
    int c = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (c < 0)
        return false;
    if (fstat(c, &st) < 0) {
        close(c);
        return true;
    }
    strvec found = {0};
    size_t budget = WALK_MAX_DIRS;
    walk(c, name, 1, st.st_dev, &found, &budget); /* depth 1: a .txbox right in it counts */
    bool holds = found.n > 0 || budget == 0;      /* too large to tell: as if it did */
    strvec_free(&found);
    return holds;
}

static void strip(int dfd, unsigned depth)
{
    _cleanup_dir_ DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN))
            continue;
        if (!strcmp(n, TXBOX_STATE_DIR)) {
            (void)tree_remove(dirfd(d), n);
            continue;
        }
        int c = depth < WALK_MAX_DEPTH ? openat(dirfd(d), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                                       : -1;
        if (c >= 0)
            strip(c, depth + 1);
    }
}

void state_strip(int dfd, const char *name)
{
    int c = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (c >= 0)
        strip(c, 0);
}

void state_tighten_modes(const txbox_ws *ws)
{
    struct stat st;
    if (fstat(ws->sfd, &st) == 0 && (st.st_mode & 077))
        (void)fchmod(ws->sfd, st.st_mode & 07700);
    /* SQLite makes its -wal and -shm with the database's mode */
    static const char *const logs[] = {"log.db", "log.db-wal", "log.db-shm", "log.db-journal"};
    for (size_t i = 0; i < ARRAY_SIZE(logs); i++) {
        if (fstatat(ws->sfd, logs[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
            !(st.st_mode & 077))
            continue;
        _cleanup_close_ int fd = openat(ws->sfd, logs[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
            (void)fchmod(fd, st.st_mode & 0700);
    }
}
