/* The content readers of the rules on effects (`match.reader`): what a
 * program on the host will do with a file, read the way that program reads
 * it, instead of a regular expression over its text (docs/policy.md,
 * "Files other programs run on the host"):
 *
 *   vscode       VS Code's JSONC: settings.json (a setting of `keys` added,
 *                changed or removed; language overrides "[lang]" too),
 *                tasks.json (a task that runs when the folder opens, in a
 *                file that changed), devcontainer.json (a setting of `keys`:
 *                the lifecycle commands), *.code-workspace (its settings
 *                and tasks, as those files)
 *   pth          a .pth file of a site-packages directory: an import line
 *                that was not there (Python's site module runs them at every
 *                start of the interpreter)
 *   pyvenv       a virtualenv's pyvenv.cfg: the interpreter's home (where
 *                Python finds itself and its standard library) inside the
 *                workspace, or not absolute
 *   venv-python  a virtualenv's bin/python*: anything but a link to an
 *                interpreter outside the workspace (or to a sibling name)
 *   toml         TOML (rust-toolchain.toml, .cargo/config.toml): a key of
 *                `keys` added, changed or removed
 *
 * Every input is workspace content that a command wrote: attacker input. The
 * walk hands a reader at most the first MiB of a file (lib/tx/effects.c);
 * a reader that did not get the whole file, or cannot parse it, says that it
 * counts (fail closed: the person is asked). The parsers keep to their caps:
 * nesting, key length, the number of keys. Fuzzed: tests/fuzz/fuzz_effect_read.c. */
#include <fnmatch.h>
#include <string.h>

#include <yaml.h>

#include "effect_rules.h"

#define KEY_CAP 512       /* bytes of a setting's or TOML key's dotted name */
#define DEPTH_CAP 64      /* nesting of TOML arrays and inline tables */
#define PAIRS_CAP 4096    /* TOML keys read from one file */
#define VISITS_CAP 100000 /* YAML nodes visited (aliases share nodes) */
#define SCRIPTS_CAP 256   /* paths the runners' configurations name */

static const struct {
    const char *name;
    int id;
} readers[] = {
    {"vscode", EFF_READ_VSCODE},           {"pth", EFF_READ_PTH},   {"pyvenv", EFF_READ_PYVENV},
    {"venv-python", EFF_READ_VENV_PYTHON}, {"toml", EFF_READ_TOML},
};

int effect_reader_id(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(readers); i++)
        if (!strcmp(name, readers[i].name))
            return readers[i].id;
    return -1;
}

/* Did the walk read e's new content whole? */
static bool whole(const struct effect_entry *e) { return e->data && e->len == e->bytes; }

static bool old_whole(const struct effect_entry *e) { return e->old && e->kind == EFF_MODIFIED; }

/* What a reader of a whole file says before reading: 0 (gone, or a
 * directory: nothing is read from it), 1 (counts: not a regular file, or
 * not read whole), -1 (read it). */
static int prologue(const struct effect_entry *e, char *why, size_t whylen)
{
    if (e->kind == EFF_DELETED || e->dir)
        return 0;
    if (!e->reg || !whole(e)) {
        snprintf(why, whylen, "%s", e->reg ? "too large to be read whole" : "not a regular file");
        return 1;
    }
    return -1;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static bool key_listed(const strlist *keys, const char *k)
{
    for (size_t i = 0; i < keys->n; i++)
        if (fnmatch(keys->v[i], k, FNM_CASEFOLD) == 0)
            return true;
    return false;
}

/* ---- JSONC (VS Code's reading: jsonc-parser) ---- */

/* The text without comments and trailing commas, as JSON; NULL when a
 * string or a block comment does not end. A line comment ends at \r or \n,
 * as VS Code's scanner ends it; a block comment becomes a space. */
static char *jsonc_strip(const char *d, size_t n, size_t *outlen)
{
    if (n >= 3 && !memcmp(d, "\xEF\xBB\xBF", 3)) {
        d += 3;
        n -= 3;
    }
    char *o = xmalloc(n + 1);
    size_t w = 0, i = 0;
    bool comma = false;
    size_t comma_at = 0;
    while (i < n) {
        char c = d[i];
        if (c == '"') {
            comma = false;
            o[w++] = d[i++];
            while (i < n && d[i] != '"') {
                if (d[i] == '\\') {
                    o[w++] = d[i++];
                    if (i >= n)
                        break;
                }
                o[w++] = d[i++];
            }
            if (i >= n) {
                free(o);
                return NULL;
            }
            o[w++] = d[i++];
            continue;
        }
        if (c == '/' && i + 1 < n && d[i + 1] == '/') {
            while (i < n && d[i] != '\n' && d[i] != '\r')
                i++;
            continue;
        }
        if (c == '/' && i + 1 < n && d[i + 1] == '*') {
            const char *end = NULL;
            for (size_t k = i + 2; k + 1 < n && !end; k++)
                if (d[k] == '*' && d[k + 1] == '/')
                    end = d + k;
            if (!end) {
                free(o);
                return NULL;
            }
            i = (size_t)(end - d) + 2;
            o[w++] = ' ';
            continue;
        }
        if (c == ',') {
            comma = true;
            comma_at = w;
        } else if (c == '}' || c == ']') {
            if (comma)
                o[comma_at] = ' ';
            comma = false;
        } else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            comma = false;
        }
        o[w++] = d[i++];
    }
    o[w] = 0;
    *outlen = w;
    return o;
}

