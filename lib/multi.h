/* Multi-command transactions (issue 9): `txbox begin`, `run --tx`,
 * savepoint, rollback, commit, abort, status. See multi.c for the design. */
#ifndef TXBOX_MULTI_H
#define TXBOX_MULTI_H

#include <stdint.h>

#include <jansson.h>

#include "txbox.h"
#include "util.h"

typedef struct txbox_multi txbox_multi;

/* Opens a new multi-command transaction on ws; *id: its id (caller frees).
 * name: a label shown by status (may be NULL). */
MUST_CHECK int txbox_multi_begin(txbox_ws *ws, const char *name, char **id, txbox_error *err);
/* Opens the open transaction id and locks it for this process (a second
 * process on the same transaction waits). Finishes any step a crash cut
 * short (a merge, a rollback). */
MUST_CHECK int txbox_multi_open(txbox_ws *ws, const char *id, txbox_multi **out, txbox_error *err);
void txbox_multi_close(txbox_multi *m);
const char *txbox_multi_id(const txbox_multi *m);

/* Marks the current state as savepoint name (an existing one of that name
 * is replaced). */
MUST_CHECK int txbox_multi_savepoint(txbox_multi *m, const char *name, txbox_error *err);
/* Back to savepoint name (kept; later ones are dropped), or with name NULL
 * to the start (every savepoint dropped). The transaction stays open. */
MUST_CHECK int txbox_multi_rollback(txbox_multi *m, const char *name, txbox_error *err);
/* Drops the transaction: nothing of it is ever applied. */
MUST_CHECK int txbox_multi_abort(txbox_multi *m, txbox_error *err);
/* The same; first runs the compensations of its external effects, newest
 * first (saga.c). *report (may be NULL): {"effects": [...],
 * "needs_attention": N}. Cut short by a crash, it is finished by aborting
 * again (the transaction stays open, refusing everything but abort). */
MUST_CHECK int txbox_multi_abort_report(txbox_multi *m, char **report, txbox_error *err);

/* Commits: with verify (a command, run in the transaction's final view,
 * its own writes dropped) only if it succeeds. *json: the result object;
 * *status: the exit status (0 committed, 123 conflict, the verify
 * command's own when it failed); *summary: one status line. Returns <0
 * when txbox itself failed (nothing applied unless the commit point was
 * passed, which recovery then completes). */
MUST_CHECK int txbox_multi_commit(txbox_multi *m, const txbox_run_opts *verify, char **json,
                                  int *status, char **summary, txbox_error *err);

/* The policy whose rules on effects judge the commit (effects.c; NULL:
 * the verify command's, if any). p must outlive m. */
void txbox_multi_set_policy(txbox_multi *m, const struct txbox_policy *p);

/* The open multi-command transactions: a JSON object {"transactions": [...]}. */
MUST_CHECK int txbox_multi_status(txbox_ws *ws, char **json, txbox_error *err);

/* ---- for run.c ---- */
/* The transaction's directory (its effect list, saga.c) and whether an
 * abort has begun. */
int multi_txfd(const txbox_multi *m);
bool multi_aborting(const txbox_multi *m);
/* The transaction so far, as the read-only layer of the command's overlay
 * (relative to the workspace, and opened). */
const char *multi_layer_rel(const txbox_multi *m);
int multi_layer_fd(const txbox_multi *m);
/* ... and the work directory of the overlay that shows it. */
const char *multi_layer_work_rel(const txbox_multi *m);
int multi_layer_work_fd(const txbox_multi *m);
/* After a command that succeeded: moves its upper (runtx/upper) into the
 * transaction, merged into the layer, and sets r's outcome and changes. A
 * verify command's upper is left to be discarded. */
MUST_CHECK int multi_absorb(txbox_multi *m, int runtxfd, struct txbox_result *r, txbox_error *err);

#endif
