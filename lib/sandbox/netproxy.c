/* The transaction's network proxy.
 *
 * A command granted network (by a rule, or --net) still runs in a network
 * namespace of its own, where only loopback exists. Its one way out is this
 * proxy: init makes a listening socket on 127.0.0.1:NP_PORT inside that
 * namespace (sandbox.c), and txbox serves it from threads of its own, in the
 * host's namespace: it accepts inside the sandbox and connects from outside.
 * No socket file and no port on the host; nothing else leaves the
 * namespace, so the host's loopback services and abstract unix sockets stay
 * out of reach.
 *
 *   command ──HTTP_PROXY──▶ 127.0.0.1:3128 (sandbox's netns) ══ fd ══▶ txbox thread ──▶ allowed host
 *
 * It speaks what package managers speak through HTTP(S)_PROXY: CONNECT
 * host:port (a tunnel; TLS stays end to end) and plain HTTP with an
 * absolute URI (one request per connection: "Connection: close" is sent on).
 * For each request:
 *   1. the head is read under caps (NP_HEAD_MAX bytes, HEAD_TIMEOUT_S);
 *   2. the host must match the allowlist (np_domain_allowed), else 403 with
 *      a text body naming the host and how to allow it;
 *   3. the name is resolved and every address checked (np_addr_public): one
 *      loopback, link-local or private address refuses the host, so a name
 *      cannot lead to the host's own services;
 *   4. the connection is made to a checked address (the sockaddr that was
 *      checked, never the name again: no rebinding between check and
 *      connect);
 *   5. bytes are relayed both ways through two fixed buffers until either
 *      side ends or IDLE_TIMEOUT_S passes without traffic.
 * At most NP_MAX_CONNS connections are served at once; the rest get 503.
 * Hosts contacted and refused are kept (NP_MAX_DOMAINS each) for the
 * transaction's audit record.
 *
 * Why our own and not Debian's tinyproxy: tinyproxy listens on a host port
 * (it cannot serve a socket made in another namespace), filters by name
 * only, and connects wherever the name resolves (the host's 127.0.0.1
 * included), with nothing per transaction to report. What is needed here is
 * small: a head parser (fuzzed: tests/fuzz/fuzz_proxy_request.c) and a
 * relay. */
#include "netproxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>

#define HEAD_TIMEOUT_S 30
#define CONNECT_TIMEOUT_S 30
#define IDLE_TIMEOUT_S 300
#define RELAY_BUF 16384

const char *const np_default_domains[] = {
    /* npm, pnpm, yarn, bun, npx */
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "repo.yarnpkg.com",
    /* pip, uv, poetry, pipenv, pdm, hatch, rye, pipx */
    "pypi.org",
    "files.pythonhosted.org",
    /* conda, mamba */
    "conda.anaconda.org",
    "repo.anaconda.com",
    /* cargo, rustup */
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "static.rust-lang.org",
    /* go */
    "proxy.golang.org",
    "sum.golang.org",
    /* mvn, gradle, sbt */
    "repo.maven.apache.org",
    "repo1.maven.org",
    "services.gradle.org",
    "plugins.gradle.org",
    /* dotnet */
    "api.nuget.org",
    /* bundle, gem */
    "rubygems.org",
    "index.rubygems.org",
    /* composer, mix, cabal, stack, opam, deno, swift */
    "repo.packagist.org",
    "repo.hex.pm",
    "hackage.haskell.org",
    "opam.ocaml.org",
    "deno.land",
    "jsr.io",
    /* git remotes and the archives the package managers fetch from them */
    "github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
    "gitlab.com",
    NULL,
};

/* ---- parsing (pure) ---- */

/* Host and port of an authority "host:port", "host" or "[v6]:port" into
 * out (lower-case, no brackets, no trailing dot). -1 when malformed. */
