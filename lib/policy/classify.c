/* Classification: rules against the simple commands the shell reader
 * found, and the public txbox_policy_* API.
 *
 * For each simple command, every enabled rule is tried: an `unsafe` rule
 * that matches decides; otherwise an `uncertain` one; otherwise a `safe`
 * one; otherwise the command is `uncertain` (rule `no-rule`). A command
 * with a not-understood detector is never `safe`. The verdict of the whole
 * string is the worst verdict of its commands, reported with the rule of
 * the first command that has it. */
#include <ctype.h>
#include <fnmatch.h>
#include <limits.h>

#include "pdoc.h"
#include "pol.h"

#define D_NEVER_SAFE D_NOT_UNDERSTOOD

const char *txbox_verdict_name(txbox_verdict_kind v)
{
    switch (v) {
    case TXBOX_VERDICT_SAFE:
        return "safe";
    case TXBOX_VERDICT_UNSAFE:
        return "unsafe";
    default:
        return "uncertain";
    }
}

static bool glob1(const char *pat, const char *s)
{
    if (!strpbrk(pat, "*?["))
        return !strcmp(pat, s);
    return fnmatch(pat, s, 0) == 0;
}

static bool glob_any(const strlist *l, const char *s) { return strlist_glob(l, s); }

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The slot of name in the index: its own, or the empty one it would take. */
static progidx *pidx_slot(const txbox_policy *p, const char *name)
{
    size_t mask = p->npidx - 1;
    for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask)
        if (!p->pidx[i].name || !strcmp(p->pidx[i].name, name))
            return &p->pidx[i];
}

/* Every (literal name, rule) pair into its slot: counted, or (fill) its
 * rule added (once per rule). */
static void index_pass(txbox_policy *p, bool fill)
{
    for (size_t k = 0; k < p->nrules; k++) {
        const strlist *l = &p->rules[k].program;
        for (size_t j = 0; j < l->n; j++) {
            if (l->glob[j] & STRLIST_GLOB)
                continue;
            progidx *x = pidx_slot(p, l->v[j]);
            x->name = l->v[j];
            if (!fill)
                x->n++;
            else if (!x->n || x->rules[x->n - 1] != (uint32_t)k)
                x->rules[x->n++] = (uint32_t)k;
        }
    }
}

/* The index of rules by literal program name: a hash table (open
 * addressing, at least twice the names), each name's rules in policy
 * order, all in one array (pidx_rules). Two passes over every (name, rule)
 * pair, a few thousand: sorting them was 15% of loading the built-in
 * policy, a linear search per pair before that 4% of a txbox run. */
void policy_build_index(txbox_policy *p)
{
    free(p->pidx);
    free(p->pidx_rules);
    p->pidx = NULL;
    p->pidx_rules = NULL;
    p->npidx = 0;
    size_t n = 0;
    for (size_t k = 0; k < p->nrules; k++)
        n += p->rules[k].program.n;
    if (!n)
        return;
    p->npidx = 16;
    while (p->npidx < 2 * n)
        p->npidx *= 2;
    p->pidx = xcalloc(p->npidx, sizeof *p->pidx);
    p->pidx_rules = xcalloc(n, sizeof *p->pidx_rules);
    /* count each name's rules, then give each its part of pidx_rules */
    index_pass(p, false);
    size_t off = 0;
    for (size_t i = 0; i < p->npidx; i++) {
        p->pidx[i].rules = p->pidx_rules + off;
        off += p->pidx[i].n;
        p->pidx[i].n = 0;
    }
    index_pass(p, true);
}

/* prog_ok[k]: does rule k's program list match this program? */
static void program_matches(const txbox_policy *p, const pcmd *c, uint8_t *prog_ok)
{
    memset(prog_ok, 0, p->nrules);
    if (!c->argc || (c->argv[0].flags & W_DYN))
        return;
    const char *prog = basename_of(c->argv[0].s);
    const progidx *e = p->npidx ? pidx_slot(p, prog) : NULL;
    for (size_t i = 0; e && e->name && i < e->n; i++)
        prog_ok[e->rules[i]] = 1;
    for (size_t k = 0; k < p->nrules; k++) {
        const strlist *l = &p->rules[k].program;
        if (prog_ok[k] || !l->any_glob)
            continue;
        for (size_t j = 0; j < l->n && !prog_ok[k]; j++)
            if ((l->glob[j] & STRLIST_GLOB) && fnmatch(l->v[j], prog, 0) == 0)
                prog_ok[k] = 1;
    }
}

/* ---- paths ---- */

