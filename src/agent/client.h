/* The HTTP client for an OpenAI-compatible /v1/chat/completions endpoint
 * (libcurl): one POST per model turn, with timeouts, retries with backoff on
 * 429, 5xx and connection errors, a cap on every response, streamed (SSE)
 * replies parsed as they arrive. The API key goes only into the
 * Authorization header; it is never logged, printed or recorded. */
#ifndef TXBOX_AGENT_CLIENT_H
#define TXBOX_AGENT_CLIENT_H

#include <jansson.h>
#include <signal.h>

#include "chat.h"

typedef struct llm_cfg {
    char *url;           /* full URL of .../chat/completions */
    const char *api_key; /* or NULL */
    double connect_timeout_s;
    double timeout_s;      /* whole request */
    double idle_timeout_s; /* no byte received for this long: give up */
    int retries;           /* further attempts after a transient failure */
    double retry_delay_s;  /* first backoff; doubles each attempt (cap 30 s) */
    size_t max_bytes;      /* response body cap */
    size_t content_cap, args_cap;
    volatile sig_atomic_t *cancel;
} llm_cfg;

typedef enum llm_fail {
    LLM_OK = 0,
    LLM_REJECTED,    /* a 4xx other than 429: the request was refused */
    LLM_BAD_REPLY,   /* malformed, oversized, not OpenAI-compatible */
    LLM_UNAVAILABLE, /* transient failures outlasted the retries */
    LLM_CANCELLED,   /* interrupted by a signal */
    LLM_SETUP,       /* bad URL or libcurl failure */
} llm_fail;

typedef struct llm_call {
    llm_fail fail;
    long status; /* last HTTP status (0: none) */
    int attempts;
    bool streamed; /* the reply came as an event stream */
    size_t sent_bytes, received_bytes;
    json_t *log; /* one object per attempt: status, error, ms, bytes */
} llm_call;

typedef struct llm_client llm_client;

MUST_CHECK int llm_client_new(const llm_cfg *cfg, llm_client **out, txbox_error *err);
void llm_client_free(llm_client *c);

/* POSTs body (a JSON request) and reads the reply into *reply (initialized
 * here; the caller frees it). Returns 0, or <0 with err and call->fail set.
 * call->log is created here and belongs to the caller. */
MUST_CHECK int llm_complete(llm_client *c, const char *body, chat_reply *reply, llm_call *call,
                            txbox_error *err);

/* The URL of the chat completions API for a user-given endpoint:
 * ".../chat/completions" as is, ".../v1" + "/chat/completions", anything
 * else + "/v1/chat/completions". NULL (err filled) for a URL that is not
 * http(s) or that carries credentials. */
char *llm_endpoint_url(const char *endpoint, txbox_error *err);

#endif
