/* libFuzzer target for the HTTP transport's reading of a request's head
 * (src/mcp/httpgate.c): which headers are noted, and the verdict on
 * method, path, token, Origin, session id, protocol version, media types
 * and Last-Event-ID; and each helper on its own. Replayed over
 * tests/fuzz/corpus/httpgate by the meson test fuzz-httpgate-replay
 * (tests/mcp/meson.build).
 *
 * Input: a request head as text: the method, a space, the path, then
 * header lines "Name: value" (LF or CRLF). Byte 0's low bit says whether
 * /mcp serves a workspace. The server's side is fixed: one token, one
 * allowed Origin, the workspaces "one" and "two". Invariants, checked with
 * abort():
 *   - the status is one the gate documents, with a reason; 401 carries a
 *     challenge, 204 only for an allowed Origin's OPTIONS;
 *   - a request that goes on carries exactly the token (checked here with
 *     memcmp), a method of POST, GET or DELETE and a path that names a
 *     workspace; a GET also a Last-Event-ID that reads back the same, and
 *     a GET or DELETE a session id;
 *   - the helpers agree with themselves: an event id prints back as read,
 *     HOST:PORT's host fits and holds no blank, a cleaned token is a
 *     token a header can carry. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "httpgate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TOKEN "fuzz-token-0123456789_abcdef"
#define MAX_HEADERS 32

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2024-11-05", NULL};
static const char *const origins[] = {"https://ok.example"};
static const char *const names[] = {"one", "two"};

static void check_helpers(const char *value)
{
    unsigned stream;
    uint32_t seq;
    if (http_event_id(value, &stream, &seq)) {
        char back[32];
        snprintf(back, sizeof back, "%u-%u", stream, seq);
        if (strcmp(back, value))
            abort();
    }
    char host[64];
    uint16_t port;
    if (http_hostport(value, host, sizeof host, &port)) {
        size_t n = strlen(host);
        if (!n || n >= sizeof host || strchr(host, ' ') || strchr(host, '\n'))
            abort();
    }
    size_t len = strlen(value);
    char *copy = malloc(len + 1);
    if (!copy)
        return;
    memcpy(copy, value, len + 1);
    if (http_token_clean(copy, &len)) {
        char authz[HTTP_TOKEN_MAX + 16];
        snprintf(authz, sizeof authz, "Bearer %s", copy);
        const char *tok;
        size_t tl;
        if (len < HTTP_TOKEN_MIN || len > HTTP_TOKEN_MAX || strlen(copy) != len ||
            http_bearer(authz, &tok, &tl) < 0 || tl != len || memcmp(tok, copy, len) ||
            !http_token_equal(copy, len, tok, tl))
            abort();
    }
    free(copy);
    (void)http_accepts(value, "text/event-stream");
    (void)http_name_ok(value, strlen(value));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    bool has_default = data[0] & 1;
    char *buf = malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0; /* a NUL inside cuts the text there, as MHD's strings would */
    /* the request line: METHOD PATH */
    char *line = buf, *nl = strchr(line, '\n');
    if (nl)
        *nl = 0;
    char *sp = strchr(line, ' ');
    const char *method = line, *url = "";
    if (sp) {
        *sp = 0;
        url = sp + 1;
    }
    size_t ul = strlen(url);
    if (ul && url[ul - 1] == '\r')
        ((char *)url)[ul - 1] = 0;
    http_head h = {0};
    char *p = nl ? nl + 1 : NULL;
    for (int k = 0; p && *p && k < MAX_HEADERS; k++) {
        char *e = strchr(p, '\n');
        if (e)
            *e = 0;
        size_t l = strlen(p);
        if (l && p[l - 1] == '\r')
            p[l - 1] = 0;
        char *colon = strchr(p, ':');
        if (colon) {
            *colon = 0;
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            http_head_note(&h, p, v);
            check_helpers(v);
        }
        p = e ? e + 1 : NULL;
    }
    http_gate_cfg cfg = {.token = TOKEN,
                         .token_len = strlen(TOKEN),
                         .origins = origins,
                         .norigins = 1,
                         .names = names,
                         .nnames = 2,
                         .has_default = has_default,
                         .versions = versions};
    http_verdict v;
    http_gate(&cfg, method, url, &h, &v);
    switch (v.status) {
    case 0:
    case 204:
    case 400:
    case 401:
    case 403:
    case 404:
    case 405:
    case 406:
    case 415:
        break;
    default:
        abort();
    }
    if (v.status && !v.why)
        abort();
    if (v.status == 401 && !v.www_authenticate)
        abort();
    if (v.status == 204 && (v.method != HM_OPTIONS || !h.origin || strcasecmp(h.origin, origins[0])))
        abort();
    if (v.status == 0) {
        /* the token, exactly */
        if (!h.authz || strncasecmp(h.authz, "Bearer", 6))
            abort();
        const char *t = h.authz + 6;
        while (*t == ' ' || *t == '\t')
            t++;
        size_t tl = strlen(t);
        while (tl && (t[tl - 1] == ' ' || t[tl - 1] == '\t'))
            tl--;
        if (tl != strlen(TOKEN) || memcmp(t, TOKEN, tl))
            abort();
        if (v.method != HM_POST && v.method != HM_GET && v.method != HM_DELETE)
            abort();
        bool routed = (v.ws == -1 && has_default && !strcmp(url, "/mcp")) ||
                      (v.ws >= 0 && v.ws < 2 && !strncmp(url, "/mcp/", 5) && !strcmp(url + 5, names[v.ws]));
        if (!routed)
            abort();
        if (v.method == HM_GET) {
            char back[32];
            snprintf(back, sizeof back, "%u-%u", v.stream, v.seq);
            if (!h.last_event || strcmp(back, h.last_event))
                abort();
        }
        if ((v.method == HM_GET || v.method == HM_DELETE) && !h.session)
            abort();
        if (h.origin && strcasecmp(h.origin, origins[0]))
            abort();
    }
    free(buf);
    return 0;
}