/* Does the relative path rel (under base, also relative) leave base? */
static bool rel_escapes(const char *base, const char *rel)
{
    long depth = 0;
    for (int pass = 0; pass < 2; pass++) {
        const char *s = pass ? rel : base;
        while (s && *s) {
            while (*s == '/')
                s++;
            if (!*s)
                break;
            const char *e = strchr(s, '/');
            size_t n = e ? (size_t)(e - s) : strlen(s);
            if (n == 2 && s[0] == '.' && s[1] == '.') {
                if (--depth < 0)
                    return true;
            } else if (!(n == 1 && s[0] == '.')) {
                depth++;
            }
            s += n;
        }
    }
    return false;
}

/* The class of absolute, normalized path norm (dyn: its last component
 * is not fully known). */
static unsigned abs_class(const txbox_policy *p, const char *norm, bool dyn)
{
    if (ws_rel(p, norm))
        return dyn ? PC_DYNAMIC : PC_INSIDE;
    /* the home is the user's, wherever it lies (a home under /tmp is
     * not scratch space) */
    const char *homes[] = {p->home, p->home_real};
    for (size_t i = 0; i < ARRAY_SIZE(homes); i++) {
        size_t l = homes[i] ? strlen(homes[i]) : 0;
        if (l > 1 && !strncmp(norm, homes[i], l) && (norm[l] == '/' || !norm[l]))
            return PC_OUTSIDE;
    }
    if (!strncmp(norm, "/dev/", 5) && !glob_any(&p->scratch_paths, norm))
        return glob_any(&p->null_paths, norm) ? PC_NULL : PC_DEVICE;
    if (glob_any(&p->scratch_paths, norm))
        return dyn ? PC_DYNAMIC : PC_SCRATCH;
    return PC_OUTSIDE;
}

/* Where path word w points, as bash and the kernel resolve it: from the
 * directory the command runs in, against the workspace's real place; ~ and
 * $HOME are already the home's text (shell.c). A path whose value is not
 * known is never inside: a part only known at run time may hold "..". */
unsigned path_class(const txbox_policy *p, const pcmd *c, const pword *w)
{
    if (c->det & D_REMOTE)
        return PC_OUTSIDE;
    bool dyn = (w->flags & W_DYN) && !(w->flags & W_SYNTH);
    size_t n = (w->flags & W_DYN) ? w->dynpos : w->len;
    if (n == 0)
        return (w->flags & W_DYN) ? PC_DYNAMIC : PC_INSIDE;
    char stat[PATH_MAX];
    if (n >= sizeof stat - 2)
        n = sizeof stat - 3;
    memcpy(stat, w->s, n);
    stat[n] = 0;
    if (stat[0] == '~' && (w->flags & W_TILDE))
        return PC_OUTSIDE; /* a home whose place is not known */
    char buf[PATH_MAX], norm[PATH_MAX];
    if (stat[0] == '/') {
        if (!dyn && glob_any(&p->null_paths, stat))
            return PC_NULL;
        memcpy(buf, stat, n + 1);
    } else if (c->cwd_kind == CWD_UNKNOWN) {
        return PC_DYNAMIC;
    } else if (c->cwd_kind == CWD_OUTSIDE && c->cwd && c->cwd[0] == '/') {
        if ((size_t)snprintf(buf, sizeof buf, "%s/%s", c->cwd, stat) >= sizeof buf)
            return PC_DYNAMIC;
    } else if (c->cwd_kind == CWD_OUTSIDE) {
        return PC_OUTSIDE;
    } else if (p->workspace) {
        if ((size_t)snprintf(buf, sizeof buf, "%s/%s/%s", p->workspace, c->cwd ? c->cwd : "", stat) >=
            sizeof buf)
            return PC_DYNAMIC;
    } else {
        /* a workspace whose place is not known: what stays below it */
        if (rel_escapes(c->cwd, stat))
            return PC_OUTSIDE;
        return dyn ? PC_DYNAMIC : PC_INSIDE;
    }
    norm_abs(buf, norm);
    if (dyn && stat[n - 1] != '/') {
        /* /ho$X: only the directory part is known */
        char *sl = strrchr(norm, '/');
        if (sl && sl != norm)
            *sl = 0;
        else
            strcpy(norm, "/");
    }
    return abs_class(p, norm, dyn);
}

/* ---- programs ---- */

/* A program named with a '/' runs that file, not the one the rules know by
 * name: ./ls, bin/cat, ../x/cat, /proc/self/cwd/cat are whatever the
 * workspace put there. Only an absolute path into the host's system
 * directories, which the sandbox shows read-only from the host, names the
 * program a `safe` rule describes; a bare name, unless $PATH reaches into
 * the workspace (path_reaches_workspace). */
