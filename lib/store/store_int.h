/* The audit log's parts, private to them (store.h is the interface).
 *
 * The parts call one way, down this list:
 *   store.c           opening the log, the check before a commit point, a
 *                     transaction's row (store_log, store_log_commit)
 *   store_read.c      reading it: txbox log, txbox show
 *   store_pending.c   rows waiting in .txbox/log.pending
 *   store_row.c       a row and its write set bound to the log's INSERTs
 *   store_retain.c    retention's bounds and its count, cached
 *   store_writeset.c  the write set's rows, hashed (store_prep)
 *   store_schema.c    the schema, migrations, the shared SQL helpers
 *   store_vfs.c       the VFS the log is opened with */
#ifndef TXBOX_STORE_INT_H
#define TXBOX_STORE_INT_H

#include <sqlite3.h>

#include "store.h"

#define DB_NAME "log.db"
#define PENDING_NAME "log.pending" /* rows waiting for the log: store_pending.c */
#define PENDING_MAX (1u << 20)
#define PENDING_SOFT (256u << 10)    /* past it, a commit's row goes to the log itself */
#define PENDING_OPS_MAX 1000         /* a commit of more operations: its row to the log itself */
#define PENDING_LINE_MAX (64u << 10) /* a commit's larger row: in tx/ID/log.row, pointed at */
#define ROW_FILE_MAX (256u << 20)    /* what the move reads of one */
#define RETAINED_NAME "log.retained" /* retention's count, cached (history_autogc) */
#define TAIL_BYTES 4096              /* stdout/stderr kept in the log, per stream */
#define ROWS_CAP 10000               /* write-set rows per transaction */
#define INFO_CAP (4u << 20)          /* info JSON stored per transaction */
/* Retention's defaults (docs/history.md, "Retention and gc", says what
 * they cost): a working week of pre-images, those of a commit that
 * destroyed work a month, within 4 GiB; no bound on their number. */
#define DEFAULT_KEEP (-1L)
#define DEFAULT_MAX_BYTES (4LL << 30)
#define DEFAULT_MAX_AGE (7LL * 86400)
#define DEFAULT_LOSS_AGE (30LL * 86400)

/* One side (before or after) of a write-set row. */
struct side {
    char type; /* 0 absent; f d l p s */
    uint32_t mode;
    uint64_t size;
    bool hashed;
    char hash[65];
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

/* store_vfs.c: the VFS's name for sqlite3_open_v2 (NULL: the default). */
const char *store_vfs_name(void);

/* store_schema.c */
int store_db_fail(sqlite3 *db, int rc, txbox_error *err, const char *what);
int store_exec(sqlite3 *db, const char *sql, txbox_error *err);
int store_user_version(sqlite3 *db, int *v, txbox_error *err);
int store_migrate(sqlite3 *db, txbox_error *err);
bool store_low_space(txbox_ws *ws);

/* store_writeset.c: the rows of a commit's write set, after the apply
 * (collect); the rows hashed beside the commit, when prep has them for
 * ops (store_prep_take, which hands them over). */
void store_collect(txbox_ws *ws, int txfd, const struct tx_ops *ops, struct rows *r);
bool store_prep_take(struct store_prep *p, const struct tx_ops *ops, struct rows *rows);
void store_rows_free(struct rows *r);

/* store_retain.c: a commit's row went to log.pending (gen, bytes). */
void store_retained_add(txbox_ws *ws, sqlite3_int64 gen, uint64_t bytes);

/* store_row.c */
extern const char store_tx_insert[];
sqlite3_int64 store_find_gen(txbox_ws *ws, uint64_t id);
int store_bind_tx(sqlite3_stmt *st, txbox_ws *ws, uint64_t id, const char *outcome, json_t *in,
                  bool committed, const struct rows *rows, bool recovered, double now, sqlite3_int64 gen);
int store_write_rows(sqlite3 *db, uint64_t id, const struct rows *rows, txbox_error *err);

/* store_pending.c */
/* The row's info: text, taken as it is (a commit's own: the dump of an
 * object this process made, on one line, pending_info_ok), or else in. */
int store_pending_add(txbox_ws *ws, uint64_t id, const char *outcome, const char *text, json_t *in,
                      bool recovered, const struct rows *rows, int txfd, struct fs_syncset *sync,
                      sqlite3_int64 *gen);
/* A whole line of the pending file that begins with head (hl bytes). */
bool store_pending_has(txbox_ws *ws, const char *head, size_t hl);
/* Has text the shape a pending line's info needs (one line, braces)? Its
 * syntax is not checked: only a dump of this process's goes in as text. */
bool pending_info_ok(const char *text);
void store_pending_import(txbox_ws *ws, sqlite3 *db, bool reader);

#endif
