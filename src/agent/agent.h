/* txbox agent: a headless agent loop against an OpenAI-compatible
 * chat completions server. Each command the model asks for runs as one
 * txbox transaction in a child process; see docs/agent.md. */
#ifndef TXBOX_AGENT_H
#define TXBOX_AGENT_H

#include <jansson.h>
#include <signal.h>

#include "client.h"

/* Exit statuses of `txbox agent` (documented in docs/agent.md). */
enum {
    AGENT_EXIT_FINISHED = 0,      /* the model called finish */
    AGENT_EXIT_MAX_STEPS = 110,   /* the step budget ran out */
    AGENT_EXIT_TOKENS = 111,      /* the token budget ran out */
    AGENT_EXIT_STUCK = 112,       /* the same blocked/failing command kept coming after a warning */
    AGENT_EXIT_PROTOCOL = 113,    /* the model kept answering without a valid action */
    AGENT_EXIT_ENDPOINT = 114,    /* the endpoint failed: refused, malformed, unreachable */
    AGENT_EXIT_INTERRUPTED = 115, /* SIGINT/SIGTERM/SIGHUP */
    AGENT_EXIT_CONFLICT = 116,    /* finish: the task's transaction conflicted, nothing applied */
    AGENT_EXIT_HELD = 117,        /* finish: an effect rule holds the changes for review */
    AGENT_EXIT_REJECTED = 118,    /* finish: an effect rule refused the changes, nothing applied */
};

typedef enum agent_protocol { PROTO_AUTO = 0, PROTO_TOOLS, PROTO_TEXT } agent_protocol;

typedef struct agent_cfg {
    const char *ws;       /* workspace (absolute) */
    const char *endpoint; /* as given (recorded; carries no credentials) */
    const char *model;
    const char *task;
    agent_protocol protocol;
    bool stream;
    bool json;
    bool quiet;
    int max_steps;
    long long token_budget;
    double command_timeout_s;
    const char *policy;         /* passed to txbox run, or NULL */
    const char *api_key_env;    /* the key's variable: kept from the children */
    double temperature;         /* < 0: not sent */
    long max_completion_tokens; /* 0: not sent */
    size_t result_bytes;        /* size of one tool result for the model */
    bool per_command;           /* --no-transaction: each command commits on its own */
    const char *verify;         /* --verify: the commit gate of the task's transaction
                                    (limited by command_timeout_s) */
    llm_cfg llm;
} agent_cfg;

/* Runs the loop; prints the summary; returns the exit status. */
int agent_run(const agent_cfg *cfg);

/* The system prompt for a protocol (tools or text); tx: the task is one
 * transaction (verify: the commit gate's command, or NULL). */
char *agent_system_prompt(agent_protocol p, bool tx, const char *verify);
/* The tool definitions sent in tools mode. */
json_t *agent_tool_defs(bool tx);

#endif
