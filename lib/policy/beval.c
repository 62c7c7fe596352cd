/* What bash evaluates besides the commands it runs, and whether the engine
 * can vouch for it. shell.c asks; a word it cannot vouch for makes the
 * command `dynamic-eval` (never safe).
 *
 * Bash evaluates text as an arithmetic expression in $((...)), $[...],
 * ((...)), let, for ((...;...;...)), the arithmetic comparisons of [[
 * (-eq, -ne, -lt, -le, -gt, -ge), substring offsets and lengths
 * (${x:o:l}), the subscripts of indexed arrays, and the values assigned to
 * a variable declared -i. A variable read there has its value evaluated in
 * turn, and a subscript in that value is expanded, command substitutions
 * and all: x='a[$(cmd)]'; echo $((x)) runs cmd. It takes text as a
 * variable name, NAME[SUBSCRIPT] evaluating the subscript, in read,
 * printf -v, mapfile, wait -p, getopts, unset, test -v, [[ -v, the
 * declaration builtins, ${!x} and a nameref's value; and as a prompt, whose
 * $(...) it runs, in ${x@P}.
 *
 * The engine vouches for such text only when it knows it statically and
 * evaluating it reads nothing it does not know: a variable's value must be
 * known from the string itself (or be an integer bash keeps: $#, RANDOM,
 * an arithmetic result); what the environment, a file or a command's output
 * holds is not known. */
#include <ctype.h>
#include <fnmatch.h>

#include "walk.h"

#define ARITH_DEPTH 8
#define ARITH_ASSIGNED 16

/* ---- the variables a string assigns ---- */
void set_var(W *w, const char *name, const char *val, size_t len, bool fetch, bool num)
{
    wstate *st = &w->st;
    const var *old = get_var(w, name, strlen(name));
    uint8_t attr = old ? old->attr : 0;
    if (!AR_GROW(w->ar, st->vars, st->avars, st->nvars, 16))
        return;
    if (val && len > MAX_VALUE)
        val = NULL;
    st->vars[st->nvars++] = (var){.name = ar_strdup(w->ar, name),
                                  .val = val ? ar_strndup(w->ar, val, len) : NULL,
                                  .len = val ? len : 0,
                                  .fetch = fetch,
                                  .num = !val && num,
                                  .attr = attr};
    if (!strcmp(name, "PATH"))
        st->path_changed = true;
    if (!strcmp(name, "IFS"))
        w->ifs_changed = true;
}

const var *get_var(W *w, const char *name, size_t n)
{
    for (size_t i = w->st.nvars; i-- > 0;) {
        const var *v = &w->st.vars[i];
        if (v->name && strlen(v->name) == n && !memcmp(v->name, name, n))
            return v;
    }
    return NULL;
}

void var_attr(W *w, const char *name, size_t n, uint8_t attr)
{
    char nb[256];
    if (n >= sizeof nb)
        return;
    memcpy(nb, name, n);
    nb[n] = 0;
    const var *v = get_var(w, name, n);
    wstate *st = &w->st;
    if (!AR_GROW(w->ar, st->vars, st->avars, st->nvars, 16))
        return;
    var nv = v ? *v : (var){.name = ar_strdup(w->ar, nb)};
    nv.attr |= attr;
    if (!v)
        nv.val = NULL, nv.num = false; /* declared: its value is whatever it was */
    st->vars[st->nvars++] = nv;
}

bool int_special(const char *name, size_t n)
{
    static const char *const v[] = {
        "#",       "?",    "$",   "!",    "RANDOM",       "SRANDOM", "SECONDS", "LINENO",
        "BASHPID", "PPID", "UID", "EUID", "EPOCHSECONDS", "HISTCMD", "OPTIND",  "BASH_SUBSHELL",
        "SHLVL"};
    for (size_t i = 0; i < ARRAY_SIZE(v); i++)
        if (strlen(v[i]) == n && !memcmp(v[i], name, n))
            return true;
    return false;
}

/* The index of the bracket that closes the one at s[i] (open), or n. */
static size_t match_close(const char *s, size_t n, size_t i, char open, char close)
{
    int depth = 0;
    for (; i < n; i++) {
        if (s[i] == open)
            depth++;
        else if (s[i] == close && --depth == 0)
            return i;
    }
    return n;
}

