/* Rules on effects, the policy side: policy rules that judge what a
 * transaction actually wrote (its write set as entries, each added,
 * modified or deleted), not the command text (policy file key `effects:`,
 * parsed in rules.c; docs/policy.md, "Rules on effects"):
 *
 *   paths_any / paths_written / paths_deleted   globs over the entry's path
 *   paths_none    globs: an entry matching one never counts
 *   content_any   regular expressions over the new content of an added or
 *                 modified regular file (the first bytes, as much as the
 *                 walk reads: lib/tx/effects.c); in a modified file only a
 *                 match whose text the old content did not already hold
 *                 counts
 *   max_files_deleted, max_bytes_written, max_binary_added,
 *   max_made_executable   limits over the entries that pass the matchers
 *   losses        kinds of loss (lib/tx/losses.h): the commit's losses of
 *                 those kinds, their paths filtered by paths_any and
 *                 paths_none, count instead of entries
 *
 * A rule without limits is violated by any entry that passes its matchers;
 * with limits, when one is exceeded. A violated rule's action is rollback
 * (nothing applied, outcome rejected, status 122), hold, attention (commits,
 * reported) or ask (held when a person can answer now, else committed and
 * reported).
 *
 * Here: the globs, compiling a rule's patterns (at load for a policy file,
 * lazily for the built-in rules), the judge (entries in, verdict out) and
 * the check of every rule's examples at load. The literal filter:
 * effect_lit.c. Walking a transaction's write set into entries, and
 * holding: lib/tx/effects.c, lib/tx/held.c. */
#include <fnmatch.h>
#include <pthread.h>
#include <string.h>

#include "effect_rules.h"

#define PATHS_CAP 50 /* paths listed per violated rule */

const char *const effect_loss_kinds[EFF_LOSS_KINDS] = {
    [EFF_LOSS_UNCOMMITTED] = "uncommitted", [EFF_LOSS_UNTRACKED] = "untracked",
    [EFF_LOSS_STAGED] = "staged",           [EFF_LOSS_STASH] = "stash",
    [EFF_LOSS_HISTORY] = "history",         [EFF_LOSS_BRANCH] = "branch",
    [EFF_LOSS_REPOSITORY] = "repository",   [EFF_LOSS_DATABASE] = "database",
};

int effect_loss_kind(const char *s)
{
    for (int k = 0; s && k < EFF_LOSS_KINDS; k++)
        if (!strcmp(s, effect_loss_kinds[k]))
            return k;
    return -1;
}

/* ---- globs ---- */

static bool glob_parts(const char *g, const char *p, int fl)
{
    for (;;) {
        const char *ge = strchrnul(g, '/'), *pe = strchrnul(p, '/');
        size_t gl = (size_t)(ge - g);
        if (gl == 2 && g[0] == '*' && g[1] == '*') {
            if (!*ge)
                return true; /* a final ** matches everything below (and nothing) */
            for (const char *q = p;; q = strchrnul(q, '/') + 1) {
                if (glob_parts(ge + 1, q, fl))
                    return true;
                if (!*strchrnul(q, '/'))
                    return false;
            }
        }
        char gc[256], pc[256];
        size_t pl = (size_t)(pe - p);
        if (gl >= sizeof gc || pl >= sizeof pc)
            return false;
        memcpy(gc, g, gl);
        gc[gl] = 0;
        memcpy(pc, p, pl);
        pc[pl] = 0;
        if (fnmatch(gc, pc, fl) != 0)
            return false;
        if (!*pe) {
            /* the path ends: what is left of the glob must be "**" only */
            for (const char *q = ge; *q; q += 3)
                if (strncmp(q, "/**", 3) || (q[3] && q[3] != '/'))
                    return false;
            return true;
        }
        if (!*ge)
            return false;
        g = ge + 1;
        p = pe + 1;
    }
}

/* The longest run of bytes glob requires as they are (outside brackets,
 * escapes and wildcards, within one component): a path without it cannot
 * match, and most paths are told so without fnmatch, which a commit of
 * 10,000 files called half a million times. Under (?i) the run is compared
 * ignoring ASCII case, and holds no letter some locale folds to a
 * non-ASCII character (i, k, s: the Turkish dotted I, the Kelvin sign, the
 * long s; effect_lit.c leaves them to the regex for the same reason) and
 * no non-ASCII byte: fnmatch folds those as the locale says. */
