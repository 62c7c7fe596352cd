/* txbox mcp --listen: MCP's Streamable HTTP transport (specification
 * 2025-11-25, basic/transports), served with libmicrohttpd (mhd_dl.h) in
 * the dispatcher's own poll loop: MHD's epoll descriptor is one of the
 * loop's, and every MHD callback runs on the loop's thread, so sessions,
 * calls and streams need no lock.
 *
 *   POST /mcp[/NAME]   one JSON-RPC message. A notification or a response:
 *                      202. A request answered at once (initialize, ping,
 *                      tools/list, an error): 200 application/json. A
 *                      tools/call: 200 text/event-stream, a priming event
 *                      (an id, no data), its progress notifications, then
 *                      its answer, and the stream ends (application/json
 *                      when the client does not take SSE).
 *   GET  /mcp[/NAME]   with Last-Event-ID: the rest of a stream whose
 *                      connection broke (resumption); without: 405, as
 *                      the server sends nothing outside a request.
 *   DELETE /mcp[/NAME] ends the session: its running calls are cancelled
 *                      (each rolls back), the transactions it began and
 *                      left open are aborted; 200 with what was done.
 *
 * A session (Mcp-Session-Id, 256 random bits in hex) is made by an
 * initialize without one, belongs to the workspace of its path, and ends
 * on DELETE, after --session-idle seconds without a request or a call, or
 * when the server stops; then its id gets 404.
 *
 * Every request needs `Authorization: Bearer TOKEN`, TOKEN the content of
 * --token-file (read again whenever the file changes, compared in constant
 * time, never logged); a request with an Origin header is refused unless
 * --allow-origin names it (DNS rebinding); httpgate.c reads the head.
 * Caps: bodies of JRPC_MAX_LINE bytes (413) and BODY_BUDGET held at once
 * (503); MHD's per-connection memory (headers: 431), --max-connections,
 * an idle connection closed after CONN_TIMEOUT_S; --max-sessions (503);
 * --session-calls per session and the dispatcher's queue (-32000); a
 * stream keeps STREAM_EVENTS_MAX events for a resume, a session
 * STREAMS_MAX streams.
 *
 * One JSON line per request goes to stdout (the access log, for a
 * cluster's log collector); diagnostics to stderr. See docs/mcp.md. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "../cmds.h"
#include "core.h"
#include "httpgate.h"
#include "jsonrpc.h"
#include "mhd_dl.h"
#include "transport.h"

#define BODY_CAP JRPC_MAX_LINE  /* one message */
#define BODY_BUDGET (64u << 20) /* request bodies held at once, all connections */
#define DRAIN_MAX (64u << 20)   /* a body over the cap is read and dropped; beyond: refused at once */
#define MAX_SESSIONS_DEFAULT 64
#define SESSION_CALLS_DEFAULT 16
#define SESSION_IDLE_DEFAULT 1800.0
#define MAX_CONNS_DEFAULT 256
#define CONN_TIMEOUT_S 60                    /* an idle connection (keep-alive, slow client) */
#define CONN_MEMORY (64u << 10)              /* MHD's pool per connection: headers, buffers */
#define KEEPALIVE_NS (15ull * 1000000000ull) /* an SSE comment on a quiet stream */
#define TICK_MS 1000
#define STREAM_EVENTS_MAX 32                     /* events a stream keeps besides its answer */
#define STREAMS_MAX 64                           /* streams a session keeps for a resume */
#define RESUME_GRACE_NS (120ull * 1000000000ull) /* a finished stream kept for a broken connection */
#define STOP_GRACE_NS (5ull * 1000000000ull)     /* answers flushed at a stop, at most this long */
#define TLS_FILE_CAP (1u << 20)
#define RETRY_MS 1000 /* the SSE retry field: when to reconnect */
#define SERVER_BUSY (-32000)

typedef struct hreq hreq;
typedef struct hsess hsess;
typedef struct http_tr http_tr;

/* One message of a stream, as SSE bytes ("id: K-N\ndata: JSON\n\n"). */
typedef struct hevent {
    struct hevent *next;
    uint32_t seq;
    bool final;
    size_t len;
    char data[];
} hevent;

/* What the server sends about one request: its notifications and its
 * answer, kept until the client has them (for a resume). */
typedef struct hstream {
    struct hstream *next;
    hsess *sess;
    unsigned no;       /* in its session: event ids are "no-seq" */
    uint32_t next_seq; /* 0 is the priming event's */
    hevent *head, *tail;
    unsigned nevents;
    hreq *req;  /* the request writing it now; NULL: detached */
    bool done;  /* the answer came (or none will: cancelled) */
    char *json; /* the answer, as one message (application/json) */
    uint64_t detached_ns;
} hstream;

struct hsess {
    hsess *next;
    http_tr *tr;
    mcp_sess *ms; /* NULL once ended */
    int ws;       /* the gate's workspace index (-1: /mcp) */
    char id[65];
    uint64_t last_ns;
    hstream *streams;
    unsigned nstreams, next_no;
    hreq *deleting; /* a DELETE waiting for the end */
};

typedef enum { R_HEAD, R_BODY, R_JSON_WAIT, R_SSE, R_DELETE_WAIT, R_ANSWERED } req_state;

struct hreq {
    hreq *next, *prev;
    http_tr *tr;
    struct MHD_Connection *conn;
    req_state state;
    http_head h;
    http_verdict v;
    dbuf body;
    bool too_big, over_budget;
    size_t budget; /* bytes of BODY_BUDGET it holds */
    bool suspended;
    hsess *sess;  /* DELETE: the session it ends */
    char *report; /* DELETE: what the end did */
    hstream *stream;
    bool taken; /* its stream was taken by a resume elsewhere */
    /* the SSE writer: the priming event, then the stream's events from
     * wseq (woff bytes into it), keep-alive comments between them */
    char prime[64];
    size_t prime_len, poff, koff;
    bool primed, keepalive;
    uint32_t wseq;
    size_t woff;
    /* the access log */
    uint64_t t0;
    int status;
    const char *why;
    char method[12], path[96], remote[64], sid[9], rpc[48], tool[24];
    uint64_t bytes_in, bytes_out;
    unsigned events;
};

