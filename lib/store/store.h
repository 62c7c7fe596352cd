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
#define STORE_SCHEMA_VERSION 3

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
/* Retention's count cached in .txbox/log.retained (store.c): 0 with the
 * retained commits' count and bytes and the bounds, when the cache is of
 * the workspace's generation; -1 when there is none. */
int store_retained_cached(txbox_ws *ws, long long *count, long long *bytes, long *keep, long long *max_bytes);
/* Writes the cache from the log db (its pending rows moved in), under the
 * workspace lock; store_retained_forget removes it (gc). */
void store_retained_refresh(txbox_ws *ws, sqlite3 *db);
void store_retained_forget(txbox_ws *ws);
/* Retention settings (defaults when unset). */
void store_get_retention(sqlite3 *db, long *keep, long long *max_bytes);

#endif