static bool run_byte(const char *q, bool fold)
{
    unsigned char c = (unsigned char)*q;
    if (!c || c == '[' || c == '\\' || c == '*' || c == '?' || c == '/')
        return false;
    return !fold || (c < 0x80 && !strchr("iksIKS", c));
}

static unsigned char lower_ascii(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* The bytes of p (n of them) in ASCII lower case, mod 128, as a set: a
 * run with a byte outside it is missing from p, which one AND tells
 * (most globs of most paths: a commit of 10,000 files called run_missing
 * a million times). */
static void byte_set(const char *p, size_t n, uint64_t m[2])
{
    m[0] = m[1] = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned c = lower_ascii((unsigned char)p[i]) & 127;
        m[c >> 6] |= 1ull << (c & 63);
    }
}

static struct effect_run glob_run(const char *g)
{
    bool fold = !strncmp(g, "(?i)", 4);
    struct effect_run best = {.fold = fold};
    for (const char *q = fold ? g + 4 : g; *q;) {
        if (*q == '[') { /* a bracket expression, to its end (none: to the glob's) */
            q++;
            q += *q == '!' || *q == '^';
            q += *q == ']';
            while (*q && *q != ']')
                q++;
            q += !!*q;
            continue;
        }
        if (!run_byte(q, fold)) {
            q += *q == '\\' && q[1] ? 2 : 1;
            continue;
        }
        const char *r = q;
        while (run_byte(q, fold))
            q++;
        if ((size_t)(q - r) > best.len && q - g <= 65535) {
            best.off = (unsigned short)(r - g);
            best.len = (unsigned short)(q - r);
        }
    }
    byte_set(g + best.off, best.len, best.mask);
    return best;
}

/* Is the run missing from path (n bytes; pm: its byte_set, or NULL)?
 * Paths are short: a plain search (memmem's set-up cost more than its
 * search here). */
static bool run_missing(const char *g, struct effect_run run, const char *path, size_t n, const uint64_t *pm)
{
    if (!run.len)
        return false;
    if (pm && ((run.mask[0] & ~pm[0]) | (run.mask[1] & ~pm[1])))
        return true;
    const char *r = g + run.off;
    if (run.fold) {
        for (size_t at = 0; at + run.len <= n; at++) {
            size_t k = 0;
            while (k < run.len &&
                   lower_ascii((unsigned char)path[at + k]) == lower_ascii((unsigned char)r[k]))
                k++;
            if (k == run.len)
                return false;
        }
        return true;
    }
    for (const char *p = path; (size_t)(path + n - p) >= run.len; p++) {
        p = memchr(p, r[0], (size_t)(path + n - p) - run.len + 1);
        if (!p)
            return true;
        if (!memcmp(p, r, run.len))
            return false;
    }
    return true;
}

/* A leading (?i): the glob matches ignoring case (a name a case-folding
 * filesystem or a case-insensitive host would take for the same). */
static int glob_flags(const char **glob)
{
    if (strncmp(*glob, "(?i)", 4))
        return 0;
    *glob += 4;
    return FNM_CASEFOLD;
}

static bool glob_parts_of(const char *glob, const char *path)
{
    if (!*path)
        path = ".";
    int fl = glob_flags(&glob);
    if (!strchr(glob, '/')) {
        const char *slash = strrchr(path, '/');
        return glob_parts(glob, slash ? slash + 1 : path, fl);
    }
    return glob_parts(glob[0] == '/' ? glob + 1 : glob, path, fl);
}

/* glob anchored at the start of path, whether or not it holds a '/'. */
static bool glob_anchored(const char *glob, const char *path)
{
    int fl = glob_flags(&glob);
    return glob_parts(glob[0] == '/' ? glob + 1 : glob, *path ? path : ".", fl);
}

bool effect_glob(const char *glob, const char *path)
{
    const char *p = *path ? path : ".";
    if (run_missing(glob, glob_run(glob), p, strlen(p), NULL))
        return false;
    return glob_parts_of(glob, path);
}

/* ---- rules ---- */

