/* The template language of a policy rule's `compensate:` (docs/policy.md,
 * "Compensations"; the sagas that run them: saga.c). Text is kept as is;
 * `{N}` is the command's Nth operand (non-option argument, as the matchers
 * count them; `{0}` the program as written), `{opt:-X}` / `{opt:--name}`
 * the value of an option, `{capture.N}` group N of the first match of the
 * capture regex (POSIX ERE) in the command's standard output; `{{` and `}}`
 * are literal braces. Every value is inserted shell-quoted ('...'), so that
 * no value can add shell syntax. */
#include <regex.h>

#include "compensate.h"
#include "pol.h"

#define MAX_OPERAND 64

static void quote(dbuf *b, const char *s, size_t n, bool brace)
{
    dbuf_add(b, "'", 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'')
            dbuf_addstr(b, "'\\''");
        else if (brace && (s[i] == '{' || s[i] == '}'))
            dbuf_add(b, s + i, 1), dbuf_add(b, s + i, 1);
        else
            dbuf_add(b, s + i, 1);
    }
    dbuf_add(b, "'", 1);
}

static bool all_digits(const char *s, size_t n)
{
    if (!n || n > 3)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static bool word_static(const pword *w) { return !(w->flags & (W_DYN | W_GLOB | W_TILDE)); }

/* Operand k (1-based; 0: the program) of c, or NULL (why says why). */
static const pword *operand(const txbox_policy *p, const pcmd *c, size_t k, const char **why)
{
    if (!c->argc) {
        *why = "the command has no words";
        return NULL;
    }
    if (k == 0)
        return word_static(&c->argv[0]) ? &c->argv[0]
                                        : (*why = "the program is only known at run time", NULL);
    const progspec *ps = word_static(&c->argv[0]) ? policy_prog(p, basename_of(c->argv[0].s)) : NULL;
    bool after_dd = false;
    size_t seen = 0;
    for (size_t i = 1; i < c->argc; i++) {
        const pword *a = &c->argv[i];
        if (!word_static(a)) {
            *why = "an argument is only known at run time";
            return NULL;
        }
        if (!after_dd && !strcmp(a->s, "--")) {
            after_dd = true;
            continue;
        }
        if (!after_dd && a->s[0] == '-' && a->len > 1) {
            if (ps && strlist_has(&ps->options_with_value, a->s))
                i++;
            continue;
        }
        if (++seen == k)
            return a;
    }
    *why = "the command has fewer operands";
    return NULL;
}

/* The value of option name in c (--name=V, --name V, -X V, -XV). */
static bool option_value(const pcmd *c, const char *name, size_t nl, const char **v, size_t *vl,
                         const char **why)
{
    for (size_t i = 1; i < c->argc; i++) {
        const pword *a = &c->argv[i];
        if (!word_static(a)) {
            *why = "an argument is only known at run time";
            return false;
        }
        if (!strcmp(a->s, "--"))
            break;
        if (strncmp(a->s, name, nl) != 0)
            continue;
        const char *rest = a->s + nl;
        bool lng = nl > 2 && name[1] == '-';
        if (*rest == 0) {
            if (i + 1 >= c->argc || !word_static(&c->argv[i + 1])) {
                *why = "the option's value is missing or only known at run time";
                return false;
            }
            *v = c->argv[i + 1].s;
            *vl = c->argv[i + 1].len;
            return true;
        }
        if (lng && *rest != '=')
            continue;
        if (lng)
            rest++;
        *v = rest;
        *vl = strlen(rest);
        return true;
    }
    *why = "the command does not give the option";
    return false;
}

/* Renders one {name}; returns -1 with why on an unknown value. */
static int subst(struct comp_ctx *t, const char *name, size_t nl, dbuf *b, char *why, size_t wn)
{
    const char *reason = NULL;
    if (all_digits(name, nl)) {
        size_t k = (size_t)strtoul(name, NULL, 10);
        if (k > MAX_OPERAND) {
            snprintf(why, wn, "{%.*s}: operands up to %d", (int)nl, name, MAX_OPERAND);
            return -1;
        }
        if (t->stage == COMP_CHECK)
            return 0;
        if (t->stage == COMP_CAPTURE)
            goto keep;
        const pword *w = operand(t->p, t->c, k, &reason);
        if (!w) {
            snprintf(why, wn, "{%.*s}: %s", (int)nl, name, reason);
            return -1;
        }
        quote(b, w->s, w->len, true);
        return 0;
    }
    if (nl > 5 && !strncmp(name, "opt:", 4) && name[4] == '-') {
        if (t->stage == COMP_CHECK)
            return 0;
        if (t->stage == COMP_CAPTURE)
            goto keep;
        const char *v;
        size_t vl;
        _cleanup_free_ char *on = xasprintf("%.*s", (int)(nl - 4), name + 4);
        if (!option_value(t->c, on, nl - 4, &v, &vl, &reason)) {
            snprintf(why, wn, "{%.*s}: %s", (int)nl, name, reason);
            return -1;
        }
        quote(b, v, vl, true);
        return 0;
    }
    if (nl > 8 && !strncmp(name, "capture.", 8) && all_digits(name + 8, nl - 8)) {
        size_t g = (size_t)strtoul(name + 8, NULL, 10);
        if (t->stage == COMP_CHECK) {
            if (!t->has_capture) {
                snprintf(why, wn, "{%.*s} needs a capture regex (capture:)", (int)nl, name);
                return -1;
            }
            if (g > t->ngroups) {
                snprintf(why, wn, "{%.*s}: the capture regex has %zu groups", (int)nl, name, t->ngroups);
                return -1;
            }
            return 0;
        }
        if (t->stage == COMP_WORDS)
            goto keep;
        if (g >= t->nm || t->m[g].rm_so < 0) {
            snprintf(why, wn, "{%.*s}: the capture regex did not match the command's output", (int)nl, name);
            return -1;
        }
        quote(b, t->out + t->m[g].rm_so, (size_t)(t->m[g].rm_eo - t->m[g].rm_so), false);
        return 0;
    }
    snprintf(why, wn, "unknown substitution {%.*s} (use {N}, {opt:-X}, {capture.N}; {{ and }} for braces)",
             (int)nl, name);
    return -1;
keep:
    dbuf_add(b, "{", 1);
    dbuf_add(b, name, nl);
    dbuf_add(b, "}", 1);
    return 0;
}

/* Renders tpl into b for t->stage. Literal braces: written doubled at
 * COMP_WORDS (stage 2 reads the template again), single at COMP_CAPTURE. */
int comp_render(struct comp_ctx *t, const char *tpl, dbuf *b, char *why, size_t wn)
{
    for (const char *s = tpl; *s;) {
        if ((s[0] == '{' && s[1] == '{') || (s[0] == '}' && s[1] == '}')) {
            dbuf_add(b, s, t->stage == COMP_CAPTURE ? 1 : 2);
            s += 2;
            continue;
        }
        if (*s == '}') {
            snprintf(why, wn, "a lone '}' (write }} for a literal brace)");
            return -1;
        }
        if (*s != '{') {
            size_t n = strcspn(s, "{}");
            dbuf_add(b, s, n);
            s += n;
            continue;
        }
        const char *e = strchr(s + 1, '}');
        if (!e || memchr(s + 1, '{', (size_t)(e - s - 1))) {
            snprintf(why, wn, "an unclosed '{' (write {{ for a literal brace)");
            return -1;
        }
        if (subst(t, s + 1, (size_t)(e - s - 1), b, why, wn) < 0)
            return -1;
        s = e + 1;
    }
    if (b->dropped) {
        snprintf(why, wn, "the compensation is longer than %u bytes", COMP_MAX_RENDERED);
        return -1;
    }
    return 0;
}

int comp_rule_check(const char *compensate, const char *capture, char *why, size_t n)
{
    struct comp_ctx t = {.stage = COMP_CHECK, .has_capture = capture != NULL};
    if (capture) {
        regex_t re;
        int rc = regcomp(&re, capture, REG_EXTENDED);
        if (rc) {
            char m[200];
            regerror(rc, &re, m, sizeof m);
            snprintf(why, n, "capture: not a POSIX extended regex: %s", m);
            return -1;
        }
        t.ngroups = re.re_nsub;
        regfree(&re);
        if (!compensate) {
            snprintf(why, n, "capture: without compensate: (nothing would use it)");
            return -1;
        }
    }
    if (!compensate)
        return 0;
    if (!*compensate || strchr(compensate, '\n')) {
        snprintf(why, n, "compensate: must be one non-empty line");
        return -1;
    }
    dbuf b;
    dbuf_init(&b, COMP_MAX_RENDERED);
    char w[300] = "";
    int rc = comp_render(&t, compensate, &b, w, sizeof w);
    dbuf_free(&b);
    if (rc < 0)
        snprintf(why, n, "compensate: %s", w);
    return rc;
}