static bool system_program(const txbox_policy *p, const pword *w)
{
    static const char *const dirs[] = {"/usr/bin", "/bin",           "/usr/sbin",
                                       "/sbin",    "/usr/local/bin", "/usr/local/sbin"};
    if (!strchr(w->s, '/'))
        return !p->path_in_workspace || shell_builtin(w->s);
    if (w->s[0] != '/' || (w->flags & (W_DYN | W_GLOB)) || w->len + 2 >= PATH_MAX)
        return false;
    char norm[PATH_MAX];
    norm_abs(w->s, norm);
    char *sl = strrchr(norm, '/');
    if (!sl || sl == norm)
        return false;
    *sl = 0;
    size_t wl = p->workspace ? strlen(p->workspace) : 0;
    if (wl && !strncmp(norm, p->workspace, wl) && (norm[wl] == '/' || !norm[wl]))
        return false;
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
        if (!strcmp(norm, dirs[i]))
            return true;
    return false;
}

/* Does search path path have an entry that is empty or relative (the
 * current directory, wherever the command runs) or inside the workspace
 * (.venv/bin, node_modules/.bin)? Then a program name found there may be
 * a workspace file. */
bool path_reaches_workspace(const char *path, const char *ws)
{
    if (!path)
        return false;
    size_t wl = ws ? strlen(ws) : 0;
    for (const char *s = path;; s++) {
        const char *e = strchrnul(s, ':');
        if (e == s || s[0] != '/')
            return true;
        char dir[PATH_MAX], norm[PATH_MAX];
        if ((size_t)(e - s) + 3 < sizeof dir) {
            memcpy(dir, s, (size_t)(e - s));
            dir[e - s] = 0;
            norm_abs(dir, norm);
            if (wl && !strncmp(norm, ws, wl) && (norm[wl] == '/' || !norm[wl]))
                return true;
        }
        if (!*e)
            return false;
        s = e;
    }
}

/* ---- operands ---- */
typedef struct view {
    const pcmd *c;
    const progspec *ps;
    size_t ops[64]; /* indices into argv of operands */
    size_t nops;
    size_t script;     /* index of a script operand (sed, awk), or 0 */
    size_t subcmd_end; /* argv index after the last global option */
    bool prog_ok;
    const char *prog;
} view;

static void make_view(const txbox_policy *p, const pcmd *c, view *v)
{
    memset(v, 0, sizeof *v);
    v->c = c;
    if (!c->argc) {
        v->prog = "";
        return;
    }
    v->prog_ok = !(c->argv[0].flags & W_DYN);
    v->prog = v->prog_ok ? basename_of(c->argv[0].s) : "";
    v->ps = policy_prog(p, v->prog);
    bool after_dd = false, have_script_opt = false;
    for (size_t i = 1; i < c->argc; i++) {
        const pword *a = &c->argv[i];
        if (!after_dd && !(a->flags & W_DYN) && v->ps && strlist_has(&v->ps->script_operand_unless, a->s))
            have_script_opt = true;
        if (!after_dd && !(a->flags & W_DYN) && v->ps && !strncmp(a->s, "--", 2) && strchr(a->s, '=')) {
            for (size_t k = 0; k < v->ps->script_operand_unless.n; k++) {
                const char *o = v->ps->script_operand_unless.v[k];
                if (!strncmp(a->s, o, strlen(o)) && a->s[strlen(o)] == '=')
                    have_script_opt = true;
            }
        }
        if (!after_dd && !strcmp(a->s, "--") && !(a->flags & W_DYN)) {
            after_dd = true;
            continue;
        }
        bool opt = !after_dd && a->s[0] == '-' && a->len > 1 && !(a->flags & W_DYN);
        if (opt) {
            if (v->ps && v->ps->leading_operands_only)
                break;
            if (v->ps && strlist_has(&v->ps->options_with_value, a->s))
                i++;
            else if (v->ps && strlist_has(&v->ps->options_two_values, a->s))
                i += 2;
            continue;
        }
        if (v->nops < ARRAY_SIZE(v->ops))
            v->ops[v->nops++] = i;
    }
    if (v->ps && v->ps->script_operand_unless.n && !have_script_opt && v->nops) {
        v->script = v->ops[0];
        memmove(v->ops, v->ops + 1, (v->nops - 1) * sizeof v->ops[0]);
        v->nops--;
    }
}

/* Could glob a expand to a word starting with '-' (a file named -delete,
 * --pre=sh, -oout)? A literal first character other than '-' rules it out. */
static bool glob_may_be_option(const pword *a) { return a->len && strchr("*?[@!+-", a->s[0]); }

/* Does a matcher of r read the text of arguments that are not options
 * (args_* entries not starting with '-')? */
