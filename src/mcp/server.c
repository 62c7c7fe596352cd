/* txbox mcp: a Model Context Protocol server on stdin/stdout.
 *
 *   txbox mcp [-C DIR] [--policy FILE] [--max-calls N] [--keep-transactions]
 *             [--spawn]
 *
 * One poll loop. Messages are newline-delimited JSON-RPC 2.0 (MCP stdio
 * transport); each line is capped at JRPC_MAX_LINE. A `run` call runs in
 * this process (src/resident.c): a thread calls txbox_run with the
 * workspace handle and the policy the server keeps open, and the loop
 * polls a pipe the thread closes when it is done; cancelling sets the
 * run's cancel flag, and txbox_run kills the sandbox and rolls back. One
 * such run at a time: a `run` that comes while one runs in the process,
 * and every other tool, becomes a child process running the txbox CLI
 * (`txbox run --json ...`, `txbox log --json`, ...), with its own pipes,
 * so several calls are in flight at once; such a call is cancelled by
 * SIGTERM to its child, which makes `txbox run` roll back. Children die
 * with the server (PR_SET_PDEATHSIG), and so does the sandbox of a run in
 * the process: even a killed server leaves no command running, and the
 * next open's recovery finishes or discards what it left. `--spawn` makes
 * every call a child, as before.
 *
 * stdout carries protocol messages only: the server keeps a private
 * descriptor for the protocol and points fd 1 at stderr, so nothing else
 * (a library's stray printf) can reach the client. Diagnostics go to stderr.
 *
 * Lifecycle: requests other than initialize and ping before initialize get
 * -32600; at end of input the server stops reading, lets running calls
 * finish and answers them, then exits 0; on SIGTERM/SIGINT/SIGHUP it
 * cancels every running call (each rolls back), waits for them and exits 0.
 *
 * Multi-command transactions (`begin`, `run` with `tx`, `commit`, ...) are
 * the CLI's too, so they outlive a call. Those begun in this session belong
 * to it: when the session ends (end of input, the client gone, SIGTERM),
 * after the last call, each one still open is aborted, since its id lived
 * only in the client's conversation and nothing of it was promised to the
 * workspace; `--keep-transactions` leaves them open instead (for `txbox
 * commit ID` by hand). A server killed with SIGKILL leaves them open:
 * `txbox status` lists them, `txbox abort ID` drops them.
 * See docs/mcp.md. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cmds.h"
#include "jsonrpc.h"
#include "mcp.h"
#include "../resident.h"
#include "../run_args.h"
#include "../spawn.h"
#include "txbox_policy.h"

#define MAX_CALLS_DEFAULT 8                   /* children at once; more calls wait in a queue */
#define MAX_QUEUED 256                        /* calls waiting; more are refused */
#define CHILD_OUT_CAP (64u << 20)             /* a child's stdout (the CLI's JSON) */
#define CHILD_ERR_CAP (64u << 10)             /* a child's stderr (its error line) */
#define OUTQ_PAUSE (64u << 20)                /* stop reading requests while this much output waits */
#define KILL_AFTER_NS (30ull * 1000000000ull) /* a cancelled child that ignores SIGTERM */
#define SERVER_ERROR (-32000)                 /* implementation-defined server error */
#define PROGRESS_EVERY_NS 1000000000ull       /* notifications/progress while a call runs */
#define RECENT_CAP 2048                       /* the output kept for the progress message */
#define TEE_FD 3                              /* where `txbox run --tee-fd` copies the output in the child */
#define TEE_FD_STR "3"

typedef enum { CALL_QUEUED, CALL_RUNNING } call_state;

typedef struct call {
    struct call *next;
    json_t *id;
    const mcp_tool *tool;
    mcp_invocation inv;
    call_state state;
    pid_t pid;
    int pidfd, out_fd, err_fd;
    dbuf out, err;
    bool cancelled;   /* no answer will be sent */
    uint64_t term_ns; /* when SIGTERM was sent */
    bool killed;
    /* progress (the request's _meta.progressToken): the command's output
     * as it comes (run --tee-fd), its last bytes kept for the message */
    json_t *progress_token;
    int tee_fd;
    uint64_t started_ns, next_progress_ns;
    json_int_t progress;
    char recent[RECENT_CAP];
    size_t recent_len;
    /* a `run` in this process (resident.h): a thread runs it, and closes
     * done_w when it is done (done_fd, in pidfd's place, reads EOF) */
    bool resident;
    resident *res;
    struct run_args ra;
    pthread_t th;
    int done_w, tee_w; /* the thread's ends */
    volatile int cancel;
    int status;
    char *r_out, *r_err;
} call;

