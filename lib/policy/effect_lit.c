/* The literal filter of the effect rules (effect_rules.h): the strings one
 * of which every match of a content_any pattern holds, so that most
 * entries are judged without a regular expression. */
#include <string.h>

#include "effect_rules.h"

/* ---- the literal filter ----
 *
 * For each content_any pattern, a set of strings of which every match
 * holds one: the longest run of bytes the pattern requires one after the
 * other (a small bracket expression multiplies the run: gh[pousr]_ gives
 * ghp_, gho_, ghu_, ghs_ and ghr_), or the union of such runs over the
 * branches of a group it requires ((AKIA|ASIA)). A window holding none of
 * the strings of any pattern cannot match, and then no regular expression
 * is compiled or run: the built-in secret rule's prefilter cost 0.5 ms to
 * compile at every commit (the whole effects phase of a ten-file change
 * went from 0.98 to 0.51 ms).
 * The reader follows a subset of POSIX ERE and is conservative: a part it
 * does not follow ends the current run (., classes, back-references,
 * multibyte characters, optional atoms); syntax it does not know
 * (intervals it cannot read, a quantifier with nothing before it) leaves
 * the pattern without a set, and a rule with such a pattern without the
 * filter. tests/unit/test_effects.c checks on random text that the filter
 * never rejects what regexec matches. */

#define LIT_MAX 16      /* strings in one set */
#define LIT_LEN 32      /* bytes of one string */
#define LIT_DEPTH 8     /* nested groups followed */
#define LIT_RULE_MAX 64 /* strings of one rule */

struct litset {
    unsigned n; /* 0: no set */
    unsigned char len[LIT_MAX];
    char s[LIT_MAX][LIT_LEN];
};

struct litp {
    const char *p; /* the next byte of the pattern */
    bool icase;
    bool bad; /* syntax this reader does not follow */
};

enum { A_CHARS, A_GROUP, A_ANCHOR, A_OTHER };

struct atom {
    int kind;
    unsigned k; /* A_CHARS: one of c[0, k) */
    unsigned char c[LIT_MAX];
    struct litset g; /* A_GROUP: its set (g.n = 0: none) */
};

