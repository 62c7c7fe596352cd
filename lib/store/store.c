/* The audit log: one SQLite database, .txbox/log.db.
 *
 * Durability: WAL mode. A committed transaction's row is made durable
 * by the commit protocol, in finalize's sync set with the workspace's
 * changes (store_log_commit), one sync for all: as a line appended to
 * .txbox/log.pending, whose file joins the set, when store_check left the
 * log closed (the usual case; store_pending.c), or in the log itself,
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
 * cache of it (store_retain.c).
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
 * durable (store_prep, store_writeset.c: the old entries from the workspace, the new ones
 * from the upper, before the apply moves them); recovery, which has no
 * such thread, hashes the same entries after the apply (tx/ID/undo/N, the
 * workspace), inside finalize().
 *
 * VFS (store_vfs.c): the database is opened through "txbox", the default VFS but for
 * real_open(); with TXBOX_FAULT set, through "txbox-fault", a shim whose
 * writes and syncs are also fault points of fsops.c, so the crash matrix
 * covers the log's own I/O.
 *
 * The log's code is in parts, store*.c, which call one way down the list
 * in store_int.h; this file opens the log, checks it before a commit point
 * and writes a transaction's row. */
#include <fcntl.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "fsops.h"
#include "result.h"
#include "store.h"
#include "store_int.h"

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

static int store_open_mode(txbox_ws *ws, bool write, bool exclusive, sqlite3 **out, txbox_error *err);
static int empty_log_lost(txbox_ws *ws, txbox_error *err);

