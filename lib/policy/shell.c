/* The shell reader: from the tree-sitter-bash syntax tree of a command,
 * every simple command that can run, with its words resolved as bash would
 * resolve them (quote removal, escapes, $'..', brace expansion, field
 * splitting of known values, variables assigned earlier in the same string,
 * echo/printf/which substitutions), and recursion into the commands that
 * run other commands (wrappers, sh -c, eval, find -exec, xargs, git
 * aliases, inline interpreter code, here-documents piped into shells).
 *
 * Whatever cannot be resolved is marked (W_DYN on a word, a D_* detector
 * on a command): the walker never guesses in the safe direction.
 *
 * Bounds: every check has a budget of syntax nodes, parsed bytes, simple
 * commands, nesting depth and arena memory, and a deadline for tree-sitter;
 * past any of them the walk stops and reports D_TOO_LARGE / D_TOO_DEEP. */
#include <ctype.h>
#include <limits.h>
#include <pwd.h>
#include <tree_sitter/api.h>

#include "envlist.h"
#include "walk.h"

const TSLanguage *tree_sitter_bash(void);

#define MAX_NODES 400000u
#define MAX_CMDS 8192u
#define MAX_PARSED (4u * TXBOX_POLICY_MAX_COMMAND)
#define MAX_NODE_DEPTH 256
#define MAX_WORDS 4096u
#define MAX_BRACE 256u
#define MAX_FOR_VALUES 8u
#define MAX_LITERALS 64u
/* tree-sitter's error recovery can take super-linear time on some broken
 * inputs (a stray quote among thousands of pipes): each check gets at most
 * this much parse time, and this many progress ticks. */
#define PARSE_BUDGET_NS (500ull * 1000 * 1000)
#define MAX_PARSE_TICKS 20000ull
/* larger inputs whose quotes or brackets do not pair up are not handed to
 * tree-sitter whole */
#define MAX_UNBALANCED 4096u

/* ---- rich strings: text plus a flag per byte ---- */
/* RF_NUM: an unknown part that is an integer ($#, $((...))) */
enum { RF_QUOTED = 1, RF_DYN = 2, RF_SPLIT = 4, RF_HOME = 8, RF_NUM = 16 };
typedef struct rstr {
    char *s;
    uint8_t *f;
    size_t len, cap;
    unsigned wflags; /* W_FETCH, W_SUBST collected while building */
    bool had_quotes; /* an empty result still makes one word */
} rstr;

static void rs_free(rstr *r)
{
    free(r->s);
    free(r->f);
    memset(r, 0, sizeof *r);
}

static void rs_add(rstr *r, const char *s, size_t n, uint8_t fl)
{
    if (r->len + n > MAX_VALUE * 4) { /* hard cap: keep a dynamic marker */
        n = 0;
        fl = RF_DYN;
        if (r->len && (r->f[r->len - 1] & RF_DYN))
            return;
        s = "?";
        n = 1;
    }
    if (r->len + n + 1 > r->cap) {
        size_t nc = (r->len + n + 1) * 2;
        r->s = xrealloc(r->s, nc);
        r->f = xrealloc(r->f, nc);
        r->cap = nc;
    }
    memcpy(r->s + r->len, s, n);
    memset(r->f + r->len, fl, n);
    r->len += n;
    r->s[r->len] = 0;
}

/* Append n bytes with their own flags. */
static void rs_add_flags(rstr *r, const char *s, const uint8_t *f, size_t n)
{
    size_t old = r->len;
    rs_add(r, s, n, 0);
    if (r->len == old + n && n)
        memcpy(r->f + old, f, n);
}

/* Would the sandbox pass variable name[0..n) to the command (the
 * environment's allowlist, confine.c)? What it drops may be a secret on the
 * host, where a trusted safe command would run. */
static bool env_name_passes(const char *name, size_t n)
{
    char entry[256];
    if (n + 2 > sizeof entry)
        return false;
    memcpy(entry, name, n);
    entry[n] = '=';
    entry[n + 1] = 0;
    return confine_env_passes(entry, NULL);
}

/* ---- the walker (walk.h) ---- */

static const char *walk_node(W *w, TSNode n, const ctx *c, size_t *olen);
static const char *walk_source(W *w, const char *src, size_t len, const ctx *c, const char *via,
                               size_t *olen);
static void walk_subst_only(W *w, TSNode n, const ctx *c);
static bool reads_secret(W *w, const pword *argv, size_t argc, unsigned det);
static void recover_segments(W *w, const char *src, size_t len, const ctx *c);
static bool unbalanced(const char *s, size_t n);
static const char *emit(W *w, pword *argv, size_t argc, unsigned det, const ctx *c, size_t *olen);

static bool is(TSNode n, const char *type) { return !strcmp(ts_node_type(n), type); }

static const char *ntext(W *w, TSNode n, size_t *len)
{
    uint32_t a = ts_node_start_byte(n), b = ts_node_end_byte(n);
    *len = b - a;
    return w->src + a;
}

typedef struct kid {
    TSNode n;
    const char *field;
} kid;

/* All children of n (named and anonymous), in the arena. */
static size_t kids(W *w, TSNode n, kid **out)
{
    uint32_t cnt = ts_node_child_count(n);
    *out = NULL;
    if (!cnt)
        return 0;
    kid *k = ar_alloc(w->ar, cnt * sizeof *k);
    if (!k) {
        w->stopped = true;
        return 0;
    }
    TSTreeCursor cur = ts_tree_cursor_new(n);
    size_t i = 0;
    if (ts_tree_cursor_goto_first_child(&cur)) {
        do {
            if (i >= cnt)
                break;
            k[i].n = ts_tree_cursor_current_node(&cur);
            k[i].field = ts_tree_cursor_current_field_name(&cur);
            i++;
        } while (ts_tree_cursor_goto_next_sibling(&cur));
    }
    ts_tree_cursor_delete(&cur);
    *out = k;
    return i;
}

static bool budget(W *w)
{
    if (w->stopped)
        return false;
    if (++w->nodes > MAX_NODES || w->out->n >= MAX_CMDS || w->ar->exhausted) {
        w->stopped = true;
        return false;
    }
    return true;
}

/* ---- output ---- */
static pcmd *push(W *w, pword *argv, size_t argc, unsigned det, const ctx *c)
{
    pcmds *o = w->out;
    if (o->n >= MAX_CMDS) {
        w->stopped = true;
        return NULL;
    }
    if (!AR_GROW(w->ar, o->v, o->alloc, o->n, 32)) {
        w->stopped = true;
        return NULL;
    }
    pcmd *r = &o->v[o->n++];
    memset(r, 0, sizeof *r);
    r->argv = argv;
    r->argc = argc;
    bool lookup = argc && !(argv[0].flags & W_DYN) && !strchr(argv[0].s, '/') &&
                  !shell_builtin(argv[0].s); /* found through $PATH */
    r->det = det | (c ? c->stdin_det : 0) |
             (w->st.path_changed || (lookup && w->p->path_in_workspace) ? D_PATH_CHANGED : 0) |
             (w->st.env_changed ? D_EXEC_ENV : 0) | (c && c->remote ? D_REMOTE : 0) |
             (reads_secret(w, argv, argc, det) ? D_SECRET_READ : 0);
    r->cwd_kind = w->st.cwd_kind;
    r->cwd = w->st.cwd;
    r->via = c && c->via ? c->via : "";
    r->depth = w->depth;
    if (c && c->nredir) {
        r->redir = (predir *)c->redir;
        r->nredir = c->nredir;
    }
    return r;
}

/* A pseudo command carrying only a detector (parse error, caps). */
static void push_det(W *w, unsigned det, const char *what, const ctx *c)
{
    pword *a = ar_alloc(w->ar, sizeof *a);
    if (!a)
        return;
    a->s = what;
    a->len = strlen(what);
    a->flags = 0;
    a->dynpos = a->len;
    pcmds *o = w->out;
    if (o->n >= MAX_CMDS) /* always room for the cap marker */
        o->n = MAX_CMDS - 1;
    bool was = w->stopped;
    w->stopped = false;
    push(w, a, 1, det, c);
    w->stopped = was;
}

static void push_det_text(W *w, unsigned det, const char *what, size_t n, const ctx *c)
{
    if (n > 80)
        n = 80;
    const char *t = ar_strndup(w->ar, what, n);
    push_det(w, det, t ? t : "(evaluation)", c);
}

static pword mkword(W *w, const char *s, size_t n, unsigned flags)
{
    pword r = {.s = ar_strndup(w->ar, s, n), .len = n, .flags = flags, .dynpos = n};
    if (!r.s) {
        r.s = "";
        r.len = r.dynpos = 0;
        r.flags |= W_DYN;
        w->stopped = true;
    }
    return r;
}

/* ---- variables (beval.c keeps them) ---- */
/* Is v's value an integer (a known number, or an unknown arithmetic result)? */
static bool var_is_int(const var *v)
{
    if (!v)
        return false;
    if (!v->val)
        return v->num;
    size_t i = v->len && (v->val[0] == '-' || v->val[0] == '+');
    if (i == v->len)
        return false;
    for (; i < v->len; i++)
        if (!isdigit((unsigned char)v->val[i]))
            return false;
    return true;
}

/* After a region that may or may not have run (if, loop body, `||`):
 * whatever it changed is unknown afterwards (an integer when it was one
 * either way). */
static void merge_uncertain(W *w, const wstate *before)
{
    wstate *st = &w->st;
    if (st->cwd_kind != before->cwd_kind ||
        (st->cwd != before->cwd && (!st->cwd || !before->cwd || strcmp(st->cwd, before->cwd))))
        st->cwd_kind = CWD_UNKNOWN;
    if (st->old_kind != before->old_kind || st->old != before->old)
        st->old_kind = CWD_UNKNOWN;
    size_t n = st->nvars;
    for (size_t i = before->nvars; i < n && i < st->nvars; i++) {
        const var *now = &st->vars[i];
        const var *was = NULL;
        size_t nl = strlen(now->name);
        for (size_t k = before->nvars; k-- > 0;)
            if (strlen(before->vars[k].name) == nl && !memcmp(before->vars[k].name, now->name, nl)) {
                was = &before->vars[k];
                break;
            }
        set_var(w, now->name, NULL, 0, now->fetch, var_is_int(now) && var_is_int(was));
    }
}

/* ---- words ---- */
static void unescape_unquoted(rstr *r, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n) {
            i++;
            if (s[i] == '\n')
                continue;
            rs_add(r, s + i, 1, RF_QUOTED);
        } else {
            rs_add(r, s + i, 1, 0);
        }
    }
}

static void unescape_dquoted(rstr *r, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n && strchr("\\\"$`\n", s[i + 1])) {
            i++;
            if (s[i] == '\n')
                continue;
        }
        rs_add(r, s + i, 1, RF_QUOTED);
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static void add_utf8(rstr *r, unsigned long cp, uint8_t fl)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | ((cp >> 18) & 0x07));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    rs_add(r, b, n, fl);
}

/* Backslash escapes of $'...', echo -e and printf. Returns bytes consumed
 * after the backslash; *stop for \c (printf %b / echo -e: stop output). */
static size_t c_escape(rstr *r, const char *s, size_t n, uint8_t fl, bool *stop)
{
    if (!n) {
        rs_add(r, "\\", 1, fl);
        return 0;
    }
    char ch = s[0], o;
    switch (ch) {
    case 'n':
        o = '\n';
        break;
    case 't':
        o = '\t';
        break;
    case 'r':
        o = '\r';
        break;
    case 'a':
        o = '\a';
        break;
    case 'b':
        o = '\b';
        break;
    case 'e':
    case 'E':
        o = 27;
        break;
    case 'f':
        o = '\f';
        break;
    case 'v':
        o = '\v';
        break;
    case '\\':
        o = '\\';
        break;
    case '\'':
        o = '\'';
        break;
    case '"':
        o = '"';
        break;
    case '?':
        o = '?';
        break;
    case 'c':
        if (stop)
            *stop = true;
        return 1;
    case 'x': {
        size_t i = 1;
        int v = 0;
        while (i < n && i < 3 && hexval((unsigned char)s[i]) >= 0)
            v = v * 16 + hexval((unsigned char)s[i++]);
        if (i == 1) {
            rs_add(r, "\\x", 2, fl);
            return 1;
        }
        char b = (char)v;
        rs_add(r, &b, 1, fl);
        return i;
    }
    case 'u':
    case 'U': {
        size_t i = 1, max = ch == 'u' ? 5 : 9;
        unsigned long v = 0;
        while (i < n && i < max && hexval((unsigned char)s[i]) >= 0)
            v = v * 16 + (unsigned long)hexval((unsigned char)s[i++]);
        if (i == 1 || v > 0x10FFFF) {
            rs_add(r, "\\", 1, fl);
            rs_add(r, s, 1, fl);
            return 1;
        }
        add_utf8(r, v, fl);
        return i;
    }
    default:
        if (ch >= '0' && ch <= '7') {
            size_t i = 0;
            int v = 0;
            if (ch == '0' && n > 1 && s[1] >= '0' && s[1] <= '7')
                i = 1; /* \0NNN */
            size_t end = i + 3;
            while (i < n && i < end && s[i] >= '0' && s[i] <= '7')
                v = v * 8 + (s[i++] - '0');
            char b = (char)v;
            rs_add(r, &b, 1, fl);
            return i;
        }
        rs_add(r, "\\", 1, fl);
        rs_add(r, s, 1, fl);
        return 1;
    }
    rs_add(r, &o, 1, fl);
    return 1;
}

static void ansi_c(rstr *r, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\')
            i += c_escape(r, s + i + 1, n - i - 1, RF_QUOTED, NULL);
        else
            rs_add(r, s + i, 1, RF_QUOTED);
    }
}

static void rs_node(W *w, TSNode n, rstr *r, bool quoted, const ctx *c);

/* Text bash evaluates (beval.c) that the engine cannot vouch for: a pseudo
 * command with the detector, shown as the text. */
static void hazard(W *w, const char *s, size_t n, const ctx *c) { push_det_text(w, D_DYN_EVAL, s, n, c); }

/* $((...)) and $[...]: the expression. */
static void check_arith(W *w, TSNode n, const ctx *c)
{
    size_t len;
    const char *s = ntext(w, n, &len);
    size_t a = len >= 5 && !strncmp(s, "$((", 3) ? 3 : len >= 3 && !strncmp(s, "$[", 2) ? 2 : 0;
    size_t b = a == 3 ? 2 : a == 2 ? 1 : 0;
    if (!a || len < a + b || !arith_ok(w, s + a, len - a - b, true, 0))
        hazard(w, s, len, c);
}

/* ${...} with more than a name: its subscript, offsets, ${!x}, ${x@P}. */
static void check_expansion(W *w, TSNode n, const ctx *c)
{
    size_t len;
    const char *s = ntext(w, n, &len);
    if (len < 3 || strncmp(s, "${", 2) || s[len - 1] != '}' || !expansion_ok(w, s + 2, len - 3))
        hazard(w, s, len, c);
}

/* The current directory's text for $PWD and ~+ (where: cwd_kind, cwd),
 * absolute when the workspace is known; false when it is unknown. */
static bool dir_text(W *w, rstr *r, int kind, const char *dir, uint8_t q)
{
    if (kind == CWD_UNKNOWN || !dir)
        return false;
    if (kind == CWD_OUTSIDE) {
        rs_add(r, dir, strlen(dir), q);
        return true;
    }
    const char *ws = w->p->workspace;
    rs_add(r, ws ? ws : ".", ws ? strlen(ws) : 1, q);
    if (*dir) {
        if (!ws || strcmp(ws, "/"))
            rs_add(r, "/", 1, q);
        rs_add(r, dir, strlen(dir), q);
    }
    return true;
}

/* $HOME (and ~): its value in this string, else the one commands see. */
static void home_text(W *w, rstr *r, uint8_t q)
{
    const var *v = get_var(w, "HOME", 4);
    if (v && v->val)
        rs_add(r, v->val, v->len, (uint8_t)(q | RF_HOME));
    else if (v)
        rs_add(r, "~", 1, (uint8_t)(q | RF_HOME | RF_DYN));
    else if (w->p->home)
        rs_add(r, w->p->home, strlen(w->p->home), (uint8_t)(q | RF_HOME));
    else
        rs_add(r, "~", 1, (uint8_t)(q | RF_HOME));
}

/* Append the value of variable `name` (n bytes); src/srclen is the source
 * text shown when the value is unknown. */
static void rs_var(W *w, rstr *r, const char *name, size_t n, const char *src, size_t srclen, bool quoted)
{
    uint8_t q = quoted ? RF_QUOTED : RF_SPLIT;
    if (!quoted && w->ifs_changed) {
        /* with another IFS, the words an expansion makes are not known */
        rs_add(r, src, srclen, RF_SPLIT | RF_DYN);
        return;
    }
    if (n == 4 && !memcmp(name, "HOME", 4)) {
        home_text(w, r, q);
        return;
    }
    if (n == 3 && !memcmp(name, "PWD", 3) && !get_var(w, name, n) &&
        dir_text(w, r, w->st.cwd_kind, w->st.cwd, q))
        return;
    if (n == 6 && !memcmp(name, "OLDPWD", 6) && !get_var(w, name, n) &&
        dir_text(w, r, w->st.old_kind, w->st.old, q))
        return;
    if (n == 1 && isdigit((unsigned char)name[0]) && name[0] != '0' && w->st.pos) {
        size_t i = (size_t)(name[0] - '1');
        if (i < w->st.npos) {
            const pword *pw = &w->st.pos[i];
            if (!(pw->flags & W_DYN)) {
                rs_add(r, pw->s, pw->len, q);
                r->wflags |= pw->flags & (W_FETCH | W_TILDE);
                return;
            }
        } else {
            return; /* unset positional: empty */
        }
    }
    if (n == 1 && (name[0] == '@' || name[0] == '*') && w->st.pos) {
        bool dyn = false;
        for (size_t i = 0; i < w->st.npos; i++)
            dyn |= (w->st.pos[i].flags & W_DYN) != 0;
        if (!dyn) {
            for (size_t i = 0; i < w->st.npos; i++) {
                if (i)
                    rs_add(r, " ", 1, quoted && name[0] == '*' ? RF_QUOTED : RF_SPLIT);
                rs_add(r, w->st.pos[i].s, w->st.pos[i].len, q);
            }
            return;
        }
    }
    const var *v = get_var(w, name, n);
    if (v && v->val) {
        rs_add(r, v->val, v->len, q);
        return;
    }
    if (v && v->fetch)
        r->wflags |= W_FETCH;
    bool num = v ? v->num : int_special(name, n);
    rs_add(r, src, srclen, (uint8_t)(q | RF_DYN | (num ? RF_NUM : 0)));
}