/* The prefilters of effect_rule.pre: each set of patterns (k = 0 without
 * (?i), 1 with) joined as (p1)|(p2)|...; the union of what they match, so
 * "no match of the set" is exactly "no match of any of its patterns". Not
 * for a set with a back-reference (joining renumbers the groups). */
static void compile_prefilters(effect_rule *r)
{
    for (int k = 0; k < 2; k++) {
        dbuf b;
        dbuf_init(&b, 0);
        size_t n = 0;
        bool backref = false;
        for (size_t i = 0; i < r->content_any.n; i++) {
            const char *pat = r->content_any.v[i];
            bool icase = !strncmp(pat, "(?i)", 4);
            if (icase != (k == 1))
                continue;
            if (icase)
                pat += 4;
            for (const char *c = pat; *c; c++)
                if (*c == '\\' && c[1]) {
                    backref = backref || (c[1] >= '1' && c[1] <= '9');
                    c++;
                }
            r->multiline = r->multiline || strchr(pat, '\n');
            dbuf_addstr(&b, n++ ? "|(" : "(");
            dbuf_addstr(&b, pat);
            dbuf_addstr(&b, ")");
        }
        r->pre_needed[k] = n > 0;
        r->has_pre[k] = n > 1 && !backref &&
                        regcomp(&r->pre[k], dbuf_str(&b),
                                REG_EXTENDED | REG_NEWLINE | REG_NOSUB | (k ? REG_ICASE : 0)) == 0;
        dbuf_free(&b);
    }
}

/* r->re: every content_any pattern compiled (published with release
 * order: entry_passes reads it without the lock). */
static int compile_patterns(effect_rule *r, char *msg, size_t msglen)
{
    regex_t *re = xcalloc(r->content_any.n, sizeof *re);
    for (size_t i = 0; i < r->content_any.n; i++) {
        /* a leading (?i): case-insensitive (POSIX has no inline flags) */
        const char *pat = r->content_any.v[i];
        bool icase = !strncmp(pat, "(?i)", 4);
        int e = regcomp(&re[i], icase ? pat + 4 : pat, REG_EXTENDED | REG_NEWLINE | (icase ? REG_ICASE : 0));
        if (e) {
            char why[200];
            regerror(e, &re[i], why, sizeof why);
            snprintf(msg, msglen, "content_any '%s': %s", r->content_any.v[i], why);
            for (size_t k = 0; k < i; k++)
                regfree(&re[k]);
            free(re);
            return -1;
        }
    }
    __atomic_store_n(&r->re, re, __ATOMIC_RELEASE);
    return 0;
}

int effect_rule_compile(effect_rule *r, char *msg, size_t msglen)
{
    if (!r->content_any.n)
        return 0;
    if (compile_patterns(r, msg, msglen) < 0)
        return -1;
    compile_prefilters(r);
    r->pre_done = true;
    effect_lit_build(r);
    return 0;
}

void effect_rule_free(effect_rule *r)
{
    if (!r->borrowed) {
        free(r->id);
        free(r->reason);
        free(r->suggestion);
        free(r->file);
        for (size_t i = 0; i < r->nex; i++) {
            free(r->ex[i].content);
            free(r->ex[i].deleted_in);
        }
    }
    strlist_free(&r->paths_any);
    strlist_free(&r->paths_written);
    strlist_free(&r->paths_deleted);
    strlist_free(&r->paths_none);
    strlist_free(&r->home_written);
    strlist_free(&r->keys);
    if (r->re)
        for (size_t i = 0; i < r->content_any.n; i++)
            regfree(&r->re[i]);
    for (int k = 0; k < 2; k++)
        if (r->has_pre[k])
            regfree(&r->pre[k]);
    free(r->re);
    for (size_t i = 0; i < r->lit_n; i++)
        free(r->lit[i]);
    free(r->lit);
    free(r->lit_icase);
    free(r->lit_pairs);
    for (int k = 0; k < 4; k++)
        free(r->runs[k]);
    strlist_free(&r->content_any);
    for (size_t i = 0; i < r->nex; i++) {
        strlist_free(&r->ex[i].written);
        strlist_free(&r->ex[i].deleted);
    }
    free(r->ex);
    memset(r, 0, sizeof *r);
}

/* ---- the judge: entries in, verdict out ---- */

/* Where r's patterns are searched in e's new content: the window, unless a
 * pattern may span lines (it could join a changed line to a shared one). */