json_t *effect_jsonc_load(const char *d, size_t n)
{
    size_t len = 0;
    _cleanup_free_ char *t = jsonc_strip(d, n, &len);
    if (!t)
        return NULL;
    if (t[strspn(t, " \t\r\n")] == 0)
        return json_object();
    json_error_t je;
    return json_loadb(t, len, 0, &je);
}

/* e's new and old content as JSON objects; *fresh false when the new one
 * cannot be read whole or parsed (the old one, unreadable: {}). */
static bool json_pair(const struct effect_entry *e, json_t **nw, json_t **old)
{
    *nw = whole(e) ? effect_jsonc_load(e->data, e->len) : NULL;
    *old = old_whole(e) ? effect_jsonc_load(e->old, e->oldlen) : NULL;
    if (!json_is_object(*old)) {
        json_decref(*old);
        *old = json_object();
    }
    if (!json_is_object(*nw)) {
        json_decref(*nw);
        *nw = NULL;
        return false;
    }
    return true;
}

/* A setting of keys added, changed or removed between old and nw (objects
 * of settings; "[lang]" objects hold settings of their own). */
static bool settings_changed(const strlist *keys, json_t *old, json_t *nw, const char *in, char *why,
                             size_t whylen)
{
    json_t *objs[2] = {nw, old};
    for (int side = 0; side < 2; side++) {
        const char *k;
        json_t *v;
        json_object_foreach(objs[side], k, v)
        {
            json_t *other = json_object_get(objs[!side], k);
            if (side == 1 && other)
                continue; /* seen from the new side */
            if (k[0] == '[' && (json_is_object(v) || json_is_object(other))) {
                json_t *a = json_is_object(v) ? v : NULL, *b = json_is_object(other) ? other : NULL;
                json_t *empty = json_object();
                /* old, new: for side 0 v is the new one, for side 1 the old */
                bool ch = settings_changed(keys, side ? (a ? a : empty) : (b ? b : empty),
                                           side ? (b ? b : empty) : (a ? a : empty), k, why, whylen);
                json_decref(empty);
                if (ch)
                    return true;
                continue;
            }
            if (strlen(k) > KEY_CAP || !key_listed(keys, k) || (other && json_equal(v, other)))
                continue;
            snprintf(why, whylen, "%s%s%s %s", in ? in : "", in ? " " : "", k, side ? "removed" : "set");
            return true;
        }
    }
    return false;
}

/* Does v hold a task that runs when the folder opens (runOn folderOpen)? */
static bool has_folder_open(json_t *v, unsigned depth)
{
    if (depth > DEPTH_CAP)
        return true;
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x)
        {
            if (!strcasecmp(k, "runOn") && json_is_string(x) &&
                !strcasecmp(json_string_value(x), "folderOpen"))
                return true;
            if (has_folder_open(x, depth + 1))
                return true;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) if (has_folder_open(x, depth + 1)) return true;
    }
    return false;
}

/* tasks (a tasks.json object): changed, with a task run at folder open
 * (another task it depends on runs then too: any change counts). */
static bool tasks_changed(json_t *old, json_t *nw, char *why, size_t whylen)
{
    if (!nw || json_equal(old ? old : json_null(), nw) || !has_folder_open(nw, 0))
        return false;
    snprintf(why, whylen, "a task runs when the folder opens (runOn folderOpen)");
    return true;
}

