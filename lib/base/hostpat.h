/* Host patterns of the network allowlist: a policy's `domains:`, `txbox run
 * --allow-domain`, the proxy's checks. Base work: knows nothing of the
 * proxy or of policies. See hostpat.c. */
#ifndef TXBOX_HOSTPAT_H
#define TXBOX_HOSTPAT_H

#include <stdbool.h>
#include <stddef.h>

/* Is `pattern` a valid allowlist entry: a host name ("registry.npmjs.org"),
 * "*." and a name of at least two labels ("*.npmjs.org": its subdomains),
 * or an IP address? */
bool np_pattern_valid(const char *pattern);
/* Does host (normalised, as np_parse_request leaves it) match a pattern? */
bool np_domain_allowed(const char *const *patterns, size_t n, const char *host);
/* May c appear in a normalised host name (lower-case letters, digits, '-',
 * '.', '_')? */
bool np_host_char(char c);

#endif
