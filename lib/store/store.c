/* The audit log: one SQLite database, .txbox/log.db.
 *
 * Durability: WAL mode. A committed transaction's row is made durable
 * by the commit protocol, in finalize's sync set with the workspace's
 * changes (store_log_commit), one sync for all: as a line appended to
 * .txbox/log.pending, whose file joins the set, when store_check left the
 * log closed (the usual case; "pending rows" below), or in the log itself,
 * written with synchronous=NORMAL and its WAL file in the set. The row of
 * any other outcome (read_only, blocked, rolled_back, conflict,
 * rejected...: nothing changed in the workspace) is written without an
 * fsync: a power loss may lose the last such rows, never a committed row
 * (the WAL is sequential: the next FULL commit or checkpoint fsyncs every
 * frame before it) and never the log's integrity. Such a row, written by a
 * process that has no connection open, waits in log.pending too until the
 * next open of the log. The WAL is checkpointed with TRUNCATE every 64
 * frames (ckpt_hook), and an existing WAL is opened without a directory
 * fsync (real_open).
 *
 * A committed transaction's row is written by store_log_commit() inside
 * the commit protocol (journal.c, finalize(): after the apply, durable with
 * it, before the journal is closed), so that a crash never leaves a
 * committed transaction unlogged (recovery re-applies and re-logs: the
 * row is keyed by the transaction id, INSERT OR REPLACE, and the move of
 * pending rows keeps the last line of an id) nor a logged commit unapplied
 * once recovered (the row is written after the apply; until the sync, the
 * journal is still there and recovery runs first). store_check() runs
 * before the commit point: a damaged log, or one from a newer txbox,
 * refuses the commit while the workspace is untouched (from the file's
 * header when the row will wait in log.pending; by opening it otherwise).
 * Retention's count after a commit comes from .txbox/log.retained, a
 * cache of it ("retention's count, cached" below).
 *
 * Concurrency: every connection has a busy timeout (TXBOX_DB_BUSY_MS,
 * default 10 s), so readers and writers wait a bounded time, then fail
 * with a clear error; WAL lets readers run alongside a writer.
 *
 * Schema: versioned by PRAGMA user_version, migrated step by step (each
 * step one SQLite transaction); a database from a newer txbox is refused.
 *   v1  tx: one row per transaction; change: its write set, one row per
 *       path (kind, type, size, mode, SHA-256 before and after)
 *   v2  setting (retention bounds), gc_run (what each gc freed), tx.pruned
 *   v3  tx_retained: a partial index of the unpruned commits' retained
 *       bytes, so that retention's count after each commit does not scan
 *       the whole history
 *
 * Content hashes: SHA-256 (nettle; SHA-NI where the CPU has it, about
 * 1.4 GB/s here): cryptographic, so an agent cannot craft a file that the
 * log shows as unchanged, and the same digests as sha256sum. A commit
 * hashes its write set in a thread while its journal and new data are made
 * durable (store_prep: the old entries from the workspace, the new ones
 * from the upper, before the apply moves them); recovery, which has no
 * such thread, hashes the same entries after the apply (tx/ID/undo/N, the
 * workspace), inside finalize().
 *
 * VFS: the database is opened through "txbox", the default VFS but for
 * real_open(); with TXBOX_FAULT set, through "txbox-fault", a shim whose
 * writes and syncs are also fault points of fsops.c, so the crash matrix
 * covers the log's own I/O. */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <nettle/sha2.h>
#include <sqlite3.h>

#include "fsops.h"
#include "result.h"
#include "safepath.h"
#include "store.h"

#define DB_NAME "log.db"
#define PENDING_NAME "log.pending" /* rows waiting for the log: "pending rows" below */
#define PENDING_MAX (1u << 20)
#define PENDING_SOFT (256u << 10)    /* past it, a commit's row goes to the log itself */
#define PENDING_OPS_MAX 1000         /* a commit of more operations: its row to the log itself */
#define PENDING_LINE_MAX (64u << 10) /* a commit's larger row: in tx/ID/log.row, pointed at */
#define ROW_FILE_MAX (256u << 20)    /* what the move reads of one */
#define RETAINED_NAME "log.retained" /* retention's count, cached (history_autogc) */
#define TAIL_BYTES 4096              /* stdout/stderr kept in the log, per stream */
#define ROWS_CAP 10000               /* write-set rows per transaction */
#define INFO_CAP (4u << 20)          /* info JSON stored per transaction */
#define DEFAULT_KEEP 100
#define DEFAULT_MAX_BYTES (1LL << 30)

/* ---- hashing ---- */

int hash_file_at(int dirfd, const char *name, char hex[65], uint64_t *size)
{
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        errno = EINVAL;
        return -1;
    }
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    /* on the stack: the write set may be hashed beside the commit, in a
     * thread (store_prep); a thread-local buffer would be in every thread's
     * static TLS, the proxy's small-stacked threads' too */
    uint8_t buf[1 << 17];
    uint64_t total = 0;
    int rc = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -1;
            break;
        }
        if (r == 0)
            break;
        sha256_update(&ctx, (size_t)r, buf);
        total += (uint64_t)r;
    }
    if (rc == 0) {
        uint8_t md[SHA256_DIGEST_SIZE];
        sha256_digest(&ctx, sizeof md, md);
        for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
            snprintf(hex + 2 * i, 3, "%02x", md[i]);
        *size = total;
    }
    return rc;
}

void hash_bytes_hex(const void *p, size_t n, char hex[65])
{
    struct sha256_ctx ctx;
    uint8_t md[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, n, p);
    sha256_digest(&ctx, sizeof md, md);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* ---- a fault-injecting VFS shim (only with TXBOX_FAULT, in test builds) ---- */

static sqlite3_vfs *real_vfs;

#ifdef TXBOX_TEST_HOOKS
struct shim_file {
    sqlite3_file base;
    sqlite3_file *real; /* follows this struct in the same allocation */
};

static sqlite3_vfs shim_vfs;

/* A fault point of fsops.c without a real operation: fs_fsync(-1) and
 * fs_write(-1, "", 0) only count (and maybe fail or kill); the real
 * operation is then done by SQLite's own VFS. */
static bool fault_sync(void)
{
    errno = 0;
    return fs_fsync(-1) < 0 && errno != EBADF;
}

static bool fault_write(void) { return fs_write(-1, "", 0) < 0; }

#define REAL(f) (((struct shim_file *)(f))->real)
static int sh_close(sqlite3_file *f)
{
    int rc = REAL(f)->pMethods ? REAL(f)->pMethods->xClose(REAL(f)) : SQLITE_OK;
    return rc;
}
static int sh_read(sqlite3_file *f, void *p, int n, sqlite3_int64 o)
{
    return REAL(f)->pMethods->xRead(REAL(f), p, n, o);
}
static int sh_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 o)
{
    if (fault_write())
        return SQLITE_IOERR_WRITE;
    return REAL(f)->pMethods->xWrite(REAL(f), p, n, o);
}
static int sh_truncate(sqlite3_file *f, sqlite3_int64 n) { return REAL(f)->pMethods->xTruncate(REAL(f), n); }
static int sh_sync(sqlite3_file *f, int flags)
{
    if (fault_sync())
        return SQLITE_IOERR_FSYNC;
    return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int sh_size(sqlite3_file *f, sqlite3_int64 *n) { return REAL(f)->pMethods->xFileSize(REAL(f), n); }
static int sh_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int sh_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int sh_reserved(sqlite3_file *f, int *r) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), r); }
static int sh_fcntl(sqlite3_file *f, int op, void *a)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, a);
}
static int sh_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int sh_devchar(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int sh_shmmap(sqlite3_file *f, int pg, int sz, int ext, void volatile **pp)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, ext, pp);
}
static int sh_shmlock(sqlite3_file *f, int off, int n, int flags)
{
    return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void sh_shmbarrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int sh_shmunmap(sqlite3_file *f, int del) { return REAL(f)->pMethods->xShmUnmap(REAL(f), del); }

static const sqlite3_io_methods shim_io = {
    .iVersion = 2,
    .xClose = sh_close,
    .xRead = sh_read,
    .xWrite = sh_write,
    .xTruncate = sh_truncate,
    .xSync = sh_sync,
    .xFileSize = sh_size,
    .xLock = sh_lock,
    .xUnlock = sh_unlock,
    .xCheckReservedLock = sh_reserved,
    .xFileControl = sh_fcntl,
    .xSectorSize = sh_sector,
    .xDeviceCharacteristics = sh_devchar,
    .xShmMap = sh_shmmap,
    .xShmLock = sh_shmlock,
    .xShmBarrier = sh_shmbarrier,
    .xShmUnmap = sh_shmunmap,
};

#endif /* TXBOX_TEST_HOOKS */

/* Opening a journal or WAL without a directory fsync when it already
 * exists.
 *
 * SQLite's unix VFS marks a WAL (or rollback journal) opened with
 * SQLITE_OPEN_CREATE for a directory fsync at its first sync: a file just
 * created must have a durable name before a commit in it is acknowledged.
 * SQLite opens the WAL with CREATE in every process, so every txbox run
 * paid an fsync of .txbox (0.3-0.5 ms here) for a WAL that PERSIST_WAL
 * keeps for the log's lifetime. A file that already exists as a regular
 * file is opened without CREATE (no O_CREAT: the same file, just no
 * DIRSYNC); a file that does not is created as before (a WAL's directory
 * is then also fsynced right after its creation, here; SQLite fsyncs it
 * again at the file's first sync).
 *
 * Durability: the directory fsync only makes the file's name durable; the
 * frames are made durable by the WAL's own fdatasync, unchanged. A WAL
 * that exists was created by a process that opened it through this
 * function, which fsynced .txbox before returning it (even a process that
 * only reads, which SQLite itself would never sync): so its name is
 * durable before any process can open it without CREATE. The one gap: a
 * process killed between creating the file and fsyncing the directory (a
 * few microseconds) leaves a name whose durability rests on the next
 * fsync of .txbox or on the filesystem (ext4, xfs and btrfs commit a new
 * file's name with its first fdatasync). A WAL removed between our
 * lstat() and the open fails with CANTOPEN and is retried with CREATE.
 * A WAL left by an older txbox (no shim) had its directory fsynced by
 * every process that wrote to it. A rollback journal (only while a new
 * log switches to WAL) is deleted after each transaction: it is created,
 * with CREATE and DIRSYNC, each time. */
static int real_open(const char *name, sqlite3_file *f, int flags, int *out)
{
    bool journal = flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL);
    if (!name || !journal || !(flags & SQLITE_OPEN_CREATE))
        return real_vfs->xOpen(real_vfs, name, f, flags, out);
    struct stat st;
    if (lstat(name, &st) == 0) {
        if (S_ISREG(st.st_mode)) {
            int rc = real_vfs->xOpen(real_vfs, name, f, flags & ~SQLITE_OPEN_CREATE, out);
            if ((rc & 0xff) != SQLITE_CANTOPEN)
                return rc;
            f->pMethods = NULL; /* removed meanwhile: create it */
        }
        return real_vfs->xOpen(real_vfs, name, f, flags, out);
    }
    bool absent = errno == ENOENT;
    int rc = real_vfs->xOpen(real_vfs, name, f, flags, out);
    if (rc == SQLITE_OK && absent && (flags & SQLITE_OPEN_WAL)) {
        /* Best effort, as SQLite's own DIRSYNC (which ignores failures). */
        _cleanup_free_ char *dir = xstrdup(name);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        _cleanup_close_ int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0)
            (void)fsync(dfd);
    }
    return rc;
}

