/* The audit log: rows written by the commit protocol, idempotent re-logging
 * (what recovery does), the write set's hashes, schema checks, ids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fsops.h"
#include "store.h"

static char root[64];
static txbox_ws *ws;

static void mkfile(int dfd, const char *p, const char *text)
{
    int fd = openat(dfd, p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/txbox-store-XXXXXX");
    assert_non_null(mkdtemp(root));
    txbox_error e = {0};
    assert_int_equal(txbox_ws_open(root, TXBOX_WS_CREATE, &ws, &e), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    txbox_ws_close(ws);
    tree_remove(AT_FDCWD, root);
    return 0;
}

static sqlite3 *db_open(void)
{
    char p[128];
    snprintf(p, sizeof p, "%s/.txbox/log.db", root);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    return db;
}

static long long q_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static char *q_text(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    const unsigned char *t = sqlite3_column_text(st, 0);
    char *r = t ? xstrdup((const char *)t) : NULL;
    sqlite3_finalize(st);
    return r;
}

#define SHA_ABC "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define SHA_OLD "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" /* "" */

/* A new transaction and its upper (*up), whose root has the workspace
 * root's mode (so the root's mode is unchanged). */
static void new_tx_upper(uint64_t *id, int *txfd, int *act, int *up)
{
    txbox_error e = {0};
    assert_int_equal(ws_new_tx(ws, id, txfd, act, NULL, &e), 0);
    mkdirat(*txfd, "upper", 0755);
    *up = openat(*txfd, "upper", O_RDONLY | O_DIRECTORY);
    struct stat rst;
    assert_int_equal(fstat(ws->fd, &rst), 0);
    assert_int_equal(fchmod(*up, rst.st_mode & 07777), 0);
}

