/* A workspace kept open by a long-lived front (txbox mcp, txbox agent): its
 * handle and its policy, reused from one transaction run in this process
 * to the next. (Not the audit log: the library opens it afresh at each
 * commit that needs it, since another process may replace it.)
 *
 * Nothing that can go stale is trusted between calls. Before each run:
 * - the workspace handle is kept only while the directory and its .txbox/
 *   are the ones it opened (same device and inode), else it is opened
 *   again; then crash recovery runs, as every `txbox run`'s open does, so
 *   a transaction another process left half-applied is finished first;
 * - the policy is kept only while what it was loaded from is byte for byte
 *   the same: the --policy file, the workspace's .txbox-policy.yaml, the
 *   user's configuration (which may trust the workspace), $PATH; else it
 *   is loaded again (an edit takes effect at the next call);
 * - the workspace lock, the transaction's owner lock and the journal are
 *   taken per transaction by the library, as for the CLI.
 * One run at a time per resident (the caller serializes). */
#ifndef TXBOX_RESIDENT_H
#define TXBOX_RESIDENT_H

#include "run_args.h"
#include "util.h"

typedef struct resident resident;

/* dir: the workspace (absolute, resolved); policy_file: --policy (absolute)
 * or NULL. Opens nothing yet. */
resident *resident_new(const char *dir, const char *policy_file);
void resident_free(resident *r);

/* Can a run of a (from run_parse) be run here rather than by a child
 * `txbox run`? Not when the workspace is on a filesystem that cannot hold
 * an overlay (the CLI's refusal reads the policy its own way): false. */
bool resident_can_run(const resident *r, const struct run_args *a);

/* Runs a (with --json) as `txbox run` would, in this process: cwd (a path; NULL: the
 * workspace's root) is where it starts, tee_fd (> 0) gets a copy of its
 * output, *cancel set non-zero rolls it back. *out receives what `txbox
 * run --json` prints on stdout, *errtext what it prints on stderr (both
 * malloc'd); returns its exit status. */
int resident_run(resident *r, struct run_args *a, const char *cwd, int tee_fd, volatile int *cancel,
                 char **out, char **errtext);

#endif