static bool ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Is the value of variable name (n bytes) harmless when evaluated as
 * arithmetic? */
static bool var_ok(W *w, const char *name, size_t n, int depth)
{
    const var *v = get_var(w, name, n);
    if (v && (v->attr & VA_REF))
        return false; /* a name reference reads its target */
    if (v && v->val)
        return arith_ok(w, v->val, v->len, false, depth + 1);
    if (v)
        return v->num;
    return int_special(name, n);
}

/* $N, $@, $*: the positional parameters, when known. */
static bool positional_ok(W *w, char which, int depth)
{
    if (!w->st.pos)
        return false;
    for (size_t i = 0; i < w->st.npos; i++) {
        if (which != '@' && which != '*' && i != (size_t)(which - '1'))
            continue;
        const pword *pw = &w->st.pos[i];
        if ((pw->flags & W_DYN) ? !(pw->flags & W_NUM) : !arith_ok(w, pw->s, pw->len, false, depth + 1))
            return false;
    }
    return true;
}

/* $... in arithmetic source at s[i]: its value, substituted into the
 * expression before it is evaluated. Returns the index after it, or 0 when
 * it is not harmless. */
static size_t dollar_ok(W *w, const char *s, size_t n, size_t i, int depth)
{
    if (i + 1 >= n)
        return 0;
    char c = s[i + 1];
    if (c == '(' && i + 2 < n && s[i + 2] == '(') {
        size_t e = match_close(s, n, i + 1, '(', ')');
        if (e >= n || s[e - 1] != ')' || e < i + 4)
            return 0;
        return arith_ok(w, s + i + 3, e - 1 - (i + 3), true, depth) ? e + 1 : 0;
    }
    if (c == '[') {
        size_t e = match_close(s, n, i + 1, '[', ']');
        return e < n && arith_ok(w, s + i + 2, e - i - 2, true, depth) ? e + 1 : 0;
    }
    if (c == '{') {
        size_t e = match_close(s, n, i + 1, '{', '}');
        if (e >= n)
            return 0;
        const char *in = s + i + 2;
        size_t il = e - i - 2;
        if (il > 1 && in[0] == '#' && ident_start(in[1])) { /* ${#name}: a length */
            size_t k = 1;
            while (k < il && ident_char(in[k]))
                k++;
            return k == il ? e + 1 : 0;
        }
        size_t k = 0;
        while (k < il && ident_char(in[k]))
            k++;
        if (k == il && il && ident_start(in[0]))
            return var_ok(w, in, il, depth) ? e + 1 : 0;
        return 0; /* ${x:-...}, ${a[i]}...: a value the engine does not follow */
    }
    if (ident_start(c)) {
        size_t k = i + 1;
        while (k < n && ident_char(s[k]))
            k++;
        return var_ok(w, s + i + 1, k - i - 1, depth) ? k : 0;
    }
    if (isdigit((unsigned char)c) && c != '0')
        return positional_ok(w, c, depth) ? i + 2 : 0;
    if (c == '@' || c == '*')
        return positional_ok(w, c, depth) ? i + 2 : 0;
    if (c == '#' || c == '?' || c == '$' || c == '!')
        return i + 2;
    return 0; /* $(...), $-, ... */
}

typedef struct assigned {
    const char *name[ARITH_ASSIGNED];
    size_t len[ARITH_ASSIGNED];
    size_t n;
} assigned;

/* An identifier at s[*i]: a variable read (its value evaluated), or
 * assigned (x=, x+=, x++, ++x: an integer afterwards). */
