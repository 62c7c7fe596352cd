/* The HTTP transport's reading of a request's head (http.c): which
 * headers it has, what they say, and whether the request may go on or is
 * answered at once with an error status. No I/O and no global state, so
 * that the fuzz target (tests/fuzz/fuzz_httpgate.c) and its replay test
 * drive exactly what the server runs.
 *
 * The order of the checks, each refusing with its status:
 *   a header we read given twice                           400
 *   an Origin not allowed (DNS rebinding)                  403
 *   OPTIONS (a browser's preflight, from an allowed Origin) 204 / 403
 *   no valid bearer token                                  401
 *   a path that is no workspace                            404
 *   a method other than POST, GET, DELETE                  405
 *   MCP-Protocol-Version not one we speak                  400
 *   Mcp-Session-Id not visible ASCII, or too long          400
 *   POST: Content-Type not application/json                415
 *   POST: Accept naming neither JSON nor SSE               406
 *   GET: Accept without text/event-stream                  406
 *   GET without Last-Event-ID (no server stream offered)   405
 *   GET: Last-Event-ID not one of ours                     400
 *   GET or DELETE without Mcp-Session-Id                   400
 * What needs the server's state (a session that exists, a body that fits)
 * is the caller's. */
#ifndef TXBOX_MCP_HTTPGATE_H
#define TXBOX_MCP_HTTPGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_TOKEN_MIN 16   /* a bearer token shorter than this is refused at start */
#define HTTP_TOKEN_MAX 4096 /* and one longer */
#define HTTP_SESSION_ID_MAX 128
#define HTTP_NAME_MAX 64

typedef enum { HM_OTHER, HM_POST, HM_GET, HM_DELETE, HM_OPTIONS } http_method;

/* The headers read, each once at most (a second copy sets dup). Values
 * point into the caller's storage. */
typedef struct http_head {
    const char *authz, *origin, *accept, *ctype, *clen, *session, *proto, *last_event;
    bool dup;
} http_head;

/* Notes one request header (name case-insensitive). */
void http_head_note(http_head *h, const char *name, const char *value);

typedef struct http_gate_cfg {
    const char *token; /* the valid token; NULL: none is (every request refused) */
    size_t token_len;
    const char *const *origins; /* Origin values allowed (exact, case-insensitive) */
    size_t norigins;
    const char *const *names; /* the named workspaces: /mcp/NAME */
    size_t nnames;
    bool has_default;            /* /mcp serves a workspace */
    const char *const *versions; /* protocol revisions spoken, NULL-terminated */
} http_gate_cfg;

typedef struct http_verdict {
    int status;                   /* 0: go on; else answer this status at once */
    const char *why;              /* the reason, one line (static) */
    const char *www_authenticate; /* with 401: the challenge (static) */
    http_method method;
    int ws;          /* the workspace: -1 the default, else names[ws] */
    bool sse;        /* the client takes text/event-stream */
    bool json;       /* the client takes application/json */
    bool cors;       /* an allowed Origin came: answer with CORS headers */
    unsigned stream; /* GET: Last-Event-ID's stream and event */
    uint32_t seq;
} http_verdict;

void http_gate(const http_gate_cfg *cfg, const char *method, const char *url, const http_head *h,
               http_verdict *v);

/* Helpers, each checked on its own by the fuzz target. */

/* Does the Accept value admit type (the type itself, its major type with
 * a star, or star/star; q not 0)? A missing header (NULL) admits
 * everything. */
bool http_accepts(const char *accept, const char *type);
/* The token of "Bearer TOKEN" (scheme case-insensitive, token68): 0 and
 * *tok, *len pointing into authz; -1 when it is not one. */
int http_bearer(const char *authz, const char **tok, size_t *len);
/* Equal, in a time that depends on glen only. */
bool http_token_equal(const char *want, size_t wlen, const char *got, size_t glen);
/* A token as a file holds it: surrounding white space dropped (in place,
 * *len adjusted); false when what is left is not a token68 of
 * HTTP_TOKEN_MIN..HTTP_TOKEN_MAX characters. */
bool http_token_clean(char *buf, size_t *len);
/* "STREAM-SEQ", both decimal, no sign or leading zero but "0". */
bool http_event_id(const char *s, unsigned *stream, uint32_t *seq);
/* A workspace name: 1..HTTP_NAME_MAX of [A-Za-z0-9._-], not starting with '.'. */
bool http_name_ok(const char *s, size_t len);
/* HOST:PORT, [V6]:PORT: host copied into host (cap bytes, NUL-terminated),
 * port 0-65535. */
bool http_hostport(const char *s, char *host, size_t cap, uint16_t *port);

#endif