typedef struct hws {
    const char *name; /* NULL: /mcp */
    mcp_ws *w;
} hws;

struct http_tr {
    mcp_core *core;
    const mcp_http_opts *o;
    struct MHD_Daemon *d;
    int epfd, log_fd;
    hws *ws; /* gate index i: ws[i]; -1: dflt */
    hws dflt;
    const char **names;
    http_gate_cfg gate;
    /* the token, as the file held it at the last change */
    char *token;
    size_t token_len;
    bool token_ok;
    struct stat token_st;
    bool token_st_ok;
    hsess *sessions;
    unsigned nsessions;
    hreq *reqs;
    unsigned nreqs;
    size_t body_bytes;
    bool stopping;
    uint64_t stop_ns, next_tick_ns, next_keepalive_ns;
    char *tls_cert, *tls_key;
    size_t tls_key_len;
};

/* ---- options ---- */

bool mcp_http_name_ok(const char *s, size_t len) { return http_name_ok(s, len); }

static int bounded(const char *opt, const char *arg, uint64_t lo, uint64_t hi, unsigned *out)
{
    uint64_t v;
    if (!parse_u64(arg, &v) || v < lo || v > hi)
        return cli_failf("mcp: %s wants a number from %llu to %llu, not '%s'", opt, (unsigned long long)lo,
                         (unsigned long long)hi, arg);
    *out = (unsigned)v;
    return 0;
}

static void set_str(char **slot, const char *arg)
{
    free(*slot);
    *slot = xstrdup(arg);
}

int mcp_http_option(mcp_http_opts *o, int opt, const char *arg)
{
    if (opt != MCP_O_LISTEN)
        o->given = true;
    unsigned v = 0;
    switch (opt) {
    case MCP_O_LISTEN:
        set_str(&o->listen, arg);
        return 0;
    case MCP_O_TOKEN:
        set_str(&o->token_file, arg);
        return 0;
    case MCP_O_TLS_CERT:
        set_str(&o->tls_cert, arg);
        return 0;
    case MCP_O_TLS_KEY:
        set_str(&o->tls_key, arg);
        return 0;
    case MCP_O_PLAIN:
        o->plain_ok = true;
        return 0;
    case MCP_O_ORIGIN:
        if (!*arg || strchr(arg, ' ') || strchr(arg, ','))
            return cli_failf("mcp: --allow-origin wants one origin (scheme://host[:port]), not '%s'", arg);
        strvec_add(&o->origins, xstrdup(arg));
        return 0;
    case MCP_O_MAX_SESSIONS:
        return bounded("--max-sessions", arg, 1, 4096, &o->max_sessions);
    case MCP_O_SESSION_CALLS:
        return bounded("--session-calls", arg, 1, 256, &o->session_calls);
    case MCP_O_MAX_CONNS:
        return bounded("--max-connections", arg, 4, 65536, &o->max_conns);
    case MCP_O_SESSION_IDLE:
        if (bounded("--session-idle", arg, 1, 7 * 86400, &v))
            return TXBOX_EXIT_ERROR;
        o->session_idle = v;
        return 0;
    }
    return cli_failf("mcp: unknown option");
}

int mcp_http_check(mcp_http_opts *o)
{
    if (!o->token_file)
        return cli_failf("mcp: --listen needs --token-file FILE (the bearer token clients must send)");
    if (!o->tls_cert != !o->tls_key)
        return cli_failf("mcp: --tls-cert and --tls-key go together");
    if (!o->max_sessions)
        o->max_sessions = MAX_SESSIONS_DEFAULT;
    if (!o->session_calls)
        o->session_calls = SESSION_CALLS_DEFAULT;
    if (!o->max_conns)
        o->max_conns = MAX_CONNS_DEFAULT;
    if (o->session_idle <= 0)
        o->session_idle = SESSION_IDLE_DEFAULT;
    return 0;
}

void mcp_http_opts_free(mcp_http_opts *o)
{
    free(o->listen);
    free(o->token_file);
    free(o->tls_cert);
    free(o->tls_key);
    strvec_free(&o->origins);
}

/* ---- the access log: one JSON line per request on stdout ---- */

static void log_line(http_tr *t, json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s)
        return;
    size_t n = strlen(s);
    s[n] = '\n'; /* json_dumps's NUL becomes the newline: one write */
    if (write_all(t->log_fd, s, n + 1) < 0) {
        /* the collector is gone: nothing to do but go on serving */
    }
    free(s);
}

static json_t *json_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char b[40];
    size_t n = strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(b + n, sizeof b - n, ".%03ldZ", ts.tv_nsec / 1000000);
    return json_string(b);
}

static const char *end_word(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK:
        return "ok";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED:
        return "timeout";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN:
        return "shutdown";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
    case MHD_REQUEST_TERMINATED_READ_ERROR:
        return "client closed";
    default:
        return "error";
    }
}

static void access_log(hreq *r, enum MHD_RequestTerminationCode toe)
{
    json_t *o = json_pack("{s:o,s:s,s:s,s:s,s:i,s:I,s:I,s:I}", "time", json_time(), "remote", r->remote,
                          "method", r->method, "path", r->path, "status", r->status, "ms",
                          (json_int_t)((now_ns() - r->t0) / 1000000), "bytes_in", (json_int_t)r->bytes_in,
                          "bytes_out", (json_int_t)r->bytes_out);
    if (!o)
        return;
    json_object_set_new(o, "session", r->sid[0] ? json_string(r->sid) : json_null());
    if (r->rpc[0])
        json_object_set_new(o, "rpc", json_string(r->rpc));
    if (r->tool[0])
        json_object_set_new(o, "tool", json_string(r->tool));
    if (r->state == R_SSE || r->events)
        json_object_set_new(o, "events", json_integer(r->events));
    if (r->why)
        json_object_set_new(o, "why", json_string(r->why));
    json_object_set_new(o, "end", json_string(end_word(toe)));
    log_line(r->tr, o);
}