typedef struct server {
    mcp_config cfg;
    int in_fd, out_fd, sig_fd;
    jrpc_framer framer;
    dbuf outq; /* bytes waiting to be written to the client */
    size_t outq_off;
    bool out_broken; /* the client closed our stdout */
    bool eof, stopping;
    enum { S_NEW, S_READY } state;
    const char *version; /* negotiated */
    call *calls;
    unsigned running, queued, max_calls;
    json_t *begun; /* ids of the transactions `begin` opened in this session */
    resident *res; /* the workspace kept open for `run` in this process (NULL: --spawn) */
    bool res_busy; /* a call runs in it */
    bool keep_txs; /* --keep-transactions: leave them open at the end */
} server;

static void logmsg(const char *fmt, ...) PRINTF(1, 2);
static void logmsg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("txbox mcp: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- output ---- */

static void send_line(server *s, char *msg)
{
    if (!s->out_broken) {
        dbuf_addstr(&s->outq, msg);
        dbuf_add(&s->outq, "\n", 1);
    }
    free(msg);
}

static void reply(server *s, const json_t *id, json_t *result) { send_line(s, jrpc_result(id, result)); }

static void reply_error(server *s, const json_t *id, int code, const char *fmt, ...) PRINTF(4, 5);
static void reply_error(server *s, const json_t *id, int code, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    send_line(s, jrpc_error(id, code, msg, NULL));
}

/* Writes what the client will take without blocking (poll said POLLOUT). */
static void flush_some(server *s)
{
    while (s->outq_off < s->outq.len) {
        size_t n = s->outq.len - s->outq_off;
        if (n > 4096) /* PIPE_BUF: fits whenever POLLOUT is set */
            n = 4096;
        ssize_t w = write(s->out_fd, s->outq.p + s->outq_off, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            if (errno != EAGAIN) {
                logmsg("cannot write to stdout (%s); discarding output", strerror(errno));
                s->out_broken = true;
                s->outq.len = s->outq_off = 0;
            }
            return;
        }
        s->outq_off += (size_t)w;
        struct pollfd p = {.fd = s->out_fd, .events = POLLOUT};
        if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
            break;
    }
    if (s->outq_off == s->outq.len) {
        s->outq.len = s->outq_off = 0;
    } else if (s->outq_off > (1u << 20)) {
        memmove(s->outq.p, s->outq.p + s->outq_off, s->outq.len - s->outq_off);
        s->outq.len -= s->outq_off;
        s->outq_off = 0;
    }
}

/* ---- children ---- */

static void call_free(call *c)
{
    if (c->done_w >= 0)
        close(c->done_w);
    if (c->tee_w >= 0)
        close(c->tee_w);
    free(c->r_out);
    free(c->r_err);
    json_decref(c->id);
    json_decref(c->progress_token);
    if (c->tee_fd >= 0)
        close(c->tee_fd);
    mcp_invocation_free(&c->inv);
    if (c->pidfd >= 0)
        close(c->pidfd);
    if (c->out_fd >= 0)
        close(c->out_fd);
    if (c->err_fd >= 0)
        close(c->err_fd);
    dbuf_free(&c->out);
    dbuf_free(&c->err);
    free(c);
}

static void unlink_call(server *s, call *c)
{
    for (call **p = &s->calls; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    if (c->state == CALL_RUNNING)
        s->running--;
    else
        s->queued--;
}

/* Inserts two arguments at position at of the invocation's argv. */
static void argv_insert(mcp_invocation *inv, size_t at, const char *a, const char *b)
{
    size_t n = 0;
    while (inv->argv[n])
        n++;
    inv->argv = xrealloc(inv->argv, (n + 3) * sizeof *inv->argv);
    memmove(inv->argv + at + 2, inv->argv + at, (n - at + 1) * sizeof *inv->argv);
    inv->argv[at] = xstrdup(a);
    inv->argv[at + 1] = xstrdup(b);
}

/* The call's CLI invocation as a child (spawn.c): stdout and stderr to
 * pipes, stdin from /dev/null, started in the call's directory; with a
 * progress token, the output's copy (--tee-fd) on a third pipe. */
static int spawn_child(call *c)
{
    bool tee = c->progress_token && c->inv.tee;
    if (tee) /* the command's output comes to us on a third pipe */
        argv_insert(&c->inv, 3, "--tee-fd", TEE_FD_STR);
    struct self_child ch;
    txbox_error e = {0};
    if (self_spawn(c->inv.argv, NULL, c->inv.cwd_fd, NULL, tee ? TEE_FD : -1, &ch, &e) < 0) {
        logmsg("%s", e.msg);
        errno = e.code;
        return -1;
    }
    c->pid = ch.pid;
    c->pidfd = ch.pidfd;
    c->out_fd = ch.out_fd;
    c->err_fd = ch.err_fd;
    if (tee)
        c->tee_fd = ch.tee_fd;
    return 0;
}

/* The thread of a `run` in this process. It starts with no signal
 * blocked, since the sandbox (and so the command) gets its caller's mask;
 * the server's handlers (on_stop_signal, on_wake) are replaced by the
 * defaults at the command's execve. */
static void *resident_main(void *arg)
{
    call *c = arg;
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, NULL);
    char cwd[48];
    snprintf(cwd, sizeof cwd, "/proc/self/fd/%d", c->inv.cwd_fd);
    c->status = resident_run(c->res, &c->ra, cwd, c->tee_w, &c->cancel, &c->r_out, &c->r_err);
    if (c->tee_w >= 0)
        close(c->tee_w);
    c->tee_w = -1;
    int w = c->done_w;
    c->done_w = -1;
    close(w); /* the server may free c from here on */
    return NULL;
}

/* A `run` in this process, when it can be: one at a time (the sandbox's
 * init shares the server's table of descriptors until the command starts,
 * and keeps a copy of it while the command runs: a second transaction's
 * locks and pipes would be held by the first one's init), on a workspace
 * the overlay can use, with a command line that reads as `txbox run`'s.
 * 0 started, 1 not for this process (the caller spawns), -1 error. */
static int start_resident(server *s, call *c)
{
    if (!s->res || s->res_busy || strcmp(mcp_tool_name(c->tool), "run"))
        return 1;
    int argc = 0;
    while (c->inv.argv[argc])
        argc++;
    memset(&c->ra, 0, sizeof c->ra);
    if (run_parse(argc - 1, c->inv.argv + 1, &c->ra) != -1 || !c->ra.json ||
        strcmp(c->ra.dir, s->cfg.workspace) || !resident_can_run(s->res, &c->ra))
        return 1;
    int done[2], tee[2] = {-1, -1};
    if (pipe2(done, O_CLOEXEC | O_NONBLOCK) < 0)
        return -1;
    if (c->progress_token && c->inv.tee && pipe2(tee, O_CLOEXEC | O_NONBLOCK) < 0) {
        int e = errno;
        close(done[0]);
        close(done[1]);
        errno = e;
        return -1;
    }
    c->res = s->res;
    c->pidfd = done[0];
    c->done_w = done[1];
    c->tee_fd = tee[0];
    c->tee_w = tee[1];
    c->resident = true;
    int e = pthread_create(&c->th, NULL, resident_main, c);
    if (e) {
        c->resident = false;
        errno = e;
        return -1; /* call_free closes the descriptors */
    }
    s->res_busy = true;
    return 0;
}

static int spawn(server *s, call *c)
{
    c->started_ns = now_ns();
    c->next_progress_ns = c->started_ns + PROGRESS_EVERY_NS;
    int rc = start_resident(s, c);
    return rc <= 0 ? rc : spawn_child(c);
}

/* Moves queued calls to running while there is room. */
static void start_queued(server *s)
{
    call *c = s->calls;
    while (c && s->running < s->max_calls) {
        call *next = c->next;
        if (c->state == CALL_QUEUED) {
            if (spawn(s, c) < 0) {
                int e = errno;
                reply(s, c->id,
                      mcp_error_result("txbox mcp: cannot start txbox %s: %s", mcp_tool_name(c->tool),
                                       strerror(e)));
                unlink_call(s, c);
                call_free(c);
            } else {
                c->state = CALL_RUNNING;
                s->queued--;
                s->running++;
            }
        }
        c = next;
    }
}

/* Reads what a child's pipe has; returns false at EOF or error. */
static bool drain(int *fd, dbuf *b)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(*fd, buf, sizeof buf);
        if (n > 0) {
            dbuf_add(b, buf, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return true;
        close(*fd);
        *fd = -1;
        return false;
    }
}

/* Keeps the last RECENT_CAP bytes of the command's output; false at EOF. */
static bool drain_recent(call *c)
{
    char buf[16384];
    for (;;) {
        ssize_t n = read(c->tee_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return true;
        if (n <= 0) {
            close(c->tee_fd);
            c->tee_fd = -1;
            return false;
        }
        size_t k = (size_t)n;
        const char *p = buf;
        if (k >= RECENT_CAP) {
            p += k - RECENT_CAP;
            k = RECENT_CAP;
        }
        if (c->recent_len + k > RECENT_CAP) {
            size_t drop = c->recent_len + k - RECENT_CAP;
            memmove(c->recent, c->recent + drop, c->recent_len - drop);
            c->recent_len -= drop;
        }
        memcpy(c->recent + c->recent_len, p, k);
        c->recent_len += k;
    }
}

/* notifications/progress for a running call whose request asked for it:
 * progress counts the notifications (it must increase), the message says
 * how long it has run and its last lines of output. */
static void send_progress(server *s, call *c, uint64_t now)
{
    c->next_progress_ns = now + PROGRESS_EVERY_NS;
    json_t *params = json_pack("{s:O,s:I}", "progressToken", c->progress_token, "progress", ++c->progress);
    /* the message field is in the revisions after 2024-11-05 */
    if (strcmp(s->version, "2024-11-05")) {
        dbuf m;
        dbuf_init(&m, 0);
        char head[96];
        snprintf(head, sizeof head, "txbox %s: running for %.0f s", mcp_tool_name(c->tool),
                 (double)(now - c->started_ns) / 1e9);
        dbuf_addstr(&m, head);
        /* the last 400 bytes, from a line start when there is one, as text */
        size_t from = c->recent_len > 400 ? c->recent_len - 400 : 0;
        const char *nl = memchr(c->recent + from, '\n', c->recent_len - from);
        if (from && nl && nl + 1 < c->recent + c->recent_len)
            from = (size_t)(nl + 1 - c->recent);
        if (c->recent_len > from) {
            dbuf_addstr(&m, "; recent output:\n");
            dbuf_add(&m, c->recent + from, c->recent_len - from);
        }
        json_t *msg = json_stringn(dbuf_str(&m), m.len);
        if (!msg) /* not UTF-8: the time only */
            msg = json_string(head);
        json_object_set_new(params, "message", msg);
        dbuf_free(&m);
    }
    json_t *n =
        json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", "notifications/progress", "params", params);
    char *line = json_dumps(n, JSON_COMPACT);
    json_decref(n);
    if (line)
        send_line(s, line);
}

/* A `begin` that succeeded: its transaction belongs to the session (also
 * one whose call was cancelled after it opened the transaction). */
static void note_begun(server *s, const call *c, json_t *result)
{
    if (!mcp_tool_begins(c->tool) || json_is_true(json_object_get(result, "isError")))
        return;
    json_t *tx = json_object_get(json_object_get(result, "structuredContent"), "tx");
    if (json_is_string(tx) && json_array_size(s->begun) < 100000)
        json_array_append(s->begun, tx);
}

/* The end of the session: abort every transaction it began that is still
 * open (one that was committed or aborted is closed: skipped). */
static void abort_begun(server *s)
{
    if (!json_array_size(s->begun))
        return;
    txbox_ws *ws = NULL;
    txbox_error err = {0};
    if (txbox_ws_open(s->cfg.workspace, TXBOX_WS_CREATE, &ws, &err) < 0) {
        char t[REMEDY_TEXT_MAX];
        logmsg("cannot abort this session's open transactions: %s", remedy_error_text(&err, t, sizeof t));
        return;
    }
    _cleanup_free_ char *st = NULL;
    json_t *all = NULL;
    if (txbox_multi_status(ws, &st, &err) == 0)
        all = json_loads(st, 0, NULL);
    json_t *open = json_object_get(all, "transactions");
    size_t i;
    json_t *id;
    json_array_foreach(s->begun, i, id)
    {
        bool is_open = false;
        size_t k;
        json_t *o;
        json_array_foreach(open, k, o) is_open = is_open || json_equal(json_object_get(o, "tx"), id);
        if (!is_open)
            continue;
        if (s->keep_txs) {
            logmsg("transaction %s begun in this session is left open (--keep-transactions)",
                   json_string_value(id));
            continue;
        }
        txbox_multi *m = NULL;
        err = (txbox_error){0};
        if (txbox_multi_open(ws, json_string_value(id), &m, &err) == 0 && txbox_multi_abort(m, &err) == 0)
            logmsg("transaction %s begun in this session and never committed: aborted",
                   json_string_value(id));
        else {
            char t[REMEDY_TEXT_MAX];
            logmsg("transaction %s begun in this session: cannot abort it: %s", json_string_value(id),
                   remedy_error_text(&err, t, sizeof t));
        }
        txbox_multi_close(m);
    }
    json_decref(all);
    txbox_ws_close(ws);
}

static void finish(server *s, call *c)
{
    int wstatus = 0;
    if (c->resident) {
        /* its answer, as the CLI would have printed it and exited */
        pthread_join(c->th, NULL);
        s->res_busy = false;
        wstatus = W_EXITCODE(c->status & 0xff, 0);
        dbuf_addstr(&c->out, c->r_out ? c->r_out : "");
        dbuf_addstr(&c->err, c->r_err ? c->r_err : "");
    } else {
        while (waitpid(c->pid, &wstatus, 0) < 0 && errno == EINTR)
            ;
    }
    if (c->out_fd >= 0)
        drain(&c->out_fd, &c->out);
    if (c->err_fd >= 0)
        drain(&c->err_fd, &c->err);
    if (c->tee_fd >= 0)
        drain_recent(c);
    if (c->cancelled) {
        logmsg("request cancelled: txbox %s ended (status 0x%x)", mcp_tool_name(c->tool), (unsigned)wstatus);
        if (mcp_tool_begins(c->tool) && !c->out.dropped) {
            /* it may have opened its transaction before the signal */
            json_t *r = mcp_tool_result(c->tool, &c->inv, wstatus, dbuf_str(&c->out), c->out.len,
                                        dbuf_str(&c->err), c->err.len);
            note_begun(s, c, r);
            json_decref(r);
        }
    } else if (c->out.dropped) {
        reply(s, c->id,
              mcp_error_result("txbox %s printed more than %u bytes; result dropped", mcp_tool_name(c->tool),
                               CHILD_OUT_CAP));
    } else {
        json_t *r = mcp_tool_result(c->tool, &c->inv, wstatus, dbuf_str(&c->out), c->out.len,
                                    dbuf_str(&c->err), c->err.len);
        note_begun(s, c, r);
        reply(s, c->id, r);
    }
    unlink_call(s, c);
    call_free(c);
}

static void cancel_call(server *s, call *c, const char *why)
{
    if (c->state == CALL_QUEUED) {
        logmsg("queued request cancelled (%s)", why);
        unlink_call(s, c);
        call_free(c);
        return;
    }
    if (!c->cancelled && c->resident) {
        /* txbox_run checks the flag at least every 200 ms; the signal
         * (on_wake) ends the wait at once */
        c->cancelled = true;
        c->cancel = 1;
        pthread_kill(c->th, SIGURG);
        logmsg("cancelling txbox %s (in this process): %s", mcp_tool_name(c->tool), why);
    } else if (!c->cancelled) {
        c->cancelled = true;
        c->term_ns = now_ns();
        kill(c->pid, SIGTERM);
        logmsg("cancelling txbox %s (pid %d): %s", mcp_tool_name(c->tool), (int)c->pid, why);
    }
}

/* ---- requests ---- */

static void do_initialize(server *s, const json_t *id, json_t *params)
{
    json_t *pv = json_object_get(params, "protocolVersion");
    json_t *caps = json_object_get(params, "capabilities");
    json_t *info = json_object_get(params, "clientInfo");
    if (!json_is_object(params) || !json_is_string(pv)) {
        reply_error(s, id, JRPC_INVALID_PARAMS, "Invalid params: initialize needs a string protocolVersion");
        return;
    }
    if ((caps && !json_is_object(caps)) || (info && !json_is_object(info))) {
        reply_error(s, id, JRPC_INVALID_PARAMS,
                    "Invalid params: capabilities and clientInfo must be objects");
        return;
    }
    if (s->state != S_NEW) {
        reply_error(s, id, JRPC_INVALID_REQUEST, "Invalid Request: already initialized");
        return;
    }
    const char *want = json_string_value(pv);
    /* The client's revision when we speak it, else our latest (the
     * client then decides whether it can go on). */
    s->version = mcp_protocol_versions[0];
    for (size_t i = 0; mcp_protocol_versions[i]; i++)
        if (!strcmp(want, mcp_protocol_versions[i]))
            s->version = mcp_protocol_versions[i];
    s->state = S_READY;
    logmsg("initialized: client asked for %.40s, speaking %s", want, s->version);
    reply(s, id,
          json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s,s:s},s:s}", "protocolVersion", s->version, "capabilities",
                    "tools", "listChanged", 0, "serverInfo", "name", "txbox", "title",
                    "txbox: every command a transaction", "version", TXBOX_VERSION, "instructions",
                    mcp_instructions));
}

