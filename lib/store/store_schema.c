/* The audit log's schema and its migrations (store.c's "Schema"), and the
 * SQL helpers every part of the log shares: errors as txbox_error, one
 * statement, the full-disk test. */
#include <sys/statvfs.h>

#include <sqlite3.h>

#include "store.h"
#include "store_int.h"

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
    /* v4: the bytes a commit destroyed that existed nowhere else (its
     * losses, lib/tx/losses.h; NULL: none measured): retention keeps the
     * pre-images of such transactions longest */
    "ALTER TABLE tx ADD COLUMN lost_bytes INTEGER;",
    /* v5: a lost file's last writer (store_origin), the newest change of
     * a path before a transaction: the index on the path alone made it
     * read and sort every change of the path, up to eight times a loss
     * (0.08 ms a query at 250 changes, growing with the history); on
     * (path, tx) it reads back from the newest, 0.004 ms */
    "CREATE INDEX change_path_tx ON change(path, tx);"
    "DROP INDEX change_path;",
};

int store_db_fail(sqlite3 *db, int rc, txbox_error *err, const char *what)
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

int store_exec(sqlite3 *db, const char *sql, txbox_error *err)
{
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : store_db_fail(db, rc, err, "cannot update it");
}

int store_user_version(sqlite3 *db, int *v, txbox_error *err)
{
    sqlite3_stmt *st = NULL;
    *v = 0;
    int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        *v = sqlite3_column_int(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : store_db_fail(db, rc, err, "cannot read it");
}

int store_migrate(sqlite3 *db, txbox_error *err)
{
    int v;
    if (store_user_version(db, &v, err) < 0)
        return -1;
    if (v == STORE_SCHEMA_VERSION)
        return 0;
    if (store_exec(db, "BEGIN IMMEDIATE", err) < 0)
        return -1;
    if (store_user_version(db, &v, err) < 0) /* another process may have done it */
        goto fail;
    if (v > STORE_SCHEMA_VERSION) {
        tx_err(err, EPROTO, "the audit log has schema version %d, newer than this txbox's (%d)", v,
               STORE_SCHEMA_VERSION);
        goto fail;
    }
    for (; v < STORE_SCHEMA_VERSION; v++) {
        if (store_exec(db, migrations[v], err) < 0)
            goto fail;
        char pv[48];
        snprintf(pv, sizeof pv, "PRAGMA user_version=%d", v + 1);
        if (store_exec(db, pv, err) < 0)
            goto fail;
    }
    if (store_exec(db, "COMMIT", err) < 0)
        goto fail;
    return 0;
fail:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return tx_err_ctx(err, "cannot migrate the audit log");
}

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

bool store_low_space(txbox_ws *ws)
{
    struct statvfs v;
    return fstatvfs(ws->sfd, &v) == 0 && (uint64_t)v.f_bavail * v.f_frsize < LOW_SPACE;
}
