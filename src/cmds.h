/* The CLI: one file per subcommand; each parses its own options with
 * getopt_long and returns the process exit status. */
#ifndef TXBOX_CMDS_H
#define TXBOX_CMDS_H

#include <stdbool.h>

#include "txbox.h"

int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_recover(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_hook(int argc, char **argv);

/* Print "txbox: MSG" on stderr (one line) and return TXBOX_EXIT_ERROR. */
int cli_fail(const txbox_error *err);
int cli_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same as a JSON error object on stdout, for --json modes. */
int cli_fail_json(const txbox_error *err);

#endif
