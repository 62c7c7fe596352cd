/* txbox mcp: a Model Context Protocol server, on stdin/stdout (stdio.c) or
 * over Streamable HTTP (http.c). This file is the dispatcher both share
 * (core.h): sessions, requests, calls and the poll loop.
 *
 *   txbox mcp [-C DIR] [--policy FILE] [--max-calls N] [--keep-transactions]
 *             [--spawn] [--structured]
 *   txbox mcp --listen HOST:PORT --token-file FILE [--workspace NAME=DIR]... ...
 *
 * One poll loop. A `run` call runs in this process (src/resident.c): a
 * thread calls txbox_run with the workspace handle and the policy the
 * server keeps open, and the loop polls a pipe the thread closes when it
 * is done; cancelling sets the run's cancel flag, and txbox_run kills the
 * sandbox and rolls back. One such run at a time in the process, whatever
 * the workspace or session: a `run` that comes while one runs in the
 * process, and every other tool, becomes a child process running the
 * txbox CLI (`txbox run --json ...`, `txbox log --json`, ...), with its
 * own pipes, so several calls are in flight at once; such a call is
 * cancelled by SIGTERM to its child, which makes `txbox run` roll back.
 * Children die with the server (PR_SET_PDEATHSIG), and so does the sandbox
 * of a run in the process: even a killed server leaves no command running,
 * and the next open's recovery finishes or discards what it left. `--spawn`
 * makes every call a child, as before.
 *
 * Lifecycle of a session: requests other than initialize and ping before
 * initialize get -32600. It ends (mcp_sess_end) at the end of its input
 * (stdio: running calls finish and are answered), on DELETE or idle expiry
 * (HTTP), or on SIGTERM/SIGINT/SIGHUP (every running call is cancelled and
 * rolls back; the server waits for them and exits 0).
 *
 * Multi-command transactions (`begin`, `run` with `tx`, `commit`, ...) are
 * the CLI's too, so they outlive a call. Those begun in a session belong
 * to it: when the session ends, after its last call, each one still open
 * is aborted, since its id lived only in the client's conversation and
 * nothing of it was promised to the workspace; `--keep-transactions`
 * leaves them open instead (for `txbox commit ID` by hand). A server
 * killed with SIGKILL leaves them open: `txbox status` lists them, `txbox
 * abort ID` drops them.
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
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../answer.h"
#include "../cmds.h"
#include "core.h"
#include "jsonrpc.h"
#include "mcp.h"
#include "transport.h"
#include "../resident.h"
#include "../run_args.h"
#include "../spawn.h"
#include "txbox_policy.h"

#define MAX_CALLS_DEFAULT 8                   /* children at once; more calls wait in a queue */
#define MAX_QUEUED 256                        /* calls waiting; more are refused */
#define CHILD_OUT_CAP (64u << 20)             /* a child's stdout (the CLI's JSON) */
#define CHILD_ERR_CAP (64u << 10)             /* a child's stderr (its error line) */
#define KILL_AFTER_NS (30ull * 1000000000ull) /* a cancelled child that ignores SIGTERM */
#define SERVER_ERROR (-32000)                 /* implementation-defined server error */
#define PROGRESS_EVERY_NS 1000000000ull       /* notifications/progress while a call runs */
#define RECENT_CAP 2048                       /* the output kept for the progress message */
#define TEE_FD 3                              /* where `txbox run --tee-fd` copies the output in the child */
#define TEE_FD_STR "3"
#define BEGUN_MAX 100000 /* transactions one session remembers having begun */

typedef enum { CALL_QUEUED, CALL_RUNNING } call_state;