static void rs_children(W *w, TSNode n, rstr *r, bool quoted, const ctx *c)
{
    kid *k;
    size_t nk = kids(w, n, &k);
    for (size_t i = 0; i < nk; i++)
        if (ts_node_is_named(k[i].n))
            rs_node(w, k[i].n, r, quoted, c);
}

/* A substitution: walk its commands; its static output, if any, is the value. */
static void rs_subst(W *w, TSNode n, rstr *r, bool quoted, const ctx *c, bool process)
{
    size_t first = w->out->n;
    ctx sc = *c;
    sc.stdin_text = NULL;
    sc.stdin_len = 0;
    sc.stdin_det = 0;
    sc.redir = NULL;
    sc.nredir = 0;
    sc.concurrent = process;
    wstate saved = w->st; /* a substitution runs in a subshell */
    const char *out = NULL;
    size_t olen = 0;
    w->depth++;
    if (w->depth > TXBOX_POLICY_MAX_DEPTH) {
        push_det(w, D_TOO_DEEP, "(substitution)", c);
    } else {
        kid *k;
        size_t nk = kids(w, n, &k);
        size_t nstmt = 0;
        for (size_t i = 0; i < nk; i++) {
            if (!ts_node_is_named(k[i].n) || is(k[i].n, "comment"))
                continue;
            if (k[i].field && !strcmp(k[i].field, "redirect"))
                continue;
            nstmt++;
            out = walk_node(w, k[i].n, &sc, &olen);
        }
        if (nstmt != 1)
            out = NULL;
    }
    w->depth--;
    w->st = saved;
    unsigned fl = W_SUBST;
    for (size_t i = first; i < w->out->n; i++) {
        const pcmd *pc = &w->out->v[i];
        if (pc->argc && !(pc->argv[0].flags & W_DYN) &&
            strlist_has(&w->p->fetchers, basename_of(pc->argv[0].s)))
            fl |= W_FETCH;
        if (pc->det & (D_FETCH_IN | D_REMOTE_CODE))
            fl |= W_FETCH;
    }
    r->wflags |= fl;
    uint8_t q = quoted ? RF_QUOTED : RF_SPLIT;
    if (process) {
        rs_add(r, "/dev/fd/63", 10, RF_QUOTED);
    } else if (out) {
        while (olen && out[olen - 1] == '\n')
            olen--;
        rs_add(r, out, olen, q);
    } else {
        size_t sl;
        const char *s = ntext(w, n, &sl);
        rs_add(r, s, sl, (uint8_t)(q | RF_DYN));
    }
}

static void rs_node(W *w, TSNode n, rstr *r, bool quoted, const ctx *c)
{
    if (!budget(w))
        return;
    size_t len;
    const char *s = ntext(w, n, &len);
    const char *t = ts_node_type(n);
    if (!strcmp(t, "word")) {
        if (quoted)
            rs_add(r, s, len, RF_QUOTED);
        else
            unescape_unquoted(r, s, len);
    } else if (!strcmp(t, "raw_string")) {
        r->had_quotes = true;
        if (len >= 2)
            rs_add(r, s + 1, len - 2, RF_QUOTED);
    } else if (!strcmp(t, "ansi_c_string")) {
        r->had_quotes = true;
        if (len >= 3)
            ansi_c(r, s + 2, len - 3);
    } else if (!strcmp(t, "string")) {
        r->had_quotes = true;
        /* the bytes between the quotes: string_content and expansions */
        uint32_t pos = ts_node_start_byte(n) + 1, end = ts_node_end_byte(n);
        if (end > pos && w->src[end - 1] == '"')
            end--;
        kid *k;
        size_t nk = kids(w, n, &k);
        for (size_t i = 0; i < nk; i++) {
            if (!ts_node_is_named(k[i].n))
                continue;
            uint32_t a = ts_node_start_byte(k[i].n), b = ts_node_end_byte(k[i].n);
            if (a > pos && a <= end)
                unescape_dquoted(r, w->src + pos, a - pos);
            if (is(k[i].n, "string_content"))
                unescape_dquoted(r, w->src + a, b - a);
            else
                rs_node(w, k[i].n, r, true, c);
            pos = b;
        }
        if (end > pos)
            unescape_dquoted(r, w->src + pos, end - pos);
    } else if (!strcmp(t, "translated_string")) {
        rs_children(w, n, r, quoted, c);
    } else if (!strcmp(t, "concatenation")) {
        rs_children(w, n, r, quoted, c);
    } else if (!strcmp(t, "simple_expansion")) {
        if (len >= 2)
            rs_var(w, r, s + 1, len - 1, s, len, quoted);
    } else if (!strcmp(t, "expansion")) {
        /* ${name} only; any operator makes the value unknown */
        kid *k;
        size_t nk = kids(w, n, &k);
        size_t named = 0;
        TSNode vn = {0};
        bool plain = true;
        for (size_t i = 0; i < nk; i++) {
            if (ts_node_is_named(k[i].n)) {
                named++;
                vn = k[i].n;
            } else {
                const char *ty = ts_node_type(k[i].n);
                if (strcmp(ty, "${") && strcmp(ty, "}"))
                    plain = false;
            }
        }
        if (plain && named == 1 && (is(vn, "variable_name") || is(vn, "special_variable_name"))) {
            size_t vl;
            const char *vs = ntext(w, vn, &vl);
            rs_var(w, r, vs, vl, s, len, quoted);
        } else {
            walk_subst_only(w, n, c);
            for (size_t i = 0; i < nk; i++)
                if (is(k[i].n, "variable_name")) {
                    size_t vl;
                    const char *vs = ntext(w, k[i].n, &vl);
                    const var *v = get_var(w, vs, vl);
                    if (v && v->fetch)
                        r->wflags |= W_FETCH;
                }
            check_expansion(w, n, c);
            bool length = len > 4 && s[2] == '#'; /* ${#x}: a number */
            rs_add(r, s, len, (uint8_t)((quoted ? RF_QUOTED : RF_SPLIT) | RF_DYN | (length ? RF_NUM : 0)));
        }
    } else if (!strcmp(t, "command_substitution")) {
        rs_subst(w, n, r, quoted, c, false);
    } else if (!strcmp(t, "process_substitution")) {
        rs_subst(w, n, r, quoted, c, true);
    } else if (!strcmp(t, "arithmetic_expansion")) {
        walk_subst_only(w, n, c);
        check_arith(w, n, c);
        rs_add(r, s, len, (uint8_t)((quoted ? RF_QUOTED : RF_SPLIT) | RF_DYN | RF_NUM));
    } else if (!strcmp(t, "number") || !strcmp(t, "brace_expression") || !strcmp(t, "extglob_pattern") ||
               !strcmp(t, "regex") || !strcmp(t, "variable_name") || !strcmp(t, "special_variable_name") ||
               !strcmp(t, "test_operator")) {
        if (ts_node_named_child_count(n) && !is(n, "brace_expression")) {
            walk_subst_only(w, n, c);
            rs_add(r, s, len, (uint8_t)((quoted ? RF_QUOTED : 0) | RF_DYN));
        } else {
            rs_add(r, s, len, quoted ? RF_QUOTED : 0);
        }
    } else {
        walk_subst_only(w, n, c);
        rs_add(r, s, len, (uint8_t)((quoted ? RF_QUOTED : 0) | RF_DYN));
    }
}

/* ---- brace expansion, field splitting, word flags ---- */
typedef struct wlist {
    pword *v;
    size_t n, alloc;
} wlist;

static void wl_add(W *w, wlist *l, pword pw)
{
    if (l->n >= MAX_WORDS) {
        w->stopped = true;
        return;
    }
    if (!AR_GROW(w->ar, l->v, l->alloc, l->n, 8)) {
        w->stopped = true;
        return;
    }
    l->v[l->n++] = pw;
}

/* One field [a, b) of r as a word. */
static void field_word(W *w, const rstr *r, size_t a, size_t b, wlist *out)
{
    pword pw = mkword(w, r->s ? r->s + a : "", b - a, r->wflags & (W_FETCH | W_SUBST));
    bool num = true;
    for (size_t i = a; i < b; i++) {
        uint8_t f = r->f[i];
        if ((f & RF_DYN) && !(pw.flags & W_DYN)) {
            pw.flags |= W_DYN;
            pw.dynpos = i - a;
        }
        if (f & RF_DYN) {
            num &= (f & RF_NUM) != 0;
            if (!(f & RF_QUOTED))
                pw.flags |= W_UNQDYN;
        }
        if (!(f & (RF_QUOTED | RF_DYN)) && strchr("*?[", r->s[i]))
            pw.flags |= W_GLOB;
    }
    if ((pw.flags & W_DYN) && num)
        pw.flags |= W_NUM;
    if (b > a && (r->f[a] & RF_HOME))
        pw.flags |= W_TILDE;
    if (r->wflags & W_TILDE && a == 0)
        pw.flags |= W_TILDE;
    wl_add(w, out, pw);
}

static void split_fields(W *w, const rstr *r, wlist *out)
{
    size_t i = 0, start = 0;
    bool infield = false, any = false;
    for (i = 0; i < r->len; i++) {
        bool ifs = (r->f[i] & RF_SPLIT) && !(r->f[i] & RF_DYN) &&
                   (r->s[i] == ' ' || r->s[i] == '\t' || r->s[i] == '\n');
        if (ifs) {
            if (infield)
                field_word(w, r, start, i, out);
            infield = false;
            any = true;
        } else if (!infield) {
            infield = true;
            start = i;
        }
    }
    if (infield)
        field_word(w, r, start, r->len, out);
    else if (!any && r->had_quotes)
        field_word(w, r, 0, 0, out);
    else if (!any && r->len == 0 && (r->wflags & W_SUBST)) {
        /* an unquoted substitution with an empty value: no word at all */
    }
}

static bool plain_at(const rstr *r, size_t i, char ch)
{
    return i < r->len && r->s[i] == ch && !(r->f[i] & (RF_QUOTED | RF_DYN | RF_SPLIT));
}

/* ---- tilde expansion ---- */
enum { TILDE_PREFIX, TILDE_WORD, TILDE_VALUE };

/* The text of tilde-prefix ~NAME (name: n bytes) into o, as bash expands
 * it: ~ $HOME, ~+ $PWD, ~- $OLDPWD, ~USER that user's home; false to
 * leave the prefix as it is (no such user). */
static bool tilde_text(W *w, const char *name, size_t n, rstr *o)
{
    const uint8_t q = RF_QUOTED | RF_HOME; /* no splitting or globbing of the result */
    if (n == 0) {
        home_text(w, o, RF_QUOTED);
        return true;
    }
    if ((n == 1 && name[0] == '+') || (n == 1 && name[0] == '-')) {
        bool plus = name[0] == '+';
        if (!dir_text(w, o, plus ? w->st.cwd_kind : w->st.old_kind, plus ? w->st.cwd : w->st.old, q))
            rs_add(o, name - 1, n + 1, (uint8_t)(q | RF_DYN));
        return true;
    }
    size_t d = name[0] == '+' || name[0] == '-';
    if (d < n && isdigit((unsigned char)name[d])) {
        rs_add(o, name - 1, n + 1, (uint8_t)(q | RF_DYN)); /* the directory stack */
        return true;
    }
    char user[64];
    if (n >= sizeof user)
        return false;
    memcpy(user, name, n);
    user[n] = 0;
    struct passwd pw, *res = NULL;
    char buf[1024];
    if (getpwnam_r(user, &pw, buf, sizeof buf, &res) != 0 || !res || !pw.pw_dir || pw.pw_dir[0] != '/')
        return false;
    char norm[PATH_MAX];
    if (strlen(pw.pw_dir) + 2 >= sizeof norm)
        return false;
    norm_abs(pw.pw_dir, norm);
    rs_add(o, norm, strlen(norm), q);
    return true;
}

/* Tilde expansion of r into o: the prefix of the word, and in an
 * assignment's value (or, with TILDE_WORD, an argument shaped like one:
 * NAME=...) after the '=' and after each ':'. Only unquoted literal text
 * forms a tilde-prefix, up to the first unquoted '/' (or ':'). */
static void tilde_expand(W *w, const rstr *r, rstr *o, int mode)
{
    o->wflags = r->wflags;
    o->had_quotes = r->had_quotes;
    size_t start = 0;
    bool colons = mode == TILDE_VALUE;
    if (mode == TILDE_WORD && r->len && (isalpha((unsigned char)r->s[0]) || r->s[0] == '_') && !r->f[0]) {
        size_t k = 1;
        while (k < r->len && !r->f[k] && (isalnum((unsigned char)r->s[k]) || r->s[k] == '_'))
            k++;
        if (k < r->len && r->s[k] == '=' && !r->f[k]) {
            start = k + 1;
            colons = true;
        }
    }
    if (start)
        rs_add_flags(o, r->s, r->f, start);
    for (size_t i = start; i < r->len;) {
        bool at_start = i == start || (colons && r->s[i - 1] == ':' && !r->f[i - 1]);
        if (at_start && r->s[i] == '~' && !r->f[i]) {
            size_t j = i + 1;
            bool plain = true;
            while (j < r->len && !((r->s[j] == '/' || (colons && r->s[j] == ':')) && !r->f[j])) {
                plain &= !r->f[j];
                j++;
            }
            if (plain && tilde_text(w, r->s + i + 1, j - i - 1, o)) {
                i = j;
                continue;
            }
        }
        rs_add_flags(o, r->s + i, r->f + i, 1);
        i++;
    }
}

/* Brace expansion of the first {a,b} / {x..y} in r; appends results. */
static void brace_expand(W *w, const rstr *r, wlist *out, unsigned *count, int tmode)
{
    for (size_t i = 0; i < r->len; i++) {
        if (!plain_at(r, i, '{') || (i > 0 && plain_at(r, i - 1, '$')))
            continue;
        int depth = 0;
        size_t commas[MAX_BRACE + 1], nc = 0, close = 0;
        for (size_t j = i; j < r->len; j++) {
            if (plain_at(r, j, '{'))
                depth++;
            else if (plain_at(r, j, '}') && --depth == 0) {
                close = j;
                break;
            } else if (depth == 1 && plain_at(r, j, ',') && nc < MAX_BRACE)
                commas[nc++] = j;
        }
        if (!close)
            break;
        /* the pieces between { , , } */
        size_t bounds[MAX_BRACE + 2];
        size_t nb = 0;
        bounds[nb++] = i;
        for (size_t k = 0; k < nc; k++)
            bounds[nb++] = commas[k];
        bounds[nb++] = close;
        char seq_lo[32], seq_hi[32];
        bool seq = false;
        long lo = 0, hi = 0;
        if (nc == 0) {
            /* {x..y} with numbers or single letters */
            const char *in = r->s + i + 1;
            size_t inl = close - i - 1;
            const char *dd = memmem(in, inl, "..", 2);
            if (dd && (size_t)(dd - in) < sizeof seq_lo && inl - (size_t)(dd - in) - 2 < sizeof seq_hi) {
                size_t l1 = (size_t)(dd - in), l2 = inl - l1 - 2;
                memcpy(seq_lo, in, l1);
                seq_lo[l1] = 0;
                memcpy(seq_hi, dd + 2, l2);
                seq_hi[l2] = 0;
                char *e1, *e2;
                lo = strtol(seq_lo, &e1, 10);
                hi = strtol(seq_hi, &e2, 10);
                if (l1 && l2 && !*e1 && !*e2)
                    seq = true;
                else if (l1 == 1 && l2 == 1 && isalpha((unsigned char)seq_lo[0]) &&
                         isalpha((unsigned char)seq_hi[0])) {
                    seq = true;
                    lo = seq_lo[0];
                    hi = seq_hi[0];
                    seq_lo[1] = 'c'; /* marks letters */
                }
            }
            if (!seq)
                continue;
        }
        if (seq) {
            long step = lo <= hi ? 1 : -1;
            for (long v = lo;; v += step) {
                if (++*count > MAX_BRACE) {
                    w->stopped = true;
                    return;
                }
                rstr x = {0};
                x.wflags = r->wflags;
                x.had_quotes = r->had_quotes;
                rs_add(&x, r->s, i, 0);
                memcpy(x.f, r->f, i);
                char num[32];
                int nl = seq_lo[1] == 'c' ? snprintf(num, sizeof num, "%c", (char)v)
                                          : snprintf(num, sizeof num, "%ld", v);
                rs_add(&x, num, (size_t)nl, 0);
                size_t off = x.len;
                rs_add(&x, r->s + close + 1, r->len - close - 1, 0);
                memcpy(x.f + off, r->f + close + 1, r->len - close - 1);
                brace_expand(w, &x, out, count, tmode);
                rs_free(&x);
                if (v == hi)
                    break;
            }
            return;
        }
        for (size_t k = 0; k + 1 < nb; k++) {
            if (++*count > MAX_BRACE) {
                w->stopped = true;
                return;
            }
            rstr x = {0};
            x.wflags = r->wflags;
            x.had_quotes = r->had_quotes;
            size_t a = bounds[k] + 1, b = bounds[k + 1];
            rs_add(&x, r->s, i, 0);
            if (i)
                memcpy(x.f, r->f, i);
            size_t off = x.len;
            rs_add(&x, r->s + a, b - a, 0);
            if (b > a)
                memcpy(x.f + off, r->f + a, b - a);
            off = x.len;
            rs_add(&x, r->s + close + 1, r->len - close - 1, 0);
            if (r->len > close + 1)
                memcpy(x.f + off, r->f + close + 1, r->len - close - 1);
            if (x.len == 0 && !x.had_quotes)
                x.had_quotes = false;
            brace_expand(w, &x, out, count, tmode);
            rs_free(&x);
        }
        return;
    }
    if (!r->len || !memchr(r->s, '~', r->len)) {
        split_fields(w, r, out);
        return;
    }
    rstr t = {0};
    tilde_expand(w, r, &t, tmode);
    split_fields(w, &t, out);
    rs_free(&t);
}

/* Resolve an argument node to zero or more words. */
static void resolve_arg(W *w, TSNode n, wlist *out, const ctx *c)
{
    rstr r = {0};
    rs_node(w, n, &r, false, c);
    unsigned count = 0;
    brace_expand(w, &r, out, &count, TILDE_WORD);
    rs_free(&r);
}