static bool ident_ok(W *w, const char *s, size_t n, size_t *i, bool src, int depth, bool incdec, assigned *as)
{
    size_t a = *i;
    while (*i < n && ident_char(s[*i]))
        (*i)++;
    const char *name = s + a;
    size_t nl = *i - a;
    bool elem = false;
    if (*i < n && s[*i] == '[') {
        size_t e = match_close(s, n, *i, '[', ']');
        if (e >= n)
            return false;
        const var *v = get_var(w, name, nl);
        if (v && (v->attr & VA_ASSOC)) {
            /* a key: expanded, never evaluated; in a value, not known */
            if (!src && (memchr(s + *i, '$', e - *i) || memchr(s + *i, '`', e - *i)))
                return false;
        } else if (!arith_ok(w, s + *i + 1, e - *i - 1, src, depth)) {
            return false;
        }
        *i = e + 1;
        elem = true; /* an array element: its value is not known */
    }
    size_t j = *i;
    while (j < n && isspace((unsigned char)s[j]))
        j++;
    bool set = j < n && s[j] == '=' && !(j + 1 < n && s[j + 1] == '=');
    bool op_set = j + 1 < n && s[j + 1] == '=' && strchr("+-*/%&^|", s[j]);
    op_set |= j + 2 < n && s[j + 2] == '=' &&
              ((s[j] == '<' && s[j + 1] == '<') || (s[j] == '>' && s[j + 1] == '>'));
    bool post = j + 1 < n && (s[j] == '+' || s[j] == '-') && s[j + 1] == s[j];
    if (!set && (elem || !var_ok(w, name, nl, depth)))
        return false;
    if ((set || op_set || post || incdec) && !elem) {
        if (as->n >= ARITH_ASSIGNED)
            return false;
        as->name[as->n] = name;
        as->len[as->n++] = nl;
    }
    return true;
}

bool arith_ok(W *w, const char *s, size_t n, bool src, int depth)
{
    if (depth > ARITH_DEPTH)
        return false;
    assigned as = {0};
    bool incdec = false;
    for (size_t i = 0; i < n;) {
        char c = s[i];
        if (isspace((unsigned char)c)) {
            i++;
        } else if (isdigit((unsigned char)c)) {
            while (i < n && (ident_char(s[i]) || s[i] == '#' || s[i] == '@'))
                i++;
            incdec = false;
        } else if (ident_start(c)) {
            if (!ident_ok(w, s, n, &i, src, depth, incdec, &as))
                return false;
            incdec = false;
        } else if (c == '$' && src) {
            i = dollar_ok(w, s, n, i, depth);
            if (!i)
                return false;
            incdec = false;
        } else if (c == '"' && src) {
            i++; /* removed before evaluation */
        } else if (c == '\\' && src && i + 1 < n && s[i + 1] == '\n') {
            i += 2;
        } else if (strchr("+-*/%<>=!&|^~?:,()", c)) {
            incdec = i + 1 < n && (c == '+' || c == '-') && s[i + 1] == c;
            i += incdec ? 2 : 1;
        } else {
            return false; /* quotes in a value, $(...), `...`, stray brackets */
        }
    }
    for (size_t k = 0; k < as.n; k++) {
        char nb[128];
        if (as.len[k] >= sizeof nb)
            return false;
        memcpy(nb, as.name[k], as.len[k]);
        nb[as.len[k]] = 0;
        set_var(w, nb, NULL, 0, false, true);
    }
    return true;
}

bool name_ok(W *w, const char *s, size_t n)
{
    if (!n || !ident_start(s[0]))
        return false;
    size_t i = 1;
    while (i < n && ident_char(s[i]))
        i++;
    if (i == n)
        return true;
    if (s[i] != '[' || s[n - 1] != ']' || match_close(s, n, i, '[', ']') != n - 1)
        return false;
    const char *sub = s + i + 1;
    size_t sl = n - i - 2;
    if (sl == 1 && (sub[0] == '@' || sub[0] == '*'))
        return true;
    const var *v = get_var(w, s, i);
    if (v && (v->attr & VA_ASSOC))
        return !memchr(sub, '$', sl) && !memchr(sub, '`', sl);
    return arith_ok(w, sub, sl, false, 0);
}

bool word_name_ok(W *w, const pword *pw)
{
    if (pw->flags & (W_DYN | W_GLOB | W_UNQDYN))
        return false;
    return name_ok(w, pw->s, pw->len);
}

/* Is v's value known, and free of what a prompt expands after decoding
 * its escapes: $ and ` (command substitution), and the escapes that make
 * them (\NNN octal, \$)? \u, \w and the other letters are quoted by bash. */
static bool prompt_ok(const var *v)
{
    if (!v || !v->val || memchr(v->val, '$', v->len) || memchr(v->val, '`', v->len))
        return false;
    for (size_t i = 0; i + 1 < v->len; i++)
        if (v->val[i] == '\\' && (isdigit((unsigned char)v->val[i + 1]) || v->val[i + 1] == '$'))
            return false;
    return true;
}

