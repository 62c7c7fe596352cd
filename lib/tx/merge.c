/* A multi-command transaction's layer: its state file (tx/ID/multi), the
 * merge of a command's upper (incoming/) into layer/ and what run.c asks of
 * an open transaction (multi.h). The design, the files and the crash
 * behaviour are described at the top of multi.c; this part is below run.c,
 * which runs each command of the transaction on this layer, and multi.c
 * (begin, savepoints, rollback, commit, abort) is above it. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "fsops.h"
#include "merge.h"
#include "result.h"
#include "safepath.h"
#include "tx.h"

int multi_write_state(txbox_multi *m, txbox_error *err)
{
    _cleanup_free_ char *s = json_dumps(m->state, JSON_COMPACT | JSON_SORT_KEYS);
    int fd = openat(m->txfd, "multi.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return tx_errno(err, errno, "cannot write the state of transaction %s", m->ids);
    int rc = write_all(fd, s, strlen(s));
    int e = errno;
    close(fd);
    if (rc < 0 || renameat(m->txfd, "multi.tmp", m->txfd, "multi") < 0)
        return tx_errno(err, rc < 0 ? e : errno, "cannot write the state of transaction %s", m->ids);
    return 0;
}

uint64_t multi_state_u64(const txbox_multi *m, const char *k)
{
    json_int_t v = json_integer_value(json_object_get(m->state, k));
    return v > 0 ? (uint64_t)v : 0;
}

static char *pjoin(const char *a, const char *b) { return *a ? xasprintf("%s/%s", a, b) : xstrdup(b); }

/* ---- merge ---- */

static bool is_whiteout_at(const txbox_multi *m, int dfd, const char *name, const struct stat *st)
{
    if (S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0))
        return true;
    if (!S_ISREG(st->st_mode) || st->st_size != 0)
        return false;
    char p[64], x[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d/%s", dfd, name);
    snprintf(x, sizeof x, "%swhiteout", ovl_pfx(m->ws));
    return strlen(name) < 32 && lgetxattr(p, x, NULL, 0) >= 0;
}

bool multi_is_opaque(const txbox_multi *m, int dfd)
{
    char x[64], v[4];
    snprintf(x, sizeof x, "%sopaque", ovl_pfx(m->ws));
    ssize_t l = fgetxattr(dfd, x, v, sizeof v);
    return l == 1 && v[0] == 'y';
}

static void note(struct merge *g, json_t *list, const char *p, bool dir)
{
    g->count[list == g->added ? 0 : list == g->modified ? 1 : 2]++;
    if (g->listed >= CHANGES_CAP) {
        g->truncated = true;
        return;
    }
    g->listed++;
    json_array_append_new(list, dir ? json_sprintf("%s/", p) : json_string(p));
}

/* Owner rwx on a directory of the layer or of incoming while the merge works
 * in it (unprivileged, renames need it); the final mode is set after. A
 * directory of incoming (g set; path: its path in the tree) that lacks them
 * has its mode recorded in tx/ID/merge.modes before it is granted anything:
 * a merge killed before it sets the final mode would otherwise take the
 * granted mode for the directory's own on its restart (multi_restore_modes). The
 * layer's directories need no record: each one granted is one the merge
 * goes into, which ends by giving it the incoming directory's metadata. */
