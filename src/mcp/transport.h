/* txbox mcp's transports, as `txbox mcp` (server.c) starts them: stdio.c
 * (stdin/stdout) and http.c (Streamable HTTP, `--listen`). */
#ifndef TXBOX_MCP_TRANSPORT_H
#define TXBOX_MCP_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"
#include "util.h"

/* "txbox mcp: " and a line on stderr. */
void mcp_log(const char *fmt, ...) PRINTF(1, 2);

/* Serves the workspace w on stdin/stdout until end of input or a stop
 * signal; an exit status. */
int mcp_stdio_serve(mcp_core *k, mcp_ws *w);

/* --listen and the options that go with it. */
enum {
    MCP_O_LISTEN = 256,
    MCP_O_TOKEN,
    MCP_O_TLS_CERT,
    MCP_O_TLS_KEY,
    MCP_O_PLAIN,
    MCP_O_ORIGIN,
    MCP_O_MAX_SESSIONS,
    MCP_O_SESSION_CALLS,
    MCP_O_SESSION_IDLE,
    MCP_O_MAX_CONNS,
    MCP_O_HTTP_END,
};

typedef struct mcp_http_opts {
    bool given; /* an HTTP option other than --listen was given */
    char *listen, *token_file, *tls_cert, *tls_key;
    bool plain_ok; /* --allow-plain-http */
    strvec origins;
    unsigned max_sessions, session_calls, max_conns;
    double session_idle;
} mcp_http_opts;

/* One of the options above (opt: MCP_O_*, arg: its value); 0, or an exit
 * status after a message. */
int mcp_http_option(mcp_http_opts *o, int opt, const char *arg);
/* All of them together, after the last (defaults filled in); 0 or an exit
 * status after a message. */
int mcp_http_check(mcp_http_opts *o);
void mcp_http_opts_free(mcp_http_opts *o);
/* A workspace's name in /mcp/NAME. */
bool mcp_http_name_ok(const char *s, size_t len);
/* Serves dflt at /mcp (may be NULL) and ws[i] at /mcp/NAME until a stop
 * signal; an exit status. */
int mcp_http_serve(mcp_core *k, const mcp_http_opts *o, mcp_ws *dflt, mcp_ws **ws, size_t nws);

#endif