static unsigned char lower_ascii(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static unsigned set_minlen(const struct litset *a)
{
    unsigned m = a->n ? a->len[0] : 0;
    for (unsigned i = 1; i < a->n; i++)
        m = a->len[i] < m ? a->len[i] : m;
    return m;
}

/* The better of best and c: a longer shortest string, then fewer strings. */
static void set_keep(struct litset *best, const struct litset *c)
{
    unsigned mc = set_minlen(c), mb = set_minlen(best);
    if (mc > 0 && (!best->n || mc > mb || (mc == mb && c->n < best->n)))
        *best = *c;
}

static void run_reset(struct litset *run)
{
    run->n = 1;
    run->len[0] = 0;
}

/* The run followed by one of c[0, k); false (run unchanged) past LIT_MAX
 * strings or LIT_LEN bytes. Every string of a run has the same length. */
static bool run_extend(struct litset *run, const unsigned char *c, unsigned k)
{
    if (run->n * k > LIT_MAX || run->len[0] + 1u > LIT_LEN)
        return false;
    struct litset o = {0};
    for (unsigned i = 0; i < run->n; i++)
        for (unsigned j = 0; j < k; j++) {
            memcpy(o.s[o.n], run->s[i], run->len[i]);
            o.s[o.n][run->len[i]] = (char)c[j];
            o.len[o.n++] = (unsigned char)(run->len[i] + 1);
        }
    *run = o;
    return true;
}

/* Under (?i), a letter that some locale folds to a non-ASCII character
 * (k: the Kelvin sign; s: the long s; i: Turkish dotted and dotless i)
 * is left to the regex: txbox runs in the C locale, where REG_ICASE folds
 * ASCII only, but a program that links libtxbox may have called
 * setlocale. */
static bool icase_unsure(const struct litp *q, unsigned char c)
{
    return q->icase && c && strchr("iks", lower_ascii(c));
}

static void atom_char(const struct litp *q, struct atom *a, unsigned char c)
{
    if (icase_unsure(q, c))
        return; /* A_OTHER */
    a->kind = A_CHARS;
    a->k = 1;
    a->c[0] = q->icase ? lower_ascii(c) : c;
}

/* [...]: the bytes it matches, when they are few and plain. */
static void lit_bracket(struct litp *q, struct atom *a)
{
    const char *p = q->p + 1;
    bool other = *p == '^', first = true;
    if (other)
        p++;
    bool mem[128] = {false};
    for (;;) {
        unsigned char c = (unsigned char)*p;
        if (!c) {
            q->bad = true;
            return;
        }
        if (c == ']' && !first) {
            p++;
            break;
        }
        first = false;
        if (c == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
            char end = p[1];
            const char *e = p + 2;
            while (*e && !(e[0] == end && e[1] == ']'))
                e++;
            if (!*e) {
                q->bad = true;
                return;
            }
            p = e + 2;
            other = true;
            continue;
        }
        if (p[1] == '-' && p[2] && p[2] != ']') {
            unsigned char hi = (unsigned char)p[2];
            if (hi == '[') {
                q->bad = true;
                return;
            }
            /* digits only: a locale may order letters otherwise */
            if (c < '0' || hi > '9' || hi < c)
                other = true;
            else
                for (unsigned x = c; x <= hi; x++)
                    mem[x] = true;
            p += 3;
            continue;
        }
        if (c >= 0x80 || icase_unsure(q, c))
            other = true;
        else
            mem[q->icase ? lower_ascii(c) : c] = true;
        p++;
    }
    q->p = p;
    a->kind = A_OTHER;
    if (other)
        return;
    unsigned k = 0;
    for (unsigned x = 1; x < 128; x++)
        if (mem[x]) {
            if (k == LIT_MAX)
                return;
            a->c[k++] = (unsigned char)x;
        }
    a->kind = k ? A_CHARS : A_OTHER;
    a->k = k;
}

static void lit_alt(struct litp *q, int depth, struct litset *out);

static void lit_atom(struct litp *q, int depth, struct atom *a)
{
    unsigned char c = (unsigned char)*q->p;
    a->kind = A_OTHER;
    a->k = 0;
    switch (c) {
    case '(':
        q->p++;
        if (depth >= LIT_DEPTH) {
            q->bad = true;
            return;
        }
        lit_alt(q, depth + 1, &a->g);
        if (q->bad || *q->p != ')') {
            q->bad = true;
            return;
        }
        q->p++;
        a->kind = A_GROUP;
        return;
    case '[':
        lit_bracket(q, a);
        return;
    case '.':
        q->p++;
        return;
    case '^':
    case '$':
        q->p++;
        a->kind = A_ANCHOR;
        return;
    case '\\':
        c = (unsigned char)q->p[1];
        if (!c) {
            q->bad = true;
            return;
        }
        q->p += 2;
        /* an escaped special character is itself; \w, \b, \1 ... are not */
        if (strchr(".[]()*+?{}|^$\\", c))
            atom_char(q, a, c);
        return;
    case '*':
    case '+':
    case '?':
    case '{':
        q->bad = true; /* a quantifier with nothing before it */
        return;
    default:
        q->p++;
        if (c < 0x80) /* a multibyte character is left to the regex */
            atom_char(q, a, c);
    }
}

enum { Q_ONE, Q_OPT, Q_MORE };

/* The quantifier after an atom: exactly once, maybe not at all, or at
 * least once and maybe more. */
static int lit_quant(struct litp *q)
{
    int r = Q_ONE;
    switch (*q->p) {
    case '*':
    case '?':
        q->p++;
        r = Q_OPT;
        break;
    case '+':
        q->p++;
        r = Q_MORE;
        break;
    case '{': {
        const char *p = q->p + 1;
        unsigned long lo = 0, hi = 0;
        bool dig = false, comma = false, hidig = false;
        for (; *p >= '0' && *p <= '9'; p++, dig = true)
            lo = lo < 100000 ? lo * 10 + (unsigned long)(*p - '0') : lo;
        if (*p == ',') {
            comma = true;
            for (p++; *p >= '0' && *p <= '9'; p++, hidig = true)
                hi = hi < 100000 ? hi * 10 + (unsigned long)(*p - '0') : hi;
        }
        if (!dig || *p != '}') {
            q->bad = true;
            return Q_OPT;
        }
        q->p = p + 1;
        r = lo == 0 ? Q_OPT : (lo == 1 && ((!comma) || (hidig && hi == 1))) ? Q_ONE : Q_MORE;
        break;
    }
    default:
        return Q_ONE;
    }
    if (strchr("*+?{", *q->p) && *q->p)
        q->bad = true; /* stacked quantifiers */
    return r;
}

/* One branch: its best set (n = 0: none). */
static void lit_branch(struct litp *q, int depth, struct litset *best)
{
    struct litset run;
    run_reset(&run);
    best->n = 0;
    while (*q->p && *q->p != '|' && *q->p != ')') {
        struct atom a;
        lit_atom(q, depth, &a);
        if (q->bad)
            return;
        int quant = lit_quant(q);
        if (q->bad)
            return;
        if (a.kind == A_CHARS && quant != Q_OPT) {
            if (!run_extend(&run, a.c, a.k)) {
                set_keep(best, &run);
                run_reset(&run);
                if (!run_extend(&run, a.c, a.k))
                    run_reset(&run);
            }
            if (quant == Q_MORE) { /* its first occurrence ends the run */
                set_keep(best, &run);
                run_reset(&run);
            }
            continue;
        }
        set_keep(best, &run);
        run_reset(&run);
        if (a.kind == A_GROUP && quant != Q_OPT)
            set_keep(best, &a.g);
    }
    set_keep(best, &run);
}

/* Branches a|b|...: the union of their sets, or none when one has none. */
static void lit_alt(struct litp *q, int depth, struct litset *out)
{
    out->n = 0;
    bool none = false;
    for (;;) {
        struct litset b;
        lit_branch(q, depth, &b);
        if (q->bad)
            return;
        if (!b.n || out->n + b.n > LIT_MAX) {
            none = true;
        } else if (!none) {
            for (unsigned i = 0; i < b.n; i++) {
                memcpy(out->s[out->n], b.s[i], b.len[i]);
                out->len[out->n++] = b.len[i];
            }
        }
        if (*q->p != '|')
            break;
        q->p++;
    }
    if (none)
        out->n = 0;
}

/* ---- all strings in one pass ----
 *
 * One memmem per string read a window once per string: the secret rule's
 * 20-odd strings over every new file were a third of a 10,000-file
 * commit's judging. Instead: every string is at least lit_min bytes long,
 * so a match at p covers the byte pairs that start at p .. p + lit_min - 2,
 * and one of them starts at a multiple of lit_min - 1. The search reads the
 * pair at every such multiple and, where the pair is one the strings hold
 * in their first lit_min - 1 places, compares the strings at each start
 * that could put it there. */

static void set_pair(uint64_t *bits, unsigned char a, unsigned char b, bool icase)
{
    unsigned char av[2] = {a, a}, bv[2] = {b, b};
    if (icase) {
        av[1] = a >= 'a' && a <= 'z' ? a - 32 : a;
        bv[1] = b >= 'a' && b <= 'z' ? b - 32 : b;
    }
    for (int x = 0; x < 2; x++)
        for (int y = 0; y < 2; y++) {
            unsigned k = av[x] | (unsigned)bv[y] << 8;
            bits[k >> 6] |= 1ull << (k & 63);
        }
}

static void build_pairs(effect_rule *r)
{
    r->lit_pairs = NULL;
    r->lit_min = 0;
    if (!r->lit_ok || !r->lit_n)
        return;
    size_t m = SIZE_MAX;
    for (size_t i = 0; i < r->lit_n; i++) {
        size_t l = strlen(r->lit[i]);
        m = l < m ? l : m;
    }
    if (m < 2)
        return; /* a one-byte string: memmem (memchr) is the search */
    r->lit_pairs = xcalloc(65536 / 64, sizeof *r->lit_pairs);
    r->lit_min = m;
    for (size_t i = 0; i < r->lit_n; i++)
        for (size_t o = 0; o + 1 < m; o++)
            set_pair(r->lit_pairs, (unsigned char)r->lit[i][o], (unsigned char)r->lit[i][o + 1],
                     r->lit_icase[i]);
}

void effect_lit_build(effect_rule *r)
{
    if (r->lit_done)
        return;
    bool ok = r->content_any.n > 0;
    size_t n = 0;
    char **v = NULL;
    unsigned char *ic = NULL;
    /* search_range's choice, before either filter runs */
    for (size_t i = 0; i < r->content_any.n; i++)
        r->multiline = r->multiline || strchr(r->content_any.v[i], '\n');
    for (size_t i = 0; ok && i < r->content_any.n; i++) {
        const char *pat = r->content_any.v[i];
        bool icase = !strncmp(pat, "(?i)", 4);
        struct litp q = {.p = icase ? pat + 4 : pat, .icase = icase};
        struct litset s;
        lit_alt(&q, 0, &s);
        if (q.bad || *q.p || !s.n || n + s.n > LIT_RULE_MAX) {
            ok = false;
            break;
        }
        v = xrealloc(v, (n + s.n) * sizeof *v);
        ic = xrealloc(ic, n + s.n);
        for (unsigned k = 0; k < s.n; k++) {
            v[n] = xmalloc(s.len[k] + 1u);
            memcpy(v[n], s.s[k], s.len[k]);
            v[n][s.len[k]] = 0;
            ic[n++] = icase;
        }
    }
    if (!ok) {
        for (size_t i = 0; i < n; i++)
            free(v[i]);
        free(v);
        free(ic);
        v = NULL;
        ic = NULL;
        n = 0;
    }
    r->lit = v;
    r->lit_icase = ic;
    r->lit_n = n;
    r->lit_ok = ok;
    build_pairs(r);
    r->lit_done = true;
}

/* Does d[0, n) hold lw (lower case), ignoring ASCII case? */
static bool find_icase(const char *d, size_t n, const char *lw, size_t m)
{
    unsigned char f = (unsigned char)lw[0], F = f >= 'a' && f <= 'z' ? f - 32 : f;
    for (size_t i = 0; m && i + m <= n; i++) {
        unsigned char c = (unsigned char)d[i];
        if (c != f && c != F)
            continue;
        size_t j = 1;
        while (j < m && lower_ascii((unsigned char)d[i + j]) == (unsigned char)lw[j])
            j++;
        if (j == m)
            return true;
    }
    return false;
}

/* Does one of r's strings start at d + p (within d[0, n))? */
static bool lit_at(const effect_rule *r, const char *d, size_t n, size_t p)
{
    for (size_t i = 0; i < r->lit_n; i++) {
        const char *l = r->lit[i];
        size_t m = strlen(l);
        if (p + m > n)
            continue;
        if (!r->lit_icase[i] ? !memcmp(d + p, l, m) : find_icase(d + p, m, l, m))
            return true;
    }
    return false;
}

static bool lit_pairs_match(const effect_rule *r, const char *d, size_t n)
{
    const unsigned char *u = (const unsigned char *)d;
    size_t step = r->lit_min - 1;
    for (size_t i = 0; i + 1 < n; i += step) {
        unsigned k = u[i] | (unsigned)u[i + 1] << 8;
        if (!(r->lit_pairs[k >> 6] >> (k & 63) & 1))
            continue;
        /* a string that holds this pair at its offset o starts at i - o */
        for (size_t o = 0; o < step && o <= i; o++)
            if (lit_at(r, d, n, i - o))
                return true;
    }
    return false;
}

bool effect_lit_may_match(const effect_rule *r, const char *d, size_t n)
{
    if (!r->lit_ok)
        return true;
    if (r->lit_pairs)
        return lit_pairs_match(r, d, n);
    for (size_t i = 0; i < r->lit_n; i++) {
        size_t m = strlen(r->lit[i]);
        if (r->lit_icase[i] ? find_icase(d, n, r->lit[i], m) : memmem(d, n, r->lit[i], m) != NULL)
            return true;
    }
    return false;
}
