/* Reading the audit log: txbox log and txbox show. */
#include <sqlite3.h>

#include "result.h"
#include "store.h"
#include "store_int.h"

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
    " AS undone_by, retained_bytes, pruned, pruned_bytes, lost_bytes"

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
        r = store_db_fail(db, rc, err, "cannot read it");
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
        store_db_fail(db, rc, err, "cannot read it");
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
    /* what it destroyed (or would have: held, rejected), from its record */
    json_t *lo = json_object_get(json_object_get(o, "info"), "losses");
    if (json_is_object(lo))
        json_object_set(o, "losses", lo);
    int r = 0;
    if (rc != SQLITE_DONE)
        r = store_db_fail(db, rc, err, "cannot read it");
    else
        *json = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(o);
    store_close(db);
    return r;
}
