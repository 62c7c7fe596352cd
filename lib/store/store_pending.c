/* The audit log's pending rows: .txbox/log.pending (store.c, "Durability"). */
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "fsops.h"
#include "result.h"
#include "store.h"
#include "store_int.h"

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

/* A write-set row's side as JSON: null, or [type, mode, size, hash|null]
 * (side_text writes it). */
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

/* A path as the JSON string path_json makes: printable ASCII without a
 * quote or a backslash as it is, anything else through jansson. */
static void path_text(dbuf *b, const char *p)
{
    size_t n = strlen(p);
    bool plain = true;
    for (size_t i = 0; i < n && plain; i++)
        plain = p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\';
    if (plain) {
        dbuf_add(b, "\"", 1);
        dbuf_add(b, p, n);
        dbuf_add(b, "\"", 1);
        return;
    }
    json_t *j = path_json(p);
    char *t = json_dumps(j, JSON_ENCODE_ANY);
    json_decref(j);
    dbuf_addstr(b, t ? t : "\"\"");
    free(t);
}

static void side_text(dbuf *b, const struct side *x)
{
    char t[128];
    if (!x->type) {
        dbuf_addstr(b, "null");
        return;
    }
    snprintf(t, sizeof t, "[\"%c\",%llu,%llu,", x->type, (unsigned long long)x->mode,
             (unsigned long long)x->size);
    dbuf_addstr(b, t);
    if (x->hashed) {
        dbuf_add(b, "\"", 1);
        dbuf_add(b, x->hash, 64);
        dbuf_add(b, "\"]", 2);
    } else {
        dbuf_addstr(b, "null]");
    }
}

/* A write set's rows as a JSON array of [path, sub, kind, op, before,
 * after], written as text: built as jansson objects, a 10,000-path write
 * set cost 25 ms to build, print and free. rows_from reads it back. */
static void rows_text(dbuf *b, const struct rows *r)
{
    char t[64];
    dbuf_add(b, "[", 1);
    for (size_t i = 0; i < r->n; i++) {
        const struct row *x = &r->v[i];
        dbuf_addstr(b, i ? ",[" : "[");
        path_text(b, x->path);
        dbuf_add(b, ",", 1);
        path_text(b, x->sub);
        snprintf(t, sizeof t, ",\"%s\",%llu,", x->kind, (unsigned long long)x->op);
        dbuf_addstr(b, t);
        side_text(b, &x->b);
        dbuf_add(b, ",", 1);
        side_text(b, &x->a);
        dbuf_add(b, "]", 1);
    }
    dbuf_add(b, "]", 1);
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
    /* (a wait bounded as the workspace lock's: its holder may be stopped) */
    if (fd < 0 || tx_flock_wait(fd, "the audit log's pending rows", 0, NULL, NULL) < 0 ||
        fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size + len + 1 > PENDING_MAX)
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
bool pending_info_ok(const char *text)
{
    size_t n = strlen(text);
    return n >= 2 && text[0] == '{' && text[n - 1] == '}' && !memchr(text, '\n', n);
}

int store_pending_add(txbox_ws *ws, uint64_t id, const char *outcome, const char *text, json_t *in,
                      bool recovered, const struct rows *rows, int txfd, struct fs_syncset *sync,
                      sqlite3_int64 *gen)
{
    json_t *rec = json_pack("{s:I,s:s,s:b,s:f}", "id", (json_int_t)id, "outcome", outcome, "recovered",
                            recovered, "finished", wall_time());
    if (rec && !text)
        json_object_set(rec, "info", in);
    if (rec && rows) {
        *gen = store_find_gen(ws, id);
        json_object_set_new(rec, "gen", json_integer(*gen > 0 ? *gen : 0));
        json_object_set_new(rec, "dropped", json_integer((json_int_t)rows->dropped));
        json_object_set_new(rec, "retained", json_integer((json_int_t)rows->retained));
    }
    _cleanup_free_ char *head = rec ? json_dumps(rec, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(rec);
    if (!head)
        return -1;
    /* the record, then "info" (text, as it is: a 10,000-path change list
     * is not parsed and dumped again) and "rows" when it has them */
    dbuf lb;
    dbuf_init(&lb, 0);
    size_t hl = strlen(head);
    dbuf_add(&lb, head, hl - 1); /* without its closing brace */
    if (text) {
        dbuf_addstr(&lb, ",\"info\":");
        dbuf_addstr(&lb, text);
    }
    if (rows) {
        dbuf_addstr(&lb, ",\"rows\":");
        rows_text(&lb, rows);
    }
    dbuf_add(&lb, "}", 1);
    dbuf_add(&lb, "\n", 1);
    size_t n = lb.len;
    _cleanup_free_ char *line = lb.p; /* the buffer's bytes, freed with it */
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
    if (store_exec(db, "PRAGMA temp_store=MEMORY", NULL) < 0)
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
        ok = !q || store_exec(db, q, NULL) == 0;
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

bool store_pending_has(txbox_ws *ws, const char *head, size_t hl)
{
    _cleanup_close_ int fd = openat(ws->sfd, PENDING_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || tx_flock_wait(fd, "the audit log's pending rows", 0, NULL, NULL) < 0 ||
        fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0 ||
        (uint64_t)st.st_size > 4 * PENDING_MAX)
        return false;
    size_t len = (size_t)st.st_size;
    _cleanup_free_ char *buf = xmalloc(len);
    if (read_all(fd, buf, len) != (ssize_t)len)
        return false;
    /* whole lines only: one a crash cut short is no row */
    for (char *p = buf, *nl; (nl = memchr(p, '\n', len - (size_t)(p - buf))); p = nl + 1)
        if ((size_t)(nl - p) > hl && !memcmp(p, head, hl))
            return true;
    return false;
}

void store_pending_import(txbox_ws *ws, sqlite3 *db, bool reader)
{
    _cleanup_close_ int fd = openat(ws->sfd, PENDING_NAME, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || tx_flock_wait(fd, "the audit log's pending rows", 0, NULL, NULL) < 0 ||
        fstat(fd, &st) < 0 || st.st_size == 0)
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
    if (!durable && store_exec(db, "PRAGMA synchronous=NORMAL", NULL) < 0)
        return;
    bool ok = pending_rows_into(ws, db, buf, len);
    if (ok)
        (void)ftruncate(fd, 0);
    if (!durable)
        (void)sqlite3_exec(db, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
    if (!ok && reader && store_low_space(ws) && shadow_tables(db))
        (void)pending_rows_into(ws, db, buf, len);
}

static bool pending_rows_into(txbox_ws *ws, sqlite3 *db, const char *buf, size_t len)
{
    sqlite3_stmt *ins = NULL;
    bool ok = store_exec(db, "BEGIN IMMEDIATE", NULL) == 0 &&
              sqlite3_prepare_v2(db, store_tx_insert, -1, &ins, NULL) == SQLITE_OK;
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
            store_bind_tx(ins, ws, (uint64_t)id, oc, in, committed, committed ? &rows : NULL,
                          json_is_true(json_object_get(rec, "recovered")),
                          json_number_value(json_object_get(rec, "finished")),
                          committed ? json_integer_value(json_object_get(rec, "gen")) : -1);
            ok = sqlite3_step(ins) == SQLITE_DONE &&
                 (!committed || store_write_rows(db, (uint64_t)id, &rows, NULL) == 0);
        }
        store_rows_free(&rows);
        json_decref(rec);
    }
    sqlite3_finalize(ins);
    if (ok && store_exec(db, "COMMIT", NULL) == 0)
        return true;
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return false;
}