static int parse_authority(const char *a, size_t n, unsigned defport, struct np_req *out)
{
    const char *h = a, *he, *p = NULL;
    if (n && a[0] == '[') {
        const char *rb = memchr(a, ']', n);
        if (!rb)
            return -1;
        h = a + 1;
        he = rb;
        if (rb + 1 < a + n) {
            if (rb[1] != ':')
                return -1;
            p = rb + 2;
        }
        size_t hl = (size_t)(he - h);
        char tmp[64];
        struct in6_addr a6;
        if (hl == 0 || hl >= sizeof tmp)
            return -1;
        memcpy(tmp, h, hl);
        tmp[hl] = 0;
        if (inet_pton(AF_INET6, tmp, &a6) != 1)
            return -1;
    } else {
        const char *c = memchr(a, ':', n);
        he = c ? c : a + n;
        if (c)
            p = c + 1;
    }
    size_t hl = (size_t)(he - h);
    while (hl && h[hl - 1] == '.' && a[0] != '[')
        hl--;
    if (hl == 0 || hl >= sizeof out->host)
        return -1;
    for (size_t i = 0; i < hl; i++) {
        char c = h[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (!np_host_char(c) && !(a[0] == '[' && (c == ':' || (c >= 'a' && c <= 'f'))))
            return -1;
        out->host[i] = c;
    }
    out->host[hl] = 0;
    if (strstr(out->host, "..") || out->host[0] == '.')
        return -1;
    if (!p) {
        if (!defport)
            return -1;
        out->port = defport;
        return 0;
    }
    const char *pe = a + n;
    if (p == pe || pe - p > 5)
        return -1;
    unsigned v = 0;
    for (; p < pe; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (unsigned)(*p - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    out->port = v;
    return 0;
}

int np_parse_request(const char *buf, size_t len, struct np_req *out, const char **why)
{
    *why = "malformed request";
    const char *end = NULL;
    size_t scan = len < NP_HEAD_MAX ? len : NP_HEAD_MAX;
    for (size_t i = 0; i + 3 < scan; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') {
            end = buf + i + 4;
            break;
        }
    if (!end) {
        if (len >= NP_HEAD_MAX) {
            *why = "request head too large";
            return -1;
        }
        /* a request line that cannot be one fails early */
        for (size_t i = 0; i < scan; i++)
            if (buf[i] == 0)
                return -1;
        return 0;
    }
    memset(out, 0, sizeof *out);
    out->head_len = (size_t)(end - buf);
    const char *le = memchr(buf, '\r', out->head_len);
    if (!le || le[1] != '\n')
        return -1;
    /* METHOD SP TARGET SP HTTP/1.x */
    const char *sp1 = memchr(buf, ' ', (size_t)(le - buf));
    if (!sp1 || sp1 == buf || (size_t)(sp1 - buf) >= sizeof out->method)
        return -1;
    const char *t = sp1 + 1;
    const char *sp2 = memchr(t, ' ', (size_t)(le - t));
    if (!sp2 || sp2 == t)
        return -1;
    size_t vl = (size_t)(le - sp2 - 1);
    if (vl != 8 || (memcmp(sp2 + 1, "HTTP/1.1", 8) && memcmp(sp2 + 1, "HTTP/1.0", 8)))
        return -1;
    memcpy(out->version, sp2 + 1, 8);
    for (const char *c = buf; c < sp1; c++)
        if (*c < 'A' || *c > 'Z')
            return -1;
    memcpy(out->method, buf, (size_t)(sp1 - buf));
    size_t tl = (size_t)(sp2 - t);
    for (size_t i = 0; i < tl; i++)
        if ((unsigned char)t[i] <= ' ' || (unsigned char)t[i] >= 0x7f)
            return -1;
    if (!strcmp(out->method, "CONNECT")) {
        out->connect = true;
        if (parse_authority(t, tl, 0, out) < 0) {
            *why = "CONNECT needs host:port";
            return -1;
        }
        return (int)out->head_len;
    }
    static const char http[] = "http://";
    if (tl < sizeof http - 1 || strncasecmp(t, http, sizeof http - 1)) {
        *why = "a proxy request needs an absolute http:// URI (https goes through CONNECT)";
        return -1;
    }
    const char *auth = t + sizeof http - 1, *te = t + tl;
    const char *slash = auth;
    while (slash < te && *slash != '/' && *slash != '?' && *slash != '#')
        slash++;
    if (memchr(auth, '@', (size_t)(slash - auth))) {
        *why = "credentials in the URI are not passed on";
        return -1;
    }
    if (parse_authority(auth, (size_t)(slash - auth), 80, out) < 0)
        return -1;
    size_t pl = (size_t)(te - slash);
    if (pl + 2 > sizeof out->path)
        return -1;
    if (pl == 0 || *slash != '/') {
        out->path[0] = '/';
        memcpy(out->path + 1, slash, pl);
    } else {
        memcpy(out->path, slash, pl);
    }
    /* header lines: name ":" value, no bare CR or LF, no NUL */
    for (const char *l = le + 2; l < end - 2;) {
        const char *e = memchr(l, '\r', (size_t)(end - l));
        if (!e || e[1] != '\n' || e == l)
            return -1;
        const char *colon = memchr(l, ':', (size_t)(e - l));
        if (!colon || colon == l)
            return -1;
        for (const char *c = l; c < e; c++)
            if (*c == 0 || *c == '\n' || (c < colon && (*c == ' ' || *c == '\t')))
                return -1;
        l = e + 2;
    }
    return (int)out->head_len;
}

/* ---- allowlist and addresses ---- */

static bool v4_public(uint32_t a)
{
    static const struct {
        uint32_t net, mask;
    } bad[] = {
        {0x00000000, 0xff000000}, /* 0/8 "this network" */
        {0x0a000000, 0xff000000}, /* 10/8 */
        {0x64400000, 0xffc00000}, /* 100.64/10 shared (CGNAT) */
        {0x7f000000, 0xff000000}, /* 127/8 loopback */
        {0xa9fe0000, 0xffff0000}, /* 169.254/16 link-local (cloud metadata) */
        {0xac100000, 0xfff00000}, /* 172.16/12 */
        {0xc0000000, 0xffffff00}, /* 192.0.0/24 */
        {0xc0000200, 0xffffff00}, /* 192.0.2/24 documentation */
        {0xc0a80000, 0xffff0000}, /* 192.168/16 */
        {0xc6120000, 0xfffe0000}, /* 198.18/15 benchmarking */
        {0xc6336400, 0xffffff00}, /* 198.51.100/24 documentation */
        {0xcb007100, 0xffffff00}, /* 203.0.113/24 documentation */
        {0xe0000000, 0xe0000000}, /* 224/4 multicast, 240/4 reserved, broadcast */
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        if ((a & bad[i].mask) == bad[i].net)
            return false;
    return true;
}

bool np_addr_public(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return v4_public(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
    if (sa->sa_family != AF_INET6)
        return false;
    const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    static const uint8_t zero[12];
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
    uint32_t v4 = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
    /* IPv4 inside IPv6: judged as IPv4; ::, ::1 and v4-compatible are not public */
    if (!memcmp(b, mapped, 12) || !memcmp(b, nat64, 12))
        return v4_public(v4);
    if (!memcmp(b, zero, 12))
        return false;
    if ((b[0] & 0xfe) == 0xfc) /* fc00::/7 unique local */
        return false;
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) /* fe80::/10 link-local */
        return false;
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) /* fec0::/10 site-local */
        return false;
    if (b[0] == 0xff) /* multicast */
        return false;
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) /* documentation */
        return false;
    if (b[0] == 0x20 && b[1] == 0x02) /* 6to4: judged by its IPv4 */
        return v4_public((uint32_t)b[2] << 24 | (uint32_t)b[3] << 16 | (uint32_t)b[4] << 8 | b[5]);
    return true;
}

/* ---- the proxy ---- */

struct strset {
    char *v[NP_MAX_DOMAINS];
    size_t n;
    size_t dropped;
};

struct netproxy {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;   /* the owner's, the accept thread's, one per connection */
    int active; /* connection threads running */
    int listen_fd;
    int stop[2]; /* readable once np_stop began */
    pthread_t acceptor;
    bool accepting;
    char **allow;
    size_t n_allow;
    char *test_resolve;
    char *refusal_words; /* np_config's, or NULL */
    struct strset contacted, refused;
};

static void np_unref(struct netproxy *np)
{
    pthread_mutex_lock(&np->mu);
    bool last = --np->refs == 0;
    pthread_mutex_unlock(&np->mu);
    if (!last)
        return;
    for (size_t i = 0; i < np->n_allow; i++)
        free(np->allow[i]);
    free(np->allow);
    free(np->test_resolve);
    free(np->refusal_words);
    for (size_t i = 0; i < np->contacted.n; i++)
        free(np->contacted.v[i]);
    for (size_t i = 0; i < np->refused.n; i++)
        free(np->refused.v[i]);
    close(np->stop[0]);
    close(np->stop[1]);
    pthread_cond_destroy(&np->cv);
    pthread_mutex_destroy(&np->mu);
    free(np);
}

static void note(struct netproxy *np, struct strset *s, const char *host)
{
    pthread_mutex_lock(&np->mu);
    bool seen = false;
    for (size_t i = 0; i < s->n && !seen; i++)
        seen = !strcmp(s->v[i], host);
    if (!seen) {
        if (s->n < NP_MAX_DOMAINS)
            s->v[s->n++] = xstrdup(host);
        else
            s->dropped++;
    }
    pthread_mutex_unlock(&np->mu);
}

/* Wait until fd is ready for `events`, the proxy stops, or timeout_s
 * passes: 1 ready, 0 timeout, -1 stopping or error. */
static int wait_fd(struct netproxy *np, int fd, short events, int timeout_s)
{
    struct pollfd pf[2] = {{.fd = fd, .events = events}, {.fd = np->stop[0], .events = POLLIN}};
    for (;;) {
        int r = poll(pf, 2, timeout_s * 1000);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || pf[1].revents)
            return -1;
        return r > 0 ? 1 : 0;
    }
}

static void send_all_nb(struct netproxy *np, int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(np, fd, POLLOUT, IDLE_TIMEOUT_S) <= 0)
                return;
        } else {
            return;
        }
    }
}

