/* History: the audit log (store.c, SQLite in .txbox/log.db) and what is
 * built on it and on the retained pre-images (undo.c: undo, gc, diff).
 *
 * The txbox_* functions here are the library's history API (the CLI's
 * log/show/diff/undo/gc call them); they could move to a public header as
 * they are. The store_* and undo_* ones are internal hooks of the commit
 * protocol and of recovery. */
#ifndef TXBOX_STORE_H
#define TXBOX_STORE_H

#include <stdio.h>

#include <jansson.h>

#include "tx.h"

/* Schema versions this txbox reads and writes (PRAGMA user_version). */
#define STORE_SCHEMA_VERSION 5

/* Retention's count and size of the commits whose pre-images are kept,
 * answered from the partial index tx_retained (schema v3). */
#define STORE_RETAINED_SQL                                      \
    "SELECT count(*), coalesce(sum(retained_bytes), 0) FROM tx" \
    " WHERE outcome='committed' AND retained_bytes IS NOT NULL AND pruned IS NULL"

/* ---- hooks of the commit protocol ---- */

/* Checks that the audit log can take the row of a commit of nops
 * operations: called before a commit point, so that a damaged log or one
 * from a newer txbox refuses the commit while the workspace is still
 * untouched. The row will wait in log.pending (its header checked), or go
 * to the log itself (opened, created or migrated now). */
MUST_CHECK int store_check(txbox_ws *ws, size_t nops, txbox_error *err);
/* Moves the rows waiting in .txbox/log.pending into the log now (every
 * open of the log does it first; see store.c, "pending rows"). */
void store_import_pending(txbox_ws *ws);
/* Does the audit log hold transaction id's commit row: a whole line of
 * the pending file, or a row of the log? (Recovery, finishing a journal
 * whose owner wrote its row before leaving it open: journal.c.) */
bool store_has_commit_row(txbox_ws *ws, uint64_t id);
/* Adds to s the audit log's files that may hold rows not yet durable (the
 * pending file, the log and its WAL) and the state directory. */
void store_sync_rows(txbox_ws *ws, struct fs_syncset *s);

/* The context of a command that the audit log records besides its result:
 * command text (and argv), cwd relative to the workspace, workspace,
 * start time. A JSON object string; the caller frees it. */
char *store_context(const txbox_ws *ws, const txbox_run_opts *o, const char *cwd, double started);
/* The info object for the journal and store_log: txbox_result_json(r)
 * merged with ctx (the fields of ctx that r lacks). */
char *store_info(const txbox_result *r, const char *ctx);

/* Recovery (ws.c), under the workspace lock: roll forward every journal
 * whose owner died. A commit calls it before it reads the generation, so
 * that it never overtakes an earlier commit's pending journal (both would
 * claim one generation). done/failed may be NULL; else tx ids (strings)
 * are appended. Returns -1 if one could not be rolled forward. */
MUST_CHECK int ws_roll_forward_locked(txbox_ws *ws, json_t *done, json_t *failed, txbox_error *err);

/* Recovery of an undo transaction that died before its commit point: puts
 * the pre-images it had moved into its upper back where they came from
 * (tx/T/undo/N). No-op for other transactions. */
MUST_CHECK int undo_unstage(txbox_ws *ws, int txfd, txbox_error *err);

/* Hashes known before a commit's write set is collected: the effect rules
 * read each new file of the upper whole (up to their content cap) and note
 * its SHA-256 here (store_hash_note: data, len bytes, all of the file st
 * describes), so that the audit log's rows (store_prep) need not open and
 * read it again. Keyed by the file's inode, size and mtime as stat saw
 * them; only the upper's files are noted, which nothing writes once the
 * command is gone. store_hash_forget drops them at the end of a commit. */
void store_hash_note(txbox_ws *ws, const struct stat *st, const void *data, size_t len);
void store_hash_forget(txbox_ws *ws);