static void do_tools_call(server *s, const json_t *id, json_t *params)
{
    json_t *name = json_object_get(params, "name");
    json_t *args = json_object_get(params, "arguments");
    if (!json_is_object(params) || !json_is_string(name)) {
        reply_error(s, id, JRPC_INVALID_PARAMS, "Invalid params: tools/call needs a string \"name\"");
        return;
    }
    if (args && !json_is_object(args) && !json_is_null(args)) {
        reply_error(s, id, JRPC_INVALID_PARAMS, "Invalid params: \"arguments\" must be an object");
        return;
    }
    const mcp_tool *t = mcp_tool_find(json_string_value(name));
    if (!t) {
        reply_error(s, id, JRPC_INVALID_PARAMS, "Invalid params: unknown tool '%.64s'",
                    json_string_value(name));
        return;
    }
    if (s->queued >= MAX_QUEUED) {
        reply_error(s, id, SERVER_ERROR, "server busy: %u calls already waiting", s->queued);
        return;
    }
    json_t *empty = NULL;
    if (!json_is_object(args))
        args = empty = json_object();
    call *c = xcalloc(1, sizeof *c);
    c->pidfd = c->out_fd = c->err_fd = c->tee_fd = c->done_w = c->tee_w = -1;
    txbox_error err = {0};
    int rc = mcp_tool_prepare(t, &s->cfg, args, &c->inv, &err);
    json_decref(empty);
    if (rc < 0) {
        /* The model's mistake. Since 2025-11-25 (SEP-1303) argument errors
         * are tool execution errors the model can read and correct;
         * earlier revisions call them Invalid params. */
        if (!strcmp(s->version, "2025-11-25"))
            reply(s, id, mcp_error_result("invalid arguments for %s: %s", mcp_tool_name(t), err.msg));
        else
            reply_error(s, id, JRPC_INVALID_PARAMS, "Invalid params: %s: %s", mcp_tool_name(t), err.msg);
        call_free(c);
        return;
    }
    c->id = json_deep_copy(id);
    c->tool = t;
    json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
    if (json_is_string(token) || json_is_integer(token))
        c->progress_token = json_deep_copy(token);
    c->state = CALL_QUEUED;
    dbuf_init(&c->out, CHILD_OUT_CAP);
    dbuf_init(&c->err, CHILD_ERR_CAP);
    /* append: calls start in the order they came */
    call **p = &s->calls;
    while (*p)
        p = &(*p)->next;
    *p = c;
    s->queued++;
    start_queued(s);
}