/* Resolve to one string (assignment values, here-strings): no splitting. */
static pword resolve_one(W *w, TSNode n, const ctx *c, bool as_quoted, int tmode)
{
    rstr r0 = {0}, r = {0};
    r0.had_quotes = true;
    rs_node(w, n, &r0, as_quoted, c);
    if (r0.len && memchr(r0.s, '~', r0.len)) {
        tilde_expand(w, &r0, &r, tmode);
        rs_free(&r0);
    } else {
        r = r0;
    }
    wlist l = {0};
    for (size_t i = 0; i < r.len; i++)
        r.f[i] &= (uint8_t)~RF_SPLIT;
    field_word(w, &r, 0, r.len, &l);
    rs_free(&r);
    return l.n ? l.v[0] : mkword(w, "", 0, W_DYN);
}

/* ---- walking statements ---- */
static void walk_subst_only(W *w, TSNode n, const ctx *c)
{
    if (!budget(w) || w->node_depth > MAX_NODE_DEPTH)
        return;
    kid *k;
    size_t nk = kids(w, n, &k);
    w->node_depth++;
    for (size_t i = 0; i < nk; i++) {
        TSNode ch = k[i].n;
        if (!ts_node_is_named(ch))
            continue;
        if (is(ch, "command_substitution") || is(ch, "process_substitution")) {
            rstr r = {0};
            rs_subst(w, ch, &r, true, c, is(ch, "process_substitution"));
            rs_free(&r);
        } else if (is(ch, "redirected_statement") || is(ch, "command") || is(ch, "compound_statement") ||
                   is(ch, "subshell")) {
            walk_node(w, ch, c, NULL);
        } else {
            walk_subst_only(w, ch, c);
            if (is(ch, "arithmetic_expansion"))
                check_arith(w, ch, c);
            else if (is(ch, "expansion"))
                check_expansion(w, ch, c);
        }
    }
    w->node_depth--;
}

static const char *walk_seq(W *w, TSNode n, const ctx *c, size_t *olen)
{
    kid *k;
    size_t nk = kids(w, n, &k);
    const char *out = NULL;
    size_t nstmt = 0;
    for (size_t i = 0; i < nk && !w->stopped; i++) {
        TSNode ch = k[i].n;
        if (!ts_node_is_named(ch) || is(ch, "comment"))
            continue;
        ctx sc = *c;
        if (i + 1 < nk && !ts_node_is_named(k[i + 1].n) && is(k[i + 1].n, "&"))
            sc.concurrent = true;
        nstmt++;
        out = walk_node(w, ch, &sc, olen);
    }
    return nstmt == 1 ? out : NULL;
}

static const char *walk_conditional_seq(W *w, TSNode n, const ctx *c)
{
    wstate before = w->st;
    walk_seq(w, n, c, NULL);
    merge_uncertain(w, &before);
    return NULL;
}

static bool fetcher_in(W *w, size_t first)
{
    for (size_t i = first; i < w->out->n; i++) {
        const pcmd *pc = &w->out->v[i];
        if (pc->argc && !(pc->argv[0].flags & W_DYN) &&
            strlist_has(&w->p->fetchers, basename_of(pc->argv[0].s)))
            return true;
        if (pc->det & D_FETCH_IN)
            return true;
    }
    return false;
}

/* ---- secrets ---- */

/* A directory where a glob may find a secret the `secrets:` globs cannot
 * see in the pattern's text (~/.ssh/ *, /etc/sha*, /proc/self/env*):
 * homes, /etc, /proc, secret mounts, the root. dir: normalized. */
static bool secret_dir(const txbox_policy *p, const char *dir)
{
    static const char *const roots[] = {"/root", "/home",        "/etc",
                                        "/proc", "/run/secrets", "/var/run/secrets"};
    if (dir[0] == '~' || !strcmp(dir, "/") || !*dir)
        return true;
    const char *homes[] = {p->home, p->home_real};
    for (size_t i = 0; i < ARRAY_SIZE(homes); i++) {
        size_t l = homes[i] ? strlen(homes[i]) : 0;
        if (l && !strncmp(dir, homes[i], l) && (dir[l] == '/' || !dir[l]))
            return true;
    }
    for (size_t i = 0; i < ARRAY_SIZE(roots); i++) {
        size_t l = strlen(roots[i]);
        if (!strncmp(dir, roots[i], l) && (dir[l] == '/' || !dir[l]))
            return true;
    }
    return false;
}

/* Does a recursive read of dir (normalized) reach a secret_dir: the root,
 * one of them, or a directory above one (/var above /var/run/secrets)? */
static bool secret_tree(const txbox_policy *p, const char *dir)
{
    static const char *const above[] = {"/run", "/var", "/var/run"};
    if (secret_dir(p, dir))
        return true;
    for (size_t i = 0; i < ARRAY_SIZE(above); i++)
        if (!strcmp(dir, above[i]))
            return true;
    return false;
}

/* "/a/../b" -> "/b", "~/a/./b" -> "~/a/b"; false when s is relative or too long */
static bool norm_path(const char *s, char *out, size_t size)
{
    if (strlen(s) + 3 >= size)
        return false;
    if (s[0] == '/') {
        norm_abs(s, out);
        return true;
    }
    if (s[0] == '~' && (s[1] == '/' || !s[1])) {
        out[0] = '~';
        norm_abs(s[1] ? s + 1 : "/", out + 1);
        return true;
    }
    return false;
}

/* A relative path under an unknown directory: a secret when it is one
 * under any directory the `secrets:` globs name (credentials under .aws). */
static bool secret_anywhere(W *w, const char *rel)
{
    const strlist *l = &w->p->secrets;
    for (size_t i = 0; i < l->n; i++) {
        const char *sl = strrchr(l->v[i], '/');
        if (!sl)
            continue;
        const char *d = l->v[i];
        while (*d == '*')
            d++;
        char buf[PATH_MAX];
        if ((size_t)snprintf(buf, sizeof buf, "%.*s/%s", (int)(sl - d > 0 ? sl - d : 0), d, rel) >=
            sizeof buf)
            return true;
        if (strlist_glob(l, buf))
            return true;
    }
    return false;
}

/* Does word pw name a secret (the policy's `secrets:` globs, over its text
 * and over the path it names from the current directory, normalized), or
 * may it, as a glob, expand to one? An option's value (--file=PATH) counts. */
static bool word_secret_r(W *w, const pword *pw, bool recursive)
{
    const txbox_policy *p = w->p;
    const char *s = pw->s;
    if (policy_secret_text(p, s))
        return true;
    if (s[0] == '-') {
        const char *eq = strchr(s, '=');
        if (!eq)
            return false;
        s = eq + 1;
    }
    if (!*s)
        return false;
    char buf[PATH_MAX], norm[PATH_MAX];
    const wstate *st = &w->st;
    const char *base = NULL;
    if (s[0] == '/' || s[0] == '~')
        base = "";
    else if (st->cwd_kind == CWD_INSIDE && !w->p->workspace)
        return false; /* in a workspace whose place is not known: its names are in the text */
    else if (st->cwd_kind == CWD_INSIDE)
        base = w->p->workspace;
    else if (st->cwd_kind == CWD_OUTSIDE && st->cwd && (st->cwd[0] == '/' || st->cwd[0] == '~'))
        base = st->cwd;
    if (!base) /* a directory not known: it may be one the sandbox hides */
        return (pw->flags & W_GLOB) || p->hidden.n || secret_anywhere(w, s);
    int n = st->cwd_kind == CWD_INSIDE && *base
                ? snprintf(buf, sizeof buf, "%s/%s/%s", base, st->cwd ? st->cwd : "", s)
                : snprintf(buf, sizeof buf, "%s%s%s", base, *base ? "/" : "", s);
    if (n < 0 || (size_t)n >= sizeof buf || !norm_path(buf, norm, sizeof norm))
        return true; /* too long to tell: fail closed */
    if (policy_secret_text(p, norm) || in_other_home(p, norm))
        return true;
    if ((pw->flags & W_SYNTH) || recursive) {
        /* find START -exec cat {}, grep -r x START: every file under START */
        if (ws_rel(p, norm))
            return false;
        if (pw->flags & W_SYNTH) {
            char *br = strstr(norm, "{}");
            if (br)
                *br = 0;
            size_t l = strlen(norm);
            while (l > 1 && norm[l - 1] == '/')
                norm[--l] = 0;
        }
        return secret_tree(p, norm);
    }
    if (!(pw->flags & (W_GLOB | W_DYN)))
        return false;
    /* a glob, or a word partly unknown ($F, {args}): what its static part
     * names, up to the directory where it stops being known */
    char *g = strpbrk(norm, (pw->flags & W_DYN) ? "*?[$`{" : "*?[");
    if (!g)
        return false;
    while (g > norm && *g != '/')
        g--;
    *g = 0;
    if (ws_rel(p, norm))
        return false; /* inside the workspace: its names are in the text */
    return secret_dir(p, norm) || policy_secret_text(p, norm);
}

static bool word_secret(W *w, const pword *pw) { return word_secret_r(w, pw, false); }

/* Does prog read every file under its directory operands (grep -r, rg)? */
static bool recursive_reader(const char *prog, const pword *argv, size_t argc)
{
    if (!strcmp(prog, "rg") || !strcmp(prog, "ag") || !strcmp(prog, "ack"))
        return true;
    if (strcmp(prog, "grep") && strcmp(prog, "egrep") && strcmp(prog, "fgrep") && strcmp(prog, "zgrep"))
        return false;
    for (size_t i = 1; i < argc; i++) {
        const char *a = argv[i].s;
        if (a[0] == '-' && a[1] != '-' && strpbrk(a, "rRd"))
            return true;
        if (!strncmp(a, "--recursive", 5) || !strncmp(a, "--dereference-recursive", 5) ||
            !strncmp(a, "--directories", 5))
            return true;
    }
    return false;
}

/* Programs that print only their arguments' text (or names), never what
 * a file holds: a secret path there reads nothing. */
static bool names_only(const char *prog)
{
    static const char *const v[] = {"echo",     "printf",   "basename", "dirname", "test", "[",
                                    "realpath", "readlink", "ls",       "stat",    "cd",   "pushd",
                                    "type",     "which",    "command",  "mkdir",   "touch"};
    for (size_t i = 0; i < ARRAY_SIZE(v); i++)
        if (!strcmp(prog, v[i]))
            return true;
    return false;
}

/* Does simple command argv read a secret: a secret path (a file it reads),
 * or the environment (env, printenv alone or with a secret-looking name)? */
static bool reads_secret(W *w, const pword *argv, size_t argc, unsigned det)
{
    if (!argc || (argv[0].flags & W_DYN))
        return false;
    const char *prog = basename_of(argv[0].s);
    if (strlist_has(&w->p->secret_programs, prog) && !(det & D_WRAPPER)) {
        /* printenv NAME...: only those; anything else prints them all */
        bool names = argc > 1;
        for (size_t i = 1; i < argc && names; i++) {
            const char *a = argv[i].s;
            names =
                !(argv[i].flags & W_DYN) && (isalpha((unsigned char)a[0]) || a[0] == '_') &&
                strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == argv[i].len &&
                env_name_passes(a, argv[i].len);
        }
        if (!names)
            return true;
    }
    if (!strcmp(prog, "set") && argc == 1)
        return true; /* prints every variable */
    if (names_only(prog)) {
        /* echo "$GITHUB_TOKEN": a secret-looking variable's value */
        for (size_t i = 1; i < argc; i++)
            if ((argv[i].flags & W_DYN) && strchr(argv[i].s, '$') && policy_secret_text(w->p, argv[i].s))
                return true;
        return false;
    }
    bool rec = recursive_reader(prog, argv, argc);
    for (size_t i = 1; i < argc; i++)
        if (word_secret_r(w, &argv[i], rec && argv[i].s[0] != '-'))
            return true;
    return false;
}

static bool secret_in(W *w, size_t first)
{
    for (size_t i = first; i < w->out->n; i++) {
        const pcmd *pc = &w->out->v[i];
        if (pc->det & D_SECRET_IN)
            return true;
        if (!pc->argc)
            continue;
        if (!(pc->argv[0].flags & W_DYN) && strlist_has(&w->p->secret_programs, basename_of(pc->argv[0].s)))
            return true;
        for (size_t j = 1; j < pc->argc; j++)
            if (word_secret(w, &pc->argv[j]))
                return true;
    }
    return false;
}

/* Walk the stages of a pipeline, each with its upstream facts. */
static const char *walk_stages(W *w, kid *k, size_t nk, const ctx *c, const char *up, size_t uplen,
                               unsigned updet, size_t *olen)
{
    const char *out = up;
    size_t outlen = uplen;
    for (size_t i = 0; i < nk && !w->stopped; i++) {
        if (!ts_node_is_named(k[i].n) || is(k[i].n, "comment"))
            continue;
        ctx sc = *c;
        sc.concurrent = true;
        sc.stdin_text = out;
        sc.stdin_len = outlen;
        sc.stdin_det = (c->stdin_det * (out == up && i == 0)) | updet;
        size_t first = w->out->n;
        wstate saved = w->st;
        outlen = 0;
        out = walk_node(w, k[i].n, &sc, &outlen);
        w->st = saved;
        if (fetcher_in(w, first))
            updet |= D_FETCH_IN;
        if (secret_in(w, first))
            updet |= D_SECRET_IN;
    }
    if (olen)
        *olen = outlen;
    return out;
}

static const char *walk_pipeline(W *w, TSNode n, const ctx *c, size_t *olen)
{
    kid *k;
    size_t nk = kids(w, n, &k);
    return walk_stages(w, k, nk, c, c->stdin_text, c->stdin_len, 0, olen);
}

static void add_redirs(W *w, const ctx *c, ctx *nc, const predir *add, size_t nadd)
{
    if (!nadd)
        return;
    predir *v = ar_alloc(w->ar, (c->nredir + nadd) * sizeof *v);
    if (!v) {
        w->stopped = true;
        return;
    }
    if (c->nredir)
        memcpy(v, c->redir, c->nredir * sizeof *v);
    memcpy(v + c->nredir, add, nadd * sizeof *v);
    nc->redir = v;
    nc->nredir = c->nredir + nadd;
}

/* A file_redirect node as a predir. */
static bool file_redirect(W *w, TSNode n, const ctx *c, predir *out)
{
    kid *k;
    size_t nk = kids(w, n, &k);
    predir d = {.op = RD_OUT, .fd = -1};
    bool have_dest = false;
    for (size_t i = 0; i < nk; i++) {
        TSNode ch = k[i].n;
        if (k[i].field && !strcmp(k[i].field, "descriptor")) {
            size_t l;
            const char *s = ntext(w, ch, &l);
            d.fd = (int)strtol(s, NULL, 10);
        } else if (k[i].field && !strcmp(k[i].field, "destination")) {
            if (have_dest)
                continue;
            d.target = resolve_one(w, ch, c, false, TILDE_PREFIX);
            have_dest = true;
        } else if (!ts_node_is_named(ch)) {
            const char *t = ts_node_type(ch);
            if (!strcmp(t, "<"))
                d.op = RD_IN;
            else if (!strcmp(t, ">>") || !strcmp(t, "&>>"))
                d.op = RD_APPEND;
            else if (!strcmp(t, "<>"))
                d.op = RD_INOUT;
            else if (!strcmp(t, ">&") || !strcmp(t, "<&") || !strcmp(t, ">&-") || !strcmp(t, "<&-"))
                d.op = RD_DUP;
            else
                d.op = RD_OUT;
        } else if (!have_dest) {
            d.target = resolve_one(w, ch, c, false, TILDE_PREFIX);
            have_dest = true;
        }
    }
    if (!have_dest)
        d.target = mkword(w, "", 0, 0);
    if (d.op == RD_DUP) {
        /* >&file (not a number or -) is a file redirection of both streams */
        const char *s = d.target.s;
        bool num = d.target.len > 0 && !(d.target.flags & W_DYN);
        for (size_t i = 0; i < d.target.len; i++)
            if (!isdigit((unsigned char)s[i]) && !(s[i] == '-' && i == d.target.len - 1))
                num = false;
        if (!num && strcmp(s, "-"))
            d.op = RD_OUT;
    }
    *out = d;
    return true;
}

/* `<<< WORD`: stdin is WORD and a newline (when known statically). */
static void herestring(W *w, TSNode n, const ctx *c, ctx *sc)
{
    kid *hk;
    size_t nh = kids(w, n, &hk);
    for (size_t j = 0; j < nh; j++) {
        if (!ts_node_is_named(hk[j].n) || is(hk[j].n, "file_descriptor"))
            continue;
        pword pw = resolve_one(w, hk[j].n, c, false, TILDE_PREFIX);
        char *t = ar_alloc(w->ar, pw.len + 2);
        if (t) {
            memcpy(t, pw.s, pw.len);
            t[pw.len] = '\n';
            t[pw.len + 1] = 0;
        }
        sc->stdin_text = (pw.flags & W_DYN) ? NULL : t;
        sc->stdin_len = pw.len + 1;
        if (pw.flags & W_FETCH)
            sc->stdin_det |= D_FETCH_IN;
        if (word_secret(w, &pw))
            sc->stdin_det |= D_SECRET_IN;
        return;
    }
}

/* Text of a here-document body, with its expansions when the delimiter is
 * unquoted. */
static const char *heredoc_text(W *w, TSNode start, TSNode body, bool have_body, const ctx *c, size_t *len,
                                unsigned *wflags)
{
    if (!have_body) {
        *len = 0;
        return "";
    }
    size_t sl;
    const char *s = ntext(w, start, &sl);
    bool quoted = memchr(s, '\'', sl) || memchr(s, '"', sl) || memchr(s, '\\', sl);
    size_t bl;
    const char *b = ntext(w, body, &bl);
    if (quoted) {
        *len = bl;
        return b;
    }
    rstr r = {0};
    uint32_t pos = ts_node_start_byte(body);
    kid *k;
    size_t nk = kids(w, body, &k);
    for (size_t i = 0; i < nk; i++) {
        uint32_t a = ts_node_start_byte(k[i].n), e = ts_node_end_byte(k[i].n);
        if (a > pos)
            rs_add(&r, w->src + pos, a - pos, RF_QUOTED);
        if (is(k[i].n, "heredoc_content") || !ts_node_is_named(k[i].n)) {
            /* backslash escapes \$ \` \\ only */
            const char *t = w->src + a;
            for (size_t j = 0; j < e - a; j++) {
                if (t[j] == '\\' && j + 1 < e - a && strchr("$`\\\n", t[j + 1]))
                    j++;
                rs_add(&r, t + j, 1, RF_QUOTED);
            }
        } else {
            rs_node(w, k[i].n, &r, true, c);
        }
        pos = e;
    }
    uint32_t end = ts_node_end_byte(body);
    if (end > pos)
        rs_add(&r, w->src + pos, end - pos, RF_QUOTED);
    *wflags = r.wflags;
    char *out = ar_strndup(w->ar, r.s ? r.s : "", r.len);
    *len = out ? r.len : 0;
    rs_free(&r);
    return out ? out : "";
}

