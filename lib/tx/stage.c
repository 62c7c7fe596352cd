/* What an undo or a restore puts into its upper besides copies (revert.c):
 * the directories on the way, a directory's old extended attributes; and
 * the reversal of the staging of an undo made by an older txbox, which
 * moved the pre-images (tx/T/undo/N) into its upper before its commit point
 * and wrote tx/U/staged first: recovery (recover.c) puts them back for an
 * undo that died before its commit point (undo_unstage). In a file of its
 * own, below revert.c and recover.c: recovery does not call up into undo. */
#include <fcntl.h>
#include <sys/stat.h>

#include "fsops.h"
#include "safepath.h"
#include "stage.h"
#include "store.h"

#define STAGED_MAGIC "txbox-staged 1"

static char *hex_decode(const char *s, size_t n)
{
    if (n % 2)
        return NULL;
    char *o = xmalloc(n / 2 + 1);
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        char x[3] = {s[2 * i], s[2 * i + 1], 0};
        if (sscanf(x, "%2x", &v) != 1 || v == 0) {
            free(o);
            return NULL;
        }
        o[i] = (char)v;
    }
    o[n / 2] = 0;
    return o;
}

void undo_plan_free(struct undo_plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i].path);
    free(p->v);
    memset(p, 0, sizeof *p);
}

static int read_plan(int txfd, struct undo_plan *p, txbox_error *err)
{
    memset(p, 0, sizeof *p);
    _cleanup_free_ char *s = NULL;
    size_t len;
    if (read_file_at(txfd, STAGED, 64u << 20, &s, &len, err) < 0)
        return -1;
    char *save = NULL, *line = strtok_r(s, "\n", &save);
    unsigned long long from;
    if (!line || sscanf(line, STAGED_MAGIC " %llu", &from) != 1)
        return tx_err(err, EBADMSG, "the staging record of an undo is damaged");
    p->from = from;
    while ((line = strtok_r(NULL, "\n", &save))) {
        char *sp = strchr(line, ' ');
        uint64_t n;
        if (!sp)
            goto bad;
        *sp = 0;
        char *path = hex_decode(sp + 1, strlen(sp + 1));
        if (!parse_u64(line, &n) || !path || !safe_relpath_ok(path)) {
            free(path);
            goto bad;
        }
        p->v = xrealloc(p->v, (p->n + 1) * sizeof *p->v);
        p->v[p->n++] = (struct undo_stage){(size_t)n, path};
    }
    return 0;
bad:
    undo_plan_free(p);
    return tx_err(err, EBADMSG, "the staging record of an undo is damaged");
}

/* What T's journal records of the pre-image tx/T/undo/N (NULL: nothing). */
static const struct tx_meta *pre_meta(const struct tx_journal *t, size_t n)
{
    return t && n < t->ops.n ? &t->ops.v[n].old : NULL;
}

/* Renames tx/U/upper/PATH back to tx/T/undo/N for every staged entry that
 * moved (idempotent), each with the mode T's journal records for it, then
 * drops the staging record. */
int undo_unstage_plan(txbox_ws *ws, int txfd, const struct undo_plan *p, txbox_error *err)
{
    char tn[32];
    idname(tn, p->from);
    _cleanup_close_ int tfd = open_dir_at(ws->txd, tn);
    _cleanup_close_ int tundo = tfd >= 0 ? open_dir_at(tfd, "undo") : -1;
    _cleanup_close_ int upper = open_dir_at(txfd, "upper");
    if (tundo < 0)
        return tx_errno(err, errno, "cannot open the pre-images of transaction %s", tn);
    struct tx_journal t;
    bool have_t = journal_load(tfd, "journal", &t, NULL) == 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < p->n; i++) {
        char un[32];
        idname(un, p->v[i].n);
        const struct tx_meta *m = pre_meta(have_t ? &t : NULL, p->v[i].n);
        const char *base = NULL;
        _cleanup_close_ int up = upper >= 0 ? safe_open_parent(upper, p->v[i].path, &base) : -1;
        if (up >= 0 && exists_at(up, base) > 0 && exists_at(tundo, un) == 0) {
            if (tx_move(up, base, tundo, un, m) < 0)
                rc = tx_errno(err, errno, "cannot put back the pre-image of %s", p->v[i].path);
        } else if (tx_fix_mode(tundo, un, m) < 0) {
            rc = tx_errno(err, errno, "cannot set the mode of the pre-image of %s", p->v[i].path);
        }
    }
    if (have_t)
        journal_free(&t);
    if (rc < 0)
        return rc;
    if (fs_fsync(tundo) < 0)
        return tx_errno(err, errno, "cannot make the pre-images of transaction %s durable", tn);
    if (fs_unlinkat(txfd, STAGED, 0) < 0 && errno != ENOENT)
        return tx_errno(err, errno, "cannot drop the staging record");
    return 0;
}