static bool read_vscode(const strlist *keys, const struct effect_entry *e, char *why, size_t whylen)
{
    if (e->kind == EFF_DELETED || e->dir)
        return false; /* gone: VS Code falls back to its defaults */
    if (!e->reg) {
        snprintf(why, whylen, "not a regular file (VS Code would read what it points to)");
        return true;
    }
    json_t *nw, *old;
    if (!json_pair(e, &nw, &old)) {
        json_decref(old);
        snprintf(why, whylen, "%s",
                 whole(e) ? "not JSON with comments that can be read" : "too large to be read whole");
        return true;
    }
    const char *b = base_name(e->path);
    size_t bl = strlen(b);
    bool r;
    if (bl >= 15 && !strcasecmp(b + bl - 15, ".code-workspace")) {
        json_t *os = json_object_get(old, "settings"), *ns = json_object_get(nw, "settings");
        json_t *e1 = json_object(), *e2 = json_object();
        r = settings_changed(keys, json_is_object(os) ? os : e1, json_is_object(ns) ? ns : e2, "settings",
                             why, whylen) ||
            tasks_changed(json_object_get(old, "tasks"), json_object_get(nw, "tasks"), why, whylen);
        json_decref(e1);
        json_decref(e2);
    } else if (!strcasecmp(b, "tasks.json")) {
        r = tasks_changed(old, nw, why, whylen);
    } else {
        /* settings.json, devcontainer.json: settings of keys */
        r = settings_changed(keys, old, nw, NULL, why, whylen);
    }
    json_decref(nw);
    json_decref(old);
    return r;
}

/* ---- Python's startup: .pth, pyvenv.cfg, the venv's interpreter ---- */

/* The next line of d[*at, n) (ended by \r, \n or \r\n: Python's universal
 * newlines), its length in *len; false at the end. */
static bool next_line(const char *d, size_t n, size_t *at, const char **line, size_t *len)
{
    if (*at >= n)
        return false;
    size_t s = *at, q = s;
    while (q < n && d[q] != '\n' && d[q] != '\r')
        q++;
    *line = d + s;
    *len = q - s;
    *at = q < n && d[q] == '\r' && q + 1 < n && d[q + 1] == '\n' ? q + 2 : q + 1;
    return true;
}

/* site.py's test: a line that starts with "import " or "import\t" is run. */
static bool pth_import(const char *l, size_t n)
{
    return n > 6 && !memcmp(l, "import", 6) && (l[6] == ' ' || l[6] == '\t');
}

static bool has_line(const char *d, size_t n, const char *l, size_t ln)
{
    size_t at = 0;
    const char *x;
    size_t xn;
    if (!d)
        return false;
    if (n >= 3 && !memcmp(d, "\xEF\xBB\xBF", 3))
        at = 3;
    while (next_line(d, n, &at, &x, &xn))
        if (xn == ln && !memcmp(x, l, ln))
            return true;
    return false;
}

static bool read_pth(const struct effect_entry *e, char *why, size_t whylen)
{
    int pro = prologue(e, why, whylen);
    if (pro >= 0)
        return pro;
    size_t at = 0;
    const char *l;
    size_t ln;
    /* Python 3.13 reads .pth files as utf-8-sig: a BOM is not part of the line */
    if (e->len >= 3 && !memcmp(e->data, "\xEF\xBB\xBF", 3))
        at = 3;
    while (next_line(e->data, e->len, &at, &l, &ln)) {
        if (!pth_import(l, ln) || has_line(old_whole(e) ? e->old : NULL, e->oldlen, l, ln))
            continue;
        snprintf(why, whylen, "an import line");
        return true;
    }
    return false;
}

/* Is the absolute path p (n bytes) the workspace or inside it? */
static bool inside(const char *ws, const char *p, size_t n)
{
    if (!ws)
        return true;
    size_t l = strlen(ws);
    while (l > 1 && ws[l - 1] == '/')
        l--;
    if (l == 1)
        return true;
    return n >= l && !memcmp(p, ws, l) && (n == l || p[l] == '/');
}

/* A path whose lexical form (no "..", no symbolic link of the workspace on
 * the way) lies outside the workspace: absolute, no "." or ".." component. */
static bool outside_plain(const char *ws, const char *p, size_t n)
{
    if (!n || p[0] != '/')
        return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] == '/' && i + 1 < n && p[i + 1] == '.' &&
            (i + 2 == n || p[i + 2] == '/' || (p[i + 2] == '.' && (i + 3 == n || p[i + 3] == '/'))))
            return false;
    return !inside(ws, p, n);
}