int store_open(txbox_ws *ws, bool write, sqlite3 **out, txbox_error *err)
{
    /* A reader waits out a writer that holds the log alone for a moment
     * (a recovery's rows, a checkpoint, a full disk's EXCLUSIVE mode), up
     * to the busy timeout as a whole, not only per statement. */
    uint64_t until = now_ns() + (uint64_t)busy_ms() * 1000000;
    for (unsigned pause_ms = 5;; pause_ms = pause_ms < 200 ? pause_ms * 2 : 200) {
        bool exclusive = store_low_space(ws);
        int r = store_open_mode(ws, write, exclusive, out, err);
        if (r == -2) /* no shared memory for the WAL index: without it */
            r = store_open_mode(ws, write, true, out, err);
        if (r == 0 || write || !err || err->code != EBUSY || now_ns() >= until)
            return r < 0 ? -1 : 0;
        usleep(pause_ms * 1000);
    }
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
                             store_vfs_name());
    if (rc != SQLITE_OK) {
        store_db_fail(db, rc, err, "cannot open it");
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
    if (exclusive && store_exec(db, "PRAGMA locking_mode=EXCLUSIVE", err) < 0)
        goto fail;
    int v;
    if (store_user_version(db, &v, err) < 0) {
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
        store_db_fail(db, rc, err, "cannot set WAL mode");
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
    if (store_exec(db, "PRAGMA synchronous=FULL", err) < 0 || store_migrate(db, err) < 0)
        goto fail;
    /* A cheap sanity read of the tables a write touches: a damaged file is
     * mostly found here, before a commit point. */
    if (store_exec(db, "SELECT max(id) FROM tx; SELECT count(*) FROM setting", err) < 0)
        goto fail;
    store_pending_import(ws, db, !write); /* a reader sees them even on a full disk */
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
    /* Or another process is making the log right now (its first open made
     * the file; the schema follows within milliseconds): a session's
     * steward, say, closing a commit while a reader comes. Emptied, it
     * stays empty. */
    for (unsigned ms = 0; ms < 500; ms += 10) {
        usleep(10000);
        if (fstatat(ws->sfd, DB_NAME, &wst, AT_SYMLINK_NOFOLLOW) < 0 || wst.st_size > 0 ||
            (fstatat(ws->sfd, DB_NAME "-wal", &wst, AT_SYMLINK_NOFOLLOW) == 0 && wst.st_size > 32))
            return 0;
    }
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
     * (store_pending.c): the file's header is checked, without
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

/* One object, dumped once: its change list may hold 10,000 paths (a dump
 * and a parse of those cost about 3 ms each). */
char *store_info(const txbox_result *r, const char *ctx)
{
    json_t *c = ctx ? json_loads(ctx, 0, NULL) : NULL;
    if (!c)
        return txbox_result_json(r);
    json_t *o = result_obj(r);
    json_object_update_missing(o, c);
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(o);
    json_decref(c);
    return s;
}

void store_import_pending(txbox_ws *ws)
{
    struct stat st;
    if (fstatat(ws->sfd, PENDING_NAME, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_size == 0)
        return;
    sqlite3 *db;
    if (ws->db)
        store_pending_import(ws, ws->db, false);
    else if (store_shared(ws, &db, NULL) < 0) {
        /* the log cannot be opened: they stay pending */
    }
}

/* A transaction's info as an object: {} when it cannot be read, and
 * without info (a row recovery writes), why there is none. */
static json_t *info_obj(const char *info)
{
    json_t *in = info ? json_loads(info, 0, NULL) : NULL;
    if (json_is_object(in))
        return in;
    json_decref(in);
    in = json_object();
    if (!info)
        json_object_set_new(in, "reason",
                            json_string("its process died before the commit "
                                        "point; discarded by recovery"));
    return in;
}

static int log_row(txbox_ws *ws, uint64_t id, const char *outcome, const char *info, const struct tx_ops *ops,
                   int txfd, struct fs_syncset *sync, struct store_prep *prep, txbox_error *err)
{
    bool committed = ops && !strcmp(outcome, "committed");
    /* Owned by a live process (us), or finished by recovery? */
    bool recovered = ws_tx_owner_dead(ws, id);
    /* A commit's own info (prep: this process's commit, whose info is the
     * dump journal_commit was given) goes into a pending line as the text
     * it is; any other is parsed (and read as {} when it cannot be), as is
     * every row written into the log itself. */
    const char *text = prep && info && pending_info_ok(info) ? info : NULL;
    json_t *in = NULL;
    if (!text)
        in = info_obj(info);
    /* A row that needs no fsync, when this process has no connection
     * open: appended to the pending file instead (pending_add). */
    if (!ws->db && info && strcmp(outcome, "committed") &&
        store_pending_add(ws, id, outcome, text, in, recovered, NULL, -1, NULL, NULL) == 0) {
        json_decref(in);
        return 0;
    }
    struct rows rows = {0};
    if (committed && !store_prep_take(prep, ops, &rows)) /* hashed beside the journal's sync? */
        store_collect(ws, txfd, ops, &rows);             /* outside the log's write lock */
    /* A commit's row, when store_check left the log closed: appended to
     * the pending file, which joins the commit's sync set. */
    sqlite3_int64 gen = 0;
    if (committed && sync && !ws->db && info &&
        store_pending_add(ws, id, outcome, text, in, recovered, &rows, txfd, sync, &gen) == 0) {
        store_retained_add(ws, gen, rows.retained);
        store_rows_free(&rows);
        json_decref(in);
        return 0;
    }
    if (!in)
        in = info_obj(info);
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
    if (!durable && store_exec(db, "PRAGMA synchronous=NORMAL", err) < 0)
        goto out;
    if (store_exec(db, "BEGIN IMMEDIATE", err) < 0)
        goto out;
    int prc = sqlite3_prepare_v2(db, store_tx_insert, -1, &st, NULL);
    if (prc != SQLITE_OK) {
        store_db_fail(db, prc, err, "cannot record the transaction");
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
            rc = store_exec(db, "COMMIT", err);
            goto out;
        }
    }
    store_bind_tx(st, ws, id, outcome, in, committed, committed ? &rows : NULL, recovered, wall_time(), 0);
    if ((prc = sqlite3_step(st)) != SQLITE_DONE) {
        store_db_fail(db, prc, err, "cannot record the transaction");
        goto rollback;
    }
    if (committed && store_write_rows(db, id, &rows, err) < 0)
        goto rollback;
    rc = store_exec(db, "COMMIT", err);
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
    store_rows_free(&rows);
    json_decref(in);
    return rc;
}

void store_sync_rows(txbox_ws *ws, struct fs_syncset *s)
{
    static const char *const names[] = {PENDING_NAME, DB_NAME, DB_NAME "-wal"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        int fd = openat(ws->sfd, names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            fs_syncset_add(s, fd);
            close(fd);
        }
    }
    fs_syncset_add(s, ws->sfd); /* a pending file's name, if it is new */
}

bool store_has_commit_row(txbox_ws *ws, uint64_t id)
{
    char head[80];
    int hl = snprintf(head, sizeof head, "{\"id\":%llu,\"outcome\":\"committed\",", (unsigned long long)id);
    if (store_pending_has(ws, head, (size_t)hl))
        return true;
    sqlite3 *db = NULL;
    if (store_open(ws, false, &db, NULL) < 0) /* (which moves the pending rows in) */
        return false;
    sqlite3_stmt *q = NULL;
    bool has = sqlite3_prepare_v2(db, "SELECT 1 FROM tx WHERE id=?1 AND outcome='committed'", -1, &q, NULL) ==
                   SQLITE_OK &&
               sqlite3_bind_int64(q, 1, (sqlite3_int64)id) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW;
    sqlite3_finalize(q);
    store_close(db);
    return has;
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