/* A file the user named (the token, the TLS certificate and key):
 * trusted configuration, so a symlink is followed (a Kubernetes Secret's
 * files are symlinks); a regular file only, at most cap bytes, NUL-ended. */
static int read_conf(const char *path, size_t cap, char **out, size_t *len, txbox_error *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return tx_errno(err, errno, "cannot open %s", path);
    if (!S_ISREG(st.st_mode))
        return tx_err(err, EINVAL, "%s is not a regular file", path);
    if ((uint64_t)st.st_size > cap)
        return tx_err(err, EFBIG, "%s is larger than %zu bytes", path, cap);
    char *buf = xmalloc((size_t)st.st_size + 1);
    ssize_t n = read_all(fd, buf, (size_t)st.st_size);
    if (n < 0) {
        int e = errno;
        free(buf);
        return tx_errno(err, e, "cannot read %s", path);
    }
    buf[n] = 0;
    *out = buf;
    *len = (size_t)n;
    return 0;
}

/* ---- the token ---- */

/* Reads the token file again when it changed (a Kubernetes Secret is
 * swapped through a symlink: a new inode). What it holds from then on is
 * the only valid token; a file that is gone, unreadable or holds no
 * valid token leaves none (every request refused). */
static void token_refresh(http_tr *t)
{
    struct stat st;
    bool ok = stat(t->o->token_file, &st) == 0;
    if (ok == t->token_st_ok &&
        (!ok || (st.st_dev == t->token_st.st_dev && st.st_ino == t->token_st.st_ino &&
                 st.st_size == t->token_st.st_size && st.st_mtim.tv_sec == t->token_st.st_mtim.tv_sec &&
                 st.st_mtim.tv_nsec == t->token_st.st_mtim.tv_nsec &&
                 st.st_ctim.tv_sec == t->token_st.st_ctim.tv_sec &&
                 st.st_ctim.tv_nsec == t->token_st.st_ctim.tv_nsec)))
        return;
    bool had = t->token_ok;
    t->token_st_ok = ok;
    if (ok)
        t->token_st = st;
    if (t->token) {
        explicit_bzero(t->token, t->token_len);
        free(t->token);
    }
    t->token = NULL;
    t->token_len = 0;
    t->token_ok = false;
    char *buf = NULL;
    size_t len = 0;
    txbox_error err = {0};
    if (ok && read_conf(t->o->token_file, HTTP_TOKEN_MAX + 64, &buf, &len, &err) == 0 &&
        http_token_clean(buf, &len)) {
        t->token = buf;
        t->token_len = len;
        t->token_ok = true;
        if (had)
            mcp_log("token file %s changed: the new token is in force", t->o->token_file);
        return;
    }
    if (buf) {
        explicit_bzero(buf, len);
        free(buf);
    }
    if (t->d) /* at the start, the refusal to start says it */
        mcp_log("token file %s holds no valid token (%d to %d characters of A-Z a-z 0-9 - . _ ~ + /, then "
                "'='s): every request is refused until it does",
                t->o->token_file, HTTP_TOKEN_MIN, HTTP_TOKEN_MAX);
}

/* ---- responses ---- */

static void suspend(hreq *r)
{
    if (!r->suspended) {
        r->suspended = true;
        MHD_suspend_connection(r->conn);
    }
}

static void wake(hreq *r)
{
    if (r && r->suspended) {
        r->suspended = false;
        MHD_resume_connection(r->conn);
    }
}

static void cors_headers(hreq *r, struct MHD_Response *resp)
{
    if (!r->v.cors)
        return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", r->h.origin);
    MHD_add_response_header(resp, "Vary", "Origin");
    MHD_add_response_header(resp, "Access-Control-Expose-Headers", "Mcp-Session-Id");
}

static enum MHD_Result queue(hreq *r, int status, struct MHD_Response *resp, const char *ctype)
{
    if (ctype)
        MHD_add_response_header(resp, "Content-Type", ctype);
    cors_headers(r, resp);
    r->status = status;
    r->state = R_ANSWERED;
    enum MHD_Result rc = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* A body of our own (copied). */
static struct MHD_Response *body(const char *s)
{
    return MHD_create_response_from_buffer(strlen(s), (void *)s, MHD_RESPMEM_MUST_COPY);
}

/* An error status with a JSON-RPC error (id null, or the request's) as its body. */
static enum MHD_Result answer_error(hreq *r, int status, const json_t *id, int code, const char *why)
{
    r->why = why;
    char msg[200];
    snprintf(msg, sizeof msg, "%s", why);
    char *e = jrpc_error(id, code, msg, NULL);
    struct MHD_Response *resp = body(e ? e : "");
    free(e);
    if (status == 405)
        MHD_add_response_header(resp, "Allow", r->v.method == HM_GET ? "POST, DELETE" : "POST, GET, DELETE");
    if (status == 401 && r->v.www_authenticate)
        MHD_add_response_header(resp, "WWW-Authenticate", r->v.www_authenticate);
    return queue(r, status, resp, "application/json");
}

static enum MHD_Result answer_json(hreq *r, int status, const char *json, const char *session)
{
    struct MHD_Response *resp = body(json);
    if (session)
        MHD_add_response_header(resp, "Mcp-Session-Id", session);
    r->bytes_out += strlen(json);
    return queue(r, status, resp, "application/json");
}

static enum MHD_Result answer_empty(hreq *r, int status)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (status == 204 && r->v.cors) {
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "POST, GET, DELETE");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                                "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, "
                                "Last-Event-ID");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    }
    return queue(r, status, resp, NULL);
}

/* ---- streams ---- */

static void event_free_list(hevent *e)
{
    while (e) {
        hevent *n = e->next;
        free(e);
        e = n;
    }
}

