/* What run.c gives the rest of the tx layer besides txbox_run (public, in
 * include/txbox.h): the paths every sandbox hides, and how a shell string
 * may read under POSIX sh. */
#ifndef TXBOX_RUN_H
#define TXBOX_RUN_H

#include <stdbool.h>

struct txbox_policy;

/* The paths the sandbox hides from every command (the caller's secrets,
 * every other home, the system's secrets, the policy's `hide:` list and
 * extra, absolute or ~/...), NULL-terminated; freed with tx_free_strv. */
char **tx_hidden_paths(const char *const *extra, const struct txbox_policy *pol, const char *ws_path);
void tx_free_strv(char **v);

/* Whether POSIX sh may read the shell string otherwise than bash, as which
 * the policy judged it (an over-approximation). */
bool sh_reads_differently(const char *cmd);

#endif