static bool reads_operand_text(const rule *r)
{
    const strlist *ls[] = {&r->args_any, &r->args_none, &r->args_all, &r->global_args_any,
                           &r->global_args_none};
    for (size_t i = 0; i < ARRAY_SIZE(ls); i++)
        for (size_t k = 0; k < ls[i]->n; k++)
            if (ls[i]->v[k][0] != '-')
                return true;
    return false;
}

/* A safe rule that looks at a program's arguments judges the words it
 * sees; a glob expands to file names the workspace chooses. Can r still be
 * judged on c: no glob may expand where the program reads options (before
 * `--`, or before its first operand, as its spec's options_end says; find
 * reads expressions anywhere), none is its script, and none is an operand
 * when r counts operands or matches their text? */
static bool globs_knowable(const rule *r, const pcmd *c, const view *vc)
{
    const progspec *ps = vc->ps;
    int end = ps ? ps->options_end : OPTEND_DASHDASH;
    bool operands = r->operands_any.n || r->operands_none.n || r->max_operands >= 0 || r->min_operands > 0 ||
                    r->subcommand.n || r->last_operand_class || r->operand_class_any || r->script_none.n;
    bool text = !vc->script && reads_operand_text(r);
    bool opts = end != OPTEND_NONE;
    size_t first_op = vc->nops ? vc->ops[0] : c->argc;
    if (vc->script && vc->script < first_op)
        first_op = vc->script;
    for (size_t i = 1; i < c->argc; i++) {
        const pword *a = &c->argv[i];
        if (end == OPTEND_DASHDASH && opts && !(a->flags & (W_DYN | W_GLOB)) && !strcmp(a->s, "--")) {
            opts = false;
            continue;
        }
        if (end == OPTEND_OPERAND && i > first_op)
            opts = false;
        if (!(a->flags & W_GLOB))
            continue;
        if (opts && glob_may_be_option(a))
            return false;
        if (i == vc->script || operands || text)
            return false;
    }
    return true;
}

/* May long option a ("--name" or "--name=value") be the option whose
 * spelling starts with lit (n bytes), as getopt_long and git's option
 * parser read an unambiguous prefix? Used where saying yes is the
 * careful answer (see abbrev in rule_matches_v). */
static bool long_prefix(const char *a, const char *lit, size_t n)
{
    if (a[0] != '-' || a[1] != '-' || !a[2] || n < 3 || lit[0] != '-' || lit[1] != '-')
        return false;
    size_t an = strcspn(a, "=");
    return an <= n && !strncmp(a, lit, an);
}

static bool flag_in(const char *a, const char *flag, bool abbrev, const progspec *ps)
{
    if (flag[0] == '-' && flag[1] == '-') {
        size_t l = strlen(flag);
        if (abbrev && long_prefix(a, flag, l))
            return true;
        return !strncmp(a, flag, l) && (a[l] == 0 || a[l] == '=');
    }
    char letter = flag[0] == '-' ? flag[1] : flag[0];
    if (a[0] != '-' || a[1] == '-' || !a[1])
        return false;
    for (const char *s = a + 1; *s; s++) {
        if (*s == letter)
            return true;
        if (!isalpha((unsigned char)*s) || takes_value(ps, *s))
            return false; /* -n5, -k1,1o: the rest is a value */
    }
    return false;
}

static bool flags_match(const pcmd *c, const strlist *flags, bool abbrev, const progspec *ps)
{
    for (size_t i = 1; i < c->argc; i++) {
        const pword *a = &c->argv[i];
        if (a->flags & W_DYN)
            continue;
        if (!strcmp(a->s, "--"))
            return false;
        for (size_t k = 0; k < flags->n; k++)
            if (flag_in(a->s, flags->v[k], abbrev, ps))
                return true;
    }
    return false;
}

/* Does word a match an entry of l: its glob, or, with abbrev, as a long
 * option abbreviated (--out for --output*, --ext for --ext-diff)? */
static bool arg_in(const strlist *l, const char *a, bool abbrev)
{
    if (glob_any(l, a))
        return true;
    if (!abbrev || a[0] != '-' || a[1] != '-')
        return false;
    for (size_t k = 0; k < l->n; k++)
        if (long_prefix(a, l->v[k], strcspn(l->v[k], "*?[")))
            return true;
    return false;
}

static bool args_match(const pcmd *c, const strlist *l, bool abbrev)
{
    for (size_t i = 1; i < c->argc; i++)
        if (arg_in(l, c->argv[i].s, abbrev))
            return true;
    return false;
}

/* vc: the command's operand view, computed on first use and shared by
 * every rule tried on the same command. */