static void stream_free(hstream *st)
{
    hsess *s = st->sess;
    for (hstream **p = s ? &s->streams : NULL; p && *p; p = &(*p)->next)
        if (*p == st) {
            *p = st->next;
            s->nstreams--;
            break;
        }
    if (st->req) {
        st->req->stream = NULL;
        wake(st->req);
    }
    event_free_list(st->head);
    free(st->json);
    free(st);
}

/* Drops what a session keeps beyond STREAMS_MAX: the oldest finished,
 * detached streams (a resume of them gets 400). */
static void streams_trim(hsess *s)
{
    for (hstream **p = &s->streams; *p && s->nstreams > STREAMS_MAX;) {
        hstream *st = *p;
        if (st->done && !st->req)
            stream_free(st); /* unlinks *p */
        else
            p = &st->next;
    }
}

static hstream *stream_new(hsess *s, hreq *r)
{
    hstream *st = xcalloc(1, sizeof *st);
    st->sess = s;
    st->no = s->next_no++;
    st->next_seq = 1;
    st->req = r;
    r->stream = st;
    /* newest first: a resume finds recent streams first */
    st->next = s->streams;
    s->streams = st;
    s->nstreams++;
    streams_trim(s);
    return st;
}

/* Drops the oldest event that is not the answer nor being written, when
 * the stream keeps too many (a client that resumes misses some progress). */
static void stream_trim(hstream *st)
{
    unsigned kept = 0;
    for (hevent *e = st->head; e; e = e->next)
        kept += !e->final;
    for (hevent **p = &st->head; *p && kept > STREAM_EVENTS_MAX;) {
        hevent *e = *p;
        bool writing = st->req && e->seq == st->req->wseq && st->req->woff > 0;
        if (e->final || writing) {
            p = &e->next;
            continue;
        }
        *p = e->next;
        if (st->tail == e)
            st->tail = NULL;
        free(e);
        st->nevents--;
        kept--;
    }
    if (!st->tail)
        for (hevent *e = st->head; e; e = e->next)
            st->tail = e;
}

static void stream_add(hstream *st, const char *line, bool final)
{
    char head[48];
    int hn = snprintf(head, sizeof head, "id: %u-%u\ndata: ", st->no, st->next_seq);
    size_t ln = strlen(line);
    hevent *e = xmalloc(sizeof *e + (size_t)hn + ln + 2);
    e->next = NULL;
    e->seq = st->next_seq++;
    e->final = final;
    memcpy(e->data, head, (size_t)hn);
    memcpy(e->data + hn, line, ln);
    memcpy(e->data + hn + ln, "\n\n", 2);
    e->len = (size_t)hn + ln + 2;
    if (st->tail)
        st->tail->next = e;
    else
        st->head = e;
    st->tail = e;
    st->nevents++;
    stream_trim(st);
}

/* The session's send function: a message about the request of stream
 * origin. */
static void h_send(void *ctx, void *origin, char *line, bool final)
{
    hsess *s = ctx;
    hstream *st = origin;
    s->last_ns = now_ns();
    if (st && !st->done) {
        if (line)
            stream_add(st, line, final);
        if (final) {
            st->done = true;
            st->json = line;
            line = NULL;
            st->detached_ns = now_ns(); /* a broken connection's resume has RESUME_GRACE_NS from now */
        }
        wake(st->req);
    }
    free(line);
}

/* ---- sessions ---- */

static void sess_unlink(http_tr *t, hsess *s)
{
    for (hsess **p = &t->sessions; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            t->nsessions--;
            return;
        }
}

/* The dispatcher says the session has ended (mcp_sess_end). */
static void h_ended(void *ctx, const char *report)
{
    hsess *s = ctx;
    http_tr *t = s->tr;
    mcp_log("session %.8s ended: %s", s->id, report);
    s->ms = NULL;
    if (s->deleting) {
        s->deleting->report = xstrdup(report);
        s->deleting->sess = NULL;
        wake(s->deleting);
    }
    /* a stream being written goes on until its answer is out (the request
     * frees it); the others, which no one can resume now, go */
    while (s->streams) {
        hstream *st = s->streams;
        if (st->req) {
            s->streams = st->next;
            st->sess = NULL;
            st->next = NULL;
        } else {
            stream_free(st);
        }
    }
    sess_unlink(t, s);
    explicit_bzero(s->id, sizeof s->id);
    free(s);
}

static hsess *sess_new(http_tr *t, int ws)
{
    unsigned char rnd[32];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return NULL;
    hsess *s = xcalloc(1, sizeof *s);
    s->tr = t;
    s->ws = ws;
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(s->id + 2 * i, 3, "%02x", rnd[i]);
    explicit_bzero(rnd, sizeof rnd);
    s->last_ns = now_ns();
    mcp_ws *w = ws < 0 ? t->dflt.w : t->ws[ws].w;
    s->ms = mcp_sess_new(t->core, w, h_send, h_ended, s);
    s->next = t->sessions;
    t->sessions = s;
    t->nsessions++;
    return s;
}

static hsess *sess_find(http_tr *t, const char *id, int ws)
{
    size_t n = strlen(id);
    for (hsess *s = t->sessions; s; s = s->next)
        if (s->ws == ws && http_token_equal(s->id, strlen(s->id), id, n))
            return s;
    return NULL;
}

static bool sess_busy(const hsess *s)
{
    if (mcp_sess_calls(s->ms) || s->deleting)
        return true;
    for (const hstream *st = s->streams; st; st = st->next)
        if (st->req)
            return true;
    return false;
}

/* ---- the SSE writer ---- */