static void reply(struct netproxy *np, int fd, const char *status, const char *body)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\nX-Txbox-Proxy: refused\r\n\r\n",
                     status, strlen(body));
    send_all_nb(np, fd, head, (size_t)n);
    send_all_nb(np, fd, body, strlen(body));
}

static void refuse(struct netproxy *np, int fd, const char *host, const char *why)
{
    note(np, &np->refused, host);
    char body[768];
    snprintf(body, sizeof body, "txbox refused %s: %s\n", host, why);
    reply(np, fd, "403 Forbidden", body);
}

/* words with each "{host}" replaced by host (malloc'd), or NULL for none. */
static char *refusal_words(const char *words, const char *host)
{
    if (!words)
        return NULL;
    dbuf b;
    dbuf_init(&b, 0);
    for (const char *w = words; *w;) {
        const char *at = strstr(w, "{host}");
        size_t n = at ? (size_t)(at - w) : strlen(w);
        dbuf_add(&b, w, n);
        if (!at)
            break;
        dbuf_addstr(&b, host);
        w = at + 6;
    }
    char *s = xstrdup(dbuf_str(&b));
    dbuf_free(&b);
    return s;
}

/* The test builds' name map (TXBOX_TEST_RESOLVE): 1 and *ss filled when
 * host is mapped, 0 when not. */
