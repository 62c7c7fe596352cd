/* What run.c gives the rest of the tx layer besides txbox_run (public, in
 * include/txbox.h): the paths every sandbox hides, and how a shell string
 * may read under POSIX sh. */
#ifndef TXBOX_RUN_H
#define TXBOX_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "tx.h"

struct txbox_policy;

/* The paths the sandbox hides from every command in ws (the caller's
 * secrets, every other home (homes.h), the system's secrets, the policy's
 * `hide:` list and extra, absolute or ~/...), NULL-terminated; freed with
 * tx_free_strv. */
char **tx_hidden_paths(const char *const *extra, const struct txbox_policy *pol, const txbox_ws *ws);
void tx_free_strv(char **v);

/* Whether POSIX sh may read the shell string otherwise than bash, as which
 * the policy judged it (an over-approximation). */
bool sh_reads_differently(const char *cmd);

/* A late transaction (session.c): what the processes a command (tx from)
 * left running in its session wrote to the workspace after it, in the
 * command's tx/FROM/live since its survivors.rec. Committed from base_gen
 * (the policy's rules on effects judge it, conflicts are checked) when
 * ok, else rolled back, `why` saying so. *out: its report ({"tx",
 * "from_tx", "outcome", "changes", "reason"}), or NULL when they wrote
 * nothing. command: what the command was (the audit log's). The command's
 * live/, work/ and owner lock file go either way. */
MUST_CHECK int run_late(txbox_ws *ws, uint64_t from, uint64_t base_gen, bool ok, const char *why,
                        const struct txbox_policy *pol, const char *session, const char *command,
                        json_t **out, txbox_error *err);

#endif