static const char *walk_redirected(W *w, TSNode n, const ctx *c, size_t *olen)
{
    kid *k;
    size_t nk = kids(w, n, &k);
    TSNode body = {0};
    bool have_body = false;
    predir rd[32];
    size_t nrd = 0;
    ctx sc = *c;
    TSNode cont = {0}, right = {0};
    bool have_cont = false, have_right = false;
    for (size_t i = 0; i < nk && !w->stopped; i++) {
        TSNode ch = k[i].n;
        if (k[i].field && !strcmp(k[i].field, "body")) {
            body = ch;
            have_body = true;
            continue;
        }
        if (!ts_node_is_named(ch))
            continue;
        if (is(ch, "file_redirect")) {
            predir d;
            if (file_redirect(w, ch, c, &d) && nrd < ARRAY_SIZE(rd))
                rd[nrd++] = d;
            if (d.op == RD_IN && word_secret(w, &d.target))
                sc.stdin_det |= D_SECRET_IN;
            if (d.op == RD_IN)
                sc.stdin_text = NULL;
        } else if (is(ch, "herestring_redirect")) {
            herestring(w, ch, c, &sc);
        } else if (is(ch, "heredoc_redirect")) {
            kid *hk;
            size_t nh = kids(w, ch, &hk);
            TSNode start = {0}, hb = {0};
            bool have_hb = false;
            for (size_t j = 0; j < nh; j++) {
                TSNode x = hk[j].n;
                if (is(x, "heredoc_start"))
                    start = x;
                else if (is(x, "heredoc_body")) {
                    hb = x;
                    have_hb = true;
                } else if (hk[j].field && !strcmp(hk[j].field, "right")) {
                    right = x;
                    have_right = true;
                } else if (is(x, "file_redirect")) {
                    predir d;
                    if (file_redirect(w, x, c, &d) && nrd < ARRAY_SIZE(rd))
                        rd[nrd++] = d;
                } else if (is(x, "herestring_redirect")) {
                    walk_subst_only(w, x, c);
                } else if (ts_node_is_named(x) && !is(x, "heredoc_end") && !is(x, "file_descriptor")) {
                    cont = x;
                    have_cont = true;
                }
            }
            size_t hl = 0;
            unsigned wf = 0;
            const char *ht = heredoc_text(w, start, hb, have_hb, c, &hl, &wf);
            sc.stdin_text = ht;
            sc.stdin_len = hl;
            if (wf & W_FETCH)
                sc.stdin_det |= D_FETCH_IN;
        }
    }
    add_redirs(w, c, &sc, rd, nrd);
    const char *out = NULL;
    size_t outlen = 0;
    bool stdout_redirected = false;
    for (size_t i = 0; i < nrd; i++)
        if ((rd[i].op == RD_OUT || rd[i].op == RD_APPEND) && (rd[i].fd == -1 || rd[i].fd == 1))
            stdout_redirected = true;
    if (have_body)
        out = walk_node(w, body, &sc, &outlen);
    else
        push(w, NULL, 0, D_EMPTY, &sc); /* `> file` alone truncates it */
    if (stdout_redirected)
        out = NULL;
    if (have_cont) {
        /* `cat <<EOF | sh && ls`: the rest of the pipeline hangs off the heredoc */
        ctx cc = *c;
        unsigned updet = 0;
        kid one = {.n = cont, .field = NULL};
        kid *ck = &one;
        size_t ncont = 1;
        if (is(cont, "pipeline"))
            ncont = kids(w, cont, &ck);
        /* a list inside: its first element is the next stage, the rest follows */
        if (ncont == 1 && is(ck[0].n, "list")) {
            kid *lk;
            size_t nl = kids(w, ck[0].n, &lk);
            size_t first_named = nl;
            for (size_t j = 0; j < nl; j++)
                if (ts_node_is_named(lk[j].n)) {
                    first_named = j;
                    break;
                }
            if (first_named < nl) {
                TSNode stage = lk[first_named].n;
                kid *sk = NULL;
                size_t ns = 0;
                if (is(stage, "pipeline"))
                    ns = kids(w, stage, &sk);
                else {
                    sk = &lk[first_named];
                    ns = 1;
                }
                walk_stages(w, sk, ns, &cc, out, outlen, updet, NULL);
                for (size_t j = first_named + 1; j < nl; j++)
                    if (ts_node_is_named(lk[j].n))
                        walk_node(w, lk[j].n, c, NULL);
            }
        } else {
            walk_stages(w, ck, ncont, &cc, out, outlen, updet, NULL);
        }
        out = NULL;
    }
    if (have_right) {
        walk_node(w, right, c, NULL);
        out = NULL;
    }
    if (olen)
        *olen = outlen;
    return out;
}

/* The subscripts of a compound array value ([i]=v ...), evaluated as
 * arithmetic unless the array is associative. */
static bool array_value_ok(W *w, TSNode arr)
{
    kid *k;
    size_t nk = kids(w, arr, &k);
    for (size_t i = 0; i < nk; i++) {
        if (!ts_node_is_named(k[i].n))
            continue;
        size_t l;
        const char *t = ntext(w, k[i].n, &l);
        if (!l || t[0] != '[')
            continue;
        const char *e = memmem(t, l, "]=", 2);
        if (!e || !arith_ok(w, t + 1, (size_t)(e - t - 1), true, 0))
            return false;
    }
    return true;
}

/* NAME=value, NAME[i]=value, NAME=(...): the assignment, with what bash
 * evaluates in it (the subscript; the value when NAME is declared -i or
 * -n). attr: the attributes a declaration gives NAME (VA_*). */
static void walk_assignment(W *w, TSNode n, const ctx *c, bool persist, bool exported, uint8_t attr)
{
    kid *k;
    size_t nk = kids(w, n, &k);
    const char *name = NULL;
    size_t nl = 0;
    pword val = {.s = "", .len = 0};
    bool have_val = false, append = false, ok = true, arr = false;
    TSNode arrn = {0};
    for (size_t i = 0; i < nk; i++) {
        if (k[i].field && !strcmp(k[i].field, "name")) {
            name = ntext(w, k[i].n, &nl);
            if (is(k[i].n, "subscript")) {
                /* a[i]=...: i is arithmetic for an indexed array */
                size_t bl = strcspn(name, "[");
                const var *v = get_var(w, name, bl < nl ? bl : nl);
                const char *open = memchr(name, '[', nl);
                if (!((attr | (v ? v->attr : 0)) & VA_ASSOC) &&
                    (!open || name[nl - 1] != ']' ||
                     !arith_ok(w, open + 1, nl - (size_t)(open - name) - 2, true, 0)))
                    ok = false;
                name = NULL;
            } else if (!is(k[i].n, "variable_name")) {
                name = NULL;
            }
        } else if (k[i].field && !strcmp(k[i].field, "value")) {
            if (is(k[i].n, "array")) {
                walk_subst_only(w, k[i].n, c);
                val = mkword(w, "", 0, W_DYN);
                arr = true;
                arrn = k[i].n;
            } else {
                val = resolve_one(w, k[i].n, c, false, TILDE_VALUE);
            }
            have_val = true;
        } else if (!ts_node_is_named(k[i].n) && is(k[i].n, "+=")) {
            append = true;
        }
    }
    const var *old = name ? get_var(w, name, nl) : NULL;
    uint8_t has = attr | (old ? old->attr : 0);
    if (arr && !(has & VA_ASSOC) && !array_value_ok(w, arrn))
        ok = false;
    if (name && have_val && !arr && (has & VA_REF) && val.len && !word_name_ok(w, &val))
        ok = false; /* a name reference to a name the engine cannot vouch for */
    if (name && have_val && !arr && (has & VA_INT) &&
        ((val.flags & W_DYN) ? !(val.flags & W_NUM) : !arith_ok(w, val.s, val.len, false, 0)))
        ok = false; /* declare -i: the value is evaluated as arithmetic */
    if (!ok) {
        size_t l;
        const char *t = ntext(w, n, &l);
        hazard(w, t, l, c);
    }
    if (!persist || !name)
        return;
    char nb[256];
    if (nl >= sizeof nb)
        return;
    memcpy(nb, name, nl);
    nb[nl] = 0;
    if (attr)
        var_attr(w, nb, nl, attr);
    /* LD_PRELOAD=x; PAGER=y; export BASH_ENV=z: every later program sees it
     * (a variable in upper case is taken to be in the environment already) */
    if ((exported || isupper((unsigned char)nb[0])) && strcmp(nb, "PATH") &&
        !strlist_glob(&w->p->harmless_env, nb))
        w->st.env_changed = true;
    bool dyn = (val.flags & W_DYN) || append || (has & VA_INT);
    bool num = (has & VA_INT) || ((val.flags & W_NUM) && !append);
    set_var(w, nb, dyn ? NULL : val.s, have_val ? val.len : 0, (val.flags & W_FETCH) != 0, num);
}

static void add_func(W *w, const char *name, const char *body, size_t blen, bool alias)
{
    if (!AR_GROW(w->ar, w->funcs, w->afuncs, w->nfuncs, 8))
        return;
    w->funcs[w->nfuncs++] =
        (func){.name = ar_strdup(w->ar, name), .body = ar_strndup(w->ar, body, blen), .alias = alias};
}

static const func *get_func(W *w, const char *name)
{
    for (size_t i = w->nfuncs; i-- > 0;)
        if (w->funcs[i].name && !strcmp(w->funcs[i].name, name))
            return &w->funcs[i];
    return NULL;
}

static bool inlining(W *w, const char *name)
{
    for (size_t i = 0; i < w->ninlining; i++)
        if (!strcmp(w->inlining[i], name))
            return true;
    return false;
}

static void push_inlining(W *w, const char *name)
{
    const char **nv = ar_alloc(w->ar, (w->ninlining + 1) * sizeof *nv);
    if (!nv)
        return;
    if (w->ninlining)
        memcpy(nv, w->inlining, w->ninlining * sizeof *nv);
    nv[w->ninlining++] = name;
    w->inlining = nv;
}

static void walk_function_def(W *w, TSNode n, const ctx *c)
{
    kid *k;
    size_t nk = kids(w, n, &k);
    const char *name = NULL;
    size_t nl = 0;
    TSNode body = {0};
    bool have_body = false;
    for (size_t i = 0; i < nk; i++) {
        if (k[i].field && !strcmp(k[i].field, "name"))
            name = ntext(w, k[i].n, &nl);
        else if (k[i].field && !strcmp(k[i].field, "body")) {
            body = k[i].n;
            have_body = true;
        }
    }
    if (!name || !have_body || nl > 200)
        return;
    char nb[256];
    memcpy(nb, name, nl);
    nb[nl] = 0;
    size_t bl;
    const char *bs = ntext(w, body, &bl);
    add_func(w, nb, bs, bl, false);
    /* Walk the body once as written (arguments unknown): this classifies it
     * even when no call is visible, and finds self-calls (fork bombs). */
    wstate saved = w->st;
    w->st.pos = NULL;
    w->st.npos = 0;
    size_t saved_n = w->ninlining;
    push_inlining(w, w->funcs[w->nfuncs - 1].name);
    ctx sc = *c;
    sc.concurrent = false;
    walk_node(w, body, &sc, NULL);
    w->ninlining = saved_n;
    w->st = saved;
    w->st.path_changed = true; /* a function may shadow any program name */
    w->st.path_changed = saved.path_changed;
}

static const char *walk_list(W *w, TSNode n, const ctx *c, size_t *olen)
{
    kid *k;
    size_t nk = kids(w, n, &k);
    wstate before = w->st;
    bool after_or = false;
    for (size_t i = 0; i < nk && !w->stopped; i++) {
        TSNode ch = k[i].n;
        if (!ts_node_is_named(ch)) {
            if (is(ch, "||")) {
                after_or = true;
                /* the right side may run with what the left side did or not */
                merge_uncertain(w, &before);
            }
            continue;
        }
        walk_node(w, ch, c, NULL);
    }
    (void)after_or;
    if (olen)
        *olen = 0;
    return NULL;
}

static const char *walk_for(W *w, TSNode n, const ctx *c)
{
    kid *k;
    size_t nk = kids(w, n, &k);
    const char *vname = NULL;
    size_t vl = 0;
    wlist vals = {0};
    bool dyn = false, have_in = false;
    TSNode body = {0};
    bool have_body = false;
    for (size_t i = 0; i < nk; i++) {
        if (k[i].field && !strcmp(k[i].field, "variable"))
            vname = ntext(w, k[i].n, &vl);
        else if (k[i].field && !strcmp(k[i].field, "value")) {
            resolve_arg(w, k[i].n, &vals, c);
            have_in = true;
        } else if (k[i].field && !strcmp(k[i].field, "body")) {
            body = k[i].n;
            have_body = true;
        }
    }
    if (!have_body)
        return NULL;
    for (size_t i = 0; i < vals.n; i++)
        if (vals.v[i].flags & (W_DYN | W_GLOB))
            dyn = true;
    char nb[256] = "";
    if (vname && vl < sizeof nb) {
        memcpy(nb, vname, vl);
        nb[vl] = 0;
    }
    /* a loop variable declared -i evaluates each value; -n takes each as a name */
    const var *lv = *nb ? get_var(w, nb, strlen(nb)) : NULL;
    bool num = have_in && vals.n;
    for (size_t i = 0; i < vals.n; i++) {
        const pword *v = &vals.v[i];
        num &= (v->flags & W_DYN) ? (v->flags & W_NUM) != 0 : var_is_int(&(var){.val = v->s, .len = v->len});
        if (lv && (lv->attr & VA_INT) &&
            ((v->flags & (W_DYN | W_GLOB)) ? !(v->flags & W_NUM) : !arith_ok(w, v->s, v->len, false, 0)))
            lv = NULL, hazard(w, vname, vl, c);
        else if (lv && (lv->attr & VA_REF) && !word_name_ok(w, v))
            lv = NULL, hazard(w, vname, vl, c);
    }
    if (!have_in && *nb && get_var(w, nb, strlen(nb)) &&
        (get_var(w, nb, strlen(nb))->attr & (VA_INT | VA_REF)))
        hazard(w, vname, vl, c);
    wstate before = w->st;
    if (!have_in || dyn || vals.n == 0 || vals.n > MAX_FOR_VALUES || !*nb) {
        if (*nb)
            set_var(w, nb, NULL, 0, false, num);
        walk_node(w, body, c, NULL);
    } else {
        for (size_t i = 0; i < vals.n && !w->stopped; i++) {
            set_var(w, nb, vals.v[i].s, vals.v[i].len, false, false);
            walk_node(w, body, c, NULL);
        }
    }
    merge_uncertain(w, &before);
    return NULL;
}

/* ((...)) as a command: tree-sitter reads it as a compound statement of
 * arithmetic nodes. True when n is one (its expression checked). */
static bool arith_command(W *w, TSNode n, const ctx *c)
{
    size_t l;
    const char *s = ntext(w, n, &l);
    if (l < 4 || strncmp(s, "((", 2) || strncmp(s + l - 2, "))", 2))
        return false;
    walk_subst_only(w, n, c);
    if (!arith_ok(w, s + 2, l - 4, true, 0))
        hazard(w, s, l, c);
    return true;
}

/* for ((init; cond; step)): each part, in order, as arithmetic. */
static void for_header(W *w, TSNode n, const kid *k, size_t nk, const ctx *c)
{
    uint32_t a = 0, b = 0;
    for (size_t i = 0; i < nk; i++) {
        if (ts_node_is_named(k[i].n))
            continue;
        if (is(k[i].n, "((") && !a)
            a = ts_node_end_byte(k[i].n);
        else if (is(k[i].n, "))") && a && !b)
            b = ts_node_start_byte(k[i].n);
    }
    if (!a || b < a) {
        size_t l;
        const char *s = ntext(w, n, &l);
        hazard(w, s, l, c);
        return;
    }
    const char *s = w->src + a;
    size_t len = b - a, start = 0;
    int depth = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && (s[i] == '(' || s[i] == '['))
            depth++;
        else if (i < len && (s[i] == ')' || s[i] == ']'))
            depth--;
        else if (i == len || (s[i] == ';' && !depth)) {
            if (!arith_ok(w, s + start, i - start, true, 0)) {
                hazard(w, s, len, c);
                return;
            }
            start = i + 1;
        }
    }
}

/* [[ ... ]]: -v NAME and -R NAME take a name; -eq, -ne, -lt, -le, -gt and
 * -ge evaluate both sides as arithmetic. */
static bool dtest_ok(W *w, TSNode n, const ctx *c)
{
    static const char *const arith_ops[] = {"-eq", "-ne", "-lt", "-le", "-gt", "-ge"};
    if (!budget(w))
        return false;
    kid *k;
    size_t nk = kids(w, n, &k);
    TSNode op = {0}, left = {0}, right = {0};
    bool have_op = false, have_l = false, have_r = false;
    for (size_t i = 0; i < nk; i++) {
        const char *f = k[i].field;
        if (f && !strcmp(f, "operator"))
            op = k[i].n, have_op = true;
        else if (f && !strcmp(f, "left"))
            left = k[i].n, have_l = true;
        else if (f && !strcmp(f, "right"))
            right = k[i].n, have_r = true;
    }
    size_t ol = 0;
    const char *os = have_op ? ntext(w, op, &ol) : "";
    if (is(n, "unary_expression") && have_op && ol == 2 && (!strncmp(os, "-v", 2) || !strncmp(os, "-R", 2))) {
        for (size_t i = 0; i < nk; i++) {
            if (!ts_node_is_named(k[i].n) || (k[i].field && !strcmp(k[i].field, "operator")))
                continue;
            pword pw = resolve_one(w, k[i].n, c, false, TILDE_PREFIX);
            pw.flags &= ~(unsigned)W_GLOB; /* [[ does not glob its words */
            if (!word_name_ok(w, &pw))
                return false;
        }
        return true;
    }
    if (is(n, "binary_expression") && have_op && have_l && have_r) {
        for (size_t i = 0; i < ARRAY_SIZE(arith_ops); i++) {
            if (ol != 3 || strncmp(os, arith_ops[i], 3))
                continue;
            size_t ll, rl;
            const char *ls = ntext(w, left, &ll), *rs = ntext(w, right, &rl);
            return arith_ok(w, ls, ll, true, 0) && arith_ok(w, rs, rl, true, 0);
        }
    }
    for (size_t i = 0; i < nk; i++)
        if (ts_node_is_named(k[i].n) &&
            (is(k[i].n, "unary_expression") || is(k[i].n, "binary_expression") ||
             is(k[i].n, "parenthesized_expression") || is(k[i].n, "negated_expression")) &&
            !dtest_ok(w, k[i].n, c))
            return false;
    return true;
}