static bool rule_matches_v(const txbox_policy *p, const rule *r, const pcmd *c, view *vc, bool *have_view,
                           const uint8_t *prog_ok)
{
    if (r->decision == DEC_OFF)
        return false;
    if (r->detector && !(c->det & r->detector))
        return false;
#define VIEW()                   \
    do {                         \
        if (!*have_view) {       \
            make_view(p, c, vc); \
            *have_view = true;   \
        }                        \
    } while (0)
    if (r->program.n) {
        if (prog_ok) {
            if (!prog_ok[r - p->rules])
                return false;
        } else {
            if (!c->argc || (c->argv[0].flags & W_DYN))
                return false;
            if (!glob_any(&r->program, basename_of(c->argv[0].s)))
                return false;
        }
    }
    if (r->decision == DEC_SAFE && !r->allow_dynamic_args) {
        for (size_t i = 0; i < c->argc; i++)
            if ((c->argv[i].flags & W_DYN) && !(c->argv[i].flags & W_SYNTH))
                return false;
    }
    if (r->decision == DEC_SAFE && !r->allow_dynamic_args) {
        if (!*have_view) {
            make_view(p, c, vc);
            *have_view = true;
        }
        if (!globs_knowable(r, c, vc))
            return false;
    }
    if (r->decision == DEC_SAFE && (c->det & D_NEVER_SAFE))
        return false;
    if (r->decision == DEC_SAFE && c->argc && !system_program(p, &c->argv[0]))
        return false;
    /* Long options may be abbreviated (getopt_long, git): the matchers
     * take an abbreviation for the option where that is the careful
     * answer, in the lists that keep a rule from being safe (a safe rule's
     * *_none) and in those that make a rule stricter than safe match (the
     * *_any of uncertain and unsafe rules); elsewhere only the spelling
     * itself counts. */
    bool abbrev_none = r->decision == DEC_SAFE, abbrev_any = r->decision != DEC_SAFE;
    if (r->args_any.n && !args_match(c, &r->args_any, abbrev_any))
        return false;
    if (r->args_none.n && args_match(c, &r->args_none, abbrev_none))
        return false;
    if (r->args_all.n) {
        if (c->argc < 2)
            return false;
        for (size_t i = 1; i < c->argc; i++)
            if (!glob_any(&r->args_all, c->argv[i].s))
                return false;
    }
    if ((r->flags_any.n || r->flags_none.n) && !*have_view) {
        make_view(p, c, vc);
        *have_view = true;
    }
    if (r->flags_any.n && !flags_match(c, &r->flags_any, abbrev_any, vc->ps))
        return false;
    if (r->flags_none.n && flags_match(c, &r->flags_none, abbrev_none, vc->ps))
        return false;
    if (r->via_any.n) {
        bool hit = false;
        for (size_t k = 0; k < r->via_any.n && !hit; k++) {
            const char *s = c->via;
            size_t l = strlen(r->via_any.v[k]);
            while ((s = strstr(s, r->via_any.v[k]))) {
                if ((s == c->via || s[-1] == ' ') && (s[l] == 0 || s[l] == ' ')) {
                    hit = true;
                    break;
                }
                s += l;
            }
        }
        if (!hit)
            return false;
    }
    if (r->secret_args >= 0) {
        /* operands only: `ssh -i ~/.ssh/id_x` and `curl -H "...$TOKEN"` use a
         * secret where it belongs */
        VIEW();
        bool s = false;
        for (size_t i = 0; i < vc->nops && !s; i++)
            s = policy_secret_text(p, c->argv[vc->ops[i]].s);
        if (!s)
            for (size_t i = 1; i < c->argc && !s; i++) /* --data=@file, --post-file=x */
                s = c->argv[i].s[0] == '-' && strchr(c->argv[i].s, '=') &&
                    policy_secret_text(p, strchr(c->argv[i].s, '=') + 1);
        if (s != (r->secret_args == 1))
            return false;
    }
    if (r->secret_input >= 0 && ((c->det & D_SECRET_IN) != 0) != (r->secret_input == 1))
        return false;
    if (r->redirect_class_any) {
        bool hit = false;
        for (size_t i = 0; i < c->nredir && !hit; i++) {
            const predir *d = &c->redir[i];
            if (d->op == RD_OUT || d->op == RD_APPEND || d->op == RD_INOUT)
                hit = (path_class(p, c, &d->target) & r->redirect_class_any) != 0;
        }
        if (!hit)
            return false;
    }
    /* operand matchers */
    size_t first_op = 0;
    if (r->subcommand.n) {
        VIEW();
        bool hit = false;
        for (size_t k = 0; k < r->subcommand.n && !hit; k++) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", r->subcommand.v[k]);
            size_t idx = 0;
            bool ok = true;
            for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok && ok;
                 tok = strtok_r(NULL, " ", &save)) {
                if (idx >= vc->nops || !glob1(tok, c->argv[vc->ops[idx]].s))
                    ok = false;
                idx++;
            }
            if (ok) {
                hit = true;
                first_op = idx;
            }
        }
        if (!hit)
            return false;
    }
    if (r->script_none.n) {
        /* the script of sed/awk: its operand, or the values of its script options */
        VIEW();
        if (vc->script && glob_any(&r->script_none, c->argv[vc->script].s))
            return false;
        for (size_t i = 1; vc->ps && i + 1 < c->argc; i++)
            if (strlist_has(&vc->ps->script_operand_unless, c->argv[i].s) &&
                glob_any(&r->script_none, c->argv[i + 1].s))
                return false;
    }
    if (r->global_args_none.n || r->global_args_any.n) {
        /* the options before the first operand (git -c x log) */
        VIEW();
        size_t end = vc->nops ? vc->ops[0] : c->argc;
        bool any = false;
        for (size_t i = 1; i < end; i++) {
            if (arg_in(&r->global_args_none, c->argv[i].s, abbrev_none))
                return false;
            any |= arg_in(&r->global_args_any, c->argv[i].s, abbrev_any);
        }
        if (r->global_args_any.n && !any)
            return false;
    }
    if (r->operands_any.n || r->operands_none.n || r->operand_class_any || r->last_operand_class ||
        r->max_operands >= 0 || r->min_operands > 0) {
        VIEW();
        size_t nops = vc->nops - first_op;
        if (r->max_operands >= 0 && nops > (size_t)r->max_operands)
            return false;
        if (r->min_operands > 0 && nops < (size_t)r->min_operands)
            return false;
        bool any = false, none_hit = false, cls = false;
        for (size_t i = first_op; i < vc->nops; i++) {
            const pword *a = &c->argv[vc->ops[i]];
            if (r->operands_any.n && glob_any(&r->operands_any, a->s))
                any = true;
            if (r->operands_none.n && glob_any(&r->operands_none, a->s))
                none_hit = true;
            if (r->operand_class_any && (path_class(p, c, a) & r->operand_class_any))
                cls = true;
        }
        if (r->operands_any.n && !any)
            return false;
        if (r->operands_none.n && none_hit)
            return false;
        if (r->operand_class_any && !cls)
            return false;
        if (r->last_operand_class) {
            if (nops < 1)
                return false;
            if (!(path_class(p, c, &c->argv[vc->ops[vc->nops - 1]]) & r->last_operand_class))
                return false;
        }
    }
