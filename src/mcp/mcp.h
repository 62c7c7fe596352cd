/* txbox mcp: internal interfaces between the server loop (server.c) and the
 * tool table (tools.c). Each tool maps to one txbox CLI invocation: `txbox
 * run --json`, `txbox check --json`, `txbox log --json`, ... (see
 * docs/mcp.md), run as a child process, or for `run` read by run_parse and
 * run in the server's process (resident.h) with the same answer. */
#ifndef TXBOX_MCP_H
#define TXBOX_MCP_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "util.h"

/* Negotiated protocol revisions, newest first (the first is ours). */
extern const char *const mcp_protocol_versions[];

typedef struct mcp_config {
    char *workspace; /* absolute, resolved */
    char *policy;    /* absolute, or NULL */
    bool structured; /* --structured: outputSchema and structuredContent, the CLI's whole object */
} mcp_config;

typedef struct mcp_tool mcp_tool;

/* {"tools": [...]} for tools/list (a new reference); without structured,
 * no outputSchema (clients that hold one show the model structuredContent
 * instead of the text, see tools.c). */
json_t *mcp_tools_list(bool structured);
const mcp_tool *mcp_tool_find(const char *name);
const char *mcp_tool_name(const mcp_tool *t);

/* One CLI invocation: argv (argv[0] "txbox", NULL-terminated, owned) and
 * the directory it starts in (an O_PATH fd, owned). */
typedef struct mcp_invocation {
    char **argv;
    int cwd_fd;
    char *multi_tx;   /* the multi-command transaction it acts on (run --tx, commit, ...), or NULL */
    bool tee;         /* `txbox run`: can copy the command's output to a descriptor (--tee-fd) */
    bool structured;  /* answer with structuredContent (mcp_config.structured) */
    bool protections; /* `run` with "protections": true: the answer carries them */
} mcp_invocation;

/* Checks the arguments against the tool's input schema and builds the
 * invocation. On bad arguments returns -1 with a one-line message in err
 * (the model's mistake: reported as a tool error or Invalid params). */
int mcp_tool_prepare(const mcp_tool *t, const mcp_config *cfg, json_t *args, mcp_invocation *inv,
                     txbox_error *err) MUST_CHECK;
void mcp_invocation_free(mcp_invocation *inv);

/* The CallToolResult for a finished child: wstatus from waitpid, its
 * stdout and stderr. A new reference. */
json_t *mcp_tool_result(const mcp_tool *t, const mcp_invocation *inv, int wstatus, const char *out,
                        size_t outlen, const char *err, size_t errlen);
/* The tool opens a multi-command transaction (`begin`): the server keeps
 * the ids it returns, to abort them when the session ends. */
bool mcp_tool_begins(const mcp_tool *t);
/* A CallToolResult with isError and one text part. */
json_t *mcp_error_result(const char *fmt, ...) PRINTF(1, 2);

/* Server instructions sent in the initialize result. */
extern const char mcp_instructions[];

#endif