/* [[ ... ]] and [ ... ]: the second is the test builtin, read as the
 * command `test ...` (its words split and globbed). */
static void walk_test(W *w, TSNode n, const ctx *c)
{
    size_t l;
    const char *s = ntext(w, n, &l);
    if (l >= 4 && !strncmp(s, "[[", 2)) {
        walk_subst_only(w, n, c);
        if (!dtest_ok(w, n, c))
            hazard(w, s, l, c);
        return;
    }
    if (l < 2 || s[0] != '[' || s[l - 1] != ']') {
        walk_subst_only(w, n, c);
        hazard(w, s, l, c);
        return;
    }
    char *src = ar_alloc(w->ar, l + 4);
    if (!src)
        return;
    memcpy(src, "test", 4);
    memcpy(src + 4, s + 1, l - 2);
    src[l + 2] = 0;
    walk_source(w, src, l + 2, c, NULL, NULL);
}

/* unset [-fvn] NAME...: each name (with its subscript) is evaluated. */
static void walk_unset(W *w, TSNode n, const ctx *c)
{
    kid *k;
    size_t nk = kids(w, n, &k);
    wlist argv = {0};
    wl_add(w, &argv, mkword(w, "unset", 5, 0));
    for (size_t i = 0; i < nk; i++)
        if (ts_node_is_named(k[i].n))
            resolve_arg(w, k[i].n, &argv, c);
    for (size_t i = 1; i < argv.n; i++)
        if ((argv.v[i].flags & W_DYN) || strstr(argv.v[i].s, "PATH"))
            w->st.path_changed = true;
    if (builtin_evaluates(w, "unset", argv.v, argv.n)) {
        size_t l;
        const char *s = ntext(w, n, &l);
        hazard(w, s, l, c);
    }
}

/* declare, typeset, local, export, readonly: their options give
 * attributes (-i: values evaluated as arithmetic; -n: values are names;
 * -A: subscripts are keys), then names and assignments. */
static void walk_declaration(W *w, TSNode n, const ctx *c)
{
    kid *k;
    size_t nk = kids(w, n, &k);
    bool names = false, print = false;
    size_t kl0 = 0;
    const char *kw0 = nk ? ntext(w, k[0].n, &kl0) : "";
    bool exported = kl0 == 6 && !memcmp(kw0, "export", 6);
    wlist argv = {0};
    wl_add(w, &argv, mkword(w, kw0, kl0, 0));
    uint8_t attr = 0;
    for (size_t i = 0; i < nk; i++) {
        if (!ts_node_is_named(k[i].n) || is(k[i].n, "variable_assignment") || i == 0)
            continue;
        size_t first = argv.n;
        resolve_arg(w, k[i].n, &argv, c);
        for (size_t j = first; j < argv.n; j++) {
            const pword *a = &argv.v[j];
            if ((a->flags & W_DYN) || (a->s[0] != '-' && a->s[0] != '+')) {
                names = true;
                continue;
            }
            exported |= a->s[0] == '-' && strchr(a->s, 'x') != NULL;
            print |= strchr(a->s, 'p') != NULL;
            if (a->s[0] == '-' && !(kl0 == 6 && !memcmp(kw0, "export", 6))) /* export -n unexports */
                attr |= (strchr(a->s, 'i') ? VA_INT : 0) | (strchr(a->s, 'n') ? VA_REF : 0) |
                        (strchr(a->s, 'A') ? VA_ASSOC : 0);
        }
    }
    if (!declaration_ok(w, argv.v, argv.n)) {
        size_t l;
        const char *s = ntext(w, n, &l);
        hazard(w, s, l, c);
    }
    for (size_t i = 0; i < nk; i++)
        if (is(k[i].n, "variable_assignment")) {
            walk_assignment(w, k[i].n, c, true, exported, attr);
            names = true;
        }
    /* export -p, declare -p, declare, export alone: they print variables,
     * the environment's secrets among them */
    if ((print || !names) && nk) {
        pword *a = ar_alloc(w->ar, sizeof *a);
        if (a) {
            *a = mkword(w, kw0, kl0, 0);
            push(w, a, 1, D_SECRET_READ, c);
        }
    }
}

static const char *walk_node(W *w, TSNode n, const ctx *c, size_t *olen)
{
    if (olen)
        *olen = 0;
    if (!budget(w))
        return NULL;
    if (w->node_depth > MAX_NODE_DEPTH) {
        push_det(w, D_TOO_DEEP, "(nesting)", c);
        w->stopped = true;
        return NULL;
    }
    const char *t = ts_node_type(n);
    const char *out = NULL;
    w->node_depth++;
    if (ts_node_is_error(n) || ts_node_is_missing(n)) {
        if (!w->parse_error_seen)
            push_det(w, D_PARSE_ERROR, "(parse error)", c);
        w->parse_error_seen = true;
        walk_seq(w, n, c, NULL);
    } else if (!strcmp(t, "compound_statement") && arith_command(w, n, c)) {
        /* ((...)): nothing runs but the expression */
    } else if (!strcmp(t, "program") || !strcmp(t, "compound_statement")) {
        out = walk_seq(w, n, c, olen);
    } else if (!strcmp(t, "subshell")) {
        wstate saved = w->st;
        out = walk_seq(w, n, c, olen);
        w->st = saved;
    } else if (!strcmp(t, "command")) {
        kid *k;
        size_t nk = kids(w, n, &k);
        wlist argv = {0};
        predir rd[32];
        size_t nrd = 0;
        unsigned det = 0;
        ctx sc = *c;
        for (size_t i = 0; i < nk && !w->stopped; i++) {
            TSNode ch = k[i].n;
            const char *f = k[i].field;
            if (!ts_node_is_named(ch))
                continue;
            if (f && !strcmp(f, "name")) {
                kid *nk2;
                size_t nn = kids(w, ch, &nk2);
                for (size_t j = 0; j < nn; j++)
                    if (ts_node_is_named(nk2[j].n))
                        resolve_arg(w, nk2[j].n, &argv, c);
            } else if (f && !strcmp(f, "redirect")) {
                if (is(ch, "file_redirect")) {
                    predir d;
                    if (file_redirect(w, ch, c, &d) && nrd < ARRAY_SIZE(rd))
                        rd[nrd++] = d;
                    if (d.op == RD_IN && word_secret(w, &d.target))
                        sc.stdin_det |= D_SECRET_IN;
                } else {
                    herestring(w, ch, c, &sc); /* here-string on a command */
                }
            } else if (is(ch, "variable_assignment")) {
                /* NAME=value cmd: only in that command's environment */
                kid *ak;
                size_t na = kids(w, ch, &ak);
                for (size_t j = 0; j < na; j++) {
                    if (ak[j].field && !strcmp(ak[j].field, "name")) {
                        size_t l;
                        const char *s = ntext(w, ak[j].n, &l);
                        char nb[128];
                        if (l >= sizeof nb)
                            l = sizeof nb - 1;
                        memcpy(nb, s, l);
                        nb[l] = 0;
                        if (!strcmp(nb, "PATH"))
                            det |= D_PATH_CHANGED;
                        else if (!strlist_glob(&w->p->harmless_env, nb))
                            det |= D_EXEC_ENV;
                    }
                }
                walk_assignment(w, ch, c, false, false, 0);
            } else if (f && !strcmp(f, "argument")) {
                resolve_arg(w, ch, &argv, c);
            } else {
                walk_subst_only(w, ch, c);
            }
        }
        add_redirs(w, c, &sc, rd, nrd);
        for (size_t i = 0; i < nrd; i++)
            if ((rd[i].op == RD_OUT || rd[i].op == RD_APPEND) && (rd[i].fd == -1 || rd[i].fd == 1))
                sc.stdin_det |= 0; /* stdout goes to a file: no static output */
        size_t ol = 0;
        out = emit(w, argv.v, argv.n, det, &sc, &ol);
        for (size_t i = 0; i < nrd; i++)
            if ((rd[i].op == RD_OUT || rd[i].op == RD_APPEND) && (rd[i].fd == -1 || rd[i].fd == 1))
                out = NULL;
        if (olen)
            *olen = ol;
    } else if (!strcmp(t, "pipeline")) {
        out = walk_pipeline(w, n, c, olen);
    } else if (!strcmp(t, "list")) {
        out = walk_list(w, n, c, olen);
    } else if (!strcmp(t, "redirected_statement")) {
        out = walk_redirected(w, n, c, olen);
    } else if (!strcmp(t, "variable_assignment")) {
        walk_assignment(w, n, c, true, false, 0);
    } else if (!strcmp(t, "variable_assignments")) {
        kid *k;
        size_t nk = kids(w, n, &k);
        for (size_t i = 0; i < nk; i++)
            if (is(k[i].n, "variable_assignment"))
                walk_assignment(w, k[i].n, c, true, false, 0);
    } else if (!strcmp(t, "declaration_command")) {
        walk_declaration(w, n, c);
    } else if (!strcmp(t, "function_definition")) {
        walk_function_def(w, n, c);
    } else if (!strcmp(t, "if_statement") || !strcmp(t, "case_statement") || !strcmp(t, "while_statement") ||
               !strcmp(t, "c_style_for_statement")) {
        /* condition and bodies: each may or may not run */
        wstate before = w->st;
        kid *k;
        size_t nk = kids(w, n, &k);
        if (!strcmp(t, "c_style_for_statement"))
            for_header(w, n, k, nk, c);
        for (size_t i = 0; i < nk && !w->stopped; i++) {
            TSNode ch = k[i].n;
            if (!ts_node_is_named(ch) || is(ch, "comment"))
                continue;
            if (is(ch, "elif_clause") || is(ch, "else_clause") || is(ch, "case_item") || is(ch, "do_group"))
                walk_conditional_seq(w, ch, c);
            else if (k[i].field && !strcmp(k[i].field, "value"))
                walk_subst_only(w, ch, c);
            else if (!strcmp(t, "c_style_for_statement") && k[i].field && strcmp(k[i].field, "body"))
                walk_subst_only(w, ch, c);
            else
                walk_node(w, ch, c, NULL);
        }
        merge_uncertain(w, &before);
    } else if (!strcmp(t, "for_statement")) {
        walk_for(w, n, c);
    } else if (!strcmp(t, "do_group") || !strcmp(t, "else_clause") || !strcmp(t, "elif_clause")) {
        walk_conditional_seq(w, n, c);
    } else if (!strcmp(t, "negated_command")) {
        walk_seq(w, n, c, NULL);
    } else if (!strcmp(t, "test_command")) {
        walk_test(w, n, c);
    } else if (!strcmp(t, "unset_command")) {
        walk_unset(w, n, c);
    } else if (!strcmp(t, "comment") || !strcmp(t, "heredoc_body")) {
        /* nothing runs */
    } else {
        /* a node the reader does not know: look for anything that runs, and
         * never let it pass as understood */
        walk_subst_only(w, n, c);
        if (!w->parse_error_seen)
            push_det(w, D_PARSE_ERROR, "(unsupported syntax)", c);
        w->parse_error_seen = true;
    }
    w->node_depth--;
    return out;
}

/* ---- emitting simple commands, with the programs that run programs ---- */

static const char *join_words(W *w, const pword *v, size_t n, bool *dyn, unsigned *wf)
{
    size_t tot = 1;
    for (size_t i = 0; i < n; i++)
        tot += v[i].len + 1;
    char *s = ar_alloc(w->ar, tot);
    if (!s) {
        *dyn = true;
        return "";
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (i)
            s[o++] = ' ';
        memcpy(s + o, v[i].s, v[i].len);
        o += v[i].len;
        if (v[i].flags & W_DYN)
            *dyn = true;
        *wf |= v[i].flags;
    }
    s[o] = 0;
    return s;
}

static const char *via_add(W *w, const ctx *c, const char *what)
{
    const char *old = c->via && *c->via ? c->via : NULL;
    char *r = old ? xasprintf("%s %s", old, what) : xstrdup(what);
    size_t l = strlen(r);
    if (l > 80)
        l = 80;
    const char *a = ar_strndup(w->ar, r, l);
    free(r);
    return a ? a : "";
}

static bool downloaded(W *w, const pword *pw)
{
    if (pw->flags & W_DYN)
        return false;
    const char *b = basename_of(pw->s);
    for (size_t i = 0; i < w->ndl; i++)
        if (!strcmp(w->dl[i], b))
            return true;
    return false;
}

static void note_download(W *w, const char *name)
{
    const char *b = basename_of(name);
    if (!*b)
        return;
    const char **nv = ar_alloc(w->ar, (w->ndl + 1) * sizeof *nv);
    if (!nv)
        return;
    if (w->ndl)
        memcpy(nv, w->dl, w->ndl * sizeof *nv);
    nv[w->ndl++] = ar_strdup(w->ar, b);
    w->dl = nv;
}

/* A code string (sh -c, eval, inline interpreter literal): walk it. */
static void run_code(W *w, const pword *code, const ctx *c, const char *via, pword *pos, size_t npos,
                     pcmd *owner)
{
    if (code->flags & W_DYN) {
        if (owner)
            owner->det |= (code->flags & W_FETCH) ? D_REMOTE_CODE : D_DYN_CODE;
        return;
    }
    if (code->flags & W_FETCH && owner)
        owner->det |= D_REMOTE_CODE;
    wstate saved = w->st;
    if (pos) {
        w->st.pos = pos;
        w->st.npos = npos;
    }
    ctx sc = *c;
    sc.stdin_text = NULL;
    sc.redir = NULL;
    sc.nredir = 0;
    walk_source(w, code->s, code->len, &sc, via, NULL);
    w->st = saved;
}

static bool is_ident_char(char ch) { return isalnum((unsigned char)ch) || ch == '_'; }

/* Inline interpreter code (python -c, node -e, perl -e, awk '...'): walk
 * string literals that read as shell commands, and turn deletion and write
 * calls on literal paths into the equivalent commands. */
static void inline_code(W *w, const char *code, size_t len, const ctx *c, const char *prog)
{
    static const char *const del_api[] = {
        "rmtree", "rmSync", "rm_rf", "remove_dir_all", "unlink",     "remove(", "rmdir",
        "rimraf", "rm(",    "rm_r",  "deleteSync",     "removeSync", "emptyDir"};
    static const char *const write_api[] = {
        "writeFile", "write_text", "write_bytes", "File.write", "appendFile",
        "open(",     "fopen",      "copyFile",    "rename",     "createWriteStream"};
    static const char *const exec_api[] = {"system", "popen",        "exec", "spawn", "subprocess",
                                           "Popen",  "check_output", "`",    "qx",    "Command"};
    const char *via = via_add(w, c, prog);
    bool del = false, wr = false, ex = false;
    for (size_t i = 0; i < ARRAY_SIZE(del_api); i++)
        if (memmem(code, len, del_api[i], strlen(del_api[i])))
            del = true;
    for (size_t i = 0; i < ARRAY_SIZE(write_api); i++)
        if (memmem(code, len, write_api[i], strlen(write_api[i])))
            wr = true;
    for (size_t i = 0; i < ARRAY_SIZE(exec_api); i++)
        if (memmem(code, len, exec_api[i], strlen(exec_api[i])))
            ex = true;
    if (memmem(code, len, "fork", 4) && (memmem(code, len, "while", 5) || memmem(code, len, "for ", 4) ||
                                         memmem(code, len, "loop", 4) || memmem(code, len, "until", 5))) {
        pword *a = ar_alloc(w->ar, sizeof *a);
        if (a) {
            *a = mkword(w, prog, strlen(prog), 0);
            ctx sc = *c;
            sc.via = via;
            push(w, a, 1, D_FORK_BOMB, &sc);
        }
    }
    /* the literals, and lists of literals joined as one command */
    pword lits[MAX_LITERALS];
    size_t nl = 0;
    pword joined[16];
    size_t nj = 0;
    size_t list_start = 0;
    bool in_list = false;
    for (size_t i = 0; i < len && nl < MAX_LITERALS; i++) {
        char q = code[i];
        if (q == '[') {
            in_list = true;
            list_start = nl;
            continue;
        }
        if (q == ']' && in_list) {
            in_list = false;
            if (nl - list_start >= 2 && nj < ARRAY_SIZE(joined)) {
                bool dyn = false;
                unsigned wf = 0;
                const char *s = join_words(w, lits + list_start, nl - list_start, &dyn, &wf);
                joined[nj++] = mkword(w, s, strlen(s), 0);
            }
            continue;
        }
        if (in_list && !(q == '\'' || q == '"' || q == ',' || isspace((unsigned char)q)))
            in_list = false;
        if (q != '\'' && q != '"' && q != '`')
            continue;
        if (q == '`' && i > 0 && is_ident_char(code[i - 1]))
            continue;
        size_t j = i + 1;
        rstr r = {0};
        while (j < len && code[j] != q) {
            if (code[j] == '\\' && j + 1 < len)
                j += c_escape(&r, code + j + 1, len - j - 1, 0, NULL) + 1;
            else
                rs_add(&r, code + j++, 1, 0);
        }
        lits[nl++] = mkword(w, r.s ? r.s : "", r.len, 0);
        rs_free(&r);
        i = j;
    }
    ctx sc = *c;
    sc.via = via;
    sc.stdin_text = NULL;
    sc.stdin_det = 0;
    for (size_t i = 0; i < nl + nj && !w->stopped; i++) {
        const pword *lit = i < nl ? &lits[i] : &joined[i - nl];
        if (lit->len < 2)
            continue;
        /* a path under deletion or write calls: as rm / tee of that path */
        if ((del || wr) && (lit->s[0] == '/' || lit->s[0] == '~' || !strncmp(lit->s, "..", 2))) {
            pword *a = ar_alloc(w->ar, 3 * sizeof *a);
            if (a) {
                a[0] = mkword(w, del ? "rm" : "tee", del ? 2 : 3, W_SYNTH);
                a[1] = mkword(w, "-rf", del ? 3 : 2, 0);
                if (!del)
                    a[1] = mkword(w, "-a", 2, 0);
                a[2] = *lit;
                if (lit->s[0] == '~')
                    a[2].flags |= W_TILDE;
                push(w, a, 3, 0, &sc);
            }
        }
        if (ex && memchr(lit->s, ' ', lit->len)) {
            walk_source(w, lit->s, lit->len, &sc, via, NULL);
        }
    }
}

