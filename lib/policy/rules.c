/* The policy file: YAML read with libyaml's document API, so every error
 * names file:line. Later files add rules and override rules (and program
 * specs) by id; lists of names (fetchers, secrets, ...) are extended. An
 * untrusted workspace's file is read as a layer (policy_parse_layer): only
 * what can raise a verdict or hold more is taken, the rest is noted as
 * refused. Unknown keys are errors: a typo must not silently drop a matcher. */
#include <ctype.h>
#include <strings.h>

#include "compensate.h"
#include "effect_rules.h"
#include "hostpat.h"
#include "pdoc.h"
#include "pol.h"

const char *const detector_names[D_COUNT] = {
    "parse-error", "dynamic-program", "dynamic-code", "remote-code", "fork-bomb",
    "too-deep",    "too-large",       "bad-input",    "inline-code", "wrapper",
    "exec-env",    "path-changed",    "script",       "empty",       "dynamic-args",
    "remote",      "secret-input",    "fetch-input",  "secret-read", "dynamic-eval",
};

typedef struct yctx {
    const pdoc *doc;
    const char *file;
    txbox_error *err;
    /* the built-in document: its content regexes are known to compile (the
     * test suite checks its examples) and are compiled at first use
     * (effects_compile), not at every start */
    bool builtin;
    /* non-NULL: a workspace layer (policy_parse_layer): what a workspace
     * policy may not do (loosen) is refused, one line here for each */
    strlist *refused;
    size_t examples; /* examples read so far (POLICY_MAX_EXAMPLES) */
} yctx;

/* "policy FILE:LINE: MSG" for node n, in out. */
static void ywhere(const yctx *y, const pnode *n, char *out, size_t size, const char *fmt, va_list ap)
    PRINTF(5, 0);