static void search_range(const effect_rule *r, const struct effect_entry *e, size_t *from, size_t *to)
{
    bool w = e->windowed && !r->multiline;
    *from = w ? e->from : 0;
    *to = w ? e->to : e->len;
}

/* Does path (n bytes; pm: its byte_set) match a glob of l (runs: their
 * runs, or NULL)? */
static bool any_glob(const strlist *l, const struct effect_run *runs, const char *path, size_t n,
                     const uint64_t *pm)
{
    const char *p = *path ? path : ".";
    size_t pn = *path ? n : 1;
    for (size_t i = 0; i < l->n; i++)
        if (!run_missing(l->v[i], runs ? runs[i] : glob_run(l->v[i]), p, pn, *path ? pm : NULL) &&
            glob_parts_of(l->v[i], path))
            return true;
    return false;
}

static bool has_limits(const effect_rule *r)
{
    return r->max_files_deleted >= 0 || r->max_bytes_written >= 0 || r->max_binary_added >= 0 ||
           r->max_made_executable >= 0;
}

/* Is there a match of re in the new content whose text the old one lacks? */
static bool content_new_match(const effect_rule *r, const regex_t *re, const struct effect_entry *e)
{
    size_t at, end;
    search_range(r, e, &at, &end);
    while (at <= end) {
        regmatch_t m = {.rm_so = (regoff_t)at, .rm_eo = (regoff_t)end};
        if (regexec(re, e->data, 1, &m, REG_STARTEND) != 0)
            return false;
        size_t so = (size_t)m.rm_so, eo = (size_t)m.rm_eo;
        if (!e->old || eo == so || !memmem(e->old, e->oldlen, e->data + so, eo - so))
            return true;
        at = eo > at ? eo : at + 1;
    }
    return false;
}

/* Serialises the built-in rules' compilation at first use (effects_compile,
 * lazy_patterns): a policy may be shared by threads. */
static pthread_mutex_t compile_lock = PTHREAD_MUTEX_INITIALIZER;

static int lazy_patterns(effect_rule *r)
{
    char msg[300];
    int rc = 0;
    pthread_mutex_lock(&compile_lock);
    if (!r->re)
        rc = compile_patterns(r, msg, sizeof msg);
    pthread_mutex_unlock(&compile_lock);
    return rc;
}

/* The regex prefilters of a rule, at the first entry its literal filter
 * lets through. */