/* Copies src[*off, len) into buf[*n, max); true when all of it is in. */
static bool put(char *buf, size_t max, size_t *n, const char *src, size_t len, size_t *off)
{
    size_t k = len - *off;
    if (k > max - *n)
        k = max - *n;
    memcpy(buf + *n, src + *off, k);
    *n += k;
    *off += k;
    return *off == len;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    hreq *r = cls;
    hstream *st = r->stream;
    if (!st) /* taken by a resume elsewhere: this connection is stale */
        return r->taken ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = 0;
    if (!r->primed) {
        if (!put(buf, max, &n, r->prime, r->prime_len, &r->poff))
            return (ssize_t)n;
        r->primed = true;
    }
    for (hevent *e = st->head; e; e = e->next) {
        if (e->seq < r->wseq)
            continue;
        if (e->seq > r->wseq) { /* wseq was dropped (trimmed): from the next one */
            r->wseq = e->seq;
            r->woff = 0;
        }
        if (!put(buf, max, &n, e->data, e->len, &r->woff)) {
            r->bytes_out += n;
            return (ssize_t)n;
        }
        r->wseq = e->seq + 1;
        r->woff = 0;
        r->events++;
    }
    if (r->keepalive) {
        static const char ka[] = ": keep-alive\n\n";
        if (!put(buf, max, &n, ka, sizeof ka - 1, &r->koff)) {
            r->bytes_out += n;
            return (ssize_t)n;
        }
        r->keepalive = false;
        r->koff = 0;
    }
    r->bytes_out += n;
    if (n)
        return (ssize_t)n;
    if (st->done)
        return MHD_CONTENT_READER_END_OF_STREAM;
    suspend(r);
    return 0;
}

static enum MHD_Result answer_sse(hreq *r, const char *session, bool prime)
{
    hstream *st = r->stream;
    r->prime_len =
        (size_t)snprintf(r->prime, sizeof r->prime, "id: %u-0\nretry: %d\ndata:\n\n", st->no, RETRY_MS);
    r->primed = !prime;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, r, NULL);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Cache-Control", "no-cache, no-store");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    if (session)
        MHD_add_response_header(resp, "Mcp-Session-Id", session);
    enum MHD_Result rc = queue(r, 200, resp, "text/event-stream");
    r->state = R_SSE;
    return rc;
}

/* ---- requests ---- */

static enum MHD_Result note_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                   const char *value, size_t value_size)
{
    (void)kind;
    (void)key_size;
    (void)value_size;
    http_head_note(cls, key, value ? value : "");
    return MHD_YES;
}

static void remote_of(hreq *r)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    snprintf(r->remote, sizeof r->remote, "?");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, r->remote, sizeof r->remote);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, r->remote, sizeof r->remote);
}

