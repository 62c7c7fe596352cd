/* The libcurl client for chat completions; see client.h. */
#include "client.h"

#include "curl_dl.h"
#include <math.h>
#include <strings.h>
#include <time.h>

#include "sse.h"

#define ERROR_BODY_CAP (64 * 1024)
#define SSE_LINE_CAP (1024 * 1024)

struct llm_client {
    llm_cfg cfg;
    CURL *curl;
    struct curl_slist *headers;
    char errbuf[CURL_ERROR_SIZE];
};

char *llm_endpoint_url(const char *endpoint, txbox_error *err)
{
    if (strncasecmp(endpoint, "http://", 7) && strncasecmp(endpoint, "https://", 8)) {
        tx_err(err, EINVAL, "--endpoint must be an http:// or https:// URL, not '%s'", endpoint);
        return NULL;
    }
    if (curl_dl_load(err) < 0)
        return NULL;
    CURLU *u = curl_url();
    if (!u || curl_url_set(u, CURLUPART_URL, endpoint, 0) != CURLUE_OK) {
        curl_url_cleanup(u);
        tx_err(err, EINVAL, "--endpoint is not a valid URL: '%s'", endpoint);
        return NULL;
    }
    char *user = NULL, *query = NULL, *frag = NULL;
    curl_url_get(u, CURLUPART_USER, &user, 0);
    curl_url_get(u, CURLUPART_QUERY, &query, 0);
    curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0);
    bool bad_user = user != NULL, extra = query || frag;
    curl_free(user);
    curl_free(query);
    curl_free(frag);
    curl_url_cleanup(u);
    if (bad_user) {
        tx_err(err, EINVAL,
               "--endpoint must not carry credentials; put the key in an environment "
               "variable and name it with --api-key-env");
        return NULL;
    }
    if (extra) {
        tx_err(err, EINVAL, "--endpoint must not have a query or fragment");
        return NULL;
    }
    size_t n = strlen(endpoint);
    while (n && endpoint[n - 1] == '/')
        n--;
    static const char cc[] = "/chat/completions";
    if (n >= sizeof cc - 1 && !memcmp(endpoint + n - (sizeof cc - 1), cc, sizeof cc - 1))
        return xasprintf("%.*s", (int)n, endpoint);
    if (n >= 3 && !memcmp(endpoint + n - 3, "/v1", 3))
        return xasprintf("%.*s/chat/completions", (int)n, endpoint);
    return xasprintf("%.*s/v1/chat/completions", (int)n, endpoint);
}

int llm_client_new(const llm_cfg *cfg, llm_client **out, txbox_error *err)
{
    static bool inited;
    if (!inited) {
        if (curl_dl_load(err) < 0)
            return -1;
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            return tx_err(err, EIO, "libcurl could not be initialized");
        inited = true;
    }
    llm_client *c = xcalloc(1, sizeof *c);
    c->cfg = *cfg;
    c->curl = curl_easy_init();
    if (!c->curl) {
        free(c);
        return tx_err(err, ENOMEM, "libcurl could not create a handle");
    }
    c->headers = curl_slist_append(c->headers, "Content-Type: application/json");
    c->headers = curl_slist_append(c->headers, "Accept: application/json, text/event-stream");
    c->headers = curl_slist_append(c->headers, "Expect:");
    if (cfg->api_key) {
        char *h = xasprintf("Authorization: Bearer %s", cfg->api_key);
        c->headers = curl_slist_append(c->headers, h);
        explicit_bzero(h, strlen(h));
        free(h);
    }
    *out = c;
    return 0;
}

void llm_client_free(llm_client *c)
{
    if (!c)
        return;
    /* The Authorization header holds the key: wipe it before freeing. */
    for (struct curl_slist *s = c->headers; s; s = s->next)
        explicit_bzero(s->data, strlen(s->data));
    curl_slist_free_all(c->headers);
    curl_easy_cleanup(c->curl);
    free(c);
}

/* ---- one attempt ---- */

typedef struct attempt {
    llm_client *c;
    chat_reply *reply;
    sse_parser sse;
    dbuf body;
    long status;
    bool started, sse_mode, sink_failed;
    char ctype[128];
    size_t bytes;
    txbox_error err; /* the sink's error, if it stopped the transfer */
} attempt;