static void lazy_prefilters(effect_rule *r)
{
    pthread_mutex_lock(&compile_lock);
    if (!r->pre_done) {
        compile_prefilters(r);
        __atomic_store_n(&r->pre_done, true, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&compile_lock);
}

/* False only when no content_any pattern can match e's new content. */
static bool prefilter_may_match(const effect_rule *r, const struct effect_entry *e)
{
    size_t from, to;
    search_range(r, e, &from, &to);
    if (!effect_lit_may_match(r, e->data + from, to - from))
        return false;
    if (!__atomic_load_n(&r->pre_done, __ATOMIC_ACQUIRE))
        lazy_prefilters((effect_rule *)r);
    for (int k = 0; k < 2; k++) {
        if (!r->pre_needed[k])
            continue;
        if (!r->has_pre[k])
            return true;
        regmatch_t m = {.rm_so = (regoff_t)from, .rm_eo = (regoff_t)to};
        if (regexec(&r->pre[k], e->data, 1, &m, REG_STARTEND) == 0)
            return true;
    }
    return false;
}

/* e's path seen from the home directory (j's places), or NULL when it
 * does not lie in it; buf holds it when it must be made. */
static const char *home_path(const struct effect_judge *j, const struct effect_entry *e, char *buf, size_t n)
{
    const char *p = e->path;
    if (j->home_in_ws) {
        size_t l = strlen(j->home_in_ws);
        if (!l)
            return p;
        if (strncmp(p, j->home_in_ws, l) || (p[l] && p[l] != '/'))
            return NULL;
        return p[l] ? p + l + 1 : "";
    }
    if (j->ws_in_home) {
        int w = snprintf(buf, n, "%s%s%s", j->ws_in_home, *p ? "/" : "", p);
        return w >= 0 && (size_t)w < n ? buf : NULL;
    }
    return NULL;
}

static bool any_anchored(const strlist *l, const char *path)
{
    for (size_t i = 0; i < l->n; i++)
        if (glob_anchored(l->v[i], path))
            return true;
    return false;
}

/* Does e count for r? why: what a reader found (set when it counts). */
static bool entry_passes(const struct effect_judge *j, const effect_rule *r, const struct effect_entry *e,
                         size_t n, const uint64_t pm[2], char *why, size_t whylen)
{
    *why = 0;
    if (r->files_only && e->dir)
        return false;
    if (r->paths_any.n && !any_glob(&r->paths_any, r->runs[0], e->path, n, pm))
        return false;
    if (r->paths_written.n &&
        (e->kind == EFF_DELETED || !any_glob(&r->paths_written, r->runs[1], e->path, n, pm)))
        return false;
    if (r->paths_deleted.n &&
        (e->kind != EFF_DELETED || !any_glob(&r->paths_deleted, r->runs[2], e->path, n, pm)))
        return false;
    if (r->paths_none.n && any_glob(&r->paths_none, r->runs[3], e->path, n, pm))
        return false;
    if (r->home_written.n) {
        char buf[4096];
        const char *hp = e->kind == EFF_DELETED ? NULL : home_path(j, e, buf, sizeof buf);
        if (!hp || !any_anchored(&r->home_written, hp))
            return false;
    }
    if (r->content_any.n) {
        if (e->kind == EFF_DELETED || !e->data)
            return false;
        if (!prefilter_may_match(r, e))
            return false;
        /* a built-in rule's patterns, at the first entry its prefilter
         * lets through; one that cannot be compiled counts the entry:
         * fail closed (test_policy loads the built-in text as a policy
         * file, which compiles and checks every pattern) */
        if (!__atomic_load_n(&r->re, __ATOMIC_ACQUIRE) && lazy_patterns((effect_rule *)r) < 0)
            return true;
        bool m = false;
        for (size_t i = 0; i < r->content_any.n && !m; i++)
            m = content_new_match(r, &r->re[i], e);
        if (!m)
            return false;
    }
    if (r->runner_scripts) {
        bool named = false;
        for (size_t i = 0; j->scripts && i < j->scripts->n && !named; i++)
            named = !strcmp(j->scripts->v[i], e->path);
        if (!named || e->kind == EFF_DELETED)
            return false;
        snprintf(why, whylen, "a hook runner, a task or an agent CLI of the workspace runs it");
    }
    if (r->reader && !effect_read_judge(r->reader, &r->keys, e, j->ws_path, why, whylen))
        return false;
    return true;
}

void effect_judge_feed(struct effect_judge *j, const struct effect_entry *e)
{
    size_t n = strlen(e->path);
    uint64_t pm[2];
    byte_set(e->path, n, pm);
    for (size_t i = 0; i < j->p->neffects; i++) {
        const effect_rule *r = &j->p->effects[i];
        struct effect_acc *a = &j->acc[i];
        char why[300];
        if (r->action == EFF_OFF || r->git || r->losses || (e->alias && has_limits(r)) ||
            !entry_passes(j, r, e, n, pm, why, sizeof why))
            continue;
        if (*why && !a->detail)
            a->detail = xasprintf("%s: %s", *e->path ? e->path : ".", why);
        bool counts = !has_limits(r);
        if (e->kind == EFF_DELETED && !e->dir && r->max_files_deleted >= 0) {
            a->deleted++;
            counts = true;
        }
        if (e->kind != EFF_DELETED && e->reg && r->max_bytes_written >= 0 && e->bytes) {
            a->bytes += (int64_t)e->bytes;
            counts = true;
        }
        if (e->binary && r->max_binary_added >= 0) {
            a->binary++;
            counts = true;
        }
        if (e->made_exec && r->max_made_executable >= 0) {
            a->exec++;
            counts = true;
        }
        if (!has_limits(r))
            a->hit = true;
        if (counts && a->npaths++ < PATHS_CAP) {
            _cleanup_free_ char *p =
                e->dir && *e->path ? xasprintf("%s/", e->path) : xstrdup(*e->path ? e->path : ".");
            json_array_append_new(a->paths, json_string(p));
        }
    }
}

void effect_judge_loss(struct effect_judge *j, const struct effect_loss *l)
{
    if (l->kind < 0 || l->kind >= EFF_LOSS_KINDS)
        return;
    size_t n = strlen(l->path);
    uint64_t pm[2];
    byte_set(l->path, n, pm);
    for (size_t i = 0; i < j->p->neffects; i++) {
        const effect_rule *r = &j->p->effects[i];
        struct effect_acc *a = &j->acc[i];
        if (r->action == EFF_OFF || !(r->losses & (1u << l->kind)))
            continue;
        if (l->own && r->losses_grace > 0 && l->age_s < (double)r->losses_grace)
            continue; /* the agent's own recent work: reported, not counted */
        if (r->paths_any.n && !any_glob(&r->paths_any, r->runs[0], l->path, n, pm))
            continue;
        if (r->paths_none.n && any_glob(&r->paths_none, r->runs[3], l->path, n, pm))
            continue;
        a->hit = true;
        a->lost_kinds |= 1u << l->kind;
        a->lost_of[l->kind]++;
        a->lost_n++;
        a->lost_bytes += l->bytes;
        if (a->npaths++ < PATHS_CAP)
            json_array_append_new(a->paths, json_string(*l->path ? l->path : "."));
    }
}

bool effects_want_losses(const txbox_policy *p)
{
    for (size_t i = 0; p && i < p->neffects; i++)
        if (p->effects[i].losses && p->effects[i].action != EFF_OFF)
            return true;
    return false;
}

/* What a losses rule counted: "uncommitted 2, stash 1 (4.2 KiB)". */
static void losses_why(const struct effect_acc *a, char *why, size_t n)
{
    size_t w = 0;
    why[0] = 0;
    for (int i = 0; i < EFF_LOSS_KINDS && w < n; i++)
        if (a->lost_of[i]) {
            int k = snprintf(why + w, n - w, "%s%s %u", w ? ", " : "", effect_loss_kinds[i], a->lost_of[i]);
            w += k > 0 ? (size_t)k : 0;
        }
    if (w < n) {
        double b = (double)a->lost_bytes;
        const char *u = b >= 1 << 30 ? "GiB" : b >= 1 << 20 ? "MiB" : b >= 1 << 10 ? "KiB" : "bytes";
        double d = b >= 1 << 30   ? b / (1 << 30)
                   : b >= 1 << 20 ? b / (1 << 20)
                   : b >= 1 << 10 ? b / (1 << 10)
                                  : b;
        snprintf(why + w, n - w, " (%.*f %s)", u[0] == 'b' ? 0 : 1, d, u);
    }
}

static bool violated(const effect_rule *r, const struct effect_acc *a, char *why, size_t n)
{
    *why = 0;
    if (r->action == EFF_OFF)
        return false;
    if (r->losses) {
        if (a->hit)
            losses_why(a, why, n);
        return a->hit;
    }
    if (r->git || r->reader || r->runner_scripts) {
        snprintf(why, n, "%s", a->detail ? a->detail : "");
        return a->hit;
    }
    if (!has_limits(r))
        return a->hit;
    if (r->max_files_deleted >= 0 && a->deleted > r->max_files_deleted)
        snprintf(why, n, "%lld files deleted (limit %lld)", (long long)a->deleted,
                 (long long)r->max_files_deleted);
    else if (r->max_bytes_written >= 0 && a->bytes > r->max_bytes_written)
        snprintf(why, n, "%lld bytes written (limit %lld)", (long long)a->bytes,
                 (long long)r->max_bytes_written);
    else if (r->max_binary_added >= 0 && a->binary > r->max_binary_added)
        snprintf(why, n, "%lld binary files added (limit %lld)", (long long)a->binary,
                 (long long)r->max_binary_added);
    else if (r->max_made_executable >= 0 && a->exec > r->max_made_executable)
        snprintf(why, n, "%lld files made executable (limit %lld)", (long long)a->exec,
                 (long long)r->max_made_executable);
    return *why != 0;
}

void effect_judge_init(struct effect_judge *j, const txbox_policy *p)
{
    j->p = p;
    j->attention = NULL;
    j->acc = xcalloc(p->neffects + 1, sizeof *j->acc);
    j->need_content = false;
    j->ws_path = NULL;
    j->home_in_ws = j->ws_in_home = NULL;
    j->scripts = NULL;
    for (size_t i = 0; i < p->neffects; i++) {
        j->acc[i].paths = json_array();
        const effect_rule *r = &p->effects[i];
        if (r->action != EFF_OFF && (r->content_any.n || r->max_binary_added >= 0 || r->reader))
            j->need_content = true;
    }
}

/* rel: b's path below a ("" when they are the same), or NULL. */
static char *below(const char *a, const char *b)
{
    size_t l = strlen(a);
    while (l > 1 && a[l - 1] == '/')
        l--;
    if (l == 1 && a[0] == '/')
        return xstrdup(b + 1);
    if (strncmp(a, b, l) || (b[l] && b[l] != '/'))
        return NULL;
    return xstrdup(b[l] ? b + l + 1 : "");
}

void effect_judge_places(struct effect_judge *j, const char *ws, const char *home)
{
    j->ws_path = ws;
    free(j->home_in_ws);
    free(j->ws_in_home);
    j->home_in_ws = j->ws_in_home = NULL;
    if (!ws || !home || *ws != '/' || *home != '/')
        return;
    j->home_in_ws = below(ws, home);
    if (!j->home_in_ws)
        j->ws_in_home = below(home, ws);
}

static const char *action_name(int a)
{
    return a == EFF_ROLLBACK ? "rollback" : a == EFF_HOLD ? "hold" : "ask";
}

/* Which action decides when several rules are violated: the strongest. */
static int action_rank(int a) { return a == EFF_ROLLBACK ? 3 : a == EFF_HOLD ? 2 : 1; }

/* The verdict (NULL: no rule violated); frees the accumulators. */
json_t *effect_judge_end(struct effect_judge *j)
{
    json_t *all = json_array();
    const effect_rule *decide = NULL;
    json_t *dpaths = NULL;
    char dwhy[700] = "";
    for (size_t i = 0; i < j->p->neffects; i++) {
        const effect_rule *r = &j->p->effects[i];
        char why[700];
        if (r->action == EFF_ATTENTION && violated(r, &j->acc[i], why, sizeof why)) {
            if (!j->attention)
                j->attention = json_array();
            _cleanup_free_ char *reason = *why ? xasprintf("%s: %s", r->reason, why) : xstrdup(r->reason);
            json_array_append_new(j->attention, json_pack("{s:s,s:s,s:O}", "effect_rule", r->id, "reason",
                                                          reason, "paths", j->acc[i].paths));
            continue;
        }
        if (violated(r, &j->acc[i], why, sizeof why)) {
            json_t *v = json_pack("{s:s,s:s,s:O}", "effect_rule", r->id, "action", action_name(r->action),
                                  "paths", j->acc[i].paths);
            if (*why)
                json_object_set_new(v,
                                    r->git || r->losses || r->reader || r->runner_scripts ? "found" : "limit",
                                    json_string(why));
            json_array_append_new(all, v);
            if (!decide || action_rank(r->action) > action_rank(decide->action)) {
                decide = r;
                dpaths = j->acc[i].paths;
                snprintf(dwhy, sizeof dwhy, "%s", why);
            }
        }
    }
    json_t *out = NULL;
    if (decide) {
        _cleanup_free_ char *reason =
            *dwhy ? xasprintf("%s: %s", decide->reason, dwhy) : xstrdup(decide->reason);
        out = json_pack("{s:s,s:s,s:s,s:s?,s:O,s:o}", "effect_rule", decide->id, "action",
                        action_name(decide->action), "reason", reason, "suggestion", decide->suggestion,
                        "paths", dpaths, "violations", all);
    } else {
        json_decref(all);
    }
    for (size_t i = 0; i < j->p->neffects; i++) {
        json_decref(j->acc[i].paths);
        free(j->acc[i].detail);
    }
    free(j->acc);
    j->acc = NULL;
    free(j->home_in_ws);
    free(j->ws_in_home);
    j->home_in_ws = j->ws_in_home = NULL;
    return out;
}

void effect_judge_end_free(struct effect_judge *j)
{
    json_decref(effect_judge_end(j));
    json_decref(j->attention);
}

/* ---- examples (checked at load) ---- */

static bool example_hits(const txbox_policy *p, size_t ri, const effect_example *x)
{
    /* a judge over this one rule */
    txbox_policy one = {.effects = &p->effects[ri], .neffects = 1};
    struct effect_judge j;
    effect_judge_init(&j, &one);
    /* an example's paths are judged as if the workspace were the home
     * directory (home_written), in a workspace at /nonexistent */
    effect_judge_places(&j, "/nonexistent/ws", "/nonexistent/ws");
    const char *content = x->content ? x->content : "";
    size_t clen = strlen(content);
    static const char *const deflt[] = {"example"};
    size_t nw = x->written.n;
    bool any_file = x->content || x->bytes >= 0 || x->binary || x->executable;
    for (size_t i = 0; i < (nw ? nw : any_file ? 1 : 0); i++) {
        struct effect_entry e = {.path = nw ? x->written.v[i] : deflt[0],
                                 .kind = EFF_ADDED,
                                 .reg = true,
                                 .bytes = x->bytes >= 0 ? (uint64_t)x->bytes : clen,
                                 .binary = x->binary,
                                 .made_exec = x->executable,
                                 .data = content,
                                 .len = clen};
        effect_judge_feed(&j, &e);
    }
    for (size_t i = 0; i < x->deleted.n; i++) {
        struct effect_entry e = {.path = x->deleted.v[i], .kind = EFF_DELETED};
        effect_judge_feed(&j, &e);
    }
    for (int64_t i = 0; i < x->ndeleted; i++) {
        _cleanup_free_ char *dp =
            xasprintf("%s/%lld", x->deleted_in ? x->deleted_in : "deleted", (long long)i);
        struct effect_entry e = {.path = dp, .kind = EFF_DELETED};
        effect_judge_feed(&j, &e);
    }
    for (int k = 0; k < EFF_LOSS_KINDS; k++) {
        const char *lp = nw ? x->written.v[0] : x->deleted.n ? x->deleted.v[0] : "example";
        struct effect_loss l = {.kind = k, .path = lp, .bytes = 1, .age_s = 60};
        if (x->lost & (1u << k))
            effect_judge_loss(&j, &l);
        l.own = true;
        if (x->own_lost & (1u << k))
            effect_judge_loss(&j, &l);
    }
    json_t *v = effect_judge_end(&j);
    bool hit = v != NULL || j.attention != NULL;
    json_decref(v);
    json_decref(j.attention);
    return hit;
}

/* The literal filters of the rules that came from the built-in document,
 * built at their first use; their regex prefilters only when the literal
 * filter lets an entry through (prefilter_may_match), and their patterns
 * one by one only when a prefilter does (entry_passes): glibc compiles the
 * secret rule's counted repetitions ({36}, {48}) slowly, 1.1-1.4 ms at
 * every commit when all were compiled here, and its prefilter alone 0.5
 * ms. A policy file's are compiled, and checked, when it loads. */
void effects_compile(const txbox_policy *p)
{
    pthread_mutex_lock(&compile_lock);
    for (size_t i = 0; i < p->neffects; i++) {
        effect_rule *r = (effect_rule *)&p->effects[i];
        if (r->content_any.n && !r->lit_done)
            effect_lit_build(r);
        const strlist *lists[4] = {&r->paths_any, &r->paths_written, &r->paths_deleted, &r->paths_none};
        for (int k = 0; k < 4; k++) {
            if (r->runs[k] || !lists[k]->n)
                continue;
            struct effect_run *v = xcalloc(lists[k]->n, sizeof *v);
            for (size_t g = 0; g < lists[k]->n; g++)
                v[g] = glob_run(lists[k]->v[g]);
            __atomic_store_n(&r->runs[k], v, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&compile_lock);
}

int effects_check_examples(const txbox_policy *p, txbox_error *err)
{
    effects_compile(p);
    for (size_t i = 0; i < p->neffects; i++) {
        const effect_rule *r = &p->effects[i];
        if (r->action == EFF_OFF || r->git || r->runner_scripts)
            continue; /* judged by git, or by the workspace's runners: tests/integration/gitcfg.bats, guard.bats */
        for (size_t k = 0; k < r->nex; k++) {
            const effect_example *x = &r->ex[k];
            if (example_hits(p, i, x) != x->must_match)
                return tx_err(err, EINVAL, "policy %s:%d: effect rule %s: example %s", r->file, x->line,
                              r->id, x->must_match ? "must match but does not" : "must not match but does");
        }
    }
    return 0;
}