#undef VIEW
    return true;
}

bool rule_matches(const txbox_policy *p, const rule *r, const pcmd *c)
{
    view vc;
    bool have = false;
    return rule_matches_v(p, r, c, &vc, &have, NULL);
}

/* ---- verdicts ---- */
static void describe(const pcmd *c, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < c->argc && o + 1 < size; i++) {
        int n = snprintf(buf + o, size - o, "%s%s", i ? " " : "", c->argv[i].s);
        if (n < 0)
            break;
        o += (size_t)n;
    }
    if (o >= size)
        o = size - 1;
    for (size_t i = 0; i < o; i++)
        if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
            buf[i] = ' ';
    if (o > 80)
        memcpy(buf + 77, "...", 4);
}

/* Replace control bytes so a reason stays on one line. */
static void one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = ' ';
}

/* Add a rule's domains to the space-separated list buf, each once; what
 * does not fit is left out (the proxy then refuses it: fail closed). */
static void add_domains(char *buf, size_t cap, const strlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        const char *d = l->v[i];
        size_t dl = strlen(d), bl = strlen(buf);
        bool have = false;
        for (const char *at = strstr(buf, d); at && !have; at = strstr(at + 1, d))
            have = (at == buf || at[-1] == ' ') && (at[dl] == 0 || at[dl] == ' ');
        if (have || bl + dl + 2 > cap)
            continue;
        if (bl)
            buf[bl++] = ' ';
        memcpy(buf + bl, d, dl + 1);
    }
}

