/* The minimum TOML edit that `txbox setup codex` needs: find the tables
 * [mcp_servers.txbox] (and its sub-tables) in Codex's config.toml, take
 * them out, and optionally append a fresh one. Debian has no TOML library
 * for C (toml11 and tomlplusplus are C++), so this is a small lexer, not a
 * parser: it knows enough of TOML 1.0 (strings of all four kinds, arrays
 * and inline tables over several lines, comments, quoted and dotted keys,
 * [table] and [[array]] headers) to tell statements apart and to name the
 * table and key of each. Everything else in the file is kept byte for
 * byte. It fails closed: text it cannot lex, or mcp_servers.txbox defined
 * any other way (a dotted key, an inline table, [[mcp_servers]]), is an
 * error and nothing is written. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "setup.h"

#define KEY_MAX 8 /* components of a key path we keep; more are kept as "deeper" */

struct lexer {
    const char *s;
    size_t len, pos;
    int line;
};

/* A key path: up to KEY_MAX components, each a copy (escapes of basic
 * strings are kept raw: "txbox" spelt with escapes is refused later). */
struct keypath {
    char *part[KEY_MAX];
    size_t n;
    bool deeper;
};

static void keypath_free(struct keypath *k)
{
    for (size_t i = 0; i < k->n; i++)
        free(k->part[i]);
    k->n = 0;
    k->deeper = false;
}

static bool at_end(const struct lexer *l) { return l->pos >= l->len; }
static char peek(const struct lexer *l) { return at_end(l) ? '\0' : l->s[l->pos]; }

static void skip_ws(struct lexer *l)
{
    while (!at_end(l) && (peek(l) == ' ' || peek(l) == '\t'))
        l->pos++;
}

static void skip_comment(struct lexer *l)
{
    if (peek(l) == '#')
        while (!at_end(l) && peek(l) != '\n')
            l->pos++;
}

static bool starts(const struct lexer *l, const char *w)
{
    size_t n = strlen(w);
    return l->len - l->pos >= n && !memcmp(l->s + l->pos, w, n);
}

/* A string of any kind at pos (which holds its quote); on success pos is
 * past it. Multi-line ones may span lines. */
static int lex_string(struct lexer *l, txbox_error *err)
{
    char q = peek(l);
    bool multi = starts(l, q == '"' ? "\"\"\"" : "'''");
    int line0 = l->line;
    l->pos += multi ? 3 : 1;
    while (!at_end(l)) {
        char c = l->s[l->pos];
        if (c == '\\' && q == '"') {
            l->pos += 2;
            continue;
        }
        if (c == '\n') {
            if (!multi)
                break;
            l->line++;
        }
        if (c == q) {
            if (!multi) {
                l->pos++;
                return 0;
            }
            if (starts(l, q == '"' ? "\"\"\"" : "'''")) {
                l->pos += 3;
                /* up to two more quotes belong to the string */
                for (int i = 0; i < 2 && peek(l) == q; i++)
                    l->pos++;
                return 0;
            }
        }
        l->pos++;
    }
    return tx_err(err, EINVAL, "line %d: a string that does not end", line0);
}

/* A key (bare, "quoted" or 'literal', dotted) up to '=' or ']'. */
static int lex_key(struct lexer *l, struct keypath *k, txbox_error *err)
{
    for (;;) {
        skip_ws(l);
        size_t a = l->pos, b;
        char c = peek(l);
        if (c == '"' || c == '\'') {
            if (starts(l, c == '"' ? "\"\"\"" : "'''"))
                return tx_err(err, EINVAL, "line %d: a multi-line string as a key", l->line);
            if (lex_string(l, err) < 0)
                return -1;
            a++;
            b = l->pos - 1;
        } else {
            while (!at_end(l) && (strchr("_-", peek(l)) || (peek(l) >= 'a' && peek(l) <= 'z') ||
                                  (peek(l) >= 'A' && peek(l) <= 'Z') || (peek(l) >= '0' && peek(l) <= '9')))
                l->pos++;
            b = l->pos;
            if (a == b)
                return tx_err(err, EINVAL, "line %d: a key was expected", l->line);
        }
        if (k->n < KEY_MAX) {
            char *p = xmalloc(b - a + 1);
            memcpy(p, l->s + a, b - a);
            p[b - a] = '\0';
            k->part[k->n++] = p;
        } else {
            k->deeper = true;
        }
        skip_ws(l);
        if (peek(l) != '.')
            return 0;
        l->pos++;
    }
}

