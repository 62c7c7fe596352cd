/* The commit journal: applying a transaction's upper to the workspace so
 * that a crash at any instant leaves exactly the pre-state or exactly the
 * post-state.
 *
 * Files (all under .txbox/, on the workspace's filesystem):
 *   tx/ID/upper/        the command's write set (overlay upper)
 *   tx/ID/undo/N        the old entry that operation N replaced or deleted
 *   active/ID           flock'd by the owning process while ID is in flight
 *   journal/ID          the intent log, present from the commit point until
 *                       the transaction is fully applied and recorded
 *   tx/ID/journal       the same log once done (the commit record, for undo)
 *   commits/GEN -> ID   which transaction made generation GEN
 *   gen                 the latest generation (a cache of max(commits/))
 *
 * States and transitions (the caller holds the workspace lock throughout):
 *
 *   S0 RUNNING   upper being written by the command      (pre-state)
 *      │ scan_upper(): ops listed; the new data's files and directories
 *      │ noted for one sync set (fsops.h: fsyncs, or one syncfs)
 *   S1 PREPARED  ops known, nothing in the workspace touched (pre-state)
 *      │ write_journal(): journal/ID.tmp written; it and the upper's new
 *      │ data made durable (that one sync set); renamed to journal/ID,
 *      │ journal/ fsync'd                                 ── COMMIT POINT ──
 *   S2 COMMITTED journal durable; operations being applied
 *      │ apply_ops(): each op by renames; the touched dirs noted
 *   S3 APPLIED   workspace = post-state (maybe not yet durable)
 *      │ finalize(): commits/GEN, gen, audit log row (store_log_commit,
 *      │ idempotent: a line of log.pending, or the log's row with its WAL
 *      │ not synced by SQLite), then one sync set of the touched dirs,
 *      │ undo/, commits/ and that file; only then journal/ID ->
 *      │ tx/ID/journal
 *   S4 DONE      recorded; active/ID removed
 *
 * Invariants:
 *   I1. Before the commit point the workspace is never written: a crash in
 *       S0/S1 is rolled back by discarding tx/ID (recover: no journal/ID and
 *       a dead owner).
 *   I2. journal/ID exists only with complete, checksummed contents (written
 *       under a temporary name, fsync'd, then renamed). A journal whose
 *       checksum fails is never applied.
 *   I3. Every operation is idempotent given the files' presence, so
 *       recovery re-runs apply_ops() from the start:
 *         (first)    every META directory that lacks owner rwx gets it,
 *                    parents first: unprivileged, the renames into and out
 *                    of it need them, and so does recovery's walk to the
 *                    entries below (META sets the exact mode at the end).
 *         REPLACE N: if upper/P exists: (if had_old and workspace P exists
 *                    and undo/N does not: rename P -> undo/N); rename
 *                    upper/P -> P.      upper/P gone means done.
 *         DELETE N:  if workspace P exists and undo/N does not: rename P ->
 *                    undo/N.
 *                    A directory moved by these renames has the mode the
 *                    journal records for it afterwards (tx_move: one without
 *                    owner write permission is given it for the rename), set
 *                    again each time (tx_fix_mode).
 *         META N:    keep the directory's extended attributes in undo/N
 *                    unless there (when they change); set them, mode,
 *                    owner, times (absolute values).
 *   I4. No operation's path lies inside another REPLACE/DELETE operation's
 *       path (the scan stops at those), so the order of REPLACE and DELETE
 *       operations does not matter; META operations come after everything
 *       inside their directory.
 *   I5. Every path is opened beneath the workspace fd without following
 *       symlinks (safepath.c): nothing the command created can redirect an
 *       operation outside the workspace.
 *   I6. An fsync error is never retried as if nothing happened: before the
 *       commit point the transaction aborts (pre-state); after it, txbox
 *       stops and the next recovery rolls forward from the journal.
 *   I7. journal/ID is closed only after everything the apply and finalize
 *       wrote before it is durable (one sync set): a crash before that
 *       leaves journal/ID, and recovery applies and records again (I3).
 *       Nothing but recovery reads the workspace's state meanwhile: every
 *       txbox command recovers first, under the workspace lock.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <zlib.h>

#include "fsops.h"
#include "safepath.h"
#include "store.h"
#include "tx.h"

#define JNL_MAGIC "TXBOXJN1"
#define JNL_END "TXBOXEND"
#define JNL_MAX_BYTES (1u << 30)

struct jhdr {
    char magic[8];
    uint32_t version, flags;
    uint64_t id, gen, base_gen, nops, info_len;
};

struct jop {
    uint8_t kind, had_old, new_dir, old_dir;
    uint32_t path_len;
    struct tx_meta nw, old;
};

static void put(dbuf *b, const void *p, size_t n) { dbuf_add(b, p, n); }

static void jnl_name(char buf[static 32], uint64_t id, const char *suffix)
{
    snprintf(buf, 32, "%llu%s", (unsigned long long)id, suffix);
}

/* The journal's file made durable before its rename (I2): not in one sync
 * set with journal/, but in one with pre (when given: the scanned upper's
 * new data, which must be as durable before the commit point). */
