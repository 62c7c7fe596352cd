/* Reading a request's head for the HTTP transport: see httpgate.h. */
#include "httpgate.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define HDR_AUTHZ "authorization"

void http_head_note(http_head *h, const char *name, const char *value)
{
    static const char *const known[] = {
        HDR_AUTHZ,
        "origin",
        "accept",
        "content-type",
        "content-length",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
    };
    const char **slots[] = {
        &h->authz, &h->origin, &h->accept, &h->ctype, &h->clen, &h->session, &h->proto, &h->last_event,
    };
    _Static_assert(sizeof known / sizeof known[0] == sizeof slots / sizeof slots[0],
                   "one slot per known header");
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcasecmp(name, known[i]))
            continue;
        const char **slot = slots[i];
        if (*slot)
            h->dup = true; /* which copy would a proxy have checked? */
        else
            *slot = value;
        return;
    }
}

static bool is_ows(char c) { return c == ' ' || c == '\t'; }

/* The media type of one element of a list, its bounds in [*b, *e), and
 * whether its parameters hold q=0 (not acceptable). */
static bool accept_elem(const char *s, const char *end, const char **b, const char **e)
{
    while (s < end && is_ows(*s))
        s++;
    const char *semi = s < end ? memchr(s, ';', (size_t)(end - s)) : NULL;
    const char *te = semi ? semi : end;
    while (te > s && is_ows(te[-1]))
        te--;
    *b = s;
    *e = te;
    for (const char *p = semi; p && p < end;) {
        p++;
        while (p < end && is_ows(*p))
            p++;
        if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
            const char *v = p + 2;
            bool zero = v < end && *v == '0';
            for (v++; zero && v < end && *v != ';' && !is_ows(*v); v++)
                zero = *v == '0' || *v == '.';
            if (zero)
                return false;
        }
        p = p < end ? memchr(p, ';', (size_t)(end - p)) : NULL;
    }
    return true;
}

bool http_accepts(const char *accept, const char *type)
{
    if (!accept)
        return true;
    const char *slash = strchr(type, '/');
    size_t major = slash ? (size_t)(slash - type) : strlen(type);
    const char *s = accept;
    for (;;) {
        const char *comma = strchr(s, ',');
        const char *end = comma ? comma : s + strlen(s);
        const char *b, *e;
        if (accept_elem(s, end, &b, &e)) {
            size_t n = (size_t)(e - b);
            if ((n == 3 && !memcmp(b, "*/*", 3)) || (n == strlen(type) && !strncasecmp(b, type, n)) ||
                (n == major + 2 && !strncasecmp(b, type, major + 1) && b[major + 1] == '*'))
                return true;
        }
        if (!comma)
            return false;
        s = comma + 1;
    }
}

static bool token68_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

/* token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" */
static bool token68(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && token68_char((unsigned char)s[i]))
        i++;
    if (!i)
        return false;
    while (i < n && s[i] == '=')
        i++;
    return i == n;
}

int http_bearer(const char *authz, const char **tok, size_t *len)
{
    if (!authz || strncasecmp(authz, "Bearer", 6) || !is_ows(authz[6]))
        return -1;
    const char *t = authz + 6;
    while (is_ows(*t))
        t++;
    size_t n = strlen(t);
    while (n && is_ows(t[n - 1]))
        n--;
    if (!token68(t, n))
        return -1;
    *tok = t;
    *len = n;
    return 0;
}

bool http_token_equal(const char *want, size_t wlen, const char *got, size_t glen)
{
    if (!want || !wlen)
        return false;
    volatile unsigned char d = wlen != glen;
    for (size_t i = 0; i < glen; i++)
        d |= (unsigned char)(got[i] ^ want[i < wlen ? i : 0]);
    return d == 0;
}

bool http_token_clean(char *buf, size_t *len)
{
    size_t b = 0, e = *len;
    while (b < e && (is_ows(buf[b]) || buf[b] == '\n' || buf[b] == '\r'))
        b++;
    while (e > b && (is_ows(buf[e - 1]) || buf[e - 1] == '\n' || buf[e - 1] == '\r'))
        e--;
    memmove(buf, buf + b, e - b);
    *len = e - b;
    buf[*len] = 0;
    return *len >= HTTP_TOKEN_MIN && *len <= HTTP_TOKEN_MAX && token68(buf, *len);
}