static int plain_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    return real_open(name, f, flags, out);
}

#ifdef TXBOX_TEST_HOOKS
static int shim_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    struct shim_file *sf = (struct shim_file *)f;
    sf->real = (sqlite3_file *)(sf + 1);
    memset(sf->real, 0, (size_t)real_vfs->szOsFile);
    int rc = real_open(name, sf->real, flags, out);
    f->pMethods = rc == SQLITE_OK && sf->real->pMethods ? &shim_io : NULL;
    return rc;
}
#endif

/* The VFS the log is opened with: "txbox" (the default VFS, but for
 * real_open), or "txbox-fault" under TXBOX_FAULT (also every write and
 * sync a fault point). */
static bool vfs_ok;

static void register_vfs(void)
{
    static sqlite3_vfs plain_vfs;
    sqlite3_vfs *r = sqlite3_vfs_find(NULL);
    if (!r)
        return;
    real_vfs = r;
    plain_vfs = *r;
    plain_vfs.zName = "txbox";
    plain_vfs.xOpen = plain_open;
    plain_vfs.pNext = NULL;
    vfs_ok = sqlite3_vfs_register(&plain_vfs, 0) == SQLITE_OK;
#ifdef TXBOX_TEST_HOOKS
    shim_vfs = *r;
    shim_vfs.zName = "txbox-fault";
    shim_vfs.szOsFile = (int)sizeof(struct shim_file) + r->szOsFile;
    shim_vfs.xOpen = shim_open;
    shim_vfs.pNext = NULL;
    vfs_ok = vfs_ok && sqlite3_vfs_register(&shim_vfs, 0) == SQLITE_OK;
#endif
}

static const char *shim_name(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_vfs);
    if (!vfs_ok)
        return NULL;
#ifdef TXBOX_TEST_HOOKS
    if (getenv("TXBOX_FAULT"))
        return "txbox-fault";
#endif
    return "txbox";
}

/* ---- opening, schema, migrations ---- */

static const char *const migrations[STORE_SCHEMA_VERSION] = {
    /* v1 */
    "CREATE TABLE tx("
    " id INTEGER PRIMARY KEY,"      /* the transaction id */
    " outcome TEXT NOT NULL,"       /* committed, rolled_back, blocked, read_only, conflict, timed_out */
    " gen INTEGER,"                 /* the generation a commit made */
    " started REAL, finished REAL," /* unix time */
    " duration_ms REAL, command_ms REAL, overhead_ms REAL,"
    " recovered INTEGER NOT NULL DEFAULT 0,"                   /* completed (or rolled back) by recovery */
    " workspace TEXT, cwd TEXT, command TEXT, argv TEXT,"      /* argv: JSON array or NULL */
    " verdict TEXT, rule TEXT, reason TEXT, protections TEXT," /* protections: JSON */
    " exit_code INTEGER, signal INTEGER, backend TEXT,"
    " n_added INTEGER, n_modified INTEGER, n_deleted INTEGER, changes_truncated INTEGER,"
    " stdout_tail TEXT, stderr_tail TEXT, stdout_dropped INTEGER, stderr_dropped INTEGER,"
    " undo_of INTEGER, forced INTEGER," /* an undo: which transaction, --force */
    " retained_bytes INTEGER,"          /* pre-images kept in tx/ID/undo/ */
    " info TEXT);"                      /* the whole record (JSON), output tails only */
    "CREATE TABLE change("
    " tx INTEGER NOT NULL, seq INTEGER NOT NULL,"
    " path BLOB NOT NULL,"                /* raw bytes, relative to the workspace */
    " kind TEXT NOT NULL,"                /* added, modified, deleted */
    " op INTEGER NOT NULL,"               /* journal operation: its pre-image is tx/ID/undo/OP[/SUB] */
    " sub BLOB NOT NULL,"                 /* path inside that operation's entry ('' = itself) */
    " type_before TEXT, type_after TEXT," /* f d l p s; NULL: absent */
    " size_before INTEGER, size_after INTEGER,"
    " mode_before INTEGER, mode_after INTEGER,"
    " hash_before TEXT, hash_after TEXT," /* sha256 of a file, of a symlink's target */
    " PRIMARY KEY(tx, seq));"
    "CREATE INDEX change_path ON change(path);",
    /* v2 */
    "CREATE TABLE setting(key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
    "CREATE TABLE gc_run(id INTEGER PRIMARY KEY, at REAL NOT NULL, txs INTEGER NOT NULL,"
    " bytes INTEGER NOT NULL, detail TEXT);"
    "ALTER TABLE tx ADD COLUMN pruned REAL;" /* when gc dropped its pre-images */
    "ALTER TABLE tx ADD COLUMN pruned_bytes INTEGER;"
    "CREATE INDEX tx_undo_of ON tx(undo_of);",
    /* v3: what retention counts after every commit (history_autogc), read
     * from an index of the unpruned commits only: the count and sum
     * scanned the whole tx table, every row with its output tails, so the
     * cost of a commit grew with the history (60 pages at 70 transactions) */
    ("CREATE INDEX tx_retained ON tx(retained_bytes)"
     " WHERE outcome='committed' AND retained_bytes IS NOT NULL AND pruned IS NULL;"),
};

static int db_fail(sqlite3 *db, int rc, txbox_error *err, const char *what)
{
    int base = rc & 0xff;
    const char *m = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    if (base == SQLITE_CORRUPT || base == SQLITE_NOTADB)
        return tx_err(err, EBADMSG,
                      "the audit log %s/%s is damaged (%s); nothing was changed. Move it aside "
                      "to start a new log",
                      TXBOX_STATE_DIR, DB_NAME, m);
    if (base == SQLITE_BUSY || base == SQLITE_LOCKED)
        return tx_err(err, EBUSY, "the audit log is busy (%s); try again", m);
    if (base == SQLITE_FULL)
        return tx_err(err, ENOSPC, "the audit log: %s: %s", what, m);
    int e = base == SQLITE_IOERR      ? EIO
            : base == SQLITE_CANTOPEN ? ENOENT
            : base == SQLITE_READONLY ? EROFS
                                      : EPROTO;
    return tx_err(err, e, "the audit log: %s: %s", what, m);
}

static int exec(sqlite3 *db, const char *sql, txbox_error *err)
{
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : db_fail(db, rc, err, "cannot update it");
}