static int sync_journal(int fd, struct fs_syncset *pre, int jnld)
{
    if (!pre)
        return fs_fsync(fd);
    fs_syncset_add(pre, fd);
    return fs_syncset_sync(pre, jnld);
}

static int write_journal(txbox_ws *ws, const struct tx_journal *j, struct fs_syncset *pre,
                         txbox_error *err)
{
    dbuf b;
    dbuf_init(&b, 0);
    struct jhdr h;
    memset(&h, 0, sizeof h);
    h.version = 1;
    h.id = j->id;
    h.gen = j->gen;
    h.base_gen = j->base_gen;
    h.nops = j->ops.n;
    h.info_len = j->info ? strlen(j->info) : 0;
    memcpy(h.magic, JNL_MAGIC, 8);
    put(&b, &h, sizeof h);
    if (h.info_len)
        put(&b, j->info, h.info_len);
    for (size_t i = 0; i < j->ops.n; i++) {
        const struct tx_op *o = &j->ops.v[i];
        struct jop jo;
        memset(&jo, 0, sizeof jo); /* no stray padding bytes in the file */
        jo.kind = o->kind;
        jo.had_old = o->had_old;
        jo.new_dir = o->new_dir;
        jo.old_dir = o->old_dir;
        jo.path_len = (uint32_t)strlen(o->path);
        jo.nw = o->nw;
        jo.old = o->old;
        put(&b, &jo, sizeof jo);
        put(&b, o->path, jo.path_len);
    }
    uint32_t crc = (uint32_t)crc32(0, (const Bytef *)b.p, (uInt)b.len);
    put(&b, &crc, sizeof crc);
    put(&b, JNL_END, 8);

    char tmp[32], fin[32];
    jnl_name(tmp, j->id, ".tmp");
    jnl_name(fin, j->id, "");
    int rc = -1;
    _cleanup_close_ int fd = openat(ws->jnld, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        tx_errno(err, errno, "cannot create the journal");
    else if (fs_write(fd, b.p, b.len) < 0)
        tx_errno(err, errno, "cannot write the journal");
    else if (sync_journal(fd, pre, ws->jnld) < 0)
        tx_errno(err, errno, "cannot make the journal durable");
    else if (fs_renameat(ws->jnld, tmp, ws->jnld, fin, 0) < 0)
        tx_errno(err, errno, "cannot install the journal");
    else if (fs_fsync(ws->jnld) < 0)
        /* The rename may or may not be durable: the state is decided by the
         * next recovery (I6), so do not go on applying. */
        tx_errno(err, errno, "cannot make the journal durable");
    else
        rc = 0;
    if (rc < 0 && fd >= 0)
        (void)unlinkat(ws->jnld, tmp, 0);
    dbuf_free(&b);
    return rc;
}

void journal_free(struct tx_journal *j)
{
    ops_free(&j->ops);
    free(j->info);
    j->info = NULL;
}

int journal_load_gen(txbox_ws *ws, uint64_t gen, struct tx_journal *j, char idn[static 32],
                     txbox_error *err)
{
    char gn[32];
    snprintf(gn, sizeof gn, "%llu", (unsigned long long)gen);
    char id[32];
    ssize_t l = readlinkat(ws->cmtd, gn, id, sizeof id - 1);
    if (l < 0)
        return tx_errno(err, errno, "cannot read commit record %s", gn);
    id[l] = 0;
    memcpy(idn, id, (size_t)l + 1);
    _cleanup_close_ int tfd = openat(ws->txd, idn, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tfd < 0 || journal_load(tfd, "journal", j, err) < 0)
        return 1;
    return 0;
}

int journal_peek_gen(int dirfd, const char *name, uint64_t *gen)
{
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct jhdr h;
    if (fd < 0 || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || memcmp(h.magic, JNL_MAGIC, 8) ||
        h.version != 1 || h.gen == 0)
        return -1;
    *gen = h.gen;
    return 0;
}

int journal_load(int dirfd, const char *name, struct tx_journal *j, txbox_error *err)
{
    memset(j, 0, sizeof *j);
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    if (read_file_at(dirfd, name, JNL_MAX_BYTES, &data, &len, err) < 0)
        return -1;
    struct jhdr h;
    if (len < sizeof h + 12 || memcmp(data, JNL_MAGIC, 8) ||
        memcmp(data + len - 8, JNL_END, 8))
        return tx_err(err, EBADMSG, "journal %s is truncated or not a journal", name);
    uint32_t crc;
    memcpy(&crc, data + len - 12, 4);
    if (crc != (uint32_t)crc32(0, (const Bytef *)data, (uInt)(len - 12)))
        return tx_err(err, EBADMSG, "journal %s has a bad checksum; it will not be applied", name);
    memcpy(&h, data, sizeof h);
    if (h.version != 1)
        return tx_err(err, EBADMSG, "journal %s has unknown version %u", name, h.version);
    j->id = h.id;
    j->gen = h.gen;
    j->base_gen = h.base_gen;
    size_t off = sizeof h, end = len - 12;
    if (h.info_len > end - off)
        goto bad;
    if (h.info_len) {
        j->info = xmalloc(h.info_len + 1);
        memcpy(j->info, data + off, h.info_len);
        j->info[h.info_len] = 0;
        off += h.info_len;
    }
    for (uint64_t i = 0; i < h.nops; i++) {
        struct jop jo;
        if (end - off < sizeof jo)
            goto bad;
        memcpy(&jo, data + off, sizeof jo);
        off += sizeof jo;
        if (end - off < jo.path_len)
            goto bad;
        _cleanup_free_ char *p = xmalloc(jo.path_len + 1);
        memcpy(p, data + off, jo.path_len);
        p[jo.path_len] = 0;
        off += jo.path_len;
        if (strlen(p) != jo.path_len || !safe_relpath_ok(p) ||
            (jo.kind != OP_REPLACE && jo.kind != OP_DELETE && jo.kind != OP_META))
            goto bad;
        struct tx_op *o = op_add(&j->ops, jo.kind, p);
        o->had_old = jo.had_old;
        o->new_dir = jo.new_dir;
        o->old_dir = jo.old_dir;
        o->nw = jo.nw;
        o->old = jo.old;
    }
    if (off != end)
        goto bad;
    return 0;
bad:
    journal_free(j);
    return tx_err(err, EBADMSG, "journal %s is malformed; it will not be applied", name);
}

/* ---- applying ---- */

static bool exists_at(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Open the parent of path for writing operations: an O_RDONLY directory fd
 * (fsync needs one), reached without symlinks and beneath root. */
static int open_parent(int root, const char *path, const char **base)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        *base = path;
        return openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    *base = slash + 1;
    size_t n = (size_t)(slash - path);
    _cleanup_free_ char *dir = xmalloc(n + 1);
    memcpy(dir, path, n);
    dir[n] = 0;
    return safe_openat(root, dir, O_RDONLY | O_DIRECTORY, 0);
}

/* Does m record an entry (REPLACE and DELETE in journals of this
 * version)? */
static bool recorded(const struct tx_meta *m) { return m && (m->mode & S_IFMT); }

int tx_fix_mode(int dfd, const char *name, const struct tx_meta *m)
{
    struct stat st;
    if (!recorded(m) || !S_ISDIR(m->mode))
        return 0;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode) || (st.st_mode & 07777) == (m->mode & 07777))
        return 0;
    return fchmodat(dfd, name, m->mode & 07777, 0);
}

