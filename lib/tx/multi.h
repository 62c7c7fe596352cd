/* Multi-command transactions (issue 9): `txbox begin`, `run --tx`,
 * savepoint, rollback, commit, abort, status. See multi.c for the design;
 * the API (txbox_multi_*) is public, in include/txbox.h; here what run.c
 * needs of an open transaction. */
#ifndef TXBOX_MULTI_H
#define TXBOX_MULTI_H

#include <stdint.h>

#include <jansson.h>

#include "txbox.h"
#include "util.h"

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