static int on_sse_event(void *ctx, const char *event, const char *data, size_t len, txbox_error *err)
{
    return chat_stream_event(ctx, event, data, len, err);
}

static void start(attempt *a)
{
    a->started = true;
    curl_easy_getinfo(a->c->curl, CURLINFO_RESPONSE_CODE, &a->status);
    char *ct = NULL;
    curl_easy_getinfo(a->c->curl, CURLINFO_CONTENT_TYPE, &ct);
    snprintf(a->ctype, sizeof a->ctype, "%s", ct ? ct : "");
    a->sse_mode = a->status == 200 && !strncasecmp(a->ctype, "text/event-stream", 17);
    if (a->sse_mode)
        sse_init(&a->sse, SSE_LINE_CAP, a->c->cfg.max_bytes, on_sse_event, a->reply);
    dbuf_init(&a->body, a->status == 200 ? a->c->cfg.max_bytes + 1 : ERROR_BODY_CAP);
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    attempt *a = ud;
    size_t n = size * nmemb;
    if (!a->started)
        start(a);
    a->bytes += n;
    if (a->bytes > a->c->cfg.max_bytes) {
        tx_err(&a->err, EMSGSIZE, "the response exceeds %zu bytes (--max-response-bytes)",
               a->c->cfg.max_bytes);
        a->sink_failed = true;
        return 0;
    }
    if (a->sse_mode) {
        if (sse_feed(&a->sse, ptr, n, &a->err) < 0) {
            a->sink_failed = true;
            return 0;
        }
    } else {
        dbuf_add(&a->body, ptr, n);
    }
    return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    attempt *a = ud;
    return a->c->cfg.cancel && *a->c->cfg.cancel ? 1 : 0;
}

static bool transient_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

static double ms_since(uint64_t t0) { return (double)(now_ns() - t0) / 1e6; }

/* Sleep s seconds in slices, waking early on cancel. */
static void nap(double s, volatile sig_atomic_t *cancel)
{
    while (s > 0 && !(cancel && *cancel)) {
        double d = s < 0.1 ? s : 0.1;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(d * 1e9)};
        nanosleep(&ts, NULL);
        s -= d;
    }
}

enum { A_DONE, A_RETRY, A_FAIL };

/* One POST. Returns A_DONE (reply filled), A_RETRY (transient: err says
 * why, *retry_after the server's wish or 0) or A_FAIL (err, call->fail). */