/* A value up to the end of its line: strings, and brackets that may span
 * lines; comments inside arrays are skipped. */
static int lex_value(struct lexer *l, txbox_error *err)
{
    int depth = 0, line0 = l->line;
    bool done = false; /* one whole value read at depth 0: only a comment may follow */
    skip_ws(l);
    if (at_end(l) || peek(l) == '\n' || peek(l) == '#')
        return tx_err(err, EINVAL, "line %d: a value was expected", l->line);
    while (!at_end(l)) {
        char c = peek(l);
        if (depth == 0 && done && c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '#')
            return tx_err(err, EINVAL, "line %d: unexpected text after a value", l->line);
        if (c == '"' || c == '\'') {
            if (lex_string(l, err) < 0)
                return -1;
            done = depth == 0;
            continue;
        }
        if (depth == 0 && (c == ' ' || c == '\t'))
            done = true;
        if (c == '#') {
            skip_comment(l);
            continue;
        }
        if (c == '\n') {
            if (depth == 0)
                return 0;
            l->line++;
        } else if (c == '[' || c == '{') {
            depth++;
        } else if (c == ']' || c == '}') {
            if (--depth < 0)
                return tx_err(err, EINVAL, "line %d: an unbalanced '%c'", l->line, c);
            done = depth == 0;
        }
        l->pos++;
    }
    if (depth)
        return tx_err(err, EINVAL, "line %d: an array or inline table that does not end", line0);
    return 0;
}

/* After a statement: only a comment may follow on its line. */
static int lex_eol(struct lexer *l, txbox_error *err)
{
    skip_ws(l);
    skip_comment(l);
    if (at_end(l))
        return 0;
    if (peek(l) == '\r' && l->pos + 1 < l->len && l->s[l->pos + 1] == '\n')
        l->pos++;
    if (peek(l) != '\n')
        return tx_err(err, EINVAL, "line %d: unexpected text after a statement", l->line);
    l->pos++;
    l->line++;
    return 0;
}

static bool is(const struct keypath *k, size_t i, const char *w)
{
    return k->n > i && !strcmp(k->part[i], w);
}

/* Does a path name (or contain) mcp_servers.txbox? */
static bool path_touches_ours(const struct keypath *k)
{
    return is(k, 0, "mcp_servers") && (k->n == 1 || is(k, 1, "txbox"));
}

/* Is this spelling of a key component one the check above may miss (an
 * escape, or a quoted "txbox" with spaces is a different key anyway)? */
static bool path_has_escape(const struct keypath *k)
{
    for (size_t i = 0; i < k->n; i++)
        if (strchr(k->part[i], '\\'))
            return true;
    return false;
}

struct range {
    size_t a, b;
};