static int test_resolve(const struct netproxy *np, const char *host, unsigned port,
                        struct sockaddr_storage *ss, socklen_t *sl)
{
    if (!np->test_resolve)
        return 0;
    size_t hl = strlen(host);
    for (const char *e = np->test_resolve; *e;) {
        const char *comma = strchr(e, ',');
        size_t el = comma ? (size_t)(comma - e) : strlen(e);
        const char *eq = memchr(e, '=', el);
        if (eq && (size_t)(eq - e) == hl && !strncmp(e, host, hl)) {
            char ip[64];
            size_t il = el - hl - 1;
            if (il >= sizeof ip)
                return 0;
            memcpy(ip, eq + 1, il);
            ip[il] = 0;
            struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
            memset(ss, 0, sizeof *ss);
            if (inet_pton(AF_INET, ip, &s4->sin_addr) != 1)
                return 0;
            s4->sin_family = AF_INET;
            s4->sin_port = htons((uint16_t)port);
            *sl = sizeof *s4;
            return 1;
        }
        e += el + (comma ? 1 : 0);
    }
    return 0;
}

/* Connect (non-blocking, under CONNECT_TIMEOUT_S) to one address. */
static int connect_to(struct netproxy *np, const struct sockaddr *sa, socklen_t sl)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, sa, sl) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    int e = 0;
    socklen_t el = sizeof e;
    if (wait_fd(np, fd, POLLOUT, CONNECT_TIMEOUT_S) <= 0 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Resolve, check every address, connect to a checked one. The upstream
 * socket, or -1 after a reply to the client. */
static int open_upstream(struct netproxy *np, int cfd, const struct np_req *rq)
{
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    if (test_resolve(np, rq->host, rq->port, &ss, &sl) == 1) {
        int u = connect_to(np, (struct sockaddr *)&ss, sl);
        if (u < 0)
            reply(np, cfd, "502 Bad Gateway", "txbox: the proxy could not connect\n");
        return u;
    }
    /* an address literal is checked as it is, never looked up */
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | (strchr(rq->host, ':') ? AI_NUMERICHOST : 0)};
    struct addrinfo *res = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", rq->port);
    int g = getaddrinfo(rq->host, port, &hints, &res);
    if (g != 0 || !res) {
        char body[512];
        snprintf(body, sizeof body, "txbox: cannot resolve %s: %s\n", rq->host, gai_strerror(g));
        reply(np, cfd, "502 Bad Gateway", body);
        return -1;
    }
    for (struct addrinfo *a = res; a; a = a->ai_next)
        if (!np_addr_public(a->ai_addr)) {
            char ip[INET6_ADDRSTRLEN] = "?", why[256];
            const void *src = a->ai_family == AF_INET
                                  ? (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
                                  : (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
            inet_ntop(a->ai_family, src, ip, sizeof ip);
            snprintf(why, sizeof why,
                     "it resolves to %s, a loopback, link-local or private address, which the "
                     "sandbox never reaches",
                     ip);
            freeaddrinfo(res);
            refuse(np, cfd, rq->host, why);
            return -1;
        }
    int u = -1;
    for (struct addrinfo *a = res; a && u < 0; a = a->ai_next)
        u = connect_to(np, a->ai_addr, a->ai_addrlen); /* the checked address itself */
    freeaddrinfo(res);
    if (u < 0)
        reply(np, cfd, "502 Bad Gateway", "txbox: the proxy could not connect\n");
    return u;
}

/* The plain HTTP request's head as sent on: origin-form target, our Host,
 * no hop-by-hop or proxy headers, "Connection: close". */
static void forward_head(struct netproxy *np, int ufd, const char *buf, const struct np_req *rq)
{
    dbuf b;
    dbuf_init(&b, NP_HEAD_MAX + 512);
    bool v6 = strchr(rq->host, ':') != NULL;
    const char *parts[] = {rq->method,   " ",           rq->path, " ",          rq->version,
                           "\r\nHost: ", v6 ? "[" : "", rq->host, v6 ? "]" : ""};
    for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
        dbuf_addstr(&b, parts[i]);
    char port[16];
    snprintf(port, sizeof port, ":%u", rq->port);
    if (rq->port != 80)
        dbuf_addstr(&b, port);
    dbuf_addstr(&b, "\r\n");
    static const char *const drop[] = {"host",       "connection", "proxy-connection", "proxy-authorization",
                                       "keep-alive", "te",         "upgrade",          "trailer"};
    const char *end = buf + rq->head_len - 2;
    const char *l = (const char *)memchr(buf, '\n', rq->head_len) + 1;
    while (l < end) {
        const char *e = (const char *)memchr(l, '\n', (size_t)(end - l)) + 1;
        const char *colon = memchr(l, ':', (size_t)(e - l));
        bool keep = true;
        for (size_t i = 0; i < ARRAY_SIZE(drop) && keep; i++)
            keep = !((size_t)(colon - l) == strlen(drop[i]) && !strncasecmp(l, drop[i], strlen(drop[i])));
        if (keep)
            dbuf_add(&b, l, (size_t)(e - l));
        l = e;
    }
    dbuf_addstr(&b, "Connection: close\r\n\r\n");
    send_all_nb(np, ufd, b.p, b.len);
    dbuf_free(&b);
}

/* Relay both ways until both ends are done, the proxy stops, or nothing
 * moves for IDLE_TIMEOUT_S. */
static void relay(struct netproxy *np, int a, int b)
{
    char *buf[2] = {xmalloc(RELAY_BUF), xmalloc(RELAY_BUF)};
    size_t len[2] = {0, 0}, off[2] = {0, 0}; /* [0]: a -> b, [1]: b -> a */
    bool eof[2] = {false, false};
    int fd[2] = {a, b};
    for (;;) {
        if (eof[0] && eof[1] && len[0] == off[0] && len[1] == off[1])
            break;
        struct pollfd pf[3];
        for (int i = 0; i < 2; i++)
            pf[i] = (struct pollfd){.fd = fd[i], .events = 0};
        for (int d = 0; d < 2; d++) {
            if (off[d] < len[d])
                pf[1 - d].events |= POLLOUT; /* pending for the other side */
            else if (!eof[d])
                pf[d].events |= POLLIN;
        }
        pf[2] = (struct pollfd){.fd = np->stop[0], .events = POLLIN};
        int r = poll(pf, 3, IDLE_TIMEOUT_S * 1000);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || pf[2].revents)
            break;
        bool broken = false;
        for (int d = 0; d < 2 && !broken; d++) {
            int from = fd[d], to = fd[1 - d];
            if (off[d] == len[d] && !eof[d] && (pf[d].revents & (POLLIN | POLLHUP | POLLERR))) {
                ssize_t n = recv(from, buf[d], RELAY_BUF, 0);
                if (n > 0) {
                    len[d] = (size_t)n;
                    off[d] = 0;
                } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                    eof[d] = true;
                    shutdown(to, SHUT_WR);
                    if (n < 0)
                        broken = true;
                }
            }
            if (off[d] < len[d] && (pf[1 - d].revents & (POLLOUT | POLLHUP | POLLERR))) {
                ssize_t w = send(to, buf[d] + off[d], len[d] - off[d], MSG_NOSIGNAL);
                if (w > 0)
                    off[d] += (size_t)w;
                else if (w < 0 && errno != EAGAIN && errno != EINTR)
                    broken = true;
            }
        }
        if (broken)
            break;
    }
    free(buf[0]);
    free(buf[1]);
}