static const char *static_stdout(W *w, const char *prog, pword *argv, size_t argc, const ctx *c, size_t *olen)
{
    for (size_t i = 0; i < argc; i++)
        if (argv[i].flags & (W_DYN | W_GLOB))
            return NULL;
    rstr r = {0};
    const char *res = NULL;
    if (!strcmp(prog, "echo")) {
        size_t i = 1;
        bool nl = true, esc = false;
        for (; i < argc && argv[i].s[0] == '-' && argv[i].len > 1 &&
               strspn(argv[i].s + 1, "neE") == argv[i].len - 1;
             i++) {
            if (strchr(argv[i].s, 'n'))
                nl = false;
            if (strchr(argv[i].s, 'e'))
                esc = true;
            if (strchr(argv[i].s, 'E'))
                esc = false;
        }
        bool stop = false;
        for (size_t j = i; j < argc && !stop; j++) {
            if (j > i)
                rs_add(&r, " ", 1, 0);
            for (size_t k = 0; k < argv[j].len && !stop; k++) {
                if (esc && argv[j].s[k] == '\\')
                    k += c_escape(&r, argv[j].s + k + 1, argv[j].len - k - 1, 0, &stop);
                else
                    rs_add(&r, argv[j].s + k, 1, 0);
            }
        }
        if (nl && !stop)
            rs_add(&r, "\n", 1, 0);
        res = "";
    } else if (!strcmp(prog, "printf") && argc >= 2) {
        size_t ai = 2;
        const pword *fmt = &argv[1];
        if (!strcmp(fmt->s, "--") && argc >= 3) {
            fmt = &argv[2];
            ai = 3;
        }
        bool stop = false;
        int rounds = 0;
        do {
            for (size_t k = 0; k < fmt->len && !stop; k++) {
                char ch = fmt->s[k];
                if (ch == '\\') {
                    k += c_escape(&r, fmt->s + k + 1, fmt->len - k - 1, 0, &stop);
                } else if (ch == '%' && k + 1 < fmt->len) {
                    char cv = fmt->s[++k];
                    if (cv == '%') {
                        rs_add(&r, "%", 1, 0);
                    } else if (cv == 's' || cv == 'b' || cv == 'd' || cv == 'c') {
                        if (ai < argc) {
                            const pword *a = &argv[ai++];
                            if (cv == 'b') {
                                for (size_t m = 0; m < a->len && !stop; m++) {
                                    if (a->s[m] == '\\')
                                        m += c_escape(&r, a->s + m + 1, a->len - m - 1, 0, &stop);
                                    else
                                        rs_add(&r, a->s + m, 1, 0);
                                }
                            } else {
                                rs_add(&r, a->s, cv == 'c' ? (a->len ? 1 : 0) : a->len, 0);
                            }
                        }
                    } else {
                        rs_free(&r);
                        return NULL;
                    }
                } else {
                    rs_add(&r, &ch, 1, 0);
                }
            }
        } while (ai < argc && ai > 2 && !stop && ++rounds < 64 && strchr(fmt->s, '%'));
        res = "";
    } else if (!strcmp(prog, "pwd") && argc == 1 && w->st.cwd_kind != CWD_UNKNOWN) {
        if (w->st.cwd_kind == CWD_OUTSIDE)
            rs_add(&r, w->st.cwd, strlen(w->st.cwd), 0);
        else {
            rs_add(&r, ".", 1, 0);
            if (*w->st.cwd) {
                rs_add(&r, "/", 1, 0);
                rs_add(&r, w->st.cwd, strlen(w->st.cwd), 0);
            }
        }
        rs_add(&r, "\n", 1, 0);
        res = "";
    } else if ((!strcmp(prog, "which") && argc == 2) ||
               (!strcmp(prog, "command") && argc == 3 && !strcmp(argv[1].s, "-v"))) {
        const pword *a = &argv[argc - 1];
        if (!strchr(a->s, '/')) {
            rs_add(&r, "/usr/bin/", 9, 0);
        }
        rs_add(&r, a->s, a->len, 0);
        rs_add(&r, "\n", 1, 0);
        res = "";
    } else if (c->stdin_text && (!strcmp(prog, "cat") || !strcmp(prog, "tee")) &&
               (argc == 1 || (argc == 2 && !strcmp(argv[1].s, "-")))) {
        rs_add(&r, c->stdin_text, c->stdin_len, 0);
        res = "";
    } else if (c->stdin_text && !strcmp(prog, "base64") && argc >= 2 &&
               (!strcmp(argv[1].s, "-d") || !strcmp(argv[1].s, "--decode") || !strcmp(argv[1].s, "-D"))) {
        unsigned acc = 0;
        int bits = 0;
        for (size_t i = 0; i < c->stdin_len; i++) {
            const char *tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            const char *p = c->stdin_text[i] ? strchr(tbl, c->stdin_text[i]) : NULL;
            if (!p)
                continue;
            acc = (acc << 6) | (unsigned)(p - tbl);
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                char b = (char)((acc >> bits) & 0xFF);
                rs_add(&r, &b, 1, 0);
            }
        }
        res = "";
    } else if (c->stdin_text && !strcmp(prog, "rev") && argc == 1) {
        const char *s = c->stdin_text;
        size_t n = c->stdin_len, a = 0;
        for (size_t i = 0; i <= n; i++) {
            if (i == n || s[i] == '\n') {
                for (size_t j = i; j > a; j--)
                    rs_add(&r, s + j - 1, 1, 0);
                if (i < n)
                    rs_add(&r, "\n", 1, 0);
                a = i + 1;
            }
        }
        res = "";
    } else if (c->stdin_text && !strcmp(prog, "xxd") && argc == 3 && !strcmp(argv[1].s, "-r") &&
               !strcmp(argv[2].s, "-p")) {
        int hi = -1;
        for (size_t i = 0; i < c->stdin_len; i++) {
            int v = hexval((unsigned char)c->stdin_text[i]);
            if (v < 0)
                continue;
            if (hi < 0)
                hi = v;
            else {
                char b = (char)(hi * 16 + v);
                rs_add(&r, &b, 1, 0);
                hi = -1;
            }
        }
        res = "";
    }
    if (!res) {
        rs_free(&r);
        return NULL;
    }
    res = ar_strndup(w->ar, r.s ? r.s : "", r.len);
    *olen = res ? r.len : 0;
    rs_free(&r);
    return res;
}

/* The current directory becomes abs (absolute, normalized): inside the
 * workspace (relative to it) or outside. */
static void cwd_at(W *w, const char *abs)
{
    const char *rel = ws_rel(w->p, abs);
    if (rel) {
        w->st.cwd_kind = CWD_INSIDE;
        w->st.cwd = ar_strdup(w->ar, rel);
    } else {
        w->st.cwd_kind = CWD_OUTSIDE;
        w->st.cwd = ar_strdup(w->ar, abs);
    }
    if (!w->st.cwd)
        w->st.cwd_kind = CWD_UNKNOWN;
}

/* The directory path names from the current one, where it is known. */
static void cd_to(W *w, const char *path)
{
    wstate *st = &w->st;
    const char *ws = w->p->workspace;
    char buf[PATH_MAX], norm[PATH_MAX];
    int n = -1;
    if (path[0] == '/')
        n = snprintf(buf, sizeof buf, "%s", path);
    else if (st->cwd_kind == CWD_INSIDE && ws)
        n = snprintf(buf, sizeof buf, "%s/%s/%s", ws, st->cwd ? st->cwd : "", path);
    else if (st->cwd_kind == CWD_OUTSIDE && st->cwd && st->cwd[0] == '/')
        n = snprintf(buf, sizeof buf, "%s/%s", st->cwd, path);
    if (n >= 0 && (size_t)n + 2 < sizeof buf) {
        norm_abs(buf, norm);
        cwd_at(w, norm);
        return;
    }
    if (n >= 0 || st->cwd_kind == CWD_UNKNOWN) {
        st->cwd_kind = CWD_UNKNOWN;
        return;
    }
    if (st->cwd_kind == CWD_OUTSIDE || path[0] == '~') {
        /* outside, where the text alone says (a home not known) */
        char *abs =
            st->cwd_kind == CWD_OUTSIDE && path[0] != '~' ? xasprintf("%s/%s", st->cwd, path) : xstrdup(path);
        st->cwd_kind = CWD_OUTSIDE;
        st->cwd = ar_strdup(w->ar, abs);
        free(abs);
        return;
    }
    /* inside a workspace whose place is not known: normalize cwd/path,
     * staying relative to it */
    char *joined = xasprintf("%s/%s", st->cwd ? st->cwd : "", path);
    char *outp = xmalloc(strlen(joined) + 1);
    size_t ol = 0;
    bool escaped = false;
    for (char *save = NULL, *tok = strtok_r(joined, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (!strcmp(tok, "."))
            continue;
        if (!strcmp(tok, "..")) {
            if (!ol) {
                escaped = true;
                break;
            }
            while (ol && outp[ol - 1] != '/')
                ol--;
            if (ol)
                ol--;
            continue;
        }
        if (ol)
            outp[ol++] = '/';
        memcpy(outp + ol, tok, strlen(tok));
        ol += strlen(tok);
    }
    outp[ol] = 0;
    if (escaped) {
        st->cwd_kind = CWD_OUTSIDE;
        st->cwd = "..";
    } else {
        st->cwd = ar_strdup(w->ar, outp);
    }
    free(joined);
    free(outp);
}

/* cd, pushd: track where relative paths point, and OLDPWD. */
static void do_cd(W *w, const pword *argv, size_t argc)
{
    wstate *st = &w->st;
    int prev_kind = st->cwd_kind;
    const char *prev = st->cwd;
    size_t i = 1;
    while (i < argc && argv[i].s[0] == '-' && argv[i].len > 1 && !(argv[i].flags & W_DYN))
        i++;
    if (i >= argc) {
        /* cd alone: $HOME */
        rstr r = {0};
        home_text(w, &r, RF_QUOTED);
        if (r.len && !(r.f[0] & RF_DYN))
            cd_to(w, r.s);
        else
            st->cwd_kind = CWD_UNKNOWN;
        rs_free(&r);
    } else if (argv[i].flags & (W_DYN | W_GLOB)) {
        st->cwd_kind = CWD_UNKNOWN;
    } else if (!strcmp(argv[i].s, "-")) {
        st->cwd_kind = st->old_kind;
        st->cwd = st->old;
    } else {
        cd_to(w, argv[i].s);
    }
    st->old_kind = prev_kind;
    st->old = prev;
}

/* Is option word a (without an inline =value) one of l, or a long option
 * abbreviated, as getopt_long takes an unambiguous prefix (timeout --kill
 * 5 is --kill-after 5, env --split=... is --split-string=...)? */
static bool opt_has(const strlist *l, const char *a)
{
    if (strchr(a, '='))
        return false;
    if (strlist_has(l, a))
        return true;
    size_t n = strlen(a);
    if (n < 3 || a[0] != '-' || a[1] != '-')
        return false;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i][0] == '-' && l->v[i][1] == '-' && !strncmp(l->v[i], a, n))
            return true;
    return false;
}

/* GNU sed's long options ('=': takes a value). */
static const char *const sed_long[] = {
    "--binary",   "--debug",           "--expression=", "--file=",           "--follow-symlinks", "--help",
    "--in-place", "--line-length=",    "--null-data",   "--zero-terminated", "--posix",           "--quiet",
    "--silent",   "--regexp-extended", "--sandbox",     "--separate",        "--unbuffered",      "--version",
    NULL};

/* sed [OPTIONS] [SCRIPT] [FILE...]: the script (the -e/--expression values
 * joined by newlines, else the first operand) read by sed_effects: a
 * command it runs is walked as shell code (`e CMD`; the pattern space as
 * code is not understood), a file it writes is an output redirection
 * (w FILE, s///w FILE), a secret it reads (r, R) is a secret read; -f
 * (a script file) is a script. */
static const char *emit_sed(W *w, pword *argv, size_t argc, unsigned det, const ctx *c)
{
    const pword *pieces[64];
    size_t npieces = 0, first_op = 0;
    bool script_opt = false, after_dd = false;
    for (size_t i = 1; i < argc; i++) {
        const char *a = argv[i].s;
        if (argv[i].flags & W_DYN)
            continue; /* a safe rule never matches it */
        if (after_dd || a[0] != '-' || !a[1]) {
            if (!first_op)
                first_op = i;
            continue;
        }
        if (!strcmp(a, "--")) {
            after_dd = true;
            continue;
        }
        const pword *val = NULL;
        bool takes = false, expr = false;
        if (a[1] == '-') {
            const char *o = long_option(a, sed_long);
            if (!o) {
                det |= D_DYN_CODE; /* unknown or ambiguous: sed stops; not understood */
                continue;
            }
            /* the rules see the option sed takes it for: --in is --in-place */
            const char *eq = strchr(a, '=');
            char *cs = xasprintf("%.*s%s", (int)strcspn(o, "="), o, eq ? eq : "");
            argv[i] = mkword(w, cs, strlen(cs), argv[i].flags);
            free(cs);
            a = argv[i].s;
            expr = !strcmp(o, "--expression=");
            script_opt |= expr || !strcmp(o, "--file=");
            if (!strcmp(o, "--file="))
                det |= D_SCRIPT;
            takes = o[strlen(o) - 1] == '=';
            if (takes && strchr(a, '=')) {
                if (expr) {
                    pword *v = ar_alloc(w->ar, sizeof *v);
                    if (!v)
                        return NULL;
                    *v = mkword(w, strchr(a, '=') + 1, strlen(strchr(a, '=') + 1), 0);
                    val = v;
                }
                takes = false;
            }
        } else {
            for (const char *f = a + 1; *f; f++) {
                if (*f == 'e' || *f == 'f' || *f == 'l') {
                    expr = *f == 'e';
                    script_opt |= *f != 'l';
                    if (*f == 'f')
                        det |= D_SCRIPT;
                    if (f[1]) {
                        if (expr) {
                            pword *v = ar_alloc(w->ar, sizeof *v);
                            if (!v)
                                return NULL;
                            *v = mkword(w, f + 1, strlen(f + 1), 0);
                            val = v;
                        }
                    } else {
                        takes = true;
                    }
                    break;
                }
                if (*f == 'i')
                    break; /* -iSUFFIX */
                if (!strchr("nrEszub", *f)) {
                    det |= D_DYN_CODE;
                    break;
                }
            }
        }
        if (takes && i + 1 < argc) {
            i++;
            if (expr)
                val = &argv[i];
        }
        if (val && npieces < ARRAY_SIZE(pieces))
            pieces[npieces++] = val;
        else if (val)
            det |= D_TOO_LARGE;
    }
    if (!script_opt && first_op)
        pieces[npieces++] = &argv[first_op];
    /* the script, its pieces joined by newlines */
    size_t tot = 1;
    bool dyn = false;
    for (size_t k = 0; k < npieces; k++) {
        tot += pieces[k]->len + 1;
        dyn |= (pieces[k]->flags & W_DYN) != 0;
    }
    char *script = ar_alloc(w->ar, tot);
    if (!script)
        return NULL;
    size_t o = 0;
    for (size_t k = 0; k < npieces; k++) {
        memcpy(script + o, pieces[k]->s, pieces[k]->len);
        o += pieces[k]->len;
        script[o++] = '\n';
    }
    script[o] = 0;
    sed_effect eff[32];
    int ne = dyn ? 0 : sed_effects(script, o, eff, ARRAY_SIZE(eff));
    if (ne < 0)
        det |= D_DYN_CODE;
    predir rd[32];
    size_t nrd = 0;
    for (int k = 0; k < ne; k++) {
        pword file = mkword(w, eff[k].arg, eff[k].len, 0);
        if (eff[k].kind == SED_WRITE)
            rd[nrd++] = (predir){.op = RD_OUT, .fd = 3, .target = file};
        else if (eff[k].kind == SED_READ && word_secret(w, &file))
            det |= D_SECRET_READ;
        else if (eff[k].kind == SED_EXEC && !eff[k].len)
            det |= D_DYN_CODE; /* runs the pattern space */
    }
    ctx sc = *c;
    add_redirs(w, c, &sc, rd, nrd);
    pcmd *pc = push(w, argv, argc, det, &sc);
    for (int k = 0; k < ne && pc; k++)
        if (eff[k].kind == SED_EXEC && eff[k].len) {
            pword code = mkword(w, eff[k].arg, eff[k].len, 0);
            run_code(w, &code, c, via_add(w, c, "sed e"), NULL, 0, pc);
        }
    return NULL;
}

/* set -k (-o keyword): from then on an argument shaped NAME=VALUE is put
 * in the command's environment (LD_PRELOAD=... as an argument); a word
 * that may be an option may be it. */
static bool set_keyword(const pword *argv, size_t argc)
{
    for (size_t i = 1; i < argc; i++) {
        const pword *a = &argv[i];
        if (may_be_option(a) || ((a->flags & W_DYN) && i > 1 && !strcmp(argv[i - 1].s, "-o")))
            return true;
        if (a->flags & W_DYN)
            continue;
        if (!strcmp(a->s, "--"))
            return false;
        if (a->s[0] == '-' && a->s[1] != '-' && strchr(a->s, 'k'))
            return true;
        if (!strcmp(a->s, "keyword") && i > 1 && !strcmp(argv[i - 1].s, "-o"))
            return true;
    }
    return false;
}

/* Builtins after which a program name may run another program: hash -p
 * FILE NAME, enable [-f FILE] NAME, alias NAME=..., and the ones that
 * assign PATH from their arguments or input (read PATH, printf -v PATH,
 * mapfile, getopts, unset PATH). */
