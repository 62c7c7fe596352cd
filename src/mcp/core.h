/* txbox mcp's dispatcher, under its transports: the MCP sessions, their
 * calls (a child txbox or a run in this process) and the one poll loop.
 *
 *   transport (stdio.c: stdin/stdout; http.c: Streamable HTTP)
 *       │  one JSON-RPC message in: mcp_sess_input(session, bytes, origin)
 *       ▼
 *   dispatcher (server.c): initialize, ping, tools/list, tools/call,
 *       │  notifications/cancelled; calls queued and run, answered through
 *       ▼  the session's send function, about the request's origin
 *   tools (tools.c): arguments → a CLI invocation; its JSON → a result
 *
 * A workspace (mcp_ws) is served by one or more sessions (stdio: one; HTTP:
 * one per Mcp-Session-Id). A session is where the protocol's state lives
 * (initialized, the revision, the multi-command transactions it began) and
 * the unit that ends: mcp_sess_end() is the one place a session ends
 * (end of input, DELETE, idle expiry, a signal), and the only one that
 * would end its txbox session. Everything here runs on the loop's thread;
 * a run in this process has a thread of its own that touches only its call.
 */
#ifndef TXBOX_MCP_CORE_H
#define TXBOX_MCP_CORE_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#include "jsonrpc.h"
#include "mcp.h"

typedef struct mcp_core mcp_core;
typedef struct mcp_ws mcp_ws;
typedef struct mcp_sess mcp_sess;

typedef struct mcp_core_opts {
    unsigned max_calls;         /* commands running at once, all sessions together */
    unsigned max_queued;        /* calls waiting for a slot, all sessions; more are refused */
    unsigned max_session_calls; /* calls in flight per session (0: no cap of its own) */
    bool keep_txs;              /* --keep-transactions */
    bool spawn_only;            /* --spawn: every call a child */
} mcp_core_opts;

/* What a transport gives the loop. */
typedef struct mcp_transport {
    void *ctx;
    /* Its descriptors into pf (room for max); returns how many. May lower
     * *timeout_ms (-1: none) for a timer of its own. */
    size_t (*fds)(void *ctx, struct pollfd *pf, size_t max, int *timeout_ms);
    /* After poll: the n entries fds filled, with their revents. */
    void (*events)(void *ctx, struct pollfd *pf, size_t n);
    /* A stop signal came: end every session (each call is cancelled). */
    void (*stop)(void *ctx);
    /* May the loop return (nothing left to read, to run or to write)? */
    bool (*done)(void *ctx);
} mcp_transport;

/* How a session's messages reach its client. line (owned by the callee;
 * NULL: none) is one JSON-RPC message about the request whose transport
 * handle is origin (stdio: NULL); final: it ends that request (its answer,
 * or NULL when none will come because it was cancelled). */
typedef void (*mcp_send_fn)(void *tctx, void *origin, char *line, bool final);
/* The session has ended: its calls are over, its transactions aborted.
 * report: what the end did, as JSON (the callee's to copy). The session
 * is freed when this returns. */
typedef void (*mcp_ended_fn)(void *tctx, const char *report);

mcp_core *mcp_core_new(const mcp_core_opts *o);
/* The loop, until a stop signal and the transport is done, or it is done
 * on its own (stdio: end of input). Returns an exit status. */
int mcp_core_run(mcp_core *c, const mcp_transport *t);
/* After an error in the loop: kills every call's child or thread and
 * waits for it (a session ending then ends). */
void mcp_core_kill(mcp_core *c);
/* Frees c after the loop (sessions must have ended). */
void mcp_core_free(mcp_core *c);
/* Calls running and queued, all sessions. */
unsigned mcp_core_calls(const mcp_core *c);

/* A served workspace: cfg is taken (its strings freed with the workspace);
 * name (may be NULL) only labels it in the server's log. */
mcp_ws *mcp_ws_new(mcp_core *c, const char *name, mcp_config *cfg);
const mcp_config *mcp_ws_config(const mcp_ws *w);
const char *mcp_ws_name(const mcp_ws *w);
void mcp_ws_free(mcp_ws *w);

mcp_sess *mcp_sess_new(mcp_core *c, mcp_ws *w, mcp_send_fn send, mcp_ended_fn ended, void *tctx);
/* One message from the client: len bytes, one JSON-RPC message or
 * anything else (classified here). Returns its type; for a request,
 * answered (through send, final) at once or when its call ends. */
jrpc_msg_type mcp_sess_input(mcp_sess *s, const char *buf, size_t len, void *origin);
/* As mcp_sess_input, for a message the transport parsed already (it
 * looked at it first: the HTTP transport needs to know an initialize). */
void mcp_sess_dispatch(mcp_sess *s, const jrpc_msg *m, void *origin);
/* A JSON-RPC error not tied to a request (id null): an over-long line. */
void mcp_sess_error(mcp_sess *s, void *origin, int code, const char *msg);
/* Has initialize succeeded? The negotiated revision. */
bool mcp_sess_ready(const mcp_sess *s);
const char *mcp_sess_version(const mcp_sess *s);
/* Calls of this session in flight (queued or running). */
unsigned mcp_sess_calls(const mcp_sess *s);
/* Ends the session: no more input is taken; with cancel its calls are
 * cancelled (each rolls back), otherwise they finish and are answered.
 * After the last, the transactions it began and left open are aborted
 * (unless --keep-transactions) and ended() is called, perhaps before this
 * returns. Calling it again only adds cancel. */
void mcp_sess_end(mcp_sess *s, bool cancel, const char *why);

#endif