int tx_move(int ofd, const char *old, int nfd, const char *new, const struct tx_meta *m)
{
    struct stat st;
    bool grant = fstatat(ofd, old, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
                 !(st.st_mode & S_IWUSR);
    if (grant && fchmodat(ofd, old, (st.st_mode & 07777) | S_IWUSR, 0) < 0)
        return -1;
    if (fs_renameat(ofd, old, nfd, new, RENAME_NOREPLACE) < 0) {
        int e = errno;
        if (grant)
            (void)fchmodat(ofd, old, st.st_mode & 07777, 0);
        errno = e;
        return -1;
    }
    if (recorded(m) && S_ISDIR(m->mode))
        return tx_fix_mode(nfd, new, m);
    return grant ? fchmodat(nfd, new, st.st_mode & 07777, 0) : 0;
}

/* I3, first step: owner rwx on every META directory that lacks it, parents
 * first (the reverse of the scan's post-order). */
static int unlock_dirs(int wsfd, const struct tx_ops *ops, txbox_error *err)
{
    for (size_t i = ops->n; i-- > 0;) {
        const struct tx_op *o = &ops->v[i];
        if (o->kind != OP_META)
            continue;
        const char *base = ".";
        _cleanup_close_ int p = *o->path ? open_parent(wsfd, o->path, &base)
                                         : fcntl(wsfd, F_DUPFD_CLOEXEC, 3);
        struct stat st;
        if (p < 0 || fstatat(p, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
            (st.st_mode & S_IRWXU) == S_IRWXU)
            continue; /* missing: apply_meta says so */
        if (fchmodat(p, base, (st.st_mode & 07777) | S_IRWXU, 0) < 0)
            return tx_errno(err, errno, "cannot give the owner access to %s",
                            *o->path ? o->path : ".");
    }
    return 0;
}

/* Before a directory's extended attributes change, its old set is kept as
 * undo/N: an empty directory that has them (undo restores them from it),
 * durable before the change, which cannot be told from the old set. */
static int keep_dir_xattrs(int fd, int undo, size_t i, txbox_error *err)
{
    char un[32], tmp[40];
    jnl_name(un, i, "");
    if (exists_at(undo, un))
        return 0;
    snprintf(tmp, sizeof tmp, "%s.tmp", un);
    if (tree_remove(undo, tmp) < 0 || (fs_mkdirat(undo, tmp, 0700) < 0))
        return tx_errno(err, errno, "cannot keep the old attributes");
    _cleanup_close_ int t = openat(undo, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (t < 0)
        return tx_errno(err, errno, "cannot keep the old attributes");
    if (dir_xattrs_copy(fd, t, err) < 0)
        return tx_err_ctx(err, "cannot keep the old attributes");
    if (fs_fsync(t) < 0 || fs_renameat(undo, tmp, undo, un, RENAME_NOREPLACE) < 0 ||
        fs_fsync(undo) < 0)
        return tx_errno(err, errno, "cannot keep the old attributes");
    return 0;
}

static int apply_meta(int wsfd, int upper, int undo, size_t i, const struct tx_op *o,
                      struct fs_syncset *touched, txbox_error *err)
{
    _cleanup_close_ int fd = safe_openat(wsfd, o->path, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        return tx_errno(err, errno, "cannot open directory %s", *o->path ? o->path : ".");
    if (o->had_old && upper >= 0) {
        /* Extended attributes: the upper's directory has the new set. */
        _cleanup_close_ int ufd = safe_openat(upper, o->path, O_RDONLY | O_DIRECTORY, 0);
        if (ufd >= 0 && (keep_dir_xattrs(fd, undo, i, err) < 0 || dir_xattrs_copy(ufd, fd, err) < 0))
            return tx_err_ctx(err, "directory %s", *o->path ? o->path : ".");
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        return tx_errno(err, errno, "cannot stat %s", o->path);
    if ((st.st_uid != o->nw.uid || st.st_gid != o->nw.gid) &&
        fchown(fd, o->nw.uid, o->nw.gid) < 0)
        return tx_errno(err, errno, "cannot set the owner of %s", o->path);
    if ((st.st_mode & 07777) != o->nw.mode && fchmod(fd, o->nw.mode) < 0)
        return tx_errno(err, errno, "cannot set the mode of %s", o->path);
    struct timespec ts[2] = {{o->nw.atime_s, o->nw.atime_ns}, {o->nw.mtime_s, o->nw.mtime_ns}};
    if (futimens(fd, ts) < 0)
        return tx_errno(err, errno, "cannot set the times of %s", o->path);
    fs_syncset_add(touched, fd);
    return 0;
}

/* S2 -> S3. Idempotent (I3): recovery calls it again after a crash. The
 * directories it touched are added to touched, made durable by finalize()
 * before the journal is closed, in one sync with its own records. */
static int apply_ops(txbox_ws *ws, int txfd, const struct tx_ops *ops, struct fs_syncset *touched,
                     txbox_error *err)
{
    _cleanup_close_ int upper = openat(txfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int undo = openat(txfd, "undo", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (undo < 0)
        return tx_errno(err, errno, "cannot open the undo store");
    int rc = unlock_dirs(ws->fd, ops, err);
    for (size_t i = 0; i < ops->n && rc == 0; i++) {
        const struct tx_op *o = &ops->v[i];
        if (o->kind == OP_META)
            continue;
        char un[32];
        jnl_name(un, i, "");
        const char *base;
        _cleanup_close_ int wp = open_parent(ws->fd, o->path, &base);
        if (wp < 0) {
            rc = tx_errno(err, errno, "cannot open the directory of %s in the workspace", o->path);
            break;
        }
        if (o->kind == OP_DELETE) {
            if (exists_at(wp, base) && !exists_at(undo, un)) {
                if (tx_move(wp, base, undo, un, &o->old) < 0)
                    rc = tx_errno(err, errno, "cannot remove %s", o->path);
            } else if (tx_fix_mode(undo, un, &o->old) < 0) {
                rc = tx_errno(err, errno, "cannot set the mode of the old %s", o->path);
            }
            fs_syncset_add(touched, wp);
            continue;
        }
        if (upper < 0) {
            rc = tx_errno(err, ENOENT, "the upper of the transaction is missing");
            break;
        }
        const char *ubase;
        _cleanup_close_ int up = open_parent(upper, o->path, &ubase);
        if (up < 0 || !exists_at(up, ubase)) {
            /* moved already: done, but for the modes recorded */
            if (tx_fix_mode(wp, base, &o->nw) < 0 || tx_fix_mode(undo, un, &o->old) < 0)
                rc = tx_errno(err, errno, "cannot set the mode of %s", o->path);
            fs_syncset_add(touched, wp);
            continue;
        }
        /* Keep whatever is in the way as the old version — including
         * something that appeared although the scan saw nothing (had_old
         * unset, nothing recorded): never overwrite data that is not ours. */
        if (exists_at(wp, base) && !exists_at(undo, un)) {
            if (tx_move(wp, base, undo, un, o->had_old ? &o->old : NULL) < 0) {
                rc = tx_errno(err, errno, "cannot move the old %s aside", o->path);
                break;
            }
        } else if (tx_fix_mode(undo, un, &o->old) < 0) {
            rc = tx_errno(err, errno, "cannot set the mode of the old %s", o->path);
            break;
        }
        if (tx_move(up, ubase, wp, base, &o->nw) < 0) {
            rc = tx_errno(err, errno, "cannot install %s", o->path);
            break;
        }
        fs_syncset_add(touched, wp);
    }
    /* Metadata of merged directories, deepest first (scan order). */
    for (size_t i = 0; i < ops->n && rc == 0; i++)
        if (ops->v[i].kind == OP_META)
            rc = apply_meta(ws->fd, upper, undo, i, &ops->v[i], touched, err);
    if (rc == 0)
        fs_syncset_add(touched, undo);
    return rc;
}

/* S3 -> S4. Idempotent. The commit record, the cached generation and the
 * audit log's row are written, then made durable in one sync set with the
 * directories the apply touched (sync): a crash before that sync ends
 * leaves journal/ID, so recovery applies and records again (I3: every step
 * idempotent, the row keyed by the id); only then is the journal closed. */
static int finalize(txbox_ws *ws, const struct tx_journal *j, int txfd, struct fs_syncset *sync,
                    txbox_error *err)
{
    char idn[32], genn[32], jn[32];
    jnl_name(idn, j->id, "");
    jnl_name(genn, j->gen, "");
    jnl_name(jn, j->id, "");
    if (symlinkat(idn, ws->cmtd, genn) < 0 && errno != EEXIST)
        return tx_errno(err, errno, "cannot record generation %s", genn);
    fs_syncset_add(sync, ws->cmtd);
    tx_mark("fin:record");
    /* The cache, not ws_read_gen (which counts the record just made): a
     * cache that lags makes every later read count the records past it. */
    if (ws_gen_cache(ws) < j->gen && ws_write_gen(ws, j->gen, err) < 0)
        return -1;
    tx_mark("fin:gen");
    if (store_log_commit(ws, j->id, j->info, &j->ops, txfd, sync, err) < 0)
        return tx_err_ctx(err, "cannot record the commit in the audit log");
    tx_mark("fin:log");
    if (fs_syncset_sync(sync, ws->fd) < 0)
        return tx_errno(err, errno, "cannot make the workspace changes durable");
    tx_mark("fin:sync");
    if (fs_renameat(ws->jnld, jn, txfd, "journal", 0) < 0)
        return tx_errno(err, errno, "cannot close the journal");
    /* Both sides of the rename. Two fsyncs, not a sync set: the second
     * has little left to do (on ext4 the first's journal commit carries
     * the rename), and one syncfs measured no cheaper (finalize 0.54 ms
     * median with two fsyncs, 0.58 with a set; 25M, ten-file change). */
    if (fs_fsync(txfd) < 0 || fs_fsync(ws->jnld) < 0)
        return tx_errno(err, errno, "cannot make the commit record durable");
    return 0;
}

int journal_commit(txbox_ws *ws, uint64_t id, int txfd, uint64_t base_gen, struct tx_ops *ops,
                   const char *info, struct fs_syncset *pre, uint64_t *gen_out, txbox_error *err)
{
    uint64_t gen;
    if (ws_read_gen(ws, &gen, err) < 0)
        return -1;
    struct tx_journal j = {.id = id, .gen = gen + 1, .base_gen = base_gen, .ops = *ops,
                           .info = (char *)info};
    if (fs_mkdirat(txfd, "undo", 0700) < 0 && errno != EEXIST)
        return tx_errno(err, errno, "cannot create the undo store");
    /* History: the audit log must be able to take the row finalize() will
     * write; a damaged one refuses the commit here, before the commit
     * point, with the workspace untouched. */
    tx_mark("undo-dir");
    if (store_check(ws, ops->n, err) < 0)
        return -1;
    tx_mark("store_check");
    if (write_journal(ws, &j, pre, err) < 0)
        return -1;
    tx_mark("journal");
    /* ── commit point ── from here on the transaction will be applied, by
     * this process or by recovery. */
    _cleanup_syncset_ struct fs_syncset sync = {0};
    if (apply_ops(ws, txfd, ops, &sync, err) < 0)
        return tx_err_ctx(err, "commit interrupted (run 'txbox recover')");
    tx_mark("apply");
    if (finalize(ws, &j, txfd, &sync, err) < 0)
        return tx_err_ctx(err, "commit interrupted (run 'txbox recover')");
    tx_mark("finalize");
    *gen_out = j.gen;
    return 0;
}

int journal_recover_one(txbox_ws *ws, uint64_t id, txbox_error *err)
{
    char jn[32];
    jnl_name(jn, id, "");
    struct tx_journal j;
    if (journal_load(ws->jnld, jn, &j, err) < 0) {
        /* I2: never apply it; move it aside so that it is kept for a human
         * and does not block every later command. */
        char bad[40];
        snprintf(bad, sizeof bad, "%s.corrupt", jn);
        (void)renameat(ws->jnld, jn, ws->jnld, bad);
        /* The transaction's changes stay for that human too, but not the
         * overlay's work directory: scratch the kernel made, holding a
         * mode-000 directory that an unprivileged owner's rm -rf cannot
         * remove. */
        _cleanup_close_ int tfd = openat(ws->txd, jn, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tfd >= 0)
            (void)tree_remove(tfd, "work");
        return -1;
    }
    if (j.id != id) {
        journal_free(&j);
        return tx_err(err, EBADMSG, "journal %s names transaction %llu", jn,
                      (unsigned long long)j.id);
    }
    _cleanup_close_ int txfd = openat(ws->txd, jn, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc;
    _cleanup_syncset_ struct fs_syncset sync = {0};
    if (txfd < 0)
        rc = tx_errno(err, errno, "transaction %s has a journal but no directory", jn);
    else if ((rc = apply_ops(ws, txfd, &j.ops, &sync, err)) == 0)
        rc = finalize(ws, &j, txfd, &sync, err);
    journal_free(&j);
    return rc;
}