static void ywhere(const yctx *y, const pnode *n, char *out, size_t size, const char *fmt, va_list ap)
{
    char msg[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    snprintf(out, size, "policy %s:%zu: %s", y->file, n ? (size_t)n->line + 1 : (size_t)0, msg);
}

static int yerr(yctx *y, const pnode *n, const char *fmt, ...) PRINTF(3, 4);
static int yerr(yctx *y, const pnode *n, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    ywhere(y, n, line, sizeof line, fmt, ap);
    va_end(ap);
    return tx_err(y->err, EINVAL, "%s", line);
}

/* Notes one refusal of a workspace layer (y->refused). */
static void refuse(yctx *y, const pnode *n, const char *fmt, ...) PRINTF(3, 4);
static void refuse(yctx *y, const pnode *n, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    ywhere(y, n, line, sizeof line, fmt, ap);
    va_end(ap);
    strlist_add(y->refused, line);
}

/* node i (from 1), or NULL */
static const pnode *ynode(const yctx *y, int32_t i)
{
    return i >= 1 && (size_t)i <= y->doc->nnodes ? &y->doc->nodes[i - 1] : NULL;
}

static const char *yscalar(const yctx *y, const pnode *n)
{
    return n && n->type == YAML_SCALAR_NODE ? y->doc->pool + n->off : NULL;
}

/* the node numbers of sequence n: for (const int32_t *it = SEQ(y, n); it < SEQ_END(y, n); it++) */
#define SEQ(y, n) ((y)->doc->items + (n)->off)
#define SEQ_END(y, n) ((y)->doc->items + (n)->off + (n)->len)

/* Strings of the built-in document are static data: they are borrowed, not
 * copied (y->builtin; the objects that hold them say so: rule.borrowed,
 * progspec.borrowed, effect_rule.borrowed, STRLIST_BORROWED). 2,500
 * copies were a quarter of the built-in policy's load and 70 KB of heap
 * touched for the first time at every start. */
static char *ydup(const yctx *y, const char *s) { return y->builtin ? (char *)s : xstrdup(s); }

/* What a value may be: a check returns NULL, or why it is refused. */
typedef const char *(*yvalid)(const char *s);

/* s shown in an error: at most 60 bytes, control bytes as '?'. */
static void yshow(const char *s, char *out, size_t size)
{
    size_t n = strlen(s), o = 0;
    for (size_t i = 0; i < n && o + 4 < size && i < 60; i++)
        out[o++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (n > 60 && o + 4 < size) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = 0;
}

/* Every value: a string of at most POLICY_MAX_VALUE bytes, without NUL
 * bytes, and (line: a one-line value) without control characters. */
static int yvalue(yctx *y, const pnode *n, const char *what, bool line, yvalid check)
{
    const char *s = yscalar(y, n);
    if (!s)
        return yerr(y, n, "%s must be a string", what);
    if (y->builtin)
        return 0; /* fixed in the binary; the test suite reads it as a file */
    char shown[80];
    yshow(s, shown, sizeof shown);
    if (strlen(s) != n->len)
        return yerr(y, n, "%s: '%s' holds a NUL byte", what, shown);
    if (n->len > POLICY_MAX_VALUE)
        return yerr(y, n, "%s: a value of more than %u bytes", what, POLICY_MAX_VALUE);
    for (const char *c = s; line && *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return yerr(y, n, "%s: '%s' holds a control character (one line expected)", what, shown);
    const char *why = check ? check(s) : NULL;
    if (why)
        return yerr(y, n, "%s: '%s' %s", what, shown, why);
    return 0;
}

static const char *v_nonempty(const char *s) { return *s ? NULL : "is empty"; }

/* Does s hold a control character (a path or an option is one line)? */
static bool has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

static const char *v_option(const char *s)
{
    static const char shapes[] = "is not an option (-x, --name, +o)"; /* wording: not txbox's */
    return (s[0] == '-' || s[0] == '+') && s[1] && !has_control(s) ? NULL : shapes;
}

static const char *v_name(const char *s)
{
    if (!isalpha((unsigned char)s[0]) && s[0] != '_')
        return "is not a variable name";
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return "is not a variable name";
    return NULL;
}

static const char *v_env(const char *s)
{
    if (!*s)
        return "is empty";
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("_*?[]!-", *s))
            return "is not a variable name (or a glob of one)";
    return NULL;
}

static const char *v_abs(const char *s)
{
    return s[0] == '/' && !has_control(s) ? NULL : "is not an absolute path (on one line)";
}

/* hide: an absolute path or ~/PATH, written plainly: no . or .. components,
 * not the root or the home itself (each would hide everything). */
static const char *v_hide(const char *s)
{
    if (!*s)
        return "is empty";
    if (has_control(s))
        return "holds a control character";
    if (!strcmp(s, "~") || !strcmp(s, "~/"))
        return "would hide everything (the root or the whole home)";
    const char *p = s;
    if (s[0] == '~' && s[1] == '/')
        p = s + 1;
    else if (s[0] != '/')
        return "is not an absolute path or ~/PATH";
    if (!strcmp(p, "/") || !p[1])
        return "would hide everything (the root or the whole home)";
    for (const char *c = p; *c;) {
        while (*c == '/')
            c++;
        size_t l = strcspn(c, "/");
        if ((l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
            return "has a . or .. component";
        c += l;
    }
    return NULL;
}

/* A string value into *out (line: one line, not empty). */
static int ystr_v(yctx *y, const pnode *n, char **out, const char *what, bool line)
{
    if (yvalue(y, n, what, line, line ? v_nonempty : NULL) < 0)
        return -1;
    if (!y->builtin)
        free(*out);
    *out = ydup(y, yscalar(y, n));
    return 0;
}

static int ystr(yctx *y, const pnode *n, char **out, const char *what)
{
    return ystr_v(y, n, out, what, false);
}

/* A one-line string that is not empty (ids, reasons, suggestions). */
static int yline(yctx *y, const pnode *n, char **out, const char *what)
{
    return ystr_v(y, n, out, what, true);
}

static int ybool(yctx *y, const pnode *n, bool *out, const char *what)
{
    const char *s = yscalar(y, n);
    if (s && (!strcmp(s, "true") || !strcmp(s, "yes"))) {
        *out = true;
        return 0;
    }
    if (s && (!strcmp(s, "false") || !strcmp(s, "no"))) {
        *out = false;
        return 0;
    }
    return yerr(y, n, "%s must be true or false", what);
}

static int yint(yctx *y, const pnode *n, int *out, const char *what)
{
    const char *s = yscalar(y, n);
    uint64_t v;
    if (!s || !parse_u64(s, &v) || v > 100000)
        return yerr(y, n, "%s must be a small non-negative number", what);
    *out = (int)v;
    return 0;
}

/* A string or a list of strings, each checked (with its own line). */
static int ylist_v(yctx *y, const pnode *n, strlist *out, const char *what, yvalid check)
{
    if (n->type == YAML_SCALAR_NODE) {
        if (yvalue(y, n, what, false, check) < 0)
            return -1;
        (y->builtin ? strlist_add_borrowed : strlist_add)(out, yscalar(y, n));
        return 0;
    }
    if (n->type != YAML_SEQUENCE_NODE)
        return yerr(y, n, "%s must be a string or a list of strings", what);
    if (out->n + n->len > POLICY_MAX_LIST)
        return yerr(y, n, "%s: more than %u entries", what, POLICY_MAX_LIST);
    for (const int32_t *it = SEQ(y, n); it < SEQ_END(y, n); it++) {
        const pnode *e = ynode(y, *it);
        if (!yscalar(y, e))
            return yerr(y, e ? e : n, "%s: every entry must be a string", what);
        if (yvalue(y, e, what, false, check) < 0)
            return -1;
        (y->builtin ? strlist_add_borrowed : strlist_add)(out, yscalar(y, e));
    }
    return 0;
}

static int ylist(yctx *y, const pnode *n, strlist *out, const char *what)
{
    return ylist_v(y, n, out, what, v_nonempty);
}

/* programs.NAME.KEY: a list of options (the built-in one is not checked:
 * no message to make). */
static int yopts(yctx *y, const pnode *n, strlist *out, const char *name, const char *key)
{
    if (y->builtin)
        return ylist_v(y, n, out, key, v_option);
    char what[160];
    snprintf(what, sizeof what, "programs.%s.%s", name, key);
    return ylist_v(y, n, out, what, v_option);
}

static int yclasses(yctx *y, const pnode *n, unsigned *out, const char *what)
{
    static const struct {
        const char *name;
        unsigned bit;
    } cls[] = {{"inside", PC_INSIDE},   {"outside", PC_OUTSIDE}, {"device", PC_DEVICE},
               {"scratch", PC_SCRATCH}, {"null", PC_NULL},       {"dynamic", PC_DYNAMIC}};
    strlist l = {0};
    if (ylist(y, n, &l, what) < 0) {
        strlist_free(&l);
        return -1;
    }
    for (size_t i = 0; i < l.n; i++) {
        size_t k;
        for (k = 0; k < ARRAY_SIZE(cls); k++)
            if (!strcmp(l.v[i], cls[k].name))
                break;
        if (k == ARRAY_SIZE(cls)) {
            yerr(y, n, "%s: unknown path class '%s' (inside, outside, device, scratch, null, dynamic)", what,
                 l.v[i]);
            strlist_free(&l);
            return -1;
        }
        *out |= cls[k].bit;
    }
    strlist_free(&l);
    return 0;
}

static int ydetectors(yctx *y, const pnode *n, unsigned *out)
{
    strlist l = {0};
    if (ylist(y, n, &l, "detector") < 0) {
        strlist_free(&l);
        return -1;
    }
    for (size_t i = 0; i < l.n; i++) {
        size_t k;
        for (k = 0; k < D_COUNT; k++)
            if (!strcmp(l.v[i], detector_names[k]))
                break;
        if (k == D_COUNT) {
            yerr(y, n, "unknown detector '%s'", l.v[i]);
            strlist_free(&l);
            return -1;
        }
        *out |= 1u << k;
    }
    strlist_free(&l);
    return 0;
}

#define FOR_PAIRS(y, map, K, V)                                                                   \
    for (const int32_t *K##_pair = (y)->doc->pairs + 2 * (size_t)(map)->off;                      \
         K##_pair < (y)->doc->pairs + 2 * ((size_t)(map)->off + (map)->len); K##_pair += 2)       \
        for (const pnode *K##_node = ynode(y, K##_pair[0]), *V = ynode(y, K##_pair[1]); K##_node; \
             K##_node = NULL)                                                                     \
            for (const char *K = yscalar(y, K##_node) ? yscalar(y, K##_node) : ""; K; K = NULL)

static void progspec_free(progspec *s)
{
    if (!s->borrowed) {
        free(s->name);
        free(s->until);
        free(s->output_file);
    }
    strlist_free(&s->options_with_value);
    strlist_free(&s->options_optional_value);
    strlist_free(&s->options_two_values);
    strlist_free(&s->output_options);
    strlist_free(&s->output_assignment);
    strlist_free(&s->script_operand_unless);
    strlist_free(&s->stop_flags);
    strlist_free(&s->command_option);
    strlist_free(&s->chdir_option);
    strlist_free(&s->split_option);
    strlist_free(&s->code_option);
    memset(s, 0, sizeof *s);
}

static void rule_free(rule *r)
{
    if (!r->borrowed) {
        free(r->id);
        free(r->reason);
        free(r->suggestion);
        free(r->file);
        free(r->compensate);
        free(r->capture);
        for (size_t i = 0; i < r->nex; i++)
            free(r->ex[i].cmd);
    }
    strlist *ls[] = {&r->program,       &r->subcommand, &r->args_any,         &r->args_none,
                     &r->args_all,      &r->flags_any,  &r->flags_none,       &r->operands_any,
                     &r->operands_none, &r->via_any,    &r->global_args_none, &r->global_args_any,
                     &r->script_none,   &r->domains};
    for (size_t i = 0; i < ARRAY_SIZE(ls); i++)
        strlist_free(ls[i]);
    free(r->ex);
    memset(r, 0, sizeof *r);
}

void policy_clear(txbox_policy *p)
{
    for (size_t i = 0; i < p->nrules; i++)
        rule_free(&p->rules[i]);
    free(p->rules);
    for (size_t i = 0; i < p->nprogs; i++)
        progspec_free(&p->progs[i]);
    free(p->progs);
    free(p->prog_order);
    p->prog_order = NULL;
    p->nprog_lit = p->nprog_order = 0;
    strlist *ls[] = {&p->fetchers,      &p->secrets, &p->secret_programs, &p->harmless_env, &p->null_paths,
                     &p->scratch_paths, &p->hide,    &p->not_secrets};
    for (size_t i = 0; i < ARRAY_SIZE(ls); i++)
        strlist_free(ls[i]);
    hidden_free(&p->hidden);
    free(p->workspace);
    free(p->ws_alias);
    free(p->home);
    free(p->home_real);
    p->ws_alias = p->home = p->home_real = NULL;
    policy_effects_clear(p);
    free(p->pidx);
    free(p->pidx_rules);
    p->pidx = NULL;
    p->pidx_rules = NULL;
    p->npidx = 0;
    p->rules = NULL;
    p->progs = NULL;
    p->nrules = p->nprogs = p->arules = p->aprogs = 0;
    p->workspace = NULL;
}

static int parse_prog(yctx *y, const char *name, const pnode *m, progspec *s)
{
    s->borrowed = y->builtin;
    s->name = ydup(y, name);
    if (!m || m->type != YAML_MAPPING_NODE)
        return yerr(y, m, "programs.%s must be a mapping", name);
    int rc = 0;
    FOR_PAIRS(y, m, k, v)
    {
        if (rc < 0)
            break;
        if (!strcmp(k, "options_with_value"))
            rc = yopts(y, v, &s->options_with_value, name, k);
        else if (!strcmp(k, "leading_operands_only"))
            rc = ybool(y, v, &s->leading_operands_only, k);
        else if (!strcmp(k, "script_operand_unless"))
            rc = ylist(y, v, &s->script_operand_unless, k);
        else if (!strcmp(k, "wrapper"))
            rc = ybool(y, v, &s->wrapper, k);
        else if (!strcmp(k, "skip"))
            rc = yint(y, v, &s->skip, k);
        else if (!strcmp(k, "assignments"))
            rc = ybool(y, v, &s->assignments, k);
        else if (!strcmp(k, "stop_flags"))
            rc = ylist(y, v, &s->stop_flags, k);
        else if (!strcmp(k, "command_option"))
            rc = ylist(y, v, &s->command_option, k);
        else if (!strcmp(k, "chdir_option"))
            rc = ylist(y, v, &s->chdir_option, k);
        else if (!strcmp(k, "split_option"))
            rc = ylist(y, v, &s->split_option, k);
        else if (!strcmp(k, "join"))
            rc = ybool(y, v, &s->join, k);
        else if (!strcmp(k, "remote"))
            rc = ybool(y, v, &s->remote, k);
        else if (!strcmp(k, "append_args"))
            rc = ybool(y, v, &s->append_args, k);
        else if (!strcmp(k, "until"))
            rc = yline(y, v, &s->until, k);
        else if (!strcmp(k, "shell"))
            rc = ybool(y, v, &s->shell, k);
        else if (!strcmp(k, "interpreter"))
            rc = ybool(y, v, &s->interpreter, k);
        else if (!strcmp(k, "code_option"))
            rc = ylist(y, v, &s->code_option, k);
        else if (!strcmp(k, "code_operand"))
            rc = ybool(y, v, &s->code_operand, k);
        else if (!strcmp(k, "options_optional_value"))
            rc = yopts(y, v, &s->options_optional_value, name, k);
        else if (!strcmp(k, "options_two_values"))
            rc = yopts(y, v, &s->options_two_values, name, k);
        else if (!strcmp(k, "options_end")) {
            const char *e = yscalar(y, v);
            s->options_end = e && !strcmp(e, "dashdash")  ? OPTEND_DASHDASH
                             : e && !strcmp(e, "operand") ? OPTEND_OPERAND
                             : e && !strcmp(e, "never")   ? OPTEND_NEVER
                             : e && !strcmp(e, "none")    ? OPTEND_NONE
                                                          : -1;
            if (s->options_end < 0)
                rc = yerr(y, v, "programs.%s: options_end must be dashdash, operand, never or none", name);
        } else if (!strcmp(k, "output_options"))
            rc = yopts(y, v, &s->output_options, name, k);
        else if (!strcmp(k, "output_operand"))
            rc = yint(y, v, &s->output_operand, k);
        else if (!strcmp(k, "output_assignment"))
            rc = ylist_v(y, v, &s->output_assignment, k, v_name);
        else if (!strcmp(k, "output_file"))
            rc = yline(y, v, &s->output_file, k);
        else
            rc = yerr(y, k_node, "programs.%s: unknown key '%s'", name, k);
    }
    return rc;
}

static int parse_examples(yctx *y, const pnode *m, rule *r)
{
    if (!m || m->type != YAML_MAPPING_NODE)
        return yerr(y, m, "rule %s: examples must be a mapping with match and no_match", r->id);
    FOR_PAIRS(y, m, k, v)
    {
        bool must;
        if (!strcmp(k, "match"))
            must = true;
        else if (!strcmp(k, "no_match"))
            must = false;
        else
            return yerr(y, k_node, "rule %s: examples: unknown key '%s'", r->id, k);
        if (v->type != YAML_SEQUENCE_NODE)
            return yerr(y, v, "rule %s: examples.%s must be a list of commands", r->id, k);
        y->examples += v->len;
        if (y->examples > POLICY_MAX_EXAMPLES)
            return yerr(y, v, "rule %s: more than %u examples in the file", r->id, POLICY_MAX_EXAMPLES);
        if (v->len)
            r->ex = xrealloc(r->ex, (r->nex + v->len) * sizeof *r->ex);
        for (const int32_t *it = SEQ(y, v); it < SEQ_END(y, v); it++) {
            const pnode *e = ynode(y, *it);
            if (!yscalar(y, e))
                return yerr(y, e ? e : v, "rule %s: every example must be a string", r->id);
            if (yvalue(y, e, "example", false, v_nonempty) < 0)
                return -1;
            r->ex[r->nex++] =
                (example){.cmd = ydup(y, yscalar(y, e)), .line = (int)e->line + 1, .must_match = must};
        }
    }
    return 0;
}

static int parse_match(yctx *y, const pnode *m, rule *r)
{
    if (!m || m->type != YAML_MAPPING_NODE)
        return yerr(y, m, "rule %s: match must be a mapping", r->id);
    int rc = 0, n = 0;
    FOR_PAIRS(y, m, k, v)
    {
        if (rc < 0)
            break;
        n++;
        bool b;
        if (!strcmp(k, "program"))
            rc = ylist(y, v, &r->program, k);
        else if (!strcmp(k, "subcommand"))
            rc = ylist(y, v, &r->subcommand, k);
        else if (!strcmp(k, "args_any"))
            rc = ylist(y, v, &r->args_any, k);
        else if (!strcmp(k, "args_none"))
            rc = ylist(y, v, &r->args_none, k);
        else if (!strcmp(k, "args_all"))
            rc = ylist(y, v, &r->args_all, k);
        else if (!strcmp(k, "flags_any"))
            rc = ylist(y, v, &r->flags_any, k);
        else if (!strcmp(k, "flags_none"))
            rc = ylist(y, v, &r->flags_none, k);
        else if (!strcmp(k, "operands_any"))
            rc = ylist(y, v, &r->operands_any, k);
        else if (!strcmp(k, "operands_none"))
            rc = ylist(y, v, &r->operands_none, k);
        else if (!strcmp(k, "via_any"))
            rc = ylist(y, v, &r->via_any, k);
        else if (!strcmp(k, "global_args_none"))
            rc = ylist(y, v, &r->global_args_none, k);
        else if (!strcmp(k, "global_args_any"))
            rc = ylist(y, v, &r->global_args_any, k);
        else if (!strcmp(k, "script_none"))
            rc = ylist(y, v, &r->script_none, k);
        else if (!strcmp(k, "operand_class_any"))
            rc = yclasses(y, v, &r->operand_class_any, k);
        else if (!strcmp(k, "last_operand_class"))
            rc = yclasses(y, v, &r->last_operand_class, k);
        else if (!strcmp(k, "redirect_class_any"))
            rc = yclasses(y, v, &r->redirect_class_any, k);
        else if (!strcmp(k, "detector"))
            rc = ydetectors(y, v, &r->detector);
        else if (!strcmp(k, "max_operands"))
            rc = yint(y, v, &r->max_operands, k);
        else if (!strcmp(k, "min_operands"))
            rc = yint(y, v, &r->min_operands, k);
        else if (!strcmp(k, "allow_dynamic_args"))
            rc = ybool(y, v, &r->allow_dynamic_args, k);
        else if (!strcmp(k, "secret_args")) {
            rc = ybool(y, v, &b, k);
            r->secret_args = b;
        } else if (!strcmp(k, "secret_input")) {
            rc = ybool(y, v, &b, k);
            r->secret_input = b;
        } else
            rc = yerr(y, k_node, "rule %s: match: unknown key '%s'", r->id, k);
    }
    if (rc == 0 && n == 0)
        rc = yerr(y, m, "rule %s: match is empty (it would match every command)", r->id);
    return rc;
}

/* external, compensate, capture: an external effect and how to undo it
 * (lib/tx/saga.c, docs/policy.md "Compensations"). */
static int parse_saga_key(yctx *y, const char *k, const pnode *v, rule *r)
{
    if (!strcmp(k, "external"))
        return ybool(y, v, &r->external, k);
    return yline(y, v, !strcmp(k, "compensate") ? &r->compensate : &r->capture, k);
}

static int check_saga(yctx *y, const pnode *m, rule *r)
{
    if (!r->external && !r->compensate && !r->capture)
        return 0;
    if (r->decision != DEC_UNCERTAIN)
        return yerr(y, m, "rule %s: only uncertain rules can declare external effects", r->id);
    char why[400];
    if (comp_rule_check(r->compensate, r->capture, why, sizeof why) < 0)
        return yerr(y, m, "rule %s: %s", r->id, why);
    if (r->compensate)
        r->external = true;
    return 0;
}

/* domains: the hosts the network proxy lets through for this rule
 * (netproxy.c's patterns), only from a trusted policy: a workspace layer's
 * are refused (they could only widen what the proxy lets through). */
static int parse_domains(yctx *y, const pnode *v, rule *r)
{
    if (y->refused) {
        refuse(y, v,
               "rule %s: domains: refused: a workspace policy cannot widen what the network "
               "proxy lets through (domains come from the built-in policy or the user's policy file only)",
               r->id);
        return 0;
    }
    if (ylist(y, v, &r->domains, "domains") < 0)
        return -1;
    if (r->domains.n > 64)
        return yerr(y, v, "rule %s: more than 64 domains", r->id);
    for (size_t i = 0; i < r->domains.n; i++)
        if (!np_pattern_valid(r->domains.v[i]))
            return yerr(y, v,
                        "rule %s: '%s' is not a domain (a host name in lower case, *. and a "
                        "name of two labels or more, or an IP address)",
                        r->id, r->domains.v[i]);
    return 0;
}

static int parse_rule(yctx *y, const pnode *m, rule *r)
{
    r->max_operands = -1;
    r->secret_args = r->secret_input = -1;
    r->decision = -1;
    if (!m || m->type != YAML_MAPPING_NODE)
        return yerr(y, m, "every rule must be a mapping");
    r->line = (int)m->line + 1;
    r->borrowed = y->builtin; /* y->file too: a string literal then */
    r->file = ydup(y, y->file);
    const pnode *match = NULL, *examples = NULL;
    FOR_PAIRS(y, m, k, v)
    {
        if (!strcmp(k, "id")) {
            if (yline(y, v, &r->id, "id") < 0)
                return -1;
        }
    }
    if (!r->id || !*r->id)
        return yerr(y, m, "rule without an id");
    if (strlen(r->id) >= sizeof(((txbox_verdict *)0)->rule))
        return yerr(y, m, "rule id '%s' is too long", r->id);
    FOR_PAIRS(y, m, k, v)
    {
        int rc = 0;
        if (!strcmp(k, "id"))
            continue;
        if (!strcmp(k, "decision")) {
            const char *s = yscalar(y, v);
            if (s && !strcmp(s, "safe"))
                r->decision = DEC_SAFE;
            else if (s && !strcmp(s, "uncertain"))
                r->decision = DEC_UNCERTAIN;
            else if (s && !strcmp(s, "unsafe"))
                r->decision = DEC_UNSAFE;
            else if (s && !strcmp(s, "off"))
                r->decision = DEC_OFF;
            else
                rc = yerr(y, v, "rule %s: decision must be safe, uncertain, unsafe or off", r->id);
        } else if (!strcmp(k, "reason"))
            rc = yline(y, v, &r->reason, k);
        else if (!strcmp(k, "suggestion"))
            rc = yline(y, v, &r->suggestion, k);
        else if (!strcmp(k, "network"))
            rc = ybool(y, v, &r->network, k);
        else if (!strcmp(k, "domains"))
            rc = parse_domains(y, v, r);
        else if (!strcmp(k, "fallback"))
            rc = ybool(y, v, &r->fallback, k);
        else if (!strcmp(k, "external") || !strcmp(k, "compensate") || !strcmp(k, "capture"))
            rc = parse_saga_key(y, k, v, r);
        else if (!strcmp(k, "match"))
            match = v;
        else if (!strcmp(k, "examples"))
            examples = v;
        else
            rc = yerr(y, k_node, "rule %s: unknown key '%s'", r->id, k);
        if (rc < 0)
            return -1;
    }
    if (r->decision < 0)
        return yerr(y, m, "rule %s: no decision (safe, uncertain, unsafe or off)", r->id);
    if (r->decision == DEC_OFF)
        return 0; /* switches off the rule of that id; nothing else is needed */
    if (!r->reason || !*r->reason || strchr(r->reason, '\n'))
        return yerr(y, m, "rule %s: needs a one-line reason", r->id);
    if (r->domains.n && !r->network)
        return yerr(y, m, "rule %s: domains without network: true", r->id);
    if (r->decision == DEC_UNSAFE && (!r->suggestion || !*r->suggestion))
        return yerr(y, m, "rule %s: an unsafe rule needs a suggestion for the agent", r->id);
    if (r->fallback && r->decision != DEC_UNCERTAIN)
        return yerr(y, m, "rule %s: only uncertain rules can be fallback rules", r->id);
    if (!match)
        return yerr(y, m, "rule %s: needs a match", r->id);
    if (parse_match(y, match, r) < 0)
        return -1;
    if (r->decision == DEC_SAFE && (r->detector & D_NOT_UNDERSTOOD))
        return yerr(y, match, "rule %s: what the engine cannot understand is never safe", r->id);
    if (!examples)
        return yerr(y, m, "rule %s: needs examples (match and no_match)", r->id);
    if (parse_examples(y, examples, r) < 0)
        return -1;
    bool has_match = false, has_no = false;
    for (size_t i = 0; i < r->nex; i++)
        if (r->ex[i].must_match)
            has_match = true;
        else
            has_no = true;
    /* a command too large to write down cannot be an example */
    if (!has_match && !(r->detector && !(r->detector & ~(unsigned)(D_TOO_LARGE | D_BAD_INPUT))))
        return yerr(y, examples, "rule %s: needs at least one example that must match", r->id);
    if (!has_no)
        return yerr(y, examples, "rule %s: needs at least one example that must not match", r->id);
    return check_saga(y, m, r);
}

/* Room for need elements of size sz in *v, of which *cap are allocated:
 * exactly need when the caller knows how many come (a list's length in the
 * document), else doubled (one realloc per element moved the whole array
 * each time, a quarter of the built-in policy's load; and every array
 * allocated on the way is memory touched for the first time, at ~12 us a
 * page on this project's VMs). */
static void reserve(void *v, size_t *cap, size_t need, size_t sz, bool exact)
{
    if (need <= *cap)
        return;
    size_t c = exact ? need : *cap ? 2 * *cap : 4;
    while (c < need)
        c *= 2;
    *(void **)v = xrealloc(*(void **)v, c * sz);
    *cap = c;
}

static void add_or_replace_rule(txbox_policy *p, rule *r)
{
    for (size_t i = 0; i < p->nrules; i++) {
        if (!strcmp(p->rules[i].id, r->id)) {
            rule_free(&p->rules[i]);
            p->rules[i] = *r;
            return;
        }
    }
    reserve(&p->rules, &p->arules, p->nrules + 1, sizeof *p->rules, false);
    p->rules[p->nrules++] = *r;
}

/* ---- rules on effects (lib/tx/effects.h, docs/policy.md "Rules on effects") ---- */

void policy_effects_clear(txbox_policy *p)
{
    for (size_t i = 0; i < p->neffects; i++)
        effect_rule_free(&p->effects[i]);
    free(p->effects);
    p->effects = NULL;
    p->neffects = 0;
}

static int yi64(yctx *y, const pnode *n, int64_t *out, const char *what)
{
    const char *s = yscalar(y, n);
    uint64_t v;
    if (!s || !parse_u64(s, &v) || v > (uint64_t)INT64_MAX)
        return yerr(y, n, "%s must be a non-negative number", what);
    *out = (int64_t)v;
    return 0;
}

/* A list of loss kinds (effect_loss_kinds) as a mask. */
static int yloss_kinds(yctx *y, const pnode *v, unsigned *mask, const char *id, const char *what)
{
    strlist l = {0};
    int rc = ylist(y, v, &l, what);
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        int k = effect_loss_kind(l.v[i]);
        if (k < 0)
            rc = yerr(y, v,
                      "effect rule %s: %s: '%s' is no kind of loss (uncommitted, untracked, staged, "
                      "stash, history, branch, repository, database)",
                      id, what, l.v[i]);
        else
            *mask |= 1u << k;
    }
    if (rc == 0 && !*mask)
        rc = yerr(y, v, "effect rule %s: %s names no kind of loss", id, what);
    strlist_free(&l);
    return rc;
}

static int parse_effect_example(yctx *y, const pnode *m, effect_rule *r, bool must)
{
    if (!m || m->type != YAML_MAPPING_NODE)
        return yerr(y, m,
                    "effect rule %s: every example is a write set (a mapping: written, "
                    "deleted, deleted_in, content, bytes, binary, executable, losses, own_losses)",
                    r->id);
    r->ex = xrealloc(r->ex, (r->nex + 1) * sizeof *r->ex);
    effect_example *x = &r->ex[r->nex++];
    memset(x, 0, sizeof *x);
    x->ndeleted = x->bytes = -1;
    x->line = (int)m->line + 1;
    x->must_match = must;
    int rc = 0;
    FOR_PAIRS(y, m, k, v)
    {
        if (rc < 0)
            break;
        if (!strcmp(k, "written"))
            rc = ylist(y, v, &x->written, k);
        else if (!strcmp(k, "deleted") && yscalar(y, v) &&
                 strspn(yscalar(y, v), "0123456789") == strlen(yscalar(y, v)))
            rc = yi64(y, v, &x->ndeleted, k);
        else if (!strcmp(k, "deleted"))
            rc = ylist(y, v, &x->deleted, k);
        else if (!strcmp(k, "deleted_in"))
            rc = yline(y, v, &x->deleted_in, k);
        else if (!strcmp(k, "content"))
            rc = ystr(y, v, &x->content, k);
        else if (!strcmp(k, "bytes"))
            rc = yi64(y, v, &x->bytes, k);
        else if (!strcmp(k, "binary"))
            rc = ybool(y, v, &x->binary, k);
        else if (!strcmp(k, "executable"))
            rc = ybool(y, v, &x->executable, k);
        else if (!strcmp(k, "losses"))
            rc = yloss_kinds(y, v, &x->lost, r->id, k);
        else if (!strcmp(k, "own_losses"))
            rc = yloss_kinds(y, v, &x->own_lost, r->id, k);
        else
            rc = yerr(y, k_node, "effect rule %s: example: unknown key '%s'", r->id, k);
    }
    if (rc == 0 && x->deleted_in && x->ndeleted < 0)
        rc = yerr(y, m, "effect rule %s: example: deleted_in names where the N files of 'deleted: N' are",
                  r->id);
    return rc;
}

static int parse_effect_match(yctx *y, const pnode *m, effect_rule *r)
{
    if (!m || m->type != YAML_MAPPING_NODE)
        return yerr(y, m, "effect rule %s: match must be a mapping", r->id);
    int rc = 0, n = 0;
    FOR_PAIRS(y, m, k, v)
    {
        if (rc < 0)
            break;
        n++;
        if (!strcmp(k, "paths_any"))
            rc = ylist(y, v, &r->paths_any, k);
        else if (!strcmp(k, "paths_written"))
            rc = ylist(y, v, &r->paths_written, k);
        else if (!strcmp(k, "paths_deleted"))
            rc = ylist(y, v, &r->paths_deleted, k);
        else if (!strcmp(k, "paths_none"))
            rc = ylist(y, v, &r->paths_none, k);
        else if (!strcmp(k, "content_any"))
            rc = ylist(y, v, &r->content_any, k);
        else if (!strcmp(k, "home_written"))
            rc = ylist(y, v, &r->home_written, k);
        else if (!strcmp(k, "keys"))
            rc = ylist(y, v, &r->keys, k);
        else if (!strcmp(k, "runner_scripts"))
            rc = ybool(y, v, &r->runner_scripts, k);
        else if (!strcmp(k, "files_only"))
            rc = ybool(y, v, &r->files_only, k);
        else if (!strcmp(k, "reader")) {
            const char *s = yscalar(y, v);
            r->reader = s ? effect_reader_id(s) : -1;
            if (r->reader <= 0)
                rc = yerr(y, v,
                          "effect rule %s: match.reader must be vscode, pth, pyvenv, venv-python or toml",
                          r->id);
        } else if (!strcmp(k, "max_files_deleted"))
            rc = yi64(y, v, &r->max_files_deleted, k);
        else if (!strcmp(k, "max_bytes_written"))
            rc = yi64(y, v, &r->max_bytes_written, k);
        else if (!strcmp(k, "max_binary_added"))
            rc = yi64(y, v, &r->max_binary_added, k);
        else if (!strcmp(k, "max_made_executable"))
            rc = yi64(y, v, &r->max_made_executable, k);
        else if (!strcmp(k, "losses"))
            rc = yloss_kinds(y, v, &r->losses, r->id, "match.losses");
        else if (!strcmp(k, "losses_grace"))
            rc = yi64(y, v, &r->losses_grace, k);
        else if (!strcmp(k, "git")) {
            const char *s = yscalar(y, v);
            r->git = s && !strcmp(s, "config")  ? EFF_GIT_CONFIG
                     : s && !strcmp(s, "hooks") ? EFF_GIT_HOOKS
                                                : -1;
            if (r->git < 0)
                rc = yerr(y, v, "effect rule %s: match.git must be config or hooks", r->id);
        } else
            rc = yerr(y, k_node, "effect rule %s: match: unknown key '%s'", r->id, k);
    }
    if (rc == 0 && r->git && n > 1)
        rc = yerr(y, m, "effect rule %s: match.git is judged by git and takes no other matcher", r->id);
    if (rc == 0 && r->losses_grace >= 0 && !r->losses)
        rc = yerr(y, m, "effect rule %s: match.losses_grace needs match.losses", r->id);
    if (rc == 0 && r->losses &&
        (r->paths_written.n || r->paths_deleted.n || r->content_any.n || r->max_files_deleted >= 0 ||
         r->max_bytes_written >= 0 || r->max_binary_added >= 0 || r->max_made_executable >= 0))
        rc = yerr(y, m,
                  "effect rule %s: match.losses takes only paths_any and paths_none (over the lost "
                  "paths) besides",
                  r->id);
    if (rc == 0 && r->losses && r->losses_grace < 0)
        r->losses_grace = EFF_LOSS_GRACE_DEFAULT;
    if (rc == 0 && n == 0)
        rc = yerr(y, m, "effect rule %s: match is empty (it would match every write)", r->id);
    char msg[300];
    if (rc == 0 && !y->builtin && effect_rule_compile(r, msg, sizeof msg) < 0)
        rc = yerr(y, m, "effect rule %s: %s", r->id, msg);
    return rc;
}

static int parse_effect_rule(yctx *y, const pnode *m, effect_rule *r)
{
    r->action = -1;
    r->max_files_deleted = r->max_bytes_written = r->max_binary_added = r->max_made_executable = -1;
    r->losses_grace = -1;
    if (!m || m->type != YAML_MAPPING_NODE)
        return yerr(y, m, "every effect rule must be a mapping");
    r->line = (int)m->line + 1;
    r->borrowed = y->builtin;
    r->file = ydup(y, y->file);
    const pnode *match = NULL, *examples = NULL;
    FOR_PAIRS(y, m, k, v)
    {
        if (!strcmp(k, "id") && yline(y, v, &r->id, "id") < 0)
            return -1;
    }
    if (!r->id || !*r->id || strlen(r->id) >= 96)
        return yerr(y, m, "effect rule without an id (or with one over 95 bytes)");
    FOR_PAIRS(y, m, k, v)
    {
        int rc = 0;
        const char *s = yscalar(y, v);
        if (!strcmp(k, "id"))
            continue;
        if (!strcmp(k, "action")) {
            if (s && !strcmp(s, "rollback"))
                r->action = EFF_ROLLBACK;
            else if (s && !strcmp(s, "hold"))
                r->action = EFF_HOLD;
            else if (s && !strcmp(s, "off"))
                r->action = EFF_OFF;
            else if (s && !strcmp(s, "attention"))
                r->action = EFF_ATTENTION;
            else if (s && !strcmp(s, "ask"))
                r->action = EFF_ASK;
            else
                rc =
                    yerr(y, v, "effect rule %s: action must be rollback, hold, ask, attention or off", r->id);
        } else if (!strcmp(k, "reason"))
            rc = yline(y, v, &r->reason, k);
        else if (!strcmp(k, "suggestion"))
            rc = yline(y, v, &r->suggestion, k);
        else if (!strcmp(k, "match"))
            match = v;
        else if (!strcmp(k, "examples"))
            examples = v;
        else
            rc = yerr(y, k_node, "effect rule %s: unknown key '%s'", r->id, k);
        if (rc < 0)
            return -1;
    }
    if (r->action < 0)
        return yerr(y, m, "effect rule %s: no action (rollback, hold, ask, attention or off)", r->id);
    if (r->action == EFF_OFF)
        return 0; /* switches off the effect rule of that id */
    if (!r->reason || !*r->reason || strchr(r->reason, '\n'))
        return yerr(y, m, "effect rule %s: needs a one-line reason", r->id);
    if (!r->suggestion || !*r->suggestion || strchr(r->suggestion, '\n'))
        return yerr(y, m, "effect rule %s: needs a one-line suggestion for the agent", r->id);
    if (!match)
        return yerr(y, m, "effect rule %s: needs a match", r->id);
    if (parse_effect_match(y, match, r) < 0)
        return -1;
    if ((r->git || r->runner_scripts || r->losses) && !examples)
        return 0; /* git, the workspace's runners or the commit's losses decide: there is no write set to show */
    if (!examples || examples->type != YAML_MAPPING_NODE)
        return yerr(y, m, "effect rule %s: needs examples (match and no_match write sets)", r->id);
    bool has[2] = {false, false};
    FOR_PAIRS(y, examples, k, v)
    {
        bool must = !strcmp(k, "match");
        if (!must && strcmp(k, "no_match"))
            return yerr(y, k_node, "effect rule %s: examples: unknown key '%s'", r->id, k);
        if (v->type != YAML_SEQUENCE_NODE)
            return yerr(y, v, "effect rule %s: examples.%s must be a list of write sets", r->id, k);
        y->examples += v->len;
        if (y->examples > POLICY_MAX_EXAMPLES)
            return yerr(y, v, "effect rule %s: more than %u examples in the file", r->id,
                        POLICY_MAX_EXAMPLES);
        for (const int32_t *it = SEQ(y, v); it < SEQ_END(y, v); it++) {
            if (parse_effect_example(y, ynode(y, *it), r, must) < 0)
                return -1;
            has[must] = true;
        }
    }
    if (!has[1] || !has[0])
        return yerr(y, examples,
                    "effect rule %s: needs at least one example that must match and "
                    "one that must not",
                    r->id);
    return 0;
}

static int parse_effects(txbox_policy *p, yctx *y, const pnode *v)
{
    if (v->type != YAML_SEQUENCE_NODE)
        return yerr(y, v, "effects must be a list");
    if (v->len > POLICY_MAX_RULES)
        return yerr(y, v, "effects: more than %u rules", POLICY_MAX_RULES);
    for (const int32_t *it = SEQ(y, v); it < SEQ_END(y, v); it++) {
        effect_rule r = {0};
        if (parse_effect_rule(y, ynode(y, *it), &r) < 0) {
            effect_rule_free(&r);
            return -1;
        }
        size_t i;
        for (i = 0; i < p->neffects && strcmp(p->effects[i].id, r.id); i++)
            ;
        const pnode *at = ynode(y, *it);
        if (y->refused && (r.action == EFF_OFF || i < p->neffects)) {
            /* a layer only adds rules that hold or roll back: one of the
             * same id would replace (or switch off) the user's */
            if (r.action == EFF_OFF)
                refuse(y, at, "effect rule %s: refused: a workspace policy cannot switch an effect rule off",
                       r.id);
            else
                refuse(y, at,
                       "effect rule %s: refused: a workspace policy cannot replace an effect rule of "
                       "the same id (give it a new id)",
                       r.id);
            effect_rule_free(&r);
            continue;
        }
        if (!y->builtin && i < p->neffects && !strcmp(r.id, POLICY_FILE_EFFECT)) {
            effect_rule_free(&r);
            return yerr(y, at, "effect rule %s is built in: no policy can replace or switch it off",
                        POLICY_FILE_EFFECT);
        }
        if (i < p->neffects) {
            effect_rule_free(&p->effects[i]);
        } else {
            p->effects = xrealloc(p->effects, (p->neffects + 1) * sizeof *p->effects);
            p->neffects++;
        }
        p->effects[i] = r;
    }
    return 0;
}

/* A workspace layer's rule: kept only when it can raise a verdict and
 * nothing else (uncertain or unsafe, a new id); a grant of network or an
 * external effect (whose compensation runs later) is dropped from it. */
static bool layer_rule_ok(txbox_policy *p, yctx *y, const pnode *at, rule *r)
{
    if (r->decision == DEC_OFF || r->decision == DEC_SAFE) {
        refuse(y, at, "rule %s: refused: a workspace policy cannot %s", r->id,
               r->decision == DEC_OFF ? "switch a rule off" : "add a safe rule");
        return false;
    }
    for (size_t i = 0; i < p->nrules; i++) {
        if (!strcmp(p->rules[i].id, r->id)) {
            refuse(y, at,
                   "rule %s: refused: a workspace policy cannot replace a rule of the same id "
                   "(give it a new id)",
                   r->id);
            return false;
        }
    }
    if (r->network) {
        refuse(y, at,
               "rule %s: network: refused: a workspace policy cannot grant network (the rule "
               "applies without it)",
               r->id);
        r->network = false;
    }
    if (r->external || r->compensate || r->capture) {
        refuse(y, at,
               "rule %s: external/compensate/capture: refused: a workspace policy cannot "
               "declare commands that txbox runs (the rule applies without them)",
               r->id);
        r->external = false;
        free(r->compensate);
        free(r->capture);
        r->compensate = r->capture = NULL;
    }
    return true;
}

/* A workspace layer's hide: entries: each valid one hides more, within
 * bounds: txbox expands a glob on the host before every command (a pattern
 * over the whole tree would stall each one), and each entry is a mount. */
#define LAYER_MAX_HIDE 64
static int layer_hide(txbox_policy *p, yctx *y, const pnode *v)
{
    strlist l = {0};
    if (ylist_v(y, v, &l, "hide", v_hide) < 0) {
        strlist_free(&l);
        return -1;
    }
    size_t taken = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (strpbrk(l.v[i], "*?[")) {
            refuse(y, v, "hide: '%.60s': refused: a workspace policy cannot hide by a glob pattern", l.v[i]);
        } else if (taken >= LAYER_MAX_HIDE) {
            refuse(y, v, "hide: refused past %d entries from a workspace policy", LAYER_MAX_HIDE);
            break;
        } else {
            strlist_add(&p->hide, l.v[i]);
            taken++;
        }
    }
    strlist_free(&l);
    return 0;
}

/* Program names -> 1 + their index in p->progs (0: an empty slot): open
 * addressing, at most half full. */
struct prog_names {
    uint32_t *slot;
    size_t mask;
};

static size_t name_hash(const char *s)
{
    size_t h = 14695981039346656037ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static uint32_t *prog_names_slot(struct prog_names *t, const txbox_policy *p, const char *name)
{
    for (size_t i = name_hash(name) & t->mask;; i = (i + 1) & t->mask)
        if (!t->slot[i] || !strcmp(p->progs[t->slot[i] - 1].name, name))
            return &t->slot[i];
}

/* For up to n programs, p's own in it. */
static void prog_names_init(struct prog_names *t, const txbox_policy *p, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    t->slot = xcalloc(cap, sizeof *t->slot);
    t->mask = cap - 1;
    for (size_t i = 0; i < p->nprogs; i++)
        *prog_names_slot(t, p, p->progs[i].name) = (uint32_t)i + 1;
}

static int parse_doc(txbox_policy *p, yctx *y)
{
    const pnode *root = ynode(y, 1);
    if (!root)
        return yerr(y, NULL, "empty policy (a policy needs at least `rules:`)");
    if (root->type != YAML_MAPPING_NODE)
        return yerr(y, root, "the policy must be a mapping (version, rules, ...)");
    FOR_PAIRS(y, root, k, v)
    {
        int rc = 0;
        if (!strcmp(k, "version")) {
            const char *s = yscalar(y, v);
            if (!s || strcmp(s, "1"))
                rc = yerr(y, v, "unsupported policy version (this txbox reads version 1)");
        } else if (!strcmp(k, "workspace_policy")) {
            const char *s = yscalar(y, v);
            if (y->refused)
                refuse(y, k_node,
                       "workspace_policy: refused: only the user's own configuration can "
                       "trust a workspace's policy");
            else if (s && (!strcmp(s, "trusted") || !strcmp(s, "tighten")))
                p->ws_trusted = !strcmp(s, "trusted");
            else
                rc = yerr(y, v, "workspace_policy must be tighten or trusted");
        } else if (y->refused &&
                   (!strcmp(k, "harmless_env") || !strcmp(k, "null_paths") || !strcmp(k, "scratch_paths"))) {
            /* each entry of these lists makes a command look more harmless */
            refuse(y, k_node,
                   "%s: refused: a workspace policy cannot extend this list (it would "
                   "loosen the rules)",
                   k);
        } else if (!strcmp(k, "fetchers"))
            rc = ylist(y, v, &p->fetchers, k);
        else if (!strcmp(k, "secrets"))
            rc = ylist(y, v, &p->secrets, k);
        else if (!strcmp(k, "secret_programs"))
            rc = ylist(y, v, &p->secret_programs, k);
        else if (!strcmp(k, "harmless_env"))
            rc = ylist_v(y, v, &p->harmless_env, k, v_env);
        else if (!strcmp(k, "null_paths"))
            rc = ylist_v(y, v, &p->null_paths, k, v_abs);
        else if (!strcmp(k, "scratch_paths"))
            rc = ylist_v(y, v, &p->scratch_paths, k, v_abs);
        else if (!strcmp(k, "hide") && y->refused)
            rc = layer_hide(p, y, v);
        else if (!strcmp(k, "hide"))
            rc = ylist_v(y, v, &p->hide, k, v_hide);
        else if (!strcmp(k, "programs")) {
            if (v->type != YAML_MAPPING_NODE)
                return yerr(y, v, "programs must be a mapping of program names");
            if (v->len > POLICY_MAX_RULES)
                return yerr(y, v, "programs: more than %u programs", POLICY_MAX_RULES);
            reserve(&p->progs, &p->aprogs, p->nprogs + v->len, sizeof *p->progs, true);
            /* the programs by name (a later one replaces an earlier), in a
             * table for this mapping: a search of the list for each made
             * the default policy's load quadratic */
            struct prog_names pnames;
            prog_names_init(&pnames, p, p->nprogs + v->len);
            FOR_PAIRS(y, v, pn, pv)
            {
                progspec s = {0};
                if (!*pn || parse_prog(y, pn, pv, &s) < 0) {
                    if (!*pn)
                        yerr(y, pn_node, "program names must be strings");
                    progspec_free(&s);
                    free(pnames.slot);
                    return -1;
                }
                if (y->refused && (strpbrk(pn, "*?[") || policy_prog(p, pn))) {
                    /* how a program's words are read decides what rules see */
                    refuse(y, pn_node,
                           "programs.%s: refused: a workspace policy can describe only a "
                           "program the user's policy does not",
                           pn);
                    progspec_free(&s);
                    continue;
                }
                uint32_t *slot = prog_names_slot(&pnames, p, pn);
                if (*slot) {
                    progspec_free(&p->progs[*slot - 1]);
                    p->progs[*slot - 1] = s;
                } else {
                    reserve(&p->progs, &p->aprogs, p->nprogs + 1, sizeof *p->progs, false);
                    p->progs[p->nprogs++] = s;
                    *slot = (uint32_t)p->nprogs;
                }
            }
            free(pnames.slot);
        } else if (!strcmp(k, "effects")) {
            rc = parse_effects(p, y, v);
        } else if (!strcmp(k, "rules")) {
            if (v->type != YAML_SEQUENCE_NODE)
                return yerr(y, v, "rules must be a list");
            if (v->len > POLICY_MAX_RULES)
                return yerr(y, v, "rules: more than %u rules", POLICY_MAX_RULES);
            reserve(&p->rules, &p->arules, p->nrules + v->len, sizeof *p->rules, true);
            for (const int32_t *it = SEQ(y, v); it < SEQ_END(y, v); it++) {
                rule r = {0};
                if (parse_rule(y, ynode(y, *it), &r) < 0) {
                    rule_free(&r);
                    return -1;
                }
                if (y->refused && !layer_rule_ok(p, y, ynode(y, *it), &r)) {
                    rule_free(&r);
                    continue;
                }
                add_or_replace_rule(p, &r);
            }
        } else {
            rc = yerr(y, k_node, "unknown top-level key '%s'", k);
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Where a node is open in the prescan: its size so far, its anchor. */
typedef struct popen {
    size_t size;
    char *anchor;
} popen_t;

typedef struct panchor {
    char *name;
    size_t size;
} panchor;

static int yevent_err(yaml_parser_t *yp, const char *file, txbox_error *err)
{
    return tx_err(err, EINVAL, "policy %s:%zu: %s%s%s", file, (size_t)(yp->problem_mark.line + 1),
                  yp->problem ? yp->problem : "invalid YAML", yp->context ? " " : "",
                  yp->context ? yp->context : "");
}

/* Before libyaml builds the document, its events, in one pass: nesting
 * deeper than POLICY_MAX_DEPTH is refused as soon as it is seen (libyaml's
 * scanner does work in proportion to the nesting at every token, so 200 KB
 * of brackets took it a minute), and so is a document whose nodes, every
 * alias counted as the nodes it stands for, pass POLICY_MAX_NODES (the
 * parser visits an aliased list at each alias). Linear in the text. */
static int prescan(const char *text, size_t len, const char *file, txbox_error *err)
{
    yaml_parser_t yp;
    if (!yaml_parser_initialize(&yp))
        return tx_err(err, ENOMEM, "policy %s: cannot start the YAML parser", file);
    yaml_parser_set_input_string(&yp, (const unsigned char *)text, len);
    popen_t open[POLICY_MAX_DEPTH + 1];
    panchor anchors[POLICY_MAX_ANCHORS];
    size_t depth = 0, nanchors = 0, total = 0;
    int rc = 0;
    open[0] = (popen_t){0};
    for (bool done = false; !done && !rc;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&yp, &ev)) {
            rc = yevent_err(&yp, file, err);
            break;
        }
        size_t line = ev.start_mark.line + 1, add = 0;
        const char *anchor = NULL;
        switch (ev.type) {
        case YAML_DOCUMENT_END_EVENT:
        case YAML_STREAM_END_EVENT:
            done = true; /* the first document is the policy */
            break;
        case YAML_SCALAR_EVENT:
            add = 1;
            anchor = (const char *)ev.data.scalar.anchor;
            break;
        case YAML_ALIAS_EVENT:
            add = 1;
            for (size_t i = 0; i < nanchors; i++)
                if (!strcmp(anchors[i].name, (const char *)ev.data.alias.anchor))
                    add = anchors[i].size;
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > POLICY_MAX_DEPTH) {
                depth--;
                rc = tx_err(err, EINVAL, "policy %s:%zu: nested deeper than %u levels", file, line,
                            POLICY_MAX_DEPTH);
                break;
            }
            anchor = ev.type == YAML_SEQUENCE_START_EVENT ? (const char *)ev.data.sequence_start.anchor
                                                          : (const char *)ev.data.mapping_start.anchor;
            open[depth] = (popen_t){.size = 1, .anchor = anchor ? xstrdup(anchor) : NULL};
            anchor = NULL;
            total++;
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            if (depth) {
                add = open[depth].size;
                anchor = open[depth].anchor;
                depth--;
                total -= add; /* counted as it grew */
            }
            break;
        default:
            break;
        }
        if (!rc && (add || anchor)) {
            if (anchor && nanchors < POLICY_MAX_ANCHORS)
                anchors[nanchors++] = (panchor){.name = xstrdup(anchor), .size = add ? add : 1};
            else if (anchor)
                rc = tx_err(err, EINVAL, "policy %s:%zu: more than %u anchors", file, line,
                            POLICY_MAX_ANCHORS);
            open[depth].size += add;
            total += add;
            if (total > POLICY_MAX_NODES)
                rc = tx_err(err, EFBIG,
                            "policy %s:%zu: more than %u nodes (aliases counted as what they stand for)",
                            file, line, POLICY_MAX_NODES);
        }
        if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT)
            free((char *)anchor);
        yaml_event_delete(&ev);
    }
    for (size_t i = 1; i <= depth; i++)
        free(open[i].anchor);
    for (size_t i = 0; i < nanchors; i++)
        free(anchors[i].name);
    yaml_parser_delete(&yp);
    return rc;
}

typedef struct keyref {
    const char *s;
    uint32_t len, line;
} keyref;

static int keyref_cmp(const void *a, const void *b)
{
    const keyref *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    int c = memcmp(x->s, y->s, x->len);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* A key given twice in one mapping is an error (libyaml keeps both, and
 * which one counts would depend on the reader). */
static int check_dup_keys(const pdoc *d, const char *file, txbox_error *err)
{
    size_t cap = 0;
    keyref *v = NULL;
    int rc = 0;
    for (size_t i = 0; i < d->nnodes && !rc; i++) {
        const pnode *m = &d->nodes[i];
        if (m->type != YAML_MAPPING_NODE || m->len < 2)
            continue;
        if (m->len > cap) {
            cap = m->len;
            v = xrealloc(v, cap * sizeof *v);
        }
        size_t n = 0;
        for (size_t k = 0; k < m->len; k++) {
            int32_t key = d->pairs[2 * ((size_t)m->off + k)];
            if (key < 1 || (size_t)key > d->nnodes || d->nodes[key - 1].type != YAML_SCALAR_NODE)
                continue;
            const pnode *kn = &d->nodes[key - 1];
            v[n++] = (keyref){.s = d->pool + kn->off, .len = kn->len, .line = kn->line};
        }
        qsort(v, n, sizeof *v, keyref_cmp);
        for (size_t k = 1; k < n && !rc; k++)
            if (v[k].len == v[k - 1].len && !memcmp(v[k].s, v[k - 1].s, v[k].len))
                rc = tx_err(err, EINVAL, "policy %s:%u: key '%.60s' given twice in one mapping (line %u too)",
                            file, v[k].line + 1, v[k].s, v[k - 1].line + 1);
    }
    free(v);
    return rc;
}

static int parse_text(txbox_policy *p, const char *text, size_t len, const char *file, strlist *refused,
                      txbox_error *err)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    if (prescan(text, len, file, err) < 0)
        return -1;
    if (!yaml_parser_initialize(&parser))
        return tx_err(err, ENOMEM, "policy %s: cannot start the YAML parser", file);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        int rc = tx_err(err, EINVAL, "policy %s:%zu: %s%s%s", file, (size_t)(parser.problem_mark.line + 1),
                        parser.problem ? parser.problem : "invalid YAML", parser.context ? " " : "",
                        parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return rc;
    }
    pdoc pd;
    int cv = pdoc_from_yaml(&doc, &pd);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (cv < 0)
        return tx_err(err, ENOMEM, "policy %s: too large a document", file);
    if (check_dup_keys(&pd, file, err) < 0) {
        pdoc_free(&pd);
        return -1;
    }
    yctx y = {.doc = &pd, .file = file, .err = err, .refused = refused};
    int rc = parse_doc(p, &y);
    pdoc_free(&pd);
    return rc;
}

int policy_parse_yaml(txbox_policy *p, const char *text, size_t len, const char *file, txbox_error *err)
{
    return parse_text(p, text, len, file, NULL, err);
}

int policy_parse_layer(txbox_policy *p, const char *text, size_t len, const char *file, strlist *refused,
                       txbox_error *err)
{
    return parse_text(p, text, len, file, refused, err);
}

int policy_parse_doc(txbox_policy *p, const pdoc *doc, const char *file, txbox_error *err)
{
    yctx y = {.doc = doc, .file = file, .err = err, .builtin = true};
    return parse_doc(p, &y);
}