static bool read_pyvenv(const struct effect_entry *e, const char *ws, char *why, size_t whylen)
{
    static const char *const path_keys[] = {
        "home", "executable", "base-executable", "base-prefix", "base-exec-prefix", "prefix", "exec-prefix"};
    int pro = prologue(e, why, whylen);
    if (pro >= 0)
        return pro;
    size_t at = 0;
    const char *l;
    size_t ln;
    while (next_line(e->data, e->len, &at, &l, &ln)) {
        const char *eq = memchr(l, '=', ln);
        if (!eq)
            continue;
        const char *ks = l, *ke = eq, *vs = eq + 1, *ve = l + ln;
        while (ks < ke && (*ks == ' ' || *ks == '\t'))
            ks++;
        while (ke > ks && (ke[-1] == ' ' || ke[-1] == '\t'))
            ke--;
        while (vs < ve && (*vs == ' ' || *vs == '\t'))
            vs++;
        while (ve > vs && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        for (size_t k = 0; k < ARRAY_SIZE(path_keys); k++) {
            size_t kl = strlen(path_keys[k]);
            if ((size_t)(ke - ks) != kl || strncasecmp(ks, path_keys[k], kl))
                continue;
            if (!outside_plain(ws, vs, (size_t)(ve - vs))) {
                snprintf(why, whylen, "%s is not an absolute path outside the workspace", path_keys[k]);
                return true;
            }
        }
    }
    return false;
}

/* python, python3, python3.11, pypy3.10: an interpreter's name */
static bool interpreter_name(const char *t)
{
    size_t p = !strncmp(t, "python", 6) ? 6 : !strncmp(t, "pypy", 4) ? 4 : 0;
    if (!p)
        return false;
    t += p;
    t += strspn(t, "0123456789");
    if (*t == '.' && t[1] >= '0' && t[1] <= '9')
        t += 1 + strspn(t + 1, "0123456789");
    return *t == 0;
}

static bool read_venv_python(const struct effect_entry *e, const char *ws, char *why, size_t whylen)
{
    if (e->kind == EFF_DELETED)
        return false;
    if (e->link) {
        const char *t = e->link;
        size_t tn = strlen(t);
        /* python -> python3.11: a sibling whose own name the rule judges */
        if (interpreter_name(t))
            return false;
        if (outside_plain(ws, t, tn))
            return false;
        snprintf(why, whylen, "a link to a program in the workspace, or one the host cannot resolve");
        return true;
    }
    snprintf(why, whylen, "%s",
             e->dir ? "a directory" : "not a link to an interpreter outside the workspace");
    return true;
}

/* ---- TOML (the subset: every key, dotted, and whether its value changed) ---- */

struct tkey {
    char *key; /* dotted, unescaped */
    char *val; /* its value's text as written (compared, never shown) */
};

struct toml {
    const char *d;
    size_t n, i;
    struct tkey *v;
    size_t nv;
    bool bad;
};

static void t_ws(struct toml *t, bool newlines)
{
    while (t->i < t->n) {
        char c = t->d[t->i];
        if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r')))
            t->i++;
        else if (c == '#')
            while (t->i < t->n && t->d[t->i] != '\n')
                t->i++;
        else
            break;
    }
}

static bool t_bare(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* A string at t->i ("...", '...', or their triple forms) appended to b
 * unescaped (b NULL: skipped). */
static bool t_string(struct toml *t, dbuf *b)
{
    char q = t->d[t->i];
    bool triple = t->i + 2 < t->n && t->d[t->i + 1] == q && t->d[t->i + 2] == q;
    t->i += triple ? 3 : 1;
    for (;;) {
        if (t->i >= t->n)
            return false;
        char c = t->d[t->i];
        if (c == q && (!triple || (t->i + 2 < t->n && t->d[t->i + 1] == q && t->d[t->i + 2] == q))) {
            t->i += triple ? 3 : 1;
            /* a triple string may end with up to two more quotes */
            while (triple && t->i < t->n && t->d[t->i] == q)
                t->i++;
            return true;
        }
        if (!triple && (c == '\n' || c == '\r'))
            return false;
        if (c == '\\' && q == '"') {
            if (t->i + 1 >= t->n)
                return false;
            char x = t->d[t->i + 1];
            t->i += 2;
            if (x == 'u' || x == 'U') {
                unsigned len = x == 'u' ? 4 : 8;
                unsigned long cp = 0;
                for (unsigned k = 0; k < len; k++, t->i++) {
                    if (t->i >= t->n)
                        return false;
                    char h = t->d[t->i];
                    int dv = h >= '0' && h <= '9'   ? h - '0'
                             : h >= 'a' && h <= 'f' ? h - 'a' + 10
                             : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                    : -1;
                    if (dv < 0)
                        return false;
                    cp = cp * 16 + (unsigned long)dv;
                }
                if (b) {
                    /* UTF-8 of cp (a key of plain letters is what counts) */
                    char u[4];
                    size_t un = 0;
                    if (cp < 0x80)
                        u[un++] = (char)cp;
                    else if (cp < 0x800)
                        u[un++] = (char)(0xC0 | (cp >> 6)), u[un++] = (char)(0x80 | (cp & 0x3F));
                    else if (cp < 0x10000)
                        u[un++] = (char)(0xE0 | (cp >> 12)), u[un++] = (char)(0x80 | ((cp >> 6) & 0x3F)),
                        u[un++] = (char)(0x80 | (cp & 0x3F));
                    else
                        u[un++] = (char)(0xF0 | (cp >> 18)), u[un++] = (char)(0x80 | ((cp >> 12) & 0x3F)),
                        u[un++] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[un++] = (char)(0x80 | (cp & 0x3F));
                    dbuf_add(b, u, un);
                }
                continue;
            }
            static const char esc_in[] = "btnfr\"\\e", esc_out[] = "\b\t\n\f\r\"\\\x1b";
            const char *p = strchr(esc_in, x);
            if (triple && (x == '\n' || x == '\r' || x == ' ' || x == '\t')) {
                /* a line-ending backslash: the whitespace that follows goes */
                while (t->i < t->n && strchr(" \t\r\n", t->d[t->i]))
                    t->i++;
                continue;
            }
            if (!p || !x)
                return false;
            if (b)
                dbuf_add(b, esc_out + (p - esc_in), 1);
            continue;
        }
        if (b)
            dbuf_add(b, &c, 1);
        t->i++;
    }
}

/* A dotted key at t->i appended to b (after prefix "p."). */
static bool t_key(struct toml *t, dbuf *b)
{
    for (;;) {
        t_ws(t, false);
        if (t->i >= t->n)
            return false;
        char c = t->d[t->i];
        if (c == '"' || c == '\'') {
            if (!t_string(t, b))
                return false;
        } else if (t_bare(c)) {
            size_t s = t->i;
            while (t->i < t->n && t_bare(t->d[t->i]))
                t->i++;
            dbuf_add(b, t->d + s, t->i - s);
        } else {
            return false;
        }
        if (b->len > KEY_CAP)
            return false;
        t_ws(t, false);
        if (t->i < t->n && t->d[t->i] == '.') {
            t->i++;
            dbuf_add(b, ".", 1);
            continue;
        }
        return true;
    }
}

static void t_add(struct toml *t, const char *key, size_t vs, size_t ve)
{
    if (t->nv >= PAIRS_CAP) {
        t->bad = true;
        return;
    }
    t->v = xrealloc(t->v, (t->nv + 1) * sizeof *t->v);
    t->v[t->nv].key = xstrdup(key);
    t->v[t->nv].val = strndup(t->d + vs, ve - vs);
    if (!t->v[t->nv].val)
        t->v[t->nv].val = xstrdup("");
    t->nv++;
}

static bool t_value(struct toml *t, const char *key, unsigned depth);

/* An inline table's pairs, each under key. */
static bool t_inline(struct toml *t, const char *key, unsigned depth)
{
    t->i++;
    for (;;) {
        t_ws(t, true);
        if (t->i < t->n && t->d[t->i] == '}') {
            t->i++;
            return true;
        }
        dbuf kb;
        dbuf_init(&kb, KEY_CAP * 2);
        dbuf_addstr(&kb, key);
        dbuf_add(&kb, ".", 1);
        bool ok = t_key(t, &kb);
        ok = ok && t->i < t->n && t->d[t->i] == '=';
        if (ok) {
            t->i++;
            t_ws(t, false);
            ok = t_value(t, dbuf_str(&kb), depth + 1);
        }
        dbuf_free(&kb);
        if (!ok)
            return false;
        t_ws(t, true);
        if (t->i < t->n && t->d[t->i] == ',') {
            t->i++;
            continue;
        }
        if (t->i < t->n && t->d[t->i] == '}') {
            t->i++;
            return true;
        }
        return false;
    }
}

/* A value at t->i: recorded under key (an inline table: each of its keys). */
static bool t_value(struct toml *t, const char *key, unsigned depth)
{
    if (depth > DEPTH_CAP || t->i >= t->n)
        return false;
    size_t s = t->i;
    char c = t->d[t->i];
    if (c == '{')
        return t_inline(t, key, depth);
    if (c == '"' || c == '\'') {
        if (!t_string(t, NULL))
            return false;
    } else if (c == '[') {
        t->i++;
        for (;;) {
            t_ws(t, true);
            if (t->i < t->n && t->d[t->i] == ']')
                break;
            /* an element: a value of its own (an inline table inside an
             * array is recorded under the array's key) */
            if (!t_value(t, key, depth + 1))
                return false;
            t_ws(t, true);
            if (t->i < t->n && t->d[t->i] == ',') {
                t->i++;
                continue;
            }
            if (t->i < t->n && t->d[t->i] == ']')
                break;
            return false;
        }
        t->i++;
    } else {
        /* a number, boolean or date: up to a delimiter */
        while (t->i < t->n && !strchr(",]}#\r\n", t->d[t->i]))
            t->i++;
        if (t->i == s)
            return false;
    }
    t_add(t, key, s, t->i);
    return !t->bad;
}

/* The document's keys, dotted (tables and array tables as prefixes). */
static bool toml_read(struct toml *t)
{
    char table[KEY_CAP + 1] = "";
    if (t->n >= 3 && !memcmp(t->d, "\xEF\xBB\xBF", 3))
        t->i = 3;
    for (;;) {
        t_ws(t, true);
        if (t->i >= t->n)
            return true;
        dbuf kb;
        dbuf_init(&kb, KEY_CAP * 2);
        bool ok;
        if (t->d[t->i] == '[') {
            bool arr = t->i + 1 < t->n && t->d[t->i + 1] == '[';
            t->i += arr ? 2 : 1;
            ok = t_key(t, &kb) && t->i < t->n && t->d[t->i] == ']';
            if (ok && arr)
                ok = t->i + 1 < t->n && t->d[t->i + 1] == ']';
            if (ok) {
                t->i += arr ? 2 : 1;
                snprintf(table, sizeof table, "%s", dbuf_str(&kb));
                t_add(t, table, t->i, t->i); /* the table itself */
            }
        } else {
            if (*table) {
                dbuf_addstr(&kb, table);
                dbuf_add(&kb, ".", 1);
            }
            ok = t_key(t, &kb) && t->i < t->n && t->d[t->i] == '=';
            if (ok) {
                t->i++;
                t_ws(t, false);
                ok = t_value(t, dbuf_str(&kb), 0);
            }
        }
        dbuf_free(&kb);
        t_ws(t, false);
        if (!ok || t->bad || (t->i < t->n && t->d[t->i] != '\n' && t->d[t->i] != '\r'))
            return false;
    }
}

static void toml_free(struct toml *t)
{
    for (size_t i = 0; i < t->nv; i++) {
        free(t->v[i].key);
        free(t->v[i].val);
    }
    free(t->v);
}

/* The values of key in t joined (several: arrays of tables), or NULL. */
static char *toml_get(const struct toml *t, const char *key)
{
    dbuf b;
    dbuf_init(&b, 0);
    bool found = false;
    for (size_t i = 0; i < t->nv; i++)
        if (!strcmp(t->v[i].key, key)) {
            found = true;
            dbuf_addstr(&b, t->v[i].val);
            dbuf_add(&b, "\n", 1);
        }
    if (!found) {
        dbuf_free(&b);
        return NULL;
    }
    return (char *)dbuf_str(&b);
}

static bool read_toml(const strlist *keys, const struct effect_entry *e, char *why, size_t whylen)
{
    int pro = prologue(e, why, whylen);
    if (pro >= 0)
        return pro;
    struct toml nw = {.d = e->data, .n = e->len}, old = {0};
    bool r = false;
    if (!toml_read(&nw)) {
        snprintf(why, whylen, "not TOML that can be read");
        r = true;
    } else {
        if (old_whole(e)) {
            old.d = e->old;
            old.n = e->oldlen;
            if (!toml_read(&old)) {
                toml_free(&old);
                memset(&old, 0, sizeof old);
            }
        }
        const struct toml *sides[2] = {&nw, &old};
        for (int s = 0; s < 2 && !r; s++)
            for (size_t i = 0; i < sides[s]->nv && !r; i++) {
                const char *k = sides[s]->v[i].key;
                if (!key_listed(keys, k))
                    continue;
                _cleanup_free_ char *a = toml_get(&nw, k), *b = toml_get(&old, k);
                if (a && b && !strcmp(a, b))
                    continue;
                snprintf(why, whylen, "%s %s", k, a ? "set" : "removed");
                r = true;
            }
    }
    toml_free(&nw);
    toml_free(&old);
    return r;
}

/* ---- what a hook runner's configuration runs ---- */

/* The words of a command that name a workspace file as a program or its
 * script: with a '/' or a script's extension, not an option, a variable,
 * a URL, a pattern or an absolute path; "./" and "${workspaceFolder}/"
 * dropped; "a/../b" read lexically, never above the root. */
static void add_words(const char *s, size_t n, strlist *out)
{
    static const char *const exts[] = {".sh", ".bash", ".zsh", ".py",  ".js",  ".mjs", ".cjs",
                                       ".ts", ".rb",   ".pl",  ".php", ".lua", ".ps1", ".fish"};
    for (size_t i = 0; i < n && out->n < SCRIPTS_CAP;) {
        while (i < n && strchr(" \t\r\n;|&()<>`'\"=", s[i]))
            i++;
        size_t b = i;
        while (i < n && !strchr(" \t\r\n;|&()<>`'\"=", s[i]))
            i++;
        const char *w = s + b;
        size_t wl = i - b;
        /* the project's directory, as a runner or an agent CLI names it */
        static const char *const roots[] = {"${workspaceFolder}/", "$CLAUDE_PROJECT_DIR/",
                                            "${CLAUDE_PROJECT_DIR}/", "$GEMINI_PROJECT_DIR/",
                                            "${GEMINI_PROJECT_DIR}/"};
        for (size_t k = 0; k < ARRAY_SIZE(roots); k++) {
            size_t rl = strlen(roots[k]);
            if (wl > rl && !strncmp(w, roots[k], rl)) {
                w += rl, wl -= rl;
                break;
            }
        }
        while (wl >= 2 && w[0] == '.' && w[1] == '/')
            w += 2, wl -= 2;
        if (!wl || wl > KEY_CAP || w[0] == '-' || w[0] == '$' || w[0] == '/' || w[0] == '~' ||
            memchr(w, '{', wl) || memchr(w, '*', wl) || memchr(w, '?', wl) ||
            (wl > 3 && memmem(w, wl, "://", 3)))
            continue;
        bool ext = false;
        for (size_t k = 0; k < ARRAY_SIZE(exts) && !ext; k++) {
            size_t el = strlen(exts[k]);
            ext = wl > el && !strncasecmp(w + wl - el, exts[k], el);
        }
        if (!ext && !memchr(w, '/', wl))
            continue;
        /* lexically, component by component */
        char norm[KEY_CAP + 2];
        size_t nl = 0;
        bool above = false;
        for (size_t c = 0; c < wl && !above;) {
            size_t e = c;
            while (e < wl && w[e] != '/')
                e++;
            if (e - c == 2 && w[c] == '.' && w[c + 1] == '.') {
                if (!nl)
                    above = true;
                while (nl && norm[nl - 1] != '/')
                    nl--;
                nl -= nl > 0;
            } else if (e > c && !(e - c == 1 && w[c] == '.')) {
                if (nl)
                    norm[nl++] = '/';
                memcpy(norm + nl, w + c, e - c);
                nl += e - c;
            }
            c = e + 1;
        }
        if (above || !nl)
            continue;
        norm[nl] = 0;
        bool dup = false;
        for (size_t k = 0; k < out->n && !dup; k++)
            dup = !strcmp(out->v[k], norm);
        if (!dup)
            strlist_add(out, norm);
    }
}

/* The commands of a runner's YAML (pre-commit: entry, args; lefthook: run;
 * any key that names a command), their words. */
static void yaml_collect(yaml_document_t *doc, yaml_node_t *nd, bool take, unsigned depth, size_t *visits,
                         strlist *out)
{
    if (!nd || depth > DEPTH_CAP || ++*visits > VISITS_CAP)
        return;
    static const char *const keys[] = {"entry", "run", "args", "command", "commands", "script"};
    if (nd->type == YAML_SCALAR_NODE && take) {
        add_words((const char *)nd->data.scalar.value, nd->data.scalar.length, out);
    } else if (nd->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = nd->data.sequence.items.start; it < nd->data.sequence.items.top; it++)
            yaml_collect(doc, yaml_document_get_node(doc, *it), take, depth + 1, visits, out);
    } else if (nd->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *pr = nd->data.mapping.pairs.start; pr < nd->data.mapping.pairs.top; pr++) {
            yaml_node_t *k = yaml_document_get_node(doc, pr->key);
            bool t = false;
            for (size_t i = 0; k && k->type == YAML_SCALAR_NODE && i < ARRAY_SIZE(keys) && !t; i++)
                t = !strcmp((const char *)k->data.scalar.value, keys[i]);
            yaml_collect(doc, yaml_document_get_node(doc, pr->value), t, depth + 1, visits, out);
        }
    }
}