static hreq *req_new(http_tr *t, struct MHD_Connection *conn, const char *url, const char *method)
{
    hreq *r = xcalloc(1, sizeof *r);
    r->tr = t;
    r->conn = conn;
    r->t0 = now_ns();
    r->v.ws = -1;
    snprintf(r->method, sizeof r->method, "%s", method);
    /* the path as text: control bytes shown as '?' */
    snprintf(r->path, sizeof r->path, "%s", url);
    for (char *p = r->path; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            *p = '?';
    dbuf_init(&r->body, BODY_CAP);
    remote_of(r);
    r->next = t->reqs;
    if (t->reqs)
        t->reqs->prev = r;
    t->reqs = r;
    t->nreqs++;
    return r;
}

static void req_free(http_tr *t, hreq *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        t->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    t->nreqs--;
    t->body_bytes -= r->budget;
    dbuf_free(&r->body);
    free(r->report);
    free(r);
}

static void note_rpc(hreq *r, const jrpc_msg *m)
{
    if (m->method)
        snprintf(r->rpc, sizeof r->rpc, "%s", m->method);
    json_t *name = json_object_get(m->params, "name");
    if (m->method && !strcmp(m->method, "tools/call") && json_is_string(name))
        snprintf(r->tool, sizeof r->tool, "%s", json_string_value(name));
    for (char *p = r->rpc; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '"' || *p == '\\')
            *p = '?';
    for (char *p = r->tool; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '"' || *p == '\\')
            *p = '?';
}

/* A POST whose body is in: one JSON-RPC message for a session. */
static enum MHD_Result handle_post(http_tr *t, hreq *r)
{
    jrpc_msg m;
    jrpc_msg_type type = jrpc_parse(dbuf_str(&r->body), r->body.len, &m);
    enum MHD_Result rc = MHD_NO;
    note_rpc(r, &m);
    if (type == JRPC_MSG_INVALID || type == JRPC_MSG_BLANK) {
        rc = answer_error(r, 400, m.id, type == JRPC_MSG_BLANK ? JRPC_INVALID_REQUEST : m.code,
                          type == JRPC_MSG_BLANK ? "Invalid Request: empty body" : m.message);
        jrpc_msg_free(&m);
        return rc;
    }
    bool init = type == JRPC_MSG_REQUEST && !strcmp(m.method, "initialize");
    hsess *s = NULL;
    bool created = false;
    if (!r->h.session) {
        if (!init)
            rc = answer_error(r, 400, m.id, JRPC_INVALID_REQUEST,
                              "Mcp-Session-Id required (initialize first)");
        else if (t->stopping)
            rc = answer_error(r, 503, m.id, SERVER_BUSY, "the server is stopping");
        else if (t->nsessions >= t->o->max_sessions)
            rc = answer_error(r, 503, m.id, SERVER_BUSY, "too many sessions (--max-sessions)");
        else if (!(s = sess_new(t, r->v.ws)))
            rc = answer_error(r, 500, m.id, JRPC_INTERNAL_ERROR, "no random bytes for a session id");
        created = s != NULL;
    } else {
        s = sess_find(t, r->h.session, r->v.ws);
        if (!s || !s->ms || s->deleting)
            rc = answer_error(r, 404, NULL, JRPC_INVALID_REQUEST, "session not found (initialize again)");
        if (s && (!s->ms || s->deleting))
            s = NULL;
    }
    if (!s) {
        jrpc_msg_free(&m);
        return rc;
    }
    snprintf(r->sid, sizeof r->sid, "%.8s", s->id);
    s->last_ns = now_ns();
    if (type != JRPC_MSG_REQUEST) {
        mcp_sess_dispatch(s->ms, &m, NULL);
        jrpc_msg_free(&m);
        return answer_empty(r, 202);
    }
    hstream *st = stream_new(s, r);
    mcp_sess_dispatch(s->ms, &m, st);
    jrpc_msg_free(&m);
    if (created && !mcp_sess_ready(s->ms)) {
        /* initialize failed: no session (the end frees st) */
        char *e = st->json ? xstrdup(st->json) : NULL;
        r->sid[0] = 0;
        mcp_sess_end(s->ms, true, "initialize failed");
        rc = e ? answer_json(r, 200, e, NULL) : answer_error(r, 500, NULL, JRPC_INTERNAL_ERROR, "no answer");
        free(e);
        return rc;
    }
    const char *sid = created ? s->id : NULL;
    if (st->done && st->nevents <= 1 && r->v.json) {
        /* answered at once: one JSON object */
        rc = st->json ? answer_json(r, 200, st->json, sid) : answer_empty(r, 202);
        r->stream = NULL;
        st->req = NULL;
        stream_free(st);
        return rc;
    }
    if (r->v.sse)
        return answer_sse(r, sid, true);
    r->state = R_JSON_WAIT;
    suspend(r);
    return MHD_YES;
}

/* A JSON-mode request whose answer came (or the connection was woken). */
static enum MHD_Result json_ready(hreq *r)
{
    hstream *st = r->stream;
    if (st && !st->done) {
        suspend(r);
        return MHD_YES;
    }
    enum MHD_Result rc = st && st->json ? answer_json(r, 200, st->json, NULL) : answer_empty(r, 204);
    if (st) {
        r->stream = NULL;
        st->req = NULL;
        stream_free(st);
    }
    return rc;
}

static enum MHD_Result handle_get(http_tr *t, hreq *r)
{
    hsess *s = sess_find(t, r->h.session, r->v.ws);
    if (!s || !s->ms)
        return answer_error(r, 404, NULL, JRPC_INVALID_REQUEST, "session not found (initialize again)");
    snprintf(r->sid, sizeof r->sid, "%.8s", s->id);
    s->last_ns = now_ns();
    hstream *st = s->streams;
    while (st && st->no != r->v.stream)
        st = st->next;
    if (!st || r->v.seq >= st->next_seq)
        return answer_error(r, 400, NULL, JRPC_INVALID_REQUEST,
                            "no such stream to resume (Last-Event-ID): it ended or expired");
    if (st->req) { /* the old connection is stale: this one takes over */
        hreq *old = st->req;
        old->stream = NULL;
        old->taken = true;
        wake(old);
    }
    /* the client has everything up to seq: those need not be kept */
    while (st->head && st->head->seq <= r->v.seq) {
        hevent *e = st->head;
        st->head = e->next;
        free(e);
        st->nevents--;
    }
    if (!st->head)
        st->tail = NULL;
    st->req = r;
    r->stream = st;
    r->wseq = r->v.seq + 1;
    r->woff = 0;
    snprintf(r->rpc, sizeof r->rpc, "(resume %u-%u)", r->v.stream, r->v.seq);
    return answer_sse(r, NULL, false);
}

static enum MHD_Result handle_delete(http_tr *t, hreq *r)
{
    hsess *s = sess_find(t, r->h.session, r->v.ws);
    if (!s || !s->ms || s->deleting)
        return answer_error(r, 404, NULL, JRPC_INVALID_REQUEST, "session not found");
    snprintf(r->sid, sizeof r->sid, "%.8s", s->id);
    s->deleting = r;
    r->sess = s;
    r->state = R_DELETE_WAIT;
    mcp_sess_end(s->ms, true, "DELETE"); /* may end it now: r->report */
    if (r->report)
        return answer_json(r, 200, r->report, NULL);
    suspend(r);
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size,
                                  void **req_cls)
{
    (void)version;
    http_tr *t = cls;
    hreq *r = *req_cls;
    if (!r) {
        r = *req_cls = req_new(t, conn, url, method);
        MHD_get_connection_values_n(conn, MHD_HEADER_KIND, note_header, &r->h);
        token_refresh(t);
        t->gate.token = t->token_ok ? t->token : NULL;
        t->gate.token_len = t->token_len;
        http_gate(&t->gate, method, url, &r->h, &r->v);
        if (r->v.status == 204)
            return answer_empty(r, 204);
        if (r->v.status)
            return answer_error(r, r->v.status, NULL, r->v.status == 401 ? -32001 : JRPC_INVALID_REQUEST,
                                r->v.why);
        if (t->stopping && !(r->v.method == HM_GET || r->v.method == HM_DELETE))
            return answer_error(r, 503, NULL, SERVER_BUSY, "the server is stopping");
        /* a body over the cap is read and dropped, so that the client
         * sees the 413 rather than a connection reset; a huge one is
         * refused at once */
        uint64_t clen;
        if (r->v.method == HM_POST && r->h.clen && parse_u64(r->h.clen, &clen) && clen > DRAIN_MAX)
            return answer_error(r, 413, NULL, JRPC_INVALID_REQUEST, "body larger than 4 MiB");
        if (r->v.method == HM_GET)
            return handle_get(t, r);
        if (r->v.method == HM_DELETE)
            return handle_delete(t, r);
        r->state = R_BODY;
        return MHD_YES;
    }
    switch (r->state) {
    case R_BODY:
        if (*upload_size) {
            size_t n = *upload_size;
            r->bytes_in += n;
            if (r->body.len + n > BODY_CAP)
                r->too_big = true;
            else if (t->body_bytes + n > BODY_BUDGET)
                r->over_budget = true;
            if (!r->too_big && !r->over_budget) {
                dbuf_add(&r->body, upload, n);
                r->budget += n;
                t->body_bytes += n;
            }
            *upload_size = 0;
            return MHD_YES;
        }
        if (r->too_big)
            return answer_error(r, 413, NULL, JRPC_INVALID_REQUEST, "body larger than 4 MiB");
        if (r->over_budget)
            return answer_error(r, 503, NULL, SERVER_BUSY, "too many request bodies at once");
        return handle_post(t, r);
    case R_JSON_WAIT:
        return json_ready(r);
    case R_DELETE_WAIT:
        if (r->report)
            return answer_json(r, 200, r->report, NULL);
        suspend(r);
        return MHD_YES;
    default:
        return MHD_YES;
    }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    http_tr *t = cls;
    hreq *r = *req_cls;
    if (!r)
        return;
    *req_cls = NULL;
    access_log(r, toe);
    hstream *st = r->stream;
    if (st) {
        st->req = NULL;
        r->stream = NULL;
        bool all = !st->tail || r->wseq > st->tail->seq;
        if ((toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && st->done && all) || !st->sess)
            stream_free(st); /* delivered, or its session is gone: no resume */
        else
            st->detached_ns = now_ns();
    }
    if (r->sess && r->sess->deleting == r)
        r->sess->deleting = NULL;
    req_free(t, r);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char b[512];
    vsnprintf(b, sizeof b, fmt, ap);
    size_t n = strlen(b);
    while (n && b[n - 1] == '\n')
        b[--n] = 0;
    mcp_log("http: %s", b);
}

/* ---- the transport in the loop ---- */

static void tick(http_tr *t, uint64_t now)
{
    t->next_tick_ns = now + (uint64_t)TICK_MS * 1000000;
    for (hsess *s = t->sessions, *next; s; s = next) {
        next = s->next;
        for (hstream *st = s->streams, *sn; st; st = sn) {
            sn = st->next;
            if (st->done && !st->req && now - st->detached_ns > RESUME_GRACE_NS)
                stream_free(st);
        }
        if (s->ms && !t->stopping && !sess_busy(s) &&
            now - s->last_ns > (uint64_t)(t->o->session_idle * 1e9)) {
            mcp_log("session %.8s idle for %.0f s: ending it", s->id, t->o->session_idle);
            mcp_sess_end(s->ms, true, "idle"); /* may free s */
        }
    }
    if (now >= t->next_keepalive_ns) {
        t->next_keepalive_ns = now + KEEPALIVE_NS;
        /* a quiet SSE stream gets a comment (proxies keep it, and a client
         * gone is found out); a JSON wait is looked at again */
        for (hreq *r = t->reqs; r; r = r->next)
            if (r->suspended && (r->state == R_SSE || r->state == R_JSON_WAIT)) {
                r->keepalive = r->state == R_SSE;
                wake(r);
            }
    }
}

static size_t tr_fds(void *ctx, struct pollfd *pf, size_t max, int *timeout_ms)
{
    http_tr *t = ctx;
    (void)max;
    pf[0] = (struct pollfd){.fd = t->epfd, .events = POLLIN};
    MHD_UNSIGNED_LONG_LONG mt;
    uint64_t now = now_ns();
    int ms = now >= t->next_tick_ns ? 0 : (int)((t->next_tick_ns - now) / 1000000) + 1;
    if (MHD_get_timeout(t->d, &mt) == MHD_YES && mt < (MHD_UNSIGNED_LONG_LONG)ms)
        ms = (int)mt;
    if (*timeout_ms < 0 || ms < *timeout_ms)
        *timeout_ms = ms;
    return 1;
}

static void tr_events(void *ctx, struct pollfd *pf, size_t n)
{
    http_tr *t = ctx;
    (void)pf;
    (void)n;
    MHD_run(t->d);
    uint64_t now = now_ns();
    if (now >= t->next_tick_ns)
        tick(t, now);
}

static void tr_stop(void *ctx)
{
    http_tr *t = ctx;
    if (t->stopping)
        return;
    t->stopping = true;
    t->stop_ns = now_ns();
    MHD_socket ls = MHD_quiesce_daemon(t->d);
    if (ls != MHD_INVALID_SOCKET)
        close(ls);
    for (hsess *s = t->sessions, *next; s; s = next) {
        next = s->next;
        if (s->ms)
            mcp_sess_end(s->ms, true, "server stopping"); /* may free s */
    }
}

static bool tr_done(void *ctx)
{
    http_tr *t = ctx;
    if (!t->stopping || t->nsessions)
        return false;
    if (!t->nreqs)
        return true;
    return now_ns() - t->stop_ns > STOP_GRACE_NS;
}

/* ---- start and stop ---- */

static int read_pem(const char *path, const char *what, char **out, size_t *len)
{
    txbox_error err = {0};
    if (read_conf(path, TLS_FILE_CAP, out, len, &err) < 0)
        return cli_failf("mcp: %s %s: %s", what, path, err.msg);
    if (!strstr(*out, "-----BEGIN "))
        return cli_failf("mcp: %s %s is not PEM", what, path);
    return 0;
}

static bool is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return true;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return false;
}

