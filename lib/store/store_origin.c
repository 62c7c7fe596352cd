/* Who wrote a file's content: the audit log's write sets read back
 * (lib/tx/losses.c asks whether what a commit destroys is the agent's own
 * work, which txbox transactions wrote). */
#include <sqlite3.h>

#include "store.h"
#include "store_int.h"

static void copy_hash(char dst[65], const unsigned char *s)
{
    dst[0] = 0;
    if (s && strlen((const char *)s) == 64)
        memcpy(dst, s, 65);
}

int store_origin(txbox_ws *ws, const char *path, const char sha[65], uint64_t before_tx,
                 struct store_origin *o, txbox_error *err)
{
    memset(o, 0, sizeof *o);
    sqlite3 *db;
    if (store_shared(ws, &db, err) < 0)
        return -1;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT c.tx, c.kind, c.hash_before, c.hash_after, c.op, c.sub, t.finished,"
                                " t.pruned, c.type_before FROM change c JOIN tx t ON t.id = c.tx"
                                " WHERE c.path = ?1 AND c.tx < ?2 AND t.outcome = 'committed'"
                                " ORDER BY c.tx DESC LIMIT 1",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(st);
        return store_db_fail(db, rc, err, "cannot read it");
    }
    sqlite3_bind_blob(st, 1, path, (int)strlen(path), SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, before_tx ? (sqlite3_int64)before_tx : INT64_MAX);
    rc = sqlite3_step(st);
    int found = 0;
    if (rc == SQLITE_ROW) {
        const unsigned char *after = sqlite3_column_text(st, 3);
        /* the last write left this very content: no one changed it since */
        if (after && !strcmp((const char *)after, sha)) {
            found = 1;
            o->tx = (uint64_t)sqlite3_column_int64(st, 0);
            const unsigned char *kind = sqlite3_column_text(st, 1);
            o->added =
                (kind && !strcmp((const char *)kind, "added")) || sqlite3_column_type(st, 8) == SQLITE_NULL;
            copy_hash(o->hash_before, sqlite3_column_text(st, 2));
            o->op = (uint64_t)sqlite3_column_int64(st, 4);
            const void *sub = sqlite3_column_blob(st, 5);
            int sl = sqlite3_column_bytes(st, 5);
            o->sub = xasprintf("%.*s", sl, sub ? (const char *)sub : "");
            o->finished = sqlite3_column_double(st, 6);
            o->pruned = sqlite3_column_type(st, 7) != SQLITE_NULL;
        }
        rc = SQLITE_DONE;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return store_db_fail(db, rc, err, "cannot read it");
    return found;
}

void store_origin_free(struct store_origin *o)
{
    free(o->sub);
    memset(o, 0, sizeof *o);
}
