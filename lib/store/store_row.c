/* A transaction's row and its write set bound to the log's INSERTs: shared
 * by the row written now (store.c) and the pending rows moved in later
 * (store_pending.c). */
#include <math.h>

#include <sqlite3.h>

#include "result.h"
#include "store.h"
#include "store_int.h"

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
sqlite3_int64 store_find_gen(txbox_ws *ws, uint64_t id)
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

const char store_tx_insert[] =
    "INSERT OR REPLACE INTO tx(id, outcome, gen, started, finished, duration_ms, command_ms,"
    " overhead_ms, recovered, workspace, cwd, command, argv, verdict, rule, reason, protections,"
    " exit_code, signal, backend, n_added, n_modified, n_deleted, changes_truncated, stdout_tail,"
    " stderr_tail, stdout_dropped, stderr_dropped, undo_of, forced, retained_bytes, info, lost_bytes)"
    " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,?23,"
    "?24,?25,?26,?27,?28,?29,?30,?31,?32,?33)";

/* gen: the generation a commit made, or 0 to find it now (find_gen) */
int store_bind_tx(sqlite3_stmt *st, txbox_ws *ws, uint64_t id, const char *outcome, json_t *in,
                  bool committed, const struct rows *rows, bool recovered, double now, sqlite3_int64 gen)
{
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    sqlite3_bind_text(st, 2, outcome, -1, SQLITE_STATIC);
    if (committed && gen <= 0)
        gen = store_find_gen(ws, id);
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
    if (json_is_object(ch)) { /* whole counts, not the capped list's lengths */
        size_t a, m, d;
        changes_counts(ch, &a, &m, &d);
        sqlite3_bind_int64(st, 21, (sqlite3_int64)a);
        sqlite3_bind_int64(st, 22, (sqlite3_int64)m);
        sqlite3_bind_int64(st, 23, (sqlite3_int64)d);
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
    /* what the commit destroyed that existed nowhere else (losses.h):
     * retention keeps such a transaction's pre-images longest */
    json_t *lb = json_object_get(json_object_get(in, "losses"), "bytes");
    if (!strcmp(outcome, "committed") && json_is_integer(lb))
        sqlite3_bind_int64(st, 33, (sqlite3_int64)json_integer_value(lb));
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

int store_write_rows(sqlite3 *db, uint64_t id, const struct rows *rows, txbox_error *err)
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
    return rc == SQLITE_OK ? 0 : store_db_fail(db, rc, err, "cannot record the write set");
}