static call *find_call(server *s, const json_t *id)
{
    for (call *c = s->calls; c; c = c->next)
        if (json_equal(c->id, (json_t *)id))
            return c;
    return NULL;
}

static void do_request(server *s, const json_t *id, const char *method, json_t *params)
{
    if (find_call(s, id)) {
        reply_error(s, id, JRPC_INVALID_REQUEST,
                    "Invalid Request: id already in use by a request in progress");
        return;
    }
    if (!strcmp(method, "initialize")) {
        do_initialize(s, id, params);
        return;
    }
    if (!strcmp(method, "ping")) {
        reply(s, id, json_object());
        return;
    }
    if (s->state == S_NEW) {
        reply_error(s, id, JRPC_INVALID_REQUEST, "Invalid Request: not initialized (send initialize first)");
        return;
    }
    if (!strcmp(method, "tools/list")) {
        json_t *cursor = json_object_get(params, "cursor");
        if ((params && !json_is_object(params)) || (cursor && !json_is_string(cursor))) {
            reply_error(s, id, JRPC_INVALID_PARAMS,
                        "Invalid params: tools/list takes an optional string cursor");
            return;
        }
        reply(s, id, mcp_tools_list(s->cfg.structured));
        return;
    }
    if (!strcmp(method, "tools/call")) {
        do_tools_call(s, id, params);
        return;
    }
    reply_error(s, id, JRPC_METHOD_NOT_FOUND, "Method not found: %.100s", method);
}