static bool decimal(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    if (!n || n > 10 || (n > 1 && s[0] == '0'))
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

bool http_event_id(const char *s, unsigned *stream, uint32_t *seq)
{
    const char *dash = strchr(s, '-');
    uint64_t a, b;
    if (!dash || !decimal(s, (size_t)(dash - s), UINT32_MAX, &a) ||
        !decimal(dash + 1, strlen(dash + 1), UINT32_MAX, &b))
        return false;
    *stream = (unsigned)a;
    *seq = (uint32_t)b;
    return true;
}

bool http_name_ok(const char *s, size_t len)
{
    if (!len || len > HTTP_NAME_MAX || s[0] == '.')
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

bool http_hostport(const char *s, char *host, size_t cap, uint16_t *port)
{
    const char *colon;
    const char *hb = s, *he;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':')
            return false;
        hb = s + 1;
        he = rb;
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || memchr(s, ':', (size_t)(colon - s)))
            return false; /* a bare IPv6 address wants brackets */
        he = colon;
    }
    uint64_t p;
    if (he == hb || (size_t)(he - hb) >= cap || !decimal(colon + 1, strlen(colon + 1), 65535, &p))
        return false;
    for (const char *c = hb; c < he; c++)
        if ((unsigned char)*c <= ' ' || *c == '/' || *c == '[' || *c == ']' || (unsigned char)*c >= 0x7f)
            return false;
    memcpy(host, hb, (size_t)(he - hb));
    host[he - hb] = 0;
    *port = (uint16_t)p;
    return true;
}

static bool visible_ascii(const char *s, size_t max)
{
    size_t n = 0;
    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x21 || (unsigned char)s[n] > 0x7e || n >= max)
            return false;
    return n > 0;
}

/* application/json, with parameters or not */
static bool is_json_type(const char *ct)
{
    if (!ct)
        return false;
    while (is_ows(*ct))
        ct++;
    if (strncasecmp(ct, "application/json", 16))
        return false;
    const char *p = ct + 16;
    while (is_ows(*p))
        p++;
    return !*p || *p == ';';
}

static void refuse(http_verdict *v, int status, const char *why)
{
    v->status = status;
    v->why = why;
}

/* /mcp or /mcp/NAME: the workspace's index (-1: the default); false when
 * the path names none. */
static bool route(const http_gate_cfg *cfg, const char *url, int *ws)
{
    if (strncmp(url, "/mcp", 4))
        return false;
    if (!url[4]) {
        *ws = -1;
        return cfg->has_default;
    }
    if (url[4] != '/')
        return false;
    const char *name = url + 5;
    for (size_t i = 0; i < cfg->nnames; i++)
        if (!strcmp(name, cfg->names[i])) {
            *ws = (int)i;
            return true;
        }
    return false;
}

void http_gate(const http_gate_cfg *cfg, const char *method, const char *url, const http_head *h,
               http_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->ws = -1;
    v->method = !strcmp(method, "POST")      ? HM_POST
                : !strcmp(method, "GET")     ? HM_GET
                : !strcmp(method, "DELETE")  ? HM_DELETE
                : !strcmp(method, "OPTIONS") ? HM_OPTIONS
                                             : HM_OTHER;
    if (h->dup)
        return refuse(v, 400, "a header the server reads was given twice");
    if (h->origin) {
        bool ok = false;
        for (size_t i = 0; i < cfg->norigins && !ok; i++)
            ok = !strcasecmp(h->origin, cfg->origins[i]);
        if (!ok)
            return refuse(v, 403, "Origin not allowed (--allow-origin)");
        v->cors = true;
        if (v->method == HM_OPTIONS)
            return refuse(v, 204, "preflight");
    }
    const char *tok;
    size_t tlen;
    if (!h->authz) {
        v->www_authenticate = "Bearer realm=\"txbox\"";
        return refuse(v, 401, "no bearer token");
    }
    if (http_bearer(h->authz, &tok, &tlen) < 0 || !http_token_equal(cfg->token, cfg->token_len, tok, tlen)) {
        v->www_authenticate = "Bearer realm=\"txbox\", error=\"invalid_token\"";
        return refuse(v, 401, "wrong bearer token");
    }
    if (!route(cfg, url, &v->ws))
        return refuse(v, 404, "no workspace at this path");
    if (v->method != HM_POST && v->method != HM_GET && v->method != HM_DELETE)
        return refuse(v, 405, "method not allowed");
    if (h->proto) {
        bool ok = false;
        for (size_t i = 0; cfg->versions && cfg->versions[i] && !ok; i++)
            ok = !strcmp(h->proto, cfg->versions[i]);
        if (!ok)
            return refuse(v, 400, "unsupported MCP-Protocol-Version");
    }
    if (h->session && !visible_ascii(h->session, HTTP_SESSION_ID_MAX))
        return refuse(v, 400, "malformed Mcp-Session-Id");
    v->json = http_accepts(h->accept, "application/json");
    v->sse = http_accepts(h->accept, "text/event-stream");
    if (v->method == HM_POST) {
        if (!is_json_type(h->ctype))
            return refuse(v, 415, "Content-Type must be application/json");
        if (!v->json && !v->sse)
            return refuse(v, 406, "Accept must admit application/json or text/event-stream");
        return;
    }
    if (v->method == HM_GET) {
        if (!v->sse)
            return refuse(v, 406, "Accept must admit text/event-stream");
        if (!h->last_event)
            return refuse(v, 405, "no server stream: GET only resumes a stream (Last-Event-ID)");
        if (!http_event_id(h->last_event, &v->stream, &v->seq))
            return refuse(v, 400, "malformed Last-Event-ID");
    }
    if (!h->session)
        return refuse(v, 400, "Mcp-Session-Id required");
}