static int user_version(sqlite3 *db, int *v, txbox_error *err)
{
    sqlite3_stmt *st = NULL;
    *v = 0;
    int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        *v = sqlite3_column_int(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : db_fail(db, rc, err, "cannot read it");
}

static int migrate(sqlite3 *db, txbox_error *err)
{
    int v;
    if (user_version(db, &v, err) < 0)
        return -1;
    if (v == STORE_SCHEMA_VERSION)
        return 0;
    if (exec(db, "BEGIN IMMEDIATE", err) < 0)
        return -1;
    if (user_version(db, &v, err) < 0) /* another process may have done it */
        goto fail;
    if (v > STORE_SCHEMA_VERSION) {
        tx_err(err, EPROTO, "the audit log has schema version %d, newer than this txbox's (%d)", v,
               STORE_SCHEMA_VERSION);
        goto fail;
    }
    for (; v < STORE_SCHEMA_VERSION; v++) {
        if (exec(db, migrations[v], err) < 0)
            goto fail;
        char pv[48];
        snprintf(pv, sizeof pv, "PRAGMA user_version=%d", v + 1);
        if (exec(db, pv, err) < 0)
            goto fail;
    }
    if (exec(db, "COMMIT", err) < 0)
        goto fail;
    return 0;
fail:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return tx_err_ctx(err, "cannot migrate the audit log");
}

static int busy_ms(void)
{
    const char *s = getenv("TXBOX_DB_BUSY_MS");
    uint64_t v;
    if (s && parse_u64(s, &v) && v > 0 && v < 3600000)
        return (int)v;
    return 10000;
}

void store_close(sqlite3 *db)
{
    if (db)
        sqlite3_close_v2(db);
}

/* The WAL hook (after every commit of a write transaction): past
 * CKPT_FRAMES frames, a TRUNCATE checkpoint that waits for nobody (a
 * reader or writer in another process makes it give up; a later commit
 * tries again). Its errors, like those of SQLite's automatic checkpoint,
 * are not the commit's: the commit is already durable in the WAL. */
#define CKPT_FRAMES 64
static int ckpt_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
    (void)arg;
    if (frames < CKPT_FRAMES)
        return SQLITE_OK;
    sqlite3_busy_timeout(db, 0);
    (void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    sqlite3_busy_timeout(db, busy_ms());
    return SQLITE_OK;
}

static bool header_says_wal(txbox_ws *ws)
{
    _cleanup_close_ int fd = openat(ws->sfd, DB_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    unsigned char h[20];
    return fd >= 0 && pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h && !memcmp(h, "SQLite format 3", 16) &&
           h[18] == 2 && h[19] == 2;
}

static void pending_import(txbox_ws *ws, sqlite3 *db);
static void pending_import_mode(txbox_ws *ws, sqlite3 *db, bool reader);

/* A full disk. The WAL index lives in a shared-memory file (log.db-shm)
 * that SQLite maps and extends: on a full filesystem the extension fails
 * ("disk I/O error", and the history is out of sight), and on btrfs a write
 * to a mapped page that needs a new block (copy on write) kills the process
 * with SIGBUS. With less than LOW_SPACE free, a connection takes EXCLUSIVE
 * locking before its first access: SQLite then keeps the index in its heap
 * and never maps the file (it holds the database's lock until it closes;
 * other txbox processes wait, within the busy timeout). The same is the way
 * out when the shared memory cannot be had at all (an I/O error on the
 * first read). */
#define LOW_SPACE (64ull << 20)

static bool low_space(txbox_ws *ws)
{
    struct statvfs v;
    return fstatvfs(ws->sfd, &v) == 0 && (uint64_t)v.f_bavail * v.f_frsize < LOW_SPACE;
}

static int store_open_mode(txbox_ws *ws, bool write, bool exclusive, sqlite3 **out, txbox_error *err);
static int empty_log_lost(txbox_ws *ws, txbox_error *err);

int store_open(txbox_ws *ws, bool write, sqlite3 **out, txbox_error *err)
{
    bool exclusive = low_space(ws);
    int r = store_open_mode(ws, write, exclusive, out, err);
    if (r == -2) /* no shared memory for the WAL index: without it */
        r = store_open_mode(ws, write, true, out, err);
    return r < 0 ? -1 : 0;
}

/* store_open, with EXCLUSIVE locking or not: -2 when the first read failed
 * for want of the shared memory. */
static int store_open_mode(txbox_ws *ws, bool write, bool exclusive, sqlite3 **out, txbox_error *err)
{
    *out = NULL;
    struct stat st;
    if (!write && fstatat(ws->sfd, DB_NAME, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT &&
        !(fstatat(ws->sfd, PENDING_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_size > 0))
        return tx_err(err, ENOENT, "the audit log is empty: no transaction was recorded yet");
    bool have = fstatat(ws->sfd, DB_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (have && !S_ISREG(st.st_mode))
        return tx_err(err, EBADMSG, "the audit log %s/%s is not a regular file", TXBOX_STATE_DIR, DB_NAME);
    if (have && st.st_size == 0 && empty_log_lost(ws, err) < 0)
        return -1;
    _cleanup_free_ char *path = xasprintf("%s/%s/%s", ws->path, TXBOX_STATE_DIR, DB_NAME);
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW,
                             shim_name());
    if (rc != SQLITE_OK) {
        db_fail(db, rc, err, "cannot open it");
        store_close(db);
        return -1;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, busy_ms());
    /* Cheap closes: the WAL file stays and is checkpointed by the automatic
     * checkpoints of later writes, not by every last close (each close of
     * the last connection would checkpoint and fsync the database). */
    int persist = 1;
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
    if (exclusive && exec(db, "PRAGMA locking_mode=EXCLUSIVE", err) < 0)
        goto fail;
    int v;
    if (user_version(db, &v, err) < 0) {
        int x = sqlite3_extended_errcode(db);
        if (!exclusive && ((x & 0xff) == SQLITE_IOERR || (x & 0xff) == SQLITE_FULL)) {
            store_close(db);
            return -2;
        }
        goto fail;
    }
    if (v > STORE_SCHEMA_VERSION) {
        tx_err(err, EPROTO,
               "the audit log %s/%s has schema version %d; this txbox reads up to %d (it was "
               "written by a newer txbox)",
               TXBOX_STATE_DIR, DB_NAME, v, STORE_SCHEMA_VERSION);
        goto fail;
    }
    /* WAL is persistent in the file; switching needs a moment alone. The
     * statement costs ~0.2 ms even when there is nothing to switch (code
     * run for the first time: page faults), so it runs only for a file
     * whose header does not say WAL already (bytes 18 and 19 = 2; SQLite
     * writes them in the file itself when it enters or leaves WAL mode). */
    sqlite3_stmt *jm = NULL;
    rc = SQLITE_ROW;
    if (!header_says_wal(ws)) {
        if ((rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &jm, NULL)) == SQLITE_OK)
            rc = sqlite3_step(jm);
        sqlite3_finalize(jm);
    }
    if (rc != SQLITE_ROW) {
        db_fail(db, rc, err, "cannot set WAL mode");
        goto fail;
    }
    /* Every process's first connection rebuilds the WAL index by reading
     * every frame of the WAL file (the shared-memory index does not
     * outlive the last connection), and that rebuild forgets which frames
     * were already checkpointed. A PASSIVE checkpoint (SQLite's automatic
     * one) never lets a later process restart the WAL from its start: the
     * WAL grew without bound (1000 frames, 4 MiB, after a hundred runs),
     * every start read all of it and, past 64 frames, every commit copied
     * it all into the database again (two more fsyncs per run). ckpt_hook
     * checkpoints every 64 frames with TRUNCATE: the WAL file is emptied
     * (after the database is fsynced), so a start reads at most ~64 frames. */
    sqlite3_wal_hook(db, ckpt_hook, NULL);
    if (exec(db, "PRAGMA synchronous=FULL", err) < 0 || migrate(db, err) < 0)
        goto fail;
    /* A cheap sanity read of the tables a write touches: a damaged file is
     * mostly found here, before a commit point. */
    if (exec(db, "SELECT max(id) FROM tx; SELECT count(*) FROM setting", err) < 0)
        goto fail;
    pending_import_mode(ws, db, !write); /* a reader sees them even on a full disk */
    *out = db;
    return 0;
fail:
    store_close(db);
    return -1;
}

int store_shared(txbox_ws *ws, sqlite3 **db, txbox_error *err)
{
    if (!ws->db && store_open(ws, true, &ws->db, err) < 0)
        return -1;
    ws->db_close = store_close;
    *db = ws->db;
    return 0;
}

/* An empty log.db is a new log, unless transactions were committed here
 * (the generation counter says so) and no WAL holds the log's pages: then
 * the file was truncated, and a new log on top would silently lose the
 * history. Said, and nothing changed: the transactions' directories keep
 * what they know until a person moves the file aside. */
static int empty_log_lost(txbox_ws *ws, txbox_error *err)
{
    struct stat wst;
    bool wal = fstatat(ws->sfd, DB_NAME "-wal", &wst, AT_SYMLINK_NOFOLLOW) == 0 && wst.st_size > 32;
    uint64_t gen = ws_gen_cache(ws);
    if (wal || gen == 0)
        return 0;
    return tx_err(err, EBADMSG,
                  "the audit log %s/%s is empty although %llu commits were recorded (it was "
                  "truncated); nothing was changed. Move it aside to start a new log",
                  TXBOX_STATE_DIR, DB_NAME, (unsigned long long)gen);
}

/* The log's file as it is now, without SQLite: absent or empty (a new
 * log), or an SQLite database with a sane header, a schema this txbox
 * reads, and no fewer bytes than its header counts (when the header's
 * count is valid and no WAL holds frames a checkpoint may still write). */
static int header_check(txbox_ws *ws, txbox_error *err)
{
    _cleanup_close_ int fd = openat(ws->sfd, DB_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && errno == ENOENT)
        return 0;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return tx_errno(err, errno, "the audit log %s/%s", TXBOX_STATE_DIR, DB_NAME);
    if (!S_ISREG(st.st_mode))
        return tx_err(err, EBADMSG, "the audit log %s/%s is not a regular file", TXBOX_STATE_DIR, DB_NAME);
    if (st.st_size == 0)
        return empty_log_lost(ws, err);
    unsigned char h[100];
    const char *bad = NULL;
    if (pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h || memcmp(h, "SQLite format 3", 16))
        bad = "not an SQLite database";
    uint32_t ps = bad ? 0 : (uint32_t)h[16] << 8 | h[17];
    if (ps == 1)
        ps = 65536;
    if (!bad && (ps < 512 || (ps & (ps - 1))))
        bad = "bad page size";
#define BE32(o) ((uint32_t)h[o] << 24 | (uint32_t)h[o + 1] << 16 | (uint32_t)h[o + 2] << 8 | h[o + 3])
    if (!bad && BE32(60) > STORE_SCHEMA_VERSION)
        return tx_err(err, EPROTO,
                      "the audit log %s/%s has schema version %u; this txbox reads up to %d (it "
                      "was written by a newer txbox)",
                      TXBOX_STATE_DIR, DB_NAME, BE32(60), STORE_SCHEMA_VERSION);
    struct stat wst;
    bool wal = fstatat(ws->sfd, DB_NAME "-wal", &wst, AT_SYMLINK_NOFOLLOW) == 0 && wst.st_size > 0;
    if (!bad && !wal && BE32(24) == BE32(92) && BE32(28) > 0 &&
        (uint64_t)st.st_size < (uint64_t)BE32(28) * ps)
        bad = "shorter than its header says";
#undef BE32
    if (bad)
        return tx_err(err, EBADMSG,
                      "the audit log %s/%s is damaged (%s); nothing was changed. Move it aside "
                      "to start a new log",
                      TXBOX_STATE_DIR, DB_NAME, bad);
    return 0;
}

int store_check(txbox_ws *ws, size_t nops, txbox_error *err)
{
    /* A fresh look, which sees the file as it is now (a connection kept
     * from before would not notice a file replaced or migrated by another
     * process). The row of a commit of up to PENDING_OPS_MAX operations
     * waits in log.pending while that holds less than PENDING_SOFT bytes
     * ("pending rows" below): the file's header is checked, without
     * opening it. Otherwise the log is opened (and the pending rows moved
     * into it) and the row then goes to it. */
    store_close(ws->db);
    ws->db = NULL;
    struct stat st;
    bool room = fstatat(ws->sfd, PENDING_NAME, &st, AT_SYMLINK_NOFOLLOW) < 0
                    ? errno == ENOENT
                    : S_ISREG(st.st_mode) && st.st_size < (off_t)PENDING_SOFT;
    if (room && nops <= PENDING_OPS_MAX) {
        if (header_check(ws, err) < 0)
            return tx_err_ctx(err, "commit refused");
        return 0;
    }
    sqlite3 *db;
    if (store_shared(ws, &db, err) < 0)
        return tx_err_ctx(err, "commit refused");
    return 0;
}

void store_get_retention(sqlite3 *db, long *keep, long long *max_bytes)
{
    *keep = DEFAULT_KEEP;
    *max_bytes = DEFAULT_MAX_BYTES;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT key, value FROM setting", -1, &st, NULL) != SQLITE_OK)
        return;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        sqlite3_int64 v = sqlite3_column_int64(st, 1);
        if (k && !strcmp(k, "keep") && v >= 0)
            *keep = (long)v;
        else if (k && !strcmp(k, "max_bytes") && v >= 0)
            *max_bytes = v;
    }
    sqlite3_finalize(st);
}

int parse_txid(const char *s, uint64_t *id, txbox_error *err)
{
    if (!s || !parse_u64(s, id) || *id == 0 || strlen(s) > 19) {
        tx_err(err, EINVAL, "'%.64s' is not a transaction id (a positive number", s ? s : "");
        tx_remedy(err, TXBOX_REMEDY_LOG, NULL);
        return tx_err_more(err, ")");
    }
    return 0;
}

/* ---- the record of a command ---- */

char *store_context(const txbox_ws *ws, const txbox_run_opts *o, const char *cwd, double started)
{
    json_t *c = json_object();
    if (o->shell) {
        json_object_set_new(c, "command", json_text(o->shell, strlen(o->shell), false));
    } else if (o->argv) {
        json_t *a = json_array();
        dbuf b;
        dbuf_init(&b, 0);
        for (size_t i = 0; o->argv[i]; i++) {
            json_array_append_new(a, json_text(o->argv[i], strlen(o->argv[i]), false));
            if (i)
                dbuf_addstr(&b, " ");
            dbuf_addstr(&b, o->argv[i]);
        }
        json_object_set_new(c, "command", json_text(dbuf_str(&b), b.len, false));
        json_object_set_new(c, "argv", a);
        dbuf_free(&b);
    }
    const char *rel = cwd;
    size_t l = strlen(ws->path);
    if (cwd && !strncmp(cwd, ws->path, l) && (cwd[l] == 0 || cwd[l] == '/'))
        rel = cwd[l] ? cwd + l + 1 : ".";
    json_object_set_new(c, "cwd", json_text(rel ? rel : ".", rel ? strlen(rel) : 1, true));
    json_object_set_new(c, "workspace", json_text(ws->path, strlen(ws->path), true));
    json_object_set_new(c, "started", json_real(started));
    char *s = json_dumps(c, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(c);
    return s;
}

char *store_info(const txbox_result *r, const char *ctx)
{
    char *s = txbox_result_json(r);
    json_t *c = ctx ? json_loads(ctx, 0, NULL) : NULL;
    if (!c)
        return s;
    json_t *o = json_loads(s, 0, NULL);
    free(s);
    if (!o) {
        json_decref(c);
        return NULL;
    }
    json_object_update_missing(o, c);
    s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(o);
    json_decref(c);
    return s;
}

/* ---- the write set of a commit ---- */

struct side {
    char type; /* 0 absent; f d l p s */
    uint32_t mode;
    uint64_t size;
    bool hashed;
    char hash[65];
};

struct ent {
    char *sub;
    struct side s;
};

struct ents {
    struct ent *v;
    size_t n, cap;
    uint64_t bytes; /* regular file and symlink bytes, all of the tree */
    bool truncated;
};

struct row {
    char *path, *sub;
    const char *kind;
    size_t op;
    struct side b, a;
};

struct rows {
    struct row *v;
    size_t n, cap;
    uint64_t dropped, retained;
};

static char type_of(mode_t m)
{
    return S_ISREG(m)    ? 'f'
           : S_ISDIR(m)  ? 'd'
           : S_ISLNK(m)  ? 'l'
           : S_ISFIFO(m) ? 'p'
           : S_ISSOCK(m) ? 's'
                         : '?';
}

static void describe(int dirfd, const char *name, const struct stat *st, struct side *s)
{
    memset(s, 0, sizeof *s);
    s->type = type_of(st->st_mode);
    s->mode = st->st_mode & 07777;
    if (S_ISREG(st->st_mode)) {
        s->size = (uint64_t)st->st_size;
        s->hashed = hash_file_at(dirfd, name, s->hash, &s->size) == 0;
    } else if (S_ISLNK(st->st_mode)) {
        char t[PATH_MAX];
        ssize_t n = readlinkat(dirfd, name, t, sizeof t);
        if (n >= 0) {
            s->size = (uint64_t)n;
            hash_bytes_hex(t, (size_t)n, s->hash);
            s->hashed = true;
        }
    }
}

static char *join_sub(const char *a, const char *b) { return *a ? xasprintf("%s/%s", a, b) : xstrdup(b); }

/* Every entry of the tree dirfd/name into e (sub paths relative to it). */
static void walk(int at, const char *name, const char *sub, struct ents *e, unsigned depth)
{
    struct stat st;
    if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))
        e->bytes += (uint64_t)st.st_size;
    if (e->n >= ROWS_CAP) {
        e->truncated = true;
    } else {
        if (e->n == e->cap) {
            e->cap = e->cap ? e->cap * 2 : 16;
            e->v = xrealloc(e->v, e->cap * sizeof *e->v);
        }
        struct ent *x = &e->v[e->n++];
        x->sub = xstrdup(sub);
        describe(at, name, &st, &x->s);
    }
    if (!S_ISDIR(st.st_mode) || depth > 4096)
        return;
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    _cleanup_dir_ DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        _cleanup_free_ char *s = join_sub(sub, de->d_name);
        walk(dirfd(d), de->d_name, s, e, depth + 1);
    }
}