static bool changes_lookup(const char *prog, const pword *argv, size_t argc)
{
    bool assigns = !strcmp(prog, "read") || !strcmp(prog, "mapfile") || !strcmp(prog, "readarray") ||
                   !strcmp(prog, "getopts") || !strcmp(prog, "unset");
    for (size_t i = 1; !strcmp(prog, "printf") && i < argc; i++)
        if (!strncmp(argv[i].s, "-v", 2)) /* printf -v NAME */
            assigns = true;
    for (size_t i = 1; i < argc; i++) {
        const char *a = argv[i].s;
        bool opt = a[0] == '-' && !(argv[i].flags & W_DYN);
        if (!strcmp(prog, "hash") && ((opt && a[1] != '-' && strchr(a, 'p')) || may_be_option(&argv[i])))
            return true;
        if (!strcmp(prog, "enable") && (!opt || strchr(a, 'f')))
            return true;
        if (!strcmp(prog, "alias") && strchr(a, '='))
            return true;
        if (assigns && ((argv[i].flags & W_DYN) || strstr(a, "PATH")))
            return true;
    }
    return false;
}

/* A function or alias defined earlier in the string: its body walked with
 * the arguments as positional parameters (an alias: the arguments appended). */
static void emit_function(W *w, const func *fn, pword *argv, size_t argc, unsigned det, const ctx *c)
{
    if (inlining(w, fn->name)) {
        /* recursion: in a pipeline or the background, a fork bomb */
        push(w, argv, argc, det | (c->concurrent ? D_FORK_BOMB : 0) | D_WRAPPER, c);
        return;
    }
    size_t saved_n = w->ninlining;
    push_inlining(w, fn->name);
    if (fn->alias) {
        bool dyn = false;
        unsigned wf = 0;
        const char *rest = join_words(w, argv + 1, argc - 1, &dyn, &wf);
        char *src = xasprintf("%s %s", fn->body, rest);
        walk_source(w, src, strlen(src), c, via_add(w, c, "alias"), NULL);
        free(src);
    } else {
        wstate saved = w->st;
        w->st.pos = argv + 1;
        w->st.npos = argc - 1;
        walk_source(w, fn->body, strlen(fn->body), c, via_add(w, c, fn->name), NULL);
        w->st.pos = saved.pos;
        w->st.npos = saved.npos;
    }
    w->ninlining = saved_n;
}

/* alias NAME=VALUE...: each alias remembered, and its value walked as code. */
static void emit_alias(W *w, pword *argv, size_t argc, unsigned det, const ctx *c)
{
    for (size_t i = 1; i < argc; i++) {
        const char *eq = strchr(argv[i].s, '=');
        if (!eq || argv[i].flags & (W_DYN | W_GLOB)) {
            if (eq || (argv[i].flags & (W_DYN | W_GLOB)))
                det |= D_DYN_CODE; /* an alias the engine cannot read */
            continue;
        }
        char nb[128];
        size_t nl = (size_t)(eq - argv[i].s);
        if (nl >= sizeof nb)
            continue;
        memcpy(nb, argv[i].s, nl);
        nb[nl] = 0;
        add_func(w, nb, eq + 1, strlen(eq + 1), true);
        pword code = mkword(w, eq + 1, strlen(eq + 1), 0);
        run_code(w, &code, c, via_add(w, c, "alias"), NULL, 0, NULL);
    }
    push(w, argv, argc, det, c);
}

/* What a network fetcher saves (-o FILE, --output FILE, a URL). */
static void note_fetched(W *w, pword *argv, size_t argc)
{
    for (size_t i = 1; i < argc; i++) {
        const char *a = argv[i].s;
        if ((!strcmp(a, "-o") || !strcmp(a, "-O") || !strcmp(a, "--output") ||
             !strcmp(a, "--output-document")) &&
            i + 1 < argc)
            note_download(w, argv[i + 1].s);
        else if (strstr(a, "://"))
            note_download(w, a);
    }
}

/* A shell: sh [-flags] [-c STRING [NAME ARGS...] | FILE | (stdin)]. */
static void emit_shell(W *w, const progspec *ps, const char *prog, pword *argv, size_t argc, unsigned det,
                       const ctx *c)
{
    bool cflag = false, sflag = false;
    size_t i = 1;
    while (i < argc && !(argv[i].flags & W_DYN)) {
        const char *a = argv[i].s;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if ((a[0] != '-' && a[0] != '+') || !a[1])
            break;
        if (a[1] != '-' && strchr(a + 1, 'c') && a[0] == '-')
            cflag = true;
        if (a[1] != '-' && strchr(a + 1, 's') && a[0] == '-')
            sflag = true;
        if (opt_has(&ps->options_with_value, a))
            i++;
        i++;
    }
    pcmd *pc = push(w, argv, i < argc ? i : argc, det | D_WRAPPER, c);
    char vb[64];
    snprintf(vb, sizeof vb, "%s%s", prog, cflag ? " -c" : "");
    const char *via = via_add(w, c, vb);
    if (cflag) {
        if (i >= argc)
            return;
        run_code(w, &argv[i], c, via, argv + i + 1 < argv + argc ? argv + i + 2 : NULL,
                 i + 2 < argc ? argc - i - 2 : 0, pc);
        return;
    }
    if (i < argc && !sflag) {
        if (pc) {
            pc->argc = argc;
            pc->det = (pc->det & ~(unsigned)D_WRAPPER) | D_SCRIPT;
            if ((argv[i].flags & W_FETCH) || downloaded(w, &argv[i]))
                pc->det |= D_REMOTE_CODE;
        }
        return;
    }
    /* commands from stdin */
    if (c->stdin_det & D_FETCH_IN) {
        if (pc)
            pc->det |= D_REMOTE_CODE;
    } else if (c->stdin_text) {
        pword code = mkword(w, c->stdin_text, c->stdin_len, 0);
        run_code(w, &code, c, via, NULL, 0, pc);
    } else if (pc) {
        pc->det = (pc->det & ~(unsigned)D_WRAPPER) | D_SCRIPT;
    }
}

/* An interpreter (python, perl, node...): its inline code read, or its
 * script or standard input noted. */
static void emit_interpreter(W *w, const progspec *ps, const char *prog, pword *argv, size_t argc,
                             unsigned det, const ctx *c)
{
    bool stop = false;
    size_t i = 1;
    const pword *code = NULL;
    while (i < argc && !(argv[i].flags & W_DYN)) {
        const char *a = argv[i].s;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-' || !a[1])
            break;
        if (opt_has(&ps->code_option, a) && i + 1 < argc) {
            code = &argv[i + 1];
            i += 2;
            continue;
        }
        /* clustered: perl -pe CODE, python3 -Sc CODE */
        if (a[1] != '-' && i + 1 < argc) {
            char last[3] = {'-', a[strlen(a) - 1], 0};
            if (strlen(a) > 2 && strlist_has(&ps->code_option, last)) {
                code = &argv[i + 1];
                i += 2;
                continue;
            }
        }
        if (!strncmp(a, "--", 2) && strchr(a, '=')) {
            char opt[64];
            size_t ol = (size_t)(strchr(a, '=') - a);
            if (ol < sizeof opt) {
                memcpy(opt, a, ol);
                opt[ol] = 0;
                if (opt_has(&ps->code_option, opt)) {
                    code = &argv[i]; /* whole arg; the walker reads literals anyway */
                    i++;
                    continue;
                }
            }
        }
        if (opt_has(&ps->stop_flags, a))
            stop = true;
        if (opt_has(&ps->options_with_value, a))
            i++;
        i++;
    }
    if (!code && ps->code_operand && i < argc && !stop)
        code = &argv[i];
    pcmd *pc = push(w, argv, argc, det, c);
    if (!pc)
        return;
    if (code) {
        pc->det |= D_INLINE_CODE;
        if (code->flags & W_DYN)
            pc->det |= (code->flags & W_FETCH) ? D_REMOTE_CODE : D_DYN_CODE;
        else
            inline_code(w, code->s, code->len, c, prog);
    } else if (stop) {
        /* -m module, --version ...: no code of its own */
    } else if (i < argc) {
        pc->det |= D_SCRIPT;
        if ((argv[i].flags & W_FETCH) || downloaded(w, &argv[i]))
            pc->det |= D_REMOTE_CODE;
        if (!strcmp(argv[i].s, "-")) {
            if (c->stdin_det & D_FETCH_IN)
                pc->det |= D_REMOTE_CODE;
            else if (c->stdin_text)
                inline_code(w, c->stdin_text, c->stdin_len, c, prog);
        }
    } else {
        pc->det |= D_SCRIPT;
        if (c->stdin_det & D_FETCH_IN)
            pc->det |= D_REMOTE_CODE;
        else if (c->stdin_text) {
            pc->det |= D_INLINE_CODE;
            inline_code(w, c->stdin_text, c->stdin_len, c, prog);
        }
    }
}

/* Does the command's standard output go to a file (or elsewhere) by a
 * redirection? */
static bool stdout_redirected(const ctx *c)
{
    for (size_t i = 0; i < c->nredir; i++)
        if ((c->redir[i].op == RD_OUT || c->redir[i].op == RD_APPEND || c->redir[i].op == RD_DUP) &&
            (c->redir[i].fd == -1 || c->redir[i].fd == 1))
            return true;
    return false;
}

/* Is long option a (--name or --name=...) one of l, or an abbreviation of
 * one (getopt_long takes an unambiguous prefix; any prefix counts here)? */
static bool long_in(const strlist *l, const char *a, size_t n)
{
    for (size_t k = 0; k < l->n; k++)
        if (l->v[k][0] == '-' && l->v[k][1] == '-' && n >= 3 && n <= strlen(l->v[k]) &&
            !strncmp(l->v[k], a, n))
            return true;
    return false;
}

/* The value of output option a (argv[*i]) of ps, or NULL when a is not
 * one; *i moves past a value in the next word. Other options' values are
 * skipped likewise. */
static const pword *output_value(W *w, const progspec *ps, const pword *argv, size_t argc, size_t *i)
{
    const pword *a = &argv[*i];
    const char *s = a->s;
    if (s[1] == '-') {
        size_t n = strcspn(s, "=");
        bool out = long_in(&ps->output_options, s, n);
        bool val = out || long_in(&ps->options_with_value, s, n);
        if (s[n] == '=') {
            if (!out)
                return NULL;
            pword *v = ar_alloc(w->ar, sizeof *v);
            if (!v)
                return NULL;
            *v = *a;
            v->s += n + 1;
            v->len -= n + 1;
            v->dynpos = v->dynpos > n + 1 ? v->dynpos - n - 1 : 0;
            return v;
        }
        if (val && *i + 1 < argc)
            return out ? &argv[++*i] : (++*i, NULL);
        return NULL;
    }
    for (size_t k = 1; s[k]; k++) {
        char o[3] = {'-', s[k], 0};
        bool out = strlist_has(&ps->output_options, o);
        if (!out && !takes_value(ps, s[k]))
            continue;
        if (s[k + 1]) {
            if (!out)
                return NULL;
            pword *v = ar_alloc(w->ar, sizeof *v);
            if (!v)
                return NULL;
            *v = mkword(w, s + k + 1, strlen(s + k + 1), a->flags);
            return v;
        }
        if (strlist_has(&ps->options_optional_value, o) || *i + 1 >= argc)
            return NULL;
        return out ? &argv[++*i] : (++*i, NULL);
    }
    return NULL;
}

/* The files a program writes by its arguments (programs: output_options,
 * output_operand, output_assignment, output_file), judged as output
 * redirections of descriptor 3: sort -o FILE, uniq IN OUT, flock FILE,
 * dd of=FILE, nohup's nohup.out when standard output is not redirected. A
 * wrapper's words end with the first operand after its own. */
static void add_outputs(W *w, const progspec *ps, const pword *argv, size_t argc, const ctx *c, ctx *out)
{
    if (!ps || (!ps->output_options.n && !ps->output_operand && !ps->output_assignment.n && !ps->output_file))
        return;
    predir rd[8];
    size_t n = 0, op = 0;
    bool dd = false;
    for (size_t i = 1; i < argc && n + 1 < ARRAY_SIZE(rd); i++) {
        const pword *a = &argv[i];
        if (!dd && !(a->flags & W_DYN) && !strcmp(a->s, "--")) {
            dd = true;
            continue;
        }
        if (!dd && !(a->flags & W_DYN) && a->s[0] == '-' && a->s[1]) {
            const pword *v = output_value(w, ps, argv, argc, &i);
            if (v && strcmp(v->s, "-"))
                rd[n++] = (predir){.op = RD_OUT, .fd = 3, .target = *v};
            continue;
        }
        op++;
        const char *eq = (a->flags & W_DYN) && a->dynpos < a->len ? NULL : strchr(a->s, '=');
        if (eq && (size_t)(eq - a->s) < 64) {
            char nb[64];
            memcpy(nb, a->s, (size_t)(eq - a->s));
            nb[eq - a->s] = 0;
            if (strlist_has(&ps->output_assignment, nb) && (size_t)(eq - a->s) < a->dynpos) {
                pword v = *a;
                size_t skip = (size_t)(eq - a->s) + 1;
                v.s += skip;
                v.len -= skip;
                v.dynpos -= skip;
                rd[n++] = (predir){.op = RD_OUT, .fd = 3, .target = v};
            }
        }
        bool fd = a->len && strspn(a->s, "0123456789") == a->len && !(a->flags & W_DYN);
        if ((int)op == ps->output_operand && !fd)
            rd[n++] = (predir){.op = RD_APPEND, .fd = 3, .target = *a};
        if (ps->wrapper && (int)op >= ps->output_operand)
            break;
    }
    if (ps->output_file && !stdout_redirected(c))
        rd[n++] = (predir){
            .op = RD_APPEND, .fd = 3, .target = mkword(w, ps->output_file, strlen(ps->output_file), 0)};
    add_redirs(w, c, out, rd, n);
}

/* A wrapper (env, sudo, xargs, timeout, ssh...): its own options, then the
 * command it runs, walked as a command of its own. */
static void emit_wrapper(W *w, const progspec *ps, const char *prog, pword *argv, size_t argc, unsigned det,
                         const ctx *c)
{
    bool stop = false;
    size_t i = 1;
    const pword *cmdopt = NULL;
    const pword *splitopt = NULL;
    /* options, with the ones whose value is a command or a directory */
    while (i < argc && !(argv[i].flags & W_DYN)) {
        const char *a = argv[i].s;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-' || !a[1])
            break;
        if (opt_has(&ps->stop_flags, a))
            stop = true;
        if (opt_has(&ps->command_option, a) && i + 1 < argc)
            cmdopt = &argv[i + 1];
        if (opt_has(&ps->split_option, a) && i + 1 < argc)
            splitopt = &argv[i + 1];
        if (!strncmp(a, "--", 2) && strchr(a, '=')) {
            char opt[64];
            size_t ol = (size_t)(strchr(a, '=') - a);
            if (ol < sizeof opt) {
                memcpy(opt, a, ol);
                opt[ol] = 0;
                if (opt_has(&ps->split_option, opt)) {
                    /* env --split-string=STRING: the string after '=' */
                    pword *v = ar_alloc(w->ar, sizeof *v);
                    if (v) {
                        *v = argv[i];
                        v->s += ol + 1;
                        v->len -= ol + 1;
                        v->dynpos = v->dynpos > ol + 1 ? v->dynpos - ol - 1 : 0;
                        splitopt = v;
                    }
                }
            }
        }
        if (opt_has(&ps->chdir_option, a) && i + 1 < argc) {
            pword cdv[2] = {argv[0], argv[i + 1]};
            do_cd(w, cdv, 2);
        }
        if (opt_has(&ps->options_with_value, a))
            i++;
        i++;
    }
    /* su USER -c CMD, flock FILE -c CMD: the command option may follow operands */
    for (size_t j = i; !cmdopt && j + 1 < argc && ps->command_option.n; j++)
        if (!(argv[j].flags & W_DYN) && opt_has(&ps->command_option, argv[j].s))
            cmdopt = &argv[j + 1];
    if (ps->assignments)
        while (i < argc && !(argv[i].flags & W_DYN) && strchr(argv[i].s, '=') && argv[i].s[0] != '=' &&
               argv[i].s[0] != '-') {
            char nb[128];
            size_t nl = (size_t)(strchr(argv[i].s, '=') - argv[i].s);
            if (nl < sizeof nb) {
                memcpy(nb, argv[i].s, nl);
                nb[nl] = 0;
                if (!strcmp(nb, "PATH"))
                    det |= D_PATH_CHANGED;
                else if (!strlist_glob(&w->p->harmless_env, nb))
                    det |= D_EXEC_ENV;
            }
            i++;
        }
    for (int s = 0; s < ps->skip && i < argc; s++)
        i++;
    size_t end = argc;
    if (ps->until)
        for (size_t j = i; j < argc; j++)
            if (!strcmp(argv[j].s, ps->until)) {
                end = j;
                break;
            }
    ctx sc = *c;
    sc.via = via_add(w, c, prog);
    if (ps->remote) {
        sc.remote = true;
    }
    ctx oc = *c;
    add_outputs(w, ps, argv, i < argc ? i + 1 : argc, c, &oc);
    pcmd *self = push(w, argv, cmdopt || splitopt || stop || i >= end ? argc : i,
                      det | ((stop || (i >= end && !cmdopt && !splitopt)) ? 0 : D_WRAPPER), &oc);
    if (stop)
        return;
    if (cmdopt) {
        wstate saved = w->st;
        if (ps->remote)
            w->st.cwd_kind = CWD_OUTSIDE, w->st.cwd = "~";
        run_code(w, cmdopt, &sc, sc.via, NULL, 0, self);
        w->st = saved;
        return;
    }
    if (splitopt) {
        run_code(w, splitopt, &sc, sc.via, NULL, 0, self);
        return;
    }
    if (i >= end)
        return;
    if (ps->until && end < argc) {
        /* parallel CMD ::: A B: CMD runs once with each argument appended */
        bool dyn = false;
        unsigned wf = 0;
        const char *s = join_words(w, argv + i, end - i, &dyn, &wf);
        for (size_t j = end + 1; j < argc && j <= end + MAX_FOR_VALUES; j++) {
            char *src = xasprintf("%s %s", s, argv[j].s);
            pword code =
                mkword(w, src, strlen(src), (dyn || (argv[j].flags & W_DYN) ? W_DYN : 0) | (wf & W_FETCH));
            free(src);
            run_code(w, &code, &sc, sc.via, NULL, 0, self);
        }
        return;
    }
    if (ps->join || ps->remote) {
        bool dyn = false;
        unsigned wf = 0;
        const char *s = join_words(w, argv + i, end - i, &dyn, &wf);
        pword code = mkword(w, s, strlen(s), (dyn ? W_DYN : 0) | (wf & W_FETCH));
        wstate saved = w->st;
        if (ps->remote)
            w->st.cwd_kind = CWD_OUTSIDE, w->st.cwd = "~";
        run_code(w, &code, &sc, sc.via, NULL, 0, self);
        w->st = saved;
        return;
    }
    /* the wrapped command, with more arguments at run time for xargs */
    size_t n = end - i;
    pword *inner = argv + i;
    if (ps->append_args) {
        pword *v = ar_alloc(w->ar, (n + 1) * sizeof *v);
        if (!v)
            return;
        memcpy(v, argv + i, n * sizeof *v);
        for (size_t m = 0; m < n; m++)
            if (strstr(v[m].s, "{}") && !(v[m].flags & W_DYN)) {
                v[m].flags |= W_DYN;
                v[m].dynpos = (size_t)(strstr(v[m].s, "{}") - v[m].s);
            }
        v[n] = mkword(w, "{args}", 6, W_DYN);
        v[n].dynpos = 0;
        inner = v;
        n++;
    }
    w->depth++;
    size_t ol2 = 0;
    emit(w, inner, n, ps->append_args ? D_DYN_ARGS : 0, &sc, &ol2);
    w->depth--;
}

