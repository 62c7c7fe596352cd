/* The network allowlist's host patterns (see hostpat.h): checked when a
 * policy loads (policy/rules.c) and a run starts (run.c), matched by the
 * proxy (netproxy.c) for every request. Pure: no state, no I/O. */
#include "hostpat.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

bool np_host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

bool np_pattern_valid(const char *p)
{
    struct in6_addr a6;
    struct in_addr a4;
    if (inet_pton(AF_INET, p, &a4) == 1 || inet_pton(AF_INET6, p, &a6) == 1)
        return true;
    const char *name = strncmp(p, "*.", 2) ? p : p + 2;
    size_t n = strlen(name);
    if (n == 0 || n > 253 || name[0] == '.' || name[n - 1] == '.' || strstr(name, ".."))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (c >= 'A' && c <= 'Z')
            return false; /* written lower-case: the host is compared as it is normalised */
        if (!np_host_char(c))
            return false;
    }
    /* "*.org" would allow a whole top-level domain */
    return name == p || strchr(name, '.') != NULL;
}

/* An IP address literal as 16 bytes (IPv4 mapped into IPv6), so that two
 * spellings of one address compare equal. */
static bool ip_bytes(const char *s, struct in6_addr *out)
{
    struct in_addr a4;
    if (inet_pton(AF_INET6, s, out) == 1)
        return true;
    if (inet_pton(AF_INET, s, &a4) != 1)
        return false;
    memset(out, 0, sizeof *out);
    out->s6_addr[10] = out->s6_addr[11] = 0xff;
    memcpy(out->s6_addr + 12, &a4, 4);
    return true;
}

bool np_domain_allowed(const char *const *patterns, size_t n, const char *host)
{
    size_t hl = strlen(host);
    struct in6_addr h6, p6;
    bool host_ip = ip_bytes(host, &h6);
    for (size_t i = 0; i < n; i++) {
        const char *p = patterns[i];
        if (!strncmp(p, "*.", 2)) {
            size_t sl = strlen(p + 1); /* ".npmjs.org" */
            if (!host_ip && hl > sl && !strcmp(host + hl - sl, p + 1))
                return true;
        } else if (host_ip ? ip_bytes(p, &p6) && !memcmp(&h6, &p6, sizeof h6) : !strcmp(p, host)) {
            return true;
        }
    }
    return false;
}