static void ents_free(struct ents *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].sub);
    free(e->v);
    memset(e, 0, sizeof *e);
}

static int ent_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ent *)a)->sub, ((const struct ent *)b)->sub);
}

static void row_add(struct rows *r, const char *path, const char *sub, const char *kind, size_t op,
                    const struct side *b, const struct side *a)
{
    if (r->n >= ROWS_CAP) {
        r->dropped++;
        return;
    }
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 32;
        r->v = xrealloc(r->v, r->cap * sizeof *r->v);
    }
    struct row *x = &r->v[r->n++];
    memset(x, 0, sizeof *x);
    x->path = *sub ? xasprintf("%s/%s", path, sub) : xstrdup(path);
    x->sub = xstrdup(sub);
    x->kind = kind;
    x->op = op;
    if (b)
        x->b = *b;
    if (a)
        x->a = *a;
}

static void rows_free(struct rows *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].path);
        free(r->v[i].sub);
    }
    free(r->v);
    memset(r, 0, sizeof *r);
}

static bool side_differs(const struct side *a, const struct side *b)
{
    if (a->type != b->type || a->mode != b->mode)
        return true;
    if (a->type == 'f' || a->type == 'l')
        return a->size != b->size || a->hashed != b->hashed || strcmp(a->hash, b->hash);
    return false;
}

/* Old tree o and new tree n of one operation, merged by sub path. */
static void merge(struct rows *r, const char *path, size_t op, struct ents *o, struct ents *n)
{
    if (o->n)
        qsort(o->v, o->n, sizeof *o->v, ent_cmp);
    if (n->n)
        qsort(n->v, n->n, sizeof *n->v, ent_cmp);
    size_t i = 0, j = 0;
    while (i < o->n || j < n->n) {
        int c = i == o->n ? 1 : j == n->n ? -1 : strcmp(o->v[i].sub, n->v[j].sub);
        if (c < 0) {
            row_add(r, path, o->v[i].sub, "deleted", op, &o->v[i].s, NULL);
            i++;
        } else if (c > 0) {
            row_add(r, path, n->v[j].sub, "added", op, NULL, &n->v[j].s);
            j++;
        } else {
            struct side *b = &o->v[i].s, *a = &n->v[j].s;
            if (b->type != a->type) {
                row_add(r, path, o->v[i].sub, "deleted", op, b, NULL);
                row_add(r, path, n->v[j].sub, "added", op, NULL, a);
            } else if (side_differs(b, a)) {
                row_add(r, path, o->v[i].sub, "modified", op, b, a);
            }
            i++;
            j++;
        }
    }
    if (o->truncated || n->truncated)
        r->dropped++;
}

/* Every entry of the tree at path (beneath root) into e. */
static void walk_path(int root, const char *path, struct ents *e)
{
    const char *base = NULL;
    _cleanup_close_ int parent = safe_open_parent(root, path, &base);
    if (parent >= 0)
        walk(parent, base, "", e, 0);
}

/* The write set's rows. Before the apply (ahead): the old entries are at
 * their paths in the workspace, the new ones at theirs in the upper
 * (newfd). After it: the old ones in tx/ID/undo/N (undofd), the new ones
 * in the workspace (newfd = ws->fd). The same files either way. */
static void collect_rows(const struct tx_ops *ops, int wsfd, int undofd, bool ahead, int newfd,
                         struct rows *r)
{
    for (size_t i = 0; i < ops->n; i++) {
        const struct tx_op *o = &ops->v[i];
        if (o->kind == OP_META) {
            if (o->nw.mode != o->old.mode || o->nw.uid != o->old.uid || o->nw.gid != o->old.gid) {
                struct side b = {.type = 'd', .mode = o->old.mode}, a = {.type = 'd', .mode = o->nw.mode};
                row_add(r, o->path, "", "modified", i, &b, &a);
            }
            continue;
        }
        char un[32];
        snprintf(un, sizeof un, "%zu", i);
        struct ents old = {0}, nw = {0};
        if (!ahead && undofd >= 0)
            walk(undofd, un, "", &old, 0);
        else if (ahead && (o->kind == OP_DELETE || o->had_old))
            walk_path(wsfd, o->path, &old);
        r->retained += old.bytes;
        if (o->kind == OP_REPLACE)
            walk_path(newfd, o->path, &nw);
        merge(r, o->path, i, &old, &nw);
        ents_free(&old);
        ents_free(&nw);
    }
}

