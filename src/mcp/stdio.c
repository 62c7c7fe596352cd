/* txbox mcp's stdio transport: newline-delimited JSON-RPC 2.0 on stdin and
 * stdout (MCP's stdio transport), one session for the server's lifetime.
 *
 * stdout carries protocol messages only: the server keeps a private
 * descriptor for the protocol and points fd 1 at stderr, so nothing else
 * (a library's stray printf) can reach the client. Diagnostics go to
 * stderr. Each line is capped at JRPC_MAX_LINE. At end of input the
 * session ends: running calls finish and are answered, then the server
 * exits 0. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "../cmds.h"
#include "core.h"
#include "jsonrpc.h"
#include "transport.h"

#define OUTQ_PAUSE (64u << 20) /* stop reading requests while this much output waits */

typedef struct stdio_tr {
    mcp_sess *sess; /* NULL once it has ended */
    int in_fd, out_fd;
    jrpc_framer framer;
    dbuf outq; /* bytes waiting to be written to the client */
    size_t outq_off;
    bool out_broken; /* the client closed our stdout */
    bool eof;        /* no more input is read */
} stdio_tr;

static void tr_send(void *ctx, void *origin, char *line, bool final)
{
    stdio_tr *t = ctx;
    (void)origin;
    (void) final;
    if (line && !t->out_broken) {
        dbuf_addstr(&t->outq, line);
        dbuf_add(&t->outq, "\n", 1);
    }
    free(line);
}

static void tr_ended(void *ctx, const char *report)
{
    stdio_tr *t = ctx;
    (void)report;
    t->sess = NULL;
}

/* Writes what the client will take without blocking (poll said POLLOUT). */
static void flush_some(stdio_tr *t)
{
    while (t->outq_off < t->outq.len) {
        size_t n = t->outq.len - t->outq_off;
        if (n > 4096) /* PIPE_BUF: fits whenever POLLOUT is set */
            n = 4096;
        ssize_t w = write(t->out_fd, t->outq.p + t->outq_off, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            if (errno != EAGAIN) {
                mcp_log("cannot write to stdout (%s); discarding output", strerror(errno));
                t->out_broken = true;
                t->outq.len = t->outq_off = 0;
            }
            return;
        }
        t->outq_off += (size_t)w;
        struct pollfd p = {.fd = t->out_fd, .events = POLLOUT};
        if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
            break;
    }
    if (t->outq_off == t->outq.len) {
        t->outq.len = t->outq_off = 0;
    } else if (t->outq_off > (1u << 20)) {
        memmove(t->outq.p, t->outq.p + t->outq_off, t->outq.len - t->outq_off);
        t->outq.len -= t->outq_off;
        t->outq_off = 0;
    }
}

static void on_line(void *ctx, jrpc_frame_kind kind, const char *line, size_t len)
{
    stdio_tr *t = ctx;
    if (!t->sess)
        return;
    if (kind == JRPC_FRAME_OVERLONG) {
        char msg[100];
        snprintf(msg, sizeof msg, "Invalid Request: message longer than %u bytes", JRPC_MAX_LINE);
        mcp_sess_error(t->sess, NULL, JRPC_INVALID_REQUEST, msg);
        return;
    }
    mcp_sess_input(t->sess, line, len, NULL);
}

static void read_input(stdio_tr *t)
{
    char buf[65536];
    ssize_t n = read(t->in_fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        if (n < 0)
            mcp_log("reading stdin: %s", strerror(errno));
        jrpc_framer_eof(&t->framer, on_line, t);
        t->eof = true;
        if (t->sess) /* the calls still running finish and are answered */
            mcp_sess_end(t->sess, false, "end of input");
        return;
    }
    jrpc_framer_feed(&t->framer, buf, (size_t)n, on_line, t);
}

static size_t tr_fds(void *ctx, struct pollfd *pf, size_t max, int *timeout_ms)
{
    stdio_tr *t = ctx;
    (void)max;
    (void)timeout_ms;
    bool want_input = !t->eof && t->outq.len - t->outq_off < OUTQ_PAUSE;
    pf[0] = (struct pollfd){.fd = want_input ? t->in_fd : -1, .events = POLLIN};
    pf[1] = (struct pollfd){.fd = (!t->out_broken && t->outq_off < t->outq.len) ? t->out_fd : -1,
                            .events = POLLOUT};
    return 2;
}

static void tr_events(void *ctx, struct pollfd *pf, size_t n)
{
    stdio_tr *t = ctx;
    (void)n;
    if (pf[1].revents & (POLLOUT | POLLERR | POLLHUP)) {
        if (pf[1].revents & POLLOUT) {
            flush_some(t);
        } else {
            mcp_log("the client closed stdout; discarding output");
            t->out_broken = true;
            t->outq.len = t->outq_off = 0;
        }
    }
    if (!t->eof && (pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
        read_input(t);
    if (!t->out_broken && t->outq_off < t->outq.len) {
        struct pollfd p = {.fd = t->out_fd, .events = POLLOUT};
        if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT))
            flush_some(t);
    }
}

static void tr_stop(void *ctx)
{
    stdio_tr *t = ctx;
    t->eof = true;
    if (t->sess)
        mcp_sess_end(t->sess, true, "server stopping");
}

static bool tr_done(void *ctx)
{
    stdio_tr *t = ctx;
    return t->eof && !t->sess && (t->out_broken || t->outq_off == t->outq.len);
}

int mcp_stdio_serve(mcp_core *k, mcp_ws *w)
{
    stdio_tr t = {.in_fd = -1, .out_fd = -1};
    /* The protocol gets private descriptors; fd 0 reads /dev/null and fd 1
     * is stderr, so nothing but protocol messages reaches the client. */
    t.in_fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
    t.out_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (t.in_fd < 0 || t.out_fd < 0 || devnull < 0 || dup2(devnull, 0) < 0 || dup2(2, 1) < 0)
        return cli_failf("mcp: cannot set up stdin/stdout: %s", strerror(errno));
    close(devnull);
    jrpc_framer_init(&t.framer, JRPC_MAX_LINE);
    dbuf_init(&t.outq, 0);
    t.sess = mcp_sess_new(k, w, tr_send, tr_ended, &t);
    mcp_log("serving workspace %s (MCP %s and older)", mcp_ws_config(w)->workspace, mcp_protocol_versions[0]);
    mcp_transport tr = {.ctx = &t, .fds = tr_fds, .events = tr_events, .stop = tr_stop, .done = tr_done};
    int rc = mcp_core_run(k, &tr);
    if (t.sess) { /* only after an error in the loop */
        mcp_sess_end(t.sess, true, "server error");
        mcp_core_kill(k);
    }
    jrpc_framer_free(&t.framer);
    dbuf_free(&t.outq);
    close(t.in_fd);
    close(t.out_fd);
    return rc;
}