static void do_notification(server *s, const char *method, json_t *params)
{
    if (!strcmp(method, "notifications/cancelled")) {
        json_t *rid = json_object_get(params, "requestId");
        if (!jrpc_valid_id(rid))
            return; /* malformed: ignored, as the spec says */
        call *c = find_call(s, rid);
        if (c) {
            const char *why = json_string_value(json_object_get(params, "reason"));
            cancel_call(s, c, why ? why : "notifications/cancelled");
        }
        return;
    }
    /* notifications/initialized and anything else: nothing to do */
}

static void on_line(void *ctx, jrpc_frame_kind kind, const char *line, size_t len)
{
    server *s = ctx;
    if (kind == JRPC_FRAME_OVERLONG) {
        reply_error(s, NULL, JRPC_INVALID_REQUEST, "Invalid Request: message longer than %u bytes",
                    JRPC_MAX_LINE);
        return;
    }
    jrpc_msg m;
    switch (jrpc_parse(line, len, &m)) {
    case JRPC_MSG_BLANK:
    case JRPC_MSG_RESPONSE: /* we send no requests: nothing is waiting for it */
        break;
    case JRPC_MSG_INVALID:
        send_line(s, jrpc_error(m.id, m.code, m.message, NULL));
        break;
    case JRPC_MSG_NOTIFICATION:
        do_notification(s, m.method, m.params);
        break;
    case JRPC_MSG_REQUEST:
        do_request(s, m.id, m.method, m.params);
        break;
    }
    jrpc_msg_free(&m);
}

