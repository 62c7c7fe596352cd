/* `txbox run`'s command line, read by the CLI (cmd_run.c) and by the
 * fronts that run the same command line in their own process
 * (resident.c), so that both read it alike. */
#ifndef TXBOX_RUN_ARGS_H
#define TXBOX_RUN_ARGS_H

#include <stdbool.h>

#include "txbox.h"

/* What `txbox run`'s command line asks for. */
struct run_args {
    txbox_run_opts ro;
    const char *keep[65], *hide[65], *domains[65]; /* NULL-terminated */
    size_t nkeep, nhide, ndomains;
    const char *dir, *shell, *policy_file, *tx, *shell_spec;
    const char *session;  /* --session ID: run in that session (started when none runs) */
    const char *cwd_file; /* --cwd-file PATH: where the shell's last directory is written */
    bool json;
    char **prog; /* -- PROG ARGS... */
};

/* The words the network proxy adds to a refusal of a host, "{host}"
 * standing for it: the CLI's unless a front that answers a model (MCP, the
 * agent loop) sets this variable for the runs it makes, in its own process
 * or in a child. */
#define RUN_NET_WORDS_ENV "TXBOX_NET_REFUSAL_WORDS"
/* Those fronts' words: the model cannot widen the allowlist, a person can. */
#define RUN_NET_WORDS_MODEL "only the user can allow {host}, in txbox's policy or its allowlist"

/* Reads the command line (argv[0] "run") into a, which the caller zeroed:
 * -1 when the command is to run, else the exit status (a usage error, said
 * on stderr and, with --json, on stdout; 0 after --help). Uses getopt: one
 * thread at a time. Pointers into argv. */
int run_parse(int argc, char **argv, struct run_args *a);

/* The exit status of a run: txbox's own for an outcome that is not the
 * command's (TXBOX_EXIT_*), else the command's. */
int run_status(const txbox_result *r);

#endif