/* A command's words with the quotes around a project directory's
 * variable dropped ("$CLAUDE_PROJECT_DIR"/x.sh: one word, as the shell
 * reads it), into out. */
static void command_words(const char *s, size_t n, strlist *out)
{
    char *c = xmalloc(n + 1);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if ((s[i] == '"' || s[i] == '\'') && i + 1 < n && s[i + 1] == '$') {
            size_t e = i + 2;
            while (e < n && s[e] != s[i] && s[e] != ' ')
                e++;
            if (e < n && s[e] == s[i]) { /* "$VAR" or "${VAR}": unquoted */
                memcpy(c + m, s + i + 1, e - i - 1);
                m += e - i - 1;
                i = e;
                continue;
            }
        }
        c[m++] = s[i];
    }
    add_words(c, m, out);
    free(c);
}

/* The commands of a JSON document (keys: those whose strings are
 * commands or their arguments). */
static void json_collect(json_t *v, bool take, const char *const *keys, unsigned depth, strlist *out)
{
    if (depth > DEPTH_CAP)
        return;
    if (json_is_string(v) && take) {
        command_words(json_string_value(v), json_string_length(v), out);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) json_collect(x, take, keys, depth + 1, out);
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x)
        {
            bool t = false;
            for (size_t i = 0; keys[i] && !t; i++)
                t = !strcmp(k, keys[i]);
            json_collect(x, t, keys, depth + 1, out);
        }
    }
}