/* The listening socket for HOST:PORT; *loopback: every address HOST
 * names is a loopback one. */
static int listen_on(const char *spec, bool *loopback, char *shown, size_t shown_cap)
{
    char host[256];
    uint16_t port;
    if (!http_hostport(spec, host, sizeof host, &port)) {
        cli_failf("mcp: --listen wants HOST:PORT or [IPV6]:PORT, not '%s'", spec);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", port);
    int e = getaddrinfo(host, ps, &hints, &ai);
    if (e) {
        cli_failf("mcp: --listen %s: %s", spec, gai_strerror(e));
        return -1;
    }
    *loopback = true;
    for (struct addrinfo *p = ai; p; p = p->ai_next)
        *loopback = *loopback && is_loopback(p->ai_addr);
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
        cli_failf("mcp: cannot listen on %s: %s", spec, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char a[INET6_ADDRSTRLEN] = "?";
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, a, sizeof a);
            snprintf(shown, shown_cap, "%s:%u", a, ntohs(((struct sockaddr_in *)&ss)->sin_port));
        } else {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, a, sizeof a);
            snprintf(shown, shown_cap, "[%s]:%u", a, ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
        }
    }
    return fd;
}

static void listening_line(http_tr *t, const char *addr, bool tls)
{
    json_t *ws = json_object();
    if (t->dflt.w)
        json_object_set_new(ws, "/mcp", json_string(mcp_ws_config(t->dflt.w)->workspace));
    for (size_t i = 0; i < t->gate.nnames; i++) {
        char path[HTTP_NAME_MAX + 8];
        snprintf(path, sizeof path, "/mcp/%s", t->names[i]);
        json_object_set_new(ws, path, json_string(mcp_ws_config(t->ws[i].w)->workspace));
    }
    log_line(t, json_pack("{s:o,s:s,s:s,s:s,s:o}", "time", json_time(), "event", "listening", "address", addr,
                          "scheme", tls ? "https" : "http", "workspaces", ws));
    mcp_log("listening on %s://%s (MCP %s and older)", tls ? "https" : "http", addr,
            mcp_protocol_versions[0]);
}