bool expansion_ok(W *w, const char *s, size_t n)
{
    size_t i = 0;
    bool indirect = false;
    if (n && s[0] == '!') {
        indirect = true;
        i = 1;
    } else if (n > 1 && s[0] == '#') {
        i = 1; /* ${#name...}: a length */
    }
    size_t a = i;
    if (i < n && ident_start(s[i])) {
        while (i < n && ident_char(s[i]))
            i++;
    } else if (i < n && (isdigit((unsigned char)s[i]) || strchr("@*#?-$!", s[i]))) {
        i++;
    } else {
        return i == n; /* ${#}, or something bash refuses */
    }
    const char *name = s + a;
    size_t nl = i - a;
    const var *v = get_var(w, name, nl);
    bool sub_all = false;
    if (i < n && s[i] == '[') {
        size_t e = match_close(s, n, i, '[', ']');
        if (e >= n)
            return false;
        const char *sub = s + i + 1;
        size_t sl = e - i - 1;
        sub_all = sl == 1 && (sub[0] == '@' || sub[0] == '*');
        if (!sub_all && !(v && (v->attr & VA_ASSOC)) && !arith_ok(w, sub, sl, true, 0))
            return false;
        i = e + 1;
    }
    if (indirect) {
        /* ${!prefix*}, ${!prefix@}, ${!a[@]}: names and keys; else the value names a variable */
        if ((i + 1 == n && (s[i] == '*' || s[i] == '@')) || (sub_all && i == n))
            return true;
        if (!v || !v->val || !name_ok(w, v->val, v->len))
            return false;
    }
    if (i >= n)
        return true;
    char op = s[i];
    if (op == ':' && i + 1 < n && !strchr("-=?+", s[i + 1])) {
        /* ${x:offset:length}: both arithmetic */
        size_t k = i + 1, depth = 0;
        for (size_t j = k; j <= n; j++) {
            if (j < n && (s[j] == '(' || s[j] == '[' || s[j] == '{'))
                depth++;
            else if (j < n && (s[j] == ')' || s[j] == ']' || s[j] == '}'))
                depth--;
            else if (j == n || (s[j] == ':' && !depth)) {
                if (!arith_ok(w, s + k, j - k, true, 0))
                    return false;
                k = j + 1;
            }
        }
        return true;
    }
    if (op == '@' && i + 1 < n && s[i + 1] == 'P')
        return prompt_ok(v);
    if (op == '=' || (op == ':' && i + 1 < n && s[i + 1] == '=')) {
        /* ${x:=word}: x may be assigned what the engine does not follow */
        char nb[128];
        if (nl && nl < sizeof nb && ident_start(name[0])) {
            memcpy(nb, name, nl);
            nb[nl] = 0;
            set_var(w, nb, NULL, 0, false, false);
        }
        return !(v && (v->attr & (VA_INT | VA_REF)));
    }
    return true;
}

bool may_be_option(const pword *a)
{
    if ((a->flags & W_GLOB) && a->len && strchr("*?[@!+-", a->s[0]))
        return true;
    if ((a->flags & W_DYN) && !(a->flags & W_NUM))
        return a->dynpos == 0 || (a->flags & W_UNQDYN);
    return false;
}

/* Assigns name (a word read, printf -v, ...) a value the engine does not
 * know: false when its attributes make bash evaluate it (declare -i: as
 * arithmetic; -n: as a name). */
static bool assign_unknown(W *w, const pword *name)
{
    size_t n = strcspn(name->s, "[");
    const var *v = get_var(w, name->s, n);
    if (v && (v->attr & (VA_INT | VA_REF)))
        return false;
    char nb[128];
    if (n < sizeof nb && n == name->len) {
        memcpy(nb, name->s, n);
        nb[n] = 0;
        set_var(w, nb, NULL, 0, false, false);
    }
    return true;
}

/* A builtin's options before its operands: i moves past them; a letter in
 * takes_value takes the rest of its word or the next word; for the letter
 * named `name_opt`, that value is a variable name. False when a word may
 * be an option the engine cannot see, or the name is not harmless. */
