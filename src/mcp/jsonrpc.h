/* JSON-RPC 2.0 over newline-delimited streams, as MCP's stdio transport
 * uses it: a framer that cuts a byte stream into lines under a hard cap, a
 * classifier that turns one line into a request, a notification, a response
 * or the JSON-RPC error it calls for, and builders for the replies.
 *
 * No I/O and no global state: the MCP server, the fuzz target
 * (tests/fuzz/fuzz_jsonrpc.c) and its replay test all drive these same
 * functions. */
#ifndef TXBOX_MCP_JSONRPC_H
#define TXBOX_MCP_JSONRPC_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "util.h"

/* The longest message accepted; a longer line is drained and answered with
 * one Invalid Request error, never buffered. */
#define JRPC_MAX_LINE (4u * 1024u * 1024u)

enum {
    JRPC_PARSE_ERROR = -32700,
    JRPC_INVALID_REQUEST = -32600,
    JRPC_METHOD_NOT_FOUND = -32601,
    JRPC_INVALID_PARAMS = -32602,
    JRPC_INTERNAL_ERROR = -32603,
};

/* ---- framing ---- */

typedef enum {
    JRPC_FRAME_LINE,     /* one complete line (without its "\n" or "\r\n") */
    JRPC_FRAME_OVERLONG, /* a line passed the cap; its bytes up to the next newline are dropped */
} jrpc_frame_kind;

typedef void (*jrpc_line_fn)(void *ctx, jrpc_frame_kind kind, const char *line, size_t len);

typedef struct jrpc_framer {
    dbuf line; /* the line being assembled, at most cap bytes */
    size_t cap;
    bool draining; /* inside an over-long line: dropping bytes until its newline */
} jrpc_framer;

void jrpc_framer_init(jrpc_framer *f, size_t cap);
/* Cuts buf into lines; calls fn for each complete line and once for each
 * over-long line (as soon as it passes the cap). */
void jrpc_framer_feed(jrpc_framer *f, const char *buf, size_t n, jrpc_line_fn fn, void *ctx);
/* End of input: a last line without its newline is handed to fn. */
void jrpc_framer_eof(jrpc_framer *f, jrpc_line_fn fn, void *ctx);
void jrpc_framer_free(jrpc_framer *f);

/* ---- classification ---- */

typedef enum {
    JRPC_MSG_REQUEST,      /* method + id: must be answered */
    JRPC_MSG_NOTIFICATION, /* method, no id: never answered */
    JRPC_MSG_RESPONSE,     /* result or error + id: an answer to us (we send no requests) */
    JRPC_MSG_INVALID,      /* answer with jrpc_error(id, code, message) */
    JRPC_MSG_BLANK,        /* only white space: ignored */
} jrpc_msg_type;

typedef struct jrpc_msg {
    jrpc_msg_type type;
    json_t *root;       /* the parsed value (owned), or NULL */
    json_t *id;         /* borrowed from root; for INVALID the id to answer (NULL: null) */
    const char *method; /* borrowed */
    json_t *params;     /* borrowed; NULL when absent */
    int code;           /* INVALID: the JSON-RPC error code */
    char message[200];  /* INVALID: one line */
} jrpc_msg;

/* Classifies one line (len bytes, need not be NUL-terminated). Never fails:
 * every input gets a type. Free with jrpc_msg_free. */
jrpc_msg_type jrpc_parse(const char *buf, size_t len, jrpc_msg *m);
void jrpc_msg_free(jrpc_msg *m);

/* Is this a valid request id for MCP (a string or a number; never null)? */
bool jrpc_valid_id(const json_t *id);

/* ---- replies: one line of compact JSON, without the newline ---- */

/* {"jsonrpc":"2.0","id":ID,"result":RESULT}; steals result. */
char *jrpc_result(const json_t *id, json_t *result);
/* {"jsonrpc":"2.0","id":ID|null,"error":{"code":C,"message":M[,"data":D]}};
 * steals data (may be NULL). */
char *jrpc_error(const json_t *id, int code, const char *message, json_t *data);

#endif
