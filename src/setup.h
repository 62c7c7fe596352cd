/* txbox setup: the pieces of cmd_setup.c that tests reach on their own. */
#ifndef TXBOX_SETUP_H
#define TXBOX_SETUP_H

#include <stddef.h>

#include "util.h"

/* The comment line written above our table in config.toml. */
#define SETUP_TOML_MARKER "# txbox: written by 'txbox setup codex'"

/* Takes every [mcp_servers.txbox] table (with its sub-tables and the
 * marker comment above it) out of the TOML text in[0..len) and, when block
 * is not NULL, appends block. *out (NUL-terminated, *outlen bytes) is the
 * caller's to free. Fails (nothing in *out) on text it cannot lex, or when
 * mcp_servers.txbox is defined in another form. */
MUST_CHECK int setup_toml_edit(const char *in, size_t len, const char *block, char **out, size_t *outlen,
                               txbox_error *err);
/* s as a TOML basic string, quotes included. */
void setup_toml_string(dbuf *b, const char *s);

#endif
