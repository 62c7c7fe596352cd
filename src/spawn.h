/* Starting a child txbox: the one way the fronts (the MCP server, the
 * headless agent) run a transaction, as `/proc/self/exe run --json ...`. */
#ifndef TXBOX_SPAWN_H
#define TXBOX_SPAWN_H

#include <sys/types.h>

#include "util.h"

struct self_child {
    pid_t pid;
    int pidfd;          /* readable once the child has exited */
    int out_fd, err_fd; /* its stdout and stderr: read ends, non-blocking */
    int tee_fd;         /* with tee_target >= 0: the read end of the third pipe */
};

/* Starts /proc/self/exe with argv and envp (NULL: this process's
 * environment), stdin from /dev/null, stdout and stderr into pipes, in the
 * directory cwd_fd (-1: the path dir; NULL too: here). With tee_target >= 0
 * the child also holds the write end of a third pipe as that descriptor
 * (`txbox run --tee-fd`). The child starts with no signal blocked, SIGPIPE,
 * SIGINT, SIGTERM, SIGHUP and SIGURG at their defaults, and gets SIGTERM
 * when the caller dies. Every descriptor returned is close-on-exec; the caller closes them
 * and reaps the child. */
MUST_CHECK int self_spawn(char *const argv[], char *const envp[], int cwd_fd, const char *dir, int tee_target,
                          struct self_child *c, txbox_error *err);

#endif
