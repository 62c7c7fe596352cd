/* OpenAI-compatible chat completions: reading a reply.
 *
 * A reply arrives either whole (`"object": "chat.completion"`: choices[0]
 * .message with content and tool_calls) or streamed as SSE events, each a
 * `chat.completion.chunk` whose choices[0].delta carries a piece of the
 * content or of a tool call (tool_calls[].index says which call; id, type
 * and function.name come first, function.arguments in fragments), the last
 * one a finish_reason, an optional usage-only chunk, then `data: [DONE]`.
 * Both paths fill the same chat_reply; every field has a cap and exceeding
 * it is an error, never a silent cut. Only choices[0] is read (we ask for
 * one choice). */
#ifndef TXBOX_AGENT_CHAT_H
#define TXBOX_AGENT_CHAT_H

#include <jansson.h>

#include "util.h"

#define CHAT_MAX_CALLS 16

typedef struct chat_call {
    char *id; /* as the server gave it, or NULL */
    dbuf name;
    dbuf args; /* the arguments as a JSON text (possibly invalid: the model wrote it) */
} chat_call;

typedef struct chat_reply {
    dbuf content;
    chat_call calls[CHAT_MAX_CALLS];
    size_t ncalls;
    char finish_reason[32];
    json_int_t prompt_tokens, completion_tokens, total_tokens;
    bool have_usage;
    bool done;   /* streamed: `data: [DONE]` seen */
    bool choice; /* at least one choice seen */
    uint64_t chunks;
    size_t content_cap, args_cap;
    size_t slot_map[CHAT_MAX_CALLS]; /* streamed delta index -> calls[] slot */
} chat_reply;

void chat_reply_init(chat_reply *r, size_t content_cap, size_t args_cap);
void chat_reply_free(chat_reply *r);

/* A whole (non-streamed) response body with status 200. */
MUST_CHECK int chat_parse_response(const char *body, size_t len, chat_reply *r, txbox_error *err);
/* One SSE event of a streamed response. */
MUST_CHECK int chat_stream_event(chat_reply *r, const char *event, const char *data, size_t len,
                                 txbox_error *err);
/* The stream has ended: was it complete? */
MUST_CHECK int chat_stream_end(chat_reply *r, txbox_error *err);

/* The id the loop uses for call i (the server's, or a stable made-up one). */
const char *chat_call_id(const chat_reply *r, size_t i, char buf[32]);
/* The assistant message to append to the history. */
json_t *chat_reply_message(const chat_reply *r);

/* A short printable description of an error body (the `error.message`,
 * `message` or `detail` of a JSON error, else the start of the body with
 * anything unprintable replaced), at most outsz-1 bytes. */
void chat_error_text(const char *body, size_t len, char *out, size_t outsz);

/* For the fuzzer and its corpus replay: the bytes as an SSE stream of
 * chat chunks; returns the number of tool calls or -1. */
int agent_fuzz_chat_stream(const uint8_t *data, size_t size);

#endif