typedef struct call {
    struct call *next;
    mcp_sess *sess;
    void *origin; /* the transport's handle of the request */
    json_t *id;
    const mcp_tool *tool;
    mcp_invocation inv;
    call_state state;
    pid_t pid;
    int pidfd, out_fd, err_fd;
    dbuf out, err;
    bool cancelled;   /* its command was stopped */
    bool answer;      /* cancelled by the server (it stops): answered all the same */
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

struct mcp_core {
    mcp_core_opts o;
    int sig_fd;
    bool stopping;
    call *calls; /* every session's, in the order they came */
    unsigned running, queued;
    bool res_busy; /* a call runs in this process (one at a time, whatever the workspace) */
};

struct mcp_ws {
    mcp_core *core;
    char *name;
    mcp_config cfg;
    resident *res; /* the workspace kept open for `run` in this process (NULL: --spawn) */
};

struct mcp_sess {
    mcp_core *core;
    mcp_ws *ws;
    enum { S_NEW, S_READY } state;
    const char *version; /* negotiated */
    json_t *begun;       /* ids of the transactions `begin` opened in this session */
    /* its txbox session (docs/sessions.md): what one `run` leaves in /tmp,
     * on the loopback and in the background for the next; started at its
     * first `run`, owned by this process, ended with it */
    char sid[48];
    bool sid_started, sid_used, sid_broken;
    unsigned ncalls; /* its calls, queued or running */
    bool ending;
    mcp_send_fn send;
    mcp_ended_fn ended;
    void *tctx;
};

void mcp_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("txbox mcp: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
#define logmsg mcp_log

/* ---- output ---- */

static void send_msg(mcp_sess *s, void *origin, char *msg, bool final)
{
    s->send(s->tctx, origin, msg, final);
}

static void reply(mcp_sess *s, void *origin, const json_t *id, json_t *result)
{
    send_msg(s, origin, jrpc_result(id, result), true);
}

static void reply_error(mcp_sess *s, void *origin, const json_t *id, int code, const char *fmt, ...)
    PRINTF(5, 6);
static void reply_error(mcp_sess *s, void *origin, const json_t *id, int code, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    send_msg(s, origin, jrpc_error(id, code, msg, NULL), true);
}

void mcp_sess_error(mcp_sess *s, void *origin, int code, const char *msg)
{
    send_msg(s, origin, jrpc_error(NULL, code, msg, NULL), true);
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

static void sess_ended(mcp_sess *s);

/* Takes c out of the server's list and frees it; its session may end
 * with it (the last call of a session that is ending). */
static void drop_call(mcp_core *k, call *c)
{
    for (call **p = &k->calls; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    if (c->state == CALL_RUNNING)
        k->running--;
    else
        k->queued--;
    mcp_sess *s = c->sess;
    s->ncalls--;
    call_free(c);
    if (s->ending && !s->ncalls)
        sess_ended(s);
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
        argv_insert(&c->inv, 2, "--tee-fd", TEE_FD_STR);
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
static int start_resident(mcp_core *k, call *c)
{
    mcp_ws *w = c->sess->ws;
    if (!w->res || k->res_busy || strcmp(mcp_tool_name(c->tool), "run"))
        return 1;
    int argc = 0;
    while (c->inv.argv[argc])
        argc++;
    memset(&c->ra, 0, sizeof c->ra);
    if (run_parse(argc - 1, c->inv.argv + 1, &c->ra) != -1 || !c->ra.json ||
        strcmp(c->ra.dir, w->cfg.workspace) || !resident_can_run(w->res, &c->ra))
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
    c->res = w->res;
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
    k->res_busy = true;
    return 0;
}

/* The session's txbox session, started in this process (so that it ends
 * with it: its owner) when no `run` thread is in the library, which the
 * fork of its start must not meet; else the `run` starts it. */
static void sid_start(mcp_core *k, mcp_sess *s)
{
    if (s->sid_started || k->res_busy)
        return;
    s->sid_started = true;
    txbox_ws *ws = NULL;
    txbox_policy *pol = NULL;
    txbox_session *ts = NULL;
    txbox_error err = {0};
    txbox_session_opts o = {.id = s->sid, .flags = TXBOX_SESSION_CREATE, .owner = getpid()};
    if (txbox_ws_open(s->ws->cfg.workspace, TXBOX_WS_CREATE | TXBOX_WS_NO_RECOVER, &ws, &err) == 0 &&
        txbox_policy_load(s->ws->cfg.policy, txbox_ws_path(ws), &pol, &err) == 0) {
        o.policy = pol;
        if (txbox_session_open(ws, &o, &ts, &err) < 0)
            ts = NULL;
    }
    if (!ts) {
        /* where no session can start, each command runs on its own, as
         * without sessions */
        char t[REMEDY_TEXT_MAX];
        logmsg("session %s: cannot start it, so each command runs on its own: %s", s->sid,
               remedy_error_text(&err, t, sizeof t));
        s->sid_broken = true;
    }
    txbox_session_close(ts);
    txbox_policy_free(pol);
    if (ws)
        txbox_ws_close(ws);
}

/* A `run` outside a multi-command transaction runs in the session's
 * txbox session. */
static void in_session(mcp_core *k, call *c)
{
    mcp_sess *s = c->sess;
    if (strcmp(mcp_tool_name(c->tool), "run") || c->inv.multi_tx)
        return;
    sid_start(k, s);
    if (s->sid_broken)
        return;
    s->sid_used = true;
    argv_insert(&c->inv, 2, "--session", s->sid);
}

static int spawn(mcp_core *k, call *c)
{
    in_session(k, c);
    c->started_ns = now_ns();
    c->next_progress_ns = c->started_ns + PROGRESS_EVERY_NS;
    int rc = start_resident(k, c);
    return rc <= 0 ? rc : spawn_child(c);
}

/* Moves queued calls to running while there is room. */
static void start_queued(mcp_core *k)
{
    call *c = k->calls;
    while (c && k->running < k->o.max_calls) {
        call *next = c->next;
        if (c->state == CALL_QUEUED) {
            if (spawn(k, c) < 0) {
                int e = errno;
                reply(c->sess, c->origin, c->id,
                      mcp_error_result("txbox mcp: cannot start txbox %s: %s", mcp_tool_name(c->tool),
                                       strerror(e)));
                drop_call(k, c);
            } else {
                c->state = CALL_RUNNING;
                k->queued--;
                k->running++;
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
static void send_progress(call *c, uint64_t now)
{
    c->next_progress_ns = now + PROGRESS_EVERY_NS;
    json_t *params = json_pack("{s:O,s:I}", "progressToken", c->progress_token, "progress", ++c->progress);
    /* the message field is in the revisions after 2024-11-05 */
    if (strcmp(c->sess->version, "2024-11-05")) {
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
        send_msg(c->sess, c->origin, line, false);
}

/* A `begin` that succeeded: its transaction belongs to the session (also
 * one whose call was cancelled after it opened the transaction). Read
 * from what the CLI printed, whatever the answer shows the client. */
static void note_begun(call *c, int wstatus)
{
    if (!mcp_tool_begins(c->tool) || c->out.dropped || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus))
        return;
    json_t *v = answer_parse(dbuf_str(&c->out), c->out.len);
    json_t *tx = json_object_get(v, "tx");
    if (json_is_string(tx) && json_array_size(c->sess->begun) < BEGUN_MAX)
        json_array_append(c->sess->begun, tx);
    json_decref(v);
}

/* The end of the session: abort every transaction it began that is still
 * open (one that was committed or aborted is closed: skipped). Adds to
 * report "aborted" and "left_open", the ids. */
static void abort_begun(mcp_sess *s, json_t *report)
{
    json_t *aborted = json_array(), *left = json_array();
    json_object_set_new(report, "aborted", aborted);
    json_object_set_new(report, "left_open", left);
    if (!json_array_size(s->begun))
        return;
    txbox_ws *ws = NULL;
    txbox_error err = {0};
    if (txbox_ws_open(s->ws->cfg.workspace, TXBOX_WS_CREATE, &ws, &err) < 0) {
        char t[REMEDY_TEXT_MAX];
        logmsg("cannot abort this session's open transactions: %s", remedy_error_text(&err, t, sizeof t));
        json_array_extend(left, s->begun);
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
        if (s->core->o.keep_txs) {
            logmsg("transaction %s begun in this session is left open (--keep-transactions)",
                   json_string_value(id));
            json_array_append(left, id);
            continue;
        }
        txbox_multi *m = NULL;
        err = (txbox_error){0};
        if (txbox_multi_open(ws, json_string_value(id), &m, &err) == 0 && txbox_multi_abort(m, &err) == 0) {
            logmsg("transaction %s begun in this session and never committed: aborted",
                   json_string_value(id));
            json_array_append(aborted, id);
        } else {
            char t[REMEDY_TEXT_MAX];
            logmsg("transaction %s begun in this session: cannot abort it: %s", json_string_value(id),
                   remedy_error_text(&err, t, sizeof t));
            json_array_append(left, id);
        }
        txbox_multi_close(m);
    }
    json_decref(all);
    txbox_ws_close(ws);
}

static void finish(mcp_core *k, call *c)
{
    int wstatus = 0;
    if (c->resident) {
        /* its answer, as the CLI would have printed it and exited */
        pthread_join(c->th, NULL);
        k->res_busy = false;
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
    /* it may have opened its transaction before a cancel */
    note_begun(c, wstatus);
    if (c->cancelled && !c->answer) {
        logmsg("request cancelled: txbox %s ended (status 0x%x)", mcp_tool_name(c->tool), (unsigned)wstatus);
        send_msg(c->sess, c->origin, NULL, true);
    } else if (c->out.dropped) {
        reply(c->sess, c->origin, c->id,
              mcp_error_result("txbox %s printed more than %u bytes; result dropped", mcp_tool_name(c->tool),
                               CHILD_OUT_CAP));
    } else {
        reply(c->sess, c->origin, c->id,
              mcp_tool_result(c->tool, &c->inv, wstatus, dbuf_str(&c->out), c->out.len, dbuf_str(&c->err),
                              c->err.len));
    }
    drop_call(k, c);
}

/* Stops a call. A client's cancel (notifications/cancelled, the end of
 * its session) gets no answer, as the specification asks; with answer (the
 * server stops) the client gets what the command's end was: rolled back. */
static void cancel_call(mcp_core *k, call *c, const char *why, bool answer)
{
    if (c->state == CALL_QUEUED) {
        logmsg("queued request cancelled (%s)", why);
        if (answer)
            reply(c->sess, c->origin, c->id,
                  mcp_error_result("txbox %s did not start: %s", mcp_tool_name(c->tool), why));
        else
            send_msg(c->sess, c->origin, NULL, true);
        drop_call(k, c);
        return;
    }
    if (!c->cancelled)
        c->answer = answer;
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

static void do_initialize(mcp_sess *s, void *origin, const json_t *id, json_t *params)
{
    json_t *pv = json_object_get(params, "protocolVersion");
    json_t *caps = json_object_get(params, "capabilities");
    json_t *info = json_object_get(params, "clientInfo");
    if (!json_is_object(params) || !json_is_string(pv)) {
        reply_error(s, origin, id, JRPC_INVALID_PARAMS,
                    "Invalid params: initialize needs a string protocolVersion");
        return;
    }
    if ((caps && !json_is_object(caps)) || (info && !json_is_object(info))) {
        reply_error(s, origin, id, JRPC_INVALID_PARAMS,
                    "Invalid params: capabilities and clientInfo must be objects");
        return;
    }
    if (s->state != S_NEW) {
        reply_error(s, origin, id, JRPC_INVALID_REQUEST, "Invalid Request: already initialized");
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
    reply(s, origin, id,
          json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s,s:s},s:s}", "protocolVersion", s->version, "capabilities",
                    "tools", "listChanged", 0, "serverInfo", "name", "txbox", "title",
                    "txbox: every command a transaction", "version", TXBOX_VERSION, "instructions",
                    mcp_instructions));
}

static void do_tools_call(mcp_sess *s, void *origin, const json_t *id, json_t *params)
{
    mcp_core *k = s->core;
    json_t *name = json_object_get(params, "name");
    json_t *args = json_object_get(params, "arguments");
    if (!json_is_object(params) || !json_is_string(name)) {
        reply_error(s, origin, id, JRPC_INVALID_PARAMS, "Invalid params: tools/call needs a string \"name\"");
        return;
    }
    if (args && !json_is_object(args) && !json_is_null(args)) {
        reply_error(s, origin, id, JRPC_INVALID_PARAMS, "Invalid params: \"arguments\" must be an object");
        return;
    }
    const mcp_tool *t = mcp_tool_find(json_string_value(name));
    if (!t) {
        reply_error(s, origin, id, JRPC_INVALID_PARAMS, "Invalid params: unknown tool '%.64s'",
                    json_string_value(name));
        return;
    }
    if (k->queued >= k->o.max_queued) {
        reply_error(s, origin, id, SERVER_ERROR, "server busy: %u calls already waiting", k->queued);
        return;
    }
    if (k->o.max_session_calls && s->ncalls >= k->o.max_session_calls) {
        reply_error(s, origin, id, SERVER_ERROR, "server busy: this session has %u calls in progress",
                    s->ncalls);
        return;
    }
    json_t *empty = NULL;
    if (!json_is_object(args))
        args = empty = json_object();
    call *c = xcalloc(1, sizeof *c);
    c->pidfd = c->out_fd = c->err_fd = c->tee_fd = c->done_w = c->tee_w = -1;
    txbox_error err = {0};
    int rc = mcp_tool_prepare(t, &s->ws->cfg, args, &c->inv, &err);
    json_decref(empty);
    if (rc < 0) {
        /* The model's mistake. Since 2025-11-25 (SEP-1303) argument errors
         * are tool execution errors the model can read and correct;
         * earlier revisions call them Invalid params. */
        if (!strcmp(s->version, "2025-11-25"))
            reply(s, origin, id, mcp_error_result("invalid arguments for %s: %s", mcp_tool_name(t), err.msg));
        else
            reply_error(s, origin, id, JRPC_INVALID_PARAMS, "Invalid params: %s: %s", mcp_tool_name(t),
                        err.msg);
        call_free(c);
        return;
    }
    c->sess = s;
    c->origin = origin;
    c->id = json_deep_copy(id);
    c->tool = t;
    json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
    if (json_is_string(token) || json_is_integer(token))
        c->progress_token = json_deep_copy(token);
    c->state = CALL_QUEUED;
    dbuf_init(&c->out, CHILD_OUT_CAP);
    dbuf_init(&c->err, CHILD_ERR_CAP);
    /* append: calls start in the order they came */
    call **p = &k->calls;
    while (*p)
        p = &(*p)->next;
    *p = c;
    k->queued++;
    s->ncalls++;
    start_queued(k);
}

static call *find_call(mcp_sess *s, const json_t *id)
{
    for (call *c = s->core->calls; c; c = c->next)
        if (c->sess == s && json_equal(c->id, (json_t *)id))
            return c;
    return NULL;
}

static void do_request(mcp_sess *s, void *origin, const json_t *id, const char *method, json_t *params)
{
    if (find_call(s, id)) {
        reply_error(s, origin, id, JRPC_INVALID_REQUEST,
                    "Invalid Request: id already in use by a request in progress");
        return;
    }
    if (!strcmp(method, "initialize")) {
        do_initialize(s, origin, id, params);
        return;
    }
    if (!strcmp(method, "ping")) {
        reply(s, origin, id, json_object());
        return;
    }
    if (s->state == S_NEW) {
        reply_error(s, origin, id, JRPC_INVALID_REQUEST,
                    "Invalid Request: not initialized (send initialize first)");
        return;
    }
    if (!strcmp(method, "tools/list")) {
        json_t *cursor = json_object_get(params, "cursor");
        if ((params && !json_is_object(params)) || (cursor && !json_is_string(cursor))) {
            reply_error(s, origin, id, JRPC_INVALID_PARAMS,
                        "Invalid params: tools/list takes an optional string cursor");
            return;
        }
        reply(s, origin, id, mcp_tools_list(s->ws->cfg.structured));
        return;
    }
    if (!strcmp(method, "tools/call")) {
        do_tools_call(s, origin, id, params);
        return;
    }
    reply_error(s, origin, id, JRPC_METHOD_NOT_FOUND, "Method not found: %.100s", method);
}

static void do_notification(mcp_sess *s, const char *method, json_t *params)
{
    if (!strcmp(method, "notifications/cancelled")) {
        json_t *rid = json_object_get(params, "requestId");
        if (!jrpc_valid_id(rid))
            return; /* malformed: ignored, as the spec says */
        call *c = find_call(s, rid);
        if (c) {
            const char *why = json_string_value(json_object_get(params, "reason"));
            cancel_call(s->core, c, why ? why : "notifications/cancelled", false);
        }
        return;
    }
    /* notifications/initialized and anything else: nothing to do */
}

void mcp_sess_dispatch(mcp_sess *s, const jrpc_msg *m, void *origin)
{
    switch (m->type) {
    case JRPC_MSG_BLANK:
    case JRPC_MSG_RESPONSE: /* we send no requests: nothing is waiting for it */
        break;
    case JRPC_MSG_INVALID:
        send_msg(s, origin, jrpc_error(m->id, m->code, m->message, NULL), true);
        break;
    case JRPC_MSG_NOTIFICATION:
        do_notification(s, m->method, m->params);
        break;
    case JRPC_MSG_REQUEST:
        do_request(s, origin, m->id, m->method, m->params);
        break;
    }
}

jrpc_msg_type mcp_sess_input(mcp_sess *s, const char *buf, size_t len, void *origin)
{
    jrpc_msg m;
    jrpc_msg_type t = jrpc_parse(buf, len, &m);
    mcp_sess_dispatch(s, &m, origin);
    jrpc_msg_free(&m);
    return t;
}

/* ---- sessions ---- */

mcp_sess *mcp_sess_new(mcp_core *k, mcp_ws *w, mcp_send_fn send, mcp_ended_fn ended, void *tctx)
{
    mcp_sess *s = xcalloc(1, sizeof *s);
    s->core = k;
    s->ws = w;
    s->version = mcp_protocol_versions[0];
    s->begun = json_array();
    uint8_t rnd[8] = {0};
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) { /* cannot fail for 8 bytes; be safe */
        uint64_t t = now_ns() ^ ((uint64_t)getpid() << 32);
        memcpy(rnd, &t, sizeof rnd);
    }
    snprintf(s->sid, sizeof s->sid, "mcp-%d-%02x%02x%02x%02x%02x%02x%02x%02x", (int)getpid(), rnd[0], rnd[1],
             rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    s->send = send;
    s->ended = ended;
    s->tctx = tctx;
    return s;
}

bool mcp_sess_ready(const mcp_sess *s) { return s->state == S_READY; }
const char *mcp_sess_version(const mcp_sess *s) { return s->version; }
unsigned mcp_sess_calls(const mcp_sess *s) { return s->ncalls; }

/* The last call of an ending session is over: the end itself. */
/* The end of the session's txbox session: its background processes
 * killed, their late writes rolled back, its /tmp discarded; the end's
 * report goes into report as "session". */
static void sid_end(mcp_sess *s, json_t *report)
{
    if (!s->sid_used)
        return;
    txbox_ws *ws = NULL;
    txbox_session *ts = NULL;
    txbox_error err = {0};
    txbox_session_opts o = {.id = s->sid};
    _cleanup_free_ char *rep = NULL;
    if (txbox_ws_open(s->ws->cfg.workspace, TXBOX_WS_CREATE | TXBOX_WS_NO_RECOVER, &ws, &err) == 0 &&
        txbox_session_open(ws, &o, &ts, &err) == 0 && txbox_session_end(ts, &rep, &err) == 0) {
        json_t *r = rep ? json_loads(rep, 0, NULL) : NULL;
        json_object_set_new(report, "session", r ? r : json_string(s->sid));
    } else if (err.code != ENOENT) {
        char t[REMEDY_TEXT_MAX];
        logmsg("session %s: cannot end it: %s", s->sid, remedy_error_text(&err, t, sizeof t));
    }
    txbox_session_close(ts);
    if (ws)
        txbox_ws_close(ws);
}

static void sess_ended(mcp_sess *s)
{
    json_t *report = json_object();
    abort_begun(s, report);
    sid_end(s, report);
    char *r = json_dumps(report, JSON_COMPACT);
    json_decref(report);
    mcp_ended_fn ended = s->ended;
    void *tctx = s->tctx;
    json_decref(s->begun);
    free(s);
    if (ended)
        ended(tctx, r ? r : "{}");
    free(r);
}

void mcp_sess_end(mcp_sess *s, bool cancel, const char *why)
{
    bool first = !s->ending;
    s->ending = true;
    mcp_core *k = s->core;
    if (cancel) {
        for (call *c = k->calls, *next; c; c = next) {
            next = c->next;
            if (c->sess != s)
                continue;
            /* a queued call dropped here may end the session: only when
             * it is the last, after which nothing of s is touched */
            bool last = s->ncalls == 1 && c->state == CALL_QUEUED;
            cancel_call(k, c, why, false);
            if (last)
                return;
        }
    }
    if (first && !s->ncalls)
        sess_ended(s);
}

/* ---- workspaces ---- */

mcp_ws *mcp_ws_new(mcp_core *k, const char *name, mcp_config *cfg)
{
    mcp_ws *w = xcalloc(1, sizeof *w);
    w->core = k;
    w->name = name ? xstrdup(name) : NULL;
    w->cfg = *cfg;
    *cfg = (mcp_config){0};
    if (!k->o.spawn_only)
        w->res = resident_new(w->cfg.workspace, w->cfg.policy);
    return w;
}

const mcp_config *mcp_ws_config(const mcp_ws *w) { return &w->cfg; }
const char *mcp_ws_name(const mcp_ws *w) { return w->name; }

void mcp_ws_free(mcp_ws *w)
{
    if (!w)
        return;
    resident_free(w->res);
    free(w->cfg.workspace);
    free(w->cfg.policy);
    free(w->name);
    free(w);
}

/* ---- the loop ---- */

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

mcp_core *mcp_core_new(const mcp_core_opts *o)
{
    mcp_core *k = xcalloc(1, sizeof *k);
    k->o = *o;
    if (!k->o.max_calls)
        k->o.max_calls = MAX_CALLS_DEFAULT;
    if (!k->o.max_queued)
        k->o.max_queued = MAX_QUEUED;
    k->sig_fd = -1;
    signal(SIGPIPE, SIG_IGN);
    if (catch_signals(&k->sig_fd) < 0) {
        free(k);
        return NULL;
    }
    return k;
}

unsigned mcp_core_calls(const mcp_core *k) { return k->running + k->queued; }

static void cancel_all(mcp_core *k, const char *why)
{
    for (call *c = k->calls, *next; c; c = next) {
        next = c->next;
        cancel_call(k, c, why, true);
    }
}

static void on_signal(mcp_core *k, const mcp_transport *t)
{
    unsigned char signo;
    bool first = !k->stopping;
    while (read(k->sig_fd, &signo, 1) == 1) {
        logmsg("signal %u: cancelling %u running call(s) and stopping", signo, k->running);
        k->stopping = true;
    }
    cancel_all(k, "server stopping");
    if (first && k->stopping)
        t->stop(t->ctx);
}

int mcp_core_run(mcp_core *k, const mcp_transport *t)
{
    enum { TR_MAX = 8, MAXFDS = 1 + TR_MAX + 4 * 64 };
    for (;;) {
        if (t->done(t->ctx) && !k->calls)
            return 0;
        struct pollfd pf[MAXFDS];
        call *owner[MAXFDS];
        int which[MAXFDS]; /* 0 pidfd, 1 out, 2 err, 3 tee */
        int timeout = -1;
        nfds_t n = 0;
        pf[n++] = (struct pollfd){.fd = k->sig_fd, .events = POLLIN};
        size_t ntr = t->fds(t->ctx, pf + n, TR_MAX, &timeout);
        n += ntr;
        nfds_t first_call = n;
        uint64_t now = now_ns();
        for (call *c = k->calls; c; c = c->next) {
            if (c->state != CALL_RUNNING || n + 4 > MAXFDS)
                continue;
            int fds[4] = {c->pidfd, c->out_fd, c->err_fd, c->tee_fd};
            for (int j = 0; j < 4; j++) {
                if (fds[j] < 0)
                    continue;
                owner[n] = c;
                which[n] = j;
                pf[n++] = (struct pollfd){.fd = fds[j], .events = POLLIN};
            }
            if (c->progress_token && !c->cancelled) {
                if (now >= c->next_progress_ns)
                    send_progress(c, now);
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
                } else if (timeout < 0 || timeout > 1000) {
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
            on_signal(k, t);
        /* children: pipes first, then exits (a child's last output is read
         * before its result is built) */
        for (nfds_t i = first_call; i < n; i++) {
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
        for (nfds_t i = first_call; i < n; i++)
            if (pf[i].revents && which[i] == 0) {
                call *c = owner[i];
                /* owner[] may hold c again later in this round (its pipes,
                 * already drained): forget those before c is freed */
                for (nfds_t j = i + 1; j < n; j++)
                    if (owner[j] == c)
                        pf[j].revents = 0;
                finish(k, c);
            }
        start_queued(k);
        t->events(t->ctx, pf + 1, ntr);
        if (k->stopping)
            cancel_all(k, "server stopping");
    }
}

void mcp_core_kill(mcp_core *k)
{
    while (k->calls) {
        call *c = k->calls;
        if (c->resident) {
            c->cancel = 1;
            pthread_join(c->th, NULL);
            k->res_busy = false;
        } else if (c->state == CALL_RUNNING) {
            kill(c->pid, SIGTERM);
            waitpid(c->pid, NULL, 0);
        }
        drop_call(k, c);
    }
}

void mcp_core_free(mcp_core *k)
{
    if (!k)
        return;
    mcp_core_kill(k);
    close(k->sig_fd);
    close(sig_w);
    sig_w = -1;
    free(k);
}

/* ---- txbox mcp ---- */

static void usage(FILE *f, const char *name)
{
    fprintf(f,
            "usage: txbox mcp [-C DIR] [--policy FILE] [--max-calls N] [--keep-transactions]\n"
            "                 [--spawn] [--structured]\n"
            "       txbox mcp --listen HOST:PORT --token-file FILE [-C DIR] [--workspace NAME=DIR]...\n"
            "                 [--tls-cert FILE --tls-key FILE | --allow-plain-http]\n"
            "                 [--allow-origin ORIGIN]... [--max-sessions N] [--session-calls N]\n"
            "                 [--session-idle S] [--max-connections N] [...]\n"
            "\nA Model Context Protocol server on stdin/stdout (newline-delimited JSON-RPC 2.0),\n"
            "or with --listen over Streamable HTTP at http(s)://HOST:PORT/mcp (and /mcp/NAME\n"
            "for each --workspace NAME=DIR), each request carrying 'Authorization: Bearer\n"
            "TOKEN', TOKEN the content of --token-file (read again when it changes).\n"
            "Tools: run, check, log, show, diff, undo, and for multi-command transactions\n"
            "begin, savepoint, rollback, commit, abort, status, on the workspace DIR (default:\n"
            "the current directory). A run runs in the server's process, keeping the\n"
            "workspace and its policy open (re-read when they change); other calls run\n"
            "the txbox CLI, as every call does with --spawn. --max-calls: commands\n"
            "running at once (default %d; more wait their turn). Transactions begun in a\n"
            "session and still open when it ends are aborted, unless --keep-transactions.\n"
            "Each answer is a line for the model, then a compact JSON object; --structured\n"
            "adds outputSchema and structuredContent (the CLI's whole JSON object), for\n"
            "clients that read fields rather than hand the text to a model.\n"
            "Over HTTP a non-loopback HOST needs --tls-cert and --tls-key (or\n"
            "--allow-plain-http when a proxy or mesh terminates TLS in front of it).\n"
            "See docs/mcp.md.\n",
            MAX_CALLS_DEFAULT);
}

/* The workspace DIR (and --policy) as the tools need them: resolved; the
 * policy must load (better than every call failing). */
static int config_of(const char *dir, const char *policy, bool structured, mcp_config *cfg)
{
    *cfg = (mcp_config){.structured = structured};
    cfg->workspace = realpath(dir, NULL);
    if (!cfg->workspace)
        return cli_failf("mcp: workspace '%s': %s", dir, strerror(errno));
    if (policy) {
        cfg->policy = realpath(policy, NULL);
        if (!cfg->policy) {
            int rc = cli_failf("mcp: policy '%s': %s", policy, strerror(errno));
            free(cfg->workspace);
            return rc;
        }
    }
    txbox_policy *pol = NULL;
    txbox_error err = {0};
    if (txbox_policy_load(cfg->policy, cfg->workspace, &pol, &err) < 0) {
        free(cfg->workspace);
        free(cfg->policy);
        return cli_failf("mcp: %s", err.msg);
    }
    cli_policy_notes(pol);
    txbox_policy_free(pol);
    return 0;
}

int cmd_mcp(int argc, char **argv)
{
    enum { O_WORKSPACE = MCP_O_HTTP_END };
    static const struct option opts[] = {
        {"policy", required_argument, NULL, 'p'},
        {"max-calls", required_argument, NULL, 'm'},
        {"keep-transactions", no_argument, NULL, 'k'},
        {"spawn", no_argument, NULL, 's'},
        {"structured", no_argument, NULL, 'S'},
        {"listen", required_argument, NULL, MCP_O_LISTEN},
        {"token-file", required_argument, NULL, MCP_O_TOKEN},
        {"workspace", required_argument, NULL, O_WORKSPACE},
        {"tls-cert", required_argument, NULL, MCP_O_TLS_CERT},
        {"tls-key", required_argument, NULL, MCP_O_TLS_KEY},
        {"allow-plain-http", no_argument, NULL, MCP_O_PLAIN},
        {"allow-origin", required_argument, NULL, MCP_O_ORIGIN},
        {"max-sessions", required_argument, NULL, MCP_O_MAX_SESSIONS},
        {"session-calls", required_argument, NULL, MCP_O_SESSION_CALLS},
        {"session-idle", required_argument, NULL, MCP_O_SESSION_IDLE},
        {"max-connections", required_argument, NULL, MCP_O_MAX_CONNS},
        CLI_LONG_HELP,
        {0},
    };
    const char *policy = NULL;
    mcp_core_opts co = {.max_calls = MAX_CALLS_DEFAULT, .max_queued = MAX_QUEUED};
    bool structured = false;
    mcp_http_opts ho = {0};
    strvec named = {0};
    static const char here[] = "."; /* -C's default, told apart from a -C given */
    cli_opts cli = {.name = "mcp",
                    .help = usage,
                    .shorts = "+C:h",
                    .longs = opts,
                    .argc = argc,
                    .argv = argv,
                    .dir = here};
    int c;
    int rc = 0;
    while (!rc && (c = cli_opt_next(&cli)) >= 0) {
        uint64_t v = 0;
        switch (c) {
        case 'p':
            policy = optarg;
            break;
        case 'm':
            if (!parse_u64(optarg, &v) || v < 1 || v > 64)
                rc = cli_failf("mcp: --max-calls wants a number from 1 to 64, not '%s'", optarg);
            co.max_calls = (unsigned)v;
            break;
        case 'k':
            co.keep_txs = true;
            break;
        case 's':
            co.spawn_only = true;
            break;
        case 'S':
            structured = true;
            break;
        case O_WORKSPACE: {
            size_t had = named.n;
            strvec_add(&named, xstrdup(optarg)); /* a set: the same one again is not added */
            if (named.n == had)
                rc = cli_failf("mcp: --workspace %s given twice", optarg);
            break;
        }
        default:
            rc = mcp_http_option(&ho, c, optarg);
            break;
        }
    }
    if (!rc && c == CLI_OPT_STOP)
        rc = cli.status ? cli.status : -1;
    if (!rc && optind < argc)
        rc = cli_failf("mcp: unexpected argument '%s'", argv[optind]);
    if (!rc && !ho.listen && (named.n || ho.given))
        rc = cli_failf("mcp: --workspace, --token-file and the other HTTP options need --listen HOST:PORT");
    if (!rc && ho.listen)
        rc = mcp_http_check(&ho);
    if (rc) {
        strvec_free(&named);
        mcp_http_opts_free(&ho);
        return rc < 0 ? 0 : rc;
    }
    setenv(RUN_NET_WORDS_ENV, RUN_NET_WORDS_MODEL, 1);
    if (ho.listen)
        co.max_session_calls = ho.session_calls;
    mcp_core *k = mcp_core_new(&co);
    if (!k) {
        strvec_free(&named);
        mcp_http_opts_free(&ho);
        return cli_failf("mcp: cannot catch signals: %s", strerror(errno));
    }
    /* the workspaces: -C DIR, and the named ones over HTTP; without -C and
     * with named ones, /mcp serves none */
    mcp_ws *dflt = NULL;
    mcp_ws **ws = xcalloc(named.n + 1, sizeof *ws);
    size_t nws = 0;
    if (!named.n || cli.dir != here || !ho.listen) {
        mcp_config cfg;
        rc = config_of(cli.dir, policy, structured, &cfg);
        if (!rc)
            dflt = mcp_ws_new(k, NULL, &cfg);
    }
    for (size_t i = 0; !rc && i < named.n; i++) {
        char *eq = strchr(named.v[i], '=');
        if (!eq || !mcp_http_name_ok(named.v[i], (size_t)(eq - named.v[i])) || !eq[1]) {
            rc = cli_failf("mcp: --workspace wants NAME=DIR, NAME 1-64 of A-Z a-z 0-9 . _ - (not "
                           "starting with '.'), not '%s'",
                           named.v[i]);
            break;
        }
        *eq = 0;
        for (size_t j = 0; j < nws; j++)
            if (!strcmp(mcp_ws_name(ws[j]), named.v[i]))
                rc = cli_failf("mcp: --workspace %s given twice", named.v[i]);
        mcp_config cfg;
        if (!rc)
            rc = config_of(eq + 1, policy, structured, &cfg);
        if (!rc)
            ws[nws++] = mcp_ws_new(k, named.v[i], &cfg);
    }
    strvec_free(&named);
    if (!rc)
        rc = ho.listen ? mcp_http_serve(k, &ho, dflt, ws, nws) : mcp_stdio_serve(k, dflt);
    for (size_t i = 0; i < nws; i++)
        mcp_ws_free(ws[i]);
    free(ws);
    mcp_ws_free(dflt);
    mcp_core_free(k);
    mcp_http_opts_free(&ho);
    return rc;
}