static int one_attempt(llm_client *c, const char *body, chat_reply *reply, llm_call *call,
                       double *retry_after, txbox_error *err)
{
    CURL *h = c->curl;
    const llm_cfg *cfg = &c->cfg;
    attempt a = {.c = c, .reply = reply};
    c->errbuf[0] = 0;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, cfg->url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "txbox-agent/" TXBOX_VERSION);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(cfg->connect_timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(cfg->timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)ceil(cfg->idle_timeout_s));
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &a);
    uint64_t t0 = now_ns();
    CURLcode rc = curl_easy_perform(h);
    if (!a.started && rc == CURLE_OK)
        start(&a);
    call->attempts++;
    call->sent_bytes += strlen(body);
    call->received_bytes += a.bytes;
    call->status = a.status;
    call->streamed = a.sse_mode;
    curl_off_t ra = 0;
    curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &ra);
    *retry_after = ra > 0 ? (double)ra : 0;

    int res = A_FAIL;
    if (rc == CURLE_ABORTED_BY_CALLBACK) {
        call->fail = LLM_CANCELLED;
        tx_err(err, EINTR, "interrupted while waiting for the model");
    } else if (rc == CURLE_WRITE_ERROR && a.sink_failed) {
        call->fail = LLM_BAD_REPLY;
        *err = a.err;
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        res = A_RETRY;
        tx_err(err, ETIMEDOUT, "no complete reply from %s within the time limit (%s)", cfg->url,
               c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc));
    } else if (rc != CURLE_OK) {
        res = transient_curl(rc) ? A_RETRY : A_FAIL;
        call->fail = LLM_SETUP;
        tx_err(err, EIO, "request to %s failed: %s", cfg->url,
               c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc));
    } else if (a.status == 200) {
        if (a.sse_mode) {
            if (chat_stream_end(reply, err) == 0)
                res = A_DONE;
        } else if (!strncasecmp(a.ctype, "text/html", 9)) {
            tx_err(err, EPROTO,
                   "the endpoint is not OpenAI-compatible: it answered %s with an "
                   "HTML page (Content-Type %s)",
                   cfg->url, a.ctype);
        } else if (a.body.len == 0) {
            tx_err(err, EPROTO,
                   "the endpoint answered with an empty body: not an "
                   "OpenAI-compatible chat completion");
        } else if (chat_parse_response(dbuf_str(&a.body), a.body.len, reply, err) == 0) {
            res = A_DONE;
        }
        if (res != A_DONE)
            call->fail = LLM_BAD_REPLY;
    } else {
        char msg[240];
        chat_error_text(dbuf_str(&a.body), a.body.len, msg, sizeof msg);
        if (a.status == 429 || (a.status >= 500 && a.status != 501)) {
            res = A_RETRY;
            tx_err(err, EAGAIN, "HTTP %ld from the endpoint: %s", a.status, msg);
        } else if (a.status >= 300 && a.status < 400) {
            char *loc = NULL;
            curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &loc);
            call->fail = LLM_REJECTED;
            tx_err(err, EPROTO, "the endpoint redirects (HTTP %ld to %s); give the final URL", a.status,
                   loc ? loc : "?");
        } else if (a.status == 404 || a.status == 405) {
            call->fail = LLM_REJECTED;
            tx_err(err, EPROTO,
                   "HTTP %ld from %s: no OpenAI-compatible chat completions API there "
                   "(the endpoint is usually the server's base URL or .../v1): %s",
                   a.status, cfg->url, msg);
        } else if (a.status == 401 || a.status == 403) {
            call->fail = LLM_REJECTED;
            tx_err(err, EACCES, "HTTP %ld: the endpoint refused the request%s: %s", a.status,
                   cfg->api_key ? " (check the key named by --api-key-env)"
                                : " (does it need a key? see --api-key-env)",
                   msg);
        } else {
            call->fail = LLM_REJECTED;
            tx_err(err, EPROTO, "HTTP %ld: the endpoint rejected the request: %s", a.status, msg);
        }
    }
    json_t *entry = json_pack("{s:i,s:I,s:I,s:f}", "attempt", call->attempts, "status", (json_int_t)a.status,
                              "bytes", (json_int_t)a.bytes, "ms", round(ms_since(t0)));
    if (res != A_DONE)
        json_object_set_new(entry, "error", json_string(err->msg));
    if (a.sse_mode)
        json_object_set_new(entry, "stream", json_true());
    json_array_append_new(call->log, entry);
    if (a.sse_mode)
        sse_free(&a.sse);
    dbuf_free(&a.body);
    return res;
}

int llm_complete(llm_client *c, const char *body, chat_reply *reply, llm_call *call, txbox_error *err)
{
    memset(call, 0, sizeof *call);
    call->log = json_array();
    const llm_cfg *cfg = &c->cfg;
    double delay = cfg->retry_delay_s;
    for (int i = 0;; i++) {
        chat_reply_init(reply, cfg->content_cap, cfg->args_cap);
        double retry_after = 0;
        call->fail = LLM_OK;
        int r = one_attempt(c, body, reply, call, &retry_after, err);
        if (r == A_DONE)
            return 0;
        if (r == A_FAIL)
            return -1;
        if (i >= cfg->retries || (cfg->cancel && *cfg->cancel)) {
            call->fail = cfg->cancel && *cfg->cancel ? LLM_CANCELLED : LLM_UNAVAILABLE;
            if (cfg->retries)
                tx_err_ctx(err, "gave up after %d attempts", i + 1);
            return -1;
        }
        chat_reply_free(reply);
        double d = delay;
        if (retry_after > d)
            d = retry_after;
        if (d > 60)
            d = 60;
        json_t *last = json_array_get(call->log, json_array_size(call->log) - 1);
        json_object_set_new(last, "wait_ms", json_real(round(d * 1000)));
        if (retry_after > 0)
            json_object_set_new(last, "retry_after_s", json_real(retry_after));
        nap(d, cfg->cancel);
        delay = delay * 2 > 30 ? 30 : delay * 2;
    }
}
