/* The transaction's network proxy: the only way out of a sandbox that was
 * granted network. See netproxy.c. */
#ifndef TXBOX_NETPROXY_H
#define TXBOX_NETPROXY_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "hostpat.h"
#include "util.h"

/* The port the proxy listens on inside the sandbox's own network namespace
 * (127.0.0.1): the namespace is the command's alone, so the port is free. */
#define NP_PORT 3128
#define NP_PORT_STR "3128"
#define NP_HEAD_MAX 16384  /* bytes of a request's line and headers */
#define NP_MAX_CONNS 64    /* connections served at once */
#define NP_MAX_DOMAINS 256 /* entries in the allowlist, and in each report list */

/* One parsed request head. host is lower-case, without brackets or a
 * trailing dot; path is the origin-form target (plain HTTP only). */
struct np_req {
    bool connect; /* CONNECT host:port (a tunnel), else plain HTTP */
    char method[16];
    char host[256];
    unsigned port;
    char path[NP_HEAD_MAX];
    char version[9]; /* "HTTP/1.1" */
    size_t head_len; /* bytes of the head, the empty line included */
};

/* Parse the head at buf[0..len): > 0 when complete (the head's length),
 * 0 when more bytes are needed (and len < NP_HEAD_MAX), -1 when malformed
 * or too long (why: a short reason). Pure: the fuzz target's entry. */
int np_parse_request(const char *buf, size_t len, struct np_req *out, const char **why);

/* Is this address one the proxy may connect to: not loopback, link-local,
 * private, shared, multicast, reserved or unspecified (IPv4, IPv6, and
 * IPv4 mapped into IPv6)? */
struct sockaddr;
bool np_addr_public(const struct sockaddr *sa);

/* The domains allowed by default: the package registries and source hosts
 * the built-in policy's network rules name (NULL-terminated). */
extern const char *const np_default_domains[];

struct np_config {
    const char *const *allow; /* patterns (np_pattern_valid) */
    size_t n_allow;
    /* added to a refusal of a host not allowed, "{host}" standing for its
     * name (the caller's words for how to allow it); NULL: none */
    const char *refusal_words;
    /* test builds only (TXBOX_TEST_RESOLVE, see netproxy.c): "name=ip,..."
     * resolves name to ip, loopback included; NULL: none */
    const char *test_resolve;
};

struct netproxy;
/* Serve the proxy on listen_fd (a listening TCP socket; taken, whatever
 * happens) from threads of this process: connections are accepted where the
 * socket was made (the sandbox's namespace) and made from this process's
 * namespace. cfg is copied. */
MUST_CHECK int np_start(int listen_fd, const struct np_config *cfg, struct netproxy **out, txbox_error *err);
/* Stop serving: the listener is closed and every connection ended. Returns
 * {"mode": "proxy", "allowed": [...], "contacted": [...], "refused": [...]}
 * (caller owns) and frees the proxy (NULL: nothing, returns NULL). */
json_t *np_stop(struct netproxy *np);

#endif