/* find: -exec CMD {} ; and friends: the command runs once per file under
 * the start paths. */
static void emit_find(W *w, pword *argv, size_t argc, unsigned det, const ctx *c)
{
    const pword *start = NULL;
    for (size_t i = 1; i < argc; i++) {
        const char *a = argv[i].s;
        if (a[0] == '-' || a[0] == '(' || a[0] == '!')
            break;
        if (!start)
            start = &argv[i];
    }
    pword *keep = ar_alloc(w->ar, argc * sizeof *keep);
    if (!keep)
        return;
    size_t nk = 0;
    for (size_t i = 0; i < argc; i++) {
        const char *a = argv[i].s;
        if (i > 0 &&
            (!strcmp(a, "-exec") || !strcmp(a, "-execdir") || !strcmp(a, "-ok") || !strcmp(a, "-okdir"))) {
            keep[nk++] = argv[i];
            size_t j = i + 1;
            while (j < argc && strcmp(argv[j].s, ";") && strcmp(argv[j].s, "+"))
                j++;
            size_t n = j - i - 1;
            if (n) {
                pword *inner = ar_alloc(w->ar, n * sizeof *inner);
                if (!inner)
                    return;
                for (size_t m = 0; m < n; m++) {
                    inner[m] = argv[i + 1 + m];
                    const char *br = strstr(inner[m].s, "{}");
                    if (br) {
                        const char *base = start ? start->s : ".";
                        char *s = xasprintf("%s/%s", base, inner[m].s);
                        size_t dp = strlen(base) + 1 + (size_t)(br - inner[m].s);
                        inner[m] = mkword(w, s, strlen(s),
                                          W_DYN | W_SYNTH | (start ? start->flags & (W_TILDE | W_DYN) : 0));
                        inner[m].dynpos = start && (start->flags & W_DYN) ? start->dynpos : dp;
                        free(s);
                    }
                }
                ctx sc = *c;
                sc.via = via_add(w, c, "find");
                w->depth++;
                size_t ol2 = 0;
                emit(w, inner, n, 0, &sc, &ol2);
                w->depth--;
            }
            i = j;
            continue;
        }
        keep[nk++] = argv[i];
    }
    push(w, keep, nk, det, c);
}

/* git -c alias.NAME=VALUE: a `!cmd` alias is shell code, walked; another is
 * expanded where the command uses it. The command itself is emitted after. */
static void git_aliases(W *w, const progspec *ps, pword *argv, size_t argc, unsigned det, const ctx *c)
{
    size_t i = 1;
    const char *alias_name = NULL, *alias_val = NULL;
    const progspec *gs = ps;
    while (i < argc && argv[i].s[0] == '-' && !(argv[i].flags & W_DYN)) {
        const char *a = argv[i].s;
        const char *kv = NULL;
        if (!strcmp(a, "-c") && i + 1 < argc)
            kv = argv[i + 1].s;
        else if (!strncmp(a, "-c", 2) && a[2])
            kv = a + 2;
        if (kv && !strncasecmp(kv, "alias.", 6) && strchr(kv, '=')) {
            const char *eq = strchr(kv, '=');
            alias_name = ar_strndup(w->ar, kv + 6, (size_t)(eq - kv - 6));
            alias_val = eq + 1;
            if (alias_val[0] == '!') {
                pword code =
                    mkword(w, alias_val + 1, strlen(alias_val + 1), argv[i + 1].flags & (W_DYN | W_FETCH));
                run_code(w, &code, c, via_add(w, c, "git alias"), NULL, 0, NULL);
            }
        }
        if (gs && strlist_has(&gs->options_with_value, a))
            i++;
        i++;
    }
    if (alias_name && alias_val && alias_val[0] != '!' && i < argc && !strcmp(argv[i].s, alias_name)) {
        /* git -c alias.x='push --force' x: expand */
        char *src = xasprintf("git %s", alias_val);
        pcmd *marker = push(w, argv, 1, det | D_WRAPPER, c);
        (void)marker;
        walk_source(w, src, strlen(src), c, via_add(w, c, "git alias"), NULL);
        free(src);
    }
}

static const char *emit(W *w, pword *argv, size_t argc, unsigned det, const ctx *c, size_t *olen)
{
    *olen = 0;
    if (w->stopped)
        return NULL;
    if (argc == 0) {
        if (c->nredir || det)
            push(w, NULL, 0, det | D_EMPTY, c);
        return NULL;
    }
    if (argv[0].flags & (W_DYN | W_GLOB)) {
        /* a program name made at run time, or by pathname expansion */
        pcmd *pc = push(w, argv, argc, det | D_DYN_PROGRAM, c);
        if (pc && (argv[0].flags & W_FETCH))
            pc->det |= D_REMOTE_CODE;
        return NULL;
    }
    const char *name = argv[0].s;
    const char *prog = basename_of(name);
    const progspec *ps = policy_prog(w->p, prog);

    if (w->depth > TXBOX_POLICY_MAX_DEPTH) {
        push(w, argv, argc, det | D_TOO_DEEP, c);
        return NULL;
    }
    /* a function or alias defined earlier in this string */
    const func *fn = strchr(name, '/') ? NULL : get_func(w, name);
    if (fn) {
        emit_function(w, fn, argv, argc, det, c);
        return NULL;
    }
    if (downloaded(w, &argv[0]) && strchr(name, '/'))
        det |= D_REMOTE_CODE;

    /* builtins that change what later commands mean */
    if (!strcmp(prog, "cd") || !strcmp(prog, "pushd") || !strcmp(prog, "popd")) {
        /* popd, and pushd alone or with +N/-N, move along the directory stack */
        bool stack = !strcmp(prog, "popd") ||
                     (!strcmp(prog, "pushd") && (argc < 2 || ((argv[1].s[0] == '+' || argv[1].s[0] == '-') &&
                                                              isdigit((unsigned char)argv[1].s[1]))));
        if (stack)
            w->st.cwd_kind = CWD_UNKNOWN;
        else
            do_cd(w, argv, argc);
        push(w, argv, argc, det, c);
        return NULL;
    }
    if (!strchr(name, '/') && builtin_evaluates(w, prog, argv, argc))
        det |= D_DYN_EVAL;
    if (!strcmp(prog, "set") && set_keyword(argv, argc))
        w->st.env_changed = true; /* NAME=VALUE arguments become environment */
    if (changes_lookup(prog, argv, argc)) {
        /* this command and every later one (an alias is expanded where used) */
        if (strcmp(prog, "alias"))
            w->st.path_changed = true;
        det |= D_PATH_CHANGED;
    }
    if (!strcmp(prog, "alias")) {
        emit_alias(w, argv, argc, det, c);
        return NULL;
    }
    if (!strcmp(prog, "set") && argc >= 2 && !strcmp(argv[1].s, "--")) {
        w->st.pos = argv + 2;
        w->st.npos = argc - 2;
        push(w, argv, argc, det, c);
        return NULL;
    }
    if (!strcmp(prog, "trap") && argc >= 3) {
        pcmd *pc = push(w, argv, argc, det | D_WRAPPER, c);
        run_code(w, &argv[1], c, via_add(w, c, "trap"), NULL, 0, pc);
        return NULL;
    }
    if (!strcmp(prog, "eval")) {
        bool dyn = false;
        unsigned wf = 0;
        const char *s = join_words(w, argv + 1, argc - 1, &dyn, &wf);
        pword code = mkword(w, s, strlen(s), (dyn ? W_DYN : 0) | (wf & W_FETCH));
        pcmd *pc = push(w, argv, 1, det | D_WRAPPER, c);
        run_code(w, &code, c, via_add(w, c, "eval"), NULL, 0, pc);
        return NULL;
    }
    if (!strcmp(prog, "source") || !strcmp(prog, ".")) {
        pcmd *pc = push(w, argv, argc, det | D_SCRIPT, c);
        if (pc && argc > 1 && ((argv[1].flags & W_FETCH) || downloaded(w, &argv[1])))
            pc->det |= D_REMOTE_CODE;
        if (pc && argc > 1 && !strcmp(argv[1].s, "/dev/stdin") && (c->stdin_det & D_FETCH_IN))
            pc->det |= D_REMOTE_CODE;
        return NULL;
    }
    /* network fetchers: remember what they save, to catch running it later */
    if (strlist_has(&w->p->fetchers, prog))
        note_fetched(w, argv, argc);

    if (ps && ps->shell) {
        emit_shell(w, ps, prog, argv, argc, det, c);
        return NULL;
    }

    if (ps && ps->interpreter) {
        emit_interpreter(w, ps, prog, argv, argc, det, c);
        return NULL;
    }

    if (ps && ps->wrapper) {
        emit_wrapper(w, ps, prog, argv, argc, det, c);
        return NULL;
    }

    if (!strcmp(prog, "find")) {
        emit_find(w, argv, argc, det, c);
        return NULL;
    }

    if (!strcmp(prog, "git"))
        git_aliases(w, ps, argv, argc, det, c);

    if (!strcmp(prog, "sed") || !strcmp(prog, "gsed"))
        return emit_sed(w, argv, argc, det, c);

    ctx oc = *c;
    add_outputs(w, ps, argv, argc, c, &oc);
    push(w, argv, argc, det, &oc);
    return static_stdout(w, prog, argv, argc, c, olen);
}

/* ---- sources ---- */
/* tree-sitter calls this every hundred parse operations. Past the tick
 * count or the deadline the parse stops and the verdict is `too-large`
 * (uncertain): so a pathological input may get `too-large` on a slow run
 * and a stricter verdict on a fast one, but never `safe`. */
static bool progress_cb(TSParseState *state)
{
    W *w = state->payload;
    w->ticks++;
    return w->ticks > MAX_PARSE_TICKS || now_ns() > w->deadline;
}

typedef struct strinput {
    const char *s;
    size_t len;
} strinput;

static const char *str_read(void *payload, uint32_t byte, TSPoint pt, uint32_t *bytes_read)
{
    (void)pt;
    const strinput *in = payload;
    if (byte >= in->len) {
        *bytes_read = 0;
        return "";
    }
    *bytes_read = (uint32_t)(in->len - byte);
    return in->s + byte;
}

static const char *walk_source(W *w, const char *src, size_t len, const ctx *c, const char *via, size_t *olen)
{
    if (olen)
        *olen = 0;
    if (w->stopped)
        return NULL;
    if (w->depth >= TXBOX_POLICY_MAX_DEPTH) {
        push_det(w, D_TOO_DEEP, "(nesting)", c);
        return NULL;
    }
    if (w->parsed + len > MAX_PARSED) {
        push_det(w, D_TOO_LARGE, "(too much code)", c);
        w->stopped = true;
        return NULL;
    }
    w->parsed += len;
    if (memchr(src, 0, len)) {
        push_det(w, D_BAD_INPUT, "(NUL byte)", c);
        return NULL;
    }
    if (len > MAX_UNBALANCED && unbalanced(src, len)) {
        /* tree-sitter's error recovery is super-linear on large broken
         * input: read the pieces only */
        push_det(w, D_PARSE_ERROR, "(unbalanced quotes or brackets)", c);
        ctx sc = *c;
        if (via)
            sc.via = via;
        w->depth++;
        recover_segments(w, src, len, &sc);
        w->depth--;
        return NULL;
    }
    strinput in = {.s = src, .len = len};
    TSParseOptions opt = {.payload = w, .progress_callback = progress_cb};
    TSTree *tree = ts_parser_parse_with_options(
        w->parser, NULL, (TSInput){.payload = &in, .read = str_read, .encoding = TSInputEncodingUTF8}, opt);
    if (!tree) {
        ts_parser_reset(w->parser);
        push_det(w, D_TOO_LARGE, "(parse time limit)", c);
        w->stopped = true;
        return NULL;
    }
    const char *saved_src = w->src;
    int saved_nd = w->node_depth;
    bool saved_pe = w->parse_error_seen;
    w->src = src;
    w->node_depth = 0;
    w->parse_error_seen = false;
    ctx sc = *c;
    if (via)
        sc.via = via;
    w->depth++;
    TSNode root = ts_tree_root_node(tree);
    if (ts_node_has_error(root)) {
        push_det(w, D_PARSE_ERROR, "(parse error)", &sc);
        w->parse_error_seen = true;
    }
    const char *out = walk_node(w, root, &sc, olen);
    if (ts_node_has_error(root) && !w->stopped)
        recover_segments(w, src, len, &sc);
    w->depth--;
    w->src = saved_src;
    w->node_depth = saved_nd;
    w->parse_error_seen = saved_pe;
    ts_tree_delete(tree);
    return out;
}

/* Quotes and brackets that do not pair up, read naively (comments skipped;
 * here-documents not understood, which errs towards "unbalanced"). */
static bool unbalanced(const char *s, size_t n)
{
    char q = 0;
    long depth = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (q) {
            if (ch == '\\' && q != '\'')
                i++;
            else if (ch == q)
                q = 0;
            continue;
        }
        if (ch == '\\')
            i++;
        else if (ch == '\'' || ch == '"' || ch == '`')
            q = ch;
        else if (ch == '#' && (i == 0 || strchr(" \t\n;&|(", s[i - 1])))
            while (i < n && s[i] != '\n')
                i++;
        else if (ch == '(' || ch == '{')
            depth++;
        else if (ch == ')' || ch == '}')
            depth--;
        if (depth < 0)
            return true;
    }
    return q != 0 || depth != 0;
}

/* After a parse error, tree-sitter may have swallowed commands into the
 * broken node: split the source at unquoted ; & | and newlines and read
 * each piece that parses cleanly on its own (more commands can only make
 * the verdict stricter). */
static void recover_segments(W *w, const char *src, size_t len, const ctx *c)
{
    size_t start = 0, nseg = 0;
    char q = 0;
    for (size_t i = 0; i <= len && nseg < 256 && !w->stopped; i++) {
        char ch = i < len ? src[i] : '\n';
        if (q) {
            if (ch == '\\' && q == '"')
                i++;
            else if (ch == q)
                q = 0;
            continue;
        }
        if (ch == '\\') {
            i++;
            continue;
        }
        if (ch == '\'' || ch == '"' || ch == '`') {
            q = ch;
            continue;
        }
        if (ch != ';' && ch != '&' && ch != '|' && ch != '\n' && i < len)
            continue;
        if (i > start && i - start <= MAX_UNBALANCED) {
            const char *seg = src + start;
            size_t sl = i - start;
            strinput in = {.s = seg, .len = sl};
            TSParseOptions opt = {.payload = w, .progress_callback = progress_cb};
            TSTree *t = ts_parser_parse_with_options(
                w->parser, NULL, (TSInput){.payload = &in, .read = str_read, .encoding = TSInputEncodingUTF8},
                opt);
            if (!t) {
                ts_parser_reset(w->parser);
                w->stopped = true;
                break;
            }
            if (t && !ts_node_has_error(ts_tree_root_node(t))) {
                const char *saved_src = w->src;
                w->src = seg;
                walk_node(w, ts_tree_root_node(t), c, NULL);
                w->src = saved_src;
            }
            if (t)
                ts_tree_delete(t);
            nseg++;
        }
        start = i + 1;
    }
}

void *shell_parser_new(void)
{
    TSParser *p = ts_parser_new();
    if (!ts_parser_set_language(p, tree_sitter_bash())) {
        ts_parser_delete(p);
        return NULL;
    }
    return p;
}

void shell_parser_free(void *parser)
{
    if (parser)
        ts_parser_delete(parser);
}

static void w_init(W *w, const txbox_policy *p, void *parser, arena *ar, pcmds *out)
{
    memset(w, 0, sizeof *w);
    w->p = p;
    w->parser = parser;
    w->ar = ar;
    w->out = out;
    w->st.cwd_kind = CWD_INSIDE;
    w->st.cwd = "";
    w->st.old_kind = CWD_UNKNOWN;
    w->deadline = now_ns() + PARSE_BUDGET_NS;
    memset(out, 0, sizeof *out);
}

static void w_finish(W *w)
{
    if (w->stopped || w->ar->exhausted)
        push_det(w, D_TOO_LARGE, "(work limit)", NULL);
    if (w->out->n == 0)
        push_det(w, D_EMPTY, "", NULL);
}

void shell_walk(const txbox_policy *p, void *parser, arena *ar, const char *src, size_t len, pcmds *out)
{
    W w;
    w_init(&w, p, parser, ar, out);
    ctx c = {0};
    w.depth = -1; /* the top-level source is depth 0 */
    if (len > TXBOX_POLICY_MAX_COMMAND)
        push_det(&w, D_TOO_LARGE, "(command too large)", &c);
    else
        walk_source(&w, src, len, &c, NULL, NULL);
    w.depth = 0;
    w_finish(&w);
}

void shell_walk_argv(const txbox_policy *p, void *parser, arena *ar, char *const *argv, pcmds *out)
{
    W w;
    w_init(&w, p, parser, ar, out);
    ctx c = {0};
    size_t n = 0, tot = 0;
    while (argv[n]) {
        tot += strlen(argv[n]);
        n++;
    }
    if (tot > TXBOX_POLICY_MAX_COMMAND || n > MAX_WORDS) {
        push_det(&w, D_TOO_LARGE, "(command too large)", &c);
    } else {
        pword *v = ar_alloc(ar, (n ? n : 1) * sizeof *v);
        if (v) {
            for (size_t i = 0; i < n; i++)
                v[i] = mkword(&w, argv[i], strlen(argv[i]), 0);
            size_t ol = 0;
            w.src = "";
            emit(&w, v, n, 0, &c, &ol);
        }
    }
    w_finish(&w);
}