int undo_unstage(txbox_ws *ws, int txfd, txbox_error *err)
{
    (void)unlinkat(txfd, STAGED ".tmp", 0); /* never installed: nothing moved */
    int staged = exists_at(txfd, STAGED);
    if (staged <= 0)
        return staged < 0 ? tx_errno(err, errno, "cannot read the staging record") : 0;
    struct undo_plan p;
    if (read_plan(txfd, &p, err) < 0)
        return -1;
    int rc = undo_unstage_plan(ws, txfd, &p, err);
    undo_plan_free(&p);
    return rc;
}

/* mkdir -p of path's parent directories inside upper; each goes into sync
 * (made durable by the caller). Returns the parent's fd. */
int stage_parent(int upper, const char *path, const char **base, struct fs_syncset *sync, txbox_error *err)
{
    int cur = fcntl(upper, F_DUPFD_CLOEXEC, 3);
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        if (!slash)
            break;
        char comp[NAME_MAX + 1];
        size_t l = (size_t)(slash - p);
        if (l > NAME_MAX) {
            close(cur);
            return tx_err(err, ENAMETOOLONG, "path too long: %s", path);
        }
        memcpy(comp, p, l);
        comp[l] = 0;
        if (fs_mkdirat(cur, comp, 0700) < 0 && errno != EEXIST) {
            int e = errno;
            close(cur);
            return tx_errno(err, e, "cannot stage %s", path);
        }
        int next = open_dir_at(cur, comp);
        close(cur);
        if (next < 0)
            return tx_errno(err, errno, "cannot stage %s", path);
        cur = next;
        fs_syncset_add(sync, cur);
        p = slash + 1;
    }
    *base = p;
    return cur;
}

/* The directory path in tx/U/upper gets the extended attributes T's META
 * operation on it kept in tx/T/undo/N; apply_meta sets them. */
int undo_stage_xattrs(int upper, int tundo, const struct tx_journal *t, const char *path,
                      struct fs_syncset *sync, txbox_error *err)
{
    const char *disp = *path ? path : ".";
    size_t n = 0;
    while (n < t->ops.n && (t->ops.v[n].kind != OP_META || strcmp(t->ops.v[n].path, path)))
        n++;
    char un[32];
    idname(un, n);
    _cleanup_close_ int src = n < t->ops.n ? open_dir_at(tundo, un) : -1;
    if (src < 0)
        return tx_errno(err, n < t->ops.n ? errno : ENOENT, "cannot read the old attributes of %s", disp);
    _cleanup_close_ int dst = -1;
    if (!*path) {
        dst = fcntl(upper, F_DUPFD_CLOEXEC, 3);
    } else {
        const char *base = NULL;
        _cleanup_close_ int up = stage_parent(upper, path, &base, sync, err);
        if (up < 0)
            return -1;
        if (fs_mkdirat(up, base, 0700) < 0 && errno != EEXIST)
            return tx_errno(err, errno, "cannot stage the old attributes of %s", disp);
        dst = open_dir_at(up, base);
    }
    if (dst < 0)
        return tx_errno(err, errno, "cannot stage the old attributes of %s", disp);
    fs_syncset_add(sync, dst);
    if (dir_xattrs_copy(src, dst, err) < 0)
        return tx_err_ctx(err, "cannot stage the old attributes of %s", disp);
    return 0;
}