struct conn {
    struct netproxy *np;
    int fd;
};

static void serve(struct netproxy *np, int cfd)
{
    char *buf = xmalloc(NP_HEAD_MAX);
    size_t len = 0;
    struct np_req *rq = xmalloc(sizeof *rq);
    const char *why = NULL;
    int h = 0;
    uint64_t deadline = now_ns() + (uint64_t)HEAD_TIMEOUT_S * 1000000000ull;
    int ufd = -1;
    while ((h = np_parse_request(buf, len, rq, &why)) == 0) {
        uint64_t now = now_ns();
        if (now >= deadline || wait_fd(np, cfd, POLLIN, (int)((deadline - now) / 1000000000ull) + 1) <= 0)
            goto out;
        ssize_t n = recv(cfd, buf + len, NP_HEAD_MAX - len, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            goto out;
        if (n > 0)
            len += (size_t)n;
    }
    if (h < 0) {
        char body[256];
        snprintf(body, sizeof body, "txbox: the proxy refused a request: %s\n", why);
        reply(np, cfd, "400 Bad Request", body);
        goto out;
    }
    if (!np_domain_allowed((const char *const *)np->allow, np->n_allow, rq->host)) {
        _cleanup_free_ char *words = refusal_words(np->refusal_words, rq->host);
        char body[512];
        snprintf(body, sizeof body, "not in this command's network allowlist%s%.400s%s", words ? " (" : "",
                 words ? words : "", words ? ")" : "");
        refuse(np, cfd, rq->host, body);
        goto out;
    }
    if ((ufd = open_upstream(np, cfd, rq)) < 0)
        goto out;
    note(np, &np->contacted, rq->host);
    if (rq->connect) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        send_all_nb(np, cfd, ok, sizeof ok - 1);
    } else {
        forward_head(np, ufd, buf, rq);
    }
    if (len > rq->head_len) /* what the client sent after the head */
        send_all_nb(np, ufd, buf + rq->head_len, len - rq->head_len);
    free(buf);
    buf = NULL;
    relay(np, cfd, ufd);
out:
    if (ufd >= 0)
        close(ufd);
    free(buf);
    free(rq);
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    struct netproxy *np = c->np;
    serve(np, c->fd);
    close(c->fd);
    free(c);
    pthread_mutex_lock(&np->mu);
    np->active--;
    pthread_cond_broadcast(&np->cv);
    pthread_mutex_unlock(&np->mu);
    np_unref(np);
    return NULL;
}