int classify_cmds(const txbox_policy *p, const pcmds *cmds, txbox_verdict *out, const rule **winner_out)
{
    int worst = -1;
    uint8_t prog_stack[512];
    uint8_t *prog_ok = p->nrules <= sizeof prog_stack ? prog_stack : xmalloc(p->nrules);
    const rule *win = NULL;
    const pcmd *wcmd = NULL;
    bool net = false, forced = false, dflt = false;
    char doms[sizeof out->domains] = "";
    for (size_t i = 0; i < cmds->n; i++) {
        const pcmd *c = &cmds->v[i];
        if ((c->det & D_EMPTY) && !c->nredir && !(c->det & ~(unsigned)D_EMPTY & D_NEVER_SAFE))
            continue;
        const rule *best[3] = {NULL, NULL, NULL}, *fb = NULL;
        view vc;
        bool have_view = false;
        program_matches(p, c, prog_ok);
        for (size_t k = 0; k < p->nrules; k++) {
            const rule *r = &p->rules[k];
            if (r->decision == DEC_OFF)
                continue;
            if (r->fallback) {
                if (!fb && !best[DEC_UNCERTAIN] && !best[DEC_UNSAFE] &&
                    rule_matches_v(p, r, c, &vc, &have_view, prog_ok))
                    fb = r;
                continue;
            }
            if (best[r->decision])
                continue;
            if (r->decision == DEC_SAFE && (best[DEC_UNCERTAIN] || best[DEC_UNSAFE]))
                continue;
            if (rule_matches_v(p, r, c, &vc, &have_view, prog_ok)) {
                best[r->decision] = r;
                if (r->decision == DEC_UNSAFE)
                    break;
            }
        }
        int d;
        const rule *r;
        bool f = false;
        /* unsafe > uncertain > safe > fallback (uncertain) > no rule (uncertain) */
        if (best[DEC_UNSAFE])
            d = DEC_UNSAFE, r = best[DEC_UNSAFE];
        else if (best[DEC_UNCERTAIN])
            d = DEC_UNCERTAIN, r = best[DEC_UNCERTAIN];
        else if (best[DEC_SAFE])
            d = DEC_SAFE, r = best[DEC_SAFE];
        else if (fb)
            d = DEC_UNCERTAIN, r = fb;
        else
            d = DEC_UNCERTAIN, r = NULL;
        if (d == DEC_SAFE && (c->det & D_NEVER_SAFE)) {
            d = DEC_UNCERTAIN;
            f = true;
        }
        /* a command that writes a file too (curl -o f URL, npm install >
         * log) is decided by that, but still needs the network a rule
         * grants it */
        const rule *nr = r && r->network ? r : NULL;
        for (size_t k = 0; !nr && d == DEC_UNCERTAIN && k < p->nrules; k++)
            if (p->rules[k].network && p->rules[k].decision == DEC_UNCERTAIN &&
                rule_matches_v(p, &p->rules[k], c, &vc, &have_view, prog_ok))
                nr = &p->rules[k];
        if (nr && d != DEC_UNSAFE) {
            net = true;
            dflt = dflt || !nr->domains.n;
            add_domains(doms, sizeof doms, &nr->domains);
        }
        if (d > worst) {
            worst = d;
            win = r;
            wcmd = c;
            forced = f;
        }
    }
    if (prog_ok != prog_stack)
        free(prog_ok);
    memset(out, 0, sizeof *out);
    if (worst < 0) {
        /* nothing runs (empty string, comments, plain assignments) */
        out->verdict = TXBOX_VERDICT_SAFE;
        snprintf(out->rule, sizeof out->rule, "nothing-runs");
        snprintf(out->reason, sizeof out->reason, "no command runs");
        if (winner_out)
            *winner_out = NULL;
        return 0;
    }
    out->verdict = (txbox_verdict_kind)worst;
    char what[160];
    describe(wcmd, what, sizeof what);
    const char *via = wcmd->via && *wcmd->via ? wcmd->via : NULL;
    if (forced || !win) {
        snprintf(out->rule, sizeof out->rule, "%s", forced ? "not-understood" : "no-rule");
        snprintf(out->reason, sizeof out->reason, "%s%s%s%s%s",
                 forced ? "part of the command cannot be resolved statically"
                        : "no rule knows this command; it may change state",
                 *what ? ": " : "", what, via ? " (via " : "", via ? via : "");
        if (via)
            strncat(out->reason, ")", sizeof out->reason - strlen(out->reason) - 1);
    } else {
        snprintf(out->rule, sizeof out->rule, "%s", win->id);
        snprintf(out->reason, sizeof out->reason, "%s%s%s%s%s", win->reason, *what ? ": " : "", what,
                 via ? " (via " : "", via ? via : "");
        if (via)
            strncat(out->reason, ")", sizeof out->reason - strlen(out->reason) - 1);
        if (worst == DEC_UNSAFE && win->suggestion)
            snprintf(out->suggestion, sizeof out->suggestion, "%s", win->suggestion);
    }
    one_line(out->reason);
    one_line(out->suggestion);
    out->needs_network = worst != DEC_UNSAFE && net;
    if (out->needs_network) {
        memcpy(out->domains, doms, sizeof doms);
        out->default_domains = dflt;
    }
    if (winner_out)
        *winner_out = forced ? NULL : win;
    return 0;
}

/* ---- public API (loading: load.c) ---- */
#define ARENA_CAP POLICY_ARENA_CAP

typedef struct scratch {
    void *parser;
    arena *ar;
    arena own;
    bool locked, owned;
} scratch;