/* ---- the loop ---- */

static void read_input(server *s)
{
    char buf[65536];
    ssize_t n = read(s->in_fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        if (n < 0)
            logmsg("reading stdin: %s", strerror(errno));
        jrpc_framer_eof(&s->framer, on_line, s);
        s->eof = true;
        return;
    }
    jrpc_framer_feed(&s->framer, buf, (size_t)n, on_line, s);
}

/* SIGTERM, SIGINT and SIGHUP: a byte on a pipe the loop polls. A
 * handler rather than a signalfd, for which every thread would have to
 * block them: a `run` thread cannot, since its command would inherit the
 * mask. */
static int sig_w = -1;

static void on_stop_signal(int sig)
{
    int e = errno;
    unsigned char b = (unsigned char)sig;
    (void)!write(sig_w, &b, 1);
    errno = e;
}

/* SIGURG, sent to a `run` thread when its call is cancelled: only ends the
 * wait it is in (SA_RESTART: other calls go on). */
static void on_wake(int sig) { (void)sig; }

static int catch_signals(int *read_fd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
        return -1;
    *read_fd = p[0];
    sig_w = p[1];
    struct sigaction sa = {.sa_handler = on_stop_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    struct sigaction wake = {.sa_handler = on_wake, .sa_flags = SA_RESTART};
    sigemptyset(&wake.sa_mask);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGURG);
    if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0 ||
        sigaction(SIGHUP, &sa, NULL) < 0 || sigaction(SIGURG, &wake, NULL) < 0)
        return -1;
    return sigprocmask(SIG_UNBLOCK, &set, NULL);
}

