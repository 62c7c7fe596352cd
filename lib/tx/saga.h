/* Compensations for external effects (issue 9, "sagas"). See saga.c. */
#ifndef TXBOX_SAGA_H
#define TXBOX_SAGA_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "txbox.h"
#include "txbox_policy.h"
#include "util.h"

struct txbox_result;

/* How a compensation runs: txbox_run(), passed down by the caller (run.c,
 * multi.c), so that the effect list, which recovery reads too, does not
 * call up into the layer that runs commands. */
typedef int (*saga_runner)(txbox_ws *ws, const txbox_run_opts *o, struct txbox_result **out,
                           txbox_error *err);

/* ---- the run side (run.c, multi.c) ---- */
/* The external effects the command would have (one entry per simple command
 * that a rule with `external: true` or a `compensate:` matches: the first
 * such rule in file order, whichever rule decided the verdict), with each
 * compensation rendered as far as the command text allows; NULL when it has
 * none. Such a rule with `network: true` sets *net. */
json_t *saga_plan(const txbox_policy *p, const char *shell, char *const *argv, bool *net);
/* Notes in each effect of the plan the network its command was given, so
 * that its compensation gets the same: the host's network (net is
 * TXBOX_NET_HOST: the user shared it with the command, and a service on
 * the host's loopback is reachable only so) or the proxy with the caller's
 * allowed domains beside the rule's. */
void saga_plan_network(json_t *plan, int net, const char *const *allow_domains);
/* Does rendering the plan need the command's standard output (capture)? */
bool saga_plan_needs_output(const json_t *plan);
static inline void saga_plan_freep(json_t **p) { json_decref(*p); }
#define _cleanup_plan_ __attribute__((cleanup(saga_plan_freep)))

/* Before the command runs: records the plan's effects as `started` in the
 * effect list of the transaction directory effd (durably). */
MUST_CHECK int saga_started(int effd, json_t *plan, const char *run_tx, txbox_error *err);
/* After it ran: renders each compensation (out: its standard output), then
 * keep (a single run that succeeded: `kept`), stage (a command of a
 * multi-command transaction that succeeded: `pending`, compensated if the
 * transaction aborts), or compensate now (it failed). r->effects gets this
 * command's entries as they end. */
MUST_CHECK int saga_after(txbox_ws *ws, int effd, json_t *plan, struct txbox_result *r, bool ok, bool multi,
                          saga_runner run, txbox_error *err);

/* Runs, newest first, the compensation of every effect of effd from index
 * `from` on that is still `pending` (each once: marked `running` durably
 * before, its end after; one found `running` was cut short by a crash and
 * is marked `interrupted`, never run again). *report (may be NULL): a JSON
 * object {"effects": [the entries from `from` on], "needs_attention": N}.
 * Each compensation runs through run. */
MUST_CHECK int saga_compensate(txbox_ws *ws, int effd, size_t from, json_t **report, saga_runner run,
                               txbox_error *err);
/* How many effects effd holds (a savepoint records it). */
size_t saga_count(int effd);
/* The effects of a transaction that commits, `pending` ones shown as
 * `kept` (with save: so marked durably): {"effects": [...]}, or NULL when
 * it has none. */
json_t *saga_kept(int effd, bool save);
/* Appends to arr each effect recorded in transaction directory txfd (id tx)
 * that needs attention: a compensation that failed or was interrupted, an
 * irreversible effect of work that was undone. */
void saga_attention_add(json_t *arr, int txfd, const char *tx);
/* Recovery, for the directory of a transaction whose process died: each of
 * its effects still `started` or `running` is marked `interrupted` (needs
 * attention; never run again). Returns how many, or -1. */
int saga_recovered(int txfd, txbox_error *err);
/* txbox_resolve: include/txbox.h. */

#endif