static bool builtin_opts(W *w, const pword *argv, size_t argc, size_t *i, const char *takes_value,
                         char name_opt)
{
    while (*i < argc) {
        const pword *a = &argv[*i];
        if (may_be_option(a))
            return false;
        if (a->flags & W_DYN || a->s[0] != '-' || a->len < 2)
            return true;
        (*i)++;
        if (!strcmp(a->s, "--"))
            return true;
        for (size_t k = 1; k < a->len; k++) {
            if (!strchr(takes_value, a->s[k]))
                continue;
            const pword *val = NULL;
            pword rest;
            if (k + 1 < a->len) {
                rest =
                    (pword){.s = a->s + k + 1, .len = a->len - k - 1, .flags = 0, .dynpos = a->len - k - 1};
                val = &rest;
            } else if (*i < argc) {
                val = &argv[(*i)++];
            }
            if (val && a->s[k] == name_opt && (!word_name_ok(w, val) || !assign_unknown(w, val)))
                return false;
            break;
        }
    }
    return true;
}

/* read, mapfile, printf -v, wait -p, getopts: the names they assign. */
static bool names_ok(W *w, const pword *argv, size_t argc)
{
    for (size_t i = 0; i < argc; i++)
        if (!word_name_ok(w, &argv[i]) || !assign_unknown(w, &argv[i]))
            return false;
    return true;
}

static bool literal(const pword *a, const char *s)
{
    return !(a->flags & (W_DYN | W_GLOB)) && !strcmp(a->s, s);
}

static bool binary_test_op(const pword *a)
{
    static const char *const ops[] = {"=",   "==",  "!=",  "<",   ">",   "-eq", "-ne", "-lt",
                                      "-le", "-gt", "-ge", "-nt", "-ot", "-ef", "-a",  "-o"};
    for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
        if (literal(a, ops[i]))
            return true;
    return false;
}

/* Could word a be test's -v or -R (which take a name)? A glob only if its
 * pattern matches one of them (*.txt cannot); a word with an unknown start
 * or an unquoted unknown part. */
static bool may_be_v(const pword *a)
{
    if (a->flags & W_GLOB)
        return (a->flags & W_DYN) || fnmatch(a->s, "-v", 0) == 0 || fnmatch(a->s, "-R", 0) == 0;
    if ((a->flags & W_DYN) && !(a->flags & W_NUM))
        return a->dynpos == 0 || (a->flags & W_UNQDYN);
    return false;
}

/* test / [: -v NAME and -R NAME evaluate NAME's subscript; a word that may
 * be such an operator, followed by another, may too (the POSIX argument
 * counts decide where an operator is read as one). */
static bool test_ok(W *w, const pword *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (((a[i].flags & (W_UNQDYN | W_GLOB)) && may_be_v(&a[i])))
            return false; /* it may be several words, -v among them */
    if (n == 4 && literal(&a[0], "!"))
        return test_ok(w, a + 1, 3);
    if (n == 3 && binary_test_op(&a[1]))
        return true; /* a binary test: no unary operator */
    if (n == 3 && literal(&a[0], "!"))
        return test_ok(w, a + 1, 2);
    for (size_t i = 0; i + 1 < n; i++) {
        if ((literal(&a[i], "-v") || literal(&a[i], "-R")) && !word_name_ok(w, &a[i + 1]))
            return false;
        if (may_be_v(&a[i]))
            return false;
    }
    return true;
}