static void commit_logs_write_set_once(void **state)
{
    (void)state;
    txbox_error e = {0};
    mkfile(ws->fd, "f", "");
    uint64_t id;
    int txfd, act, up;
    new_tx_upper(&id, &txfd, &act, &up);
    mkfile(up, "f", "abc");
    mkfile(up, "new", "abc");
    struct tx_ops ops = {0};
    assert_int_equal(scan_upper(up, ws->fd, !ws->root, &ops, NULL, &e), 0);
    const char *info = "{\"command\":\"echo abc\",\"cwd\":\".\",\"exit_code\":0,\"verdict\":"
                       "\"uncertain\",\"started\":1.5,\"stdout\":\"out\",\"changes\":{\"added\":"
                       "[\"new\"],\"modified\":[\"f\"],\"deleted\":[]}}";
    uint64_t gen;
    int rc = journal_commit(ws, id, txfd, 0, &ops, info, NULL, 0, &gen, &e);
    if (rc)
        print_error("%s\n", e.msg);
    assert_int_equal(rc, 0);
    /* The row waits in log.pending (made durable with the commit), the log
     * not even created; recovery would append it again, and the move keeps
     * one row and one write set. */
    struct stat pst;
    assert_int_equal(fstatat(ws->sfd, "log.db", &pst, 0), -1);
    int pfd = openat(ws->sfd, "log.pending", O_RDWR | O_APPEND);
    assert_true(pfd >= 0);
    char line[16384];
    ssize_t pn = pread(pfd, line, sizeof line, 0);
    assert_true(pn > 0 && pn < (ssize_t)sizeof line && line[pn - 1] == '\n');
    /* recovery's question (journal.c: a journal left open once logged):
     * the row is found in the pending file */
    assert_true(store_has_commit_row(ws, id));
    assert_int_equal(write(pfd, line, (size_t)pn), pn);
    close(pfd);
    store_import_pending(ws);                  /* any open of the log moves the rows in */
    assert_true(store_has_commit_row(ws, id)); /* and then in the log */
    assert_false(store_has_commit_row(ws, id + 1));
    assert_int_equal(fstatat(ws->sfd, "log.pending", &pst, 0), 0);
    assert_int_equal(pst.st_size, 0);
    sqlite3 *db = db_open();
    assert_int_equal(q_int(db, "SELECT count(*) FROM tx"), 1);
    assert_int_equal(q_int(db, "SELECT count(*) FROM change"), 2);
    assert_int_equal(q_int(db, "SELECT gen FROM tx"), 1);
    assert_int_equal(q_int(db, "SELECT retained_bytes FROM tx"), 0);
    assert_int_equal(q_int(db, "SELECT n_added + n_modified FROM tx"), 2);
    char *s = q_text(db, "SELECT hash_after FROM change WHERE CAST(path AS TEXT)='f'");
    assert_string_equal(s, SHA_ABC);
    free(s);
    s = q_text(db, "SELECT hash_before FROM change WHERE CAST(path AS TEXT)='f'");
    assert_string_equal(s, SHA_OLD);
    free(s);
    s = q_text(db, "SELECT kind FROM change WHERE CAST(path AS TEXT)='new'");
    assert_string_equal(s, "added");
    free(s);
    s = q_text(db, "SELECT command FROM tx");
    assert_string_equal(s, "echo abc");
    free(s);
    s = q_text(db, "SELECT stdout_tail FROM tx");
    assert_string_equal(s, "out");
    free(s);
    /* Recovery logs the same commit again: nothing doubles. */
    assert_int_equal(store_log(ws, id, "committed", info, &ops, txfd, &e), 0);
    assert_int_equal(q_int(db, "SELECT count(*) FROM tx"), 1);
    assert_int_equal(q_int(db, "SELECT count(*) FROM change"), 2);
    /* A recovery row (no record) never replaces a real one. */
    assert_int_equal(store_log(ws, id, "rolled_back", NULL, NULL, txfd, &e), 0);
    s = q_text(db, "SELECT outcome FROM tx");
    assert_string_equal(s, "committed");
    free(s);
    /* ... but stands for a transaction that has none. */
    assert_int_equal(store_log(ws, id + 100, "rolled_back", NULL, NULL, txfd, &e), 0);
    s = q_text(db, "SELECT outcome FROM tx WHERE id=101");
    assert_string_equal(s, "rolled_back");
    free(s);
    assert_int_equal(q_int(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    /* Retention's count after each commit reads the partial index, not
     * the whole history. */
    sqlite3_stmt *qp = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "EXPLAIN QUERY PLAN " STORE_RETAINED_SQL, -1, &qp, NULL),
                     SQLITE_OK);
    bool indexed = false, scans = false;
    while (sqlite3_step(qp) == SQLITE_ROW) {
        const char *d = (const char *)sqlite3_column_text(qp, 3);
        indexed |= d && strstr(d, "tx_retained") != NULL;
        scans |= d && strstr(d, "SCAN tx") != NULL;
    }
    sqlite3_finalize(qp);
    assert_true(indexed && !scans);
    s = q_text(db, "PRAGMA journal_mode");
    assert_string_equal(s, "wal");
    free(s);
    sqlite3_close(db);
    ops_free(&ops);
    close(up);
    close(txfd);
    ws_end_tx(ws, id, act);
}

/* A write set too large for a line of log.pending (thousands of paths)
 * waits in tx/ID/log.row, which the pending line points at: the commit
 * never needs the log after its commit point. */
static void large_commit_row_in_its_own_file(void **state)
{
    (void)state;
    txbox_error e = {0};
    uint64_t id;
    int txfd, act, up;
    new_tx_upper(&id, &txfd, &act, &up);
    assert_int_equal(mkdirat(up, "big", 0755), 0);
    int big = openat(up, "big", O_RDONLY | O_DIRECTORY);
    for (int i = 0; i < 1500; i++) {
        char n[64];
        snprintf(n, sizeof n, "generated_module_number_%04d.py", i);
        mkfile(big, n, "x");
    }
    close(big);
    struct tx_ops ops = {0};
    assert_int_equal(scan_upper(up, ws->fd, !ws->root, &ops, NULL, &e), 0);
    assert_true(ops.n <= 2); /* the new tree (and the root's times) */
    uint64_t gen;
    int rc =
        journal_commit(ws, id, txfd, 0, &ops, "{\"command\":\"gen\",\"exit_code\":0}", NULL, 0, &gen, &e);
    if (rc)
        print_error("%s\n", e.msg);
    assert_int_equal(rc, 0);
    struct stat st;
    assert_int_equal(fstatat(txfd, "log.row", &st, 0), 0);
    assert_true(st.st_size > 64 * 1024);
    int pfd = openat(ws->sfd, "log.pending", O_RDONLY);
    char line[256];
    ssize_t n = read(pfd, line, sizeof line - 1);
    close(pfd);
    assert_true(n > 0 && n < 200);
    line[n] = 0;
    assert_non_null(strstr(line, "\"row_file\":true"));
    store_import_pending(ws);
    sqlite3 *db = db_open();
    char q[128];
    snprintf(q, sizeof q, "SELECT count(*) FROM change WHERE tx=%llu", (unsigned long long)id);
    assert_int_equal(q_int(db, q), 1501);
    snprintf(q, sizeof q, "SELECT gen FROM tx WHERE id=%llu AND outcome='committed'", (unsigned long long)id);
    assert_int_equal(q_int(db, q), 1);
    sqlite3_close(db);
    assert_int_equal(fstatat(ws->sfd, "log.pending", &st, 0), 0);
    assert_int_equal(st.st_size, 0);
    ops_free(&ops);
    close(up);
    close(txfd);
    ws_end_tx(ws, id, act);
}