static void on_signal(server *s)
{
    unsigned char signo;
    while (read(s->sig_fd, &signo, 1) == 1) {
        logmsg("signal %u: cancelling %u running call(s) and stopping", signo, s->running);
        s->stopping = true;
    }
    for (call *c = s->calls, *next; c; c = next) {
        next = c->next;
        cancel_call(s, c, "server stopping");
    }
}

static int loop(server *s)
{
    enum { MAXFDS = 3 + 4 * 64 };
    for (;;) {
        bool want_input = !s->eof && !s->stopping && s->outq.len - s->outq_off < OUTQ_PAUSE;
        if ((s->eof || s->stopping) && !s->calls && (s->out_broken || s->outq_off == s->outq.len))
            return 0;
        struct pollfd pf[MAXFDS];
        call *owner[MAXFDS];
        int which[MAXFDS]; /* 0 pidfd, 1 out, 2 err, 3 tee */
        nfds_t n = 0;
        pf[n++] = (struct pollfd){.fd = s->sig_fd, .events = POLLIN};
        pf[n++] = (struct pollfd){.fd = want_input ? s->in_fd : -1, .events = POLLIN};
        pf[n++] = (struct pollfd){.fd = (!s->out_broken && s->outq_off < s->outq.len) ? s->out_fd : -1,
                                  .events = POLLOUT};
        int timeout = -1;
        uint64_t now = now_ns();
        for (call *c = s->calls; c; c = c->next) {
            if (c->state != CALL_RUNNING || n + 4 > MAXFDS)
                continue;
            int fds[4] = {c->pidfd, c->out_fd, c->err_fd, c->tee_fd};
            for (int k = 0; k < 4; k++) {
                if (fds[k] < 0)
                    continue;
                owner[n] = c;
                which[n] = k;
                pf[n++] = (struct pollfd){.fd = fds[k], .events = POLLIN};
            }
            if (c->progress_token && !c->cancelled) {
                if (now >= c->next_progress_ns)
                    send_progress(s, c, now);
                int ms = (int)((c->next_progress_ns - now) / 1000000) + 1;
                if (timeout < 0 || ms < timeout)
                    timeout = ms;
            }
            if (c->cancelled && !c->killed && !c->resident) {
                if (now - c->term_ns >= KILL_AFTER_NS) {
                    logmsg("txbox %s (pid %d) ignored SIGTERM for 30 s: killing it", mcp_tool_name(c->tool),
                           (int)c->pid);
                    kill(c->pid, SIGKILL);
                    c->killed = true;
                } else {
                    timeout = 1000;
                }
            }
        }
        int r = poll(pf, n, timeout);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            logmsg("poll: %s", strerror(errno));
            return TXBOX_EXIT_ERROR;
        }
        if (pf[0].revents)
            on_signal(s);
        if (pf[2].revents & (POLLOUT | POLLERR | POLLHUP)) {
            if (pf[2].revents & POLLOUT)
                flush_some(s);
            else {
                logmsg("the client closed stdout; discarding output");
                s->out_broken = true;
                s->outq.len = s->outq_off = 0;
            }
        }
        /* children: pipes first, then exits (a child's last output is read
         * before its result is built) */
        for (nfds_t i = 3; i < n; i++) {
            if (!pf[i].revents || which[i] == 0)
                continue;
            call *c = owner[i];
            if (which[i] == 1)
                drain(&c->out_fd, &c->out);
            else if (which[i] == 2)
                drain(&c->err_fd, &c->err);
            else
                drain_recent(c);
        }
        for (nfds_t i = 3; i < n; i++)
            if (pf[i].revents && which[i] == 0) {
                finish(s, owner[i]);
                /* owner[] may now hold freed calls; later entries of this
                 * round are pipes or other pidfds of other calls */
                for (nfds_t j = i + 1; j < n; j++)
                    if (owner[j] == owner[i])
                        pf[j].revents = 0;
            }
        start_queued(s);
        if (pf[1].revents & (POLLIN | POLLHUP | POLLERR))
            read_input(s);
        if (!s->out_broken && s->outq_off < s->outq.len) {
            struct pollfd p = {.fd = s->out_fd, .events = POLLOUT};
            if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT))
                flush_some(s);
        }
        if (s->stopping)
            for (call *c = s->calls, *next; c; c = next) {
                next = c->next;
                cancel_call(s, c, "server stopping");
            }
    }
}

static void usage(FILE *f, const char *name)
{
    fprintf(f,
            "usage: txbox mcp [-C DIR] [--policy FILE] [--max-calls N] [--keep-transactions]\n"
            "                 [--spawn] [--structured]\n"
            "\nA Model Context Protocol server on stdin/stdout (newline-delimited JSON-RPC 2.0).\n"
            "Tools: run, check, log, show, diff, undo, and for multi-command transactions\n"
            "begin, savepoint, rollback, commit, abort, status, on the workspace DIR (default:\n"
            "the current directory). A run runs in the server's process, keeping the\n"
            "workspace and its policy open (re-read when they change); other calls run\n"
            "the txbox CLI, as every call does with --spawn. --max-calls: commands\n"
            "running at once (default %d; more wait their turn). Transactions begun in the\n"
            "session and still open when it ends are aborted, unless --keep-transactions.\n"
            "Each answer is a line for the model, then a compact JSON object; --structured\n"
            "adds outputSchema and structuredContent (the CLI's whole JSON object), for\n"
            "clients that read fields rather than hand the text to a model.\n"
            "See docs/mcp.md.\n",
            MAX_CALLS_DEFAULT);
}