static void http_free(http_tr *t)
{
    if (t->token) {
        explicit_bzero(t->token, t->token_len);
        free(t->token);
    }
    if (t->tls_key) {
        explicit_bzero(t->tls_key, t->tls_key_len);
        free(t->tls_key);
    }
    free(t->tls_cert);
    free(t->names);
    free(t->ws);
    if (t->log_fd >= 0)
        close(t->log_fd);
}

int mcp_http_serve(mcp_core *k, const mcp_http_opts *o, mcp_ws *dflt, mcp_ws **ws, size_t nws)
{
    txbox_error err = {0};
    if (mhd_dl_load(&err) < 0)
        return cli_failf("mcp: --listen needs libmicrohttpd: %s (apt-get install libmicrohttpd12)", err.msg);
    http_tr t = {.core = k, .o = o, .epfd = -1, .log_fd = -1};
    t.dflt.w = dflt;
    t.ws = xcalloc(nws + 1, sizeof *t.ws);
    t.names = xcalloc(nws + 1, sizeof *t.names);
    for (size_t i = 0; i < nws; i++) {
        t.ws[i] = (hws){.name = mcp_ws_name(ws[i]), .w = ws[i]};
        t.names[i] = t.ws[i].name;
    }
    t.gate = (http_gate_cfg){.origins = (const char *const *)o->origins.v,
                             .norigins = o->origins.n,
                             .names = t.names,
                             .nnames = nws,
                             .has_default = dflt != NULL,
                             .versions = mcp_protocol_versions};
    int rc = 0;
    token_refresh(&t);
    if (!t.token_ok)
        rc = cli_failf("mcp: --token-file %s: no valid bearer token in it (%d to %d characters of A-Z a-z "
                       "0-9 - . _ ~ + /, then '='s)",
                       o->token_file, HTTP_TOKEN_MIN, HTTP_TOKEN_MAX);
    bool tls = o->tls_cert != NULL;
    size_t certlen = 0;
    if (!rc && tls && !MHD_is_feature_supported(MHD_FEATURE_TLS))
        rc = cli_failf("mcp: this libmicrohttpd (%s) has no TLS", MHD_get_version());
    if (!rc && tls)
        rc = read_pem(o->tls_cert, "--tls-cert", &t.tls_cert, &certlen);
    if (!rc && tls)
        rc = read_pem(o->tls_key, "--tls-key", &t.tls_key, &t.tls_key_len);
    bool loopback = false;
    char shown[INET6_ADDRSTRLEN + 16] = "?";
    int lfd = -1;
    if (!rc) {
        lfd = listen_on(o->listen, &loopback, shown, sizeof shown);
        if (lfd < 0)
            rc = TXBOX_EXIT_ERROR;
    }
    if (!rc && !loopback && !tls && !o->plain_ok) {
        close(lfd);
        rc = cli_failf("mcp: --listen %s is not a loopback address: plain HTTP would carry the token "
                       "and every command in clear; give --tls-cert and --tls-key, or "
                       "--allow-plain-http when a proxy or mesh terminates TLS in front of it",
                       o->listen);
    }
    if (rc) {
        http_free(&t);
        return rc;
    }
    /* the access log gets a private copy of stdout; fd 1 is stderr, fd 0
     * /dev/null, so nothing else can write into the log's lines */
    t.log_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (t.log_fd < 0 || devnull < 0 || dup2(devnull, 0) < 0 || dup2(2, 1) < 0) {
        close(lfd);
        http_free(&t);
        return cli_failf("mcp: cannot set up stdout: %s", strerror(errno));
    }
    close(devnull);
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | (tls ? MHD_USE_TLS : 0);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(lfd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, NULL},
        {MHD_OPTION_LISTEN_SOCKET, lfd, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, &t},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)o->max_conns, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, CONN_TIMEOUT_S, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONN_MEMORY, NULL},
        {MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL},
        {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, t.tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, t.tls_key},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"},
        {MHD_OPTION_END, 0, NULL},
    };
    t.d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, &t, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    const union MHD_DaemonInfo *di = t.d ? MHD_get_daemon_info(t.d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (!di) {
        if (t.d)
            MHD_stop_daemon(t.d);
        else
            close(lfd);
        http_free(&t);
        return cli_failf("mcp: cannot start the HTTP server on %s (libmicrohttpd %s)", shown,
                         MHD_get_version());
    }
    t.epfd = di->epoll_fd;
    listening_line(&t, shown, tls);
    mcp_transport tr = {.ctx = &t, .fds = tr_fds, .events = tr_events, .stop = tr_stop, .done = tr_done};
    rc = mcp_core_run(k, &tr);
    if (t.nsessions) { /* only after an error in the loop */
        for (hsess *s = t.sessions, *next; s; s = next) {
            next = s->next;
            if (s->ms)
                mcp_sess_end(s->ms, true, "server error");
        }
        mcp_core_kill(k);
    }
    /* MHD may not stop with a connection suspended */
    for (hreq *r = t.reqs; r; r = r->next)
        wake(r);
    MHD_run(t.d);
    MHD_stop_daemon(t.d);
    log_line(&t, json_pack("{s:o,s:s}", "time", json_time(), "event", "stopped"));
    mcp_log("stopped");
    http_free(&t);
    return rc;
}