static void *accept_main(void *arg)
{
    struct netproxy *np = arg;
    for (;;) {
        if (wait_fd(np, np->listen_fd, POLLIN, 3600) < 0)
            break;
        int fd = accept4(np->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&np->mu);
        bool room = np->active < NP_MAX_CONNS;
        if (room) {
            np->active++;
            np->refs++;
        }
        pthread_mutex_unlock(&np->mu);
        if (!room) {
            reply(np, fd, "503 Service Unavailable", "txbox: too many proxy connections at once\n");
            close(fd);
            continue;
        }
        struct conn *c = xmalloc(sizeof *c);
        *c = (struct conn){.np = np, .fd = fd};
        pthread_t th;
        pthread_attr_t at;
        int e = pthread_attr_init(&at);
        if (!e)
            e = pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (!e)
            e = pthread_attr_setstacksize(&at, 256u << 10);
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        if (!e)
            e = pthread_create(&th, &at, conn_main, c);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&at);
        if (e) {
            close(fd);
            free(c);
            pthread_mutex_lock(&np->mu);
            np->active--;
            np->refs--; /* the owner's reference is still held */
            pthread_mutex_unlock(&np->mu);
        }
    }
    return NULL;
}

int np_start(int listen_fd, const struct np_config *cfg, struct netproxy **out, txbox_error *err)
{
    *out = NULL;
    struct netproxy *np = xcalloc(1, sizeof *np);
    np->listen_fd = listen_fd;
    if (pipe2(np->stop, O_CLOEXEC) < 0) {
        int e = errno;
        close(listen_fd);
        free(np);
        return tx_errno(err, e, "network proxy: pipe");
    }
    pthread_mutex_init(&np->mu, NULL);
    pthread_cond_init(&np->cv, NULL);
    np->refs = 1;
    np->allow = xcalloc(cfg->n_allow + 1, sizeof *np->allow);
    for (size_t i = 0; i < cfg->n_allow; i++)
        np->allow[i] = xstrdup(cfg->allow[i]);
    np->n_allow = cfg->n_allow;
    const char *tr = cfg->test_resolve;
#ifdef TXBOX_TEST_HOOKS
    /* Test builds only: "name=ip,..." resolves those names to those IPv4
     * addresses, loopback included (a fake registry on 127.0.0.1); the
     * allowlist still applies, and every other name is checked as always. */
    if (!tr)
        tr = getenv("TXBOX_TEST_RESOLVE");
#endif
    np->test_resolve = tr && *tr ? xstrdup(tr) : NULL;
    np->refusal_words = cfg->refusal_words && *cfg->refusal_words ? xstrdup(cfg->refusal_words) : NULL;
    fcntl(listen_fd, F_SETFL, O_NONBLOCK);
    np->refs++; /* the accept thread's */
    int e = thread_start(&np->acceptor, accept_main, np);
    if (e) {
        np->refs--;
        close(listen_fd);
        np->listen_fd = -1;
        np_unref(np);
        return tx_errno(err, e, "network proxy: cannot start its thread");
    }
    np->accepting = true;
    *out = np;
    return 0;
}