int cmd_mcp(int argc, char **argv)
{
    static const struct option opts[] = {
        {"policy", required_argument, NULL, 'p'},
        {"max-calls", required_argument, NULL, 'm'},
        {"keep-transactions", no_argument, NULL, 'k'},
        {"spawn", no_argument, NULL, 's'},
        {"structured", no_argument, NULL, 'S'},
        CLI_LONG_HELP,
        {0},
    };
    const char *policy = NULL;
    unsigned max_calls = MAX_CALLS_DEFAULT;
    bool keep_txs = false, spawn_only = false, structured = false;
    cli_opts cli = {
        .name = "mcp", .help = usage, .shorts = "+C:h", .longs = opts, .argc = argc, .argv = argv};
    int c;
    while ((c = cli_opt_next(&cli)) >= 0) {
        switch (c) {
        case 'p':
            policy = optarg;
            break;
        case 'm': {
            uint64_t v;
            if (!parse_u64(optarg, &v) || v < 1 || v > 64)
                return cli_failf("mcp: --max-calls wants a number from 1 to 64, not '%s'", optarg);
            max_calls = (unsigned)v;
            break;
        }
        case 'k':
            keep_txs = true;
            break;
        case 's':
            spawn_only = true;
            break;
        case 'S':
            structured = true;
            break;
        }
    }
    if (c == CLI_OPT_STOP)
        return cli.status;
    const char *dir = cli.dir;
    if (optind < argc)
        return cli_failf("mcp: unexpected argument '%s'", argv[optind]);

    server s = {.in_fd = -1,
                .out_fd = -1,
                .sig_fd = -1,
                .max_calls = max_calls,
                .version = mcp_protocol_versions[0],
                .keep_txs = keep_txs};
    s.cfg.structured = structured;
    setenv(RUN_NET_WORDS_ENV, RUN_NET_WORDS_MODEL, 1);
    s.cfg.workspace = realpath(dir, NULL);
    if (!s.cfg.workspace)
        return cli_failf("mcp: workspace '%s': %s", dir, strerror(errno));
    if (policy) {
        s.cfg.policy = realpath(policy, NULL);
        if (!s.cfg.policy)
            return cli_failf("mcp: policy '%s': %s", policy, strerror(errno));
    }
    /* Refuse to start with a policy that does not load: better than every
     * call failing. */
    txbox_policy *pol = NULL;
    txbox_error err = {0};
    if (txbox_policy_load(s.cfg.policy, s.cfg.workspace, &pol, &err) < 0) {
        free(s.cfg.workspace);
        free(s.cfg.policy);
        return cli_failf("mcp: %s", err.msg);
    }
    cli_policy_notes(pol);
    txbox_policy_free(pol);

    /* The protocol gets private descriptors; fd 0 reads /dev/null and fd 1
     * is stderr, so nothing but protocol messages reaches the client. */
    s.in_fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
    s.out_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (s.in_fd < 0 || s.out_fd < 0 || devnull < 0 || dup2(devnull, 0) < 0 || dup2(2, 1) < 0)
        return cli_failf("mcp: cannot set up stdin/stdout: %s", strerror(errno));
    close(devnull);

    signal(SIGPIPE, SIG_IGN);
    if (catch_signals(&s.sig_fd) < 0)
        return cli_failf("mcp: cannot catch signals: %s", strerror(errno));
    if (!spawn_only)
        s.res = resident_new(s.cfg.workspace, s.cfg.policy);

    s.begun = json_array();
    jrpc_framer_init(&s.framer, JRPC_MAX_LINE);
    dbuf_init(&s.outq, 0);
    logmsg("serving workspace %s (MCP %s and older)", s.cfg.workspace, mcp_protocol_versions[0]);
    int rc = loop(&s);
    while (s.calls) { /* only after an error: do not leave children behind */
        call *k = s.calls;
        if (k->resident) {
            k->cancel = 1;
            pthread_join(k->th, NULL);
        } else if (k->state == CALL_RUNNING) {
            kill(k->pid, SIGTERM);
            waitpid(k->pid, NULL, 0);
        }
        unlink_call(&s, k);
        call_free(k);
    }
    resident_free(s.res);
    abort_begun(&s);
    json_decref(s.begun);
    jrpc_framer_free(&s.framer);
    dbuf_free(&s.outq);
    close(s.sig_fd);
    close(sig_w);
    close(s.in_fd);
    close(s.out_fd);
    free(s.cfg.workspace);
    free(s.cfg.policy);
    return rc;
}