bool builtin_evaluates(W *w, const char *prog, const pword *argv, size_t argc)
{
    size_t i = 1;
    if (!strcmp(prog, "read")) {
        if (!builtin_opts(w, argv, argc, &i, "adinNptu", 'a'))
            return true;
        return !names_ok(w, argv + i, argc - i);
    }
    if (!strcmp(prog, "mapfile") || !strcmp(prog, "readarray")) {
        for (size_t k = 1; k < argc; k++)
            if (!(argv[k].flags & W_DYN) && argv[k].s[0] == '-' && strchr(argv[k].s, 'C'))
                return true; /* -C CALLBACK: code */
        if (!builtin_opts(w, argv, argc, &i, "dnOsuCc", 0))
            return true;
        return !names_ok(w, argv + i, argc - i);
    }
    if (!strcmp(prog, "printf")) {
        if (i < argc && literal(&argv[i], "-v"))
            return i + 1 >= argc || !names_ok(w, argv + i + 1, 1);
        return i < argc && may_be_option(&argv[i]);
    }
    if (!strcmp(prog, "wait"))
        return !builtin_opts(w, argv, argc, &i, "p", 'p');
    if (!strcmp(prog, "getopts")) {
        if (argc >= 3 && !names_ok(w, argv + 2, 1))
            return true;
        pword opt_arg = {.s = "OPTARG", .len = 6};
        assign_unknown(w, &opt_arg);
        return false;
    }
    if (!strcmp(prog, "test") || !strcmp(prog, "[")) {
        size_t n = argc - 1;
        if (!strcmp(prog, "[") && n && literal(&argv[n], "]"))
            n--;
        return !test_ok(w, argv + 1, n);
    }
    if (!strcmp(prog, "let")) {
        for (; i < argc; i++)
            if ((argv[i].flags & W_DYN) ? !(argv[i].flags & W_NUM)
                                        : !arith_ok(w, argv[i].s, argv[i].len, false, 0))
                return true;
        return false;
    }
    if (!strcmp(prog, "unset")) {
        bool funcs = false;
        for (; i < argc && (may_be_option(&argv[i]) || argv[i].s[0] == '-'); i++) {
            if (may_be_option(&argv[i]))
                return true;
            funcs |= !!strchr(argv[i].s, 'f');
        }
        for (; i < argc && !funcs; i++)
            if (!word_name_ok(w, &argv[i]))
                return true;
        return false;
    }
    if (!strcmp(prog, "declare") || !strcmp(prog, "typeset") || !strcmp(prog, "local") ||
        !strcmp(prog, "export") || !strcmp(prog, "readonly"))
        return !declaration_ok(w, argv, argc);
    if (!strcmp(prog, "compgen") || !strcmp(prog, "complete")) {
        for (; i < argc; i++)
            if ((argv[i].flags & W_DYN) || (argv[i].s[0] == '-' && strpbrk(argv[i].s, "WCF")))
                return true; /* -W words are expanded; -C, -F run code */
        return false;
    }
    return false;
}

bool declaration_ok(W *w, const pword *argv, size_t argc)
{
    uint8_t attr = 0;
    size_t i = 1;
    for (; i < argc; i++) {
        const pword *a = &argv[i];
        if (may_be_option(a))
            return false;
        if ((a->flags & W_DYN) || (a->s[0] != '-' && a->s[0] != '+'))
            break;
        if (a->s[0] == '-') {
            /* export -n unexports; -i, -n, -A are declare's, typeset's, local's */
            bool exp = !strcmp(argv[0].s, "export");
            attr |= strchr(a->s, 'i') && !exp ? VA_INT : 0;
            attr |= strchr(a->s, 'n') && !exp ? VA_REF : 0;
            attr |= strchr(a->s, 'A') ? VA_ASSOC : 0;
        }
    }
    for (; i < argc; i++) {
        const pword *a = &argv[i];
        if (a->flags & (W_DYN | W_GLOB | W_UNQDYN))
            return false; /* NAME=VALUE not known */
        const char *eq = memchr(a->s, '=', a->len);
        size_t nl = eq ? (size_t)(eq - a->s) : a->len;
        if (nl && a->s[nl - 1] == '+')
            nl--;
        if (!name_ok(w, a->s, nl))
            return false;
        size_t base = strcspn(a->s, "[=+");
        const var *v = get_var(w, a->s, base);
        uint8_t has = attr | (v ? v->attr : 0);
        if (eq) {
            const char *val = eq + 1;
            size_t vl = a->len - (size_t)(val - a->s);
            if ((has & VA_REF) && !name_ok(w, val, vl))
                return false;
            if ((has & VA_INT) && !arith_ok(w, val, vl, false, 0))
                return false;
        }
        if (attr)
            var_attr(w, a->s, base, attr);
        if (eq && base == nl && base < 128) {
            /* NAME=VALUE (not NAME+=, not an element): the value is known */
            char nb[128];
            memcpy(nb, a->s, base);
            nb[base] = 0;
            bool app = eq > a->s && eq[-1] == '+';
            size_t vl = a->len - (size_t)(eq + 1 - a->s);
            bool keep = !app && !(has & VA_INT);
            set_var(w, nb, keep ? eq + 1 : NULL, keep ? vl : 0, false, (has & VA_INT) != 0);
        }
    }
    return true;
}