/* The transaction that left content sha (SHA-256, hex) at path as its
 * last write (store_origin.c; lib/tx/losses.c: is a destroyed file the
 * agent's own work?): 1 with *o filled, 0 when the last committed write of
 * path (among transactions before before_tx; 0: all) left other content,
 * or there is none; <0 on error. store_origin_free releases *o. */
struct store_origin {
    uint64_t tx;          /* the transaction */
    double finished;      /* when it ended (unix time) */
    bool added;           /* it created the file: there was none before */
    char hash_before[65]; /* the content it replaced ("" when none or not hashed) */
    uint64_t op;          /* its pre-image: tx/TX/undo/OP[/SUB] */
    char *sub;
    bool pruned; /* gc dropped its pre-images */
};
MUST_CHECK int store_origin(txbox_ws *ws, const char *path, const char sha[65], uint64_t before_tx,
                            struct store_origin *o, txbox_error *err);
void store_origin_free(struct store_origin *o);

/* After a commit (lock released): prune retained pre-images when over the
 * configured bounds. Best effort; never fails the commit. */
void history_autogc(txbox_ws *ws);

/* ---- internal: shared by store.c and undo.c ---- */
typedef struct sqlite3 sqlite3;
/* Opens the audit log (creating/migrating it when `write`). */
MUST_CHECK int store_open(txbox_ws *ws, bool write, sqlite3 **db, txbox_error *err);
void store_close(sqlite3 *db);
/* The workspace handle's own connection to the log, opened (for writing)
 * on first use and closed by txbox_ws_close: a transaction's check before
 * the commit point, its row and the retention check share one open (each
 * open of a WAL database by a new process re-reads the WAL). Not closed by
 * the caller. */
MUST_CHECK int store_shared(txbox_ws *ws, sqlite3 **db, txbox_error *err);
/* Parses the id tx and opens the log to read it ("not in the audit log"
 * when there is none). */
MUST_CHECK int store_open_for(txbox_ws *ws, const char *tx, uint64_t *id, sqlite3 **db, txbox_error *err);
/* SHA-256 of a regular file (hex) and its size. */
MUST_CHECK int hash_file_at(int dirfd, const char *name, char hex[65], uint64_t *size);
void hash_bytes_hex(const void *p, size_t n, char hex[65]);
/* Parses a transaction id given by a user ("12", "tx12" is refused). */
MUST_CHECK int parse_txid(const char *s, uint64_t *id, txbox_error *err);
/* Retention's bounds (the setting table; defaults when unset). */
struct retention {
    long keep;           /* the newest commits whose pre-images are kept; <0: no bound */
    long long max_bytes; /* their bytes at most */
    long long max_age;   /* seconds a commit's pre-images are kept */
    long long loss_age;  /* ... those of a commit that destroyed work (its losses) */
};
void store_get_retention(sqlite3 *db, struct retention *r);
/* Whether a row's commit destroyed work, as an SQL expression on tx: the
 * bytes it lost that existed nowhere else, from the column lost_bytes
 * where the log has it, else from the row's info (`losses`). A static
 * string. */
const char *store_losses_sql(sqlite3 *db);
/* Retention's count cached in .txbox/log.retained (store.c): 0 with the
 * retained commits' count and bytes, the bounds and when pruning by age is
 * due next (unix time; 0: never), when the cache is of the workspace's
 * generation; -1 when there is none. */
int store_retained_cached(txbox_ws *ws, long long *count, long long *bytes, struct retention *r, double *due);
/* Writes the cache from the log db (its pending rows moved in), under the
 * workspace lock, with due (<0: worked out from the log, each commit's age
 * bound from its end); store_retained_forget removes it (gc). */
void store_retained_refresh(txbox_ws *ws, sqlite3 *db, double due);
void store_retained_forget(txbox_ws *ws);
/* When pruning by age is due next, from the log: the earliest end of a
 * retained commit plus its bound, plus the slack retention allows (0: no
 * retained commit). */
double store_retained_due(sqlite3 *db, const struct retention *r);
/* The slack: pruning by age waits until a commit is this much past its
 * bound, so that it runs every few hours, not after every commit. */
double store_retention_slack(const struct retention *r);

#endif
