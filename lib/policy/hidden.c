/* Secrets as the policy reads them: the paths the sandbox hides (the
 * policy's `hide:` list, which lib/tx/run.c hides from every command) and
 * the text patterns of `secrets:` (names anywhere, variables; an entry
 * starting with '!' is an exception). One list serves both: what a command
 * running in the sandbox cannot read, a command the policy calls safe,
 * which may run on the host (a hook's --trust-safe), does not read either.
 *
 * A `hide:` entry ~/X is hidden under every home the command sees, /X where
 * it is; to the policy either is a secret wherever its components appear
 * in a path (~/.ssh: /root/.ssh/github, @~/.ssh/x, a workspace that is the
 * home). Matching is by components, from an index of the entries' first
 * components: a few comparisons per path, whatever the list's length. */
#include <fnmatch.h>

#include "pol.h"

#define MAX_COMPONENTS 64

static bool has_glob(const char *s) { return strpbrk(s, "*?[") != NULL; }

static int ent_cmp(const void *a, const void *b)
{
    const hidden_ent *x = a, *y = b;
    bool gx = has_glob(x->comp[0]), gy = has_glob(y->comp[0]);
    if (gx != gy)
        return gx ? 1 : -1; /* globs last */
    return strcmp(x->comp[0], y->comp[0]);
}

void hidden_free(hidden_set *h)
{
    for (size_t i = 0; i < h->n; i++)
        free(h->v[i].buf);
    free(h->v);
    memset(h, 0, sizeof *h);
}

void hidden_build(hidden_set *h, const strlist *hide)
{
    hidden_free(h);
    h->v = xcalloc(hide->n ? hide->n : 1, sizeof *h->v);
    for (size_t i = 0; i < hide->n; i++) {
        const char *e = hide->v[i];
        if (e[0] == '~')
            e++;
        hidden_ent *x = &h->v[h->n];
        x->buf = xstrdup(e);
        size_t n = 0;
        for (char *save = NULL, *t = strtok_r(x->buf, "/", &save); t && n < HIDDEN_MAX_DEPTH;
             t = strtok_r(NULL, "/", &save))
            x->comp[n++] = t;
        if (!n) {
            free(x->buf);
            continue;
        }
        x->n = n;
        h->n++;
    }
    qsort(h->v, h->n, sizeof *h->v, ent_cmp);
    h->nlit = 0;
    while (h->nlit < h->n && !has_glob(h->v[h->nlit].comp[0]))
        h->nlit++;
}

static bool comp_eq(const char *pat, const char *s, size_t n)
{
    if (!has_glob(pat))
        return strlen(pat) == n && !memcmp(pat, s, n);
    char buf[256];
    if (n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = 0;
    return fnmatch(pat, buf, FNM_PERIOD) == 0;
}

/* Do the components c[i..] start with entry x's? */
static bool ent_at(const hidden_ent *x, const char *const *c, const size_t *cl, size_t i, size_t nc)
{
    if (x->n > nc - i)
        return false;
    for (size_t k = 0; k < x->n; k++)
        if (!comp_eq(x->comp[k], c[i + k], cl[i + k]))
            return false;
    return true;
}

bool hidden_text(const hidden_set *h, const char *s)
{
    if (!h->n || !s || !*s)
        return false;
    const char *c[MAX_COMPONENTS];
    size_t cl[MAX_COMPONENTS], nc = 0;
    for (const char *p = s; *p && nc < MAX_COMPONENTS;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        size_t l = strcspn(p, "/");
        c[nc] = p;
        cl[nc++] = l;
        p += l;
    }
    for (size_t i = 0; i < nc; i++) {
        /* the literal first components: binary search */
        size_t lo = 0, hi = h->nlit;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            const char *f = h->v[mid].comp[0];
            size_t fl = strlen(f);
            int d = strncmp(f, c[i], fl < cl[i] ? fl : cl[i]);
            if (!d)
                d = fl < cl[i] ? -1 : fl > cl[i];
            if (d < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (size_t k = lo;
             k < h->nlit && strlen(h->v[k].comp[0]) == cl[i] && !memcmp(h->v[k].comp[0], c[i], cl[i]); k++)
            if (ent_at(&h->v[k], c, cl, i, nc))
                return true;
        for (size_t k = h->nlit; k < h->n; k++)
            if (ent_at(&h->v[k], c, cl, i, nc))
                return true;
    }
    return false;
}

bool policy_secret_text(const txbox_policy *p, const char *s)
{
    if (strlist_glob(&p->secrets, s) && !strlist_glob(&p->not_secrets, s))
        return true;
    return hidden_text(&p->hidden, s);
}

/* `secrets:` entries starting with '!' are exceptions: moved to not_secrets. */
static void split_exceptions(txbox_policy *p)
{
    strlist keep = {0};
    for (size_t i = 0; i < p->secrets.n; i++) {
        const char *e = p->secrets.v[i];
        bool borrowed = p->secrets.glob[i] & STRLIST_BORROWED;
        bool neg = e[0] == '!' && e[1];
        strlist *to = neg ? &p->not_secrets : &keep;
        (borrowed ? strlist_add_borrowed : strlist_add)(to, neg ? e + 1 : e);
    }
    strlist_free(&p->secrets);
    p->secrets = keep;
}

/* Is path (absolute, normalized) in a home that is not the caller's, which
 * the sandbox hides whole: /root, /home/NAME, unless it is $HOME's (or
 * holds the workspace, whose secrets are hidden instead)? */
bool in_other_home(const txbox_policy *p, const char *path)
{
    char top[PATH_MAX];
    if (!strncmp(path, "/root", 5) && (path[5] == '/' || !path[5])) {
        strcpy(top, "/root");
    } else if (!strncmp(path, "/home/", 6) && path[6]) {
        size_t l = 6 + strcspn(path + 6, "/");
        if (l >= sizeof top)
            return true;
        memcpy(top, path, l);
        top[l] = 0;
    } else {
        return false;
    }
    const char *mine[] = {p->home, p->home_real, p->workspace, p->ws_alias};
    size_t tl = strlen(top);
    for (size_t i = 0; i < ARRAY_SIZE(mine); i++)
        if (mine[i] && !strncmp(mine[i], top, tl) && (mine[i][tl] == '/' || !mine[i][tl]))
            return false;
    return true;
}

void policy_finish_secrets(txbox_policy *p)
{
    split_exceptions(p);
    hidden_build(&p->hidden, &p->hide);
}