static json_t *set_json(const struct strset *s)
{
    json_t *a = json_array();
    for (size_t i = 0; i < s->n; i++)
        json_array_append_new(a, json_string(s->v[i]));
    return a;
}

json_t *np_stop(struct netproxy *np)
{
    if (!np)
        return NULL;
    (void)!write(np->stop[1], "x", 1); /* every poll of the proxy's wakes */
    if (np->accepting) {
        pthread_join(np->acceptor, NULL);
        np_unref(np);
    }
    close(np->listen_fd);
    /* Connections end at their next poll; one inside getaddrinfo ends on
     * its own later (it holds a reference), unreported. */
    pthread_mutex_lock(&np->mu);
    uint64_t until = now_ns() + 2000000000ull;
    while (np->active > 0 && now_ns() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&np->cv, &np->mu, &ts);
    }
    json_t *o = json_object();
    json_object_set_new(o, "mode", json_string("proxy"));
    json_t *allowed = json_array();
    for (size_t i = 0; i < np->n_allow; i++)
        json_array_append_new(allowed, json_string(np->allow[i]));
    json_object_set_new(o, "allowed", allowed);
    json_object_set_new(o, "contacted", set_json(&np->contacted));
    json_object_set_new(o, "refused", set_json(&np->refused));
    if (np->contacted.dropped || np->refused.dropped)
        json_object_set_new(o, "truncated", json_true());
    pthread_mutex_unlock(&np->mu);
    np_unref(np);
    return o;
}