int multi_open_dir_rw(struct modes_log *ml, int at, const char *name, const char *path, struct stat *st)
{
    if (fstatat(at, name, st, AT_SYMLINK_NOFOLLOW) < 0)
        return -1;
    if (!S_ISDIR(st->st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    if ((st->st_mode & S_IRWXU) != S_IRWXU) {
        if (ml) {
            if (ml->fd < 0)
                ml->fd = openat(ml->m->txfd, ml->file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
            _cleanup_free_ char *rec = xasprintf("%o %s", (unsigned)(st->st_mode & 07777), path);
            if (ml->fd < 0 || write_all(ml->fd, rec, strlen(rec) + 1) < 0)
                return -1;
        }
        if (fchmodat(at, name, (st->st_mode & 07777) | S_IRWXU, 0) < 0)
            return -1;
    }
    return openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Before a merge cut short is restarted: every directory recorded in
 * merge.modes gets its own mode back, last recorded first (a directory is
 * recorded after its parent, which stays reachable while its children are
 * restored), in incoming/ or, once moved or merged, in the layer (whose
 * copy then had the mode granted for its move, or already its own). A
 * record that no longer resolves (ENOENT, or EACCES below a layer directory
 * that already has its final mode, so whose merge finished) is skipped.
 * Then the records go: the restarted merge records afresh. */
int multi_restore_modes(txbox_multi *m, const char *file, txbox_error *err)
{
    bool merge = !strcmp(file, "merge.modes");
    _cleanup_free_ char *s = NULL;
    size_t len = 0;
    if (read_file_at(m->txfd, file, 64u << 20, &s, &len, NULL) < 0) {
        if (errno == ENOENT)
            return 0;
        return tx_errno(err, errno, "cannot read %s", file);
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += s[i] == '\0';
    const char **recs = xcalloc(n ? n : 1, sizeof *recs);
    size_t k = 0;
    for (size_t i = 0; i < len && k < n; i += strlen(s + i) + 1)
        recs[k++] = s + i; /* a last record without its NUL (cut short) is not complete: dropped */
    int rc = 0;
    for (size_t i = k; i-- > 0 && rc == 0;) {
        char *end;
        unsigned long mode = strtoul(recs[i], &end, 8);
        if (end == recs[i] || *end != ' ' || mode > 07777)
            continue;
        const char *p = end + 1;
        struct stat st;
        if (!merge) { /* link.modes: a path under tx/ID/, beneath it, no symlink on the way */
            const char *base;
            _cleanup_close_ int pfd = safe_relpath_ok(p) ? safe_open_parent(m->txfd, p, &base) : -1;
            if (pfd >= 0 && fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
                (st.st_mode & 07777) != mode && fchmodat(pfd, base, (mode_t)mode, 0) < 0 && errno != ENOENT)
                rc = tx_errno(err, errno, "cannot restore the mode of %s", p);
            continue;
        }
        _cleanup_free_ char *ip = *p ? xasprintf("incoming/%s", p) : xstrdup("incoming");
        int at = m->txfd;
        const char *name = ip;
        if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (!*p)
                continue;
            at = m->layerfd;
            name = p;
            if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
        }
        if (S_ISDIR(st.st_mode) && (st.st_mode & 07777) != mode && fchmodat(at, name, (mode_t)mode, 0) < 0 &&
            errno != ENOENT && errno != EACCES)
            rc = tx_errno(err, errno, "cannot restore the mode of %s", p);
    }
    free(recs);
    if (rc == 0 && unlinkat(m->txfd, file, 0) < 0 && errno != ENOENT)
        rc = tx_errno(err, errno, "cannot remove %s", file);
    return rc;
}

/* The merged directory takes the incoming one's metadata (ust: its stat
 * before the merge granted anything). */
int multi_copy_dir_meta(struct merge *g, int ufd, const struct stat *ust, int afd, const char *p)
{
    if (fchown(afd, ust->st_uid, ust->st_gid) < 0 && errno != EPERM)
        return tx_errno(g->err, errno, "cannot set the owner of %s in the layer", p);
    if (dir_xattrs_copy(ufd, afd, g->err) < 0)
        return -1;
    struct timespec ts[2] = {ust->st_atim, ust->st_mtim};
    if (fchmod(afd, ust->st_mode & 07777) < 0 || futimens(afd, ts) < 0)
        return tx_errno(g->err, errno, "cannot set the metadata of %s in the layer", p);
    return 0;
}

/* Renames old (under ofd) to new (under nfd), never replacing. Unprivileged,
 * moving a directory needs write permission on it: one without is given it
 * for the rename. */
static int move_entry(int ofd, const char *old, int nfd, const char *new)
{
    struct stat st;
    bool grant =
        fstatat(ofd, old, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) && !(st.st_mode & S_IWUSR);
    if (grant && fchmodat(ofd, old, (st.st_mode & 07777) | S_IWUSR, 0) < 0)
        return -1;
    int rc = fs_renameat(ofd, old, nfd, new, RENAME_NOREPLACE);
    int e = errno;
    if (grant && fchmodat(rc == 0 ? nfd : ofd, rc == 0 ? new : old, st.st_mode & 07777, 0) < 0 && rc == 0)
        return -1;
    errno = e;
    return rc;
}

static int merge_dir(struct merge *g, int ufd, int afd, int wfd, const char *path, unsigned depth)
{
    if (depth > 4096)
        return tx_err(g->err, ELOOP, "directory tree too deep at %s", path);
    /* The names first: the loop renames entries out of the directory. */
    char **names = NULL;
    size_t n = 0;
    {
        _cleanup_dir_ DIR *d = fdopendir(dup(ufd));
        if (!d)
            return tx_errno(g->err, errno, "cannot read %s of the command's changes", *path ? path : ".");
        rewinddir(d);
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            if (!strcmp(de->d_name, TXBOX_STATE_DIR))
                continue; /* a state directory, at any depth: the layer hides the
                             workspace's itself, and no commit changes one */
            names = xrealloc(names, (n + 1) * sizeof *names);
            names[n++] = xstrdup(de->d_name);
        }
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *name = names[i];
        _cleanup_free_ char *p = pjoin(path, name);
        struct stat ust, ast, wst;
        if (fstatat(ufd, name, &ust, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = tx_errno(g->err, errno, "cannot stat %s", p);
            break;
        }
        bool in_layer = fstatat(afd, name, &ast, AT_SYMLINK_NOFOLLOW) == 0;
        bool layer_wh = in_layer && is_whiteout_at(g->m, afd, name, &ast);
        bool in_ws = !in_layer && wfd >= 0 && fstatat(wfd, name, &wst, AT_SYMLINK_NOFOLLOW) == 0;
        bool existed = in_layer ? !layer_wh : in_ws; /* in the view the command started with */
        bool udir = S_ISDIR(ust.st_mode);
        _cleanup_close_ int cu = -1;
        struct stat cust;
        if (udir && (cu = multi_open_dir_rw(&g->ml, ufd, name, p, &cust)) < 0) {
            rc = tx_errno(g->err, errno, "cannot open %s of the command's changes", p);
            break;
        }
        bool opaque = udir && multi_is_opaque(g->m, cu);
        if (udir && !opaque && !in_layer && in_ws && S_ISDIR(wst.st_mode)) {
            /* A workspace directory the command changed inside: the layer
             * gets it (plain, merged over the workspace's) and the merge
             * goes on inside, listing what changed there. */
            if (mkdirat(afd, name, 0700) < 0 || fstatat(afd, name, &ast, AT_SYMLINK_NOFOLLOW) < 0) {
                rc = tx_errno(g->err, errno, "cannot create %s in the layer", p);
                break;
            }
            in_layer = true;
        }
        if (udir && !opaque && in_layer && S_ISDIR(ast.st_mode)) {
            struct stat cast;
            _cleanup_close_ int ca = multi_open_dir_rw(NULL, afd, name, p, &cast);
            if (ca < 0) {
                rc = tx_errno(g->err, errno, "cannot open %s in the layer", p);
                break;
            }
            /* Below a directory the layer made opaque (or new), the
             * workspace does not show through. */
            _cleanup_close_ int cw = -1;
            if (wfd >= 0 && !multi_is_opaque(g->m, ca))
                cw = openat(wfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = merge_dir(g, cu, ca, cw, p, depth + 1);
            if (rc == 0)
                rc = multi_copy_dir_meta(g, cu, &ust, ca, p);
            if (rc == 0)
                (void)unlinkat(ufd, name, AT_REMOVEDIR);
            continue;
        }
        if (is_whiteout_at(g->m, ufd, name, &ust)) {
            if (existed)
                note(g, g->deleted, p, in_layer ? S_ISDIR(ast.st_mode) : S_ISDIR(wst.st_mode));
        } else {
            note(g, existed ? g->modified : g->added, p, udir);
        }
        if (cu >= 0) {
            /* back to its own mode before it moves (multi_open_dir_rw granted) */
            if (fchmod(cu, cust.st_mode & 07777) < 0) {
                rc = tx_errno(g->err, errno, "cannot restore the mode of %s", p);
                break;
            }
        }
        /* A plain directory over what the layer deleted or replaced: the
         * workspace's entry must not show through it. Marked before it
         * moves, so that the layer never holds it unmarked (a restart finds
         * it opaque and moves it as such). */
        if (udir && !opaque && in_layer && !S_ISDIR(ast.st_mode)) {
            char x[64];
            snprintf(x, sizeof x, "%sopaque", ovl_pfx(g->m->ws));
            if (fsetxattr(cu, x, "y", 1, 0) < 0) {
                rc = tx_errno(g->err, errno, "cannot mark %s opaque", p);
                break;
            }
        }
        if (in_layer && tree_remove(afd, name) < 0) {
            rc = tx_errno(g->err, errno, "cannot replace %s in the layer", p);
            break;
        }
        if (move_entry(ufd, name, afd, name) < 0) {
            rc = tx_errno(g->err, errno, "cannot move %s into the layer", p);
            break;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* Merges incoming/ into layer/ and removes it. Restartable. */
int multi_finish_merge(txbox_multi *m, json_t **changes, txbox_error *err)
{
    struct stat ist;
    if (fstatat(m->txfd, "incoming", &ist, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
        /* merged, and killed before its records went */
        if (unlinkat(m->txfd, "merge.modes", 0) < 0 && errno != ENOENT)
            return tx_errno(err, errno, "transaction %s: cannot remove merge.modes", m->ids);
        return 0;
    }
    if (multi_restore_modes(m, "merge.modes", err) < 0)
        return tx_err_ctx(err, "transaction %s: merging a command's changes", m->ids);
    struct stat ust;
    struct merge g = {.m = m,
                      .added = json_array(),
                      .modified = json_array(),
                      .deleted = json_array(),
                      .err = err,
                      .ml = {m, "merge.modes", -1, false}};
    _cleanup_close_ int ufd = multi_open_dir_rw(&g.ml, m->txfd, "incoming", "", &ust);
    int rc = 0;
    if (ufd < 0)
        rc = tx_errno(err, errno, "cannot open the command's changes");
    if (rc == 0)
        rc = merge_dir(&g, ufd, m->layerfd, m->ws->fd, "", 0);
    if (rc == 0)
        rc = multi_copy_dir_meta(&g, ufd, &ust, m->layerfd, ".");
    if (rc == 0 && tree_remove(m->txfd, "incoming") < 0)
        rc = tx_errno(err, errno, "cannot remove the merged changes");
    if (g.ml.fd >= 0)
        close(g.ml.fd);
    if (rc == 0 && unlinkat(m->txfd, "merge.modes", 0) < 0 && errno != ENOENT)
        rc = tx_errno(err, errno, "cannot remove merge.modes");
    if (rc == 0 && changes)
        *changes = json_pack("{s:O,s:O,s:O,s:b,s:{s:I,s:I,s:I}}", "added", g.added, "modified", g.modified,
                             "deleted", g.deleted, "truncated", g.truncated, "counts", "added",
                             (json_int_t)g.count[0], "modified", (json_int_t)g.count[1], "deleted",
                             (json_int_t)g.count[2]);
    json_decref(g.added);
    json_decref(g.modified);
    json_decref(g.deleted);
    return rc < 0 ? tx_err_ctx(err, "transaction %s: merging a command's changes", m->ids) : 0;
}
const char *txbox_multi_id(const txbox_multi *m) { return m->ids; }
const char *multi_layer_rel(const txbox_multi *m) { return m->layer_rel; }
const char *multi_layer_work_rel(const txbox_multi *m) { return m->lwork_rel; }
int multi_layer_work_fd(const txbox_multi *m) { return m->lworkfd; }
int multi_layer_fd(const txbox_multi *m) { return m->layerfd; }
int multi_txfd(const txbox_multi *m) { return m->txfd; }
bool multi_aborting(const txbox_multi *m) { return json_is_true(json_object_get(m->state, "aborting")); }

int multi_absorb(txbox_multi *m, int runtxfd, txbox_result *r, txbox_error *err)
{
    if (m->discard) {
        r->outcome = TXBOX_OUTCOME_READ_ONLY; /* a verify: its writes are dropped */
        return 0;
    }
    fs_fault_arm(); /* crash tests: the merge's renames are fault points */
    /* no records of an earlier merge may apply to this one */
    int rc = unlinkat(m->txfd, "merge.modes", 0) < 0 && errno != ENOENT ? -1 : 0;
    if (rc == 0)
        rc = fs_renameat(runtxfd, "upper", m->txfd, "incoming", 0);
    if (rc < 0)
        rc = tx_errno(err, errno, "transaction %s: cannot take the command's changes", m->ids);
    if (rc == 0)
        rc = multi_finish_merge(m, &r->changes, err);
    fs_fault_disarm();
    if (rc < 0)
        return -1;
    json_object_set_new(m->state, "commands", json_integer((json_int_t)multi_state_u64(m, "commands") + 1));
    if (multi_write_state(m, err) < 0)
        return -1;
    r->outcome = TXBOX_OUTCOME_STAGED;
    return 0;
}
