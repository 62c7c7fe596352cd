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
 *   tx/ID/intent        a copy of journal/ID while that exists (I8)
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
 *      │ tx/ID/journal. With JOURNAL_LEAVE_OPEN journal_commit returns
 *      │ after the audit row, and recovery does the rest, as after a
 *      │ crash there (a session's steward does, right after the answer)
 *   S4 DONE      recorded; active/ID removed
 *
 *   From S2 or S3, when the apply or finalize fails (the filesystem refuses
 *   a rename, space runs out) or the journal is found damaged:
 *      │ journal_rollback(): rollback_ops() from the pre-images, the commit
 *      │ record withdrawn, made durable; journal/ID removed
 *   S1 PREPARED  again (pre-state); the caller or recovery discards it
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
 *       rolls the transaction back (I8), or, when that fails too, stops,
 *       and the next recovery rolls forward from the journal (or back).
 *   I7. journal/ID is closed only after everything the apply and finalize
 *       wrote before it is durable (one sync set): a crash before that
 *       leaves journal/ID, and recovery applies and records again (I3).
 *       Nothing but recovery reads the workspace's state meanwhile: every
 *       txbox command recovers first, under the workspace lock.
 *   I8. Past the commit point a transaction ends in the post-state or, when
 *       the apply cannot finish, in the pre-state: the journal and its copy
 *       tx/ID/intent (same bytes, durable before the commit point) name
 *       every pre-image undo/N, and rollback_ops() moves them back, each
 *       step idempotent, the journal removed last. What the filesystem is
 *       known to refuse (attributes, another device, too little space) is
 *       refused before the commit point (run.c), so a rollback is the
 *       exception; one that fails too leaves journal/ID and an error that
 *       names what a person must fix.
 *   I9. A transaction that recovery can neither finish nor roll back is
 *       stuck (journal_hold): journal/ID stays, and with it every path its
 *       operations name is held: a commit that writes one of them is
 *       refused before its commit point (journal_held; a journal that
 *       cannot be read at all holds every path), one on other paths goes
 *       on. It holds no generation meanwhile (a record of its own is
 *       withdrawn), so those commits number in order; when it is finished
 *       at last, it takes the next free generation (settle_gen).
 */
#include <dirent.h>
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
#define JNL_COPY "intent"

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

static void prep_freep(struct store_prep **p) { store_prep_free(*p); }

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

/* The journal's copy, tx/ID/intent (I2): the same bytes, durable before the
 * commit point with the journal, so that a journal damaged after it (a disk
 * error, a person) still names the operations and their pre-images: recovery
 * then rolls the transaction back from undo/N. */
static int write_intent(int txfd, const dbuf *b, struct fs_syncset *pre)
{
    _cleanup_close_ int fd = openat(txfd, JNL_COPY, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || fs_write(fd, b->p, b->len) < 0)
        return -1;
    if (!pre)
        return fs_fsync(fd);
    fs_syncset_add(pre, fd);
    fs_syncset_add(pre, txfd);
    return 0;
}

static int write_journal(txbox_ws *ws, int txfd, const struct tx_journal *j, struct fs_syncset *pre,
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
    if (write_intent(txfd, &b, pre) < 0 || (!pre && fs_fsync(txfd) < 0))
        tx_errno(err, errno, "cannot write the journal's copy");
    else if (fd < 0)
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
    if (rc < 0 && exists_at(ws->jnld, fin) == 0)
        (void)unlinkat(txfd, JNL_COPY, 0);
    dbuf_free(&b);
    return rc;
}

void journal_free(struct tx_journal *j)
{
    ops_free(&j->ops);
    free(j->info);
    j->info = NULL;
}

int journal_load_gen(txbox_ws *ws, uint64_t gen, struct tx_journal *j, char idn[static 32], txbox_error *err)
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
    if (tfd < 0)
        return 1;
    /* Closed, its record is tx/ID/journal. A session's commit is answered
     * and the workspace's lock let go with its journal still open (the
     * steward closes it: JOURNAL_LEAVE_OPEN), and its record is then
     * journal/ID: read there, then here again (the close moves the one to
     * the other in one rename, maybe between the two reads). */
    txbox_error le = {0};
    if (journal_load(tfd, "journal", j, &le) == 0)
        return 0;
    if (journal_load(ws->jnld, idn, j, &le) == 0) {
        if (j->gen == gen)
            return 0;
        journal_free(j);
    }
    return journal_load(tfd, "journal", j, &le) == 0 ? 0 : 1;
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
    if (len < sizeof h + 12 || memcmp(data, JNL_MAGIC, 8) || memcmp(data + len - 8, JNL_END, 8))
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

/* The parent of path for writing operations: an O_RDONLY directory fd
 * (fsync needs one), reached without symlinks and beneath root. */
static int open_parent(int root, const char *path, const char **base)
{
    return safe_open_parent_rd(root, path, base);
}

/* exists_at, with the error filled when it cannot be told (which the apply
 * and the rollback never take for "there" or "not there": each decides
 * what to move by it). */
static int has(int dfd, const char *name, const char *what, const char *path, txbox_error *err)
{
    int e = exists_at(dfd, name);
    if (e < 0)
        tx_errno(err, errno, "cannot tell whether the %s %s exists", what, path);
    return e;
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
    bool grant =
        fstatat(ofd, old, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) && !(st.st_mode & S_IWUSR);
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
        _cleanup_close_ int p =
            *o->path ? open_parent(wsfd, o->path, &base) : fcntl(wsfd, F_DUPFD_CLOEXEC, 3);
        struct stat st;
        if (p < 0 || fstatat(p, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
            (st.st_mode & S_IRWXU) == S_IRWXU)
            continue; /* missing: apply_meta says so */
        if (fchmodat(p, base, (st.st_mode & 07777) | S_IRWXU, 0) < 0)
            return tx_errno(err, errno, "cannot give the owner access to %s", *o->path ? o->path : ".");
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
    int kept = has(undo, un, "kept attributes of operation", un, err);
    if (kept)
        return kept > 0 ? 0 : -1;
    snprintf(tmp, sizeof tmp, "%s.tmp", un);
    if (tree_remove(undo, tmp) < 0 || (fs_mkdirat(undo, tmp, 0700) < 0))
        return tx_errno(err, errno, "cannot keep the old attributes");
    _cleanup_close_ int t = openat(undo, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (t < 0)
        return tx_errno(err, errno, "cannot keep the old attributes");
    if (dir_xattrs_copy(fd, t, err) < 0)
        return tx_err_ctx(err, "cannot keep the old attributes");
    if (fs_fsync(t) < 0 || fs_renameat(undo, tmp, undo, un, RENAME_NOREPLACE) < 0 || fs_fsync(undo) < 0)
        return tx_errno(err, errno, "cannot keep the old attributes");
    return 0;
}

/* A directory's owner, mode and times (absolute values): META's new ones,
 * or its old ones in a rollback. */
static int set_dir_meta(int fd, const struct tx_meta *m, const char *path, txbox_error *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return tx_errno(err, errno, "cannot stat %s", path);
    /* A directory of another user that we may write into (a shared 1777
     * directory as the workspace): the command could change none of its
     * owner, mode or times (what differs is the view's: its upper copy is
     * ours), and neither can we; the renames in it set its times as a
     * plain run's writes would. EPERM there is no failure. */
    bool foreign = st.st_uid != geteuid();
    if ((st.st_uid != m->uid || st.st_gid != m->gid) && fchown(fd, m->uid, m->gid) < 0 &&
        !(foreign && errno == EPERM))
        return tx_errno(err, errno, "cannot set the owner of %s", *path ? path : ".");
    if ((st.st_mode & 07777) != (m->mode & 07777) && fchmod(fd, m->mode & 07777) < 0 &&
        !(foreign && errno == EPERM))
        return tx_errno(err, errno, "cannot set the mode of %s", *path ? path : ".");
    struct timespec ts[2] = {{m->atime_s, m->atime_ns}, {m->mtime_s, m->mtime_ns}};
    if (futimens(fd, ts) < 0 && !(foreign && errno == EPERM))
        return tx_errno(err, errno, "cannot set the times of %s", *path ? path : ".");
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
    if (set_dir_meta(fd, &o->nw, o->path, err) < 0)
        return -1;
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
        int there = has(wp, base, "workspace entry", o->path, err);
        int kept = there < 0 ? -1 : has(undo, un, "pre-image of", o->path, err);
        if (kept < 0) {
            rc = -1;
            break;
        }
        if (o->kind == OP_DELETE) {
            if (there && !kept) {
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
        /* The new entry's directory in the upper stays there until the
         * journal is closed (no operation lies inside another's path, I4):
         * only its entry gone means it was moved already. */
        const char *ubase;
        _cleanup_close_ int up = open_parent(upper, o->path, &ubase);
        if (up < 0) {
            rc = tx_errno(err, errno, "cannot open the directory of %s in the upper", o->path);
            break;
        }
        int fresh = has(up, ubase, "new entry", o->path, err);
        if (fresh < 0) {
            rc = -1;
            break;
        }
        if (!fresh) {
            /* moved already: done, but for the modes recorded */
            if (tx_fix_mode(wp, base, &o->nw) < 0 || tx_fix_mode(undo, un, &o->old) < 0)
                rc = tx_errno(err, errno, "cannot set the mode of %s", o->path);
            fs_syncset_add(touched, wp);
            continue;
        }
        /* Keep whatever is in the way as the old version — including
         * something that appeared although the scan saw nothing (had_old
         * unset, nothing recorded): never overwrite data that is not ours. */
        if (there && !kept) {
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

/* S2 -> S1, the other way out of the commit point: what the apply did is
 * undone from the pre-images, each step idempotent like the apply's (I8):
 *   REPLACE N: if upper/P is gone (installed) and workspace P exists: rename
 *              P -> upper/P. Then if undo/N exists and P does not: rename
 *              undo/N -> P.
 *   DELETE N:  if undo/N exists and P does not: rename undo/N -> P.
 *   META N:    (after the renames, deepest first) the old extended
 *              attributes from undo/N when kept there; the old owner, mode
 *              and times.
 * The upper is left as the scan made it, so that the transaction is back in
 * S1 (the caller discards it, or an undo puts its staged pre-images back). A
 * mix of applied and rolled-back operations is still one the apply can
 * finish: recovery may go either way from any point of either walk. */
static int rollback_ops(txbox_ws *ws, int txfd, const struct tx_ops *ops, struct fs_syncset *touched,
                        txbox_error *err)
{
    _cleanup_close_ int upper = openat(txfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int undo = openat(txfd, "undo", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (undo < 0 && errno != ENOENT)
        return tx_errno(err, errno, "cannot open the undo store");
    if (unlock_dirs(ws->fd, ops, err) < 0)
        return -1;
    for (size_t i = 0; i < ops->n; i++) {
        const struct tx_op *o = &ops->v[i];
        if (o->kind == OP_META)
            continue;
        char un[32];
        jnl_name(un, i, "");
        const char *base;
        _cleanup_close_ int wp = open_parent(ws->fd, o->path, &base);
        if (wp < 0)
            return tx_errno(err, errno, "cannot open the directory of %s in the workspace", o->path);
        int there = o->kind == OP_REPLACE ? has(wp, base, "workspace entry", o->path, err) : 0;
        if (there < 0)
            return -1;
        if (there) { /* the new entry, if it was installed (its upper name is gone) */
            const char *ubase;
            _cleanup_close_ int up = upper >= 0 ? open_parent(upper, o->path, &ubase) : -1;
            if (up < 0)
                return tx_errno(err, upper < 0 ? ENOENT : errno,
                                "cannot open the directory of %s in the upper", o->path);
            int fresh = has(up, ubase, "new entry", o->path, err);
            if (fresh < 0)
                return -1;
            if (!fresh && tx_move(wp, base, up, ubase, NULL) < 0)
                return tx_errno(err, errno, "cannot take the new %s back out", o->path);
        }
        int kept = undo >= 0 ? has(undo, un, "pre-image of", o->path, err) : 0;
        there = kept > 0 ? has(wp, base, "workspace entry", o->path, err) : 0;
        if (kept < 0 || there < 0)
            return -1;
        if (kept && !there && tx_move(undo, un, wp, base, &o->old) < 0)
            return tx_errno(err, errno, "cannot put the old %s back", o->path);
        fs_syncset_add(touched, wp);
    }
    for (size_t i = 0; i < ops->n; i++) {
        const struct tx_op *o = &ops->v[i];
        if (o->kind != OP_META)
            continue;
        const char *p = *o->path ? o->path : ".";
        _cleanup_close_ int fd = safe_openat(ws->fd, o->path, O_RDONLY | O_DIRECTORY, 0);
        if (fd < 0)
            return tx_errno(err, errno, "cannot open directory %s", p);
        char un[32];
        jnl_name(un, i, "");
        _cleanup_close_ int kept =
            undo >= 0 && o->had_old ? openat(undo, un, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (kept >= 0 && dir_xattrs_copy(kept, fd, err) < 0)
            return tx_err_ctx(err, "directory %s", p);
        if (set_dir_meta(fd, &o->old, p, err) < 0)
            return tx_err_ctx(err, "rollback");
        fs_syncset_add(touched, fd);
    }
    if (upper >= 0)
        fs_syncset_add(touched, upper);
    return 0;
}

/* Rolls back a transaction past its commit point (rollback_ops), then
 * withdraws what finalize may have recorded (commits/GEN, the cached
 * generation, the audit log's row, best effort) and, once all of that is
 * durable, removes the journal: from then on the transaction is one that
 * never committed. */
static int journal_rollback(txbox_ws *ws, int txfd, const struct tx_journal *j, txbox_error *err)
{
    char idn[32], genn[32], l[32];
    jnl_name(idn, j->id, "");
    jnl_name(genn, j->gen, "");
    /* finalize closed the journal but could not make that durable: open
     * again, so that a crash meanwhile leaves it to recovery */
    int opened = exists_at(ws->jnld, idn), closed = opened ? 0 : exists_at(txfd, "journal");
    if (opened < 0 || closed < 0)
        return tx_errno(err, errno, "cannot tell where the journal of transaction %s is", idn);
    if (closed && (fs_renameat(txfd, "journal", ws->jnld, idn, RENAME_NOREPLACE) < 0 ||
                   fs_fsync(ws->jnld) < 0 || fs_fsync(txfd) < 0))
        return tx_errno(err, errno, "cannot reopen the journal");
    _cleanup_syncset_ struct fs_syncset sync = {0};
    if (rollback_ops(ws, txfd, &j->ops, &sync, err) < 0)
        return -1;
    ssize_t n = readlinkat(ws->cmtd, genn, l, sizeof l - 1);
    bool mine = n < 0; /* no record: none of another transaction either */
    if (n >= 0) {
        l[n] = 0;
        mine = !strcmp(l, idn);
        if (mine && fs_unlinkat(ws->cmtd, genn, 0) < 0)
            return tx_errno(err, errno, "cannot withdraw commit record %s", genn);
    }
    fs_syncset_add(&sync, ws->cmtd);
    /* the cache may lag, never lead; a generation another transaction took
     * while this one was stuck (journal_hold) stays counted */
    if (mine && ws_gen_cache(ws) >= j->gen && ws_write_gen(ws, j->gen - 1, err) < 0)
        return -1;
    if (fs_syncset_sync(&sync, ws->fd) < 0)
        return tx_errno(err, errno, "cannot make the rollback durable");
    if (fs_unlinkat(ws->jnld, idn, 0) < 0 && errno != ENOENT)
        return tx_errno(err, errno, "cannot remove the journal");
    if (fs_fsync(ws->jnld) < 0)
        return tx_errno(err, errno, "cannot make the rollback durable");
    (void)unlinkat(txfd, JNL_COPY, 0);
    (void)tree_remove(txfd, "undo");
    /* a row finalize may have written says committed: replaced (keyed by
     * the id); best effort, like every row of a transaction that changed
     * nothing */
    txbox_error le = {0};
    if (store_log(ws, j->id, "rolled_back", j->info, NULL, txfd, &le) < 0) {
        /* the log is damaged or full: the workspace is what matters */
    }
    return 0;
}

enum {
    FIN_LEAVE_OPEN = 1, /* JOURNAL_LEAVE_OPEN: the record and the row, then back to the caller */
    FIN_HAS_ROW = 2,    /* recovery: the row is in the log already (its owner's), made durable as it is */
};

/* S3 -> S4. Idempotent. The commit record, the cached generation and the
 * audit log's row are written, then made durable in one sync set with the
 * directories the apply touched (sync): a crash before that sync ends
 * leaves journal/ID, so recovery applies and records again (I3: every step
 * idempotent, the row keyed by the id); only then is the journal closed. */
static int finalize(txbox_ws *ws, const struct tx_journal *j, int txfd, struct fs_syncset *sync,
                    struct store_prep *prep, unsigned how, txbox_error *err)
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
    if (how & FIN_HAS_ROW)
        store_sync_rows(ws, sync); /* the row where its owner put it: the pending file or the log's WAL */
    else if (store_log_commit(ws, j->id, j->info, &j->ops, txfd, sync, prep, err) < 0)
        return tx_err_ctx(err, "cannot record the commit in the audit log");
    tx_mark("fin:log");
    /* Left open (JOURNAL_LEAVE_OPEN): the state a crash here leaves, which
     * recovery finishes (the sync, the close); the caller's owner lock
     * goes, so the next recovery, whoever runs it, does. */
    if (how & FIN_LEAVE_OPEN)
        return 1;
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
    (void)unlinkat(txfd, JNL_COPY, 0); /* tx/ID/journal is the record now */
    return 0;
}

int journal_commit(txbox_ws *ws, uint64_t id, int txfd, uint64_t base_gen, struct tx_ops *ops,
                   const char *info, struct fs_syncset *pre, unsigned flags, uint64_t *gen_out,
                   txbox_error *err)
{
    uint64_t gen;
    if (ws_read_gen(ws, &gen, err) < 0)
        return -1;
    struct tx_journal j = {.id = id, .gen = gen + 1, .base_gen = base_gen, .ops = *ops, .info = (char *)info};
    if (fs_mkdirat(txfd, "undo", 0700) < 0 && errno != EEXIST)
        return tx_errno(err, errno, "cannot create the undo store");
    /* History: the audit log must be able to take the row finalize() will
     * write; a damaged one refuses the commit here, before the commit
     * point, with the workspace untouched. */
    tx_mark("undo-dir");
    if (store_check(ws, ops->n, err) < 0)
        return -1;
    tx_mark("store_check");
    /* Paths a stuck transaction holds (journal_hold): its callers check
     * first and report a conflict; this is the protocol's own guard. */
    _cleanup_free_ char *held = NULL;
    uint64_t by = 0;
    int h = journal_held(ws, ops, &held, &by, err);
    if (h < 0)
        return -1;
    if (h > 0) {
        tx_err(err, EBUSY, "%s is held by transaction %llu, which could not be finished", held,
               (unsigned long long)by);
        tx_remedy(err, TXBOX_REMEDY_RECOVER, NULL);
        return tx_err_more(err, "; nothing was changed");
    }
    /* The audit log's rows hashed meanwhile, beside the journal's sync
     * (which, with pre, carries the new data's too). */
    __attribute__((cleanup(prep_freep))) struct store_prep *prep = store_prep_begin(ws, txfd, &j.ops);
    if (write_journal(ws, txfd, &j, pre, err) < 0) {
        /* Renamed into place, but not known to be durable (I6): nothing is
         * applied yet, so it is withdrawn now rather than left for the
         * next recovery to apply after this run said it failed. */
        char fin[32];
        jnl_name(fin, id, "");
        txbox_error re = {0};
        if (exists_at(ws->jnld, fin) != 0 && journal_rollback(ws, txfd, &j, &re) < 0) {
            tx_err_ctx(err, "and its journal could not be withdrawn (%s)", re.msg);
            return tx_remedy(err, TXBOX_REMEDY_RECOVER, NULL);
        }
        return -1;
    }
    tx_mark("journal");
    /* ── commit point ── from here on the transaction will be applied, by
     * this process or by recovery. */
    _cleanup_syncset_ struct fs_syncset sync = {0};
    store_prep_wait(prep); /* before the apply moves what it reads */
    tx_mark("hash");
    int rc = apply_ops(ws, txfd, ops, &sync, err);
    tx_mark("apply");
    if (rc == 0)
        rc = finalize(ws, &j, txfd, &sync, prep, flags & JOURNAL_LEAVE_OPEN ? FIN_LEAVE_OPEN : 0, err);
    if (rc < 0) {
        /* Whatever failed after the commit point (the filesystem refused a
         * rename, ran out of space...) fails the same way for recovery:
         * rolled back now, from the pre-images (I8). */
        txbox_error re = {0};
        /* its fds go first: the audit log's pending file among them holds
         * the lock the rollback's row takes */
        fs_syncset_free(&sync);
        struct stat sst;
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        if (fstat(ws->sfd, &sst) == 0 && sst.st_nlink == 0)
            return tx_err(err, ENOENT,
                          "the state directory %s was removed while transaction %llu was being "
                          "applied: the changes applied so far stay and cannot be rolled back "
                          "(their pre-images and the journal were in it); the workspace holds part "
                          "of the transaction (%s)",
                          TXBOX_STATE_DIR, (unsigned long long)id, why);
        if (journal_rollback(ws, txfd, &j, &re) == 0)
            return tx_err_ctx(err, "the commit was rolled back; nothing was changed");
        tx_err_ctx(err, "commit interrupted, and its rollback too (%s)", re.msg);
        return tx_remedy(err, TXBOX_REMEDY_RECOVER, NULL);
    }
    tx_mark("finalize");
    *gen_out = j.gen;
    return rc;
}

/* A journal left stuck (journal_hold) while later transactions committed on
 * other paths: its generation was taken meanwhile. It takes the next free
 * one, written into its journal (and the journal's copy) before finalize()
 * records anything, so that a crash meanwhile finds one number or the
 * other, each consistent; a record of its own at its generation (finalize
 * began) keeps it. */
static int settle_gen(txbox_ws *ws, int txfd, struct tx_journal *j, txbox_error *err)
{
    char idn[32], genn[32], l[32];
    jnl_name(idn, j->id, "");
    jnl_name(genn, j->gen, "");
    ssize_t n = readlinkat(ws->cmtd, genn, l, sizeof l - 1);
    if (n >= 0) {
        l[n] = 0;
        if (!strcmp(l, idn))
            return 0;
    } else if (errno != ENOENT) {
        return tx_errno(err, errno, "cannot read commit record %s", genn);
    }
    uint64_t cur;
    if (ws_read_gen(ws, &cur, err) < 0)
        return -1;
    if (n < 0 && cur < j->gen)
        return 0; /* its generation is still free: the usual case */
    j->gen = cur + 1;
    return write_journal(ws, txfd, j, NULL, err);
}

int journal_hold(txbox_ws *ws, uint64_t id, txbox_error *err)
{
    /* Nothing committed since its own attempt (every commit recovers
     * first): a record of its, if finalize() made one, is the latest. */
    uint64_t cur;
    if (ws_read_gen(ws, &cur, err) < 0)
        return -1;
    char idn[32], gn[32], l[32];
    jnl_name(idn, id, "");
    jnl_name(gn, cur, "");
    ssize_t n = cur ? readlinkat(ws->cmtd, gn, l, sizeof l - 1) : -1;
    if (n < 0 || (l[n] = 0, strcmp(l, idn)))
        return 0;
    if (fs_unlinkat(ws->cmtd, gn, 0) < 0 || fs_fsync(ws->cmtd) < 0)
        return tx_errno(err, errno, "cannot withdraw commit record %s", gn);
    if (ws_gen_cache(ws) >= cur && ws_write_gen(ws, cur - 1, err) < 0)
        return -1;
    return 0;
}

int journal_held(txbox_ws *ws, const struct tx_ops *ops, char **path, uint64_t *by, txbox_error *err)
{
    _cleanup_dir_ DIR *d = opendir_at(ws->jnld, ".");
    if (!d)
        return tx_errno(err, errno, "cannot list the journals");
    struct dirent *de;
    while ((de = readdir(d))) {
        uint64_t id;
        if (!parse_u64(de->d_name, &id))
            continue;
        struct tx_journal j;
        txbox_error le = {0};
        if (journal_load(ws->jnld, de->d_name, &j, &le) < 0) {
            _cleanup_close_ int txfd =
                openat(ws->txd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (txfd < 0 || journal_load(txfd, JNL_COPY, &j, &le) < 0) {
                /* which paths it changed is unknown: all of them */
                *path = xstrdup("(every path: its journal cannot be read)");
                *by = id;
                return 1;
            }
        }
        const char *which = NULL;
        bool hit = ops_overlap(ops, &j.ops, &which);
        if (hit)
            *path = xstrdup(*which ? which : ".");
        journal_free(&j);
        if (hit) {
            *by = id;
            return 1;
        }
    }
    return 0;
}

int journal_recover_one(txbox_ws *ws, uint64_t id, txbox_error *err)
{
    char jn[32];
    jnl_name(jn, id, "");
    _cleanup_close_ int txfd = openat(ws->txd, jn, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct tx_journal j;
    txbox_error le = {0};
    bool damaged = journal_load(ws->jnld, jn, &j, &le) < 0;
    if (damaged) {
        /* I2: never applied. Its copy (I8) names the operations, and the
         * pre-images take the workspace back to before. */
        txbox_error ce = {0};
        if (txfd < 0 || journal_load(txfd, JNL_COPY, &j, &ce) < 0 || j.id != id) {
            journal_free(&j);
            /* Kept where it is: the workspace may be partly changed, and a
             * later commit on top would mix it for good. */
            tx_err(err, EBADMSG,
                   "%s, and its copy .txbox/tx/%s/%s cannot be read either: the workspace "
                   "may be partly changed. A person must restore it: the old entries are "
                   "in .txbox/tx/%s/undo, the new ones not yet moved in .txbox/tx/%s/upper; "
                   "then remove .txbox/journal/%s and recover",
                   le.msg, jn, JNL_COPY, jn, jn, jn);
            tx_remedy(err, TXBOX_REMEDY_RECOVER, NULL);
            return tx_err_more(err, ". Until then no transaction commits: which paths it holds is unknown");
        }
    } else if (j.id != id) {
        journal_free(&j);
        return tx_err(err, EBADMSG, "journal %s names transaction %llu", jn, (unsigned long long)j.id);
    }
    int rc;
    _cleanup_syncset_ struct fs_syncset sync = {0};
    txbox_error fe = {0};
    /* Left open on purpose (JOURNAL_LEAVE_OPEN) and answered: its run
     * wrote the outcome, after the row. The row it wrote, if the log has
     * it, stays (timed, not "recovered"); one a crash lost is written. */
    bool left_open = txfd >= 0 && exists_at(txfd, "outcome") > 0;
    if (txfd < 0) {
        rc = tx_errno(err, errno, "transaction %s has a journal but no directory", jn);
    } else if (!damaged && settle_gen(ws, txfd, &j, &fe) == 0 &&
               apply_ops(ws, txfd, &j.ops, &sync, &fe) == 0 &&
               finalize(ws, &j, txfd, &sync, NULL,
                        left_open && store_has_commit_row(ws, id) ? FIN_HAS_ROW : 0, &fe) == 0) {
        rc = 0;
    } else {
        /* Cannot be finished (the damaged journal, or the same refusal
         * that stopped its commit): back to before. */
        txbox_error re = {0};
        fs_syncset_free(&sync); /* as in journal_commit */
        if (journal_rollback(ws, txfd, &j, &re) == 0) {
            rc = 1;
        } else {
            rc = tx_err(err, re.code,
                        "it can neither be finished (%s) nor rolled back (%s). Fix what the "
                        "errors name (a file attribute: lsattr/chattr; a full disk: free space), "
                        "then recover",
                        damaged ? le.msg : fe.msg, re.msg);
            tx_remedy(err, TXBOX_REMEDY_RECOVER, NULL);
            tx_err_more(err, "; until then it holds its paths, and transactions on others go on");
        }
    }
    journal_free(&j);
    return rc;
}