int setup_toml_edit(const char *in, size_t len, const char *block, char **out, size_t *outlen,
                    txbox_error *err)
{
    struct lexer l = {.s = in, .len = len, .line = 1};
    struct range cut[64];
    size_t ncut = 0;
    bool in_ours = false, in_mcp_table = false, in_root = true;
    size_t ours_start = 0, ours_end = 0, prev_line = 0;
    const char *marker = SETUP_TOML_MARKER;
    int rc = -1;

    if (memchr(in, '\0', len))
        return tx_err(err, EINVAL, "not a text file (it holds a NUL byte)");
    while (!at_end(&l)) {
        size_t line_start = l.pos;
        skip_ws(&l);
        char c = peek(&l);
        if (c == '\n' || c == '#' || c == '\r' || at_end(&l)) {
            bool is_marker = c == '#' && starts(&l, marker);
            skip_comment(&l);
            if (lex_eol(&l, err) < 0)
                goto out;
            if (is_marker)
                prev_line = line_start + 1; /* remembered: marker line starts here (+1) */
            else if (c != '\n' && c != '\r')
                prev_line = 0;
            continue;
        }
        struct keypath k = {0};
        if (c == '[') {
            bool array = starts(&l, "[[");
            l.pos += array ? 2 : 1;
            if (lex_key(&l, &k, err) < 0)
                goto key_fail;
            if (!starts(&l, array ? "]]" : "]")) {
                tx_err(err, EINVAL, "line %d: a table header that does not end", l.line);
                goto key_fail;
            }
            l.pos += array ? 2 : 1;
            if (lex_eol(&l, err) < 0)
                goto key_fail;
            if (in_ours) {
                if (ncut == ARRAY_SIZE(cut)) {
                    tx_err(err, E2BIG, "too many [mcp_servers.txbox] tables");
                    goto key_fail;
                }
                cut[ncut++] = (struct range){ours_start, ours_end};
                in_ours = false;
            }
            if (path_has_escape(&k)) {
                tx_err(err, EINVAL, "line %d: a table name with escapes: edit it by hand", l.line - 1);
                goto key_fail;
            }
            bool ours = is(&k, 0, "mcp_servers") && is(&k, 1, "txbox");
            if (array && path_touches_ours(&k)) {
                tx_err(err, EINVAL, "line %d: [[mcp_servers...]] is not Codex's form; edit it by hand",
                       l.line - 1);
                goto key_fail;
            }
            in_mcp_table = k.n == 1 && is(&k, 0, "mcp_servers");
            in_root = false;
            if (ours) {
                in_ours = true;
                ours_start = prev_line ? prev_line - 1 : line_start;
                ours_end = l.pos;
            }
            prev_line = 0;
            keypath_free(&k);
            continue;
        }
        /* key = value */
        if (lex_key(&l, &k, err) < 0)
            goto key_fail;
        if (peek(&l) != '=') {
            tx_err(err, EINVAL, "line %d: '=' was expected after a key", l.line);
            goto key_fail;
        }
        l.pos++;
        if (lex_value(&l, err) < 0 || lex_eol(&l, err) < 0)
            goto key_fail;
        /* a key outside our tables that defines mcp_servers.txbox (or all
         * of mcp_servers at once) is a form this editor does not touch */
        bool clash = false;
        if (in_mcp_table)
            clash = is(&k, 0, "txbox") || path_has_escape(&k);
        else if (in_root)
            clash = path_touches_ours(&k) || (is(&k, 0, "mcp_servers") && path_has_escape(&k));
        if (clash) {
            tx_err(err, EINVAL,
                   "line %d: mcp_servers.txbox is defined by a key, not as a [mcp_servers.txbox] "
                   "table: edit it by hand",
                   l.line - 1);
            goto key_fail;
        }
        if (in_ours)
            ours_end = l.pos;
        prev_line = 0;
        keypath_free(&k);
        continue;
    key_fail:
        keypath_free(&k);
        goto out;
    }
    if (in_ours) {
        if (ncut == ARRAY_SIZE(cut)) {
            tx_err(err, E2BIG, "too many [mcp_servers.txbox] tables");
            goto out;
        }
        cut[ncut++] = (struct range){ours_start, ours_end};
    }

    dbuf b;
    dbuf_init(&b, 0);
    size_t at = 0;
    for (size_t i = 0; i < ncut; i++) {
        dbuf_add(&b, in + at, cut[i].a - at);
        at = cut[i].b;
        /* one blank line left where a table was cut out from between two
         * others is the file's own; a second one would be ours */
        if (b.len >= 2 && !memcmp(b.p + b.len - 2, "\n\n", 2) && at < len && in[at] == '\n')
            at++;
    }
    dbuf_add(&b, in + at, len - at);
    if (block) {
        /* trailing blank lines are trimmed to one separator */
        while (b.len >= 2 && b.p[b.len - 1] == '\n' && b.p[b.len - 2] == '\n')
            b.len--;
        if (b.len && b.p[b.len - 1] != '\n')
            dbuf_add(&b, "\n", 1);
        if (b.len)
            dbuf_add(&b, "\n", 1);
        dbuf_addstr(&b, block);
    } else {
        while (b.len >= 2 && b.p[b.len - 1] == '\n' && b.p[b.len - 2] == '\n')
            b.len--;
        if (b.len == 1 && b.p[0] == '\n')
            b.len = 0;
    }
    if (b.p)
        b.p[b.len] = '\0'; /* dbuf keeps a NUL after what it holds; trimmed above */
    *outlen = b.len;
    *out = b.p ? b.p : xcalloc(1, 1);
    rc = 0;
out:
    return rc;
}

void setup_toml_string(dbuf *b, const char *s)
{
    dbuf_add(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            dbuf_add(b, "\\", 1);
            dbuf_add(b, p, 1);
        } else if (*p < 0x20 || *p == 0x7f) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04X", *p);
            dbuf_addstr(b, e);
        } else {
            dbuf_add(b, p, 1);
        }
    }
    dbuf_add(b, "\"", 1);
}