void effect_runner_paths(int kind, const char *d, size_t n, strlist *out)
{
    if (kind == EFF_RUNNER_SHELL) {
        /* a hook script: each line's words, comments aside */
        size_t at = 0;
        const char *l;
        size_t ln;
        while (next_line(d, n, &at, &l, &ln)) {
            size_t skip = 0;
            while (skip < ln && (l[skip] == ' ' || l[skip] == '\t'))
                skip++;
            if (skip < ln && l[skip] != '#')
                add_words(l + skip, ln - skip, out);
        }
    } else if (kind == EFF_RUNNER_TASKS) {
        static const char *const keys[] = {"command", "args", NULL};
        json_t *doc = effect_jsonc_load(d, n);
        if (doc && has_folder_open(doc, 0))
            json_collect(doc, false, keys, 0, out);
        json_decref(doc);
    } else if (kind == EFF_RUNNER_AGENT) {
        /* an agent CLI's hooks, status line, credential helpers and MCP
         * servers: every one a program the CLI runs on the host */
        static const char *const keys[] = {
            "command",           "args", "apiKeyHelper", "awsAuthRefresh", "awsCredentialExport",
            "otelHeadersHelper", NULL};
        json_t *doc = effect_jsonc_load(d, n);
        if (doc)
            json_collect(doc, false, keys, 0, out);
        json_decref(doc);
    } else if (kind == EFF_RUNNER_YAML) {
        yaml_parser_t parser;
        yaml_document_t doc;
        if (!yaml_parser_initialize(&parser))
            return;
        yaml_parser_set_input_string(&parser, (const unsigned char *)d, n);
        if (yaml_parser_load(&parser, &doc)) {
            size_t visits = 0;
            yaml_collect(&doc, yaml_document_get_root_node(&doc), false, 0, &visits, out);
            yaml_document_delete(&doc);
        }
        yaml_parser_delete(&parser);
    }
}

bool effect_read_judge(int reader, const strlist *keys, const struct effect_entry *e, const char *ws,
                       char *why, size_t whylen)
{
    *why = 0;
    switch (reader) {
    case EFF_READ_VSCODE:
        return read_vscode(keys, e, why, whylen);
    case EFF_READ_PTH:
        return read_pth(e, why, whylen);
    case EFF_READ_PYVENV:
        return read_pyvenv(e, ws, why, whylen);
    case EFF_READ_VENV_PYTHON:
        return read_venv_python(e, ws, why, whylen);
    case EFF_READ_TOML:
        return read_toml(keys, e, why, whylen);
    }
    snprintf(why, whylen, "no reader");
    return true;
}