static void refuses_newer_and_damaged(void **state)
{
    (void)state;
    txbox_error e = {0};
    assert_int_equal(store_check(ws, 0, &e), 0);
    sqlite3 *db = db_open();
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version=99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    /* from the header (a row that will wait in log.pending), and opened
     * (one of a commit too large to wait there) */
    assert_int_equal(store_check(ws, 0, &e), -1);
    assert_non_null(strstr(e.msg, "newer"));
    assert_int_equal(store_check(ws, 100000, &e), -1);
    assert_non_null(strstr(e.msg, "newer"));
    char *j = NULL;
    assert_int_equal(txbox_log_json(ws, 0, &j, &e), -1);
    assert_null(j);
    /* garbage, the WAL gone with the old file (a WAL left behind would
     * still hold the page with the version set above) */
    unlinkat(ws->sfd, "log.db-wal", 0);
    unlinkat(ws->sfd, "log.db-shm", 0);
    mkfile(ws->sfd, "log.db",
           "this is not an SQLite database, not at all, no........................"
           "..........................................................");
    assert_int_equal(store_check(ws, 0, &e), -1);
    assert_int_equal(e.code, EBADMSG);
    assert_non_null(strstr(e.msg, "damaged"));
    assert_int_equal(store_check(ws, 100000, &e), -1);
    assert_int_equal(e.code, EBADMSG);
    assert_non_null(strstr(e.msg, "damaged"));
    /* a copy cut short (no WAL): its header counts more pages than it has */
    unlinkat(ws->sfd, "log.db", 0);
    assert_int_equal(store_check(ws, 100000, &e), 0); /* created */
    store_close(ws->db);
    ws->db = NULL;
    db = db_open();
    assert_int_equal(sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(store_check(ws, 0, &e), 0);
    struct stat st;
    assert_int_equal(fstatat(ws->sfd, "log.db", &st, 0), 0);
    assert_true(st.st_size >= 8192);
    int tfd = openat(ws->sfd, "log.db", O_WRONLY);
    assert_true(tfd >= 0);
    assert_int_equal(ftruncate(tfd, 4096), 0);
    close(tfd);
    unlinkat(ws->sfd, "log.db-wal", 0);
    unlinkat(ws->sfd, "log.db-shm", 0);
    assert_int_equal(store_check(ws, 0, &e), -1);
    assert_non_null(strstr(e.msg, "shorter"));
    /* a missing one: nothing to check (the first open creates it) */
    unlinkat(ws->sfd, "log.db", 0);
    assert_int_equal(store_check(ws, 0, &e), 0);
    assert_int_equal(fstatat(ws->sfd, "log.db", &st, 0), -1);
}

static void hashes_and_ids(void **state)
{
    (void)state;
    mkfile(ws->fd, "h", "abc");
    char hex[65];
    uint64_t size = 0;
    assert_int_equal(hash_file_at(ws->fd, "h", hex, &size), 0);
    assert_string_equal(hex, SHA_ABC);
    assert_int_equal(size, 3);
    hash_bytes_hex("abc", 3, hex);
    assert_string_equal(hex, SHA_ABC);
    assert_int_equal(hash_file_at(ws->fd, ".", hex, &size), -1); /* not a file */
    uint64_t id;
    txbox_error e = {0};
    assert_int_equal(parse_txid("42", &id, &e), 0);
    assert_int_equal(id, 42);
    const char *bad[] = {"", "0", "abc", "1a", "-1", " 1", "99999999999999999999", "1/2"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(parse_txid(bad[i], &id, &e), -1);
    assert_int_equal(parse_txid(NULL, &id, &e), -1);
}

/* rchar of /proc/self/io: the bytes this process read so far */
static unsigned long long bytes_read(void)
{
    char *s = NULL;
    txbox_error e = {0};
    assert_int_equal(read_file_at(AT_FDCWD, "/proc/self/io", 4096, &s, NULL, &e), 0);
    unsigned long long v = 0;
    char *p = strstr(s, "rchar:");
    assert_non_null(p);
    v = strtoull(p + 6, NULL, 10);
    free(s);
    return v;
}

/* A sparse file hashes to the digest of its whole content, its holes read
 * as zeros, without reading them (a 256 MiB hole costs no 256 MiB of
 * reads): data at the start, in the middle, at the end, none at all. */
static void sparse_files_hash_as_their_content(void **state)
{
    (void)state;
    static const struct {
        off_t at[3];
        off_t size;
    } cases[] = {
        {{0, 3 << 20, -1}, 5 << 20}, {{1 << 20, -1, -1}, 4 << 20}, {{(8 << 20) - 5, -1, -1}, 8 << 20},
        {{-1, -1, -1}, 6 << 20},     {{12345, 70000, -1}, 200000},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int sp = openat(ws->fd, "sparse", O_CREAT | O_RDWR | O_TRUNC, 0644);
        int dn = openat(ws->fd, "dense", O_CREAT | O_RDWR | O_TRUNC, 0644);
        assert_true(sp >= 0 && dn >= 0);
        assert_int_equal(ftruncate(sp, cases[i].size), 0);
        for (off_t off = 0; off < cases[i].size; off += 4096) { /* the dense copy: every byte written */
            static const char z[4096];
            size_t n = (size_t)(cases[i].size - off < 4096 ? cases[i].size - off : 4096);
            assert_int_equal(pwrite(dn, z, n, off), (ssize_t)n);
        }
        for (int k = 0; k < 3 && cases[i].at[k] >= 0; k++) {
            assert_int_equal(pwrite(sp, "data", 4, cases[i].at[k]), 4);
            assert_int_equal(pwrite(dn, "data", 4, cases[i].at[k]), 4);
        }
        fsync(sp);
        close(sp);
        close(dn);
        char hs[65], hd[65];
        uint64_t ss = 0, sd = 0;
        assert_int_equal(hash_file_at(ws->fd, "sparse", hs, &ss), 0);
        assert_int_equal(hash_file_at(ws->fd, "dense", hd, &sd), 0);
        assert_string_equal(hs, hd);
        assert_int_equal(ss, (uint64_t)cases[i].size);
        assert_int_equal(sd, ss);
    }
    /* the holes are not read */
    int big = openat(ws->fd, "big", O_CREAT | O_RDWR | O_TRUNC, 0644);
    assert_true(big >= 0);
    assert_int_equal(ftruncate(big, 256 << 20), 0);
    assert_int_equal(pwrite(big, "x", 1, 100 << 20), 1);
    fsync(big);
    close(big);
    struct stat st;
    assert_int_equal(fstatat(ws->fd, "big", &st, 0), 0);
    if ((uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size) { /* (a filesystem that keeps holes) */
        char h[65];
        uint64_t n = 0;
        unsigned long long r0 = bytes_read();
        assert_int_equal(hash_file_at(ws->fd, "big", h, &n), 0);
        assert_true(bytes_read() - r0 < (1u << 20));
        assert_int_equal(n, 256u << 20);
    }
}

/* Rows of transactions that changed nothing are written without an fsync
 * (synchronous=NORMAL); a committed one's with it (FULL). And with many
 * short-lived writers (every txbox run is one; each rebuilds the WAL index)
 * the WAL file is restarted by checkpoints instead of growing with every
 * run (it used to: ~1000 frames after a hundred runs, all read back at
 * every start and checkpointed again at every commit). */
static void log_fsyncs_and_wal_size(void **state)
{
    (void)state;
    txbox_error e = {0};
    assert_int_equal(store_check(ws, 100000, &e),
                     0); /* created, migrated (a commit too large for log.pending) */
    /* every fsync of the log fails from now on */
    setenv("TXBOX_FAULT", "fsync:1:EIO", 1);
    fs_fault_arm();
    store_close(ws->db);
    ws->db = NULL;
    assert_int_equal(store_log(ws, 1, "read_only", "{}", NULL, -1, &e), 0);
    assert_int_equal(store_log(ws, 2, "blocked", "{}", NULL, -1, &e), 0);
    assert_int_equal(store_log(ws, 3, "committed", "{}", NULL, -1, &e), -1);
    assert_int_equal(e.code, EIO);
    fs_fault_disarm();
    unsetenv("TXBOX_FAULT");
    store_close(ws->db);
    ws->db = NULL;
    for (uint64_t id = 4; id <= 300; id++) {
        /* with a connection open: into the log, not log.pending */
        assert_int_equal(store_check(ws, 100000, &e), 0);
        assert_int_equal(store_log(ws, id, "read_only", "{\"command\":\"true\"}", NULL, -1, &e), 0);
        store_close(ws->db); /* as a process ending */
        ws->db = NULL;
    }
    struct stat st;
    assert_int_equal(fstatat(ws->sfd, "log.db-wal", &st, 0), 0);
    assert_true(st.st_size < 128 * (4096 + 24) + 32);
    assert_int_equal(store_log(ws, 301, "committed", "{}", NULL, -1, &e), 0);
    assert_int_equal(q_int(ws->db, "PRAGMA synchronous"), 2);
    sqlite3 *db = db_open();
    /* (row 3 may be there: its frames were written, only the fsync failed) */
    assert_int_equal(q_int(db, "SELECT count(*) FROM tx WHERE id<>3"), 300);
    char *ok = q_text(db, "PRAGMA integrity_check");
    assert_string_equal(ok, "ok");
    free(ok);
    sqlite3_close(db);
}

static void pending_rows(void **state)
{
    (void)state;
    txbox_error e = {0};
    assert_int_equal(store_check(ws, 100000, &e), 0); /* the log exists */
    store_close(ws->db);
    ws->db = NULL;
    /* no connection open: a row that needs no fsync waits in log.pending */
    assert_int_equal(store_log(ws, 7, "rolled_back", "{\"command\":\"false\",\"exit_code\":1}", NULL, -1, &e),
                     0);
    assert_null(ws->db);
    struct stat st;
    assert_int_equal(fstatat(ws->sfd, "log.pending", &st, 0), 0);
    assert_true(st.st_size > 0);
    sqlite3 *db = db_open();
    assert_int_equal(q_int(db, "SELECT count(*) FROM tx"), 0);
    /* a line cut short by a crash is skipped */
    int fd = openat(ws->sfd, "log.pending", O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "{\"id\":9,\"outc", 14), 14);
    close(fd);
    /* and a row appended after it starts a line of its own */
    assert_int_equal(store_log(ws, 8, "blocked", "{\"command\":\"rm -rf /\"}", NULL, -1, &e), 0);
    /* an info that is not a commit's own is parsed, never copied into the
     * line as it is: on two lines, or not JSON at all (read as {}) */
    assert_int_equal(store_log(ws, 10, "rolled_back", "{\"command\":\n\"two lines\"}", NULL, -1, &e), 0);
    assert_int_equal(store_log(ws, 11, "rolled_back", "{not json}", NULL, -1, &e), 0);
    assert_null(ws->db);
    /* any open of the log moves them in */
    assert_int_equal(store_check(ws, 100000, &e), 0);
    assert_int_equal(q_int(db, "SELECT count(*) FROM tx WHERE id=10 AND CAST(command AS TEXT)='two lines'"),
                     1);
    assert_int_equal(q_int(db, "SELECT count(*) FROM tx WHERE id=11 AND outcome='rolled_back' AND "
                               "coalesce(CAST(command AS TEXT), '')=''"),
                     1);
    assert_int_equal(q_int(db, "SELECT count(*) FROM tx WHERE id IN (10, 11)"), 2);
    assert_int_equal(q_int(db, "SELECT count(*) FROM tx"), 4);
    assert_int_equal(q_int(db, "SELECT count(*) FROM tx WHERE id=8 AND outcome='blocked'"), 1);
    char *s = q_text(db, "SELECT outcome || ' ' || command || ' ' || exit_code FROM tx WHERE id=7");
    assert_string_equal(s, "rolled_back false 1");
    free(s);
    assert_int_equal(fstatat(ws->sfd, "log.pending", &st, 0), 0);
    assert_int_equal(st.st_size, 0);
    /* a full pending file: the row goes to the log itself */
    store_close(ws->db);
    ws->db = NULL;
    fd = openat(ws->sfd, "log.pending", O_WRONLY | O_APPEND);
    char junk[4096];
    memset(junk, 'x', sizeof junk);
    junk[sizeof junk - 1] = '\n';
    for (int i = 0; i < 256; i++)
        assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);
    assert_int_equal(store_log(ws, 8, "read_only", "{\"command\":\"true\"}", NULL, -1, &e), 0);
    assert_non_null(ws->db);
    assert_int_equal(q_int(db, "SELECT count(*) FROM tx WHERE id=8"), 1);
    assert_int_equal(fstatat(ws->sfd, "log.pending", &st, 0), 0);
    assert_int_equal(st.st_size, 0); /* and the junk was read past */
    sqlite3_close(db);
}

/* The effect rules' reads noted (store_hash_note) are the audit log's
 * hashes: a noted file is not read again. Noted here with other bytes
 * than the file holds (of its length), the row says the noted hash; a
 * file whose mtime changed after its note is read. */
static void noted_hashes_are_used(void **state)
{
    (void)state;
    txbox_error e = {0};
    uint64_t id;
    int txfd, act, up;
    new_tx_upper(&id, &txfd, &act, &up);
    mkfile(up, "noted", "xyz");
    mkfile(up, "stale", "abc");
    struct stat st;
    assert_int_equal(fstatat(up, "noted", &st, 0), 0);
    store_hash_note(ws, &st, "abc", 3);
    assert_int_equal(fstatat(up, "stale", &st, 0), 0);
    store_hash_note(ws, &st, "", 0); /* not the whole file: ignored */
    store_hash_note(ws, &st, "xyz", 3);
    struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 12345}};
    assert_int_equal(utimensat(up, "stale", ts, 0), 0);
    struct tx_ops ops = {0};
    assert_int_equal(scan_upper(up, ws->fd, !ws->root, &ops, NULL, &e), 0);
    const char *info = "{\"command\":\"x\",\"exit_code\":0,\"started\":1.5}";
    uint64_t gen;
    assert_int_equal(journal_commit(ws, id, txfd, 0, &ops, info, NULL, 0, &gen, &e), 0);
    store_hash_forget(ws);
    assert_null(ws->hashes);
    store_import_pending(ws);
    sqlite3 *db = db_open();
    char *s = q_text(db, "SELECT hash_after FROM change WHERE CAST(path AS TEXT)='noted'");
    assert_string_equal(s, SHA_ABC); /* the note's, not the file's */
    free(s);
    s = q_text(db, "SELECT hash_after FROM change WHERE CAST(path AS TEXT)='stale'");
    assert_string_equal(s, SHA_ABC); /* the file's: its note no longer matched */
    free(s);
    sqlite3_close(db);
    ops_free(&ops);
    close(up);
    close(txfd);
    ws_end_tx(ws, id, act);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(commit_logs_write_set_once, setup, teardown),
        cmocka_unit_test_setup_teardown(large_commit_row_in_its_own_file, setup, teardown),
        cmocka_unit_test_setup_teardown(refuses_newer_and_damaged, setup, teardown),
        cmocka_unit_test_setup_teardown(hashes_and_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(sparse_files_hash_as_their_content, setup, teardown),
        cmocka_unit_test_setup_teardown(noted_hashes_are_used, setup, teardown),
        cmocka_unit_test_setup_teardown(log_fsyncs_and_wal_size, setup, teardown),
        cmocka_unit_test_setup_teardown(pending_rows, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