static void collect(txbox_ws *ws, int txfd, const struct tx_ops *ops, struct rows *r)
{
    _cleanup_close_ int undo = openat(txfd, "undo", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    collect_rows(ops, ws->fd, undo, false, ws->fd, r);
}

/* ---- the write set, hashed beside the commit ---- */

struct store_prep {
    pthread_t th;
    bool running, done;
    int wsfd, upper;
    const struct tx_ops *ops;
    struct rows rows;
};

static void *prep_main(void *arg)
{
    struct store_prep *p = arg;
    collect_rows(p->ops, p->wsfd, -1, true, p->upper, &p->rows);
    return NULL;
}

struct store_prep *store_prep_begin(txbox_ws *ws, int txfd, const struct tx_ops *ops)
{
    struct store_prep *p = xcalloc(1, sizeof *p);
    p->wsfd = ws->fd;
    p->ops = ops;
    p->upper = openat(txfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (p->upper < 0) { /* no upper (nothing new): the rows after the apply */
        free(p);
        return NULL;
    }
    p->running = thread_start(&p->th, prep_main, p) == 0;
    return p;
}

void store_prep_wait(struct store_prep *p)
{
    if (!p || p->done)
        return;
    if (p->running)
        pthread_join(p->th, NULL);
    else /* no thread could be made: here, now */
        collect_rows(p->ops, p->wsfd, -1, true, p->upper, &p->rows);
    p->running = false;
    p->done = true;
}

void store_prep_free(struct store_prep *p)
{
    if (!p)
        return;
    store_prep_wait(p); /* a thread is never left reading */
    rows_free(&p->rows);
    close(p->upper);
    free(p);
}

/* ---- store_log ---- */

static const char *jstr(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* The last TAIL_BYTES of a UTF-8 string, cut at a character boundary. */
static const char *tail(const char *s, size_t *n)
{
    size_t l = s ? strlen(s) : 0;
    if (l <= TAIL_BYTES) {
        *n = l;
        return s ? s : "";
    }
    const char *p = s + l - TAIL_BYTES;
    while (p < s + l && ((unsigned char)*p & 0xc0) == 0x80)
        p++;
    *n = (size_t)(s + l - p);
    return p;
}

static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

static void bind_real(sqlite3_stmt *st, int i, json_t *v)
{
    if (json_is_number(v))
        sqlite3_bind_double(st, i, json_number_value(v));
    else
        sqlite3_bind_null(st, i);
}

static void bind_int(sqlite3_stmt *st, int i, json_t *v)
{
    if (json_is_integer(v))
        sqlite3_bind_int64(st, i, json_integer_value(v));
    else if (json_is_boolean(v))
        sqlite3_bind_int(st, i, json_is_true(v));
    else
        sqlite3_bind_null(st, i);
}

static void bind_json(sqlite3_stmt *st, int i, json_t *v)
{
    if (!v || json_is_null(v)) {
        sqlite3_bind_null(st, i);
        return;
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s)
        sqlite3_bind_text(st, i, s, -1, free);
    else
        sqlite3_bind_null(st, i);
}

static void bind_side(sqlite3_stmt *st, int i, const struct side *s)
{
    /* type, size, mode, hash at i, i+2, i+4, i+6 (before/after interleave) */
    if (!s->type) {
        sqlite3_bind_null(st, i);
        sqlite3_bind_null(st, i + 2);
        sqlite3_bind_null(st, i + 4);
        sqlite3_bind_null(st, i + 6);
        return;
    }
    char t[2] = {s->type, 0};
    sqlite3_bind_text(st, i, t, 1, SQLITE_TRANSIENT);
    if (s->type == 'f' || s->type == 'l')
        sqlite3_bind_int64(st, i + 2, (sqlite3_int64)s->size);
    else
        sqlite3_bind_null(st, i + 2);
    sqlite3_bind_int(st, i + 4, (int)s->mode);
    if (s->hashed)
        sqlite3_bind_text(st, i + 6, s->hash, 64, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i + 6);
}

/* The generation transaction id made (finalize() has just recorded it). */
static sqlite3_int64 find_gen(txbox_ws *ws, uint64_t id)
{
    uint64_t g = 0;
    if (ws_read_gen(ws, &g, NULL) < 0)
        return -1;
    char want[32];
    snprintf(want, sizeof want, "%llu", (unsigned long long)id);
    for (uint64_t k = 0; g > 0 && k < 64; k++, g--) {
        char gn[32], t[32];
        snprintf(gn, sizeof gn, "%llu", (unsigned long long)g);
        ssize_t l = readlinkat(ws->cmtd, gn, t, sizeof t - 1);
        if (l > 0) {
            t[l] = 0;
            if (!strcmp(t, want))
                return (sqlite3_int64)g;
        }
    }
    return -1;
}

static size_t count_of(json_t *changes, const char *k)
{
    return json_array_size(json_object_get(changes, k));
}

static const char TX_INSERT[] =
    "INSERT OR REPLACE INTO tx(id, outcome, gen, started, finished, duration_ms, command_ms,"
    " overhead_ms, recovered, workspace, cwd, command, argv, verdict, rule, reason, protections,"
    " exit_code, signal, backend, n_added, n_modified, n_deleted, changes_truncated, stdout_tail,"
    " stderr_tail, stdout_dropped, stderr_dropped, undo_of, forced, retained_bytes, info)"
    " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,?23,"
    "?24,?25,?26,?27,?28,?29,?30,?31,?32)";

/* gen: the generation a commit made, or 0 to find it now (find_gen) */
static int bind_tx(sqlite3_stmt *st, txbox_ws *ws, uint64_t id, const char *outcome, json_t *in,
                   bool committed, const struct rows *rows, bool recovered, double now, sqlite3_int64 gen)
{
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    sqlite3_bind_text(st, 2, outcome, -1, SQLITE_STATIC);
    if (committed && gen <= 0)
        gen = find_gen(ws, id);
    if (gen > 0)
        sqlite3_bind_int64(st, 3, gen);
    json_t *started = json_object_get(in, "started");
    bind_real(st, 4, started);
    sqlite3_bind_double(st, 5, now);
    json_t *cmd_ms = json_object_get(in, "command_ms");
    double dur = json_number_value(json_object_get(in, "duration_ms"));
    if (committed && rows && json_is_number(started)) {
        /* The info was written before the commit: time it up to now. */
        dur = recovered ? NAN : (now - json_number_value(started)) * 1000.0;
    }
    if (isfinite(dur) && dur > 0) {
        sqlite3_bind_double(st, 6, dur);
        sqlite3_bind_double(st, 8, dur - json_number_value(cmd_ms));
    }
    bind_real(st, 7, cmd_ms);
    sqlite3_bind_int(st, 9, recovered);
    const char *wsp = jstr(in, "workspace");
    bind_text(st, 10, wsp ? wsp : ws->path);
    bind_text(st, 11, jstr(in, "cwd"));
    bind_text(st, 12, jstr(in, "command"));
    bind_json(st, 13, json_object_get(in, "argv"));
    bind_text(st, 14, jstr(in, "verdict"));
    bind_text(st, 15, jstr(in, "rule"));
    bind_text(st, 16, jstr(in, "reason"));
    bind_json(st, 17, json_object_get(in, "protections"));
    bind_int(st, 18, json_object_get(in, "exit_code"));
    bind_int(st, 19, json_object_get(in, "signal"));
    bind_text(st, 20, jstr(in, "backend"));
    json_t *ch = json_object_get(in, "changes");
    if (json_is_object(ch)) {
        sqlite3_bind_int64(st, 21, (sqlite3_int64)count_of(ch, "added"));
        sqlite3_bind_int64(st, 22, (sqlite3_int64)count_of(ch, "modified"));
        sqlite3_bind_int64(st, 23, (sqlite3_int64)count_of(ch, "deleted"));
    }
    sqlite3_bind_int(st, 24, json_is_true(json_object_get(ch, "truncated")) || (rows && rows->dropped));
    size_t n;
    const char *t = tail(jstr(in, "stdout"), &n);
    sqlite3_bind_text(st, 25, t, (int)n, SQLITE_TRANSIENT);
    t = tail(jstr(in, "stderr"), &n);
    sqlite3_bind_text(st, 26, t, (int)n, SQLITE_TRANSIENT);
    json_int_t od = json_integer_value(json_object_get(in, "stdout_dropped_bytes"));
    json_int_t ed = json_integer_value(json_object_get(in, "stderr_dropped_bytes"));
    size_t ol = jstr(in, "stdout") ? strlen(jstr(in, "stdout")) : 0;
    size_t el = jstr(in, "stderr") ? strlen(jstr(in, "stderr")) : 0;
    sqlite3_bind_int64(st, 27, (sqlite3_int64)(od + (json_int_t)(ol > TAIL_BYTES ? ol - TAIL_BYTES : 0)));
    sqlite3_bind_int64(st, 28, (sqlite3_int64)(ed + (json_int_t)(el > TAIL_BYTES ? el - TAIL_BYTES : 0)));
    const char *uo = jstr(in, "undo_of");
    uint64_t u;
    if (uo && parse_u64(uo, &u))
        sqlite3_bind_int64(st, 29, (sqlite3_int64)u);
    bind_int(st, 30, json_object_get(in, "forced"));
    if (rows)
        sqlite3_bind_int64(st, 31, (sqlite3_int64)rows->retained);
    /* The whole record, with the output cut to its tails. */
    json_t *copy = json_deep_copy(in);
    json_object_del(copy, "stdout");
    json_object_del(copy, "stderr");
    char *s = json_dumps(copy, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(copy);
    if (s && strlen(s) > INFO_CAP) {
        free(s);
        s = xstrdup("{\"truncated\":true}");
    }
    if (s)
        sqlite3_bind_text(st, 32, s, -1, free);
    return 0;
}

static const char CHANGE_INSERT[] =
    "INSERT INTO change(tx, seq, path, kind, op, sub, type_before, type_after, size_before,"
    " size_after, mode_before, mode_after, hash_before, hash_after)"
    " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14)";

static int write_rows(sqlite3 *db, uint64_t id, const struct rows *rows, txbox_error *err)
{
    sqlite3_stmt *del = NULL, *ins = NULL;
    int rc = sqlite3_prepare_v2(db, "DELETE FROM change WHERE tx=?1", -1, &del, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(del, 1, (sqlite3_int64)id);
        rc = sqlite3_step(del) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, CHANGE_INSERT, -1, &ins, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < rows->n; i++) {
        const struct row *x = &rows->v[i];
        sqlite3_reset(ins);
        sqlite3_clear_bindings(ins);
        sqlite3_bind_int64(ins, 1, (sqlite3_int64)id);
        sqlite3_bind_int64(ins, 2, (sqlite3_int64)i);
        sqlite3_bind_blob(ins, 3, x->path, (int)strlen(x->path), SQLITE_STATIC);
        sqlite3_bind_text(ins, 4, x->kind, -1, SQLITE_STATIC);
        sqlite3_bind_int64(ins, 5, (sqlite3_int64)x->op);
        sqlite3_bind_blob(ins, 6, x->sub, (int)strlen(x->sub), SQLITE_STATIC);
        bind_side(ins, 7, &x->b);
        bind_side(ins, 8, &x->a);
        rc = sqlite3_step(ins) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    }
    sqlite3_finalize(del);
    sqlite3_finalize(ins);
    return rc == SQLITE_OK ? 0 : db_fail(db, rc, err, "cannot record the write set");
}

/* ---- retention's count, cached ----
 *
 * history_autogc runs after every commit; its count of the retained
 * commits needs the log open, which a commit whose row waits in
 * log.pending no longer does. .txbox/log.retained caches it: "GEN COUNT
 * BYTES KEEP MAX_BYTES", the count and bytes of the unpruned commits'
 * pre-images (STORE_RETAINED_SQL) and the bounds, as of generation GEN.
 * Written from the log under the workspace lock (store_retained_refresh),
 * advanced by each commit whose row goes to log.pending (only from GEN-1
 * to GEN: a commit logged twice, by a crashed process and by recovery,
 * counts once), removed by gc (store_retained_forget). A cache of another
 * generation than the workspace's is no cache. It is a hint: it decides
 * only whether the log is opened to count; what gc prunes is decided
 * from the log. */
void store_retained_forget(txbox_ws *ws) { (void)unlinkat(ws->sfd, RETAINED_NAME, 0); }

struct retained {
    uint64_t gen;
    long long count, bytes, keep, max_bytes;
};

static bool retained_read(txbox_ws *ws, struct retained *r)
{
    _cleanup_close_ int fd = openat(ws->sfd, RETAINED_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    char b[160];
    ssize_t n = fd >= 0 ? read(fd, b, sizeof b - 1) : -1;
    if (n <= 0)
        return false;
    b[n] = 0;
    unsigned long long g;
    return sscanf(b, "%llu %lld %lld %lld %lld", &g, &r->count, &r->bytes, &r->keep, &r->max_bytes) == 5 &&
           (r->gen = g) > 0 && r->count >= 0 && r->bytes >= 0 && r->keep >= 0 && r->max_bytes >= 0;
}

/* Rewritten in place, padded to a fixed length: a write cut short leaves
 * a line that does not parse, which is no cache (only writers under the
 * workspace lock write it). */
static void retained_write(txbox_ws *ws, const struct retained *r)
{
    char b[128];
    int n = snprintf(b, sizeof b, "%llu %lld %lld %lld %lld", (unsigned long long)r->gen, r->count, r->bytes,
                     r->keep, r->max_bytes);
    if (n < 0 || n >= (int)sizeof b - 1)
        return;
    memset(b + n, ' ', sizeof b - 1 - (size_t)n);
    b[sizeof b - 1] = '\n';
    _cleanup_close_ int fd =
        openat(ws->sfd, RETAINED_NAME, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 && pwrite(fd, b, sizeof b, 0) != (ssize_t)sizeof b)
        store_retained_forget(ws);
}

/* After the row of the commit that made generation gen went to
 * log.pending with bytes of pre-images. */
static void retained_add(txbox_ws *ws, sqlite3_int64 gen, uint64_t bytes)
{
    struct retained r;
    if (gen <= 0 || !retained_read(ws, &r) || r.gen + 1 != (uint64_t)gen)
        return;
    r.gen = (uint64_t)gen;
    r.count++;
    r.bytes += (long long)bytes;
    retained_write(ws, &r);
}

int store_retained_cached(txbox_ws *ws, long long *count, long long *bytes, long *keep, long long *max_bytes)
{
    struct retained r;
    uint64_t gen;
    if (!retained_read(ws, &r) || ws_read_gen(ws, &gen, NULL) < 0 || gen != r.gen)
        return -1;
    *count = r.count;
    *bytes = r.bytes;
    *keep = (long)r.keep;
    *max_bytes = r.max_bytes;
    return 0;
}

void store_retained_refresh(txbox_ws *ws, sqlite3 *db)
{
    struct retained r = {0};
    long keep;
    store_get_retention(db, &keep, &r.max_bytes);
    r.keep = keep;
    sqlite3_stmt *st = NULL;
    bool ok = ws_read_gen(ws, &r.gen, NULL) == 0 && r.gen > 0 &&
              sqlite3_prepare_v2(db, STORE_RETAINED_SQL, -1, &st, NULL) == SQLITE_OK &&
              sqlite3_step(st) == SQLITE_ROW;
    if (ok) {
        r.count = sqlite3_column_int64(st, 0);
        r.bytes = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    if (ok)
        retained_write(ws, &r);
    else
        store_retained_forget(ws);
}

/* ---- pending rows ----
 *
 * Opening the log costs ~2 ms (SQLite's open, schema, WAL index), and
 * writing a commit's row ~1 ms more (a 250M ten-file change, side by side:
 * 44.2 ms with them, 40.7 ms with the row in log.pending). A row is
 * therefore appended, as one JSON line, to
 * .txbox/log.pending when the process has no connection open; every open
 * of the log (store_open: log, show, diff, undo, gc, a commit whose row
 * goes to the log, recover) first moves the pending rows into it, in one
 * transaction.
 *
 * - The row of a transaction that changed nothing (any outcome but
 *   committed) is appended without an fsync, as the log writes it: a
 *   power loss may lose the last ones.
 * - A committed row (store_log_commit: store_check left the log closed)
 *   carries its write set and generation, and its line is made durable in
 *   finalize's sync set with the applied changes, before the journal is
 *   closed: the same guarantee as the log's WAL gave it (a crash before
 *   the sync leaves the journal; recovery appends the row again, and the
 *   move keeps the last line of an id). Rows with a committed one are
 *   moved with synchronous=FULL, so that the log holds them durably
 *   before the file is truncated.
 * - A committed row of over PENDING_LINE_MAX bytes is written to
 *   tx/ID/log.row, in the same sync set, and its line only points at it.
 * - A line cut short by a crash is skipped; an append after one starts on
 *   a line of its own, so that it cannot be glued to the broken line.
 * - Appends and the move hold flock on the file, so none is lost between
 *   the read and the truncation. Past PENDING_MAX bytes a row goes to the
 *   log itself (store_check sends a commit's there from PENDING_SOFT on,
 *   before its commit point), which moves the others too. */

/* A write-set row's side as JSON: null, or [type, mode, size, hash|null]. */
static json_t *side_json(const struct side *x)
{
    if (!x->type)
        return json_null();
    char t[2] = {x->type, 0};
    return json_pack("[s,I,I,s?]", t, (json_int_t)x->mode, (json_int_t)x->size, x->hashed ? x->hash : NULL);
}

static bool side_from(json_t *j, struct side *x)
{
    memset(x, 0, sizeof *x);
    if (json_is_null(j))
        return true;
    const char *t = json_string_value(json_array_get(j, 0)), *h = json_string_value(json_array_get(j, 3));
    if (!json_is_array(j) || !t || strlen(t) != 1 || !strchr("fdlps?", *t) ||
        !json_is_integer(json_array_get(j, 1)) || !json_is_integer(json_array_get(j, 2)) ||
        (h && strlen(h) != 64))
        return false;
    x->type = *t;
    x->mode = (uint32_t)json_integer_value(json_array_get(j, 1));
    x->size = (uint64_t)json_integer_value(json_array_get(j, 2));
    if (h) {
        x->hashed = true;
        memcpy(x->hash, h, 65);
    }
    return true;
}

/* Paths are bytes, not always UTF-8 (which JSON strings must be): as
 * json_text writes file names (\xNN for the other bytes), read back by
 * json_text_bytes. */
static json_t *path_json(const char *p) { return json_text(p, strlen(p), true); }

static char *path_from(json_t *j)
{
    return json_is_string(j) ? json_text_bytes(json_string_value(j), json_string_length(j)) : NULL;
}

static json_t *rows_json(const struct rows *r)
{
    json_t *a = json_array();
    for (size_t i = 0; i < r->n; i++) {
        const struct row *x = &r->v[i];
        json_array_append_new(a, json_pack("[o,o,s,I,o,o]", path_json(x->path), path_json(x->sub), x->kind,
                                           (json_int_t)x->op, side_json(&x->b), side_json(&x->a)));
    }
    return a;
}

static bool rows_from(json_t *a, struct rows *r)
{
    static const char *const kinds[] = {"added", "modified", "deleted"};
    size_t n = json_array_size(a);
    if (!json_is_array(a) || n > ROWS_CAP)
        return false;
    r->v = n ? xcalloc(n, sizeof *r->v) : NULL;
    r->cap = n;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(a, i);
        struct row *x = &r->v[i];
        const char *k = json_string_value(json_array_get(e, 2));
        for (size_t t = 0; k && t < ARRAY_SIZE(kinds); t++)
            if (!strcmp(k, kinds[t]))
                x->kind = kinds[t];
        x->path = path_from(json_array_get(e, 0));
        x->sub = path_from(json_array_get(e, 1));
        r->n = i + 1;
        if (!x->path || !x->sub || !x->kind || !json_is_integer(json_array_get(e, 3)) ||
            !side_from(json_array_get(e, 4), &x->b) || !side_from(json_array_get(e, 5), &x->a))
            return false;
        x->op = (size_t)json_integer_value(json_array_get(e, 3));
    }
    return true;
}

/* Appends line (len bytes, its newline included) to the pending file, on
 * a line of its own; with sync, the file joins that sync set. */
static int pending_append(txbox_ws *ws, const char *line, size_t len, struct fs_syncset *sync)
{
    _cleanup_close_ int fd =
        openat(ws->sfd, PENDING_NAME, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    struct stat st;
    if (fd < 0 || flock(fd, LOCK_EX) < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size + len + 1 > PENDING_MAX)
        return -1;
    char last = '\n';
    if (st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) != 1)
        return -1;
    if (last != '\n' && fs_write(fd, "\n", 1) < 0) /* after a line cut short */
        return -1;
    if (fs_write(fd, line, len) < 0)
        return -1;
    if (sync) {
        fs_syncset_add(sync, fd);
        if (st.st_size == 0)
            fs_syncset_add(sync, ws->sfd); /* its name, if it is new */
    }
    return 0;
}

/* A commit's row (rows) carries the generation it made: *gen. One of over
 * PENDING_LINE_MAX bytes (a write set of thousands of paths) goes to
 * tx/ID/log.row (txfd), in the same sync set, and its line in log.pending
 * only points at it: a commit's row never needs the log itself after its
 * commit point, where a damaged log could no longer refuse it. */
static int pending_add(txbox_ws *ws, uint64_t id, const char *outcome, json_t *in, bool recovered,
                       const struct rows *rows, int txfd, struct fs_syncset *sync, sqlite3_int64 *gen)
{
    json_t *rec = json_pack("{s:I,s:s,s:b,s:f,s:O}", "id", (json_int_t)id, "outcome", outcome, "recovered",
                            recovered, "finished", wall_time(), "info", in);
    if (rec && rows) {
        *gen = find_gen(ws, id);
        json_object_set_new(rec, "gen", json_integer(*gen > 0 ? *gen : 0));
        json_object_set_new(rec, "rows", rows_json(rows));
        json_object_set_new(rec, "dropped", json_integer((json_int_t)rows->dropped));
        json_object_set_new(rec, "retained", json_integer((json_int_t)rows->retained));
    }
    _cleanup_free_ char *line = rec ? json_dumps(rec, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(rec);
    if (!line)
        return -1;
    size_t n = strlen(line);
    line[n++] = '\n'; /* over the terminating NUL: written by length */
    if (rows && n > PENDING_LINE_MAX && txfd >= 0 && sync) {
        _cleanup_close_ int rf =
            openat(txfd, "log.row", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (rf < 0 || fs_write(rf, line, n) < 0)
            return -1;
        fs_syncset_add(sync, rf);
        fs_syncset_add(sync, txfd);
        char ptr[128];
        int k = snprintf(ptr, sizeof ptr, "{\"id\":%llu,\"outcome\":\"committed\",\"row_file\":true}\n",
                         (unsigned long long)id);
        return pending_append(ws, ptr, (size_t)k, sync);
    }
    return pending_append(ws, line, n, sync);
}

/* The record a pointer line names: tx/ID/log.row, parsed (NULL if none). */
static json_t *row_file_load(txbox_ws *ws, json_int_t id)
{
    char dn[32];
    snprintf(dn, sizeof dn, "%lld", (long long)id);
    _cleanup_close_ int d = openat(ws->txd, dn, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int fd = d >= 0 ? openat(d, "log.row", O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0 ||
        (uint64_t)st.st_size > ROW_FILE_MAX)
        return NULL;
    _cleanup_free_ char *b = xmalloc((size_t)st.st_size);
    if (read_all(fd, b, (size_t)st.st_size) != (ssize_t)st.st_size)
        return NULL;
    json_t *rec = json_loadb(b, (size_t)st.st_size, JSON_DISABLE_EOF_CHECK, NULL);
    if (json_integer_value(json_object_get(rec, "id")) != id) {
        json_decref(rec);
        return NULL;
    }
    return rec;
}

/* The log's tables again in the connection's temp schema (in memory), with
 * their rows and indices: unqualified names then mean these (SQLite looks
 * in temp first), so rows written here are seen by every query of this
 * connection and never reach the file. */
static bool shadow_tables(sqlite3 *db)
{
    if (exec(db, "PRAGMA temp_store=MEMORY", NULL) < 0)
        return false;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT type, name, sql FROM main.sqlite_master WHERE sql NOT NULL AND "
                           "name NOT LIKE 'sqlite_%' ORDER BY type = 'index'",
                           -1, &st, NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    while (ok && sqlite3_step(st) == SQLITE_ROW) {
        const char *type = (const char *)sqlite3_column_text(st, 0);
        const char *name = (const char *)sqlite3_column_text(st, 1);
        const char *sql = (const char *)sqlite3_column_text(st, 2);
        _cleanup_free_ char *q = NULL;
        if (!strcmp(type, "table") && !strncmp(sql, "CREATE TABLE ", 13))
            q = xasprintf("CREATE TEMP TABLE %s; INSERT INTO temp.\"%s\" SELECT * FROM main.\"%s\"", sql + 13,
                          name, name);
        else if (!strcmp(type, "index") && !strncmp(sql, "CREATE INDEX ", 13))
            q = xasprintf("CREATE INDEX temp.%s", sql + 13);
        else if (!strcmp(type, "index") && !strncmp(sql, "CREATE UNIQUE INDEX ", 20))
            q = xasprintf("CREATE UNIQUE INDEX temp.%s", sql + 20);
        ok = !q || exec(db, q, NULL) == 0;
    }
    sqlite3_finalize(st);
    return ok;
}

/* Moves the pending rows into the log (db, a fresh connection), as one
 * transaction, then empties the file. Its failures leave them pending: the
 * open goes on. When they cannot go in because the disk is full (the log
 * cannot grow), a reader still shows them: they go into shadows of the
 * tables (shadow_tables), and the file keeps them for a later import. Not
 * on any other failure (a writer holding the log a moment): the shadows
 * are a copy of the whole log. */
static bool pending_rows_into(txbox_ws *ws, sqlite3 *db, const char *buf, size_t len);

static void pending_import_mode(txbox_ws *ws, sqlite3 *db, bool reader)
{
    _cleanup_close_ int fd = openat(ws->sfd, PENDING_NAME, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || flock(fd, LOCK_EX) < 0 || fstat(fd, &st) < 0 || st.st_size == 0)
        return;
    if ((uint64_t)st.st_size > 4 * PENDING_MAX)
        return;
    size_t len = (size_t)st.st_size; /* appends wait for the lock held here */
    _cleanup_free_ char *buf = xmalloc(len);
    if (read_all(fd, buf, len) != (ssize_t)len)
        return;
    /* a committed row must be durable in the log before the file is
     * truncated: FULL (COMMIT fsyncs the WAL); the others need not */
    bool durable = memmem(buf, len, "\"outcome\":\"committed\"", 21) != NULL;
    if (!durable && exec(db, "PRAGMA synchronous=NORMAL", NULL) < 0)
        return;
    bool ok = pending_rows_into(ws, db, buf, len);
    if (ok)
        (void)ftruncate(fd, 0);
    if (!durable)
        (void)sqlite3_exec(db, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
    if (!ok && reader && low_space(ws) && shadow_tables(db))
        (void)pending_rows_into(ws, db, buf, len);
}

static bool pending_rows_into(txbox_ws *ws, sqlite3 *db, const char *buf, size_t len)
{
    sqlite3_stmt *ins = NULL;
    bool ok = exec(db, "BEGIN IMMEDIATE", NULL) == 0 &&
              sqlite3_prepare_v2(db, TX_INSERT, -1, &ins, NULL) == SQLITE_OK;
    for (const char *p = buf, *e; ok && p < buf + len; p = e + 1) {
        e = memchr(p, '\n', (size_t)(buf + len - p));
        if (!e)
            break; /* a line cut short by a crash */
        json_t *rec = json_loadb(p, (size_t)(e - p), 0, NULL);
        if (json_is_true(json_object_get(rec, "row_file"))) {
            json_t *full = row_file_load(ws, json_integer_value(json_object_get(rec, "id")));
            json_decref(rec);
            rec = full;
        }
        json_t *in = json_object_get(rec, "info");
        json_int_t id = json_integer_value(json_object_get(rec, "id"));
        const char *oc = json_string_value(json_object_get(rec, "outcome"));
        json_t *jrows = json_object_get(rec, "rows");
        struct rows rows = {0};
        bool committed = oc && !strcmp(oc, "committed") && jrows;
        if (json_is_object(in) && id > 0 && oc && (!committed || rows_from(jrows, &rows))) {
            rows.dropped = (uint64_t)json_integer_value(json_object_get(rec, "dropped"));
            rows.retained = (uint64_t)json_integer_value(json_object_get(rec, "retained"));
            sqlite3_reset(ins);
            sqlite3_clear_bindings(ins);
            bind_tx(ins, ws, (uint64_t)id, oc, in, committed, committed ? &rows : NULL,
                    json_is_true(json_object_get(rec, "recovered")),
                    json_number_value(json_object_get(rec, "finished")),
                    committed ? json_integer_value(json_object_get(rec, "gen")) : -1);
            ok = sqlite3_step(ins) == SQLITE_DONE &&
                 (!committed || write_rows(db, (uint64_t)id, &rows, NULL) == 0);
        }
        rows_free(&rows);
        json_decref(rec);
    }
    sqlite3_finalize(ins);
    if (ok && exec(db, "COMMIT", NULL) == 0)
        return true;
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return false;
}

static void pending_import(txbox_ws *ws, sqlite3 *db) { pending_import_mode(ws, db, false); }

void store_import_pending(txbox_ws *ws)
{
    struct stat st;
    if (fstatat(ws->sfd, PENDING_NAME, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_size == 0)
        return;
    sqlite3 *db;
    if (ws->db)
        pending_import(ws, ws->db);
    else if (store_shared(ws, &db, NULL) < 0) {
        /* the log cannot be opened: they stay pending */
    }
}

static int log_row(txbox_ws *ws, uint64_t id, const char *outcome, const char *info, const struct tx_ops *ops,
                   int txfd, struct fs_syncset *sync, struct store_prep *prep, txbox_error *err)
{
    bool committed = ops && !strcmp(outcome, "committed");
    /* Owned by a live process (us), or finished by recovery? */
    bool recovered = ws_tx_owner_dead(ws, id);
    json_t *in = info ? json_loads(info, 0, NULL) : NULL;
    if (!in) {
        in = json_object();
        if (!info)
            json_object_set_new(in, "reason",
                                json_string("its process died before the commit "
                                            "point; discarded by recovery"));
    }
    /* A row that needs no fsync, when this process has no connection
     * open: appended to the pending file instead (pending_add). */
    if (!ws->db && info && strcmp(outcome, "committed") &&
        pending_add(ws, id, outcome, in, recovered, NULL, -1, NULL, NULL) == 0) {
        json_decref(in);
        return 0;
    }
    struct rows rows = {0};
    if (committed && prep && prep->done && prep->ops == ops) {
        rows = prep->rows; /* hashed beside the journal's sync */
        memset(&prep->rows, 0, sizeof prep->rows);
    } else if (committed) {
        collect(ws, txfd, ops, &rows); /* outside the log's write lock */
    }
    /* A commit's row, when store_check left the log closed: appended to
     * the pending file, which joins the commit's sync set. */
    sqlite3_int64 gen = 0;
    if (committed && sync && !ws->db && info &&
        pending_add(ws, id, outcome, in, recovered, &rows, txfd, sync, &gen) == 0) {
        retained_add(ws, gen, rows.retained);
        rows_free(&rows);
        json_decref(in);
        return 0;
    }
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc = -1;
    bool durable = true;
    if (store_shared(ws, &db, err) < 0)
        goto out;
    /* A committed transaction's row is durable at COMMIT (synchronous=FULL:
     * the WAL is fsynced); any other outcome's row (read_only, blocked,
     * rolled_back, conflict, rejected...) is written with synchronous=NORMAL,
     * without an fsync: it records a transaction that changed nothing, and
     * nothing reads it back to decide anything (held transactions live in
     * tx/ID/, undo and gc read only committed rows). A power loss may drop
     * the last such rows; it never corrupts the log (WAL) nor drops a
     * committed row (the next FULL commit, or checkpoint, fsyncs the WAL
     * with every frame before it). The setting is the connection's: FULL
     * is restored right after, for every other write (gc's among them). */
    durable = !strcmp(outcome, "committed") && !sync;
    if (!durable && exec(db, "PRAGMA synchronous=NORMAL", err) < 0)
        goto out;
    if (exec(db, "BEGIN IMMEDIATE", err) < 0)
        goto out;
    int prc = sqlite3_prepare_v2(db, TX_INSERT, -1, &st, NULL);
    if (prc != SQLITE_OK) {
        db_fail(db, prc, err, "cannot record the transaction");
        goto rollback;
    }
    if (!info) {
        /* A row from recovery without a record never replaces a real one. */
        sqlite3_stmt *ex = NULL;
        bool have = false;
        if (sqlite3_prepare_v2(db, "SELECT 1 FROM tx WHERE id=?1", -1, &ex, NULL) == SQLITE_OK) {
            sqlite3_bind_int64(ex, 1, (sqlite3_int64)id);
            have = sqlite3_step(ex) == SQLITE_ROW;
        }
        sqlite3_finalize(ex);
        if (have) {
            rc = exec(db, "COMMIT", err);
            goto out;
        }
    }
    bind_tx(st, ws, id, outcome, in, committed, committed ? &rows : NULL, recovered, wall_time(), 0);
    if ((prc = sqlite3_step(st)) != SQLITE_DONE) {
        db_fail(db, prc, err, "cannot record the transaction");
        goto rollback;
    }
    if (committed && write_rows(db, id, &rows, err) < 0)
        goto rollback;
    rc = exec(db, "COMMIT", err);
    if (rc == 0 && sync) {
        /* The committed frames are in the WAL (a TRUNCATE checkpoint at
         * this commit has synced them into the database file first, and
         * left it empty): its file joins the caller's sync set. Where it
         * cannot be opened, the set syncs the whole filesystem. */
        _cleanup_close_ int wal = openat(ws->sfd, DB_NAME "-wal", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (wal >= 0) {
            fs_syncset_add(sync, wal);
            fs_syncset_add(sync, ws->sfd); /* its name, if it is new */
        } else {
            sync->all = true;
        }
    }
    if (rc == 0)
        goto out;
rollback:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    rc = -1;
out:
    sqlite3_finalize(st);
    if (db && !durable)
        (void)sqlite3_exec(db, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
    rows_free(&rows);
    json_decref(in);
    return rc;
}

int store_log(txbox_ws *ws, uint64_t id, const char *outcome, const char *info, const struct tx_ops *ops,
              int txfd, txbox_error *err)
{
    return log_row(ws, id, outcome, info, ops, txfd, NULL, NULL, err);
}

int store_log_commit(txbox_ws *ws, uint64_t id, const char *info, const struct tx_ops *ops, int txfd,
                     struct fs_syncset *sync, struct store_prep *prep, txbox_error *err)
{
    return log_row(ws, id, "committed", info, ops, txfd, sync, prep, err);
}

/* ---- reading ---- */

static json_t *col_json(sqlite3_stmt *st, int i)
{
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER:
        return json_integer(sqlite3_column_int64(st, i));
    case SQLITE_FLOAT:
        return json_real(sqlite3_column_double(st, i));
    case SQLITE_TEXT:
        return json_text((const char *)sqlite3_column_text(st, i), (size_t)sqlite3_column_bytes(st, i),
                         false);
    case SQLITE_BLOB:
        return json_text(sqlite3_column_blob(st, i), (size_t)sqlite3_column_bytes(st, i), true);
    default:
        return json_null();
    }
}

static json_t *id_json(sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return json_null();
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)sqlite3_column_int64(st, i));
    return json_string(b);
}

/* A row as an object; columns named *_json are parsed, ids become strings. */
static json_t *row_object(sqlite3_stmt *st)
{
    json_t *o = json_object();
    for (int i = 0; i < sqlite3_column_count(st); i++) {
        const char *name = sqlite3_column_name(st, i);
        size_t l = strlen(name);
        json_t *v;
        if (!strcmp(name, "tx") || !strcmp(name, "undo_of") || !strcmp(name, "undone_by")) {
            v = id_json(st, i);
        } else if (l > 5 && !strcmp(name + l - 5, "_json")) {
            const char *t = (const char *)sqlite3_column_text(st, i);
            v = t ? json_loads(t, JSON_DECODE_ANY, NULL) : NULL;
            if (!v)
                v = json_null();
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)(l - 5), name);
            json_object_set_new(o, key, v);
            continue;
        } else {
            v = col_json(st, i);
        }
        json_object_set_new(o, name, v);
    }
    return o;
}

#define TX_COLUMNS                                                                                \
    "id AS tx, outcome, gen, started, finished, duration_ms, command_ms, overhead_ms, recovered," \
    " workspace, cwd, command, argv AS argv_json, verdict, rule, reason,"                         \
    " protections AS protections_json, exit_code, signal, backend, n_added, n_modified,"          \
    " n_deleted, changes_truncated, undo_of, forced,"                                             \
    " (SELECT min(u.id) FROM tx u WHERE u.undo_of = tx.id AND u.outcome = 'committed')"           \
    " AS undone_by, retained_bytes, pruned, pruned_bytes"

int txbox_log_json(txbox_ws *ws, long limit, char **json, txbox_error *err)
{
    *json = NULL;
    sqlite3 *db;
    if (store_open(ws, false, &db, err) < 0) {
        if (err && err->code == ENOENT) {
            *json = xstrdup("[]");
            return 0;
        }
        return -1;
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT " TX_COLUMNS " FROM tx ORDER BY id DESC LIMIT ?1", -1, &st, NULL);
    json_t *a = json_array();
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, limit > 0 ? limit : -1);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            json_array_append_new(a, row_object(st));
    }
    sqlite3_finalize(st);
    int r = 0;
    if (rc != SQLITE_DONE)
        r = db_fail(db, rc, err, "cannot read it");
    else
        *json = json_dumps(a, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(a);
    store_close(db);
    return r;
}

int store_open_for(txbox_ws *ws, const char *tx, uint64_t *id, sqlite3 **db, txbox_error *err)
{
    if (parse_txid(tx, id, err) < 0)
        return -1;
    if (store_open(ws, false, db, err) < 0) {
        if (err && err->code == ENOENT)
            return tx_err(err, ENOENT, "transaction %s is not in the audit log", tx);
        return -1;
    }
    return 0;
}

int txbox_show_json(txbox_ws *ws, const char *tx, char **json, txbox_error *err)
{
    *json = NULL;
    uint64_t id;
    sqlite3 *db;
    if (store_open_for(ws, tx, &id, &db, err) < 0)
        return -1;
    sqlite3_stmt *st = NULL;
    json_t *o = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT " TX_COLUMNS ", stdout_tail AS stdout, stderr_tail AS"
                                " stderr, stdout_dropped, stderr_dropped, info AS info_json"
                                " FROM tx WHERE id=?1",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            o = row_object(st);
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc == SQLITE_DONE) {
        store_close(db);
        return tx_err(err, ENOENT, "transaction %s is not in the audit log", tx);
    }
    if (rc != SQLITE_ROW) {
        db_fail(db, rc, err, "cannot read it");
        store_close(db);
        return -1;
    }
    json_t *ch = json_array();
    rc = sqlite3_prepare_v2(db,
                            "SELECT path, kind, op, sub, type_before, type_after, size_before,"
                            " size_after, mode_before, mode_after, hash_before, hash_after"
                            " FROM change WHERE tx=?1 ORDER BY seq",
                            -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            json_array_append_new(ch, row_object(st));
    }
    sqlite3_finalize(st);
    json_object_set_new(o, "write_set", ch);
    int r = 0;
    if (rc != SQLITE_DONE)
        r = db_fail(db, rc, err, "cannot read it");
    else
        *json = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(o);
    store_close(db);
    return r;
}