static void scratch_get(txbox_policy *p, scratch *s)
{
    memset(s, 0, sizeof *s);
    if (pthread_mutex_trylock(&p->lock) == 0) {
        s->locked = true;
        s->parser = p->parser;
        s->ar = &p->ar;
        arena_reset(s->ar);
        return;
    }
    /* another thread is checking: use a private parser */
    s->owned = true;
    s->parser = shell_parser_new();
    arena_init(&s->own, ARENA_CAP);
    s->ar = &s->own;
}

static void scratch_put(txbox_policy *p, scratch *s)
{
    if (s->locked) {
        arena_reset(s->ar);
        pthread_mutex_unlock(&p->lock);
    }
    if (s->owned) {
        shell_parser_free(s->parser);
        arena_free(&s->own);
    }
}

/* One check with the policy's scratch (or a private one): a shell string,
 * or an argv when argv is non-NULL. */
static int run_check(const txbox_policy *cp, const char *cmd, size_t len, char *const *argv,
                     txbox_verdict *out, txbox_error *err)
{
    txbox_policy *p = (txbox_policy *)cp; /* only the scratch area changes */
    scratch s;
    scratch_get(p, &s);
    if (!s.parser) {
        scratch_put(p, &s);
        return tx_err(err, ENOMEM, "txbox_policy_check: cannot create a parser");
    }
    pcmds cmds;
    if (argv)
        shell_walk_argv(p, s.parser, s.ar, argv, &cmds);
    else
        shell_walk(p, s.parser, s.ar, cmd ? cmd : "", len, &cmds);
    int rc = classify_cmds(p, &cmds, out, NULL);
    scratch_put(p, &s);
    if (rc == 0 && p->layer) {
        /* The workspace's layer can only make the verdict worse: the worse
         * of the two is taken, and a network grant only ever comes from
         * the user's policy. */
        txbox_verdict lv;
        if (run_check(p->layer, cmd, len, argv, &lv, err) < 0)
            return -1;
        if (lv.verdict > out->verdict) {
            *out = lv;
            out->needs_network = 0;
        }
    }
    return rc;
}

int txbox_policy_check(const txbox_policy *cp, const char *cmd, size_t len, txbox_verdict *out,
                       txbox_error *err)
{
    if (!cp || !out || (!cmd && len))
        return tx_err(err, EINVAL, "txbox_policy_check: bad arguments");
    return run_check(cp, cmd, len, NULL, out, err);
}

int txbox_policy_check_argv(const txbox_policy *cp, char *const *argv, txbox_verdict *out, txbox_error *err)
{
    if (!cp || !out || !argv)
        return tx_err(err, EINVAL, "txbox_policy_check_argv: bad arguments");
    return run_check(cp, NULL, 0, argv, out, err);
}

/* Development aid (tests/policy/policy-dump): the simple commands found in
 * cmd, one a line, with their detectors and the rule each one gets. */
void policy_dump(const txbox_policy *cp, const char *cmd, size_t len, FILE *f)
{
    txbox_policy *p = (txbox_policy *)cp;
    scratch s;
    scratch_get(p, &s);
    pcmds cmds;
    shell_walk(p, s.parser, s.ar, cmd, len, &cmds);
    for (size_t i = 0; i < cmds.n; i++) {
        const pcmd *c = &cmds.v[i];
        fprintf(f, "  [%zu] depth=%d cwd=%s:%s via='%s' det=", i, c->depth,
                c->cwd_kind == CWD_INSIDE    ? "in"
                : c->cwd_kind == CWD_OUTSIDE ? "out"
                                             : "?",
                c->cwd ? c->cwd : "", c->via);
        for (int k = 0; k < D_COUNT; k++)
            if (c->det & (1u << k))
                fprintf(f, "%s,", detector_names[k]);
        fprintf(f, " argv=");
        for (size_t j = 0; j < c->argc; j++) {
            const pword *w = &c->argv[j];
            unsigned pc = path_class(p, c, w);
            fprintf(f, "<%s>%s%s%s{%x}", w->s, w->flags & W_DYN ? "D" : "", w->flags & W_TILDE ? "~" : "",
                    w->flags & W_FETCH ? "F" : "", pc);
        }
        for (size_t j = 0; j < c->nredir; j++)
            fprintf(f, " redir(op=%d fd=%d <%s>{%x})", c->redir[j].op, c->redir[j].fd, c->redir[j].target.s,
                    path_class(p, c, &c->redir[j].target));
        pcmds one = {.v = (pcmd *)c, .n = 1, .alloc = 1};
        txbox_verdict v;
        classify_cmds(p, &one, &v, NULL);
        fprintf(f, " => %s %s\n", txbox_verdict_name(v.verdict), v.rule);
    }
    scratch_put(p, &s);
}
